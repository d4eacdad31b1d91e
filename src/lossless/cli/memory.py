"""``lcm memory …``: long-term memory from the command line.

Commands: ``add``, ``search``, ``explain``, ``list``, ``forget``, ``update``,
``export``, ``import``, ``stats``, plus ``grant``/``revoke`` (scope access),
``maintain`` (apply the tier rules to every memory) and ``extract`` (mine a
stored conversation for memories).  Every command acts as the
global ``--agent`` (default ``main``); ``lcm memory --all-scopes …`` acts as the
system identity, which reaches every scope — it is never implied.

``export`` writes JSON Lines, one memory per line with its history links and
provenance, with no row cap; ``import`` reads that format back (ids kept,
already present ids skipped).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from lossless.cli._common import CliState, emit_json, json_option, require_store, run_command, stdout, styled
from lossless.constants import MEMORY_CATEGORIES
from lossless.errors import InputError, NotFoundError

if TYPE_CHECKING:
    from rich.table import Table
    from rich.text import Text

    from lossless.engine import MemorySession
    from lossless.memory.records import Memory
    from lossless.memory.service import SearchResult

__all__ = ["memory_group"]

_CATEGORY = click.Choice(MEMORY_CATEGORIES)


async def _open(ctx: click.Context, *, create: bool = False) -> MemorySession:
    """The memory service; unless ``create`` (add, import), the store must already exist."""
    from lossless.engine import open_memory

    state: CliState = ctx.find_object(CliState)  # type: ignore[assignment]
    system = bool(ctx.find_root().meta.get("memory_all_scopes"))
    config = state.config()
    if not create:
        require_store(config)
    return await open_memory(config, system=system)


@click.group("memory")
@click.option("--all-scopes", is_flag=True, help="Act as the system identity, which reaches every scope.")
@click.pass_context
def memory_group(ctx: click.Context, all_scopes: bool) -> None:
    """Long-term memory: facts, preferences, entities, events, cases and patterns, with provenance."""
    ctx.find_root().meta["memory_all_scopes"] = all_scopes


def _preview(text: str, width: int = 90) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _table(memories: Sequence[Memory], scores: Sequence[float] | None = None) -> Table:
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False)
    columns = ["id", "category", "tier", "scope", "memory"]
    if scores is not None:
        columns.insert(0, "score")
    for name in columns:
        table.add_column(name, no_wrap=name != "memory")
    for i, m in enumerate(memories):
        row: list[str | Text] = [m.memory_id[:12], m.category, m.tier, m.scope, _preview(m.abstract)]
        if m.invalidated_at is not None:
            row[-1] = styled((f"{row[-1]} (superseded)", "dim"))
        if scores is not None:
            row.insert(0, f"{scores[i]:.3f}")
        table.add_row(*row)
    return table


@memory_group.command("add")
@click.argument("text")
@click.option("--category", type=_CATEGORY, default="entities", show_default=True)
@click.option("--scope", help="Scope to store it in (default: the agent's own, agent:<id>).")
@click.option("--importance", type=click.FloatRange(0, 1), help="0–1 (default: by category).")
@click.option(
    "--fact-key",
    help="What fact this is about, e.g. preferences:drink: a current memory with this key is superseded.",
)
@click.option("--dynamic", is_flag=True, help="A fact that changes (decays three times faster).")
@json_option
@click.pass_context
@run_command
async def add_command(
    ctx: click.Context,
    text: str,
    category: str,
    scope: str | None,
    importance: float | None,
    fact_key: str | None,
    dynamic: bool,
    as_json: bool,
) -> None:
    """Store TEXT as a memory (with --fact-key, the new version of that fact: the old one is kept as history)."""
    from lossless.memory.records import MemoryDraft

    draft = MemoryDraft(
        text,
        category=category,  # type: ignore[arg-type]
        importance=importance,
        fact_key=fact_key,
        temporal_type="dynamic" if dynamic else "static",
    )
    async with await _open(ctx, create=True) as session:
        memory = await session.service.store_fact(draft, scope=scope)
    if as_json:
        emit_json(memory.to_dict())
    else:
        replaced = f" (supersedes {memory.supersedes})" if memory.supersedes else ""
        stdout().print(f"stored {memory.memory_id} in {memory.scope}{replaced}")


async def _search(
    ctx: click.Context, query: str, limit: int, scope: tuple[str, ...], category: str | None, explain: bool
) -> SearchResult:
    state: CliState = ctx.find_object(CliState)  # type: ignore[assignment]
    async with await _open(ctx) as session:
        return await session.service.search(
            query,
            limit=limit,
            scopes=list(scope) or None,
            category=category,
            explain=explain,
            expand=state.config().memory_query_expansion,  # a person's query: synonyms help (spec: cli/manual)
        )


@memory_group.command("search")
@click.argument("query")
@click.option("--limit", type=click.IntRange(1, 100), default=5, show_default=True)
@click.option("--scope", multiple=True, help="Search only this scope (repeatable).")
@click.option("--category", type=_CATEGORY)
@json_option
@click.pass_context
@run_command
async def search_command(
    ctx: click.Context, query: str, limit: int, scope: tuple[str, ...], category: str | None, as_json: bool
) -> None:
    """Find the memories that best match QUERY (hybrid vector + keyword search)."""
    result = await _search(ctx, query, limit, scope, category, explain=False)
    if as_json:
        emit_json(result.to_dict())
        return
    if not result.hits:
        stdout().print(f"No memory matches {query!r}.")
        return
    stdout().print(_table([h.memory for h in result.hits], [h.score for h in result.hits]))


@memory_group.command("explain")
@click.argument("query")
@click.option("--limit", type=click.IntRange(1, 100), default=5, show_default=True)
@click.option("--scope", multiple=True, help="Search only this scope (repeatable).")
@click.option("--category", type=_CATEGORY)
@json_option
@click.pass_context
@run_command
async def explain_command(
    ctx: click.Context, query: str, limit: int, scope: tuple[str, ...], category: str | None, as_json: bool
) -> None:
    """Search for QUERY and show every candidate's score at each pipeline stage, and why others were dropped."""
    from rich.table import Table

    result = await _search(ctx, query, limit, scope, category, explain=True)
    if as_json:
        emit_json(result.to_dict())
        return
    rows = [(h.memory.memory_id, h.stages, f"#{rank}") for rank, h in enumerate(result.hits, 1)]
    for memory_id, stage, scores in result.dropped:
        # The score a cut-off compared: with normalized fusion, not the relative one the columns show.
        gate = result.gates.get(memory_id)
        rows.append((memory_id, scores, f"dropped: {stage}" + (f" ({gate[0]:.3f} < {gate[1]})" if gate else "")))
    seen = {name for _, scores, _ in rows for name, _ in scores}
    # the time and names stages show only when the query used them (a time named, a name held)
    every = ("fusion", "rerank", "recency", "time", "importance", "length", "time_decay", "names", "mmr")
    stages = [s for s in every if s not in ("time", "names") or s in seen]
    table = Table(show_edge=False, pad_edge=False, title=f"{query!r}")
    for name in ["id", *stages, "outcome"]:
        table.add_column(name, justify="left" if name in ("id", "outcome") else "right")
    for memory_id, scores, outcome in rows:
        values = dict(scores)
        table.add_row(memory_id[:12], *(f"{values[s]:.3f}" if s in values else "–" for s in stages), outcome)
    stdout().print(table)
    timings = ", ".join(f"{k} {v:.1f} ms" for k, v in result.timings_ms.items())
    stdout().print(styled((timings, "dim")))


@memory_group.command("list")
@click.option("--scope", multiple=True, help="Only this scope (repeatable).")
@click.option("--category", type=_CATEGORY)
@click.option("--history", is_flag=True, help="Include superseded memories.")
@click.option("--fact-key", help="Only memories about this fact (with --history: its versions).")
@click.option("--limit", type=click.IntRange(1, 100_000), default=50, show_default=True)
@click.option("--after", type=click.IntRange(0), default=0, help="Continue after this row number (paging).")
@json_option
@click.pass_context
@run_command
async def list_command(
    ctx: click.Context,
    scope: tuple[str, ...],
    category: str | None,
    history: bool,
    fact_key: str | None,
    limit: int,
    after: int,
    as_json: bool,
) -> None:
    """List memories in the order they were stored."""
    async with await _open(ctx) as session:
        page = await session.service.list(
            scopes=list(scope) or None,
            category=category,
            include_superseded=history,
            fact_key=fact_key,
            limit=limit,
            after=after,
        )
    if as_json:
        emit_json([{"row": row, **m.to_dict()} for row, m in page])
        return
    if not page:
        stdout().print("No memories.")
        return
    stdout().print(_table([m for _, m in page]))
    if len(page) == limit:
        stdout().print(styled((f"more: --after {page[-1][0]}", "dim")))


@memory_group.command("forget")
@click.argument("memory_id")
@json_option
@click.pass_context
@run_command
async def forget_command(ctx: click.Context, memory_id: str, as_json: bool) -> None:
    """Delete a memory (its id, or an unambiguous prefix of 8+ characters)."""
    async with await _open(ctx) as session:
        memory = await session.service.forget(memory_id)
    if as_json:
        emit_json({"forgotten": memory.memory_id})
    else:
        stdout().print(f"forgot {memory.memory_id}")


@memory_group.command("update")
@click.argument("memory_id")
@click.option("--text", help="New content (re-embedded).")
@click.option("--category", type=_CATEGORY)
@click.option("--importance", type=click.FloatRange(0, 1))
@click.option("--supersede", is_flag=True, help="Keep the old text as history and store --text as a new version.")
@json_option
@click.pass_context
@run_command
async def update_command(
    ctx: click.Context,
    memory_id: str,
    text: str | None,
    category: str | None,
    importance: float | None,
    supersede: bool,
    as_json: bool,
) -> None:
    """Change a memory in place (one transaction), or --supersede it with a new version."""
    from lossless.memory.records import MemoryDraft, MemoryPatch

    async with await _open(ctx) as session:
        if supersede:
            if text is None:
                raise InputError("--supersede needs --text, the new version")
            old = await session.service.get(memory_id)
            draft = MemoryDraft(
                text,
                category=category or old.category,  # type: ignore[arg-type]
                importance=importance if importance is not None else old.importance,
                temporal_type=old.temporal_type,
            )
            memory = await session.service.supersede(memory_id, draft)
        else:
            patch = MemoryPatch(content=text, category=category, importance=importance)  # type: ignore[arg-type]
            memory = await session.service.update(memory_id, patch)
    if as_json:
        emit_json(memory.to_dict())
    else:
        stdout().print(f"{'superseded by' if supersede else 'updated'} {memory.memory_id}")


@memory_group.command("export")
@click.argument("output", type=click.Path(dir_okay=False, path_type=Path, allow_dash=True), default="-")
@click.option("--scope", multiple=True, help="Only this scope (repeatable).")
@json_option
@click.pass_context
@run_command
async def export_command(ctx: click.Context, output: Path, scope: tuple[str, ...], as_json: bool) -> None:
    """Write every memory you reach (history included) as JSON Lines to OUTPUT (default: stdout)."""
    to_stdout = str(output) == "-"
    count = 0
    async with await _open(ctx) as session:  # the store first: a missing one leaves no empty OUTPUT behind
        try:
            handle = sys.stdout if to_stdout else output.open("w", encoding="utf-8")
        except OSError as exc:
            raise InputError(
                f"cannot write {str(output)!r}: {exc.strerror or exc}; name a file in a folder that exists "
                "and that you may write to, or - for stdout"
            ) from exc
        try:
            async for memory in session.service.export(scopes=list(scope) or None):
                handle.write(json.dumps(memory.to_dict(), ensure_ascii=False) + "\n")
                count += 1
        finally:
            if not to_stdout:
                handle.close()
    if to_stdout:
        return
    if as_json:
        emit_json({"exported": count, "path": str(output)})
    else:
        stdout().print(f"exported {count} memories to {output}")


@memory_group.command("import")
@click.argument("source", type=click.Path(dir_okay=False, path_type=Path, allow_dash=True))
@click.option("--batch", type=click.IntRange(1, 10_000), default=500, show_default=True)
@json_option
@click.pass_context
@run_command
async def import_command(ctx: click.Context, source: Path, batch: int, as_json: bool) -> None:
    """Read memories exported by `lcm memory export` (ids kept; ids already stored are skipped)."""
    import anyio.to_thread

    from lossless.memory.records import Memory

    try:
        if str(source) == "-":
            text = sys.stdin.read()
        else:
            text = await anyio.to_thread.run_sync(functools.partial(source.read_text, encoding="utf-8"))
    except OSError as exc:
        raise InputError(
            f"cannot read {str(source)!r}: {exc.strerror or exc}; give the file `lcm memory export` wrote, "
            "or - for stdin; nothing was imported"
        ) from exc
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{str(source)!r} is not UTF-8 text ({exc.reason} at byte {exc.start}): give the JSON Lines file "
            "`lcm memory export` wrote; nothing was imported"
        ) from exc
    memories: list[Memory] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data: Any = json.loads(line)
            if not isinstance(data, dict):
                raise InputError("not a JSON object")
            memories.append(Memory.from_dict(data))
        except (ValueError, TypeError) as exc:
            raise InputError(f"{source}:{number}: not a memory record: {exc}; nothing was imported") from exc
    added = 0
    async with await _open(ctx, create=True) as session:
        for start in range(0, len(memories), batch):
            added += await session.service.import_(memories[start : start + batch])
    if as_json:
        emit_json({"read": len(memories), "added": added})
    else:
        stdout().print(f"imported {added} of {len(memories)} memories ({len(memories) - added} already present)")


@memory_group.command("stats")
@json_option
@click.pass_context
@run_command
async def stats_command(ctx: click.Context, as_json: bool) -> None:
    """Counts of the memories you reach, by category, tier and scope; stale ones (memory_stale_threshold)."""
    async with await _open(ctx) as session:
        stats = await session.service.stats()
    if as_json:
        emit_json(stats.to_dict())
        return
    out = stdout()
    out.print(
        f"memories: {stats.current} current ({stats.stale} stale), {stats.superseded} superseded; "
        f"vectors: {stats.vectors}"
    )
    for title, counts in (("category", stats.by_category), ("tier", stats.by_tier), ("scope", stats.by_scope)):
        out.print(f"by {title}: " + (", ".join(f"{k} {v}" for k, v in counts.items()) or "–"))


@memory_group.command("maintain")
@json_option
@click.pass_context
@run_command
async def maintain_command(ctx: click.Context, as_json: bool) -> None:
    """Apply the decay tier rules to every memory you reach (they also run on each access)."""
    async with await _open(ctx) as session:
        moved = await session.service.maintain()
    if as_json:
        emit_json({"moved": moved})
    else:
        stdout().print(f"{len(moved)} memories changed tier" + "".join(f"\n  {k} → {v}" for k, v in moved.items()))


@memory_group.command("grant")
@click.argument("agent")
@click.argument("scopes", nargs=-1, required=True)
@json_option
@click.pass_context
@run_command
async def grant_command(ctx: click.Context, agent: str, scopes: tuple[str, ...], as_json: bool) -> None:
    """Let AGENT reach SCOPES (replaces its defaults: list every scope it should reach)."""
    from lossless.memory.scopes import MemoryCaller, check_scope

    MemoryCaller.agent(agent)
    checked = [check_scope(s) for s in scopes]
    async with await _open(ctx) as session:
        await session.service.store.grant(agent, checked, now=session.service.clock())
        reach = (await session.service.store.grants()).get(agent, [])
    if as_json:
        emit_json({"agent": agent, "grants": reach, "reaches": [*reach, f"reflection:agent:{agent}"]})
    else:
        stdout().print(f"{agent} reaches: {', '.join(reach)} (and reflection:agent:{agent})")


@memory_group.command("revoke")
@click.argument("agent")
@click.argument("scopes", nargs=-1, required=True)
@json_option
@click.pass_context
@run_command
async def revoke_command(ctx: click.Context, agent: str, scopes: tuple[str, ...], as_json: bool) -> None:
    """Withdraw grants; an agent left with none falls back to the default reach."""
    async with await _open(ctx) as session:
        removed = await session.service.store.revoke(agent, scopes)
    if as_json:
        emit_json({"agent": agent, "removed": removed})
    else:
        stdout().print(f"removed {removed} grant(s)")


@memory_group.command("extract")
@click.argument("conversation")
@json_option
@click.pass_context
@run_command
async def extract_command(ctx: click.Context, conversation: str, as_json: bool) -> None:
    """Mine CONVERSATION (its id or session id) for memories, with dedup decisions and provenance."""
    from rich.table import Table

    state: CliState = ctx.find_object(CliState)  # type: ignore[assignment]
    agent = state.config().agent_id
    async with await _open(ctx) as session:
        found = await session.store.find_conversation(agent_id=agent, session_id=conversation)
        if found is None and conversation.isdigit():
            found = await session.store.get_conversation(int(conversation))
            found = found if found is not None and found.agent_id == agent else None
        if found is None:
            raise NotFoundError("conversation", conversation, f"no conversation of agent {agent!r} has that id")
        decisions: list[dict[str, Any]] = []
        for message in await session.store.get_messages(found.id):
            if message.role != "user":
                continue
            outcome = await session.service.remember(found.id, [message])
            await session.service.store.claim_messages([message.id], session.service.clock())  # not mined again
            for draft, decision, touched in outcome.decisions:
                decisions.append(
                    {
                        "decision": decision.kind,
                        "memory_id": touched,
                        "category": draft.category,
                        "text": draft.content,
                        "reason": decision.reason,
                        "source_message_ids": list(draft.source_message_ids),
                    }
                )
    if as_json:
        emit_json(decisions)
        return
    if not decisions:
        stdout().print("Nothing worth remembering was found.")
        return
    table = Table(show_edge=False, pad_edge=False)
    for name in ("decision", "memory", "category", "text"):
        table.add_column(name, no_wrap=name != "text")
    for row in decisions:
        table.add_row(row["decision"], (row["memory_id"] or "")[:12], row["category"], _preview(row["text"], 70))
    stdout().print(table)
