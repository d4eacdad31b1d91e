"""``lcm migrate --from sqlite:///… --to postgresql://…``: copy a whole store, then verify it.

The copy streams, and is resumable (run the same command again after an interruption); it is
verified by the row count of every table and by the integrity checker on the target.  Exit status:
0 when both agree, :data:`~lossless.cli.doctor.PROBLEMS_FOUND` otherwise.
"""

from __future__ import annotations

import sys
from urllib.parse import urlsplit

import click

from lossless.cli._common import CliState, emit_json, json_option, run_command, stderr, stdout, styled
from lossless.cli.doctor import PROBLEMS_FOUND
from lossless.errors import InputError

__all__ = ["migrate_command"]


@click.command("migrate")
@click.option("--from", "source", required=True, metavar="URL", help="The store to copy: sqlite:///path/to/lcm.db.")
@click.option("--to", "target", required=True, metavar="URL", help="Where to copy it: postgresql://user@host/db.")
@json_option
@click.pass_obj
@run_command
async def migrate_command(state: CliState, source: str, target: str, as_json: bool) -> None:
    """Copy a whole store from SQLite to PostgreSQL, then verify it (run again to resume)."""
    import anyio
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from lossless.engine import ContextEngine
    from lossless.engine.wiring import blob_store_for, open_store, sqlite_path_from_url, transfer_sqlite_to_postgres

    if urlsplit(source).scheme != "sqlite":
        raise InputError(f"--from must be a sqlite:/// URL, got {source!r}")
    if urlsplit(target).scheme not in ("postgresql", "postgres"):
        raise InputError(f"--to must be a postgresql:// URL, got {target!r}")
    path = await anyio.Path(sqlite_path_from_url(source)).expanduser()
    if not await path.is_file():
        raise InputError(f"there is no SQLite database at {str(path)!r}")
    source_config = state.config(database_url=source)
    target_config = state.config(database_url=target)

    # Bring the source up to this version's schema (as opening it would), and create/migrate the target.
    await (await open_store(source, source_config)).close()
    target_store = await open_store(target, target_config)
    source_blobs = blob_store_for(source_config)
    target_blobs = blob_store_for(target_config, target_store)
    try:
        with Progress(
            TextColumn("[bold]{task.fields[table]}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=stderr(),
            transient=True,
            disable=as_json or not stderr().is_terminal,
        ) as progress:
            tasks: dict[str, object] = {}

            def advance(table: str, done: int, total: int) -> None:
                if table not in tasks:
                    tasks[table] = progress.add_task(table, total=total, table=table)
                progress.update(tasks[table], completed=done, total=total)  # type: ignore[arg-type]

            result = await transfer_sqlite_to_postgres(
                str(path), target, source_blobs=source_blobs, target_blobs=target_blobs, progress=advance
            )
    finally:
        await target_blobs.close()
        await target_store.close()

    async with await ContextEngine.open(config=target_config) as engine:
        report = await engine.check_integrity(None)
    ok = result.ok and report.ok
    if as_json:
        emit_json({**result.to_dict(), "ok": ok, "integrity": report.to_dict()})
    else:
        out = stdout()
        table = Table(title=f"Copied {source} → PostgreSQL", title_justify="left")
        for column in ("table", "source rows", "target rows", "copied now", ""):
            table.add_column(column, justify="left" if column in ("table", "") else "right")
        for t in result.tables:
            table.add_row(t.table, f"{t.source:,}", f"{t.target:,}", f"{t.copied:,}", "✓" if t.ok else "✗ differs")
        out.print(table)
        out.print(f"large-file bytes copied: {result.blobs_copied}")
        for file_id in result.blobs_missing:
            out.print(styled(("missing in the source's file folder:", "red"), f" {file_id}"))
        if report.ok:
            out.print(styled("integrity of the target: ", ("no problems found", "green")))
        else:
            out.print(
                styled(
                    "integrity of the target: ", (f"{len(report.problems)} problems", "red"), " (run lcm doctor on it)"
                )
            )
    if not ok:
        sys.exit(PROBLEMS_FOUND)
