"""The :class:`~lossless.ports.Store` on PostgreSQL: many agent hosts and workers on one database.

The class is assembled from one mixin per concern, each in its own module and each
working through :class:`~lossless.stores.postgres.connection.Database` (``self._db``):

* :mod:`~lossless.stores.postgres.core` — conversations, messages and parts, the
  active context, the summary DAG, bootstrap state, large files, statistics;
* :mod:`~lossless.stores.postgres.context_reads` — a session's whole context for assembly in one
  round trip;
* :mod:`~lossless.stores.postgres.indexer` — the messages' word index, filled after the append;
* :mod:`~lossless.stores.postgres.retrieval` — search (``tsvector`` + ``pg_trgm``),
  DAG lookups for expansion, conversation links, delegation grants (word queries made SQL by
  :mod:`~lossless.stores.postgres.words`, ranked by :mod:`~lossless.stores.postgres.relevance`);
* :mod:`~lossless.stores.postgres.maintenance` — integrity repairs, retention, the
  job queue (``FOR UPDATE SKIP LOCKED``);
* :mod:`~lossless.stores.postgres.summaries` — re-made summaries (``lcm doctor --apply``);
* :mod:`~lossless.stores.postgres.vectors` — search vectors of messages and summaries (pgvector + HNSW
  where installed);
* :mod:`~lossless.stores.postgres.memory` and :mod:`~lossless.stores.postgres.blobs` — long-term
  memory and large-file bytes in the same database.

Invariants beyond the port's: writers to one conversation are serialised by a row lock
on the conversation (never a table lock), so different conversations are written
concurrently; compaction holds the conversation's advisory lock
(:meth:`PostgresStore.conversation_lock`); nothing here keeps state between calls
that a read could return stale (the pool, and caches each checked against the database on every read:
:mod:`~lossless.stores.postgres.message_records`), so any number of processes may share the database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from lossless.stores.postgres.blobs import DatabaseBlobStore
from lossless.stores.postgres.connection import Database
from lossless.stores.postgres.context_reads import ContextReads
from lossless.stores.postgres.core import CoreStatements
from lossless.stores.postgres.indexer import (
    ANALYZE,
    ANALYZE_AFTER,
    ANY_UNINDEXED,
    BATCH,
    CLAIM_BATCH,
    COUNT_UNINDEXED,
    REDO_BATCH,
    REDO_IDS,
    REDO_PENDING,
    WordIndexer,
)
from lossless.stores.postgres.maintenance import MaintenanceStatements
from lossless.stores.postgres.message_records import MessageRecords
from lossless.stores.postgres.relevance import NarrowScopes
from lossless.stores.postgres.retrieval import RetrievalStatements
from lossless.stores.postgres.summaries import SummaryRewrites
from lossless.stores.postgres.term_stats import TermStatistics
from lossless.stores.postgres.vectors import SearchVectors

if TYPE_CHECKING:
    from lossless.stores.postgres.memory import PostgresMemoryStore

__all__ = ["PostgresStore"]


class PostgresStore(
    CoreStatements, ContextReads, RetrievalStatements, MaintenanceStatements, SummaryRewrites, SearchVectors
):
    """Conversations, messages and the summary DAG in one PostgreSQL database."""

    backend = "postgres"

    def __init__(self, database: Database) -> None:
        self._db = database
        self.url = database.url
        self._indexer = WordIndexer(database.url)
        self._tsqueries = {}
        self._term_stats = TermStatistics()
        self._narrow = NarrowScopes()
        self._message_records = MessageRecords()

    @classmethod
    async def open(cls, url: str, *, pool_size: int = 8, lock_timeout_ms: int = 10_000) -> PostgresStore:
        """Connect to ``url`` (a ``postgresql://`` URL) and migrate its schema if needed."""
        database = Database(url, max_size=pool_size, lock_timeout_ms=lock_timeout_ms)
        await database.open()
        store = cls(database)
        async with database.read() as conn:
            row = await (await conn.execute(ANY_UNINDEXED)).fetchone()
            redo = await (await conn.execute(REDO_PENDING)).fetchone()
        if (row is not None and row[0]) or (redo is not None and redo[0]):
            store._indexer.notify()  # rows another process appended and did not index yet, or older rows to redo
        return store

    def atomic(self) -> AbstractAsyncContextManager[None]:
        return self._db.atomic()

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._indexer.close)
        await self._db.close()

    async def __aenter__(self) -> PostgresStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @asynccontextmanager
    async def conversation_lock(self, conversation_id: int) -> AsyncIterator[None]:
        """Hold the conversation's advisory lock: no other host compacts it meanwhile."""
        async with self._db.conversation_lock(conversation_id):
            yield

    def _appended(self) -> None:
        self._indexer.notify()

    async def wait_indexed(self) -> None:
        """Index every message committed so far (here, beside the background indexer), then return.

        Searches never need this (they read unindexed rows too); it is for measuring and inspecting.
        """
        async with self._db.read() as conn:
            row = await (await conn.execute(COUNT_UNINDEXED)).fetchone()
        indexed = int(row[0]) if row else 0  # by this call or by an indexer meanwhile
        while True:
            async with self._db.read() as conn:
                done = (await conn.execute(CLAIM_BATCH, (BATCH,))).rowcount
            if done > 0:
                continue
            async with self._db.read() as conn:
                row = await (await conn.execute(ANY_UNINDEXED)).fetchone()
                if (row is None or not row[0]) and indexed >= ANALYZE_AFTER:
                    await conn.execute(ANALYZE)
            if row is None or not row[0]:
                break
            await anyio.sleep(0.01)  # the rows left are being indexed by another indexer right now
        while True:  # messages indexed before identifiers were (see the indexer)
            async with self._db.read() as conn:
                step = await (await conn.execute(REDO_BATCH, (REDO_IDS, REDO_IDS))).fetchone()
                if step is not None and step[0] is not None:
                    continue
                row = await (await conn.execute(REDO_PENDING)).fetchone()
            if row is None or not row[0]:
                return
            await anyio.sleep(0.01)  # another indexer holds the mark right now

    def blob_store(self) -> DatabaseBlobStore:
        """Large-file bytes in this database (``large_files_storage = "database"``)."""
        return DatabaseBlobStore(self._db)

    def memory_store(self) -> PostgresMemoryStore:
        from lossless.stores.postgres.memory import PostgresMemoryStore

        return PostgresMemoryStore(self._db)
