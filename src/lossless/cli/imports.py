"""``lcm import``: import transcript files and folders, idempotently, with a progress bar and a summary."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from lossless.cli._common import CliState, emit_json, json_option, open_engine, run_command, stderr, stdout, styled
from lossless.constants import TRANSCRIPT_FORMATS
from lossless.errors import LcmError, TranscriptError

if TYPE_CHECKING:
    from rich.table import Table

    from lossless.bootstrap import FileImport
    from lossless.config import Config

__all__ = ["import_command"]


def _short(path: str, width: int = 60) -> str:
    with contextlib.suppress(ValueError):  # another drive on Windows
        relative = os.path.relpath(path)
        if not relative.startswith(".."):
            path = relative
    # The end of a path tells files apart: cut from the front, never the file name.
    return path if len(path) <= width else "…" + path[-(width - 1) :]


def _summary_table(results: list[FileImport | Exception]) -> Table:
    from rich.table import Table

    from lossless.bootstrap import FileImport

    table = Table(title="Import summary", title_justify="left", show_footer=True)
    imported = [r for r in results if isinstance(r, FileImport)]
    table.add_column("file", footer=f"{len(results)} file(s)", overflow="fold", min_width=24)
    table.add_column("format")
    table.add_column("status")
    table.add_column("conversation", justify="right")
    table.add_column("new messages", justify="right", footer=str(sum(r.stored for r in imported)))
    table.add_column("parts", justify="right", footer=str(sum(r.parts for r in imported)))
    table.add_column("duplicates skipped", justify="right", footer=str(sum(r.duplicates for r in imported)))
    table.add_column(
        "other records", justify="right", footer=str(sum(sum(r.skipped_records.values()) for r in imported))
    )
    for result in results:
        if isinstance(result, FileImport):
            status = styled((result.status, {"unchanged": "dim", "skipped": "yellow"}.get(result.status, "")))
            table.add_row(
                _short(result.path),
                result.format,
                status,
                str(result.conversation_id or "-"),
                str(result.stored),
                str(result.parts),
                str(result.duplicates),
                str(sum(result.skipped_records.values())),
            )
        else:
            path = result.path if isinstance(result, TranscriptError) else "?"
            table.add_row(_short(path), "-", styled(("failed", "red")), "-", "0", "0", "0", "0")
    return table


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024 or unit == "MiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} MiB"  # pragma: no cover


def _print_left_out(imported: list[FileImport]) -> None:
    """What was not stored as messages, by record type with its size, and where sub-agents went."""
    from rich.table import Table

    counts: dict[str, int] = {}
    sizes: dict[str, int] = {}
    for result in imported:
        for kind, count in result.skipped_records.items():
            counts[kind] = counts.get(kind, 0) + count
            sizes[kind] = sizes.get(kind, 0) + result.skipped_bytes.get(kind, 0)
    if counts:
        table = Table(title="Records not stored as messages (by type)", title_justify="left")
        table.add_column("record type")
        table.add_column("records", justify="right")
        table.add_column("size", justify="right")
        for kind in sorted(counts, key=lambda k: (-sizes[k], k)):
            table.add_row(kind, f"{counts[kind]:,}", _size(sizes[kind]))
        stdout().print(table)
    for result in imported:
        for session_id, count in result.subagents.items():
            stdout().print(
                f"sub-agent {session_id}: {count:,} new messages (from {_short(result.path)})", soft_wrap=True
            )


@click.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--full", is_flag=True, help="Re-read every file whole, ignoring the saved read positions.")
@click.option(
    "--format",
    "format_name",
    type=click.Choice(TRANSCRIPT_FORMATS),
    help="Read every file as this format instead of detecting it (files only, not folders).",
)
@click.option("--session-id", help="Store a single file under this session id instead of the one it names.")
@json_option
@click.pass_obj
@run_command
async def import_command(
    state: CliState, paths: tuple[Path, ...], full: bool, format_name: str | None, session_id: str | None, as_json: bool
) -> None:
    """Import agent transcripts (files or folders) into the store.

    Formats are detected: Claude Code, pi, OpenClaw, SWE-agent and OpenAI-style
    chat lists.  Importing is idempotent: a file imported again stores only what
    is new (an unchanged file is not even read).  Each file is imported whole or
    not at all; a corrupt file is reported with its line and the others go on.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from lossless.bootstrap import FileImport

    if session_id is not None and (len(paths) != 1 or not paths[0].is_file()):
        raise click.UsageError("--session-id needs exactly one file")
    engine = await open_engine(state, create=True)
    async with engine:
        show_progress = not as_json and stderr().is_terminal
        with Progress(
            TextColumn("importing", style="bold"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[current]}", markup=False),
            TimeElapsedColumn(),
            console=stderr(),
            transient=True,
            disable=not show_progress,
        ) as progress:
            task = progress.add_task("import", total=None, current="")

            def advance(done: int, total: int, outcome: FileImport | Exception) -> None:
                label = outcome.path if isinstance(outcome, FileImport) else type(outcome).__name__
                progress.update(task, completed=done, total=total, current=_short(label, 40))

            if format_name is not None or session_id is not None:
                results: list[FileImport | Exception] = []
                for done, path in enumerate(paths, 1):
                    try:
                        one: FileImport | Exception = await engine.bootstrap(
                            path, format_name=format_name, session_id=session_id, full=full
                        )
                    except (LcmError, OSError) as exc:
                        one = exc
                    results.append(one)
                    advance(done, len(paths), one)
            else:
                results = await engine.import_paths(list(paths), full=full, progress=advance)
        failures = [r for r in results if isinstance(r, Exception)]
        if as_json:
            emit_json(
                {
                    "ok": not failures,
                    "files": [
                        r.to_dict() if isinstance(r, FileImport) else {"error": str(r), "type": type(r).__name__}
                        for r in results
                    ],
                    "stored": sum(r.stored for r in results if isinstance(r, FileImport)),
                    "duplicates": sum(r.duplicates for r in results if isinstance(r, FileImport)),
                }
            )
        else:
            stdout().print(_summary_table(results))
            _print_left_out([r for r in results if isinstance(r, FileImport)])
            for result in results:
                if isinstance(result, FileImport) and result.status == "skipped":
                    stderr().print(styled(("skipped", "yellow"), f" {_short(result.path)}: {result.reason}"))
                if isinstance(result, FileImport) and result.repaired:
                    stderr().print(
                        styled(
                            ("note", "yellow"),
                            f" {_short(result.path)}: {result.repaired} message(s) held invalid UTF-8 or "
                            "Unicode, stored with U+FFFD in its place (the exact original is kept with each)",
                        )
                    )
                if isinstance(result, FileImport) and result.left_out:
                    stderr().print(
                        styled(
                            ("note", "yellow"),
                            f" {_short(result.path)}: {result.left_out} entr(y/ies) older than the newest "
                            "message already stored were left out (bootstrap imports what follows it)",
                        )
                    )
            for error in failures:
                stderr().print(styled(("error:", "bold red"), f" {error}"))
            if any(isinstance(r, FileImport) and r.stored for r in results):
                stderr().print(styled(("next", "cyan"), f": {_next_step(engine.config)}"))
        if failures:
            sys.exit(3)


def _next_step(config: Config) -> str:
    """What to run after an import that stored messages: the background build, or the extra it needs."""
    from lossless.engine.wiring import embedder_missing

    missing = embedder_missing(config)
    if missing is not None:
        return (
            f"`lcm grep --mode hybrid` ranks by words until an embedder can run: {missing} "
            "(then `lcm index` builds the search by meaning and long-term memories)"
        )
    return (
        "search by meaning (`lcm grep --mode hybrid`) and long-term memories need the background build: "
        "`lcm index` runs it now (or leave `lcm worker` / `lcm mcp` running)"
    )
