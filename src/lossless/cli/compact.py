"""``lcm compact``, ``lcm summaries`` and ``lcm compactions``: compact a conversation, show its summary DAG
as a tree, and list the compaction passes that built it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from lossless.cli._common import CliState, emit_json, json_option, open_engine, run_command, stderr, stdout, styled

if TYPE_CHECKING:
    from rich.text import Text
    from rich.tree import Tree

    from lossless.compaction import CompactionResult, Mode
    from lossless.records import ContextEntry, Summary

__all__ = ["compact_command", "compactions_command", "summaries_command", "summary_tree"]


@click.command("compact")
@click.argument("conversation")
@click.option(
    "--until", "until", type=click.IntRange(0), metavar="TOKENS", help="Compact until the context fits TOKENS."
)
@click.option("--full", is_flag=True, help="Run every pass there is room for (default: the incremental rules).")
@json_option
@click.pass_obj
@run_command
async def compact_command(state: CliState, conversation: str, until: int | None, full: bool, as_json: bool) -> None:
    """Compact CONVERSATION (id or session id) into summaries, and say why compaction stopped."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.table import Table

    if full and until is not None:
        raise click.UsageError(
            "--full and --until are alternatives: give one (--full runs every pass there is room for)"
        )
    mode: Mode = "until_under" if until is not None else ("full" if full else "incremental")
    async with await open_engine(state) as engine:
        with Progress(
            SpinnerColumn(),
            TextColumn("compacting", style="bold"),
            TextColumn("{task.fields[detail]}", markup=False),
            TimeElapsedColumn(),
            console=stderr(),
            transient=True,
            disable=as_json or not stderr().is_terminal,
        ) as progress:
            task = progress.add_task("compact", detail="")

            def update(partial: CompactionResult) -> None:
                tokens = f"{partial.tokens_before:,} → {partial.tokens_after:,} tokens"
                progress.update(task, detail=f"{len(partial.summaries)} summaries, {tokens}")

            result = await engine.compact(conversation, mode=mode, target_tokens=until, progress=update)
    if as_json:
        emit_json(result.to_dict())
        return
    saved = 1 - result.tokens_after / result.tokens_before if result.tokens_before else 0.0
    table = Table(title=f"Compaction of conversation {result.conversation_id} ({result.mode})", title_justify="left")
    table.add_column("")
    table.add_column("", justify="right")
    table.add_row("context tokens before", f"{result.tokens_before:,}")
    table.add_row("context tokens after", f"{result.tokens_after:,}")
    table.add_row("reduction", f"{saved:.1%}")
    if result.target_tokens is not None:
        table.add_row("target", f"{result.target_tokens:,}")
    table.add_row("summaries made", ", ".join(f"{n} at depth {d}" for d, n in result.by_depth.items()) or "none")
    table.add_row("how they were made", ", ".join(f"{n} {level}" for level, n in result.by_level.items()) or "-")
    table.add_row("stopped because", result.stop_reason.replace("_", " "))
    table.add_row("time", f"{result.seconds:.2f} s")
    stdout().print(table)


def _label(summary: Summary, zone: Any) -> Text:
    from lossless.segments import format_time

    span = f"{format_time(summary.earliest_at, zone)} → {format_time(summary.latest_at, zone)}"
    label = styled((summary.id, "bold"), f" · depth {summary.depth} · {span} · {summary.token_count:,} tokens")
    if summary.level != "normal":
        label.append_text(styled(" · ", (summary.level, "yellow")))
    return label


@click.command("summaries")
@click.argument("conversation")
@json_option
@click.pass_obj
@run_command
async def summaries_command(state: CliState, conversation: str, as_json: bool) -> None:
    """Show the summary DAG of CONVERSATION as a tree: what each summary was made from."""
    async with await open_engine(state) as engine:
        conv = await engine.conversation(conversation)
        summaries, lineage = await engine.summaries(conv.id)
        context = await engine.context(conv.id)
        zone = engine.zone
    if as_json:
        emit_json(
            {
                "conversation_id": conv.id,
                "context": [e.ref for e in context],
                "summaries": [
                    {
                        "id": s.id,
                        "kind": s.kind,
                        "depth": s.depth,
                        "earliest_at": s.earliest_at.isoformat() if s.earliest_at else None,
                        "latest_at": s.latest_at.isoformat() if s.latest_at else None,
                        "token_count": s.token_count,
                        "source_token_count": s.source_token_count,
                        "level": s.level,
                        "reason": s.reason,
                        "provider": s.provider,
                        "model": s.model,
                        "file_ids": list(s.file_ids),
                        "sources": list(lineage.get(s.id, ())),
                    }
                    for s in summaries
                ],
            }
        )
        return
    stdout().print(summary_tree(f"conversation {conv.id} · {conv.session_id}", summaries, lineage, context, zone))


def summary_tree(
    title: str,
    summaries: list[Summary],
    lineage: dict[str, tuple[int | str, ...]],
    context: list[ContextEntry],
    zone: Any,
) -> Tree:
    """The DAG as a tree, rooted at the context's summaries; leaves show the message range they cover."""
    from rich.tree import Tree

    by_id = {s.id: s for s in summaries}
    tree = Tree(f"{title} · {len(summaries)} summaries")

    def add(node: Tree, summary_id: str) -> None:
        summary = by_id[summary_id]
        branch = node.add(_label(summary, zone))
        sources = lineage.get(summary_id, ())
        if summary.kind == "leaf":
            ids = [s for s in sources if isinstance(s, int)]
            if ids:
                branch.add(f"{len(ids)} messages: msg#{ids[0]} … msg#{ids[-1]} ({summary.source_token_count:,} tokens)")
        else:
            for source in sources:
                add(branch, str(source))

    raw = 0
    for entry in context:
        if entry.kind == "summary" and entry.summary_id in by_id:
            add(tree, entry.summary_id)
        else:
            raw += 1
    if raw:
        tree.add(f"{raw} raw messages (not compacted)")
    return tree


@click.command("compactions")
@click.argument("conversation")
@click.option(
    "--limit", type=click.IntRange(1), default=50, show_default=True, help="Show only the newest LIMIT passes."
)
@json_option
@click.pass_obj
@run_command
async def compactions_command(state: CliState, conversation: str, limit: int, as_json: bool) -> None:
    """List the compaction passes of CONVERSATION, oldest first: when, who asked, what each replaced."""
    from rich.table import Table

    from lossless.adapters.service import event_dict
    from lossless.segments import format_time

    async with await open_engine(state) as engine:
        conv = await engine.conversation(conversation)
        events = await engine.compaction_history(conv.id, limit=limit)
        zone = engine.zone
    if as_json:
        emit_json({"conversation_id": conv.id, "events": [event_dict(e, summary) for e, summary in events]})
        return
    if not events:
        stdout().print(f"conversation {conv.id} has not been compacted yet")
        return
    table = Table(title=f"Compaction passes of conversation {conv.id} · {conv.session_id}", title_justify="left")
    for name in ("when", "run", "trigger", "mode", "summary"):
        table.add_column(name)
    for name in ("replaced", "context tokens", "time"):
        table.add_column(name, justify="right")
    for event, summary in events:
        made = styled(f"{event.summary_id} (depth {summary.depth}" if summary else event.summary_id)
        if summary:
            made.append_text(styled(")") if summary.level == "normal" else styled(", ", (summary.level, "yellow"), ")"))
        unit = "messages" if summary is None or summary.kind == "leaf" else "summaries"
        table.add_row(
            format_time(event.created_at, zone),
            event.run_id[:8],
            event.trigger,
            event.mode.replace("_", " "),
            made,
            f"{event.source_items} {unit}",
            f"{event.tokens_before:,} → {event.tokens_after:,}",
            f"{event.elapsed_ms:,} ms",
        )
    stdout().print(table)
