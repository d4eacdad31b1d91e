"""The context's structure: call/result pairing, the fresh tail, and units that keep tool pairs whole."""

from __future__ import annotations

from datetime import UTC, datetime

from lossless.context import pairs, tail_start, units
from lossless.records import ContextEntry

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def msg(ordinal: int, tokens: int = 10, calls: tuple[str, ...] = (), results: tuple[str, ...] = ()) -> ContextEntry:
    return ContextEntry(
        ordinal, "message", tokens, T0, message_id=ordinal + 1, role="user", tool_calls=calls, tool_results=results
    )


def summary(ordinal: int, tokens: int = 50) -> ContextEntry:
    return ContextEntry(ordinal, "summary", tokens, T0, summary_id=f"sum_{ordinal:016x}", depth=0)


def test_a_result_pairs_with_the_nearest_earlier_call_of_its_id() -> None:
    entries = [msg(0, calls=("a",)), msg(1, results=("a",)), msg(2, calls=("a",)), msg(3, results=("a",))]
    assert pairs(entries) == {1: 0, 3: 2}


def test_a_result_without_a_call_pairs_with_nothing() -> None:
    assert pairs([msg(0, results=("x",)), msg(1, calls=("y",))]) == {}


def test_tail_is_the_last_messages_and_skips_summaries_in_the_count() -> None:
    entries = [summary(0), msg(1), msg(2), summary(3), msg(4)]
    assert tail_start(entries, 2) == 2
    assert tail_start(entries, 3) == 1
    assert tail_start(entries, 0) == len(entries)
    assert tail_start(entries, 99) == 1


def test_tail_token_cap_keeps_at_least_one_message() -> None:
    entries = [msg(0, 100), msg(1, 100), msg(2, 500)]
    assert tail_start(entries, 3, max_tokens=250) == 2  # the newest alone is over the cap, but is kept
    assert tail_start(entries, 3, max_tokens=650) == 1
    assert tail_start(entries, 3, max_tokens=700) == 0
    assert tail_start(entries, 3, max_tokens=None) == 0


def test_tail_grows_back_to_the_call_its_first_result_answers() -> None:
    entries = [msg(0), msg(1, calls=("c",)), msg(2), msg(3, results=("c",)), msg(4)]
    assert tail_start(entries, 2) == 1


def test_tail_growth_follows_chains_of_pairs() -> None:
    # The result at 4 needs the call at 2; the result at 3 needs the call at 0.
    entries = [msg(0, calls=("a",)), msg(1), msg(2, calls=("b",)), msg(3, results=("a",)), msg(4, results=("b",))]
    assert tail_start(entries, 1) == 0


def test_units_cover_everything_in_order_and_keep_pairs_together() -> None:
    entries = [msg(0), msg(1, calls=("a", "b")), msg(2, results=("a",)), msg(3), msg(4, results=("b",)), msg(5)]
    got = units(entries)
    assert got == [(0, 1), (1, 5), (5, 6)]
    flat = [i for a, b in got for i in range(a, b)]
    assert flat == list(range(len(entries)))


def test_interleaved_pairs_merge_into_one_unit() -> None:
    entries = [msg(0, calls=("a",)), msg(1, calls=("b",)), msg(2, results=("a",)), msg(3, results=("b",))]
    assert units(entries) == [(0, 4)]


def test_units_of_nothing() -> None:
    assert units([]) == []
