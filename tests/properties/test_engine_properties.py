"""The engine as a state machine: random sequences of ingest, turns, compactions, assemblies, expansions and
restarts keep every invariant — each acknowledged message stored once, reachable from the context through the
summary DAG, an assembled context within its budget, expansions leading back to stored messages, integrity ok."""

from __future__ import annotations

import itertools
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from lossless import ContextEngine, Message, NotFoundError

_sessions = itertools.count()

steps = st.one_of(
    st.tuples(st.just("ingest"), st.integers(1, 6), st.integers(20, 160)),
    st.tuples(st.just("turn"), st.integers(1, 3), st.integers(300, 4000)),
    st.tuples(st.just("compact"), st.sampled_from(["incremental", "full", "until_under"]), st.integers(0, 3000)),
    st.tuples(st.just("assemble"), st.integers(1, 3), st.integers(200, 6000)),
    st.tuples(st.just("expand"), st.integers(0, 0), st.integers(0, 0)),
    st.tuples(st.just("restart"), st.booleans(), st.integers(0, 2)),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(steps, min_size=3, max_size=14))
def test_any_sequence_of_engine_calls_keeps_the_invariants(
    tmp_path: Path, script: list[tuple[str, object, int]]
) -> None:
    note(repr(script))

    async def scenario() -> None:
        async with await ContextEngine.open(
            f"sqlite:///{tmp_path / 'machine.db'}",
            fresh_tail_count=2,
            leaf_chunk_tokens=256,
            leaf_target_tokens=80,
            condensed_target_tokens=80,
        ) as engine:
            session = f"m{next(_sessions)}"
            sent: list[str] = []  # every message text acknowledged, in order, across restarts
            sessions = [session]

            def batch(count: int, words: int) -> list[Message]:
                out = []
                for _ in range(count):
                    n = len(sent) + len(out)
                    role = "user" if n % 2 == 0 else "assistant"
                    out.append(Message(role, f"m{n} " + " ".join(f"w{n}_{i}" for i in range(words))))
                return out

            for kind, a, b in script:
                if kind == "ingest":
                    messages = batch(int(a), b)  # type: ignore[call-overload]
                    result = await engine.ingest_batch(session, messages)
                    assert result.stored_count == len(messages)
                    sent.extend(m.content for m in messages)
                elif kind == "turn":
                    messages = batch(int(a), 40)  # type: ignore[call-overload]
                    turn = await engine.after_turn(session, messages, token_budget=b)
                    assert turn.error is None and turn.ingest.stored_count == len(messages)
                    sent.extend(m.content for m in messages)
                elif kind == "compact" and sent:
                    target = b if a == "until_under" else None
                    done = await engine.compact(session, mode=a, target_tokens=target)  # type: ignore[arg-type]
                    assert done.stop_reason
                elif kind == "assemble":
                    assembled = await engine.assemble(session, token_budget=b)
                    assert assembled.estimated_tokens <= b, (assembled.estimated_tokens, b)
                elif kind == "expand" and sent:
                    context = await engine.context(session)
                    ids = [e.summary_id for e in context if e.summary_id is not None]
                    if ids:
                        expanded = await engine.expand(ids, include_messages=True, token_cap=1_000_000)
                        # a restarted session's context shares its parents' summaries: they expand to theirs
                        stored = {m.id for s in sessions for m in await engine.messages(s)}
                        assert {m.id for m in expanded.messages} <= stored
                elif kind == "restart" and sent:
                    session = f"{session}-r{len(sessions)}"
                    sessions.append(session)
                    dropped = await engine.restart_session(sessions[-2], session, carry_context=bool(a), drop_newest=b)
                    assert len(dropped) <= b
                    await engine.ingest(session, Message("user", f"m{len(sent)} again"))
                    sent.append(f"m{len(sent)} again")
            if not sent:  # nothing was ever stored: the session was never made
                with pytest.raises(NotFoundError):  # assembling an unknown session makes no conversation
                    await engine.conversation(session)
                return
            summaries = [len((await engine.summaries(s))[0]) for s in sessions]
            event(f"messages: {len(sent) // 10 * 10}+, summaries: {'some' if any(summaries) else 'none'}")
            # Every acknowledged message is stored once, in order, across the sessions it was sent to …
            stored = [m for s in sessions for m in await engine.messages(s)]
            assert [m.content for m in stored] == sent
            assert len({m.id for m in stored}) == len(stored)
            # … and each conversation's own messages are all reachable from its context (nothing lost); a
            # restarted session's context may share its parent's summaries, so lineage is read for all of them.
            lineage: dict[str, tuple[int | str, ...]] = {}
            for s in sessions:
                lineage.update((await engine.summaries(s))[1])

            def reach(ref: int | str) -> list[int]:
                return [ref] if isinstance(ref, int) else [m for source in lineage[ref] for m in reach(source)]

            for s in sessions:
                own = {m.id for m in await engine.messages(s)}
                reachable = {m for entry in await engine.context(s) for m in reach(entry.ref)}
                context = [entry.ref for entry in await engine.context(s)]
                assert own <= reachable, (s, context, own, lineage)
                assert (await engine.check_integrity(s)).ok, s

    anyio.run(scenario)
