"""The :class:`~lossless.memory.ports.MemoryStore` on the SQLite file the context store uses.

Invariants (beyond the port's):

* Every write is one transaction through :meth:`Database.write`: rows, source
  links, vectors, both full-text tables (triggers) and the revision counter
  change together or not at all.  An update is an ``UPDATE`` in place — never a
  delete followed by an insert — so a crash can't lose a memory.
* ``lcm_meta.memory_revision`` increases with every write that changes what
  vector search or scope checks see (rows added, removed, re-embedded,
  superseded; grants changed); a reader that cached the vector matrix or the
  grants reloads when it changes.
* Keyword search never interpolates user text into SQL: FTS5 queries are built
  from quoted terms (``"…"``, inner quotes doubled) and passed as parameters.
  Words: stop words and terms no memory holds are dropped, the rest are ANDed;
  only when no memory holds them all are they ORed (OR scores every match: at
  100k memories it costs tens of milliseconds, AND about one).
* Scope filters are parameters of ``scope IN (…)``; ``None`` means every scope
  and is only passed by a system caller (the port's caller decides).
"""

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from lossless.errors import InputError, NotFoundError
from lossless.memory.ports import KeywordHit, StoredVectors
from lossless.memory.records import Memory, MemoryDraft, MemoryPatch, MemoryStats, Tier, derive_levels
from lossless.records import content_hash, format_timestamp, parse_timestamp
from lossless.stores.sqlite.connection import Database
from lossless.stores.sqlite.statements import chunks
from lossless.text import STOP_WORDS, keyword_terms

__all__ = ["SQLiteMemoryStore", "fts_terms"]

_COLUMNS = (
    "m.memory_rowid, m.memory_id, m.scope, m.category, m.tier, m.abstract, m.overview, m.content, m.importance, "
    "m.confidence, m.temporal_type, m.valid_from, m.valid_until, m.fact_key, m.supersedes, m.superseded_by, "
    "m.invalidated_at, m.access_count, m.last_accessed_at, m.access_gap_days, m.conversation_id, m.source, "
    "m.created_at, m.updated_at, m.metadata, "
    "(SELECT group_concat(message_id) FROM (SELECT s.message_id FROM memory_sources s "
    "WHERE s.memory_rowid = m.memory_rowid ORDER BY s.ordinal))"
)
_MAX_TERMS = 32


def _ts(value: str | None) -> datetime | None:
    return None if value is None else parse_timestamp(value)


def _memory(row: Sequence[Any]) -> Memory:
    sources = tuple(int(x) for x in row[25].split(",")) if row[25] else ()
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
        valid_from=parse_timestamp(row[11]),
        valid_until=_ts(row[12]),
        fact_key=row[13],
        supersedes=row[14],
        superseded_by=row[15],
        invalidated_at=_ts(row[16]),
        access_count=row[17],
        last_accessed_at=_ts(row[18]),
        access_gap_days=row[19],
        conversation_id=row[20],
        source=row[21],
        created_at=parse_timestamp(row[22]),
        updated_at=parse_timestamp(row[23]),
        metadata=json.loads(row[24]) if row[24] else None,
        source_message_ids=sources,
    )


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def fts_terms(query: str) -> tuple[list[str], list[str]]:
    """(word terms, CJK runs) of a query; words are lower-cased, both capped at 32 terms."""
    return keyword_terms(query, _MAX_TERMS)


def _grams(run: str, n: int) -> list[str]:
    if len(run) <= n:
        return [run]
    return [run[i : i + n] for i in range(len(run) - n + 1)]


def _scope_clause(scopes: Sequence[str] | None) -> tuple[str, list[Any]]:
    if scopes is None:
        return "", []
    if not scopes:
        return " AND 0", []
    return f" AND m.scope IN ({','.join('?' * len(scopes))})", list(scopes)


def _bump(conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE lcm_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'memory_revision'")


def _new_id() -> str:
    return "mem_" + uuid.uuid4().hex


class SQLiteMemoryStore:
    """Memories, their vectors, the embedding cache and the scope grants, in one SQLite file."""

    def __init__(self, database: Database) -> None:
        self._db = database

    # ------------------------------------------------------------------ writes

    @staticmethod
    def _check_sources(conn: sqlite3.Connection, conversation_id: int | None, message_ids: Sequence[int]) -> None:
        if conversation_id is None:
            return
        if conn.execute("SELECT 1 FROM conversations WHERE conversation_id = ?", (conversation_id,)).fetchone() is None:
            raise NotFoundError("conversation", conversation_id, "a memory's provenance must name a stored one")
        for part in chunks(list(message_ids)):
            found = conn.execute(
                f"SELECT count(*) FROM messages WHERE conversation_id = ? "
                f"AND message_id IN ({','.join('?' * len(part))})",
                (conversation_id, *part),
            ).fetchone()[0]
            if found != len(part):
                raise NotFoundError(
                    "source messages",
                    list(part),
                    f"some are not messages of conversation {conversation_id}",
                )

    def _add_sources(self, conn: sqlite3.Connection, current: Memory, message_ids: Sequence[int]) -> None:
        """Append ``message_ids`` (those it does not have yet) to the provenance of ``current``."""
        new = [i for i in dict.fromkeys(message_ids) if i not in current.source_message_ids]
        if not new:
            return
        if current.conversation_id is None:
            raise InputError(
                f"memory {current.memory_id} belongs to no conversation, so it cannot name source messages"
            )
        self._check_sources(conn, current.conversation_id, new)
        rowid, last = conn.execute(
            "SELECT m.memory_rowid, (SELECT coalesce(max(s.ordinal), -1) FROM memory_sources s "
            "WHERE s.memory_rowid = m.memory_rowid) FROM memories m WHERE m.memory_id = ?",
            (current.memory_id,),
        ).fetchone()
        conn.executemany(
            "INSERT INTO memory_sources (memory_rowid, ordinal, message_id) VALUES (?, ?, ?)",
            [(rowid, last + 1 + i, mid) for i, mid in enumerate(new)],
        )

    def _insert(
        self,
        conn: sqlite3.Connection,
        draft: MemoryDraft,
        vectors: StoredVectors,
        *,
        memory_id: str | None = None,
        supersedes: str | None = None,
        now: str,
    ) -> str:
        self._check_sources(conn, draft.conversation_id, draft.source_message_ids)
        memory_id = memory_id or _new_id()
        valid_from = format_timestamp(draft.valid_from) if draft.valid_from else now
        cursor = conn.execute(
            "INSERT INTO memories (memory_id, scope, category, tier, abstract, overview, content, importance, "
            "confidence, temporal_type, valid_from, valid_until, fact_key, supersedes, conversation_id, source, "
            "content_hash, metadata, created_at, updated_at) "
            "VALUES (?, ?, ?, 'working', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                valid_from,
                format_timestamp(draft.valid_until) if draft.valid_until else None,
                draft.fact_key,
                supersedes,
                draft.conversation_id,
                draft.source,
                content_hash(draft.content),
                json.dumps(dict(draft.metadata), ensure_ascii=False) if draft.metadata else None,
                now,
                now,
            ),
        )
        rowid = cursor.lastrowid
        conn.executemany(
            "INSERT INTO memory_sources (memory_rowid, ordinal, message_id) VALUES (?, ?, ?)",
            [(rowid, i, mid) for i, mid in enumerate(draft.source_message_ids)],
        )
        self._put_vectors(conn, rowid, vectors)
        return memory_id

    @staticmethod
    def _put_vectors(
        conn: sqlite3.Connection, rowid: int | None, vectors: StoredVectors, *, keep_other_models: bool = False
    ) -> None:
        """Replace the memory's vectors (of every model: its content changed; or of ``vectors``' model only)."""
        model, blobs = vectors
        if not blobs:
            return
        if keep_other_models:
            conn.execute("DELETE FROM memory_vectors WHERE memory_rowid = ? AND model = ?", (rowid, model))
        else:
            conn.execute("DELETE FROM memory_vectors WHERE memory_rowid = ?", (rowid,))
        conn.executemany(
            "INSERT INTO memory_vectors (memory_rowid, chunk, model, dim, vector) VALUES (?, ?, ?, ?, ?)",
            [(rowid, i, model, len(blob) // 4, blob) for i, blob in enumerate(blobs)],
        )

    async def insert(
        self, drafts: Sequence[MemoryDraft], vectors: Sequence[StoredVectors], *, now: datetime
    ) -> list[Memory]:
        if len(drafts) != len(vectors):
            raise InputError(f"{len(drafts)} memories but {len(vectors)} vector sets")
        stamp = format_timestamp(now)

        def run(conn: sqlite3.Connection) -> list[Memory]:
            ids = [self._insert(conn, d, v, now=stamp) for d, v in zip(drafts, vectors, strict=True)]
            _bump(conn)
            return self._get(conn, ids)

        return await self._db.write(run, heavy=len(drafts) > 50)

    async def supersede(self, old_id: str, draft: MemoryDraft, vectors: StoredVectors, *, now: datetime) -> Memory:
        stamp = format_timestamp(now)

        def run(conn: sqlite3.Connection) -> Memory:
            old = self._get(conn, [old_id])
            if not old:
                raise NotFoundError("memory", old_id)
            if old[0].superseded_by is not None:
                raise InputError(f"memory {old_id} was already superseded by {old[0].superseded_by}; update that one")
            new_id = self._insert(conn, draft, vectors, supersedes=old_id, now=stamp)
            conn.execute(
                "UPDATE memories SET superseded_by = ?, invalidated_at = ?, updated_at = ? WHERE memory_id = ?",
                (new_id, stamp, stamp, old_id),
            )
            _bump(conn)
            return self._get(conn, [new_id])[0]

        return await self._db.write(run)

    async def update(
        self, memory_id: str, patch: MemoryPatch, vectors: StoredVectors | None, *, now: datetime
    ) -> Memory:
        stamp = format_timestamp(now)

        def run(conn: sqlite3.Connection) -> Memory:
            found = self._get(conn, [memory_id])
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
            for name in ("abstract", "overview", "category", "importance", "confidence", "tier", "fact_key"):
                value = getattr(patch, name)
                if value is not None:
                    values[name] = value
            if patch.valid_until is not None:
                if patch.valid_until < current.valid_from:
                    raise InputError("valid_until is before the memory's valid_from")
                values["valid_until"] = format_timestamp(patch.valid_until)
            values["updated_at"] = stamp
            assignments = ", ".join(f"{name} = ?" for name in values)
            conn.execute(f"UPDATE memories SET {assignments} WHERE memory_id = ?", (*values.values(), memory_id))
            self._add_sources(conn, current, patch.add_sources)
            if vectors is not None:
                rowid = conn.execute("SELECT memory_rowid FROM memories WHERE memory_id = ?", (memory_id,)).fetchone()
                self._put_vectors(conn, rowid[0], vectors)
            _bump(conn)
            return self._get(conn, [memory_id])[0]

        return await self._db.write(run)

    async def delete(self, memory_ids: Sequence[str]) -> int:
        def run(conn: sqlite3.Connection) -> int:
            total = 0
            for part in chunks(list(memory_ids)):
                marks = ",".join("?" * len(part))
                # A memory that superseded a forgotten one no longer points at it.
                conn.execute(f"UPDATE memories SET supersedes = NULL WHERE supersedes IN ({marks})", part)
                total += conn.execute(f"DELETE FROM memories WHERE memory_id IN ({marks})", part).rowcount
            _bump(conn)
            return total

        return await self._db.write(run)

    async def import_memories(self, memories: Sequence[Memory], vectors: Sequence[StoredVectors]) -> int:
        """Insert exported memories keeping their ids and history; ids already stored are skipped."""

        def run(conn: sqlite3.Connection) -> int:
            added = 0
            for memory, vecs in zip(memories, vectors, strict=True):
                if conn.execute("SELECT 1 FROM memories WHERE memory_id = ?", (memory.memory_id,)).fetchone():
                    continue
                conversation_id = memory.conversation_id
                if (
                    conversation_id is not None
                    and not conn.execute(
                        "SELECT 1 FROM conversations WHERE conversation_id = ?", (conversation_id,)
                    ).fetchone()
                ):
                    conversation_id = None  # provenance from another database cannot be linked here
                cursor = conn.execute(
                    "INSERT INTO memories (memory_id, scope, category, tier, abstract, overview, content, importance, "
                    "confidence, temporal_type, valid_from, valid_until, fact_key, supersedes, superseded_by, "
                    "invalidated_at, access_count, last_accessed_at, access_gap_days, conversation_id, source, "
                    "content_hash, metadata, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                        format_timestamp(memory.valid_from),
                        format_timestamp(memory.valid_until) if memory.valid_until else None,
                        memory.fact_key,
                        memory.supersedes,
                        memory.superseded_by,
                        format_timestamp(memory.invalidated_at) if memory.invalidated_at else None,
                        memory.access_count,
                        format_timestamp(memory.last_accessed_at) if memory.last_accessed_at else None,
                        memory.access_gap_days,
                        conversation_id,
                        memory.source,
                        content_hash(memory.content),
                        json.dumps(dict(memory.metadata), ensure_ascii=False) if memory.metadata else None,
                        format_timestamp(memory.created_at),
                        format_timestamp(memory.updated_at),
                    ),
                )
                if conversation_id is not None:
                    conn.executemany(
                        "INSERT INTO memory_sources (memory_rowid, ordinal, message_id) VALUES (?, ?, ?)",
                        [(cursor.lastrowid, i, mid) for i, mid in enumerate(memory.source_message_ids)],
                    )
                self._put_vectors(conn, cursor.lastrowid, vecs)
                added += 1
            _bump(conn)
            return added

        return await self._db.write(run, heavy=True)

    async def record_access(self, memory_ids: Sequence[str], when: datetime) -> list[Memory]:
        """Count one access of each memory at ``when`` (running mean of the gap between accesses, in days)."""
        stamp = format_timestamp(when)

        def run(conn: sqlite3.Connection) -> list[Memory]:
            for memory in self._get(conn, list(memory_ids)):
                previous = memory.last_accessed_at or memory.created_at
                gap = max(0.0, (when - previous).total_seconds() / 86_400)
                n = memory.access_count + 1
                mean = memory.access_gap_days + (gap - memory.access_gap_days) / n
                conn.execute(
                    "UPDATE memories SET access_count = ?, last_accessed_at = ?, access_gap_days = ? "
                    "WHERE memory_id = ?",
                    (n, stamp, mean, memory.memory_id),
                )
            return self._get(conn, list(memory_ids))

        return await self._db.write(run)

    async def set_tiers(self, changes: Mapping[str, Tier]) -> None:
        if not changes:
            return

        def run(conn: sqlite3.Connection) -> None:
            conn.executemany("UPDATE memories SET tier = ? WHERE memory_id = ?", [(t, i) for i, t in changes.items()])

        await self._db.write(run)

    # ------------------------------------------------------------------ reads

    @staticmethod
    def _get(conn: sqlite3.Connection, memory_ids: Sequence[str]) -> list[Memory]:
        by_id: dict[str, Memory] = {}
        for part in chunks(list(memory_ids)):
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM memories m WHERE m.memory_id IN ({','.join('?' * len(part))})", part
            ).fetchall()
            by_id.update((row[1], _memory(row)) for row in rows)
        return [by_id[i] for i in dict.fromkeys(memory_ids) if i in by_id]

    async def get(self, memory_ids: Sequence[str]) -> list[Memory]:
        return await self._db.read(lambda conn: self._get(conn, memory_ids))

    async def find_by_prefix(self, prefix: str, scopes: Sequence[str] | None) -> list[Memory]:
        if not re.fullmatch(r"[A-Za-z0-9_]{1,64}", prefix):
            raise InputError(f"{prefix!r} is not a memory id or id prefix")
        clause, params = _scope_clause(scopes)

        def run(conn: sqlite3.Connection) -> list[Memory]:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM memories m WHERE m.memory_id >= ? AND m.memory_id < ?{clause} LIMIT 5",
                (prefix, prefix + "\U0010ffff", *params),
            ).fetchall()
            return [_memory(r) for r in rows]

        return await self._db.read(run)

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
        clause, params = _scope_clause(scopes)
        if category is not None:
            clause += " AND m.category = ?"
            params.append(category)
        if fact_key is not None:
            clause += " AND m.fact_key = ?"
            params.append(fact_key)
        if not include_superseded:
            clause += " AND m.invalidated_at IS NULL"

        def run(conn: sqlite3.Connection) -> list[tuple[int, Memory]]:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM memories m WHERE m.memory_rowid > ?{clause} ORDER BY m.memory_rowid LIMIT ?",
                (after_rowid, *params, limit),
            ).fetchall()
            return [(r[0], _memory(r)) for r in rows]

        return await self._db.read(run)

    async def keyword_search(
        self,
        query: str,
        scopes: Sequence[str] | None,
        *,
        limit: int,
        include_superseded: bool = False,
        conversations: Sequence[int] | None = None,
    ) -> list[KeywordHit]:
        words, cjk = fts_terms(query)
        clause, params = _scope_clause(scopes)
        if conversations is not None:
            ids = list(dict.fromkeys(int(c) for c in conversations))
            clause += f" AND m.conversation_id IN ({','.join('?' * len(ids))})" if ids else " AND 0"
            params = [*params, *ids]
        if not include_superseded:
            clause += " AND m.invalidated_at IS NULL"

        def fts(conn: sqlite3.Connection, table: str, expression: str, weights: str) -> dict[str, float]:
            rows = conn.execute(
                f"SELECT m.memory_id, -bm25({table}, {weights}) FROM {table} f "
                f"JOIN memories m ON m.memory_rowid = f.rowid WHERE {table} MATCH ?{clause} "
                f"ORDER BY bm25({table}, {weights}) LIMIT ?",
                (expression, *params, limit),
            ).fetchall()
            return {r[0]: float(r[1]) for r in rows}

        def run(conn: sqlite3.Connection) -> list[KeywordHit]:
            scores: dict[str, float] = {}
            # Stop words cost the most (they match everything) and tell the least; terms no
            # memory contains would make the AND query fail.  Drop both, then AND (an index
            # intersection: cheap); OR (which scores every match) only when AND finds nothing.
            content_words = [w for w in words if w not in STOP_WORDS] or words
            known = [
                w
                for w in content_words
                if conn.execute(
                    "SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT 1", (_quote(w),)
                ).fetchone()
            ]
            if known:
                quoted = [_quote(w) for w in known]
                hits = fts(conn, "memories_fts", " AND ".join(quoted), "2.0, 1.0, 1.0")
                if not hits and len(known) > 1:
                    hits = fts(conn, "memories_fts", " OR ".join(quoted), "2.0, 1.0, 1.0")
                scores.update(hits)
            if cjk:
                grams = list(dict.fromkeys(g for run_ in cjk for g in _grams(run_, 3) if len(g) == 3))
                if grams:
                    expression = " OR ".join(_quote(g) for g in grams[:_MAX_TERMS])
                    for key, value in fts(conn, "memories_trigram", expression, "2.0, 1.0, 1.0").items():
                        scores[key] = max(scores.get(key, 0.0), value)
                if len(scores) < limit:
                    # Words of one or two characters (most CJK words) are below the trigram
                    # tokenizer's reach: score them by the share of query bigrams a memory holds.
                    bigrams = list(dict.fromkeys(g for run_ in cjk for g in _grams(run_, 2)))[:_MAX_TERMS]
                    hit_sum = " + ".join("(instr(m.abstract || ' ' || m.content, ?) > 0)" for _ in bigrams)
                    rows = conn.execute(
                        f"SELECT m.memory_id, {hit_sum} AS hits FROM memories m WHERE 1{clause} "
                        "AND hits > 0 ORDER BY hits DESC, m.memory_rowid DESC LIMIT ?",
                        (*bigrams, *params, limit),
                    ).fetchall()
                    for memory_id, hits in rows:
                        scores[memory_id] = max(scores.get(memory_id, 0.0), 10.0 * hits / len(bigrams))
            ranked = sorted(scores.items(), key=lambda kv: -kv[1])[:limit]
            return [KeywordHit(memory_id, score) for memory_id, score in ranked]

        if not words and not cjk:
            return []
        return await self._db.read(run)

    async def memory_ids_from(self, conversation_ids: Sequence[int]) -> set[str]:
        def run(conn: sqlite3.Connection) -> set[str]:
            found: set[str] = set()
            for part in chunks(list(dict.fromkeys(int(c) for c in conversation_ids))):
                marks = ",".join("?" * len(part))
                rows = conn.execute(f"SELECT memory_id FROM memories WHERE conversation_id IN ({marks})", part)
                found.update(str(r[0]) for r in rows)
            return found

        return await self._db.read(run)

    async def load_vectors(self, model: str) -> tuple[int, list[tuple[str, str, bool, bytes]]]:
        """(revision, [(memory_id, scope, current, vector blob)…]) for one embedding model, chunks in order."""

        def run(conn: sqlite3.Connection) -> tuple[int, list[tuple[str, str, bool, bytes]]]:
            revision = int(conn.execute("SELECT value FROM lcm_meta WHERE key = 'memory_revision'").fetchone()[0])
            rows = conn.execute(
                "SELECT m.memory_id, m.scope, m.invalidated_at IS NULL, v.vector FROM memory_vectors v "
                "JOIN memories m ON m.memory_rowid = v.memory_rowid WHERE v.model = ? ORDER BY v.memory_rowid, v.chunk",
                (model,),
            ).fetchall()
            return revision, [(r[0], r[1], bool(r[2]), r[3]) for r in rows]

        return await self._db.read(run)

    async def revision(self) -> int:
        return await self._db.read(
            lambda conn: int(conn.execute("SELECT value FROM lcm_meta WHERE key = 'memory_revision'").fetchone()[0])
        )

    async def memories_without_vectors(self, model: str, limit: int = 500) -> list[Memory]:
        def run(conn: sqlite3.Connection) -> list[Memory]:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM memories m WHERE NOT EXISTS (SELECT 1 FROM memory_vectors v "
                "WHERE v.memory_rowid = m.memory_rowid AND v.model = ?) ORDER BY m.memory_rowid LIMIT ?",
                (model, limit),
            ).fetchall()
            return [_memory(r) for r in rows]

        return await self._db.read(run)

    async def put_vectors(self, memory_id: str, vectors: StoredVectors) -> None:
        def run(conn: sqlite3.Connection) -> None:
            row = conn.execute("SELECT memory_rowid FROM memories WHERE memory_id = ?", (memory_id,)).fetchone()
            if row is None:
                raise NotFoundError("memory", memory_id)
            self._put_vectors(conn, row[0], vectors, keep_other_models=True)
            _bump(conn)

        await self._db.write(run)

    async def stats(self, scopes: Sequence[str] | None) -> MemoryStats:
        clause, params = _scope_clause(scopes)

        def run(conn: sqlite3.Connection) -> MemoryStats:
            def grouped(column: str) -> dict[str, int]:
                return dict(
                    conn.execute(
                        f"SELECT m.{column}, count(*) FROM memories m WHERE m.invalidated_at IS NULL{clause} "
                        f"GROUP BY m.{column} ORDER BY m.{column}",
                        params,
                    ).fetchall()
                )

            total, current = conn.execute(
                f"SELECT count(*), count(*) FILTER (WHERE m.invalidated_at IS NULL) FROM memories m WHERE 1{clause}",
                params,
            ).fetchone()
            vectors = conn.execute(
                f"SELECT count(*) FROM memory_vectors v JOIN memories m ON m.memory_rowid = v.memory_rowid "
                f"WHERE 1{clause}",
                params,
            ).fetchone()[0]
            cached = conn.execute("SELECT count(*) FROM embedding_cache").fetchone()[0]
            return MemoryStats(
                total=total,
                current=current,
                superseded=total - current,
                by_category=grouped("category"),
                by_tier=grouped("tier"),
                by_scope=grouped("scope"),
                vectors=vectors,
                cached_embeddings=cached,
            )

        return await self._db.read(run)

    # ------------------------------------------------------------ embedding cache

    async def cached_embeddings(self, hashes: Sequence[str], model: str) -> dict[str, bytes]:
        def run(conn: sqlite3.Connection) -> dict[str, bytes]:
            found: dict[str, bytes] = {}
            for part in chunks(list(dict.fromkeys(hashes))):
                rows = conn.execute(
                    f"SELECT content_hash, vector FROM embedding_cache WHERE model = ? "
                    f"AND content_hash IN ({','.join('?' * len(part))})",
                    (model, *part),
                ).fetchall()
                found.update((r[0], r[1]) for r in rows)
            return found

        return await self._db.read(run)

    async def cache_embeddings(self, items: Mapping[str, bytes], model: str, *, now: datetime) -> None:
        if not items:
            return
        stamp = format_timestamp(now)

        def run(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "INSERT OR IGNORE INTO embedding_cache (content_hash, model, dim, vector, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                [(h, model, len(v) // 4, v, stamp) for h, v in items.items()],
            )

        await self._db.write(run)

    # ------------------------------------------------------------------ access

    async def grants(self) -> dict[str, list[str]]:
        def run(conn: sqlite3.Connection) -> dict[str, list[str]]:
            out: dict[str, list[str]] = {}
            for agent, scope in conn.execute("SELECT agent_id, scope FROM memory_access ORDER BY agent_id, scope"):
                out.setdefault(agent, []).append(scope)
            return out

        return await self._db.read(run)

    async def grant(self, agent_id: str, scopes: Iterable[str], *, now: datetime) -> None:
        stamp = format_timestamp(now)
        rows = [(agent_id, s, stamp) for s in scopes]

        def run(conn: sqlite3.Connection) -> None:
            conn.executemany("INSERT OR IGNORE INTO memory_access (agent_id, scope, granted_at) VALUES (?, ?, ?)", rows)
            _bump(conn)

        await self._db.write(run)

    async def revoke(self, agent_id: str, scopes: Iterable[str]) -> int:
        rows = [(agent_id, s) for s in scopes]

        def run(conn: sqlite3.Connection) -> int:
            removed = sum(
                conn.execute("DELETE FROM memory_access WHERE agent_id = ? AND scope = ?", r).rowcount for r in rows
            )
            _bump(conn)
            return removed

        return await self._db.write(run)

    # ------------------------------------------------------------------ mining record

    async def claim_messages(self, message_ids: Sequence[int], when: datetime) -> list[int]:
        ids = list(dict.fromkeys(message_ids))
        stamp = format_timestamp(when)

        def run(conn: sqlite3.Connection) -> set[int]:
            claimed: set[int] = set()
            for part in chunks(ids):
                marks = ",".join("?" * len(part))
                rows = conn.execute(
                    "INSERT OR IGNORE INTO memory_mined (message_id, conversation_id, mined_at) "
                    f"SELECT message_id, conversation_id, ? FROM messages WHERE message_id IN ({marks}) "
                    "RETURNING message_id",
                    (stamp, *part),
                ).fetchall()
                claimed.update(int(r[0]) for r in rows)
            return claimed

        claimed = await self._db.write(run) if ids else set()
        return [i for i in ids if i in claimed]

    async def release_messages(self, message_ids: Sequence[int]) -> None:
        ids = list(dict.fromkeys(message_ids))

        def run(conn: sqlite3.Connection) -> None:
            for part in chunks(ids):
                conn.execute(f"DELETE FROM memory_mined WHERE message_id IN ({','.join('?' * len(part))})", part)

        if ids:
            await self._db.write(run)

    async def unmined_messages(self, agent_id: str, *, after: int = 0, limit: int = 200) -> tuple[list[int], int]:
        def run(conn: sqlite3.Connection) -> tuple[list[int], int]:
            newest = int(conn.execute("SELECT coalesce(max(message_id), 0) FROM messages").fetchone()[0])
            rows = conn.execute(  # read up to ``newest`` only: a message stored meanwhile is after the cursor
                "SELECT m.message_id FROM messages m JOIN conversations c USING (conversation_id) "
                "WHERE m.message_id > ? AND m.message_id <= ? AND c.agent_id = ? AND NOT EXISTS "
                "(SELECT 1 FROM memory_mined d WHERE d.message_id = m.message_id) ORDER BY m.message_id LIMIT ?",
                (after, newest, agent_id, limit),
            ).fetchall()
            found = [int(r[0]) for r in rows]
            return found, found[-1] if len(found) == limit else max(after, newest)

        return await self._db.read(run)
