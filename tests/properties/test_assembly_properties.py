"""Assembly keeps its promises for any context, budget, tail and prompt: budget respected (unless the
tail alone is over it), tail present and in order, chronological output, tool pairs never orphaned, and
every summary shown expands to exactly the contiguous run of messages it replaced."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lossless import ContextEngine, Message, ToolPart
from lossless.context import tail_start, units
from tests.test_assembly import Context, words
from tests.test_compaction import covered

_sessions = itertools.count()


@st.composite
def contexts(draw: st.DrawFn) -> Context:
    ctx = Context()
    open_calls: list[str] = []
    for i in range(draw(st.integers(0, 30))):
        kind = draw(st.sampled_from(["text", "text", "call", "result", "summary"]))
        size = draw(st.integers(1, 120))
        if kind == "summary":
            ctx.summary(words(size, f"s{i}_"), depth=draw(st.integers(0, 3)))
        elif kind == "call":
            call_id = draw(st.sampled_from([f"c{i}", "reused"]))
            open_calls.append(call_id)
            ctx.add(Message.from_parts("assistant", [ToolPart(call_id=call_id, name="t", input={"n": words(size)})]))
        elif kind == "result" and open_calls:
            ctx.add(Message.tool_result(draw(st.sampled_from(open_calls)), words(size, f"r{i}_")))
        else:
            ctx.add(Message(draw(st.sampled_from(["user", "assistant"])), words(size, f"t{i}_")))
    return ctx


def assert_pairs_intact(messages: tuple[dict[str, Any], ...]) -> None:
    """OpenAI format: each tool message answers a call of the assistant message just before its run."""
    pending: set[str] = set()
    for message in messages:
        if message["role"] == "assistant":
            assert not pending, f"calls {pending} left unanswered"
            pending = {c["id"] for c in message.get("tool_calls") or []}
        elif message["role"] == "tool":
            assert message["tool_call_id"] in pending, "a tool result without its call"
            pending.discard(message["tool_call_id"])
        else:
            assert not pending, f"calls {pending} left unanswered"
    assert not pending


def assert_blocks_paired(messages: tuple[dict[str, Any], ...]) -> None:
    """Anthropic format: roles alternate from a user turn; each tool_use is answered once, in the next turn."""
    assert not messages or messages[0]["role"] == "user"
    for index, message in enumerate(messages):
        if index:
            assert message["role"] != messages[index - 1]["role"]
        results = [b["tool_use_id"] for b in message["content"] if b["type"] == "tool_result"]
        previous = messages[index - 1]["content"] if index else []
        assert sorted(results) == sorted(b["id"] for b in previous if b["type"] == "tool_use")


@settings(max_examples=300, deadline=None)
@given(
    ctx=contexts(),
    budget=st.integers(1, 3000),
    tail=st.integers(0, 6),
    tail_cap=st.none() | st.integers(1, 400),
    prompt=st.none() | st.sampled_from(["t3_1 r5_2", "s2_0", "nothing matches", ""]),
)
def test_assembly_invariants(ctx: Context, budget: int, tail: int, tail_cap: int | None, prompt: str | None) -> None:
    out = ctx.assemble(budget, tail=tail, tail_tokens=tail_cap, prompt=prompt)
    refs = [e.ref for e in ctx.entries]
    start = tail_start(ctx.entries, tail, tail_cap)
    # The tail is always there, in order, at the end.
    tail_refs = refs[start:]
    assert list(out.included[len(out.included) - len(tail_refs) :]) == tail_refs
    # Chronological, no duplicates; included and dropped partition the context.
    positions = [refs.index(r) for r in out.included]
    assert positions == sorted(set(positions))
    assert sorted(map(str, out.included + out.dropped)) == sorted(map(str, refs))
    # The budget holds unless the tail alone is over it — and then only the tail is sent.
    if out.over_budget:
        assert list(out.included) == tail_refs
    else:
        assert out.estimated_tokens <= budget
    # Units are all-or-nothing, so no pair is broken and the output needs no repair.
    kept = set(out.included)
    for a, b in units(ctx.entries):
        assert len({refs[i] in kept for i in range(a, b)}) == 1
    assert_pairs_intact(out.messages)
    anthropic = ctx.assemble(budget, tail=tail, tail_tokens=tail_cap, prompt=prompt, output="anthropic")
    assert anthropic.included == out.included
    assert_blocks_paired(anthropic.messages)
    # The recall guidance is there exactly when a summary is.
    assert (out.system_prompt_addition is not None) == (out.summaries_included > 0)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    turns=st.lists(st.integers(1, 400), min_size=1, max_size=40),
    budget=st.integers(300, 4000),
    tail=st.integers(1, 6),
)
def test_engine_context_is_within_budget_and_summaries_expand_to_their_sources(
    tmp_path: Path, turns: list[int], budget: int, tail: int
) -> None:
    async def scenario() -> None:
        async with await ContextEngine.open(
            f"sqlite:///{tmp_path / 'a.db'}",
            fresh_tail_count=tail,
            leaf_chunk_tokens=500,
            leaf_target_tokens=120,
            condensed_target_tokens=150,
            leaf_min_fanout=2,
            condensed_min_fanout=2,
            condensed_min_fanout_hard=2,
        ) as engine:
            session = f"s{next(_sessions)}"
            for i, size in enumerate(turns):
                role = "user" if i % 2 == 0 else "assistant"
                result = await engine.after_turn(session, [Message(role, words(size, f"x{i}_"))], token_budget=budget)
                assert result.error is None
                out = await engine.assemble(session, token_budget=budget)
                assert out.estimated_tokens <= budget or out.over_budget
            conversation = await engine.conversation(session)
            stored = await engine.messages(session)
            order = {m.id: index for index, m in enumerate(stored)}
            lineage = await engine.store.get_lineage(conversation.id)
            summaries = {s.id: s for s in await engine.store.list_summaries(conversation.id)}

            def expand(ref: int | str) -> list[int]:
                return [ref] if isinstance(ref, int) else [m for source in lineage[ref] for m in expand(source)]

            out = await engine.assemble(session, token_budget=budget)
            for ref in out.included:
                if isinstance(ref, str):
                    sources = expand(ref)
                    spots = [order[m] for m in sources]
                    assert spots == list(range(spots[0], spots[0] + len(spots))), "a summary covers a gap"
                    summary = summaries[ref]
                    assert summary.earliest_at == stored[spots[0]].created_at
                    assert summary.latest_at == stored[spots[-1]].created_at
            # Everything the context points at, expanded, is every stored message once, in order.
            assert await covered(engine.store, conversation.id) == [m.id for m in stored]

    anyio.run(scenario)
