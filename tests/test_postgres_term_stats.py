"""The BM25 statistics a PostgreSQL store caches for relevance searches (:mod:`lossless.stores.postgres.term_stats`).

A repeated or overlapping relevance search must use the counts an earlier one took (observed through
the cache's hit counter, and by planting a count: the order follows it); the rows found never
depend on the cache (only their order can); a ranking from the cache equals the uncached one on the
same data; a generation of counts ends when the table grew by more than ``growth`` × ``N`` (driven
by appending rows) or after ``fresh_s`` seconds (driven by a test clock), and when the store deletes
conversations; concurrent searches on two stores ("hosts") of one database, with appends between
them, keep all of this.  The unit tests at the end exercise the bookkeeping without a database.
No test sleeps or looks at timings.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless import Message
from lossless.ports import PreparedMessage, SearchRequest, SearchRow
from lossless.stores.postgres import PostgresStore
from lossless.stores.postgres.term_stats import MAX_TERM_CHARS, Counted, Known, TermStatistics

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

#: Rare "zebra" and "giraffe", common "parser": the rare words' messages rank first while the counts are right.
TEXTS = [
    "the zebra escaped",
    "parser parser crashed again",
    "a giraffe ate the parser config",
    *[f"parser note {i}" for i in range(17)],
]


class Clock:
    """A monotonic clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _conversation(store: PostgresStore, name: str, texts: list[str]) -> tuple[int, list[int]]:
    conversation = await store.get_or_create_conversation(agent_id="main", session_id=name)
    stored = await store.append_messages(
        conversation.id,
        [PreparedMessage(Message.user(t), 5, T0 + timedelta(minutes=i)) for i, t in enumerate(texts)],
    )
    return conversation.id, [m.id for m in stored.stored]


def _request(conversations: tuple[int, ...], words: str, limit: int = 100) -> SearchRequest:
    return SearchRequest("messages", conversations, words=words, order="relevance", limit=limit)


async def _ranked(store: PostgresStore, conversations: tuple[int, ...], words: str) -> list[tuple[int, float]]:
    rows: list[SearchRow] = await store.search(_request(conversations, words))
    return [(int(r.ref), float(r.rank or 0.0)) for r in rows]


async def _plant(store: PostgresStore, term: str, count: float) -> None:
    """Make the cache hold ``count`` rows for ``term`` in the current generation of messages."""
    stats = store._term_stats
    generation = stats._tables["messages"]
    stats.learn(
        "messages",
        [term],
        None,
        Counted((count,), generation.total, generation.avgdl, generation.edge, fresh=False),
        stats.clock(),
    )
    assert stats.terms("messages")[term] == count


def _count_round_trips(store: PostgresStore) -> list[int]:
    """From now on, the number of statements of each pipelined read of ``store`` (one round trip each)."""
    sent: list[int] = []
    read_all = store._db.read_all

    async def counting(statements: Any, **options: Any) -> list[list[Any]]:
        sent.append(len(statements))
        return await read_all(statements, **options)

    store._db.read_all = counting  # type: ignore[method-assign]
    return sent


async def test_a_repeated_search_uses_the_counts_and_a_planted_count_moves_only_the_order(pg_url: str) -> None:
    store = await PostgresStore.open(pg_url)
    try:
        conversation, ids = await _conversation(store, "s", TEXTS)
        query = '"parser" OR "zebra"'
        first = await _ranked(store, (conversation,), query)
        stats = store._term_stats
        assert (stats.hits, stats.misses) == (0, 2)
        assert stats.terms("messages") == {"'parser'": 19.0, "'zebra'": 1.0}
        assert first[0][0] == ids[0]  # the rare word leads
        assert await _ranked(store, (conversation,), query) == first
        assert (stats.hits, stats.misses) == (2, 2)  # both counts read from the cache, none counted
        # An overlapping search: "zebra" from the cache, "giraffe" counted and kept.
        await _ranked(store, (conversation,), '"zebra" OR "giraffe"')
        assert (stats.hits, stats.misses) == (3, 3)
        assert stats.terms("messages")["'giraff'"] == 1.0  # the stemmed lexeme
        # A search that finds nothing teaches its counts too (its statement returns them alone).
        assert await _ranked(store, (conversation,), '"okapi" OR "wombat"') == []
        assert {"'okapi'": 0.0, "'wombat'": 0.0}.items() <= stats.terms("messages").items()
        assert await _ranked(store, (conversation,), '"okapi"') == []
        assert (stats.hits, stats.misses) == (4, 5)
        # The statement ranks by the cached count: planted as if zebra were everywhere, it weighs least.
        await _plant(store, "'zebra'", 20.0)
        planted = await _ranked(store, (conversation,), query)
        assert planted[0][0] == ids[1]  # "parser parser" now leads
        assert sorted(k for k, _ in planted) == sorted(k for k, _ in first)  # the same rows
    finally:
        await store.close()


async def test_cached_rankings_equal_uncached_ones(pg_url: str) -> None:
    cached = await PostgresStore.open(pg_url)
    uncached = await PostgresStore.open(pg_url)
    uncached._term_stats = TermStatistics(fresh_s=0)  # every search counts
    try:
        texts = [
            "deploy failed on the staging cluster",
            "the deployment rolled back",
            "fix the bug in the parser",
            "fix a bug, then deploy",
            "rollout done, no bug",
            "parsers parse",
        ] * 4
        a, _ = await _conversation(cached, "a", texts)
        b, _ = await _conversation(cached, "b", texts[:5])
        queries = [
            '"deploy"',
            '"deploy" OR "bug"',
            '"fix" AND "bug"',
            '("fix" AND "bug") OR ("rollout")',
            '"fix the bug"',
            '"pars"*',
            '"bug" OR "staging" OR "cluster" OR "parser"',
        ]
        for settle in (False, True):  # before and after the background indexer fills the word index
            if settle:
                await cached.wait_indexed()
            for _ in range(2):  # the second round from the cache
                for words in queries:
                    for reach in ((a,), (a, b)):
                        assert await _ranked(cached, reach, words) == await _ranked(uncached, reach, words), words
        assert cached._term_stats.hits > 0
        assert uncached._term_stats.hits == 0
        assert uncached._term_stats.terms("messages") == {}
    finally:
        await cached.close()
        await uncached.close()


async def test_counts_are_recounted_when_the_table_grew_by_more_than_the_bound(pg_url: str) -> None:
    store = await PostgresStore.open(pg_url)
    try:
        conversation, ids = await _conversation(store, "s", TEXTS)  # 20 rows: 10% is 2 rows
        query = '"parser" OR "zebra"'
        await _ranked(store, (conversation,), query)
        await _plant(store, "'zebra'", 20.0)
        generation = store._term_stats._tables["messages"].number
        await _conversation(store, "t", ["zebra again", "more zebra"])  # 2 rows: within the bound
        assert (await _ranked(store, (conversation,), query))[0][0] == ids[1]  # still the planted count
        assert store._term_stats._tables["messages"].number == generation
        await _conversation(store, "u", ["zebra three"])  # 3 rows since the count: beyond it
        sent = _count_round_trips(store)
        fresh = await _ranked(store, (conversation,), query)
        assert fresh[0][0] == ids[0]  # recounted: the rare word leads again
        assert sent == [1, 1]  # the statement said its counts were stale, and was sent again counting
        await _ranked(store, (conversation,), query)
        assert sent == [1, 1, 1]  # the new counts are used
        assert store._term_stats.terms("messages") == {"'parser'": 19.0, "'zebra'": 4.0}
        assert store._term_stats._tables["messages"].total == 23.0
        assert store._term_stats._tables["messages"].number > generation
    finally:
        await store.close()


async def test_a_search_with_links_beyond_the_bound_is_sent_again_counting(pg_url: str) -> None:
    """The engine's grep path (links and searches in one pipeline) recounts too, and keeps the links it read."""
    store = await PostgresStore.open(pg_url)
    plain = await PostgresStore.open(pg_url)
    plain._term_stats = TermStatistics(fresh_s=0)
    try:
        conversation, ids = await _conversation(store, "s", TEXTS)
        request = _request((conversation,), '"parser" OR "zebra"')
        await store.search_with_links("main", [request], session_id="s")
        await _plant(store, "'zebra'", 20.0)
        await _conversation(store, "u", ["zebra", "zebra", "zebra"])
        sent = _count_round_trips(store)
        reach = await store.search_with_links("main", [request], session_id="s")
        assert sent == [3, 1]  # links, own conversation, search; then the search again, counting
        assert reach.own == conversation and len(reach.links) == 2
        assert reach.pages[0] == await plain.search(request)
        assert reach.pages[0][0].key == ids[0]
    finally:
        await store.close()
        await plain.close()


async def test_counts_are_recounted_after_the_time_bound_and_after_a_deletion(pg_url: str) -> None:
    store = await PostgresStore.open(pg_url)
    clock = Clock()
    store._term_stats = TermStatistics(clock=clock, fresh_s=300)
    try:
        conversation, ids = await _conversation(store, "s", TEXTS)
        query = '"parser" OR "zebra"'
        await _ranked(store, (conversation,), query)
        await _plant(store, "'zebra'", 20.0)
        clock.now += 300  # at the bound: still used
        assert (await _ranked(store, (conversation,), query))[0][0] == ids[1]
        clock.now += 1  # past it
        assert (await _ranked(store, (conversation,), query))[0][0] == ids[0]
        assert store._term_stats.terms("messages")["'zebra'"] == 1.0
        # The store's own deletion drops the counts at once: the deleted conversation's zebras go uncounted.
        other, _ = await _conversation(store, "herd", [f"zebra herd {i}" for i in range(40)])
        assert (await _ranked(store, (conversation,), query))[0][0] == ids[1]  # zebra common now
        assert store._term_stats.terms("messages")["'zebra'"] == 41.0
        assert await store.delete_conversations([other]) == 1
        assert store._term_stats.terms("messages") == {}
        assert (await _ranked(store, (conversation,), query))[0][0] == ids[0]
        assert store._term_stats.terms("messages")["'zebra'"] == 1.0
    finally:
        await store.close()


async def test_concurrent_searches_on_two_hosts_with_appends_between_them(pg_url: str) -> None:
    """Two stores of one database (two hosts, each its own cache) search at once while rows are appended.

    Every search finds exactly the rows a recency search of the same moment finds (the cache never
    changes rows); once the appends stop and each cache's generation is recounted, both rank exactly
    as a store without a cache.
    """
    hosts = [await PostgresStore.open(pg_url), await PostgresStore.open(pg_url)]
    clocks = [Clock(), Clock()]
    for host, clock in zip(hosts, clocks, strict=True):
        host._term_stats = TermStatistics(clock=clock)
    plain = await PostgresStore.open(pg_url)
    plain._term_stats = TermStatistics(fresh_s=0)
    try:
        conversation, _ = await _conversation(hosts[0], "s", TEXTS)
        writer = await hosts[1].get_or_create_conversation(agent_id="main", session_id="w")
        queries = ['"parser" OR "zebra"', '"zebra" OR "giraffe"', '"giraffe" OR "parser" OR "note"', '"parser"']
        reach = (conversation, writer.id)
        mismatches: list[str] = []

        async def search(host: PostgresStore, words: str) -> None:
            for _ in range(3):
                ranked = await host.search(_request(reach, words, limit=200))
                # Appends commit between the two statements, so compare against a recency search after
                # the ranked one, bounded by the ranked one's newest row: the same rows up to that id.
                newest = await host.search(SearchRequest("messages", reach, words=words, limit=200))
                edge = max(int(r.ref) for r in ranked)
                if sorted(int(r.ref) for r in ranked) != sorted(int(r.ref) for r in newest if int(r.ref) <= edge):
                    mismatches.append(words)

        async def append() -> None:
            for i in range(12):
                await hosts[1].append_messages(
                    writer.id, [PreparedMessage(Message.user(f"zebra giraffe parser {i}"), 5, T0)]
                )

        async with anyio.create_task_group() as tg:
            tg.start_soon(append)
            for host in hosts:
                for words in queries:
                    tg.start_soon(search, host, words)
        assert mismatches == []
        for host, clock in zip(hosts, clocks, strict=True):
            clock.now += host._term_stats.fresh_s + 1  # the generation counted during the appends ends
            for words in queries:
                assert await _ranked(host, reach, words) == await _ranked(plain, reach, words), words
            for words in queries:  # and from the cache, counted after the appends
                assert await _ranked(host, reach, words) == await _ranked(plain, reach, words), words
            assert host._term_stats.hits > 0
    finally:
        for store in [*hosts, plain]:
            await store.close()


# ---------------------------------------------------------------------- the bookkeeping alone


def _counted(counts: tuple[float, ...], edge: int, *, fresh: bool = False, total: float = 100.0) -> Counted:
    return Counted(counts, total, 5.0, edge, fresh)


def test_least_recently_used_terms_go_first_beyond_the_bound() -> None:
    stats = TermStatistics(clock=Clock(), max_terms=3)
    stats.learn("messages", ["a", "b", "c"], None, _counted((1.0, 2.0, 3.0), 10), 1000.0)
    assert stats.known("messages", ["a"]) is not None  # "a" used: "b" is now the least recent
    known = stats.known("messages", ["d"])
    assert known is not None and known.counts == (None,)
    stats.learn("messages", ["d"], known, _counted((4.0,), 10, fresh=True), 1000.0)
    assert stats.terms("messages") == {"c": 3.0, "a": 1.0, "d": 4.0}


def test_long_terms_are_never_kept() -> None:
    stats = TermStatistics(clock=Clock())
    long = "'" + "x" * MAX_TERM_CHARS + "'"
    stats.learn("messages", ["a", long], None, _counted((1.0, 2.0), 10), 1000.0)
    assert stats.terms("messages") == {"a": 1.0}
    known = stats.known("messages", [long, "a"])
    assert known is not None and known.counts == (None, 1.0)


def test_the_bound_of_growth_is_the_share_of_rows_counted() -> None:
    stats = TermStatistics(clock=Clock(), growth=0.1)
    stats.learn("summaries", ["a"], None, _counted((1.0,), 500, total=300.0), 1000.0)
    known = stats.known("summaries", ["a", "b"])
    assert known is not None
    assert (known.limit, known.total, known.counts) == (530, 300.0, (1.0, None))
    assert stats.known("messages", ["a"]) is None  # per table


def test_counts_from_an_older_snapshot_or_an_ended_generation_are_dropped() -> None:
    clock = Clock()
    stats = TermStatistics(clock=clock)
    stats.learn("messages", ["a"], None, _counted((1.0,), 10), clock())
    old = stats.known("messages", ["b"])
    stats.learn("messages", ["a"], None, _counted((2.0,), 50), clock())  # a newer generation meanwhile
    assert old is not None
    stats.learn("messages", ["b"], old, _counted((7.0,), 10, fresh=True), clock())  # counted for the old one
    assert stats.terms("messages") == {"a": 2.0}
    stats.learn("messages", ["c"], None, _counted((9.0,), 40), clock())  # an older snapshot than the one kept
    assert stats.terms("messages") == {"a": 2.0}
    stats.learn("messages", ["c"], None, _counted((3.0,), 50), clock())  # the same snapshot: joins it
    assert stats.terms("messages") == {"a": 2.0, "c": 3.0}
    clock.now += stats.fresh_s + 1
    assert stats.known("messages", ["a"]) is None and stats.terms("messages") == {}


def test_a_statement_answered_after_its_counts_went_stale_is_not_kept() -> None:
    """Found by the interleaving property below: a statement sent 301 s before its result came back
    started a generation already too old, which pushed out the live one and was itself replaced at the
    next result by a generation of an older snapshot (its newest key went back from 1 to 0)."""
    clock = Clock()
    stats = TermStatistics(clock=clock, fresh_s=300)
    slow = clock()  # sent, then answered only after more than fresh_s
    clock.now += 301
    stats.learn("messages", ["a"], None, _counted((0.0,), 0), clock())
    stats.learn("messages", ["a"], None, _counted((1.0,), 1), slow)  # a newer snapshot, but too old to keep
    assert stats.terms("messages") == {"a": 0.0}
    assert stats._tables["messages"].number == 1  # the live generation stays
    stats.learn("messages", ["b"], None, _counted((4.0,), 0), clock())
    assert stats.terms("messages") == {"a": 0.0, "b": 4.0}


def test_a_cache_that_is_off_keeps_nothing() -> None:
    stats = TermStatistics(fresh_s=0)
    stats.learn("messages", ["a"], None, _counted((1.0,), 10), 0.0)
    assert stats.known("messages", ["a"]) is None
    assert stats.terms("messages") == {}


_STEP = st.tuples(
    st.sampled_from(["known", "learn", "tick"]),
    st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1, max_size=3, unique=True),
    st.integers(min_value=0, max_value=60),  # the newest key a statement saw
    st.booleans(),  # whether a statement with known values found them fresh
    st.integers(min_value=0, max_value=200),  # seconds that pass
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_STEP, max_size=40))
def test_the_cache_keeps_its_bounds_in_any_interleaving(steps: list[tuple[str, list[str], int, bool, int]]) -> None:
    """Searches answered out of order (their statements' snapshots interleaved) never break the bounds.

    Whatever order results come back in: no more than ``max_terms`` terms; nothing served older
    than ``fresh_s``; the kept generation's newest key never goes back while it lives; a term's
    count is only ever one a statement reported.
    """
    clock = Clock()
    stats = TermStatistics(clock=clock, max_terms=3, fresh_s=300)
    outstanding: list[tuple[list[str], Known | None, float]] = []
    reported: dict[str, set[float]] = {}
    previous: tuple[int, int, float] | None = None  # the kept generation: number, newest key, counted at
    for action, terms, edge, fresh, seconds in steps:
        if action == "tick":
            clock.now += seconds
        elif action == "known":
            known = stats.known("messages", terms)
            if known is not None:
                assert clock() - stats._tables["messages"].counted_at <= 300
            outstanding.append((terms, known, clock()))
        elif outstanding:
            asked, known, asked_at = outstanding.pop(seconds % len(outstanding))
            counts = tuple(float(edge + i) for i in range(len(asked)))
            for term, count in zip(asked, counts, strict=True):
                reported.setdefault(term, set()).add(count)
            stats.learn("messages", asked, known, Counted(counts, 50.0, 4.0, edge, fresh), asked_at)
        kept = stats.terms("messages")
        assert len(kept) <= 3
        assert all(count in reported[term] for term, count in kept.items())
        generation = stats._tables.get("messages")
        if generation is None:
            continue
        if previous is not None and previous[0] == generation.number:
            assert generation.edge == previous[1]
        elif previous is not None and clock() - previous[2] <= 300:
            assert generation.edge > previous[1]  # a live generation gives way only to a newer snapshot
        previous = (generation.number, generation.edge, generation.counted_at)
