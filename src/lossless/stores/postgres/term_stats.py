"""The BM25 statistics a PostgreSQL store has counted, kept for the searches after (one cache per store).

A relevance search (:mod:`lossless.stores.postgres.relevance`) weighs each query term by the
table's rows that hold it (``n``), the table's rows (``N``) and the average word-index length.
Counting them costs a few bounded index reads per term and statement; they change slowly, so each
:class:`~lossless.stores.postgres.store.PostgresStore` keeps what its searches counted in a
:class:`TermStatistics` and sends the known values as bound parameters next time.

Per store, not per module: counts belong to one database, and a process may hold stores of several
(tests, benchmarks, a server with more than one); the cache lives and dies with its store, as the
store's resolved terms (``_tsqueries``) and newest-id hint do.

Invariants:

* **Only the order can change, never the rows**: the statistics feed the ``weights`` row of the
  search statement, never its ``WHERE`` clause.  With values fresh within the bound below, a
  ranking is the one an uncached search of the same moment would give up to that staleness; with
  nothing changed since the count, it is exactly the same (the same numbers reach the same SQL).
* **How stale they may get** (whichever comes first ends a *generation* of counts, and the next
  search counts afresh):

  - **growth**: a generation is used only while the table's newest key (``max(message_id)`` /
    ``max(summary_rowid)``, read by the search statement itself, in its own snapshot, through the
    primary key) is at most :data:`GROWTH` × ``N`` above the newest key when ``N`` was counted;
    a statement that finds it above reports so, and its rows are not used: the store sends it
    again without the cached values (``RetrievalStatements._recount_stale``), which starts the
    next generation.
    Keys are never reused and grow with each row (a rolled-back insert also takes one), so at most
    10% more rows than ``N`` can have been added while a generation is used.  10% is the change
    at which PostgreSQL's autovacuum re-``ANALYZE``s a table by default
    (``autovacuum_analyze_scale_factor``): the common words' frequencies and, above 10,000 rows,
    ``N`` itself already come from those statistics, which lag by that much;
  - **age**: a generation is used for at most :data:`FRESH_S` seconds (this process's monotonic
    clock), which bounds what growth does not see: rows deleted by another host (retention,
    ``lcm prune``), a summary re-made in place (``lcm doctor --apply``), rows added with explicit
    keys below the newest.  The store's own deletions drop its cache at once
    (:meth:`TermStatistics.clear`).

  A term counted later in a generation is at least as fresh as the generation, so it joins it.
* **Bounded memory**: at most :data:`MAX_TERMS` terms per table (messages, summaries), the least
  recently used dropped first, none longer than :data:`MAX_TERM_CHARS` (a longer phrase is counted
  by each search): a few MB at most per store; a generation that ends drops its terms.
* **Safe under concurrency**: the store's tasks share one event loop and the cache changes only
  synchronously, between awaits.  A statement's counts are kept only if they are not older than
  the generation kept meanwhile (its newest key is at least the generation's), and counts of a
  generation that ended meanwhile are dropped, as are those of a statement sent more than
  :data:`FRESH_S` seconds before its result arrived (they would start a generation already too old
  and push out a live one).  Each host keeps its own cache of one shared
  database: nothing is shared but the database, so no host's counts can make another's wrong.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["FRESH_S", "GROWTH", "MAX_TERMS", "MAX_TERM_CHARS", "Counted", "Known", "TermStatistics"]

#: A generation of counts is used while the table grew by at most this share of its rows since.
GROWTH = 0.10
#: … and for at most this many seconds.
FRESH_S = 300.0
#: Terms kept per table (least recently used dropped first).
MAX_TERMS = 4096
#: Longer terms (``tsquery`` texts of long phrases) are never kept.
MAX_TERM_CHARS = 256


@dataclass(frozen=True, slots=True)
class Known:
    """What a search statement may use instead of counting: a generation's values for some terms.

    ``counts[i]`` is the ``n`` of the statement's ``i``-th term, or None (counted in the statement);
    ``limit`` the newest key up to which the table counts as unchanged (the statement recounts
    everything when its table's newest key is above it).
    """

    generation: int
    total: float
    avgdl: float
    limit: int
    counts: tuple[float | None, ...]


@dataclass(frozen=True, slots=True)
class Counted:
    """What a search statement used (its ``weights`` row): every term's ``n``, ``N``, the average length.

    ``edge``: the table's newest key in the statement's snapshot (0 when empty); ``fresh``: whether
    the statement used the :class:`Known` values it was given (else it counted everything).
    """

    counts: tuple[float, ...]
    total: float
    avgdl: float
    edge: int
    fresh: bool


@dataclass(slots=True)
class _Generation:
    number: int
    total: float
    avgdl: float
    edge: int
    counted_at: float
    terms: OrderedDict[str, float] = field(default_factory=OrderedDict)


class TermStatistics:
    """Per table, the current generation of BM25 counts (see the module docstring).

    ``clock`` (monotonic seconds), ``fresh_s``, ``growth`` and ``max_terms`` are parameters for
    tests and measurements; a ``fresh_s`` of 0 or less turns the cache off (every search counts).
    ``hits`` and ``misses`` count the terms found and not found by :meth:`known`.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        fresh_s: float = FRESH_S,
        growth: float = GROWTH,
        max_terms: int = MAX_TERMS,
    ) -> None:
        self.clock = clock
        self.fresh_s = fresh_s
        self.growth = growth
        self.max_terms = max_terms
        self.hits = 0
        self.misses = 0
        self._tables: dict[str, _Generation] = {}
        self._numbers = 0

    def known(self, table: str, terms: Sequence[str]) -> Known | None:
        """The current generation's values for ``terms`` of ``table``, or None (count everything)."""
        generation = self._current(table)
        if generation is None:
            self.misses += len(terms)
            return None
        counts: list[float | None] = []
        for term in terms:
            count = generation.terms.get(term)
            if count is None:
                self.misses += 1
            else:
                self.hits += 1
                generation.terms.move_to_end(term)
            counts.append(count)
        limit = generation.edge + int(self.growth * generation.total)
        return Known(generation.number, generation.total, generation.avgdl, limit, tuple(counts))

    def learn(self, table: str, terms: Sequence[str], known: Known | None, counted: Counted, asked_at: float) -> None:
        """Keep what a statement sent at ``asked_at`` (this clock) with ``known`` reported it used."""
        if self.fresh_s <= 0 or len(counted.counts) != len(terms):
            return
        if self.clock() - asked_at > self.fresh_s:
            # Sent longer ago than a generation may live: its counts would start one already too old,
            # which would push out a live generation (and let an older snapshot follow it).
            return
        current = self._current(table)
        if known is not None:
            # The statement used ``known``'s generation (not past its bound: else it was sent again
            # without it); what it counted joins the generation if that is still current.
            if counted.fresh and current is not None and current.number == known.generation:
                pairs = zip(terms, counted.counts, known.counts, strict=True)
                self._add(current, [(t, n) for t, n, k in pairs if k is None])
            return
        if current is not None and counted.edge < current.edge:
            return  # counted in an older snapshot than the generation kept meanwhile
        if current is not None and counted.edge == current.edge:
            self._add(current, list(zip(terms, counted.counts, strict=True)))  # the same table, as far as keys tell
            return
        self._numbers += 1
        generation = _Generation(self._numbers, counted.total, counted.avgdl, counted.edge, asked_at)
        self._tables[table] = generation
        self._add(generation, list(zip(terms, counted.counts, strict=True)))

    def clear(self) -> None:
        """Forget every count (the store deleted rows itself)."""
        self._tables.clear()

    def terms(self, table: str) -> dict[str, float]:
        """The terms of ``table``'s current generation and their counts (for inspection)."""
        generation = self._current(table)
        return {} if generation is None else dict(generation.terms)

    def _current(self, table: str) -> _Generation | None:
        generation = self._tables.get(table)
        if generation is None:
            return None
        if self.clock() - generation.counted_at > self.fresh_s:
            del self._tables[table]
            return None
        return generation

    def _add(self, generation: _Generation, pairs: list[tuple[str, float]]) -> None:
        for term, count in pairs:
            if len(term) > MAX_TERM_CHARS:
                continue
            generation.terms[term] = count
            generation.terms.move_to_end(term)
        while len(generation.terms) > max(0, self.max_terms):
            generation.terms.popitem(last=False)
