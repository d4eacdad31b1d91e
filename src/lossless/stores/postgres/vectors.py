"""Search vectors of messages and summaries on PostgreSQL, searched in the database with pgvector.

The source of truth is a float32 ``bytea`` per (item, model, chunk) in ``message_vectors`` /
``summary_vectors`` (migration 16), so the schema never needs an extension.  Where the ``vector``
extension is installed (an administrator ran ``CREATE EXTENSION vector``; lossless never creates
it), the background build adds an ``embedding vector`` column to both tables, fills it, and makes
one HNSW cosine index per dimension (a partial expression index ``embedding::vector(dim)``); from
then on searches run in SQL with the conversation filter in the ``WHERE`` clause, shared by every
host, and nothing is held in a host's memory.  Without the extension, searches load a
conversation's vectors and rank them in memory, as on SQLite.

Invariants:

* **No vector without its embedding once the column exists.**  A writer locks its table
  (``ROW EXCLUSIVE``) *before* it looks for the column; adding the column takes ``ACCESS
  EXCLUSIVE`` and fills every row in the same transaction.  So a writer either committed before
  the fill (and is filled) or waited for the column (and writes the embedding itself).
* **Scope in SQL.**  The nearest-neighbour query filters by model, dimension and the caller's
  conversations; with pgvector ≥ 0.8 the HNSW scan is iterative (``strict_order``), so a filter
  that drops most rows does not starve the result.
* A failure of the optional index never fails a search: it answers ``None`` and the caller ranks
  the loaded vectors instead.  No user text is SQL (identifiers are fixed, the dimension an ``int``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import psycopg

from lossless.ports import ItemVectors, VectorSource, VectorState, VectorTodo
from lossless.stores.postgres.connection import Connection, Database
from lossless.stores.postgres.memory_ann import MAX_HNSW_DIMENSIONS, vector_text

__all__ = ["SearchVectors"]

log = logging.getLogger("lossless.index")

# (vector table, key column, item table, row column)
_TABLES = {
    "messages": ("message_vectors", "message_id", "messages", "message_id"),
    "summaries": ("summary_vectors", "summary_id", "summaries", "summary_rowid"),
}
_LOCK_SPACE = 0x4C434D10
_FILL_BATCH = 2000
_MAX_FETCH = 4096
_EXTENSION = (
    "SELECT quote_ident(n.nspname), e.extversion FROM pg_extension e "
    "JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
)
#: (database, table, dimension) → (extension schema, version) where the HNSW index was seen: an index
#: once made stays (a failing search forgets it), so a search does not look it up each time.
_READY: dict[tuple[str, str, int], tuple[str, tuple[int, ...]]] = {}
_HAS_COLUMN = (
    "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = 'embedding' AND NOT attisdropped"
)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int("".join(ch for ch in part if ch.isdigit()) or 0) for part in text.split("."))


async def _one(conn: Connection, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
    return await (await conn.execute(sql, params)).fetchone()


async def _all(conn: Connection, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    return await (await conn.execute(sql, params)).fetchall()


class SearchVectors:
    """The :class:`~lossless.ports.SearchVectorStore` methods of the PostgreSQL store."""

    _db: Database

    async def vectors_todo(
        self, model: str, source: VectorSource, *, after: int = 0, limit: int = 256
    ) -> list[VectorTodo]:
        vectors, key, items, row = _TABLES[source]
        async with self._db.transaction() as conn:
            found = await _all(
                conn,
                f"SELECT i.{row}, i.{key}, i.conversation_id, i.content FROM {items} i "
                f"WHERE i.{row} > %s AND NOT EXISTS (SELECT 1 FROM {vectors} v "
                f"WHERE v.{key} = i.{key} AND v.model = %s AND v.chunk = 0) ORDER BY i.{row} LIMIT %s",
                (after, model, limit),
            )
        return [VectorTodo(int(r[0]), r[1] if source == "summaries" else int(r[1]), int(r[2]), r[3]) for r in found]

    async def _schema(self, conn: Connection) -> str | None:
        """The quoted schema of an installed pgvector that has HNSW (≥ 0.5), else ``None``."""
        row = await _one(conn, _EXTENSION)
        return None if row is None or _version(row[1]) < (0, 5) else str(row[0])

    async def put_item_vectors(self, model: str, source: VectorSource, items: Sequence[ItemVectors]) -> int:
        if not items:
            return 0
        vectors, key, item_table, _ = _TABLES[source]
        async with self._db.transaction() as conn:
            await conn.execute(f"LOCK TABLE {vectors} IN ROW EXCLUSIVE MODE")
            schema = await self._schema(conn) if await _one(conn, _HAS_COLUMN, (vectors,)) else None
            keys = [i.key for i in items]
            alive = {
                (r[0], int(r[1]))
                for r in await _all(
                    conn, f"SELECT {key}, conversation_id FROM {item_table} WHERE {key} = ANY(%s)", (keys,)
                )
            }
            rows = [
                (item.key, n, item.conversation_id, len(v) // 4, v)
                for item in items
                if (item.key, item.conversation_id) in alive
                for n, v in enumerate(item.vectors or (b"",))
            ]
            if not rows:
                return 0
            columns = f"{key}, model, chunk, conversation_id, dim, vector"
            values = "%s, %s, %s, %s, %s, %s"
            params: list[tuple[Any, ...]] = [(k, model, n, c, d, v) for k, n, c, d, v in rows]
            if schema is not None:
                columns += ", embedding"
                values += f", %s::{schema}.vector"
                params = [(*p, vector_text(p[5]) if p[4] else None) for p in params]
            before = await _one(
                conn,
                f"SELECT count(*) FROM {vectors} WHERE model = %s AND chunk = 0 AND {key} = ANY(%s)",
                (model, keys),
            )
            async with conn.cursor() as cursor:
                await cursor.executemany(
                    f"INSERT INTO {vectors} ({columns}) VALUES ({values}) ON CONFLICT DO NOTHING", params
                )
            after = await _one(
                conn,
                f"SELECT count(*) FROM {vectors} WHERE model = %s AND chunk = 0 AND {key} = ANY(%s)",
                (model, keys),
            )
        return int(after[0] if after else 0) - int(before[0] if before else 0)

    async def vector_states(
        self, model: str, source: VectorSource, conversation_ids: Sequence[int]
    ) -> dict[int, VectorState]:
        vectors, _, items, _ = _TABLES[source]
        ids = list(dict.fromkeys(int(c) for c in conversation_ids))
        if not ids:
            return {}
        # seq runs 1, 2, … per conversation: its maximum is the message count, one index probe
        total = (
            "SELECT coalesce(max(seq), 0) FROM messages i WHERE i.conversation_id = c.conversation_id"
            if source == "messages"
            else f"SELECT count(*) FROM {items} i WHERE i.conversation_id = c.conversation_id"
        )
        async with self._db.transaction() as conn:
            found = await _all(
                conn,
                "SELECT c.conversation_id, "
                f"({total}), "
                f"coalesce(v.indexed, 0), coalesce(v.rows, 0) FROM conversations c LEFT JOIN ("
                f"SELECT conversation_id, count(*) FILTER (WHERE chunk = 0) AS indexed, "
                f"count(*) FILTER (WHERE dim > 0) AS rows FROM {vectors} "
                "WHERE model = %s AND conversation_id = ANY(%s) GROUP BY conversation_id"
                ") v ON v.conversation_id = c.conversation_id WHERE c.conversation_id = ANY(%s)",
                (model, ids, ids),
            )
        return {int(r[0]): VectorState(int(r[2]), int(r[1]), int(r[3])) for r in found}

    async def vector_totals(self, model: str, source: VectorSource) -> VectorState:
        vectors, _, items, _ = _TABLES[source]
        async with self._db.transaction() as conn:
            row = await _one(
                conn,
                f"SELECT (SELECT count(*) FROM {items}), count(*) FILTER (WHERE chunk = 0), "
                f"count(*) FILTER (WHERE dim > 0) FROM {vectors} WHERE model = %s",
                (model,),
            )
        assert row is not None
        return VectorState(int(row[1]), int(row[0]), int(row[2]))

    async def load_item_vectors(
        self, model: str, source: VectorSource, conversation_id: int
    ) -> list[tuple[int | str, bytes]]:
        vectors, key, _, _ = _TABLES[source]
        async with self._db.transaction() as conn:
            found = await _all(
                conn,
                f"SELECT {key}, vector FROM {vectors} WHERE model = %s AND conversation_id = %s AND dim > 0 "
                f"ORDER BY {key}, chunk",
                (model, conversation_id),
            )
        return [(r[0] if source == "summaries" else int(r[0]), bytes(r[1])) for r in found]

    # ------------------------------------------------------------------ pgvector

    async def prepare_vector_index(self, source: VectorSource, dim: int) -> bool:
        """Add (and fill) the ``embedding`` column and the HNSW index for ``dim``, where pgvector is installed.

        The background build calls this before each pass; it does nothing once both are there.
        Returns whether searches of ``source`` now run in the database.
        """
        vectors, key, _, _ = _TABLES[source]
        if not 0 < dim <= MAX_HNSW_DIMENSIONS:
            return False
        try:
            async with self._db.transaction() as conn:
                schema = await self._schema(conn)
                if schema is None:
                    return False
                index = f"{vectors}_hnsw_{int(dim)}"
                ready = await _one(conn, "SELECT to_regclass(%s) IS NOT NULL", (index,))
                if ready and ready[0]:
                    return True
                await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_SPACE, int(dim)))
                if not await _one(conn, _HAS_COLUMN, (vectors,)):
                    await conn.execute(f"ALTER TABLE {vectors} ADD COLUMN embedding {schema}.vector")
                await self._fill(conn, vectors, key, schema)
                await conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
                await conn.execute(
                    f"CREATE INDEX IF NOT EXISTS {index} ON {vectors} USING hnsw "
                    f"((embedding::{schema}.vector({int(dim)})) {schema}.vector_cosine_ops) WHERE dim = {int(dim)}"
                )
                await conn.execute(f"ANALYZE {vectors}")
            log.info("pgvector: %s searched in the database (HNSW, %d dimensions)", vectors, dim)
            return True
        except psycopg.Error as exc:  # no privilege, a lock timeout: search the loaded vectors instead
            log.warning("could not prepare the pgvector index of %s (%s); searching in memory", vectors, exc)
            return False

    async def refresh_vector_statistics(self) -> None:
        """``ANALYZE`` both tables (the build calls it after a pass that added vectors).

        With stale statistics the planner takes a large conversation for a small one and ranks it by
        reading every vector instead of walking the HNSW index.
        """
        async with self._db.transaction() as conn:
            await conn.execute("ANALYZE message_vectors, summary_vectors")

    async def _fill(self, conn: Connection, vectors: str, key: str, schema: str) -> None:
        """Embeddings for every row that has none (inside the transaction that holds the table's lock)."""
        while True:
            rows = await _all(
                conn,
                f"SELECT {key}, model, chunk, vector FROM {vectors} WHERE embedding IS NULL AND dim > 0 LIMIT %s",
                (_FILL_BATCH,),
            )
            if not rows:
                return
            async with conn.cursor() as cursor:
                await cursor.executemany(
                    f"UPDATE {vectors} SET embedding = %s::{schema}.vector "
                    f"WHERE {key} = %s AND model = %s AND chunk = %s",
                    [(vector_text(bytes(r[3])), r[0], r[1], r[2]) for r in rows],
                )

    async def nearest_items(
        self,
        model: str,
        source: VectorSource,
        query: bytes,
        conversation_ids: Sequence[int],
        *,
        limit: int,
    ) -> list[tuple[int | str, int, float]] | None:
        vectors, key, _, _ = _TABLES[source]
        dim = len(query) // 4
        ids = list(dict.fromkeys(int(c) for c in conversation_ids))
        if limit < 1 or not ids or not 0 < dim <= MAX_HNSW_DIMENSIONS:
            return None
        ready = _READY.get((self._db.url, vectors, dim))
        async with self._db.transaction() as conn:
            if ready is None:
                row = await _one(conn, _EXTENSION)
                found = await _one(conn, "SELECT to_regclass(%s) IS NOT NULL", (f"{vectors}_hnsw_{dim}",))
                if row is None or not (found and found[0]):
                    return None
                ready = _READY[(self._db.url, vectors, dim)] = (str(row[0]), _version(row[1]))
            schema, version = ready
            try:
                async with conn.transaction():  # a savepoint: the optional index must never fail a search
                    return await self._search(conn, schema, version, vectors, key, model, query, ids, limit)
            except psycopg.Error as exc:
                _READY.pop((self._db.url, vectors, dim), None)  # look again next time (was the index dropped?)
                log.warning("pgvector search failed (%s); searching in memory", exc)
                return None

    async def _search(
        self,
        conn: Connection,
        schema: str,
        version: tuple[int, ...],
        vectors: str,
        key: str,
        model: str,
        query: bytes,
        ids: list[int],
        limit: int,
    ) -> list[tuple[int | str, int, float]]:
        dim = len(query) // 4
        if version >= (0, 8):
            await conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
        text = vector_text(query)
        distance = f"(embedding::{schema}.vector({dim}) OPERATOR({schema}.<=>) %s::{schema}.vector({dim}))"
        fetch = 2 * limit + 16
        while True:
            await conn.execute(f"SET LOCAL hnsw.ef_search = {min(1000, max(40, fetch))}")
            rows = await _all(
                conn,
                f"SELECT {key}, conversation_id, {distance} FROM {vectors} "
                f"WHERE model = %s AND dim = {dim} AND conversation_id = ANY(%s) ORDER BY {distance} LIMIT %s",
                (text, model, ids, text, fetch),
            )
            best: dict[int | str, tuple[int, float]] = {}
            for item, conversation_id, dist in rows:
                similarity = 1.0 - float(dist)
                if item not in best or similarity > best[item][1]:
                    best[item] = (int(conversation_id), similarity)
            if len(best) >= limit or len(rows) < fetch or fetch >= _MAX_FETCH:
                break
            fetch = min(_MAX_FETCH, fetch * 4)
        ranked = sorted(best.items(), key=lambda kv: (-kv[1][1], kv[0]))
        return [(item, c, s) for item, (c, s) in ranked[:limit]]
