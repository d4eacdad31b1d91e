"""Shared conventions of the benchmark scripts (see DESIGN §6).

Every script: ``python benchmarks/NAME.py [--quick] [--json OUT]`` prints a table of figures, each
measured against a baseline *in the same run*; ``--quick`` finishes in about a minute on a 2-core
machine; ``--json OUT`` writes ``{"benchmark", "machine", "figures": [...]}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = (ROOT.parent / "shared" / "corpus").resolve()
SAMPLE = ROOT / "examples" / "sample-session.jsonl"


@dataclass
class Figure:
    name: str
    value: float
    unit: str
    baseline: float | None = None
    ratio: float | None = None
    goal: float | None = None
    goal_op: str | None = None  # "<=" or ">="
    goal_on: str = "ratio"  # what the goal applies to: "ratio" or "value"
    met: bool | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if self.baseline:
            self.ratio = self.value / self.baseline
        if self.goal is not None and self.goal_op in ("<=", ">="):
            subject = self.ratio if self.goal_on == "ratio" else self.value
            if subject is not None:
                self.met = subject >= self.goal if self.goal_op == ">=" else subject <= self.goal


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="a smaller run (about a minute on 2 cores)")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON to OUT")
    return parser.parse_args()


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
    }


@contextmanager
def timer() -> Iterator[Callable[[], float]]:
    start = time.perf_counter()
    end: list[float] = []
    yield lambda: (end[0] if end else time.perf_counter()) - start
    end.append(time.perf_counter())


def report(name: str, figures: list[Figure], out: str | None) -> None:
    info = machine()
    where = f"{info['cpu']} ({info['cores']} cores), Python {info['python']}, SQLite {info['sqlite']}"
    print(f"\n{name} — {info['date']}, {where}")
    header = f"{'figure':<44} {'value':>14} {'baseline':>14} {'ratio':>8}  {'goal':>10}  met"
    print(header)
    print("-" * len(header))
    for f in figures:
        baseline = f"{f.baseline:,.1f}" if f.baseline is not None else "-"
        ratio = f"{f.ratio:.2f}" if f.ratio is not None else "-"
        goal = f"{f.goal_on[0]}{f.goal_op}{f.goal:g}" if f.goal is not None else "-"
        met = {True: "yes", False: "NO", None: "-"}[f.met]
        print(f"{f.name:<44} {f.value:>10,.1f} {f.unit:<3} {baseline:>14} {ratio:>8}  {goal:>10}  {met}")
        if f.note:
            print(f"    {f.note}")
    if out:
        Path(out).write_text(
            json.dumps({"benchmark": name, "machine": info, "figures": [asdict(f) for f in figures]}, indent=2)
        )
