"""Ingest rules: what gets stored, with which token count and timestamp.  Pure; no I/O.

Invariants:

* Heartbeat polls are never stored; with ``prune_heartbeat_ok`` neither are
  assistant replies that are exactly ``HEARTBEAT_OK``.
* A message larger than ``max_message_bytes`` is refused with an
  :class:`InputError` that names its size and the setting; nothing of the
  batch is stored (the caller checks the whole batch before writing).
* Every prepared message has a token count from the configured counter and a
  timezone-aware timestamp: its own, or the ingest time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime

from lossless.errors import InputError
from lossless.ports import PreparedMessage
from lossless.records import FilePart, Message, TextPart, ToolPart
from lossless.tokens import TokenCounter

__all__ = ["HEARTBEAT_OK", "is_heartbeat_ok", "message_size", "prepare_messages"]

HEARTBEAT_OK = "HEARTBEAT_OK"


def is_heartbeat_ok(message: Message) -> bool:
    """An assistant reply that only acknowledges a heartbeat poll."""
    return message.role == "assistant" and message.content.strip() == HEARTBEAT_OK


def _stored_strings(message: Message) -> list[str]:
    """The text the store keeps for a message: its content plus what its parts add to it."""
    content = message.content
    pieces = [content]
    for part in message.parts:
        match part:
            case TextPart(text=text):
                if text != content:
                    pieces.append(text)
            case ToolPart():
                pieces += [part.error or "", part.title or "", part.name or "", part.call_id or ""]
                if part.output is not None and part.output != content:
                    pieces.append(part.output)
                if part.input is not None:
                    pieces.append(json.dumps(part.input, ensure_ascii=False))
            case FilePart():
                pieces += [part.url or "", part.name or "", part.mime or ""]
            case _:
                pieces.append(json.dumps(part.to_dict(), ensure_ascii=False))
    return pieces


def message_size(message: Message, *, exact: bool = False) -> int:
    """UTF-8 bytes the message takes in storage; without ``exact``, a cheap upper bound."""
    pieces = _stored_strings(message)
    if exact:
        return sum(len(p.encode("utf-8", "surrogatepass")) for p in pieces)
    return sum(len(p) if p.isascii() else 4 * len(p) for p in pieces)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check(message: Message, limit: int, index: int) -> None:
    """Refuse a message that is too large or holds text SQLite cannot store (one pass over its strings)."""
    pieces = _stored_strings(message)
    estimate = 0
    for piece in pieces:
        if piece.isascii():
            estimate += len(piece)
            continue
        estimate += 4 * len(piece)
        found = _SURROGATE.search(piece)
        if found:
            raise InputError(
                f"message {index} contains a lone surrogate (U+{ord(found.group()):04X}) at character "
                f"{found.start()}, which is not valid Unicode and cannot be stored: fix the source text"
            )
    if estimate > limit:
        exact = sum(len(p.encode("utf-8")) for p in pieces)
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
        _check(message, max_message_bytes, index)
        prepared.append(PreparedMessage(message, counter.count(message.content), message.created_at or now))
    return prepared, dropped
