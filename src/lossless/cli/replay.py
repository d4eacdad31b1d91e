"""``lcm replay``: play a recorded session through the engine turn by turn and show what the model would see."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from lossless.cli._common import CliState, emit_json, json_option, run_command, stderr, stdout, styled
from lossless.cli.compact import summary_tree

if TYPE_CHECKING:
    from rich.table import Table

    from lossless.replay import Checkpoint, ReplayResult

__all__ = ["replay_command"]


def _depths(by_depth: dict[int, int]) -> str:
    return " ".join(f"d{depth}:{count}" for depth, count in sorted(by_depth.items())) or "-"


def _checkpoint_table(result: ReplayResult) -> Table:
    from rich.table import Table

    table = Table(
        title=f"Replay of {Path(result.transcript).name} ({result.format}) at a {result.budget:,}-token budget",
        title_justify="left",
    )
    columns = (
        "turn",
        "messages",
        "raw tokens",
        "stored context",
        "sent to model",
        "of budget",
        "left out",
        "compactions",
    )
    for name in (*columns, "summaries"):
        table.add_column(name, justify="left" if name == "summaries" else "right")
    for point in result.checkpoints:
        share = point.assembled_tokens / result.budget
        style = "red" if point.over_budget else ""
        table.add_row(
            str(point.turn),
            f"{point.messages:,}",
            f"{point.raw_tokens:,}",
            f"{point.context_tokens:,}",
            f"{point.assembled_tokens:,}",
            styled((f"{share:.0%}", style)),
            f"{point.left_out:,}" + (f" ({point.excerpted} excerpted)" if point.excerpted else ""),
            str(point.compactions),
            _depths(point.summaries_by_depth),
        )
    return table


def _totals(result: ReplayResult) -> Table:
    from rich.table import Table

    table = Table(title="Result", title_justify="left", show_header=False)
    table.add_column("")
    table.add_column("", justify="right")
    table.add_row("turns replayed", f"{result.turns:,}")
    table.add_row(
        "messages stored", f"{result.messages:,}" + (f" ({result.duplicates} duplicates)" * bool(result.duplicates))
    )
    table.add_row("raw history", f"{result.raw_tokens:,} tokens")
    table.add_row("final context sent to the model", f"{result.assembled_tokens:,} tokens")
    table.add_row("smaller than the raw history by", f"{result.reduction:.1%}")
    table.add_row("largest context of any turn", f"{result.max_assembled_tokens:,} tokens")
    table.add_row(
        "compactions", f"{result.compactions} ({', '.join(f'{n} {r}' for r, n in result.stop_reasons.items()) or '-'})"
    )
    table.add_row("summaries by depth", _depths(result.summaries_by_depth))
    check = styled(("0", "green")) if not result.violations else styled((str(result.violations), "red"))
    table.add_row("contexts over budget (engine fault)", check)
    if result.left_out_turns:
        table.add_row(
            "turns that left items out to fit",
            f"{result.left_out_turns:,} (at most {result.max_left_out:,} items in one turn)",
        )
    if result.errors:
        table.add_row("after_turn errors", styled((str(len(result.errors)), "red"), f": {result.errors[0]}"))
    table.add_row("time", f"{result.seconds:.2f} s")
    return table


@click.command("replay")
@click.argument("transcript", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--budget", type=click.IntRange(1), default=32_000, show_default=True, help="Model context budget in tokens."
)
@click.option(
    "--summarizer",
    type=click.Choice(["offline", "openai", "anthropic"]),
    help="Summarizer provider (default: the configured one, else the built-in offline summarizer).",
)
@click.option("--checkpoints", type=click.IntRange(1, 1000), default=10, show_default=True, help="Rows in the table.")
@click.option("--tail-tokens", type=click.IntRange(1), help="Cap the fresh tail at this many tokens.")
@click.option("--session", "session_id", metavar="ID", help="Session id to replay into (default: replay/<file name>).")
@json_option
@click.pass_obj
@run_command
async def replay_command(
    state: CliState,
    transcript: Path,
    budget: int,
    summarizer: str | None,
    checkpoints: int,
    tail_tokens: int | None,
    session_id: str | None,
    as_json: bool,
) -> None:
    """Replay TRANSCRIPT turn by turn: store, compact and assemble as a live agent would, then report.

    Uses a temporary database unless --database is given (then the replayed session stays there, to
    explore with the other commands).
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from lossless.engine import ContextEngine
    from lossless.replay import replay

    overrides: dict[str, Any] = {}
    if summarizer:
        overrides["summary_provider"] = summarizer
    if tail_tokens:
        overrides["fresh_tail_max_tokens"] = tail_tokens
    with tempfile.TemporaryDirectory(prefix="lcm-replay-") as scratch:
        if state.database is None:
            overrides["database_url"] = f"sqlite:///{Path(scratch) / 'replay.db'}"
            overrides["data_dir"] = Path(scratch)
        config = state.config(**overrides)
        async with await ContextEngine.open(config=config) as engine:
            with Progress(
                TextColumn("replaying", style="bold"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("turns"),
                TimeElapsedColumn(),
                console=stderr(),
                transient=True,
                disable=as_json or not stderr().is_terminal,
            ) as progress:
                task = progress.add_task("replay", total=None)

                def update(done: int, total: int, checkpoint: Checkpoint | None) -> None:
                    progress.update(task, completed=done, total=total)

                result = await replay(
                    engine, transcript, budget=budget, checkpoints=checkpoints, session_id=session_id, progress=update
                )
            summaries, lineage = await engine.summaries(result.conversation_id)
            context = await engine.context(result.conversation_id)
            zone = engine.zone
    if as_json:
        emit_json(result.to_dict())
        return
    out = stdout()
    out.print(_checkpoint_table(result))
    out.print(_totals(result))
    if summaries:
        out.print(summary_tree(f"Summary DAG of {result.session_id}", summaries, lineage, context, zone))
