"""Plain OpenAI-style chat messages: a JSON list, ``{"messages": [...]}``, or JSONL with one message per line.

Each message is ``{"role", "content", "name"?, "tool_calls"?, "tool_call_id"?}``
(``content`` a string, a list of content parts, or null).  ``developer`` is read
as ``system`` and the legacy ``function`` role as ``tool``.  The bare
``{"role", "content": [blocks]}`` lines of legacy OpenClaw files are read the
same way.

Invariants: a message's key is ``chat:<index>:<hash of the message>``, so the
same file read twice gives the same keys and a list that only grew keeps the
keys of its first messages.  A JSON document is read whole (it cannot be
resumed from an offset); JSONL can.  Errors name the message index (JSON) or
the line (JSONL).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from lossless.errors import TranscriptError
from lossless.records import JSONValue, Message, Part, Role, ToolPart, canonical_json
from lossless.transcripts.base import (
    Entry,
    Event,
    ReadContext,
    SessionInfo,
    iter_jsonl,
    load_document,
    located,
    mapping,
    timestamp_or,
)
from lossless.transcripts.blocks import block_to_parts, content_to_parts, tool_output_text

__all__ = ["OpenAIChatReader", "chat_message"]

_ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "function": "tool",
}
_KEEP = ("name", "refusal", "id", "model")


def chat_message(data: Any, *, index: int, when: datetime | None, where: str, path: str, line: int | None) -> Message:
    """Our message for one chat message; ``where`` locates it in errors (e.g. ``messages[3]``)."""
    if not isinstance(data, Mapping):
        raise TranscriptError(path, line, f"{where} is not a JSON object")
    role = data.get("role")
    if role not in _ROLES:
        raise TranscriptError(path, line, f"{where}: unknown role {role!r}: expected one of {', '.join(_ROLES)}")
    ours = _ROLES[role]
    key = f"chat:{index}:{hashlib.sha256(canonical_json(data).encode('utf-8', 'surrogatepass')).hexdigest()[:24]}"
    with located(path, line):
        parts: list[Part]
        if ours == "tool":
            text, attachments = tool_output_text(data.get("content"))
            call_id = data.get("tool_call_id")
            parts = [
                ToolPart(call_id=call_id, name=data.get("name"), output=text, status="completed"),
                *attachments,
            ]
        else:
            parts = content_to_parts(data.get("content"))
        for call in data.get("tool_calls") or ():
            if isinstance(call, Mapping):
                function = mapping(call.get("function"))
                block = {"type": "function_call", "call_id": call.get("id"), **function}
                parts.extend(block_to_parts(block))
        legacy = data.get("function_call")
        if isinstance(legacy, Mapping):
            parts.extend(block_to_parts({"type": "function_call", **legacy}))
        meta: dict[str, JSONValue] = {k: data[k] for k in _KEEP if data.get(k) is not None and ours != "tool"}
        if role != ours:
            meta["host_role"] = role
        return Message.from_parts(ours, parts, created_at=when, event_key=key, metadata=meta or None)


def _when(data: Any, fallback: datetime | None, path: str, line: int | None) -> datetime | None:
    if not isinstance(data, Mapping):
        return fallback
    raw = data.get("created_at", data.get("timestamp", data.get("created")))
    return timestamp_or(raw, fallback, path=path, line=line)


class OpenAIChatReader:
    """OpenAI-style chat message lists (JSON or JSONL)."""

    format = "openai-chat"
    incremental = True  # for JSONL; a .json document is always read whole

    def read(self, stream: IO[bytes], context: ReadContext) -> Iterator[Event]:
        stream.seek(0)
        head = stream.read(1)
        while head in (b" ", b"\n", b"\r", b"\t", b"\xef", b"\xbb", b"\xbf"):
            head = stream.read(1)
        if head == b"[" or (head == b"{" and Path(context.path).suffix == ".json"):
            yield from self._read_document(stream, context)
        else:
            yield from self._read_lines(stream, context)

    def _read_lines(self, stream: IO[bytes], context: ReadContext) -> Iterator[Event]:
        last = context.fallback_time
        for item in iter_jsonl(stream, context):
            last = _when(item.value, last, context.path, item.line) or last
            # The line number (not a running count) is part of the key, so a read resumed mid-file
            # gives the same keys as a full read.
            message = chat_message(
                item.value,
                index=item.line,
                when=last,
                where=f"line {item.line}",
                path=context.path,
                line=item.line,
            )
            yield Entry(message.event_key or "", message, item.line, item.end_offset)

    def _read_document(self, stream: IO[bytes], context: ReadContext) -> Iterator[Event]:
        document, size = load_document(stream, context.path)
        messages: Any = document
        if isinstance(document, Mapping):
            messages = document.get("messages")
            session = document.get("id") or document.get("session_id")
            title = document.get("title")
            yield SessionInfo(
                session_id=session if isinstance(session, str) else None,
                title=title if isinstance(title, str) else None,
            )
        if not isinstance(messages, list):
            raise TranscriptError(context.path, None, "expected a JSON list of messages or an object with 'messages'")
        last = context.fallback_time
        for index, data in enumerate(messages):
            last = _when(data, last, context.path, None) or last
            message = chat_message(
                data, index=index, when=last, where=f"messages[{index}]", path=context.path, line=None
            )
            yield Entry(message.event_key or "", message, None, size)
