"""Ingest rules: what gets stored, with which token count and timestamp.  Pure; no I/O.

Invariants:

* Heartbeat polls are never stored; with ``prune_heartbeat_ok`` neither are
  assistant replies that are exactly ``HEARTBEAT_OK``.
* A message larger than ``max_message_bytes`` is refused with an
  :class:`InputError` that names its size and the setting; nothing of the
  batch is stored (the caller checks the whole batch before writing).  The
  engine and the importer store large files aside first
  (:mod:`lossless.interception`), so the limit applies to what remains.
* Every prepared message has a token count from the configured counter and a
  timezone-aware timestamp: its own, or the ingest time.
* **Invalid Unicode never rejects a message, and is never lost.**  A lone
  UTF-16 surrogate (what a host's broken string slicing, or an invalid UTF-8
  byte read with ``surrogateescape``, leaves in a Python ``str``) cannot be
  stored as text.  The message is stored with each such code unit shown as
  U+FFFD, and its metadata key :data:`INVALID_UNICODE_KEY` holds how many were
  replaced and the original message as ASCII JSON (where ``\\udXXX`` escapes keep
  the exact code units): :func:`original_message` gives it back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from lossless.errors import InputError
from lossless.ports import PreparedMessage
from lossless.records import FilePart, Message, TextPart, ToolPart
from lossless.tokens import TokenCounter

__all__ = [
    "HEARTBEAT_OK",
    "INVALID_UNICODE_KEY",
    "is_heartbeat_ok",
    "message_size",
    "original_message",
    "prepare_messages",
    "repair_unicode",
    "was_repaired",
]

#: Metadata key of a message stored with invalid Unicode replaced: ``{"replaced": n, "original": json}``.
INVALID_UNICODE_KEY = "lossless_invalid_unicode"

HEARTBEAT_OK = "HEARTBEAT_OK"


def is_heartbeat_ok(message: Message) -> bool:
    """An assistant reply that only acknowledges a heartbeat poll."""
    return message.role == "assistant" and message.content.strip() == HEARTBEAT_OK


def _json_strings(value: object) -> Iterator[str]:
    """Every string in a JSON value (keys included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _json_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _json_strings(item)


def _stored_strings(message: Message) -> list[str]:
    """The text the store keeps for a message: its content plus what its parts add to it."""
    content = message.content
    pieces = [content]
    for part in message.parts:
        match part:
            case TextPart(text=text):
                if text is not content and text != content:
                    pieces.append(text)
            case ToolPart():
                pieces += [part.error or "", part.title or "", part.name or "", part.call_id or ""]
                if part.output is not None and part.output is not content and part.output != content:
                    pieces.append(part.output)
                pieces.extend(_json_strings(part.input))
            case FilePart():
                pieces += [part.url or "", part.name or "", part.mime or ""]
            case _:
                pieces.extend(_json_strings(part.to_dict()))
    # Metadata is small and not counted; a lone surrogate in it is still refused, by the store.
    return pieces


def message_size(message: Message, *, exact: bool = False) -> int:
    """UTF-8 bytes the message's text takes in storage; without ``exact``, a cheap upper bound.

    (JSON punctuation around structured values is not counted: the limit is about text.)
    """
    pieces = _stored_strings(message)
    if exact:
        return sum(len(p.encode("utf-8")) for p in pieces)
    return sum(len(p) if p.isascii() else 4 * len(p) for p in pieces)


_SURROGATE = re.compile("[\\ud800-\\udfff]")


def _holds_surrogate(value: object) -> bool:
    if isinstance(value, str):
        return not value.isascii() and _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_holds_surrogate(k) or _holds_surrogate(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_holds_surrogate(v) for v in value)
    return False


def _replace_surrogates(value: Any) -> tuple[Any, int]:
    if isinstance(value, str):
        return _SURROGATE.subn("\ufffd", value) if not value.isascii() else (value, 0)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        total = 0
        for key, item in value.items():
            new_key, in_key = _replace_surrogates(key)
            new_item, in_item = _replace_surrogates(item)
            out[new_key] = new_item
            total += in_key + in_item
        return out, total
    if isinstance(value, list | tuple):
        items = [_replace_surrogates(v) for v in value]
        return [v for v, _ in items], sum(n for _, n in items)
    return value, 0


def repair_unicode(message: Message) -> Message:
    """``message`` itself when its text is valid Unicode; else the storable copy described in the module docstring."""
    pieces = _stored_strings(message)
    if all(p.isascii() or _SURROGATE.search(p) is None for p in pieces) and not _holds_surrogate(message.metadata):
        return message
    data = message.to_dict()
    fixed, replaced = _replace_surrogates(data)
    if not replaced:
        return message
    metadata = dict(fixed.get("metadata") or {})
    metadata[INVALID_UNICODE_KEY] = {"replaced": replaced, "original": json.dumps(data, ensure_ascii=True)}
    fixed["metadata"] = metadata
    return Message.from_dict(fixed)


def was_repaired(message: Message) -> bool:
    """Whether ``message`` was stored with invalid Unicode replaced (see :func:`repair_unicode`)."""
    return bool(message.metadata) and INVALID_UNICODE_KEY in message.metadata  # type: ignore[operator]


def original_message(message: Message) -> Message:
    """The message as the host sent it: invalid code units put back where U+FFFD shows them.

    ``message`` itself when nothing was replaced.  The result holds lone surrogates, so it cannot be
    stored again as is; ``text.encode("utf-8", "surrogateescape")`` turns those that came from
    invalid UTF-8 bytes of a transcript back into the exact bytes.
    """
    if not was_repaired(message):
        return message
    record = message.metadata[INVALID_UNICODE_KEY]  # type: ignore[index]
    text = record.get("original") if isinstance(record, dict) else None
    if not isinstance(text, str):
        raise InputError(f"the {INVALID_UNICODE_KEY} metadata of this message is damaged: no original to restore")
    original = Message.from_dict(json.loads(text))
    if original.created_at is None and message.created_at is not None:  # the time it was stored at
        original = replace(original, created_at=message.created_at)
    return original


def _check(message: Message, limit: int, index: int) -> None:
    """Refuse a message that is too large (one pass over its strings)."""
    pieces = _stored_strings(message)
    estimate = sum(len(p) if p.isascii() else 4 * len(p) for p in pieces)
    if estimate > limit:
        exact = sum(len(p.encode("utf-8", "surrogatepass")) for p in pieces)
        if exact > limit:
            raise InputError(
                f"message {index} is {exact / 1048576:.1f} MiB, more than the {limit / 1048576:.1f} MiB limit "
                "(max_message_bytes / LCM_MAX_MESSAGE_BYTES): split it or raise the limit; nothing was stored"
            )


def prepare_messages(
    messages: Sequence[Message],
    *,
    counter: TokenCounter,
    now: datetime,
    max_message_bytes: int,
    prune_heartbeat_ok: bool = False,
) -> tuple[list[PreparedMessage], int]:
    """Validate and prepare ``messages`` for storage; returns them and the number dropped by policy."""
    prepared: list[PreparedMessage] = []
    dropped = 0
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise InputError(f"message {index} is a {type(message).__name__}, expected lossless.Message")
        if prune_heartbeat_ok and is_heartbeat_ok(message):
            dropped += 1
            continue
        message = repair_unicode(message)
        _check(message, max_message_bytes, index)
        prepared.append(PreparedMessage(message, counter.count(message.content), message.created_at or now))
    return prepared, dropped
