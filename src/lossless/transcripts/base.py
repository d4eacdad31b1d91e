"""What every transcript reader shares: the events it yields, and a strict, streaming JSONL reader.

Invariants:

* Readers never touch the store.  They turn bytes into :class:`SessionInfo`,
  :class:`Entry` and :class:`Skipped` events; the bootstrap module decides
  what to store.
* A file may hold more than one conversation: events with a ``thread`` belong
  to a sub-agent conversation of the file's session (``<session>/agent-<thread>``,
  whose parent is the session), as sub-agent files under ``subagents/`` do.
* Nothing is dropped silently: every record a reader does not turn into a
  message is a :class:`Skipped` event with its type and its size in bytes, so an
  import can report what it left out.
* Each :class:`Entry` has a stable ``key`` derived from the transcript itself
  (an entry id, or the line's number and hash), so reading the same file twice yields
  the same keys and re-importing it stores nothing new.
* Corrupt input raises :class:`TranscriptError` with the file and the 1-based
  line: a line that is not JSON, not UTF-8, holds a raw NUL byte, is not a JSON
  object, or is longer than the size limit.  Unknown *entry types* are not
  errors: they are reported as :class:`Skipped` and reading goes on.
* A final line without a newline that does not parse is treated as still
  being written: reading stops before it, and ``end_offset`` of the last entry
  tells the caller where to resume.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any, Protocol

from lossless.errors import InputError, TranscriptError
from lossless.records import JSONValue, Message, parse_timestamp

__all__ = [
    "Entry",
    "Event",
    "JsonLine",
    "NeedsFullRead",
    "ReadContext",
    "SessionInfo",
    "Skipped",
    "TranscriptReader",
    "iter_jsonl",
    "line_number_at",
    "load_document",
    "located",
    "mapping",
    "timestamp_or",
]


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What a transcript says about its session.  Later events may refine earlier ones."""

    session_id: str | None = None
    title: str | None = None
    parent_session_id: str | None = None
    started_at: datetime | None = None
    metadata: dict[str, JSONValue] = field(default_factory=dict)
    #: Set: this describes the sub-agent conversation ``thread`` of the file's session, not the session.
    thread: str | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    """One message read from a transcript, with its stable key and where it ended in the file."""

    key: str
    message: Message
    line: int | None
    end_offset: int
    #: Set: the message belongs to the sub-agent conversation ``thread`` of the file's session.
    thread: str | None = None


@dataclass(frozen=True, slots=True)
class Skipped:
    """A record that is not a conversation message (telemetry, snapshots, an unknown type …)."""

    line: int | None
    kind: str
    end_offset: int
    #: For tree-shaped formats: the id of a skipped entry that is on the conversation's path.
    key: str | None = None
    #: The record's size in bytes (its line, for JSONL), reported by the import.
    size: int = 0


Event = SessionInfo | Entry | Skipped


class NeedsFullRead(Exception):
    """Raised by an incremental read that cannot continue from the saved offset (e.g. a branch)."""


@dataclass(frozen=True, slots=True)
class ReadContext:
    """Where to start reading and what the previous read ended with."""

    path: str
    start_offset: int = 0
    last_entry_key: str | None = None
    max_line_bytes: int = 64 * 1024 * 1024
    #: Used for entries without a timestamp of their own (e.g. the file's mtime).
    fallback_time: datetime | None = None


class TranscriptReader(Protocol):
    """Reads one transcript format."""

    #: Format name, as shown to users and stored as the conversation's ``source``.
    format: str
    #: True when the format can resume from a byte offset (append-only JSONL).
    incremental: bool

    def read(self, stream: IO[bytes], context: ReadContext) -> Iterator[Event]:
        """Yield the transcript's events from ``context.start_offset`` on."""
        ...


@dataclass(frozen=True, slots=True)
class JsonLine:
    line: int
    start_offset: int
    end_offset: int
    raw: bytes
    value: dict[str, Any]


def line_number_at(stream: IO[bytes], offset: int) -> int:
    """1-based line number of the byte at ``offset`` (reads the file's prefix; for error messages)."""
    position = stream.tell()
    stream.seek(0)
    remaining, newlines = offset, 0
    while remaining > 0:
        block = stream.read(min(remaining, 1 << 20))
        if not block:
            break
        newlines += block.count(b"\n")
        remaining -= len(block)
    stream.seek(position)
    return newlines + 1


def iter_jsonl(stream: IO[bytes], context: ReadContext) -> Iterator[JsonLine]:
    """Yield each complete, non-blank line of a JSONL file as a parsed object (see module invariants)."""
    stream.seek(context.start_offset)
    offset = context.start_offset
    line_no = 1 if offset == 0 else line_number_at(stream, offset)
    limit = context.max_line_bytes
    while True:
        raw = stream.readline(limit + 1)
        if not raw:
            return
        start, offset = offset, offset + len(raw)
        if len(raw) > limit and not raw.endswith(b"\n"):
            raise TranscriptError(
                context.path,
                line_no,
                f"line is over {limit / 1048576:.0f} MiB, too long for the message size limit "
                "(max_message_bytes / LCM_MAX_MESSAGE_BYTES): raise the limit or split the message",
            )
        complete = raw.endswith(b"\n")
        stripped = raw.strip()
        if stripped:
            value = _parse_line(stripped, context.path, line_no, complete)
            if value is None:  # an unfinished last line: stop before it
                return
            yield JsonLine(line_no, start, offset, stripped, value)
        line_no += 1


def _parse_line(data: bytes, path: str, line: int, complete: bool) -> dict[str, Any] | None:
    """The line's JSON object; None for an unfinished last line that does not parse yet."""
    try:
        if b"\x00" in data:
            raise TranscriptError(path, line, "contains a raw NUL byte, which JSON does not allow")
        # Invalid UTF-8 bytes become lone surrogates (U+DC80…U+DCFF): a broken byte inside a string is
        # stored as U+FFFD with the exact bytes kept (lossless.ingest.repair_unicode); one outside a
        # string is still a JSON error naming the line.
        text = data.decode("utf-8", "surrogateescape")
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TranscriptError(path, line, f"is not valid JSON: {exc.msg} (column {exc.colno})") from exc
        except RecursionError:
            raise TranscriptError(path, line, "nests lists and objects too deep to be read") from None
    except TranscriptError:
        if not complete:
            return None  # still being written: the next read sees the whole line
        raise
    if not isinstance(value, dict):
        raise TranscriptError(path, line, f"is a JSON {type(value).__name__}, expected an object")
    return value


def load_document(stream: IO[bytes], path: str) -> tuple[Any, int]:
    """A whole-file JSON document and its size in bytes; corrupt files raise :class:`TranscriptError`."""
    stream.seek(0)
    raw = stream.read()
    try:
        return json.loads(raw.decode("utf-8-sig", "surrogateescape")), len(raw)  # see _parse_line
    except json.JSONDecodeError as exc:
        raise TranscriptError(path, exc.lineno, f"is not valid JSON: {exc.msg} (column {exc.colno})") from exc
    except RecursionError:
        raise TranscriptError(path, None, "nests lists and objects too deep to be read") from None


def timestamp_or(value: object, fallback: datetime | None, *, path: str, line: int | None) -> datetime | None:
    """Parse a transcript timestamp (ISO text or epoch); ``fallback`` when absent, an error when bad."""
    if value is None or value == "":
        return fallback
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise TranscriptError(path, line, f"timestamp {value!r} is neither text nor a number")
    try:
        return parse_timestamp(value)
    except InputError as exc:
        raise TranscriptError(path, line, str(exc)) from exc


@contextmanager
def located(path: str, line: int | None) -> Iterator[None]:
    """Re-raise an :class:`InputError` from building a message as a :class:`TranscriptError` at ``path:line``."""
    try:
        yield
    except TranscriptError:
        raise
    except InputError as exc:
        raise TranscriptError(path, line, str(exc)) from exc


def mapping(value: object) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else an empty one (for optional nested objects)."""
    return value if isinstance(value, Mapping) else {}
