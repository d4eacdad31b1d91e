"""The :class:`~lossless.ports.Store` on one SQLite file.

Invariants (beyond the port's): a plain text message (one text part equal to
its content, no flags or metadata) stores no part row at all — reading it back
gives that one part; ids are assigned inside the write transaction
from ``sqlite_sequence`` and ``max(seq)``/``max(ordinal)``, which is safe
because ``BEGIN IMMEDIATE`` holds the database write lock; rows are inserted
with ``executemany`` so a batch costs a handful of statements, not one per row;
reads of many messages fetch their parts in one query per 500 messages (never
one query per message).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from pathlib import Path
from typing import Any

from lossless.errors import ConflictError, InputError, NotFoundError
from lossless.ports import AppendResult, PreparedMessage, StoreStats
from lossless.records import (
    BootstrapState,
    ContextEntry,
    ContextItem,
    Conversation,
    JSONValue,
    LargeFile,
    Message,
    MessageRecord,
    Part,
    Summary,
    TextPart,
    format_timestamp,
    utcnow,
)
from lossless.stores.rows import PART_COLUMNS, dump_json, load_json, part_from_row, part_to_row
from lossless.stores.sqlite.connection import Database

__all__ = ["SQLiteStore"]

_CHUNK = 500  # ids per IN (…) list; well under SQLite's variable limit

# A conversation's updated_at is its last activity: its newest message's time, else its own update time.
_LAST_ACTIVITY = (
    "coalesce((SELECT m.created_at FROM messages m WHERE m.conversation_id = c.conversation_id "
    "ORDER BY m.seq DESC LIMIT 1), c.updated_at)"
)
_CONVERSATION_COLUMNS = (
    "c.conversation_id, c.agent_id, c.session_id, c.session_key, c.parent_conversation_id, c.title, c.source, "
    f"c.active, c.archived_at, c.created_at, max({_LAST_ACTIVITY}, c.updated_at), c.metadata"
)
_MESSAGE_COLUMNS = "message_id, conversation_id, seq, role, content, token_count, created_at, event_key, metadata"
_SUMMARY_COLUMNS = (
    "summary_id, conversation_id, kind, depth, content, token_count, earliest_at, latest_at, descendant_count, "
    "descendant_token_count, source_message_token_count, file_ids, provider, model, level, reason, created_at"
)
_SUMMARY_COLUMN_COUNT = 17
_PART_SELECT = "p.message_id, " + ", ".join(f"p.{c}" for c in PART_COLUMNS)
_PART_INSERT = (
    f"INSERT INTO message_parts (part_id, message_id, ordinal, {', '.join(PART_COLUMNS)}) "
    f"VALUES ({', '.join('?' * (len(PART_COLUMNS) + 3))})"
)
_PARTS_PER_MESSAGE = 65536
#: A batch bigger than this runs in a worker thread rather than inline (see Database.write).
_INLINE_MESSAGES = 16
_INLINE_CHARS = 256 * 1024


def _ts(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


_FILE_COLUMNS = (
    "file_id, conversation_id, file_name, mime_type, byte_size, content_hash, storage_uri, "
    "exploration_summary, origin, content_kind, created_at"
)


def _large_file(row: Sequence[Any]) -> LargeFile:
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
        created_at=datetime.fromisoformat(row[10]),
    )


def _conversation(row: Sequence[Any]) -> Conversation:
    return Conversation(
        id=row[0],
        agent_id=row[1],
        session_id=row[2],
        session_key=row[3],
        parent_id=row[4],
        title=row[5],
        source=row[6],
        active=bool(row[7]),
        archived_at=_ts(row[8]),
        created_at=datetime.fromisoformat(row[9]),
        updated_at=datetime.fromisoformat(row[10]),
        metadata=load_json(row[11]),
    )


class SQLiteStore:
    """Conversations, messages and the summary DAG in one SQLite file (WAL)."""

    backend = "sqlite"

    def __init__(self, database: Database, url: str) -> None:
        self._db = database
        self.url = url

    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        synchronous: str = "normal",
        busy_timeout_ms: int = 10_000,
    ) -> SQLiteStore:
        """Open (creating and migrating if needed) the database at ``path``."""
        database = Database(Path(path), synchronous=synchronous, busy_timeout_ms=busy_timeout_ms)
        await database.open()
        return cls(database, f"sqlite:///{database.path}")

    @property
    def path(self) -> Path:
        return self._db.path

    def atomic(self) -> AbstractAsyncContextManager[None]:
        return self._db.atomic()

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> SQLiteStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

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

        def run(conn: sqlite3.Connection) -> Conversation:
            now = format_timestamp(utcnow())
            row = conn.execute(
                f"SELECT {_CONVERSATION_COLUMNS} FROM conversations c WHERE c.agent_id = ? AND c.session_id = ?",
                (agent_id, session_id),
            ).fetchone()
            if session_key is not None:
                # A session key names the *active* session: a new session under the same key
                # archives the previous one (as a host does on /reset).
                conn.execute(
                    "UPDATE conversations SET active = 0, archived_at = ?, updated_at = ? "
                    "WHERE agent_id = ? AND session_key = ? AND active = 1 AND session_id <> ?",
                    (now, now, agent_id, session_key, session_id),
                )
            if row is None:
                cursor = conn.execute(
                    "INSERT INTO conversations (agent_id, session_id, session_key, parent_conversation_id, "
                    "title, source, created_at, updated_at, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        agent_id,
                        session_id,
                        session_key,
                        parent_id,
                        title,
                        source,
                        now,
                        now,
                        dump_json(metadata),
                    ),
                )
                conversation_id = cursor.lastrowid
            else:
                conversation_id = row[0]
                conn.execute(
                    "UPDATE conversations SET session_key = coalesce(session_key, ?), title = coalesce(title, ?), "
                    "source = coalesce(source, ?), parent_conversation_id = coalesce(parent_conversation_id, ?), "
                    "metadata = coalesce(metadata, ?) WHERE conversation_id = ?",
                    (session_key, title, source, parent_id, dump_json(metadata), conversation_id),
                )
            fresh = conn.execute(
                f"SELECT {_CONVERSATION_COLUMNS} FROM conversations c WHERE c.conversation_id = ?",
                (conversation_id,),
            ).fetchone()
            return _conversation(fresh)

        return await self._db.write(run)

    async def get_conversation(self, conversation_id: int) -> Conversation | None:
        def run(conn: sqlite3.Connection) -> Conversation | None:
            row = conn.execute(
                f"SELECT {_CONVERSATION_COLUMNS} FROM conversations c WHERE c.conversation_id = ?",
                (conversation_id,),
            ).fetchone()
            return None if row is None else _conversation(row)

        return await self._db.read(run)

    async def find_conversation(
        self, *, agent_id: str, session_id: str | None = None, session_key: str | None = None
    ) -> Conversation | None:
        if session_id is None and session_key is None:
            raise InputError("find_conversation needs a session_id or a session_key")

        def run(conn: sqlite3.Connection) -> Conversation | None:
            if session_id is not None:
                row = conn.execute(
                    f"SELECT {_CONVERSATION_COLUMNS} FROM conversations c WHERE c.agent_id = ? AND c.session_id = ?",
                    (agent_id, session_id),
                ).fetchone()
            else:
                row = conn.execute(
                    f"SELECT {_CONVERSATION_COLUMNS} FROM conversations c "
                    "WHERE c.agent_id = ? AND c.session_key = ? AND c.active = 1",
                    (agent_id, session_key),
                ).fetchone()
            return None if row is None else _conversation(row)

        return await self._db.read(run)

    async def list_conversations(
        self, *, agent_id: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[Conversation]:
        def run(conn: sqlite3.Connection) -> list[Conversation]:
            where, params = ("WHERE c.agent_id = ?", [agent_id]) if agent_id is not None else ("", [])
            rows = conn.execute(
                f"SELECT {_CONVERSATION_COLUMNS} FROM conversations c {where} "
                "ORDER BY 11 DESC, c.conversation_id DESC LIMIT ? OFFSET ?",
                (*params, limit, offset),
            ).fetchall()
            return [_conversation(r) for r in rows]

        return await self._db.read(run)

    async def conversation_sizes(self, conversation_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
        ids = list(dict.fromkeys(conversation_ids))

        def run(conn: sqlite3.Connection) -> dict[int, tuple[int, int]]:
            sizes: dict[int, tuple[int, int]] = {}
            for chunk in _chunks(ids):
                for row in conn.execute(
                    "SELECT conversation_id, count(*), coalesce(sum(token_count), 0) FROM messages "
                    f"WHERE conversation_id IN ({','.join('?' * len(chunk))}) GROUP BY conversation_id",
                    tuple(chunk),
                ):
                    sizes[row[0]] = (row[1], row[2])
            return sizes

        return await self._db.read(run)

    async def archive_conversation(self, conversation_id: int) -> None:
        def run(conn: sqlite3.Connection) -> None:
            now = format_timestamp(utcnow())
            conn.execute(
                "UPDATE conversations SET active = 0, archived_at = coalesce(archived_at, ?), updated_at = ? "
                "WHERE conversation_id = ?",
                (now, now, conversation_id),
            )

        await self._db.write(run)

    async def discard_conversation(self, conversation_id: int) -> None:
        def run(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM messages WHERE conversation_id = ? LIMIT 1", (conversation_id,)).fetchone():
                raise InputError(f"conversation {conversation_id} has messages of its own and is not discarded")
            if conn.execute("SELECT 1 FROM summaries WHERE conversation_id = ? LIMIT 1", (conversation_id,)).fetchone():
                raise InputError(f"conversation {conversation_id} has summaries of its own and is not discarded")
            conn.execute("DELETE FROM context_items WHERE conversation_id = ?", (conversation_id,))
            conn.execute("DELETE FROM conversation_bootstrap_state WHERE conversation_id = ?", (conversation_id,))
            conn.execute("DELETE FROM conversations WHERE conversation_id = ?", (conversation_id,))

        await self._db.write(run)

    # ------------------------------------------------------------ messages

    async def append_messages(self, conversation_id: int, messages: Sequence[PreparedMessage]) -> AppendResult:
        if not messages:
            return AppendResult()
        heavy = len(messages) > _INLINE_MESSAGES or sum(len(p.message.content) for p in messages) > _INLINE_CHARS
        return await self._db.write(lambda conn: _append(conn, conversation_id, messages), heavy=heavy)

    async def get_messages(
        self,
        conversation_id: int,
        *,
        after_seq: int | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[MessageRecord]:
        def run(conn: sqlite3.Connection) -> list[MessageRecord]:
            order = "DESC" if newest_first else "ASC"
            rows = conn.execute(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND seq > ? "
                f"ORDER BY seq {order} LIMIT ?",
                (conversation_id, -1 if after_seq is None else after_seq, -1 if limit is None else limit),
            ).fetchall()
            return _with_parts(conn, rows)

        return await self._db.read(run)

    async def get_messages_by_id(self, message_ids: Sequence[int]) -> list[MessageRecord]:
        ids = list(dict.fromkeys(message_ids))

        def run(conn: sqlite3.Connection) -> list[MessageRecord]:
            rows: list[Any] = []
            for chunk in _chunks(ids):
                rows += conn.execute(
                    f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE message_id IN ({','.join('?' * len(chunk))})",
                    tuple(chunk),
                ).fetchall()
            by_id = {r.id: r for r in _with_parts(conn, rows)}
            return [by_id[i] for i in ids if i in by_id]

        return await self._db.read(run)

    async def count_messages(self, conversation_id: int) -> int:
        def run(conn: sqlite3.Connection) -> int:
            row = conn.execute("SELECT count(*) FROM messages WHERE conversation_id = ?", (conversation_id,))
            count: int = row.fetchone()[0]
            return count

        return await self._db.read(run)

    async def last_event_key(self, conversation_id: int) -> str | None:
        def run(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT event_key FROM messages WHERE conversation_id = ? AND event_key IS NOT NULL "
                "ORDER BY seq DESC LIMIT 1",
                (conversation_id,),
            ).fetchone()
            return None if row is None else str(row[0])

        return await self._db.read(run)

    # ------------------------------------------------------------ context

    async def get_context_items(self, conversation_id: int) -> list[ContextItem]:
        def run(conn: sqlite3.Connection) -> list[ContextItem]:
            rows = conn.execute(
                "SELECT ordinal, item_type, message_id, summary_id FROM context_items "
                "WHERE conversation_id = ? ORDER BY ordinal",
                (conversation_id,),
            ).fetchall()
            return [ContextItem(conversation_id, r[0], r[1], r[2], r[3]) for r in rows]

        return await self._db.read(run)

    async def get_context(self, conversation_id: int) -> list[ContextEntry]:
        def run(conn: sqlite3.Connection) -> list[ContextEntry]:
            calls: dict[int, list[str]] = {}
            results: dict[int, list[str]] = {}
            # typeof() reads only the record header: the (possibly large) tool texts are not loaded.
            for message_id, call_id, has_input, has_output in conn.execute(
                "SELECT p.message_id, p.tool_call_id, typeof(p.tool_input) != 'null', "
                "typeof(p.tool_output) != 'null' OR typeof(p.tool_error) != 'null' OR p.from_content "
                "FROM context_items ci JOIN message_parts p ON p.part_id BETWEEN ci.message_id * 65536 "
                "AND ci.message_id * 65536 + 65535 "
                "WHERE ci.conversation_id = ? AND ci.item_type = 'message' AND p.part_type = 'tool' "
                "AND p.tool_call_id IS NOT NULL ORDER BY p.part_id",
                (conversation_id,),
            ):
                if has_input or not has_output:
                    calls.setdefault(message_id, []).append(call_id)
                if has_output:
                    results.setdefault(message_id, []).append(call_id)
            rows = conn.execute(
                "SELECT ci.ordinal, ci.item_type, ci.message_id, ci.summary_id, "
                "coalesce(m.token_count, s.token_count), coalesce(m.created_at, s.latest_at, s.created_at), "
                "m.role, s.depth, s.earliest_at "
                "FROM context_items ci "
                "LEFT JOIN messages m ON m.message_id = ci.message_id "
                "LEFT JOIN summaries s ON s.summary_id = ci.summary_id "
                "WHERE ci.conversation_id = ? ORDER BY ci.ordinal",
                (conversation_id,),
            ).fetchall()
            return [
                ContextEntry(
                    ordinal=row[0],
                    kind=row[1],
                    token_count=row[4],
                    created_at=datetime.fromisoformat(row[5]),
                    message_id=row[2],
                    summary_id=row[3],
                    role=row[6],
                    depth=row[7],
                    earliest_at=_ts(row[8]),
                    tool_calls=tuple(calls.get(row[2], ())),
                    tool_results=tuple(results.get(row[2], ())),
                )
                for row in rows
            ]

        return await self._db.read(run)

    async def copy_context(self, conversation_id: int, entries: Sequence[ContextEntry]) -> None:
        def run(conn: sqlite3.Connection) -> None:
            start = conn.execute(
                "SELECT coalesce(max(ordinal), 0) + 1 FROM context_items WHERE conversation_id = ?",
                (conversation_id,),
            ).fetchone()[0]
            now = format_timestamp(utcnow())
            conn.executemany(
                "INSERT INTO context_items (conversation_id, ordinal, item_type, message_id, summary_id, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(conversation_id, start + i, e.kind, e.message_id, e.summary_id, now) for i, e in enumerate(entries)],
            )

        if entries:
            await self._db.write(run)

    # ------------------------------------------------------------ the summary DAG

    async def replace_with_summary(self, summary: Summary, sources: Sequence[ContextEntry]) -> None:
        _check_sources(summary, sources)
        await self._db.write(lambda conn: _replace(conn, summary, sources))

    async def get_summaries(self, summary_ids: Sequence[str]) -> list[Summary]:
        ids = list(dict.fromkeys(summary_ids))

        def run(conn: sqlite3.Connection) -> list[Summary]:
            found: dict[str, Summary] = {}
            for chunk in _chunks(ids):
                for row in conn.execute(
                    f"SELECT {_SUMMARY_COLUMNS} FROM summaries WHERE summary_id IN ({','.join('?' * len(chunk))})",
                    tuple(chunk),
                ):
                    summary = _summary(row)
                    found[summary.id] = summary
            return [found[i] for i in ids if i in found]

        return await self._db.read(run)

    async def list_summaries(self, conversation_id: int) -> list[Summary]:
        def run(conn: sqlite3.Connection) -> list[Summary]:
            rows = conn.execute(
                f"SELECT {_SUMMARY_COLUMNS} FROM summaries WHERE conversation_id = ? ORDER BY summary_rowid",
                (conversation_id,),
            ).fetchall()
            return [_summary(r) for r in rows]

        return await self._db.read(run)

    async def get_summary_parents(self, summary_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        ids = list(dict.fromkeys(summary_ids))

        def run(conn: sqlite3.Connection) -> dict[str, tuple[str, ...]]:
            parents: dict[str, list[str]] = {}
            for chunk in _chunks(ids):
                for summary_id, parent in conn.execute(
                    "SELECT summary_id, parent_summary_id FROM summary_parents "
                    f"WHERE summary_id IN ({','.join('?' * len(chunk))}) ORDER BY summary_id, ordinal",
                    tuple(chunk),
                ):
                    parents.setdefault(summary_id, []).append(parent)
            return {k: tuple(v) for k, v in parents.items()}

        return await self._db.read(run)

    async def get_lineage(self, conversation_id: int) -> dict[str, tuple[int | str, ...]]:
        def run(conn: sqlite3.Connection) -> dict[str, tuple[int | str, ...]]:
            lineage: dict[str, list[int | str]] = {}
            for summary_id, source in conn.execute(
                "SELECT sm.summary_id, sm.message_id FROM summary_messages sm "
                "JOIN summaries s ON s.summary_id = sm.summary_id WHERE s.conversation_id = ? "
                "ORDER BY sm.summary_id, sm.ordinal",
                (conversation_id,),
            ):
                lineage.setdefault(summary_id, []).append(source)
            for summary_id, source in conn.execute(
                "SELECT sp.summary_id, sp.parent_summary_id FROM summary_parents sp "
                "JOIN summaries s ON s.summary_id = sp.summary_id WHERE s.conversation_id = ? "
                "ORDER BY sp.summary_id, sp.ordinal",
                (conversation_id,),
            ):
                lineage.setdefault(summary_id, []).append(source)
            return {k: tuple(v) for k, v in lineage.items()}

        return await self._db.read(run)

    # ------------------------------------------------------------ bootstrap state

    async def find_bootstrap_state(self, agent_id: str, path: str) -> BootstrapState | None:
        def run(conn: sqlite3.Connection) -> BootstrapState | None:
            row = conn.execute(
                "SELECT b.conversation_id, b.last_seen_size, b.last_seen_mtime_ns, b.last_processed_offset, "
                "b.last_processed_entry_hash, b.last_entry_key, b.updated_at "
                "FROM conversation_bootstrap_state b JOIN conversations c USING (conversation_id) "
                "WHERE c.agent_id = ? AND b.session_file_path = ? ORDER BY b.updated_at DESC LIMIT 1",
                (agent_id, path),
            ).fetchone()
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
                updated_at=datetime.fromisoformat(row[6]),
            )

        return await self._db.read(run)

    async def put_bootstrap_state(self, state: BootstrapState) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO conversation_bootstrap_state (conversation_id, session_file_path, last_seen_size, "
                "last_seen_mtime_ns, last_processed_offset, last_processed_entry_hash, last_entry_key, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (conversation_id, session_file_path) DO UPDATE SET "
                "last_seen_size = excluded.last_seen_size, last_seen_mtime_ns = excluded.last_seen_mtime_ns, "
                "last_processed_offset = excluded.last_processed_offset, "
                "last_processed_entry_hash = excluded.last_processed_entry_hash, "
                "last_entry_key = excluded.last_entry_key, updated_at = excluded.updated_at",
                (
                    state.conversation_id,
                    state.path,
                    state.size,
                    state.mtime_ns,
                    state.offset,
                    state.tail_hash,
                    state.last_entry_key,
                    format_timestamp(state.updated_at),
                ),
            )
            conn.execute(
                "UPDATE conversations SET bootstrapped_at = ? WHERE conversation_id = ?",
                (format_timestamp(state.updated_at), state.conversation_id),
            )

        await self._db.write(run)

    # ------------------------------------------------------------ large files

    async def insert_large_files(self, files: Sequence[LargeFile]) -> int:
        if not files:
            return 0
        rows = [
            (
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
                format_timestamp(f.created_at),
            )
            for f in files
        ]

        def run(conn: sqlite3.Connection) -> int:
            conversations = {f.conversation_id for f in files}
            for conversation_id in conversations:
                if (
                    conn.execute("SELECT 1 FROM conversations WHERE conversation_id = ?", (conversation_id,)).fetchone()
                    is None
                ):
                    raise NotFoundError("conversation", conversation_id)
            before = conn.total_changes
            conn.executemany(
                f"INSERT INTO large_files ({_FILE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (file_id) DO NOTHING",
                rows,
            )
            return conn.total_changes - before

        return await self._db.write(run)

    async def get_large_file(self, file_id: str) -> LargeFile | None:
        def run(conn: sqlite3.Connection) -> LargeFile | None:
            row = conn.execute(f"SELECT {_FILE_COLUMNS} FROM large_files WHERE file_id = ?", (file_id,)).fetchone()
            return None if row is None else _large_file(row)

        return await self._db.read(run)

    async def list_large_files(
        self, conversation_id: int, *, limit: int | None = None, offset: int = 0
    ) -> list[LargeFile]:
        def run(conn: sqlite3.Connection) -> list[LargeFile]:
            rows = conn.execute(
                f"SELECT {_FILE_COLUMNS} FROM large_files WHERE conversation_id = ? "
                "ORDER BY created_at, rowid LIMIT ? OFFSET ?",
                (conversation_id, -1 if limit is None else limit, offset),
            ).fetchall()
            return [_large_file(r) for r in rows]

        return await self._db.read(run)

    # ------------------------------------------------------------ search

    async def wait_indexed(self) -> None:
        await self._db.wait_indexed()

    # ------------------------------------------------------------ housekeeping

    async def stats(self) -> StoreStats:
        def run(conn: sqlite3.Connection) -> StoreStats:
            def count(table: str) -> int:
                value: int = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                return value

            version = conn.execute("SELECT coalesce(max(version), 0) FROM lcm_migrations").fetchone()[0]
            tokens = conn.execute("SELECT coalesce(sum(token_count), 0) FROM messages").fetchone()[0]
            page_size = conn.execute("PRAGMA page_size").fetchone()[0]
            page_count = conn.execute("PRAGMA page_count").fetchone()[0]
            table_bytes = _table_bytes(conn)
            total = page_size * page_count
            index = self._db.index
            if index is not None:
                with contextlib.suppress(OSError):
                    table_bytes["search index (separate file)"] = index.path.stat().st_size
            return StoreStats(
                url=self.url,
                backend=self.backend,
                schema_version=version,
                conversations=count("conversations"),
                messages=count("messages"),
                message_parts=count("message_parts"),
                summaries=count("summaries"),
                context_items=count("context_items"),
                large_files=count("large_files"),
                total_bytes=total,
                table_bytes=table_bytes,
                message_tokens=tokens,
            )

        return await self._db.read(run)


# ---------------------------------------------------------------- write helpers (run in the writer thread)


def _append(conn: sqlite3.Connection, conversation_id: int, messages: Sequence[PreparedMessage]) -> AppendResult:
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
        for chunk in _chunks(keys):
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
        if len(message.parts) >= _PARTS_PER_MESSAGE:
            raise InputError(f"a message may have at most {_PARTS_PER_MESSAGE - 1} parts, got {len(message.parts)}")
        only = len(message.parts) == 1
        if only and _implied(message):
            pass  # a plain text message: its one part is implied by its content (see _with_parts)
        else:
            part_rows.extend(
                (
                    message_id * _PARTS_PER_MESSAGE + ordinal,
                    message_id,
                    ordinal,
                    *part_to_row(part, message.content, only_part=only),
                )
                for ordinal, part in enumerate(message.parts)
            )
        item_rows.append((conversation_id, next_ordinal + offset, message_id, now))
        stored.append(
            MessageRecord(
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
        )
    _insert(conn, f"INSERT INTO messages ({_MESSAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", message_rows)
    _insert(conn, _PART_INSERT, part_rows)
    _insert(
        conn,
        "INSERT INTO context_items (conversation_id, ordinal, item_type, message_id, created_at) "
        "VALUES (?, ?, 'message', ?, ?)",
        item_rows,
    )
    return AppendResult(tuple(stored), duplicates)


def _check_sources(summary: Summary, sources: Sequence[ContextEntry]) -> None:
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


def _replace(conn: sqlite3.Connection, summary: Summary, sources: Sequence[ContextEntry]) -> None:
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
        f"INSERT INTO summaries ({_SUMMARY_COLUMNS}) VALUES ({', '.join('?' * _SUMMARY_COLUMN_COUNT)})",
        _summary_row(summary),
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


def _summary_row(summary: Summary) -> tuple[Any, ...]:
    return (
        summary.id,
        summary.conversation_id,
        summary.kind,
        summary.depth,
        summary.content,
        summary.token_count,
        _fmt(summary.earliest_at),
        _fmt(summary.latest_at),
        summary.descendant_count,
        summary.descendant_token_count,
        summary.source_token_count,
        dump_json(list(summary.file_ids)),
        summary.provider,
        summary.model,
        summary.level,
        summary.reason,
        format_timestamp(summary.created_at),
    )


def _summary(row: Sequence[Any]) -> Summary:
    return Summary(
        id=row[0],
        conversation_id=row[1],
        kind=row[2],
        depth=row[3],
        content=row[4],
        token_count=row[5],
        earliest_at=_ts(row[6]),
        latest_at=_ts(row[7]),
        descendant_count=row[8],
        descendant_token_count=row[9],
        source_token_count=row[10],
        file_ids=tuple(load_json(row[11]) or ()),
        provider=row[12],
        model=row[13],
        level=row[14],
        reason=row[15],
        created_at=datetime.fromisoformat(row[16]),
    )


def _fmt(value: datetime | None) -> str | None:
    return None if value is None else format_timestamp(value)


def _implied(message: Message) -> bool:
    """A message whose only part is a plain text part equal to its content needs no part row."""
    part = message.parts[0]
    return bool(message.content) and type(part) is TextPart and part == TextPart(message.content)


def _insert(conn: sqlite3.Connection, sql: str, rows: list[tuple[Any, ...]]) -> None:
    if len(rows) == 1:
        conn.execute(sql, rows[0])
    elif rows:
        conn.executemany(sql, rows)


# ---------------------------------------------------------------- read helpers


def _with_parts(conn: sqlite3.Connection, rows: Sequence[Any]) -> list[MessageRecord]:
    """Attach parts to message rows with one query per :data:`_CHUNK` messages."""
    parts: dict[int, list[Part]] = {}
    contents = {row[0]: row[4] for row in rows}
    ids = list(contents)
    for chunk in _chunks(ids):
        # Parts are keyed message_id * 65536 + ordinal: one primary-key range per message.
        for prow in conn.execute(
            f"WITH ids(m) AS (VALUES {','.join(['(?)'] * len(chunk))}) "
            f"SELECT {_PART_SELECT} FROM ids JOIN message_parts p "
            f"ON p.part_id BETWEEN ids.m * {_PARTS_PER_MESSAGE} "
            f"AND ids.m * {_PARTS_PER_MESSAGE} + {_PARTS_PER_MESSAGE - 1} "
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


def _table_bytes(conn: sqlite3.Connection) -> dict[str, int]:
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
