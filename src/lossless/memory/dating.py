"""When a memory is, and which memories the time in a question points at.

A question such as "what did Maya buy about a week before the trip to Porto?" or "what did we
decide last May?" names a time; the memory search (:meth:`MemoryService.search`) boosts the
memories of that time.  The time expressions are read by :mod:`lossless.questions`, the same
reader the message search (``grep`` hybrid) uses, so a question means the same time to both.

Invariants:

* **A memory's times.**  The day it was said (``valid_from``: a mined memory's is its source
  message's date) and every date its text names with its year ("said on 13 September 2023",
  "on 2023-09-14": that day; "in May 2023": that month), by
  :func:`~lossless.questions.spans_named`.
* **Inside.**  A memory is inside a window when one of its times lies wholly inside it (a day
  inside "last week"; a named month inside "in 2023"; a month named does not count as inside
  "last week").  Which memories are inside depends on their times and the windows only.
* **Relative to the searched.**  Relative expressions ("last week", "in May") are read against
  the anchor: ``as_of`` when the search asks for the state at a moment, else the newest
  ``valid_from`` among the candidates (the conversation's "now", as the message search takes its
  newest candidate's date), never the clock.  Whether a question names a time at all, and in which
  words (those :meth:`TimeAsked.meant` leaves out of the text embedded), is read once at a fixed
  date (:func:`~lossless.questions.time_named`), so it cannot change with the day of the search.
* **An event dates its offset.**  "N weeks before EVENT" places its window from each of the
  :data:`EVENT_MENTIONS` memories that best match the event's words (and the names the question
  holds): each of their times gives one window.
* **Boost, never filter.**  A window only adds :data:`TIME_BOOST` (measured against filtering in
  docs/memory.md): a misread expression reorders, never hides, a memory.
* No I/O but the event's: :func:`boosts` reads the memories that date an event through ``find``
  (:func:`finder`: the store's keyword search, in the searcher's scopes and conversations).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from lossless.memory.ports import MemoryStore
from lossless.memory.querying import names
from lossless.memory.records import Memory
from lossless.questions import STOPWORDS, EventOffset, TimeWindow, event_offset, spans_named, time_named, time_window

__all__ = [
    "EVENT_BOOST",
    "EVENT_MENTIONS",
    "TIME_BOOST",
    "TIME_POOL",
    "Find",
    "TimeAsked",
    "anchor",
    "asked",
    "boosts",
    "event_query",
    "event_windows",
    "finder",
    "inside",
    "times",
    "windows",
]

_PUNCTUATION = ".,;:!?\"'()"

#: Added to the fused score of a memory inside the question's window (chosen on the dev split,
#: docs/memory.md "tried").
TIME_BOOST = 0.3
#: The same for the window of an event offset ("a week before the trip"): days wide, and what the
#: question asks about is not the event that its words match best.
EVENT_BOOST = 0.75
#: A question that names a time draws this many times the candidate pool, so the memories of that
#: time are among those ranked.
TIME_POOL = 3
#: "Two weeks before the trip": the memories that date the trip.
EVENT_MENTIONS = 3

#: The memories that best match some words, best first (the store's keyword search, the caller's scopes).
Find = Callable[[str], Awaitable[Sequence[Memory]]]


@dataclass(frozen=True, slots=True)
class TimeAsked:
    """What a question says about time: a window expression (read once the anchor is known) or an event offset."""

    question: str
    offset: EventOffset | None = None
    #: The words of a window expression ("september", "2023"), lower case; none for an event offset.
    words: tuple[str, ...] = ()

    def window(self, at: datetime) -> TimeWindow | None:
        return time_window(self.question, at)

    def meant(self) -> str:
        """What the meaning side embeds: the question without its window expression's words ("Where did Maya go
        on holiday around September 2023?" → "Where did Maya go on holiday around"), since a month's words pull
        it towards every memory said that month; the question itself for an event offset, or when nothing else
        would be left."""
        drop = set(self.words)
        kept = [word for word in self.question.split() if word.strip(_PUNCTUATION).lower() not in drop]
        topical = any(word.strip(_PUNCTUATION).lower() not in STOPWORDS for word in kept if word.strip(_PUNCTUATION))
        return " ".join(kept) if topical and drop else self.question


def asked(question: str) -> TimeAsked | None:
    """The time ``question`` names, or None when it names none."""
    probe = time_named(question)  # whether there is one, and its words: the anchor comes later
    if probe is not None:
        return TimeAsked(question, words=tuple(word.lower() for word in probe.words))
    offset = event_offset(question)
    return None if offset is None else TimeAsked(question, offset)


def times(memory: Memory) -> tuple[tuple[datetime, datetime], ...]:
    """The spans a memory is of: the day it was said and the dates its text names (see the module docstring)."""
    said = memory.valid_from.replace(hour=0, minute=0, second=0, microsecond=0)
    return tuple(dict.fromkeys(((said, said + timedelta(days=1)), *spans_named(memory.content))))


def inside(memory: Memory, windows: Iterable[TimeWindow]) -> bool:
    """Whether one of ``memory``'s times lies wholly inside one of ``windows``."""
    spans = times(memory)
    return any(w.start <= start and end <= w.end for w in windows for start, end in spans)


def anchor(memories: Iterable[Memory], as_of: datetime | None = None) -> datetime | None:
    """``as_of`` when given, else the newest ``valid_from`` among ``memories`` (None when there are none)."""
    if as_of is not None:
        return as_of
    return max((m.valid_from for m in memories), default=None)


def event_query(offset: EventOffset, named: Sequence[str]) -> str:
    """The words that find the memories of the event: its own and the names the question holds (each once)."""
    words: dict[str, str] = {}
    for word in (*offset.event, *named):
        words.setdefault(word.lower(), word)
    return " ".join(words.values())


def event_windows(offset: EventOffset, events: Iterable[Memory]) -> list[TimeWindow]:
    """One window per day-long time of each memory that dates the event."""
    out: list[TimeWindow] = []
    for memory in events:
        for start, end in times(memory):
            if end - start == timedelta(days=1):
                out.append(offset.window(start))
    return list(dict.fromkeys(out))


def windows(time: TimeAsked, memories: Sequence[Memory], as_of: datetime | None = None) -> list[TimeWindow]:
    """The window of a window expression, relative to the anchor of ``memories`` (none: no window)."""
    at = anchor(memories, as_of)
    if at is None:
        return []
    window = time.window(at)
    return [] if window is None else [window]


async def boosts(
    time: TimeAsked | None, memories: Sequence[Memory], as_of: datetime | None, find: Find
) -> dict[str, float]:
    """Memory id → :data:`TIME_BOOST` for those of ``memories`` inside the time the question names.

    A window expression is read against :func:`anchor`; an event offset ("a week before the trip")
    is placed from the :data:`EVENT_MENTIONS` memories ``find`` returns for the event's words.
    """
    if time is None or not memories:
        return {}
    found, boost = windows(time, memories, as_of), TIME_BOOST
    if not found and time.offset is not None:
        events = await find(event_query(time.offset, names(time.question)))
        found, boost = event_windows(time.offset, events[:EVENT_MENTIONS]), EVENT_BOOST
    return {m.memory_id: boost for m in memories if inside(m, found)}


def finder(
    store: MemoryStore, scopes: Sequence[str] | None, history: bool, conversations: Sequence[int] | None
) -> Find:
    """The store's keyword search for an event's words, best first, within what the search reaches."""

    async def find(words: str) -> list[Memory]:
        hits = await store.keyword_search(
            words, scopes, limit=EVENT_MENTIONS, include_superseded=history, conversations=conversations
        )
        order = {h.memory_id: rank for rank, h in enumerate(hits)}
        return sorted(await store.get(list(order)), key=lambda m: order[m.memory_id])

    return find
