"""``lcm grep``, ``lcm describe``, ``lcm expand`` and ``lcm show`` on an imported sample session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from lossless.cli import cli

from .conftest import ROOT

SAMPLE = ROOT / "examples" / "sample-session.jsonl"


def run(db: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--database", db, *args], catch_exceptions=False)


@pytest.mark.usefixtures("hash_memory")  # compact mines memories; none is read here
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
    assert syntax.exit_code == 3 and "NEAR" in syntax.stderr and "regex" in syntax.stderr
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


def imported(tmp_path: Path) -> str:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    assert run(db, "import", str(SAMPLE)).exit_code == 0
    return db


def test_an_invalid_query_is_an_error_and_no_matches_is_not(tmp_path: Path) -> None:
    db = imported(tmp_path)
    bad = run(db, "grep", "(")
    assert bad.exit_code == 3 and "not a valid regular expression" in bad.stderr and not bad.stdout
    as_json = run(db, "grep", "(", "--json")
    assert as_json.exit_code == 3
    assert json.loads(as_json.stdout)["error"]["type"] == "InputError"
    nothing = run(db, "grep", "no such text anywhere in it")
    assert nothing.exit_code == 0 and "no matches" in nothing.stdout
    # The hint names the command's own options, not the tool's parameter syntax.
    words = run(db, "grep", '"unclosed', "--mode", "full_text")
    assert words.exit_code == 3 and "--mode regex" in words.stderr and "mode=" not in words.stderr


@pytest.mark.usefixtures("hash_memory")  # compact mines memories; none is read here
def test_every_cited_id_opens(tmp_path: Path) -> None:
    db = imported(tmp_path)
    assert run(db, "compact", "1", "--full").exit_code == 0
    hits = json.loads(run(db, "grep", "window", "--scope", "messages", "--limit", "1", "--json").stdout)["matches"]
    cited = hits[0]["citation"].strip("[]")
    assert cited == f"msg#{hits[0]['id']}"
    record = next(m for m in json.loads(run(db, "messages", "1", "--json").stdout) if f"msg#{m['id']}" == cited)
    shown = run(db, "show", cited)
    assert shown.exit_code == 0 and cited in shown.stdout and record["content"] in shown.stdout
    raw = run(db, "show", cited, "--raw")
    assert raw.stdout_bytes == record["content"].encode()
    assert json.loads(run(db, "describe", cited, "--json").stdout)["content"] == record["content"]
    [last] = json.loads(run(db, "messages", "1", "--tail", "1", "--json").stdout)
    assert f"msg#{last['id']}" in run(db, "messages", "1", "--tail", "1").stdout  # listings cite the same ids
    summary = json.loads(run(db, "grep", "[a-z]+", "--scope", "summaries", "--json").stdout)["matches"][0]["id"]
    assert summary in run(db, "show", summary).stdout
    assert run(db, "show", summary, "--raw").exit_code == 0
    assert run(db, "show", "msg#999999").exit_code == 5
    assert run(db, "show", "nonsense").exit_code == 3


@pytest.mark.usefixtures("hash_memory")  # compact mines memories; none is read here
def test_expand_lists_the_ids_it_could_not_fit(tmp_path: Path) -> None:
    db = imported(tmp_path)
    assert run(db, "compact", "1", "--full").exit_code == 0
    summary = json.loads(run(db, "grep", "[a-z]+", "--scope", "summaries", "--json").stdout)["matches"][0]["id"]
    capped = json.loads(run(db, "expand", summary, "-m", "--max-depth", "8", "--token-cap", "50", "--json").stdout)
    assert capped["truncated"] and capped["omitted"]
    returned = {s["id"] for s in capped["summaries"]} | {f"msg#{m['id']}" for m in capped["messages"]}
    assert not returned & set(capped["omitted"])
    text = run(db, "expand", summary, "-m", "--max-depth", "8", "--token-cap", "50")
    assert "not returned" in text.stdout
    # What is said about the cut is in the command's words (its option), not the agent tool's argument.
    assert "--token-cap 50" in text.stdout and "raise --token-cap" in text.stdout and "token_cap" not in text.stdout
    first = capped["omitted"][0]
    assert first.split("#")[0] in text.stdout  # the ids are printed, to open one at a time
    assert run(db, "show", first).exit_code == 0


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


def test_expand_needs_ids_or_a_query_in_the_commands_words(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    assert run(db, "import", str(SAMPLE)).exit_code == 0
    for args in ((), ("sum_a", "--query", "limiter")):
        result = run(db, "expand", *args)
        assert result.exit_code == 3 and "give summary ids (sum_…" in result.output and "--query Q" in result.output


def test_an_id_that_cannot_be_opened_says_which_ids_can(tmp_path: Path) -> None:
    db = imported(tmp_path)
    for command in ("show", "describe"):
        result = run(db, command, "bogus")
        # the same words whichever command (or tool) asked: no "describe takes" from `lcm show`
        assert result.exit_code == 3 and "'bogus' is not an id that can be opened" in result.output
        assert "sum_…" in result.output and "msg#N" in result.output and "describe takes" not in result.output


def test_an_import_leaves_its_messages_indexed_and_ranked(tmp_path: Path) -> None:
    """`lcm import` ends moments after its last write: its messages are indexed before it exits, so the next
    command ranks them by relevance (before, the index stayed empty and every match scored the same)."""
    import re
    import sqlite3

    db = imported(tmp_path)
    index = sqlite3.connect(tmp_path / "cli.db-index")
    try:
        assert index.execute("SELECT watermark FROM index_state WHERE source = 'messages'").fetchone()[0] == 175
    finally:
        index.close()
    ranked = run(db, "grep", "rate limiter fix", "--mode", "full_text", "--sort", "relevance")
    scores = [float(s) for s in re.findall(r"score (\d+\.\d+)", ranked.output)]
    assert ranked.exit_code == 0 and len(scores) > 5 and len(set(scores)) > 1
