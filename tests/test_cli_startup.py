"""The ``lcm`` command loads only what a command needs: what each path imports, checked in a fresh process.

No timing here (benchmarks/cli_startup.py measures it): each test runs a path of the command line
in a new interpreter and lists the modules it left in ``sys.modules``.  ``--version`` and every
command's help (``lcm --help``, ``lcm CMD --help``, ``lcm GROUP SUB --help``) load no engine,
record, store or reader, nor rich or anyio; a command that opens a store loads the engine but no
optional extra (numpy, onnxruntime, the MCP and HTTP servers, the PostgreSQL driver, pydantic), and
records no metrics (so loads no prometheus-client) unless it serves them or runs for long.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

SAMPLE = ROOT / "examples" / "sample-session.jsonl"

#: Modules that the help paths must not load: the engine and all it stands on, and the console libraries.
NOT_FOR_HELP = (
    "lossless.engine",
    "lossless.records",
    "lossless.parts",
    "lossless.config",
    "lossless.stores",
    "lossless.providers",
    "lossless.memory",
    "lossless.retrieval",
    "lossless.transcripts",
    "lossless.adapters.service",
    "rich",
    "anyio",
    "asyncio",
)
#: Optional extras and heavy libraries that no command below needs.
NOT_FOR_COMMANDS = (
    "numpy",
    "onnxruntime",
    "mcp",
    "starlette",
    "uvicorn",
    "fastapi",
    "httpx",
    "psycopg",
    "pydantic",
    "tiktoken",
    "prometheus_client",
    "lossless.adapters.http",
    "lossless.adapters.mcp",
    "lossless.stores.postgres",
)

#: Runs ``lcm`` with the arguments in argv[1:] and prints, whatever the exit, the modules loaded.
_RUN = """
import json, sys
from lossless.cli import main
sys.argv = ["lcm", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
modules = sorted(sys.modules)
from lossless import observability
metrics = observability.metrics_available()
sys.stderr.write("\\nMODULES " + json.dumps({"code": code, "modules": modules, "metrics": metrics}) + "\\n")
"""

#: Renders the help of the group and of every command and sub-command, then prints the modules loaded.
_ALL_HELP = """
import json, sys
import click
from lossless.cli import cli

seen = []

def walk(command, ctx):
    seen.append(ctx.command_path)
    command.get_help(ctx)
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            walk(sub, click.Context(sub, info_name=name, parent=ctx))

walk(cli, click.Context(cli, info_name="lcm"))
print(json.dumps({"paths": seen, "modules": sorted(sys.modules)}))
"""


def _loaded(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)]


def _run(*args: str, stdin: str = "") -> tuple[int, list[str], bool, str]:
    """``lcm ARGS`` in a fresh process: its exit code, the modules it loaded, whether it kept metrics, its output."""
    done = subprocess.run(
        [sys.executable, "-c", _RUN, *args], input=stdin, capture_output=True, text=True, timeout=120, check=False
    )
    head, marker, tail = done.stderr.rpartition("\nMODULES ")
    assert marker, done.stderr
    found = json.loads(tail)
    return int(found["code"] or 0), list(found["modules"]), bool(found["metrics"]), done.stdout + head


def _lcm(*args: str, stdin: str = "") -> tuple[int, list[str], str]:
    code, modules, _, output = _run(*args, stdin=stdin)
    return code, modules, output


def test_every_help_text_loads_no_engine_and_no_console_library() -> None:
    done = subprocess.run([sys.executable, "-c", _ALL_HELP], capture_output=True, text=True, timeout=120, check=True)
    found = json.loads(done.stdout)
    assert {"lcm", "lcm grep", "lcm memory add", "lcm hook claude-code", "lcm config show"} <= set(found["paths"])
    assert len(found["paths"]) > 40  # every command and sub-command was rendered
    assert _loaded(found["modules"], NOT_FOR_HELP + NOT_FOR_COMMANDS) == []


@pytest.mark.parametrize("args", [("--version",), ("--help",), ("grep", "--help"), ("memory", "add", "--help")])
def test_the_command_line_help_paths_load_no_engine(args: tuple[str, ...]) -> None:
    code, modules, output = _lcm(*args)
    assert code == 0, output
    assert ("Usage: lcm" in output) or ("lcm, version" in output)
    assert _loaded(modules, NOT_FOR_HELP + NOT_FOR_COMMANDS) == []


def test_commands_load_the_engine_but_no_optional_extra_and_only_servers_keep_metrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One store, the cheap commands a hook or a user runs (one process each), then compaction and the worker."""
    db = f"sqlite:///{tmp_path / 'lcm.db'}"
    code, _, output = _lcm("--database", db, "import", str(SAMPLE))
    assert code == 0, output
    for args, stdin in (
        (("stats",), ""),
        (("grep", "hello"), ""),
        (("hook", "claude-code", "session-start"), json.dumps({"session_id": "s", "source": "startup"})),
    ):
        code, modules, metrics, output = _run("--database", db, *args, stdin=stdin)
        assert code == 0, output
        assert "lossless.engine.facade" in modules  # the check is real: this path did open the engine
        assert _loaded(modules, NOT_FOR_COMMANDS) == [], args
        assert not metrics, args
    # Compaction records a run (and mines memories: the hash embedder keeps that cheap); one-shot, it
    # records into no registry.
    monkeypatch.setenv("LCM_MEMORY_EMBEDDER", "hash")
    code, modules, metrics, output = _run("--database", db, "compact", "--full", "1")
    assert code == 0, output
    assert not metrics and "prometheus_client" not in modules
    if importlib.util.find_spec("prometheus_client") is not None:  # the dev extra has it
        code, _, metrics, output = _run("--database", db, "worker", "--once")
        assert code == 0, output
        assert metrics  # a worker may serve them (--metrics-port): it records


def test_a_refused_command_still_says_why_and_exits_with_its_code(tmp_path: Path) -> None:
    code, modules, output = _lcm("--database", f"sqlite:///{tmp_path / 'missing.db'}", "stats")
    assert code == 5 and "error: no database" in output and "nothing is stored there yet" in output
    assert _loaded(modules, NOT_FOR_COMMANDS) == []
