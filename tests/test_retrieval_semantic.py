"""``lcm_grep`` with ``mode="semantic"`` / ``"hybrid"``: messages by meaning, through the memory embedder."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from lossless import ContextEngine, Message
from lossless.cli import cli
from lossless.config import Config
from lossless.errors import InputError
from lossless.retrieval import Caller, GrepOptions, Retriever
from lossless.retrieval.semantic import grep_semantic
from lossless.retrieval.toolcalls import call_tool

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

HISTORY = [
    "the nightly backup job failed again with a disk quota error",
    "lunch was great, the new ramen place is worth it",
    "we decided to rotate the database password every ninety days",
    "备份任务昨晚又失败了，磁盘配额不足",
    "バックアップが失敗しました",
    "the canary deploy passed, shipping on friday",
]


@pytest.fixture
async def engine(config: Config) -> AsyncIterator[ContextEngine]:
    opened = await ContextEngine.open(config=config.replace(memory_embedder="hash"))
    try:
        yield opened
    finally:
        await opened.dispose()


async def seed(engine: ContextEngine, session: str = "s1", key: str = "k1", texts: list[str] = HISTORY) -> list[int]:
    messages = [
        Message("user" if i % 2 == 0 else "assistant", t, created_at=T0 + timedelta(hours=i))
        for i, t in enumerate(texts)
    ]
    result = await engine.ingest_batch(session, messages, session_key=key)
    return [m.id for m in result.stored]


async def test_semantic_search_ranks_by_meaning_best_first(engine: ContextEngine) -> None:
    ids = await seed(engine)
    found = await engine.grep("backup job failure", mode="semantic", scope="messages", limit=3)
    assert found.hits[0].ref == ids[0] and found.hits[0].score is not None and found.hits[0].score > 0
    scores = [h.score or 0.0 for h in found.hits]
    assert scores == sorted(scores, reverse=True)
    assert all(h.scope == "messages" and h.citation == f"[msg#{h.ref}]" for h in found.hits)
    text = found.render()
    assert "(best match first)" in text and f"[msg#{ids[0]}]" in text and "score " in text
    assert found.to_dict()["matches"][0]["score"] > 0  # type: ignore[index]
    # Messages sharing nothing with the query are not matches.
    unrelated = await engine.grep("zebra xylophone", mode="semantic")
    assert not unrelated.hits and "no matches" in (unrelated.message or "")
    # scope=both searches messages and says summaries are not embedded.
    both = await engine.grep("database password rotation", mode="semantic", limit=1)
    assert [h.ref for h in both.hits] == [ids[2]] and "semantic search covers messages" in both.render()


async def test_cjk_messages_are_found_by_meaning(engine: ContextEngine) -> None:
    ids = await seed(engine)
    chinese = await engine.grep("备份失败", mode="semantic", limit=1)
    assert [h.ref for h in chinese.hits] == [ids[3]] and "备份" in chinese.hits[0].snippet
    japanese = await engine.grep("バックアップ", mode="hybrid", limit=1)
    assert [h.ref for h in japanese.hits] == [ids[4]]


async def test_hybrid_fuses_meaning_with_the_full_text_ranking(engine: ContextEngine) -> None:
    ids = await seed(engine)
    hybrid = await engine.grep("friday canary", mode="hybrid", scope="messages", limit=2)
    assert hybrid.hits[0].ref == ids[5] and hybrid.options.mode == "hybrid"
    # The keyword half uses any of the words: a message with one of them ranks.
    one_word = await engine.grep("ramen ultraviolet", mode="hybrid", scope="messages", limit=1)
    assert [h.ref for h in one_word.hits] == [ids[1]]
    # A query outside the full-text language still runs by meaning, and says what was skipped.
    odd = await engine.grep("NEAR(backup quota)", mode="hybrid", scope="messages", limit=1)
    assert [h.ref for h in odd.hits] == [ids[0]] and "keyword half" in odd.render()


async def test_time_filters_apply(engine: ContextEngine) -> None:
    ids = await seed(engine)
    late = await engine.grep("the backup job", mode="semantic", since=T0 + timedelta(hours=2), limit=10)
    assert {h.ref for h in late.hits} <= set(ids[2:]) and late.hits
    early = await engine.grep("backup", mode="hybrid", before=T0 + timedelta(hours=1), limit=10)
    assert [h.ref for h in early.hits] == [ids[0]]


async def test_semantic_search_stays_within_the_callers_reach(engine: ContextEngine, config: Config) -> None:
    mine = await seed(engine)
    other = await seed(engine, session="s2", key="k2", texts=["the backup job failed in the other session"])
    stranger = await ContextEngine.open(config=config.replace(agent_id="someone-else", memory_embedder="hash"))
    try:
        theirs = await seed(stranger, session="t", key="k1", texts=["the nightly backup job failed again"])
        everything = await engine.grep("backup job failed", mode="semantic")
        assert {h.ref for h in everything.hits} >= {mine[0], other[0]}
        assert theirs[0] not in {h.ref for h in everything.hits}
        caller = Caller(engine.config.agent_id, session_key="k1")
        for mode in ("semantic", "hybrid"):
            family = await engine.grep("backup job failed", mode=mode, caller=caller)  # type: ignore[arg-type]
            assert family.hits and {h.ref for h in family.hits} <= set(mine), mode
        outcome = await call_tool(
            engine._retrieval(),
            caller,
            "lcm_grep",
            {"pattern": "backup", "mode": "hybrid", "conversation_id": (await stranger.conversation("t")).id},
        )
        assert outcome.denied and "backup" not in outcome.text.replace("'backup'", "")
        allowed = await call_tool(engine._retrieval(), caller, "lcm_grep", {"pattern": "备份", "mode": "semantic"})
        assert not allowed.error and allowed.cited == (f"msg#{mine[3]}",)
    finally:
        await stranger.dispose()


async def test_options_that_cannot_run_by_meaning(engine: ContextEngine) -> None:
    await seed(engine)
    with pytest.raises(InputError, match="scope='messages'"):
        await engine.grep("backup", mode="semantic", scope="summaries")
    with pytest.raises(InputError, match="mode must be"):
        GrepOptions("backup", mode="vector")  # type: ignore[arg-type]
    bare = Retriever(engine.store)
    with pytest.raises(InputError, match="need an embedder"):
        await bare.grep(Caller(engine.config.agent_id), GrepOptions("backup", mode="semantic"), all_conversations=True)
    with pytest.raises(InputError):
        await grep_semantic(engine.store, GrepOptions("backup"), (1,), engine._retrieval().semantic_search())


def test_lcm_grep_mode_semantic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import anyio

    db = f"sqlite:///{tmp_path / 's.db'}"
    monkeypatch.setenv("LCM_MEMORY_EMBEDDER", "hash")

    async def setup() -> list[int]:
        async with await ContextEngine.open(db) as engine:
            return await seed(engine)

    ids = anyio.run(setup)
    result = CliRunner().invoke(cli, ["--database", db, "grep", "backup failure", "--mode", "semantic", "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["mode"] == "semantic" and found["matches"][0]["id"] == ids[0]
    human = CliRunner().invoke(cli, ["--database", db, "grep", "password", "--mode", "hybrid", "--limit", "1"])
    assert human.exit_code == 0 and f"[msg#{ids[2]}]" in human.output
