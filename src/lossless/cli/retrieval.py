"""``lcm grep``, ``lcm describe``, ``lcm expand`` and ``lcm show``: the agent retrieval tools, from the shell.

They run as the operator of the ``--agent`` (default ``main``): every conversation
of that agent is in reach, or the one ``--conversation`` names.  Output is the same
text an agent sees, or JSON with ``--json``.  Every id they print (``msg#N``,
``sum_…``, ``file_…``) opens with ``lcm show ID`` (``--raw``: the exact stored text).
"""

from __future__ import annotations

import click

from lossless.cli._common import CliState, cli_words, emit_json, json_option, open_engine, run_command, stdout
from lossless.cli.files import parse_lines
from lossless.constants import DEFAULT_LIMIT, DEFAULT_MAX_DEPTH, MAX_CONTEXT, MAX_DEPTH, MAX_LIMIT
from lossless.errors import InputError

__all__ = ["describe_command", "expand_command", "grep_command", "show_command"]

_conversation = click.option(
    "--conversation", "-c", metavar="ID", help="Only this conversation (its id or session id); default: all of them."
)


def _print(text: str) -> None:
    stdout().print(text, soft_wrap=True)


@click.command("grep")
@click.argument("pattern")
@click.option(
    "--mode",
    type=click.Choice(["regex", "full_text", "semantic", "hybrid"]),
    default="regex",
    show_default=True,
    help='RE2 regular expression; words / "phrases" / prefix* / OR; or by meaning (semantic, hybrid; not files).',
)
@click.option(
    "--scope",
    type=click.Choice(["messages", "summaries", "both", "files"]),
    default="both",
    show_default=True,
    help="files: the lines of stored large files (text only).",
)
@_conversation
@click.option("--since", metavar="TIME", help="Only items at or after this ISO-8601 time.")
@click.option("--before", metavar="TIME", help="Only items before this ISO-8601 time.")
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=DEFAULT_LIMIT, show_default=True)
@click.option("--sort", type=click.Choice(["recency", "relevance"]), default="recency", show_default=True)
@click.option(
    "--context",
    "context_turns",
    type=click.IntRange(0, MAX_CONTEXT),
    default=0,
    show_default=True,
    help="Show each message match with this many turns before and after it.",
)
@json_option
@click.pass_obj
@run_command
async def grep_command(
    state: CliState,
    pattern: str,
    mode: str,
    scope: str,
    conversation: str | None,
    since: str | None,
    before: str | None,
    limit: int,
    sort: str,
    context_turns: int,
    as_json: bool,
) -> None:
    """Search stored messages and summaries (or files, with --scope files) for PATTERN, the whole history."""
    async with await open_engine(state) as engine:
        result = await engine.grep(
            pattern,
            mode=mode,  # type: ignore[arg-type]
            scope=scope,  # type: ignore[arg-type]
            conversation=conversation,
            since=since,
            before=before,
            limit=limit,
            sort=sort,  # type: ignore[arg-type]
            context=context_turns,
        )
    if as_json:
        emit_json(result.to_dict())
    elif not result.hits and result.message is not None:
        _print(cli_words(result.message))  # advice only: no stored text in it
    else:
        _print(result.render())


@click.command("describe")
@click.argument("item_id")
@_conversation
@click.option("--token-cap", type=click.IntRange(1), help="Say whether expanding the summary fits in this many tokens.")
@click.option("--lines", metavar="A:B", help="Files: show lines A to B (1-based).")
@json_option
@click.pass_obj
@run_command
async def describe_command(
    state: CliState, item_id: str, conversation: str | None, token_cap: int | None, lines: str | None, as_json: bool
) -> None:
    """Show a summary (sum_…) with its lineage and sizes, a stored file (file_…) and its lines, or a message (msg#N)."""
    start, end = parse_lines(lines) if lines else (None, None)
    async with await open_engine(state) as engine:
        described = await engine.describe(
            item_id, conversation=conversation, token_cap=token_cap, start_line=start, end_line=end
        )
    if as_json:
        emit_json(described.to_dict())
    else:
        _print(described.render())


@click.command("expand")
@click.argument("summary_ids", nargs=-1)
@click.option("--query", "-q", help="Expand the best full-text matches of this query instead of given ids.")
@click.option("--max-depth", type=click.IntRange(1, MAX_DEPTH), default=DEFAULT_MAX_DEPTH, show_default=True)
@click.option("--token-cap", type=click.IntRange(1), help="Most tokens to return (default: max_expand_tokens).")
@click.option("--include-messages", "-m", is_flag=True, help="Include the source messages of leaf summaries.")
@_conversation
@json_option
@click.pass_obj
@run_command
async def expand_command(
    state: CliState,
    summary_ids: tuple[str, ...],
    query: str | None,
    max_depth: int,
    token_cap: int | None,
    include_messages: bool,
    conversation: str | None,
    as_json: bool,
) -> None:
    """Expand SUMMARY_IDS (or --query matches) into the summaries and messages they were made from."""
    if bool(summary_ids) == (query is not None):
        raise InputError(
            "give summary ids (sum_…, as lcm grep --scope summaries cites them) or --query Q, not both and not neither"
        )
    async with await open_engine(state) as engine:
        result = await engine.expand(
            list(summary_ids) if summary_ids else None,
            query=query,
            max_depth=max_depth,
            token_cap=token_cap,
            include_messages=include_messages,
            conversation=conversation,
        )
    if as_json:
        emit_json(result.to_dict())
    else:
        _print(result.render(cli_words))  # advice in the command's words, stored text as is


@click.command("show")
@click.argument("item_id")
@click.option("--raw", is_flag=True, help="Write the exact stored text (a message or summary) or bytes (a file), only.")
@click.option("--lines", metavar="A:B", help="Files: show lines A to B (1-based).")
@json_option
@click.pass_obj
@run_command
async def show_command(state: CliState, item_id: str, raw: bool, lines: str | None, as_json: bool) -> None:
    """Open any id the other commands print: a message (msg#N), a summary (sum_…) or a file (file_…).

    Looks across every conversation of the agent.  --raw writes the stored content exactly as it
    is, with nothing added (for pipes and diffs).
    """
    if raw and (as_json or lines):
        raise InputError("--raw writes the stored content as it is: use it without --json and --lines")
    start, end = parse_lines(lines) if lines else (None, None)
    async with await open_engine(state) as engine:
        if raw and item_id.startswith("file_"):
            data = await engine.read_file(item_id)
        else:
            described = await engine.describe(item_id, start_line=start, end_line=end)
            data = b""
    if raw:
        if not item_id.startswith("file_"):
            content = described.to_dict()["content"]
            data = content.encode("utf-8", "surrogatepass") if isinstance(content, str) else b""
        click.echo(data, nl=False)  # bytes go to the binary stream untouched
    elif as_json:
        emit_json(described.to_dict())
    else:
        _print(described.render())
