"""Keyword search over long-term memories on PostgreSQL: BM25 over the word index, trigrams for CJK.

A mixin of :class:`~lossless.stores.postgres.memory.PostgresMemoryStore` (kept apart to hold that
module's size); the rules it follows — no user text as SQL, FTS5's BM25, SQLite's CJK rules — are
in that module's docstring.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from lossless.memory.ports import KeywordHit
from lossless.stores.postgres.connection import Connection, Database
from lossless.stores.postgres.schema import MEMORY_TRGM_TEXT
from lossless.stores.postgres.statements import id_array, text_array
from lossless.text import STOP_WORDS
from lossless.text import keyword_terms as fts_terms

__all__ = ["KeywordSearch", "fetchall", "fetchone", "scope_clause"]

_MAX_TERMS = 32
#: Document frequencies are counted up to this many memories (a commoner term's IDF is near 0 anyway).
_DF_CAP = 5000
#: Memories scored by BM25 per query (the best by ``ts_rank`` / the newest substring matches).
_SCORED_CAP = 500
#: Newest memories whose lengths give the average document length of BM25.
_AVGDL_SAMPLE = 1000
_K1, _B = 1.2, 0.75
_COLUMN_WEIGHTS = (("A", 2.0), ("B", 1.0), ("C", 1.0))  # abstract, overview, content


def _grams(run: str, n: int) -> list[str]:
    if len(run) <= n:
        return [run]
    return [run[i : i + n] for i in range(len(run) - n + 1)]


def _like_pattern(text: str) -> str:
    """``%text%`` for ``ILIKE`` with the pattern characters of ``text`` escaped (backslash is the escape)."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _idf(total: int, hits: int) -> float:
    """FTS5's IDF: ``ln((N - n + 0.5) / (n + 0.5))``, at least 1e-6."""
    idf = math.log((total - hits + 0.5) / (hits + 0.5)) if total > 0 else 0.0
    return idf if idf > 0 else 1e-6


def _frequency(weights: dict[str, str], lexemes: Sequence[str]) -> float:
    """A word's weighted frequency in one memory: per column, the fewest positions of any of its lexemes
    (``weights``: lexeme → one weight letter per position), times the column's weight."""
    if len(lexemes) == 1:  # most words: one lexeme, often absent (the same sum, without the min)
        marks = weights.get(lexemes[0])
        return 0.0 if marks is None else sum(weight * marks.count(col) for col, weight in _COLUMN_WEIGHTS)
    return sum(weight * min(weights.get(lex, "").count(col) for lex in lexemes) for col, weight in _COLUMN_WEIGHTS)


def _bm25(idfs: Sequence[float], freqs: Sequence[float], length: float, average: float) -> float:
    """FTS5's ``bm25()``: per term, IDF × weighted frequency saturated by k1 and normalised by length."""
    norm = _K1 * (1 - _B + _B * (length / average if average > 0 else 1.0))
    return sum(idf * (f * (_K1 + 1)) / (f + norm) for idf, f in zip(idfs, freqs, strict=True) if f > 0)


async def fetchall(conn: Connection, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    cursor = await conn.execute(sql, params)
    return await cursor.fetchall()


async def fetchone(conn: Connection, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
    cursor = await conn.execute(sql, params)
    return await cursor.fetchone()


def scope_clause(scopes: Sequence[str] | None) -> tuple[str, list[Any]]:
    """The ``AND …`` that keeps rows of ``memories m`` to ``scopes`` (``None``: every scope), with its params."""
    if scopes is None:
        return "", []
    if not scopes:
        return " AND false", []
    return " AND m.scope = ANY(%s::text[])", [text_array(scopes)]


class KeywordSearch:
    _db: Database

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
        if (not words and not cjk) or limit < 1:
            return []
        clause, params = scope_clause(scopes)
        if conversations is not None:
            clause += " AND m.conversation_id = ANY(%s::bigint[])"
            params = [*params, id_array(dict.fromkeys(int(c) for c in conversations))]
        if not include_superseded:
            clause += " AND m.invalidated_at IS NULL"
        async with self._db.read() as conn:
            scores: dict[str, float] = {}
            if words:
                scores.update(await self._word_search(conn, words, clause, params, limit))
            if cjk:
                for key, value in (await self._cjk_search(conn, cjk, clause, params, limit, set(scores))).items():
                    scores[key] = max(scores.get(key, 0.0), value)
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        return [KeywordHit(memory_id, score) for memory_id, score in ranked]

    @staticmethod
    async def _corpus(conn: Connection) -> Callable[[], Awaitable[tuple[int, float]]]:
        """Sends the BM25 corpus statistics' query; the returned reader gives (memories, average length in
        bytes) — counted exactly up to 10,000, estimated above.  Sent inside a pipeline, it costs no round trip
        of its own."""
        cursor = await conn.execute(
            "SELECT CASE WHEN c.reltuples >= 10000 THEN c.reltuples::bigint "
            "ELSE (SELECT count(*) FROM memories) END, "
            "(SELECT avg(octet_length(s.abstract) + octet_length(s.overview) + octet_length(s.content)) "
            "FROM (SELECT abstract, overview, content FROM memories "
            f"ORDER BY memory_rowid DESC LIMIT {_AVGDL_SAMPLE}) s) "
            "FROM pg_class c WHERE c.oid = 'memories'::regclass"
        )

        async def read() -> tuple[int, float]:
            row = await cursor.fetchone()
            total = int(row[0]) if row and row[0] is not None else 0
            return total, float(row[1]) if row and row[1] is not None else 0.0

        return read

    async def _word_search(
        self, conn: Connection, words: list[str], clause: str, params: list[Any], limit: int
    ) -> dict[str, float]:
        # Stop words cost the most (they match everything) and tell the least; terms no memory
        # contains would make the AND query fail.  Drop both, then AND; OR only when AND finds nothing.
        # Two round trips: the terms' document frequencies with the corpus statistics (one pipeline),
        # then the AND query and, only where it matches nothing, the OR query (one statement).
        content_words = [w for w in words if w not in STOP_WORDS] or words
        async with conn.pipeline():
            terms = await conn.execute(
                "SELECT t.word, t.lexemes, CASE WHEN cardinality(t.lexemes) = 0 THEN 0 ELSE ("
                "SELECT count(*) FROM (SELECT 1 FROM memories m "
                "WHERE m.search_tsv @@ plainto_tsquery('english', t.word) "
                f"LIMIT {_DF_CAP}) s) END "
                "FROM (SELECT u.word, u.ordinal, "
                "ARRAY(SELECT lexeme FROM unnest(to_tsvector('english', u.word))) AS lexemes "
                "FROM unnest(%s::text[]) WITH ORDINALITY AS u(word, ordinal)) t ORDER BY t.ordinal",
                (text_array(content_words),),
            )
            corpus = await self._corpus(conn)
            rows = await terms.fetchall()
            total, average = await corpus()
        known = [(word, list(lexemes), int(df)) for word, lexemes, df in rows if df > 0]
        if not known:
            return {}
        idfs = [_idf(total, df) for _, _, df in known]
        lexemes = sorted({lexeme for _, lexs, _ in known for lexeme in lexs})
        single = "plainto_tsquery('english', %s)"
        word_params = [w for w, _, _ in known]

        def matching(operator: str) -> tuple[str, list[Any]]:
            tsquery = f" {operator} ".join([single] * len(known))
            sql = (
                "SELECT m.memory_id, octet_length(m.abstract) + octet_length(m.overview) + octet_length(m.content), "
                "ARRAY(SELECT u.lexeme || ':' || array_to_string(u.weights, '') FROM unnest(m.search_tsv) u "
                "WHERE u.lexeme = ANY(%s::text[])) "
                f"FROM memories m WHERE m.search_tsv @@ ({tsquery}){clause} "
                f"ORDER BY ts_rank('{{0.05, 0.5, 0.5, 1.0}}', m.search_tsv, ({tsquery})) DESC, m.memory_rowid DESC "
                "LIMIT %s"
            )
            return sql, [text_array(lexemes), *word_params, *params, *word_params, max(_SCORED_CAP, 5 * limit)]

        sql, query_params = matching("&&")
        if len(known) > 1:  # the OR query runs only when the AND query matched nothing (a one-time filter)
            either, either_params = matching("||")
            sql = (
                f"WITH anded AS MATERIALIZED ({sql}) SELECT * FROM anded "
                f"UNION ALL (SELECT * FROM ({either}) s WHERE NOT EXISTS (SELECT 1 FROM anded))"
            )
            query_params = [*query_params, *either_params]
        found = await fetchall(conn, sql, query_params)
        hits: dict[str, float] = {}
        for memory_id, length, postings in found:
            weights = dict(p.split(":", 1) for p in postings)
            freqs = [_frequency(weights, lexs) for _, lexs, _ in known]
            hits[memory_id] = _bm25(idfs, freqs, float(length), average)
        return dict(sorted(hits.items(), key=lambda kv: (-kv[1], kv[0]))[:limit])

    async def _cjk_search(
        self, conn: Connection, runs: list[str], clause: str, params: list[Any], limit: int, found: set[str]
    ) -> dict[str, float]:
        scores: dict[str, float] = {}
        grams = list(dict.fromkeys(g for run_ in runs for g in _grams(run_, 3) if len(g) == 3))[:_MAX_TERMS]
        if grams:
            patterns = [_like_pattern(g) for g in grams]
            rows = await fetchall(
                conn,
                "SELECT (SELECT count(*) FROM (SELECT 1 FROM memories m "
                f"WHERE {MEMORY_TRGM_TEXT} ILIKE t.pattern LIMIT {_DF_CAP}) s) "
                "FROM unnest(%s::text[]) WITH ORDINALITY AS t(pattern, ordinal) ORDER BY t.ordinal",
                (patterns,),
            )
            total, average = await (await self._corpus(conn))()
            idfs = [_idf(total, int(r[0])) for r in rows]
            counts = ", ".join(
                f"ARRAY(SELECT (octet_length(m.{col}) - octet_length(replace(m.{col}, g, ''))) / octet_length(g) "
                "FROM unnest(%s::text[]) WITH ORDINALITY AS t(g, ordinal) ORDER BY t.ordinal)"
                for col in ("abstract", "overview", "content")
            )
            matched = await fetchall(
                conn,
                f"SELECT m.memory_id, octet_length(m.abstract) + octet_length(m.overview) + octet_length(m.content), "
                f"{counts} FROM memories m WHERE {MEMORY_TRGM_TEXT} ILIKE ANY(%s){clause} "
                "ORDER BY m.memory_rowid DESC LIMIT %s",
                (grams, grams, grams, patterns, *params, _SCORED_CAP),
            )
            for memory_id, length, in_abstract, in_overview, in_content in matched:
                freqs = [2.0 * a + o + c for a, o, c in zip(in_abstract, in_overview, in_content, strict=True)]
                scores[memory_id] = _bm25(idfs, freqs, float(length), average)
        if len(found | set(scores)) < limit:
            # Words of one or two characters (most CJK words) are below the trigram index's
            # reach: score them by the share of query bigrams a memory holds.
            bigrams = list(dict.fromkeys(g for run_ in runs for g in _grams(run_, 2)))[:_MAX_TERMS]
            rows = await fetchall(
                conn,
                "SELECT s.memory_id, s.hits FROM (SELECT m.memory_id, m.memory_rowid, "
                "(SELECT count(*) FROM unnest(%s::text[]) g "
                "WHERE strpos(m.abstract || ' ' || m.content, g) > 0) AS hits "
                f"FROM memories m WHERE true{clause}) s WHERE s.hits > 0 "
                "ORDER BY s.hits DESC, s.memory_rowid DESC LIMIT %s",
                (bigrams, *params, limit),
            )
            for memory_id, hits in rows:
                scores[memory_id] = max(scores.get(memory_id, 0.0), 10.0 * hits / len(bigrams))
        return scores

    async def memory_ids_from(self, conversation_ids: Sequence[int]) -> set[str]:
        ids = list(dict.fromkeys(int(c) for c in conversation_ids))
        if not ids:
            return set()
        async with self._db.read() as conn:
            sql = "SELECT memory_id FROM memories WHERE conversation_id = ANY(%s::bigint[])"
            rows = await fetchall(conn, sql, (ids,))
        return {str(r[0]) for r in rows}
