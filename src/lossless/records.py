"""Values: the frozen dataclasses everything else passes around.

Invariants:

* Values do no I/O and hold no connections.  A :class:`Message` is what a caller
  hands in (no id); a :class:`MessageRecord` is what the store hands back (id,
  sequence number, token count).  Identity belongs to the store.
* Every timestamp is timezone-aware and normalised to UTC.  Naive datetimes are
  refused: guessing their zone is how UTC-as-local-time bugs start.  On disk
  timestamps are fixed-width ISO-8601 strings ending in ``Z``
  (:func:`format_timestamp`), so they sort correctly as text.
* A message always has at least one part unless its content is empty, and its
  ``content`` is the flattened, searchable text of its parts
  (:func:`render_parts`) unless the caller supplied its own.
* Parts (:mod:`lossless.parts`) are re-exported here, so every value can be
  imported from one place.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import PurePath
from typing import Any, Literal, get_args

from lossless.errors import InputError
from lossless.parts import (
    PART_TYPES,
    AgentPart,
    CompactionPart,
    FilePart,
    JSONValue,
    Part,
    PartType,
    PatchPart,
    ReasoningPart,
    RetryPart,
    SnapshotPart,
    StepFinishPart,
    StepStartPart,
    SubtaskPart,
    TextPart,
    ToolPart,
    ToolStatus,
    freeze_meta,
    is_part,
    part_from_dict,
    render_parts,
)

__all__ = [
    "COMPACTION_MODES",
    "COMPACTION_TRIGGERS",
    "FILE_ORIGINS",
    "PART_TYPES",
    "ROLES",
    "AgentPart",
    "BootstrapState",
    "CompactionEvent",
    "CompactionMode",
    "CompactionPart",
    "CompactionTrigger",
    "ContextEntry",
    "ContextItem",
    "ContextRow",
    "Conversation",
    "FileOrigin",
    "FilePart",
    "Grant",
    "IngestResult",
    "JSONValue",
    "LargeFile",
    "Message",
    "MessageRecord",
    "Part",
    "PartType",
    "PatchPart",
    "ReasoningPart",
    "RetryPart",
    "Role",
    "SnapshotPart",
    "StepFinishPart",
    "StepStartPart",
    "SubtaskPart",
    "Summary",
    "SummaryKind",
    "SummaryLevel",
    "TextPart",
    "ToolPart",
    "ToolStatus",
    "canonical_json",
    "content_hash",
    "format_timestamp",
    "parse_timestamp",
    "part_from_dict",
    "render_parts",
    "utcnow",
]


Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[Role, ...] = get_args(Role)

SummaryKind = Literal["leaf", "condensed"]
SummaryLevel = Literal["normal", "aggressive", "fallback"]
CompactionMode = Literal["incremental", "full", "until_under"]
COMPACTION_MODES: tuple[CompactionMode, ...] = get_args(CompactionMode)
CompactionTrigger = Literal["threshold", "manual", "maintenance"]
COMPACTION_TRIGGERS: tuple[CompactionTrigger, ...] = get_args(CompactionTrigger)

#: Longest accepted event key.  Keys are identifiers (entry ids, hashes), not content.
MAX_EVENT_KEY_LENGTH = 512


# ----------------------------------------------------------------- time


def utcnow() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def _aware(value: datetime, what: str) -> datetime:
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise InputError(
            f"{what} must be timezone-aware, got the naive datetime {value.isoformat()!r}: "
            "pass e.g. datetime.now(timezone.utc) or attach a tzinfo"
        )
    return value.astimezone(UTC)


def jsonable(value: Any) -> Any:
    """``value`` with dataclasses, datetimes, paths and tuples turned into JSON-friendly values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def format_timestamp(value: datetime) -> str:
    """Fixed-width UTC ISO-8601 text (``2026-02-07T00:13:58.938000Z``) that sorts correctly."""
    if value.tzinfo is not UTC:
        value = _aware(value, "timestamp")
    return value.isoformat(timespec="microseconds")[:-6] + "Z"  # drop "+00:00"


def parse_timestamp(value: str | int | float) -> datetime:
    """Parse ISO-8601 text (``Z`` or an offset; naive text is read as UTC) or epoch seconds/millis.

    Raises :class:`InputError` for anything else.
    """
    if isinstance(value, bool):
        raise InputError(f"not a timestamp: {value!r}")
    if isinstance(value, int | float):
        seconds = value / 1000.0 if abs(value) >= 1e11 else float(value)
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise InputError(f"timestamp out of range: {value!r}") from exc
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError as exc:
        raise InputError(f"not an ISO-8601 timestamp: {value!r}") from exc
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


# ----------------------------------------------------------------- JSON helpers


def canonical_json(value: object) -> str:
    """Deterministic JSON (sorted keys, no spaces, UTF-8 kept) for hashing and comparison."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(*pieces: str) -> str:
    """Hex SHA-256 over the pieces, separated unambiguously."""
    digest = hashlib.sha256()
    for piece in pieces:
        data = piece.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


# ----------------------------------------------------------------- messages


def _check_role(role: object) -> Role:
    if role not in ROLES:
        raise InputError(f"unknown role {role!r}: expected one of {', '.join(ROLES)}")
    return role


def _check_event_key(key: object) -> None:
    if key is None:
        return
    if not isinstance(key, str) or not key or len(key) > MAX_EVENT_KEY_LENGTH:
        raise InputError(
            f"event_key must be a non-empty string of at most {MAX_EVENT_KEY_LENGTH} characters, got {key!r:.80}"
        )


@dataclass(frozen=True, slots=True)
class Message:
    """A message as a caller hands it in: no id, no sequence number.

    ``Message("user", "hello")`` is a one-text-part message; use
    :meth:`from_parts` to build one from structured parts (the content is then
    rendered from them).  ``event_key`` makes ingest idempotent: a message whose
    key is already stored in the conversation is skipped, never duplicated.
    """

    role: Role
    content: str
    parts: tuple[Part, ...] = ()
    created_at: datetime | None = None
    event_key: str | None = None
    metadata: dict[str, JSONValue] | None = None

    def __post_init__(self) -> None:
        _check_role(self.role)
        if not isinstance(self.content, str):
            raise InputError(f"message content must be a string, got {type(self.content).__name__}")
        parts = tuple(self.parts)
        for part in parts:
            if not is_part(part):
                raise InputError(f"message parts must be Part values, got {type(part).__name__}")
        if not parts and self.content:
            parts = (TextPart(self.content),)
        object.__setattr__(self, "parts", parts)
        if self.created_at is not None:
            object.__setattr__(self, "created_at", _aware(self.created_at, "created_at"))
        _check_event_key(self.event_key)
        object.__setattr__(self, "metadata", freeze_meta(self.metadata, "message metadata"))

    @classmethod
    def from_parts(cls, role: Role, parts: Sequence[Part], **kwargs: Any) -> Message:
        """A message whose content is rendered from ``parts`` (see :func:`render_parts`)."""
        parts = tuple(parts)
        return cls(role, render_parts(parts), parts, **kwargs)

    @classmethod
    def user(cls, text: str, **kwargs: Any) -> Message:
        return cls("user", text, **kwargs)

    @classmethod
    def assistant(cls, text: str, **kwargs: Any) -> Message:
        return cls("assistant", text, **kwargs)

    @classmethod
    def system(cls, text: str, **kwargs: Any) -> Message:
        return cls("system", text, **kwargs)

    @classmethod
    def tool_result(
        cls, call_id: str, output: str, *, name: str | None = None, is_error: bool = False, **kwargs: Any
    ) -> Message:
        """The result of tool call ``call_id`` (role ``tool``)."""
        part = ToolPart(
            call_id=call_id,
            name=name,
            output=None if is_error else output,
            error=output if is_error else None,
            status="error" if is_error else "completed",
        )
        return cls.from_parts("tool", [part], **kwargs)

    def to_dict(self) -> dict[str, JSONValue]:
        out: dict[str, JSONValue] = {
            "role": self.role,
            "content": self.content,
            "parts": [p.to_dict() for p in self.parts],
        }
        if self.created_at is not None:
            out["created_at"] = format_timestamp(self.created_at)
        if self.event_key is not None:
            out["event_key"] = self.event_key
        if self.metadata:
            out["metadata"] = self.metadata
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Inverse of :meth:`to_dict`.  ``parts`` may be omitted for plain text messages."""
        if not isinstance(data, Mapping):
            raise InputError(f"a message must be an object, got {type(data).__name__}")
        unknown = set(data) - {"role", "content", "parts", "created_at", "event_key", "metadata"}
        if unknown:
            raise InputError(f"message has unknown field(s): {', '.join(sorted(unknown))}")
        parts = tuple(part_from_dict(p) for p in data.get("parts") or ())
        created = data.get("created_at")
        content = data.get("content")
        if content is None:
            content = render_parts(parts)
        return cls(
            _check_role(data.get("role")),
            content,
            parts,
            created_at=parse_timestamp(created) if created is not None else None,
            event_key=data.get("event_key"),
            metadata=data.get("metadata"),
        )


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """A stored message: a :class:`Message` plus the identity the store gave it."""

    id: int
    conversation_id: int
    seq: int
    role: Role
    content: str
    parts: tuple[Part, ...]
    token_count: int
    created_at: datetime
    event_key: str | None = None
    metadata: dict[str, JSONValue] | None = None

    def to_message(self) -> Message:
        return Message(
            self.role,
            self.content,
            self.parts,
            created_at=self.created_at,
            event_key=self.event_key,
            metadata=self.metadata,
        )

    def to_dict(self) -> dict[str, JSONValue]:
        out = self.to_message().to_dict()
        out.update(id=self.id, conversation_id=self.conversation_id, seq=self.seq, token_count=self.token_count)
        return out


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What an ingest call did.

    ``stored`` are the newly written messages (in order); ``duplicates`` counts
    messages skipped because their ``event_key`` was already stored (or
    repeated within the batch); ``skipped`` counts messages dropped by policy
    (heartbeats, ignored or stateless sessions) and ``skip_reason`` says why.
    """

    conversation_id: int | None
    stored: tuple[MessageRecord, ...] = ()
    duplicates: int = 0
    skipped: int = 0
    skip_reason: str | None = None
    #: Messages stored with invalid Unicode (lone surrogates) shown as U+FFFD; the exact original
    #: is kept with each (``engine.restore_message`` gives it back).
    repaired: int = 0

    @property
    def stored_count(self) -> int:
        return len(self.stored)

    def to_dict(self) -> dict[str, JSONValue]:
        """The JSON every adapter answers an ingest with (``lcm``, HTTP, MCP; docs/api.md)."""
        return {
            "conversation_id": self.conversation_id,
            "stored": self.stored_count,
            "message_ids": [m.id for m in self.stored],
            "duplicates": self.duplicates,
            "skipped": self.skipped,
            "skip_reason": self.skip_reason,
            "repaired": self.repaired,
        }


# ----------------------------------------------------------------- conversations and the DAG


@dataclass(frozen=True, slots=True)
class Conversation:
    """One agent session's history.  ``(agent_id, session_id)`` is unique."""

    id: int
    agent_id: str
    session_id: str
    created_at: datetime
    updated_at: datetime
    session_key: str | None = None
    title: str | None = None
    source: str | None = None
    parent_id: int | None = None
    active: bool = True
    archived_at: datetime | None = None
    metadata: dict[str, JSONValue] | None = None

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "id": self.id,
            "agent_id": self.agent_id,
            "session_id": self.session_id,
            "session_key": self.session_key,
            "title": self.title,
            "source": self.source,
            "parent_id": self.parent_id,
            "active": self.active,
            "archived_at": format_timestamp(self.archived_at) if self.archived_at else None,
            "created_at": format_timestamp(self.created_at),
            "updated_at": format_timestamp(self.updated_at),
            "metadata": self.metadata,
        }


@dataclass(frozen=True, slots=True)
class Summary:
    """A node of the summary DAG.

    A ``leaf`` (depth 0) summarises a run of messages; a ``condensed`` summary
    (depth ≥ 1) summarises a run of summaries one level down (its *parents* in
    the reference schema's naming: the nodes it was made from).

    Counts cover the whole subtree below the node: ``descendant_count``
    summaries holding ``descendant_token_count`` tokens between them, over raw
    messages of ``source_token_count`` tokens in all.  ``earliest_at`` /
    ``latest_at`` bound the time of those messages.  Provenance: ``provider``
    and ``model`` made it at ``level`` ``normal``, ``aggressive``, or the
    deterministic ``fallback``, and ``reason`` says why a level above
    ``normal`` was needed.
    """

    id: str
    conversation_id: int
    kind: SummaryKind
    depth: int
    content: str
    token_count: int
    created_at: datetime
    earliest_at: datetime | None = None
    latest_at: datetime | None = None
    descendant_count: int = 0
    descendant_token_count: int = 0
    source_token_count: int = 0
    file_ids: tuple[str, ...] = ()
    provider: str | None = None
    model: str | None = None
    level: SummaryLevel = "normal"
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class CompactionEvent:
    """One compaction pass, written in the same transaction that put its summary in place.

    The pass replaced ``source_items`` context items with summary ``summary_id``
    and took the conversation's context from ``tokens_before`` to
    ``tokens_after`` tokens; making the summary took ``elapsed_ms``.  ``run_id``
    groups the passes of one compaction call, ``trigger`` says who asked for it
    (``threshold``: the engine after a turn; ``manual``: a user or host call;
    ``maintenance``: a scheduled job) and ``mode`` how far it went.  The kind,
    depth, level and provenance are the summary's own.  ``event_id`` is given
    by the store (increasing per store).
    """

    conversation_id: int
    summary_id: str
    run_id: str
    trigger: CompactionTrigger
    mode: CompactionMode
    source_items: int
    tokens_before: int
    tokens_after: int
    elapsed_ms: int
    created_at: datetime
    event_id: int | None = None

    def to_part(self) -> CompactionPart:
        """The event as a ``compaction`` message part (the reference schema's form of it), e.g. for an export."""
        return CompactionPart(
            summary=self.summary_id,
            auto=self.trigger != "manual",
            tokens_before=self.tokens_before,
            metadata={
                "run_id": self.run_id,
                "trigger": self.trigger,
                "mode": self.mode,
                "source_items": self.source_items,
                "tokens_after": self.tokens_after,
                "elapsed_ms": self.elapsed_ms,
                "created_at": format_timestamp(self.created_at),
            },
        )


@dataclass(frozen=True, slots=True)
class ContextEntry:
    """A context item with what compaction and assembly need to know about it, without its text.

    For a message: its role, token count, time, and the tool-call ids it makes
    (``tool_calls``) or answers (``tool_results``), so a call is never separated
    from its result.  For a summary: its depth, token count and time range.
    """

    ordinal: int
    kind: Literal["message", "summary"]
    token_count: int
    created_at: datetime
    message_id: int | None = None
    summary_id: str | None = None
    role: Role | None = None
    depth: int | None = None
    earliest_at: datetime | None = None
    tool_calls: tuple[str, ...] = ()
    tool_results: tuple[str, ...] = ()

    @property
    def ref(self) -> int | str:
        """The message id or summary id this entry points at."""
        ref = self.message_id if self.kind == "message" else self.summary_id
        assert ref is not None
        return ref


@dataclass(frozen=True, slots=True)
class ContextRow:
    """A ``context_items`` row exactly as stored (conversation, ordinal, kind, reference), nothing joined.

    What the integrity checker reads; compaction and assembly work on :class:`ContextEntry`, the
    same item with its role, tokens, time and tool-call ids.
    """

    conversation_id: int
    ordinal: int
    kind: Literal["message", "summary"]
    message_id: int | None = None
    summary_id: str | None = None


#: The former name of :class:`ContextRow` (kept so existing imports work).
ContextItem = ContextRow


FileOrigin = Literal["file_block", "tool_output", "data_url"]
FILE_ORIGINS: tuple[FileOrigin, ...] = get_args(FileOrigin)


@dataclass(frozen=True, slots=True)
class LargeFile:
    """A large payload stored outside the message, behind a ``file_…`` reference.

    ``content_hash`` is the hex SHA-256 of the stored bytes; ``storage_uri``
    names the blob (``fs:<conversation>/<sha256>.<ext>`` for the file-system
    blob store), so two ids holding the same bytes share one blob.
    ``origin`` says what was intercepted (a ``<file>`` block, a tool output, a
    ``data:`` URL) and ``kind`` what the exploration found (``json``, ``python``,
    ``log``, ``image`` …).
    """

    id: str
    conversation_id: int
    storage_uri: str
    created_at: datetime
    name: str | None = None
    mime: str | None = None
    byte_size: int | None = None
    content_hash: str | None = None
    exploration_summary: str | None = None
    origin: FileOrigin | None = None
    kind: str | None = None

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "id": self.id,
            "conversation_id": self.conversation_id,
            "name": self.name,
            "mime": self.mime,
            "byte_size": self.byte_size,
            "content_hash": self.content_hash,
            "storage_uri": self.storage_uri,
            "origin": self.origin,
            "kind": self.kind,
            "created_at": format_timestamp(self.created_at),
            "exploration_summary": self.exploration_summary,
        }


@dataclass(frozen=True, slots=True)
class BootstrapState:
    """How far a transcript file has been imported into a conversation.

    ``offset`` is the byte offset just past the last complete entry read;
    ``tail_hash`` is the SHA-256 of the (up to) 4 KiB before ``offset``, so an
    append-only file can be recognised and read from ``offset`` on.
    ``reconciled_seq`` is the store's side of the same point: messages of the
    conversation above it (live ingest the file has not caught up with yet) are
    matched against the file's next entries; None on rows written before it existed.
    """

    conversation_id: int
    path: str
    size: int
    mtime_ns: int
    offset: int
    tail_hash: str | None = None
    last_entry_key: str | None = None
    updated_at: datetime = field(default_factory=utcnow)
    reconciled_seq: int | None = None


@dataclass(frozen=True, slots=True)
class Grant:
    """A delegation grant: what an expansion sub-agent may read, for how long, and how much.

    ``grantee`` is the sub-agent's session key; ``conversation_ids`` its whole
    reach; ``tokens_used`` counts what its expansions returned against
    ``token_cap``.  A grant is usable while it is not revoked and ``expires_at``
    is in the future; ``revoke_reason`` says why it ended (``completed``,
    ``error``, ``timeout``, ``expired``).
    """

    id: str
    agent_id: str
    grantee: str
    conversation_ids: tuple[int, ...]
    token_cap: int
    created_at: datetime
    expires_at: datetime
    tokens_used: int = 0
    revoked_at: datetime | None = None
    revoke_reason: str | None = None

    def usable(self, now: datetime) -> bool:
        return self.revoked_at is None and now < self.expires_at

    @property
    def tokens_left(self) -> int:
        return max(0, self.token_cap - self.tokens_used)
