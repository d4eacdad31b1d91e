"""Conversations, messages, the active context, the summary DAG, bootstrap state, large files, stats.

:class:`CoreStatements` is the part of :class:`~lossless.stores.postgres.store.PostgresStore`
that the SQLite backend implements in its ``store.py`` itself, with the same observable
behaviour (the contract suite in ``tests/contract/`` is run against both).

Invariants (beyond the port's and those of :mod:`~lossless.stores.postgres.statements`):

* **One transaction per call**: every method runs in one ``Database.transaction()``
  (a savepoint inside ``atomic()``), natively async, no threads.
* **Writers of one conversation are serialised by its row lock**, taken first by
  ``append_messages``, ``copy_context``, ``replace_with_summary`` and
  ``discard_conversation``; different conversations are written concurrently and no
  table is ever locked.  Reads take no lock and never wait for a writer.
* **Race-safe get-or-create**: ``INSERT … ON CONFLICT (agent_id, session_id) DO NOTHING``
  then a fill-in ``UPDATE`` (which writes only when a value is missing) and a ``SELECT``.
  A session key names the *active* session: creating or touching another session under
  the same key archives the previous one, under a transaction-level advisory lock on
  ``(agent_id, session_key)`` so two hosts can never both leave one active.
* **Idempotent append**: event keys already stored, or repeated earlier in the batch,
  are skipped and counted; the unique index ``(conversation_id, event_key)`` backs it.
* **Conflict-checked compaction**: ``replace_with_summary`` compares the context items
  it replaces with what the store holds under the lock; any difference is a
  :class:`~lossless.errors.ConflictError` with nothing written.
* Text holding U+0000 cannot be stored by PostgreSQL: the connection layer turns that
  into :class:`~lossless.errors.InputError`, and the transaction writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lossless.errors import ConflictError, InputError, NotFoundError
from lossless.ports import AppendResult, PreparedMessage, StoreStats
from lossless.records import (
    BootstrapState,
    CompactionEvent,
    ContextEntry,
    ContextRow,
    Conversation,
    JSONValue,
    LargeFile,
    MessageRecord,
    Summary,
    utcnow,
)
from lossless.stores.postgres.connection import Connection, Database, stable_lock_key
from lossless.stores.postgres.message_records import MessageRecords, read_messages
from lossless.stores.postgres.statements import (
    CONVERSATION_COLUMNS,
    FILE_COLUMNS,
    LOCK_CONVERSATION,
    MESSAGE_COLUMNS,
    PART_INSERT,
    PARTS_PER_MESSAGE,
    SUMMARY_COLUMNS,
    SUMMARY_INSERT,
    aware,
    chunks,
    conversation_from_row,
    copy_rows,
    large_file_from_row,
    large_file_params,
    part_params,
    redact_url,
    summary_from_row,
    summary_params,
    table_bytes,
    with_parts,
)
from lossless.stores.rows import (
    EVENT_COLUMNS,
    PART_COLUMNS,
    check_event,
    check_sources,
    dump_json,
    event_from_row,
    event_values,
    implied_parts,
    stored_record,
)

__all__ = ["CONTEXT_ENTRIES", "CoreStatements", "context_entry"]

#: Advisory-lock key space of ``(agent_id, session_key)`` (next to connection.py's "LCM\0" and "LCM\1").
_LOCK_SPACE_SESSION_KEY = 0x4C434D02

_FILL_IN = ("session_key", "title", "source", "parent_conversation_id", "metadata")

# Counters and duplicates for an append, read *after* the conversation's row lock (a statement of its
# own, so its snapshot holds every row the previous lock holder committed).  Message ids are drawn here
# for exactly the messages that will be stored: keyless ones plus distinct keys not stored yet.
_APPEND_STATE = """
WITH keys AS (SELECT DISTINCT k FROM unnest(%(keys)s::text[]) AS k),
known AS (
    SELECT m.event_key FROM messages m JOIN keys ON m.event_key = keys.k WHERE m.conversation_id = %(c)s
)
SELECT (SELECT max(seq) FROM messages WHERE conversation_id = %(c)s),
       (SELECT max(ordinal) FROM context_items WHERE conversation_id = %(c)s),
       ARRAY(SELECT event_key FROM known),
       ARRAY(SELECT nextval(pg_get_serial_sequence('messages', 'message_id'))
             FROM generate_series(1, %(plain)s::bigint + (SELECT count(*) FROM keys) - (SELECT count(*) FROM known))
             WHERE EXISTS (SELECT 1 FROM conversations WHERE conversation_id = %(c)s))
"""

_ITEM_COLUMNS = "conversation_id, ordinal, item_type, message_id, created_at"
#: From this many messages on, an append sends its rows with ``COPY`` (fewer bytes and no per-row
#: statement on the server) rather than one pipelined ``INSERT`` per row (fewer round trips).
COPY_ROWS = 32

#: The context entries of conversation ``%(c)s`` (see :func:`context_entry`), by ordinal.
CONTEXT_ENTRIES = """
WITH tools AS (
    -- IS NOT NULL reads the null bitmap only: the (possibly large) tool texts are not loaded.
    SELECT p.message_id,
           array_agg(p.tool_call_id ORDER BY p.ordinal) FILTER (
               WHERE p.tool_input IS NOT NULL
                  OR NOT (p.tool_output IS NOT NULL OR p.tool_error IS NOT NULL OR p.from_content)) AS calls,
           array_agg(p.tool_call_id ORDER BY p.ordinal) FILTER (
               WHERE p.tool_output IS NOT NULL OR p.tool_error IS NOT NULL OR p.from_content) AS results
    FROM context_items ci JOIN message_parts p ON p.message_id = ci.message_id
    WHERE ci.conversation_id = %(c)s AND ci.item_type = 'message'
      AND p.part_type = 'tool' AND p.tool_call_id IS NOT NULL
    GROUP BY p.message_id
)
SELECT ci.ordinal, ci.item_type, ci.message_id, ci.summary_id,
       coalesce(m.token_count, s.token_count), coalesce(m.created_at, s.latest_at, s.created_at),
       m.role, s.depth, s.earliest_at, t.calls, t.results
FROM context_items ci
LEFT JOIN messages m ON m.message_id = ci.message_id
LEFT JOIN summaries s ON s.summary_id = ci.summary_id
LEFT JOIN tools t ON t.message_id = ci.message_id
WHERE ci.conversation_id = %(c)s
ORDER BY ci.ordinal
"""


def context_entry(row: Sequence[Any]) -> ContextEntry:
    """A :data:`CONTEXT_ENTRIES` row as an entry."""
    return ContextEntry(
        ordinal=row[0],
        kind=row[1],
        token_count=row[4],
        created_at=row[5],
        message_id=row[2],
        summary_id=row[3],
        role=row[6],
        depth=row[7],
        earliest_at=row[8],
        tool_calls=tuple(row[9] or ()),
        tool_results=tuple(row[10] or ()),
    )


class CoreStatements:
    """The core :class:`~lossless.ports.Store` methods on PostgreSQL (see the module docstring)."""

    _db: Database
    url: str
    backend: str
    #: The plain message records read by id, kept across reads (checked against their rows on every read).
    _message_records: MessageRecords

    # ------------------------------------------------------------ conversations

    async def get_or_create_conversation(
        self,
        *,
        agent_id: str,
        session_id: str,
        session_key: str | None = None,
        title: str | None = None,
        source: str | None = None,
        parent_id: int | None = None,
        metadata: Mapping[str, JSONValue] | None = None,
    ) -> Conversation:
        if not session_id:
            raise InputError("session_id must be a non-empty string")
        meta = dump_json(metadata)
        given = dict(zip(_FILL_IN, (session_key, title, source, parent_id, meta), strict=True))
        missing = [column for column, value in given.items() if value is not None]
        now = utcnow()
        async with self._db.transaction() as conn, conn.pipeline():
            if session_key is not None:
                # A session key names the *active* session: a new session under the same key
                # archives the previous one (as a host does on /reset).
                key = stable_lock_key(f"{agent_id}\x1f{session_key}")
                await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_SPACE_SESSION_KEY, key))
                await conn.execute(
                    "UPDATE conversations SET active = false, archived_at = %s, updated_at = %s "
                    "WHERE agent_id = %s AND session_key = %s AND active AND session_id <> %s",
                    (now, now, agent_id, session_key, session_id),
                )
            await conn.execute(
                "INSERT INTO conversations (agent_id, session_id, session_key, parent_conversation_id, "
                "title, source, created_at, updated_at, metadata) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (agent_id, session_id) DO NOTHING",
                (agent_id, session_id, session_key, parent_id, title, source, now, now, meta),
            )
            if missing:
                # Fill in what an existing conversation lacks; writes nothing when it lacks nothing.
                await conn.execute(
                    f"UPDATE conversations SET {', '.join(f'{c} = coalesce({c}, %s)' for c in missing)} "
                    f"WHERE agent_id = %s AND session_id = %s AND ({' OR '.join(f'{c} IS NULL' for c in missing)})",
                    (*(given[c] for c in missing), agent_id, session_id),
                )
            cursor = await conn.execute(
                f"SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.agent_id = %s AND c.session_id = %s",
                (agent_id, session_id),
            )
            row = await cursor.fetchone()
        assert row is not None  # inserted, or found on conflict
        return conversation_from_row(row)

    async def get_conversation(self, conversation_id: int) -> Conversation | None:
        async with self._db.read() as conn:
            cursor = await conn.execute(
                f"SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.conversation_id = %s",
                (conversation_id,),
            )
            row = await cursor.fetchone()
        return None if row is None else conversation_from_row(row)

    async def find_conversation(
        self, *, agent_id: str, session_id: str | None = None, session_key: str | None = None
    ) -> Conversation | None:
        if session_id is None and session_key is None:
            raise InputError("find_conversation needs a session_id or a session_key")
        async with self._db.read() as conn:
            if session_id is not None:
                cursor = await conn.execute(
                    f"SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.agent_id = %s AND c.session_id = %s",
                    (agent_id, session_id),
                )
            else:
                cursor = await conn.execute(
                    f"SELECT {CONVERSATION_COLUMNS} FROM conversations c "
                    "WHERE c.agent_id = %s AND c.session_key = %s AND c.active",
                    (agent_id, session_key),
                )
            row = await cursor.fetchone()
        return None if row is None else conversation_from_row(row)

    async def list_conversations(
        self, *, agent_id: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[Conversation]:
        where, params = ("WHERE c.agent_id = %s", [agent_id]) if agent_id is not None else ("", [])
        async with self._db.read() as conn:
            cursor = await conn.execute(
                f"SELECT {CONVERSATION_COLUMNS} FROM conversations c {where} "
                "ORDER BY 11 DESC, c.conversation_id DESC LIMIT %s OFFSET %s",
                (*params, limit, offset),
            )
            rows = await cursor.fetchall()
        return [conversation_from_row(r) for r in rows]

    async def conversation_sizes(self, conversation_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
        ids = list(dict.fromkeys(conversation_ids))
        sizes: dict[int, tuple[int, int]] = {}
        if not ids:
            return sizes
        async with self._db.read() as conn:
            for chunk in chunks(ids):
                cursor = await conn.execute(
                    "SELECT conversation_id, count(*), coalesce(sum(token_count), 0) FROM messages "
                    "WHERE conversation_id = ANY(%s::bigint[]) GROUP BY conversation_id",
                    (chunk,),
                )
                for conversation_id, count, tokens in await cursor.fetchall():
                    sizes[conversation_id] = (int(count), int(tokens))
        return sizes

    async def archive_conversation(self, conversation_id: int) -> None:
        now = utcnow()
        async with self._db.transaction() as conn:
            await conn.execute(
                "UPDATE conversations SET active = false, archived_at = coalesce(archived_at, %s), updated_at = %s "
                "WHERE conversation_id = %s",
                (now, now, conversation_id),
            )

    async def discard_conversation(self, conversation_id: int) -> None:
        async with self._db.transaction() as conn:
            async with conn.pipeline():
                await conn.execute(LOCK_CONVERSATION, (conversation_id,))
                cursor = await conn.execute(
                    "SELECT EXISTS (SELECT 1 FROM messages WHERE conversation_id = %(c)s), "
                    "EXISTS (SELECT 1 FROM summaries WHERE conversation_id = %(c)s)",
                    {"c": conversation_id},
                )
                row = await cursor.fetchone()
            assert row is not None
            if row[0]:
                raise InputError(f"conversation {conversation_id} has messages of its own and is not discarded")
            if row[1]:
                raise InputError(f"conversation {conversation_id} has summaries of its own and is not discarded")
            async with conn.pipeline():
                for table in ("context_items", "conversation_bootstrap_state", "conversations"):
                    await conn.execute(f"DELETE FROM {table} WHERE conversation_id = %s", (conversation_id,))

    # ------------------------------------------------------------ messages

    async def append_messages(self, conversation_id: int, messages: Sequence[PreparedMessage]) -> AppendResult:
        if not messages:
            return AppendResult()
        for prepared in messages:
            aware(prepared.created_at)
            if len(prepared.message.parts) >= PARTS_PER_MESSAGE:
                raise InputError(
                    f"a message may have at most {PARTS_PER_MESSAGE - 1} parts, got {len(prepared.message.parts)}"
                )
        async with self._db.transaction() as conn:
            result = await _append(conn, conversation_id, messages)
        if result.stored:
            self._appended()
        return result

    def _appended(self) -> None:
        """Messages were appended (their word index is filled afterwards; the store wakes its indexer)."""

    async def get_messages(
        self,
        conversation_id: int,
        *,
        after_seq: int | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[MessageRecord]:
        order = "DESC" if newest_first else "ASC"
        async with self._db.read() as conn:
            cursor = await conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = %s AND seq > %s "
                f"ORDER BY seq {order} LIMIT %s",
                (conversation_id, -1 if after_seq is None else after_seq, limit),
            )
            return await with_parts(conn, await cursor.fetchall())

    async def get_messages_by_id(self, message_ids: Sequence[int]) -> list[MessageRecord]:
        # The plain records read before are kept and checked against their row's version in the same round trip
        # (:mod:`~lossless.stores.postgres.message_records`): what a read without them returns, built once.
        return await read_messages(self._db, self._message_records, message_ids)

    async def count_messages(self, conversation_id: int) -> int:
        async with self._db.read() as conn:
            cursor = await conn.execute("SELECT count(*) FROM messages WHERE conversation_id = %s", (conversation_id,))
            row = await cursor.fetchone()
        return int(row[0]) if row else 0

    async def last_event_key(self, conversation_id: int) -> str | None:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "SELECT event_key FROM messages WHERE conversation_id = %s AND event_key IS NOT NULL "
                "ORDER BY seq DESC LIMIT 1",
                (conversation_id,),
            )
            row = await cursor.fetchone()
        return None if row is None else str(row[0])

    # ------------------------------------------------------------ context

    async def get_context_items(self, conversation_id: int) -> list[ContextRow]:
        async with self._db.read() as conn:
            cursor = await conn.execute(
                "SELECT ordinal, item_type, message_id, summary_id FROM context_items "
                "WHERE conversation_id = %s ORDER BY ordinal",
                (conversation_id,),
            )
            rows = await cursor.fetchall()
        return [ContextRow(conversation_id, r[0], r[1], r[2], r[3]) for r in rows]

    async def get_context(self, conversation_id: int) -> list[ContextEntry]:
        async with self._db.read() as conn:
            cursor = await conn.execute(CONTEXT_ENTRIES, {"c": conversation_id})
            rows = await cursor.fetchall()
        return [context_entry(row) for row in rows]

    async def copy_context(self, conversation_id: int, entries: Sequence[ContextEntry]) -> None:
        if not entries:
            return
        now = utcnow()
        async with self._db.transaction() as conn:
            async with conn.pipeline():
                await conn.execute(LOCK_CONVERSATION, (conversation_id,))
                cursor = await conn.execute(
                    "SELECT coalesce(max(ordinal), 0) + 1 FROM context_items WHERE conversation_id = %s",
                    (conversation_id,),
                )
                row = await cursor.fetchone()
            assert row is not None
            start = int(row[0])
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO context_items (conversation_id, ordinal, item_type, message_id, summary_id, "
                    "created_at) VALUES (%s, %s, %s, %s, %s, %s)",
                    [
                        (conversation_id, start + i, e.kind, e.message_id, e.summary_id, now)
                        for i, e in enumerate(entries)
                    ],
                )

    # ------------------------------------------------------------ the summary DAG

    async def replace_with_summary(
        self, summary: Summary, sources: Sequence[ContextEntry], event: CompactionEvent | None = None
    ) -> None:
        check_sources(summary, sources)
        if event is not None:
            check_event(summary, sources, event)
        params = summary_params(summary)
        async with self._db.transaction() as conn:
            await _replace_range(conn, summary, params, sources, event)

    async def get_compaction_events(self, conversation_id: int, *, limit: int | None = None) -> list[CompactionEvent]:
        if limit is not None and limit < 0:
            raise InputError(f"limit must be zero or more, got {limit}")
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                f"SELECT event_id, {EVENT_COLUMNS} FROM compaction_events WHERE conversation_id = %s "
                "ORDER BY event_id DESC LIMIT %s",
                (conversation_id, limit),
            )
            rows = await cursor.fetchall()
        return [event_from_row(row, aware) for row in reversed(rows)]

    async def get_summaries(self, summary_ids: Sequence[str]) -> list[Summary]:
        ids = list(dict.fromkeys(summary_ids))
        found: dict[str, Summary] = {}
        if not ids:
            return []
        async with self._db.read() as conn:
            for chunk in chunks(ids):
                cursor = await conn.execute(
                    f"SELECT {SUMMARY_COLUMNS} FROM summaries WHERE summary_id = ANY(%s::text[])", (chunk,)
                )
                for row in await cursor.fetchall():
                    summary = summary_from_row(row)
                    found[summary.id] = summary
        return [found[i] for i in ids if i in found]

    async def list_summaries(self, conversation_id: int) -> list[Summary]:
        async with self._db.read() as conn:
            cursor = await conn.execute(
                f"SELECT {SUMMARY_COLUMNS} FROM summaries WHERE conversation_id = %s ORDER BY summary_rowid",
                (conversation_id,),
            )
            rows = await cursor.fetchall()
        return [summary_from_row(r) for r in rows]

    async def get_summary_parents(self, summary_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        ids = list(dict.fromkeys(summary_ids))
        parents: dict[str, list[str]] = {}
        if not ids:
            return {}
        async with self._db.read() as conn:
            for chunk in chunks(ids):
                cursor = await conn.execute(
                    "SELECT summary_id, parent_summary_id FROM summary_parents "
                    "WHERE summary_id = ANY(%s::text[]) ORDER BY summary_id, ordinal",
                    (chunk,),
                )
                for summary_id, parent in await cursor.fetchall():
                    parents.setdefault(summary_id, []).append(parent)
        return {k: tuple(v) for k, v in parents.items()}

    async def get_lineage(self, conversation_id: int) -> dict[str, tuple[int | str, ...]]:
        lineage: dict[str, list[int | str]] = {}
        async with self._db.read() as conn, conn.pipeline():
            leaves = await conn.execute(
                "SELECT sm.summary_id, sm.message_id FROM summary_messages sm "
                "JOIN summaries s ON s.summary_id = sm.summary_id WHERE s.conversation_id = %s "
                "ORDER BY sm.summary_id, sm.ordinal",
                (conversation_id,),
            )
            nodes = await conn.execute(
                "SELECT sp.summary_id, sp.parent_summary_id FROM summary_parents sp "
                "JOIN summaries s ON s.summary_id = sp.summary_id WHERE s.conversation_id = %s "
                "ORDER BY sp.summary_id, sp.ordinal",
                (conversation_id,),
            )
            for cursor in (leaves, nodes):
                for summary_id, source in await cursor.fetchall():
                    lineage.setdefault(summary_id, []).append(source)
        return {k: tuple(v) for k, v in lineage.items()}

    # ------------------------------------------------------------ bootstrap state

    async def find_bootstrap_state(self, agent_id: str, path: str) -> BootstrapState | None:
        async with self._db.read() as conn:
            cursor = await conn.execute(
                "SELECT b.conversation_id, b.last_seen_size, b.last_seen_mtime_ns, b.last_processed_offset, "
                "b.last_processed_entry_hash, b.last_entry_key, b.updated_at, b.reconciled_seq "
                "FROM conversation_bootstrap_state b JOIN conversations c USING (conversation_id) "
                "WHERE c.agent_id = %s AND b.session_file_path = %s ORDER BY b.updated_at DESC LIMIT 1",
                (agent_id, path),
            )
            row = await cursor.fetchone()
        if row is None:
            return None
        return BootstrapState(
            conversation_id=row[0],
            path=path,
            size=row[1],
            mtime_ns=row[2],
            offset=row[3],
            tail_hash=row[4],
            last_entry_key=row[5],
            reconciled_seq=row[7],
            updated_at=row[6],
        )

    async def put_bootstrap_state(self, state: BootstrapState) -> None:
        updated = aware(state.updated_at)
        async with self._db.transaction() as conn, conn.pipeline():
            await conn.execute(
                "INSERT INTO conversation_bootstrap_state (conversation_id, session_file_path, last_seen_size, "
                "last_seen_mtime_ns, last_processed_offset, last_processed_entry_hash, last_entry_key, updated_at, "
                "reconciled_seq) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (conversation_id, session_file_path) "
                "DO UPDATE SET last_seen_size = excluded.last_seen_size, "
                "last_seen_mtime_ns = excluded.last_seen_mtime_ns, "
                "last_processed_offset = excluded.last_processed_offset, "
                "last_processed_entry_hash = excluded.last_processed_entry_hash, "
                "last_entry_key = excluded.last_entry_key, updated_at = excluded.updated_at, "
                "reconciled_seq = excluded.reconciled_seq",
                (
                    state.conversation_id,
                    state.path,
                    state.size,
                    state.mtime_ns,
                    state.offset,
                    state.tail_hash,
                    state.last_entry_key,
                    updated,
                    state.reconciled_seq,
                ),
            )
            await conn.execute(
                "UPDATE conversations SET bootstrapped_at = %s WHERE conversation_id = %s",
                (updated, state.conversation_id),
            )

    # ------------------------------------------------------------ large files

    async def insert_large_files(self, files: Sequence[LargeFile]) -> int:
        if not files:
            return 0
        rows = [large_file_params(f) for f in files]
        wanted = sorted({f.conversation_id for f in files})
        async with self._db.transaction() as conn:
            # FOR UPDATE, in id order, like every writer: the conversations cannot be deleted before
            # this transaction ends, and the append that follows in the same transaction (a message
            # and its files are one ``atomic()`` block) needs no lock upgrade.  (KEY SHARE here, then
            # the append's FOR UPDATE, deadlocked two writers that each held the first.)
            cursor = await conn.execute(
                "SELECT conversation_id FROM conversations WHERE conversation_id = ANY(%s::bigint[]) "
                "ORDER BY conversation_id FOR UPDATE",
                (wanted,),
            )
            present = {r[0] for r in await cursor.fetchall()}
            for conversation_id in wanted:
                if conversation_id not in present:
                    raise NotFoundError("conversation", conversation_id)
            async with conn.cursor() as cur:
                await cur.executemany(
                    f"INSERT INTO large_files ({FILE_COLUMNS}) VALUES ({', '.join(['%s'] * 11)}) "
                    "ON CONFLICT (file_id) DO NOTHING",
                    rows,
                )
                return max(cur.rowcount, 0)

    async def get_large_file(self, file_id: str) -> LargeFile | None:
        async with self._db.read() as conn:
            cursor = await conn.execute(f"SELECT {FILE_COLUMNS} FROM large_files WHERE file_id = %s", (file_id,))
            row = await cursor.fetchone()
        return None if row is None else large_file_from_row(row)

    async def list_large_files(
        self, conversation_id: int, *, limit: int | None = None, offset: int = 0
    ) -> list[LargeFile]:
        async with self._db.read() as conn:
            cursor = await conn.execute(
                f"SELECT {FILE_COLUMNS} FROM large_files WHERE conversation_id = %s "
                "ORDER BY created_at, file_rowid LIMIT %s OFFSET %s",
                (conversation_id, limit, offset),
            )
            rows = await cursor.fetchall()
        return [large_file_from_row(r) for r in rows]

    # ------------------------------------------------------------ housekeeping

    async def stats(self) -> StoreStats:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "SELECT (SELECT count(*) FROM conversations), (SELECT count(*) FROM messages), "
                "(SELECT count(*) FROM message_parts), (SELECT count(*) FROM summaries), "
                "(SELECT count(*) FROM context_items), (SELECT count(*) FROM large_files), "
                "(SELECT coalesce(sum(token_count), 0) FROM messages), "
                "(SELECT coalesce(max(version), 0) FROM lcm_migrations), pg_database_size(current_database())"
            )
            row = await cursor.fetchone()
            sizes = await table_bytes(conn)
        assert row is not None
        counts = [int(v) for v in row]
        return StoreStats(
            url=redact_url(self.url),
            backend=self.backend,
            schema_version=counts[7],
            conversations=counts[0],
            messages=counts[1],
            message_parts=counts[2],
            summaries=counts[3],
            context_items=counts[4],
            large_files=counts[5],
            total_bytes=counts[8],
            table_bytes=sizes,
            message_tokens=counts[6],
        )


# ---------------------------------------------------------------- write helpers


async def _append(conn: Connection, conversation_id: int, messages: Sequence[PreparedMessage]) -> AppendResult:
    keys = [p.message.event_key for p in messages if p.message.event_key is not None]
    plain = len(messages) - len(keys)
    # One round trip: the lock, then (a statement of its own) counters, stored keys and new ids.
    async with conn.pipeline():
        lock = await conn.execute(LOCK_CONVERSATION, (conversation_id,))
        cursor = await conn.execute(_APPEND_STATE, {"c": conversation_id, "keys": keys, "plain": plain})
        exists = await lock.fetchone() is not None
        state = await cursor.fetchone()
    if not exists:
        raise NotFoundError("conversation", conversation_id)
    assert state is not None
    last_seq, last_ordinal, known, ids = state
    seen: set[str] = set(known)
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
    ids = sorted(ids)
    assert len(ids) == len(fresh), (len(ids), len(fresh))
    next_seq, next_ordinal = (last_seq or 0) + 1, (last_ordinal or 0) + 1
    now = utcnow()

    message_rows: list[tuple[Any, ...]] = []
    part_rows: list[list[Any]] = []
    item_rows: list[tuple[Any, ...]] = []
    stored: list[MessageRecord] = []
    for offset, (message_id, prepared) in enumerate(zip(ids, fresh, strict=True)):
        message = prepared.message
        seq = next_seq + offset
        message_rows.append(
            (
                message_id,
                conversation_id,
                seq,
                message.role,
                message.content,
                prepared.token_count,
                prepared.created_at,
                message.event_key,
                dump_json(message.metadata),
            )
        )
        only = len(message.parts) == 1
        if not (only and implied_parts(message)):  # a plain text message: its one part is implied
            part_rows.extend(
                [message_id, ordinal, *part_params(part, message.content, only_part=only)]
                for ordinal, part in enumerate(message.parts)
            )
        item_rows.append((conversation_id, next_ordinal + offset, message_id, now))
        stored.append(stored_record(prepared, message_id, conversation_id, seq))
    if len(message_rows) < COPY_ROWS:
        async with conn.pipeline(), conn.cursor() as cur:
            await cur.executemany(
                f"INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)", message_rows
            )
            if part_rows:
                await cur.executemany(PART_INSERT, part_rows)
            await cur.executemany(
                f"INSERT INTO context_items ({_ITEM_COLUMNS}) VALUES (%s, %s, 'message', %s, %s)", item_rows
            )
    else:
        async with conn.cursor() as cur:
            await copy_rows(cur, f"messages ({MESSAGE_COLUMNS})", message_rows)
            if part_rows:
                await copy_rows(cur, f"message_parts (message_id, ordinal, {', '.join(PART_COLUMNS)})", part_rows)
            await copy_rows(
                cur, f"context_items ({_ITEM_COLUMNS})", [(c, o, "message", m, t) for c, o, m, t in item_rows]
            )
    return AppendResult(tuple(stored), duplicates)


async def _replace_range(
    conn: Connection,
    summary: Summary,
    params: tuple[Any, ...],
    sources: Sequence[ContextEntry],
    event: CompactionEvent | None,
) -> None:
    conversation_id = summary.conversation_id
    first, last = sources[0].ordinal, sources[-1].ordinal
    async with conn.pipeline():
        await conn.execute(LOCK_CONVERSATION, (conversation_id,))
        cursor = await conn.execute(
            "SELECT ordinal, item_type, message_id, summary_id FROM context_items "
            "WHERE conversation_id = %s AND ordinal BETWEEN %s AND %s ORDER BY ordinal",
            (conversation_id, first, last),
        )
        current = await cursor.fetchall()
    expected = [(e.ordinal, e.kind, e.message_id, e.summary_id) for e in sources]
    if [tuple(row) for row in current] != expected:
        raise ConflictError(
            f"the context of conversation {conversation_id} changed while it was being compacted; "
            "nothing was written: read it again and retry"
        )
    async with conn.pipeline(), conn.cursor() as cur:
        await cur.execute(SUMMARY_INSERT, params)
        if summary.kind == "leaf":
            await cur.executemany(
                "INSERT INTO summary_messages (summary_id, message_id, ordinal) VALUES (%s, %s, %s)",
                [(summary.id, e.message_id, i) for i, e in enumerate(sources)],
            )
        else:
            await cur.executemany(
                "INSERT INTO summary_parents (summary_id, parent_summary_id, ordinal) VALUES (%s, %s, %s)",
                [(summary.id, e.summary_id, i) for i, e in enumerate(sources)],
            )
        await cur.execute(
            "DELETE FROM context_items WHERE conversation_id = %s AND ordinal BETWEEN %s AND %s",
            (conversation_id, first, last),
        )
        await cur.execute(
            "INSERT INTO context_items (conversation_id, ordinal, item_type, summary_id, created_at) "
            "VALUES (%s, %s, 'summary', %s, %s)",
            (conversation_id, first, summary.id, utcnow()),
        )
        if event is not None:
            await cur.execute(
                f"INSERT INTO compaction_events ({EVENT_COLUMNS}) VALUES ({', '.join(['%s'] * 10)})",
                event_values(event, aware),
            )
