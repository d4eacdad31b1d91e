"""Transcript readers: turn agent session files into messages with stable keys.

Formats (one module each): ``openclaw`` (session JSONL v3, an entry tree),
``pi`` (pi coding-agent JSONL v1/v2), ``claude-code`` (Claude Code project
JSONL, sub-agents included), ``swe-agent`` (``.traj``) and ``openai-chat`` (a
JSON list of chat messages, or JSONL).  :func:`detect_format` recognises a
file from its name and first line; :func:`reader_for` returns the reader.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from lossless.errors import InputError
from lossless.transcripts.base import (
    Entry,
    Event,
    NeedsFullRead,
    ReadContext,
    SessionInfo,
    Skipped,
    TranscriptReader,
)
from lossless.transcripts.claude_code import ClaudeCodeReader
from lossless.transcripts.openai_chat import OpenAIChatReader
from lossless.transcripts.openclaw import OpenClawReader
from lossless.transcripts.pi import PiReader
from lossless.transcripts.swe_agent import SWEAgentReader

__all__ = [
    "FORMATS",
    "Entry",
    "Event",
    "NeedsFullRead",
    "ReadContext",
    "SessionInfo",
    "Skipped",
    "TranscriptReader",
    "detect_format",
    "reader_for",
    "why_unrecognised",
]

_READERS: dict[str, TranscriptReader] = {
    r.format: r for r in (OpenClawReader(), PiReader(), ClaudeCodeReader(), SWEAgentReader(), OpenAIChatReader())
}
FORMATS: tuple[str, ...] = tuple(_READERS)

#: File name suffixes a folder import looks at.
SUFFIXES = (".jsonl", ".traj", ".json")
_CLAUDE_TYPES = {
    "user",
    "assistant",
    "summary",
    "system",
    "progress",
    "file-history-snapshot",
    "queue-operation",
}
_HEAD_LIMIT = 8 * 1024 * 1024


def reader_for(format_name: str) -> TranscriptReader:
    try:
        return _READERS[format_name]
    except KeyError:
        raise InputError(f"unknown transcript format {format_name!r}: use one of {', '.join(FORMATS)}") from None


def _records(stream: IO[bytes], limit: int = 50) -> Iterator[object]:
    """The first ``limit`` non-blank lines, parsed (None for a line that is not JSON)."""
    seen = 0
    while seen < limit:
        line = stream.readline(_HEAD_LIMIT)
        if not line:
            return
        if not line.strip():
            continue
        seen += 1
        try:
            yield json.loads(line.decode("utf-8-sig", "surrogateescape"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            yield None


def _classify_record(record: object) -> str | None:
    if not isinstance(record, dict):
        return None
    kind = record.get("type")
    if kind == "session":
        return "openclaw" if record.get("version") == 3 else "pi"
    if kind in _CLAUDE_TYPES and ("uuid" in record or "sessionId" in record or kind == "file-history-snapshot"):
        return "claude-code"
    if kind == "summary" and "leafUuid" in record:  # Claude Code titles can come first
        return "claude-code"
    if kind == "message" and "id" in record and "parentId" in record:
        return "openclaw"
    if kind == "message" and isinstance(record.get("message"), dict):
        return "pi"
    if "role" in record and "type" not in record:
        return "openai-chat"
    return None


def detect_format(path: str | Path) -> str | None:
    """The format of the transcript at ``path``, or None when it is not one lossless can read."""
    path = Path(path)
    if path.suffix == ".traj":
        return "swe-agent"
    try:
        with path.open("rb") as stream:
            if path.suffix == ".json":
                head = stream.read(_HEAD_LIMIT).lstrip(b"\xef\xbb\xbf \t\r\n")
                if head.startswith(b"["):
                    return "openai-chat"
                if head.startswith(b"{"):
                    if b'"history"' in head and b'"trajectory"' in head:
                        return "swe-agent"
                    if b'"messages"' in head:
                        return "openai-chat"
                return None
            for record in _records(stream):
                found = _classify_record(record)
                if found is not None:
                    return found
            return None
    except OSError:
        return None


def why_unrecognised(path: str | Path) -> str:
    """A short reason why :func:`detect_format` found no format (for error messages)."""
    path = Path(path)
    try:
        with path.open("rb") as stream:
            for number, line in enumerate(stream, 1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line.decode("utf-8-sig"))
                except UnicodeDecodeError:
                    return f"line {number} is not valid UTF-8"
                except ValueError as exc:
                    return f"line {number} is not valid JSON ({exc})"
                except RecursionError:
                    return f"line {number} nests lists and objects too deep to be read"
                if not isinstance(value, dict):
                    return f"line {number} is a JSON {type(value).__name__}, not an object"
                return f"its records (e.g. line {number}: keys {', '.join(sorted(value)[:6])}) match no known format"
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    return "it is empty"
