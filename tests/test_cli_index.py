"""``lcm index``: how far the build of the semantic index is, and building the rest in the foreground."""

from __future__ import annotations

import json
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
