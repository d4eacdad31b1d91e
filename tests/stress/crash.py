"""Crash and concurrency proof: ingest + compaction in subprocesses, killed with SIGKILL at random moments.

``python -m tests.stress.crash [--kills N] [--processes P] [--seed S] [--database URL]`` runs N kill
rounds on one store — a SQLite file by default, or any ``sqlite:///`` or ``postgresql://`` URL —
(each round replays a few messages that were already acknowledged, to check they are skipped), then
P processes ingesting into and compacting that same store at once, and prints::

    kills=N acknowledged=A lost=0 duplicates=0 integrity_problems=0

The test suite runs the same functions with a handful of kills (``tests/test_crash.py``).

A *child* (``--child``) prints ``ready`` once its engine is open, then ``ack KEY`` after each
ingest call has returned, so whatever it printed is what it was told is stored; the driver checks
every acknowledged key is stored exactly once after the kills.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[2]

# Small thresholds, so that a few dozen messages already make leaf and condensed summaries.
SETTINGS: dict[str, object] = {
    "fresh_tail_count": 4,
    "leaf_chunk_tokens": 400,
    "leaf_target_tokens": 120,
    "condensed_target_tokens": 120,
    "leaf_min_fanout": 3,
    "condensed_min_fanout": 3,
    "condensed_min_fanout_hard": 2,
    "large_file_token_threshold": 800,
}
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def database_url(database: Path | str) -> str:
    """A store URL: a path is a SQLite file; a string is already a URL."""
    return f"sqlite:///{database}" if isinstance(database, Path) else database


def settings_for(url: str) -> dict[str, object]:
    # On PostgreSQL the bytes of large files go into the database too: every process sees them.
    return {**SETTINGS, "large_files_storage": "database"} if url.startswith("postgres") else SETTINGS


def message_text(prefix: str, n: int) -> str:
    if n % 17 == 5:  # now and then a large file, stored aside before its message
        body = "\n".join(f"{prefix} row {n}.{i}: " + "value " * 12 for i in range(150))
        return f'see <file name="dump-{n}.txt">\n{body}\n</file>'
    return f"{prefix} message {n}: " + " ".join(f"w{n}_{i}" for i in range(30 + n % 20))


async def _child(url: str, prefix: str, start: int, count: int, replay: int) -> None:
    from lossless import ContextEngine, Message

    async with await ContextEngine.open(url, **settings_for(url)) as engine:  # type: ignore[arg-type]
        print("ready", flush=True)
        sessions = [f"{prefix}-own", "shared"]  # one session of its own, one every process writes to
        for n in range(max(0, start - replay), start + count):
            key = f"{prefix}:{n}"
            session = sessions[n % 2]
            role = "user" if n % 3 else "assistant"
            message = Message(role, message_text(prefix, n), created_at=T0 + timedelta(seconds=n), event_key=key)
            result = await engine.ingest(session, message)
            if result.conversation_id is None:
                raise SystemExit(f"ingest of {key} stored nothing: {result}")
            print(f"ack {key}", flush=True)
            if n % 7 == 6:
                await engine.compact(session, force=n % 21 == 20)


@dataclass
class Outcome:
    kills: int = 0
    acknowledged: set[str] = field(default_factory=set)
    lost: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"kills={self.kills} acknowledged={len(self.acknowledged)} lost={len(self.lost)} "
            f"duplicates={len(self.duplicates)} integrity_problems={len(self.problems)}"
        )


def _spawn(database: Path | str, prefix: str, start: int, count: int, replay: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    url = database_url(database)
    command = [sys.executable, "-m", "tests.stress.crash", "--child", url, prefix, str(start), str(count)]
    return subprocess.Popen(
        [*command, "--replay", str(replay)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _acks(output: str) -> list[str]:
    return [line[4:] for line in output.splitlines() if line.startswith("ack ")]


def kill_rounds(database: Path | str, kills: int, *, seed: int = 0, max_delay: float = 1.2) -> Outcome:
    """Run ``kills`` children one after another, each SIGKILLed a random time after its first acknowledgement."""
    rng = random.Random(seed)
    outcome = Outcome()
    next_n = 0
    for _ in range(kills):
        child = _spawn(database, "k", next_n, 100_000, replay=3)
        assert child.stdout is not None
        ready = child.stdout.readline()
        if ready.strip() != "ready":
            child.kill()
            _, err = child.communicate()
            raise RuntimeError(f"the child did not start: {ready!r} {err[-2000:]}")
        # The random delay runs from the round's first acknowledgement, not from "ready": how long a
        # child takes to start writing (loading the tokenizer, a background indexer starting) varies
        # with the machine's load, and a round killed before it acknowledged anything proves nothing.
        first = child.stdout.readline()
        time.sleep(rng.uniform(0.0, max_delay))
        os.kill(child.pid, signal.SIGKILL)
        out, _ = child.communicate()
        outcome.kills += 1
        acked = _acks(first + out)
        outcome.acknowledged.update(acked)
        if acked:
            next_n = max(next_n, max(int(k.split(":")[1]) for k in acked) + 1)
    return outcome


def concurrent_writers(database: Path | str, processes: int, count: int) -> Outcome:
    """``processes`` children at once, each ingesting ``count`` messages and compacting as it goes."""
    outcome = Outcome()
    children = [_spawn(database, f"p{i}", 0, count, replay=0) for i in range(processes)]
    for i, child in enumerate(children):
        out, err = child.communicate(timeout=600)
        if child.returncode != 0:
            outcome.problems.append(f"writer p{i} exited with {child.returncode}: {err.strip()[-2000:]}")
        outcome.acknowledged.update(_acks(out))
    return outcome


_COUNT_KEYS = "SELECT event_key, count(*) FROM messages WHERE event_key IS NOT NULL GROUP BY event_key"


def _event_key_counts(database: Path | str) -> dict[str, int]:
    url = database_url(database)
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url[len("sqlite:///") :])
        try:
            return dict(conn.execute(_COUNT_KEYS))
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(url) as pg:
        return {str(k): int(n) for k, n in pg.execute(_COUNT_KEYS)}


def verify(database: Path | str, outcome: Outcome) -> Outcome:
    """Reopen the store: every acknowledged key stored exactly once, and the integrity check clean."""
    counts = _event_key_counts(database)
    url = database_url(database)
    outcome.lost = sorted(k for k in outcome.acknowledged if k not in counts)
    outcome.duplicates = sorted(k for k, n in counts.items() if n > 1)

    async def check() -> list[str]:
        from lossless import ContextEngine

        async with await ContextEngine.open(url, **settings_for(url)) as engine:  # type: ignore[arg-type]
            await engine.store.wait_indexed()
            report = await engine.check_integrity()
            return [f"{p.kind} {p.subject}: {p.detail}" for p in report.problems]

    outcome.problems += anyio.run(check)
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--child", nargs=4, metavar=("DB", "PREFIX", "START", "COUNT"))
    parser.add_argument("--replay", type=int, default=0)
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--count", type=int, default=150, help="messages per concurrent writer")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--database", help="a sqlite:/// or postgresql:// URL (default: a new SQLite file)")
    args = parser.parse_args(argv)
    if args.child:
        url, prefix, start, count = args.child
        anyio.run(_child, url, prefix, int(start), int(count), args.replay)
        return 0
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        database: Path | str = args.database or Path(tmp) / "crash.db"
        started = time.monotonic()
        kills = verify(database, kill_rounds(database, args.kills, seed=args.seed))
        print("after kill -9 rounds:      ", kills.line(), f"({time.monotonic() - started:.0f} s)", flush=True)
        started = time.monotonic()
        together = verify(database, concurrent_writers(database, args.processes, args.count))
        print(
            f"{args.processes} concurrent writers:     ",
            together.line(),
            f"({time.monotonic() - started:.0f} s)",
            flush=True,
        )
        for outcome in (kills, together):
            for problem in (outcome.problems + outcome.lost + outcome.duplicates)[:20]:
                print("  ", problem)
        bad = any(o.lost or o.duplicates or o.problems for o in (kills, together))
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
