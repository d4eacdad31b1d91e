"""``lcm memory …`` end to end on each backend (hash embedder: fast, deterministic)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from lossless.cli import cli

from .conftest import BACKENDS, backend_url


@pytest.fixture(params=BACKENDS)
def run(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("LCM_DATABASE_URL", backend_url(request, request.param, tmp_path, "cli"))
    monkeypatch.setenv("LCM_MEMORY_EMBEDDER", "hash")
    runner = CliRunner()

    def invoke(*args: str, code: int = 0, stdin: str | bytes | None = None) -> str:
        result = runner.invoke(cli, list(args), input=stdin, catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result.output

    return invoke


def test_add_search_explain_update_forget(run) -> None:  # type: ignore[no-untyped-def]
    added = json.loads(run("memory", "add", "I prefer green tea.", "--category", "preferences", "--json"))
    assert added["scope"] == "agent:main" and added["category"] == "preferences"
    run("memory", "add", "Der Server läuft auf Port 8443.", "--category", "entities")
    found = json.loads(run("memory", "search", "green tea", "--json"))
    assert found["hits"][0]["memory"]["memory_id"] == added["memory_id"]
    explained = run("memory", "explain", "green tea")
    assert "fusion" in explained and "#1" in explained and "time " not in explained
    dated = run("memory", "explain", "green tea last week")  # said just now: inside "last week"
    assert "time " in dated and "#1" in dated
    run("memory", "update", added["memory_id"], "--text", "I prefer oolong tea.")
    assert "oolong" in json.loads(run("memory", "search", "oolong", "--json"))["hits"][0]["memory"]["content"]
    newer = json.loads(
        run("memory", "update", added["memory_id"][:14], "--text", "I prefer coffee.", "--supersede", "--json")
    )
    assert newer["supersedes"] == added["memory_id"]
    history = json.loads(run("memory", "list", "--history", "--json"))
    assert len(history) == 3
    run("memory", "forget", newer["memory_id"])
    assert len(json.loads(run("memory", "list", "--json"))) == 1


def test_explain_shows_the_score_a_cut_off_compared(run) -> None:  # type: ignore[no-untyped-def]
    # With normalized fusion the cut-offs read the weighted score, not the relative one in the columns: a
    # candidate shown at 0.7 can be dropped by hard_min_score (0.35), so explain says what was compared.
    run("memory", "add", "I prefer green tea in the morning.", "--category", "preferences")
    run("memory", "add", "The deploy runs on Fridays.")
    explained = json.loads(run("memory", "explain", "tea", "--json"))
    gated = [d for d in explained["dropped"] if d["stage"] in ("min_score", "hard_min_score")]
    assert gated
    for drop in gated:
        assert drop["compared"] < drop["cut_off"] == {"min_score": 0.3, "hard_min_score": 0.35}[drop["stage"]]
    table = run("memory", "explain", "tea")
    assert f"({gated[0]['compared']:.3f} < {gated[0]['cut_off']})" in table


def test_add_with_a_fact_key_supersedes_like_the_tool(run) -> None:  # type: ignore[no-untyped-def]
    key = ("--category", "preferences", "--fact-key", "preferences:drink")
    first = json.loads(run("memory", "add", "I prefer coffee.", *key, "--json"))
    second = json.loads(run("memory", "add", "I prefer green tea now.", *key, "--json"))
    assert second["supersedes"] == first["memory_id"]
    current = json.loads(run("memory", "list", "--fact-key", "preferences:drink", "--json"))
    assert [m["memory_id"] for m in current] == [second["memory_id"]]
    versions = json.loads(run("memory", "list", "--fact-key", "preferences:drink", "--history", "--json"))
    assert {m["memory_id"] for m in versions} == {first["memory_id"], second["memory_id"]}
    assert "supersedes" in run("memory", "add", "I prefer water.", *key)
    other = json.loads(run("memory", "add", "The build runs on Fridays.", "--json"))
    assert other["supersedes"] is None  # no key: a plain add


def test_export_import_roundtrip_and_bad_input(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for i in range(3):
        run("memory", "add", f"Fact {i} about the build.")
    out = tmp_path / "mem.jsonl"
    run("memory", "export", str(out))
    lines = out.read_text().splitlines()
    assert len(lines) == 3
    other = tmp_path / "other.db"
    imported = run("--database", f"sqlite:///{other}", "memory", "import", str(out), "--json")
    assert json.loads(imported) == {"read": 3, "added": 3}
    again = run("--database", f"sqlite:///{other}", "memory", "import", "-", "--json", stdin="\n".join(lines))
    assert json.loads(again) == {"read": 3, "added": 0}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"memory_id": "m"}\n')
    assert "nothing was imported" in run("memory", "import", str(bad), code=3)


def test_a_path_it_cannot_read_or_write_is_bad_input_not_a_traceback(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run("memory", "add", "The build runs on Fridays.")
    missing = tmp_path / "nowhere" / "mem.jsonl"
    said = run("memory", "import", str(missing), code=3)
    assert "cannot read" in said and "nothing was imported" in said
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes(b'{"memory_id": "caf\xe9"}\n')
    assert "not UTF-8" in run("memory", "import", str(latin1), code=3)
    assert "not UTF-8" in run("memory", "import", "-", code=3, stdin=b"\xff\xfe\n")
    said = run("memory", "export", str(missing), code=3)
    assert "cannot write" in said and "folder that exists" in said
    assert not missing.parent.exists()
    assert len(json.loads(run("memory", "list", "--json"))) == 1  # nothing lost
    # A store that is not there: said before OUTPUT is created, so no empty file is left behind.
    out = tmp_path / "out.jsonl"
    run("--database", f"sqlite:///{tmp_path / 'absent.db'}", "memory", "export", str(out), code=5)
    assert not out.exists()


def test_scopes_are_enforced_and_system_is_explicit(run) -> None:  # type: ignore[no-untyped-def]
    run("memory", "add", "Main's secret is 42.")
    assert "No memory" in run("--agent", "other", "memory", "search", "secret 42")
    assert "may not write" in run("--agent", "other", "memory", "add", "x y", "--scope", "agent:main", code=11)
    assert "1 current" in run("memory", "--all-scopes", "stats")
    run("memory", "grant", "other", "agent:main", "global")
    assert "42" in run("--agent", "other", "memory", "search", "secret 42")
    assert "not a memory scope" in run("memory", "grant", "other", "bogus", code=3)
    stats = json.loads(run("memory", "stats", "--json"))
    assert stats["current"] == 1 and stats["by_tier"] == {"working": 1}
    assert json.loads(run("memory", "maintain", "--json")) == {"moved": {}}


def test_every_memory_command_is_documented() -> None:
    from lossless.cli.memory import memory_group

    from .conftest import ROOT

    doc = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for name in memory_group.commands:
        assert f"lcm memory {name}" in doc, name


def test_extract_mines_a_stored_conversation(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    transcript = tmp_path / "chat.jsonl"
    lines = [
        {"role": "user", "content": "My name is Grace Hopper."},
        {"role": "assistant", "content": "Hello Grace."},
        {"role": "user", "content": "I prefer tabs over spaces."},
    ]
    transcript.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    run("import", str(transcript), "--format", "openai-chat", "--session-id", "chat-1")
    decisions = json.loads(run("memory", "extract", "chat-1", "--json"))
    assert [d["category"] for d in decisions] == ["profile", "preferences"]
    assert all(d["decision"] == "create" and d["source_message_ids"] for d in decisions)
    again = json.loads(run("memory", "extract", "chat-1", "--json"))
    assert {d["decision"] for d in again} == {"support"}
    assert "no conversation" in run("memory", "extract", "nope", code=5)


def test_every_memory_command_accepts_json() -> None:
    from lossless.cli.memory import memory_group

    for name, command in memory_group.commands.items():
        assert any(p.name == "as_json" for p in command.params), name


async def _after_turn_extracts(url: str, session: str, enabled: bool) -> tuple[int, str | None]:
    from lossless import ContextEngine, Message

    engine = await ContextEngine.open(url, memory_embedder="hash", memory_auto_extract=enabled)
    try:
        result = await engine.after_turn(
            session,
            [Message("user", "My favourite editor is Helix."), Message("assistant", "I prefer nothing.")],
            token_budget=100_000,
        )
        stats = await engine.memory().stats()
        if enabled:
            (memory,) = [m for _, m in await engine.memory().list()]
            assert memory.source_message_ids == (result.ingest.stored[0].id,)
            assert memory.conversation_id == result.ingest.conversation_id
        return stats.current, result.error
    finally:
        await engine.dispose()


@pytest.mark.anyio
@pytest.mark.parametrize("backend", BACKENDS)
async def test_after_turn_extracts_memories_only_when_enabled(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    url = backend_url(request, backend, tmp_path, "turns")
    assert await _after_turn_extracts(url, "s-off", False) == (0, None)
    assert await _after_turn_extracts(url, "s-on", True) == (1, None)
