"""A short extractive answer to a question, from passages of the stored history — no model.

What the offline ``lcm_expand_query`` sub-agent says: the few sentences of the
expanded sources that answer the question, each cited by its message (or
summary) id.  Sentences are scored by the question's words they hold, each
weighted by how rare it is among the candidate sentences (so the name of the
thing asked about counts more than "went"), with light stemming, plus a prior
from the passage's rank in the search that found it (passages come best
first, found by meaning as well as words); a sentence whose speaker the
question names gets a bonus.  A *when* question ("when",
"what date", "which day", "how long ago") prefers sentences that carry a time
and answers with the date written out: the date a relative time in the
sentence points to ("yesterday" said on 8 May 2023 → 7 May 2023), else the
date the message was written.

Invariants: deterministic; every line cites where it comes from; the answer
fits ``max_tokens`` (lines that do not fit are left out, never cut); at most
:data:`MAX_SENTENCES` sentences (or short messages), the best first.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from lossless.memory.statements import format_date, resolve_dates
from lossless.tokens import TokenCounter

__all__ = ["MAX_SENTENCES", "Passage", "extractive_answer", "is_when_question"]

MAX_SENTENCES = 4
# Weights chosen on the dev split of the recall datasets (benchmarks/memory_quality.py), never on test.
_PRIOR = 2.0  # the search rank's prior, in units of the rarest question word's weight, over (rank + 2)
_PRIOR_K = 2.0
_SPEAKER_BONUS = 0.5  # a sentence said by the person the question names
_KEEP = 0.3  # lines below this share of the best score are left out
_MIN_TERMS = 3  # a sentence with none of the question's words must have this many words of its own
#: A message up to this long is quoted whole when one of its sentences answers.
SHORT_MESSAGE_CHARS = 300
_SPLIT = re.compile(r"(?<=[.!?。！？])[\"'’”)]*\s+|\n+")
_SPEAKER = re.compile(r"^\s*([A-Z][\w.'-]{1,30}(?: [A-Z][\w.'-]{1,30})?):\s+")
_WORD = re.compile(r"[^\W_]+", re.U)
_WHEN = re.compile(
    r"^\s*when\b|\bwhat (?:date|day|time|month|year)\b|\bwhich (?:date|day|month|year)\b|\bhow long ago\b", re.I
)
_TIME = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|last|next|ago|this (?:morning|week|month|year|weekend)|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|may|june|july|"
    r"august|september|october|november|december|(?:19|20)\d{2})\b",
    re.I,
)
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "with",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "this",
        "that",
        "what",
        "which",
        "who",
        "whom",
        "how",
        "why",
        "when",
        "where",
        "did",
        "does",
        "do",
        "we",
        "you",
        "they",
        "he",
        "she",
        "i",
        "me",
        "my",
        "our",
        "your",
        "their",
        "there",
        "here",
        "from",
        "by",
        "as",
        "about",
        "into",
        "than",
        "then",
        "can",
        "could",
        "should",
        "would",
        "will",
        "have",
        "has",
        "had",
        "not",
        "no",
        "so",
        "if",
        "but",
        "up",
        "out",
        "its",
        "his",
        "her",
        "them",
        "us",
        "any",
        "some",
        "all",
        "get",
        "got",
        "still",
        "ever",
        "just",
        "really",
        "also",
        "very",
        "much",
        "many",
        "more",
        "most",
        "one",
        "ones",
        "kind",
        "sort",
        "thing",
        "things",
    ]
)


@dataclass(frozen=True, slots=True)
class Passage:
    """A piece of stored history: where it comes from (``msg#12`` or a summary id), its text, when written."""

    cite: str
    text: str
    created_at: datetime | None = None


def is_when_question(question: str) -> bool:
    """Whether ``question`` asks for a time."""
    return bool(_WHEN.search(question))


def _stem(word: str) -> str:
    word = word.casefold()
    for suffix in ("ing", "ies", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def _terms(text: str) -> set[str]:
    return {_stem(w) for w in _WORD.findall(text) if w.casefold() not in _STOP and len(w) > 1}


@dataclass(frozen=True, slots=True)
class _Sentence:
    order: int
    cite: str
    speaker: str | None
    text: str
    created_at: datetime | None
    terms: frozenset[str]
    rank: int
    #: The whole message when it is short (a chat turn reads best whole), else the sentence itself.
    unit: str


def _sentences(passages: Sequence[Passage]) -> list[_Sentence]:
    out: list[_Sentence] = []
    for rank, passage in enumerate(passages):
        text = passage.text.strip()
        speaker = None
        named = _SPEAKER.match(text)
        if named:
            speaker, text = named.group(1), text[named.end() :]
        whole = " ".join(text.split())
        for piece in _SPLIT.split(text):
            piece = " ".join(piece.split())
            if len(piece) < 3 or piece.startswith(("[tool", "{", "```")):
                continue
            if len(piece) > 400:
                piece = piece[:400].rsplit(" ", 1)[0] + " …"
            unit = whole if len(whole) <= SHORT_MESSAGE_CHARS else piece
            out.append(
                _Sentence(
                    len(out), passage.cite, speaker, piece, passage.created_at, frozenset(_terms(piece)), rank, unit
                )
            )
    return out


def _line(sentence: _Sentence, when: bool) -> str:
    said = f"{sentence.speaker}: " if sentence.speaker else ""
    if sentence.created_at is None:
        return f"[{sentence.cite}] {said}{sentence.unit}"
    resolved, moved = resolve_dates(sentence.unit, sentence.created_at)
    date = format_date(sentence.created_at)
    if when and moved:
        return f"[{sentence.cite}] {said}{resolved} (said on {date})"
    return f"[{sentence.cite}] On {date}, {said}{resolved if moved else sentence.unit}"


def extractive_answer(
    question: str, passages: Sequence[Passage], counter: TokenCounter, max_tokens: int, *, ranked: bool = True
) -> tuple[str, tuple[str, ...]] | None:
    """(answer text, cited ids), or ``None`` when no sentence answers.

    ``ranked``: the passages come best first from a search (their order is a prior); else they are
    in conversation order (an expanded summary) and only the question's words count.
    """
    sentences = _sentences(passages)
    wanted = _terms(question)
    if not sentences or not wanted:
        return None
    frequency: Counter[str] = Counter(t for s in sentences for t in s.terms & wanted)
    weight = {t: math.log(1 + len(sentences) / (1 + frequency[t])) for t in wanted}
    names = {w.casefold() for w in re.findall(r"\b[A-Z][a-z]+\b", question)}
    when = is_when_question(question)
    top = max(weight.values())
    scored: list[tuple[float, int, _Sentence]] = []
    for sentence in sentences:
        score = sum(weight[t] for t in sentence.terms & wanted)
        if score <= 0 and len(sentence.terms) < _MIN_TERMS:
            continue  # "Love that for you." answers nothing, however high the search put it
        # The passages come best first from the search that found them (by meaning too): its order counts.
        score += _PRIOR * top / (_PRIOR_K + sentence.rank) if ranked else 0.0
        if score <= 0:
            continue
        if sentence.speaker and sentence.speaker.casefold() in names:
            score += _SPEAKER_BONUS * top
        if when and _TIME.search(sentence.text):
            score *= 1.25
        scored.append((score, sentence.order, sentence))
    if not scored:
        return None
    scored.sort(key=lambda item: (-item[0], item[1]))
    best = scored[0][0]
    budget = max_tokens - 4
    lines: list[str] = []
    cited: list[str] = []
    used: set[tuple[str, str]] = set()
    for score, _, sentence in scored:
        if len(lines) == MAX_SENTENCES or score < _KEEP * best:
            break
        if (sentence.cite, sentence.unit) in used:
            continue
        used.add((sentence.cite, sentence.unit))
        line = _line(sentence, when)
        cost = counter.count(line) + 1
        if cost > budget:
            continue
        budget -= cost
        lines.append(line)
        cited.append(sentence.cite)
    if not lines:
        return None
    return "\n".join(lines), tuple(dict.fromkeys(cited))
