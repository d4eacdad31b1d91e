"""What every ``lcm`` command shares: options, opening the engine, output, and error translation.

Invariants: the configuration is loaded once per command from the global
options (explicit) over ``LCM_*`` variables and the config file; errors from
the :class:`~lossless.errors.LcmError` tree become one line on stderr (and, with
``--json``, a ``{"ok": false, "error": …}`` object on stdout) and the exit code
of :data:`~lossless.errors.EXIT_CODES`.  Nothing else in the CLI catches them.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import anyio
import click
from rich.console import Console

from lossless.config import Config, load_config
from lossless.engine import ContextEngine
from lossless.errors import LcmError, exit_code_for

__all__ = ["CliState", "json_option", "open_engine", "run_command", "stderr", "stdout"]

P = ParamSpec("P")
T = TypeVar("T")


def _console(stream: Any, **options: Any) -> Console:
    # Pipes and captured output get a fixed, roomy width instead of rich's 80 columns.
    width = None if stream.isatty() else 132
    return Console(highlight=False, width=width, **options)


def stdout() -> Console:
    return _console(sys.stdout)


def stderr() -> Console:
    return _console(sys.stderr, stderr=True)


@dataclass(slots=True)
class CliState:
    """The global options, as given on the command line."""

    database: str | None = None
    config_file: Path | None = None
    agent: str | None = None

    def config(self, **overrides: Any) -> Config:
        values: dict[str, Any] = {"database_url": self.database, "agent_id": self.agent, **overrides}
        return load_config(values, config_file=self.config_file)


async def open_engine(state: CliState, **overrides: Any) -> ContextEngine:
    return await ContextEngine.open(config=state.config(**overrides))


json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")


def emit_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def run_command(fn: Callable[P, Awaitable[T]]) -> Callable[P, T]:
    """Run an async command body under anyio, translating :class:`LcmError` to exit codes."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        as_json = bool(kwargs.get("as_json"))
        try:
            return anyio.run(functools.partial(fn, *args, **kwargs))
        except LcmError as exc:
            if as_json:
                emit_json({"ok": False, "error": {"type": type(exc).__name__, "message": str(exc)}})
            stderr().print(f"[bold red]error:[/] {exc}", markup=True, highlight=False)
            sys.exit(exit_code_for(exc))

    return wrapper
