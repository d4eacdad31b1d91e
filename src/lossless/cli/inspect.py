"""``lcm conversations``, ``lcm messages`` and ``lcm stats``: read what the store holds."""

from __future__ import annotations

import click

from lossless.cli._common import CliState, emit_json, json_option, open_engine, run_command, stdout
from lossless.errors import InputError

__all__ = ["conversations_command", "messages_command", "stats_command"]


def _when(value: object) -> str:
    from lossless.records import format_timestamp

    text = format_timestamp(value) if hasattr(value, "tzinfo") else str(value)  # type: ignore[arg-type]
    return text[:19].replace("T", " ")


def _bytes(size: int | None) -> str:
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover


@click.command("conversations")
@click.option("--limit", type=click.IntRange(1, 100_000), default=50, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@json_option
@click.pass_obj
@run_command
async def conversations_command(state: CliState, limit: int, offset: int, as_json: bool) -> None:
    """List this agent's conversations, most recently updated first."""
    from rich.table import Table

    async with await open_engine(state) as engine:
        conversations = await engine.conversations(limit=limit, offset=offset)
        counts = await engine.conversation_sizes(conversations)
    if as_json:
        emit_json(
            [
                {**c.to_dict(), "messages": counts.get(c.id, (0, 0))[0], "tokens": counts.get(c.id, (0, 0))[1]}
                for c in conversations
            ]
        )
        return
    table = Table(title=f"Conversations of agent {engine.config.agent_id!r}", title_justify="left")
    for name, justify in (
        ("id", "right"),
        ("session", "left"),
        ("title", "left"),
        ("source", "left"),
        ("messages", "right"),
        ("tokens", "right"),
        ("updated", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for c in conversations:
        messages, tokens = counts.get(c.id, (0, 0))
        session = c.session_id if len(c.session_id) <= 40 else c.session_id[:39] + "…"
        title = (c.title or "")[:40]
        table.add_row(str(c.id), session, title, c.source or "", f"{messages:,}", f"{tokens:,}", _when(c.updated_at))
    stdout().print(table)
    if not conversations:
        stdout().print("No conversations yet: import some with `lcm import PATH`.")


@click.command("messages")
@click.argument("conversation")
@click.option("--tail", type=click.IntRange(0), help="Show only the last N messages.")
@click.option("--after", "after_seq", type=click.IntRange(0), help="Show messages after this sequence number.")
@click.option("--limit", type=click.IntRange(1), help="Show at most N messages.")
@click.option("--full", is_flag=True, help="Print whole contents instead of one line per message.")
@json_option
@click.pass_obj
@run_command
async def messages_command(
    state: CliState,
    conversation: str,
    tail: int | None,
    after_seq: int | None,
    limit: int | None,
    full: bool,
    as_json: bool,
) -> None:
    """Show the stored messages of CONVERSATION (its id or session id)."""
    from rich.table import Table

    if tail is not None and (after_seq is not None or limit is not None):
        raise InputError("--tail cannot be combined with --after or --limit")
    async with await open_engine(state) as engine:
        records = await engine.messages(conversation, tail=tail, after_seq=after_seq, limit=limit)
    if as_json:
        emit_json([r.to_dict() for r in records])
        return
    if full:
        for r in records:
            stdout().rule(f"#{r.seq} {r.role} · msg#{r.id} · {_when(r.created_at)} · {r.token_count} tokens")
            stdout().print(r.content, soft_wrap=True)
        return
    table = Table(show_edge=False, pad_edge=False)
    for name, justify in (
        ("id", "right"),
        ("seq", "right"),
        ("time", "left"),
        ("role", "left"),
        ("tokens", "right"),
        ("content", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=name != "content")  # type: ignore[arg-type]
    for r in records:
        preview = " ".join(r.content.split())
        preview = preview if len(preview) <= 160 else preview[:159] + "…"
        table.add_row(f"msg#{r.id}", str(r.seq), _when(r.created_at), r.role, str(r.token_count), preview)
    stdout().print(table)


@click.command("stats")
@json_option
@click.pass_obj
@run_command
async def stats_command(state: CliState, as_json: bool) -> None:
    """Show row counts and sizes of the store."""
    from rich.table import Table

    async with await open_engine(state) as engine:
        stats = await engine.stats()
    if as_json:
        emit_json(
            {
                "url": stats.url,
                "backend": stats.backend,
                "schema_version": stats.schema_version,
                "conversations": stats.conversations,
                "messages": stats.messages,
                "message_parts": stats.message_parts,
                "message_tokens": stats.message_tokens,
                "summaries": stats.summaries,
                "context_items": stats.context_items,
                "large_files": stats.large_files,
                "total_bytes": stats.total_bytes,
                "table_bytes": dict(stats.table_bytes),
            }
        )
        return
    # The store on a line of its own: a table title wraps at the table's width and would cut the URL.
    stdout().print(f"{stats.url}  ({stats.backend}, schema v{stats.schema_version})", soft_wrap=True)
    table = Table()
    table.add_column("what")
    table.add_column("count", justify="right")
    for label, value in (
        ("conversations", stats.conversations),
        ("messages", stats.messages),
        ("message parts", stats.message_parts),
        ("message tokens", stats.message_tokens),
        ("summaries", stats.summaries),
        ("context items", stats.context_items),
        ("large files", stats.large_files),
    ):
        table.add_row(label, f"{value:,}")
    stdout().print(table)
    if stats.table_bytes:
        sizes = Table(title=f"Size on disk: {_bytes(stats.total_bytes)}", title_justify="left")
        sizes.add_column("table")
        sizes.add_column("size", justify="right")
        for name, size in stats.table_bytes.items():
            sizes.add_row(name, _bytes(size))
        stdout().print(sizes)
