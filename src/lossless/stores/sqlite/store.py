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
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from lossless.errors import InputError
from lossless.ports import (
    AppendResult,
    IndexDiscrepancy,
    ItemVectors,
    Job,
    JobKind,
    JobReason,
    JobState,
    PreparedMessage,
    PruneCandidate,
    SearchRequest,
    SearchRow,
    StoreStats,
    VectorSource,
    VectorState,
    VectorTodo,
)
from lossless.records import (
    BootstrapState,
    CompactionEvent,
    ContextEntry,
    ContextRow,
    Conversation,
    Grant,
    JSONValue,
    LargeFile,
    MessageRecord,
    Summary,
    format_timestamp,
    utcnow,
)
from lossless.stores.rows import SUMMARY_COLUMNS, check_event, check_job, check_sources, dump_json
from lossless.stores.sqlite import bootstrap, jobs, large_files, maintenance, retrieval, vectors
from lossless.stores.sqlite.connection import Database
from lossless.stores.sqlite.statements import (
    CONVERSATION_COLUMNS,
    INLINE_CHARS,
    INLINE_MESSAGES,
    MESSAGE_COLUMNS,
    append,
    chunks,
    compaction_events,
    conversation_from_row,
    replace_range,
    summary_from_row,
    table_bytes,
    timestamp,
    with_parts,
)

if TYPE_CHECKING:
    from lossless.stores.sqlite.memory import SQLiteMemoryStore


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
        """Open (creating and migrating if needed) the database at ``path``.

        A relative path is resolved against the working directory now, once: the store's threads
        (the search indexer) and its companion files must not depend on a later ``chdir``.
        """
        resolved = await (await anyio.Path(path).expanduser()).resolve()
        database = Database(Path(resolved), synchronous=synchronous, busy_timeout_ms=busy_timeout_ms)
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
                f"SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.agent_id = ? AND c.session_id = ?",
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
                f"SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.conversation_id = ?",
                (conversation_id,),
            ).fetchone()
            return conversation_from_row(fresh)

        return await self._db.write(run)

    async def get_conversation(self, conversation_id: int) -> Conversation | None:
        def run(conn: sqlite3.Connection) -> Conversation | None:
            row = conn.execute(
                f"SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.conversation_id = ?",
                (conversation_id,),
            ).fetchone()
            return None if row is None else conversation_from_row(row)

        return await self._db.read(run)

    async def find_conversation(
        self, *, agent_id: str, session_id: str | None = None, session_key: str | None = None
    ) -> Conversation | None:
        if session_id is None and session_key is None:
            raise InputError("find_conversation needs a session_id or a session_key")

        def run(conn: sqlite3.Connection) -> Conversation | None:
            if session_id is not None:
                row = conn.execute(
                    f"SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.agent_id = ? AND c.session_id = ?",
                    (agent_id, session_id),
                ).fetchone()
            else:
                row = conn.execute(
                    f"SELECT {CONVERSATION_COLUMNS} FROM conversations c "
                    "WHERE c.agent_id = ? AND c.session_key = ? AND c.active = 1",
                    (agent_id, session_key),
                ).fetchone()
            return None if row is None else conversation_from_row(row)

        return await self._db.read(run)

    async def list_conversations(
        self, *, agent_id: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[Conversation]:
        def run(conn: sqlite3.Connection) -> list[Conversation]:
            where, params = ("WHERE c.agent_id = ?", [agent_id]) if agent_id is not None else ("", [])
            rows = conn.execute(
                f"SELECT {CONVERSATION_COLUMNS} FROM conversations c {where} "
                "ORDER BY 11 DESC, c.conversation_id DESC LIMIT ? OFFSET ?",
                (*params, limit, offset),
            ).fetchall()
            return [conversation_from_row(r) for r in rows]

        return await self._db.read(run)

    async def conversation_sizes(self, conversation_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
        ids = list(dict.fromkeys(conversation_ids))

        def run(conn: sqlite3.Connection) -> dict[int, tuple[int, int]]:
            sizes: dict[int, tuple[int, int]] = {}
            for chunk in chunks(ids):
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
        heavy = len(messages) > INLINE_MESSAGES or sum(len(p.message.content) for p in messages) > INLINE_CHARS
        return await self._db.write(lambda conn: append(conn, conversation_id, messages), heavy=heavy)

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
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND seq > ? "
                f"ORDER BY seq {order} LIMIT ?",
                (conversation_id, -1 if after_seq is None else after_seq, -1 if limit is None else limit),
            ).fetchall()
            return with_parts(conn, rows)

        return await self._db.read(run)

    async def get_messages_by_id(self, message_ids: Sequence[int]) -> list[MessageRecord]:
        ids = list(dict.fromkeys(message_ids))

        def run(conn: sqlite3.Connection) -> list[MessageRecord]:
            rows: list[Any] = []
            for chunk in chunks(ids):
                rows += conn.execute(
                    f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE message_id IN ({','.join('?' * len(chunk))})",
                    tuple(chunk),
                ).fetchall()
            by_id = {r.id: r for r in with_parts(conn, rows)}
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

    async def get_context_items(self, conversation_id: int) -> list[ContextRow]:
        def run(conn: sqlite3.Connection) -> list[ContextRow]:
            rows = conn.execute(
                "SELECT ordinal, item_type, message_id, summary_id FROM context_items "
                "WHERE conversation_id = ? ORDER BY ordinal",
                (conversation_id,),
            ).fetchall()
            return [ContextRow(conversation_id, r[0], r[1], r[2], r[3]) for r in rows]

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
                    earliest_at=timestamp(row[8]),
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

    async def replace_with_summary(
        self, summary: Summary, sources: Sequence[ContextEntry], event: CompactionEvent | None = None
    ) -> None:
        check_sources(summary, sources)
        if event is not None:
            check_event(summary, sources, event)
        await self._db.write(lambda conn: replace_range(conn, summary, sources, event))

    async def summary_fingerprint(self, conversation_id: int) -> tuple[int, int, int]:
        row = await self._db.read(
            lambda conn: conn.execute(
                "SELECT count(*), coalesce(max(summary_rowid), 0), (SELECT coalesce(max(CAST(value AS INTEGER)), 0) "
                "FROM lcm_meta WHERE key = 'summary_rewrites') FROM summaries WHERE conversation_id = ?",
                (conversation_id,),
            ).fetchone()
        )
        return int(row[0]), int(row[1]), int(row[2])

    async def get_compaction_events(self, conversation_id: int, *, limit: int | None = None) -> list[CompactionEvent]:
        if limit is not None and limit < 0:
            raise InputError(f"limit must be zero or more, got {limit}")
        return await self._db.read(lambda conn: compaction_events(conn, conversation_id, limit))

    async def get_summaries(self, summary_ids: Sequence[str]) -> list[Summary]:
        ids = list(dict.fromkeys(summary_ids))

        def run(conn: sqlite3.Connection) -> list[Summary]:
            found: dict[str, Summary] = {}
            for chunk in chunks(ids):
                for row in conn.execute(
                    f"SELECT {SUMMARY_COLUMNS} FROM summaries WHERE summary_id IN ({','.join('?' * len(chunk))})",
                    tuple(chunk),
                ):
                    summary = summary_from_row(row)
                    found[summary.id] = summary
            return [found[i] for i in ids if i in found]

        return await self._db.read(run)

    async def list_summaries(self, conversation_id: int) -> list[Summary]:
        def run(conn: sqlite3.Connection) -> list[Summary]:
            rows = conn.execute(
                f"SELECT {SUMMARY_COLUMNS} FROM summaries WHERE conversation_id = ? ORDER BY summary_rowid",
                (conversation_id,),
            ).fetchall()
            return [summary_from_row(r) for r in rows]

        return await self._db.read(run)

    async def get_summary_parents(self, summary_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        ids = list(dict.fromkeys(summary_ids))

        def run(conn: sqlite3.Connection) -> dict[str, tuple[str, ...]]:
            parents: dict[str, list[str]] = {}
            for chunk in chunks(ids):
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
        return await self._db.read(lambda conn: bootstrap.find(conn, agent_id, path))

    async def put_bootstrap_state(self, state: BootstrapState) -> None:
        await self._db.write(lambda conn: bootstrap.put(conn, state))

    # ------------------------------------------------------------ large files

    async def insert_large_files(self, files: Sequence[LargeFile]) -> int:
        if not files:
            return 0
        return await self._db.write(lambda conn: large_files.insert(conn, files))

    async def get_large_file(self, file_id: str) -> LargeFile | None:
        return await self._db.read(lambda conn: large_files.get(conn, file_id))

    async def list_large_files(
        self, conversation_id: int, *, limit: int | None = None, offset: int = 0
    ) -> list[LargeFile]:
        return await self._db.read(lambda conn: large_files.list_files(conn, conversation_id, limit, offset))

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
            sizes = table_bytes(conn)
            total = page_size * page_count
            index = self._db.index
            if index is not None:
                with contextlib.suppress(OSError):
                    sizes["search index (separate file)"] = index.path.stat().st_size
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
                table_bytes=sizes,
                message_tokens=tokens,
            )

        return await self._db.read(run)

    # ------------------------------------------------------------ maintenance (MaintainableStore)

    def read_snapshot(self) -> AbstractAsyncContextManager[None]:
        return self._db.snapshot()

    def repair_transaction(self, conversation_id: int) -> AbstractAsyncContextManager[None]:
        # The write transaction holds the database's write lock: no writer of any process runs meanwhile.
        return self._db.atomic()

    async def search_index_problems(self, limit: int = 1000) -> list[IndexDiscrepancy]:
        return await self._db.read(lambda conn: maintenance.index_discrepancies(conn, limit))

    async def rebuild_search_index(self) -> None:
        index = self._db.index
        if index is None:
            return
        await anyio.to_thread.run_sync(index.rebuild)
        await self._db.wait_indexed()

    async def restore_context_item(self, conversation_id: int, ref: int | str) -> bool:
        now = format_timestamp(utcnow())
        return await self._db.write(lambda conn: maintenance.restore_context_item(conn, conversation_id, ref, now))

    async def drop_context_item(self, conversation_id: int, ordinal: int) -> bool:
        return await self._db.write(lambda conn: maintenance.drop_context_item(conn, conversation_id, ordinal))

    async def rewrite_summary(self, summary: Summary, *, replaces: str) -> bool:
        changed = await self._db.rewrite("summaries", lambda conn: maintenance.rewrite_summary(conn, summary, replaces))
        return bool(changed)

    # ------------------------------------------------------------ search vectors (SearchVectorStore)

    async def vectors_todo(
        self, model: str, source: VectorSource, *, after: int = 0, limit: int = 256
    ) -> list[VectorTodo]:
        return await self._db.read(lambda conn: vectors.todo(conn, model, source, after, limit))

    async def put_item_vectors(self, model: str, source: VectorSource, items: Sequence[ItemVectors]) -> int:
        if not items:
            return 0
        return await self._db.write(lambda conn: vectors.put(conn, model, source, items))

    async def vector_states(
        self, model: str, source: VectorSource, conversation_ids: Sequence[int]
    ) -> dict[int, VectorState]:
        return await self._db.read(lambda conn: vectors.states(conn, model, source, conversation_ids))

    async def vector_totals(self, model: str, source: VectorSource) -> VectorState:
        return await self._db.read(lambda conn: vectors.totals(conn, model, source))

    async def load_item_vectors(
        self, model: str, source: VectorSource, conversation_id: int
    ) -> list[tuple[int | str, bytes]]:
        return await self._db.read(lambda conn: vectors.load(conn, model, source, conversation_id))

    async def drop_item_vectors(self, models: Sequence[str], limit: int = 2000) -> int:
        """Delete up to ``limit`` vector rows of ``models`` (an index format no longer searched); the count deleted."""
        if not models:
            return 0
        return await self._db.write(lambda conn: vectors.drop(conn, models, limit))

    async def copy_item_vectors(
        self, source: VectorSource, from_model: str, to_model: str, items: Sequence[tuple[int | str, int]]
    ) -> list[int | str]:
        """Copy ``from_model``'s vectors of these ``(key, rows)`` items to ``to_model`` (an index format upgrade,
        the texts unchanged) in one transaction; the keys that have ``to_model`` vectors now."""
        if not items:
            return []
        return await self._db.write(lambda conn: vectors.copy(conn, source, from_model, to_model, items))

    async def vector_models(self) -> list[str]:
        """Every model name that has vectors in this store."""
        return await self._db.read(vectors.models)

    async def nearest_items(
        self,
        model: str,
        source: VectorSource,
        query: bytes,
        conversation_ids: Sequence[int],
        *,
        limit: int,
    ) -> list[tuple[int | str, int, float]] | None:
        return None  # no vector index in SQLite: searches hold the loaded vectors in memory

    # ------------------------------------------------------------ retention (RetentionStore)

    async def archived_before(self, agent_id: str, before: datetime) -> list[int]:
        cutoff = format_timestamp(before)
        return await self._db.read(lambda conn: maintenance.archived_before(conn, agent_id, cutoff))

    async def prune_candidates(self, conversation_ids: Sequence[int]) -> list[PruneCandidate]:
        ids = list(dict.fromkeys(conversation_ids))

        def run(conn: sqlite3.Connection) -> list[PruneCandidate]:
            found = (maintenance.prune_candidate(conn, i) for i in ids)
            return [c for c in found if c is not None]

        return await self._db.read(run)

    async def delete_conversations(self, conversation_ids: Sequence[int]) -> int:
        ids = list(dict.fromkeys(conversation_ids))
        if not ids:
            return 0

        def run(conn: sqlite3.Connection) -> tuple[int, dict[str, list[tuple[int, str]]]]:
            present = [
                i for i in ids if conn.execute("SELECT 1 FROM conversations WHERE conversation_id = ?", (i,)).fetchone()
            ]
            return len(present), maintenance.delete_conversations(conn, present)

        deleted, forgotten = await self._db.write(run, heavy=True)
        index = self._db.index
        if index is not None:
            await anyio.to_thread.run_sync(index.forget, forgotten)
        return deleted

    async def vacuum(self) -> tuple[int, int]:
        return await self._db.vacuum()

    # ------------------------------------------------------------ background jobs (JobQueue)

    async def enqueue_job(
        self,
        kind: JobKind,
        *,
        reason: JobReason,
        conversation_id: int | None = None,
        mode: str | None = None,
        target_tokens: int | None = None,
        requested_at: datetime,
    ) -> Job:
        check_job(kind, reason, conversation_id)
        return await self._db.write(
            lambda conn: jobs.enqueue(conn, kind, reason, conversation_id, mode, target_tokens, requested_at)
        )

    async def claim_job(self, owner: str, *, lease_ms: int, now_ms: int, max_attempts: int) -> Job | None:
        return await self._db.write(lambda conn: jobs.claim(conn, owner, lease_ms, now_ms, max_attempts))

    async def renew_job(self, job_id: int, owner: str, *, lease_ms: int, now_ms: int) -> bool:
        return await self._db.write(lambda conn: jobs.renew(conn, job_id, owner, lease_ms, now_ms))

    async def finish_job(
        self,
        job_id: int,
        owner: str,
        *,
        ok: bool,
        result: JSONValue = None,
        error: str | None = None,
        retry: bool = False,
        finished_at: datetime,
    ) -> bool:
        return await self._db.write(
            lambda conn: jobs.finish(conn, job_id, owner, ok, result, error, retry, finished_at)
        )

    async def release_job(self, job_id: int, owner: str) -> bool:
        return await self._db.write(lambda conn: jobs.release(conn, job_id, owner))

    async def list_jobs(self, *, state: JobState | None = None, limit: int = 100) -> list[Job]:
        return await self._db.read(lambda conn: jobs.list_jobs(conn, state, limit))

    # ------------------------------------------------------------ retrieval and grants

    async def search(self, request: SearchRequest) -> list[SearchRow]:
        return await self._db.read(lambda conn: retrieval.search(conn, request))

    async def get_summary_messages(self, summary_ids: Sequence[str]) -> dict[str, tuple[int, ...]]:
        return await self._db.read(lambda conn: retrieval.summary_messages(conn, summary_ids))

    async def get_summary_children(self, summary_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        return await self._db.read(lambda conn: retrieval.summary_children(conn, summary_ids))

    async def list_conversation_links(self, agent_id: str) -> list[tuple[int, int | None, str | None]]:
        return await self._db.read(lambda conn: retrieval.conversation_links(conn, agent_id))

    async def create_grant(self, grant: Grant) -> None:
        await self._db.write(lambda conn: retrieval.insert_grant(conn, grant))

    async def get_grant(self, grant_id: str) -> Grant | None:
        return await self._db.read(lambda conn: retrieval.select_grant(conn, grant_id))

    async def charge_grant(self, grant_id: str, tokens: int, now: datetime) -> Grant | None:
        return await self._db.write(lambda conn: retrieval.charge(conn, grant_id, tokens, now))

    async def reserve_grant(self, grant_id: str, tokens: int, now: datetime) -> int | None:
        return await self._db.write(lambda conn: retrieval.reserve(conn, grant_id, tokens, now))

    async def release_grant(self, grant_id: str, tokens: int) -> None:
        if tokens > 0:
            await self._db.write(lambda conn: retrieval.release(conn, grant_id, tokens))

    async def revoke_grant(self, grant_id: str, reason: str, now: datetime) -> bool:
        return await self._db.write(lambda conn: retrieval.revoke(conn, grant_id, reason, now))

    async def sweep_grants(self, now: datetime) -> int:
        return await self._db.write(lambda conn: retrieval.sweep(conn, now))

    # ------------------------------------------------------------ long-term memory

    def memory_store(self) -> SQLiteMemoryStore:
        """The long-term memory tables of this same file (see :mod:`lossless.memory`)."""
        from lossless.stores.sqlite.memory import SQLiteMemoryStore

        return SQLiteMemoryStore(self._db)
