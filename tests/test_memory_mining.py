"""Memories mined when a leaf summary is made: provenance, each message once, best-effort."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.config import Config
from lossless.engine import ContextEngine
from lossless.errors import MissingDependencyError
from lossless.records import Message
from lossless.stores import open_store
from lossless.testing import FakeSummarizer

pytestmark = pytest.mark.anyio

LONG_AGO = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


@pytest.fixture
async def engine(config: Config) -> AsyncIterator[ContextEngine]:
    settings = config.replace(
        memory_auto_extract=True,
        memory_embedder="hash",
        fresh_tail_count=2,
        leaf_chunk_tokens=300,
        leaf_target_tokens=60,
        leaf_min_fanout=2,
        summary_max_attempts=1,
    )
    store = await open_store(settings.resolved_database_url, settings)
    opened = ContextEngine(store, settings, summarizer=FakeSummarizer())
    try:
        yield opened
    finally:
        await opened.dispose()


def _history() -> list[Message]:
    """An imported conversation: two durable statements among filler, written long ago."""
    said = [
        "My name is Ada Lovelace. " + " ".join(f"intro{i}" for i in range(40)),
        "I prefer coffee in the morning before work. " + " ".join(f"drink{i}" for i in range(40)),
    ]
    out: list[Message] = []
    for i in range(8):
        text = said[i] if i < len(said) else " ".join(f"chat{i}_{j}" for j in range(40))
        at = LONG_AGO + timedelta(minutes=2 * i)
        out += [Message.user(text, created_at=at), Message.assistant(f"reply {i}", created_at=at)]
    return out


async def test_a_leaf_summary_mines_its_messages_once_with_provenance(engine: ContextEngine) -> None:
    imported = await engine.ingest_batch("imported", _history())
    assert (await engine.memory().stats()).current == 0  # a bulk import mines nothing by itself
    # A live turn (mined at once, before any compaction it triggers) gives the drink preference a newer value.
    turn = await engine.after_turn(
        "imported", [Message.user("I prefer tea in the morning before work.")], token_budget=1_000_000
    )
    assert turn.error is None
    (tea,) = [m for _, m in await engine.memory().list(category="preferences")]
    await engine.ingest_batch("imported", [Message.user(" ".join(f"later{i}" for i in range(60))) for _ in range(3)])

    result = await engine.compact("imported", force=True)
    leaves = [s for s in result.summaries if s.kind == "leaf"]
    assert len(leaves) >= 2
    sources = await engine.store.get_summary_messages([s.id for s in leaves])
    assert turn.ingest.stored[0].id in {i for ids in sources.values() for i in ids}
    memories = {m.category: m for _, m in await engine.memory().list(include_superseded=True)}
    profile = memories["profile"]
    assert profile.source == "extraction" and profile.conversation_id == imported.conversation_id
    assert profile.source_message_ids == (imported.stored[0].id,)
    # The old "coffee" statement was mined after the newer "tea": it does not overwrite it.
    drinks = [m for _, m in await engine.memory().list(category="preferences", include_superseded=True)]
    assert [(m.content, m.current) for m in drinks] == [(tea.content, True)]
    assert drinks[0].confidence == tea.confidence  # the turn's message was not mined a second time

    before = [(m.memory_id, m.updated_at, m.confidence) for _, m in await engine.memory().list(include_superseded=True)]
    for leaf in leaves:  # the hook run again (a re-compaction of the same messages): nothing new
        again = await engine.memory().mine_summary(engine.store, leaf)
        assert again.decisions == ()
    assert await engine.compact("imported", force=True) is not None
    after = [(m.memory_id, m.updated_at, m.confidence) for _, m in await engine.memory().list(include_superseded=True)]
    assert after == before


async def test_a_failing_extraction_never_fails_compaction(
    engine: ContextEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    await engine.ingest_batch("broken", _history())

    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("embedder on fire")

    monkeypatch.setattr(engine.memory(), "mine", broken)
    result = await engine.compact("broken", force=True)
    assert result.compacted and any(s.kind == "leaf" for s in result.summaries)
    assert (await engine.memory().stats()).current == 0


async def test_failed_mining_gives_its_claim_back(engine: ContextEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    stored = await engine.ingest_batch("retry", _history())
    service = engine.memory()
    real = service.remember

    async def flaky(*args: object) -> object:
        raise RuntimeError("store hiccup")

    monkeypatch.setattr(service, "remember", flaky)
    with pytest.raises(RuntimeError):
        await service.mine(stored.stored)
    monkeypatch.setattr(service, "remember", real)
    mined = await service.mine(stored.stored)  # nothing was recorded as mined: all of it is mined now
    assert {d.category for d, _, _ in mined.decisions} == {"profile", "preferences"}
    assert (await service.mine(stored.stored)).decisions == ()


async def test_without_auto_extract_compaction_mines_nothing(config: Config) -> None:
    settings = config.replace(
        memory_auto_extract=False,
        memory_embedder="hash",
        fresh_tail_count=2,
        leaf_chunk_tokens=300,
        leaf_target_tokens=60,
        leaf_min_fanout=2,
    )
    store = await open_store(settings.resolved_database_url, settings)
    engine = ContextEngine(store, settings, summarizer=FakeSummarizer())
    try:
        assert engine.compactor.on_leaf is None
        await engine.ingest_batch("quiet", _history())
        assert (await engine.compact("quiet", force=True)).compacted
        assert (await engine.memory().stats()).current == 0
        while await engine.run_idle_step():  # the background build: vectors only, the backlog is not mined
            pass
        assert (await engine.memory().stats()).current == 0
    finally:
        await engine.dispose()


async def test_the_backlog_is_mined_in_the_background_once_into_the_agents_scope(
    engine: ContextEngine, config: Config
) -> None:
    """History imported in bulk is mined by the background build (no compaction, no turn), once."""
    imported = await engine.ingest_batch("imported", _history())
    other = ContextEngine(engine.store, engine.config.replace(agent_id="other"), summarizer=FakeSummarizer())
    theirs = await other.ingest_batch("theirs", _history())
    assert (await engine.memory().stats()).current == 0
    steps = []
    while done := await engine.mine_step(limit=5):
        steps.append(done)
    assert steps[:3] == [5, 5, 5] and sum(steps) == len(imported.stored)  # in batches; only this agent's
    memories = {m.category: m for _, m in await engine.memory().list()}
    assert memories["profile"].source_message_ids == (imported.stored[0].id,)
    assert memories["profile"].conversation_id == imported.conversation_id
    assert (await other.memory().stats()).current == 0, "another agent's messages are left to it"
    assert await engine.mine_step() == 0
    before = (await engine.memory().stats()).current
    later = await engine.ingest_batch("imported", [Message.user("My favourite editor is Helix, I use it daily.")])
    assert await engine.mine_step() == 1  # only what came after the walk's cursor is read again
    assert (await engine.memory().stats()).current > before
    assert await other.mine_step() == len(theirs.stored)
    assert later.stored[0].id > theirs.stored[-1].id


def _work(prompt: str, edits: int) -> list[Message]:
    """A user's prompt and the agent's stretch of work on it: ``edits`` file edits, each with its tool output,
    long enough that most of them fall in mining segments without a user message."""
    work: list[Message] = [Message.user(prompt, created_at=LONG_AGO)]
    for i in range(edits):
        edit = {"file_path": f"src/client_{i}.py", "old_string": "x", "new_string": f"retry_delay_{i} = {i}"}
        work += [
            Message.assistant(f"[tool call: Edit] {json.dumps(edit)}" + " " * 700, created_at=LONG_AGO),
            Message("tool", f"The file src/client_{i}.py has been updated. " + "ok " * 200, created_at=LONG_AGO),
        ]
    return work


async def _memory_texts(engine: ContextEngine) -> set[str]:
    return {m.content for _, m in await engine.memory().list(limit=1000)}


async def test_an_agents_stretch_of_work_is_mined_for_its_edits(engine: ContextEngine) -> None:
    """Between two prompts of its user an agent edits files: those segments hold no user message, and its
    work facts are mined from them all the same; tool output alone gives nothing."""
    await engine.ingest_batch("agent", _work("Please add a retry delay to the client.", 12))
    await engine.ingest_batch("agent", [Message("tool", "exit status 0 " * 600, created_at=LONG_AGO)])
    while await engine.mine_step():
        pass
    texts = await _memory_texts(engine)
    for i in range(12):
        assert any(f"src/client_{i}.py (adding retry_delay_{i})" in t for t in texts), i
    assert not any("exit status" in t for t in texts)
    assert (await engine.memory().store.unmined_messages(engine.config.agent_id))[0] == []


async def test_an_agents_session_is_remembered_in_its_own_words(engine: ContextEngine) -> None:
    """The user's request and the reply that ends the agent's turn are quoted; memory search finds the request."""
    asked = "Update the wingman docs: remove the redundant parts and add a table of the status messages."
    replied = "Done: the wingman docs now have a table of the status messages and no repeated sections."
    session = [
        Message("user", asked, created_at=LONG_AGO),
        Message("assistant", '[tool call: Read] {"file_path": "docs/wingman.md"}', created_at=LONG_AGO),
        Message("tool", "# Wingman\nStatus messages: started, pending.", created_at=LONG_AGO),
        Message("assistant", replied, created_at=LONG_AGO),
        Message("user", "ok push it", created_at=LONG_AGO),
    ]
    await engine.ingest_batch("agent", session)
    while await engine.mine_step():
        pass
    first, *_, reply, _ = await engine.messages("agent")
    quotes = {m.content: m.source_message_ids for _, m in await engine.memory().list(limit=100)}
    assert quotes == {
        f'The user said: "{asked}" (said on 6 January 2025).': (first.id,),
        f'The assistant replied: "{replied}" (said on 6 January 2025).': (reply.id,),
    }
    found = await engine.memory().search("what did the user want done to the wingman docs", limit=1)
    assert [hit.memory.source_message_ids for hit in found.hits] == [(first.id,)]


async def test_a_turn_leaves_its_agents_work_to_the_background(engine: ContextEngine) -> None:
    """Mined inline (after_turn), a turn gives the memories of its prompt's segment at once; its segments of
    agent work are left unmined, and the background build mines them (each message still once)."""
    turn = await engine.after_turn(
        "live", _work("My name is Ada Lovelace. Please add a retry delay to the client.", 12), token_budget=10**6
    )
    assert turn.error is None
    inline = await _memory_texts(engine)
    assert any("Ada Lovelace" in t for t in inline)
    assert not any("src/client_11.py" in t for t in inline)
    ids, _ = await engine.memory().store.unmined_messages(engine.config.agent_id)
    assert ids and set(ids) < {m.id for m in turn.ingest.stored}
    while await engine.mine_step():
        pass
    texts = await _memory_texts(engine)
    for i in range(12):
        assert any(f"src/client_{i}.py (adding retry_delay_{i})" in t for t in texts), i
    assert inline < texts
    assert (await engine.memory().store.unmined_messages(engine.config.agent_id))[0] == []


async def test_the_background_workers_idle_step_mines_the_backlog(engine: ContextEngine) -> None:
    await engine.ingest_batch("imported", _history())
    while await engine.run_idle_step():  # search vectors and memories, a batch of each per step
        pass
    assert {m.category for _, m in await engine.memory().list()} >= {"profile", "preferences"}


async def test_unmined_messages_walks_the_backlog_with_a_cursor(engine: ContextEngine) -> None:
    stored = [m.id for m in (await engine.ingest_batch("walk", _history())).stored]
    store = engine.memory().store
    agent = engine.config.agent_id
    assert await store.unmined_messages(agent, limit=4) == (stored[:4], stored[3])
    await store.claim_messages(stored[4:8], datetime.now(UTC))
    ids, cursor = await store.unmined_messages(agent, after=stored[3], limit=4)
    assert ids == stored[8:12] and cursor == stored[11]
    ids, cursor = await store.unmined_messages(agent, after=cursor, limit=100)
    assert ids == stored[12:] and cursor == stored[-1]
    assert await store.unmined_messages(agent, after=cursor) == ([], stored[-1])
    assert await store.unmined_messages("nobody", limit=100) == ([], stored[-1])


async def test_without_an_embedder_mining_stops_once_and_turns_go_on(
    engine: ContextEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_model(*args: object, **kwargs: object) -> object:
        raise MissingDependencyError("long-term memory search", "embeddings", "numpy")

    monkeypatch.setattr(engine.memory(), "mine", no_model)
    await engine.ingest_batch("bare", _history())
    assert await engine.mine_step() == 0
    assert engine.parts["memory"].mining_off is not None and "embeddings" in engine.parts["memory"].mining_off  # type: ignore[attr-defined]
    turn = await engine.after_turn("bare", [Message.user("I prefer tea.")], token_budget=1_000_000)
    assert turn.error is None and (await engine.memory().stats()).current == 0


async def test_without_an_embedder_a_leaf_summary_is_made_and_nothing_warns(
    engine: ContextEngine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The base install: the leaf hook finds no embedder, says so once (info), and compaction goes on."""

    async def no_model(*args: object, **kwargs: object) -> object:
        raise MissingDependencyError("long-term memory search", "embeddings", "numpy")

    monkeypatch.setattr(engine.memory(), "mine", no_model)
    await engine.ingest_batch("bare", _history())
    with caplog.at_level(logging.INFO):
        result = await engine.compact("bare", force=True)
    assert sum(s.kind == "leaf" for s in result.summaries) >= 2
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "no warning per leaf"
    said = [r.getMessage() for r in caplog.records if "no mining" in r.getMessage()]
    assert len(said) == 1 and "lossless-context[embeddings]" in said[0], "said once, with what to install"


async def test_memories_of_another_embedder_get_this_ones_vectors_in_the_background(engine: ContextEngine) -> None:
    """After memory_embedder changes, the memories stored under the old model are embedded again in the
    background (a batch per idle step), and vector search of the new model finds them."""
    from lossless.memory.records import MemoryDraft
    from lossless.memory.scopes import MemoryCaller
    from lossless.memory.service import MemoryService
    from lossless.testing import HashEmbedder

    store = engine.memory().store
    old = MemoryService(store, HashEmbedder(64), MemoryCaller.agent(engine.config.agent_id))
    for i in range(7):
        await old.add(MemoryDraft(category="events", content=f"The team shipped release {i} of the parser."))
    model = engine.memory().embedder.model
    assert model != "hash-64" and len(await store.memories_without_vectors(model)) == 7
    assert await engine.memory_vectors_step(limit=5) == 5
    while await engine.run_idle_step():
        pass
    assert await store.memories_without_vectors(model) == []
    assert len(await store.memories_without_vectors("hash-64")) == 0  # the old model's vectors are kept
    found = await engine.memory().search("release 3 parser", limit=3, record_access=False)
    assert found.hits and found.hits[0].memory.content.startswith("The team shipped release 3")
    assert found.hits[0].stages  # ranked through the vector side too
    assert await engine.memory_vectors_step() == 0
    # Done: another host's new memory waits for the next look, RESCAN_S later (no table read per poll).
    await old.add(MemoryDraft(category="events", content="Another host stored this one later."))
    assert await engine.memory_vectors_step() == 0
    from lossless.engine.memory import RESCAN_S

    part = engine.parts["memory"]
    part._vectors_done_at -= RESCAN_S  # as if RESCAN_S had passed since the last empty look
    assert await engine.memory_vectors_step() == 1


@given(
    st.lists(
        st.tuples(st.sampled_from(["user", "assistant", "tool"]), st.integers(0, 9000), st.booleans()),
        max_size=30,
    )
)
def test_mining_segments_keep_each_output_with_its_call(rows: list[tuple[str, int, bool]]) -> None:
    """Segments lose and repeat nothing; only a tool output runs a segment past its size (it stays with its call)."""
    from lossless.memory.failures import is_output
    from lossless.memory.mining import MINING_SEGMENT_CHARS, segments
    from lossless.records import MessageRecord

    when = datetime(2026, 1, 1, tzinfo=UTC)
    messages, conversation = [], 1
    for i, (role, size, switch) in enumerate(rows, 1):
        conversation += switch and i % 5 == 0
        messages.append(MessageRecord(i, conversation, i, role, "x" * size, (), 1, when))  # type: ignore[arg-type]
    found = segments(messages)
    assert [m.id for s in found for m in s] == [m.id for m in messages]
    for before, segment in zip([None, *found], found, strict=False):
        assert len({m.conversation_id for m in segment}) == 1
        if before is not None and before[-1].conversation_id == segment[0].conversation_id:
            assert not is_output(segment[0].role, segment[0].content)  # an output never opens a segment
        for i, message in enumerate(segment[1:], 2):
            if not is_output(message.role, message.content):
                assert sum(len(m.content) for m in segment[:i]) <= MINING_SEGMENT_CHARS
