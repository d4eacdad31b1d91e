"""What a question says beyond a grep pattern: the words that carry its topic, and the time it points at.

A question an agent types ("what did Maya's kids call the dog they adopted in May?") is not a grep
pattern: most of its words are glue, a few carry it, and some say *when*.  This module reads both;
the message rankers (:mod:`lossless.retrieval`) and the long-term memory search
(:mod:`lossless.memory`) share it, so a question means the same time to each.

Invariants:

* **Pure.**  No I/O; every function is deterministic in its arguments (the time anchor is passed in:
  the newest date among what is searched, never the clock).
* **Keywords never vanish.**  :func:`keywords` drops stopwords and time words, but a question made
  only of them keeps its words (so no question ranks on nothing).
* **A window is a half-open span.**  :class:`TimeWindow` holds ``start <= moment < end``; a named day
  ("on 20 October 2023") covers :data:`DAY_BEFORE` day before it and :data:`DAYS_AFTER` after it;
  "in May 2024", "last May", "in 2023", "last month", "two weeks ago" cover their span relative to
  the anchor; "two weeks before the trip to Porto" is an :class:`EventOffset`, whose window is placed
  once the caller has dated the event.  Text without such an expression: None, never a guess.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache

__all__ = [
    "DAYS_AFTER",
    "DAY_BEFORE",
    "FUNCTION_WORDS",
    "PROBE_AT",
    "STOPWORDS",
    "EventOffset",
    "TimeWindow",
    "event_offset",
    "keywords",
    "spans_named",
    "time_named",
    "time_window",
]

#: English function words, the closed classes (articles, pronouns, determiners, auxiliaries, prepositions,
#: conjunctions): what a keyword search drops from any text.  Adverbs and verbs ("finally", "last", "get") stay.
FUNCTION_WORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing done down during each either else ever every few for from
    further had has have having he her here hers herself him himself his how i if in into is it its
    itself just me might more most much must my myself no nor not now of off on once only or other ought our
    ours ourselves out over own same shall she should so some such than that the their theirs them themselves
    then there these they this those through to too under until up upon us very was we were what whatever when
    whenever where which while who whom whose why will with within without would yet you your yours yourself
    yourselves
    """.split()  # noqa: SIM905 - a word list reads best as text
)
#: Words that carry no topic in a question (function words and question glue: "tell", "remember", "finally" …).
#: The hybrid ranker drops these; the full-text ranker drops :data:`FUNCTION_WORDS` only (chosen on dev).
STOPWORDS = FUNCTION_WORDS | frozenset(
    """
    get got tell told say said ask asked mention mentioned remember recall anything something thing things
    kind sort way end ended actually really finally still ago last next one
    """.split()  # noqa: SIM905 - a word list reads best as text
)

_MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): number for number, name in enumerate(calendar.month_abbr) if name and name != "May"}
_WORD = re.compile(r"\w+", re.UNICODE)
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "ten": 10}


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A span of time a question points at (``start`` inclusive, ``end`` exclusive) and the words that said so."""

    start: datetime
    end: datetime
    words: tuple[str, ...] = ()

    def contains(self, moment: datetime) -> bool:
        return self.start <= moment < self.end


def _month_span(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def time_window(text: str, anchor: datetime) -> TimeWindow | None:
    """The window a question's time expression points at, relative to ``anchor`` (the conversation's latest date).

    Understands a day ("on 20 October 2023", "Oct 20th", "2023-10-20", "on 8 May": the latest such day;
    :data:`DAY_BEFORE` / :data:`DAYS_AFTER` around it) and a span next to one ("the week before 9 June"), a
    month with or without a year ("in May 2024", "back in March", "last May": the latest such month not
    after ``anchor``), a span of months ("between May and July 2023"), a year ("in 2023"),
    "last week/month/year" and "N days/weeks/months ago".  Anything else: None.
    """
    lowered = text.lower()
    dated = _around_a_date(text, anchor)
    if dated is not None:
        return dated
    found = re.search(r"\b(\d+|a|an|one|two|three|four|five|six|ten)\s+(day|week|month|year)s?\s+ago\b", lowered)
    if found:
        count = int(found.group(1)) if found.group(1).isdigit() else _NUMBERS[found.group(1)]
        days = {"day": 1, "week": 7, "month": 30, "year": 365}[found.group(2)] * count
        slack = max(2, days // 3)
        centre = anchor - timedelta(days=days)
        return TimeWindow(centre - timedelta(days=slack), centre + timedelta(days=slack), tuple(found.group(0).split()))
    found = re.search(r"\blast\s+(week|month|year)\b", lowered)
    if found:
        days = {"week": 7, "month": 31, "year": 366}[found.group(1)]
        return TimeWindow(anchor - timedelta(days=2 * days), anchor + timedelta(days=1), ("last", found.group(1)))
    between = _BETWEEN_MONTHS.search(lowered)
    if between is not None and _MONTHS.get(between.group(1)) and _MONTHS.get(between.group(3)):
        first, last = _MONTHS[between.group(1)], _MONTHS[between.group(3)]
        last_year = int(between.group(4)) if between.group(4) else _latest_year(anchor, last)
        first_year = int(between.group(2)) if between.group(2) else last_year - (first > last)
        return TimeWindow(
            _month_span(first_year, first)[0], _month_span(last_year, last)[1], tuple(between.group(0).split())
        )
    for match in re.finditer(r"\b([a-z]+)\.?(?:\s+(?:of\s+)?((?:19|20)\d\d))?\b", lowered):
        month = _MONTHS.get(match.group(1))
        if month is None or (match.group(1) == "may" and not _may_is_month(lowered, match)):
            continue
        if match.group(2):
            year = int(match.group(2))
        else:
            year = anchor.year if month <= anchor.month else anchor.year - 1
        start, end = _month_span(year, month)
        return TimeWindow(start, end, tuple(match.group(0).split()))
    found = re.search(r"\b(?:in|during|of|since)\s+((?:19|20)\d\d)\b", lowered)
    if found:
        year = int(found.group(1))
        return TimeWindow(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC), (found.group(1),))
    return None


#: Where :func:`time_named` reads a question: the last day of a leap year, so that every day a question
#: can name without its year ("on 29 February") exists in the year it is read in.
PROBE_AT = datetime(2024, 12, 31, tzinfo=UTC)


def time_named(text: str) -> TimeWindow | None:
    """Whether ``text`` names a time, and in which words, the same whenever it is asked: :func:`time_window`
    read at :data:`PROBE_AT` (its ``words`` alone mean something; the window a caller ranks by is read
    against the anchor of what it searches).  Read at the clock instead, "on 29 February" would be that
    day in a leap year and February alone in other years, and the words a search drops from the
    question (so the text it embeds) would change with the day it is asked."""
    return time_window(text, PROBE_AT)


_DAY_MONTH = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?([A-Za-z]+)\.?(?:,?\s+((?:19|20)\d\d))?\b")
_MONTH_DAY = re.compile(r"\b([A-Za-z]+)\.?\s+(\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+((?:19|20)\d\d)\b)?")
_ISO_DAY = re.compile(r"\b((?:19|20)\d\d)-(\d\d)-(\d\d)\b")
_UNIT_DAYS = {"day": 1, "night": 1, "weekend": 7, "week": 7, "fortnight": 14, "month": 30, "year": 365}
_AROUND = re.compile(
    r"\b(?:(?:the|a)\s+|(\d+|one|two|three|four|five|six|ten|a\s+couple\s+of|a\s+few)\s+)"
    r"(day|night|weekend|week|fortnight|month|year)s?\s+(before|after|prior\s+to|ahead\s+of)\s+(?:on\s+)?$",
    re.I,
)
_BETWEEN_MONTHS = re.compile(r"\bbetween\s+([a-z]+)(?:\s+((?:19|20)\d\d))?\s+and\s+([a-z]+)(?:\s+((?:19|20)\d\d))?\b")
#: A day named in a question ("on 20 October 2023") points at the messages of that day and a few after it (what
#: happened is often told the next day or later), and one before (time zones).
DAY_BEFORE, DAYS_AFTER = 1, 3


def _latest_year(anchor: datetime, month: int, day: int = 1) -> int:
    """The year of the latest ``month`` / ``day`` not after ``anchor`` (a date named without its year)."""
    return anchor.year if (month, day) <= (anchor.month, anchor.day) else anchor.year - 1


def _a_date(text: str, anchor: datetime) -> tuple[datetime, re.Match[str]] | None:
    """The first calendar day named in ``text`` ("20 October 2023", "Oct 20th", "2023-10-20"), and where."""
    found: list[tuple[int, datetime, re.Match[str]]] = []
    for match in _ISO_DAY.finditer(text):
        try:
            year, month, day = (int(part) for part in match.groups())
            found.append((match.start(), datetime(year, month, day, tzinfo=UTC), match))
        except ValueError:
            continue
    for pattern, day_at, month_at in ((_DAY_MONTH, 1, 2), (_MONTH_DAY, 2, 1)):
        for match in pattern.finditer(text):
            name = match.group(month_at)
            named = _MONTHS.get(name.lower())
            if named is None or (name.lower() == "may" and name != "May"):  # "may 3 people come" is not a date
                continue
            number = int(match.group(day_at))
            year = int(match.group(3)) if match.group(3) else _latest_year(anchor, named, number)
            try:
                found.append((match.start(), datetime(year, named, number, tzinfo=UTC), match))
            except ValueError:  # 31 June
                continue
    if not found:
        return None
    _, when, match = min(found, key=lambda item: item[0])
    return when, match


def _around_a_date(text: str, anchor: datetime) -> TimeWindow | None:
    """The window of a named day ("on 20 October 2023"), or of a span next to one ("the week before 9 June")."""
    dated = _a_date(text, anchor)
    if dated is None:
        return None
    day, match = dated
    words = tuple(_WORD.findall(match.group(0).lower()))  # as keywords() compares them
    near = _AROUND.search(text[: match.start()])
    if near is None:
        return TimeWindow(day - timedelta(days=DAY_BEFORE), day + timedelta(days=DAYS_AFTER + 1), words)
    number = (near.group(1) or "one").lower()
    count = int(number) if number.isdigit() else {"a couple of": 2, "a few": 3}.get(" ".join(number.split()), 0)
    days = _UNIT_DAYS[near.group(2).lower()] * (count or _NUMBERS.get(number, 1))
    slack = max(1, days // 3)
    words = (*_WORD.findall(near.group(0).lower()), *words)
    if near.group(3).lower() == "after":
        return TimeWindow(day, day + timedelta(days=days + slack + 1), words)
    return TimeWindow(day - timedelta(days=days + slack), day + timedelta(days=1), words)


_MONTH_YEAR = re.compile(r"\b([A-Za-z]+)\.?,?\s+(?:of\s+)?((?:19|20)\d\d)\b")


@lru_cache(maxsize=4096)
def spans_named(text: str) -> tuple[tuple[datetime, datetime], ...]:
    """The spans of the dates ``text`` names with their year, in order: a day ("13 September 2023",
    "September 13, 2023", "2023-09-13") as that day, a month ("September 2023") as that month.

    A date without its year, a bare year or a capitalised-only "May" read otherwise is not named
    (a memory's text is read without an anchor: only what it says in full counts).  Kept per text (a memory
    search reads the same memories' dates on every question that names a time)."""
    found: list[tuple[int, datetime, datetime]] = []
    taken: list[tuple[int, int]] = []
    for match in _ISO_DAY.finditer(text):
        try:
            year, month, number = (int(part) for part in match.groups())
            day = datetime(year, month, number, tzinfo=UTC)
        except ValueError:
            continue
        found.append((match.start(), day, day + timedelta(days=1)))
        taken.append(match.span())
    for pattern, day_at, month_at in ((_DAY_MONTH, 1, 2), (_MONTH_DAY, 2, 1)):
        for match in pattern.finditer(text):
            name = match.group(month_at)
            named = _MONTHS.get(name.lower())
            if named is None or not match.group(3) or (name.lower() == "may" and name != "May"):
                continue
            try:
                day = datetime(int(match.group(3)), named, int(match.group(day_at)), tzinfo=UTC)
            except ValueError:
                continue
            found.append((match.start(), day, day + timedelta(days=1)))
            taken.append(match.span())
    for match in _MONTH_YEAR.finditer(text):
        named = _MONTHS.get(match.group(1).lower())
        if named is None or match.group(1) == "may" or any(a <= match.start() < b for a, b in taken):
            continue
        if any(a < match.end() <= b for a, b in taken):  # the month and year of a day already read
            continue
        start, end = _month_span(int(match.group(2)), named)
        found.append((match.start(), start, end))
    return tuple(dict.fromkeys((start, end) for _, start, end in sorted(found, key=lambda item: item[0])))


@dataclass(frozen=True, slots=True)
class EventOffset:
    """A time relative to an event ("two weeks before the trip to Porto"): ``days`` after it (negative: before)."""

    days: int
    slack: int
    #: The words that name the event ("trip", "Porto"), to find when it happened.
    event: tuple[str, ...]
    #: The words of the offset itself ("two", "weeks", "before"), which carry no topic.
    words: tuple[str, ...]

    def window(self, event_at: datetime) -> TimeWindow:
        centre = event_at + timedelta(days=self.days)
        return TimeWindow(centre - timedelta(days=self.slack), centre + timedelta(days=self.slack + 1), self.words)


_OFFSET = re.compile(
    r"\b(?:about\s+|around\s+|roughly\s+|some\s+)?(\d+|a|an|one|two|three|four|five|six|ten|a\s+couple\s+of|a\s+few)"
    r"\s+(day|week|month|year)s?(?:\s+or\s+so)?\s+(before|after|prior\s+to|ahead\s+of)\s+([^?.!,;]+)"
)


def event_offset(text: str) -> EventOffset | None:
    """The offset and event of "N days/weeks/months before/after EVENT" in a question, or None."""
    lowered = text.lower()
    found = _OFFSET.search(lowered)
    if found is None:
        return None
    number = found.group(1)
    count = int(number) if number.isdigit() else {"a couple of": 2, "a few": 3}.get(" ".join(number.split()), 0)
    count = count or _NUMBERS.get(number, 1)
    days = {"day": 1, "week": 7, "month": 30, "year": 365}[found.group(2)] * count
    sign = 1 if found.group(3) == "after" else -1
    # the event's words as written ("Kyoto"), where lowering kept every offset in place
    named = text[found.start(4) : found.end(4)] if len(lowered) == len(text) else found.group(4)
    event = tuple(w for w in keywords(named) if w.lower() not in STOPWORDS)
    if not event:
        return None
    offset_words = tuple(found.group(0)[: found.start(4) - found.start(0)].split())
    return EventOffset(sign * days, max(2, days // 3), event, offset_words)


def _may_is_month(text: str, match: re.Match[str]) -> bool:
    """Whether "may" is the month ("in May", "last May", "May 2024"), not the verb ("may I")."""
    before = text[: match.start()].split()[-1:] or [""]
    return bool(match.group(2)) or before[0] in ("in", "last", "since", "during", "early", "late", "mid", "of")


def keywords(text: str, window: TimeWindow | None = None, *, stopwords: frozenset[str] = STOPWORDS) -> list[str]:
    """The words of ``text`` that carry its topic, in order, each once (``stopwords`` and time words dropped).

    A possessive ``'s`` is dropped with the apostrophe ("Maya's" → "Maya").  When nothing is left the
    text's words are returned as they are.
    """
    words = _WORD.findall(re.sub(r"['’]s\b", "", text))
    time_words = set(window.words) if window is not None else set()
    kept = [
        w
        for w in words
        if w.lower() not in stopwords and w.lower() not in time_words and (len(w) > 1 or not w.isascii())
    ]
    return list(dict.fromkeys(kept or words))
