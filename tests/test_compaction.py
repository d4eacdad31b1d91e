"""The compaction engine: passes, tool pairs, escalation, stop reasons, lineage, concurrency."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from lossless import ContextEngine, Message, ToolPart
from lossless.compaction import TRUNCATION_MARKER, Compactor, compression_target
from lossless.errors import InputError, ProviderUnavailable
from lossless.ports import Store
from lossless.providers.offline import OfflineSummarizer
from lossless.testing import FakeStep, FakeSummarizer, Scripted

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def scripted(*script: Scripted) -> FakeSummarizer:
    """A fake summarizer that plays ``script`` and then repeats its last step (a short summary by default)."""
    return FakeSummarizer(*(script or ("short summary",)), provider="scripted", model="test", repeat_last=True)


UNAVAILABLE = ProviderUnavailable("scripted", "circuit breaker open")


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
        summarizer or scripted(FakeStep.head(12)),  # type: ignore[arg-type]
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
    assert re.fullmatch(r"sum_[0-9a-f]{16}", leaf.id)  # the reference's id form
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
    # Under a target the fresh tail yields (down to the newest message), so half the tail is reachable too.
    yielded = await compactor(engine).compact(conversation, mode="until_under", target_tokens=tail // 2)
    assert yielded.stop_reason == "budget_met" and yielded.tokens_after <= tail // 2
    newest = (await engine.store.get_context(conversation))[-1].token_count
    impossible = await compactor(engine).compact(conversation, mode="until_under", target_tokens=newest // 2)
    assert impossible.stop_reason == "irreducible_tail"
    with pytest.raises(InputError):
        await compactor(engine).compact(conversation, mode="until_under")


async def test_nothing_to_do_is_reported(engine: ContextEngine) -> None:
    result = await engine.ingest_batch("s", chat(6))
    assert result.conversation_id is not None
    summarizer = scripted()
    done = await compactor(engine, summarizer).compact(result.conversation_id, mode="incremental")
    assert (done.stop_reason, done.compacted, summarizer.calls) == ("nothing_eligible", False, [])


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        (["x " * 5000], "not shorter than its"),
        ([""], "empty answer"),
        ([RuntimeError("model exploded")], "RuntimeError: model exploded"),
        ([FakeStep.hang()], "no answer within 500 ms"),
    ],
)
async def test_misbehaving_summarizers_end_in_a_recorded_fallback(
    engine: ContextEngine, script: list[object], reason: str
) -> None:
    result = await engine.ingest_batch("s", chat(30))
    assert result.conversation_id is not None
    summarizer = scripted(*script)
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
    summarizer = scripted("y " * 5000, "tight summary")
    done = await compactor(engine, summarizer).compact(result.conversation_id, mode="incremental")
    assert done.summaries[0].level == "aggressive"
    assert done.summaries[0].content == "tight summary"
    assert summarizer.calls[1].target_tokens < summarizer.calls[0].target_tokens


async def test_an_unavailable_provider_stops_compaction_except_under_pressure(engine: ContextEngine) -> None:
    result = await engine.ingest_batch("s", chat(30))
    conversation = result.conversation_id
    assert conversation is not None
    done = await compactor(engine, scripted(UNAVAILABLE)).compact(conversation, mode="full")
    assert (done.stop_reason, done.compacted) == ("provider_unavailable", False)
    forced = await compactor(engine, scripted(UNAVAILABLE)).compact(conversation, mode="until_under", target_tokens=1)
    assert forced.compacted and all(s.level == "fallback" for s in forced.summaries)


async def test_previous_summary_is_passed_for_continuity(engine: ContextEngine) -> None:
    result = await engine.ingest_batch("s", chat(60))
    assert result.conversation_id is not None
    summarizer = scripted(FakeStep.head(8))
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
    done = await compactor(engine, scripted("see file_0123456789abcdef for the log")).compact(
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


async def test_config_values_flow_into_requests(engine: ContextEngine) -> None:
    result = await engine.ingest_batch("s", chat(30))
    assert result.conversation_id is not None
    summarizer = scripted(FakeStep.head(5))
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
    (The fresh tail is the reference service spec's 8 messages.)

    Memories are mined from every summary as by default, but embedded by the hash embedder: nothing
    here reads them, and the e5 model took half of this test's time.  The replays of the corpus
    (tests/test_replay.py) mine it with the default embedder."""
    async with await ContextEngine.open(
        f"sqlite:///{tmp_path / 'corpus.db'}", fresh_tail_count=8, memory_embedder="hash"
    ) as engine:
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


# ---------------------------------------------------------------------- progress is guaranteed


def words(count: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(count))


async def outside_tail(engine: ContextEngine, conversation: int) -> tuple[int, int]:
    """(raw tokens, all tokens) of the context outside the fresh tail."""
    from lossless.context import tail_start

    entries = await engine.store.get_context(conversation)
    start = tail_start(entries, engine.config.fresh_tail_count, engine.config.fresh_tail_max_tokens)
    raw = sum(e.token_count for e in entries[:start] if e.kind == "message")
    return raw, sum(e.token_count for e in entries[:start])


async def test_a_short_message_before_an_oversized_one_never_stalls_compaction(tmp_path: Path) -> None:
    """The issue's reproduction, with default settings: the stranded short question no longer blocks.

    (The large-file threshold is raised so the oversized message stays inline: by default plain text
    over 25,000 tokens is stored aside at ingest, and compaction would never see it.)"""
    async with await ContextEngine.open(f"sqlite:///{tmp_path / 'r.db'}", large_file_token_threshold=500_000) as engine:
        chunk = engine.config.leaf_chunk_tokens
        huge = words(2 * chunk)
        await engine.after_turn("s", [Message.user("q0"), Message.assistant(huge)], token_budget=1_000_000)
        for turn in range(1, 60):
            ordinary = [Message.user(f"q{turn} " + words(40, "x")), Message.assistant(f"a{turn} " + words(200, "y"))]
            await engine.after_turn("s", ordinary, token_budget=1_000_000)
        conversation = (await engine.conversation("s")).id
        done = await engine.compact("s", force=True)
        assert done.stop_reason != "no_progress"
        raw_after, _ = await outside_tail(engine, conversation)
        assert raw_after < chunk
        assert len(await engine.store.list_summaries(conversation)) >= 1
        # The oversized message stays whole in the store, reachable from the summary that stands for it.
        stored = await engine.messages("s")
        assert stored[1].content == huge
        assert await covered(engine.store, conversation) == [m.id for m in stored]
        # The same history stored without compaction: one forced compaction makes progress.
        history = [Message.user("q0"), Message.assistant(huge)]
        for turn in range(1, 60):
            history += [Message.user(f"q{turn} " + words(40, "x")), Message.assistant(f"a{turn} " + words(200, "y"))]
        other = (await engine.ingest_batch("t", history)).conversation_id
        assert other is not None
        raw_before, _ = await outside_tail(engine, other)
        assert raw_before >= chunk  # over the incremental trigger
        done = await engine.compact("t", force=True)
        assert done.stop_reason != "no_progress" and done.passes >= 1
        assert done.tokens_after < done.tokens_before
        raw_after, _ = await outside_tail(engine, other)
        assert raw_after < chunk
        again = await engine.compact("t", force=True)
        assert again.stop_reason == "nothing_eligible"


async def test_after_turn_keeps_compacting_past_an_oversized_message(tmp_path: Path) -> None:
    async with await ContextEngine.open(f"sqlite:///{tmp_path / 'r.db'}", **settings()) as engine:  # type: ignore[arg-type]
        chunk = engine.config.leaf_chunk_tokens
        await engine.after_turn("s", [Message.user("q0"), Message.assistant(words(2 * chunk))], token_budget=10**6)
        sizes = []
        for turn in range(1, 40):
            done = await engine.after_turn(
                "s", [Message.user(f"q{turn}"), Message.assistant(words(60, f"a{turn}_"))], token_budget=10**6
            )
            sizes.append(done.context_tokens)
        conversation = (await engine.conversation("s")).id
        raw, _ = await outside_tail(engine, conversation)
        assert raw < chunk
        stored = sum(m.token_count for m in await engine.messages("s"))
        assert max(sizes[-10:]) < stored / 3  # compacted as it goes, not growing with the history


async def test_a_chunk_too_small_to_shrink_grows_and_is_never_tried_twice(engine: ContextEngine) -> None:
    chunk = engine.config.leaf_chunk_tokens
    history = [Message.user("hi"), Message.assistant(words(3 * chunk)), *chat(6)]
    result = await engine.ingest_batch("s", history)
    assert result.conversation_id is not None
    summarizer = scripted(FakeStep.head(12))
    done = await compactor(engine, summarizer).compact(result.conversation_id, mode="full")
    assert done.stop_reason != "no_progress" and done.compacted
    texts = [(c.text, c.policy) for c in summarizer.calls]
    assert len(texts) == len(set(texts))  # never the same request twice
    ids = await all_ids(engine, "s")
    lineage = await engine.store.get_lineage(result.conversation_id)
    first_leaf = done.summaries[0]
    assert list(lineage[first_leaf.id])[:2] == ids[:2]  # "hi" went together with its large neighbour


async def test_an_oversized_message_falls_back_to_a_head_and_tail_excerpt(engine: ContextEngine) -> None:
    chunk = engine.config.leaf_chunk_tokens
    body = "HEAD-START " + words(3 * chunk) + " TAIL-END"
    result = await engine.ingest_batch("s", [Message.assistant(body), *chat(4)])
    assert result.conversation_id is not None
    done = await compactor(engine, scripted("")).compact(result.conversation_id, mode="full")
    leaf = done.summaries[0]
    assert leaf.level == "fallback"
    ids = await all_ids(engine, "s")
    assert f"msg#{ids[0]}" in leaf.content
    assert "HEAD-START" in leaf.content and "TAIL-END" in leaf.content
    assert "left out" in leaf.content and leaf.token_count < leaf.source_token_count
    assert (await engine.messages("s"))[0].content == body  # whole in the store


async def test_no_progress_only_when_what_is_left_cannot_shrink(engine: ContextEngine) -> None:
    tiny = [Message("user" if i % 2 == 0 else "assistant", "ok") for i in range(8)]
    result = await engine.ingest_batch("s", tiny)
    assert result.conversation_id is not None
    total = sum(e.token_count for e in await engine.store.get_context(result.conversation_id))
    summarizer = scripted("a much longer answer than its two-token sources could ever be")
    done = await compactor(engine, summarizer).compact(
        result.conversation_id, mode="until_under", target_tokens=total - 1
    )
    assert done.stop_reason == "no_progress" and not done.compacted
    texts = [(c.text, c.policy) for c in summarizer.calls]
    assert len(texts) == len(set(texts))


async def test_under_a_target_the_fresh_tail_yields(engine: ContextEngine) -> None:
    result = await engine.ingest_batch("s", chat(8, words=400))
    assert result.conversation_id is not None
    total = sum(e.token_count for e in await engine.store.get_context(result.conversation_id))
    target = total // 4
    done = await compactor(engine).compact(result.conversation_id, mode="until_under", target_tokens=target)
    assert done.stop_reason == "budget_met" and done.tokens_after <= target
    entries = await engine.store.get_context(result.conversation_id)
    ids = await all_ids(engine, "s")
    assert entries[-1].message_id == ids[-1]  # the newest message stays raw
    assert await covered(engine.store, result.conversation_id) == ids


async def test_a_long_replay_at_a_small_budget_stays_within_one_turn_of_the_threshold(tmp_path: Path) -> None:
    """The replay bar at a smaller scale (benchmarks/compaction_replay.py runs it at default settings)."""
    import math
    import random

    rng = random.Random(5)
    budget = 4000
    async with await ContextEngine.open(
        f"sqlite:///{tmp_path / 'r.db'}", leaf_chunk_tokens=1000, leaf_target_tokens=200, condensed_target_tokens=200
    ) as engine:
        engine.compactor.summarizer = scripted(FakeStep.head(30))  # type: ignore[assignment]
        threshold = int(engine.config.context_threshold * budget)
        for turn in range(400):
            messages = [
                Message(role, words(max(1, int(math.exp(rng.uniform(0, math.log(3000))) / 2)), f"t{turn}{role[0]}"))
                for role in ("user", "assistant")
            ]
            size = sum(engine.tokens.count(m.content) for m in messages)
            done = await engine.after_turn("s", messages, token_budget=budget)
            assert done.error is None
            assert done.context_tokens <= threshold + size, (turn, done.compaction)


async def test_summaries_list_their_sources_files_whatever_the_summarizer_writes(engine: ContextEngine) -> None:
    """File ids come from the sources, not from the summary text: a summarizer that never names them."""
    messages = chat(40)
    log = "\n".join(f"2026-01-05 line {i} of the build log, nothing unusual" for i in range(2000))
    messages[1] = Message.tool_result("c1", log, name="bash", event_key="f")
    result = await engine.ingest_batch("s", messages)
    assert result.conversation_id is not None
    files = await engine.files(result.conversation_id)
    assert len(files) == 1
    done = await compactor(engine, scripted("a summary that names no file")).compact(
        result.conversation_id, mode="full"
    )
    leaf = done.summaries[0]
    assert leaf.kind == "leaf" and files[0].id not in leaf.content
    assert leaf.file_ids == (files[0].id,)
    condensed = [s for s in done.summaries if s.kind == "condensed"]
    assert condensed and all(s.file_ids == (files[0].id,) for s in condensed)
    assert all(s.file_ids == () for s in done.summaries[1:] if s.kind == "leaf")  # their sources hold no file
    described = await engine.describe(leaf.id, conversation=result.conversation_id)
    assert files[0].id in str(described.to_dict())
    context = await engine.assemble("s", token_budget=100_000)
    assert f'<file_ref id="{files[0].id}" />' in str(context.messages)  # the compacted context names the file
