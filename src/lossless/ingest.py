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
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
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
