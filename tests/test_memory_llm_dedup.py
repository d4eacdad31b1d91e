"""The model-backed dedup step: the seven decisions, category rules over the model, merges, utility, fallbacks."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from lossless.config import load_config
from lossless.engine.wiring import dedup_judge_for
from lossless.errors import ConfigError, ProviderError
from lossless.memory.admission import PRESETS
from lossless.memory.extraction import Decision
from lossless.memory.hashing import HashEmbedder
from lossless.memory.llm_dedup import (
    DECIDE_PROMPT,
    MERGE_PROMPT,
    RATE_PROMPT,
    LlmJudge,
    parse_levels,
    parse_utilities,
    parse_verdict,
)
from lossless.memory.records import Category, Memory, MemoryDraft
from lossless.memory.scopes import MemoryCaller
from lossless.memory.service import MemoryService
from lossless.ports import PreparedMessage, Store
from lossless.records import Message, MessageRecord, utcnow
from lossless.stores import memory_store_for
from lossless.testing import StubProviderServer, StubReply

pytestmark = pytest.mark.anyio


class Scripted:
    """An extractor that returns the drafts it is given (one list per call)."""

    name = "scripted"

    def __init__(self) -> None:
        self.next: list[MemoryDraft] = []

    async def extract(self, conversation_id: int, messages: Sequence[MessageRecord]) -> list[MemoryDraft]:
        drafts, self.next = self.next, []
        return drafts


def _service(store: Store, stub: StubProviderServer, *, timeout_ms: int = 5000, **kwargs: Any) -> MemoryService:
    config = load_config(
        {
            "memory_dedup": "openai",
            "memory_extraction_model": "stub-model",
            "memory_dedup_timeout_ms": timeout_ms,
            "summary_base_url": stub.openai_base_url,
            "summary_api_key": "sk-x",
        }
    )
    judge = dedup_judge_for(config)
    assert isinstance(judge, LlmJudge)
    return MemoryService(memory_store_for(store), HashEmbedder(), MemoryCaller.agent("main"), judge=judge, **kwargs)


def _decision(kind: str, index: int | None = 1, **extra: object) -> StubReply:
    return StubReply.answer(json.dumps({"decision": kind, "match_index": index, "reason": f"it is {kind}", **extra}))


def _merged(content: str) -> StubReply:
    return StubReply.answer(json.dumps({"abstract": content[:40], "overview": content, "content": content}))


async def _remember(
    service: MemoryService, extractor: Scripted, text: str, category: Category, fact_key: str | None = None
) -> tuple[MemoryDraft, Decision, str | None]:
    extractor.next = [MemoryDraft(text, category=category, fact_key=fact_key, source="extraction")]
    ((draft, decision, touched),) = (await service.remember(1, [])).decisions
    return draft, decision, touched


async def _get(service: MemoryService, memory_id: str | None) -> Memory:
    (memory,) = await service.store.get([memory_id or ""])
    return memory


# ------------------------------------------------------------------ parsing


def test_the_prompts_state_the_requirements() -> None:
    for decision in ("create", "merge", "skip", "support", "contextualize", "contradict", "supersede"):
        assert f"- {decision}:" in DECIDE_PROMPT
    for phrase in ("match_index", "context_label", "evening", "append-only", "Return JSON only"):
        assert phrase in DECIDE_PROMPT
    assert '"content"' in MERGE_PROMPT and "context" in MERGE_PROMPT
    assert '"utility"' in RATE_PROMPT


def test_the_parsers_are_strict() -> None:
    verdict = parse_verdict('```json\n{"decision": "supersede", "match_index": 2, "reason": "newer"}\n```', 3)
    assert (verdict.kind, verdict.index, verdict.reason) == ("supersede", 1, "newer")
    assert parse_verdict('{"decision": "create"}', 3).index is None
    assert parse_verdict('{"decision": "support"}', 1).index == 0  # one listed memory: the index may be left out
    labelled = parse_verdict('{"decision": "contextualize", "match_index": 1, "context_label": "teatime"}', 1)
    assert labelled.context_label == "general"  # an unknown label
    for bad in (
        "sure, merge them",
        "[1]",
        '{"decision": "replace", "match_index": 1}',
        '{"decision": "merge", "match_index": 4}',
        '{"decision": "merge", "match_index": true}',
        '{"decision": "merge"}',
    ):
        with pytest.raises(ProviderError):
            parse_verdict(bad, 3)
    assert parse_levels('{"content": " Both. ", "abstract": 3}') == ("", "", "Both.")
    assert parse_utilities('{"utility": [0, 0.5, 1]}', 3) == [0.0, 0.5, 1.0]
    for bad_levels in ('{"content": ""}', '{"abstract": "x"}'):
        with pytest.raises(ProviderError):
            parse_levels(bad_levels)
    for bad_rating in ('{"utility": [0.5]}', '{"utility": [0.5, 2]}', '{"utility": [true, 0.1]}', '{"u": []}'):
        with pytest.raises(ProviderError):
            parse_utilities(bad_rating, 2)


def test_the_judge_is_configured_like_the_extractor() -> None:
    assert dedup_judge_for(load_config({})) is None  # offline by default
    auto = load_config({"memory_extractor": "openai", "memory_extraction_model": "m", "summary_api_key": "k"})
    assert isinstance(dedup_judge_for(auto), LlmJudge)  # auto follows memory_extractor
    assert dedup_judge_for(auto.replace(memory_dedup="offline")) is None
    with pytest.raises(ConfigError, match="memory_extraction_model"):
        dedup_judge_for(load_config({"memory_dedup": "openai"}))


# ------------------------------------------------------------------ the seven decisions


async def test_merged_and_supporting_candidates_join_the_provenance(store: Store) -> None:
    """What a candidate's messages said is now in the memory it merged into: they become its sources too."""
    conversation = await store.get_or_create_conversation(agent_id="main", session_id="s1")
    said = ["I prefer dark mode in every editor.", "And in the terminal too.", "Dark mode, always."]
    await store.append_messages(
        conversation.id, [PreparedMessage(Message(role="user", content=text), 8, utcnow()) for text in said]
    )
    ids = [m.id for m in await store.get_messages(conversation.id)]
    extractor = Scripted()
    with StubProviderServer() as stub:
        service = _service(store, stub, extractor=extractor)
        dark = await service.add(
            MemoryDraft(said[0], category="preferences", conversation_id=conversation.id, source_message_ids=(ids[0],))
        )

        async def candidate(text: str, message_id: int) -> tuple[Decision, str | None]:
            extractor.next = [
                MemoryDraft(
                    text,
                    category="preferences",
                    conversation_id=conversation.id,
                    source_message_ids=(message_id,),
                    source="extraction",
                )
            ]
            ((_, decision, touched),) = (await service.remember(conversation.id, [])).decisions
            return decision, touched

        stub.script(_decision("merge"), _merged("Prefers dark mode in every editor and terminal."))
        decision, touched = await candidate("I prefer dark mode in every terminal.", ids[1])
        assert (decision.kind, touched) == ("merge", dark.memory_id)
        merged = await _get(service, dark.memory_id)
        assert merged.content == "Prefers dark mode in every editor and terminal."
        assert merged.source_message_ids == (ids[0], ids[1])

        stub.script(_decision("support"))
        decision, touched = await candidate("I prefer dark mode in every editor and terminal.", ids[2])
        assert (decision.kind, touched) == ("support", dark.memory_id)
        supported = await _get(service, dark.memory_id)
        assert supported.source_message_ids == (ids[0], ids[1], ids[2])
        assert supported.content == merged.content

        stub.script(_decision("skip"))  # a plain duplicate adds nothing, provenance included
        decision, _ = await candidate("I prefer dark mode in every editor and terminal!", ids[2])
        assert decision.kind == "skip" and await _get(service, dark.memory_id) == supported

        # A candidate of another conversation merges its text; the provenance keeps naming one conversation.
        other = await store.get_or_create_conversation(agent_id="main", session_id="s2")
        await store.append_messages(
            other.id, [PreparedMessage(Message(role="user", content="Dark mode in the browser too."), 8, utcnow())]
        )
        (elsewhere,) = [m.id for m in await store.get_messages(other.id)]
        extractor.next = [
            MemoryDraft(
                "I prefer dark mode in every editor, terminal and browser.",
                category="preferences",
                conversation_id=other.id,
                source_message_ids=(elsewhere,),
                source="extraction",
            )
        ]
        stub.script(_decision("merge"), _merged("Prefers dark mode in every editor, terminal and browser."))
        ((_, decision, touched),) = (await service.remember(other.id, [])).decisions
        assert (decision.kind, touched) == ("merge", dark.memory_id)
        widened = await _get(service, dark.memory_id)
        assert widened.content == "Prefers dark mode in every editor, terminal and browser."
        assert widened.source_message_ids == supported.source_message_ids
        assert widened.conversation_id == conversation.id


async def test_every_decision_is_reachable_through_the_model(store: Store) -> None:
    extractor = Scripted()
    with StubProviderServer() as stub:
        service = _service(store, stub, extractor=extractor)

        async def seed(text: str, category: Category = "preferences") -> Memory:
            return await service.add(MemoryDraft(text, category=category))

        window = await seed("I prefer window seats on long flights.")
        stub.script(_decision("create"))
        _, decision, touched = await _remember(
            service, extractor, "I prefer aisle seats on long flights.", "preferences"
        )
        assert (decision.kind, decision.by) == ("create", "model") and touched != window.memory_id
        assert (await _get(service, window.memory_id)).current

        dark = await seed("I prefer dark mode in every editor.")
        stub.script(_decision("merge"), _merged("Prefers dark mode in every editor and terminal."))
        _, decision, touched = await _remember(
            service, extractor, "I prefer dark mode in every terminal.", "preferences"
        )
        assert (decision.kind, decision.target, touched) == ("merge", dark.memory_id, dark.memory_id)
        merged = await _get(service, dark.memory_id)
        assert merged.content == "Prefers dark mode in every editor and terminal." and merged.current
        assert stub.requests[-1].system == MERGE_PROMPT and "dark mode in every terminal" in stub.requests[-1].user

        tabs = await seed("I prefer tabs over spaces in Go code.")
        stub.script(_decision("skip"))
        _, decision, _ = await _remember(service, extractor, "I prefer tabs over spaces in Go code!", "preferences")
        assert decision.kind == "skip" and await _get(service, tabs.memory_id) == tabs

        stub.script(_decision("support"))
        _, decision, _ = await _remember(service, extractor, "I do prefer tabs over spaces in Go code.", "preferences")
        assert decision.kind == "support"
        assert (await _get(service, tabs.memory_id)).confidence == pytest.approx(tabs.confidence + 0.05)

        coffee = await seed("I prefer coffee in the morning before work.")
        stub.script(
            _decision("contextualize", context_label="evening"), _merged("Prefers coffee; in the evening, tea.")
        )
        _, decision, touched = await _remember(
            service, extractor, "I prefer tea in the evening before work.", "preferences"
        )
        assert (decision.kind, decision.context_label, touched) == ("contextualize", "evening", coffee.memory_id)
        assert "Context of the new statement: evening" in stub.requests[-1].user
        contextualized = await _get(service, coffee.memory_id)
        assert contextualized.current and contextualized.content == "Prefers coffee; in the evening, tea."

        vim = await seed("My editor of choice is Vim for all projects.", "entities")
        stub.script(_decision("supersede"))
        _, decision, touched = await _remember(
            service, extractor, "My editor of choice is Helix for all projects.", "entities"
        )
        assert decision.kind == "supersede"
        old, new = await _get(service, vim.memory_id), await _get(service, touched)
        assert not old.current and old.superseded_by == new.memory_id and new.supersedes == vim.memory_id

        spicy = await seed("I really enjoy spicy food at dinner.")
        stub.script(_decision("contradict"))
        _, decision, touched = await _remember(
            service, extractor, "I really do not enjoy spicy food at dinner.", "preferences"
        )
        assert decision.kind == "contradict" and decision.target == spicy.memory_id
        old, new = await _get(service, spicy.memory_id), await _get(service, touched)
        assert not old.current and old.valid_at(spicy.created_at) and new.supersedes == spicy.memory_id
        assert new.metadata is not None and new.metadata["contradicts"] == spicy.memory_id
        history = await service.search("spicy food at dinner", as_of=spicy.created_at, record_access=False)
        assert spicy.memory_id in [h.memory.memory_id for h in history.hits]  # the old statement stays queryable

        decide_requests = [r for r in stub.requests if r.system == DECIDE_PROMPT]
        assert len(decide_requests) == 7 and all(r.model == "stub-model" for r in decide_requests)
        assert '<memory index="1" category="preferences"' in decide_requests[0].user
        assert "<candidate" in decide_requests[0].user and "aisle seats" in decide_requests[0].user


async def test_category_rules_hold_over_the_model(store: Store) -> None:
    extractor = Scripted()
    with StubProviderServer() as stub:
        service = _service(store, stub, extractor=extractor)
        shipped = await service.add(
            MemoryDraft("We shipped the parser release on Friday afternoon.", category="events")
        )
        stub.script(_decision("supersede"))
        _, decision, touched = await _remember(
            service, extractor, "We shipped the parser release on Friday evening.", "events"
        )
        assert decision.kind == "create" and "events rule: create" in decision.reason  # append-only
        assert (await _get(service, shipped.memory_id)).current and touched != shipped.memory_id
        stub.script(_decision("merge"))
        _, decision, _ = await _remember(
            service, extractor, "We shipped the parser release on Friday with two new formats.", "events"
        )
        assert decision.kind == "create"  # an event is never rewritten
        stub.script(_decision("support"))
        _, decision, _ = await _remember(
            service, extractor, "We shipped the parser release on Friday afternoon!", "events"
        )
        assert decision.kind == "skip"

        fix = await service.add(MemoryDraft("The fix was to raise the pool size to 20 connections.", category="cases"))
        stub.script(_decision("contradict"))
        _, decision, _ = await _remember(
            service, extractor, "The fix was to raise the pool size to 40 connections.", "cases"
        )
        assert decision.kind == "create" and (await _get(service, fix.memory_id)).current

        run = await service.add(
            MemoryDraft("I always run five kilometres every morning before work.", category="patterns")
        )
        stub.script(_decision("supersede"), _merged("Runs ten kilometres every morning before work (was five)."))
        _, decision, touched = await _remember(
            service, extractor, "I always run ten kilometres every morning before work.", "patterns"
        )
        assert (decision.kind, touched) == ("merge", run.memory_id)  # patterns are not versioned
        assert (await _get(service, run.memory_id)).content.startswith("Runs ten kilometres")

        name = await service.add(MemoryDraft("My name is Ada Lovelace and I live in London.", category="profile"))
        asked = len(stub.requests)
        stub.script(_merged("Ada Lovelace lives in Paris (formerly London)."))
        _, decision, touched = await _remember(
            service, extractor, "My name is Ada Lovelace and I live in Paris.", "profile"
        )
        assert (decision.kind, touched) == ("merge", name.memory_id)  # profile always merges: no decision asked
        assert [r.system for r in stub.requests[asked:]] == [MERGE_PROMPT]

        seats = await service.add(MemoryDraft("I prefer window seats on long flights.", category="preferences"))
        stub.script(_decision("create"))
        _, decision, touched = await _remember(
            service, extractor, "I prefer window seats on long flights.", "preferences"
        )
        assert (decision.kind, decision.target) == ("support", seats.memory_id)  # never a duplicate at ≥ 0.95


async def test_any_model_failure_falls_back_to_the_rules(store: Store) -> None:
    extractor = Scripted()
    with StubProviderServer() as stub:
        # A deadline a loaded CI machine meets for a plain answer (at 300 ms a request could miss it before it
        # reached the stub, and the step after took its scripted reply); the slow answer still misses it.
        service = _service(store, stub, timeout_ms=2000, extractor=extractor)
        tea = await service.add(
            MemoryDraft("I prefer green tea in the morning.", category="preferences", fact_key="preferences:drink")
        )
        failures = (
            StubReply.answer("I think you should merge these two."),  # garbage
            StubReply.answer('{"decision": "merge", "match_index": 7}'),  # names no listed memory
            StubReply.slow(3.0, '{"decision": "skip", "match_index": 1}'),  # past the deadline
            (StubReply.error(500), StubReply.error(500)),  # the judge's client retries a 500 once
            StubReply.error(400, "refused by the content policy"),
        )
        current = tea
        for failure in failures:
            stub.script(*(failure if isinstance(failure, tuple) else (failure,)))
            _, decision, touched = await _remember(
                service, extractor, "I prefer black tea in the morning.", "preferences", "preferences:drink"
            )
            assert decision.by == "rules", failure
            assert decision.kind in ("supersede", "support") and touched  # the candidate is never lost
            current = await _get(service, touched)
            assert current.current
        history = await service.list(fact_key="preferences:drink", include_superseded=True)
        assert [m.content for _, m in history][:2] == [tea.content, "I prefer black tea in the morning."]

        pattern = await service.add(MemoryDraft("I always review pull requests after lunch.", category="patterns"))
        stub.script(_decision("merge"), StubReply.answer("no JSON here"))
        _, decision, touched = await _remember(
            service, extractor, "I always review pull requests after lunch, quickly.", "patterns"
        )
        assert (decision.kind, decision.by, touched) == ("merge", "model", pattern.memory_id)
        merged = await _get(service, pattern.memory_id)  # the merge text fell back to appending
        assert merged.content == f"{pattern.content}\nI always review pull requests after lunch, quickly."


async def test_admission_utility_is_the_models_rating(store: Store) -> None:
    extractor = Scripted()
    with StubProviderServer() as stub:
        service = _service(store, stub, extractor=extractor, admission=PRESETS["conservative"])
        text = "The quarterly offsite moved to the lake house."  # not in the (empty) conversation: confidence 0

        stub.script(StubReply.answer('{"utility": [0.0]}'))
        _, decision, touched = await _remember(service, extractor, text, "events")
        assert decision.kind == "reject" and "utility 0.00" in decision.reason and touched is None
        assert stub.requests[-1].system == RATE_PROMPT and "lake house" in stub.requests[-1].user

        stub.script(StubReply.answer("very useful!"))  # garbage: utility 0.5, as without a model
        _, decision, touched = await _remember(service, extractor, text, "events")
        assert decision.kind == "create" and touched  # 0.5 clears the bar that 0.0 did not
