"""``lcm prune`` and ``lcm vacuum``: explicit retention.  ``prune`` shows its plan and deletes only with ``--apply``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from lossless.cli._common import CliState, emit_json, json_option, open_engine, run_command, stdout
from lossless.errors import InputError

if TYPE_CHECKING:
    from lossless.retention import PrunePlan

__all__ = ["prune_command", "vacuum_command"]


def _when(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InputError(
            f"--archived-before takes a date or time like 2026-01-31 or 2026-01-31T12:00Z, got {text!r}"
        ) from exc
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)  # pragma: no cover


def _print_plan(plan: PrunePlan, dry_run: bool) -> None:
    from rich.table import Table

    out = stdout()
    if not plan.delete and not plan.kept:
        out.print("nothing matches: no conversation would be deleted")
        return
    table = Table(title="Would delete" if dry_run else "Deleting", title_justify="left")
    for column in ("conversation", "session", "archived", "messages", "summaries", "files", "text size"):
        table.add_column(column, justify="right" if column not in ("session", "archived") else "left")
    for c in plan.delete:
        table.add_row(
            str(c.conversation_id),
            c.session_id,
            "active" if c.active else (c.archived_at.isoformat(timespec="seconds") if c.archived_at else "-"),
            f"{c.messages:,}",
            f"{c.summaries:,}",
            f"{c.files:,}",
            _size(c.row_bytes),
        )
    out.print(table)
    for c, why in plan.kept:
        out.print(f"kept conversation {c.conversation_id} ({c.session_id}): {why}")
    out.print(f"{len(plan.delete)} conversations, {plan.messages:,} messages, about {_size(plan.row_bytes)} of text")


@click.command("prune")
@click.option(
    "--archived-before", metavar="DATE", help="Archived conversations archived before DATE (ISO; UTC if no zone)."
)
@click.option("--conversation", "conversations", multiple=True, metavar="ID", help="This conversation (repeatable).")
@click.option("--dry-run/--apply", default=True, help="Only show what would go (default), or delete it.")
@click.option("--vacuum/--no-vacuum", default=True, help="VACUUM after deleting, to give the space back (default).")
@json_option
@click.pass_obj
@run_command
async def prune_command(
    state: CliState,
    archived_before: str | None,
    conversations: tuple[str, ...],
    dry_run: bool,
    vacuum: bool,
    as_json: bool,
) -> None:
    """Delete whole conversations explicitly: shows the plan, and deletes only with --apply."""
    if archived_before is None and not conversations:
        raise InputError("say what to prune: --archived-before DATE and/or --conversation ID")
    before = None if archived_before is None else _when(archived_before)
    async with await open_engine(state) as engine:
        plan = await engine.plan_prune(archived_before=before, conversations=list(conversations))
        result = None if dry_run else await engine.prune(plan, vacuum=vacuum)
    if as_json:
        emit_json({"dry_run": dry_run, "plan": plan.to_dict(), "result": None if result is None else result.to_dict()})
        return
    _print_plan(plan, dry_run)
    if result is None:
        if plan.delete:
            stdout().print("dry run: nothing was deleted; run again with --apply to delete")
        return
    stdout().print(f"deleted {result.conversations} conversations and {_size(result.blob_bytes)} of large files")
    if result.bytes_before is not None:
        stdout().print(f"database file: {_size(result.bytes_before)} → {_size(result.bytes_after)}")


@click.command("vacuum")
@json_option
@click.pass_obj
@run_command
async def vacuum_command(state: CliState, as_json: bool) -> None:
    """Rebuild the database file so free pages go back to the file system (VACUUM, then optimize)."""
    async with await open_engine(state) as engine:
        before, after = await engine.vacuum()
    if as_json:
        emit_json({"bytes_before": before, "bytes_after": after})
    else:
        stdout().print(f"database file: {_size(before)} → {_size(after)}")
