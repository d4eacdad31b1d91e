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


def test_invalid_unicode_is_stored_shown_as_replacement_and_the_original_kept() -> None:
    from lossless.ingest import INVALID_UNICODE_KEY, original_message, repair_unicode, was_repaired

    sent = Message.from_parts(
        "assistant",
        [
            ToolPart(
                call_id="c", name="run", input={"arg\udc80": "x\ud83d"}, output="half \ud800 emoji", status="completed"
            )
        ],
        metadata={"note": "ok \udfff"},
    )
    stored = repair_unicode(sent)
    assert was_repaired(stored) and not was_repaired(sent)
    assert "\ufffd" in stored.content and not any(0xD800 <= ord(c) <= 0xDFFF for c in stored.content)
    part = stored.parts[0]
    assert isinstance(part, ToolPart) and part.output == "half \ufffd emoji" and part.input == {"arg\ufffd": "x\ufffd"}
    record = stored.metadata[INVALID_UNICODE_KEY]  # type: ignore[index]
    assert record["replaced"] >= 4 and record["original"].isascii()
    assert original_message(stored) == sent  # every code unit back
    assert repair_unicode(Message.user("fine ✓")) == Message.user("fine ✓")  # valid text is untouched
    ready, _ = prepare([Message.user("a"), Message.user("b \ud800")])
    assert [p.message.content for p in ready] == ["a", "b \ufffd"]  # type: ignore[attr-defined]
