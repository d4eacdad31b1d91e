"""``lcm grep``, ``lcm describe`` and ``lcm expand`` on an imported sample session."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from lossless.cli import cli

from .conftest import ROOT

SAMPLE = ROOT / "examples" / "sample-session.jsonl"


def run(db: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--database", db, *args], catch_exceptions=False)


def test_grep_describe_expand(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    assert run(db, "import", str(SAMPLE)).exit_code == 0
    [conversation] = json.loads(run(db, "conversations", "--json").stdout)
    assert run(db, "compact", str(conversation["id"]), "--full").exit_code == 0

    found = run(db, "grep", "the", "--mode", "full_text", "--limit", "3")
    assert found.exit_code == 0
    assert "[msg#" in found.output or "[sum_" in found.output
    as_json = json.loads(run(db, "grep", "[a-z]+", "--scope", "summaries", "--json").stdout)
    summary_ids = [m["id"] for m in as_json["matches"]]
    assert summary_ids and all(s.startswith("sum_") for s in summary_ids)
    syntax = run(db, "grep", "NEAR(", "--mode", "full_text")
    assert syntax.exit_code == 0 and "NEAR" in syntax.output and "regex" in syntax.output
    in_session = run(db, "grep", "x", "-c", conversation["session_id"], "--limit", "1")
    assert in_session.exit_code == 0

    described = json.loads(run(db, "describe", summary_ids[0], "--token-cap", "10", "--json").stdout)
    assert described["summary_id"] == summary_ids[0] and described["fits_token_cap"] in (True, False)
    human = run(db, "describe", summary_ids[0])
    assert summary_ids[0] in human.output and "source messages" in human.output

    expanded = json.loads(run(db, "expand", summary_ids[0], "--include-messages", "--max-depth", "8", "--json").stdout)
    assert expanded["roots"] == [summary_ids[0]]
    assert expanded["messages"] and expanded["estimated_tokens"] <= expanded["token_cap"]
    assert run(db, "expand", "--query", "the", "-m").exit_code == 0

    missing = run(db, "describe", "sum_0000000000000000")
    assert missing.exit_code == 5 and "no summary" in missing.output
    bad = run(db, "expand")
    assert bad.exit_code == 3


def test_grep_context_and_the_any_word_fallback(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    assert run(db, "import", str(SAMPLE)).exit_code == 0
    found = json.loads(
        run(db, "grep", "[a-z]+", "--scope", "messages", "--limit", "1", "--context", "1", "--json").stdout
    )
    (match,) = found["matches"]
    assert match["context"] and all(turn["id"] != match["id"] for turn in match["context"])
    human = run(db, "grep", "[a-z]+", "--scope", "messages", "--limit", "1", "--context", "2")
    assert human.exit_code == 0 and "(before) [msg#" in human.output
    # A question whose words never occur together: full_text says it fell back to any of them.
    words = json.loads(run(db, "grep", "why were tenants throttled zzqx", "--mode", "full_text", "--json").stdout)
    assert words["fallback"] == "any_word" and words["matches"]
    assert run(db, "grep", "x", "--context", "9").exit_code == 2  # out of range: a usage error
