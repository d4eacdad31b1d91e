"""Helpers shared by the explorers: sizes, clipping, cleaning sample text."""

from __future__ import annotations

import re

__all__ = ["clean", "clip", "count_lines", "human_size", "plural", "preview"]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_SPACE = re.compile(r"\s+")


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{size:,} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"  # pragma: no cover - the loop returns


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"


def clean(text: str) -> str:
    """Sample text made safe to show: control characters replaced, whitespace kept."""
    return _CONTROL.sub("\ufffd", text)


def clip(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters: whitespace collapsed, cut with an ellipsis."""
    flat = _SPACE.sub(" ", clean(text)).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def preview(items: list[str], limit: int, total: int | None = None) -> str:
    """``a, b, c … (+N more)``: the first ``limit`` items and how many are left out."""
    total = len(items) if total is None else total
    shown = ", ".join(items[:limit])
    return shown + (f" … (+{total - limit:,} more)" if total > limit else "")


def count_lines(text: str) -> int:
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)
