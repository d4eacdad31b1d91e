"""The model-backed memory extractor: prompt, strict parsing, provenance, and the offline fallback."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from lossless.config import load_config
from lossless.engine.wiring import extractor_for
from lossless.errors import ConfigError, ProviderError
from lossless.memory.hashing import HashEmbedder
from lossless.memory.llm_extraction import SYSTEM_PROMPT, parse_memories, render_segment
from lossless.memory.scopes import MemoryCaller
from lossless.memory.service import MemoryService
from lossless.ports import PreparedMessage, Store
from lossless.records import Message, MessageRecord, utcnow
from lossless.stores import memory_store_for
from lossless.testing import StubProviderServer, StubReply

pytestmark = pytest.mark.anyio


def _records() -> list[MessageRecord]:
    now = utcnow()
    turns = [("user", "Ich trinke morgens nur grünen Tee."), ("assistant", "Notiert."), ("user", "Danke!")]
    return [
        MessageRecord(id=10 + i, conversation_id=3, seq=i, role=r, content=c, parts=(), token_count=3, created_at=now)
        for i, (r, c) in enumerate(turns)
    ]


def _stub_service(store: Store, stub: StubProviderServer) -> MemoryService:
    """A memory service whose extractor is an OpenAI-compatible model served by ``stub``."""
    config = load_config(
        {
            "memory_extractor": "openai",
            "memory_extraction_model": "stub-model",
            "summary_base_url": stub.openai_base_url,
            "summary_api_key": "sk-x",
        }
    )
    return MemoryService(
        memory_store_for(store), HashEmbedder(), MemoryCaller.agent("main"), extractor=extractor_for(config)
    )


def test_prompt_states_the_requirements() -> None:
    for phrase in ("At most 5", "profile", "patterns", "abstract", "overview", "content", "language", "Never extract"):
        assert phrase in SYSTEM_PROMPT
    segment = render_segment(_records())
    assert '<message id="10" role="user" date="' in segment and segment.count("<message") == 3
    assert render_segment(_records(), max_chars=60).count("<message") == 1  # the newest that fits


def test_parse_is_strict_about_shape_and_provenance() -> None:
    records = _records()
    answer = {
        "memories": [
            {
                "category": "preferences",
                "abstract": "Grüner Tee",
                "overview": "x",
                "content": "Trinkt morgens grünen Tee.",
                "sources": [10, 999],
            },
            {"category": "facts", "content": "unknown category"},
            {"category": "events", "content": ""},
            {"category": "profile", "content": "Spricht Deutsch."},
        ]
    }
    drafts = parse_memories("```json\n" + json.dumps(answer) + "\n```", 3, records)
    assert [d.category for d in drafts] == ["preferences", "profile"]
    assert drafts[0].source_message_ids == (10,) and drafts[0].abstract == "Grüner Tee"
    assert drafts[1].source_message_ids == (10, 12)  # cited nothing: the segment's user messages
    many = {"memories": [{"category": "events", "content": f"Event {i}."} for i in range(9)]}
    assert len(parse_memories(json.dumps(many), 3, records)) == 5
    for bad in ("not json", '{"memory": []}', "[1, 2]"):
        with pytest.raises(ProviderError):
            parse_memories(bad, 3, records)


async def test_remember_through_an_openai_compatible_model(store: Store) -> None:
    conversation = await store.get_or_create_conversation(agent_id="main", session_id="c")
    await store.append_messages(
        conversation.id,
        [PreparedMessage(Message(role="user", content="We moved the standup to 10:00 on Mondays."), 9, utcnow())],
    )
    messages = await store.get_messages(conversation.id)
    answer = {
        "memories": [
            {
                "category": "events",
                "abstract": "Standup moved",
                "overview": "Standup at 10:00.",
                "content": "The team moved the Monday standup to 10:00.",
                "sources": [messages[0].id],
            }
        ]
    }
    with StubProviderServer(StubReply.answer(json.dumps(answer)), StubReply.answer("sorry, no JSON")) as stub:
        service = _stub_service(store, stub)
        first = await service.remember(conversation.id, messages)
        ((draft, decision, touched),) = first.decisions
        assert draft.abstract == "Standup moved" and decision.kind == "create"
        (memory,) = await service.store.get([touched or ""])
        assert memory.source_message_ids == (messages[0].id,) and memory.overview == "Standup at 10:00."
        request = stub.requests[0]
        assert "At most 5" in request.system and f'id="{messages[0].id}"' in request.user
        fallback = await service.remember(conversation.id, messages)  # the model answers garbage
        assert [d.kind for _, d, _ in fallback.decisions] == ["create"]  # offline rules took over
    assert extractor_for(load_config({})) is None
    with pytest.raises(ConfigError, match="memory_extraction_model"):
        extractor_for(load_config({"memory_extractor": "openai"}))


def test_a_chatty_or_cut_off_answer_keeps_its_whole_items() -> None:
    records = _records()
    item = {"category": "preferences", "content": "The user drinks only green tea in the morning.", "sources": [10]}
    chatty = "Here are the memories:\n" + json.dumps({"memories": [item]}) + "\nLet me know if you need more."
    assert [d.content for d in parse_memories(chatty, 3, records)] == [item["content"]]
    second = {"category": "events", "content": "The user booked a flight to Oslo on 7 May 2023.", "sources": [12]}
    cut = json.dumps({"memories": [item, second]})[:-30]  # the answer stopped inside the second item
    assert [d.content for d in parse_memories(cut, 3, records)] == [item["content"]]
    heading = {"category": "cases", "content": "## Root cause:", "sources": [10]}
    assert parse_memories(json.dumps({"memories": [heading]}), 3, records) == []
    with pytest.raises(ProviderError):
        parse_memories('{"memories": [{"category": "profile", "con', 3, records)  # nothing whole in it


async def test_a_partial_model_answer_through_the_stub_server(store: Store) -> None:
    conversation = await store.get_or_create_conversation(agent_id="main", session_id="p")
    await store.append_messages(
        conversation.id,
        [PreparedMessage(Message(role="user", content="I moved to Lisbon last week. I hate mornings."), 9, utcnow())],
    )
    messages = await store.get_messages(conversation.id)
    whole = {"category": "profile", "content": "The user lives in Lisbon.", "sources": [messages[0].id]}
    partial = '```json\n{"memories": [' + json.dumps(whole) + ', {"category": "preferences", "content": "The us'
    with StubProviderServer(StubReply.answer(partial)) as stub:
        service = _stub_service(store, stub)
        done = await service.remember(conversation.id, messages)
        assert [d.content for d, _, _ in done.decisions] == ["The user lives in Lisbon."]
        assert 'date="' in stub.requests[0].user and "relative times" in stub.requests[0].system


async def test_extraction_and_dedup_through_an_anthropic_model(store: Store) -> None:
    """memory_extractor = anthropic: the messages API via the official SDK; dedup follows it (auto)."""
    from lossless.engine.wiring import dedup_judge_for
    from lossless.memory.llm_dedup import LlmJudge

    conversation = await store.get_or_create_conversation(agent_id="main", session_id="a")
    await store.append_messages(
        conversation.id,
        [PreparedMessage(Message(role="user", content="Maya: I got back from Porto yesterday."), 9, utcnow())],
    )
    messages = await store.get_messages(conversation.id)
    item = {"category": "events", "content": "Maya got back from Porto on 7 May 2023.", "sources": [messages[0].id]}
    with StubProviderServer(StubReply.answer("Here you go: " + json.dumps({"memories": [item]}))) as stub:
        config = load_config(
            {
                "memory_extractor": "anthropic",
                "memory_extraction_model": "claude-stub",
                "summary_base_url": stub.anthropic_base_url,
                "summary_api_key": "sk-ant-x",
            }
        )
        assert isinstance(dedup_judge_for(config), LlmJudge)
        service = MemoryService(
            memory_store_for(store), HashEmbedder(), MemoryCaller.agent("main"), extractor=extractor_for(config)
        )
        done = await service.remember(conversation.id, messages)
        assert [d.content for d, _, _ in done.decisions] == [item["content"]]
        request = stub.requests[0]
        assert request.model == "claude-stub" and "relative times" in request.system
        assert request.path.endswith("/messages")


def test_a_change_of_mind_is_flagged_for_the_memory_service() -> None:
    records = _records()
    answer = {
        "memories": [
            {"category": "preferences", "content": "Trinkt jetzt Kaffee, keinen Tee mehr.", "revises": True},
            {"category": "profile", "content": "Spricht Deutsch.", "revises": "yes"},  # only true counts
        ]
    }
    changed, plain = parse_memories(json.dumps(answer), 3, records)
    assert changed.metadata == {"revises": True} and plain.metadata is None
    assert '"revises": true' in SYSTEM_PROMPT


async def test_a_model_memory_that_revises_takes_back_the_earlier_one(store: Store) -> None:
    conversation = await store.get_or_create_conversation(agent_id="main", session_id="c")
    now = utcnow()
    said = [
        ("Maya: I'm going vegetarian from this month.", now - timedelta(days=30)),
        ("Maya: Okay I caved, I'm eating meat again.", now),
    ]
    await store.append_messages(conversation.id, [PreparedMessage(Message("user", t), 9, at) for t, at in said])
    first, second = await store.get_messages(conversation.id)
    went = {"category": "preferences", "content": "Maya is vegetarian.", "sources": [first.id]}
    back = {
        "category": "preferences",
        "content": "Maya eats meat again and is no longer vegetarian.",
        "sources": [second.id],
        "revises": True,
    }
    replies = [StubReply.answer(json.dumps({"memories": [m]})) for m in (went, back)]
    with StubProviderServer(*replies) as stub:
        service = _stub_service(store, stub)
        ((_, made, old_id),) = (await service.remember(conversation.id, [first])).decisions
        ((_, decision, new_id),) = (await service.remember(conversation.id, [second])).decisions
    assert made.kind == "create" and (decision.kind, decision.target) == ("supersede", old_id)
    old, new = await service.store.get([old_id or "", new_id or ""])
    assert old.superseded_by == new.memory_id and not old.current
    # Told with what it takes back, so a question about either finds both messages.
    assert new.content.startswith("Maya eats meat again") and "Maya is vegetarian" in new.content
    assert new.source_message_ids == (second.id, first.id)
