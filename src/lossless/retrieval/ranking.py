"""Ranking a question's matches: keywords of a question, time expressions, score fusion, neighbour context.

A question an agent types ("what did Maya's kids call the dog they adopted in May?") is not a
grep pattern: most of its words are glue, a few carry it, and some say *when*.  This module turns
such text into what the rankers use, and fuses their scores.

Invariants:

* **Pure.**  No I/O; every function is deterministic in its arguments (the time anchor is passed in).
* **Keywords never vanish.**  :func:`keywords` drops stopwords and time words, but a question made
  only of them keeps its words (so no question ranks on nothing).
* **Fusion is of normalised scores.**  Each ranking's scores are scaled to ``[0, 1]`` over its own
  candidates (min-max: its best = 1, its worst = 0) before the weighted sum, so one ranker's scale
  never drowns the other's; an id one ranker did not return scores 0 there.  The weights here were
  chosen on the dev split ``benchmarks/data/recall-dev.json`` (docs/retrieval.md has the table),
  never on the test split.
* **Time expressions boost, never filter.**  "in May 2024", "last May", "in 2023", "last month",
  "two weeks ago" become a window; items inside it get :data:`TIME_BOOST` added.  A misread
  expression can only reorder, never hide, a match.
* **What an agent's question asks for.**  :func:`question_intent` reads whether a question asks which
  file a change went to or what failed; :func:`shows` tells whether a message is such a record (a
  file-changing tool call, a failed tool result).  Rankers only *add* to such messages' scores.
* **Neighbour context.**  :func:`with_neighbours` lets a turn inherit a share of the scores of the
  turns before and after it (an answer such as "Yes, we went there last week" is found by what the
  question before it named); it only adds, never removes.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Literal, TypeVar

from lossless.parts import EDIT_TOOLS, FAILURE, FAILURE_SCANNED, WRITE_TOOLS
from lossless.text import CJK_CHAR

__all__ = [
    "FUNCTION_WORDS",
    "KEYWORD_WEIGHT",
    "NEIGHBOUR_SHARE",
    "STOPWORDS",
    "TIME_BOOST",
    "EventOffset",
    "Intent",
    "TimeWindow",
    "any_word_expression",
    "event_offset",
    "fuse",
    "is_tool_record",
    "keywords",
    "question_intent",
    "shows",
    "time_window",
    "with_neighbours",
]

K = TypeVar("K")

#: Weight of the keyword (BM25) side in fusion (hybrid summaries; hybrid messages use
#: :data:`lossless.retrieval.hybrid.KEYWORD_WEIGHT`); the semantic side gets ``1 - KEYWORD_WEIGHT``.
KEYWORD_WEIGHT = 0.3
#: Share of each neighbouring turn's score a message inherits in the any-word ranking of a ``full_text``
#: question (see :func:`with_neighbours`; hybrid messages use their own fitted shares).
NEIGHBOUR_SHARE = 0.3
#: Added to the score of an item inside a question's time window (hybrid messages: their own fitted boost).
TIME_BOOST = 0.1
#: Topic words from which a message counts as saying something (see :func:`substance`; 0: off; hybrid
#: messages use their own fitted count).
SUBSTANCE_WORDS = 6
SUBSTANCE_POWER = 1.0

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
_CJK = CJK_CHAR
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


def any_word_expression(words: Iterable[str]) -> str | None:
    """An FTS5 expression matching any of ``words`` (each quoted, so none is an operator), or None when empty."""
    quoted = ['"' + w.replace('"', '""').replace("\x00", " ") + '"' for w in dict.fromkeys(words) if w.strip()]
    return " OR ".join(quoted) or None


def _normalised(scores: Mapping[K, float]) -> dict[K, float]:
    if not scores:
        return {}
    high, low = max(scores.values()), min(scores.values())
    if high <= low:
        return dict.fromkeys(scores, 1.0)
    return {key: (value - low) / (high - low) for key, value in scores.items()}


def fuse(
    keyword: Mapping[K, float], semantic: Mapping[K, float], *, keyword_weight: float = KEYWORD_WEIGHT
) -> dict[K, float]:
    """Weighted sum of the min-max-normalised keyword scores (higher = better) and cosine similarities."""
    words = _normalised(keyword)
    vectors = _normalised(semantic)
    fused: dict[K, float] = {}
    for key in dict.fromkeys([*words, *vectors]):
        fused[key] = keyword_weight * words.get(key, 0.0) + (1 - keyword_weight) * vectors.get(key, 0.0)
    return fused


def with_neighbours(
    scores: Mapping[K, float],
    neighbours: Mapping[K, tuple[K | None, K | None]],
    *,
    before: float = NEIGHBOUR_SHARE,
    after: float = NEIGHBOUR_SHARE,
    best_only: bool = False,
    tools: AbstractSet[K] = frozenset(),
    tool_before: float | None = None,
    tool_after: float | None = None,
) -> dict[K, float]:
    """Each item's score plus ``before`` times the score of the turn before it and ``after`` times the turn after.

    ``best_only``: add only the larger of the two (the any-word ranking of a ``full_text`` question).
    ``tools``: the items that are a tool's call or its output (:func:`is_tool_record`); a pair of turns of
    which either is one inherits ``tool_before`` / ``tool_after`` instead (a tool's output is understood
    by its call, as a reply in a chat is not by the turn it follows).

    ``neighbours`` maps an item to ``(the turn before it, the turn after it)`` (``None``: none; turns not
    scored count 0; the relation is read both ways: the turn after ``a`` has ``a`` before it).
    Neighbours that had no score of their own are added too, with what they inherit only, so a reply
    that shares no word with the question can still rank after the turn that named its subject.  Only
    adds: no score goes down.
    """
    previous_of: dict[K, K] = {}
    next_of: dict[K, K] = {}
    for key, (previous, following) in neighbours.items():
        if previous is not None:
            previous_of[key] = previous
            next_of.setdefault(previous, key)
        if following is not None:
            next_of[key] = following
            previous_of.setdefault(following, key)
    targets = dict.fromkeys(scores)
    for key in scores:
        targets.update((n, None) for n in (previous_of.get(key), next_of.get(key)) if n is not None)
    out: dict[K, float] = {}
    tool_before = before if tool_before is None else tool_before
    tool_after = after if tool_after is None else tool_after
    for key in targets:
        previous, following = previous_of.get(key), next_of.get(key)
        from_before = from_after = 0.0
        if previous is not None:
            share = tool_before if key in tools or previous in tools else before
            from_before = share * scores.get(previous, 0.0)
        if following is not None:
            share = tool_after if key in tools or following in tools else after
            from_after = share * scores.get(following, 0.0)
        inherited = max(from_before, from_after) if best_only else from_before + from_after
        out[key] = scores.get(key, 0.0) + inherited
    return out


def substance(text: str, enough: int | None = None) -> float:
    """A prior in ``(0, 1]`` of how much a message says: 1 from ``enough`` topic words on, less below.

    A turn such as "No way!" or "Yo" matches a question only through its speaker's name or its
    neighbours; this keeps such turns from crowding out the ones that hold the answer.
    """
    enough = SUBSTANCE_WORDS if enough is None else enough
    if enough <= 0:
        return 1.0
    share: float = max(1, min(_topic_words(text[:2000]), enough)) / enough
    return float(share**SUBSTANCE_POWER)


@lru_cache(maxsize=4096)
def _topic_words(text: str) -> int:
    """How many topic words ``text`` has (kept per text: a search reads the same turns again and again)."""
    words = _WORD.findall(text)
    if text.isascii():  # no CJK can be in it
        return sum(1 for word in words if len(word) > 2 and word.lower() not in STOPWORDS)
    count = 0
    for word in words:
        if _CJK.search(word):  # written without spaces: about two characters a word
            count += max(1, len(word) // 2)
        elif len(word) > 2 and word.lower() not in STOPWORDS:
            count += 1
    return count


#: What a question about an agent's work asks for: the file a change went to, or what went wrong.
Intent = Literal["file_change", "failure"]

_ASKS_FILE = re.compile(
    r"\b(?:which|what) (?:source )?files?\b|\bin which file\b|\bwhere (?:did|do|have|had|was|were|is) "
    r"(?:we|you|i|they|it|that)\b[^?]{0,80}?\b(?:put|add|added|change|changed|define|defined|edit|edited|"
    r"implement|implemented|write|wrote|written|move|moved|fix|fixed|create|created|patch|patched)\b"
    # as typed into a grep: "files changed for the login fix", "file change add retry", "edited files"
    r"|\bfiles? (?:we |that |i |you )?(?:change|changed|edit|edited|modify|modified|touch|touched|add|added|"
    r"create|created|write|wrote|written|fix|fixed)\b|\b(?:changed|edited|modified|touched|new) files?\b",
    re.I,
)
_ASKS_FAILURE = re.compile(
    r"\berrors?\b|\bfail(?:ed|s|ing|ure)?\b|\bwent wrong\b|\bbroke\b|\bcrash(?:ed|es)?\b|\bexception\b|"
    r"\btraceback\b|\bstack ?trace\b",
    re.I,
)
_TOOL_CALL = re.compile(r"^\[tool call: ([^\]\n]{1,120})\]", re.M)
_FILE_TOOLS = EDIT_TOOLS | WRITE_TOOLS
_SCANNED = FAILURE_SCANNED  # characters of a message read for its kind


def question_intent(text: str) -> Intent | None:
    """Whether ``text`` asks which file a change went to (``file_change``) or what failed (``failure``).

    "Which file did we change to fix the login test?", "where did we put the retry code?" ask for a
    file change; "why did the migration fail?", "what was the error from go test?" for a failure.  A
    question that reads as both asks for the file.
    """
    if _ASKS_FILE.search(text):
        return "file_change"
    if _ASKS_FAILURE.search(text):
        return "failure"
    return None


def _tool_name(label: str) -> str:
    return label.strip().lower().rsplit("__", 1)[-1].rsplit(".", 1)[-1]  # mcp__fs__write_file, functions.edit


def is_tool_record(role: str, content: str) -> bool:
    """Whether a message is a tool's call or a tool's output (a ``tool`` message, or ``[tool call: …]`` in it)."""
    return role == "tool" or "[tool call: " in content[:_SCANNED]


def shows(intent: Intent, role: str, content: str) -> bool:
    """Whether a message is a record of what ``intent`` asks for.

    ``file_change``: a call of a tool that writes or edits a file (:data:`~lossless.parts.EDIT_TOOLS`,
    :data:`~lossless.parts.WRITE_TOOLS`, as the message renders it: ``[tool call: Edit] {…}``), or a
    patch.  ``failure``: a tool's output (a ``tool`` message, or a rendered ``[tool result]`` /
    ``[tool error]``) that reports a failure (an error mark, a non-zero exit code, FAIL, a traceback).
    """
    head = content[:_SCANNED]
    if intent == "file_change":
        if head.startswith("[patch] "):
            return True
        return any(_tool_name(label) in _FILE_TOOLS for label in _TOOL_CALL.findall(head))
    output = role == "tool" or "[tool result]" in head or "[tool error]" in head
    return output and FAILURE.search(head) is not None


def best_first(scores: Mapping[K, float]) -> list[tuple[K, float]]:
    """``(id, score)`` best first; ties keep the order the ids were given in."""
    return sorted(scores.items(), key=lambda kv: -kv[1])
