"""The PostgreSQL backend beyond the shared contract: many writers, advisory locks, blobs in the database.

The contract itself runs against PostgreSQL in tests/contract (the ``store`` fixture); these tests
prove what only matters with a shared server: 16 concurrent writers (tasks, and separate
processes) on one conversation while compaction and assembly run lose and duplicate nothing and
leave the lineage whole; two hosts never compact one conversation at once.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

import anyio
import pytest

from lossless import ContextEngine, Message
from lossless.errors import ConfigError, ConflictError, InputError, StoreError
from lossless.ports import BatchSearchStore, PreparedMessage, SearchRequest, SessionContextStore
from lossless.records import Summary, ToolPart, utcnow
from lossless.stores import blob_store_for, open_store
from lossless.stores.postgres import PostgresStore

from . import pg
from .stress.crash import concurrent_writers, kill_rounds, verify

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
SMALL = {
    "fresh_tail_count": 4,
    "leaf_chunk_tokens": 300,
    "leaf_target_tokens": 80,
    "condensed_target_tokens": 80,
    "leaf_min_fanout": 3,
    "condensed_min_fanout": 3,
    "condensed_min_fanout_hard": 2,
}


def text(writer: int, n: int) -> str:
    return f"writer {writer} message {n}: " + " ".join(f"w{writer}x{n}y{i}" for i in range(25))


async def counts_by_key(url: str) -> dict[str, int]:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url) as conn:
        rows = await (
            await conn.execute("SELECT event_key, count(*) FROM messages WHERE event_key IS NOT NULL GROUP BY 1")
        ).fetchall()
    return {str(k): int(n) for k, n in rows}


async def test_sixteen_writers_while_compaction_and_assembly_run(pg_url: str) -> None:
    """16 tasks over two engines (two connection pools) write to one conversation at once."""
    per_writer = 12
    async with (
        await ContextEngine.open(pg_url, **SMALL) as first,  # type: ignore[arg-type]
        await ContextEngine.open(pg_url, **SMALL) as second,  # type: ignore[arg-type]
    ):
        await first.ingest("shared", Message.user("start", event_key="start", created_at=T0))
        done = anyio.Event()
        assembled: list[int] = []
        compactions: list[str] = []

        async def writer(w: int) -> None:
            engine = first if w % 2 else second
            for n in range(per_writer):
                when = T0 + timedelta(seconds=1 + n * 16 + w)
                role = "user" if n % 2 else "assistant"
                await engine.ingest("shared", Message(role, text(w, n), created_at=when, event_key=f"{w}:{n}"))
                if n == 3:  # a replayed turn must not duplicate
                    await engine.ingest("shared", Message(role, text(w, n), created_at=when, event_key=f"{w}:{n}"))

        async def compactor(engine: ContextEngine) -> None:
            while not done.is_set():
                result = await engine.compact("shared", force=True)
                compactions.append(result.stop_reason)
                await anyio.sleep(0.01)

        async def assembler() -> None:
            while not done.is_set():
                context = await second.assemble("shared", token_budget=4_000)
                assembled.append(len(context.messages))
                await anyio.sleep(0.01)

        async with anyio.create_task_group() as background:
            background.start_soon(compactor, first)
            background.start_soon(compactor, second)
            background.start_soon(assembler)
            async with anyio.create_task_group() as writers:
                for w in range(16):
                    writers.start_soon(writer, w)
            done.set()

        final = await first.compact("shared", force=True)
        report = await first.check_integrity()
        assert report.ok, report.problems
    counts = await counts_by_key(pg_url)
    expected = {"start"} | {f"{w}:{n}" for w in range(16) for n in range(per_writer)}
    assert set(counts) == expected  # nothing lost
    assert all(n == 1 for n in counts.values())  # nothing duplicated
    assert compactions and assembled
    assert final.tokens_after < final.tokens_before or final.stop_reason in ("nothing_eligible", "budget_met")


async def test_separate_processes_write_and_compact_one_database(pg_url: str) -> None:
    outcome = await anyio.to_thread.run_sync(lambda: verify(pg_url, concurrent_writers(pg_url, 4, 30)))
    assert len(outcome.acknowledged) == 4 * 30
    assert outcome.lost == [] and outcome.duplicates == [] and outcome.problems == []


async def deadlocks(url: str) -> int:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url) as conn:
        row = await (
            await conn.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_concurrent_ingests_with_large_files_never_deadlock(pg_url: str) -> None:
    """A message with a stored-aside file locks its conversation the way a plain append does.

    (Inserting the file used to take a KEY SHARE lock on the conversation and the append then a FOR
    UPDATE one: two writers each holding the first and waiting for the second is a deadlock, which
    under load outlasted the conflict retries and lost a process's writes.)
    """
    before = await deadlocks(pg_url)
    async with await ContextEngine.open(pg_url, large_file_token_threshold=200) as engine:  # type: ignore[arg-type]
        await engine.ingest("files", Message.user("start"))

        async def writer(w: int) -> None:
            for n in range(6):
                body = "\n".join(f"writer {w} row {n}.{i}: " + "value " * 12 for i in range(60))
                await engine.ingest("files", Message.user(f'see <file name="w{w}-{n}.txt">\n{body}\n</file>'))

        async with anyio.create_task_group() as group:
            for w in range(8):
                group.start_soon(writer, w)
        assert len(await engine.store.list_large_files((await engine.conversation("files")).id)) == 48
    assert await deadlocks(pg_url) == before


async def test_kill_9_loses_no_acknowledged_message(pg_url: str) -> None:
    outcome = await anyio.to_thread.run_sync(lambda: verify(pg_url, kill_rounds(pg_url, 2, seed=3, max_delay=1.0)))
    assert outcome.kills == 2 and outcome.acknowledged
    assert outcome.lost == [] and outcome.duplicates == [] and outcome.problems == []


async def test_two_hosts_never_hold_one_conversations_lock(pg_url: str) -> None:
    a = await open_store(pg_url)
    b = await open_store(pg_url)
    try:
        assert isinstance(a, PostgresStore) and isinstance(b, PostgresStore)
        async with a._db.conversation_lock(7) as taken:
            assert taken
            async with b._db.conversation_lock(7, wait=False) as other:
                assert not other  # held by the other host
            async with b._db.conversation_lock(8, wait=False) as unrelated:
                assert unrelated  # another conversation is free
        async with b._db.conversation_lock(7, wait=False) as after:
            assert after  # released with the block
    finally:
        await a.close()
        await b.close()


async def test_compaction_under_another_hosts_lock_is_a_retryable_conflict_not_a_wait(pg_url: str) -> None:
    """Spec: lock contention is a retryable conflict; no caller waits for another host's slow summarizer."""
    holder = await open_store(pg_url)
    try:
        async with (
            await ContextEngine.open(pg_url, postgres_lock_timeout_ms=200, **SMALL) as engine,  # type: ignore[arg-type]
        ):
            stored = await engine.ingest_batch("locked", [Message.user(text(0, n) * 20) for n in range(30)])
            assert stored.conversation_id is not None
            assert isinstance(holder, PostgresStore)
            async with holder._db.conversation_lock(stored.conversation_id):
                started = anyio.current_time()
                with pytest.raises(ConflictError, match=f"conversation {stored.conversation_id} is being compacted"):
                    await engine.compact("locked", force=True)
                assert anyio.current_time() - started < 5
                # The turn is stored and answered at once; the other host is doing the compaction.
                turn = await engine.after_turn("locked", [Message.user("one more")], token_budget=500)
                assert turn.error is None and turn.ingest.stored and turn.compaction is None
            done = await engine.compact("locked", force=True)  # free again: compaction runs
            assert done.summaries
    finally:
        await holder.close()


async def test_concurrent_compactions_of_one_conversation_make_one_lineage(pg_url: str) -> None:
    async with (
        await ContextEngine.open(pg_url, **SMALL) as first,  # type: ignore[arg-type]
        await ContextEngine.open(pg_url, **SMALL) as second,  # type: ignore[arg-type]
    ):
        await first.ingest_batch(
            "s",
            [Message.user(text(0, n), created_at=T0 + timedelta(minutes=n), event_key=str(n)) for n in range(60)],
        )
        async with anyio.create_task_group() as group:
            group.start_soon(first.compact, "s")
            group.start_soon(second.compact, "s")
        assert (await first.check_integrity()).ok
        conversation = (await first.conversations())[0].id
        lineage = await first.store.get_lineage(conversation)
    covered = [ref for sources in lineage.values() for ref in sources if isinstance(ref, int)]
    assert len(covered) == len(set(covered))  # no message summarised twice


async def test_nul_characters_are_stored_verbatim(pg_url: str) -> None:
    """PostgreSQL text cannot hold U+0000: the backend escapes it (and its escape character) both ways."""
    texts = ["bad \x00 byte", "\ue000", "\ue000\ue002", "\x00\ue000\ue001\x00", "plain"]
    async with await ContextEngine.open(pg_url) as engine:
        await engine.ingest_batch("s", [Message.user(t, event_key=f"k{i}") for i, t in enumerate(texts)])
        assert [m.content for m in await engine.messages("s")] == texts
        found = await engine.grep("bad", mode="full_text", all_conversations=True)
        assert [h.snippet for h in found.hits] == ["bad \x00 byte"]


async def test_a_sessions_context_in_one_read_is_what_the_separate_reads_give(pg_url: str) -> None:
    """read_session_context (one round trip) against find_conversation, get_context and the batched reads."""
    store = await PostgresStore.open(pg_url)
    try:
        assert isinstance(store, SessionContextStore)
        conversation = await store.get_or_create_conversation(agent_id="main", session_id="s")
        other = await store.get_or_create_conversation(agent_id="main", session_id="other")
        call = Message.from_parts("assistant", [ToolPart(call_id="c1", name="read", input={"p": 1})])
        batch = [Message.user(f"m{i}") for i in range(6)] + [call, Message.tool_result("c1", "body")]
        await store.append_messages(conversation.id, [PreparedMessage(m, 5, T0) for m in batch])
        await store.append_messages(other.id, [PreparedMessage(Message.user("elsewhere"), 5, T0)])

        def summary(sid: str, depth: int, tokens: int) -> Summary:
            return Summary(
                id=sid,
                conversation_id=conversation.id,
                kind="leaf" if depth == 0 else "condensed",
                depth=depth,
                content=f"summary {sid}",
                token_count=2,
                created_at=T0,
                earliest_at=T0,
                latest_at=T0 + timedelta(hours=1),
                source_token_count=tokens,
            )

        entries = await store.get_context(conversation.id)
        await store.replace_with_summary(summary("sum_00000000000000a1", 0, 10), entries[0:2])
        entries = await store.get_context(conversation.id)
        await store.replace_with_summary(summary("sum_00000000000000a2", 0, 10), entries[1:3])
        leaves = [e for e in await store.get_context(conversation.id) if e.kind == "summary"]
        await store.replace_with_summary(summary("sum_00000000000000a3", 1, 4), leaves)

        async def separately() -> tuple[object, ...]:
            found = await store.find_conversation(agent_id="main", session_id="s")
            assert found is not None
            entries = await store.get_context(found.id)
            messages = await store.get_messages_by_id([e.message_id for e in entries if e.message_id is not None])
            ids = [e.summary_id for e in entries if e.summary_id is not None]
            summaries = await store.get_summaries(ids)
            return (
                found,
                tuple(entries),
                {m.id: m for m in messages},
                {s.id: s for s in summaries},
                (await store.get_summary_parents(ids)),
            )

        read = await store.read_session_context(agent_id="main", session_id="s")
        assert read is not None
        expected = await separately()
        assert (read.conversation, read.entries, read.messages, read.summaries, read.parents) == expected
        assert [e.kind for e in read.entries] == ["summary", "message", "message", "message", "message"]
        assert read.parents == {"sum_00000000000000a3": ("sum_00000000000000a1", "sum_00000000000000a2")}
        assert any(isinstance(p, ToolPart) for m in read.messages.values() for p in m.parts)
        assert all(m.conversation_id == conversation.id for m in read.messages.values())
        assert await store.read_session_context(agent_id="main", session_id="missing") is None
        assert await store.read_session_context(agent_id="other-agent", session_id="s") is None
        # Inside atomic(): the block's own transaction, its uncommitted writes included.
        async with store.atomic():
            await store.append_messages(conversation.id, [PreparedMessage(Message.user("inside"), 5, T0)])
            inside = await store.read_session_context(agent_id="main", session_id="s")
            assert inside is not None and len(inside.entries) == len(read.entries) + 1
            assert inside.messages[inside.entries[-1].ref].content == "inside"  # type: ignore[index]
    finally:
        await store.close()


async def test_searches_in_one_request_are_each_what_its_own_search_gives(pg_url: str) -> None:
    """search_many (one round trip) against search, request by request; a failed batch leaves the pool clean."""
    store = await PostgresStore.open(pg_url, pool_size=1)  # one connection: a dirty one would be reused
    try:
        assert isinstance(store, BatchSearchStore)
        conversation = await store.get_or_create_conversation(agent_id="main", session_id="s")
        texts = ["deploy failed", "the deployment", "rollout done", "deploy again", "Traceback here"] * 4
        await store.append_messages(conversation.id, [PreparedMessage(Message.user(t), 3, T0) for t in texts])
        ids = (conversation.id,)
        requests = [
            SearchRequest("messages", ids, words='"deploy"', limit=3),
            SearchRequest("summaries", ids, words='"deploy"', limit=3),
            SearchRequest("messages", ids, words='"rollout" OR "traceback"', order="relevance", limit=5, offset=1),
            SearchRequest("messages", ids, literals=("Traceback",), trigrams='"Traceback"', limit=50),
            SearchRequest("messages", (), words='"deploy"'),  # no conversation: nothing, no statement
            SearchRequest("messages", ids, words='"never-resolved-before"', limit=3),
        ]
        together = await store.search_many(requests)
        assert together == [await store.search(r) for r in requests]
        assert [len(rows) for rows in together] == [3, 0, 5, 4, 0, 0]
        assert all(r.rank is not None for r in together[2])
        with pytest.raises(InputError, match="relevance"):
            await store.search_many([SearchRequest("messages", ids, order="relevance")])
        with pytest.raises(StoreError):  # a statement failing inside the pipeline's transaction
            await store._db.read_all([("SELECT 1", ()), ("SELECT 1 / 0", ()), ("SELECT 2", ())])
        assert await store.search_many(requests[:1]) == together[:1]  # the connection was rolled back
    finally:
        await store.close()


async def unindexed(url: str) -> int:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url) as conn:
        row = await (await conn.execute("SELECT count(*) FROM messages WHERE content_tsv IS NULL")).fetchone()
    assert row is not None
    return int(row[0])


async def test_a_batch_by_copy_keeps_nul_and_refuses_a_lone_surrogate_whole(pg_url: str) -> None:
    """Batches from 32 messages on go by COPY: the same escaping, and a bad text writes nothing of the batch."""
    texts = [f"row {i} \x00 nul \ue000 esc" if i % 5 == 0 else f"row {i} tab\tand\nnewline \\ back" for i in range(40)]
    async with await ContextEngine.open(pg_url) as engine:
        await engine.ingest_batch("s", [Message.user(t, event_key=f"k{i}") for i, t in enumerate(texts)])
        assert [m.content for m in await engine.messages("s")] == texts
        # The engine repairs lone surrogates; the store refuses them, and the whole batch with them.
        conversation = (await engine.conversations())[0].id
        bad = [Message.user(f"more {i}", event_key=f"b{i}") for i in range(39)] + [Message.user("x \ud800 y")]
        with pytest.raises(InputError, match="surrogate"):
            await engine.store.append_messages(conversation, [PreparedMessage(m, 1, T0) for m in bad])
        assert len(await engine.messages("s")) == len(texts)
        # Replayed keys are skipped, in a COPY-sized batch as in a small one.
        again = await engine.ingest_batch("s", [Message.user(t, event_key=f"k{i}") for i, t in enumerate(texts)])
        assert again.duplicates == len(texts) and not again.stored


async def test_search_finds_messages_the_indexer_has_not_reached(pg_url: str) -> None:
    """Words, regexes and relevance find rows whose word index is not filled yet, the same as indexed ones."""
    import psycopg

    words = ["alpha deploy failed", "beta rollout", "gamma Deployment done", "the and of", "delta Traceback here"]
    async with await ContextEngine.open(pg_url) as engine:
        await engine.ingest_batch("s", [Message.user(f"{w} {i}", event_key=f"k{i}") for i, w in enumerate(words * 10)])
        await engine.store.wait_indexed()
        assert await unindexed(pg_url) == 0

        async def results() -> list[object]:
            out: list[object] = []
            for pattern, mode, sort in (
                ("deploy", "full_text", "recency"),
                ("deploy", "full_text", "relevance"),
                ('"the and"', "full_text", "recency"),
                ("Traceback", "regex", "recency"),
                ("(?i)ROLLOUT", "regex", "recency"),
                ("deploy nothingsuch", "full_text", "recency"),  # no message has both: any-word fallback
            ):
                found = await engine.grep(pattern, mode=mode, sort=sort, all_conversations=True, limit=100)  # type: ignore[arg-type]
                out.append([(h.ref, h.snippet) for h in found.hits])
            return out

        indexed = await results()
        assert all(indexed)
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            # Half the rows back to "not indexed yet" (the state right after an append).
            await conn.execute("UPDATE messages SET content_tsv = NULL WHERE message_id % 2 = 0")
        assert await unindexed(pg_url) == 25
        assert await results() == indexed
        await engine.store.wait_indexed()
        assert await unindexed(pg_url) == 0
        assert await results() == indexed


async def test_the_background_indexer_fills_the_word_index_after_an_append(pg_url: str) -> None:
    async with await ContextEngine.open(pg_url) as engine:
        await engine.ingest_batch("s", [Message.user(f"message {i}", event_key=f"k{i}") for i in range(1200)])
        with anyio.fail_after(120):  # waits for a condition; the bound only stops a hung test
            while True:  # a condition another thread makes true: polled (there is no event to wait on)
                if not await unindexed(pg_url):
                    break
                await anyio.sleep(0.05)


async def test_a_database_of_the_previous_schema_upgrades_and_keeps_its_word_index(
    pg_server: pg.Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 122 on a database written at version 20: stored rows stay searchable, new ones get indexed."""
    import psycopg

    from lossless.stores.postgres import connection, schema

    url = pg_server.create_database(template=None)
    try:
        monkeypatch.setattr(connection, "MIGRATIONS", tuple(m for m in schema.MIGRATIONS if m.version <= 20))
        async with await ContextEngine.open(url) as engine:
            await engine.ingest_batch("s", [Message.user(f"old deploy {i}", event_key=f"o{i}") for i in range(40)])
        monkeypatch.setattr(connection, "MIGRATIONS", schema.MIGRATIONS)
        async with await psycopg.AsyncConnection.connect(url) as conn:
            versions = [r[0] for r in await (await conn.execute("SELECT version FROM lcm_migrations")).fetchall()]
            assert max(versions) == 20
        async with await ContextEngine.open(url) as engine:
            assert await unindexed(url) == 0  # the generated values were kept
            await engine.ingest_batch("s", [Message.user(f"new deploy {i}", event_key=f"n{i}") for i in range(40)])
            found = await engine.grep("deploy", mode="full_text", all_conversations=True, limit=200)
            assert len(found.hits) == 80
            assert len((await engine.grep("old deploy 3", mode="regex", all_conversations=True)).hits) == 11
            await engine.store.wait_indexed()
            assert await unindexed(url) == 0
            assert len((await engine.grep("deploy", mode="full_text", all_conversations=True, limit=200)).hits) == 80
            assert (await engine.store.stats()).schema_version == max(m.version for m in schema.MIGRATIONS)
    finally:
        pg_server.drop_database(url)


async def test_message_text_is_stored_uncompressed_from_migration_123_and_reads_back_the_same(
    pg_server: pg.Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows written before migration 123 stay compressed, rows after are not; both read back (and grep) the same."""
    import psycopg

    from lossless.retrieval.grep import snippet
    from lossless.stores.postgres import connection, schema

    def long_text(tag: str) -> str:  # compresses well; multibyte; the word far inside
        return " ".join(f"{tag} line {i} ünïcødé ✓" for i in range(800)) + f" the needle of {tag} " + "tail " * 100

    url = pg_server.create_database(template=None)
    try:
        monkeypatch.setattr(connection, "MIGRATIONS", tuple(m for m in schema.MIGRATIONS if m.version <= 122))
        async with await ContextEngine.open(url) as engine:
            await engine.ingest_batch("s", [Message.user(long_text("old"), event_key="old")])
        monkeypatch.setattr(connection, "MIGRATIONS", schema.MIGRATIONS)
        async with await ContextEngine.open(url) as engine:
            await engine.ingest_batch("s", [Message.user(long_text("new"), event_key="new")])
            async with await psycopg.AsyncConnection.connect(url) as conn:
                stored = await (
                    await conn.execute("SELECT pg_column_compression(content) FROM messages ORDER BY message_id")
                ).fetchall()
                storage = await (
                    await conn.execute(
                        "SELECT attstorage FROM pg_attribute "
                        "WHERE attrelid = 'messages'::regclass AND attname = 'content'"
                    )
                ).fetchone()
            assert [r[0] for r in stored] == ["pglz", None] and storage == ("e",)
            messages = await engine.messages("s")
            assert [m.content for m in messages] == [long_text("old"), long_text("new")]
            found = await engine.grep("needle", mode="full_text", all_conversations=True)
            assert [h.snippet for h in found.hits] == [
                snippet(m.content, m.content.find("needle"), m.content.find("needle") + 6) for m in reversed(messages)
            ]
    finally:
        pg_server.drop_database(url)


def test_the_sql_identifier_words_are_the_python_ones(pg_url: str) -> None:
    """``lcm_identifier_words`` (the word index's SQL) computes exactly :func:`lossless.text.identifier_words`."""
    import psycopg
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from lossless.text import identifier_words

    pieces = ["a", "b", "X", "YZ", "Http", "0", "9", "_", ".", "/", "\\", ":", "-", " ", "\n", "é", "数", "Ω", "'"]
    texts = st.lists(st.sampled_from(pieces), max_size=24).map("".join)
    with psycopg.connect(pg_url, autocommit=True) as conn:

        @settings(max_examples=60, deadline=None)
        @given(batch=st.lists(texts, min_size=1, max_size=25))
        def check(batch: list[str]) -> None:
            rows = conn.execute(
                "SELECT lcm_identifier_words(t) FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, n) ORDER BY n", (batch,)
            ).fetchall()
            assert [r[0] for r in rows] == [identifier_words(t) for t in batch]

        check()
        samples = ["outputHookMessage in /Users/x/cli/manual_commit_attribution.go", "golangci-lint", "plain words"]
        for text in samples:
            assert conn.execute("SELECT lcm_identifier_words(%s)", (text,)).fetchone() == (identifier_words(text),)


def test_a_text_array_literal_reads_back_every_text_exactly(pg_url: str) -> None:
    """:func:`~lossless.stores.postgres.statements.text_array` (the memory ids and words of the memory reads): any
    texts, quotes, backslashes, braces, commas, ``NULL``, empty strings, spaces and U+0000 included, come back as
    they were, as psycopg's own list adapter sends them."""
    import psycopg
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from lossless.stores.postgres.connection import nul_safe
    from lossless.stores.postgres.statements import text_array

    pieces = st.sampled_from(['"', "\\", "{", "}", ",", " ", "NULL", "'", "\x00", "\ue000", "é", "数", "a", "\n"])
    texts = st.one_of(st.text(st.characters(codec="utf-8")), st.lists(pieces, max_size=8).map("".join))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        nul_safe(conn)  # type: ignore[arg-type]

        @settings(max_examples=150, deadline=None)
        @given(batch=st.lists(texts, max_size=12))
        def check(batch: list[str]) -> None:
            row = conn.execute("SELECT %s::text[], %s::text[]", (text_array(batch), batch)).fetchone()
            assert row is not None and row[0] == batch == row[1]

        check()


async def test_the_word_index_of_identifiers_is_a_gin_indexed_column(pg_url: str) -> None:
    """Searches by an identifier's words use the GIN indexes of ``content_tsv`` (messages and summaries)."""
    import psycopg

    async with await ContextEngine.open(pg_url) as engine:
        notes = [Message.user(f"note {i}: set outputHookMessage{i}", event_key=f"k{i}") for i in range(50)]
        await engine.ingest_batch("s", notes)
        await engine.store.wait_indexed()
        found = await engine.grep("output hook message", mode="full_text", all_conversations=True, limit=100)
        assert len(found.hits) == 50
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute("SET enable_seqscan = off")
        for table in ("messages", "summaries"):
            plan = await (
                await conn.execute(
                    f"EXPLAIN SELECT 1 FROM {table} t WHERE t.content_tsv @@ to_tsquery('english', 'hook & messag')"
                )
            ).fetchall()
            assert any(f"{table}_tsv_gin_idx" in row[0] for row in plan), plan
        # The text without identifiers has the very tsvector it had before migration 124.
        same = await (
            await conn.execute(
                f"SELECT {schema_tsv('%(t)s')} = to_tsvector('english', left(%(t)s, 100000))",
                {"t": "the tests pass now, at 12:30 on 2026-11-26; don't"},
            )
        ).fetchone()
        assert same == (True,)


def schema_tsv(text_sql: str) -> str:
    """The word index expression of migration 124 over ``text_sql`` instead of the ``content`` column."""
    from lossless.stores.postgres.schema import TSV

    return TSV.replace("content", text_sql)


async def test_migration_124_reindexes_identifiers_of_existing_rows(
    pg_server: pg.Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store of migration 123: summaries get the new word index in the migration, messages in the background."""
    import psycopg

    from lossless.records import Summary
    from lossless.stores.postgres import connection, schema

    old_tsv = "to_tsvector('english'::regconfig, left(content, 100000))"
    url = pg_server.create_database(template=None)
    try:
        monkeypatch.setattr(connection, "MIGRATIONS", tuple(m for m in schema.MIGRATIONS if m.version <= 123))
        async with await ContextEngine.open(url) as engine:
            texts = [f"plain words {i}" for i in range(1200)] + ["we set outputHookMessage", "ran golangci-lint"]
            result = await engine.ingest_batch("s", [Message.user(t, event_key=f"k{i}") for i, t in enumerate(texts)])
            assert result.conversation_id is not None
            entries = await engine.store.get_context(result.conversation_id)
            now = utcnow()
            leaf = Summary(
                id="sum_0000000000000124",
                conversation_id=result.conversation_id,
                kind="leaf",
                depth=0,
                content="renamed parseHTTPHeaders",
                token_count=3,
                created_at=now,
                earliest_at=now,
                latest_at=now,
                source_token_count=sum(e.token_count for e in entries[:3]),
            )
            await engine.store.replace_with_summary(leaf, entries[:3])
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            # What the indexer of that version wrote (this code's indexer cannot run there).
            await conn.execute(f"UPDATE messages SET content_tsv = {old_tsv} WHERE content_tsv IS NULL")
        monkeypatch.setattr(connection, "MIGRATIONS", schema.MIGRATIONS)
        async with await ContextEngine.open(url) as engine:
            await engine.store.wait_indexed()  # also finishes the background pass over older messages
            for query, expected in (("output hook message", 1), ("golangci lint", 1), ("plain words 7", 1)):
                found = await engine.grep(query, mode="full_text", all_conversations=True)
                assert len(found.hits) == expected, query
            summaries = await engine.grep("parse headers", mode="full_text", scope="summaries", all_conversations=True)
            assert [h.ref for h in summaries.hits] == [leaf.id]
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            stale = await (
                await conn.execute(f"SELECT count(*) FROM messages WHERE content_tsv IS DISTINCT FROM {schema.TSV}")
            ).fetchone()
            mark = await (
                await conn.execute("SELECT value FROM lcm_meta WHERE key = %s", (schema.REDO_KEY,))
            ).fetchone()
            assert stale == (0,) and mark == ("0",)
    finally:
        pg_server.drop_database(url)


async def test_migration_125_indexes_the_identifier_words_of_stored_memories(
    pg_server: pg.Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store of migration 124: its memories' word index gains their identifiers' words in the migration."""
    from lossless.memory.records import MemoryDraft
    from lossless.stores import memory_store_for
    from lossless.stores.postgres import connection, schema

    url = pg_server.create_database(template=None)
    try:
        monkeypatch.setattr(connection, "MIGRATIONS", tuple(m for m in schema.MIGRATIONS if m.version <= 124))
        async with await ContextEngine.open(url) as engine:
            memories = memory_store_for(engine.store)
            await memories.insert(
                [MemoryDraft("Edited diff.go (in computeDiff).", category="events")], [("m", ())], now=utcnow()
            )
            assert await memories.keyword_search("compute", None, limit=5) == []
        monkeypatch.setattr(connection, "MIGRATIONS", schema.MIGRATIONS)
        async with await ContextEngine.open(url) as engine:
            memories = memory_store_for(engine.store)
            await memories.insert(
                [MemoryDraft("Renamed parseHTTPHeaders.", category="events")], [("m", ())], now=utcnow()
            )
            for query in ("compute", "compute diff", "computeDiff", "parse HTTP headers", "parse headers"):
                assert len(await memories.keyword_search(query, None, limit=5)) == 1, query
    finally:
        pg_server.drop_database(url)


def test_the_sql_escaped_words_are_the_python_ones(pg_url: str) -> None:
    """``lcm_escaped_words`` (the messages' word index) computes exactly :func:`lossless.text.escaped_words`."""
    import psycopg
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from lossless.text import escaped_words

    pieces = ["\\", "n", "t", "r", "b", "f", "u", "x", "Ab", "9", " ", '"', "_", "\n", "é", "数", "'"]
    texts = st.lists(st.sampled_from(pieces), max_size=30).map("".join)
    with psycopg.connect(pg_url, autocommit=True) as conn:

        @settings(max_examples=60, deadline=None)
        @given(batch=st.lists(texts, min_size=1, max_size=25))
        def check(batch: list[str]) -> None:
            rows = conn.execute(
                "SELECT lcm_escaped_words(t) FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, n) ORDER BY n", (batch,)
            ).fetchall()
            assert [r[0] for r in rows] == [escaped_words(t) for t in batch]

        check()
        sample = json.dumps({"old_string": "func a() {\n\tif x {\n\t\tGetOrCreateID(id)\n\t}\n}"})
        assert conn.execute("SELECT lcm_escaped_words(%s)", (sample,)).fetchone() == ("if\nGetOrCreateID",)


async def test_migration_126_reindexes_the_words_escapes_hide_in_existing_messages(
    pg_server: pg.Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store of migration 125: its messages gain the words JSON escapes hide, in the background."""
    import psycopg

    from lossless.stores.postgres import connection, schema

    url = pg_server.create_database(template=None)
    edit = {"old_string": "func a() {\n\t\treturn\n}", "new_string": "func a() {\n\t\tGetOrCreateID(x)\n}"}
    try:
        monkeypatch.setattr(connection, "MIGRATIONS", tuple(m for m in schema.MIGRATIONS if m.version <= 125))
        async with await ContextEngine.open(url) as engine:
            call = Message.from_parts("assistant", [ToolPart(call_id="c1", name="Edit", input=edit)])
            await engine.ingest_batch("s", [Message.user("plain words"), call])
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            # What the indexer of that version wrote (this code's indexer cannot run there).
            await conn.execute(f"UPDATE messages SET content_tsv = {schema.SUMMARY_TSV} WHERE content_tsv IS NULL")
        monkeypatch.setattr(connection, "MIGRATIONS", schema.MIGRATIONS)
        async with await ContextEngine.open(url) as engine:
            await engine.store.wait_indexed()  # also finishes the background pass over older messages
            for query in ("GetOrCreateID", "return", "plain words"):
                found = await engine.grep(query, mode="full_text", all_conversations=True)
                assert len(found.hits) == 1, query
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            stale = await (
                await conn.execute(f"SELECT count(*) FROM messages WHERE content_tsv IS DISTINCT FROM {schema.TSV}")
            ).fetchone()
            assert stale == (0,)
    finally:
        pg_server.drop_database(url)


async def test_the_background_reindex_waits_for_no_lock(pg_url: str) -> None:
    """A batch of the re-index pass skips a row another transaction holds (a delete), so it is in no deadlock."""
    import psycopg

    from lossless.stores.postgres.indexer import REDO_BATCH
    from lossless.stores.postgres.schema import REDO_KEY

    old_tsv = "to_tsvector('english'::regconfig, left(content, 100000))"
    async with await ContextEngine.open(pg_url) as engine:
        texts = [f"set outputHookMessage{i}" for i in range(4)]
        await engine.ingest_batch("s", [Message.user(t, event_key=f"k{i}") for i, t in enumerate(texts)])
        await engine.store.wait_indexed()
    with psycopg.connect(pg_url, autocommit=True) as conn, psycopg.connect(pg_url) as holder:
        conn.execute(f"UPDATE messages SET content_tsv = {old_tsv}")
        conn.execute(
            "INSERT INTO lcm_meta (key, value) SELECT %s, max(message_id)::text FROM messages "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (REDO_KEY,),
        )
        held = holder.execute("SELECT min(message_id) FROM messages").fetchone()
        assert held is not None
        # The lock a delete of the row takes, held (the transaction stays open).
        holder.execute("SELECT 1 FROM messages WHERE message_id = %s FOR UPDATE", held)
        conn.execute("SET lock_timeout = '5s'")  # a wait would fail the statement instead of hanging
        assert conn.execute(REDO_BATCH, (500, 500)).fetchone() == (0, 3)
        holder.rollback()
        hook = "to_tsquery('english', 'hook')"
        assert conn.execute(f"SELECT count(*) FROM messages WHERE content_tsv @@ {hook}").fetchone() == (3,)


async def test_large_files_can_live_in_the_database(pg_url: str) -> None:
    payload = "\n".join(f"line {i} of a big log file with some words" for i in range(4000)).encode()
    async with await ContextEngine.open(
        pg_url, large_files_storage="database", large_file_token_threshold=1_000
    ) as engine:
        result = await engine.ingest("s", Message.user(f'<file name="big.log">{payload.decode()}</file>'))
        stored = (await engine.messages("s"))[0]
        assert "[LCM File: file_" in stored.content and len(stored.content) < len(payload) // 10
        (file,) = await engine.store.list_large_files(result.conversation_id or 0)
        assert file.storage_uri.startswith("db:")
        assert await engine.blobs.get(file.storage_uri) == payload
        assert hashlib.sha256(payload).hexdigest() == file.content_hash
        with pytest.raises(InputError):
            await engine.blobs.get("db:1/../../etc/passwd")
        with pytest.raises(StoreError, match="missing"):
            await engine.blobs.get(f"db:{result.conversation_id}/{'0' * 64}")


async def test_database_blob_storage_needs_postgres(tmp_path: object) -> None:
    from lossless.config import Config

    with pytest.raises(ConfigError, match="PostgreSQL"):
        blob_store_for(Config(large_files_storage="database"))


async def test_unreachable_server_is_a_clear_store_error(tmp_path: object) -> None:
    with pytest.raises(StoreError, match="cannot connect"):
        await open_store("postgresql://nobody@/nowhere?host=/nonexistent-socket-dir&connect_timeout=1")


def test_a_killed_test_runs_server_is_reaped_by_the_next_start() -> None:
    """A SIGKILLed owner leaves its embedded server running; the next start stops and removes it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from . import pg as pg_module

    env = {k: v for k, v in os.environ.items() if k != "LCM_TEST_POSTGRES_URL"}  # always the embedded server
    child = subprocess.Popen(
        [sys.executable, "-c", "from tests import pg; s = pg.start(); print(s.admin_url, flush=True); input()"],
        cwd=str(pg_module.pathlib.Path(__file__).resolve().parent.parent),
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    url = child.stdout.readline().strip()
    folder = pg_module.pathlib.Path(url.split("host=")[1]).parent
    assert (folder / "pgdata" / "postmaster.pid").exists()
    os.kill(child.pid, signal.SIGKILL)
    child.communicate()
    assert (folder / "pgdata" / "postmaster.pid").exists()  # the orphan server is still running
    pg_module.reap_orphans()
    deadline = time.monotonic() + 30
    while folder.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not folder.exists()


def test_a_full_disk_on_the_server_says_so() -> None:
    import psycopg.errors

    from lossless.stores.postgres.connection import translate

    error = translate(psycopg.errors.DiskFull("could not extend file base/16384/2619: No space left on device"))
    assert isinstance(error, StoreError) and "disk is full" in str(error) and "No space left" in str(error)
