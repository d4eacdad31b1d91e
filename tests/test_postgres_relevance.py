"""Relevance order of word searches on PostgreSQL: BM25, each term weighed by its rarity in the store.

The store's ``order="relevance"`` (:mod:`lossless.stores.postgres.retrieval`) must rank a row holding
a rare query word above one holding a common word more often, weigh words by their rows in the whole
store (as FTS5's bm25 does on SQLite), find exactly the rows a recency search finds (only the order
differs), page without gaps or repeats, and break ties newest first.  No test here looks at timings.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from lossless import Message
from lossless.ports import PreparedMessage, SearchRequest
from lossless.stores.postgres import PostgresStore

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
