"""Ingest rules: heartbeats, size limits, token counts, timestamps."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lossless.errors import InputError
from lossless.ingest import is_heartbeat_ok, message_size, prepare_messages
from lossless.records import FilePart, Message, ToolPart
from lossless.tokens import EstimatingCounter

NOW = datetime(2026, 5, 1, tzinfo=UTC)


def prepare(messages: list[Message], **kwargs: object) -> tuple[list[object], int]:
    options: dict[str, object] = {"counter": EstimatingCounter(), "now": NOW, "max_message_bytes": 1 << 20}
    options.update(kwargs)
    return prepare_messages(messages, **options)  # type: ignore[arg-type]


def test_tokens_and_default_timestamp() -> None:
    earlier = datetime(2020, 1, 1, tzinfo=UTC)
    prepared, dropped = prepare([Message.user("hello world"), Message.user("x", created_at=earlier)])
    assert dropped == 0
    assert prepared[0].token_count == EstimatingCounter().count("hello world")  # type: ignore[attr-defined]
    assert prepared[0].created_at == NOW  # type: ignore[attr-defined]
    assert prepared[1].created_at == earlier  # type: ignore[attr-defined]


def test_heartbeat_ok_is_dropped_only_when_asked() -> None:
    ack = Message.assistant("  HEARTBEAT_OK \n")
    assert is_heartbeat_ok(ack)
    assert not is_heartbeat_ok(Message.user("HEARTBEAT_OK"))
    assert prepare([ack])[1] == 0
    prepared, dropped = prepare([ack, Message.user("real")], prune_heartbeat_ok=True)
    assert dropped == 1 and len(prepared) == 1


def test_size_limit_names_size_and_setting() -> None:
    big = Message.user("x" * (2 << 20))
    with pytest.raises(
        InputError, match=r"message 1 is 2\.0 MiB, more than the 1\.0 MiB limit .*LCM_MAX_MESSAGE_BYTES"
    ):
        prepare([Message.user("ok"), big])
    # Parts count too: a huge data URL in a file part.
    image = Message.from_parts("user", [FilePart(mime="image/png", url="data:image/png;base64," + "A" * (2 << 20))])
    with pytest.raises(InputError, match="MiB"):
        prepare([image])


def test_size_estimate_is_an_upper_bound_of_the_exact_size() -> None:
    for message in (
        Message.user("héllo wörld ✓ 静默"),
        Message.from_parts("assistant", [ToolPart(call_id="c", name="n", input={"k": "v" * 50})]),
        Message.tool_result("c", "out"),
    ):
        assert message_size(message) >= message_size(message, exact=True) > 0
    # A single text part is the content: it is not counted twice.
    assert message_size(Message.user("abcd"), exact=True) == 4


def test_rejects_non_messages() -> None:
    with pytest.raises(InputError, match=r"expected lossless\.Message"):
        prepare([{"role": "user", "content": "x"}])  # type: ignore[list-item]
