"""Segments: rendering messages and summaries for summarizers, and reading them back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from lossless.records import Message, MessageRecord, Summary, ToolPart
from lossless.segments import format_time, parse_segment, render_messages, render_summaries

T0 = datetime(2026, 2, 7, 23, 30, tzinfo=UTC)


def rec(i: int, message: Message) -> MessageRecord:
    return MessageRecord(i, 1, i, message.role, message.content, message.parts, 1, T0 + timedelta(minutes=i))


def test_round_trip_of_messages_with_tool_names() -> None:
    call = Message.from_parts("assistant", [ToolPart(call_id="c", name="Read", input={"file_path": "a.py"})])
    records = [rec(1, Message.user("hi\n\nthere")), rec(2, call), rec(3, Message.tool_result("c", "body"))]
    text = render_messages(records, UTC)
    items = parse_segment(text)
    assert [i.ref for i in items] == ["msg#1", "msg#2", "msg#3"]
    assert [i.role for i in items] == ["user", "assistant", "tool"]
    assert items[0].text == "hi\n\nthere"
    assert items[2].tool == "Read" and items[2].text == "body"
    assert items[0].at == "2026-02-07 23:31 UTC"


def test_long_items_are_cut_with_a_note() -> None:
    text = render_messages([rec(1, Message.assistant("x" * 10_000))], UTC, max_chars=1000)
    assert "characters left out here" in text and len(text) < 1200


def test_summaries_and_local_time() -> None:
    summary = Summary(
        id="sum_0123456789abcdef",
        conversation_id=1,
        kind="leaf",
        depth=0,
        content="Asked: x",
        token_count=2,
        created_at=T0,
        earliest_at=T0,
        latest_at=T0 + timedelta(hours=2),
    )
    paris = ZoneInfo("Europe/Paris")
    text = render_summaries([summary], paris)
    [item] = parse_segment(text)
    assert (item.ref, item.depth, item.text) == ("sum_0123456789abcdef", 0, "Asked: x")
    assert item.span == "2026-02-08 00:30 CET → 2026-02-08 02:30 CET"
    assert format_time(None, paris) == "unknown time"


def test_text_without_headers_is_one_item() -> None:
    assert [i.ref for i in parse_segment("just prose")] == ["text"]
    assert parse_segment("   ") == []
    assert [i.ref for i in parse_segment("preamble\n=== msg#3 · t · user ===\nbody")] == ["text", "msg#3"]
