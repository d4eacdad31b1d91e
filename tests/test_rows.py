"""Part <-> row mapping: exact round trips, and no second copy of a message's main text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lossless.records import Message, Part, TextPart, ToolPart
from lossless.stores.rows import PART_COLUMNS, part_from_row, part_to_row

from .properties.strategies import messages, parts, text


@given(parts, text, st.booleans())
def test_round_trip_any_part(part: Part, content: str, only: bool) -> None:
    assert part_from_row(part_to_row(part, content, only_part=only), content) == part


@given(messages())
def test_round_trip_whole_messages(message: Message) -> None:
    only = len(message.parts) == 1
    rows = [part_to_row(p, message.content, only_part=only) for p in message.parts]
    assert tuple(part_from_row(r, message.content) for r in rows) == message.parts


def test_main_text_equal_to_content_is_stored_once() -> None:
    column = PART_COLUMNS.index("text_content")
    row = part_to_row(TextPart("hello"), "hello", only_part=True)
    assert row[column] is None and row[PART_COLUMNS.index("from_content")] == 1
    # Not when the message has several parts, or the text differs.
    assert part_to_row(TextPart("hello"), "hello", only_part=False)[column] == "hello"
    assert part_to_row(TextPart("hello"), "other", only_part=True)[column] == "hello"
    tool = part_to_row(ToolPart(call_id="c", output="out"), "out", only_part=True)
    assert tool[PART_COLUMNS.index("tool_output")] is None
    # An empty string and None stay distinct.
    empty = ToolPart(call_id="c", output="")
    assert part_from_row(part_to_row(empty, "", only_part=True), "") == empty
    none = ToolPart(call_id="c", output=None)
    assert part_from_row(part_to_row(none, "", only_part=True), "") == none


def test_restore_position_finds_the_gap_or_asks_for_a_shift() -> None:
    from lossless.stores.rows import restore_position

    assert restore_position([], 5) == (1, False)  # an empty context
    assert restore_position([(1, 1), (2, 10)], 20) == (3, False)  # after everything
    assert restore_position([(1, 1), (4, 10)], 5) == (3, False)  # a free ordinal before the next item
    assert restore_position([(1, 1), (2, 10)], 5) == (2, True)  # none free: shift from 2 on
    assert restore_position([(3, 10)], 5) == (3, True)  # before the first item: it moves up
    assert restore_position([(1, 10)], 5) == (1, True)
    assert restore_position([(1, None), (2, 10)], 5) == (2, True)  # an item of unknown seq is passed over
