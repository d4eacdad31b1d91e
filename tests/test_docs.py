"""The docs cannot drift: settings, commands, exit codes and the README's examples are checked."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lossless.cli import COMMANDS
from lossless.config import SETTINGS
from lossless.errors import EXIT_CODES

from .conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
CLI_DOC = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
CONFIG_DOC = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")


def test_every_setting_is_documented() -> None:
    for setting in SETTINGS:
        row = next((line for line in CONFIG_DOC.splitlines() if line.startswith(f"| `{setting.name}`")), None)
        assert row is not None, f"{setting.name} is missing from docs/configuration.md"
        assert f"`{setting.env}`" in row and f"`{setting.key}`" in row
        assert setting.help in row


def test_generated_docs_are_current() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "update_docs.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_readme_gives_exactly_two_setup_commands_up_front() -> None:
    first_screen = README.split("## Quickstart")[0]
    commands = re.findall(r"^python3 -m venv .*$", first_screen, flags=re.M)
    assert len(commands) == 2
    assert "<!-- main-command -->" in first_screen and "<!-- test-command -->" in first_screen
    assert commands[1].endswith("-m pytest")
    assert "lcm" in commands[0] and "examples/sample-session.jsonl" in commands[0]


def test_every_command_and_exit_code_is_documented() -> None:
    names = set(COMMANDS)
    assert names == {
        "import",
        "replay",
        "conversations",
        "messages",
        "files",
        "file",
        "compact",
        "summaries",
        "compactions",
        "stats",
        "config",
        "memory",
        "doctor",
        "index",
        "prune",
        "vacuum",
        "migrate",
        "worker",
        "jobs",
        "serve",
        "mcp",
        "grants",
        "grep",
        "describe",
        "expand",
        "show",
        "install",
        "uninstall",
        "hook",
        "ui",
    }
    for name in names:
        assert f"lcm {name}" in CLI_DOC, f"lcm {name} is not documented in docs/cli.md"
    for _, code in EXIT_CODES:
        assert re.search(rf"^\| {code} \|", CLI_DOC, flags=re.M), f"exit code {code} is not documented"
    assert re.search(r"^\| 2 \|", CLI_DOC, flags=re.M)  # click's usage errors


def test_readme_python_quickstart_runs(tmp_path: Path) -> None:
    block = re.search(r"```python\n(.*?)```", README, flags=re.S)
    assert block is not None
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "sample-session.jsonl", tmp_path / "examples")
    done = subprocess.run(
        [sys.executable, "-c", block.group(1)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "claude-code" in done.stdout and "new messages" in done.stdout
    assert re.search(r"^\d+ messages, \d+ tokens$", done.stdout, flags=re.M)
    hits = [line for line in done.stdout.splitlines() if line.startswith("[msg#")]
    assert len(hits) == 2 and "keys the window" in hits[0], done.stdout  # the answer ranks first
    # Run again, as its comment promises: nothing is stored twice.
    again = subprocess.run(
        [sys.executable, "-c", block.group(1)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0, again.stderr
    assert "claude-code 0 new messages" in again.stdout
    assert again.stdout.split("\n")[0] == done.stdout.split("\n")[0]  # the same context: no duplicates in it


def test_memory_doc_shell_sample_finds_what_it_stored(tmp_path: Path) -> None:
    """docs/memory.md's first sample, run as written with the default embedder: its search finds the memory."""
    block = re.search(r"```sh\n(.*?)```", (ROOT / "docs" / "memory.md").read_text(encoding="utf-8"), flags=re.S)
    assert block is not None
    lines = [line.split("  #")[0].strip() for line in block.group(1).splitlines()]
    env = {
        "PATH": str(Path(sys.executable).parent),
        "HOME": str(tmp_path),
        "LCM_DATABASE_URL": f"sqlite:///{tmp_path / 'm.db'}",
    }
    outputs = {}
    for line in lines:
        done = subprocess.run(line, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (line, done.stderr)
        outputs[line.split()[2]] = done.stdout
    assert "green tea" in outputs["search"], outputs["search"]
    assert "#1" in outputs["explain"], outputs["explain"]


@pytest.mark.parametrize(
    "doc",
    [
        "storage.md",
        "transcripts.md",
        "cli.md",
        "configuration.md",
        "benchmarks.md",
        "compaction.md",
        "summarizers.md",
        "large-files.md",
        "memory.md",
        "assembly.md",
        "integrity.md",
        "operations.md",
        "http.md",
        "mcp.md",
        "retrieval.md",
        "conformance.md",
        "integrations.md",
        "ui.md",
    ],
)
def test_docs_linked_from_the_readme_exist(doc: str) -> None:
    assert f"docs/{doc}" in README
    assert (ROOT / "docs" / doc).is_file()
