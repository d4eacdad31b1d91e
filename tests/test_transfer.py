"""``lcm migrate``: a whole SQLite store copied into PostgreSQL, verified, resumable."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from lossless import ContextEngine, Message
from lossless.cli import cli
from lossless.ports import SearchVectorStore
from lossless.stores.transfer import TABLES

from .conftest import ROOT

SAMPLE = ROOT / "examples" / "sample-session.jsonl"
# Memories are mined and copied with their vectors, embedded by the hash embedder (like the search
# vectors below): which model made the vectors is nothing to the copy, and e5 took half the time.
SETTINGS: dict[str, object] = {
    "fresh_tail_count": 8,
    "large_file_token_threshold": 500,
    "memory_auto_extract": True,
    "memory_embedder": "hash",
}


async def build_source(url: str) -> dict[str, object]:
    """A store with everything in it: an imported session, summaries, a large file, memories, a forked child."""
    async with await ContextEngine.open(url, **SETTINGS) as engine:  # type: ignore[arg-type]
        imported = await engine.bootstrap(SAMPLE)
        await engine.compact(imported.conversation_id or 0, force=True)
        body = "\n".join(f"row {i}: value {i * 7}" for i in range(600))
        await engine.after_turn(
            "files",
            [
                Message.user(f'I prefer tabs over spaces. <file name="table.csv">{body}</file>'),
                Message.assistant("Noted."),
            ],
            token_budget=32_000,
        )
        await engine.prepare_subagent_spawn("files", "files-child")
        await engine.ingest("files-child", Message.user("child says hello"))
        from lossless.memory.hashing import HashEmbedder
        from lossless.memory.message_index import VectorBuilder

        assert isinstance(engine.store, SearchVectorStore)
        await VectorBuilder(engine.store, HashEmbedder()).run()  # search vectors go along (a fast model here)
        summaries, _ = await engine.summaries(imported.conversation_id or 0)
        files = await engine.files("files")
        return {
            "messages": [(m.id, m.content) for m in await engine.messages(imported.conversation_id or 0)],
            "summaries": sorted(s.id for s in summaries),
            "file": files[0].id,
            "file_bytes": await engine.read_file(files[0].id),
            "memories": len(await engine.memory().list()),
        }


def migrate(source: str, target: str) -> tuple[int, dict[str, object]]:
    result = CliRunner().invoke(cli, ["migrate", "--from", source, "--to", target, "--json"], catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.slow
def test_migrate_copies_everything_and_verifies(tmp_path: Path, pg_url: str) -> None:
    source = f"sqlite:///{tmp_path / 'src.db'}"
    before = anyio.run(build_source, source)
    code, report = migrate(source, pg_url)
    assert code == 0, report
    assert report["ok"] and report["integrity"]["problems"] == []
    tables = {t["table"]: t for t in report["tables"]}
    assert set(tables) >= {"conversations", "messages", "message_parts", "summaries", "context_items", "memories"}
    assert all(t["source"] == t["target"] for t in tables.values())
    assert tables["messages"]["copied"] == tables["messages"]["source"] > 100
    assert report["blobs_copied"] == tables["large_files"]["source"] >= 1
    assert tables["compaction_events"]["copied"] == tables["summaries"]["source"] >= 1
    assert tables["message_vectors"]["copied"] >= tables["messages"]["source"]
    assert tables["summary_vectors"]["copied"] >= tables["summaries"]["source"]

    async def read_back() -> None:
        async with await ContextEngine.open(pg_url, **SETTINGS) as engine:  # type: ignore[arg-type]
            (imported,) = [c for c in await engine.conversations() if c.source == "claude-code"]
            assert [(m.id, m.content) for m in await engine.messages(imported.id)] == before["messages"]
            summaries, _ = await engine.summaries(imported.id)
            assert sorted(s.id for s in summaries) == before["summaries"]
            events = await engine.compaction_events(imported.id)
            assert sorted(e.summary_id for e in events) == before["summaries"]
            assert await engine.read_file(str(before["file"])) == before["file_bytes"]
            assert len(await engine.memory().list()) == before["memories"]
            word = next(w for w in str(before["messages"][-1][1]).split() if w.isalpha() and len(w) > 4)  # type: ignore[index]
            found = await engine.grep(word, mode="full_text", all_conversations=True)
            assert found.hits  # the copied rows are searchable: PostgreSQL built the word index
            from lossless.memory.hashing import HashEmbedder
            from lossless.memory.message_index import index_model

            assert isinstance(engine.store, SearchVectorStore)
            totals = await engine.store.vector_totals(index_model(HashEmbedder().model), "messages")
            assert totals.indexed == totals.total == tables["messages"]["source"]  # the copied vectors are counted

    anyio.run(read_back)

    # Run again: resumable and idempotent — nothing new is copied, everything still matches.
    code, again = migrate(source, pg_url)
    assert code == 0 and again["ok"]
    assert {t["table"]: t["copied"] for t in again["tables"]}["messages"] == 0

    async def write_after() -> None:
        async with await ContextEngine.open(pg_url, **SETTINGS) as engine:  # type: ignore[arg-type]
            # New rows get new ids after the copied ones: the identity sequences moved on.
            stored = await engine.ingest("files", Message.user("after the move"))
            assert stored.stored[0].id > max(i for i, _ in before["messages"])  # type: ignore[union-attr]

    anyio.run(write_after)


def test_migrate_refuses_wrong_urls(tmp_path: Path, pg_url: str) -> None:
    runner = CliRunner()
    wrong = runner.invoke(cli, ["migrate", "--from", pg_url, "--to", pg_url])
    assert wrong.exit_code == 3 and "--from must be a sqlite" in wrong.output
    missing = runner.invoke(cli, ["migrate", "--from", f"sqlite:///{tmp_path / 'none.db'}", "--to", pg_url])
    assert missing.exit_code == 3 and "no SQLite database" in missing.output
    backwards = runner.invoke(cli, ["migrate", "--from", f"sqlite:///{tmp_path / 'a.db'}", "--to", "sqlite:///b.db"])
    assert backwards.exit_code == 3 and "--to must be a postgresql" in backwards.output


def test_every_table_of_both_schemas_is_copied() -> None:
    """A table added to the schema must be added to the copy too (or deliberately left out here)."""
    from lossless.stores.postgres.schema import MIGRATIONS

    created = {
        statement.split("CREATE TABLE ", 1)[1].split()[0]
        for migration in MIGRATIONS
        for statement in migration.statements
        if "CREATE TABLE " in statement
    }
    # the store's own id; blobs are copied through the blob stores; vector counts are kept by the
    # target's own triggers from the vectors copied in (SQLite keeps them in another shape)
    not_copied = {"lcm_meta", "large_file_blobs", "vector_counts"}
    assert created - not_copied == {table for table, _ in TABLES}


def test_an_interrupted_copy_is_finished_by_running_it_again(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lossless.stores import transfer

    source = f"sqlite:///{tmp_path / 'src.db'}"
    anyio.run(build_source, source)
    monkeypatch.setattr(transfer, "_BATCH", 40)

    class Interrupted(Exception):
        pass

    def stop_midway(table: str, done: int, total: int) -> None:
        if table == "messages" and done >= 80:
            raise Interrupted

    async def first_attempt() -> None:
        with pytest.raises(Interrupted):
            await transfer.transfer_sqlite_to_postgres(str(tmp_path / "src.db"), pg_url, progress=stop_midway)

    anyio.run(first_attempt)
    code, report = migrate(source, pg_url)
    assert code == 0 and report["ok"], report
    messages = {t["table"]: t for t in report["tables"]}["messages"]
    assert messages["copied"] == messages["source"] - 80  # the first 80 were not copied twice
