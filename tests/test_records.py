"""Values: validation, rendering and round trips."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from lossless.errors import InputError
from lossless.records import (
    Message,
    TextPart,
    ToolPart,
    canonical_json,
    content_hash,
    format_timestamp,
    parse_timestamp,
)

from .test_parts import ALL_PARTS


def test_message_defaults_to_one_text_part() -> None:
    message = Message.user("hi there")
    assert message.parts == (TextPart("hi there"),)
    assert Message.user("").parts == ()


def test_message_validation_names_the_problem() -> None:
    with pytest.raises(InputError, match="unknown role 'robot'"):
        Message("robot", "x")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="content must be a string"):
        Message("user", None)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="timezone-aware"):
        Message.user("x", created_at=datetime(2026, 1, 1))
    with pytest.raises(InputError, match="event_key"):
        Message.user("x", event_key="")
    with pytest.raises(InputError, match="event_key"):
        Message.user("x", event_key="k" * 513)
    with pytest.raises(InputError, match="Part values"):
        Message("user", "x", ("not a part",))  # type: ignore[arg-type]


def test_created_at_is_normalised_to_utc() -> None:
    local = datetime(2026, 3, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    assert Message.user("x", created_at=local).created_at == datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


def test_tool_result_helper() -> None:
    ok = Message.tool_result("c1", "done", name="bash")
    assert ok.role == "tool" and ok.content == "done"
    assert ok.parts == (ToolPart(call_id="c1", name="bash", output="done", status="completed"),)
    failed = Message.tool_result("c1", "exit 1", is_error=True)
    assert failed.parts[0] == ToolPart(call_id="c1", error="exit 1", status="error")
    assert failed.parts[0].is_result and not failed.parts[0].is_call  # type: ignore[union-attr]


def test_message_dict_round_trip() -> None:
    message = Message.from_parts(
        "assistant",
        ALL_PARTS,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        event_key="e1",
        metadata={"model": "m"},
    )
    assert Message.from_dict(message.to_dict()) == message
    assert Message.from_dict({"role": "user", "content": "plain"}) == Message.user("plain")
    with pytest.raises(InputError, match="unknown field"):
        Message.from_dict({"role": "user", "content": "x", "extra": 1})
    with pytest.raises(InputError, match="must be an object"):
        Message.from_dict(["user"])  # type: ignore[arg-type]


def test_timestamps_format_and_parse() -> None:
    when = datetime(2026, 2, 7, 0, 13, 58, 938000, tzinfo=UTC)
    assert format_timestamp(when) == "2026-02-07T00:13:58.938000Z"
    assert parse_timestamp("2026-02-07T00:13:58.938Z") == when
    assert parse_timestamp("2026-02-07T01:13:58.938+01:00") == when
    assert parse_timestamp("2026-02-07T00:13:58.938") == when  # naive text is read as UTC
    assert parse_timestamp(1770423238938) == when  # epoch milliseconds
    assert parse_timestamp(1770423238.938) == when  # epoch seconds
    for bad in ("yesterday", True, 10**20):
        with pytest.raises(InputError):
            parse_timestamp(bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="timezone-aware"):
        format_timestamp(datetime(2026, 1, 1))
    # Fixed width, so text order is time order.
    assert format_timestamp(datetime(2026, 1, 1, tzinfo=UTC)) < format_timestamp(when)


def test_hashing_helpers_are_canonical() -> None:
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'
    assert content_hash("ab", "c") != content_hash("a", "bc")
    assert len(content_hash("x")) == 64
