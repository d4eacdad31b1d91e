"""The web explorer's pages (``/ui``): conversations, a conversation with its context and summary DAG,
summaries, messages, search, compaction history, memories and stored files.

Invariants:

* **The API's identities and reach.**  Every page runs on the engine of the caller the HTTP API
  resolves (bearer token, or the explorer's session cookie holding one), so a page shows only what
  that agent's API calls may read; another agent's conversation, summary, message or file is a
  404 page, exactly as over the API.
* **Read-only.**  Pages are GETs that change nothing; the only POST is the sign-in, which takes a
  JSON body (like every state-changing route of ``lcm serve``).
* **Paged, never the whole history.**  A conversation shows one page of messages (``after``/``limit``),
  the context and DAG come from the context items and summaries, and lists are capped, so a page
  costs the same on a store of 1M messages as on a small one.
* Text is rendered by :mod:`.html`: verbatim, escaped, nothing loaded from another host.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio

from lossless.adapters.ui.html import chart, esc, highlight, page, qs, stamp, table
from lossless.engine import ContextEngine
from lossless.errors import InputError, LcmError, NotFoundError
from lossless.memory import decay
from lossless.records import FilePart, MessageRecord, Summary, ToolPart, utcnow
from lossless.replay import split_turns

__all__ = ["PAGES", "Page"]

#: (engine, query params, path params) -> (title, body HTML, active nav link)
Page = Callable[[ContextEngine, Mapping[str, str], Mapping[str, str]], Awaitable[tuple[str, str, str]]]

PAGE_SIZE = 100
SUM_TOKENS_UP_TO = 50_000
MAX_SOURCES = 500
REPLAY_MAX = 2_000
MAX_TEXT = 4_000
BUDGETS = (8_000, 16_000, 32_000, 128_000)


def _int(params: Mapping[str, str], name: str, default: int, *, low: int = 0, high: int = 10**12) -> int:
    raw = params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise InputError(f"{name} must be a whole number, got {raw!r}") from exc
    if not low <= value <= high:
        raise InputError(f"{name} must be from {low:,} to {high:,}, got {value:,}")
    return value


def _clip(text: str, limit: int = MAX_TEXT) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit], True)


# ---------------------------------------------------------------------- conversations


async def conversations_page(
    engine: ContextEngine, params: Mapping[str, str], _: Mapping[str, str]
) -> tuple[str, str, str]:
    offset = _int(params, "offset", 0)
    wanted = (params.get("q") or "").strip().lower()
    sort = params.get("sort") or "updated"
    if sort not in ("updated", "messages", "tokens", "title"):
        raise InputError(f"sort must be updated, messages, tokens or title, got {sort!r}")
    found = await engine.conversations(limit=PAGE_SIZE, offset=offset)
    if wanted:
        found = [c for c in found if wanted in f"{c.title or ''} {c.session_id} {c.agent_id}".lower()]
    # A message count is the newest seq (one index probe); a token total is a sum over the rows, so it is
    # taken only for conversations small enough to sum quickly: the page costs the same at any size.
    counts = {}
    for c in found:
        newest = await engine.messages(c.id, tail=1)
        counts[c.id] = newest[0].seq if newest else 0
    summed = [c.id for c in found if counts[c.id] <= SUM_TOKENS_UP_TO]
    sizes = await engine.conversation_sizes([c for c in found if c.id in summed]) if summed else {}
    rows = []
    for c in found:
        count, tokens = counts[c.id], sizes.get(c.id, (0, -1))[1]
        events = await engine.compaction_events(c.id, limit=1)
        state = "never compacted" if not events else f"compacted {stamp(events[0].created_at)}"
        rows.append((c, count, tokens, state))
    key = {
        "updated": lambda r: r[0].updated_at,
        "messages": lambda r: r[1],
        "tokens": lambda r: r[2],
        "title": lambda r: (r[0].title or r[0].session_id).lower(),
    }[sort]
    rows.sort(key=key, reverse=sort != "title")
    cells = [
        (
            f'<a href="/ui/c/{c.id}">{esc(c.title or c.session_id)}</a><br><small>{esc(c.session_id)}</small>',
            esc(c.agent_id),
            f"{count:,}",
            f"{tokens:,}" if tokens >= 0 else f'<span title="not summed above {SUM_TOKENS_UP_TO:,} messages">—</span>',
            esc(stamp(c.updated_at)),
            esc(state + ("" if c.active else " · archived")),
        )
        for c, count, tokens, state in rows
    ]
    sorts = " ".join(
        f'<a href="/ui/{qs(q=params.get("q"), sort=s)}"{" aria-current=true" if s == sort else ""}>{s}</a>'
        for s in ("updated", "messages", "tokens", "title")
    )
    form = (
        '<form class="filters" method="get" action="/ui/" role="search">'
        f'<label>Filter <input name="q" value="{esc(params.get("q") or "")}" placeholder="title or session"></label>'
        f'<input type="hidden" name="sort" value="{esc(sort)}"><button>Filter</button></form>'
        f'<p class="sorts">Sort by: {sorts}</p>'
    )
    more = (
        f'<p><a rel="next" href="/ui/{qs(q=params.get("q"), sort=sort, offset=offset + PAGE_SIZE)}">Older →</a></p>'
        if len(found) == PAGE_SIZE
        else ""
    )
    headers = ("Conversation", "Agent", "Messages", "Tokens", "Last activity", "Compaction")
    return "Conversations", form + table(headers, cells, empty="No conversations yet.") + more, "/ui/"


# ---------------------------------------------------------------------- one conversation


def _message_html(record: MessageRecord, *, in_context: bool, excerpt: bool = True) -> str:
    text, cut = _clip(record.content) if excerpt else (record.content, False)
    tools = []
    for part in record.parts:
        if isinstance(part, ToolPart) and part.is_call and part.input is not None:
            tools.append(
                f'<p class="tool">→ call <code>{esc(part.name or "tool")}</code> {esc(part.call_id or "")}</p>'
            )
        if isinstance(part, ToolPart) and part.is_result:
            tools.append(f'<p class="tool">← result of {esc(part.call_id or "a call")}</p>')
        if isinstance(part, FilePart) and part.url:
            tools.append(f'<p class="tool">file {esc(part.name or part.url[:80])}</p>')
    files = sorted({w for w in record.content.split() if w.startswith("file_")})
    file_links = "".join(f' <a href="/ui/f/{esc(f.strip(".,;:)]"))}">{esc(f.strip(".,;:)]"))}</a>' for f in files[:10])
    more = f' <a href="/ui/m/{record.id}">show all {len(record.content):,} characters</a>' if cut else ""
    mark = ' class="msg in-context"' if in_context else ' class="msg"'
    badge = '<span class="badge">in context</span>' if in_context else ""
    return (
        f'<article{mark} id="m{record.id}" tabindex="-1">'
        f'<header><span class="role role-{esc(record.role)}">{esc(record.role)}</span> '
        f'<a href="/ui/m/{record.id}">msg#{record.id}</a> · seq {record.seq} · {esc(stamp(record.created_at))} · '
        f"{record.token_count:,} tokens {badge}{file_links}</header>"
        f'{"".join(tools)}<pre class="text">{esc(text)}{"…" if cut else ""}</pre>{more}</article>'
    )


async def _dag(engine: ContextEngine, roots: Sequence[str], levels: int = 3) -> str:
    """The summary DAG from what is in the context down ``levels`` levels, as a nested, keyboard-navigable
    tree (each node links to its page, which goes on down).  Reads only those nodes: flat in history size."""
    if not roots:
        return '<p class="empty">No summaries in the context: nothing has been compacted yet.</p>'
    nodes: dict[str, Summary] = {}
    sources: dict[str, tuple[str, ...]] = {}
    wanted = list(roots)
    for _ in range(levels):
        fresh = [i for i in wanted if i not in nodes]
        if not fresh:
            break
        nodes.update((x.id, x) for x in await engine.summaries_by_id(fresh))
        found = await engine.summary_sources([i for i in fresh if nodes.get(i) and nodes[i].depth > 0])
        sources.update(found)
        wanted = [c for i in fresh for c in found.get(i, ())]

    def node(summary_id: str, in_context: bool) -> str:
        summary = nodes.get(summary_id)
        if summary is None:
            return f'<li><a href="/ui/s/{esc(summary_id)}">{esc(summary_id)}</a> <span>(deeper: open it)</span></li>'
        span = f"{stamp(summary.earliest_at)} – {stamp(summary.latest_at)}"
        label = (
            f'<a href="/ui/s/{esc(summary.id)}">{esc(summary.id)}</a> '
            f"<span>depth {summary.depth} · {esc(span)} · {summary.token_count:,} tokens · {esc(summary.level)}</span>"
            + (' <span class="badge">in context</span>' if in_context else "")
        )
        children = sources.get(summary_id, ())
        if summary.depth == 0 or not children:
            count = f"{summary.descendant_count:,} summaries below" if summary.depth else "leaf over messages"
            return f"<li>{label} <small>({count})</small></li>"
        inner = "".join(node(c, False) for c in children)
        return f"<li><details{' open' if in_context else ''}><summary>{label}</summary><ul>{inner}</ul></details></li>"

    return '<ul class="dag">' + "".join(node(r, True) for r in roots) + "</ul>"


async def _covering(engine: ContextEngine, record: MessageRecord, roots: Sequence[str]) -> list[str]:
    """The chain of summaries (leaf first) that covers ``record``, found by descending from the context's
    summaries by time range: one batched read per level, not the conversation's whole DAG."""
    when = record.created_at
    level = list(roots)
    path: list[str] = []
    while level:
        found = await engine.summaries_by_id(level)
        spans = [x for x in found if (x.earliest_at or x.created_at) <= when <= (x.latest_at or x.created_at)]
        leaves = [x.id for x in spans if x.depth == 0]
        if leaves:
            covered = await engine.summary_messages(leaves)
            hit = next((leaf for leaf in leaves if record.id in covered.get(leaf, ())), None)
            if hit is not None:
                return [hit, *reversed(path)]
        condensed = [x for x in spans if x.depth > 0]
        if not condensed:
            return []
        parents = await engine.summary_sources([x.id for x in condensed])
        path.append(condensed[0].id)  # the chain shows one route; ties share their messages' time
        level = [c for x in condensed for c in parents.get(x.id, ())]
    return []


async def conversation_page(
    engine: ContextEngine, params: Mapping[str, str], path: Mapping[str, str]
) -> tuple[str, str, str]:
    conv = await engine.conversation(path["conversation"])
    budget = _int(params, "budget", 32_000, low=1, high=10_000_000)
    context = await engine.assemble(conv.session_id, token_budget=budget)
    included = set(context.included)
    if params.get("after") in (None, ""):  # the newest page by default: where the context is
        records = await engine.messages(conv.id, tail=PAGE_SIZE)
        after = records[0].seq - 1 if records else 0
    else:
        after = _int(params, "after", 0)
        records = await engine.messages(conv.id, after_seq=after, limit=PAGE_SIZE)
    timeline = "".join(_message_html(r, in_context=r.id in included) for r in records)
    nav = []
    if after:
        nav.append(f'<a href="/ui/c/{conv.id}{qs(budget=budget, after=max(0, after - PAGE_SIZE))}">← earlier</a>')
    if len(records) == PAGE_SIZE:
        nav.append(f'<a rel="next" href="/ui/c/{conv.id}{qs(budget=budget, after=records[-1].seq)}">later →</a>')
    budgets = " ".join(
        f'<a href="/ui/c/{conv.id}{qs(budget=b, after=after)}"{" aria-current=true" if b == budget else ""}>{b:,}</a>'
        for b in BUDGETS
    )
    left_out = len(context.dropped)
    summary_line = (
        f"<p>At a budget of {budget:,} tokens the model gets <strong>{context.estimated_tokens:,} tokens</strong>: "
        f"{context.summaries_included} summaries and {len(included) - context.summaries_included} raw messages"
        + (f"; {left_out} items left out" if left_out else "")
        + f". Budget: {budgets}</p>"
    )
    head = (
        f"<p>{esc(conv.session_id)} · agent {esc(conv.agent_id)} · started {esc(stamp(conv.created_at))} · "
        f'<a href="/ui/c/{conv.id}/compactions">compaction history</a> · '
        f'<a href="/ui/c/{conv.id}/replay">replay it turn by turn</a> · '
        f'<a href="/ui/search{qs(conversation=conv.id)}">search this conversation</a></p>'
    )
    body = (
        head
        + '<section aria-labelledby="ctx"><h2 id="ctx">What the model gets now</h2>'
        + summary_line
        + "</section>"
        + '<section aria-labelledby="dag"><h2 id="dag">Summary DAG</h2>'
        + await _dag(engine, [i for i in context.included if isinstance(i, str)])
        + "</section>"
        + f'<section aria-labelledby="tl"><h2 id="tl">Messages (after seq {after:,})</h2>'
        + (timeline or '<p class="empty">No messages here.</p>')
        + f'<p class="pager">{" · ".join(nav)}</p></section>'
    )
    return conv.title or conv.session_id, body, ""


async def summary_page(
    engine: ContextEngine, params: Mapping[str, str], path: Mapping[str, str]
) -> tuple[str, str, str]:
    found = await engine.summaries_by_id([path["summary"]])
    if not found:
        raise NotFoundError("summary", path["summary"], "open summaries from a conversation's DAG")
    s = found[0]
    await engine.conversation(s.conversation_id)  # another agent's summary: not found
    # Its own sources only (one level): reads as many rows as it has sources, at any history size.
    sources = []
    if s.depth > 0:
        ids = (await engine.summary_sources([s.id])).get(s.id, ())
        by_id = {x.id: x for x in await engine.summaries_by_id(list(ids))}
        for sid in ids:
            text = esc(_clip(by_id[sid].content, 300)[0]) if sid in by_id else ""
            sources.append(f'<li><a href="/ui/s/{esc(sid)}">{esc(sid)}</a> {text}</li>')
    else:
        message_ids = (await engine.summary_messages([s.id])).get(s.id, ())
        records = {m.id: m for m in await engine.messages_by_id(list(message_ids[:MAX_SOURCES]))}
        for mid in message_ids[:MAX_SOURCES]:
            record = records.get(mid)
            text = esc(_clip(record.content, 300)[0]) if record else ""
            role = esc(record.role) if record else ""
            sources.append(f'<li><a href="/ui/m/{mid}">msg#{mid}</a> <span class="role">{role}</span> {text}</li>')
    children = (await engine.condensed_into([s.id])).get(s.id, ())
    parents = "".join(f'<a href="/ui/s/{esc(p)}">{esc(p)}</a> ' for p in children)
    meta = (
        f"<p>{esc(s.kind)} · depth {s.depth} · {s.token_count:,} tokens · {esc(stamp(s.earliest_at))} – "
        f"{esc(stamp(s.latest_at))} · made by {esc(s.provider or '?')} {esc(s.model or '')} at level "
        f'{esc(s.level)} · in <a href="/ui/c/{s.conversation_id}">conversation {s.conversation_id}</a></p>'
        + (f"<p>Condensed into: {parents}</p>" if parents else "")
        + (
            "<p>Files: " + " ".join(f'<a href="/ui/f/{esc(f)}">{esc(f)}</a>' for f in s.file_ids) + "</p>"
            if s.file_ids
            else ""
        )
    )
    note = f"<p class=note>The first {MAX_SOURCES:,} shown.</p>" if len(sources) >= MAX_SOURCES else ""
    body = (
        meta
        + f'<pre class="text summary">{esc(s.content)}</pre>'
        + f'<h2>Made from</h2>{note}<ol class="sources">{"".join(sources)}</ol>'
    )
    return s.id, body, ""


async def message_page(
    engine: ContextEngine, params: Mapping[str, str], path: Mapping[str, str]
) -> tuple[str, str, str]:
    message_id = _int(path, "message", 0, low=1, high=2**63 - 1)
    (record,) = await engine.messages_by_id([message_id]) or (None,)
    if record is None:
        raise NotFoundError("message", message_id, "open messages from a conversation's page")
    conv = await engine.conversation(record.conversation_id)  # another agent's message: not found
    entries = await engine.context(conv.id)
    chain = await _covering(engine, record, [e.summary_id for e in entries if e.summary_id is not None])
    links = " → ".join(f'<a href="/ui/s/{esc(i)}">{esc(i)}</a>' for i in chain)
    raw = any(e.message_id == record.id for e in entries)
    covered = (
        f"<p>Covered by: {links}</p>"
        if chain
        else "<p>Not summarised: it is raw in the context.</p>"
        if raw
        else "<p>Not in this conversation's context (a shared or restarted context holds it).</p>"
    )
    back = f'<p><a href="/ui/c/{conv.id}{qs(after=max(0, record.seq - 1))}#m{record.id}">in its conversation</a></p>'
    return f"msg#{record.id}", back + covered + _message_html(record, in_context=False, excerpt=False), ""


# ---------------------------------------------------------------------- search


async def search_page(engine: ContextEngine, params: Mapping[str, str], _: Mapping[str, str]) -> tuple[str, str, str]:
    pattern = params.get("q") or ""
    mode = params.get("mode") or "full_text"
    scope = params.get("scope") or "both"
    conversation = params.get("conversation") or None
    limit = _int(params, "limit", 50, low=1, high=200)

    def option(name: str, value: str, current: str) -> str:
        return f'<option value="{value}"{" selected" if value == current else ""}>{value}</option>'

    form = (
        '<form class="filters" method="get" action="/ui/search" role="search">'
        f'<label>Search <input name="q" value="{esc(pattern)}" autofocus required></label>'
        '<label>Mode <select name="mode">'
        + "".join(option("mode", m, mode) for m in ("full_text", "regex", "semantic", "hybrid"))
        + '</select></label><label>Scope <select name="scope">'
        + "".join(option("scope", s, scope) for s in ("both", "messages", "summaries", "files"))
        + "</select></label>"
        f'<label>Conversation <input name="conversation" value="{esc(conversation or "")}" size="8"></label>'
        f'<label>Since <input name="since" type="date" value="{esc(params.get("since") or "")}"></label>'
        f'<label>Before <input name="before" type="date" value="{esc(params.get("before") or "")}"></label>'
        "<button>Search</button></form>"
    )
    if not pattern:
        return "Search", form, "/ui/search"
    if mode not in ("full_text", "regex", "semantic", "hybrid") or scope not in (
        "both",
        "messages",
        "summaries",
        "files",
    ):
        raise InputError("mode must be full_text, regex, semantic or hybrid; scope both, messages, summaries or files")
    result = await engine.grep(
        pattern,
        mode=mode,  # type: ignore[arg-type]
        scope=scope,  # type: ignore[arg-type]
        conversation=conversation,
        since=params.get("since") or None,
        before=params.get("before") or None,
        limit=limit,
        sort="relevance" if mode != "regex" else "recency",
    )
    terms = [pattern] if mode == "regex" else [w for w in pattern.split() if len(w) > 2]
    rows = []
    for hit in result.hits:
        if hit.scope == "messages":
            where = f'<a href="/ui/m/{hit.ref}">msg#{hit.ref}</a>'
        elif hit.scope == "summaries":
            where = f'<a href="/ui/s/{esc(hit.ref)}">{esc(hit.ref)}</a>'
        else:
            where = f'<a href="/ui/f/{esc(hit.ref)}{qs(start=hit.line)}">{esc(hit.name or hit.ref)}:{hit.line}</a>'
        rows.append(
            (
                where,
                f'<a href="/ui/c/{hit.conversation_id}">{hit.conversation_id}</a>',
                esc(stamp(hit.created_at)),
                esc(hit.role or hit.kind or ""),
                f'<span class="snippet">{highlight(hit.snippet, terms)}</span>',
            )
        )
    notes = "".join(
        f"<p class=note>{esc(n)}</p>" for n in (*result.notes, *([result.message] if result.message else []))
    )
    plural = "es" if len(result.hits) != 1 else ""
    count = f"<p>{len(result.hits)} match{plural}{' (more exist)' if result.more else ''}</p>"
    body = form + count + notes + table(("Hit", "Conversation", "When", "Role", "Snippet"), rows, empty="No matches.")
    return "Search", body, "/ui/search"


# ---------------------------------------------------------------------- compaction history


async def compactions_page(
    engine: ContextEngine, params: Mapping[str, str], path: Mapping[str, str]
) -> tuple[str, str, str]:
    conv = await engine.conversation(path["conversation"])
    events = sorted(await engine.compaction_events(conv.id, limit=500), key=lambda e: (e.created_at, e.event_id or 0))
    points = [(stamp(e.created_at), e.tokens_before, e.tokens_after) for e in events]
    rows = [
        (
            esc(stamp(e.created_at)),
            esc(e.trigger),
            esc(e.mode),
            f"{e.source_items:,}",
            f"{e.tokens_before:,} → {e.tokens_after:,}",
            f"{e.elapsed_ms:,} ms",
            f'<a href="/ui/s/{esc(e.summary_id)}">{esc(e.summary_id)}</a>',
        )
        for e in reversed(events)
    ]
    body = (
        f'<p><a href="/ui/c/{conv.id}">← {esc(conv.title or conv.session_id)}</a></p>'
        + chart(points, title=f"Context tokens before and after each of {len(points)} compaction passes")
        + table(("When", "Trigger", "Mode", "Items", "Tokens", "Took", "Summary"), rows, empty="No compaction yet.")
    )
    return f"Compaction history · {conv.title or conv.session_id}", body, ""


async def replay_page(
    engine: ContextEngine, params: Mapping[str, str], path: Mapping[str, str]
) -> tuple[str, str, str]:
    """The conversation played again turn by turn into a scratch store, as ``lcm replay`` plays a transcript:
    what the model would have been sent each turn against the budget.  Nothing is written to this store."""
    conv = await engine.conversation(path["conversation"])
    budget = _int(params, "budget", 16_000, low=1_000, high=1_000_000)
    records = await engine.messages(conv.id, limit=REPLAY_MAX + 1)
    if len(records) > REPLAY_MAX:
        raise InputError(
            f"the explorer replays conversations of up to {REPLAY_MAX:,} messages; for a longer one, replay its "
            "transcript with `lcm replay TRANSCRIPT --budget N` into a scratch database"
        )
    turns = list(split_turns([r.to_message() for r in records]))
    points: list[tuple[str, int, int]] = []
    rows = []
    stored = 0
    async with anyio.TemporaryDirectory() as scratch:
        # Offline summarizer, no memory extraction, files and rows in the scratch folder: a replay costs
        # nothing and leaves nothing behind.
        config = engine.config.replace(
            database_url=f"sqlite:///{scratch}/replay.db",
            data_dir=scratch,
            summary_provider="",
            memory_auto_extract=False,
        )
        async with await ContextEngine.open(config=config) as replayer:
            for number, turn in enumerate(turns, 1):
                done = await replayer.after_turn("replay", turn, token_budget=budget)
                stored += sum(m.token_count for m in done.ingest.stored)
                context = await replayer.assemble("replay", token_budget=budget)
                points.append((f"turn {number}", stored, context.estimated_tokens))
                compacted = "yes" if done.compaction is not None and done.compaction.compacted else ""
                over = context.estimated_tokens > budget
                rows.append(
                    (
                        str(number),
                        f"{stored:,}",
                        f"{context.estimated_tokens:,}" + (" <strong>OVER</strong>" if over else ""),
                        f"{context.summaries_included:,}",
                        f"{len(context.left_out):,}",
                        compacted,
                    )
                )
    budgets = " ".join(
        f'<a href="/ui/c/{conv.id}/replay{qs(budget=b)}"{" aria-current=true" if b == budget else ""}>{b:,}</a>'
        for b in BUDGETS
    )
    over_turns = sum(1 for _, _, sent in points if sent > budget)
    body = (
        f'<p><a href="/ui/c/{conv.id}">← {esc(conv.title or conv.session_id)}</a></p>'
        f"<p>{len(turns):,} turns replayed into a scratch store at a budget of {budget:,} tokens: "
        f"{over_turns} turn{'s' if over_turns != 1 else ''} over budget. Budget: {budgets}</p>"
        + chart(
            points,
            title=f"Tokens sent per turn at a {budget:,}-token budget",
            budget=budget,
            legend="pale: history stored so far, strong: tokens sent to the model",
        )
        + table(("Turn", "Stored", "Sent", "Summaries sent", "Left out", "Compacted"), rows)
    )
    return f"Replay · {conv.title or conv.session_id}", body, ""


# ---------------------------------------------------------------------- memories


async def memories_page(engine: ContextEngine, params: Mapping[str, str], _: Mapping[str, str]) -> tuple[str, str, str]:
    memory = engine.memory()
    query = (params.get("q") or "").strip()
    now = utcnow()
    form = (
        '<form class="filters" method="get" action="/ui/memories" role="search">'
        f'<label>Search memories <input name="q" value="{esc(query)}"></label><button>Search</button></form>'
    )
    found: list[tuple[Any, float | None, dict[str, float]]]
    if query:
        result = await memory.search(query, limit=25, explain=True, record_access=False)
        found = [(h.memory, h.score, dict(h.stages)) for h in result.hits]
    else:
        found = [(m, None, {}) for _, m in await memory.list(limit=100)]
    rows = []
    for m, score, stages in found:
        d = decay.score(m, now)
        history = ""
        if m.fact_key:
            versions = await memory.list(fact_key=m.fact_key, include_superseded=True, limit=20)
            old = [v for _, v in versions if v.memory_id != m.memory_id]
            if old:
                history = (
                    "<details><summary>history</summary><ul>"
                    + "".join(f"<li>{esc(stamp(v.created_at))}: {esc(v.content)}</li>" for v in old)
                    + "</ul></details>"
                )
        sources = " ".join(f'<a href="/ui/m/{i}">msg#{i}</a>' for i in m.source_message_ids[:8])
        why = " · ".join(f"{esc(k)} {v:.3f}" for k, v in stages.items())
        rows.append(
            (
                f"{esc(m.content)}{history}",
                esc(m.category),
                esc(m.tier),
                f"{d.composite:.2f}",
                (f"{score:.3f}<br><small>{why}</small>" if score is not None else ""),
                sources or "<small>manual</small>",
            )
        )
    body = form + table(("Memory", "Category", "Tier", "Decay", "Score (explain)", "From"), rows, empty="No memories.")
    return "Memories", body, "/ui/memories"


# ---------------------------------------------------------------------- stored files


async def file_page(engine: ContextEngine, params: Mapping[str, str], path: Mapping[str, str]) -> tuple[str, str, str]:
    start = _int(params, "start", 1, low=1)
    described = await engine.describe_file(path["file"], start_line=start, end_line=start + 199)
    f, p = described.file, described.page
    meta = (
        f"<p>{esc(f.name or '(unnamed)')} · {esc(f.mime or 'unknown type')} · {f.byte_size or 0:,} bytes · "
        f'{esc(f.origin or "")} · in <a href="/ui/c/{f.conversation_id}">conversation {f.conversation_id}</a> · '
        f"stored {esc(stamp(f.created_at))}</p>"
    )
    explored = (
        f"<h2>Exploration summary</h2><pre class=text>{esc(f.exploration_summary)}</pre>"
        if f.exploration_summary
        else ""
    )
    if p.text is None:
        content = "<p>Binary content: read its bytes with <code>lcm file</code>.</p>"
    else:
        lines = p.text.split("\n")
        numbered = "".join(
            f'<tr><th scope="row">{p.start_line + i}</th><td><pre>{esc(line)}</pre></td></tr>'
            for i, line in enumerate(lines)
        )
        pager = []
        if p.start_line > 1:
            pager.append(f'<a href="/ui/f/{esc(f.id)}{qs(start=max(1, p.start_line - 200))}">← earlier lines</a>')
        if p.next_start_line is not None:
            pager.append(f'<a rel="next" href="/ui/f/{esc(f.id)}{qs(start=p.next_start_line)}">later lines →</a>')
        content = (
            f"<h2>Lines {p.start_line:,}–{p.end_line:,} of {p.total_lines:,}</h2>"
            f'<div class="scroll"><table class="lines">{numbered}</table></div><p class="pager">{" · ".join(pager)}</p>'
        )
    return f.name or f.id, meta + explored + content, ""


PAGES: dict[str, Page] = {
    "/ui/": conversations_page,
    "/ui/c/{conversation}": conversation_page,
    "/ui/c/{conversation}/compactions": compactions_page,
    "/ui/c/{conversation}/replay": replay_page,
    "/ui/s/{summary}": summary_page,
    "/ui/m/{message}": message_page,
    "/ui/search": search_page,
    "/ui/memories": memories_page,
    "/ui/f/{file}": file_page,
}


async def render(
    page_fn: Page, engine: ContextEngine, params: Mapping[str, str], path: Mapping[str, str]
) -> tuple[int, str]:
    """``(status, html)`` of a page; an error becomes a page that says what was wrong (never a traceback)."""
    try:
        title, body, active = await page_fn(engine, params, path)
        return 200, page(title, body, active=active, agent=engine.config.agent_id)
    except NotFoundError as exc:
        return 404, page("Not found", f"<p>{esc(exc)}</p>", agent=engine.config.agent_id)
    except InputError as exc:
        return 400, page("Not understood", f"<p>{esc(exc)}</p>", agent=engine.config.agent_id)
    except LcmError as exc:
        return 500, page("Could not show this page", f"<p>{esc(exc)}</p>", agent=engine.config.agent_id)
