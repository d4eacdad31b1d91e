"""Row-level SQL for the PostgreSQL store: column lists, row mappers and the write and read helpers.

Every helper here works on a connection the caller got from
:meth:`~lossless.stores.postgres.connection.Database.transaction`; none opens a
transaction or a connection of its own.  The names in ``__all__`` are shared by
the store's mixins (core, retrieval, maintenance) and stay stable.

Invariants (the same rows as the SQLite backend's, see :mod:`lossless.stores.sqlite.store`):

* **One writer per conversation.**  Whatever assigns ``seq`` or context
  ordinals first calls :func:`lock_conversation` (``SELECT … FOR UPDATE`` on
  the conversation row) and reads ``max(seq)``/``max(ordinal)`` in a *later*
  statement: under ``READ COMMITTED`` each statement takes a fresh snapshot, so
  it sees everything the previous lock holder committed.  (A subquery in the
  locking statement itself would read the stale snapshot.)
* **Ids come from identity sequences**, drawn after the lock, so within a
  conversation message ids grow with ``seq``; a plain text message (one text
  part equal to its content, no flags or metadata) stores no part row.
* **Round trips are per batch, never per row**: inserts go through
  ``executemany`` inside a pipeline; reads of many messages fetch their parts
  with one ``= ANY(%s)`` query per :data:`CHUNK` messages.
* **Types**: booleans are ``boolean`` (:func:`part_params` turns the shared row
  mapping's 0/1 into ``bool``), JSON is ``text`` written by
  :func:`~lossless.stores.rows.dump_json` (exact round trip), times are
  ``timestamptz`` read back as aware UTC datetimes; a naive datetime is an
  :class:`~lossless.errors.InputError`, as in the SQLite backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from lossless.errors import InputError
from lossless.records import (
    Conversation,
    Grant,
    LargeFile,
    MessageRecord,
    Part,
    Summary,
    TextPart,
)
from lossless.stores import rows
from lossless.stores.postgres.connection import Connection
from lossless.stores.rows import (
    FILE_COLUMNS,
    PART_COLUMNS,
    SUMMARY_COLUMN_COUNT,
    SUMMARY_COLUMNS,
    load_json,
    part_from_row,
    part_to_row,
)

__all__ = [
    "CHUNK",
    "CONVERSATION_COLUMNS",
    "FILE_COLUMNS",
    "LOCK_CONVERSATION",
    "MESSAGE_COLUMNS",
    "PARTS_OF",
    "PARTS_PER_MESSAGE",
    "PART_INSERT",
    "PART_SELECT",
    "SUMMARY_COLUMNS",
    "SUMMARY_INSERT",
    "attach_parts",
    "aware",
    "chunks",
    "conversation_from_row",
    "copy_rows",
    "grant_from_row",
    "grant_params",
    "id_array",
    "large_file_from_row",
    "large_file_params",
    "lock_conversation",
    "message_from_row",
    "part_params",
    "redact_url",
    "summary_from_row",
    "summary_params",
    "table_bytes",
    "text_array",
    "with_parts",
]

#: Ids per ``= ANY(%s)`` list.
CHUNK = 2000

# A conversation's updated_at is its last activity: the later of its newest message's time (for an
# imported transcript, when that message was written, not when it was imported) and its archiving;
# with neither, the time it was created.
_LAST_MESSAGE = (
    "(SELECT m.created_at FROM messages m WHERE m.conversation_id = c.conversation_id ORDER BY m.seq DESC LIMIT 1)"
)
#: Columns of ``conversations c`` for :func:`conversation_from_row` (the 11th is the last activity).
CONVERSATION_COLUMNS = (
    "c.conversation_id, c.agent_id, c.session_id, c.session_key, c.parent_conversation_id, c.title, c.source, "
    f"c.active, c.archived_at, c.created_at, coalesce(greatest({_LAST_MESSAGE}, c.archived_at), c.updated_at), "
    "c.metadata"
)
#: Columns of ``messages`` for :func:`message_from_row` / :func:`with_parts`.
MESSAGE_COLUMNS = "message_id, conversation_id, seq, role, content, token_count, created_at, event_key, metadata"
#: Columns of ``summaries`` for :func:`summary_from_row`, in :func:`summary_params` order.
SUMMARY_INSERT = f"INSERT INTO summaries ({SUMMARY_COLUMNS}) VALUES ({', '.join(['%s'] * SUMMARY_COLUMN_COUNT)})"
#: Columns of ``large_files`` for :func:`large_file_from_row`, in :func:`large_file_params` order.
#: ``message_id`` then the :data:`~lossless.stores.rows.PART_COLUMNS` of ``message_parts p``.
PART_SELECT = "p.message_id, " + ", ".join(f"p.{c}" for c in PART_COLUMNS)
#: The parts of the messages whose ids are the one parameter, in message and part order.
PARTS_OF = (
    f"SELECT {PART_SELECT} FROM message_parts p WHERE p.message_id = ANY(%s::bigint[]) ORDER BY p.message_id, p.ordinal"
)
#: Insert of one part row: ``(message_id, ordinal, *part_params(...))``.
PART_INSERT = (
    f"INSERT INTO message_parts (message_id, ordinal, {', '.join(PART_COLUMNS)}) "
    f"VALUES ({', '.join(['%s'] * (len(PART_COLUMNS) + 2))})"
)
PARTS_PER_MESSAGE = 65536
_BOOLEAN_PART_COLUMNS = tuple(
    PART_COLUMNS.index(c) for c in ("from_content", "is_ignored", "is_synthetic", "compaction_auto")
)


def id_array(ids: Iterable[int]) -> str:
    """A ``bigint[]`` literal of ``ids`` (``{1,2,3}``), for a ``%s::bigint[]`` parameter."""
    return "{" + ",".join(str(int(i)) for i in ids) + "}"


def text_array(values: Iterable[str]) -> str:
    """A ``text[]`` literal of ``values`` (``{"a","b"}``: each quoted, so any text), for a ``%s::text[]`` parameter
    (psycopg's list adapter costs more than the read for a few hundred ids)."""
    return "{" + ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "}"


def chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def aware(value: datetime) -> datetime:
    """``value`` if it is timezone-aware, else :class:`InputError` (a naive time is ambiguous)."""
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise InputError(
            f"timestamp must be timezone-aware, got the naive datetime {value.isoformat()!r}: "
            "pass e.g. datetime.now(timezone.utc) or attach a tzinfo"
        )
    return value


def _maybe_aware(value: datetime | None) -> datetime | None:
    return None if value is None else aware(value)


#: The conversation's row lock, held until the transaction ends (one parameter: the conversation id).
#: In a pipeline, send it and the statements that read counters, then fetch: a fetch forces a sync.
LOCK_CONVERSATION = "SELECT 1 FROM conversations WHERE conversation_id = %s FOR UPDATE"


async def lock_conversation(conn: Connection, conversation_id: int) -> bool:
    """Take the conversation's row lock (until the transaction ends); False if it does not exist.

    Read ``max(seq)``/``max(ordinal)`` only in a later statement (see the module invariants).
    """
    cursor = await conn.execute(LOCK_CONVERSATION, (conversation_id,))
    return await cursor.fetchone() is not None


# ---------------------------------------------------------------- row mappers


def message_from_row(row: Sequence[Any], parts: Sequence[Part] | None) -> MessageRecord:
    """A :data:`MESSAGE_COLUMNS` row with its stored parts (``None``: no part rows, the implied text part)."""
    return MessageRecord(
        id=row[0],
        conversation_id=row[1],
        seq=row[2],
        role=row[3],
        content=row[4],
        parts=tuple(parts) if parts is not None else ((TextPart(row[4]),) if row[4] else ()),
        token_count=row[5],
        created_at=row[6],
        event_key=row[7],
        metadata=load_json(row[8]),
    )


# The shared row mappers of lossless.stores.rows: psycopg reads and writes timestamptz as datetimes.


def _read(value: Any) -> datetime | None:
    return value  # type: ignore[no-any-return]


def conversation_from_row(row: Sequence[Any]) -> Conversation:
    return rows.conversation_from_row(row, _read)


def summary_params(summary: Summary) -> tuple[Any, ...]:
    return rows.summary_values(summary, _maybe_aware)


def summary_from_row(row: Sequence[Any]) -> Summary:
    return rows.summary_from_row(row, _read)


def large_file_params(f: LargeFile) -> tuple[Any, ...]:
    return rows.large_file_values(f, _maybe_aware)


def large_file_from_row(row: Sequence[Any]) -> LargeFile:
    return rows.large_file_from_row(row, _read)


def grant_params(grant: Grant) -> tuple[Any, ...]:
    return rows.grant_values(grant, _maybe_aware)


def grant_from_row(row: Sequence[Any]) -> Grant:
    return rows.grant_from_row(row, _read)


def part_params(part: Part, content: str, *, only_part: bool) -> list[Any]:
    """:func:`~lossless.stores.rows.part_to_row` with its 0/1 flags as ``bool`` for the boolean columns."""
    row = list(part_to_row(part, content, only_part=only_part))
    for i in _BOOLEAN_PART_COLUMNS:
        if row[i] is not None:
            row[i] = bool(row[i])
    return row


async def copy_rows(cursor: Any, target: str, rows: Sequence[Sequence[Any]]) -> None:
    """``COPY target FROM STDIN`` the ``rows`` (text format: each value adapted by its Python type).

    Text goes through the connection's NUL-escaping dumper like any parameter, so what is stored is
    exactly what an ``INSERT`` would store; ``target`` is trusted SQL (a table and its columns).
    """
    async with cursor.copy(f"COPY {target} FROM STDIN") as copy:
        for row in rows:
            await copy.write_row(row)


# ---------------------------------------------------------------- read helpers


async def with_parts(conn: Connection, rows: Sequence[Sequence[Any]]) -> list[MessageRecord]:
    """Attach parts to :data:`MESSAGE_COLUMNS` rows with one query per :data:`CHUNK` messages."""
    part_rows: list[Any] = []
    for chunk in chunks([row[0] for row in rows]):
        cursor = await conn.execute(PARTS_OF, (chunk,))
        part_rows += await cursor.fetchall()
    return attach_parts(rows, part_rows)


def attach_parts(rows: Sequence[Sequence[Any]], part_rows: Sequence[Sequence[Any]]) -> list[MessageRecord]:
    """:data:`MESSAGE_COLUMNS` rows as records, with their :data:`PARTS_OF` rows (parts of other messages ignored)."""
    contents = {row[0]: row[4] for row in rows}
    parts: dict[int, list[Part]] = {}
    for prow in part_rows:
        if prow[0] in contents:
            parts.setdefault(prow[0], []).append(part_from_row(prow[1:], contents[prow[0]]))
    return [message_from_row(row, parts.get(row[0])) for row in rows]


#: Tables reported by name in :func:`table_bytes`; everything else is summed as ``other``.
_TABLES = (
    "conversations",
    "messages",
    "message_parts",
    "summaries",
    "summary_messages",
    "summary_parents",
    "context_items",
    "large_files",
    "large_file_blobs",
    "conversation_bootstrap_state",
    "jobs",
)
#: Full-text indexes, reported apart from their table (as the SQLite backend reports its index file).
_FULL_TEXT = {
    "messages_tsv_gin_idx": "messages (full-text)",
    "messages_trgm_idx": "messages (full-text)",
    "summaries_tsv_gin_idx": "summaries (full-text)",
    "summaries_trgm_idx": "summaries (full-text)",
}


async def table_bytes(conn: Connection) -> dict[str, int]:
    """Bytes per table (indexes and TOAST included, full-text indexes apart), largest first."""
    cursor = await conn.execute(
        "SELECT c.relname, c.relkind, CASE WHEN c.relkind = 'i' THEN pg_relation_size(c.oid) "
        "ELSE pg_total_relation_size(c.oid) END "
        "FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace "
        "AND (c.relkind IN ('r', 'p', 'm') OR (c.relkind = 'i' AND c.relname = ANY(%s::text[])))",
        (list(_FULL_TEXT),),
    )
    out: dict[str, int] = {}
    for name, kind, size in await cursor.fetchall():
        if kind == "i":
            owner = _FULL_TEXT[name]
            table = owner.split(" ", 1)[0]
            out[table] = out.get(table, 0) - int(size)  # pg_total_relation_size counted it in its table
        else:
            owner = name if name in _TABLES else "other"
        out[owner] = out.get(owner, 0) + int(size)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def redact_url(url: str) -> str:
    """``url`` with any password (in the user info or a ``password=`` parameter) replaced by ``***``."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password:
        userinfo, _, host = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:***@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k == "password" for k, _ in pairs):
            query = urlencode([(k, "***" if k == "password" else v) for k, v in pairs], safe="/")
    return urlunsplit(parts._replace(netloc=netloc, query=query))
