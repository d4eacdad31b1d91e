"""A short extractive answer to a question, from passages of the stored history — no model.

What the offline ``lcm_expand_query`` sub-agent says: the few sentences of the
expanded sources that answer the question, each cited by its message (or
summary) id.  A sentence's score adds up:

* **the question's words it holds**, each weighted by how rare it is among the
  candidate sentences (idf: the name of the thing asked about counts more than
  "went"), with light stemming;
* **the search's opinion**: a prior from the rank of the hit the passage came
  with (passages come best first, found by meaning as well as words); a turn
  read only as a neighbour of a hit gets a smaller one;
* **the answer's type**: a *when* question ("when", "what date", "which day",
  "how long ago") prefers sentences that carry a time; *who* / *where* / *which X*
  ("which employer", "what novel") prefer a name the question does not already
  hold; *how long / how many / how much* a number;
* **the conversation's shape**: the reply to a turn that asked about the
  question's subject inherits part of that turn's score ("Have you been to the
  jazz club?" → "Yes! We went last week…"), while a question itself, and a line
  said again and again in the candidates ("Work was busy but fine."), count less;
* a sentence whose speaker the question names gets a bonus.

The best few are quoted (a short chat message whole), each with its citation and
date; a *when* answer writes the date out: the one a relative time in the
sentence points to ("yesterday" said on 8 May 2023 → 7 May 2023), else the date
the message was written.  Tool calls read as what they did
(``Edit …/hooks.go``), a tool error keeps its message.

Invariants: deterministic; every line cites where it comes from; the answer
fits ``max_tokens`` (lines that do not fit are left out, never cut); at most
:data:`MAX_SENTENCES` lines, the best first.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from lossless.memory.statements import format_date, resolve_dates
from lossless.tokens import TokenCounter

__all__ = ["MAX_SENTENCES", "Passage", "extractive_answer", "is_when_question", "question_kind", "readable"]

MAX_SENTENCES = 5
# Weights chosen on the dev split of the recall datasets (benchmarks/memory_quality.py), never on test.
_PRIOR = 2.0  # the search rank's prior, in units of the rarest question word's weight, over (rank + _PRIOR_K)
_PRIOR_K = 2.0
_NEIGHBOUR_PRIOR = 0.25  # share of the prior a turn read only as a hit's neighbour gets
_SPEAKER_BONUS = 1.0  # a sentence said by the person the question names
_REPLY = 0.8  # share of a matching question-turn's word score its reply inherits
_ASKING = 0.6  # a sentence that is itself a question
_REPEATED = 0.5  # a line found in several candidate messages: × this per extra copy (floor 0.25)
_TYPED = 1.3  # the sentence holds what the question asks for (a time, a name, a number)
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
_WHO = re.compile(r"^\s*(?:who|whom|whose)\b|\b(?:which|what) (?:person|author|friend|name)\b", re.I)
_WHERE = re.compile(r"^\s*where\b|\b(?:which|what) (?:city|country|place|town|restaurant|shop)\b", re.I)
_WHICH = re.compile(
    r"^\s*(?:which|what)\s+(?!(?:is|are|was|were|did|does|do|has|have|had|can|could|would|will|should|kind|sort|type)\b)[a-z]",
    re.I,
)
_AMOUNT = re.compile(r"^\s*how (?:long|many|much|old|far|often)\b", re.I)
_FILE_Q = re.compile(
    r"\b(?:which|what|in which|in what) (?:file|module|script)\b|\bwhere did we (?:put|add|define)\b", re.I
)
_ERROR_Q = re.compile(r"\b(?:error|errors|fail|failed|fails|failing|wrong|broke|broken|crash(?:ed)?)\b", re.I)
_FILE = re.compile(
    r"[\w-]+\.(?:py|go|rs|js|ts|tsx|jsx|java|rb|c|h|cc|cpp|hpp|cs|kt|swift|md|json|ya?ml|toml|sh|sql|txt)\b"
)
_ERROR = re.compile(
    r"\b(?:error|errors|fail|failed|failure|exit code [1-9]\d*|exception|traceback|panic|denied|not found)\b", re.I
)
_TIME = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|last|next|ago|this (?:morning|week|month|year|weekend)|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|may|june|july|"
    r"august|september|october|november|december|(?:19|20)\d{2})\b",
    re.I,
)
_NUMBER = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred|"
    r"dozen|half|once|twice)\b",
    re.I,
)
_NAME = re.compile(r"(?<!^)(?<![.!?]\s)\b[A-Z][\w'-]+")
_TOOL_CALL = re.compile(r"^\[tool call: ([^\]]+)\]\s*(.*)$", re.S)
_TOOL_NOTE = re.compile(r"^\[tool (error|result)\]\s*", re.I)
#: What a tool call's JSON arguments say, in this order (a file, a command, a search …).
_TOOL_KEYS = ("file_path", "path", "command", "pattern", "query", "url", "description")
_STOP = frozenset(
    """a an the and or of to in on at for with is are was were be been it this that what which who whom how why when
    where did does do we you they he she i me my our your their there here from by as about into than then can could
    should would will have has had not no so if but up out its his her them us any some all get got still ever just
    really also very much many more most one ones kind sort thing things""".split()  # noqa: SIM905
)


@dataclass(frozen=True, slots=True)
class Passage:
    """A piece of stored history: where it comes from (``msg#12`` or a summary id), its text, when written.

    ``rank`` is the place of the search hit it came with (best first; ``None``: its place in the list);
    ``context`` marks a turn read only as a neighbour of that hit; ``conversation_id`` lets a reply be
    matched to the turn before it.
    """

    cite: str
    text: str
    created_at: datetime | None = None
    rank: int | None = None
    context: bool = False
    conversation_id: int | None = None


def is_when_question(question: str) -> bool:
    """Whether ``question`` asks for a time."""
    return bool(_WHEN.search(question))


def question_kind(question: str) -> str:
    """What ``question`` asks for: ``when``, ``who``, ``where``, ``amount``, ``file``, ``error``, ``which``
    (a thing by its kind: "which employer", "what novel") or ``what``."""
    if _WHEN.search(question):
        return "when"
    if _WHO.search(question):
        return "who"
    if _WHERE.search(question):
        return "where"
    if _AMOUNT.search(question):
        return "amount"
    if _FILE_Q.search(question):
        return "file"
    if _ERROR_Q.search(question):
        return "error"
    if _WHICH.search(question):
        return "which"
    return "what"


def _stem(word: str) -> str:
    word = word.casefold()
    for suffix in ("ing", "ies", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def _terms(text: str) -> set[str]:
    return {_stem(w) for w in _WORD.findall(text) if w.casefold() not in _STOP and len(w) > 1}


def readable(text: str) -> str:
    """A message as a person would quote it: a tool call as its tool and main arguments, a tool note unwrapped."""
    text = text.strip()
    call = _TOOL_CALL.match(text)
    if call:
        name, raw = call.group(1).strip(), call.group(2).strip()
        try:
            arguments = json.loads(raw)
        except ValueError:
            return f"{name}: {raw}"
        if not isinstance(arguments, dict):
            return f"{name}: {raw}"
        said = [str(arguments[k]) for k in _TOOL_KEYS if isinstance(arguments.get(k), str | int) and arguments[k]]
        return f"{name}: {' — '.join(said)}" if said else f"{name}: {raw}"
    note = _TOOL_NOTE.match(text)
    if note:
        return f"Tool {note.group(1).lower()}: {text[note.end() :]}"
    return text.replace("**", "")


@dataclass(frozen=True, slots=True)
class _Sentence:
    order: int
    passage: int
    cite: str
    speaker: str | None
    text: str
    created_at: datetime | None
    terms: frozenset[str]
    rank: int
    context: bool
    #: The whole message when it is short (a chat turn reads best whole), else the sentence itself.
    unit: str


def _sentences(passages: Sequence[Passage]) -> list[_Sentence]:
    out: list[_Sentence] = []
    for index, passage in enumerate(passages):
        text = readable(passage.text)
        speaker = None
        named = _SPEAKER.match(text)
        if named:
            speaker, text = named.group(1), text[named.end() :]
        whole = " ".join(text.split())
        rank = index if passage.rank is None else passage.rank
        for piece in _SPLIT.split(text):
            piece = " ".join(piece.split())
            if len(piece) < 3 or piece.startswith(("{", "```")):
                continue
            if len(piece) > 400:
                piece = piece[:400].rsplit(" ", 1)[0] + " …"
            unit = whole if len(whole) <= SHORT_MESSAGE_CHARS else piece
            terms = frozenset(_terms(piece))
            at = (passage.cite, speaker, piece, passage.created_at, terms, rank, passage.context, unit)
            out.append(_Sentence(len(out), index, *at))
    return out


def _typed(kind: str, sentence: _Sentence, question_names: set[str]) -> bool:
    """Whether ``sentence`` holds the kind of thing the question asks for."""
    if kind == "when":
        return bool(_TIME.search(sentence.text))
    if kind == "amount":
        return bool(_NUMBER.search(sentence.text))
    if kind == "file":
        return bool(_FILE.search(sentence.text))
    if kind == "error":
        return bool(_ERROR.search(sentence.text))
    if kind in ("who", "where", "which"):
        return any(name.casefold() not in question_names for name in _NAME.findall(sentence.text))
    return False


def _message_number(cite: str) -> int | None:
    return int(cite[4:]) if cite.startswith("msg#") and cite[4:].isdigit() else None


def _replies(passages: Sequence[Passage]) -> dict[int, int]:
    """Passage index → the index of the turn right before it in the same conversation, among the passages."""
    placed = sorted(
        (passage.conversation_id or 0, number, index)
        for index, passage in enumerate(passages)
        if (number := _message_number(passage.cite)) is not None
    )
    return {
        index: before[2]
        for before, (conversation, number, index) in itertools.pairwise(placed)
        if before[0] == conversation and number - before[1] <= 2
    }


def _line(sentence: _Sentence, when: bool) -> str:
    said = f"{sentence.speaker}: " if sentence.speaker else ""
    if sentence.created_at is None:
        return f"[{sentence.cite}] {said}{sentence.unit}"
    resolved, moved = resolve_dates(sentence.unit, sentence.created_at)
    date = format_date(sentence.created_at)
    if when and moved:
        return f"[{sentence.cite}] {said}{resolved} (said on {date})"
    return f"[{sentence.cite}] On {date}, {said}{resolved if moved else sentence.unit}"


@dataclass(frozen=True, slots=True)
class _Question:
    """What scoring needs to know about the question and the candidates, computed once."""

    weight: dict[str, float]
    top: float
    names: set[str]
    kind: str
    words: dict[int, float]  # sentence order → the question's words it holds, weighted
    asked: dict[int, float]  # passage → its word score, when it asks a question or calls a tool
    before: dict[int, int]  # passage → the turn before it among the passages
    repeated: Counter[str]  # a line (case folded) → how many candidate messages say it


def _understand(question: str, passages: Sequence[Passage], sentences: Sequence[_Sentence], ranked: bool) -> _Question:
    wanted = _terms(question)
    frequency: Counter[str] = Counter(t for s in sentences for t in s.terms & wanted)
    weight = {t: math.log(1 + len(sentences) / (1 + frequency[t])) for t in wanted}
    words = {s.order: sum(weight[t] for t in s.terms & wanted) for s in sentences}
    asked: dict[int, float] = {}
    for sentence in sentences:
        calls = passages[sentence.passage].text.startswith("[tool call:")
        if (calls or sentence.text.endswith("?")) and words[sentence.order] > 0:
            asked[sentence.passage] = max(asked.get(sentence.passage, 0.0), words[sentence.order])
    # How many candidate messages say the same line: small talk repeats, facts rarely do.
    copies = {(s.passage, s.unit.casefold()) for s in sentences}
    return _Question(
        weight=weight,
        top=max(weight.values()),
        names={w.casefold() for w in re.findall(r"\b[A-Z][a-z]+\b", question)},
        kind=question_kind(question),
        words=words,
        asked=asked,
        before=_replies(passages) if ranked else {},
        repeated=Counter(unit for _, unit in copies),
    )


def _score(sentence: _Sentence, asking: _Question, passages: Sequence[Passage], ranked: bool) -> float:
    """How well ``sentence`` answers (0: not at all)."""
    score = asking.words[sentence.order]
    previous = asking.before.get(sentence.passage)
    if previous is not None and previous in asking.asked and not sentence.text.endswith("?"):
        asker = _SPEAKER.match(passages[previous].text)
        if asker is None or sentence.speaker != asker.group(1):
            score += _REPLY * asking.asked[previous]
    if score <= 0 and len(sentence.terms) < _MIN_TERMS:
        return 0.0  # "Love that for you." answers nothing, however high the search put it
    # The passages come best first from the search that found them (by meaning too): its order counts.
    if ranked:
        score += (_NEIGHBOUR_PRIOR if sentence.context else 1.0) * _PRIOR * asking.top / (_PRIOR_K + sentence.rank)
    if score <= 0:
        return 0.0
    if sentence.speaker and sentence.speaker.casefold() in asking.names:
        score += _SPEAKER_BONUS * asking.top
    if _typed(asking.kind, sentence, asking.names):
        score *= _TYPED
    if sentence.text.endswith("?"):
        score *= _ASKING
    extra = asking.repeated[sentence.unit.casefold()] - 1
    if extra > 0:
        score *= max(0.25, _REPEATED**extra)
    return score


def extractive_answer(
    question: str, passages: Sequence[Passage], counter: TokenCounter, max_tokens: int, *, ranked: bool = True
) -> tuple[str, tuple[str, ...]] | None:
    """(answer text, cited ids), or ``None`` when no sentence answers.

    ``ranked``: the passages come best first from a search (their order is a prior); else they are
    in conversation order (an expanded summary) and only the question's words count.
    """
    sentences = _sentences(passages)
    if not sentences or not _terms(question):
        return None
    asking = _understand(question, passages, sentences, ranked)
    scored = [(score, s.order, s) for s in sentences if (score := _score(s, asking, passages, ranked)) > 0]
    if not scored:
        return None
    scored.sort(key=lambda item: (-item[0], item[1]))
    best = scored[0][0]
    budget = max_tokens - 4
    lines: list[str] = []
    cited: list[str] = []
    used: set[str] = set()  # the same words said in several messages are quoted once
    for score, _, sentence in scored:
        if len(lines) == MAX_SENTENCES or score < _KEEP * best:
            break
        said = " ".join(_WORD.findall(sentence.unit.casefold()))
        if said in used:
            continue
        used.add(said)
        line = _line(sentence, asking.kind == "when")
        cost = counter.count(line) + 1
        if cost > budget:
            continue
        budget -= cost
        lines.append(line)
        cited.append(sentence.cite)
    if not lines:
        return None
    return "\n".join(lines), tuple(dict.fromkeys(cited))
