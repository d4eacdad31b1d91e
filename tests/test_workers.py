"""Background jobs: the queue contract on SQLite, the worker loop, embedded mode, and ``lcm worker``."""

from __future__ import annotations

import functools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner, Result

from lossless import ContextEngine
from lossless.cli import cli
from lossless.errors import InputError
from lossless.ports import Job, JobQueue
from lossless.records import JSONValue
from lossless.workers import Worker, WorkerSettings

from .conftest import BACKENDS, backend_url
from .test_integrity import SETTINGS, chat

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@pytest.fixture(params=BACKENDS)
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ContextEngine]:
    url = backend_url(request, request.param, tmp_path, "w")
    opened = await ContextEngine.open(url, **SETTINGS, memory_embedder="hash")  # type: ignore[arg-type]
    try:
        yield opened
    finally:
        await opened.dispose()


def queue_of(engine: ContextEngine) -> JobQueue:
    assert isinstance(engine.store, JobQueue)
    return engine.store


async def two_conversations(engine: ContextEngine) -> tuple[int, int]:
    a = await engine.ingest_batch("a", chat(30))
    b = await engine.ingest_batch("b", chat(30, start=100))
    assert a.conversation_id is not None and b.conversation_id is not None
    return a.conversation_id, b.conversation_id


class Runner:
    def __init__(self, fail: int = 0, block: bool = False) -> None:
        self.fail = fail
        self.block = block
        self.ran: list[int] = []
        self.started = anyio.Event()

    async def run_compaction_job(self, job: Job) -> JSONValue:
        self.ran.append(job.id)
        self.started.set()
        if self.block:
            await anyio.sleep_forever()
        if self.fail:
            self.fail -= 1
            raise RuntimeError("summarizer down")
        return {"ok": True}

    async def run_integrity_job(self, job: Job) -> JSONValue:
        return await self.run_compaction_job(job)


async def test_worker_retries_a_failing_job_then_succeeds(engine: ContextEngine) -> None:
    a, _ = await two_conversations(engine)
    q = queue_of(engine)
    job = await q.enqueue_job("compaction", reason="manual", conversation_id=a, requested_at=NOW)
    runner = Runner(fail=2)
    worker = Worker(q, runner, WorkerSettings(lease_ms=5000, poll_ms=10, max_attempts=5))
    assert await worker.run(anyio.Event(), once=True) == 1
    assert runner.ran == [job.id] * 3 and worker.failed == 2
    [done] = await q.list_jobs()
    assert done.state == "done" and done.attempts == 3


async def test_worker_gives_up_after_max_attempts(engine: ContextEngine) -> None:
    a, _ = await two_conversations(engine)
    q = queue_of(engine)
    await q.enqueue_job("compaction", reason="manual", conversation_id=a, requested_at=NOW)
    worker = Worker(q, Runner(fail=99), WorkerSettings(lease_ms=5000, poll_ms=10, max_attempts=2))
    assert await worker.run(anyio.Event(), once=True) == 0
    [failed] = await q.list_jobs()
    assert failed.state == "failed" and "summarizer down" in (failed.error or "")


async def test_graceful_stop_gives_the_running_job_back(engine: ContextEngine) -> None:
    a, _ = await two_conversations(engine)
    q = queue_of(engine)
    job = await q.enqueue_job("compaction", reason="manual", conversation_id=a, requested_at=NOW)
    runner = Runner(block=True)
    worker = Worker(q, runner, WorkerSettings(lease_ms=5000, poll_ms=10, grace_s=0.05))
    stop = anyio.Event()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(worker.run, stop)
            await runner.started.wait()
            stop.set()
    [back] = await q.list_jobs()
    assert back.id == job.id and back.state == "queued" and back.attempts == 0


async def test_a_worker_that_loses_its_lease_stops_the_job(engine: ContextEngine) -> None:
    a, _ = await two_conversations(engine)
    q = queue_of(engine)
    job = await q.enqueue_job("compaction", reason="manual", conversation_id=a, requested_at=NOW)
    clock = [0.0]
    runner = Runner(block=True)
    worker = Worker(q, runner, WorkerSettings(lease_ms=300, poll_ms=10), owner="slow", clock=lambda: clock[0])
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(functools.partial(worker.run, anyio.Event(), once=True))
            await runner.started.wait()
            # Another worker takes the job over once the lease (by the store's clock) ran out.
            taken = await q.claim_job("fast", lease_ms=60_000, now_ms=10_000, max_attempts=5)
            assert taken is not None and taken.id == job.id
    [mine] = await q.list_jobs()
    assert mine.lease_owner == "fast" and mine.state == "running"
    assert worker.done == 0 and worker.failed == 0


async def test_engine_jobs_compact_and_check(engine: ContextEngine) -> None:
    a, _ = await two_conversations(engine)
    compaction = await engine.enqueue_compaction("a", mode="full")
    integrity = await engine.enqueue_integrity(mode="scan_and_plan")
    with pytest.raises(InputError):
        await engine.enqueue_compaction("a", mode="sideways")  # type: ignore[arg-type]
    with pytest.raises(InputError):
        await engine.enqueue_integrity(mode="deep")
    worker = engine.worker(WorkerSettings(poll_ms=10))
    assert await worker.run(anyio.Event(), once=True) == 2
    jobs = {j.id: j for j in await queue_of(engine).list_jobs()}
    result = jobs[compaction.id].result
    assert isinstance(result, dict) and result["summaries"] and result["tokens_after"] < result["tokens_before"]  # type: ignore[operator]
    assert jobs[integrity.id].result == {"ok": True, "problem_counts": {}, "plan": {"repairs": [], "unrepairable": []}}
    assert await engine.store.list_summaries(a)


async def test_embedded_background_worker_takes_over_after_turn_compaction(engine: ContextEngine) -> None:
    async with engine.background(WorkerSettings(poll_ms=10)):
        turn = await engine.after_turn("s", chat(40), token_budget=2000)
        assert turn.error is None and turn.compaction is None
        with anyio.fail_after(20):
            while not await queue_of(engine).list_jobs(state="done"):  # noqa: ASYNC110 - polling the store
                await anyio.sleep(0.02)
        with pytest.raises(InputError):
            async with engine.background():
                pass
    [job] = await queue_of(engine).list_jobs()
    assert job.reason == "threshold" and job.kind == "compaction"
    assert await engine.store.list_summaries(turn.ingest.conversation_id)  # type: ignore[arg-type]
    events = await engine.compaction_events("s")
    assert events and {e.trigger for e in events} == {"threshold"}  # the job's reason is the passes' trigger
    assert (await engine.check_integrity()).ok
    # Outside background(), after_turn compacts inline again.
    inline = await engine.after_turn("s", chat(40, start=40), token_budget=2000)
    assert inline.compaction is not None


def done_jobs(path: Path) -> list[int]:
    conn = sqlite3.connect(path)
    try:
        return [r[0] for r in conn.execute("SELECT job_id FROM jobs WHERE state = 'done'")]
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.usefixtures("hash_memory")  # the worker's compaction mines memories in passing; none is read
def test_lcm_worker_runs_jobs_and_stops_on_sigterm(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    env = {
        **os.environ,
        "LCM_DATABASE_URL": url,
        **{f"LCM_{k.upper()}": str(v) for k, v in SETTINGS.items()},
    }
    lcm_bin = str(Path(sys.executable).with_name("lcm"))

    def lcm(*args: str) -> Result:
        return CliRunner().invoke(cli, ["--database", url, *args], catch_exceptions=False)

    async def setup() -> None:
        async with await ContextEngine.open(url, **SETTINGS) as engine:  # type: ignore[arg-type]
            await engine.ingest_batch("s", chat(40))

    anyio.run(setup)
    added = lcm("jobs", "add", "compaction", "s", "--full", "--json")
    assert added.exit_code == 0, added.output
    job_id = json.loads(added.stdout)["id"]
    assert lcm("jobs", "add", "compaction").exit_code == 2
    worker = subprocess.Popen(
        [lcm_bin, "worker", "--poll", "0.05", "--log-format", "json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not done_jobs(tmp_path / "w.db") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert done_jobs(tmp_path / "w.db") == [job_id]
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, err
    listed = json.loads(lcm("jobs", "list", "--json").stdout)
    assert [(j["id"], j["state"], j["attempts"]) for j in listed] == [(job_id, "done", 1)]
    logs = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert any(
        line["message"].startswith("compacted conversation") and line["trigger_reason"] == "manual" for line in logs
    )
    assert any("stopped after 1 jobs" in line["message"] for line in logs)


def test_a_killed_workers_job_is_retried_by_another_after_its_lease(tmp_path: Path) -> None:
    """SIGKILL a worker in the middle of a compaction (its summarizer is slow); another finishes the job."""
    from lossless.testing import StubProviderServer, StubReply

    url = f"sqlite:///{tmp_path / 'k.db'}"

    async def setup() -> None:
        async with await ContextEngine.open(url, **SETTINGS) as engine:  # type: ignore[arg-type]
            await engine.ingest_batch("s", chat(14))
            await engine.enqueue_compaction("s", mode="full")

    anyio.run(setup)
    lcm_bin = str(Path(sys.executable).with_name("lcm"))
    with StubProviderServer(
        default=StubReply.answer("The user and assistant traded numbered notes.", delay_s=0.1)
    ) as stub:
        env = {
            **os.environ,
            "LCM_DATABASE_URL": url,
            **{f"LCM_{k.upper()}": str(v) for k, v in SETTINGS.items()},
            "LCM_SUMMARY_PROVIDER": "openai",
            "LCM_SUMMARY_MODEL": "stub-model",
            "LCM_SUMMARY_API_KEY": "sk-test",
            "LCM_SUMMARY_BASE_URL": stub.openai_base_url,
        }
        first = subprocess.Popen([lcm_bin, "worker", "--lease", "1", "--poll", "0.05"], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not stub.requests and time.monotonic() < deadline:
                time.sleep(0.02)
            assert stub.requests, "the first worker never called the summarizer"
        finally:
            first.kill()  # SIGKILL, mid-compaction
            first.communicate()
        time.sleep(1.2)  # let the lease run out
        second = subprocess.run(
            [lcm_bin, "worker", "--once", "--lease", "30"], env=env, capture_output=True, text=True, timeout=120
        )
        assert second.returncode == 0, second.stderr

    async def check() -> None:
        async with await ContextEngine.open(url, **SETTINGS) as engine:  # type: ignore[arg-type]
            [job] = await queue_of(engine).list_jobs()
            assert job.state == "done" and job.attempts == 2
            assert await engine.store.list_summaries(1)
            report = await engine.check_integrity()
            assert report.ok, report.problems

    anyio.run(check)
