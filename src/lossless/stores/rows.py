"""Mapping between part values and ``message_parts`` rows, shared by every SQL backend.

Invariants:

* ``part_from_row(part_to_row(p, content)) == p`` for every part ``p`` of a
  message whose content is ``content`` (property-tested).
* **No double storage of a message's main text.**  When a part's main text
  (a text part's text, a tool part's output, a reasoning or compaction part's
  text) is exactly the message's ``content``, the row stores NULL in its place
  and ``from_content = 1``; reading fills it back in from the message.  A plain
  chat message or a tool result is therefore stored once, not twice.
* Fields without a column of their own (a reasoning signature, a retry attempt,
  a part's free-form ``metadata``) go in the ``metadata`` JSON column.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from lossless.errors import InputError
from lossless.ports import JobKind, JobReason, PreparedMessage
from lossless.records import (
    COMPACTION_MODES,
    COMPACTION_TRIGGERS,
    AgentPart,
    CompactionEvent,
    CompactionPart,
    ContextEntry,
    Conversation,
    FilePart,
    Grant,
    LargeFile,
    Message,
    MessageRecord,
    Part,
    PatchPart,
    ReasoningPart,
    RetryPart,
    SnapshotPart,
    StepFinishPart,
    StepStartPart,
    SubtaskPart,
    Summary,
    TextPart,
    ToolPart,
)

__all__ = [
    "EVENT_COLUMNS",
    "FILE_COLUMNS",
    "FILE_COLUMN_COUNT",
    "GRANT_COLUMNS",
    "PART_COLUMNS",
    "SUMMARY_COLUMNS",
    "SUMMARY_COLUMN_COUNT",
    "check_event",
    "check_job",
    "check_sources",
    "conversation_from_row",
    "dump_json",
    "event_from_row",
    "event_values",
    "grant_from_row",
    "grant_values",
    "implied_parts",
    "large_file_from_row",
    "large_file_values",
    "load_json",
    "part_from_row",
    "part_to_row",
    "restore_position",
    "stored_record",
    "summary_from_row",
    "summary_values",
]

#: The ``message_parts`` columns written for a part, after ``message_id`` and ``ordinal``.
PART_COLUMNS: tuple[str, ...] = (
    "part_type",
    "from_content",
    "text_content",
    "is_ignored",
    "is_synthetic",
    "tool_call_id",
    "tool_name",
    "tool_status",
    "tool_input",
    "tool_output",
    "tool_error",
    "tool_title",
    "patch_hash",
    "patch_files",
    "file_mime",
    "file_name",
    "file_url",
    "subtask_prompt",
    "subtask_desc",
    "subtask_agent",
    "step_reason",
    "step_cost",
    "step_tokens_in",
    "step_tokens_out",
    "snapshot_hash",
    "compaction_auto",
    "metadata",
)
_INDEX = {name: i for i, name in enumerate(PART_COLUMNS)}


# One encoder for every call: ``json.dumps`` with these options builds a new one each time.
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def dump_json(value: Any) -> str | None:
    """Compact JSON text, or None for None."""
    if value is None:
        return None
    return _ENCODE(value)


def load_json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _main_text_column(part: Part) -> str | None:
    if isinstance(part, TextPart | ReasoningPart | CompactionPart):
        return "text_content"
    if isinstance(part, ToolPart):
        return "tool_output"
    return None


def part_to_row(part: Part, content: str, *, only_part: bool) -> tuple[Any, ...]:  # noqa: C901
    """The column values (in :data:`PART_COLUMNS` order) for ``part`` of a message with ``content``."""
    row: list[Any] = [None] * len(PART_COLUMNS)
    extra: dict[str, Any] = {}

    def put(column: str, value: Any) -> None:
        row[_INDEX[column]] = value

    put("part_type", part.type)
    match part:
        case TextPart():
            put("text_content", part.text)
            put("is_synthetic", 1 if part.synthetic else None)
            put("is_ignored", 1 if part.ignored else None)
        case ReasoningPart():
            put("text_content", part.text)
            if part.signature is not None:
                extra["signature"] = part.signature
            if part.redacted:
                extra["redacted"] = True
        case ToolPart():
            put("tool_call_id", part.call_id)
            put("tool_name", part.name)
            put("tool_status", part.status)
            put("tool_input", dump_json(part.input))
            put("tool_output", part.output)
            put("tool_error", part.error)
            put("tool_title", part.title)
        case PatchPart():
            put("patch_hash", part.hash)
            put("patch_files", dump_json(list(part.files)) if part.files else None)
        case FilePart():
            put("file_mime", part.mime)
            put("file_name", part.name)
            put("file_url", part.url)
        case SubtaskPart():
            put("subtask_prompt", part.prompt)
            put("subtask_desc", part.description)
            put("subtask_agent", part.agent)
        case CompactionPart():
            put("text_content", part.summary)
            put("compaction_auto", None if part.auto is None else int(part.auto))
            if part.tokens_before is not None:
                extra["tokens_before"] = part.tokens_before
        case StepStartPart():
            put("snapshot_hash", part.snapshot)
        case StepFinishPart():
            put("step_reason", part.reason)
            put("step_cost", part.cost)
            put("step_tokens_in", part.tokens_in)
            put("step_tokens_out", part.tokens_out)
            put("snapshot_hash", part.snapshot)
        case SnapshotPart():
            put("snapshot_hash", part.hash)
        case AgentPart():
            put("subtask_agent", part.name)
        case RetryPart():
            put("tool_error", part.error)
            if part.attempt is not None:
                extra["attempt"] = part.attempt
    main = _main_text_column(part)
    if only_part and main is not None and row[_INDEX[main]] == content:
        row[_INDEX[main]] = None
        put("from_content", 1)
    else:
        put("from_content", 0)
    if part.metadata:
        extra["metadata"] = part.metadata
    put("metadata", dump_json(extra) if extra else None)
    return tuple(row)


def part_from_row(row: Any, content: str) -> Part:
    """Rebuild a part from a row holding :data:`PART_COLUMNS` (by name or position)."""

    def get(column: str) -> Any:
        return row[_INDEX[column]]

    kind = get("part_type")
    extra: dict[str, Any] = load_json(get("metadata")) or {}
    meta = extra.get("metadata")
    main = content if get("from_content") else None

    def text(column: str) -> Any:
        value = get(column)
        return main if main is not None and value is None else value

    if kind == "text":
        return TextPart(
            text("text_content"),
            synthetic=bool(get("is_synthetic")),
            ignored=bool(get("is_ignored")),
            metadata=meta,
        )
    if kind == "reasoning":
        return ReasoningPart(
            text("text_content"),
            signature=extra.get("signature"),
            redacted=bool(extra.get("redacted", False)),
            metadata=meta,
        )
    if kind == "tool":
        return ToolPart(
            call_id=get("tool_call_id"),
            name=get("tool_name"),
            input=load_json(get("tool_input")),
            output=text("tool_output"),
            error=get("tool_error"),
            status=get("tool_status"),
            title=get("tool_title"),
            metadata=meta,
        )
    if kind == "patch":
        return PatchPart(hash=get("patch_hash"), files=tuple(load_json(get("patch_files")) or ()), metadata=meta)
    if kind == "file":
        return FilePart(mime=get("file_mime"), name=get("file_name"), url=get("file_url"), metadata=meta)
    if kind == "subtask":
        return SubtaskPart(
            prompt=get("subtask_prompt"),
            description=get("subtask_desc"),
            agent=get("subtask_agent"),
            metadata=meta,
        )
    if kind == "compaction":
        auto = get("compaction_auto")
        return CompactionPart(
            summary=text("text_content"),
            auto=None if auto is None else bool(auto),
            tokens_before=extra.get("tokens_before"),
            metadata=meta,
        )
    if kind == "step_start":
        return StepStartPart(snapshot=get("snapshot_hash"), metadata=meta)
    if kind == "step_finish":
        return StepFinishPart(
            reason=get("step_reason"),
            cost=get("step_cost"),
            tokens_in=get("step_tokens_in"),
            tokens_out=get("step_tokens_out"),
            snapshot=get("snapshot_hash"),
            metadata=meta,
        )
    if kind == "snapshot":
        return SnapshotPart(hash=get("snapshot_hash"), metadata=meta)
    if kind == "agent":
        return AgentPart(name=get("subtask_agent"), metadata=meta)
    if kind == "retry":
        return RetryPart(attempt=extra.get("attempt"), error=get("tool_error"), metadata=meta)
    raise ValueError(f"unknown part type in the database: {kind!r}")


def implied_parts(message: Message) -> bool:
    """A message whose only part is a plain text part equal to its content needs no part row."""
    part = message.parts[0]
    return bool(message.content) and type(part) is TextPart and part == TextPart(message.content)


# ---------------------------------------------------------------- conversations, summaries, large files
#
# One column order and one mapping for every backend; each passes its own timestamp conversion
# (SQLite stores fixed-width UTC text, PostgreSQL ``timestamptz``).  ``Read``/``Write`` convert a
# value that may be NULL.

Read = Callable[[Any], "datetime | None"]
Write = Callable[["datetime | None"], object]

#: The ``summaries`` columns of :func:`summary_values` / :func:`summary_from_row`.
SUMMARY_COLUMNS = (
    "summary_id, conversation_id, kind, depth, content, token_count, earliest_at, latest_at, descendant_count, "
    "descendant_token_count, source_message_token_count, file_ids, provider, model, level, reason, created_at"
)
SUMMARY_COLUMN_COUNT = 17

#: The ``large_files`` columns of :func:`large_file_values` / :func:`large_file_from_row`.
FILE_COLUMNS = (
    "file_id, conversation_id, file_name, mime_type, byte_size, content_hash, storage_uri, "
    "exploration_summary, origin, content_kind, created_at"
)
FILE_COLUMN_COUNT = 11


def _required(value: datetime | None) -> datetime:
    assert value is not None, "a NOT NULL timestamp column was NULL"
    return value


def summary_values(summary: Summary, time: Write) -> tuple[Any, ...]:
    return (
        summary.id,
        summary.conversation_id,
        summary.kind,
        summary.depth,
        summary.content,
        summary.token_count,
        time(summary.earliest_at),
        time(summary.latest_at),
        summary.descendant_count,
        summary.descendant_token_count,
        summary.source_token_count,
        dump_json(list(summary.file_ids)),
        summary.provider,
        summary.model,
        summary.level,
        summary.reason,
        time(summary.created_at),
    )


def summary_from_row(row: Sequence[Any], time: Read) -> Summary:
    return Summary(
        id=row[0],
        conversation_id=row[1],
        kind=row[2],
        depth=row[3],
        content=row[4],
        token_count=row[5],
        earliest_at=time(row[6]),
        latest_at=time(row[7]),
        descendant_count=row[8],
        descendant_token_count=row[9],
        source_token_count=row[10],
        file_ids=tuple(load_json(row[11]) or ()),
        provider=row[12],
        model=row[13],
        level=row[14],
        reason=row[15],
        created_at=_required(time(row[16])),
    )


def large_file_values(f: LargeFile, time: Write) -> tuple[Any, ...]:
    return (
        f.id,
        f.conversation_id,
        f.name,
        f.mime,
        f.byte_size,
        f.content_hash,
        f.storage_uri,
        f.exploration_summary,
        f.origin,
        f.kind,
        time(f.created_at),
    )


def large_file_from_row(row: Sequence[Any], time: Read) -> LargeFile:
    return LargeFile(
        id=row[0],
        conversation_id=row[1],
        name=row[2],
        mime=row[3],
        byte_size=row[4],
        content_hash=row[5],
        storage_uri=row[6],
        exploration_summary=row[7],
        origin=row[8],
        kind=row[9],
        created_at=_required(time(row[10])),
    )


def conversation_from_row(row: Sequence[Any], time: Read) -> Conversation:
    """A conversation from a backend's ``CONVERSATION_COLUMNS`` row (id, agent, session, key, parent, title,
    source, active, archived_at, created_at, updated_at, metadata)."""
    return Conversation(
        id=row[0],
        agent_id=row[1],
        session_id=row[2],
        session_key=row[3],
        parent_id=row[4],
        title=row[5],
        source=row[6],
        active=bool(row[7]),
        archived_at=time(row[8]),
        created_at=_required(time(row[9])),
        updated_at=_required(time(row[10])),
        metadata=load_json(row[11]),
    )


#: The ``compaction_events`` columns, in the order :func:`event_values` and :func:`event_from_row` use.
EVENT_COLUMNS = (
    "conversation_id, summary_id, run_id, trigger_reason, mode, source_items, tokens_before, tokens_after, "
    "elapsed_ms, created_at"
)


def event_values(event: CompactionEvent, time: Callable[[datetime], object]) -> tuple[object, ...]:
    """The values of ``EVENT_COLUMNS`` for ``event``; ``time`` converts the timestamp for the backend."""
    return (
        event.conversation_id,
        event.summary_id,
        event.run_id,
        event.trigger,
        event.mode,
        event.source_items,
        event.tokens_before,
        event.tokens_after,
        event.elapsed_ms,
        time(event.created_at),
    )


def event_from_row(row: Sequence[Any], time: Callable[[Any], datetime]) -> CompactionEvent:
    """The event of a row holding ``event_id`` then ``EVENT_COLUMNS``."""
    return CompactionEvent(
        event_id=row[0],
        conversation_id=row[1],
        summary_id=row[2],
        run_id=row[3],
        trigger=row[4],
        mode=row[5],
        source_items=row[6],
        tokens_before=row[7],
        tokens_after=row[8],
        elapsed_ms=row[9],
        created_at=time(row[10]),
    )


def check_event(summary: Summary, sources: Sequence[ContextEntry], event: CompactionEvent) -> None:
    """InputError unless ``event`` records the replacement of ``sources`` by ``summary``."""
    if event.summary_id != summary.id or event.conversation_id != summary.conversation_id:
        raise InputError(
            f"the compaction event is about summary {event.summary_id} of conversation {event.conversation_id}, "
            f"not summary {summary.id} of conversation {summary.conversation_id}"
        )
    if event.source_items != len(sources):
        raise InputError(f"the compaction event counts {event.source_items} source items, not {len(sources)}")
    if event.trigger not in COMPACTION_TRIGGERS:
        raise InputError(f"compaction trigger must be one of {', '.join(COMPACTION_TRIGGERS)}, got {event.trigger!r}")
    if event.mode not in COMPACTION_MODES:
        raise InputError(f"compaction mode must be one of {', '.join(COMPACTION_MODES)}, got {event.mode!r}")
    if min(event.tokens_before, event.tokens_after, event.elapsed_ms) < 0:
        raise InputError("a compaction event's token counts and elapsed time cannot be negative")


def check_sources(summary: Summary, sources: Sequence[ContextEntry]) -> None:
    """InputError unless ``sources`` can be the sources of ``summary`` (every backend's same rule)."""
    if not sources:
        raise InputError("a summary needs at least one source")
    if summary.kind == "leaf":
        if summary.depth != 0 or any(e.kind != "message" for e in sources):
            raise InputError("a leaf summary (depth 0) is made of messages only")
    elif summary.depth < 1 or any(e.kind != "summary" or e.depth != summary.depth - 1 for e in sources):
        raise InputError(
            f"a condensed summary of depth {summary.depth} is made of summaries of depth {summary.depth - 1}"
        )
    ordinals = [e.ordinal for e in sources]
    if ordinals != sorted(set(ordinals)):
        raise InputError("summary sources must be distinct context items in context order")


def check_job(kind: JobKind, reason: JobReason, conversation_id: int | None) -> None:
    """InputError unless a job of ``kind`` asked for ``reason`` can be queued (every backend's same rule)."""
    if kind not in ("compaction", "integrity"):
        raise InputError(f"job kind must be 'compaction' or 'integrity', got {kind!r}")
    if reason not in COMPACTION_TRIGGERS:
        raise InputError(f"job reason must be one of {', '.join(COMPACTION_TRIGGERS)}, got {reason!r}")
    if kind == "compaction" and conversation_id is None:
        raise InputError("a compaction job needs a conversation_id")


def stored_record(prepared: PreparedMessage, message_id: int, conversation_id: int, seq: int) -> MessageRecord:
    """The record of ``prepared`` as appended with these ids."""
    message = prepared.message
    return MessageRecord(
        id=message_id,
        conversation_id=conversation_id,
        seq=seq,
        role=message.role,
        content=message.content,
        parts=message.parts,
        token_count=prepared.token_count,
        created_at=prepared.created_at,
        event_key=message.event_key,
        metadata=message.metadata,
    )


def restore_position(items: Sequence[tuple[int, int | None]], seq: int) -> tuple[int, bool]:
    """Where a context item whose first message is ``seq`` goes back, among ``items``.

    ``items`` are the context's ``(ordinal, first message seq)`` in ordinal order.  Returns the
    ordinal and whether the items from that ordinal on must first move up by one (no free ordinal
    between the item's neighbours).
    """
    after = next((ordinal for ordinal, first in items if first is not None and first > seq), None)
    if after is None:
        return (items[-1][0] + 1) if items else 1, False
    before = max((o for o, _ in items if o < after), default=None)
    if before is not None and before + 1 < after:
        return after - 1, False
    return after, True


# ---------------------------------------------------------------- expansion grants

#: The ``expansion_grants`` columns of :func:`grant_values` / :func:`grant_from_row`.
GRANT_COLUMNS = (
    "grant_id, agent_id, grantee, conversation_ids, token_cap, tokens_used, created_at, expires_at, revoked_at, "
    "revoke_reason"
)


def grant_values(grant: Grant, time: Write) -> tuple[Any, ...]:
    return (
        grant.id,
        grant.agent_id,
        grant.grantee,
        json.dumps(list(grant.conversation_ids)),
        grant.token_cap,
        grant.tokens_used,
        time(grant.created_at),
        time(grant.expires_at),
        time(grant.revoked_at),
        grant.revoke_reason,
    )


def grant_from_row(row: Sequence[Any], time: Read) -> Grant:
    return Grant(
        id=row[0],
        agent_id=row[1],
        grantee=row[2],
        conversation_ids=tuple(int(c) for c in json.loads(row[3])),
        token_cap=row[4],
        tokens_used=row[5],
        created_at=_required(time(row[6])),
        expires_at=_required(time(row[7])),
        revoked_at=time(row[8]),
        revoke_reason=row[9],
    )
