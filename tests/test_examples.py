"""The examples run as documented."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_the_agent_loop_keeps_even_a_tiny_budget(tmp_path: Path) -> None:
    """At 200 tokens the newest messages no longer fit whole: the engine sends excerpts, and the example's
    closing line reports the largest request it measured."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "agent_loop.py"), "--turns", "3", "--budget", "200"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    sent = [int(t) for t in re.findall(r"^turn +\d+: sent +\d+ messages, ~(\d+) tokens", done.stdout, re.M)]
    assert (
        max(sent) <= 200 and f"the largest request was ~{max(sent)} tokens, within the 200-token budget" in done.stdout
    )
    assert "never saw more" not in done.stdout


@pytest.mark.parametrize(
    ("example", "needs"),
    [
        ("openai_agents_session.py", "agents"),
        ("pydantic_ai_agent.py", "pydantic_ai"),
        ("langgraph_agent.py", "langgraph"),
    ],
)
def test_each_framework_example_runs_offline_and_recalls_a_compacted_fact(example: str, needs: str) -> None:
    pytest.importorskip(needs, reason=f"the example needs {needs}, an optional extra")
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "integrations" / example)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert "answer: vpn-7.example.net" in done.stdout
    stored = re.search(r"stored (\d+) messages verbatim, (\d+) summaries", done.stdout)
    assert stored is not None and int(stored.group(1)) == 30 and int(stored.group(2)) >= 1


def test_the_claude_code_example_installs_and_uninstalls(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", str(ROOT / "examples" / "integrations" / "claude_code_hooks.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "hook claude-code pre-compact" in done.stdout and '"lossless"' in done.stdout
    assert "removed: hook SessionStart, hook PreCompact, hook UserPromptSubmit, MCP server lossless" in done.stdout
    assert not (tmp_path / ".mcp.json").exists()
