"""The :class:`~lossless.memory.ports.MemoryStore` on PostgreSQL (migration 4), same behaviour as SQLite's.

Invariants (beyond the port's):

* **One transaction per call** (:meth:`Database.transaction`, a savepoint inside
  ``atomic()``): rows, source links, vectors, the word and substring indexes
  (PostgreSQL maintains them inside the transaction) and the revision counter
  change together or not at all.  An update is an ``UPDATE`` in place, never a
  delete followed by an insert, so no reader ever sees a memory missing or
  half-indexed.
* **Memory writers are serialised** by the ``lcm_meta.memory_revision`` row: every
  write that changes what vector search or scope checks see bumps it *first*, so
  two hosts can't both supersede one memory, and every such writer takes its locks
  in the same order.  ``record_access`` and ``set_tiers`` don't bump (they change
  no vector or scope); ``record_access`` locks its rows (in id order) before
  reading them, so concurrent searches never lose an access.
* **No user text is SQL.**  Keyword queries are built from the words of the query
  (``\\w+``, at most 32), each passed as a parameter to ``plainto_tsquery`` — which
  reads plain words, never query syntax — and combined with ``&&`` / ``||``.
  Stop words and words no memory holds are dropped, the rest ANDed, and ORed only
  when no memory holds them all (as SQLite).  Scores are FTS5's BM25 (k1 1.2,
  b 0.75, columns weighted 2/1/1), computed from the index's positions with the
  memory count and document frequencies of the query's terms, so the fusion's
  thresholds mean what they mean with SQLite.
* **Chinese, Japanese and Korean** runs go to the ``pg_trgm`` index: their
  trigrams are matched with ``ILIKE`` (``\\``, ``%`` and ``_`` escaped) and scored
  by the same BM25 over trigrams; words of one or two characters by the share of
  query bigrams a memory holds — exactly SQLite's rules.
* Scope filters are ``scope = ANY(%s)``; ``None`` means every scope and is only
  passed by a system caller (the port's caller decides).
* Vectors are float32 blobs (``bytea``).  Where the database has the ``vector``
  extension, :mod:`~lossless.stores.postgres.memory_ann` keeps an HNSW-indexed copy
  in the same transactions and serves :meth:`PostgresMemoryStore.nearest` above the
  caller's exact-search size; without it (the default) ``nearest`` answers ``None``
  and the service searches exactly in memory, as with SQLite.

Known differences from SQLite: the ``english`` configuration drops its stop words from the
index (a query of stop words alone finds nothing by keyword) and keeps diacritics (``cafe`` does
not match ``café``); lengths in BM25 are bytes rather than tokens; on a database whose ``LC_CTYPE``
is ``C`` (not ``C.UTF-8``), ``pg_trgm`` skips CJK characters, so CJK keyword search is still
exact but scans instead of using the index.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from lossless.errors import InputError, NotFoundError
from lossless.memory.ports import StoredVectors
from lossless.memory.records import Memory, MemoryDraft, MemoryPatch, MemoryStats, Tier, derive_levels
from lossless.records import content_hash
from lossless.stores.postgres import memory_ann, memory_keywords, memory_mining
from lossless.stores.postgres.connection import Connection, Database
from lossless.stores.postgres.memory_keywords import fetchall, fetchone, scope_clause
from lossless.stores.postgres.statements import aware, text_array

__all__ = ["PostgresMemoryStore"]

_COLUMNS = (
    "m.memory_rowid, m.memory_id, m.scope, m.category, m.tier, m.abstract, m.overview, m.content, m.importance, "
    "m.confidence, m.temporal_type, m.valid_from, m.valid_until, m.fact_key, m.supersedes, m.superseded_by, "
    "m.invalidated_at, m.access_count, m.last_accessed_at, m.access_gap_days, m.conversation_id, m.source, "
    "m.created_at, m.updated_at, m.metadata, "
    "(SELECT array_agg(s.message_id ORDER BY s.ordinal) FROM memory_sources s WHERE s.memory_rowid = m.memory_rowid)"
)
_SELECT_BY_ID = f"SELECT {_COLUMNS} FROM memories m WHERE m.memory_id = ANY(%s::text[])"
_REVISION = "SELECT value::bigint FROM lcm_meta WHERE key = 'memory_revision'"
#: The columns a write may change without bumping the revision (``record_access``, ``set_tiers``, and a deleted
#: conversation setting ``conversation_id`` to NULL), read fresh beside the records cached per revision.
_UNBUMPED = "m.memory_id, m.tier, m.access_count, m.last_accessed_at, m.access_gap_days, m.conversation_id"
_UNBUMPED_BY_ID = f"SELECT {_UNBUMPED} FROM memories m WHERE m.memory_id = ANY(%s::text[])"
#: The whole rows of the first ids, and of the second too unless the revision is the third parameter (the ids
#: whose records are kept for that revision): one round trip whether or not the revision moved.
_RECORDS_UNLESS_AT = (
    f"SELECT {_COLUMNS} FROM memories m WHERE m.memory_id = ANY(%s::text[]) "
    "OR (m.memory_id = ANY(%s::text[]) AND (SELECT value::bigint FROM lcm_meta WHERE key = 'memory_revision') "
    "IS DISTINCT FROM %s)"
)
#: Records kept per revision at most (the cache starts over above it).
_CACHED_RECORDS = 50_000
_BUMP = "UPDATE lcm_meta SET value = (value::bigint + 1)::text WHERE key = 'memory_revision'"
_PATCHABLE = ("abstract", "overview", "category", "importance", "confidence", "tier", "fact_key")


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def _memory(row: Sequence[Any]) -> Memory:
    return Memory(
        memory_id=row[1],
        scope=row[2],
        category=row[3],
        tier=row[4],
        abstract=row[5],
        overview=row[6],
        content=row[7],
        importance=row[8],
        confidence=row[9],
        temporal_type=row[10],
        valid_from=row[11].astimezone(UTC),
        valid_until=_utc(row[12]),
        fact_key=row[13],
        supersedes=row[14],
        superseded_by=row[15],
        invalidated_at=_utc(row[16]),
        access_count=row[17],
        last_accessed_at=_utc(row[18]),
        access_gap_days=row[19],
        conversation_id=row[20],
        source=row[21],
        created_at=row[22].astimezone(UTC),
        updated_at=row[23].astimezone(UTC),
        metadata=json.loads(row[24]) if row[24] else None,
        source_message_ids=tuple(int(x) for x in row[25] or ()),
    )


def _revision_of(rows: Sequence[Sequence[Any]]) -> int:
    """The revision from the rows of :data:`_REVISION` (0 before the first write)."""
    return int(rows[0][0]) if rows else 0


def _new_id() -> str:
    return "mem_" + uuid.uuid4().hex


def _json(value: Mapping[str, Any] | None) -> str | None:
    return json.dumps(dict(value), ensure_ascii=False) if value else None


class PostgresMemoryStore(memory_keywords.KeywordSearch, memory_mining.MinedMessages):
    """Memories, their vectors, the embedding cache and the scope grants, in the store's PostgreSQL database."""

    def __init__(self, database: Database) -> None:
        self._db = database
        self._ann = memory_ann.AnnIndex()
        #: :meth:`get`'s records, valid for one revision (their unbumped columns are read afresh each time).
        self._records: tuple[int, dict[str, Memory]] = (-1, {})

    # ------------------------------------------------------------------ writes

    @staticmethod
    async def _check_sources(conn: Connection, conversation_id: int | None, message_ids: Sequence[int]) -> None:
        if conversation_id is None:
            return
        if await fetchone(conn, "SELECT 1 FROM conversations WHERE conversation_id = %s", (conversation_id,)) is None:
            raise NotFoundError("conversation", conversation_id, "a memory's provenance must name a stored one")
        ids = list(message_ids)
        if not ids:
            return
        row = await fetchone(
            conn,
            "SELECT count(*) FROM messages WHERE conversation_id = %s AND message_id = ANY(%s)",
            (conversation_id, ids),
        )
        if row is None or row[0] != len(ids):
            raise NotFoundError("source messages", ids, f"some are not messages of conversation {conversation_id}")

    async def _add_sources(self, conn: Connection, current: Memory, message_ids: Sequence[int]) -> None:
        """Append ``message_ids`` (those it does not have yet) to the provenance of ``current``."""
        new = [i for i in dict.fromkeys(message_ids) if i not in current.source_message_ids]
        if not new:
            return
        if current.conversation_id is None:
            raise InputError(
                f"memory {current.memory_id} belongs to no conversation, so it cannot name source messages"
            )
        await self._check_sources(conn, current.conversation_id, new)
        await conn.execute(
            "INSERT INTO memory_sources (memory_rowid, ordinal, message_id) "
            "SELECT m.memory_rowid, t.ordinal + coalesce((SELECT max(s.ordinal) FROM memory_sources s "
            "WHERE s.memory_rowid = m.memory_rowid), -1), t.message_id "
            "FROM memories m, unnest(%s::bigint[]) WITH ORDINALITY AS t(message_id, ordinal) WHERE m.memory_id = %s",
            (new, current.memory_id),
        )

    async def _insert(
        self,
        conn: Connection,
        draft: MemoryDraft,
        vectors: StoredVectors,
        *,
        supersedes: str | None = None,
        now: datetime,
    ) -> str:
        await self._check_sources(conn, draft.conversation_id, draft.source_message_ids)
        memory_id = _new_id()
        row = await fetchone(
            conn,
            "INSERT INTO memories (memory_id, scope, category, tier, abstract, overview, content, importance, "
            "confidence, temporal_type, valid_from, valid_until, fact_key, supersedes, conversation_id, source, "
            "content_hash, metadata, created_at, updated_at) "
            "VALUES (%s, %s, %s, 'working', %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "RETURNING memory_rowid",
            (
                memory_id,
                draft.scope,
                draft.category,
                draft.abstract,
                draft.overview,
                draft.content,
                draft.effective_importance,
                draft.confidence,
                draft.temporal_type,
                draft.valid_from or now,
                draft.valid_until,
                draft.fact_key,
                supersedes,
                draft.conversation_id,
                draft.source,
                content_hash(draft.content),
                _json(draft.metadata),
                now,
                now,
            ),
        )
        assert row is not None
        await self._put_sources(conn, row[0], draft.source_message_ids)
        await self._put_vectors(conn, row[0], vectors)
        return memory_id

    @staticmethod
    async def _put_sources(conn: Connection, rowid: int, message_ids: Sequence[int]) -> None:
        if message_ids:
            await conn.execute(
                "INSERT INTO memory_sources (memory_rowid, ordinal, message_id) "
                "SELECT %s, t.ordinal - 1, t.message_id "
                "FROM unnest(%s::bigint[]) WITH ORDINALITY AS t(message_id, ordinal)",
                (rowid, list(message_ids)),
            )

    async def _put_vectors(
        self, conn: Connection, rowid: int, vectors: StoredVectors, *, keep_other_models: bool = False
    ) -> None:
        """Replace the memory's vectors by ``vectors`` (nothing when it holds no blobs), as SQLite does: those
        of every model (its content changed), or with ``keep_other_models`` those of ``vectors``' model only."""
        model, blobs = vectors
        if not blobs:
            return
        if any(len(b) == 0 or len(b) % 4 for b in blobs):
            raise InputError("a vector blob must hold 4 bytes per dimension")
        if keep_other_models:
            await conn.execute("DELETE FROM memory_vectors WHERE memory_rowid = %s AND model = %s", (rowid, model))
        else:
            await conn.execute("DELETE FROM memory_vectors WHERE memory_rowid = %s", (rowid,))
        await conn.execute(
            "INSERT INTO memory_vectors (memory_rowid, chunk, model, dim, vector) "
            "SELECT %s, t.chunk - 1, %s, octet_length(t.vector) / 4, t.vector "
            "FROM unnest(%s::bytea[]) WITH ORDINALITY AS t(vector, chunk)",
            (rowid, model, list(blobs)),
        )
        await self._ann.put(conn, rowid, model, blobs)

    async def insert(
        self, drafts: Sequence[MemoryDraft], vectors: Sequence[StoredVectors], *, now: datetime
    ) -> list[Memory]:
        if len(drafts) != len(vectors):
            raise InputError(f"{len(drafts)} memories but {len(vectors)} vector sets")
        now = aware(now)
        async with self._db.transaction() as conn:
            await conn.execute(_BUMP)
            ids = [await self._insert(conn, d, v, now=now) for d, v in zip(drafts, vectors, strict=True)]
            return await self._get(conn, ids)

    async def supersede(self, old_id: str, draft: MemoryDraft, vectors: StoredVectors, *, now: datetime) -> Memory:
        now = aware(now)
        async with self._db.transaction() as conn:
            await conn.execute(_BUMP)
            old = await self._get(conn, [old_id])
            if not old:
                raise NotFoundError("memory", old_id)
            if old[0].superseded_by is not None:
                raise InputError(f"memory {old_id} was already superseded by {old[0].superseded_by}; update that one")
            new_id = await self._insert(conn, draft, vectors, supersedes=old_id, now=now)
            await conn.execute(
                "UPDATE memories SET superseded_by = %s, invalidated_at = %s, updated_at = %s WHERE memory_id = %s",
                (new_id, now, now, old_id),
            )
            return (await self._get(conn, [new_id]))[0]

    async def update(
        self, memory_id: str, patch: MemoryPatch, vectors: StoredVectors | None, *, now: datetime
    ) -> Memory:
        now = aware(now)
        async with self._db.transaction() as conn:
            await conn.execute(_BUMP)
            found = await self._get(conn, [memory_id])
            if not found:
                raise NotFoundError("memory", memory_id)
            current = found[0]
            values: dict[str, Any] = {}
            if patch.content is not None:
                abstract, overview = derive_levels(patch.content)
                values.update(
                    content=patch.content,
                    content_hash=content_hash(patch.content),
                    abstract=patch.abstract or abstract,
                    overview=patch.overview or overview,
                )
            for name in _PATCHABLE:
                value = getattr(patch, name)
                if value is not None:
                    values[name] = value
            if patch.valid_until is not None:
                if patch.valid_until < current.valid_from:
                    raise InputError("valid_until is before the memory's valid_from")
                values["valid_until"] = patch.valid_until
            values["updated_at"] = now
            assignments = ", ".join(f"{name} = %s" for name in values)  # names from the fixed list above
            row = await fetchone(
                conn,
                f"UPDATE memories SET {assignments} WHERE memory_id = %s RETURNING memory_rowid",
                (*values.values(), memory_id),
            )
            assert row is not None
            await self._add_sources(conn, current, patch.add_sources)
            if vectors is not None:
                await self._put_vectors(conn, row[0], vectors)
            return (await self._get(conn, [memory_id]))[0]

    async def delete(self, memory_ids: Sequence[str]) -> int:
        ids = list(dict.fromkeys(memory_ids))
        async with self._db.transaction() as conn:
            await conn.execute(_BUMP)
            # A memory that superseded a forgotten one no longer points at it.
            await conn.execute("UPDATE memories SET supersedes = NULL WHERE supersedes = ANY(%s)", (ids,))
            cursor = await conn.execute("DELETE FROM memories WHERE memory_id = ANY(%s)", (ids,))
            return max(cursor.rowcount, 0)

    async def import_memories(self, memories: Sequence[Memory], vectors: Sequence[StoredVectors]) -> int:
        """Insert exported memories keeping their ids and history; ids already stored are skipped."""
        async with self._db.transaction() as conn:
            await conn.execute(_BUMP)
            added = 0
            for memory, vecs in zip(memories, vectors, strict=True):
                conversation_id = memory.conversation_id
                if (
                    conversation_id is not None
                    and await fetchone(
                        conn, "SELECT 1 FROM conversations WHERE conversation_id = %s", (conversation_id,)
                    )
                    is None
                ):
                    conversation_id = None  # provenance from another database cannot be linked here
                row = await fetchone(
                    conn,
                    "INSERT INTO memories (memory_id, scope, category, tier, abstract, overview, content, importance, "
                    "confidence, temporal_type, valid_from, valid_until, fact_key, supersedes, superseded_by, "
                    "invalidated_at, access_count, last_accessed_at, access_gap_days, conversation_id, source, "
                    "content_hash, metadata, created_at, updated_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
                    "%s, %s, %s) ON CONFLICT (memory_id) DO NOTHING RETURNING memory_rowid",
                    (
                        memory.memory_id,
                        memory.scope,
                        memory.category,
                        memory.tier,
                        memory.abstract,
                        memory.overview,
                        memory.content,
                        memory.importance,
                        memory.confidence,
                        memory.temporal_type,
                        memory.valid_from,
                        memory.valid_until,
                        memory.fact_key,
                        memory.supersedes,
                        memory.superseded_by,
                        memory.invalidated_at,
                        memory.access_count,
                        memory.last_accessed_at,
                        memory.access_gap_days,
                        conversation_id,
                        memory.source,
                        content_hash(memory.content),
                        _json(memory.metadata),
                        memory.created_at,
                        memory.updated_at,
                    ),
                )
                if row is None:
                    continue
                if conversation_id is not None:
                    await self._put_sources(conn, row[0], memory.source_message_ids)
                await self._put_vectors(conn, row[0], vecs)
                added += 1
            return added

    async def record_access(self, memory_ids: Sequence[str], when: datetime) -> list[Memory]:
        """Count one access of each memory at ``when`` (running mean of the gap between accesses, in days)."""
        ids = list(memory_ids)
        when = aware(when)
        async with self._db.transaction() as conn:
            # Lock first (in id order: no deadlock between searches), then read: no access is lost.
            await conn.execute(
                "SELECT 1 FROM memories WHERE memory_id = ANY(%s) ORDER BY memory_id FOR UPDATE", (sorted(set(ids)),)
            )
            for memory in await self._get(conn, ids):
                previous = memory.last_accessed_at or memory.created_at
                gap = max(0.0, (when - previous).total_seconds() / 86_400)
                n = memory.access_count + 1
                mean = memory.access_gap_days + (gap - memory.access_gap_days) / n
                await conn.execute(
                    "UPDATE memories SET access_count = %s, last_accessed_at = %s, access_gap_days = %s "
                    "WHERE memory_id = %s",
                    (n, when, mean, memory.memory_id),
                )
            return await self._get(conn, ids)

    async def set_tiers(self, changes: Mapping[str, Tier]) -> None:
        if not changes:
            return
        async with self._db.transaction() as conn:
            await conn.execute(
                "UPDATE memories m SET tier = t.tier FROM unnest(%s::text[], %s::text[]) AS t(memory_id, tier) "
                "WHERE m.memory_id = t.memory_id",
                (list(changes), list(changes.values())),
            )

    # ------------------------------------------------------------------ reads

    @staticmethod
    async def _get(conn: Connection, memory_ids: Sequence[str]) -> list[Memory]:
        if not memory_ids:
            return []
        rows = await fetchall(conn, _SELECT_BY_ID, (text_array(set(memory_ids)),))
        by_id = {row[1]: _memory(row) for row in rows}
        return [by_id[i] for i in dict.fromkeys(memory_ids) if i in by_id]

    async def get(self, memory_ids: Sequence[str]) -> list[Memory]:
        """The memories, from the records read before for this revision where it can (one round trip).

        A record read at revision *r* is what any read at *r* reads, except the columns that change
        without a bump (:data:`_UNBUMPED`), which are read again every time: the revision, those columns of
        the cached ids and the whole rows of the others (of all, where the revision moved) are read in one
        snapshot and one round trip (another host's write either bumps the revision, dropping the cache,
        or shows in those columns).  Inside ``atomic()`` (a read that may be rolled back) nothing is cached.
        """
        wanted = list(dict.fromkeys(memory_ids))
        if not wanted:
            return []
        if self._db.in_block:
            async with self._db.read() as conn:
                return await self._get(conn, memory_ids)
        revision, cached = self._records
        known = [i for i in wanted if i in cached]
        unknown = [i for i in wanted if i not in cached]
        now, fresh, rows = await self._db.read_all(
            [
                (_REVISION, ()),
                (_UNBUMPED_BY_ID, (text_array(known),)),
                (_RECORDS_UNLESS_AT, (text_array(unknown), text_array(known), revision)),
            ]
        )
        if _revision_of(now) != revision:  # another revision: nothing cached holds (the whole rows came)
            revision, cached, fresh = _revision_of(now), {}, []
        by_id = {memory.memory_id: memory for memory in map(_memory, rows)}
        for memory_id, tier, access_count, last_accessed_at, access_gap_days, conversation_id in fresh:
            memory = cached[memory_id]
            unbumped = (tier, access_count, _utc(last_accessed_at), access_gap_days, conversation_id)
            if unbumped != (
                memory.tier,
                memory.access_count,
                memory.last_accessed_at,
                memory.access_gap_days,
                memory.conversation_id,
            ):
                memory = replace(
                    memory,
                    tier=tier,
                    access_count=access_count,
                    last_accessed_at=unbumped[2],
                    access_gap_days=access_gap_days,
                    conversation_id=conversation_id,
                )
            by_id[memory_id] = memory
        if len(cached) + len(rows) > _CACHED_RECORDS:
            cached = {}
        cached.update(by_id)  # ids gone from the store are simply not found: no entry to keep
        self._records = (revision, cached)
        return [by_id[i] for i in wanted if i in by_id]

    async def find_by_prefix(self, prefix: str, scopes: Sequence[str] | None) -> list[Memory]:
        if not re.fullmatch(r"[A-Za-z0-9_]{1,64}", prefix):
            raise InputError(f"{prefix!r} is not a memory id or id prefix")
        clause, params = scope_clause(scopes)
        async with self._db.transaction() as conn:
            rows = await fetchall(
                conn,
                # memory_id is COLLATE "C": a byte range, served by its unique index.
                f"SELECT {_COLUMNS} FROM memories m WHERE m.memory_id >= %s AND m.memory_id < %s{clause} "
                "ORDER BY m.memory_id LIMIT 5",
                (prefix, prefix + "\U0010ffff", *params),
            )
            return [_memory(r) for r in rows]

    async def list_memories(
        self,
        scopes: Sequence[str] | None,
        *,
        category: str | None = None,
        include_superseded: bool = False,
        fact_key: str | None = None,
        after_rowid: int = 0,
        limit: int = 100,
    ) -> list[tuple[int, Memory]]:
        """Memories in insertion order after ``after_rowid`` (keyset paging: no row cap, no OFFSET scans)."""
        clause, params = scope_clause(scopes)
        if category is not None:
            clause += " AND m.category = %s"
            params.append(category)
        if fact_key is not None:
            clause += " AND m.fact_key = %s"
            params.append(fact_key)
        if not include_superseded:
            clause += " AND m.invalidated_at IS NULL"
        async with self._db.transaction() as conn:
            rows = await fetchall(
                conn,
                f"SELECT {_COLUMNS} FROM memories m WHERE m.memory_rowid > %s{clause} ORDER BY m.memory_rowid LIMIT %s",
                (after_rowid, *params, limit),
            )
            return [(r[0], _memory(r)) for r in rows]

    # ------------------------------------------------------------------ vectors

    async def load_vectors(self, model: str) -> tuple[int, list[tuple[str, str, bool, bytes]]]:
        """(revision, [(memory_id, scope, current, vector blob)…]) for one embedding model, chunks in order."""
        async with self._db.transaction() as conn:
            row = await fetchone(conn, _REVISION)
            rows = await fetchall(
                conn,
                "SELECT m.memory_id, m.scope, m.invalidated_at IS NULL, v.vector FROM memory_vectors v "
                "JOIN memories m ON m.memory_rowid = v.memory_rowid WHERE v.model = %s "
                "ORDER BY v.memory_rowid, v.chunk",
                (model,),
            )
            return (int(row[0]) if row else 0), [(r[0], r[1], bool(r[2]), bytes(r[3])) for r in rows]

    async def vectors_of(self, model: str, memory_ids: Sequence[str]) -> list[tuple[str, str, bool, bytes]]:
        """:meth:`load_vectors` rows of the listed memories only."""
        if not memory_ids:
            return []
        async with self._db.read() as conn:
            rows = await fetchall(
                conn,
                "SELECT m.memory_id, m.scope, m.invalidated_at IS NULL, v.vector FROM memory_vectors v "
                "JOIN memories m ON m.memory_rowid = v.memory_rowid WHERE v.model = %s AND m.memory_id = ANY(%s) "
                "ORDER BY v.memory_rowid, v.chunk",
                (model, list(set(memory_ids))),
            )
            return [(r[0], r[1], bool(r[2]), bytes(r[3])) for r in rows]

    async def nearest(
        self,
        model: str,
        query: bytes,
        *,
        limit: int,
        scopes: Sequence[str] | None,
        include_superseded: bool = False,
        min_similarity: float = -1.0,
        exact_max: int,
    ) -> list[tuple[str, float]] | None:
        """Nearest memories by best chunk from the pgvector index, or ``None``: search exactly in memory.

        ``None`` where the ``vector`` extension is not installed, or where the model has at most
        ``exact_max`` chunk vectors (exact search is both exact and fast there).
        """
        async with self._db.transaction() as conn:
            return await self._ann.nearest(
                conn,
                model,
                query,
                limit=limit,
                scopes=scopes,
                include_superseded=include_superseded,
                min_similarity=min_similarity,
                exact_max=exact_max,
            )

    async def revision(self) -> int:
        async with self._db.read() as conn:
            return _revision_of(await fetchall(conn, _REVISION))

    async def memories_without_vectors(self, model: str, limit: int = 500) -> list[Memory]:
        async with self._db.transaction() as conn:
            rows = await fetchall(
                conn,
                f"SELECT {_COLUMNS} FROM memories m WHERE NOT EXISTS (SELECT 1 FROM memory_vectors v "
                "WHERE v.memory_rowid = m.memory_rowid AND v.model = %s) ORDER BY m.memory_rowid LIMIT %s",
                (model, limit),
            )
            return [_memory(r) for r in rows]

    async def put_vectors(self, memory_id: str, vectors: StoredVectors) -> None:
        async with self._db.transaction() as conn:
            await conn.execute(_BUMP)
            row = await fetchone(conn, "SELECT memory_rowid FROM memories WHERE memory_id = %s", (memory_id,))
            if row is None:
                raise NotFoundError("memory", memory_id)
            await self._put_vectors(conn, row[0], vectors, keep_other_models=True)

    async def stats(self, scopes: Sequence[str] | None) -> MemoryStats:
        clause, params = scope_clause(scopes)
        async with self._db.transaction() as conn:

            async def grouped(column: str) -> dict[str, int]:
                rows = await fetchall(
                    conn,
                    f"SELECT m.{column}, count(*) FROM memories m WHERE m.invalidated_at IS NULL{clause} "
                    f'GROUP BY m.{column} ORDER BY m.{column} COLLATE "C"',
                    params,
                )
                return {str(r[0]): int(r[1]) for r in rows}

            row = await fetchone(
                conn,
                f"SELECT count(*), count(*) FILTER (WHERE m.invalidated_at IS NULL) FROM memories m WHERE true{clause}",
                params,
            )
            total, current = (int(row[0]), int(row[1])) if row else (0, 0)
            row = await fetchone(
                conn,
                "SELECT count(*) FROM memory_vectors v JOIN memories m ON m.memory_rowid = v.memory_rowid "
                f"WHERE true{clause}",
                params,
            )
            vectors = int(row[0]) if row else 0
            row = await fetchone(conn, "SELECT count(*) FROM embedding_cache")
            return MemoryStats(
                total=total,
                current=current,
                superseded=total - current,
                by_category=await grouped("category"),
                by_tier=await grouped("tier"),
                by_scope=await grouped("scope"),
                vectors=vectors,
                cached_embeddings=int(row[0]) if row else 0,
            )

    # ------------------------------------------------------------ embedding cache

    async def cached_embeddings(self, hashes: Sequence[str], model: str) -> dict[str, bytes]:
        if not hashes:
            return {}
        async with self._db.read() as conn:
            rows = await fetchall(
                conn,
                "SELECT content_hash, vector FROM embedding_cache WHERE model = %s AND content_hash = ANY(%s)",
                (model, list(set(hashes))),
            )
            return {r[0]: bytes(r[1]) for r in rows}

    async def cache_embeddings(self, items: Mapping[str, bytes], model: str, *, now: datetime) -> None:
        if not items:
            return
        now = aware(now)
        async with self._db.transaction() as conn:
            await conn.execute(
                "INSERT INTO embedding_cache (content_hash, model, dim, vector, created_at) "
                "SELECT t.content_hash, %s, octet_length(t.vector) / 4, t.vector, %s "
                "FROM unnest(%s::text[], %s::bytea[]) AS t(content_hash, vector) "
                "ON CONFLICT (content_hash, model) DO NOTHING",
                (model, now, list(items), list(items.values())),
            )

    # ------------------------------------------------------------------ access

    async def grants(self) -> dict[str, list[str]]:
        async with self._db.read() as conn:
            rows = await fetchall(
                conn, 'SELECT agent_id, scope FROM memory_access ORDER BY agent_id COLLATE "C", scope COLLATE "C"'
            )
        out: dict[str, list[str]] = {}
        for agent, scope in rows:
            out.setdefault(agent, []).append(scope)
        return out

    async def grant(self, agent_id: str, scopes: Iterable[str], *, now: datetime) -> None:
        wanted = list(dict.fromkeys(scopes))
        now = aware(now)
        async with self._db.transaction() as conn:
            await conn.execute(_BUMP)
            await conn.execute(
                "INSERT INTO memory_access (agent_id, scope, granted_at) SELECT %s, s, %s FROM unnest(%s::text[]) s "
                "ON CONFLICT (agent_id, scope) DO NOTHING",
                (agent_id, now, wanted),
            )

    async def revoke(self, agent_id: str, scopes: Iterable[str]) -> int:
        wanted = list(dict.fromkeys(scopes))
        async with self._db.transaction() as conn:
            await conn.execute(_BUMP)
            cursor = await conn.execute(
                "DELETE FROM memory_access WHERE agent_id = %s AND scope = ANY(%s)", (agent_id, wanted)
            )
            return max(cursor.rowcount, 0)
