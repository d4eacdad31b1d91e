"""The active context's structure: which items are the protected fresh tail, and which belong together.

Shared by compaction (what may be summarised) and assembly (what may be left
out), so both always agree.

Invariants:

* A tool result belongs to the nearest earlier call with its id (real
  transcripts reuse call ids, so "any call with that id" would be wrong).
* The fresh tail is the last ``count`` messages (fewer when
  ``max_tokens`` is set and they would exceed it, but never fewer than one),
  grown backwards to take in the calls its results answer — so a tail never
  starts with an orphan result.
* A *unit* is a smallest run of consecutive items that keeps every call with
  its results: leaving a unit out whole never orphans a call or a result.
"""

from __future__ import annotations

from collections.abc import Sequence

from lossless.records import ContextEntry

__all__ = ["pairs", "tail_start", "units"]


def pairs(entries: Sequence[ContextEntry]) -> dict[int, int]:
    """Tool-result entry index -> index of the call it answers (the nearest earlier call with that id)."""
    last_call: dict[str, int] = {}
    found: dict[int, int] = {}
    for index, entry in enumerate(entries):
        for call_id in entry.tool_results:
            caller = last_call.get(call_id)
            if caller is not None and caller != index:
                found[index] = min(found.get(index, caller), caller)
        for call_id in entry.tool_calls:
            last_call[call_id] = index
    return found


def tail_start(entries: Sequence[ContextEntry], count: int, max_tokens: int | None = None) -> int:
    """Index of the first entry of the fresh tail (``len(entries)`` when the tail is empty)."""
    start = len(entries)
    seen = 0
    tokens = 0
    if count > 0:
        for index in range(len(entries) - 1, -1, -1):
            entry = entries[index]
            if entry.kind != "message":
                continue
            if max_tokens is not None and seen and tokens + entry.token_count > max_tokens:
                break
            seen += 1
            tokens += entry.token_count
            start = index
            if seen == count:
                break
    answered = pairs(entries)
    check_from = start
    while True:
        earliest = min((answered[i] for i in range(check_from, len(entries)) if i in answered), default=start)
        if earliest >= start:
            return start
        check_from, start = earliest, earliest


def units(entries: Sequence[ContextEntry]) -> list[tuple[int, int]]:
    """``(first, end)`` index ranges that cover ``entries`` in order, each keeping calls with their results."""
    answered = pairs(entries)
    reach = list(range(len(entries)))  # reach[i]: the last index that must stay with i
    for result, call in answered.items():
        reach[call] = max(reach[call], result)
    out: list[tuple[int, int]] = []
    index = 0
    while index < len(entries):
        end = reach[index]
        cursor = index
        while cursor <= end:
            end = max(end, reach[cursor])
            cursor += 1
        out.append((index, end + 1))
        index = end + 1
    return out
