"""Retrieval on PostgreSQL: searches over ``tsvector`` and ``pg_trgm``, DAG lookups, delegation grants.

:class:`RetrievalStatements` is the part of :class:`~lossless.stores.postgres.store.PostgresStore`
that :mod:`lossless.stores.sqlite.retrieval` implements for SQLite, with the same observable
behaviour (the retrieval tests run against both backends).

Invariants:

* **Word queries** are parsed and made SQL by :mod:`lossless.stores.postgres.words`: no user text
  ever becomes SQL or ``tsquery`` syntax, terms match like the word index, and trigram pre-filters
  only ever over-approximate (the caller re-checks every row).
* **Pages as in SQLite.**  ``recency``: newest key first, strictly below ``below`` (a word search
  of messages looks among the newest :data:`RECENT_WINDOW` ids first, then, only if they held too
  few matches, among the older ones: the same rows as one search of all);
  ``relevance`` (word queries only): BM25 best first (ties newest first, so pages are stable), from
  ``offset``; ``rank`` is the negated score, so lower is better as with FTS5.
* **Relevance is BM25, as FTS5's** ``bm25`` **on SQLite** (:mod:`lossless.stores.postgres.relevance`):
  rare terms weigh more; the word counts are the table's, bounded per query and computed in the
  search statement itself (one round trip, as before), then kept per store for the next searches
  within a bound of staleness (:mod:`lossless.stores.postgres.term_stats`).  An any-word search
  scores only the rows that can reach its page (the same page as scoring every match).
  ``since`` is inclusive and ``before`` exclusive; a summary is in range when the time span it
  covers overlaps the window.  Everything committed before the call is found: PostgreSQL updates
  its indexes inside the writing transaction.
* **Grants are charged atomically**: one ``UPDATE … RETURNING`` adds to ``tokens_used`` (capped at
  ``token_cap``) only while the grant is unrevoked and unexpired, under the row lock that the
  update itself takes, so concurrent charges never lose one another.
* One transaction per call (:meth:`~lossless.stores.postgres.connection.Database.transaction`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from lossless.errors import InputError
from lossless.ports import ReachPages, SearchRequest, SearchRow
from lossless.records import Grant
from lossless.stores.postgres.connection import Database
from lossless.stores.postgres.relevance import NarrowScopes, ranked_sql, read_counted, read_wide
from lossless.stores.postgres.schema import TSV
from lossless.stores.postgres.statements import aware, chunks, grant_from_row, grant_params
from lossless.stores.postgres.term_stats import Known, TermStatistics
from lossless.stores.postgres.words import (
    WordTerm,
    fragment_regex,
    parse_trigrams,
    parse_words,
    resolve_terms,
    word_condition,
)
from lossless.stores.rows import GRANT_COLUMNS

__all__ = ["RECENT_WINDOW", "RetrievalStatements"]


# ---------------------------------------------------------------------- search


def _shape(scope: Literal["messages", "summaries"]) -> tuple[str, str, str, str, str]:
    """(table, key column, selected columns, time-from column, time-to column) for a scope."""
    if scope == "messages":
        return (
            "messages",
            "message_id",
            "t.message_id, t.message_id, t.conversation_id, t.created_at, t.content, t.role::text, NULL, NULL",
            "t.created_at",
            "t.created_at",
        )
    return (
        "summaries",
        "summary_rowid",
        "t.summary_rowid, t.summary_id, t.conversation_id, coalesce(t.latest_at, t.created_at), t.content, "
        "NULL, t.kind::text, t.depth",
        "coalesce(t.latest_at, t.created_at)",
        "coalesce(t.earliest_at, t.created_at)",
    )


def like_escape(text: str) -> str:
    """``text`` as a LIKE pattern that matches exactly it (``\\`` is LIKE's default escape)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _row(scope: Literal["messages", "summaries"], values: Sequence[Any], rank: float | None) -> SearchRow:
    return SearchRow(
        scope=scope,
        key=int(values[0]),
        ref=values[1],
        conversation_id=int(values[2]),
        created_at=values[3],
        content=values[4],
        role=values[5],
        kind=values[6],
        depth=values[7],
        rank=rank,
    )


#: A message's word index computed from its text, for rows the indexer has not reached yet.
_TSV_OF_TEXT = TSV.replace("content", "t.content")


def _arms(scope: str, condition: str | None, params: list[Any]) -> list[tuple[str | None, list[Any], str]]:
    """(text condition, its parameters, word-index expression) of each part of a search.

    Summaries are one part.  Messages are two, answered apart and merged (``UNION ALL``): rows
    indexed already, through the GIN indexes (the trigram one is partial and holds exactly these
    rows; the word condition is then the index's own, so no row's ``tsvector`` is re-read), and rows
    still waiting for the indexer, found through ``messages_unindexed_idx`` and matched on their
    word index computed in the query — nothing committed is missed.
    """
    if scope == "summaries" or condition is None:
        vector = "t.content_tsv" if scope == "summaries" else f"coalesce(t.content_tsv, {_TSV_OF_TEXT})"
        return [(condition, params, vector)]
    return [
        (f"t.content_tsv IS NOT NULL AND {condition}", params, "t.content_tsv"),
        (f"t.content_tsv IS NULL AND {condition.replace('t.content_tsv', _TSV_OF_TEXT)}", params, _TSV_OF_TEXT),
    ]


#: How many of the newest message ids a word search by recency looks in first (0: no window).
#: Walking the primary key backwards tests each row's ``tsvector`` until ``limit`` rows match: about
#: 4,000 rows for a word in 1% of the messages.  Within a bounded range of ids the planner can
#: instead intersect the word's GIN posting list with the range (``BitmapAnd``) and read only the
#: rows that match, or still walk when the word is common (its choice, per query).  The rows older
#: than the window are searched only when it held fewer than ``limit`` matches: the same rows
#: either way (see docs/postgres.md, "grep's newest matches").
RECENT_WINDOW = 10_000

#: The newest message id, read with each windowed search for the next one (see :func:`_window_edge`).
_NEWEST = "SELECT max(message_id) FROM messages"


def _windowed(request: SearchRequest) -> bool:
    """Whether ``request`` looks among the newest :data:`RECENT_WINDOW` message ids first."""
    return bool(RECENT_WINDOW) and request.scope == "messages" and request.order == "recency" and bool(request.words)


def _window_edge(below: int | None, newest: int | None) -> tuple[str, list[Any]]:
    """The SQL of the newest id left out of the window, and its parameters.

    The edge is a value the planner sees (it estimates the range from it) when the search pages
    (``below``) or the newest id is known from an earlier search (``newest``); else a subquery.
    A stale ``newest`` only widens the window: any edge gives the same rows.
    """
    if below is not None:
        return "%s::bigint", [below - 1 - RECENT_WINDOW]
    if newest is not None:
        return "%s::bigint", [newest - RECENT_WINDOW]
    return f"(({_NEWEST}) - {RECENT_WINDOW:d})", []


def _terms(request: SearchRequest) -> list[WordTerm]:
    return [] if request.words is None else [t for g in parse_words(request.words) for t in g]


def _search_sql(
    request: SearchRequest,
    resolved_terms: Mapping[WordTerm, str],
    newest: int | None = None,
    known: Known | None = None,
    bounded: bool = True,
) -> tuple[str, list[Any]]:
    """The one statement answering ``request`` (its word terms resolved in ``resolved_terms``).

    ``newest``: the newest message id an earlier search read, if any (see :func:`_window_edge`);
    ``known``: the cached BM25 statistics of a relevance search's terms (:func:`_ranking_terms`);
    ``bounded``: whether an any-word relevance search scores only the rows that can reach its page
    (:func:`~lossless.stores.postgres.relevance.bound_sql`; False scores every match).
    """
    table, key, columns, time_from, time_to = _shape(request.scope)
    clauses = ["t.conversation_id = ANY(%s::bigint[])"]
    params: list[Any] = [list(request.conversation_ids)]
    if request.since is not None:
        clauses.append(f"{time_from} >= %s")
        params.append(aware(request.since))
    if request.before is not None:
        clauses.append(f"{time_to} < %s")
        params.append(aware(request.before))
    if request.order == "recency" and request.below is not None:
        clauses.append(f"t.{key} < %s")
        params.append(request.below)
    text_clauses: list[str] = []
    text_params: list[Any] = []
    if request.literals:
        # Exact, case-sensitive fragments: LIKE is answered by the pg_trgm index and re-checked by a
        # byte comparison, far cheaper than the case-insensitive regular expressions below.
        for literal in request.literals:
            text_clauses.append("t.content LIKE %s")
            text_params.append("%" + like_escape(literal) + "%")
    elif request.trigrams is not None:
        for fragment in parse_trigrams(request.trigrams):
            regex = fragment_regex(fragment)
            text_clauses.append("false" if regex is None else "t.content ~ %s")
            text_params += [] if regex is None else [regex]
    words = None if request.words is None else word_condition(request.words, resolved_terms)
    # The indexed rows' condition without the words, for a bounded any-word search (it adds its own).
    bare = (" AND ".join(["t.content_tsv IS NOT NULL", *text_clauses]), list(text_params))
    if words is not None:
        text_clauses.append(words.where)
        text_params += words.where_params
    condition = " AND ".join(text_clauses) if text_clauses else None
    arms = _arms(request.scope, condition, text_params)
    if request.order == "recency":
        selects: list[str] = []
        sql_params: list[Any] = []
        recent: tuple[str, list[Any]] | None = None
        for i, (arm, arm_params, _) in enumerate(arms):
            where = " AND ".join([*clauses, *([arm] if arm else [])])
            if i == 0 and words is not None and _windowed(request):
                # The newest matches, looked up in the word index among the newest ids first (see
                # RECENT_WINDOW); the older rows are searched only when that window holds too few.
                edge, edge_params = _window_edge(request.below, newest)
                recent = (
                    f"SELECT {columns} FROM {table} t WHERE {where} AND t.{key} > {edge} "
                    f"ORDER BY t.{key} DESC LIMIT %s",
                    [*params, *arm_params, *edge_params, request.limit],
                )
                selects.append("(SELECT * FROM recent)")
                where += f" AND t.{key} <= {edge} AND (SELECT count(*) FROM recent) < %s"
                arm_params = [*arm_params, *edge_params, request.limit]
            selects.append(f"(SELECT {columns} FROM {table} t WHERE {where} ORDER BY t.{key} DESC LIMIT %s)")
            sql_params += [*params, *arm_params, request.limit]
        if len(selects) == 1:
            return selects[0], sql_params
        if recent is not None:  # each row also carries the newest message id, for the next search's window
            return (
                f"WITH recent AS MATERIALIZED ({recent[0]}) SELECT *, ({_NEWEST}) "
                f"FROM ({' UNION ALL '.join(selects)}) u ORDER BY 1 DESC LIMIT %s",
                [*recent[1], *sql_params, request.limit],
            )
        return f"SELECT * FROM ({' UNION ALL '.join(selects)}) u ORDER BY 1 DESC LIMIT %s", [
            *sql_params,
            request.limit,
        ]
    assert words is not None
    terms = list(dict.fromkeys(words.query_params))
    offset = max(0, request.offset)
    return ranked_sql(
        table,
        key,
        columns,
        clauses,
        params,
        arms,
        terms,
        request.limit,
        offset,
        known,
        bare=bare if words.any_word else None,
        bounded=bounded,
    )


def _ranking_terms(request: SearchRequest, resolved_terms: Mapping[WordTerm, str]) -> list[str]:
    """The distinct ``tsquery`` texts a relevance search ranks by (those :func:`_search_sql` ranks by)."""
    if request.order != "relevance" or request.words is None:
        return []
    return list(dict.fromkeys(word_condition(request.words, resolved_terms).query_params))


def _search_rows(request: SearchRequest, rows: Sequence[Sequence[Any]]) -> list[SearchRow]:
    """The rows of :func:`_search_sql`'s statement as search rows (``rank`` for relevance order)."""
    if request.order == "recency":
        return [_row(request.scope, r, None) for r in rows]
    return [_row(request.scope, r, -float(r[8])) for r in rows if r[0] is not None]  # not the weights alone


def _asks(request: SearchRequest) -> bool:
    """Whether a request can have rows at all (else its page is empty without asking the server)."""
    return bool(request.conversation_ids) and request.limit >= 1


def _search_pages(requests: Sequence[SearchRequest], found: Sequence[Sequence[Any]]) -> list[list[SearchRow]]:
    """Each request's page from the results of the statements of the requests that ask (:func:`_asks`)."""
    rows = iter(found)
    return [_search_rows(r, next(rows)) if _asks(r) else [] for r in requests]


#: The links of an agent's conversations (:meth:`~lossless.ports.Store.list_conversation_links`).
_LINKS = (
    "SELECT conversation_id, parent_conversation_id, session_key FROM conversations "
    "WHERE agent_id = %s ORDER BY conversation_id"
)
#: The agent's conversation of a session id (``Store.find_conversation``'s, its id only).
_SESSION = "SELECT conversation_id FROM conversations WHERE agent_id = %s AND session_id = %s"


def _links(rows: Sequence[Sequence[Any]]) -> list[tuple[int, int | None, str | None]]:
    return [(int(r[0]), None if r[1] is None else int(r[1]), r[2]) for r in rows]


def _scope_key(request: SearchRequest) -> tuple[Any, ...]:
    """What decides how many rows a search reads before its words: table, conversations, time window."""
    return (request.scope, tuple(sorted(set(request.conversation_ids))), request.since, request.before)


@dataclass(frozen=True, slots=True)
class _Ranking:
    """A relevance search: its terms (``tsquery`` texts), the statistics it was sent with, and when.

    ``request`` and ``resolved`` make its statement again (see :meth:`RetrievalStatements._recount_stale`).
    """

    request: SearchRequest
    resolved: Mapping[WordTerm, str]
    table: str
    terms: list[str]
    known: Known | None
    asked_at: float


# ---------------------------------------------------------------------- grants


class RetrievalStatements:
    """Search, DAG lookups and grants of :class:`~lossless.ports.Store` (see the module docstring)."""

    _db: Database
    #: Word terms already resolved to their ``tsquery`` (see :func:`resolve_terms`).
    _tsqueries: dict[WordTerm, str]
    #: The newest message id the last windowed search read (a hint for the next: see :func:`_window_edge`).
    _newest_message_id: int | None = None
    #: The BM25 statistics relevance searches counted, for the next ones (:mod:`.term_stats`).
    _term_stats: TermStatistics
    #: Whether an any-word relevance search scores only the rows that can reach its page (the same
    #: rows and order either way: :func:`~lossless.stores.postgres.relevance.bound_sql`); False, for
    #: measurements, scores every match.
    _bound_relevance: bool = True
    #: The sets of conversations a bounded search found narrow (searched unbounded for a while).
    _narrow: NarrowScopes

    async def search(self, request: SearchRequest) -> list[SearchRow]:
        """One page of candidates (see :meth:`lossless.ports.Store.search`)."""
        if not request.conversation_ids or request.limit < 1:
            return []
        if request.order == "relevance" and request.words is None:
            raise InputError("relevance order needs a word query")
        return (await self.search_many([request]))[0]

    async def search_many(self, requests: Sequence[SearchRequest]) -> list[list[SearchRow]]:
        """One page of candidates for each request, all in one round trip (:class:`~lossless.ports.BatchSearchStore`).

        Word terms never resolved before take one more round trip first (once per store and term).
        """
        statements, plans = await self._search_statements(requests)
        # Never a prepared (generic) plan: the best plan depends on the pattern's selectivity.
        found = await self._db.read_all(statements, prepare=False) if statements else []
        pages, plans = await self._recount_stale(found, plans)
        return self._found_pages(requests, pages, plans)

    async def search_with_links(
        self,
        agent_id: str,
        requests: Sequence[SearchRequest],
        *,
        session_id: str | None = None,
        session_key: str | None = None,
        named_session: str | None = None,
    ) -> ReachPages:
        """The agent's links, its session's conversation, the named session's and each request's page: one round
        trip, one snapshot.

        (:class:`~lossless.ports.ReachSearchStore`.)  The links, the conversation lookups and the
        searches are sent in one pipeline (:meth:`~lossless.stores.postgres.connection.Database.read_all`);
        word terms never resolved before take one more round trip first, as in :meth:`search_many`.
        """
        searches, plans = await self._search_statements(requests)
        statements: list[tuple[str, Any]] = [(_LINKS, (agent_id,))]
        if session_id is not None:
            statements.append((_SESSION, (agent_id, session_id)))
        elif session_key is not None:
            statements.append(
                (
                    "SELECT conversation_id FROM conversations WHERE agent_id = %s AND session_key = %s AND active",
                    (agent_id, session_key),
                )
            )
        lookups = len(statements)
        if named_session is not None:
            statements.append((_SESSION, (agent_id, named_session)))
        found = await self._db.read_all([*statements, *searches], prepare=False)
        own = found[1] if lookups > 1 else []
        named = found[lookups] if named_session is not None else []
        pages, plans = await self._recount_stale(found[len(statements) :], plans)
        return ReachPages(
            links=_links(found[0]),
            own=int(own[0][0]) if own else None,
            pages=self._found_pages(requests, pages, plans),
            named=int(named[0][0]) if named else None,
        )

    async def _search_statements(
        self, requests: Sequence[SearchRequest]
    ) -> tuple[list[tuple[str, Any]], list[_Ranking | None]]:
        """The statements answering each request that asks for rows (see :func:`_search_pages`), terms resolved.

        With each, for a relevance search with terms, what its BM25 statistics came from (for :meth:`_found_pages`).
        """
        for request in requests:
            if request.order == "relevance" and request.words is None:
                raise InputError("relevance order needs a word query")
        asked = [r for r in requests if _asks(r)]
        terms = [t for r in asked for t in _terms(r)]
        resolved = {t: self._tsqueries[t] for t in terms if t in self._tsqueries}
        if len(resolved) < len(set(terms)):
            async with self._db.read() as conn:
                resolved = dict(zip(terms, await resolve_terms(conn, terms, self._tsqueries), strict=True))
        statements: list[tuple[str, Any]] = []
        plans: list[_Ranking | None] = []
        for request in asked:
            ranking = _ranking_terms(request, resolved)
            plan = None
            if ranking:
                table = _shape(request.scope)[0]
                known = self._term_stats.known(table, ranking)
                plan = _Ranking(request, resolved, table, ranking, known, self._term_stats.clock())
            plans.append(plan)
            statements.append(
                _search_sql(
                    request,
                    resolved,
                    self._newest_message_id,
                    None if plan is None else plan.known,
                    self._bound_relevance and not self._narrow.holds(_scope_key(request), self._term_stats.clock()),
                )
            )
        return statements, plans

    async def _recount_stale(
        self, found: Sequence[Sequence[Any]], plans: Sequence[_Ranking | None]
    ) -> tuple[list[Sequence[Any]], list[_Ranking | None]]:
        """The results of :meth:`_search_statements`' statements, those ranked by stale statistics made again.

        A relevance statement sent with cached statistics reports whether its table grew beyond their
        bound since they were counted (:mod:`~lossless.stores.postgres.term_stats`); its rows are then
        not used: it is sent again, counting everything (one more round trip, once per generation).
        Its rows' set would be the same either way; only their order could differ (a statement that
        found nothing has nothing to order: not sent again).
        """
        found, plans = list(found), list(plans)
        stale = [
            i
            for i, (rows, plan) in enumerate(zip(found, plans, strict=True))
            if plan is not None
            and plan.known is not None
            and rows
            and rows[0][0] is not None
            and not read_counted(rows[0]).fresh
        ]
        if not stale:
            return found, plans
        for i in stale:
            plan = plans[i]
            assert plan is not None
            plans[i] = dataclasses.replace(plan, known=None, asked_at=self._term_stats.clock())
        statements = [
            _search_sql(
                plan.request,
                plan.resolved,
                self._newest_message_id,
                bounded=self._bound_relevance
                and not self._narrow.holds(_scope_key(plan.request), self._term_stats.clock()),
            )
            for plan in (plans[i] for i in stale)
            if plan is not None
        ]
        for i, rows in zip(stale, await self._db.read_all(statements, prepare=False), strict=True):
            found[i] = rows
        return found, plans

    def _found_pages(
        self, requests: Sequence[SearchRequest], found: Sequence[Sequence[Any]], plans: Sequence[_Ranking | None]
    ) -> list[list[SearchRow]]:
        """Each request's page from the results of :meth:`_search_statements`' statements, in order.

        A windowed search's rows end with the newest message id: kept for the next search's window.
        A relevance search's rows end with the BM25 statistics it used: kept for the next searches.
        """
        for request, rows, plan in zip([r for r in requests if _asks(r)], found, plans, strict=True):
            if _windowed(request) and rows and rows[0][-1] is not None:
                self._newest_message_id = int(rows[0][-1])
            if plan is not None and rows:
                self._term_stats.learn(plan.table, plan.terms, plan.known, read_counted(rows[0]), plan.asked_at)
                wide = read_wide(rows[0])
                if wide is not None:
                    self._narrow.learn(_scope_key(request), not wide, self._term_stats.clock())
        return _search_pages(requests, found)

    # ------------------------------------------------------------ the DAG

    async def get_summary_messages(self, summary_ids: Sequence[str]) -> dict[str, tuple[int, ...]]:
        found: dict[str, list[int]] = {}
        async with self._db.read() as conn:
            for chunk in chunks(list(dict.fromkeys(summary_ids))):
                cursor = await conn.execute(
                    "SELECT summary_id, message_id FROM summary_messages WHERE summary_id = ANY(%s::text[]) "
                    "ORDER BY summary_id, ordinal",
                    (chunk,),
                )
                for summary_id, message_id in await cursor.fetchall():
                    found.setdefault(summary_id, []).append(int(message_id))
        return {k: tuple(v) for k, v in found.items()}

    async def get_summary_children(self, summary_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        found: dict[str, list[str]] = {}
        async with self._db.read() as conn:
            for chunk in chunks(list(dict.fromkeys(summary_ids))):
                cursor = await conn.execute(
                    "SELECT sp.parent_summary_id, sp.summary_id FROM summary_parents sp "
                    "JOIN summaries s ON s.summary_id = sp.summary_id "
                    "WHERE sp.parent_summary_id = ANY(%s::text[]) ORDER BY sp.parent_summary_id, s.summary_rowid",
                    (chunk,),
                )
                for parent, child in await cursor.fetchall():
                    found.setdefault(parent, []).append(child)
        return {k: tuple(v) for k, v in found.items()}

    async def list_conversation_links(self, agent_id: str) -> list[tuple[int, int | None, str | None]]:
        async with self._db.read() as conn:
            cursor = await conn.execute(_LINKS, (agent_id,))
            return _links(await cursor.fetchall())

    # ------------------------------------------------------------ grants

    async def create_grant(self, grant: Grant) -> None:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                f"INSERT INTO expansion_grants ({GRANT_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (grant_id) DO NOTHING RETURNING 1",
                grant_params(grant),
            )
            if await cursor.fetchone() is None:
                raise InputError(f"grant {grant.id!r} already exists; make a new id")

    async def get_grant(self, grant_id: str) -> Grant | None:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                f"SELECT {GRANT_COLUMNS} FROM expansion_grants WHERE grant_id = %s", (grant_id,)
            )
            row = await cursor.fetchone()
        return None if row is None else grant_from_row(row)

    async def charge_grant(self, grant_id: str, tokens: int, now: datetime) -> Grant | None:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "UPDATE expansion_grants SET tokens_used = least(token_cap, tokens_used + %s) "
                f"WHERE grant_id = %s AND revoked_at IS NULL AND expires_at > %s RETURNING {GRANT_COLUMNS}",
                (max(0, int(tokens)), grant_id, aware(now)),
            )
            row = await cursor.fetchone()
        return None if row is None else grant_from_row(row)

    async def reserve_grant(self, grant_id: str, tokens: int, now: datetime) -> int | None:
        # One statement: the CTE's row lock makes concurrent reservations queue, and each re-reads
        # the tokens_used the one before it committed (READ COMMITTED re-checks a locked row).
        wanted = max(0, int(tokens))
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "WITH old AS (SELECT grant_id, greatest(0, least(%s, token_cap - tokens_used)) AS taken "
                "FROM expansion_grants WHERE grant_id = %s AND revoked_at IS NULL AND expires_at > %s FOR UPDATE) "
                "UPDATE expansion_grants g SET tokens_used = g.tokens_used + old.taken FROM old "
                "WHERE g.grant_id = old.grant_id RETURNING old.taken",
                (wanted, grant_id, aware(now)),
            )
            row = await cursor.fetchone()
        return None if row is None else max(0, int(row[0]))

    async def release_grant(self, grant_id: str, tokens: int) -> None:
        if tokens <= 0:
            return
        async with self._db.transaction() as conn:
            await conn.execute(
                "UPDATE expansion_grants SET tokens_used = greatest(0, tokens_used - %s) WHERE grant_id = %s",
                (int(tokens), grant_id),
            )

    async def revoke_grant(self, grant_id: str, reason: str, now: datetime) -> bool:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "UPDATE expansion_grants SET revoked_at = %s, revoke_reason = %s "
                "WHERE grant_id = %s AND revoked_at IS NULL",
                (aware(now), reason, grant_id),
            )
            return cursor.rowcount > 0

    async def sweep_grants(self, now: datetime) -> int:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "UPDATE expansion_grants SET revoked_at = %s, revoke_reason = 'expired' "
                "WHERE revoked_at IS NULL AND expires_at <= %s",
                (aware(now), aware(now)),
            )
            return cursor.rowcount
