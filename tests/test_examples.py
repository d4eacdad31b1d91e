"""The examples run as documented."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_agent_loop_runs_offline_and_compacts(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "agent_loop.py"),
            "--turns",
            "12",
            "--database",
            f"sqlite:///{tmp_path / 'a.db'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    turns = re.findall(r"^turn +\d+: sent +(\d+) messages, ~(\d+) tokens \((\d+) summaries\)", done.stdout, re.M)
    assert len(turns) == 12
    assert all(int(tokens) <= 1500 for _, tokens, _ in turns)
    assert "compacted to" in done.stdout and int(turns[-1][2]) >= 1  # the history was summarised, not dropped
    assert "stored 24 messages verbatim" in done.stdout
    # The closing claim is computed from what was sent, not written in advance.
    largest = int(re.findall(r"the largest request was ~(\d+) tokens, within the 1500-token budget", done.stdout)[0])
    assert largest == max(int(tokens) for _, tokens, _ in turns)


def test_the_agent_loop_says_when_a_budget_cannot_be_met(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "agent_loop.py"), "--turns", "3", "--budget", "200"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    sent = [int(t) for t in re.findall(r"^turn +\d+: sent +\d+ messages, ~(\d+) tokens", done.stdout, re.M)]
    assert max(sent) > 200 and f"the largest request was ~{max(sent)} tokens, OVER the 200-token budget" in done.stdout
    assert "never saw more" not in done.stdout
