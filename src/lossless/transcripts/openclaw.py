"""OpenClaw session JSONL, version 3: a tree of entries; the conversation is the path to the newest one.

Format: a header ``{"type":"session","version":3,"id","timestamp",
"parentSession"?}``, then entries ``{"type", "id", "parentId", "timestamp", …}``.
``message`` entries hold a pi-shaped message; ``compaction`` entries hold a
host summary (``firstKeptEntryId``); other types (``custom``,
``model_change``, ``openclaw.session-meta`` …) are not conversation.  When a
user goes back and edits, new entries branch off an earlier one and the old
branch is abandoned: the active conversation is the path from the newest
entry back to the root (the *leaf path*).

Invariants:

* Only entries on the leaf path are yielded (abandoned branches are reported
  as skipped ``off-branch`` records), in path order; keys are entry ids.
* A full read needs the whole tree, so it holds the file's entries in memory.
* An incremental read (from a saved offset) continues only when the new
  entries hang off the last entry imported; if they branch off an earlier
  one, it raises :class:`NeedsFullRead` and the caller reads the whole file.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from lossless.records import JSONValue
from lossless.transcripts.base import (
    Entry,
    Event,
    JsonLine,
    NeedsFullRead,
    ReadContext,
    SessionInfo,
    Skipped,
    iter_jsonl,
    located,
    timestamp_or,
)
from lossless.transcripts.pi import pi_compaction, pi_message

__all__ = ["OpenClawReader"]


@dataclass(slots=True)
class _Node:
    item: JsonLine
    id: str
    parent: str | None


class OpenClawReader:
    """OpenClaw session files, version 3 (entry tree, leaf path)."""

    format = "openclaw"
    incremental = True

    def read(self, stream: IO[bytes], context: ReadContext) -> Iterator[Event]:
        nodes: list[_Node] = []
        others: list[JsonLine] = []
        for item in iter_jsonl(stream, context):
            record = item.value
            if record.get("type") == "session":
                meta: dict[str, JSONValue] = {
                    k: record[k] for k in ("version", "cwd", "parentSession") if record.get(k) is not None
                }
                parent = record.get("parentSession")
                yield SessionInfo(
                    session_id=record.get("id") if isinstance(record.get("id"), str) else None,
                    parent_session_id=parent if isinstance(parent, str) else None,
                    started_at=timestamp_or(record.get("timestamp"), None, path=context.path, line=item.line),
                    metadata=meta,
                )
                others.append(item)
            elif isinstance(record.get("id"), str):
                parent = record.get("parentId")
                nodes.append(_Node(item, record["id"], parent if isinstance(parent, str) else None))
            else:
                others.append(item)
        yield from self._emit(nodes, others, context)

    def _emit(self, nodes: list[_Node], others: list[JsonLine], context: ReadContext) -> Iterator[Event]:
        on_path = _leaf_path(nodes)
        if context.start_offset > 0 and nodes:
            root = on_path[0] if on_path else None
            if root is None or root.parent != context.last_entry_key:
                raise NeedsFullRead(f"{context.path}: new entries do not continue the imported branch")
        keep = {id(n) for n in on_path}
        events: list[tuple[int, Event]] = [
            (o.start_offset, Skipped(o.line, _kind(o.value), o.end_offset, size=len(o.raw))) for o in others
        ]
        events += [
            (n.item.start_offset, Skipped(n.item.line, "off-branch", n.item.end_offset, size=len(n.item.raw)))
            for n in nodes
            if id(n) not in keep
        ]
        last_time = context.fallback_time
        for node in on_path:
            record = node.item.value
            when = timestamp_or(record.get("timestamp"), last_time, path=context.path, line=node.item.line)
            last_time = when or last_time
            kind = record.get("type")
            if kind == "message":
                message = pi_message(
                    record.get("message"), when=when, key=node.id, path=context.path, line=node.item.line
                )
                events.append((node.item.start_offset, Entry(node.id, message, node.item.line, node.item.end_offset)))
            elif kind == "compaction":
                with located(context.path, node.item.line):
                    message = pi_compaction(record, when=when, key=node.id)
                events.append((node.item.start_offset, Entry(node.id, message, node.item.line, node.item.end_offset)))
            else:
                skipped = Skipped(
                    node.item.line, _kind(record), node.item.end_offset, key=node.id, size=len(node.item.raw)
                )
                events.append((node.item.start_offset, skipped))
        # Path order is file order for a linear file; for a branched one, entries of the path are still
        # appended in time order, so sorting by offset keeps the path's order and interleaves the skips.
        events.sort(key=lambda pair: pair[0])
        for _, event in events:
            yield event


def _kind(record: dict[str, Any]) -> str:
    return str(record.get("type"))


def _leaf_path(nodes: list[_Node]) -> list[_Node]:
    """The entries from the root to the newest entry, following ``parentId`` (cycles are cut)."""
    if not nodes:
        return []
    by_id = {n.id: n for n in nodes}
    path: list[_Node] = []
    seen: set[str] = set()
    node: _Node | None = nodes[-1]
    while node is not None and node.id not in seen:
        seen.add(node.id)
        path.append(node)
        node = by_id.get(node.parent) if node.parent is not None else None
    path.reverse()
    return path
