"""What every ``lcm`` command shares: options, opening the engine, output, and error translation.

Invariants: the configuration is loaded once per command from the global
options (explicit) over ``LCM_*`` variables and the config file; errors from
the :class:`~lossless.errors.LcmError` tree become one line on stderr (and, with
``--json``, a ``{"ok": false, "error": …}`` object on stdout) and the exit code
of :data:`~lossless.errors.EXIT_CODES`.  Nothing else in the CLI catches them.
Ctrl-C in a command is exit code 130 with one line saying what was kept and how to go on.

Output is verbatim: the consoles interpret no markup and no emoji codes in what
they print (stored text, paths and error messages reach the terminal as they
are), and control characters other than newline and tab are shown as escapes
(``\x1b``), never sent to the terminal (:func:`visible`).  Styling is applied
only through :func:`styled`, never by formatting markup into a string.

Start-up: this module, like every command's, imports click and light helpers only (and
:mod:`lossless.constants` for the figures options state); rich, anyio, the configuration and the
engine are imported inside the functions that use them, so ``lcm --version`` and every ``--help``
load no engine, and a command loads what it runs (``tests/test_cli_startup.py`` checks both).
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import click

from lossless.cli._state import CliState
from lossless.constants import EXIT_INTERRUPTED, INTERRUPTED
from lossless.errors import LcmError, NotFoundError, PartialIndexWarning, exit_code_for

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from lossless.config import Config
    from lossless.engine import ContextEngine

__all__ = [
    "CliState",
    "cli_words",
    "json_option",
    "open_engine",
    "require_store",
    "run_command",
    "stderr",
    "stdout",
    "styled",
    "visible",
]

P = ParamSpec("P")
T = TypeVar("T")


#: Control characters a terminal would act on (C0 but newline and tab, DEL, C1, bidi overrides).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``) instead of sent to the terminal."""
    return _CONTROL.sub(_escape, text)


@functools.cache
def _verbatim_console() -> type[Console]:
    """The console class (built on first output: rich loads only when a command prints through it)."""
    from rich.console import Console

    class _VerbatimConsole(Console):
        """A console that prints strings as they are: no markup, no emoji codes, control characters escaped."""

        def render_str(self, text: str, **options: Any) -> Text:
            options["markup"] = False
            options["emoji"] = False
            return super().render_str(visible(text), **options)

    return _VerbatimConsole


#: Tool-call syntax in the core's hints, and the same advice in the command line's own words.
_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bmode=['\"]([a-z_]+)['\"]"), r"--mode \1"),
    (re.compile(r"\bscope=['\"]([a-z_]+)['\"]"), r"--scope \1"),
    (re.compile(r"\blcm_(grep|describe|expand)\b"), r"lcm \1"),
    (re.compile(r"\btoken_cap=([0-9,]+)"), r"--token-cap \1"),
    (re.compile(r"\btoken_cap\b"), "--token-cap"),
    (re.compile(r"\blimit=([0-9]+)"), r"--limit \1"),
    (re.compile(r"\bstart_line=([0-9]+)"), r"--lines \1:"),
    (re.compile(r"\binclude_messages=true\b"), "--include-messages"),
    (re.compile(r"\ball_conversations=true\b"), "leaving out --conversation"),
    (re.compile(r"\bconversation_id\b"), "--conversation"),
)


def cli_words(text: str) -> str:
    """A hint written for the agent tools (``mode='full_text'``) in the command's words (``--mode full_text``)."""
    for pattern, replacement in _HINTS:
        text = pattern.sub(replacement, text)
    return text


def styled(*pieces: str | tuple[str, str]) -> Text:
    """Styled output from plain strings: each piece is ``text`` or ``(text, style)``, shown verbatim."""
    from rich.text import Text

    out = Text()
    for piece in pieces:
        text, style = (piece, "") if isinstance(piece, str) else piece
        out.append(visible(text), style=style)
    return out


def _console(stream: Any, **options: Any) -> Console:
    # Pipes and captured output get a fixed, roomy width instead of rich's 80 columns.
    width = None if stream.isatty() else 132
    return _verbatim_console()(highlight=False, markup=False, emoji=False, width=width, **options)


def stdout() -> Console:
    return _console(sys.stdout)


def stderr() -> Console:
    return _console(sys.stderr, stderr=True)


def require_store(config: Config) -> None:
    """Refuse a missing SQLite file: a command that only reads says so instead of creating an empty store
    (and the folders above it) at a mistyped path."""
    from lossless.engine.wiring import sqlite_path_from_url

    url = config.database_url
    if url is None or not url.startswith("sqlite:///"):
        return
    path = Path(sqlite_path_from_url(url)).expanduser()
    if str(path) != ":memory:" and not path.exists():
        raise NotFoundError(
            "database",
            str(path),
            "nothing is stored there yet (check --database or LCM_DATABASE_URL, or store something with lcm import)",
        )


async def open_engine(state: CliState, *, create: bool = False, **overrides: Any) -> ContextEngine:
    """The engine on the configured store; unless ``create``, the store must already exist."""
    from lossless.engine import ContextEngine

    config = state.config(**overrides)
    if not create:
        require_store(config)
    return await ContextEngine.open(config=config)


json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")


def emit_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def run_command(fn: Callable[P, Awaitable[T]]) -> Callable[P, T]:
    """Run an async command body under anyio, translating :class:`LcmError` to exit codes."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        import warnings

        import anyio

        warnings.simplefilter("ignore", PartialIndexWarning)  # a command prints the search result's note instead
        as_json = bool(kwargs.get("as_json"))
        try:
            return anyio.run(functools.partial(fn, *args, **kwargs))
        except LcmError as exc:
            if as_json:
                emit_json({"ok": False, "error": {"type": type(exc).__name__, "message": str(exc)}})
            stderr().print(styled(("error:", "bold red"), f" {cli_words(str(exc))}"), soft_wrap=True)
            sys.exit(exit_code_for(exc))
        except KeyboardInterrupt:
            # Ctrl-C: every write is one transaction (an import file whole or not at all), so say so and
            # how to go on, instead of click's bare "Aborted!".
            if as_json:
                emit_json({"ok": False, "error": {"type": "Interrupted", "message": INTERRUPTED}})
            stderr().print(styled(("interrupted:", "bold red"), f" {INTERRUPTED}"), soft_wrap=True)
            sys.exit(EXIT_INTERRUPTED)

    return wrapper
