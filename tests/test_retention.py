"""Retention: explicit prune (planned, then applied), vacuum, and what must hold afterwards."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from lossless import ContextEngine, Message
from lossless.cli import cli
from lossless.errors import InputError

from .conftest import BACKENDS, backend_url
from .test_integrity import SETTINGS, chat, query

pytestmark = pytest.mark.anyio

BIG = "\n".join(f"line {i}: " + "data " * 20 for i in range(400))


@pytest.fixture(params=BACKENDS)
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ContextEngine]:
    url = backend_url(request, request.param, tmp_path, "r")
    opened = await ContextEngine.open(url, **SETTINGS)  # type: ignore[arg-type]
    try:
        yield opened
    finally:
        await opened.dispose()


async def fill(engine: ContextEngine, session: str, start: int) -> int:
    result = await engine.ingest_batch(session, chat(40, start=start))
    await engine.ingest(session, Message.user(f'<file name="big.txt">\n{BIG}{session}\n</file>'))
    await engine.compact(session, force=True)
    assert result.conversation_id is not None
    return result.conversation_id


def rows(engine: ContextEngine, sql: str) -> list[tuple[Any, ...]]:
    return query(engine, sql)


async def test_prune_archived_conversations(engine: ContextEngine) -> None:
    old = await fill(engine, "old", 0)
    keep = await fill(engine, "keep", 1000)
    await engine.store.archive_conversation(old)
    await engine.store.wait_indexed()
    folder = engine.blobs.root / str(old)  # type: ignore[attr-defined]
    assert folder.is_dir()
    with pytest.raises(InputError):
        await engine.plan_prune()
    with pytest.raises(InputError, match="timezone-aware"):
        await engine.plan_prune(archived_before=datetime(2030, 1, 1))
    assert (await engine.plan_prune(archived_before=datetime.now(UTC) - timedelta(days=1))).delete == ()

    plan = await engine.plan_prune(archived_before=datetime.now(UTC) + timedelta(seconds=5))
    assert [c.conversation_id for c in plan.delete] == [old]
    [candidate] = plan.delete
    assert candidate.messages == 41 and candidate.summaries > 0 and candidate.files == 1 and candidate.row_bytes > 8000
    top_message = rows(engine, "SELECT max(message_id) FROM messages")[0][0]
    top_summary = rows(engine, "SELECT max(summary_rowid) FROM summaries")[0][0]
    events = f"SELECT count(*) FROM compaction_events WHERE conversation_id = {old}"
    assert rows(engine, events)[0][0] == candidate.summaries  # one event per compaction pass

    result = await engine.prune(plan)
    assert result.conversations == 1 and result.messages == 41 and result.blob_bytes > 30_000
    assert result.bytes_before is not None and result.bytes_after is not None
    if engine.store.backend == "sqlite":  # PostgreSQL's plain VACUUM makes space reusable; it need not shrink
        assert result.bytes_after <= result.bytes_before
    assert not folder.exists()
    for table in ("messages", "summaries", "context_items", "large_files", "compaction_events"):
        assert rows(engine, f"SELECT count(*) FROM {table} WHERE conversation_id = {old}") == [(0,)]
    assert rows(engine, "SELECT count(*) FROM message_parts WHERE message_id NOT IN (SELECT message_id FROM messages)")[
        0
    ] == (0,)
    report = await engine.check_integrity()
    assert report.ok, report.problems  # the search index forgot the deleted rows too
    assert report.conversations == 1

    # Ids are never reused, so the index (keyed by them) stays exact.
    fresh = await engine.ingest_batch("new", chat(30, start=5000))
    assert min(m.id for m in fresh.stored) > top_message
    await engine.compact("new", force=True)
    assert (
        rows(engine, "SELECT min(summary_rowid) FROM summaries WHERE conversation_id <> ?".replace("?", str(keep)))[0][
            0
        ]
        > top_summary
    )
    await engine.store.wait_indexed()
    assert (await engine.check_integrity()).ok


async def test_a_conversation_a_fork_points_at_is_kept_unless_both_go(engine: ContextEngine) -> None:
    parent = await fill(engine, "parent", 0)
    handle = await engine.prepare_subagent_spawn("parent", "child", mode="fork")
    await engine.ingest("child", Message.user("hello from the child"))
    plan = await engine.plan_prune(conversations=["parent"])
    assert plan.delete == () and [c.conversation_id for c, _ in plan.kept] == [parent]
    assert str(handle.conversation.id) in plan.kept[0][1]
    with pytest.raises(InputError, match="still referred to"):
        await engine.store.delete_conversations([parent])  # type: ignore[attr-defined]
    both = await engine.plan_prune(conversations=["parent", "child"])
    assert sorted(c.conversation_id for c in both.delete) == sorted([parent, handle.conversation.id])
    await engine.prune(both, vacuum=False)
    assert rows(engine, "SELECT count(*) FROM conversations") == [(0,)]
    assert (await engine.check_integrity()).ok


def test_lcm_prune_and_vacuum(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"

    async def setup() -> int:
        async with await ContextEngine.open(url, **SETTINGS) as engine:  # type: ignore[arg-type]
            cid = await fill(engine, "gone", 0)
            await fill(engine, "stays", 1000)
            return cid

    cid = anyio.run(setup)

    def lcm(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(cli, ["--database", url, *args], catch_exceptions=False)
        return result.exit_code, result.stdout

    assert lcm("prune")[0] == 3
    assert lcm("prune", "--archived-before", "yesterday")[0] == 3
    code, out = lcm("prune", "--conversation", str(cid))
    assert code == 0 and "Would delete" in out and "nothing was deleted" in out
    code, out = lcm("prune", "--conversation", "gone", "--apply", "--json")
    result = json.loads(out)
    assert code == 0 and result["result"]["conversations"] == 1 and result["plan"]["messages"] == 41
    code, out = lcm("prune", "--archived-before", "2020-01-01")
    assert code == 0 and "nothing matches" in out
    code, out = lcm("vacuum", "--json")
    sizes = json.loads(out)
    assert code == 0 and sizes["bytes_after"] <= sizes["bytes_before"]
    assert lcm("doctor")[0] == 0


def test_a_running_server_writes_to_a_session_pruned_behind_its_back(tmp_path: Path) -> None:
    """`lcm prune` from another process while `lcm serve` runs: the next ingest of that session is stored."""
    import httpx2 as httpx

    from .test_http_api import Running, make_config

    config = make_config(tmp_path, api_tokens=[])
    url = f"sqlite:///{tmp_path / 'lcm.db'}"
    with Running(config) as base, httpx.Client(base_url=base, timeout=30) as http:
        first = http.post("/v1/ingest", json={"session_id": "s1", "message": {"role": "user", "content": "before"}})
        assert first.status_code == 200, first.text
        old_id = first.json()["conversation_id"]
        pruned = CliRunner().invoke(
            cli, ["--database", url, "prune", "--conversation", "s1", "--apply", "--json"], catch_exceptions=False
        )
        assert pruned.exit_code == 0, pruned.output
        assert [c["conversation_id"] for c in json.loads(pruned.output)["plan"]["delete"]] == [old_id]
        again = http.post("/v1/ingest", json={"session_id": "s1", "message": {"role": "user", "content": "after"}})
        assert again.status_code == 200, again.text
        new_id = again.json()["conversation_id"]
        assert new_id != old_id and again.json()["stored"] == 1
        turn = http.post(
            "/v1/after_turn",
            json={"session_id": "s1", "messages": [{"role": "assistant", "content": "stored"}], "token_budget": 8000},
        )
        assert turn.status_code == 200 and turn.json()["error"] is None, turn.text
        shown = http.get(f"/v1/conversations/{new_id}/messages")
        assert shown.status_code == 200 and [m["content"] for m in shown.json()["messages"]] == ["after", "stored"]


def test_after_turn_over_http_answers_an_error_status_when_the_turn_is_not_stored(tmp_path: Path) -> None:
    import httpx2 as httpx

    from .test_http_api import Running, make_config

    with (
        Running(make_config(tmp_path, api_tokens=[], max_message_bytes=1024)) as base,
        httpx.Client(base_url=base, timeout=30) as http,
    ):
        big = {"role": "user", "content": "x" * 5000}
        answer = http.post("/v1/after_turn", json={"session_id": "s", "messages": [big], "token_budget": 8000})
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["type"] == "InputError" and "max_message_bytes" in error["message"]
