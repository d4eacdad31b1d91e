"""HTML for the web explorer: the page frame, tables, highlighted snippets and the token chart.

Invariants:

* **Verbatim and inert.**  Every piece of stored text, id, path and error message goes through
  :func:`esc` before it reaches a page, so nothing a conversation holds is ever interpreted as
  markup or script; control characters other than tab and newline are shown as ``\\xNN`` escapes.
* **Nothing external.**  Pages link only to ``/ui/…`` paths and the packaged ``/ui/static/``
  assets; no page loads a font, script, style or image from another host.
* Pure: values in, strings out (no I/O, no engine).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from urllib.parse import urlencode

__all__ = [
    "chart",
    "esc",
    "highlight",
    "page",
    "qs",
    "stamp",
    "table",
]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
NAV = (("/ui/", "Conversations"), ("/ui/search", "Search"), ("/ui/memories", "Memories"))


def esc(value: object) -> str:
    """``value`` as HTML text: escaped, with control characters written out."""
    text = "" if value is None else str(value)
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return html.escape(text, quote=True)


def qs(**params: object) -> str:
    """A query string of the params that are set (``?a=1&b=x``), or ``""``."""
    kept = {k: str(v) for k, v in params.items() if v not in (None, "", False)}
    return ("?" + urlencode(kept)) if kept else ""


def stamp(when: datetime | None) -> str:
    return "" if when is None else when.strftime("%Y-%m-%d %H:%M")


def page(title: str, body: str, *, active: str = "", agent: str | None = None) -> str:
    """A whole page: the frame, navigation and ``body`` (already HTML)."""
    links = "".join(
        f'<a href="{href}"{" aria-current=page" if href == active else ""}>{esc(name)}</a>' for href, name in NAV
    )
    who = f'<span class="agent" title="the agent whose data you see">agent {esc(agent)}</span>' if agent else ""
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} · lossless</title>"
        '<link rel="stylesheet" href="/ui/static/app.css">'
        '<script src="/ui/static/app.js" defer></script>'
        "</head><body>"
        '<a class="skip" href="#main">Skip to content</a>'
        f'<header><nav aria-label="Main"><a class="brand" href="/ui/">lossless</a>{links}</nav>{who}</header>'
        f'<main id="main"><h1>{esc(title)}</h1>{body}</main>'
        "</body></html>"
    )


def table(
    headers: Sequence[str], rows: Iterable[Sequence[str]], *, caption: str = "", empty: str = "Nothing yet."
) -> str:
    """A table; cells are HTML already (escape text with :func:`esc` first)."""
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    if not body:
        return f'<p class="empty">{esc(empty)}</p>'
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h in headers)
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f'<div class="scroll"><table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def highlight(text: str, terms: Sequence[str]) -> str:
    """``text`` escaped, with each case-insensitive occurrence of ``terms`` in ``<mark>``."""
    words = sorted({t for t in terms if t.strip()}, key=len, reverse=True)
    if not words:
        return esc(text)
    pattern = re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE)
    out, last = [], 0
    for found in pattern.finditer(text):
        out.append(esc(text[last : found.start()]))
        out.append(f"<mark>{esc(found.group())}</mark>")
        last = found.end()
    out.append(esc(text[last:]))
    return "".join(out)


def chart(
    points: Sequence[tuple[str, int, int]],
    *,
    title: str,
    budget: int | None = None,
    legend: str = "pale: before the pass, strong: after",
) -> str:
    """An inline SVG bar chart: for each point (label, before, after) a pale bar to ``before`` and a
    strong one to ``after``; a dashed line at ``budget``.  Accessible: a title and a data table follow."""
    if not points:
        return '<p class="empty">No compaction yet.</p>'
    width, height, pad = max(320, 28 * len(points) + 60), 220, 40
    top = max([b for _, b, _ in points] + [a for _, _, a in points] + [budget or 0]) or 1
    step = (width - pad - 10) / len(points)

    def y(value: int) -> float:
        return height - pad - (height - 2 * pad) * value / top

    bars = []
    for i, (label, before, after) in enumerate(points):
        x = pad + i * step
        bars.append(
            f'<rect class="before" x="{x:.1f}" y="{y(before):.1f}" width="{step * 0.8:.1f}" '
            f'height="{height - pad - y(before):.1f}"><title>{esc(label)}: {before:,} → {after:,} tokens</title></rect>'
            f'<rect class="after" x="{x:.1f}" y="{y(after):.1f}" width="{step * 0.8:.1f}" '
            f'height="{height - pad - y(after):.1f}"/>'
        )
    line = ""
    if budget:
        line = (
            f'<line class="budget" x1="{pad}" x2="{width - 10}" y1="{y(budget):.1f}" y2="{y(budget):.1f}"/>'
            f'<text x="{width - 12}" y="{y(budget) - 4:.1f}" text-anchor="end">budget {budget:,}</text>'
        )
    axis = (
        f'<text x="4" y="{y(top) + 4:.1f}">{top:,}</text><text x="4" y="{height - pad:.1f}">0</text>'
        f'<line class="axis" x1="{pad}" x2="{width - 10}" y1="{height - pad}" y2="{height - pad}"/>'
    )
    return (
        f'<figure class="chart"><svg role="img" aria-label="{esc(title)}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}">{axis}{"".join(bars)}{line}</svg>'
        f"<figcaption>{esc(title)} ({esc(legend)})</figcaption></figure>"
    )
