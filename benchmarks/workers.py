"""Workers scale out on PostgreSQL: 1, 2 and 4 ``lcm worker`` processes drain one queue of compaction jobs.

Each run starts from a fresh database holding the same N conversations (96; ``--quick``: 16) of real
agent messages, each with one queued ``full`` compaction job.  The summarizer is the OpenAI provider
talking to a loopback stub that answers after ``LATENCY`` seconds, as a real model would — the jobs are
dominated by waiting on the model, which is what a worker pool is for.  The memories each new leaf
yields (mined by default) are embedded through the same stub's OpenAI-compatible embeddings route.
Then K ``lcm worker --once`` processes (real processes, each its own connection pool) run until the
queue is empty.

While the workers run, :data:`HOSTS` hosts (engines of this process, each on its own connection pool)
keep ingesting new turns, one message per call (about 50 a second each, :data:`PACE_S`), each into a
conversation of its own, as live agents beside the workers would (conversations of their own, so
that each worker count gets the same jobs: turns added to the conversations being compacted make a
job's work grow with the time it waits).

Figures: jobs per second for K = 1, 2, 4 (process start-up included), the ratio of K workers against one
(goal: 4 workers ≥ 2.5×), and the hosts' ingest rate while the workers run.  Checks, each run: every job
ran exactly once (done, one attempt); no two compaction runs of one conversation overlapped in time (the
per-conversation advisory lock); every message a host sent is stored exactly once, in its conversation;
the store's integrity report is clean.  A failed check stops the benchmark.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/pg.py: the embedded server

from tests import pg

from _harness import Figure, parse_args, report
from ingest import load_messages, realistic
from lossless import ContextEngine, Message
from lossless.testing import DEFAULT_REPLY, StubProviderServer, StubReply

LATENCY = 0.15  # seconds per summarizer call
MESSAGES = 60  # per conversation
HOSTS = 2  # engines ingesting while the workers compact
PACE_S = 0.02  # a host's pause between two messages (about 50 messages a second each, far above a live agent's)
SETTINGS = {
    "LCM_SUMMARY_PROVIDER": "openai",
    "LCM_SUMMARY_MODEL": "stub-model",
    "LCM_SUMMARY_API_KEY": "offline",
    "LCM_FRESH_TAIL_COUNT": "8",
    "LCM_LEAF_CHUNK_TOKENS": "3000",
}
LCM = Path(sys.executable).with_name("lcm")


def environment(url: str, stub: StubProviderServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LCM_")}
    env.update({k: v for k, v in SETTINGS.items() if v})
    env.update(
        {
            "LCM_DATABASE_URL": url,
            "LCM_SUMMARY_BASE_URL": stub.openai_base_url,
            # the memories mined from each new leaf are embedded by the same kind of remote model
            "LCM_MEMORY_EMBEDDER": "openai",
            "LCM_MEMORY_EMBEDDING_BASE_URL": stub.openai_base_url,
            "LCM_MEMORY_EMBEDDING_MODEL": "stub-embedder",
            "LCM_LEAF_TARGET_TOKENS": "300",
            "LCM_CONDENSED_TARGET_TOKENS": "300",
        }
    )
    return env


async def seed(url: str, conversations: int) -> None:
    pool = load_messages()
    async with await ContextEngine.open(url, leaf_chunk_tokens=3000, leaf_target_tokens=300) as engine:
        for c in range(conversations):
            messages = realistic(MESSAGES, pool[c * 7 :] + pool[: c * 7], f"w{c}-")
            await engine.ingest_batch(f"work-{c}", messages)
            await engine.enqueue_compaction(f"work-{c}", reason="manual", mode="full")


async def check(url: str, conversations: int, sent: dict[str, list[str]]) -> int:
    """Every job done once, runs of one conversation never overlapping, every host message stored once,
    integrity clean; returns passes made."""
    async with await ContextEngine.open(url) as engine:
        for session, keys in sent.items():
            stored = [m.event_key for m in await engine.messages(session) if (m.event_key or "").startswith("host")]
            if sorted(stored) != sorted(keys):
                raise SystemExit(f"{session}: the hosts sent {len(keys)} messages, {len(stored)} are stored")
        jobs = await engine.store.list_jobs(limit=10_000)
        compaction = [j for j in jobs if j.kind == "compaction"]
        if len(compaction) != conversations or any(j.state != "done" or j.attempts != 1 for j in compaction):
            states = sorted({(j.state, j.attempts) for j in compaction})
            raise SystemExit(f"jobs not each done once: {len(compaction)} jobs, (state, attempts) = {states}")
        passes = 0
        for c in range(conversations):
            events = await engine.compaction_events(f"work-{c}")
            passes += len(events)
            runs: dict[str, tuple[float, float]] = {}
            for e in events:
                t = e.created_at.timestamp()
                first, last = runs.get(e.run_id, (t, t))
                runs[e.run_id] = (min(first, t), max(last, t))
            spans = sorted(runs.values())
            if any(b[0] < a[1] for a, b in itertools.pairwise(spans)):
                raise SystemExit(f"work-{c}: two compaction runs overlapped")
        if passes < conversations:
            raise SystemExit(f"only {passes} compaction passes for {conversations} jobs: the jobs did not compact")
        problems = (await engine.check_integrity()).problems
        if problems:
            raise SystemExit(f"integrity problems after the workers: {problems[:3]}")
    return passes


async def hosts(url: str, procs: list[subprocess.Popen[bytes]]) -> dict[str, list[str]]:
    """Ingest one message per call into the conversations until every worker has exited; the keys sent."""
    sent: dict[str, list[str]] = {}

    async def host(h: int) -> None:
        async with await ContextEngine.open(url) as engine:
            n = 0
            while any(p.poll() is None for p in procs):
                session, key = f"live-{h}", f"host{h}-{n}"
                await engine.ingest(session, Message.user(f"host {h}, turn {n}: still here", event_key=key))
                sent.setdefault(session, []).append(key)
                n += 1
                await anyio.sleep(PACE_S)

    async with anyio.create_task_group() as group:
        for h in range(HOSTS):
            group.start_soon(host, h)
    return sent


def drain(env: dict[str, str], workers: int, url: str) -> tuple[float, dict[str, list[str]]]:
    """Run the workers to the end while the hosts ingest; (seconds, the hosts' keys by conversation)."""
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        logs = [stack.enter_context(tempfile.TemporaryFile()) for _ in range(workers)]  # not a pipe: never blocks
        procs = [
            subprocess.Popen([str(LCM), "worker", "--once", "--poll", "0.05"], env=env, stderr=log) for log in logs
        ]
        sent = anyio.run(hosts, url, procs)
        for proc, log in zip(procs, logs, strict=True):
            proc.wait(timeout=900)
            log.seek(0)
            if proc.returncode != 0:
                raise SystemExit(f"a worker failed ({proc.returncode}): {log.read().decode(errors='replace')[-2000:]}")
    return time.perf_counter() - started, sent


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    conversations = 16 if args.quick else 96
    server = pg.start()
    pg.prepare_template(server)
    rates: dict[int, float] = {}
    notes: dict[int, str] = {}
    hosted: dict[int, float] = {}
    try:
        with StubProviderServer(default=StubReply(text=DEFAULT_REPLY.text, delay_s=LATENCY)) as stub:
            for workers in (1, 2, 4):
                url = server.create_database()
                try:
                    anyio.run(seed, url, conversations)
                    seconds, sent = drain(environment(url, stub), workers, url)
                    passes = anyio.run(check, url, conversations, sent)
                finally:
                    server.drop_database(url)
                rates[workers] = conversations / seconds
                written = sum(len(keys) for keys in sent.values())
                hosted[workers] = written / seconds
                notes[workers] = (
                    f"{conversations} jobs ({passes} passes) in {seconds:.1f} s, {written:,} messages from "
                    f"{HOSTS} hosts meanwhile; checks passed"
                )
                print(f"{workers} worker(s): {rates[workers]:.2f} jobs/s — {notes[workers]}")
    finally:
        server.close()
    figures = [Figure("1 worker", rates[1], "job/s", note=notes[1])]
    figures += [
        Figure(
            f"{k} workers vs 1",
            rates[k],
            "job/s",
            baseline=rates[1],
            goal=2.5 if k == 4 else None,
            goal_op=">=" if k == 4 else None,
            note=notes[k],
        )
        for k in (2, 4)
    ]
    paced = f"{HOSTS} hosts, one message a call, {PACE_S * 1000:.0f} ms apart"
    figures += [Figure(f"hosts' ingest while {k} worker(s) run", hosted[k], "msg/s", note=paced) for k in (1, 2, 4)]
    report("workers", figures, args.json)


if __name__ == "__main__":
    main()
