"""Compaction always terminates, never loses or duplicates a message, and keeps its promises — whatever the
message sizes, tool pairs, fan-outs, budgets, and however badly the summarizer behaves."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lossless import ContextEngine, Message, ToolPart
from lossless.compaction import Compactor
from lossless.context import tail_start
from lossless.errors import ProviderError
from lossless.testing import FakeStep, Scripted
from tests.test_compaction import covered, scripted

_sessions = itertools.count()
T0 = datetime(2026, 1, 1, tzinfo=UTC)

behaviours = st.sampled_from(["ok", "ok", "ok", "long", "empty", "raise", "same", "hang"])


def behaviour(name: str) -> Scripted:
    if name == "ok":
        return FakeStep.head(6)
    if name == "long":
        return lambda request: request.text + " and more" * 50
    if name == "same":
        return lambda request: request.text
    if name == "raise":
        return ProviderError("scripted", "flaky", retryable=True)
    return "" if name == "empty" else FakeStep.hang()


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = []
    for i in range(draw(st.integers(0, 45))):
        words = draw(st.integers(1, 500))
        text = " ".join(f"w{i}_{j}" for j in range(words))
        at = T0 + timedelta(minutes=i)
        if draw(st.integers(0, 4)) == 0:
            call_id = draw(st.sampled_from([f"c{i}", "reused"]))
            call = ToolPart(call_id=call_id, name="bash", input={"command": text[:40]})
            messages.append(Message.from_parts("assistant", [call], created_at=at))
            if draw(st.booleans()):  # some calls are never answered
                messages.append(Message.tool_result(call_id, text, created_at=at))
        else:
            messages.append(Message("user" if i % 2 == 0 else "assistant", text, created_at=at))
    return messages


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    history=histories(),
    tail=st.integers(0, 10),
    chunk=st.integers(256, 3000),
    leaf_fanout=st.integers(2, 10),
    fanout=st.integers(2, 6),
    script=st.lists(behaviours, min_size=1, max_size=6),
    mode=st.sampled_from(["incremental", "full", "until_under"]),
    budget_share=st.floats(0.0, 1.0),
)
def test_compaction_terminates_and_keeps_every_message_once(
    tmp_path: Path,
    history: list[Message],
    tail: int,
    chunk: int,
    leaf_fanout: int,
    fanout: int,
    script: list[str],
    mode: str,
    budget_share: float,
) -> None:
    async def scenario() -> None:
        async with await ContextEngine.open(
            f"sqlite:///{tmp_path / 'p.db'}",
            fresh_tail_count=tail,
            leaf_chunk_tokens=chunk,
            leaf_target_tokens=min(200, chunk - 1),
            condensed_target_tokens=200,
            leaf_min_fanout=leaf_fanout,
            condensed_min_fanout=fanout,
            condensed_min_fanout_hard=2,
            summary_timeout_ms=100,
            summary_max_attempts=1,
        ) as engine:
            session = f"s{next(_sessions)}"
            await engine.ingest("seed-" + session, Message.user("x"))
            result = await engine.ingest_batch(session, history)
            if result.conversation_id is None:
                return
            conversation = result.conversation_id
            before = await engine.store.get_context(conversation)
            total = sum(e.token_count for e in before)
            target = int(total * budget_share) if mode == "until_under" else None
            summarizer = scripted(*(behaviour(name) for name in script))
            compactor = Compactor(engine.store, summarizer, config=engine.config, counter=engine.tokens, zone=UTC)
            with anyio.fail_after(60):
                done = await compactor.compact(conversation, mode=mode, target_tokens=target)  # type: ignore[arg-type]
            event(f"{mode} -> {done.stop_reason}, {'compacted' if done.compacted else 'untouched'}")
            after = await engine.store.get_context(conversation)
            ids = [m.id for m in await engine.messages(session)]
            # Nothing lost, nothing duplicated, order kept.
            assert await covered(engine.store, conversation) == ids
            # Tokens only go down, and each summary is shorter than the items it replaced.
            assert done.tokens_after == sum(e.token_count for e in after) <= total
            lineage = await engine.store.get_lineage(conversation)
            sizes: dict[int | str, int] = {m.id: m.token_count for m in await engine.messages(session)}
            sizes.update({s.id: s.token_count for s in await engine.store.list_summaries(conversation)})
            for summary in done.summaries:
                assert summary.token_count < sum(sizes[source] for source in lineage[summary.id])
            # The fresh tail stays raw (under a target it yields, down to the newest message).
            raw = [e.message_id for e in after if e.kind == "message"]
            kept = min(tail, len(ids)) if mode != "until_under" else min(tail, len(ids), 1)
            if kept:
                assert raw[-kept:] == ids[-kept:]
            # The stop reason is one of the documented ones, and true.
            if done.stop_reason == "budget_met":
                assert target is None or done.tokens_after <= target
            assert [e.ordinal for e in after] == sorted({e.ordinal for e in after})
            # One event per pass, recorded with its summary, and the events chain the token totals.
            events = await engine.store.get_compaction_events(conversation)
            assert [e.summary_id for e in events] == [s.id for s in done.summaries]
            assert {e.run_id for e in events} <= {done.run_id}
            totals = [total] + [e.tokens_after for e in events]
            assert [e.tokens_before for e in events] == totals[:-1]
            assert totals[-1] == done.tokens_after
            assert all(e.tokens_after < e.tokens_before and e.mode == mode for e in events)

    anyio.run(scenario)


sizes = st.one_of(st.integers(1, 4), st.integers(1, 600), st.integers(600, 3000))  # tiny, ordinary, ≫ a chunk


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    turns=st.lists(st.tuples(sizes, sizes), min_size=1, max_size=30),
    tail=st.integers(0, 8),
    leaf_fanout=st.integers(2, 8),
    budget=st.one_of(st.none(), st.integers(500, 20_000)),
)
def test_forced_compaction_always_brings_history_within_target(
    tmp_path: Path, turns: list[tuple[int, int]], tail: int, leaf_fanout: int, budget: int | None
) -> None:
    """Whatever the message sizes, after compact(force=True) the raw history outside the fresh tail is under
    ``leaf_chunk_tokens`` and the summaries form one run of strictly decreasing depths — turn after turn."""
    chunk = 1000

    async def scenario() -> None:
        async with await ContextEngine.open(
            f"sqlite:///{tmp_path / 'g.db'}",
            fresh_tail_count=tail,
            leaf_chunk_tokens=chunk,
            leaf_target_tokens=200,
            condensed_target_tokens=200,
            leaf_min_fanout=leaf_fanout,
            condensed_min_fanout_hard=2,
        ) as engine:
            engine.compactor.summarizer = scripted(FakeStep.head(8))  # type: ignore[assignment]
            session = f"g{next(_sessions)}"
            for number, (asked, answered) in enumerate(turns):
                messages = [
                    Message("user", " ".join(f"u{number}_{j}" for j in range(asked))),
                    Message("assistant", " ".join(f"a{number}_{j}" for j in range(answered))),
                ]
                if budget is None:
                    await engine.ingest_batch(session, messages)
                else:
                    assert (await engine.after_turn(session, messages, token_budget=budget)).error is None
                done = await engine.compact(session, force=True)
                entries = await engine.store.get_context(done.conversation_id)
                start = tail_start(entries, tail)
                raw = sum(e.token_count for e in entries[:start] if e.kind == "message")
                event(f"{done.stop_reason}")
                assert raw < chunk, (number, done)
                assert done.stop_reason != "no_progress" or raw < 20  # only a few tokens cannot be shortened
                depths = [e.depth for e in entries[:start] if e.kind == "summary"]
                assert all(a is not None and b is not None and a > b for a, b in itertools.pairwise(depths)), depths
            ids = [m.id for m in await engine.messages(session)]
            assert await covered(engine.store, done.conversation_id) == ids

    anyio.run(scenario)
