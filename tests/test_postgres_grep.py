"""grep on PostgreSQL in one round trip (:class:`~lossless.ports.ReachSearchStore`), with the same results.

Round trips are counted on the wire: the store talks to the server through a proxy that counts the
protocol messages that end a request (``Sync`` of the extended protocol, ``Query`` of the simple
one), so the count does not depend on timing or on the driver's internals.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg.conninfo
import pytest

from lossless import ContextEngine, Message
from lossless.errors import InputError, NotFoundError
from lossless.memory.hashing import HashEmbedder
from lossless.memory.messages import MessageSearch
from lossless.memory.scopes import MemoryCaller
from lossless.memory.service import MemoryService
from lossless.ports import ReachSearchStore, Store
from lossless.retrieval import AccessDenied, Caller, GrepOptions, GrepResult, Retriever
from lossless.stores import memory_store_for
from lossless.stores.postgres import PostgresStore

pytestmark = pytest.mark.anyio

_SSL_REQUEST = 80877103
_GSSENC_REQUEST = 80877104


class WireCounter:
    """Requests a client sent through the proxy: each ``Sync`` or ``Query`` waits for the server's answer."""

    def __init__(self) -> None:
        self.round_trips = 0

    def reset(self) -> None:
        self.round_trips = 0


async def _client_to_server(client: asyncio.StreamReader, server: asyncio.StreamWriter, counter: WireCounter) -> None:
    """Forward the client's messages, counting those that end a request."""

    async def forward(size: int) -> bytes:
        data = await client.readexactly(size)
        server.write(data)
        await server.drain()
        return data

    try:
        while True:  # the untyped startup packet (or an SSL / GSS encryption request before it)
            length = int.from_bytes(await forward(4), "big")
            code = int.from_bytes((await forward(length - 4))[:4], "big")
            if code not in (_SSL_REQUEST, _GSSENC_REQUEST):
                break
        while True:
            head = await forward(5)
            await forward(int.from_bytes(head[1:], "big") - 4)
            if head[:1] in (b"S", b"Q"):
                counter.round_trips += 1
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        server.close()


async def _server_to_client(server: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
    try:
        while data := await server.read(1 << 16):
            client.write(data)
            await client.drain()
    except ConnectionError:
        pass
    finally:
        client.close()


@asynccontextmanager
async def counting_proxy(url: str, folder: Path) -> AsyncIterator[tuple[str, WireCounter]]:
    """A URL reaching ``url``'s server through a Unix-socket proxy, and the counter of its round trips."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    host = str(info.get("host") or "localhost")
    port = int(info.get("port") or 5432)
    counter = WireCounter()
    pumps: set[asyncio.Task[None]] = set()

    async def serve(client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        if host.startswith("/"):
            server_in, server_out = await asyncio.open_unix_connection(f"{host}/.s.PGSQL.{port}")
        else:
            server_in, server_out = await asyncio.open_connection(host, port)
        back = asyncio.create_task(_server_to_client(server_in, client_out))
        pumps.add(back)
        await _client_to_server(client_in, server_out, counter)
        await back

    listener = await asyncio.start_unix_server(serve, path=str(folder / ".s.PGSQL.5432"))
    proxied = {**info, "host": str(folder), "port": "5432", "sslmode": "disable", "gssencmode": "disable"}
    try:
        yield psycopg.conninfo.make_conninfo("", **proxied), counter
    finally:
        listener.close()
        await listener.wait_closed()
        for pump in pumps:
            pump.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)


class PlainStore:
    """A store that reads the reach first and searches after (no :class:`ReachSearchStore`)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name == "search_with_links":
            raise AttributeError(name)
        return getattr(self._store, name)


def same(a: GrepResult, b: GrepResult) -> None:
    assert [(h.scope, h.ref, h.conversation_id, h.snippet) for h in a.hits] == [
        (h.scope, h.ref, h.conversation_id, h.snippet) for h in b.hits
    ]
    assert (a.conversations, a.more, a.message, a.notes) == (b.conversations, b.more, b.message, b.notes)


ALICE = Caller("alice", session_key="alice:chat")
OPERATOR = Caller("alice")


async def grep_both(
    fast: Retriever, plain: Retriever, caller: Caller, options: GrepOptions, **reach: Any
) -> GrepResult:
    found = await fast.grep(caller, options, **reach)
    same(found, await plain.grep(caller, options, **reach))
    return found


async def test_a_grep_takes_one_round_trip_once_its_reach_is_known(pg_url: str, tmp_path: Path) -> None:
    """One Sync per grep once the caller's reach is known; a changed reach costs one more and is found."""
    writer = await ContextEngine.open(pg_url, agent_id="alice")
    bob = await ContextEngine.open(pg_url, agent_id="bob")
    try:
        a = await writer.ingest_batch(
            "a-main", [Message.user(f"deploy step {i} of the parent task") for i in range(30)], session_key="alice:chat"
        )
        a2 = await writer.ingest_batch("a-other", [Message.user("deploy the other one")], session_key="alice:other")
        b = await bob.ingest_batch("b-main", [Message.user("deploy bob's secret")], session_key="bob:chat")
        await writer.compact("a-main", force=True)
        await writer.store.wait_indexed()  # then the reader's store starts no indexer of its own
        async with counting_proxy(pg_url, tmp_path) as (url, counter):
            store = await PostgresStore.open(url, pool_size=1)
            try:
                assert isinstance(store, ReachSearchStore)
                fast, plain = Retriever(store), Retriever(PlainStore(store))  # type: ignore[arg-type]

                async def check(caller: Caller, options: GrepOptions, trips: int, **reach: Any) -> GrepResult:
                    counter.reset()
                    found = await fast.grep(caller, options, **reach)
                    assert counter.round_trips == trips, (caller, options, reach)
                    same(found, await plain.grep(caller, options, **reach))
                    return found

                words = GrepOptions("deploy", mode="full_text", limit=10)
                for caller, reach in (
                    (OPERATOR, {"all_conversations": True}),
                    (ALICE, {}),
                    (ALICE, {"conversation_id": a.conversation_id}),
                    (ALICE, {"all_conversations": True}),
                ):
                    await fast.grep(caller, words, **reach)  # learns the reach (and the word's tsquery)
                    found = await check(caller, words, 1, **reach)
                    counter.reset()
                    await plain.grep(caller, words, **reach)
                    # The agent's conversations, its session's conversation (for a session), then the searches
                    # (and once, psycopg's preparing of a statement run for the fifth time on a connection).
                    assert counter.round_trips >= (2 if caller.session_key is None else 3), (caller, reach)
                    assert found.hits and b.conversation_id not in {h.conversation_id for h in found.hits}
                # Either scope alone, a regex, and a word searched for the first time (its tsquery: once).
                await check(ALICE, GrepOptions("deploy", scope="summaries"), 1)
                await check(ALICE, GrepOptions("deploy", mode="full_text", scope="messages"), 1)
                assert (await check(ALICE, GrepOptions("dep.oy"), 1)).hits
                await check(ALICE, GrepOptions("parent", mode="full_text"), 2)

                # The reach grows (a new conversation of alice): the guess is wrong once, the new one is found.
                new = await writer.ingest_batch("a-new", [Message.user("deploy the newest")], session_key="alice:new")
                await writer.store.wait_indexed()
                found = await check(OPERATOR, words, 2, all_conversations=True)
                assert found.hits[0].conversation_id == new.conversation_id
                await check(OPERATOR, words, 1, all_conversations=True)
                # A sub-agent's conversation joins the caller's family.
                await writer.prepare_subagent_spawn("a-main", "a-child", child_session_key="alice:child")
                await writer.ingest_batch("a-child", [Message.user("deploy from the child")], session_key="alice:child")
                await writer.store.wait_indexed()
                found = await check(ALICE, words, 2)
                assert any("child" in h.snippet for h in found.hits)
                assert a2.conversation_id not in {h.conversation_id for h in found.hits}
                await check(Caller("alice", session_key="alice:child"), words, 2)  # its first grep: reach unknown

                # Denials and errors are the same, and leave no guess behind that could leak.
                with pytest.raises(AccessDenied):
                    await fast.grep(ALICE, words, conversation_id=b.conversation_id)
                with pytest.raises(AccessDenied):
                    await fast.grep(ALICE, words, conversation_id=b.conversation_id)
                with pytest.raises(InputError, match="no conversation of its own"):
                    await fast.grep(Caller("alice", session_key="nobody"), words)
                with pytest.raises(InputError, match="not a valid regular expression"):
                    await fast.grep(ALICE, GrepOptions("(unclosed"))
                bob_sees = await grep_both(fast, plain, Caller("bob", session_key="bob:chat"), words)
                assert {h.conversation_id for h in bob_sees.hits} == {b.conversation_id}
                # Nothing matching: the message, and the any-word fallback, as on the plain path.
                await grep_both(fast, plain, ALICE, GrepOptions("zebra", mode="full_text"))
                await grep_both(fast, plain, ALICE, GrepOptions("zebra deploy", mode="full_text"))
            finally:
                await store.close()
    finally:
        await bob.dispose()
        await writer.dispose()


async def test_a_hybrid_grep_reads_its_keyword_page_with_its_reach(pg_url: str, tmp_path: Path) -> None:
    """A ``hybrid`` grep sends its keyword search's first page with the reach, as a plain grep does: the same hits."""
    writer = await ContextEngine.open(pg_url, agent_id="alice", memory_embedder="hash")
    try:
        texts = ["we should deploy the parent task on friday", "the deploy failed on the parent host", "lunch?"]
        stored = await writer.ingest_batch("a-main", [Message.user(t) for t in texts * 5], session_key="alice:chat")
        await writer.ingest_batch("a-other", [Message.user("deploy the other one")], session_key="alice:other")
        while await writer.index_step():
            pass
        await writer.store.wait_indexed()
        async with counting_proxy(pg_url, tmp_path) as (url, counter):
            reader = await PostgresStore.open(url, pool_size=1)
            try:
                memory = MemoryService(memory_store_for(reader), HashEmbedder(), MemoryCaller.agent("alice"))
                search = MessageSearch(reader, memory)
                fast = Retriever(reader, semantic=lambda: search)
                plain = Retriever(PlainStore(reader), semantic=lambda: search)  # type: ignore[arg-type]
                for options, caller, reach in (
                    (
                        GrepOptions("why did the deploy fail", mode="hybrid", scope="messages", sort="relevance"),
                        ALICE,
                        {},
                    ),
                    (GrepOptions("parent deploy", mode="hybrid", scope="both"), OPERATOR, {"all_conversations": True}),
                    (
                        GrepOptions("friday deploy", mode="hybrid", scope="messages", limit=3),
                        OPERATOR,
                        {"conversation_id": stored.conversation_id, "all_conversations": True},
                    ),
                ):
                    await fast.grep(caller, options, **reach)  # learns the reach (and the words' tsqueries)
                    await plain.grep(caller, options, **reach)
                    counter.reset()
                    found = await fast.grep(caller, options, **reach)
                    trips = counter.round_trips
                    counter.reset()
                    same(found, await plain.grep(caller, options, **reach))
                    # The plain path reads the links, the session's conversation (for a session), then the keyword
                    # search of each scope (one at a time): the one round trip of the reach holds them all.
                    saved = (2 if options.scope == "both" else 1) + (1 if caller.session_key else 0)
                    assert trips == counter.round_trips - saved, (options, caller)
                    assert found.hits
            finally:
                await reader.close()
    finally:
        await writer.dispose()


async def test_a_conversation_named_by_its_session_id_is_looked_up_with_the_reach(pg_url: str, tmp_path: Path) -> None:
    """``session=``: the conversation's session id is read in the reach's round trip; the same hits and errors."""
    writer = await ContextEngine.open(pg_url, agent_id="alice")
    bob = await ContextEngine.open(pg_url, agent_id="bob")
    try:
        a = await writer.ingest_batch("a-main", [Message.user(f"deploy step {i}") for i in range(5)])
        await writer.ingest_batch("a-other", [Message.user("deploy the other one")])
        await bob.ingest_batch("b-main", [Message.user("deploy bob's secret")])
        await writer.store.wait_indexed()
        async with counting_proxy(pg_url, tmp_path) as (url, counter):
            store = await PostgresStore.open(url, pool_size=1)
            try:
                fast, plain = Retriever(store), Retriever(PlainStore(store))  # type: ignore[arg-type]
                words = GrepOptions("deploy", mode="full_text", limit=10)
                for caller, wide in ((OPERATOR, True), (ALICE, True)):
                    await fast.grep(caller, words, session="a-main", all_conversations=wide)  # learns the reach
                    counter.reset()
                    found = await fast.grep(caller, words, session="a-main", all_conversations=wide)
                    assert counter.round_trips == 1, (caller, wide)
                    by_id = await plain.grep(caller, words, conversation_id=a.conversation_id, all_conversations=wide)
                    by_session = await plain.grep(caller, words, session="a-main", all_conversations=wide)
                    same(found, by_id)
                    same(found, by_session)
                    assert {h.conversation_id for h in found.hits} == {a.conversation_id}
                # Digits name an id; an unknown session, and another agent's, are not found on either path.
                same(
                    await fast.grep(OPERATOR, words, session=str(a.conversation_id), all_conversations=True),
                    await fast.grep(OPERATOR, words, conversation_id=a.conversation_id, all_conversations=True),
                )
                for retriever in (fast, plain):
                    with pytest.raises(AccessDenied):  # found, but outside the caller's family
                        await retriever.grep(ALICE, words, session="a-main")
                    for session in ("nowhere", "b-main"):
                        with pytest.raises(NotFoundError, match=session):
                            await retriever.grep(OPERATOR, words, session=session, all_conversations=True)
                with pytest.raises(InputError, match="not both"):
                    await fast.grep(OPERATOR, words, session="a-main", conversation_id=a.conversation_id)
                # Through the engine: a session id names the conversation (one lookup fewer), as before.
                hits = (await writer.grep("deploy", mode="full_text", conversation="a-main")).hits
                assert hits and {h.conversation_id for h in hits} == {a.conversation_id}
                with pytest.raises(NotFoundError):
                    await writer.grep("deploy", mode="full_text", conversation="b-main")
            finally:
                await store.close()
    finally:
        await bob.dispose()
        await writer.dispose()


async def test_the_newest_matches_are_the_same_whatever_the_recent_window(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A word search looks among the newest ids first (``RECENT_WINDOW``); any window gives the rows of none.

    The matches are spread so that a window holds all of them, some, or none (then the older rows are
    searched); paging (``below``), a time window, stemmed and stop-word terms, several terms, rows the
    indexer has not reached yet, and long multibyte texts with the word deep inside are all covered.
    """
    from datetime import UTC, datetime, timedelta

    import psycopg

    from lossless.ports import SearchRequest
    from lossless.retrieval.query import FullTextQuery, parse_full_text
    from lossless.stores.postgres import retrieval

    t0 = datetime(2026, 1, 5, tzinfo=UTC)
    filler = " ".join(f"filler{i} ünïcødé" for i in range(1_500))  # about 27,000 characters, multibyte

    def text(i: int) -> str:
        if i % 97 == 0:
            return f"{filler} the parent process, deep inside a long text {i}"
        if (i < 150 and i % 5 == 0) or i in (230, 231, 290):
            return f"message {i} names the parent task"
        if i % 11 == 0:
            return f"message {i}: what it needed, and the parents it needs"
        return f"message {i} about something else entirely"

    engine = await ContextEngine.open(pg_url)
    try:
        ids = []
        for name, rows in (("a", range(200)), ("b", range(200, 300))):
            batch = [Message.user(text(i), created_at=t0 + timedelta(minutes=i), event_key=f"k{i}") for i in rows]
            ids.append((await engine.ingest_batch(name, batch)).conversation_id)
        await engine.store.wait_indexed()
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            # Rows the indexer has not reached yet are found by the search's other part.
            await conn.execute("UPDATE messages SET content_tsv = NULL WHERE seq % 13 = 0")
            keys = [r[0] for r in await (await conn.execute("SELECT message_id FROM messages ORDER BY 1")).fetchall()]
        store = engine.store
        reach = tuple(i for i in ids if i is not None)
        found: dict[tuple[object, ...], int] = {}
        for query in ("parent", "needed", "parent OR needs", '"the parent"', "the", "zebra"):
            parsed = parse_full_text(query)
            assert isinstance(parsed, FullTextQuery)
            for limit in (1, 4, 30, 201):
                for below in (None, keys[160], keys[40]):
                    for since in (None, t0 + timedelta(minutes=120)):
                        request = SearchRequest(
                            scope="messages", conversation_ids=reach, words=parsed.fts_expression(),
                            limit=limit, below=below, since=since,
                        )  # fmt: skip
                        monkeypatch.setattr(retrieval, "RECENT_WINDOW", 0)
                        expected = await store.search(request)
                        for window in (1, 3, 40, 150, 100_000):
                            monkeypatch.setattr(retrieval, "RECENT_WINDOW", window)
                            # The newest id: unknown (a subquery), stale, or read by the search before.
                            for hint in (None, keys[50], "read"):
                                if hint != "read":
                                    monkeypatch.setattr(store, "_newest_message_id", hint)
                                rows = await store.search(request)
                                assert rows == expected, (query, limit, below, since, window, hint)
                        found[query, limit, below, since] = len(expected)
        # The cases above include windows holding every match, some of them, and none.
        parents = sum("parent" in text(i) for i in range(300))  # "parents" too: the same stem
        assert found["parent", 30, None, None] == 30 and found["parent", 201, None, None] == parents
        assert found["parent", 4, keys[40], None] == 4 and found["zebra", 30, None, None] == 0
        # Through the whole grep (hits, snippets, "more"): a window of 3 ids against none.
        for query in ("parent", "needed OR parent"):
            monkeypatch.setattr(retrieval, "RECENT_WINDOW", 0)
            whole = await engine.grep(query, mode="full_text", all_conversations=True, limit=20)
            monkeypatch.setattr(retrieval, "RECENT_WINDOW", 3)
            same(await engine.grep(query, mode="full_text", all_conversations=True, limit=20), whole)
            assert any("parent process, deep inside" in h.snippet for h in whole.hits)
    finally:
        await engine.dispose()
