"""The integrity checker and its repairs, on healthy databases and on databases damaged on purpose."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lossless import ContextEngine, Message
from lossless.errors import InputError, NotFoundError
from lossless.integrity import IntegrityChecker, IntegrityReport, Problem, plan_repairs

from .conftest import BACKENDS, backend_url
from .test_compaction import scripted

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
SETTINGS: dict[str, object] = {
    "fresh_tail_count": 4,
    "leaf_chunk_tokens": 600,
    "leaf_target_tokens": 200,
    "condensed_target_tokens": 200,
    "leaf_min_fanout": 4,
    "condensed_min_fanout": 3,
    "condensed_min_fanout_hard": 2,
    "summary_timeout_ms": 2000,
    "large_file_token_threshold": 1000,
}


def chat(count: int, start: int = 0) -> list[Message]:
    return [
        Message(
            "user" if i % 2 == 0 else "assistant",
            f"message {i}: " + " ".join(f"word{i}_{w}" for w in range(40)),
            created_at=T0 + timedelta(minutes=i),
            event_key=f"m{i}",
        )
        for i in range(start, start + count)
    ]


#: For tests of what only the SQLite backend can suffer (its separate index file, writes with foreign keys off).
SQLITE_ONLY = pytest.mark.parametrize("engine", ["sqlite"], indirect=True)


@pytest.fixture(params=BACKENDS)
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ContextEngine]:
    url = backend_url(request, request.param, tmp_path, "i")
    opened = await ContextEngine.open(url, **SETTINGS)  # type: ignore[arg-type]
    try:
        yield opened
    finally:
        await opened.dispose()


async def populated(engine: ContextEngine) -> int:
    """A compacted conversation with a large file; returns its id."""
    result = await engine.ingest_batch("s", chat(60))
    assert result.conversation_id is not None
    big = "\n".join(f"line {i}: " + "data " * 20 for i in range(400))
    await engine.ingest("s", Message.user(f'<file name="big.txt">\n{big}\n</file>', event_key="file"))
    await engine.compact("s", force=True)
    await engine.ingest_batch("other", chat(5, start=100))
    await engine.store.wait_indexed()
    return result.conversation_id


def damage(engine: ContextEngine, *statements: str) -> None:
    """Run SQL on the database behind the engine's back, foreign keys off (as a careless tool would)."""
    if engine.store.backend == "postgres":
        import psycopg
        from psycopg import sql

        with psycopg.connect(engine.store.url) as pg:
            # Foreign keys off: drop them (the test owns its database; no superuser needed).
            keys = pg.execute(
                "SELECT c.relname, k.conname FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid "
                "WHERE k.contype = 'f' AND k.connamespace = current_schema()::regnamespace"
            ).fetchall()
            for table, key in keys:
                pg.execute(
                    sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(sql.Identifier(table), sql.Identifier(key))
                )
            for statement in statements:
                pg.execute(statement.encode())
        return
    conn = sqlite3.connect(engine.store.path)  # type: ignore[attr-defined]
    conn.execute("PRAGMA foreign_keys = OFF")
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


def kinds(report: IntegrityReport) -> dict[str, int]:
    return report.counts()


async def test_a_compacted_store_is_clean(engine: ContextEngine) -> None:
    cid = await populated(engine)
    report = await engine.check_integrity()
    assert report.ok, report.problems
    assert report.conversations == 2 and report.messages == 66 and report.summaries > 3 and report.files == 1
    assert report.search_index_checked
    one = await engine.check_integrity(cid)
    assert one.ok and one.conversations == 1 and not one.search_index_checked
    assert plan_repairs(report).repairs == ()
    assert report.to_dict()["ok"] is True


async def test_a_forked_subagent_sharing_its_parents_items_is_clean(engine: ContextEngine) -> None:
    await populated(engine)
    await engine.prepare_subagent_spawn("s", "child", mode="fork")
    await engine.ingest_batch("child", chat(3, start=200))
    assert (await engine.check_integrity()).ok


@SQLITE_ONLY
async def test_deleted_source_row_is_reported_and_not_repaired(engine: ContextEngine) -> None:
    cid = await populated(engine)
    [(summary_id, message_id)] = (
        sqlite3.connect(engine.store.path)  # type: ignore[attr-defined]
        .execute("SELECT summary_id, message_id FROM summary_messages ORDER BY message_id LIMIT 1")
        .fetchall()
    )
    damage(engine, f"DELETE FROM messages WHERE message_id = {message_id}")
    report = await engine.check_integrity()
    missing = [p for p in report.problems if p.kind == "missing_source"]
    assert missing == [
        Problem(
            "missing_source",
            cid,
            f"summary {summary_id}",
            f"lists message {message_id} as a source, which does not exist",
        )
    ]
    # The message had been indexed: the index now holds a stale row.
    assert any(p.kind == "search_index" and f"message {message_id}," in p.detail for p in report.problems)
    plan = plan_repairs(report)
    assert [r.action for r in plan.repairs] == ["rebuild_search_index"]
    assert [p.kind for p in plan.unrepairable] == ["missing_source"]
    await engine.repair_integrity(plan)
    after = await engine.check_integrity()
    assert kinds(after) == {"missing_source": 1}


def query(engine: ContextEngine, sql: str) -> list[tuple[Any, ...]]:
    """Rows of a read-only query on the engine's database (either backend)."""
    if engine.store.backend == "postgres":
        import psycopg

        with psycopg.connect(engine.store.url) as pg:
            return list(pg.execute(sql.encode()).fetchall())
    conn = sqlite3.connect(engine.store.path)  # type: ignore[attr-defined]
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


async def test_dangling_context_item_is_dropped_and_its_messages_restored(engine: ContextEngine) -> None:
    cid = await populated(engine)
    [(ordinal, summary_id)] = query(
        engine,
        f"SELECT ordinal, summary_id FROM context_items WHERE conversation_id = {cid} AND item_type = 'summary' "
        "ORDER BY ordinal LIMIT 1",
    )
    # The summary row goes, but not its lineage: the item points at nothing and its messages lose cover.
    damage(engine, f"DELETE FROM summaries WHERE summary_id = '{summary_id}'")
    report = await engine.check_integrity(cid)
    dangling = [p for p in report.problems if p.kind == "dangling_context_item"]
    assert dangling == [
        Problem(
            "dangling_context_item",
            cid,
            f"context item {ordinal}",
            f"points at summary {summary_id}, which does not exist",
            ordinal,
        )
    ]
    uncovered = [p for p in report.problems if p.kind == "uncovered_message"]
    assert uncovered and all("unreachable summary" in p.detail for p in uncovered)
    orphans = [p.target for p in report.problems if p.kind == "unreachable_summary" and p.target]
    assert orphans
    plan = plan_repairs(report)
    assert [r.action for r in plan.repairs] == ["drop_context_item"] + ["restore_context_item"] * len(orphans)
    outcome = await engine.repair_integrity(plan)
    assert not outcome.skipped
    after = await engine.check_integrity(cid)
    assert after.ok, after.problems
    # The summaries it was made of stand where it was, in order (the check above includes the order).
    items = await engine.store.get_context_items(cid)
    restored = [i.summary_id for i in items if i.summary_id in set(orphans)]
    assert sorted(restored) == sorted(orphans) and items[0].summary_id in orphans
    # Applying the same plan again finds nothing left to do.
    again = await engine.repair_integrity(plan)
    assert not again.applied and len(again.skipped) == len(plan.repairs)


async def test_dangling_message_item_and_uncovered_message(engine: ContextEngine) -> None:
    cid = await populated(engine)
    damage(
        engine,
        f"INSERT INTO context_items VALUES ({cid}, 9999, 'message', 424242, NULL, '2026-01-01T00:00:00+00:00')",
        f"DELETE FROM context_items WHERE conversation_id = {cid} AND ordinal = "
        f"(SELECT max(ordinal) FROM context_items WHERE conversation_id = {cid} AND ordinal < 9999)",
    )
    report = await engine.check_integrity(cid)
    assert kinds(report) == {"dangling_context_item": 1, "uncovered_message": 1}
    await engine.repair_integrity(plan_repairs(report))
    assert (await engine.check_integrity(cid)).ok


@SQLITE_ONLY
async def test_stale_fts_row_is_reported_and_the_index_rebuilt(engine: ContextEngine) -> None:
    await populated(engine)
    index = Path(str(engine.store.path) + "-index")  # type: ignore[attr-defined]
    conn = sqlite3.connect(index)
    conn.execute("INSERT INTO messages_fts(rowid, content) VALUES (777777, 'ghost text')")
    conn.execute("DELETE FROM summaries_trigram_docsize WHERE id = 1")
    conn.commit()
    conn.close()
    report = await engine.check_integrity()
    details = sorted(p.detail for p in report.problems)
    assert details == [
        "the search index holds message 777777, which does not exist",
        "the search index lacks summary row 1, which it claims to cover",
    ]
    await engine.repair_integrity(plan_repairs(report))
    assert (await engine.check_integrity()).ok


async def test_missing_and_altered_blobs(engine: ContextEngine) -> None:
    cid = await populated(engine)
    [file] = await engine.files(cid)
    path = engine.blobs.path_for(file.storage_uri)  # type: ignore[attr-defined]
    path.write_bytes(path.read_bytes()[:-1] + b"!")
    report = await engine.check_integrity()
    assert [(p.kind, p.subject) for p in report.problems] == [("blob_mismatch", f"file {file.id}")]
    assert "do not match its SHA-256" in report.problems[0].detail
    path.unlink()
    report = await engine.check_integrity()
    assert [(p.kind, p.subject) for p in report.problems] == [("missing_blob", f"file {file.id}")]
    plan = plan_repairs(report)
    assert plan.repairs == () and plan.to_dict()["unrepairable"][0]["why"].startswith("the file's bytes are gone")  # type: ignore[index]


async def test_lineage_rules(engine: ContextEngine) -> None:
    cid = await populated(engine)
    leaf, condensed = (
        query(engine, f"SELECT summary_id FROM summaries WHERE kind = '{k}' ORDER BY summary_rowid LIMIT 1")[0][0]
        for k in ("leaf", "condensed")
    )
    damage(
        engine,
        f"DELETE FROM summary_messages WHERE summary_id = '{leaf}'",
        f"UPDATE summaries SET depth = 5 WHERE summary_id = '{condensed}'",
    )
    report = await engine.check_integrity(cid)
    subjects = {(p.kind, p.subject) for p in report.problems}
    assert ("summary_without_sources", f"summary {leaf}") in subjects
    assert ("depth_mismatch", f"summary {condensed}") in subjects


@SQLITE_ONLY
async def test_a_cycle_is_reported_without_hanging(engine: ContextEngine) -> None:
    cid = await populated(engine)
    conn = sqlite3.connect(engine.store.path)  # type: ignore[attr-defined]
    child, parent = conn.execute("SELECT summary_id, parent_summary_id FROM summary_parents LIMIT 1").fetchone()
    conn.close()
    damage(
        engine,
        "INSERT INTO summaries SELECT NULL, 'sum_loop', conversation_id, 'condensed', depth, content, token_count, "
        "earliest_at, latest_at, descendant_count, descendant_token_count, source_message_token_count, file_ids, "
        f"provider, model, level, reason, created_at FROM summaries WHERE summary_id = '{parent}'",
        f"INSERT INTO summary_parents VALUES ('sum_loop', '{child}', 0)",
        f"UPDATE summary_parents SET parent_summary_id = 'sum_loop' WHERE summary_id = '{child}' "
        f"AND parent_summary_id = '{parent}'",
    )
    report = await engine.check_integrity(cid)
    assert "dag_cycle" in kinds(report)


async def test_bad_arguments(engine: ContextEngine) -> None:
    checker = IntegrityChecker(engine.store)
    with pytest.raises(InputError):
        await checker.run(0)
    with pytest.raises(NotFoundError):
        await checker.run(12345)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=6),
    compact_after=st.lists(st.booleans(), min_size=6, max_size=6),
)
async def test_any_sequence_of_ingest_and_compaction_is_clean(
    tmp_path_factory: pytest.TempPathFactory, batches: list[int], compact_after: list[bool]
) -> None:
    path = tmp_path_factory.mktemp("prop") / "p.db"
    async with await ContextEngine.open(f"sqlite:///{path}", **SETTINGS) as engine:  # type: ignore[arg-type]
        start = 0
        for size, compact in zip(batches, compact_after, strict=False):
            await engine.ingest_batch("s", chat(size, start=start))
            start += size
            if compact:
                await engine.compact("s", force=True)
        report = await engine.check_integrity()
        assert report.ok, report.problems
        assert report.messages == start


def test_lcm_doctor(tmp_path: Path) -> None:
    import json

    import anyio
    from click.testing import CliRunner

    from lossless.cli import cli

    url = f"sqlite:///{tmp_path / 'i.db'}"

    async def setup() -> int:
        async with await ContextEngine.open(url, **SETTINGS) as engine:  # type: ignore[arg-type]
            return await populated(engine)

    cid = anyio.run(setup)

    def doctor(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(cli, ["--database", url, "doctor", *args], catch_exceptions=False)
        return result.exit_code, result.stdout

    code, out = doctor()
    assert code == 0 and "no problems found" in out
    code, out = doctor("--conversation", str(cid), "--json")
    assert code == 0 and json.loads(out)["report"]["checked"]["conversations"] == 1
    conn = sqlite3.connect(tmp_path / "i.db")
    conn.execute(f"DELETE FROM context_items WHERE conversation_id = {cid} AND ordinal = 1")
    conn.commit()
    conn.close()
    code, out = doctor("--plan")
    assert code == 10 and "put summary" in out and "--apply" in out
    code, out = doctor("--apply", "--json")
    result = json.loads(out)
    assert code == 0 and result["applied"] and result["after"]["ok"] is True
    assert doctor()[0] == 0


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    size=st.integers(min_value=6, max_value=40),
    dropped=st.sets(st.integers(min_value=0, max_value=60), max_size=8),
    dangling=st.integers(min_value=0, max_value=2),
)
async def test_repairs_make_any_lost_context_whole_again(
    tmp_path_factory: pytest.TempPathFactory, size: int, dropped: set[int], dangling: int
) -> None:
    """Context items lost or made to point at nothing: the plan's repairs leave a store with no problem."""
    path = tmp_path_factory.mktemp("repair") / "r.db"
    async with await ContextEngine.open(f"sqlite:///{path}", **SETTINGS) as engine:  # type: ignore[arg-type]
        await engine.ingest_batch("s", chat(size))
        await engine.compact("s", force=True)
        await engine.ingest_batch("s", chat(3, start=size))
        items = await engine.store.get_context_items(1)
        gone = sorted({items[i % len(items)].ordinal for i in dropped})
        statements = [f"DELETE FROM context_items WHERE conversation_id = 1 AND ordinal = {o}" for o in gone]
        statements += [
            f"INSERT INTO context_items VALUES (1, {10_000 + n}, 'summary', NULL, 'sum_nowhere{n}', '2026-01-01')"
            for n in range(dangling)
        ]
        damage(engine, *statements)
        report = await engine.check_integrity()
        assert report.ok == (not gone and not dangling)
        plan = plan_repairs(report)
        assert plan.unrepairable == ()
        await engine.repair_integrity(plan)
        after = await engine.check_integrity()
        assert after.ok, after.problems
        # Every message is reached once, in order: the assembled context still holds the newest one.
        assembled = await engine.assemble("s", token_budget=100_000)
        assert f"message {size + 2}:" in str(assembled.messages[-1])


async def _with_fallbacks(engine: ContextEngine) -> int:
    """A compacted conversation whose summaries were all made by truncation (the summarizer was down)."""

    working = engine.compactor.summarizer
    engine.compactor.summarizer = scripted(RuntimeError("provider down"))
    try:
        result = await engine.ingest_batch("s", chat(60))
        await engine.compact("s", force=True)
    finally:
        engine.compactor.summarizer = working
    assert result.conversation_id is not None
    await engine.store.wait_indexed()
    return result.conversation_id


async def test_fallback_summaries_are_remade_only_when_asked_and_only_properly(engine: ContextEngine) -> None:

    cid = await _with_fallbacks(engine)
    before, lineage = await engine.summaries(cid)
    assert before and all(s.level == "fallback" for s in before)
    report = await engine.check_integrity()
    assert report.ok and report.fallback_summaries == len(before)  # not a problem: a plan can re-make them
    assert {s for _, s in report.fallbacks} == {s.id for s in before}
    plan = plan_repairs(report)
    assert [r.action for r in plan.repairs] == ["remake_summary"] * len(before) and not plan.unrepairable
    assert all("re-make summary" in r.description for r in plan.repairs)
    assert (await engine.summaries(cid))[0] == before  # planning wrote nothing

    # A summarizer that still fails, or answers with something no shorter than the sources: nothing changes.
    engine.compactor.summarizer = scripted(RuntimeError("still down"))
    failed = await engine.repair_integrity(plan)
    assert not failed.applied and len(failed.skipped) == len(plan.repairs)
    engine.compactor.summarizer = scripted(lambda r: r.text + " and more")
    assert not (await engine.repair_integrity(plan)).applied
    assert (await engine.summaries(cid))[0] == before

    # A working summarizer: each summary gets a proper text; ids, lineage and times stay.
    engine.compactor.summarizer = scripted(lambda r: f"zebrafact depth {r.depth}: " + r.text[:200])
    outcome = await engine.repair_integrity(plan)
    assert len(outcome.applied) == len(plan.repairs) and not outcome.skipped
    after, lineage_after = await engine.summaries(cid)
    assert lineage_after == lineage and [s.id for s in after] == [s.id for s in before]
    for old, new in zip(before, after, strict=True):
        assert new.level == "normal" and new.provider == "scripted" and new.content.startswith("zebrafact")
        assert (new.kind, new.depth, new.created_at, new.earliest_at, new.latest_at) == (
            old.kind,
            old.depth,
            old.created_at,
            old.earliest_at,
            old.latest_at,
        )
        assert new.token_count < new.source_token_count or new.kind == "condensed"
        assert (new.reason or "").startswith("remade from a truncation fallback")
    # Counts above each summary follow its new size, and the search index follows its new text.
    checked = await engine.check_integrity()
    assert checked.ok, checked.problems
    assert checked.fallback_summaries == 0 and plan_repairs(checked).repairs == ()
    found = await engine.grep("zebrafact", mode="full_text", scope="summaries", limit=200)
    assert {h.ref for h in found.hits} == {s.id for s in after}
    gone = await engine.grep("Truncated context management", mode="full_text", scope="summaries")
    assert not gone.hits
    assembled = await engine.assemble("s", token_budget=100_000)
    assert "zebrafact" in str(assembled.messages)
    # The same plan again: every summary was re-made already, so nothing is written.
    again = await engine.repair_integrity(plan)
    assert not again.applied and len(again.skipped) == len(plan.repairs)


async def test_a_stale_remake_never_overwrites_a_newer_text(engine: ContextEngine) -> None:
    cid = await _with_fallbacks(engine)
    summaries, _ = await engine.summaries(cid)
    target = summaries[0]
    before = await engine.store.summary_fingerprint(cid)
    assert before[:2] == (len(summaries), before[1]) and before[1] > 0
    assert await engine.store.summary_fingerprint(cid) == before  # nothing changed, nothing moves
    newer = replace(target, content="a newer text", token_count=3, level="normal")
    assert await engine.store.rewrite_summary(newer, replaces=target.content)
    rewritten = await engine.store.summary_fingerprint(cid)
    assert rewritten != before and rewritten[:2] == before[:2]  # same summaries, one rewrite more
    assert not await engine.store.rewrite_summary(replace(target, content="late"), replaces=target.content)
    assert not await engine.store.rewrite_summary(replace(target, id="sum_missing"), replaces=target.content)
    assert await engine.store.summary_fingerprint(cid) == rewritten  # refused rewrites change nothing
    assert await engine.store.summary_fingerprint(cid + 1000) == (0, 0, rewritten[2])
    [stored] = await engine.store.get_summaries([target.id])
    assert stored.content == "a newer text" and stored.token_count == 3 and stored.level == "normal"
    assert (await engine.check_integrity()).ok  # the descendant counts above it moved with it


def test_lcm_doctor_plans_and_applies_remakes(tmp_path: Path) -> None:
    import json

    import anyio
    from click.testing import CliRunner

    from lossless.cli import cli

    url = f"sqlite:///{tmp_path / 'r.db'}"

    async def setup() -> int:
        async with await ContextEngine.open(url, **SETTINGS) as engine:  # type: ignore[arg-type]
            return await _with_fallbacks(engine)

    anyio.run(setup)

    def doctor(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(cli, ["--database", url, "doctor", *args], catch_exceptions=False)
        return result.exit_code, result.stdout

    code, out = doctor()
    assert code == 0 and "made by truncation" in out and "--plan" in out
    code, out = doctor("--plan")
    assert code == 0 and "re-make summary sum_" in out
    code, out = doctor("--apply", "--json")
    result = json.loads(out)
    assert code == 0 and result["applied"] and all(r["action"] == "remake_summary" for r in result["applied"])
    assert result["after"]["fallback_summaries"] == 0 and result["after"]["ok"] is True


async def test_a_stale_plan_is_checked_again_inside_the_repair(engine: ContextEngine) -> None:
    """A repair planned before a writer changed the conversation is skipped, never applied to the new state."""
    cid = await populated(engine)
    items = await engine.store.get_context_items(cid)
    last = items[-1]
    assert last.message_id is not None
    damage(engine, f"DELETE FROM context_items WHERE conversation_id = {cid} AND ordinal = {last.ordinal}")
    stale = plan_repairs(await engine.check_integrity(cid))
    assert [(r.action, r.target) for r in stale.repairs] == [("restore_context_item", last.message_id)]
    # Meanwhile a writer mends it, and compaction then folds that message into a summary.
    assert (await engine.repair_integrity(stale)).applied
    await engine.ingest_batch("s", chat(40, start=200))
    await engine.compact("s", force=True)
    now = await engine.store.get_context_items(cid)
    assert all(i.message_id != last.message_id for i in now)  # covered through a summary, not by itself
    assert (await engine.check_integrity(cid)).ok
    outcome = await engine.repair_integrity(stale)  # the old plan, applied late
    assert outcome.applied == () and outcome.skipped == stale.repairs
    assert (await engine.check_integrity(cid)).ok  # no duplicate coverage was made


def test_lcm_doctor_reports_a_stalled_compaction(tmp_path: Path) -> None:
    import json

    import anyio
    from click.testing import CliRunner

    from lossless.cli import cli

    url = f"sqlite:///{tmp_path / 's.db'}"
    options = {"fresh_tail_count": 4, "leaf_chunk_tokens": 300, "leaf_target_tokens": 60}

    async def setup() -> int:
        async with await ContextEngine.open(url, **options) as engine:  # type: ignore[arg-type]
            history = [Message.user(" ".join(f"w{i}_{j}" for j in range(60))) for i in range(30)]
            done = await engine.ingest_batch("stalled", history)  # stored, never compacted
            assert done.conversation_id is not None
            return done.conversation_id

    cid = anyio.run(setup)

    def doctor(*args: str) -> tuple[int, str]:
        env = {"LCM_FRESH_TAIL_COUNT": "4", "LCM_LEAF_CHUNK_TOKENS": "300", "LCM_LEAF_TARGET_TOKENS": "60"}
        result = CliRunner(env=env).invoke(cli, ["--database", url, "doctor", *args], catch_exceptions=False)
        return result.exit_code, result.stdout

    code, out = doctor()
    assert code == 0 and f"conversation {cid}: compaction has stalled" in out and "lcm compact" in out
    stalled = json.loads(doctor("--json")[1])["report"]["stalled_compaction"]
    assert [s["conversation_id"] for s in stalled] == [cid] and stalled[0]["raw_tokens_outside_fresh_tail"] >= 600

    async def catch_up() -> None:
        async with await ContextEngine.open(url, **options) as engine:  # type: ignore[arg-type]
            await engine.compact(cid, force=True)

    anyio.run(catch_up)
    assert "stalled" not in doctor()[1]
    assert json.loads(doctor("--json")[1])["report"]["stalled_compaction"] == []
