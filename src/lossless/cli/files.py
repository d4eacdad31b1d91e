"""``lcm files`` and ``lcm file``: the large files stored aside, their summaries and their content."""

from __future__ import annotations

import click

from lossless.cli._common import CliState, emit_json, json_option, open_engine, run_command, stdout
from lossless.cli.inspect import _bytes, _when
from lossless.constants import DEFAULT_PAGE_BYTES, MAX_PAGE_BYTES
from lossless.errors import InputError

__all__ = ["file_command", "files_command", "parse_lines"]


def parse_lines(spec: str) -> tuple[int | None, int | None]:
    """``A:B``, ``A:``, ``:B`` or ``A`` (1-based, inclusive) as (start, end)."""
    start_text, colon, end_text = spec.partition(":")
    try:
        start = int(start_text) if start_text.strip() else None
        end = int(end_text) if end_text.strip() else None
    except ValueError:
        start = end = -1
    if not colon:
        end = start
    if (start is not None and start < 1) or (end is not None and end < (start or 1)) or spec.strip() in ("", ":"):
        raise InputError(f"--lines {spec!r} is not a line range: write A:B (1-based), A: or :B, e.g. --lines 1:100")
    return start, end


@click.command("files")
@click.argument("conversation")
@click.option("--limit", type=click.IntRange(1, 100_000), default=100, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@json_option
@click.pass_obj
@run_command
async def files_command(state: CliState, conversation: str, limit: int, offset: int, as_json: bool) -> None:
    """List the large files stored aside for CONVERSATION (its id or session id)."""
    from rich.table import Table

    async with await open_engine(state) as engine:
        files = await engine.files(conversation, limit=limit, offset=offset)
    if as_json:
        emit_json([f.to_dict() for f in files])
        return
    if not files:
        stdout().print(f"No large files in conversation {conversation!r}.")
        return
    table = Table(show_edge=False, pad_edge=False)
    for name, justify in (
        ("id", "left"),
        ("name", "left"),
        ("kind", "left"),
        ("mime", "left"),
        ("size", "right"),
        ("from", "left"),
        ("stored", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=name != "name")  # type: ignore[arg-type]
    for f in files:
        origin = {"file_block": "<file>", "tool_output": "tool output", "data_url": "data: URL"}.get(f.origin or "", "")
        table.add_row(f.id, f.name or "", f.kind or "", f.mime or "", _bytes(f.byte_size), origin, _when(f.created_at))
    stdout().print(table)


@click.command("file")
@click.argument("file_id")
@click.option("--lines", "lines", metavar="A:B", help="Show lines A to B (1-based; A: or :B leave an end open).")
@click.option(
    "--max-bytes",
    type=click.IntRange(1, MAX_PAGE_BYTES),
    default=DEFAULT_PAGE_BYTES,
    show_default=True,
    help="Most bytes of content shown at once.",
)
@click.option("--raw", is_flag=True, help="Write the file's exact bytes to stdout, and nothing else.")
@json_option
@click.pass_obj
@run_command
async def file_command(
    state: CliState, file_id: str, lines: str | None, max_bytes: int, raw: bool, as_json: bool
) -> None:
    """Show a stored large file: its metadata, exploration summary and (with --lines) content."""
    from rich.table import Table

    if raw and (as_json or lines):
        raise InputError("--raw writes the whole file as it is: use it without --json and --lines")
    start, end = parse_lines(lines) if lines else (None, None)
    async with await open_engine(state) as engine:
        if raw:
            data = await engine.read_file(file_id)
            click.echo(data, nl=False)  # bytes go to the binary stream untouched
            return
        described = await engine.describe_file(file_id, start_line=start, end_line=end, max_bytes=max_bytes)
    if as_json:
        emit_json(described.to_dict())
        return
    f, page = described.file, described.page
    table = Table(show_header=False, show_edge=False, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for label, value in (
        ("id", f.id),
        ("name", f.name or "(unnamed)"),
        ("kind", f"{f.kind or '?'} ({f.mime or 'unknown type'})"),
        ("size", f"{_bytes(f.byte_size)} ({f.byte_size or 0:,} bytes, {page.total_lines:,} lines)"),
        ("conversation", str(f.conversation_id)),
        ("stored", _when(f.created_at)),
        ("sha256", f.content_hash or ""),
    ):
        table.add_row(label, value)
    out = stdout()
    out.print(table)
    out.rule("exploration summary")
    out.print(f.exploration_summary or "(none)", markup=False, highlight=False)
    if not lines:
        out.rule()
        out.print(f"Show content with --lines 1:100, or the exact bytes with: lcm file {f.id} --raw", markup=False)
        return
    if page.binary:
        out.rule()
        out.print(f"Binary content: write it out with  lcm file {f.id} --raw > FILE", markup=False)
        return
    out.rule(f"lines {page.start_line:,}–{page.end_line:,} of {page.total_lines:,}")
    out.print(page.text or "", markup=False, highlight=False, end="" if (page.text or "").endswith("\n") else "\n")
    if page.next_start_line is not None:
        cut = " (cut at --max-bytes)" if page.truncated else ""
        out.rule()
        out.print(f"More{cut}: --lines {page.next_start_line}:", markup=False)
