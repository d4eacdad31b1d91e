"""Integrity checks and repairs beside a live writer: ``lcm doctor`` must neither cry wolf nor corrupt.

``python -m tests.stress.doctor_race [--turns N] [--runs R] [--database URL | --postgres] [--cli] [--out FILE]``
runs, R times, a writer process doing N ``after_turn`` turns (each stores a user and an assistant
message and compacts when a trigger fires: leaf passes and full sweeps, with small thresholds) while this process
loops over integrity checks — each a read-only check followed, when it found anything, by the
repairs of ``lcm doctor --apply`` — until the writer is done; then one final check.  It prints, per
run::

    run=1 turns=N checks=C false_alarms=0 repairs_applied=0 writer_errors=0 final_problems=0

``false_alarms`` counts checks that reported a problem while the writer ran (a sound checker reads
one consistent state and finds none); ``final_problems`` what the last check finds once the writer
has stopped.  ``--cli`` runs the real ``lcm doctor --apply --json`` command in each loop instead of
the in-process engine (slower: one process start per check).  A ``postgresql://`` URL runs it on
PostgreSQL (the runs share that database, so each later run checks the earlier runs' rows too);
``--postgres`` gives each run a fresh database of an embedded server instead.  ``--out`` appends each
run's line to a file the moment the run ends.

``tests/test_doctor_race.py`` runs a short version on both backends.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[2]
LCM = Path(sys.executable).with_name("lcm")

# Small thresholds: a few turns already make leaf summaries, and full sweeps condense them.
SETTINGS: dict[str, object] = {
    "fresh_tail_count": 4,
    "leaf_chunk_tokens": 300,
    "leaf_target_tokens": 80,
    "condensed_target_tokens": 80,
    "leaf_min_fanout": 3,
    "condensed_min_fanout": 3,
    "condensed_min_fanout_hard": 2,
    "context_threshold": 0.5,
}
BUDGET = 1500
#: The writer reports its pace every this many turns (``Run.pace``: where a slow run lost its time).
PROGRESS_EVERY = 1000
T0 = datetime(2026, 2, 1, 9, 0, tzinfo=UTC)


def database_url(database: Path | str) -> str:
    return f"sqlite:///{database}" if isinstance(database, Path) else database


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.update({f"LCM_{k.upper()}": str(v) for k, v in SETTINGS.items()})
    return env


async def _writer(url: str, turns: int, session: str) -> None:
    from lossless import ContextEngine, Message

    errors = 0
    async with await ContextEngine.open(url, **SETTINGS) as engine:  # type: ignore[arg-type]
        print("ready", flush=True)
        block = time.monotonic()
        for n in range(turns):
            when = T0 + timedelta(seconds=2 * n)
            turn = [
                Message("user", f"turn {n}: " + " ".join(f"q{n}_{i}" for i in range(12 + n % 9)), created_at=when),
                Message(
                    "assistant",
                    f"answer {n}: " + " ".join(f"a{n}_{i}" for i in range(20 + n % 13)),
                    created_at=when + timedelta(seconds=1),
                ),
            ]
            result = await engine.after_turn(session, turn, token_budget=BUDGET)
            if result.error is not None:
                errors += 1
                if errors <= 20:  # the parent reads the pipe only at the end: keep it from filling up
                    print(f"error {result.error}", flush=True)
            if (n + 1) % PROGRESS_EVERY == 0:
                now = time.monotonic()
                print(f"progress turns={n + 1} ms_per_turn={1000 * (now - block) / PROGRESS_EVERY:.1f}", flush=True)
                block = now
    print(f"done errors={errors}", flush=True)


@dataclass
class Run:
    turns: int
    checks: int = 0
    false_alarms: int = 0
    alarm_kinds: dict[str, int] = field(default_factory=dict)
    repairs_applied: int = 0
    writer_errors: int = 0
    final_problems: int = -1
    #: The writer's milliseconds per turn in each block of PROGRESS_EVERY turns, and the slowest check's seconds.
    pace: list[float] = field(default_factory=list)
    slowest_check_s: float = 0.0

    def line(self, number: int) -> str:
        return (
            f"run={number} turns={self.turns} checks={self.checks} false_alarms={self.false_alarms} "
            f"repairs_applied={self.repairs_applied} writer_errors={self.writer_errors} "
            f"final_problems={self.final_problems}"
            + (f" alarm_kinds={self.alarm_kinds}" if self.alarm_kinds else "")
            + (f" ms_per_turn={'/'.join(f'{p:.0f}' for p in self.pace)}" if self.pace else "")
            + f" slowest_check_s={self.slowest_check_s:.1f}"
        )


def _spawn_writer(url: str, turns: int, session: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "tests.stress.doctor_race", "--writer", url, str(turns), session]
    return subprocess.Popen(command, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _doctor_cli(url: str) -> tuple[dict[str, object], int]:
    done = subprocess.run(
        [str(LCM), "--database", url, "doctor", "--apply", "--json"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode not in (0, 10):
        raise RuntimeError(f"lcm doctor failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout), done.returncode


async def race(database: Path | str, turns: int, cli: bool = False, session: str = "race") -> Run:
    """One run: a writer of ``turns`` turns beside a check-and-repair loop; see the module docstring."""
    from lossless import ContextEngine
    from lossless.integrity import plan_repairs

    url = database_url(database)
    run = Run(turns)
    writer = _spawn_writer(url, turns, session)
    assert writer.stdout is not None
    ready = await anyio.to_thread.run_sync(writer.stdout.readline)
    if ready.strip() != "ready":
        writer.kill()
        _, err = writer.communicate()
        raise RuntimeError(f"the writer did not start: {ready!r} {err[-2000:]}")

    def note(kinds: dict[str, int]) -> None:
        run.false_alarms += 1
        for kind, count in kinds.items():
            run.alarm_kinds[kind] = run.alarm_kinds.get(kind, 0) + count

    async with await ContextEngine.open(url, **SETTINGS) as engine:  # type: ignore[arg-type]
        while writer.poll() is None:
            run.checks += 1
            check_started = time.monotonic()
            if cli:
                result, _ = await anyio.to_thread.run_sync(_doctor_cli, url)
                report = result["report"]
                assert isinstance(report, dict)
                if not report["ok"]:
                    note(dict(report["problem_counts"]))  # type: ignore[arg-type]
                run.repairs_applied += len(result.get("applied", ()))  # type: ignore[arg-type]
                continue
            report = await engine.check_integrity()
            run.slowest_check_s = max(run.slowest_check_s, time.monotonic() - check_started)
            if not report.ok:
                note(report.counts())
                outcome = await engine.repair_integrity(plan_repairs(report))
                run.repairs_applied += len(outcome.applied)
            await anyio.sleep(0.01)
        out, err = await anyio.to_thread.run_sync(writer.communicate)
        if writer.returncode != 0:
            raise RuntimeError(f"the writer failed ({writer.returncode}): {err[-3000:]}")
        finished = [line for line in out.splitlines() if line.startswith("done errors=")]
        if not finished:
            raise RuntimeError(f"the writer did not finish: {out[-2000:]} {err[-2000:]}")
        run.writer_errors = int(finished[0].split("=")[1])
        run.pace = [float(line.rsplit("=", 1)[1]) for line in out.splitlines() if line.startswith("progress ")]
    final, code = await anyio.to_thread.run_sync(_final_cli, url)
    run.final_problems = len(final["report"]["problems"]) if code else 0  # type: ignore[index,arg-type]
    return run


def _final_cli(url: str) -> tuple[dict[str, object], int]:
    """The final check, by the real command, read-only."""
    done = subprocess.run(
        [str(LCM), "--database", url, "doctor", "--json"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode not in (0, 10):
        raise RuntimeError(f"lcm doctor failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout), done.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--writer", nargs=3, metavar=("URL", "TURNS", "SESSION"), help=argparse.SUPPRESS)
    parser.add_argument("--turns", type=int, default=12_000)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--database", help="a sqlite:/// or postgresql:// URL (default: a fresh file per run)")
    parser.add_argument("--cli", action="store_true", help="loop over the real `lcm doctor --apply` command")
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="each run on a fresh database of an embedded PostgreSQL server (tests/pg.py; LCM_TEST_POSTGRES_URL "
        "for an external one), dropped after the run",
    )
    parser.add_argument("--out", type=Path, help="also append each run's line to this file (as soon as it ends)")
    args = parser.parse_args(argv)
    if args.writer:
        url, turns, session = args.writer
        anyio.run(_writer, url, int(turns), session)
        return 0
    server = None
    if args.postgres:
        from tests import pg

        server = pg.start()
        pg.prepare_template(server)
    bad = 0
    try:
        for number in range(1, args.runs + 1):
            started = time.monotonic()
            fresh = server.create_database() if server is not None else None
            if fresh is not None:
                database: Path | str = fresh
            elif args.database:
                database = args.database
            else:
                database = Path(f"/tmp/lcm-doctor-race-{os.getpid()}-{number}.db")
            try:
                run = anyio.run(race, database, args.turns, args.cli, f"race-{number}")
            finally:
                if server is not None and fresh is not None:
                    server.drop_database(fresh)
            line = run.line(number) + f" seconds={time.monotonic() - started:.0f}"
            print(line, flush=True)
            if args.out is not None:
                with args.out.open("a") as out:
                    out.write(f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ} {line}\n")
            bad += run.false_alarms > 0 or run.final_problems != 0
    finally:
        if server is not None:
            server.close()
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
