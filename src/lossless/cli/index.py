"""``lcm index``: show, or run to the end, the background build of the search vectors.

Semantic and hybrid grep rank by vectors that background workers build ahead (never a search);
this command shows how far the build is (``--status``) or runs it here with a progress bar and
an ETA measured from its own batches (where stderr is not a terminal: a plain line every
:data:`PLAIN_PROGRESS_EVERY_S` seconds instead), for a store no worker serves or right after a big import.
It then embeds the long-term memories that have no vectors of the current embedder (after
``memory_embedder`` changed) and, with ``memory_auto_extract`` (the default), mines, as the
workers do, the messages that nothing mined for long-term memories yet.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click

from lossless.cli._common import CliState, emit_json, json_option, open_engine, run_command, stderr, stdout

if TYPE_CHECKING:
    from lossless.memory.message_index import BuildProgress

__all__ = ["index_command"]


#: Where stderr is not a terminal (a log, a pipe), the build says how far it is this often instead of a bar.
PLAIN_PROGRESS_EVERY_S = 15.0


class _PlainLines:
    """Where stderr is not a terminal (a log, a pipe) and the output is not JSON: a line at most every
    :data:`PLAIN_PROGRESS_EVERY_S` seconds, where a terminal gets a bar or a spinner."""

    def __init__(self, as_json: bool) -> None:
        self._on = not as_json and not stderr().is_terminal
        self._said = time.perf_counter()

    def say(self, line: str) -> None:
        if self._on and time.perf_counter() - self._said >= PLAIN_PROGRESS_EVERY_S:
            self._said = time.perf_counter()
            stderr().print(line, highlight=False)


def _plain_progress(indexed: int, total: int, rate: float) -> str:
    """One line for a log: how far, how fast, and about how long is left."""
    left = max(total - indexed, 0)
    eta = f"about {_duration(left / rate)} left" if rate > 0 else "time left unknown"
    share = indexed / total if total else 1.0
    return f"embedded {indexed:,} of {total:,} ({share:.0%}) · {rate:,.1f}/s · {eta}"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _progress_dict(progress: BuildProgress, written: int, seconds: float, mined: int) -> dict[str, Any]:
    return {
        "mined_now": mined,
        "model": progress.model,
        "indexed": progress.indexed,
        "total": progress.total,
        "share": round(progress.share, 4),
        "done": progress.done,
        "embedded_now": written,
        "seconds": round(seconds, 3),
        "items_per_second": round(written / seconds, 1) if seconds > 0 else None,
    }


@click.command("index")
@click.option("--status", is_flag=True, help="Only show how far the build is; embed nothing.")
@click.option("--conversation", metavar="ID", help="Show the state of one conversation (id or session id).")
@json_option
@click.pass_obj
@run_command
async def index_command(state: CliState, status: bool, conversation: str | None, as_json: bool) -> None:
    """Build the search vectors of messages and summaries that have none yet (semantic / hybrid grep)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    async with await open_engine(state) as engine:
        started = time.perf_counter()
        written = 0
        current = await engine.index_progress(conversation)
        if not status and not current.done:
            with Progress(
                TextColumn("[bold]embedding[/] {task.fields[model]}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                console=stderr(),
                transient=True,
                disable=as_json or not stderr().is_terminal,
            ) as bar:
                task = bar.add_task(
                    "index", total=current.total, completed=current.indexed, model=current.model, rate=""
                )
                lines = _PlainLines(as_json)
                while done := await engine.index_step():
                    written += done
                    rate = written / max(time.perf_counter() - started, 1e-9)
                    bar.update(task, advance=done, rate=f"{rate:,.0f}/s")
                    lines.say(_plain_progress(current.indexed + written, current.total, rate))
            current = await engine.index_progress(conversation)
        mined = revectored = 0
        if not status:  # memories stored under another memory_embedder get this one's vectors
            while done := await engine.memory_vectors_step():
                revectored += done
        if not status and engine.config.memory_auto_extract:
            lines = _PlainLines(as_json)
            with stderr().status("mining messages for long-term memories", spinner="dots") as spinner:
                while done := await engine.mine_step():
                    mined += done
                    spinner.update(f"mining messages for long-term memories: {mined:,} so far")
                    lines.say(f"mined {mined:,} messages for long-term memories so far")
        seconds = time.perf_counter() - started
    if as_json:
        emit_json(_progress_dict(current, written, seconds, mined) | {"memories_embedded_now": revectored})
        return
    line = (
        f"{current.indexed:,} of {current.total:,} messages and summaries have vectors "
        f"({current.share:.0%}) · {current.model}"
    )
    if written:
        line += f"\nembedded {written:,} in {seconds:.1f} s ({written / seconds:,.0f}/s)"
    if revectored:
        line += f"\nembedded {revectored:,} long-term memories with {current.model}"
    if mined:
        line += f"\nmined {mined:,} messages for long-term memories"
    elif not current.done:
        from lossless.engine.wiring import embedder_missing

        missing = embedder_missing(engine.config)
        line += (
            f"\nthe rest needs an embedder that can run here: {missing} (then `lcm index` builds it)"
            if missing is not None
            else "\nthe rest is built by background workers (`lcm worker`, `lcm serve`, `lcm mcp`) or by `lcm index`"
        )
    stdout().print(line, highlight=False, soft_wrap=True)  # a pip install line is never cut
