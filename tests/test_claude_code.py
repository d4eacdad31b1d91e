"""Claude Code drop-in: the installer edits only its own entries, and the hooks keep a live session stored.

The hooks run exactly as Claude Code runs them (the command written into settings.json, the hook's
JSON on stdin) over a transcript that grows turn by turn; the MCP server registered next to them is
started from .mcp.json and asked, with the official MCP client, for a fact of a compacted turn.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from lossless.adapters.integrations.claude_code import install, settings_paths, uninstall
from lossless.errors import InputError

LCM = Path(sys.executable).with_name("lcm")
SESSION = "0d7f8c2e-1111-4222-8333-944455556666"
FACT = "The flaky login test failed because the session cookie expired at 23:59 UTC; fixed in auth/cookies.py."


def _line(kind: str, n: int, content: Any) -> str:
    role = "user" if kind == "user" else "assistant"
    message: dict[str, Any] = {"role": role, "content": content}
    if role == "assistant":
        message |= {"id": f"msg_{n:04d}", "type": "message", "model": "claude-test"}
    record = {
        "type": kind,
        "uuid": f"u-{n:04d}",
        "parentUuid": f"u-{n - 1:04d}" if n else None,
        "sessionId": SESSION,
        "cwd": "/home/dev/shop",
        "timestamp": f"2026-03-01T10:{n // 60:02d}:{n % 60:02d}.000Z",
        "message": message,
    }
    return json.dumps(record)


def _transcript(turns: int) -> list[str]:
    lines = [
        _line("user", 0, f"Remember this for later: {FACT}"),
        _line("assistant", 1, [{"type": "text", "text": "Noted."}]),
    ]
    for turn in range(1, turns):
        lines.append(
            _line("user", 2 * turn, f"Step {turn}: refactor module {turn} of the checkout service " + "x" * 400)
        )
        lines.append(
            _line("assistant", 2 * turn + 1, [{"type": "text", "text": f"Refactored module {turn}. " + "y" * 400}])
        )
    return lines


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LCM), *args], capture_output=True, text=True, timeout=60, check=False)


def _hook(command: str, payload: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        shlex.split(command), input=json.dumps(payload), capture_output=True, text=True, timeout=120, check=False
    )


def _commands(settings: dict[str, Any]) -> dict[str, str]:
    return {event: groups[-1]["hooks"][-1]["command"] for event, groups in settings["hooks"].items()}


@pytest.mark.slow
@pytest.mark.anyio
async def test_installed_hooks_keep_a_live_session_stored_and_the_mcp_server_recalls_it(tmp_path: Path) -> None:
    project = tmp_path / "shop"
    project.mkdir()
    db = f"sqlite:///{tmp_path / 'lcm.db'}"
    done = _run("--database", db, "install", "claude-code", "--project", str(project), "--recall-guidance", "--json")
    assert done.returncode == 0, done.stderr
    settings_file, mcp_file = settings_paths(project)
    commands = _commands(json.loads(settings_file.read_text()))
    assert set(commands) == {"SessionStart", "PreCompact", "UserPromptSubmit"}

    transcript = project / f"{SESSION}.jsonl"
    lines = _transcript(100)
    base = {"session_id": SESSION, "transcript_path": str(transcript), "cwd": str(project)}
    transcript.write_text("\n".join(lines[:4]) + "\n")
    started = _hook(commands["SessionStart"], {**base, "hook_event_name": "SessionStart", "source": "startup"})
    assert started.returncode == 0 and started.stdout == "", started.stderr
    for upto in (len(lines) // 2, len(lines)):  # the session grows; each prompt keeps the store current
        transcript.write_text("\n".join(lines[:upto]) + "\n")
        prompt = _hook(commands["UserPromptSubmit"], {**base, "hook_event_name": "UserPromptSubmit", "prompt": "go on"})
        assert prompt.returncode == 0, prompt.stderr
    compacting = _hook(commands["PreCompact"], {**base, "hook_event_name": "PreCompact", "trigger": "auto"})
    assert compacting.returncode == 0, compacting.stderr
    resumed = _hook(commands["SessionStart"], {**base, "hook_event_name": "SessionStart", "source": "compact"})
    guidance = json.loads(resumed.stdout)["hookSpecificOutput"]
    assert guidance["hookEventName"] == "SessionStart" and "lcm_grep" in guidance["additionalContext"]
    after = _hook(commands["UserPromptSubmit"], {**base, "hook_event_name": "UserPromptSubmit", "prompt": "and?"})
    assert "lcm_grep" in json.loads(after.stdout)["hookSpecificOutput"]["additionalContext"]

    listed = json.loads(_run("--database", db, "messages", SESSION, "--json").stdout)
    stored = listed["messages"] if isinstance(listed, dict) else listed
    assert len(stored) == len(lines)  # every line once, however often the hooks ran
    summaries = json.loads(_run("--database", db, "summaries", SESSION, "--json").stdout)
    assert summaries, "PreCompact compacted the session into summaries"

    server = json.loads(mcp_file.read_text())["mcpServers"]["lossless"]
    params = StdioServerParameters(command=server["command"], args=server["args"], env={"LCM_MEMORY_EMBEDDER": "hash"})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        found = await session.call_tool("lcm_grep", {"pattern": "session cookie expired"})
        assert not found.is_error, found.content
        assert "auth/cookies.py" in found.content[0].text


def test_install_touches_only_its_own_entries_and_uninstall_removes_them(tmp_path: Path) -> None:
    settings_file, mcp_file = settings_paths(tmp_path)
    settings_file.parent.mkdir()
    theirs = {
        "permissions": {"allow": ["Bash(make lint)"]},
        "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "notify.sh start"}]}]},
    }
    settings_file.write_text(json.dumps(theirs))
    mcp_file.write_text(json.dumps({"mcpServers": {"github": {"command": "gh-mcp"}}}))
    first = install(tmp_path, command=["/opt/lcm", "--database", "sqlite:///x.db"])
    assert set(first.changed) == {"hook SessionStart", "hook PreCompact", "MCP server lossless"}
    assert install(tmp_path, command=["/opt/lcm", "--database", "sqlite:///x.db"]).changed == ()  # idempotent
    written = json.loads(settings_file.read_text())
    assert written["permissions"] == theirs["permissions"]
    assert written["hooks"]["SessionStart"][0] == theirs["hooks"]["SessionStart"][0]
    assert written["hooks"]["PreCompact"][0]["hooks"][0]["command"] == (
        "/opt/lcm --database sqlite:///x.db hook claude-code pre-compact"
    )
    servers = json.loads(mcp_file.read_text())["mcpServers"]
    assert servers["lossless"] == {
        "type": "stdio",
        "command": "/opt/lcm",
        "args": ["--database", "sqlite:///x.db", "mcp"],
    }
    assert servers["github"] == {"command": "gh-mcp"}

    removed = uninstall(tmp_path)
    assert set(removed.changed) == {"hook SessionStart", "hook PreCompact", "MCP server lossless"}
    assert json.loads(settings_file.read_text()) == theirs
    assert json.loads(mcp_file.read_text()) == {"mcpServers": {"github": {"command": "gh-mcp"}}}
    assert uninstall(tmp_path).changed == ()


def test_install_into_an_empty_project_and_back_leaves_no_files(tmp_path: Path) -> None:
    install(tmp_path, command=["lcm"], recall_guidance=True)
    settings_file, mcp_file = settings_paths(tmp_path)
    assert settings_file.exists() and mcp_file.exists()
    uninstall(tmp_path)
    assert not settings_file.exists() and not mcp_file.exists()


def test_install_into_a_project_folder_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    typo = tmp_path / "myap" / "src"
    with pytest.raises(InputError, match="does not exist"):
        install(typo, command=["lcm"])
    assert not (tmp_path / "myap").exists()
    done = subprocess.run(
        [str(LCM), "install", "claude-code", "--project", str(typo)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 3 and "does not exist" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "myap").exists()


def test_a_broken_settings_file_is_reported_not_overwritten(tmp_path: Path) -> None:
    settings_file, _ = settings_paths(tmp_path)
    settings_file.parent.mkdir()
    settings_file.write_text("{not json")
    with pytest.raises(InputError, match="not a readable JSON file"):
        install(tmp_path, command=["lcm"])
    assert settings_file.read_text() == "{not json"


def test_a_hook_never_fails_the_session(tmp_path: Path) -> None:
    command = [str(LCM), "--database", f"sqlite:///{tmp_path / 'h.db'}", "hook", "claude-code", "pre-compact"]
    for stdin in ["not json", "[]", json.dumps({"session_id": "nope", "transcript_path": str(tmp_path / "missing")})]:
        done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
