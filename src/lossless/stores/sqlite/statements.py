"""Row-level SQL for the SQLite store: column lists, row mappers and the write and read helpers.

Everything here runs inside the store's writer or reader thread on a connection it is given; no
function opens a transaction or a connection of its own (the caller's ``BEGIN IMMEDIATE`` makes a
write atomic).  Invariants of the rows themselves are in :mod:`lossless.stores.sqlite.store`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from lossless.errors import ConflictError, InputError, NotFoundError
from lossless.ports import AppendResult, PreparedMessage
from lossless.records import (
    CompactionEvent,
    ContextEntry,
    Conversation,
    Grant,
    LargeFile,
    MessageRecord,
    Part,
    Summary,
    TextPart,
    format_timestamp,
    utcnow,
)
from lossless.stores import rows
from lossless.stores.rows import (
    EVENT_COLUMNS,
    PART_COLUMNS,
    SUMMARY_COLUMN_COUNT,
    SUMMARY_COLUMNS,
    dump_json,
    event_from_row,
    event_values,
    implied_parts,
    load_json,
    part_from_row,
    part_to_row,
    stored_record,
)

CHUNK = 500  # ids per IN (…) list; well under SQLite's variable limit

# A conversation's updated_at is its last activity: the later of its newest message's time (for an
# imported transcript, when that message was written, not when it was imported) and its archiving;
# with neither, the time it was created.
_NEWEST = (
    "(SELECT m.created_at FROM messages m WHERE m.conversation_id = c.conversation_id ORDER BY m.seq DESC LIMIT 1)"
)
LAST_ACTIVITY = f"coalesce(max(coalesce({_NEWEST}, c.archived_at), coalesce(c.archived_at, {_NEWEST})), c.updated_at)"
CONVERSATION_COLUMNS = (
    "c.conversation_id, c.agent_id, c.session_id, c.session_key, c.parent_conversation_id, c.title, c.source, "
    f"c.active, c.archived_at, c.created_at, {LAST_ACTIVITY}, c.metadata"
)
MESSAGE_COLUMNS = "message_id, conversation_id, seq, role, content, token_count, created_at, event_key, metadata"
# Like message ids, summary row ids (the search index's key) are never reused after a prune.
NEXT_SUMMARY_ROWID = (
    "(SELECT max(coalesce((SELECT max(summary_rowid) FROM summaries), 0), "
    "coalesce((SELECT CAST(value AS INTEGER) FROM lcm_meta WHERE key = 'summary_rowid_floor'), 0)) + 1)"
)
PART_SELECT = "p.message_id, " + ", ".join(f"p.{c}" for c in PART_COLUMNS)
PART_INSERT = (
    f"INSERT INTO message_parts (part_id, message_id, ordinal, {', '.join(PART_COLUMNS)}) "
    f"VALUES ({', '.join('?' * (len(PART_COLUMNS) + 3))})"
)
PARTS_PER_MESSAGE = 65536
#: A batch bigger than this runs in a worker thread rather than inline (see Database.write).
INLINE_MESSAGES = 16
INLINE_CHARS = 256 * 1024


def timestamp(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# ---------------------------------------------------------------- write helpers (run in the writer thread)


def append(conn: sqlite3.Connection, conversation_id: int, messages: Sequence[PreparedMessage]) -> AppendResult:
    keys = [p.message.event_key for p in messages if p.message.event_key is not None]
    # One round trip for the common case of one message: counters and its key's presence together.
    single_key = keys[0] if len(keys) == 1 else None
    exists, last_id, last_seq, last_ordinal, known = conn.execute(
        "SELECT (SELECT 1 FROM conversations WHERE conversation_id = ?1), "
        "max(coalesce((SELECT max(message_id) FROM messages), 0), "
        "coalesce((SELECT CAST(value AS INTEGER) FROM lcm_meta WHERE key = 'message_id_floor'), 0)), "
        "(SELECT max(seq) FROM messages WHERE conversation_id = ?1), "
        "(SELECT max(ordinal) FROM context_items WHERE conversation_id = ?1), "
        "(SELECT 1 FROM messages WHERE conversation_id = ?1 AND event_key = ?2)",
        (conversation_id, single_key),
    ).fetchone()
    if exists is None:
        raise NotFoundError("conversation", conversation_id)
    seen: set[str] = set()
    if single_key is not None:
        if known:
            seen.add(single_key)
    else:
        for chunk in chunks(keys):
            seen.update(
                row[0]
                for row in conn.execute(
                    f"SELECT event_key FROM messages WHERE conversation_id = ? "
                    f"AND event_key IN ({','.join('?' * len(chunk))})",
                    (conversation_id, *chunk),
                )
            )
    fresh: list[PreparedMessage] = []
    duplicates = 0
    for prepared in messages:
        key = prepared.message.event_key
        if key is not None:
            if key in seen:
                duplicates += 1
                continue
            seen.add(key)
        fresh.append(prepared)
    if not fresh:
        return AppendResult((), duplicates)
    next_id, next_seq, next_ordinal = (last_id or 0) + 1, (last_seq or 0) + 1, (last_ordinal or 0) + 1
    now = format_timestamp(utcnow())

    message_rows: list[tuple[Any, ...]] = []
    part_rows: list[tuple[Any, ...]] = []
    item_rows: list[tuple[Any, ...]] = []
    stored: list[MessageRecord] = []
    for offset, prepared in enumerate(fresh):
        message = prepared.message
        message_id, seq = next_id + offset, next_seq + offset
        created = format_timestamp(prepared.created_at)
        message_rows.append(
            (
                message_id,
                conversation_id,
                seq,
                message.role,
                message.content,
                prepared.token_count,
                created,
                message.event_key,
                dump_json(message.metadata),
            )
        )
        if len(message.parts) >= PARTS_PER_MESSAGE:
            raise InputError(f"a message may have at most {PARTS_PER_MESSAGE - 1} parts, got {len(message.parts)}")
        only = len(message.parts) == 1
        if only and implied_parts(message):
            pass  # a plain text message: its one part is implied by its content (see with_parts)
        else:
            part_rows.extend(
                (
                    message_id * PARTS_PER_MESSAGE + ordinal,
                    message_id,
                    ordinal,
                    *part_to_row(part, message.content, only_part=only),
                )
                for ordinal, part in enumerate(message.parts)
            )
        item_rows.append((conversation_id, next_ordinal + offset, message_id, now))
        stored.append(stored_record(prepared, message_id, conversation_id, seq))
    insert_rows(conn, f"INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", message_rows)
    insert_rows(conn, PART_INSERT, part_rows)
    insert_rows(
        conn,
        "INSERT INTO context_items (conversation_id, ordinal, item_type, message_id, created_at) "
        "VALUES (?, ?, 'message', ?, ?)",
        item_rows,
    )
    return AppendResult(tuple(stored), duplicates)


def replace_range(
    conn: sqlite3.Connection, summary: Summary, sources: Sequence[ContextEntry], event: CompactionEvent | None
) -> None:
    conversation_id = summary.conversation_id
    first, last = sources[0].ordinal, sources[-1].ordinal
    current = conn.execute(
        "SELECT ordinal, item_type, message_id, summary_id FROM context_items "
        "WHERE conversation_id = ? AND ordinal BETWEEN ? AND ? ORDER BY ordinal",
        (conversation_id, first, last),
    ).fetchall()
    expected = [(e.ordinal, e.kind, e.message_id, e.summary_id) for e in sources]
    if [tuple(row) for row in current] != expected:
        raise ConflictError(
            f"the context of conversation {conversation_id} changed while it was being compacted; "
            "nothing was written: read it again and retry"
        )
    conn.execute(
        f"INSERT INTO summaries (summary_rowid, {SUMMARY_COLUMNS}) VALUES ({NEXT_SUMMARY_ROWID}, "
        f"{', '.join('?' * SUMMARY_COLUMN_COUNT)})",
        summary_row(summary),
    )
    if summary.kind == "leaf":
        conn.executemany(
            "INSERT INTO summary_messages (summary_id, message_id, ordinal) VALUES (?, ?, ?)",
            [(summary.id, e.message_id, i) for i, e in enumerate(sources)],
        )
    else:
        conn.executemany(
            "INSERT INTO summary_parents (summary_id, parent_summary_id, ordinal) VALUES (?, ?, ?)",
            [(summary.id, e.summary_id, i) for i, e in enumerate(sources)],
        )
    conn.execute(
        "DELETE FROM context_items WHERE conversation_id = ? AND ordinal BETWEEN ? AND ?",
        (conversation_id, first, last),
    )
    conn.execute(
        "INSERT INTO context_items (conversation_id, ordinal, item_type, summary_id, created_at) "
        "VALUES (?, ?, 'summary', ?, ?)",
        (conversation_id, first, summary.id, format_timestamp(utcnow())),
    )
    if event is not None:
        conn.execute(
            f"INSERT INTO compaction_events ({EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            event_values(event, format_timestamp),
        )


def compaction_events(conn: sqlite3.Connection, conversation_id: int, limit: int | None) -> list[CompactionEvent]:
    rows = conn.execute(
        f"SELECT event_id, {EVENT_COLUMNS} FROM compaction_events WHERE conversation_id = ? "
        "ORDER BY event_id DESC LIMIT ?",
        (conversation_id, -1 if limit is None else limit),
    ).fetchall()
    return [event_from_row(row, datetime.fromisoformat) for row in reversed(rows)]


def format_time(value: datetime | None) -> str | None:
    return None if value is None else format_timestamp(value)


# The shared row mappers of lossless.stores.rows, with SQLite's timestamps (fixed-width UTC text).


def summary_row(summary: Summary) -> tuple[Any, ...]:
    return rows.summary_values(summary, format_time)


def summary_from_row(row: Sequence[Any]) -> Summary:
    return rows.summary_from_row(row, timestamp)


def large_file_row(f: LargeFile) -> tuple[Any, ...]:
    return rows.large_file_values(f, format_time)


def large_file_from_row(row: Sequence[Any]) -> LargeFile:
    return rows.large_file_from_row(row, timestamp)


def grant_row(grant: Grant) -> tuple[Any, ...]:
    return rows.grant_values(grant, format_time)


def grant_from_row(row: Sequence[Any]) -> Grant:
    return rows.grant_from_row(row, timestamp)


def conversation_from_row(row: Sequence[Any]) -> Conversation:
    return rows.conversation_from_row(row, timestamp)


def insert_rows(conn: sqlite3.Connection, sql: str, rows: list[tuple[Any, ...]]) -> None:
    if len(rows) == 1:
        conn.execute(sql, rows[0])
    elif rows:
        conn.executemany(sql, rows)


# ---------------------------------------------------------------- read helpers


def with_parts(conn: sqlite3.Connection, rows: Sequence[Any]) -> list[MessageRecord]:
    """Attach parts to message rows with one query per :data:`CHUNK` messages."""
    parts: dict[int, list[Part]] = {}
    contents = {row[0]: row[4] for row in rows}
    ids = list(contents)
    for chunk in chunks(ids):
        # Parts are keyed message_id * 65536 + ordinal: one primary-key range per message.
        for prow in conn.execute(
            f"WITH ids(m) AS (VALUES {','.join(['(?)'] * len(chunk))}) "
            f"SELECT {PART_SELECT} FROM ids JOIN message_parts p "
            f"ON p.part_id BETWEEN ids.m * {PARTS_PER_MESSAGE} "
            f"AND ids.m * {PARTS_PER_MESSAGE} + {PARTS_PER_MESSAGE - 1} "
            "ORDER BY p.part_id",
            tuple(chunk),
        ):
            parts.setdefault(prow[0], []).append(part_from_row(prow[1:], contents[prow[0]]))
    return [
        MessageRecord(
            id=row[0],
            conversation_id=row[1],
            seq=row[2],
            role=row[3],
            content=row[4],
            parts=tuple(parts[row[0]]) if row[0] in parts else ((TextPart(row[4]),) if row[4] else ()),
            token_count=row[5],
            created_at=datetime.fromisoformat(row[6]),
            event_key=row[7],
            metadata=load_json(row[8]),
        )
        for row in rows
    ]


def table_bytes(conn: sqlite3.Connection) -> dict[str, int]:
    """Bytes per table (its indexes and FTS shadow tables folded in), where SQLite has ``dbstat``."""
    try:
        rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
        index_owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_schema WHERE type = 'index'").fetchall())
    except sqlite3.Error:
        return {}
    tables = (
        "conversations",
        "messages",
        "message_parts",
        "summaries",
        "summary_messages",
        "summary_parents",
        "context_items",
        "large_files",
        "conversation_bootstrap_state",
        "jobs",
    )
    out: dict[str, int] = {}
    for name, size in rows:
        owner = index_owner.get(name, name)
        for fts, base in (
            ("messages_fts", "messages (full-text)"),
            ("summaries_fts", "summaries (full-text)"),
        ):
            if owner.startswith(fts):
                owner = base
        if owner not in tables and not owner.endswith("(full-text)"):
            owner = "other"
        out[owner] = out.get(owner, 0) + int(size)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))
