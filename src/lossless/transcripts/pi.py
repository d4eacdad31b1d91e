"""pi coding-agent sessions, JSONL version 1 (and 2): a header line, then a linear list of entries.

Format: ``{"type":"session","id",…}`` then ``{"type":"message","timestamp",
"message":{"role",…}}`` lines, plus ``compaction`` (``summary``,
``tokensBefore``, ``firstKeptEntryIndex``), ``model_change`` and
``thinking_level_change`` entries.  Message roles are ``user``,
``assistant``, ``toolResult``, ``bashExecution`` and ``hookMessage``/``custom``.

Invariants: v1/v2 entries have no ids, so an entry's key is its position
and its bytes: ``pi:<line number>:<hash of the raw line>`` — the same on every
re-read of the file (whole or resumed at an offset, which counts the lines
before it), unchanged for the first lines of a file that only grew, and
different for two byte-identical lines at different positions (two messages,
not one).  (Files whose entries carry ids, session v3, are read by the
OpenClaw reader.)  Roles map to ours (``toolResult`` → ``tool``; a user-run
shell command → a ``user`` message holding a tool part; host-injected
messages → synthetic user text) and the host role is kept in the message
metadata.  An unknown role is an error; an unknown entry type is skipped.

:func:`pi_message` is shared with the OpenClaw reader, whose messages have the
same shape.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import IO, Any

from lossless.errors import TranscriptError
from lossless.records import CompactionPart, JSONValue, Message, Part, Role, TextPart, ToolPart
from lossless.transcripts.base import (
    Entry,
    Event,
    ReadContext,
    SessionInfo,
    Skipped,
    iter_jsonl,
    located,
    timestamp_or,
)
from lossless.transcripts.blocks import content_to_parts, tool_output_text

__all__ = ["PiReader", "pi_compaction", "pi_message"]

_ASSISTANT_META = ("api", "provider", "model", "stopReason", "errorMessage", "usage", "responseId")


def _pick(data: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, JSONValue] | None:
    picked = {k: data[k] for k in keys if data.get(k) is not None}
    return picked or None


def pi_message(data: Any, *, when: datetime | None, key: str, path: str, line: int | None) -> Message:
    """Our message for a pi/OpenClaw message object (``{"role", "content", …}``)."""
    with located(path, line):
        return _pi_message(data, when=when, key=key, path=path, line=line)


def _pi_message(data: Any, *, when: datetime | None, key: str, path: str, line: int | None) -> Message:
    if not isinstance(data, Mapping):
        raise TranscriptError(path, line, "message entry has no 'message' object")
    role = data.get("role")
    host_meta: dict[str, JSONValue] = {}
    our_role: Role
    parts: list[Part]
    if role in ("user", "assistant", "system"):
        our_role = role
        parts = content_to_parts(data.get("content"))
        if role == "assistant":
            host_meta.update(_pick(data, _ASSISTANT_META) or {})
    elif role in ("toolResult", "tool"):
        our_role = "tool"
        text, attachments = tool_output_text(data.get("content"))
        failed = bool(data.get("isError"))
        details = data.get("details")
        parts = [
            ToolPart(
                call_id=data.get("toolCallId") or data.get("tool_call_id"),
                name=data.get("toolName"),
                output=None if failed else text,
                error=text if failed else None,
                status="error" if failed else "completed",
                metadata={"details": details} if details is not None else None,
            ),
            *attachments,
        ]
    elif role == "bashExecution":
        our_role = "user"
        exit_code = data.get("exitCode")
        failed = exit_code not in (0, None) or bool(data.get("cancelled"))
        output = data.get("output") if isinstance(data.get("output"), str) else ""
        parts = [
            ToolPart(
                name="bash",
                input={"command": data.get("command")},
                output=None if failed else output,
                error=output if failed else None,
                status="error" if failed else "completed",
                metadata=_pick(data, ("exitCode", "cancelled", "truncated", "fullOutputPath")),
            )
        ]
    elif role in ("hookMessage", "custom"):
        our_role = "user"
        parts = [
            TextPart(p.text, synthetic=True, metadata=p.metadata) if isinstance(p, TextPart) else p
            for p in content_to_parts(data.get("content"))
        ]
        host_meta.update(_pick(data, ("customType", "display", "details")) or {})
    else:
        raise TranscriptError(
            path,
            line,
            f"unknown message role {role!r}: expected user, assistant, system, toolResult, "
            "bashExecution, hookMessage or custom",
        )
    if role != our_role:
        host_meta["host_role"] = role
    return Message.from_parts(our_role, parts, created_at=when, event_key=key, metadata=host_meta or None)


def pi_compaction(data: Mapping[str, Any], *, when: datetime | None, key: str) -> Message:
    """A host compaction entry as a message carrying a compaction part."""
    extra = _pick(data, ("firstKeptEntryIndex", "firstKeptEntryId", "details"))
    tokens = data.get("tokensBefore")
    summary = data.get("summary")
    part = CompactionPart(
        summary=summary if isinstance(summary, str) else None,
        tokens_before=tokens if isinstance(tokens, int) else None,
        metadata=extra,
    )
    return Message.from_parts("user", [part], created_at=when, event_key=key, metadata={"host_role": "compaction"})


def entry_key(line: int, raw: bytes) -> str:
    """``pi:<line>:<hash of the raw line>``: the entry's position and bytes (see the module invariants)."""
    return f"pi:{line}:{hashlib.sha256(raw).hexdigest()[:32]}"


class PiReader:
    """pi session JSONL v1/v2 (linear; no entry ids)."""

    format = "pi"
    incremental = True

    def read(self, stream: IO[bytes], context: ReadContext) -> Iterator[Event]:
        last_time = context.fallback_time
        for item in iter_jsonl(stream, context):
            record = item.value
            kind = record.get("type")
            when = timestamp_or(record.get("timestamp"), last_time, path=context.path, line=item.line)
            last_time = when or last_time
            if kind == "session":
                yield SessionInfo(
                    session_id=_str(record.get("id")),
                    started_at=when,
                    parent_session_id=None,
                    metadata=_pick(record, ("cwd", "provider", "modelId", "thinkingLevel", "branchedFrom", "version"))
                    or {},
                )
                yield Skipped(item.line, "session", item.end_offset, size=len(item.raw))
            elif kind == "message":
                key = entry_key(item.line, item.raw)
                message = pi_message(record.get("message"), when=when, key=key, path=context.path, line=item.line)
                yield Entry(key, message, item.line, item.end_offset)
            elif kind == "compaction":
                key = entry_key(item.line, item.raw)
                with located(context.path, item.line):
                    message = pi_compaction(record, when=when, key=key)
                yield Entry(key, message, item.line, item.end_offset)
            else:
                yield Skipped(item.line, str(kind), item.end_offset, size=len(item.raw))


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
