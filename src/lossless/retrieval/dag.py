"""Describing and expanding nodes of the summary DAG.

Invariants:

* **Exact expansion.**  Expanding a summary walks its sources in order, depth
  first: a condensed node yields the summaries it was made from, a leaf (when
  ``include_messages``) the messages it covers.  Expanding with
  ``max_depth`` > the node's depth and no cap returns every message the node
  covers, in conversation order, and nothing else (a Hypothesis property).
* **The cap is exact.**  Items are added whole, in order, while the running
  total of their token counts stays within ``token_cap``; the first item that
  does not fit stops the walk and sets ``truncated``.  The total never exceeds
  the cap.
* Every item carries its id, so a caller can follow up on exactly what it got.
* No I/O beyond the :class:`~lossless.ports.Store` port.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from lossless.constants import DEFAULT_MAX_DEPTH, MAX_DEPTH
from lossless.errors import InputError
from lossless.ports import Store
from lossless.records import JSONValue, Summary, format_timestamp

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "ExpandResult",
    "ExpandedMessage",
    "ExpandedSummary",
    "SummaryDescription",
    "describe_summary",
    "expand",
]

MAX_TOKEN_CAP = 1_000_000
_FETCH = 200


@dataclass(frozen=True, slots=True)
class ExpandedSummary:
    id: str
    source_of: str
    kind: str
    depth: int
    content: str
    token_count: int

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "summary_id": self.id,
            "source_of": self.source_of,
            "kind": self.kind,
            "depth": self.depth,
            "token_count": self.token_count,
            "content": self.content,
        }


@dataclass(frozen=True, slots=True)
class ExpandedMessage:
    id: int
    summary_id: str | None
    conversation_id: int
    seq: int
    role: str
    created_at: datetime
    content: str
    token_count: int

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "message_id": self.id,
            "summary_id": self.summary_id,
            "conversation_id": self.conversation_id,
            "seq": self.seq,
            "role": self.role,
            "created_at": format_timestamp(self.created_at),
            "token_count": self.token_count,
            "content": self.content,
        }


@dataclass(frozen=True, slots=True)
class ExpandResult:
    """What an expansion returned, in walk order, its size, and whether the cap cut it short."""

    roots: tuple[str, ...]
    summaries: tuple[ExpandedSummary, ...] = ()
    messages: tuple[ExpandedMessage, ...] = ()
    estimated_tokens: int = 0
    truncated: bool = False
    token_cap: int | None = None
    note: str | None = None
    #: When the cap cut it short: the ids not returned (``sum_…``, ``msg#N``), highest level first —
    #: each one's own sources are left out of the list, since expanding it returns them.
    omitted: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "roots": list(self.roots),
            "summaries": [s.to_dict() for s in self.summaries],
            "messages": [m.to_dict() for m in self.messages],
            "estimated_tokens": self.estimated_tokens,
            "truncated": self.truncated,
            "token_cap": self.token_cap,
            "note": self.note,
            "omitted": list(self.omitted),
        }

    def render(self, advice: Callable[[str], str] = str) -> str:
        """The result as text; ``advice`` rewords what is said about it (not the stored text), e.g. for a CLI."""
        lines = [
            f"expanded {', '.join(self.roots) or '(nothing)'}: {len(self.summaries)} summaries, "
            f"{len(self.messages)} messages, ~{self.estimated_tokens:,} tokens"
            + (advice(f" (truncated at token_cap={self.token_cap:,})") if self.truncated else "")
        ]
        lines.extend(f"## [{s.id}] {s.kind}, depth {s.depth} (from {s.source_of})\n{s.content}" for s in self.summaries)
        for m in self.messages:
            stamp = format_timestamp(m.created_at)[:19].replace("T", " ")
            lines.append(f"## [msg#{m.id}] {m.role} · {stamp}\n{m.content}")
        if self.note:
            lines.append(advice(self.note))
        if self.omitted:
            lines.append(f"not returned ({len(self.omitted):,} ids): {compact_ids(self.omitted)}")
        return "\n\n".join(lines)


def compact_ids(ids: Sequence[str]) -> str:
    """Ids for reading: runs of consecutive message ids shortened to ``msg#3 … msg#9 (7 messages)``."""
    out: list[str] = []
    run: list[int] = []

    def close() -> None:
        if len(run) > 2:
            out.append(f"msg#{run[0]} … msg#{run[-1]} ({len(run)} messages)")
        else:
            out.extend(f"msg#{n}" for n in run)
        run.clear()

    for item in ids:
        number = int(item[4:]) if item.startswith("msg#") and item[4:].isdigit() else None
        if number is not None and run and number == run[-1] + 1:
            run.append(number)
            continue
        close()
        if number is not None:
            run.append(number)
        else:
            out.append(item)
    close()
    return ", ".join(out)


def validate_expand_options(max_depth: object, token_cap: object, include_messages: object) -> None:
    if type(max_depth) is not int or not 1 <= max_depth <= MAX_DEPTH:
        raise InputError(f"max_depth must be an integer from 1 to {MAX_DEPTH}, got {max_depth!r}")
    if token_cap is not None and (type(token_cap) is not int or not 1 <= token_cap <= MAX_TOKEN_CAP):
        raise InputError(f"token_cap must be an integer from 1 to {MAX_TOKEN_CAP:,}, got {token_cap!r}")
    if type(include_messages) is not bool:
        raise InputError(f"include_messages must be true or false, got {include_messages!r}")


async def _walk_order(
    store: Store, roots: Sequence[Summary], max_depth: int, include_messages: bool
) -> list[tuple[str, str, Summary | int]]:
    """The expansion in walk order: ``(kind, source_of, item)`` with summaries fetched, messages as ids."""
    known: dict[str, Summary] = {s.id: s for s in roots}
    parents: dict[str, tuple[str, ...]] = {}
    covered: dict[str, tuple[int, ...]] = {}
    frontier = list(roots)
    for _ in range(max_depth):
        condensed = [s.id for s in frontier if s.kind == "condensed"]
        leaves = [s.id for s in frontier if s.kind == "leaf"]
        if include_messages and leaves:
            covered.update(await store.get_summary_messages(leaves))
        if not condensed:
            break
        found = await store.get_summary_parents(condensed)
        parents.update(found)
        wanted = [p for ids in found.values() for p in ids if p not in known]
        fetched = await store.get_summaries(wanted)
        known.update({s.id: s for s in fetched})
        frontier = fetched
    order: list[tuple[str, str, Summary | int]] = []

    def visit(node: Summary, level: int) -> None:
        if level >= max_depth:
            return
        if node.kind == "leaf":
            order.extend(("message", node.id, mid) for mid in covered.get(node.id, ()))
            return
        for pid in parents.get(node.id, ()):
            child = known.get(pid)
            if child is None:
                continue
            order.append(("summary", node.id, child))
            visit(child, level + 1)

    for root in roots:
        visit(root, 0)
    return order


async def expand(
    store: Store,
    roots: Sequence[Summary],
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    token_cap: int | None = None,
    include_messages: bool = False,
) -> ExpandResult:
    """Expand ``roots`` (already checked against the caller's reach); see the module invariants."""
    validate_expand_options(max_depth, token_cap, include_messages)
    order = await _walk_order(store, roots, max_depth, include_messages)
    summaries: list[ExpandedSummary] = []
    messages: list[ExpandedMessage] = []
    total = 0
    truncated = False
    index = 0
    stop = len(order)
    while index < len(order) and not truncated:
        batch = order[index : index + _FETCH]
        index += len(batch)
        ids = [item for kind, _, item in batch if kind == "message"]
        fetched = {m.id: m for m in await store.get_messages_by_id(ids)} if ids else {}  # type: ignore[arg-type]
        for offset, (kind, source_of, item) in enumerate(batch):
            if kind == "summary":
                assert isinstance(item, Summary)
                cost = item.token_count
                if token_cap is not None and total + cost > token_cap:
                    truncated = True
                    stop = index - len(batch) + offset
                    break
                summaries.append(
                    ExpandedSummary(item.id, source_of, item.kind, item.depth, item.content, item.token_count)
                )
            else:
                record = fetched.get(item)  # type: ignore[arg-type]
                if record is None:
                    continue
                cost = record.token_count
                if token_cap is not None and total + cost > token_cap:
                    truncated = True
                    stop = index - len(batch) + offset
                    break
                messages.append(
                    ExpandedMessage(
                        record.id,
                        source_of,
                        record.conversation_id,
                        record.seq,
                        record.role,
                        record.created_at,
                        record.content,
                        record.token_count,
                    )
                )
            total += cost
    note = None
    omitted = _omitted(order[stop:]) if truncated else ()
    if truncated:
        note = (
            f"stopped at token_cap={token_cap:,}: {len(omitted):,} items were not returned (listed below); "
            "describe or expand them one at a time, or raise token_cap, to read the rest"
        )
    elif not include_messages and any(s.kind == "leaf" for s in roots) and not summaries:
        note = "leaf summaries expand to messages: pass include_messages=true"
    return ExpandResult(
        tuple(s.id for s in roots),
        tuple(summaries),
        tuple(messages),
        total,
        truncated,
        token_cap,
        note,
        omitted,
    )


def _omitted(rest: Sequence[tuple[str, str, Summary | int]]) -> tuple[str, ...]:
    """The ids of the walk items not returned, leaving out those whose summary is itself listed."""
    listed: set[str] = set()
    out: list[str] = []
    for kind, source_of, item in rest:
        ident = item.id if isinstance(item, Summary) else f"msg#{item}"
        if source_of in listed:  # expanding its summary returns it
            if kind == "summary":
                listed.add(ident)
            continue
        listed.add(ident)
        out.append(ident)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class SummaryDescription:
    """Everything about one summary short of expanding it."""

    summary: Summary
    parents: tuple[str, ...]
    children: tuple[str, ...]
    first_message_id: int | None
    last_message_id: int | None
    message_count: int
    token_cap: int | None = None

    @property
    def expand_tokens(self) -> int:
        """Tokens a full expansion (every summary below and every message) would return."""
        return self.summary.descendant_token_count + self.summary.source_token_count

    def to_dict(self) -> dict[str, JSONValue]:
        s = self.summary
        return {
            "type": "summary",
            "summary_id": s.id,
            "conversation_id": s.conversation_id,
            "kind": s.kind,
            "depth": s.depth,
            "token_count": s.token_count,
            "created_at": format_timestamp(s.created_at),
            "earliest_at": None if s.earliest_at is None else format_timestamp(s.earliest_at),
            "latest_at": None if s.latest_at is None else format_timestamp(s.latest_at),
            "descendant_count": s.descendant_count,
            "descendant_token_count": s.descendant_token_count,
            "source_token_count": s.source_token_count,
            "parents": list(self.parents),
            "children": list(self.children),
            "source_messages": {
                "first": self.first_message_id,
                "last": self.last_message_id,
                "count": self.message_count,
            },
            "file_ids": list(s.file_ids),
            "expand_tokens": self.expand_tokens,
            "token_cap": self.token_cap,
            "fits_token_cap": None if self.token_cap is None else self.expand_tokens <= self.token_cap,
            "content": s.content,
        }

    def render(self) -> str:
        d = self.to_dict()
        fit = ""
        if self.token_cap is not None:
            verdict = "fits within" if d["fits_token_cap"] else "exceeds"
            fit = f" ({verdict} token_cap={self.token_cap:,})"
        lines = [
            f"[{self.summary.id}] {self.summary.kind} summary, depth {self.summary.depth}, "
            f"conversation {self.summary.conversation_id}",
            f"time: {d['earliest_at']} … {d['latest_at']} (made {d['created_at']})",
            f"tokens: {self.summary.token_count:,} here; full expansion ~{self.expand_tokens:,}{fit}",
            f"descendants: {self.summary.descendant_count} summaries; source messages: {self.message_count} "
            + (f"(msg#{self.first_message_id} … msg#{self.last_message_id})" if self.message_count else ""),
            f"made from: {', '.join(self.parents) or '(messages)'}",
            f"condensed into: {', '.join(self.children) or '(nothing yet)'}",
        ]
        if self.summary.file_ids:
            lines.append(f"files: {', '.join(self.summary.file_ids)}")
        lines += ["", self.summary.content]
        return "\n".join(lines)


async def describe_summary(store: Store, summary: Summary, *, token_cap: int | None = None) -> SummaryDescription:
    """Lineage, source range and sizes of ``summary`` (already checked against the caller's reach)."""
    if token_cap is not None and (type(token_cap) is not int or not 1 <= token_cap <= MAX_TOKEN_CAP):
        raise InputError(f"token_cap must be an integer from 1 to {MAX_TOKEN_CAP:,}, got {token_cap!r}")
    parents = (await store.get_summary_parents([summary.id])).get(summary.id, ())
    children = (await store.get_summary_children([summary.id])).get(summary.id, ())
    # Walk down to the leaves for the message range (ids only; summaries are small and few).
    leaves: list[str] = []
    frontier = [summary.id] if summary.kind == "leaf" else list(parents)
    kinds = {summary.id: summary.kind}
    while frontier:
        fetched = await store.get_summaries([f for f in frontier if f not in kinds])
        kinds.update({s.id: s.kind for s in fetched})
        leaves += [f for f in frontier if kinds.get(f) == "leaf"]
        condensed = [f for f in frontier if kinds.get(f) == "condensed"]
        found = await store.get_summary_parents(condensed) if condensed else {}
        frontier = [p for c in condensed for p in found.get(c, ())]
    covered = await store.get_summary_messages(leaves) if leaves else {}
    ids = [m for leaf in leaves for m in covered.get(leaf, ())]
    return SummaryDescription(
        summary,
        parents,
        children,
        ids[0] if ids else None,
        ids[-1] if ids else None,
        len(ids),
        token_cap,
    )
