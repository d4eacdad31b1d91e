"""The summarizer port: what a summary is asked from (segment items with roles, times and parts) and what comes back.

A summarizer does no storage; the compactor gives it a request and stores its result.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from lossless.records import (
    Part,
    Role,
    SummaryKind,
)

__all__ = [
    "SegmentItem",
    "Summarizer",
    "SummaryPolicy",
    "SummaryRequest",
    "SummaryResult",
]


SummaryPolicy = Literal["normal", "aggressive"]


@dataclass(frozen=True, slots=True)
class SegmentItem:
    """One item of a segment of history, as a summarizer is given it: a message or a summary.

    ``text`` is what the rendered segment shows for the item (cut to the segment's length cap);
    the other fields are the facts its header line shows, so no summarizer has to parse them
    back out of the text — text that only looks like a header stays text.
    """

    ref: str  # "msg#12" or "sum_…" ("text" for prose that came without items)
    text: str
    role: Role | None = None  # messages
    at: str | None = None  # messages: the shown (local) time
    tool: str | None = None  # tool results: the tool(s) whose result this is
    depth: int | None = None  # summaries
    span: str | None = None  # summaries: "<from> → <to>", shown times
    time: datetime | None = None  # messages: when it was stored (UTC)
    parts: tuple[Part, ...] = ()  # messages: the structured parts

    @property
    def is_message(self) -> bool:
        return self.ref.startswith("msg#")


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """One summarisation: a segment of history, rendered and as items, and how to summarise it.

    ``depth`` is the depth of the summary to produce: 0 for a leaf (the segment
    is raw messages), 1 or more for a condensed node (the segment is summaries
    one level down).  ``text`` is the segment as a model reads it
    (:mod:`lossless.segments`); ``items`` are the same items, structured, for
    summarizers that work on them (empty when a caller passes prose only).
    ``previous_context`` is the most recent earlier summary, so the summary can
    avoid repeating what is already known.
    """

    kind: SummaryKind
    depth: int
    policy: SummaryPolicy
    target_tokens: int
    text: str
    previous_context: str | None = None
    custom_instructions: str = ""
    conversation_id: int | None = None
    earliest_at: datetime | None = None
    latest_at: datetime | None = None
    items: tuple[SegmentItem, ...] = ()


@dataclass(frozen=True, slots=True)
class SummaryResult:
    """What a summarizer produced, and which provider and model produced it."""

    text: str
    provider: str
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


@runtime_checkable
class Summarizer(Protocol):
    """Turns a segment of history into a shorter text.

    Contract: ``summarize`` may take long, return text that is too long or
    empty, or raise (a :class:`~lossless.errors.ProviderError` when it knows
    why); the compaction engine applies timeouts and validates the result, so
    a misbehaving summarizer can never corrupt the DAG.  Implementations hold no
    per-call state and are safe to call concurrently.
    """

    provider: str
    model: str | None

    async def summarize(self, request: SummaryRequest) -> SummaryResult: ...
