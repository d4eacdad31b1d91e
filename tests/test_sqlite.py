"""SQLite backend specifics: file set-up, migrations, several processes on one file, crash safety."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from lossless.errors import ConfigError, ConflictError, InputError, SchemaError, StoreError
from lossless.ports import PreparedMessage
from lossless.records import Message, utcnow
from lossless.stores import open_store, sqlite_path_from_url
from lossless.stores.sqlite import SQLiteStore
from lossless.stores.sqlite.schema import MIGRATIONS

pytestmark = pytest.mark.anyio


async def test_new_file_is_wal_and_migrated(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "lcm.db"
    store = await SQLiteStore.open(path)
    await store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    versions = [r[0] for r in conn.execute("SELECT version FROM lcm_migrations ORDER BY version")]
    assert versions == [m.version for m in MIGRATIONS]
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
    assert {
        "conversations",
        "messages",
        "message_parts",
        "summaries",
        "summary_messages",
        "summary_parents",
        "context_items",
        "large_files",
        "conversation_bootstrap_state",
        "lcm_meta",
    } <= tables
    # Re-opening applies nothing twice.
    await (await SQLiteStore.open(path)).close()
    assert conn.execute("SELECT count(*) FROM lcm_migrations").fetchone()[0] == len(MIGRATIONS)
    conn.close()


async def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "lcm.db"
    await (await SQLiteStore.open(path)).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO lcm_migrations VALUES (999, 'from the future', '2030-01-01')")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaError, match=r"version 999 .* upgrade lossless-context"):
        await SQLiteStore.open(path)


async def test_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello, this is not SQLite " * 100)
    with pytest.raises(StoreError, match="not a usable SQLite database"):
        await SQLiteStore.open(path)


async def test_search_index_catches_up_in_its_own_file(tmp_path: Path) -> None:
    store = await SQLiteStore.open(tmp_path / "lcm.db")
    conv = await store.get_or_create_conversation(agent_id="main", session_id="s")
    texts = ("the running tests", "静默模式 测试", "other words")
    stored = await store.append_messages(conv.id, [PreparedMessage(Message.user(t), 1, utcnow()) for t in texts])
    with anyio.fail_after(30):
        await store.wait_indexed()
    await store.close()
    index = sqlite3.connect(tmp_path / "lcm.db-index")
    ids = [m.id for m in stored.stored]
    assert index.execute("SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'run'").fetchall() == [(ids[0],)]
    trigram = index.execute("SELECT rowid FROM messages_trigram WHERE messages_trigram MATCH '\"静默模\"'").fetchall()
    assert trigram == [(ids[1],)]
    assert index.execute("SELECT watermark FROM index_state WHERE source = 'messages'").fetchone()[0] == ids[-1]
    index.close()


async def test_a_store_closed_right_after_writing_leaves_its_rows_indexed(tmp_path: Path) -> None:
    """A short process (``lcm import``) closes the store moments after its last write: before, the thread was
    stopped before its first batch, and every later search scanned those rows unranked."""
    store = await SQLiteStore.open(tmp_path / "lcm.db")
    conv = await store.get_or_create_conversation(agent_id="main", session_id="s")
    stored = await store.append_messages(
        conv.id, [PreparedMessage(Message.user(f"words number {i}"), 1, utcnow()) for i in range(300)]
    )
    await store.close()  # no wait_indexed: closing lets the thread catch up
    index = sqlite3.connect(tmp_path / "lcm.db-index")
    assert (
        index.execute("SELECT watermark FROM index_state WHERE source = 'messages'").fetchone()[0]
        == stored.stored[-1].id
    )
    assert index.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'number'").fetchone()[0] == 300
    index.close()


async def test_a_relative_path_is_resolved_once_and_indexed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``sqlite:///lcm.db`` (relative) once crashed the indexer thread, which needs a file URI."""
    monkeypatch.chdir(tmp_path)
    store = await open_store("sqlite:///relative.db")
    monkeypatch.chdir("/")  # a later chdir must not move the store or its companion files
    conv = await store.get_or_create_conversation(agent_id="main", session_id="s")
    await store.append_messages(conv.id, [PreparedMessage(Message.user("findable words"), 1, utcnow())])
    with anyio.fail_after(30):
        await store.wait_indexed()  # raises if the index thread failed
    assert store.url == f"sqlite:///{tmp_path / 'relative.db'}"
    await store.close()
    assert (tmp_path / "relative.db-index").is_file()


async def test_index_is_rebuilt_when_it_does_not_match(tmp_path: Path) -> None:
    path = tmp_path / "lcm.db"
    store = await SQLiteStore.open(path)
    conv = await store.get_or_create_conversation(agent_id="main", session_id="s")
    await store.append_messages(conv.id, [PreparedMessage(Message.user("alpha beta"), 1, utcnow())])
    with anyio.fail_after(30):
        await store.wait_indexed()
    await store.close()
    # Pretend the index saw rows the store does not have (an older backup was restored).
    index = sqlite3.connect(tmp_path / "lcm.db-index")
    index.execute("UPDATE index_state SET watermark = 999 WHERE source = 'messages'")
    index.commit()
    index.close()
    store = await SQLiteStore.open(path)
    with anyio.fail_after(30):
        await store.wait_indexed()
    await store.close()
    index = sqlite3.connect(tmp_path / "lcm.db-index")
    assert index.execute("SELECT watermark FROM index_state WHERE source = 'messages'").fetchone()[0] == 1
    assert index.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'alpha'").fetchone()[0] == 1
    index.close()
    # Deleting the index file is always safe: it is made again.
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"lcm.db-index{suffix}").unlink(missing_ok=True)
    store = await SQLiteStore.open(path)
    with anyio.fail_after(30):
        await store.wait_indexed()
    await store.close()


async def test_an_index_of_the_previous_version_is_rebuilt_with_identifier_words(tmp_path: Path) -> None:
    """Upgrading: an index file written before identifiers were split (version 2) is re-indexed in the background,
    with the words JSON escapes hide in messages (version 4) too."""
    from lossless.stores.sqlite.index import INDEX_VERSION

    path = tmp_path / "lcm.db"
    store = await SQLiteStore.open(path)
    conv = await store.get_or_create_conversation(agent_id="main", session_id="s")
    texts = ["we set outputHookMessage", "plain words", '[tool call: Edit] {"new_string": "a\\n\\tGetOrCreateID(x)"}']
    await store.append_messages(conv.id, [PreparedMessage(Message.user(t), 1, utcnow()) for t in texts])
    with anyio.fail_after(30):
        await store.wait_indexed()
    await store.close()
    # Make the index what version 2 wrote: the text alone.
    index = sqlite3.connect(tmp_path / "lcm.db-index")
    index.execute("INSERT INTO messages_fts(messages_fts) VALUES ('delete-all')")
    index.executemany("INSERT INTO messages_fts(rowid, content) VALUES (?, ?)", list(enumerate(texts, start=1)))
    index.execute("UPDATE index_meta SET value = '2' WHERE key = 'version'")
    index.commit()
    assert index.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'hook'").fetchone() == (0,)
    index.close()
    store = await SQLiteStore.open(path)
    with anyio.fail_after(30):
        await store.wait_indexed()
    await store.close()
    index = sqlite3.connect(tmp_path / "lcm.db-index")
    assert index.execute("SELECT value FROM index_meta WHERE key = 'version'").fetchone() == (str(INDEX_VERSION),)
    cases = (("hook", [(1,)]), ("outputhookmessage", [(1,)]), ("plain", [(2,)]), ("getorcreateid", [(3,)]))
    for query, rows in cases:
        assert index.execute("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (query,)).fetchall() == rows
    index.close()


async def test_migration_125_indexes_the_identifier_words_of_stored_memories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store of migration 116: its memories are re-indexed with their identifiers' words, new ones too."""
    from lossless.memory.records import MemoryDraft
    from lossless.stores import memory_store_for
    from lossless.stores.sqlite import connection

    path = tmp_path / "lcm.db"
    monkeypatch.setattr(connection, "MIGRATIONS", tuple(m for m in MIGRATIONS if m.version <= 116))
    store = await SQLiteStore.open(path)
    await memory_store_for(store).insert(
        [MemoryDraft("The assistant edited diff.go (in computeDiff).", category="events")], [("m", ())], now=utcnow()
    )
    assert await memory_store_for(store).keyword_search("compute", None, limit=5) == []
    await store.close()
    monkeypatch.setattr(connection, "MIGRATIONS", MIGRATIONS)
    store = await SQLiteStore.open(path)
    try:
        memories = memory_store_for(store)
        (added,) = await memories.insert(
            [MemoryDraft("Renamed parseHTTPHeaders.", category="events")], [("m", ())], now=utcnow()
        )
        for query in ("compute", "compute diff", "computeDiff", "parse HTTP headers", "parse headers"):
            assert len(await memories.keyword_search(query, None, limit=5)) == 1, query
        await memories.delete([added.memory_id])
        assert await memories.keyword_search("parse headers", None, limit=5) == []
    finally:
        await store.close()
    main = sqlite3.connect(path)
    try:  # a plain connection (no lcm_indexed_text) reads the index: the stored memory is in it once
        assert main.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'compute'").fetchone() == (1,)
    finally:
        main.close()


async def test_deleted_and_rewritten_rows_leave_no_identifier_words_in_the_index(tmp_path: Path) -> None:
    """The contentless word tables are given the same indexed text on delete as on insert."""
    from dataclasses import replace

    from lossless.records import Summary

    path = tmp_path / "lcm.db"
    store = await SQLiteStore.open(path)
    conv = await store.get_or_create_conversation(agent_id="main", session_id="s")
    texts = ["we set outputHookMessage", "ran golangci-lint on session_state.go", "keep me", '{"a": "\\tGetID(x)"}']
    await store.append_messages(conv.id, [PreparedMessage(Message.user(t), 1, utcnow()) for t in texts])
    entries = await store.get_context(conv.id)
    now = utcnow()
    leaf = Summary(
        id="sum_0000000000000001",
        conversation_id=conv.id,
        kind="leaf",
        depth=0,
        content="renamed parseHTTPHeaders",
        token_count=3,
        created_at=now,
        earliest_at=now,
        latest_at=now,
        source_token_count=sum(e.token_count for e in entries[:2]),
    )
    await store.replace_with_summary(leaf, entries[:2])
    with anyio.fail_after(30):
        await store.wait_indexed()

    def count(table: str, query: str) -> int:
        index = sqlite3.connect(tmp_path / "lcm.db-index")
        try:
            return int(index.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (query,)).fetchone()[0])
        finally:
            index.close()

    assert count("summaries_fts", "parse AND headers") == 1
    assert await store.rewrite_summary(replace(leaf, content="renamed readJSONBody"), replaces=leaf.content)
    assert count("summaries_fts", "parse OR headers OR parsehttpheaders") == 0
    assert count("summaries_fts", "json AND body") == 1
    assert (count("messages_fts", "hook"), count("messages_fts", "golangci AND lint")) == (1, 1)
    assert count("messages_fts", "getid") == 1  # a word a JSON escape hid
    other = await store.get_or_create_conversation(agent_id="main", session_id="other")
    await store.append_messages(other.id, [PreparedMessage(Message.user("other outputHookMessage"), 1, utcnow())])
    with anyio.fail_after(30):
        await store.wait_indexed()
    assert await store.delete_conversations([conv.id]) == 1
    await store.close()
    assert count("messages_fts", "hook") == 1  # the other conversation's message only
    assert count("messages_fts", "golangci OR lint OR session OR state OR keep OR getid OR tgetid") == 0
    assert count("summaries_fts", "json OR body OR readjsonbody OR renamed") == 0


async def test_the_wal_stays_short_during_a_long_burst_of_single_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no pause in the writes, the index thread's passive checkpoints alone never let the WAL start
    over: it grew by gigabytes over 100,000 single-message writes and every commit slowed down."""
    from lossless.stores.sqlite import index as index_module

    monkeypatch.setattr(index_module, "RESTART_FRAMES", 64)  # 256 KB instead of 64 MB
    monkeypatch.setattr(index_module, "_CHECKPOINT_SECONDS", 0.01)
    path = tmp_path / "lcm.db"
    wal = tmp_path / "lcm.db-wal"
    store = await SQLiteStore.open(path)
    conv = await store.get_or_create_conversation(agent_id="main", session_id="s")
    text = "words " * 500  # 3 KB: a page of its own, plus the index pages, for every write
    count, largest = 10_000, 0
    for i in range(count):
        message = Message.user(f"{i} {text}", event_key=str(i))
        await store.append_messages(conv.id, [PreparedMessage(message, 1, utcnow())])
        if i % 50 == 0:
            largest = max(largest, wal.stat().st_size)
    # Unbounded, the WAL would hold every page written: about six per write (270 MB here); kept short,
    # it holds what the writes add between two checkpoints of the index thread (about 10 MB here).
    assert largest < count * 4096 * 2
    assert await store.count_messages(conv.id) == count
    index = store._db.index
    assert index is not None and index.failure is None
    await store.close()


async def test_lone_surrogates_are_refused_not_crashing(tmp_path: Path) -> None:
    store = await SQLiteStore.open(tmp_path / "lcm.db")
    conv = await store.get_or_create_conversation(agent_id="main", session_id="s")
    with pytest.raises(InputError, match="lone surrogate"):
        await store.append_messages(conv.id, [PreparedMessage(Message.user("bad \ud800"), 1, utcnow())])
    assert await store.count_messages(conv.id) == 0
    await store.close()


def test_sqlite_urls() -> None:
    assert sqlite_path_from_url("sqlite:///rel/lcm.db") == "rel/lcm.db"
    assert sqlite_path_from_url("sqlite:////abs/lcm.db") == "/abs/lcm.db"
    assert sqlite_path_from_url("sqlite:///~/lcm.db") == "~/lcm.db"
    for bad in ("sqlite://host/x.db", "sqlite:///", "sqlite:///:memory:", "file:///x.db"):
        with pytest.raises(ConfigError):
            sqlite_path_from_url(bad)


async def test_open_store_rejects_unknown_schemes() -> None:
    with pytest.raises(ConfigError, match="unsupported database URL"):
        await open_store("mysql://x/y")


WRITER = textwrap.dedent(
    """
    import sys, anyio
    from lossless.stores.sqlite import SQLiteStore
    from lossless.ports import PreparedMessage
    from lossless.records import Message, utcnow

    async def main(path, name, count):
        store = await SQLiteStore.open(path)
        conv = await store.get_or_create_conversation(agent_id="main", session_id="shared")
        for i in range(count):
            m = Message.user(f"{name}-{i}", event_key=f"{name}-{i}")
            await store.append_messages(conv.id, [PreparedMessage(m, 1, utcnow())])
            print(f"{name}-{i}", flush=True)
        await store.close()

    anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
    """
)


def stored_contents(path: Path) -> list[str]:
    async def read() -> list[str]:
        store = await SQLiteStore.open(path)
        try:
            conv = await store.find_conversation(agent_id="main", session_id="shared")
            assert conv is not None
            messages = await store.get_messages(conv.id)
            assert [m.seq for m in messages] == list(range(1, len(messages) + 1))
            return [m.content for m in messages]
        finally:
            await store.close()

    return anyio.run(read)


def create(path: Path) -> None:
    async def make() -> None:
        await (await SQLiteStore.open(path)).close()

    anyio.run(make)


def test_several_processes_write_one_file(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    create(path)
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"p{n}", "150"], stdout=subprocess.DEVNULL)
        for n in range(4)
    ]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    contents = stored_contents(path)
    assert len(contents) == 600
    assert len(set(contents)) == 600


def test_killed_writer_loses_no_acknowledged_message(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
    create(path)
    with subprocess.Popen([sys.executable, "-c", WRITER, str(path), "k", "100000"], stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        acknowledged = [proc.stdout.readline().decode().strip() for _ in range(300)]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    stored = stored_contents(path)
    assert stored[: len(acknowledged)] == acknowledged
    assert len(stored) == len(set(stored))
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


async def test_a_held_write_lock_gives_a_retryable_conflict(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    store = await SQLiteStore.open(path, busy_timeout_ms=100)
    conv = await store.get_or_create_conversation(agent_id="main", session_id="s")
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(ConflictError) as caught:
            await store.append_messages(conv.id, [PreparedMessage(Message.user("x"), 1, utcnow())])
        assert caught.value.retryable
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert len((await store.append_messages(conv.id, [PreparedMessage(Message.user("x"), 1, utcnow())])).stored) == 1
    await store.close()


async def test_cancelled_transaction_rolls_back(tmp_path: Path) -> None:
    store = await SQLiteStore.open(tmp_path / "c.db")
    conv = await store.get_or_create_conversation(agent_id="main", session_id="s")
    with anyio.move_on_after(0.2):
        async with store.atomic():
            await store.append_messages(conv.id, [PreparedMessage(Message.user("never"), 1, utcnow())])
            await anyio.sleep(5)
    assert await store.count_messages(conv.id) == 0
    # The store is still usable.
    assert len((await store.append_messages(conv.id, [PreparedMessage(Message.user("ok"), 1, utcnow())])).stored) == 1
    await store.close()


async def test_a_lower_numbered_migration_that_lands_later_still_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration numbers are handed out to parallel work; 5 may ship before 3, and 3 must then run."""
    from lossless.stores.sqlite import connection
    from lossless.stores.sqlite.schema import Migration

    path = tmp_path / "lcm.db"
    await (await SQLiteStore.open(path)).close()
    later = Migration(3, "lands after 5", ("CREATE TABLE late_arrival (x INTEGER)",))
    monkeypatch.setattr(connection, "MIGRATIONS", tuple(sorted((*MIGRATIONS, later), key=lambda m: m.version)))
    await (await SQLiteStore.open(path)).close()
    await (await SQLiteStore.open(path)).close()  # and only once
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM late_arrival").fetchone() == (0,)
    assert [r[0] for r in conn.execute("SELECT version FROM lcm_migrations ORDER BY version")] == sorted(
        {m.version for m in MIGRATIONS} | {3}
    )
    conn.close()


async def test_a_full_disk_says_so_and_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """SQLITE_FULL (here: the database at its max_page_count, as on a full disk) is reported as such."""
    store = await open_store(f"sqlite:///{tmp_path / 'full.db'}")
    assert isinstance(store, SQLiteStore)
    try:
        conv = (await store.get_or_create_conversation(agent_id="main", session_id="s")).id
        first = await store.append_messages(conv, [PreparedMessage(Message.user("kept"), 1, utcnow())])
        writer = store._db._writer
        assert writer is not None
        pages = writer.execute("PRAGMA page_count").fetchone()[0]
        writer.execute(f"PRAGMA max_page_count = {pages + 2}")
        big = [PreparedMessage(Message.user(f"{i} " + "x" * 20_000), 5000, utcnow()) for i in range(20)]
        with pytest.raises(StoreError, match="the disk is full") as caught:
            await store.append_messages(conv, big)
        assert "no transaction is active" not in str(caught.value)
        with pytest.raises(StoreError, match="the disk is full"):
            async with store.atomic():  # the same inside one transaction of several calls
                await store.append_messages(conv, big)
        with pytest.raises(StoreError, match="rolled back"):
            async with store.atomic():  # an error caught inside the block: the block still writes nothing
                with pytest.raises(StoreError, match="the disk is full"):
                    await store.append_messages(conv, big)
                await store.append_messages(conv, [PreparedMessage(Message.user("lost"), 1, utcnow())])
        assert [m.content for m in await store.get_messages(conv)] == ["kept"]
        assert first.stored[0].content == "kept"
        writer.execute("PRAGMA max_page_count = 1073741823")  # space again: writes go on
        more = await store.append_messages(conv, [PreparedMessage(Message.user("after"), 1, utcnow())])
        assert more.stored[0].seq == 2
    finally:
        await store.close()
