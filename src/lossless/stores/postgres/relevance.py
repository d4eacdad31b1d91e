"""BM25 relevance on PostgreSQL: the score of a word search's rows, computed in SQL over their ``tsvector``.

:mod:`lossless.stores.postgres.retrieval` ranks a ``sort="relevance"`` word search with
:func:`ranked_sql`, made of :func:`weights_sql`, a one-row query of each term's IDF and the
average length (a ``MATERIALIZED`` CTE named ``weights`` in the search statement), and
:func:`bm25_sql`, each matching row's score from them.  SQLite ranks the same searches with FTS5's ``bm25``.

Invariants:

* **BM25 as FTS5 computes it**: per term ``idf × tf·(k1 + 1) / (tf + K)``, ``K = k1·(1 − b + b·length
  / average length)``, k1 = 1.2, b = 0.75; a term a row lacks adds 0; only the order matters to
  callers (``rank`` is the negated score; hybrid scales scores to the best one's).
* **The statistics are the table's**, as FTS5 keeps them for its whole index, so a conversation's
  order never depends on which other conversations are searched with it (counts within the
  searched conversations measured worse on the recall dev split: docs/postgres.md).
* **No query scans the table for them**: each count is bounded (:data:`DF_CAP`, :data:`TOTAL_CAP`,
  :data:`AVGDL_SAMPLE`) and answered from an index or the planner's statistics; the weights are
  computed in the search statement itself (no extra round trip), about 1–2 ms of server time.
* **Counted once, then cached**: the statement returns the counts it used (:data:`COUNTED_COLUMNS`)
  and the store keeps them (:mod:`lossless.stores.postgres.term_stats`); a later statement gets them
  as bound values and reads the table's newest key itself, so the store can tell whether the table
  grew beyond the cache's bound since the count (then the rows are not used: the search is sent
  again, counting).
* **The weights never depend on the indexer's progress**: a message not indexed yet is counted and
  measured by its word index computed in the query, as the search finds it.
* **Bounded any-word searches return exactly what scoring every match returns** (:func:`bound_sql`):
  a search for any of 2 to :data:`BOUND_TERMS` one-lexeme terms whose counts are cached, over
  conversations of :data:`BOUND_ROWS` rows or more, reads its matches in levels by their rarest
  term and skips, by BM25's upper bound per term (``(k1 + 1) × idf``), the rows and levels that
  cannot reach the page: the same rows, scores and order (ties newest first), pages included.
  Such a statement also says whether its conversations were that wide (:func:`read_wide`), so
  that the store sends the next search of narrow ones unbounded (cheaper to plan).
* No user text becomes SQL: terms are bound ``tsquery`` values, lexemes bound text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from lossless.stores.postgres.schema import TSV
from lossless.stores.postgres.term_stats import Counted, Known

__all__ = [
    "AVGDL_SAMPLE",
    "BM25_B",
    "BM25_K1",
    "BOUND_LEVELS",
    "BOUND_ROWS",
    "BOUND_TERMS",
    "COUNTED_COLUMNS",
    "DF_CAP",
    "NARROW_KEPT",
    "NARROW_S",
    "TOTAL_CAP",
    "NarrowScopes",
    "bm25_sql",
    "bound_sql",
    "ranked_sql",
    "read_counted",
    "read_wide",
    "weights_sql",
]

#: A message's word index computed from its text, for rows the indexer has not reached yet.
_TSV_OF_TEXT = TSV.replace("content", "t.content")

#: BM25's term-frequency saturation and length normalisation (FTS5's and Lucene's defaults).
BM25_K1, BM25_B = 1.2, 0.75
#: A term's rows are counted up to this many (a commoner term weighs as if it were in this many).
DF_CAP = 500
#: Tables of up to this many rows are counted exactly (up to :data:`DF_CAP` rows a term); in larger
#: ones the planner's statistics stand for the rows (``pg_class.reltuples``) and for the common words.
TOTAL_CAP = 10_000
#: The oldest rows whose word-index lengths give the average length of the length normalisation.
AVGDL_SAMPLE = 500

#: A bounded any-word search ranks at most this many terms (a question with more scores every match).
BOUND_TERMS = 8
#: The rarest terms that each make a level of their own in a bounded search (see :func:`bound_sql`).
BOUND_LEVELS = 3
#: A search is bounded only where the conversations searched hold at least this many rows.
BOUND_ROWS = 5_000
#: The relative margin by which the score bounds are widened (floating-point rounding never drops a row).
_SLACK = 1e-9

#: The columns of the ``weights`` row a relevance search appends to each of its rows (see :func:`read_counted`).
COUNTED_COLUMNS = ("n", "total", "avgdl", "edge", "fresh")

#: A ``tsquery`` of one lexeme, neither a prefix nor a phrase (``'word'``), as ``::text`` writes it.
_ONE_LEXEME = re.compile(r"'((?:[^']|'')*)'")


def _lexeme(term: str) -> str | None:
    """The lexeme of a one-lexeme ``tsquery`` text, else None."""
    match = _ONE_LEXEME.fullmatch(term)
    return None if match is None else match.group(1).replace("''", "'")


def weights_sql(table: str, terms: Sequence[str], known: Known | None = None) -> tuple[str, list[Any]]:
    """The one row of BM25 weights for ``terms`` (``tsquery`` texts): their IDFs and the average length.

    Columns ``q`` (the terms, ``tsquery[]``), ``idf`` (``float8[]``, in the same order), ``avgdl``,
    then what they were computed from (:data:`COUNTED_COLUMNS`, read back into the store's
    :class:`~lossless.stores.postgres.term_stats.TermStatistics`): ``n`` (each term's rows),
    ``total`` (``N``), ``edge`` (the table's newest key, 0 when empty) and ``fresh`` (whether
    ``known`` was used).  The statistics are the table's, as FTS5's ``bm25`` takes them from its
    whole index, and none reads more than a bounded number of rows:

    * ``N``, the rows: counted (up to :data:`TOTAL_CAP`) while the planner's estimate
      (``pg_class.reltuples``) is below :data:`TOTAL_CAP`, the estimate above;
    * ``n``, a term's rows: in a table estimated above :data:`TOTAL_CAP`, a word among the
      column's most common lexemes in the planner's statistics (``pg_stats.most_common_elems``,
      kept by ``ANALYZE``/autovacuum) takes its frequency there times ``N``; any other term is
      counted up to :data:`DF_CAP` rows (``LIMIT`` stops the count; through the GIN index for a
      rare word), plus, for messages, those the indexer has not reached (``messages_unindexed_idx``,
      their word index computed, so the weights never depend on the indexer's progress);
    * the average length: that of the :data:`AVGDL_SAMPLE` oldest rows (primary key order).

    With ``known`` (values counted by an earlier statement), the statement takes ``N``, the average
    length and the terms' counts it holds as bound values and counts only the terms it lacks (a
    statement with every count known reads and plans no statistics at all); ``fresh`` is then
    whether the table's newest key is at most ``known.limit``, and a caller must not use the rows
    of a statement that says it is not (the store sends it again without ``known``).

    The IDF is BM25's, never negative: ``ln(1 + (N - n + 0.5) / (n + 0.5))``.
    """

    def bounded(condition: str, cap: int) -> str:
        return f"(SELECT count(*) FROM (SELECT 1 FROM {table} t WHERE {condition} LIMIT {cap:d}) c)"

    counted = bounded("t.content_tsv @@ %s::tsquery", DF_CAP)
    vector = "t.content_tsv"
    if table == "messages":
        counted += " + " + bounded(f"t.content_tsv IS NULL AND {_TSV_OF_TEXT} @@ %s::tsquery", DF_CAP)
        vector = f"coalesce(t.content_tsv, {_TSV_OF_TEXT})"
    lexemes = [_lexeme(term) for term in terms]
    known_counts = [None] * len(terms) if known is None else list(known.counts)
    params: list[Any] = [list(terms)]
    counts = []
    for term, lexeme, count in zip(terms, lexemes, known_counts, strict=True):
        if count is None:
            counts.append(f"coalesce((r.common ->> %s)::float8 * r.rows, {counted})")
            params += [lexeme, *[term] * counted.count("%s")]
        else:
            counts.append("%s::float8")
            params.append(count)
    key = "message_id" if table == "messages" else "summary_rowid"
    total = f"greatest(1, CASE WHEN r.big THEN r.rows ELSE {bounded('true', TOTAL_CAP)} END)::float8"
    avgdl = (
        f"coalesce(nullif((SELECT avg(length(c.v)) FROM (SELECT {vector} AS v FROM {table} t "
        f"ORDER BY t.{key} LIMIT {AVGDL_SAMPLE:d}) c), 0), 1)::float8"
    )
    fresh = "false"
    if known is not None:
        total = avgdl = "%s::float8"
        params += [known.total, known.avgdl]
        fresh = "r0.edge <= %s::bigint"
        params.append(known.limit)
    # The planner's most common lexemes of the column with their frequencies, for the lexemes of the
    # terms counted here only (none: not read, nor planned).
    unknown = [lexeme for lexeme, count in zip(lexemes, known_counts, strict=True) if count is None]
    common = "NULL::jsonb"
    if unknown:
        common = (
            "CASE WHEN r0.big THEN (SELECT jsonb_object_agg(e.lexeme, e.freq) FROM pg_stats p, "
            "unnest(p.most_common_elems::text::text[], p.most_common_elem_freqs) AS e(lexeme, freq) "
            "WHERE (p.schemaname, p.tablename) = (SELECT n.nspname, r0.relname FROM pg_namespace n "
            "WHERE n.oid = r0.ns) AND p.attname = 'content_tsv' AND e.lexeme = ANY(%s::text[])) END"
        )
        params.append([lexeme for lexeme in unknown if lexeme is not None])
    sql = (
        "SELECT s.q, ARRAY(SELECT ln(1 + (s.total - least(u.n, s.total) + 0.5) / (least(u.n, s.total) + 0.5)) "
        "FROM unnest(s.n) WITH ORDINALITY AS u(n, i) ORDER BY u.i) AS idf, s.avgdl, s.n, s.total, s.edge, s.fresh "
        "FROM (SELECT %s::tsquery[] AS q, "
        f"ARRAY[{', '.join(counts)}]::float8[] AS n, {total} AS total, {avgdl} AS avgdl, r.edge, r.fresh "
        f"FROM (SELECT r0.rows, r0.big, r0.edge, {fresh} AS fresh, {common} AS common "
        f"FROM (SELECT c.reltuples::float8 AS rows, c.reltuples >= {TOTAL_CAP:d} AS big, c.relname, "
        f"c.relnamespace AS ns, coalesce((SELECT max(t.{key}) FROM {table} t), 0) AS edge "
        f"FROM pg_class c WHERE c.oid = '{table}'::regclass OFFSET 0) r0 OFFSET 0) r OFFSET 0) s"
    )
    return sql, params


def ranked_sql(
    table: str,
    key: str,
    columns: str,
    clauses: list[str],
    params: list[Any],
    arms: list[tuple[str | None, list[Any], str]],
    terms: list[str],
    limit: int,
    offset: int,
    known: Known | None = None,
    *,
    bare: tuple[str, list[Any]] | None = None,
    bounded: bool = True,
) -> tuple[str, list[Any]]:
    """A relevance search's statement: each arm's rows by BM25 over ``terms`` (distinct ``tsquery`` texts).

    ``columns`` (eight) of ``table``'s rows ``t`` that meet ``clauses`` (with ``params``) and one arm's
    condition (the arms: ``lossless.stores.postgres.retrieval``), then the score; best first, ties
    newest first (``key``), ``limit`` rows from ``offset``.  A query without a ``tsquery`` term (stop
    words only, matched by regular expression) ranks every match 0.  With terms, each row ends with
    the statistics its weights came from (:data:`COUNTED_COLUMNS`), computed or taken from ``known``
    (see :func:`weights_sql`); when no row matches, one row of NULLs carries them.
    """
    selects = []
    sql_params: list[Any] = []
    bound: tuple[str, list[Any]] | None = None
    rarity = _rarity(terms, known) if bounded and bare is not None else None
    for arm, arm_params, vector in arms:
        # With several terms, the row's word index is read once (decompressed, or computed for a row
        # not indexed yet) rather than once per term.
        once = len(terms) > 1
        rank_sql = bm25_sql("d.v" if once else vector, len(terms)) if terms else "0::float8"
        lateral = f" CROSS JOIN LATERAL (SELECT {vector} || ''::tsvector AS v OFFSET 0) d" if once else ""
        where = " AND ".join([*clauses, *([arm] if arm else [])])
        where_params = [*params, *arm_params]
        if rarity is not None and bare is not None and bound is None and vector == "t.content_tsv":
            # The indexed rows (one arm per statement) are bounded (bound_sql) where the rows searched
            # are BOUND_ROWS or more ("wide"), else scored as without a bound (this arm, then).
            scope = (
                f"scope AS MATERIALIZED (SELECT count(*) >= {BOUND_ROWS:d} AS wide FROM (SELECT 1 FROM {table} t "
                f"WHERE {' AND '.join(clauses) or 'true'} LIMIT {BOUND_ROWS:d}) c)"
            )
            ctes, cte_params, rows_sql = bound_sql(
                f"{table} t{lateral}",
                columns,
                key,
                rank_sql,
                " AND ".join([*clauses, bare[0], "(SELECT s.wide FROM scope s)"]),
                [*params, *bare[1]],
                terms,
                rarity,
                offset + limit,
            )
            bound = (f"{scope}, {ctes}", [*params, *cte_params])
            selects.append(rows_sql)
            where += " AND NOT (SELECT s.wide FROM scope s)"
        selects.append(
            f"(SELECT {columns}, {rank_sql} AS score FROM {table} t{lateral} WHERE {where} "
            f"ORDER BY score DESC, t.{key} DESC LIMIT %s)"
        )
        sql_params += [*where_params, offset + limit]
    union = " UNION ALL ".join(selects)
    if not terms:
        return f"SELECT * FROM ({union}) u ORDER BY 9 DESC, 1 DESC LIMIT %s OFFSET %s", [*sql_params, limit, offset]
    weights, weight_params = weights_sql(table, terms, known)
    # The weights' row comes back even when nothing matches (one row of NULLs, then), so that the
    # store learns the counts of every search; the page's own order is kept by the outer ORDER BY.
    counted = ", ".join(f"w.{c}" for c in COUNTED_COLUMNS)
    ctes, cte_params = "", []
    if bound is not None:
        ctes, cte_params = ", " + bound[0], bound[1]
        counted = f"(SELECT s.wide FROM scope s) AS wide, {counted}"  # see read_wide
    sql = (
        f"WITH weights AS MATERIALIZED ({weights}){ctes} SELECT u.*, {counted} FROM weights w LEFT JOIN "
        f"(SELECT * FROM ({union}) p ORDER BY 9 DESC, 1 DESC LIMIT %s OFFSET %s) u ON true ORDER BY 9 DESC, 1 DESC"
    )
    return sql, [*weight_params, *cte_params, *sql_params, limit, offset]


def _rarity(terms: Sequence[str], known: Known | None) -> list[int] | None:
    """The terms' indexes, rarest first (fewest rows; ties in query order), if a search of them is bounded.

    It is when there are 2 to :data:`BOUND_TERMS` terms, each one lexeme (for a phrase or a prefix,
    ``@@`` and ``ts_rank_cd`` could disagree on whether a row holds it), every count is known (the
    store's cache: the order needs them) and the table holds :data:`BOUND_ROWS` rows or more.
    """
    if not 2 <= len(terms) <= BOUND_TERMS or any(_lexeme(term) is None for term in terms):
        return None
    if known is None or known.total < BOUND_ROWS or any(count is None for count in known.counts):
        return None
    counts = [float(count or 0) for count in known.counts]
    return sorted(range(len(counts)), key=lambda i: (counts[i], i))


def bound_sql(
    source: str,
    columns: str,
    key: str,
    rank_sql: str,
    where: str,
    params: list[Any],
    terms: list[str],
    rarity: Sequence[int],
    k: int,
) -> tuple[str, list[Any], str]:
    """A bounded any-word arm: its CTEs (``lvl1``, ``floor2``, ``lvl2``, …) and its rows' statement.

    ``source`` and ``where`` (with ``params``) are the arm's rows (word condition: any of ``terms``,
    two or more), ``columns`` and ``rank_sql`` what each row gives, ``rarity`` the terms' indexes,
    rarest first (from their counts), ``k`` the rows the page needs (offset + limit).

    The rows are split into levels, each row in exactly one: level ``i`` (up to :data:`BOUND_LEVELS`)
    holds the rows with the ``i``-th rarest term and none rarer; the last level, the rows with none
    of those.  Each level keeps its best ``k`` rows, so the best ``k`` of all the levels are the
    arm's best ``k``.  A term adds less than ``(k1 + 1) × idf`` to any row's score (its *bound*), so
    once the levels before hold ``k`` rows, the ``k``-th best of them (the *floor*) is at most the
    arm's ``k``-th best score and a row whose terms' bounds add up to no more than the floor cannot
    reach the page: a level none of whose rows can is not read at all (its terms' bounds add up to
    no more), and a level that is read scores only the rows that hold a set of terms whose bounds
    add up to more (the OR of the minimal such sets, a ``tsquery`` made in the statement).
    """
    m = len(terms)
    order = list(rarity)
    levels = min(m - 1, BOUND_LEVELS)
    upper = f"{BM25_K1 + 1!r} * {1 + _SLACK!r}"
    ctes: list[str] = []
    cte_params: list[Any] = []
    for level in range(levels + 1):
        # The level's own term (none for the last level), the rarer terms it excludes, the terms its rows may hold.
        own = order[level] if level < levels else None
        rarer = order[:level]
        allowed = order[level:]
        condition = (
            "t.content_tsv @@ %s::tsquery"
            if own is not None
            else ("t.content_tsv @@ (" + " || ".join(["%s::tsquery"] * len(allowed)) + ")")
        )
        condition_params = [terms[own]] if own is not None else [terms[i] for i in allowed]
        if rarer:
            condition += " AND NOT t.content_tsv @@ (" + " || ".join(["%s::tsquery"] * len(rarer)) + ")"
            condition_params += [terms[i] for i in rarer]
        gate = ""
        if level:
            # The floor: the k-th best score of the levels before (NULL while they hold fewer than k rows).
            before = " UNION ALL ".join(f"SELECT score FROM lvl{i}" for i in range(1, level + 1))
            indexes = "ARRAY[" + ", ".join(str(i + 1) for i in allowed) + "]"
            required = f"bool_or(g.i = {own + 1:d}) AND " if own is not None else ""
            others = f" FILTER (WHERE g.i <> {own + 1:d})" if own is not None else ""
            sets = (
                "SELECT string_agg(x.c, ' | ')::tsquery FROM "
                "(SELECT string_agg('(' || w.q[g.i]::text || ')', ' & ') AS c "
                f"FROM weights w, generate_series(1, {(1 << len(allowed)) - 1:d}) AS s(mask), "
                f"unnest({indexes}) WITH ORDINALITY AS g(i, bit) WHERE s.mask & (1 << (g.bit::int - 1)) <> 0 "
                f"GROUP BY s.mask HAVING {required}{upper} * sum(w.idf[g.i]) > f.floor AND coalesce("
                f"{upper} * (sum(w.idf[g.i]) - min(w.idf[g.i]){others}) <= f.floor + {_SLACK!r} * "
                f"(f.floor + {upper} * sum(w.idf[g.i])), true)) x"
            )
            # ``open``: whether any row of the level can reach the page; ``q``: the rows that can (with
            # no floor yet, any of the level's terms).
            ctes.append(
                f"floor{level + 1} AS MATERIALIZED (SELECT f.floor IS NULL OR "
                f"{upper} * (SELECT sum(w.idf[a]) FROM weights w, unnest({indexes}) AS a) > f.floor AS open, "
                f"CASE WHEN f.floor IS NOT NULL THEN ({sets}) ELSE (SELECT string_agg('(' || w.q[a]::text || ')', "
                f"' | ')::tsquery FROM weights w, unnest({indexes}) AS a) END AS q FROM (SELECT (SELECT y.score "
                f"FROM ({before}) y ORDER BY 1 DESC OFFSET {k - 1:d} LIMIT 1) AS floor) f)"
            )
            # A condition the word index answers (the planner takes its value for a selective one).
            gate = (
                f" AND (SELECT f.open FROM floor{level + 1} f) "
                f"AND t.content_tsv @@ (SELECT f.q FROM floor{level + 1} f)"
            )
        ctes.append(
            f"lvl{level + 1} AS MATERIALIZED (SELECT {columns}, {rank_sql} AS score FROM {source} WHERE {where} "
            f"AND {condition}{gate} ORDER BY score DESC, t.{key} DESC LIMIT {k:d})"
        )
        cte_params += [*params, *condition_params]
    rows = " UNION ALL ".join(f"(SELECT * FROM lvl{i})" for i in range(1, levels + 2))
    return ", ".join(ctes), cte_params, rows


#: How long a set of conversations a bounded search found narrow is searched unbounded (seconds): a
#: conversation that grows past :data:`BOUND_ROWS` is bounded again after at most this long (the
#: rows and order are the same either way; only the cost differs).
NARROW_S = 300.0
#: Sets of conversations remembered as narrow, at most (all forgotten when full).
NARROW_KEPT = 1024


class NarrowScopes:
    """The sets of conversations (keys: table, conversations, time window) bounded searches found narrow.

    A set is narrow when it holds fewer than :data:`BOUND_ROWS` rows (:func:`read_wide`): its
    searches then cost less without levels, which still cost planning.  Per store, like its
    :class:`~lossless.stores.postgres.term_stats.TermStatistics`; ``now`` is that cache's clock.
    """

    def __init__(self) -> None:
        self._found: dict[tuple[Any, ...], float] = {}

    def holds(self, key: tuple[Any, ...], now: float) -> bool:
        """Whether ``key`` was found narrow in the last :data:`NARROW_S` seconds."""
        found = self._found.get(key)
        return found is not None and now - found <= NARROW_S

    def learn(self, key: tuple[Any, ...], narrow: bool, now: float) -> None:
        """Keep what a bounded search of ``key`` found (a wide one is forgotten as narrow)."""
        if not narrow:
            self._found.pop(key, None)
            return
        if len(self._found) >= NARROW_KEPT and key not in self._found:
            self._found.clear()
        self._found[key] = now


def read_wide(row: Sequence[Any]) -> bool | None:
    """Whether a bounded search's conversations held :data:`BOUND_ROWS` rows or more; None: not bounded.

    A bounded statement's rows hold that flag just before the :data:`COUNTED_COLUMNS` (nine columns
    of the row itself come first).
    """
    if len(row) != 9 + 1 + len(COUNTED_COLUMNS):
        return None
    return bool(row[-len(COUNTED_COLUMNS) - 1])


def read_counted(row: Sequence[Any]) -> Counted:
    """The :data:`COUNTED_COLUMNS` at the end of a relevance search's row, as a :class:`Counted`."""
    n, total, avgdl, edge, fresh = row[-len(COUNTED_COLUMNS) :]
    return Counted(tuple(float(x) for x in n), float(total), float(avgdl), int(edge), bool(fresh))


def bm25_sql(vector: str, terms: int) -> str:
    """A row's BM25 score from its word index ``vector`` and the ``weights`` row of :func:`weights_sql`.

    Per term, ``idf × tf·(k1 + 1) / (tf + K)`` with ``K = k1·(1 − b + b·length / average length)``,
    written ``idf·(k1 + 1)·(1 − K / (tf + K))`` so that ``tf`` (the term's occurrences, or a
    phrase's: ``ts_rank_cd`` with unit weights and no normalisation counts them) is computed once;
    a term the row lacks adds 0.  ``length`` is the number of distinct lexemes of the row.  Each
    weight is a scalar subquery of the one-row ``weights`` (evaluated once per statement, then a
    constant to every row).
    """
    k = f"{BM25_K1!r} * ({1 - BM25_B!r} + {BM25_B!r} * length({vector}) / (SELECT avgdl FROM weights))"
    parts = [
        f"(SELECT idf[{i:d}] FROM weights) * (1 - ({k}) / "
        f"(ts_rank_cd('{{1,1,1,1}}'::float4[], {vector}, (SELECT q[{i:d}] FROM weights), 0) + {k}))"
        for i in range(1, terms + 1)
    ]
    return f"({BM25_K1 + 1!r} * ({' + '.join(parts)}))"
