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
* **Scope in SQL, plan by reach.**  The nearest-neighbour query filters by model, dimension and
  the caller's conversations.  A reach of at most :data:`EXACT_SCAN_MAX` vectors (one conversation,
  a few) is ranked exactly.  Above :data:`FIRST_PASS_MIN` vectors that is done in two passes: the
  reach's half-precision copies (``embedding_half``, read from a covering index without touching
  the table) pick the best :func:`first_pass_size` rows, and only those are ranked by their full
  ``embedding``; rows whose copy is not written yet (an upgrade in progress) are ranked in full, so
  none is ever skipped.  A wider reach walks the HNSW index, iteratively with pgvector ≥ 0.8
  (``strict_order``), so a filter that drops most rows does not starve the result.  The reach's
  size comes from ``vector_counts`` (migration 116), never from counting vectors.
* **Every writer writes the half copy once its column exists** (same lock argument as the
  ``embedding``); rows written before it existed are filled a batch per transaction by
  :meth:`~SearchVectors.upgrade_vector_index`, never in one long transaction.
* **Counts without contention.**  Statement triggers *append* delta rows to ``vector_counts``
  (writers never update a shared row, so concurrent builders and cascading deletes neither wait on
  each other nor deadlock there); readers sum them; the build folds them at the end of a pass.
* **Big backlogs in bulk.**  The build's walk reads windows of rows in id order (never an anti-join
  over the whole table), writes a batch in one statement, and a first build over more than
  :data:`BULK_BACKLOG` items makes its HNSW index with one ``CREATE INDEX`` after the pass
  instead of inserting every vector into the graph.  Until then searches rank what is built in
  memory (plus keywords, with the partial note), as during any build.
* **An upgrade copies in SQL.**  An index format upgrade copies the rows of items whose embedded texts
  did not change from the old format's name to the new one (:meth:`~SearchVectors.copy_item_vectors`:
  one ``INSERT … SELECT`` per batch, under the writers' lock, the ``embedding`` and its half copy
  copied with the ``bytea``), never through Python.
* A failure of the optional index never fails a search: it answers ``None`` and the caller ranks
  the loaded vectors instead.  No user text is SQL (identifiers are fixed, the dimension an ``int``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import psycopg

from lossless.errors import StoreError
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
_LOCK_SPACE_COUNTS = 0x4C434D11
_KEY_TYPES = {"messages": "bigint", "summaries": "text"}
_FILL_BATCH = 2000
_TODO_WINDOW = 8192
#: A first build with more items than this waiting makes its HNSW index in bulk after the pass.
BULK_BACKLOG = 20_000
#: A search whose conversations hold at most this many vectors reads them all (an exact scan through
#: the conversation index: a few milliseconds); above it, the HNSW index is walked (approximate).
EXACT_SCAN_MAX = 20_000
#: A reach of more vectors than this (and at most EXACT_SCAN_MAX) is ranked in two passes: half precision, then exact.
FIRST_PASS_MIN = 1_000
#: Rows the half-precision pass keeps per row the exact pass fetches (at least _FIRST_PASS_LEAST).
FIRST_PASS_FACTOR = 4
_FIRST_PASS_LEAST = 100
#: Rows given their half-precision copy per transaction while an older database is upgraded.
UPGRADE_BATCH = 5000
#: The least maintenance_work_mem an HNSW build gets (kB): the build is far faster while its graph fits.
_BUILD_MEMORY_KB = 1024 * 1024
#: The most tuples one HNSW walk may visit (pgvector's default is 20,000) before the exact scan takes over.
_MAX_SCAN_TUPLES = 500_000
_MAX_FETCH = 4096
_EXTENSION = (
    "SELECT quote_ident(n.nspname), e.extversion FROM pg_extension e "
    "JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
)
#: (database, table, dimension) → (extension schema, version) where the HNSW index was seen: an index
#: once made stays (a failing search forgets it), so a search does not look it up each time.
_READY: dict[tuple[str, str, int], tuple[str, tuple[int, ...]]] = {}
#: (database, table, dimension) → when (``time.monotonic``) this process last found no HNSW index there
#: (no ``vector`` extension, or the index not made yet).  Searches look again only after
#: :data:`ABSENT_RECHECK_S`, so a store without pgvector does not ask the catalog on every search; an
#: index this process makes is seen at once, one another host makes within that time.
_ABSENT: dict[tuple[str, str, int], float] = {}
ABSENT_RECHECK_S = 30.0
#: database → (source, dimension) whose HNSW index this process deferred until the end of its pass.
_DEFERRED: dict[str, set[tuple[VectorSource, int]]] = {}
_HAS_COLUMN = (
    "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = 'embedding' AND NOT attisdropped"
)
_HAS_HALF = (
    "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = 'embedding_half' AND NOT attisdropped"
)


def first_pass_size(fetch: int) -> int:
    """How many rows the half-precision pass hands to the exact one when ``fetch`` rows are asked for."""
    return max(_FIRST_PASS_LEAST, FIRST_PASS_FACTOR * fetch)


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
        """Items after ``after`` without vectors of ``model``, walked a window of rows at a time.

        One anti-join over the whole table is planned as a hash join (the planner cannot tell that
        the ``LIMIT`` stops it early), which reads every row and every vector on each call: the build
        would slow down with the square of the history.  A window of the next rows in id order, then
        the anti-join inside it, costs the same at any size.
        """
        vectors, key, items, row = _TABLES[source]
        window = 2 * limit  # grows while the windows hold mostly built items (a rescan of a built store)
        found: list[tuple[Any, ...]] = []
        async with self._db.transaction() as conn:
            while True:
                rows = await _all(
                    conn,
                    "SELECT w.r, w.k, w.conversation_id, CASE WHEN w.todo THEN w.content END, w.todo "
                    f"FROM (SELECT i.*, NOT EXISTS (SELECT 1 FROM {vectors} v "
                    f"WHERE v.{key} = i.k AND v.model = %s AND v.chunk = 0) AS todo "
                    f"FROM (SELECT {row} AS r, {key} AS k, conversation_id, content FROM {items} WHERE {row} > %s "
                    f"ORDER BY {row} LIMIT %s) i) w ORDER BY w.r",
                    (model, after, window),
                )
                found.extend(r[:4] for r in rows if r[4])
                if len(found) >= limit or len(rows) < window:
                    break
                after = int(rows[-1][0])
                window = min(_TODO_WINDOW, 2 * window)
        return [
            VectorTodo(int(r[0]), r[1] if source == "summaries" else int(r[1]), int(r[2]), r[3]) for r in found[:limit]
        ]

    async def _schema(self, conn: Connection) -> str | None:
        """The quoted schema of an installed pgvector that has HNSW (≥ 0.5), else ``None``."""
        row = await _one(conn, _EXTENSION)
        return None if row is None or _version(row[1]) < (0, 5) else str(row[0])

    async def put_item_vectors(self, model: str, source: VectorSource, items: Sequence[ItemVectors]) -> int:
        if not items:
            return 0
        vectors, key, item_table, _ = _TABLES[source]
        rows = [
            (item.key, n, item.conversation_id, len(v) // 4, v)
            for item in items
            for n, v in enumerate(item.vectors or (b"",))
        ]
        async with self._db.transaction() as conn:
            await conn.execute(f"LOCK TABLE {vectors} IN ROW EXCLUSIVE MODE")
            schema = await self._schema(conn) if await _one(conn, _HAS_COLUMN, (vectors,)) else None
            half = schema is not None and bool(await _one(conn, _HAS_HALF, (vectors,)))
            # One statement for the whole batch (arrays, not a row per round trip); the join keeps only
            # items that still exist in their conversation, and RETURNING counts what was new.
            columns = (", embedding" if schema is not None else "") + (", embedding_half" if half else "")
            embedding = f", t.e::{schema}.vector" if schema is not None else ""
            if half:
                embedding += f", t.e::{schema}.vector::{schema}.halfvec"
            texts = [vector_text(v) if d and schema is not None else None for _, _, _, d, v in rows]
            found = await _all(
                conn,
                f"INSERT INTO {vectors} ({key}, model, chunk, conversation_id, dim, vector{columns}) "
                f"SELECT t.k, %s, t.n, t.c, t.d, t.v{embedding} "
                f"FROM unnest(%s::{_KEY_TYPES[source]}[], %s::integer[], %s::bigint[], %s::integer[], "
                "%s::bytea[], %s::text[]) AS t(k, n, c, d, v, e) "
                f"JOIN {item_table} i ON i.{key} = t.k AND i.conversation_id = t.c "
                "ON CONFLICT DO NOTHING RETURNING chunk",
                (
                    model,
                    [r[0] for r in rows],
                    [r[1] for r in rows],
                    [r[2] for r in rows],
                    [r[3] for r in rows],
                    [r[4] for r in rows],
                    texts,
                ),
            )
        return sum(1 for (chunk,) in found if chunk == 0)

    async def copy_item_vectors(
        self, source: VectorSource, from_model: str, to_model: str, items: Sequence[tuple[int | str, int]]
    ) -> list[int | str]:
        """Copy ``from_model``'s rows to ``to_model`` for each ``(key, rows)`` whose ``from_model`` rows are all
        there (exactly ``rows``); the keys of ``items`` that have ``to_model`` vectors afterwards (copied here,
        or written before).  Rows already there are kept; one transaction."""
        if not items:
            return []
        vectors, key, _, _ = _TABLES[source]
        keys = [k for k, _ in items]
        async with self._db.transaction() as conn:
            await conn.execute(f"LOCK TABLE {vectors} IN ROW EXCLUSIVE MODE")  # as a writer: see put_item_vectors
            schema = await self._schema(conn) if await _one(conn, _HAS_COLUMN, (vectors,)) else None
            half = schema is not None and bool(await _one(conn, _HAS_HALF, (vectors,)))
            columns = (", embedding" if schema is not None else "") + (", embedding_half" if half else "")
            embedding = ", v.embedding" if schema is not None else ""
            if half:
                embedding += f", v.embedding::{schema}.halfvec"
            await conn.execute(
                f"INSERT INTO {vectors} ({key}, model, chunk, conversation_id, dim, vector{columns}) "
                f"SELECT v.{key}, %s, v.chunk, v.conversation_id, v.dim, v.vector{embedding} "
                f"FROM unnest(%s::{_KEY_TYPES[source]}[], %s::integer[]) AS w(k, n) "
                f"JOIN {vectors} v ON v.{key} = w.k AND v.model = %s "
                f"WHERE (SELECT count(*) FROM {vectors} o WHERE o.{key} = w.k AND o.model = %s) = w.n "
                "ON CONFLICT DO NOTHING",
                (to_model, keys, [n for _, n in items], from_model, from_model),
            )
            found = await _all(
                conn,
                f"SELECT w.k FROM unnest(%s::{_KEY_TYPES[source]}[]) AS w(k) WHERE EXISTS "
                f"(SELECT 1 FROM {vectors} v WHERE v.{key} = w.k AND v.model = %s AND v.chunk = 0)",
                (keys, to_model),
            )
        return [r[0] if source == "summaries" else int(r[0]) for r in found]

    async def vector_models(self) -> list[str]:
        """Every model name that has vectors in this store."""
        async with self._db.transaction() as conn:
            found = await _all(
                conn, "SELECT model FROM vector_counts GROUP BY model HAVING sum(indexed) <> 0 OR sum(rows) <> 0"
            )
        return [str(r[0]) for r in found]

    async def vector_states(
        self, model: str, source: VectorSource, conversation_ids: Sequence[int]
    ) -> dict[int, VectorState]:
        _, _, items, _ = _TABLES[source]
        ids = list(dict.fromkeys(int(c) for c in conversation_ids))
        if not ids:
            return {}
        # seq runs 1, 2, … per conversation: its maximum is the message count, one index probe
        total = (
            "SELECT coalesce(max(seq), 0) FROM messages i WHERE i.conversation_id = c.conversation_id"
            if source == "messages"
            else f"SELECT count(*) FROM {items} i WHERE i.conversation_id = c.conversation_id"
        )
        async with self._db.read() as conn:
            found = await _all(
                conn,
                f"SELECT c.conversation_id, ({total}), coalesce(v.indexed, 0), coalesce(v.rows, 0), "
                "coalesce(v.revision, 0) FROM conversations c LEFT JOIN ("
                "SELECT conversation_id, sum(indexed) AS indexed, sum(rows) AS rows, max(id) AS revision "
                "FROM vector_counts WHERE source = %s AND model = %s AND conversation_id = ANY(%s) "
                "GROUP BY conversation_id) v ON v.conversation_id = c.conversation_id "
                "WHERE c.conversation_id = ANY(%s)",
                (source, model, ids, ids),
            )
        return {int(r[0]): VectorState(int(r[2]), int(r[1]), int(r[3]), int(r[4])) for r in found}

    async def vector_totals(self, model: str, source: VectorSource) -> VectorState:
        _, _, items, _ = _TABLES[source]
        async with self._db.transaction() as conn:
            row = await _one(
                conn,
                f"SELECT (SELECT count(*) FROM {items}), coalesce(sum(indexed), 0), coalesce(sum(rows), 0) "
                "FROM vector_counts WHERE source = %s AND model = %s",
                (source, model),
            )
        assert row is not None
        return VectorState(int(row[1]), int(row[0]), int(row[2]))

    async def fold_vector_counts(self) -> int:
        """Fold the delta rows of ``vector_counts`` into one per key (one folder at a time; 0 if another folds).

        Returns the number of rows folded away.
        """
        async with self._db.transaction() as conn:
            taken = await _one(conn, "SELECT pg_try_advisory_xact_lock(%s, 0)", (_LOCK_SPACE_COUNTS,))
            if not (taken and taken[0]):
                return 0
            row = await _one(
                conn,
                "WITH gone AS (DELETE FROM vector_counts RETURNING source, model, conversation_id, indexed, rows), "
                "kept AS (INSERT INTO vector_counts (source, model, conversation_id, indexed, rows) "
                "SELECT source, model, conversation_id, sum(indexed), sum(rows) FROM gone "
                "GROUP BY source, model, conversation_id HAVING sum(indexed) <> 0 OR sum(rows) <> 0 "
                "ORDER BY source, model, conversation_id RETURNING 1) "
                "SELECT (SELECT count(*) FROM gone) - (SELECT count(*) FROM kept)",
            )
        return int(row[0]) if row else 0

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

        The background build calls this before its first write.  With a large backlog (more than
        :data:`BULK_BACKLOG` items without vectors) the index is *not* made yet: one ``CREATE INDEX``
        over the written rows at the end of the pass (:meth:`refresh_vector_statistics`) is far faster
        than inserting each vector into the graph.  Returns whether searches of ``source`` now run in
        the database through the HNSW index.
        """
        vectors, key, items, _ = _TABLES[source]
        if not 0 < dim <= MAX_HNSW_DIMENSIONS:
            return False
        try:
            async with self._db.transaction() as conn:
                schema = await self._schema(conn)
                if schema is None:
                    return False
                ready = await _one(conn, "SELECT to_regclass(%s) IS NOT NULL", (f"{vectors}_hnsw_{int(dim)}",))
                if ready and ready[0]:
                    _ABSENT.pop((self._db.url, vectors, int(dim)), None)
                    return True
                await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_SPACE, int(dim)))
                if not await _one(conn, _HAS_COLUMN, (vectors,)):
                    await conn.execute(f"ALTER TABLE {vectors} ADD COLUMN embedding {schema}.vector")
                    if await self._has_halfvec(conn):  # a new column: its half copy comes with it, filled below
                        await conn.execute(f"ALTER TABLE {vectors} ADD COLUMN embedding_half {schema}.halfvec")
                        await self._half_indexes(conn, vectors, key)
                await self._fill(conn, vectors, key, schema)
                backlog = await _one(
                    conn,
                    f"SELECT count(*) FROM (SELECT 1 FROM {items} i WHERE NOT EXISTS (SELECT 1 FROM {vectors} v "
                    f"WHERE v.{key} = i.{key} AND v.chunk = 0) LIMIT %s) b",
                    (BULK_BACKLOG + 1,),
                )
                if backlog and int(backlog[0]) > BULK_BACKLOG:
                    _DEFERRED.setdefault(self._db.url, set()).add((source, int(dim)))
                    log.info("pgvector: %s has a large backlog; its HNSW index is made after the pass", vectors)
                    return False
                await self._create_index(conn, vectors, schema, int(dim))
            _ABSENT.pop((self._db.url, vectors, int(dim)), None)  # committed: searches use it from now on
            log.info("pgvector: %s searched in the database (HNSW, %d dimensions)", vectors, dim)
            return True
        except (psycopg.Error, StoreError) as exc:  # no privilege, a lock timeout: search the loaded vectors instead
            log.warning("could not prepare the pgvector index of %s (%s); searching in memory", vectors, exc)
            return False

    async def _create_index(self, conn: Connection, vectors: str, schema: str, dim: int) -> None:
        """The HNSW index of one dimension, built in bulk over the rows already there (under the caller's lock)."""
        # at least _BUILD_MEMORY_KB for the graph (a server configured with more keeps its own setting)
        await conn.execute(
            "SELECT set_config('maintenance_work_mem', %s, true) FROM pg_settings "
            "WHERE name = 'maintenance_work_mem' AND setting::bigint < %s",
            (f"{_BUILD_MEMORY_KB}kB", _BUILD_MEMORY_KB),
        )
        await conn.execute(
            f"CREATE INDEX IF NOT EXISTS {vectors}_hnsw_{dim} ON {vectors} USING hnsw "
            f"((embedding::{schema}.vector({dim})) {schema}.vector_cosine_ops) WHERE dim = {dim}"
        )
        await conn.execute(f"ANALYZE {vectors}")

    async def refresh_vector_statistics(self) -> None:
        """After a pass that added vectors: make the HNSW indexes deferred by a large backlog, fold the
        vector counts, ``ANALYZE`` both tables.

        With stale statistics the planner takes a large conversation for a small one and ranks it by
        reading every vector instead of walking the HNSW index.
        """
        for source, dim in sorted(_DEFERRED.get(self._db.url, set())):
            vectors = _TABLES[source][0]
            try:
                async with self._db.transaction() as conn:
                    schema = await self._schema(conn)
                    if schema is not None:
                        await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_SPACE, dim))
                        await self._create_index(conn, vectors, schema, dim)
                        log.info("pgvector: %s searched in the database (HNSW, %d dimensions)", vectors, dim)
                _ABSENT.pop((self._db.url, vectors, dim), None)  # committed: searches use it from now on
            except (psycopg.Error, StoreError) as exc:  # errors inside a transaction block come translated
                log.warning("could not make the pgvector index of %s (%s); searching in memory", vectors, exc)
            _DEFERRED[self._db.url].discard((source, dim))
        await self.fold_vector_counts()
        async with self._db.transaction() as conn:
            await conn.execute("ANALYZE message_vectors, summary_vectors")

    async def _has_halfvec(self, conn: Connection) -> bool:
        """Whether the installed pgvector has the ``halfvec`` type (0.7 and later)."""
        row = await _one(conn, _EXTENSION)
        return row is not None and _version(row[1]) >= (0, 7)

    async def _half_indexes(self, conn: Connection, vectors: str, key: str) -> None:
        """The covering index the half-precision pass reads, and the one that finds rows still without their copy."""
        await conn.execute(
            f"CREATE INDEX IF NOT EXISTS {vectors}_half_idx ON {vectors} (model, conversation_id, dim) "
            f"INCLUDE ({key}, chunk, embedding_half) WHERE embedding_half IS NOT NULL"
        )
        await conn.execute(
            f"CREATE INDEX IF NOT EXISTS {vectors}_unhalved_idx ON {vectors} (model, conversation_id) "
            "WHERE embedding_half IS NULL AND dim > 0"
        )

    async def upgrade_vector_index(self) -> int:
        """Give a database made before the half-precision pass its column, indexes and copies, a batch a call.

        The background build calls this once it has nothing else to write, until it answers 0.  Each
        part is a short transaction of its own: adding the column (no rewrite), making the two
        indexes (one read of the table each; vector writers wait meanwhile, ingest and searches do
        not), then :data:`UPGRADE_BATCH` rows per call.  Searches stay exact throughout: rows without
        their copy are ranked in full.  Returns how many rows got their copy (0: none left, or no
        pgvector ≥ 0.7, or no ``embedding`` column yet — :meth:`prepare_vector_index` then adds both;
        -1: not now, a lock was not free within ``postgres_lock_timeout_ms`` or the like, ask again).
        """
        for source in ("summaries", "messages"):
            vectors, key, _, _ = _TABLES[source]
            try:
                async with self._db.transaction() as conn:
                    schema = await self._schema(conn)
                    if schema is None or not await self._has_halfvec(conn):
                        return 0
                    if not await _one(conn, _HAS_COLUMN, (vectors,)):
                        continue
                    if not await _one(conn, _HAS_HALF, (vectors,)):
                        await conn.execute(
                            f"ALTER TABLE {vectors} ADD COLUMN IF NOT EXISTS embedding_half {schema}.halfvec"
                        )
                    made = await _one(
                        conn,
                        "SELECT count(*) FROM unnest(%s::text[]) AS n WHERE to_regclass(n) IS NOT NULL",
                        ([f"{vectors}_half_idx", f"{vectors}_unhalved_idx"],),
                    )
                if made is None or int(made[0]) < 2:
                    async with self._db.transaction() as conn:
                        await conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_LOCK_SPACE,))
                        await self._half_indexes(conn, vectors, key)
                async with self._db.transaction() as conn:
                    done = await _all(
                        conn,
                        f"UPDATE {vectors} v SET embedding_half = v.embedding::{schema}.halfvec FROM ("
                        f"SELECT {key} AS k, model AS m, chunk AS n FROM {vectors} "
                        # in the order of the index of rows still without their copy: a batch never
                        # reads past the rows already done (a scan of the table would, more each batch)
                        "WHERE embedding_half IS NULL AND dim > 0 AND embedding IS NOT NULL "
                        "ORDER BY model, conversation_id "
                        f"LIMIT %s FOR UPDATE SKIP LOCKED) t WHERE v.{key} = t.k AND v.model = t.m AND v.chunk = t.n "
                        "RETURNING 1",
                        (UPGRADE_BATCH,),
                    )
            except (psycopg.Error, StoreError) as exc:  # a lock timeout, no privilege: searches stay exact
                log.warning("could not upgrade the vector index of %s yet (%s)", vectors, exc)
                return -1
            if done:
                return len(done)
        return 0

    async def _fill(self, conn: Connection, vectors: str, key: str, schema: str) -> None:
        """Embeddings (and half copies) for every row that has none (inside the transaction that holds the
        table's lock)."""
        half = ""
        if await _one(conn, _HAS_HALF, (vectors,)):
            half = f", embedding_half = t.e::{schema}.vector::{schema}.halfvec"
        while True:
            rows = await _all(
                conn,
                f"SELECT {key}, model, chunk, vector FROM {vectors} WHERE embedding IS NULL AND dim > 0 LIMIT %s",
                (_FILL_BATCH,),
            )
            if not rows:
                return
            key_type = _KEY_TYPES["messages" if vectors == "message_vectors" else "summaries"]
            await conn.execute(
                f"UPDATE {vectors} v SET embedding = t.e::{schema}.vector{half} "
                f"FROM unnest(%s::{key_type}[], %s::text[], %s::integer[], %s::text[]) AS t(k, m, n, e) "
                f"WHERE v.{key} = t.k AND v.model = t.m AND v.chunk = t.n",
                (
                    [r[0] for r in rows],
                    [r[1] for r in rows],
                    [r[2] for r in rows],
                    [vector_text(bytes(r[3])) for r in rows],
                ),
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
        where = (self._db.url, vectors, dim)
        ready = _READY.get(where)
        if ready is None and time.monotonic() - _ABSENT.get(where, -ABSENT_RECHECK_S) < ABSENT_RECHECK_S:
            return None  # looked a moment ago: no index to search in
        async with self._db.transaction() as conn:
            if ready is None:
                row = await _one(conn, _EXTENSION)
                found = await _one(conn, "SELECT to_regclass(%s) IS NOT NULL", (f"{vectors}_hnsw_{dim}",))
                if row is None or not (found and found[0]):
                    _ABSENT[where] = time.monotonic()
                    return None
                _ABSENT.pop(where, None)
                ready = _READY[where] = (str(row[0]), _version(row[1]))
            schema, version = ready
            try:
                async with conn.transaction():  # a savepoint: the optional index must never fail a search
                    sizes = await _one(
                        conn,
                        "SELECT coalesce(sum(rows) FILTER (WHERE conversation_id = ANY(%s)), 0), "
                        "coalesce(sum(rows), 0), to_regclass(%s) IS NOT NULL "
                        "FROM vector_counts WHERE source = %s AND model = %s",
                        (ids, f"{vectors}_half_idx", source, model),
                    )
                    reach, everything = (int(sizes[0]), int(sizes[1])) if sizes else (0, 0)
                    if reach > EXACT_SCAN_MAX:
                        walked = await self._search(
                            conn, schema, version, vectors, key, model, query, ids, limit, share=reach / everything
                        )
                        if len(walked) >= limit:
                            return walked
                        # the walk gave up before the filter let enough through: rank the reach exactly
                    two_pass = bool(sizes and sizes[2]) and reach > FIRST_PASS_MIN
                    return await self._search(
                        conn, schema, version, vectors, key, model, query, ids, limit, reach=reach if two_pass else 0
                    )
            except psycopg.Error as exc:
                _READY.pop(where, None)  # look again next time (was the index dropped?)
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
        *,
        share: float | None = None,
        reach: int = 0,
    ) -> list[tuple[int | str, int, float]]:
        """The nearest items: an exact ranking of the reach's rows, or (``share``: the reach's part of all
        vectors) a walk of the HNSW index.

        The exact form compares the uncast column, which the expression index cannot serve, so the
        planner reads the reach's rows through the conversation index and sorts them.  With ``reach``
        (its size, where the half copies' index exists) over the first pass's size, it first ranks the
        reach's half-precision copies from their covering index (no table row read) and compares the
        full vectors of the best :func:`first_pass_size` only, plus any row without its copy yet.  The
        walk may visit about ``1/share`` tuples per match it keeps, so its tuple budget grows as the
        share falls.
        """
        dim = len(query) // 4
        exact = share is None
        if version >= (0, 8) and share is not None:
            await conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
            budget = min(_MAX_SCAN_TUPLES, max(20_000, int(8 * (2 * limit + 16) / max(share, 1e-9))))
            await conn.execute(f"SET LOCAL hnsw.max_scan_tuples = {budget}")
        text = vector_text(query)
        if exact:
            distance = f"(embedding OPERATOR({schema}.<=>) %s::{schema}.vector)"
        else:
            distance = f"(embedding::{schema}.vector({dim}) OPERATOR({schema}.<=>) %s::{schema}.vector({dim}))"
        fetch = 2 * limit + 16
        while True:
            if not exact:
                await conn.execute(f"SET LOCAL hnsw.ef_search = {min(1000, max(40, fetch))}")
            if exact and reach > first_pass_size(fetch):
                rows = await _all(
                    conn,
                    f"SELECT v.{key}, v.conversation_id, "
                    f"(v.embedding OPERATOR({schema}.<=>) %s::{schema}.vector) FROM ("
                    f"(SELECT {key} AS k, chunk AS n FROM {vectors} WHERE model = %s AND dim = {dim} "
                    "AND conversation_id = ANY(%s) AND embedding_half IS NOT NULL "
                    f"ORDER BY embedding_half OPERATOR({schema}.<=>) %s::{schema}.halfvec LIMIT %s) UNION ALL "
                    f"(SELECT {key}, chunk FROM {vectors} WHERE model = %s AND dim = {dim} AND dim > 0 "
                    "AND conversation_id = ANY(%s) AND embedding_half IS NULL)) f "
                    f"JOIN {vectors} v ON v.{key} = f.k AND v.model = %s AND v.chunk = f.n "
                    "ORDER BY 3 LIMIT %s",
                    (text, model, ids, text, first_pass_size(fetch), model, ids, model, fetch),
                )
            else:
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
