"""Segments: how a run of messages or summaries is written out for a summarizer, and read back.

Invariants:

* One format for both directions.  Every item starts with a header line
  ``=== msg#<id> · <local time> · <role>[ · result of <tool>] ===`` or
  ``=== sum_<id> · depth <d> · <from> → <to> ===`` and its text follows
  until the next header.  :func:`parse_segment` inverts :func:`render_messages`
  and :func:`render_summaries` (up to the per-item length cap) for text whose
  items hold no header-like line of their own; summarizers never need it: the
  compactor hands them the same items structured (:func:`message_items`,
  :func:`summary_items`, :class:`~lossless.ports.SegmentItem`), and the text is
  :func:`render_items` of those items.
* Times are shown in the configured time zone, to the minute, with the zone's
  abbreviation; storage stays UTC.
* A very long item (a huge tool output) is cut to ``max_chars`` with a note of
  how much was left out — its id is in the header, so the full text stays one
  expansion away.
* Pure: no I/O, no store access.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime, tzinfo

from lossless.ports import SegmentItem
from lossless.records import MessageRecord, Role, Summary, ToolPart

__all__ = [
    "SegmentItem",
    "format_time",
    "message_items",
    "parse_segment",
    "render_items",
    "render_messages",
    "render_summaries",
    "summary_items",
]

_HEADER = re.compile(
    r"^=== (?:msg#(?P<message>\d+) · (?P<at>[^·]+?) · (?P<role>system|user|assistant|tool)"
    r"(?: · result of (?P<tool>[^=]+?))?"
    r"|(?P<summary>sum_[0-9a-f]+) · depth (?P<depth>\d+) · (?P<span>[^=]+?)) ===$",
    re.M,
)


def format_time(value: datetime | None, zone: tzinfo) -> str:
    """``2026-02-07 10:13 CET``: minutes, in ``zone``, with its abbreviation."""
    if value is None:
        return "unknown time"
    local = value.astimezone(zone)
    return f"{local:%Y-%m-%d %H:%M} {local.tzname() or ''}".rstrip()


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    head = max_chars * 3 // 4
    tail = max_chars - head
    left_out = len(text) - head - tail
    return f"{text[:head]}\n[… {left_out:,} characters left out here …]\n{text[-tail:]}"


def message_items(
    messages: Iterable[MessageRecord], zone: tzinfo, *, max_chars: int = 48_000
) -> tuple[SegmentItem, ...]:
    """Raw messages as the items of a leaf segment.  A tool result names the tool, found from its call."""
    names: dict[str, str] = {}
    items: list[SegmentItem] = []
    for m in messages:
        answered: list[str] = []
        for part in m.parts:
            if isinstance(part, ToolPart) and part.call_id:
                if part.is_call and part.name:
                    names[part.call_id] = part.name
                if part.is_result:
                    answered.append(part.name or names.get(part.call_id, ""))
        tool = ", ".join(n for n in answered if n) or None
        items.append(
            SegmentItem(
                f"msg#{m.id}",
                _cut(m.content, max_chars),
                role=m.role,
                at=format_time(m.created_at, zone),
                tool=tool,
                time=m.created_at,
                parts=m.parts,
            )
        )
    return tuple(items)


def summary_span(summary: Summary, zone: tzinfo) -> str:
    return f"{format_time(summary.earliest_at, zone)} → {format_time(summary.latest_at, zone)}"


def summary_items(summaries: Iterable[Summary], zone: tzinfo, *, max_chars: int = 48_000) -> tuple[SegmentItem, ...]:
    """Summaries one level down as the items of a condensed segment."""
    return tuple(
        SegmentItem(s.id, _cut(s.content, max_chars), depth=s.depth, span=summary_span(s, zone)) for s in summaries
    )


def render_items(items: Iterable[SegmentItem]) -> str:
    """The segment text of ``items``: each item's header line, then its text."""
    blocks: list[str] = []
    for item in items:
        if item.is_message:
            tool = f" · result of {item.tool}" if item.tool else ""
            header = f"=== {item.ref} · {item.at or 'unknown time'} · {item.role}{tool} ==="
        elif item.depth is not None:
            header = f"=== {item.ref} · depth {item.depth} · {item.span} ==="
        else:
            blocks.append(item.text)
            continue
        blocks.append(f"{header}\n{item.text}")
    return "\n\n".join(blocks)


def render_messages(messages: Iterable[MessageRecord], zone: tzinfo, *, max_chars: int = 48_000) -> str:
    """Raw messages as a leaf segment (:func:`render_items` of :func:`message_items`)."""
    return render_items(message_items(messages, zone, max_chars=max_chars))


def render_summaries(summaries: Iterable[Summary], zone: tzinfo, *, max_chars: int = 48_000) -> str:
    """Summaries one level down as a condensed segment."""
    return render_items(summary_items(summaries, zone, max_chars=max_chars))


def parse_segment(text: str) -> list[SegmentItem]:
    """The items of a rendered segment.  Text before the first header (if any) is one headless item."""
    items: list[SegmentItem] = []
    matches = list(_HEADER.finditer(text))
    if not matches:
        return [SegmentItem(ref="text", text=text.strip())] if text.strip() else []
    if text[: matches[0].start()].strip():
        items.append(SegmentItem(ref="text", text=text[: matches[0].start()].strip()))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        body = text[match.end() : end].strip("\n")
        if match.group("message"):
            role: Role = match.group("role")  # type: ignore[assignment]
            items.append(
                SegmentItem(
                    f"msg#{match.group('message')}",
                    body,
                    role=role,
                    at=match.group("at").strip(),
                    tool=match.group("tool"),
                )
            )
        else:
            items.append(
                SegmentItem(match.group("summary"), body, depth=int(match.group("depth")), span=match.group("span"))
            )
    return items


def refs(items: Sequence[SegmentItem]) -> list[str]:
    return [item.ref for item in items]
