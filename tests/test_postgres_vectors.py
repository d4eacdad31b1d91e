"""PostgreSQL's search vectors at scale: kept counts, the windowed build walk, the bulk HNSW build, the search plan."""

from __future__ import annotations

import math
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
import pytest

from lossless import Message
from lossless.memory.hashing import HashEmbedder
from lossless.memory.message_index import VectorBuilder, index_model, to_unit_blob
from lossless.memory.messages import MessageSearch
from lossless.memory.scopes import MemoryCaller
from lossless.memory.service import MemoryService
from lossless.ports import PreparedMessage, RetentionStore, Store
from lossless.records import utcnow
from lossless.stores import memory_store_for, open_store
from lossless.stores.postgres import vectors as pg_vectors
from lossless.stores.postgres.store import PostgresStore
from tests.test_memory import _pgvector_loads

pytestmark = pytest.mark.anyio

WORDS = "deploy server coffee tea london paris kube pod cert expired disk route cache queue".split()  # noqa: SIM905


async def _messages(store: Store, session: str, texts: list[str]) -> int:
    conversation = await store.get_or_create_conversation(agent_id="main", session_id=session)
    await store.append_messages(conversation.id, [PreparedMessage(Message("user", t), 5, utcnow()) for t in texts])
    return conversation.id


def _texts(count: int, tag: str) -> list[str]:
    return [" ".join(WORDS[i % 9 : i % 9 + 4]) + f" {tag}{i}" for i in range(count)]


async def _count_rows(url: str) -> int:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        row = await (await conn.execute("SELECT count(*) FROM vector_counts")).fetchone()
    assert row is not None
    return int(row[0])


async def _open(url: str) -> PostgresStore:
    store = await open_store(url)
    assert isinstance(store, PostgresStore)
    return store


async def _store_with_pgvector(pg_url: str, **settings: int) -> PostgresStore:
    """A store on a database with pgvector created (the test skips where the embedded pgvector cannot load)."""
    if not _pgvector_loads():
        pytest.skip("the embedded pgvector needs AVX2 and FMA, which this CPU lacks")
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute("CREATE EXTENSION vector")
    return await PostgresStore.open(pg_url, **settings)


@asynccontextmanager
async def _reading(pg_url: str, table: str) -> AsyncIterator[None]:
    """Another session holding ``table`` in ACCESS SHARE mode (a long read) while the block runs."""
    async with await psycopg.AsyncConnection.connect(pg_url) as holder:
        await holder.execute(f"LOCK TABLE {table} IN ACCESS SHARE MODE")
        yield
        await holder.rollback()


async def test_counts_are_appended_per_statement_and_folded_without_changing_them(pg_url: str) -> None:
    store = await _open(pg_url)
    try:
        embedder = HashEmbedder(32)
        model = index_model(embedder.model)
        a = await _messages(store, "a", _texts(12, "a"))
        b = await _messages(store, "b", _texts(5, "b"))
        await VectorBuilder(store, embedder, batch=3).run()  # six writes: several delta rows per conversation
        states = await store.vector_states(model, "messages", [a, b])
        assert [(states[c].indexed, states[c].total, states[c].rows) for c in (a, b)] == [(12, 12, 12), (5, 5, 5)]
        assert await store.fold_vector_counts() == 0  # the pass's end already folded them
        assert await _count_rows(pg_url) == 2  # one row per (source, model, conversation)
        await _messages(store, "a", ["sunrise harbour walk"])
        await VectorBuilder(store, embedder).step()  # a new delta row, not an update of the folded one
        assert await _count_rows(pg_url) == 3
        grown = await store.vector_states(model, "messages", [a])
        assert (grown[a].indexed, grown[a].total, grown[a].rows) == (13, 13, 13)
        assert grown[a].revision > states[a].revision
        assert await store.fold_vector_counts() == 1
        folded = await store.vector_states(model, "messages", [a])
        assert (folded[a].indexed, folded[a].rows) == (13, 13)
        assert isinstance(store, RetentionStore)
        assert await store.delete_conversations([b]) == 1  # the cascade's deletes count b down to zero
        totals = await store.vector_totals(model, "messages")
        assert (totals.indexed, totals.total, totals.rows) == (13, 13, 13)
        await store.fold_vector_counts()
        assert await _count_rows(pg_url) == 1  # b's zero row is gone
    finally:
        await store.close()


async def test_the_build_walk_finds_the_one_item_left_after_a_long_built_stretch(pg_url: str) -> None:
    """The todo walk reads growing windows of rows, so built stretches are skipped and nothing is missed."""
    store = await _open(pg_url)
    try:
        embedder = HashEmbedder(32)
        model = index_model(embedder.model)
        a = await _messages(store, "a", _texts(60, "a"))
        await VectorBuilder(store, embedder).run()
        assert await store.vectors_todo(model, "messages", after=0, limit=1) == []
        newest = await _messages(store, "a", ["sunrise harbour walk"])
        assert newest == a
        found = await store.vectors_todo(model, "messages", after=0, limit=1)
        assert [t.content for t in found] == ["sunrise harbour walk"]
        other = await store.vectors_todo("another-model", "messages", after=0, limit=7)
        assert len(other) == 7  # a model with nothing built: the first window holds them all
    finally:
        await store.close()


def _cosine(a: bytes, b: bytes) -> float:
    x = struct.unpack(f"<{len(a) // 4}f", a)
    y = struct.unpack(f"<{len(b) // 4}f", b)
    return sum(p * q for p, q in zip(x, y, strict=True)) / (
        math.sqrt(sum(p * p for p in x)) * math.sqrt(sum(q * q for q in y))
    )


async def test_a_large_first_backlog_gets_its_hnsw_index_in_bulk_and_small_reaches_are_exact(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_vectors, "BULK_BACKLOG", 10)
    store = await _store_with_pgvector(pg_url)
    try:
        embedder = HashEmbedder(64)
        model = index_model(embedder.model)
        service = MemoryService(memory_store_for(store), embedder, MemoryCaller.agent("main"))
        a = await _messages(store, "a", _texts(40, "a"))
        b = await _messages(store, "b", _texts(25, "b"))
        builder = VectorBuilder(store, embedder, batch=16)
        assert await builder.step() == 16
        probe = to_unit_blob(embedder.vector("coffee tea london"))
        # the backlog (49 left) is over the bulk size: no index yet, so the store does not answer ...
        assert await store.nearest_items(model, "messages", probe, [a], limit=5) is None
        # ... and a search ranks what is built (in memory), as during any build
        early = await MessageSearch(store, service).search("coffee tea london", [a, b], limit=5)
        assert early and all(h.conversation_id == a for h in early)  # only a's first 16 are built
        await builder.run()  # the end of the pass makes the index over every row at once
        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            made = await (await conn.execute("SELECT to_regclass('message_vectors_hnsw_64') IS NOT NULL")).fetchone()
        assert made == (True,)
        assert (await _half_state(pg_url))[1:] == (0, 0)  # the bulk build's writes carry their half copies too
        # a reach under the exact-scan size: the store ranks every vector, the same as brute force
        exact = await store.nearest_items(model, "messages", probe, [a, b], limit=65)
        assert exact is not None
        loaded = [
            *await store.load_item_vectors(model, "messages", a),
            *await store.load_item_vectors(model, "messages", b),
        ]
        brute = {key: _cosine(probe, v) for key, v in loaded}
        assert sorted(key for key, _, _ in exact) == sorted(brute)  # every vector ranked, none twice
        assert all(abs(score - brute[key]) < 1e-5 for key, _, score in exact)
        assert [s for _, _, s in exact] == sorted((s for _, _, s in exact), reverse=True)
        # over it, the HNSW walk (tiny here, so it finds the same nearest ones)
        monkeypatch.setattr(pg_vectors, "EXACT_SCAN_MAX", 0)
        walked = await store.nearest_items(model, "messages", probe, [a], limit=5)
        assert walked is not None
        assert {c for _, c, _ in walked} == {a}
        top = [round(s, 4) for _, c, s in exact if c == a][:5]
        assert [round(s, 4) for _, _, s in walked] == top
    finally:
        await store.close()


async def _half_state(url: str) -> tuple[int, int, int]:
    """Message vectors, those without their half copy, those whose copy is not their embedding at half precision."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        row = await (
            await conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE embedding_half IS NULL), "
                "count(*) FILTER (WHERE embedding_half IS DISTINCT FROM embedding::halfvec) "
                "FROM message_vectors WHERE dim > 0"
            )
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


async def _top(store: PostgresStore, model: str, probe: bytes, conversations: list[int], limit: int) -> list[float]:
    found = await store.nearest_items(model, "messages", probe, conversations, limit=limit)
    assert found is not None
    return [round(score, 5) for _, _, score in found]


def _brute(loaded: list[tuple[int | str, bytes]], probe: bytes, limit: int) -> list[float]:
    return sorted((round(_cosine(probe, v), 5) for _, v in loaded), reverse=True)[:limit]


async def test_the_half_precision_first_pass_finds_the_exact_nearest_and_never_skips_a_row_without_its_copy(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every reach takes the two passes here, and the first keeps 26 of the conversation's 80 rows
    monkeypatch.setattr(pg_vectors, "FIRST_PASS_MIN", 0)
    monkeypatch.setattr(pg_vectors, "_FIRST_PASS_LEAST", 1)
    monkeypatch.setattr(pg_vectors, "FIRST_PASS_FACTOR", 1)
    store = await _store_with_pgvector(pg_url)
    try:
        embedder = HashEmbedder(64)
        model = index_model(embedder.model)
        a = await _messages(store, "a", _texts(80, "a"))
        await VectorBuilder(store, embedder, batch=32).run()
        assert (await _half_state(pg_url))[1:] == (0, 0)  # the build's writes carry their copies
        loaded = await store.load_item_vectors(model, "messages", a)
        for words in ("coffee tea london", "kube pod cert", "disk route cache queue", "a17 deploy"):
            probe = to_unit_blob(embedder.vector(words))
            assert await _top(store, model, probe, [a], 5) == _brute(loaded, probe, 5)
        # the first pass decides: the best row, given a copy that points the other way, is not found ...
        probe = to_unit_blob(embedder.vector("coffee tea london"))
        best = await store.nearest_items(model, "messages", probe, [a], limit=1)
        assert best is not None
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            await conn.execute(
                "UPDATE message_vectors SET embedding_half = (%s::vector)::halfvec WHERE message_id = %s",
                ("[" + ",".join("-1" if i % 2 else "1" for i in range(64)) + "]", best[0][0]),
            )
        tampered = await store.nearest_items(model, "messages", probe, [a], limit=1)
        assert tampered is not None and tampered[0][0] != best[0][0]
        # ... while a row without its copy (an upgrade in progress) is always ranked in full
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            await conn.execute("UPDATE message_vectors SET embedding_half = NULL WHERE message_id = %s", (best[0][0],))
        assert await store.nearest_items(model, "messages", probe, [a], limit=1) == best
    finally:
        await store.close()


async def test_a_store_built_before_the_half_copies_is_upgraded_a_batch_at_a_time_and_stays_exact(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not _pgvector_loads():
        pytest.skip("the embedded pgvector needs AVX2 and FMA, which this CPU lacks")
    monkeypatch.setattr(pg_vectors, "FIRST_PASS_MIN", 0)
    monkeypatch.setattr(pg_vectors, "_FIRST_PASS_LEAST", 1)
    monkeypatch.setattr(pg_vectors, "FIRST_PASS_FACTOR", 1)
    monkeypatch.setattr(pg_vectors, "UPGRADE_BATCH", 20)
    store = await _open(pg_url)
    try:
        embedder = HashEmbedder(64)
        model = index_model(embedder.model)
        a = await _messages(store, "a", _texts(50, "a"))
        await VectorBuilder(store, embedder, batch=32).run()  # no pgvector yet: the bytes alone
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            await conn.execute("CREATE EXTENSION vector")
        b = await _messages(store, "b", _texts(30, "b"))
        await VectorBuilder(store, embedder, batch=32).run()  # adds the columns, fills the 50 old rows
        assert await _half_state(pg_url) == (80, 0, 0)
        # a database of the version before: the column (and with it its indexes) gone
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            await conn.execute("ALTER TABLE message_vectors DROP COLUMN embedding_half")
            await conn.execute("ALTER TABLE summary_vectors DROP COLUMN IF EXISTS embedding_half")
        pg_vectors._READY.clear()
        loaded = [
            *await store.load_item_vectors(model, "messages", a),
            *await store.load_item_vectors(model, "messages", b),
        ]
        probe = to_unit_blob(embedder.vector("coffee tea london"))
        expected = _brute(loaded, probe, 6)
        assert await _top(store, model, probe, [a, b], 6) == expected  # the one-pass scan, as before
        builder = VectorBuilder(store, embedder, batch=32)
        upgraded: list[int] = []
        while True:
            assert await builder.step() == 0  # nothing to embed: each idle step upgrades one batch
            async with await psycopg.AsyncConnection.connect(pg_url) as conn:
                left = await (
                    await conn.execute("SELECT count(*) FROM message_vectors WHERE dim > 0 AND embedding_half IS NULL")
                ).fetchone()
            assert left is not None
            upgraded.append(int(left[0]))
            assert await _top(store, model, probe, [a, b], 6) == expected  # exact while partly upgraded
            if upgraded[-1] == 0 or len(upgraded) > 10:
                break
        assert upgraded == [60, 40, 20, 0]
        assert await _half_state(pg_url) == (80, 0, 0)
        assert await store.upgrade_vector_index() == 0
    finally:
        await store.close()


async def test_an_upgrade_that_cannot_take_its_lock_now_is_asked_again_later(pg_url: str) -> None:
    store = await _store_with_pgvector(pg_url, lock_timeout_ms=100)
    try:
        embedder = HashEmbedder(64)
        await _messages(store, "a", _texts(30, "a"))
        await VectorBuilder(store, embedder, batch=32).run()
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            await conn.execute("ALTER TABLE message_vectors DROP COLUMN embedding_half")
        builder = VectorBuilder(store, embedder, batch=32)
        async with _reading(pg_url, "message_vectors"):  # a long read: no ALTER now
            assert await store.upgrade_vector_index() == -1
            assert await builder.step() == 0
        assert await builder.step() == 0  # the builder asks again: this time the column is added and filled
        assert await _half_state(pg_url) == (30, 0, 0)
    finally:
        await store.close()


async def test_preparing_the_index_under_a_held_lock_falls_back_instead_of_failing(pg_url: str) -> None:
    store = await _store_with_pgvector(pg_url, lock_timeout_ms=100)
    try:
        await _messages(store, "a", _texts(10, "a"))
        async with _reading(pg_url, "message_vectors"):  # a long read: no ALTER now
            assert await store.prepare_vector_index("messages", 64) is False  # searched in memory, not an error
        assert await store.prepare_vector_index("messages", 64) is True
    finally:
        await store.close()


async def test_a_store_without_an_hnsw_index_is_not_asked_on_every_search(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No pgvector: the catalog is asked once, then again only after ABSENT_RECHECK_S (the index may come)."""
    store = await _open(pg_url)
    try:
        embedder = HashEmbedder(64)
        model = index_model(embedder.model)
        a = await _messages(store, "a", _texts(10, "a"))
        await VectorBuilder(store, embedder).run()
        probe = to_unit_blob(embedder.vector("coffee tea"))
        asked: list[str] = []
        one = pg_vectors._one

        async def counting(conn: pg_vectors.Connection, sql: str, params: tuple[object, ...] = ()) -> object:
            asked.append(sql)
            return await one(conn, sql, params)

        monkeypatch.setattr(pg_vectors, "_one", counting)
        assert await store.nearest_items(model, "messages", probe, [a], limit=5) is None
        looked = len(asked)
        assert looked >= 1
        for _ in range(3):
            assert await store.nearest_items(model, "messages", probe, [a], limit=5) is None
        assert len(asked) == looked  # within the window: not asked again
        monkeypatch.setattr(pg_vectors, "ABSENT_RECHECK_S", 0.0)
        assert await store.nearest_items(model, "messages", probe, [a], limit=5) is None
        assert len(asked) > looked  # the window passed: asked again
    finally:
        await store.close()


async def test_an_upgrade_copies_the_pgvector_columns_with_the_vectors(pg_url: str) -> None:
    """Rows copied from an older index format carry their ``embedding`` and half copy, as a fresh write would."""
    from lossless.memory.message_index import UNCAPPED
    from tests.test_memory_message_index import _SIZE, _agent_session, _expected_vectors

    store = await _store_with_pgvector(pg_url)
    try:
        conversations = await _agent_session(store)
        await VectorBuilder(store, HashEmbedder(max_chars=_SIZE), cap=UNCAPPED).run()
        upgrade = HashEmbedder(max_chars=_SIZE)
        builder = VectorBuilder(store, upgrade)
        await builder.run()
        assert upgrade.calls  # some texts changed ...
        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            rows = await (
                await conn.execute(
                    "SELECT vector, embedding::text, (embedding_half = embedding::halfvec) FROM message_vectors "
                    "WHERE model = %s AND dim > 0 ORDER BY message_id, chunk",
                    (builder.model,),
                )
            ).fetchall()
        want = [v for c in conversations for _, v in await _expected_vectors(store, c, upgrade)]
        assert len(rows) == len(want) > len([t for batch in upgrade.calls for t in batch])  # ... most were copied
        for (vector, embedding, halved), blob in zip(rows, want, strict=True):
            values = [float(v) for v in embedding.strip("[]").split(",")]
            assert bytes(vector) == blob == struct.pack(f"<{len(values)}f", *values) and halved
    finally:
        await store.close()
