"""Triggers that see what the host sees: pinned system messages, the message-count trigger, the host's
observed prompt size, ``evaluate()`` without compacting, and a stale queued job that does nothing."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from lossless import ContextEngine, Message
from lossless.cli import cli
from lossless.config import Config
from lossless.ports import JobQueue
from lossless.triggers import decide
from lossless.workers import WorkerSettings

from .test_assembly import words

pytestmark = pytest.mark.anyio

POLICY = "POLICY: never push to main without a review; answer in English."


def chat(n: int, start: int = 0, size: int = 60) -> list[Message]:
    return [
        Message("user" if i % 2 == 0 else "assistant", words(size, f"m{i}_"), event_key=f"e{i}")
        for i in range(start, start + n)
    ]


async def test_a_stored_system_message_survives_a_full_compaction_and_every_budget(config: Config) -> None:
    async with await ContextEngine.open(config=config.replace(fresh_tail_count=4, leaf_min_fanout=2)) as engine:
        await engine.ingest_batch("s", [Message.system(POLICY), *chat(60), Message.system(POLICY + " (2)")])
        await engine.ingest_batch("s", chat(60, start=60))
        done = await engine.compact("s", force=True)
        assert done.summaries
        context = await engine.store.get_context(done.conversation_id)
        system = [e for e in context if e.kind == "message" and e.role == "system"]
        assert len(system) == 2  # never folded into a summary
        for summary in done.summaries:
            assert POLICY not in summary.content
        for budget in (300, 1_000, 8_000, 128_000):
            out = await engine.assemble("s", token_budget=budget)
            assert out.estimated_tokens <= budget
            assert all(e.message_id in out.included for e in system), budget
            text = str(out.messages)
            assert POLICY in text or budget < 1_000  # whole, except where the budget forces an excerpt


def test_lcm_compact_full_keeps_the_system_message(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'c.db'}"

    async def seed() -> None:
        async with await ContextEngine.open(database, fresh_tail_count=2, leaf_min_fanout=2) as engine:
            await engine.ingest_batch("s", [Message.system(POLICY), *chat(40)])

    anyio.run(seed)
    env = {"LCM_FRESH_TAIL_COUNT": "2", "LCM_LEAF_MIN_FANOUT": "2"}
    result = CliRunner().invoke(cli, ["--database", database, "compact", "s", "--full"], env=env)
    assert result.exit_code == 0, result.output

    async def check() -> None:
        async with await ContextEngine.open(database) as engine:
            context = await engine.store.get_context((await engine.conversation("s")).id)
            assert any(e.kind == "summary" for e in context)
            assert next(e.role for e in context if e.kind == "message") == "system"

    anyio.run(check)


async def test_500_tiny_messages_trigger_compaction_by_count(config: Config) -> None:
    async with await ContextEngine.open(config=config.replace(max_active_messages=400)) as engine:
        tiny = [Message("user" if i % 2 == 0 else "assistant", f"ok {i}") for i in range(500)]
        before = await engine.evaluate("s", token_budget=128_000)
        assert not before.compact and before.reason == "under_threshold"
        result = await engine.after_turn("s", tiny, token_budget=128_000)
        assert result.error is None and result.decision is not None
        assert result.decision.reason == "message_count" and result.decision.active_messages == 500
        assert result.compaction is not None and result.compaction.summaries
        context = await engine.store.get_context(result.ingest.conversation_id or 0)
        assert sum(1 for e in context if e.kind == "message") <= 400
        # Far under the token threshold all along: the count alone fired.
        assert result.decision.stored_tokens < 0.75 * 128_000


async def test_an_observed_prompt_over_the_threshold_triggers_though_the_store_is_small(config: Config) -> None:
    async with await ContextEngine.open(config=config.replace(fresh_tail_count=4, leaf_min_fanout=2)) as engine:
        await engine.ingest_batch("s", chat(30))
        stored = sum(e.token_count for e in await engine.store.get_context((await engine.conversation("s")).id))
        budget = stored * 4  # the stored context is a quarter of the budget: no trigger of its own
        quiet = await engine.evaluate("s", token_budget=budget)
        assert not quiet.compact and quiet.reason == "under_threshold"
        observed = int(budget * 0.9)  # the host's system prompt and tool schemas fill the rest
        decision = await engine.evaluate("s", token_budget=budget, observed_tokens=observed)
        assert decision.compact and decision.reason == "threshold" and decision.mode == "full"
        assert decision.target_tokens == int(0.75 * budget) - (observed - stored)
        assert "observed prompt" in decision.explanation
        assert not await engine.store.list_summaries((await engine.conversation("s")).id)  # evaluate compacts nothing
        result = await engine.after_turn("s", chat(2, start=30), token_budget=budget, observed_tokens=observed)
        assert result.error is None and result.compaction is not None and result.compaction.summaries
        assert result.decision is not None and result.decision.reason == "threshold"
        bad = await engine.after_turn("s", [], token_budget=budget, observed_tokens=-1)
        assert bad.error is not None and "observed_tokens" in bad.error


async def test_a_stale_queued_job_is_a_no_op_with_its_reason(config: Config) -> None:
    async with await ContextEngine.open(config=config.replace(fresh_tail_count=4, leaf_min_fanout=2)) as engine:
        if not isinstance(engine.store, JobQueue):
            pytest.fail("both backends have a job queue")
        await engine.ingest_batch("s", chat(40))
        conversation = await engine.conversation("s")
        tokens = sum(e.token_count for e in await engine.store.get_context(conversation.id))
        # Queued by the threshold trigger, but by the time a worker takes it the context is small enough.
        stale = await engine.enqueue_compaction("s", reason="threshold", mode="full", target_tokens=tokens + 1)
        settings = WorkerSettings(poll_ms=10)
        assert await engine.worker(settings).run(anyio.Event(), once=True) == 1
        live = await engine.enqueue_compaction("s", reason="threshold", mode="incremental")
        assert await engine.worker(settings).run(anyio.Event(), once=True) == 1
        jobs = {j.id: j for j in await engine.store.list_jobs()}
        assert jobs[stale.id].state == "done"
        assert jobs[stale.id].result == {
            "skipped": f"the context is already under the threshold ({tokens:,} <= {tokens + 1:,} tokens)"
        }
        skipped = jobs[live.id].result
        assert isinstance(skipped, dict) and "leaf_chunk_tokens" in str(skipped["skipped"])
        assert not await engine.store.list_summaries(conversation.id)
        # A manual job is run as asked.
        manual = await engine.enqueue_compaction("s", mode="full")
        assert await engine.worker(settings).run(anyio.Event(), once=True) == 1
        done = {j.id: j for j in await engine.store.list_jobs()}[manual.id].result
        assert isinstance(done, dict) and done.get("summaries")


def test_decide_is_pure_and_explains_itself() -> None:
    config = Config(max_active_messages=3)
    off = decide([], budget=1000, config=config.replace(autocompact_disabled=True), needs_leaf_pass=True)
    assert not off.compact and off.reason == "disabled" and "autocompact_disabled" in off.explanation
    leaf = decide([], budget=1000, config=config, needs_leaf_pass=True)
    assert leaf.compact and leaf.mode == "incremental" and leaf.reason == "leaf_chunk"
    assert decide([], budget=1000, config=config, needs_leaf_pass=False).to_dict()["reason"] == "under_threshold"
