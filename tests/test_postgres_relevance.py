"""Relevance order of word searches on PostgreSQL: BM25, each term weighed by its rarity in the store.

The store's ``order="relevance"`` (:mod:`lossless.stores.postgres.retrieval`) must rank a row holding
a rare query word above one holding a common word more often, weigh words by their rows in the whole
store (as FTS5's bm25 does on SQLite), find exactly the rows a recency search finds (only the order
differs), page without gaps or repeats, and break ties newest first.  No test here looks at timings.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from lossless import Message
from lossless.ports import PreparedMessage, SearchRequest
from lossless.records import Summary
from lossless.stores.postgres import PostgresStore, relevance

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


async def _conversation(store: PostgresStore, name: str, texts: list[str]) -> tuple[int, list[int]]:
    conversation = await store.get_or_create_conversation(agent_id="main", session_id=name)
    stored = await store.append_messages(
        conversation.id,
        [PreparedMessage(Message.user(t), 5, T0 + timedelta(minutes=i)) for i, t in enumerate(texts)],
    )
    return conversation.id, [m.id for m in stored.stored]


async def _ranked(store: PostgresStore, conversations: tuple[int, ...], words: str, limit: int = 100) -> list[int]:
    rows = await store.search(SearchRequest("messages", conversations, words=words, order="relevance", limit=limit))
    assert all(r.rank is not None for r in rows)
    assert [r.rank for r in rows] == sorted(r.rank for r in rows if r.rank is not None)  # best (lowest) first
    return [int(r.ref) for r in rows]


async def test_a_rare_word_outranks_a_common_one_said_twice(pg_url: str) -> None:
    store = await PostgresStore.open(pg_url)
    try:
        # The rare word's message is the oldest, so neither tie-breaking nor recency can put it first;
        # a ranking without document frequencies (ts_rank_cd) puts "parser parser" first.
        texts = ["the zebra escaped", "parser parser crashed again", *[f"parser note {i}" for i in range(12)]]
        conversation, ids = await _conversation(store, "s", texts)
        for settle in (False, True):  # before and after the background indexer fills the word index
            if settle:
                await store.wait_indexed()
            ranked = await _ranked(store, (conversation,), '"parser" OR "zebra"')
            assert ranked[0] == ids[0]
            assert ranked[1] == ids[1]  # of the common word's messages, the one that says it twice
            assert set(ranked) == set(ids)
    finally:
        await store.close()


async def test_document_counts_are_the_stores_whatever_conversations_are_searched(pg_url: str) -> None:
    """As FTS5's bm25: a word common anywhere in the store weighs little, and a conversation's order never
    depends on which other conversations are searched with it."""
    store = await PostgresStore.open(pg_url)
    try:
        # Within "a", zebra is rare and parser common; "b" is full of zebras, so in the store it is the reverse.
        a, in_a = await _conversation(store, "a", ["zebra seen", "parser parser", *[f"parser {i}" for i in range(5)]])
        b, _ = await _conversation(store, "b", [f"zebra herd {i}" for i in range(40)])
        await store.wait_indexed()
        query = '"parser" OR "zebra"'
        alone = await _ranked(store, (a,), query)
        assert alone[0] == in_a[1]  # parser is the rarer word in the store: its double mention leads
        both = await _ranked(store, (a, b), query)
        assert [m for m in both if m in in_a] == alone
    finally:
        await store.close()


async def test_relevance_finds_the_rows_recency_finds_and_pages_them_in_order(pg_url: str) -> None:
    store = await PostgresStore.open(pg_url)
    try:
        texts = [
            "deploy failed on the staging cluster",
            "the deployment rolled back",
            "fix the bug in the parser",
            "fix a bug, then deploy",
            "rollout done, no bug",
            "the and of",
            "parsers parse",
            "nothing to see",
        ] * 3
        conversation, _ = await _conversation(store, "s", texts)
        other, _ = await _conversation(store, "o", texts[:4])
        ids = (conversation, other)
        queries = [
            '"deploy"',
            '"deploy" OR "bug"',
            '"fix" AND "bug"',
            '("fix" AND "bug") OR ("rollout")',
            '"fix the bug"',
            '"pars"*',
            '"the and"',  # stop words only: matched by a regular expression, ranked as ties
            '"the" AND "deploy"',
            '"absentword" OR "rollout"',
        ]
        for settle in (False, True):
            if settle:
                await store.wait_indexed()
            for words in queries:
                newest = await store.search(SearchRequest("messages", ids, words=words, limit=200))
                ranked = await _ranked(store, ids, words, limit=200)
                assert sorted(ranked) == sorted(int(r.ref) for r in newest), words
                assert newest, words
                pages = [
                    int(r.ref)
                    for offset in range(0, len(ranked), 4)
                    for r in await store.search(
                        SearchRequest("messages", ids, words=words, order="relevance", limit=4, offset=offset)
                    )
                ]
                assert pages == ranked, words
    finally:
        await store.close()


async def test_equal_scores_come_newest_first(pg_url: str) -> None:
    store = await PostgresStore.open(pg_url)
    try:
        conversation, ids = await _conversation(store, "s", ["same words here"] * 6 + ["other text"])
        await store.wait_indexed()
        assert await _ranked(store, (conversation,), '"words"') == ids[5::-1]
    finally:
        await store.close()


async def test_the_old_ranking_would_not_put_the_rare_word_first(pg_url: str) -> None:
    """The first test can fail: without document frequencies the common word said twice wins."""
    store = await PostgresStore.open(pg_url)
    try:
        texts = ["the zebra escaped", "parser parser crashed again", *[f"parser note {i}" for i in range(12)]]
        conversation, ids = await _conversation(store, "s", texts)
        await store.wait_indexed()
        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            cursor = await conn.execute(
                "SELECT message_id FROM messages "
                "WHERE conversation_id = %s AND content_tsv @@ to_tsquery('parser | zebra') "
                "ORDER BY ts_rank_cd(content_tsv, to_tsquery('parser | zebra'), 1) DESC, message_id DESC LIMIT 1",
                (conversation,),
            )
            row = await cursor.fetchone()
        assert row is not None and int(row[0]) == ids[1]
        assert (await _ranked(store, (conversation,), '"parser" OR "zebra"'))[0] == ids[0]
    finally:
        await store.close()


# ---------------------------------------------------------------------- bounded any-word searches


def _corpus(seed: int, count: int) -> list[str]:
    """Messages of words with very different frequencies (a few rare, some middling, two in most)."""
    rng = random.Random(seed)
    rare, middling, common = ["zebra", "quokka", "tapir"], ["parser", "deploy", "cache", "token"], ["error", "test"]
    texts = []
    for _ in range(count):
        words = [w for w in common if rng.random() < 0.6]
        words += [w for w in middling if rng.random() < 0.15]
        words += [w for w in rare if rng.random() < 0.03]
        words += [rng.choice(["note", "line", "step", "run"]) for _ in range(rng.randint(0, 12))]
        rng.shuffle(words)
        texts.append(" ".join(words) or "empty")
    return texts


async def _page(store: PostgresStore, request: SearchRequest) -> list[tuple[str, float | None]]:
    return [(str(r.ref), r.rank) for r in await store.search(request)]


async def test_a_bounded_search_returns_exactly_what_scoring_every_match_returns(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any-word relevance searches score only the rows that can reach the page: the same rows, ranks and order."""
    monkeypatch.setattr(relevance, "BOUND_ROWS", 20)  # the levels run on this small store too
    bounded, every = await PostgresStore.open(pg_url), await PostgresStore.open(pg_url)
    every._bound_relevance = False
    try:
        a, _ = await _conversation(bounded, "a", _corpus(1, 150))
        b, _ = await _conversation(bounded, "b", _corpus(2, 90))
        c, _ = await _conversation(bounded, "c", _corpus(3, 12))  # fewer rows than BOUND_ROWS: not bounded
        await bounded.wait_indexed()
        queries = [
            '"zebra" OR "error"',
            '"zebra" OR "parser" OR "error" OR "test"',
            '"quokka" OR "tapir" OR "deploy" OR "cache" OR "token" OR "test"',
            '"error" OR "test"',  # common words only
            '"absentword" OR "parser" OR "test"',
            '"tapir" OR "zebra" OR "quokka"',  # rare words only: fewer rows than most pages
        ]
        for words in queries:
            for ids in ((a, b, c), (a,), (c,), (b, c)):
                for limit, offset in ((1, 0), (5, 0), (5, 5), (40, 0), (300, 0)):
                    request = SearchRequest("messages", ids, words=words, order="relevance", limit=limit, offset=offset)
                    await bounded.search(request)  # counts the words (the order of the levels needs them)
                    statement = await _statement(bounded, request)
                    assert await _page(bounded, request) == await _page(every, request), (words, ids, limit, offset)
                    # The bounded statement was the one compared, except in "c" alone, found narrow.
                    assert ("lvl1" in statement) == (ids != (c,)), (words, ids)
    finally:
        await bounded.close()
        await every.close()


async def _statement(store: PostgresStore, request: SearchRequest) -> str:
    statements, _ = await store._search_statements([request])
    return str(statements[0][0])


async def _tables_read(pg_url: str, statement: tuple[str, Any]) -> dict[str, int]:
    """Per CTE of ``statement``, how many of its scans of ``messages`` ran (EXPLAIN ANALYZE)."""
    async with await psycopg.AsyncConnection.connect(pg_url) as conn:
        cursor = await conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement[0], statement[1])
        row = await cursor.fetchone()
    assert row is not None
    plan = row[0][0]["Plan"]
    found: dict[str, int] = {}

    def walk(node: dict[str, Any], cte: str) -> None:
        name = node.get("Subplan Name", "")
        cte = name.removeprefix("CTE ") if name.startswith("CTE ") else cte
        if node.get("Relation Name") == "messages" and node.get("Actual Loops", 0) > 0:
            found[cte] = found.get(cte, 0) + 1
        for child in node.get("Plans", []):
            walk(child, cte)

    walk(plan, "")
    return found


async def test_a_level_no_row_of_which_can_reach_the_page_is_not_read(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A word in most rows adds little to a score: once the rarer word fills the page, its rows are not read."""
    monkeypatch.setattr(relevance, "BOUND_ROWS", 20)
    store = await PostgresStore.open(pg_url)
    try:
        texts = [f"zebra sighting {i}" for i in range(10)] + [f"common note {i}" for i in range(200)]
        conversation, ids = await _conversation(store, "s", texts)
        await store.wait_indexed()
        request = SearchRequest("messages", (conversation,), words='"zebra" OR "common"', order="relevance", limit=5)
        await store.search(request)  # counts the words
        statements, _ = await store._search_statements([request])
        read = await _tables_read(pg_url, statements[0])
        assert read.get("lvl1", 0) >= 1  # the zebras
        assert read.get("lvl2", 0) == 0  # "common" alone: its bound is below the fifth zebra's score
        assert [int(r.ref) for r in await store.search(request)] == ids[9:4:-1]
        # A page the zebras cannot fill reads the common word's rows after all.
        more = await store.search(dataclasses.replace(request, limit=15))
        assert [int(r.ref) for r in more][:10] == ids[9::-1]
        assert len(more) == 15
    finally:
        await store.close()


async def test_narrow_conversations_are_searched_without_levels_once_found_narrow(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below BOUND_ROWS rows the levels cost more than they save: the statement says so, the store remembers."""
    monkeypatch.setattr(relevance, "BOUND_ROWS", 20)
    store = await PostgresStore.open(pg_url)
    try:
        small, _ = await _conversation(store, "small", _corpus(4, 10))
        large, _ = await _conversation(store, "large", _corpus(5, 60))
        await store.wait_indexed()

        def request(*ids: int) -> SearchRequest:
            return SearchRequest("messages", ids, words='"error" OR "test" OR "zebra"', order="relevance", limit=5)

        await store.search(request(small))  # counts the words: not bounded yet
        assert "lvl1" in await _statement(store, request(small))
        await store.search(request(small))  # bounded: finds the conversation narrow
        assert "lvl1" not in await _statement(store, request(small))
        assert "lvl1" in await _statement(store, request(large))
        assert "lvl1" in await _statement(store, request(small, large))
    finally:
        await store.close()


async def test_a_search_of_common_words_only_still_finds_their_rows(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(relevance, "BOUND_ROWS", 20)
    store = await PostgresStore.open(pg_url)
    try:
        texts = ["error in test", "test passed", "error again", "unrelated words"] * 20
        conversation, _ = await _conversation(store, "s", texts)
        await store.wait_indexed()
        request = SearchRequest("messages", (conversation,), words='"error" OR "test"', order="relevance", limit=200)
        newest = await store.search(dataclasses.replace(request, order="recency"))
        for _ in range(2):  # counting, then bounded
            ranked = await store.search(request)
            assert sorted(int(r.ref) for r in ranked) == sorted(int(r.ref) for r in newest)
            assert len(ranked) == 60
        assert "lvl1" in await _statement(store, request)
    finally:
        await store.close()


async def test_bounded_summary_searches_return_what_scoring_every_match_returns(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(relevance, "BOUND_ROWS", 5)
    bounded, every = await PostgresStore.open(pg_url), await PostgresStore.open(pg_url)
    every._bound_relevance = False
    try:
        conversation = (await bounded.get_or_create_conversation(agent_id="main", session_id="s")).id
        for i, text in enumerate(_corpus(6, 40)):
            await bounded.append_messages(conversation, [PreparedMessage(Message.user(f"turn {i}"), 5, T0)])
            entries = [e for e in await bounded.get_context(conversation) if e.kind == "message"]
            summary = Summary(
                id=f"sum_{i:016x}",
                conversation_id=conversation,
                kind="leaf",
                depth=0,
                content=text,
                token_count=len(text.split()),
                created_at=T0 + timedelta(minutes=i),
                earliest_at=entries[0].created_at,
                latest_at=entries[-1].created_at,
                source_token_count=sum(e.token_count for e in entries),
            )
            await bounded.replace_with_summary(summary, entries)
        for words in ('"zebra" OR "parser" OR "error" OR "test"', '"error" OR "test"', '"deploy" OR "cache" OR "run"'):
            for limit, offset in ((1, 0), (3, 2), (10, 0), (100, 0)):
                request = SearchRequest(
                    "summaries", (conversation,), words=words, order="relevance", limit=limit, offset=offset
                )
                await bounded.search(request)  # counts the words
                assert "lvl1" in await _statement(bounded, request)
                assert await _page(bounded, request) == await _page(every, request), (words, limit, offset)
    finally:
        await bounded.close()
        await every.close()
