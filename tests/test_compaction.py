"""The compaction engine: passes, tool pairs, escalation, stop reasons, lineage, concurrency."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from lossless import ContextEngine, Message, ToolPart
from lossless.compaction import TRUNCATION_MARKER, Compactor, compression_target, find_file_ids, truncate_to_tokens
from lossless.errors import InputError
from lossless.ports import Store
from lossless.providers.offline import OfflineSummarizer
from lossless.tokens import EstimatingCounter

from .fakes import UNAVAILABLE, ScriptedSummarizer, head_of

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def settings(**overrides: object) -> dict[str, object]:
    base: dict[str, object] = {
        "fresh_tail_count": 4,
        "leaf_chunk_tokens": 600,
        "leaf_target_tokens": 200,
        "condensed_target_tokens": 200,
        "leaf_min_fanout": 4,
        "condensed_min_fanout": 3,
        "condensed_min_fanout_hard": 2,
        "incremental_max_depth": 1,
        "summary_timeout_ms": 500,
        "summary_max_attempts": 1,
    }
    base.update(overrides)
    return base


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[ContextEngine]:
    opened = await ContextEngine.open(f"sqlite:///{tmp_path / 'c.db'}", **settings())  # type: ignore[arg-type]
    try:
        yield opened
    finally:
        await opened.dispose()


def compactor(engine: ContextEngine, summarizer: object | None = None, **overrides: object) -> Compactor:
    config = engine.config.replace(**overrides) if overrides else engine.config
    return Compactor(
        engine.store,
        summarizer or ScriptedSummarizer([head_of(12)]),  # type: ignore[arg-type]
        config=config,
        counter=engine.tokens,
        zone=UTC,
    )


def chat(count: int, words: int = 40, start: int = 0) -> list[Message]:
    """Alternating user/assistant messages of ``words`` words each, one minute apart."""
    return [
        Message(
            "user" if i % 2 == 0 else "assistant",
            f"message {i}: " + " ".join(f"word{i}_{w}" for w in range(words)),
            created_at=T0 + timedelta(minutes=i),
            event_key=f"m{i}",
        )
        for i in range(start, start + count)
    ]


async def covered(store: Store, conversation_id: int) -> list[int]:
    """Message ids reachable from the context (directly or through lineage), in context order."""
    lineage = await store.get_lineage(conversation_id)
    out: list[int] = []

    def walk(ref: int | str) -> None:
        if isinstance(ref, int):
            out.append(ref)
        else:
            for source in lineage[ref]:
                walk(source)

    for entry in await store.get_context(conversation_id):
        walk(entry.ref)
    return out


async def all_ids(engine: ContextEngine, session: str) -> list[int]:
    return [m.id for m in await engine.messages(session)]


async def test_leaf_pass_replaces_the_oldest_run_and_keeps_lineage(engine: ContextEngine) -> None:
    result = await engine.ingest_batch("s", chat(30))
    conversation = result.conversation_id
    assert conversation is not None
    done = await compactor(engine).compact(conversation, mode="incremental")
    assert done.compacted and done.by_depth == {0: 1}
    leaf = done.summaries[0]
    assert (leaf.kind, leaf.depth, leaf.level, leaf.provider) == ("leaf", 0, "normal", "scripted")
    assert leaf.token_count < leaf.source_token_count
    assert leaf.earliest_at == T0
    entries = await engine.store.get_context(conversation)
    assert entries[0].kind == "summary" and entries[0].summary_id == leaf.id
    lineage = await engine.store.get_lineage(conversation)
    ids = await all_ids(engine, "s")
    assert list(lineage[leaf.id]) == ids[: len(lineage[leaf.id])]  # the oldest messages, in order
    assert await covered(engine.store, conversation) == ids
    assert done.tokens_after < done.tokens_before


async def test_fresh_tail_is_never_compacted(engine: ContextEngine) -> None:
    result = await engine.ingest_batch("s", chat(40))
    assert result.conversation_id is not None
    await compactor(engine).compact(result.conversation_id, mode="full")
    entries = await engine.store.get_context(result.conversation_id)
    ids = await all_ids(engine, "s")
    tail = [e.message_id for e in entries if e.kind == "message"]
    assert tail[-4:] == ids[-4:]
    assert await covered(engine.store, result.conversation_id) == ids


def tool_turn(i: int, output_words: int = 60) -> list[Message]:
    call = ToolPart(call_id=f"call-{i}", name="bash", input={"command": f"run step {i}"})
    return [
        Message.from_parts("assistant", [call], created_at=T0 + timedelta(minutes=2 * i), event_key=f"c{i}"),
        Message.tool_result(
            f"call-{i}",
            " ".join(f"out{i}_{w}" for w in range(output_words)),
            name="bash",
            created_at=T0 + timedelta(minutes=2 * i + 1),
            event_key=f"r{i}",
        ),
    ]


async def test_tool_calls_are_never_split_from_their_results(engine: ContextEngine) -> None:
    messages = [m for i in range(12) for m in tool_turn(i)]
    result = await engine.ingest_batch("tools", messages)
    conversation = result.conversation_id
    assert conversation is not None
    # A tail of three messages starts at a result: the tail must take in its call too.
    await compactor(engine, fresh_tail_count=3, leaf_chunk_tokens=300).compact(conversation, mode="full")
    lineage = await engine.store.get_lineage(conversation)
    records = {m.id: m for m in await engine.messages("tools")}
    for summary_id, sources in lineage.items():
        if all(isinstance(s, int) for s in sources):
            calls = {p.call_id for s in sources for p in records[s].parts if isinstance(p, ToolPart) and p.is_call}
            results = {p.call_id for s in sources for p in records[s].parts if isinstance(p, ToolPart) and p.is_result}
            assert calls == results, f"{summary_id} splits a tool pair"
    tail = [e for e in await engine.store.get_context(conversation) if e.kind == "message"]
    assert tail[0].role == "assistant" and tail[0].tool_calls  # the tail begins with a call, not an orphan result


async def test_reused_call_ids_pair_with_the_nearest_call(engine: ContextEngine) -> None:
    # Replayed transcripts reuse call ids: a result belongs to the closest call before it.
    messages: list[Message] = []
    for i in range(10):
        call = ToolPart(call_id="same-id", name="bash", input={"command": f"step {i}"})
        messages.append(Message.from_parts("assistant", [call], event_key=f"c{i}", created_at=T0))
        messages.append(Message.tool_result("same-id", "x " * 80, event_key=f"r{i}", created_at=T0))
    result = await engine.ingest_batch("reuse", messages)
    assert result.conversation_id is not None
    done = await compactor(engine, fresh_tail_count=2).compact(result.conversation_id, mode="full")
    assert done.compacted  # the old behaviour pulled the whole history into the tail


async def test_full_sweep_condenses_and_incremental_respects_fanout(engine: ContextEngine) -> None:
    result = await engine.ingest_batch("s", chat(120))
    conversation = result.conversation_id
    assert conversation is not None
    incremental = compactor(engine)
    for _ in range(3):
        await incremental.compact(conversation, mode="incremental")
    entries = await engine.store.get_context(conversation)
    assert {e.depth for e in entries if e.kind == "summary"} == {0}  # 3 leaves < leaf_min_fanout 4
    full = await compactor(engine).compact(conversation, mode="full")
    assert full.stop_reason == "nothing_eligible"
    depths = [e.depth for e in await engine.store.get_context(conversation) if e.kind == "summary"]
    assert depths and max(depths) >= 1
    condensed = [s for s in full.summaries if s.kind == "condensed"]
    assert condensed
    node = condensed[-1]
    lineage = await engine.store.get_lineage(conversation)
    children = await engine.store.get_summaries([str(s) for s in lineage[node.id]])
    assert all(c.depth == node.depth - 1 for c in children)
    assert node.descendant_count == sum(c.descendant_count + 1 for c in children)
    assert node.source_token_count == sum(c.source_token_count for c in children)
    assert await covered(engine.store, conversation) == await all_ids(engine, "s")


async def test_every_pass_records_a_compaction_event(engine: ContextEngine) -> None:
    result = await engine.ingest_batch("s", chat(120))
    conversation = result.conversation_id
    assert conversation is not None
    first = await compactor(engine).compact(conversation, mode="incremental", trigger="threshold")
    full = await compactor(engine).compact(conversation, mode="full")
    events = await engine.store.get_compaction_events(conversation)
    made = [*first.summaries, *full.summaries]
    assert [e.summary_id for e in events] == [s.id for s in made]
    assert [(e.run_id, e.trigger, e.mode) for e in events] == [
        *[(first.run_id, "threshold", "incremental")] * len(first.summaries),
        *[(full.run_id, "manual", "full")] * len(full.summaries),
    ]
    assert first.run_id != full.run_id and full.trigger == "manual"
    lineage = await engine.store.get_lineage(conversation)
    assert [e.source_items for e in events] == [len(lineage[s.id]) for s in made]
    # Each pass starts where the one before ended, and the call's totals are the ends of the chain.
    assert events[0].tokens_before == first.tokens_before
    assert [e.tokens_before for e in events[1:]] == [e.tokens_after for e in events[:-1]]
    assert events[-1].tokens_after == full.tokens_after
    sizes: dict[int | str, int] = {m.id: m.token_count for m in await engine.messages("s")}
    sizes.update({s.id: s.token_count for s in made})
    for event, summary in zip(events, made, strict=True):
        replaced = sum(sizes[source] for source in lineage[summary.id])
        assert event.tokens_before - event.tokens_after == replaced - summary.token_count
        assert event.elapsed_ms >= 0 and event.created_at.tzinfo is not None
    part = events[0].to_part()
    assert (part.type, part.summary, part.auto, part.tokens_before) == (
        "compaction",
        events[0].summary_id,
        True,
        events[0].tokens_before,
    )
    assert part.metadata is not None and part.metadata["tokens_after"] == events[0].tokens_after
    assert await engine.compaction_events("s", limit=2) == events[-2:]
    with pytest.raises(InputError):
        await compactor(engine).compact(conversation, trigger="cron")  # type: ignore[arg-type]
    with pytest.raises(InputError):
        await engine.compaction_events("s", limit=0)


async def test_until_under_meets_a_budget_or_says_why(engine: ContextEngine) -> None:
    result = await engine.ingest_batch("s", chat(60))
    conversation = result.conversation_id
    assert conversation is not None
    entries = await engine.store.get_context(conversation)
    total = sum(e.token_count for e in entries)
    tail = sum(e.token_count for e in entries[-4:])
    done = await compactor(engine).compact(conversation, mode="until_under", target_tokens=tail + 150)
    assert done.stop_reason == "budget_met"
    assert done.tokens_after <= tail + 150 < total
    impossible = await compactor(engine).compact(conversation, mode="until_under", target_tokens=tail // 2)
    assert impossible.stop_reason == "irreducible_tail"
    with pytest.raises(InputError):
        await compactor(engine).compact(conversation, mode="until_under")


async def test_nothing_to_do_is_reported(engine: ContextEngine) -> None:
    result = await engine.ingest_batch("s", chat(6))
    assert result.conversation_id is not None
    summarizer = ScriptedSummarizer()
    done = await compactor(engine, summarizer).compact(result.conversation_id, mode="incremental")
    assert (done.stop_reason, done.compacted, summarizer.calls) == ("nothing_eligible", False, [])


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        (["x " * 5000], "not shorter than its"),
        ([""], "empty answer"),
        ([RuntimeError("model exploded")], "RuntimeError: model exploded"),
        (["hang"], "no answer within 500 ms"),
    ],
)
async def test_misbehaving_summarizers_end_in_a_recorded_fallback(
    engine: ContextEngine, script: list[object], reason: str
) -> None:
    result = await engine.ingest_batch("s", chat(30))
    assert result.conversation_id is not None
    summarizer = ScriptedSummarizer(script)
    with anyio.fail_after(10):
        done = await compactor(engine, summarizer).compact(result.conversation_id, mode="incremental")
    leaf = done.summaries[0]
    assert leaf.level == "fallback" and leaf.provider == "truncation"
    assert leaf.content.endswith(TRUNCATION_MARKER)
    assert leaf.reason is not None and reason in leaf.reason and "aggressive" in leaf.reason
    assert [c.policy for c in summarizer.calls] == ["normal", "aggressive"]
    assert leaf.token_count < leaf.source_token_count
    assert await covered(engine.store, result.conversation_id) == await all_ids(engine, "s")


async def test_aggressive_attempt_is_used_when_the_normal_one_is_too_long(engine: ContextEngine) -> None:
    result = await engine.ingest_batch("s", chat(30))
    assert result.conversation_id is not None
    summarizer = ScriptedSummarizer(["y " * 5000, "tight summary"])
    done = await compactor(engine, summarizer).compact(result.conversation_id, mode="incremental")
    assert done.summaries[0].level == "aggressive"
    assert done.summaries[0].content == "tight summary"
    assert summarizer.calls[1].target_tokens < summarizer.calls[0].target_tokens


async def test_an_unavailable_provider_stops_compaction_except_under_pressure(engine: ContextEngine) -> None:
    result = await engine.ingest_batch("s", chat(30))
    conversation = result.conversation_id
    assert conversation is not None
    done = await compactor(engine, ScriptedSummarizer([UNAVAILABLE])).compact(conversation, mode="full")
    assert (done.stop_reason, done.compacted) == ("provider_unavailable", False)
    forced = await compactor(engine, ScriptedSummarizer([UNAVAILABLE])).compact(
        conversation, mode="until_under", target_tokens=1
    )
    assert forced.compacted and all(s.level == "fallback" for s in forced.summaries)


async def test_previous_summary_is_passed_for_continuity(engine: ContextEngine) -> None:
    result = await engine.ingest_batch("s", chat(60))
    assert result.conversation_id is not None
    summarizer = ScriptedSummarizer([head_of(8)])
    await compactor(engine, summarizer).compact(result.conversation_id, mode="full")
    leaf_calls = [c for c in summarizer.calls if c.kind == "leaf"]
    assert leaf_calls[0].previous_context is None
    assert leaf_calls[1].previous_context  # the first leaf's text
    assert all("=== msg#" in c.text for c in leaf_calls)


async def test_file_ids_are_carried_up_the_dag(engine: ContextEngine) -> None:
    messages = chat(40)
    messages[1] = Message("assistant", "stored aside: [LCM File: file_0123456789abcdef | a.log]", event_key="f")
    result = await engine.ingest_batch("s", messages)
    assert result.conversation_id is not None
    done = await compactor(engine, ScriptedSummarizer(["see file_0123456789abcdef for the log"])).compact(
        result.conversation_id, mode="full"
    )
    assert all("file_0123456789abcdef" in s.file_ids for s in done.summaries if s.kind == "condensed")
    assert "file_0123456789abcdef" in done.summaries[0].file_ids


async def test_concurrent_compactions_of_one_conversation_never_overlap(engine: ContextEngine) -> None:
    result = await engine.ingest_batch("s", chat(80))
    conversation = result.conversation_id
    assert conversation is not None
    outcomes = []

    async def run() -> None:
        # Separate compactors (as separate processes would be): only the store's check protects them.
        outcomes.append(await compactor(engine).compact(conversation, mode="full"))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(run)
    assert await covered(engine.store, conversation) == await all_ids(engine, "s")
    lineage = await engine.store.get_lineage(conversation)
    leaves = [s for sources in lineage.values() for s in sources if isinstance(s, int)]
    assert len(leaves) == len(set(leaves))  # no message under two leaves


async def test_offline_summaries_compress_the_sample_session(tmp_path: Path) -> None:
    async with await ContextEngine.open(f"sqlite:///{tmp_path / 's.db'}", fresh_tail_count=8) as engine:
        imported = await engine.bootstrap(Path(__file__).parent.parent / "examples" / "sample-session.jsonl")
        assert imported.conversation_id is not None
        comp = Compactor(
            engine.store, OfflineSummarizer(engine.tokens), config=engine.config, counter=engine.tokens, zone=UTC
        )
        done = await comp.compact(imported.conversation_id, mode="full")
        assert done.tokens_after < done.tokens_before * 0.25
        assert all(s.level == "normal" for s in done.summaries)
        text = "\n".join(s.content for s in done.summaries)
        assert "RL-482" in text and "Files:" in text and "Expand for details about:" in text


def test_helpers() -> None:
    assert compression_target(2400, 20_000) == 2400
    assert compression_target(2400, 1000) == 350
    assert compression_target(2400, 100) == 192
    assert find_file_ids("a file_0123456789abcdef b file_0123456789abcdef file_fedcba9876543210") == [
        "file_0123456789abcdef",
        "file_fedcba9876543210",
    ]
    counter = EstimatingCounter()
    text = "word " * 1000
    cut = truncate_to_tokens(text, 50, counter)
    assert counter.count(cut) <= 50 and text.startswith(cut)
    assert truncate_to_tokens("short", 50, counter) == "short"


async def test_config_values_flow_into_requests(engine: ContextEngine) -> None:
    result = await engine.ingest_batch("s", chat(30))
    assert result.conversation_id is not None
    summarizer = ScriptedSummarizer([head_of(5)])
    await compactor(engine, summarizer, custom_instructions="keep ticket ids").compact(
        result.conversation_id, mode="incremental"
    )
    request = summarizer.calls[0]
    assert request.custom_instructions == "keep ticket ids"
    assert request.conversation_id == result.conversation_id
    assert 192 <= request.target_tokens <= 200  # the configured leaf target, never under the floor


@pytest.mark.corpus
async def test_full_sweep_of_every_corpus_transcript(corpus: Path, tmp_path: Path) -> None:
    """The bar: with the offline summarizer, a full sweep keeps every original message reachable through the
    lineage, and cuts what it may compact — everything but the fresh tail, which is never compacted — by at
    least 90% on every transcript; sessions whose tail is a small share of them shrink by 90% as a whole.
    (The fresh tail is the reference service spec's 8 messages.)"""
    async with await ContextEngine.open(f"sqlite:///{tmp_path / 'corpus.db'}", fresh_tail_count=8) as engine:
        results = await engine.import_paths([corpus])
        whole: dict[str, float] = {}
        for imported in results:
            assert not isinstance(imported, Exception), imported
            assert imported.conversation_id is not None
            name = str(Path(imported.path).relative_to(corpus))
            done = await engine.compact(imported.conversation_id, mode="full")
            assert done.stop_reason == "nothing_eligible"
            records = await engine.messages(imported.conversation_id)
            assert await covered(engine.store, imported.conversation_id) == [m.id for m in records]
            tail = sum(
                e.token_count for e in await engine.store.get_context(imported.conversation_id) if e.kind == "message"
            )
            compactable = done.tokens_before - tail
            # Pinned system messages stay raw (they count as tail here); a session with less than ~12k
            # compactable tokens ends as one leaf, whose length is not a share of so little.
            if compactable > 12_000:
                assert done.tokens_after - tail <= 0.10 * compactable, (name, done.tokens_after - tail, compactable)
            if tail <= 0.05 * done.tokens_before:
                whole[name] = 1 - done.tokens_after / done.tokens_before
        assert len(whole) >= 8
        assert min(whole.values()) >= 0.90, whole
