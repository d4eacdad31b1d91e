"""Expansion is exact: every summary expands, down to its messages, to exactly the messages it covers, in order;
and a token cap is never exceeded."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lossless import ContextEngine, Message
from lossless.retrieval import Caller, Retriever

_sessions = itertools.count()
T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def _messages_under(engine: ContextEngine, conversation_id: int, summary_id: str) -> list[int]:
    lineage = await engine.store.get_lineage(conversation_id)
    out: list[int] = []

    def walk(ref: int | str) -> None:
        if isinstance(ref, int):
            out.append(ref)
            return
        for source in lineage.get(ref, ()):
            walk(source)

    walk(summary_id)
    return out


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    count=st.integers(8, 50),
    words=st.lists(st.integers(5, 300), min_size=1, max_size=8),
    fanout=st.integers(2, 5),
    cap=st.integers(1, 3000),
)
def test_expand_to_depth_zero_returns_exactly_the_covered_messages(
    tmp_path: Path, count: int, words: list[int], fanout: int, cap: int
) -> None:
    async def run() -> None:
        db = tmp_path / f"p{next(_sessions)}.db"
        engine = await ContextEngine.open(
            f"sqlite:///{db}",
            fresh_tail_count=2,
            leaf_chunk_tokens=800,
            leaf_target_tokens=100,
            condensed_target_tokens=100,
            leaf_min_fanout=fanout,
            condensed_min_fanout=fanout,
            condensed_min_fanout_hard=2,
        )
        try:
            history = [
                Message(
                    "user" if i % 2 == 0 else "assistant",
                    " ".join(f"w{i}_{j}" for j in range(words[i % len(words)])),
                    created_at=T0 + timedelta(minutes=i),
                )
                for i in range(count)
            ]
            result = await engine.ingest_batch("s", history, session_key="k")
            assert result.conversation_id is not None
            conv = result.conversation_id
            await engine.compact(conv, force=True)
            summaries, _ = await engine.summaries(conv)
            event(f"summaries: {min(len(summaries), 5)}{'+' if len(summaries) >= 5 else ''}")
            event(f"deepest: {max((s.depth for s in summaries), default=-1)}")
            retriever = Retriever(engine.store)
            caller = Caller(engine.config.agent_id, session_key="k")
            for summary in summaries:
                full = await retriever.expand(
                    caller, summary_ids=[summary.id], max_depth=summary.depth + 1, include_messages=True
                )
                expected = await _messages_under(engine, conv, summary.id)
                assert [m.id for m in full.messages] == expected
                assert not full.truncated
                capped = await retriever.expand(
                    caller, summary_ids=[summary.id], max_depth=summary.depth + 1, include_messages=True, token_cap=cap
                )
                assert capped.estimated_tokens <= cap
                got = [m.id for m in capped.messages]
                assert got == expected[: len(got)]  # a prefix, in order
                assert capped.truncated == (capped.estimated_tokens < full.estimated_tokens)
        finally:
            await engine.dispose()

    anyio.run(run)


# ---------------------------------------------------------------------- the trigram pre-filter is sound

_literal = st.sampled_from(["a", "b", "c", r"\.", r"\-", " "])
_atom = st.one_of(
    *([_literal] * 8),
    st.just("."),
    st.just("[ab]"),
    st.just(r"\d"),
    st.builds(lambda a, b: f"({a}|{b})", _literal, _literal),
    st.builds(lambda a: f"(?:{a}c)", _literal),
)
_quantifier = st.sampled_from(["", "", "", "", "", "", "?", "*", "+", "{2}", "{0,2}", "{1,3}", "+?"])
_patterns = st.lists(st.tuples(_atom, _quantifier), min_size=1, max_size=10).map(
    lambda parts: "".join(a + q for a, q in parts)
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(
    pattern=st.one_of(_patterns, _patterns, _patterns, st.builds(lambda a, b: f"{a}|{b}", _patterns, _patterns)),
    data=st.data(),
)
def test_every_match_contains_every_required_literal(pattern: str, data: st.DataObject) -> None:
    from lossless.retrieval.grep import compile_regex
    from lossless.retrieval.query import required_literals

    compiled, problem = compile_regex(pattern)
    assert problem is None, problem
    fragments = required_literals(pattern)
    event(f"fragments: {min(len(fragments), 3)}")
    for _ in range(3):
        text = data.draw(st.from_regex(pattern, alphabet=st.sampled_from("abc. -19")))
        assert compiled.search(text) is not None, (pattern, text)  # RE2 agrees the text matches
        assert all(f in text for f in fragments), (pattern, text, fragments)
