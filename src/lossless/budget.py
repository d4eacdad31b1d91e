"""The token budget as a hard limit: what a rendered request costs, the headroom an estimate needs,
and head-and-tail excerpts of messages too large for the room that is left.

Invariants:

* :func:`chat_tokens` counts every string a provider receives in a chat
  message — text, tool arguments and inputs, tool results, ids and names —
  with the configured counter, plus :data:`MESSAGE_OVERHEAD` per message; an
  inline image counts :data:`IMAGE_TOKENS` (providers bill images by size,
  not by the length of their base64 text).
* :func:`usable_budget` is at most the budget.  With an exact counter it is
  the budget; with an estimate it keeps back the counter's measured
  ``margin`` (see :mod:`lossless.tokens`), so that what the estimate says
  fits also fits when the provider counts exactly.
* :func:`excerpt` keeps the structure of what it cuts (roles, tool-call ids,
  block types), so a call and its result stay paired; each cut string keeps
  its head and its tail around a marker that names the stored message and
  how to find its full text.  The result costs at most ``target`` tokens, or
  the function returns ``None``.
* :func:`tail_token_cap` is the fresh tail's token cap for a budget: the
  ``fresh_tail_max_tokens`` setting when set, else a share of the budget, so
  the defaults work at any budget.
* :class:`CountCache` remembers the counts of long texts (by value, least
  recently used dropped beyond a character budget), so assembling the same
  context turn after turn counts only what is new.
* Pure: values in, values out (the cache aside, which only remembers answers).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from lossless.tokens import TokenCounter

__all__ = [
    "FRESH_TAIL_SHARE",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD",
    "MIN_EXCERPT_TOKENS",
    "CountCache",
    "chat_tokens",
    "excerpt",
    "tail_token_cap",
    "usable_budget",
]

Chat = dict[str, Any]

#: Tokens a message costs beyond its text (role, separators) in a chat request.
MESSAGE_OVERHEAD = 4
#: What an inline image is counted as (about the most a provider bills for one image).
IMAGE_TOKENS = 1_600
#: The smallest excerpt worth sending: the marker and a little of the text around it.
MIN_EXCERPT_TOKENS = 48
#: Share of the budget the fresh tail may take when ``fresh_tail_max_tokens`` is not set.
FRESH_TAIL_SHARE = 0.5

# Values under these keys are structure, not text the model reads as content (never cut, never counted).
_STRUCTURE = frozenset({"role", "type", "media_type"})
# Strings under these keys (or anywhere inside a tool input) are text that may be cut.
_TEXT = frozenset({"content", "text", "arguments"})


class CountCache:
    """A token counter that remembers the counts of texts of ``min_chars`` or more (see the module doc).

    Bounded by ``max_chars`` characters and ``max_entries`` texts in all.

    Same answers as the counter it wraps (it forwards ``name`` and ``margin``); for use by one event
    loop (assembly runs there), not shared between threads.
    """

    def __init__(
        self,
        counter: TokenCounter,
        *,
        max_chars: int = 64 * 1024 * 1024,
        min_chars: int = 8,
        max_entries: int = 200_000,
    ) -> None:
        self.counter = counter
        self.name = counter.name
        self.max_chars = max_chars
        self.min_chars = min_chars
        self.max_entries = max_entries
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._chars = 0

    def margin(self, budget: int) -> float:
        inner = getattr(self.counter, "margin", None)
        return float(inner(budget)) if callable(inner) else 0.0

    def count(self, text: str) -> int:
        if len(text) < self.min_chars:
            return self.counter.count(text)
        found = self._counts.get(text)
        if found is not None:
            self._counts.move_to_end(text)
            return found
        found = self.counter.count(text)
        if len(text) <= self.max_chars // 4:
            self._counts[text] = found
            self._chars += len(text)
            while self._chars > self.max_chars or len(self._counts) > self.max_entries:
                evicted, _ = self._counts.popitem(last=False)
                self._chars -= len(evicted)
        return found

    def __repr__(self) -> str:
        return f"CountCache({self.counter!r})"


def usable_budget(budget: int, counter: TokenCounter) -> int:
    """The part of ``budget`` assembly may fill, counted by ``counter`` (see the module invariants)."""
    margin = getattr(counter, "margin", None)
    share = float(margin(budget)) if callable(margin) else 0.0
    return max(0, budget - math.ceil(budget * share))


def tail_token_cap(budget: int, setting: int | None) -> int:
    """The fresh tail's token cap: the setting when given, else :data:`FRESH_TAIL_SHARE` of the budget."""
    if setting is not None:
        return setting
    return max(1, int(budget * FRESH_TAIL_SHARE))


def _image(key: str, value: str) -> bool:
    return (key == "url" and value.startswith("data:")) or key == "data"


def _strings(value: object, key: str, inside_input: bool, visit: Callable[[str, str, bool], None]) -> None:
    if isinstance(value, str):
        visit(key, value, inside_input)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k not in _STRUCTURE:
                _strings(v, k, inside_input or k == "input", visit)
    elif isinstance(value, list):
        for item in value:
            _strings(item, key, inside_input, visit)


def chat_tokens(messages: Sequence[Chat], counter: TokenCounter) -> int:
    """Tokens a provider is sent for ``messages`` (see the module invariants)."""
    total = 0

    def visit(key: str, text: str, _inside: bool) -> None:
        nonlocal total
        total += IMAGE_TOKENS if _image(key, text) else counter.count(text)

    for message in messages:
        total += MESSAGE_OVERHEAD
        _strings(message, "", False, visit)
    return total


def _cuttable(key: str, inside_input: bool) -> bool:
    return key in _TEXT or inside_input


def _rebuild(value: Any, key: str, inside_input: bool, cut: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return cut(value) if _cuttable(key, inside_input) else value
    if isinstance(value, dict):
        return {
            k: (v if k in _STRUCTURE else _rebuild(v, k, inside_input or k == "input", cut)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_rebuild(item, key, inside_input, cut) for item in value]
    return value


def marker(ref: str, omitted: int) -> str:
    """The note that stands where an excerpt's middle was cut out."""
    return (
        f"\n[… {omitted:,} characters of {ref} left out here to fit the token budget; the store keeps the "
        "whole message: find its text with lcm_grep …]\n"
    )


def _water_level(lengths: Sequence[int], allowance: int) -> int:
    """The largest per-string cap ``c`` with ``sum(min(length, c)) <= allowance``."""
    ordered = sorted(lengths)
    remaining = allowance
    for index, length in enumerate(ordered):
        share = remaining // (len(ordered) - index)
        if length > share:
            return share
        remaining -= length
    return ordered[-1] if ordered else 0


def excerpt(messages: Sequence[Chat], target: int, counter: TokenCounter, ref: str) -> list[Chat] | None:
    """``messages`` (one stored message, rendered) cut down to at most ``target`` tokens, or None."""
    lengths: list[int] = []

    def collect(key: str, text: str, inside: bool) -> None:
        if _cuttable(key, inside) and not _image(key, text):
            lengths.append(len(text))

    for message in messages:
        _strings(message, "", False, collect)
    full = chat_tokens(messages, counter)
    if full <= target:
        return list(messages)
    text_chars = sum(lengths)
    if not text_chars:
        return None
    chars_per_token = text_chars / max(1, full)
    allowance = int(max(0, target - 24 * len(lengths)) * chars_per_token * 0.9)
    for _attempt in range(12):
        level = _water_level(lengths, allowance)

        def cut(text: str, level: int = level) -> str:
            if len(text) <= level:
                return text
            head = level // 2
            tail = level - head
            return text[:head] + marker(ref, len(text) - level) + (text[len(text) - tail :] if tail else "")

        out = [_rebuild(m, "", False, cut) for m in messages]
        cost = chat_tokens(out, counter)
        if cost <= target:
            return out
        if allowance == 0:
            return None
        allowance = int(allowance * min(0.8, target / cost))
    return None
