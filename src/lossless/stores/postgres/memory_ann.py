"""Optional pgvector nearest-neighbour search for memories: a derived, HNSW-indexed copy of the vectors.

The memory schema never needs pgvector: vectors are float32 blobs in ``memory_vectors`` and the
memory service searches them exactly in memory.  Where the database has the ``vector`` extension
(an administrator ran ``CREATE EXTENSION vector``: it takes a superuser, and lossless never creates
it — a pgvector built for a newer CPU would crash the server), the store keeps
``memory_vector_ann`` beside it and answers nearest-neighbour queries from an HNSW index, so no
host has to hold (and, after every write anywhere, reload) every vector.

Invariants:

* **Derived, never the source of truth.**  Each row mirrors one ``memory_vectors`` row (same key,
  a foreign key with ``ON DELETE CASCADE``): deleting or re-embedding a memory removes its copies
  in the same statement.  Writers add copies in the same transaction as the blobs.
* **No write is missed when the table appears.**  It is created (under an advisory lock, with
  ``memory_vectors`` locked ``SHARE`` so no blob is written meanwhile) and filled from the blobs in
  one transaction; a writer inserts its blobs *before* it looks for the table, so it either
  committed before the fill read (and is copied) or waited for the table (and copies itself).
* **Same result contract as** :class:`~lossless.memory.vectors.VectorIndex`: memories by their
  best chunk, best first (ties by id), only the scopes asked for, current ones unless history is
  asked for, at least ``min_similarity``.  It answers only above the caller's exact-search size
  (below it, ``None``: the exact in-memory search is exact and faster), where the in-memory index
  would be approximate too.  One HNSW index per dimension (a partial expression index
  ``embedding::vector(dim)``, cosine), created on first use; with pgvector ≥ 0.8 the scan is
  iterative (``strict_order``), so filters don't starve the result.
* No user text is SQL: the extension's schema is quoted by the server (``quote_ident``), the
  dimension is an ``int``, everything else is a parameter.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import psycopg

from lossless.stores.postgres.connection import Connection
from lossless.stores.postgres.memory_keywords import scope_clause

__all__ = ["ANN_TABLE", "AnnIndex"]

log = logging.getLogger("lossless.memory")

ANN_TABLE = "memory_vector_ann"
#: pgvector's HNSW index holds at most this many dimensions of ``vector``.
MAX_HNSW_DIMENSIONS = 2000
_LOCK_SPACE_ANN = 0x4C434D02
_BACKFILL_BATCH = 2000
_MAX_FETCH = 4096
_SCHEMA = (
    "SELECT quote_ident(n.nspname), e.extversion FROM pg_extension e "
    "JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
)


def _version(text: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def vector_text(blob: bytes) -> str:
    """pgvector's text form of a little-endian float32 blob (9 significant digits: exact for float32)."""
    values = struct.unpack(f"<{len(blob) // 4}f", blob)
    return "[" + ",".join(format(v, ".9g") for v in values) + "]"


@dataclass(slots=True)
class _Extension:
    schema: str  # quoted identifier
    version: tuple[int, ...]


@dataclass(slots=True)
class AnnIndex:
    """What this process knows about the optional table (nothing that could go stale silently)."""

    disabled: bool = False
    counts: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # model -> (revision, rows, cap)

    async def _extension(self, conn: Connection) -> _Extension | None:
        row = await (await conn.execute(_SCHEMA)).fetchone()
        return None if row is None else _Extension(row[0], _version(row[1]))

    async def put(self, conn: Connection, rowid: int, model: str, blobs: Sequence[bytes]) -> None:
        """Copy a memory's freshly written blobs, if the table exists (call after writing the blobs)."""
        row = await (
            await conn.execute(
                "SELECT quote_ident(n.nspname) FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                "WHERE e.extname = 'vector' AND to_regclass(%s) IS NOT NULL",
                (ANN_TABLE,),
            )
        ).fetchone()
        if row is None:
            return
        await conn.execute(
            f"INSERT INTO {ANN_TABLE} (memory_rowid, model, chunk, dim, embedding) "
            f"SELECT %s, %s, t.chunk - 1, t.dim, t.v::{row[0]}.vector "
            "FROM unnest(%s::text[], %s::int[]) WITH ORDINALITY AS t(v, dim, chunk)",
            (rowid, model, [vector_text(b) for b in blobs], [len(b) // 4 for b in blobs]),
        )

    async def _create(self, conn: Connection, schema: str) -> None:
        """Create and fill the table (see the module invariants for why nothing is missed)."""
        await conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_LOCK_SPACE_ANN,))
        exists = await (await conn.execute("SELECT to_regclass(%s) IS NOT NULL", (ANN_TABLE,))).fetchone()
        if exists and exists[0]:
            return
        await conn.execute("LOCK TABLE memory_vectors IN SHARE MODE")
        await conn.execute(
            f"""
            CREATE TABLE {ANN_TABLE} (
                memory_rowid bigint NOT NULL,
                model        text NOT NULL,
                chunk        integer NOT NULL,
                dim          integer NOT NULL,
                embedding    {schema}.vector NOT NULL,
                PRIMARY KEY (memory_rowid, model, chunk),
                FOREIGN KEY (memory_rowid, model, chunk)
                    REFERENCES memory_vectors (memory_rowid, model, chunk) ON DELETE CASCADE
            )
            """
        )
        await conn.execute(f"CREATE INDEX {ANN_TABLE}_model_idx ON {ANN_TABLE} (model, dim)")
        after: tuple[int, str, int] = (0, "", -1)
        copied = 0
        while True:
            rows = await (
                await conn.execute(
                    "SELECT memory_rowid, model, chunk, vector FROM memory_vectors "
                    "WHERE (memory_rowid, model, chunk) > (%s, %s, %s) ORDER BY memory_rowid, model, chunk LIMIT %s",
                    (*after, _BACKFILL_BATCH),
                )
            ).fetchall()
            if not rows:
                break
            await conn.execute(
                f"INSERT INTO {ANN_TABLE} (memory_rowid, model, chunk, dim, embedding) "
                f"SELECT t.r, t.m, t.c, t.d, t.v::{schema}.vector "
                "FROM unnest(%s::bigint[], %s::text[], %s::int[], %s::int[], %s::text[]) AS t(r, m, c, d, v)",
                (
                    [r[0] for r in rows],
                    [r[1] for r in rows],
                    [r[2] for r in rows],
                    [len(r[3]) // 4 for r in rows],
                    [vector_text(bytes(r[3])) for r in rows],
                ),
            )
            copied += len(rows)
            after = (rows[-1][0], rows[-1][1], rows[-1][2])
        await conn.execute(f"ANALYZE {ANN_TABLE}")  # else the planner may not pick the HNSW index at once
        log.info("pgvector found: %s memory vectors copied to %s", copied, ANN_TABLE)

    async def _ensure_index(self, conn: Connection, schema: str, dim: int) -> None:
        name = f"{ANN_TABLE}_hnsw_{int(dim)}"
        found = await (await conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,))).fetchone()
        if found and found[0]:
            return
        await conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_SPACE_ANN, int(dim)))
        await conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
        await conn.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON {ANN_TABLE} "
            f"USING hnsw ((embedding::{schema}.vector({int(dim)})) {schema}.vector_cosine_ops) WHERE dim = {int(dim)}"
        )

    async def _prepare(self, conn: Connection) -> _Extension | None:
        """The extension, with the table in place; ``None`` where there is none (or we may not create it)."""
        if self.disabled:
            return None
        extension = await self._extension(conn)
        if extension is None or extension.version < (0, 5):  # HNSW came with pgvector 0.5
            return None
        exists = await (await conn.execute("SELECT to_regclass(%s) IS NOT NULL", (ANN_TABLE,))).fetchone()
        if not (exists and exists[0]):
            try:
                async with conn.transaction():  # a savepoint: a failure leaves the caller's transaction usable
                    await self._create(conn, extension.schema)
            except psycopg.errors.InsufficientPrivilege as exc:
                log.warning("pgvector is installed but %s cannot be created (%s); searching exactly", ANN_TABLE, exc)
                self.disabled = True
                return None
            except psycopg.Error as exc:  # e.g. a lock timeout: try again on a later search
                log.warning("could not create %s (%s); searching exactly", ANN_TABLE, exc)
                return None
        return extension

    async def _rows(self, conn: Connection, model: str, cap: int) -> int:
        """Chunk vectors of ``model``, counted up to ``cap + 1``; cached per store revision."""
        row = await (await conn.execute("SELECT value::bigint FROM lcm_meta WHERE key = 'memory_revision'")).fetchone()
        revision = int(row[0]) if row else 0
        cached = self.counts.get(model)
        if cached is not None and cached[0] == revision:
            _, rows, counted_to = cached
            if rows <= counted_to or cap <= counted_to:  # an exact count, or known to exceed ``cap`` too
                return rows
        counted = await (
            await conn.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM {ANN_TABLE} WHERE model = %s LIMIT %s) s", (model, cap + 1)
            )
        ).fetchone()
        rows = int(counted[0]) if counted else 0
        self.counts[model] = (revision, rows, cap)
        return rows

    async def nearest(
        self,
        conn: Connection,
        model: str,
        query: bytes,
        *,
        limit: int,
        scopes: Sequence[str] | None,
        include_superseded: bool,
        min_similarity: float,
        exact_max: int,
    ) -> list[tuple[str, float]] | None:
        dim = len(query) // 4
        if limit < 1 or dim < 1 or dim > MAX_HNSW_DIMENSIONS:
            return None
        extension = await self._prepare(conn)
        if extension is None or await self._rows(conn, model, exact_max) <= exact_max:
            return None
        try:
            async with conn.transaction():  # a savepoint: an optional index must never fail a search
                return await self._search(
                    conn, extension, model, query, limit, scopes, include_superseded, min_similarity
                )
        except psycopg.Error as exc:
            log.warning("pgvector search failed (%s); searching exactly", exc)
            return None

    async def _search(
        self,
        conn: Connection,
        extension: _Extension,
        model: str,
        query: bytes,
        limit: int,
        scopes: Sequence[str] | None,
        include_superseded: bool,
        min_similarity: float,
    ) -> list[tuple[str, float]]:
        dim = len(query) // 4
        schema = extension.schema
        await self._ensure_index(conn, schema, dim)
        clause, params = scope_clause(scopes)
        if not include_superseded:
            clause += " AND m.invalidated_at IS NULL"
        if extension.version >= (0, 8):
            await conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
        text = vector_text(query)
        distance = f"(a.embedding::{schema}.vector({dim}) OPERATOR({schema}.<=>) %s::{schema}.vector({dim}))"
        fetch = 4 * limit + 16
        while True:
            await conn.execute(f"SET LOCAL hnsw.ef_search = {min(1000, max(40, fetch))}")
            rows = await (
                await conn.execute(
                    f"SELECT m.memory_id, {distance} FROM {ANN_TABLE} a "
                    "JOIN memories m ON m.memory_rowid = a.memory_rowid "
                    f"WHERE a.model = %s AND a.dim = {dim}{clause} ORDER BY {distance} LIMIT %s",
                    (text, model, *params, text, fetch),
                )
            ).fetchall()
            best: dict[str, float] = {}
            for memory_id, dist in rows:
                similarity = 1.0 - float(dist)
                if similarity > best.get(memory_id, -2.0):
                    best[memory_id] = similarity
            exhausted = len(rows) < fetch or (rows and 1.0 - float(rows[-1][1]) < min_similarity)
            if len(best) >= limit or exhausted or fetch >= _MAX_FETCH:
                break
            fetch = min(_MAX_FETCH, fetch * 4)
        ranked = sorted(((i, s) for i, s in best.items() if s >= min_similarity), key=lambda kv: (-kv[1], kv[0]))
        return ranked[:limit]
