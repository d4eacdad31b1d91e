"""Ranking a question's matches: score fusion, time boosts, neighbour context, what a question asks for.

What a question says (its keywords and its time expressions) is read by :mod:`lossless.questions`,
which the long-term memory search shares; this module fuses the rankers' scores.

Invariants:

* **Pure.**  No I/O; every function is deterministic in its arguments (the time anchor is passed in).
* **Fusion is of normalised scores.**  Each ranking's scores are scaled to ``[0, 1]`` over its own
  candidates (min-max: its best = 1, its worst = 0) before the weighted sum, so one ranker's scale
  never drowns the other's; an id one ranker did not return scores 0 there.  The weights here were
  chosen on the dev split ``benchmarks/data/recall-dev.json`` (docs/retrieval.md has the table),
  never on the test split.
* **Time expressions boost, never filter.**  "in May 2024", "last May", "in 2023", "last month",
  "two weeks ago" become a window (:func:`lossless.questions.time_window`); items inside it get
  :data:`TIME_BOOST` added.  A misread
  expression can only reorder, never hide, a match.
* **What an agent's question asks for.**  :func:`question_intent` reads whether a question asks which
  file a change went to or what failed; :func:`shows` tells whether a message is such a record (a
  file-changing tool call, a failed tool result).  Rankers only *add* to such messages' scores.
* **Neighbour context.**  :func:`with_neighbours` lets a turn inherit a share of the scores of the
  turns before and after it (an answer such as "Yes, we went there last week" is found by what the
  question before it named); it only adds, never removes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Literal, TypeVar

from lossless.parts import EDIT_TOOLS, FAILURE, FAILURE_SCANNED, SHELL_TOOLS, WRITE_TOOLS
from lossless.questions import STOPWORDS
from lossless.text import topic_words

__all__ = [
    "KEYWORD_WEIGHT",
    "NEIGHBOUR_SHARE",
    "TIME_BOOST",
    "Intent",
    "any_word_expression",
    "fuse",
    "is_tool_record",
    "question_intent",
    "shows",
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
    share: float = max(1, min(topic_words(text[:2000], STOPWORDS), enough)) / enough
    return float(share**SUBSTANCE_POWER)


_ASKING = re.compile(r"\?[\s\"'\u201d\u2019)\]]*\Z")


def asks(role: str, text: str) -> bool:
    """Whether a chat turn ends by asking ("How's the knee?"): its last sentence is a question.

    Such a turn names a topic and the answer comes after it ("So much better, the physio helped"); a
    tool's call or output never counts.
    """
    return role in ("user", "assistant") and not is_tool_record(role, text) and _ASKING.search(text) is not None


#: What a question about an agent's work asks for: the file a change went to, what went wrong, what the user
#: said, or the command that was run.
Intent = Literal["file_change", "failure", "request", "command"]

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
# "What did the user ask for?": in an agent's session the user is the human, whose turns are role "user".
_ASKS_REQUEST = re.compile(r"\bthe user\b", re.I)
# A question about a change made, in any shape ("How were the tests changed?", "Which helper did I delete?"):
# asked where neither of the above reads, so "why did lint fail after adding it?" still asks for the failure.
_CHANGE_VERBS = (
    "add|change|remove|delete|rename|move|introduce|replace|patch|restructure|switch|edit|create|write|"
    "relocate|drop|insert|refactor|rewrite|update|fix"
)
_ASKS_CHANGE = re.compile(
    rf"\b(?:{_CHANGE_VERBS})(?:e?d|s|ing)?\b|\b(?:written|wrote|rewritten|rewrote)\b",
    re.I,
)
# A question about a command run ("What command ran the integration tests?", "How were the review comments
# fetched?", "What was run to format the code?"): asked where no file, failure or request reads.
_RUN_VERBS = "run|ran|runs|running|fetch|fetched|invoke|invoked|execute|executed|launch|launched|get|got|list|listed"
_ASKS_COMMAND = re.compile(
    r"\b(?:what|which)\b(?:\s+[\w-]+){0,3}?\s+(?:command|commands|invocation)\b"
    r"|\bwhat (?:was|were|did \w+) (?:run|ran|execute|executed|type|typed)\b"
    rf"|\bhow (?:was|were|did|do|does|is|are)\b[^?]{{0,80}}?\b(?:{_RUN_VERBS})\b",
    re.I,
)
_TOOL_CALL = re.compile(r"^\[tool call: ([^\]\n]{1,120})\]", re.M)
_FILE_TOOLS = EDIT_TOOLS | WRITE_TOOLS
_SCANNED = FAILURE_SCANNED  # characters of a message read for its kind


def question_intent(text: str) -> Intent | None:
    """Whether ``text`` asks which file a change went to (``file_change``) or what failed (``failure``).

    "Which file did we change to fix the login test?", "where did we put the retry code?" ask for a
    file change; "why did the migration fail?", "what was the error from go test?" for a failure.  A
    question that reads as both asks for the file.  Any other question about a change made ("Which
    helper did I delete?", "How were the tests changed?") asks for the file change too: the edit that
    made it is its record.  Any other question about what *the user* asked, wanted or said asks for the
    user's own turns (``request``): "What did the user want changed in the design doc?".  One about a
    command run ("Which command ran the integration tests?", "How were the review comments fetched?")
    asks for the shell tool's call (``command``), before any change it may name ("What was run to fix …").
    """
    if _ASKS_FILE.search(text):
        return "file_change"
    if _ASKS_FAILURE.search(text):
        return "failure"
    if _ASKS_REQUEST.search(text):
        return "request"
    if _ASKS_COMMAND.search(text):
        return "command"
    if _ASKS_CHANGE.search(text):
        return "file_change"
    return None


def _tool_name(label: str) -> str:
    return label.strip().lower().rsplit("__", 1)[-1].rsplit(".", 1)[-1]  # mcp__fs__write_file, functions.edit


def _calls(head: str, tools: AbstractSet[str]) -> bool:
    """Whether ``head`` renders a call of one of ``tools`` (lowercased names, :func:`_tool_name`)."""
    return any(_tool_name(label) in tools for label in _TOOL_CALL.findall(head))


def is_tool_record(role: str, content: str) -> bool:
    """Whether a message is a tool's call or a tool's output (a ``tool`` message, or ``[tool call: …]`` in it)."""
    return role == "tool" or "[tool call: " in content[:_SCANNED]


def is_tool_output(role: str, content: str) -> bool:
    """Whether a message is a tool's output: a ``tool`` message, or a rendered ``[tool result]`` / ``[tool error]``.

    Read from the text, as :func:`shows` reads a record's kind (the index build's
    :func:`lossless.memory.message_index.is_tool_output` reads a stored record's parts instead).
    """
    head = content[:_SCANNED]
    return role == "tool" or "[tool result]" in head or "[tool error]" in head


def shows(intent: Intent, role: str, content: str) -> bool:
    """Whether a message is a record of what ``intent`` asks for.

    ``file_change``: a call of a tool that writes or edits a file (:data:`~lossless.parts.EDIT_TOOLS`,
    :data:`~lossless.parts.WRITE_TOOLS`, as the message renders it: ``[tool call: Edit] {…}``), or a
    patch.  ``failure``: a tool's output (a ``tool`` message, or a rendered ``[tool result]`` /
    ``[tool error]``) that reports a failure (an error mark, a non-zero exit code, FAIL, a traceback).
    ``request``: a turn of the user's own (role ``user``, no tool's call or output in it).  ``command``: a call
    of a tool that runs a shell command (:data:`~lossless.parts.SHELL_TOOLS`: ``[tool call: Bash] {…}``).
    """
    if intent == "request":
        return role == "user" and not is_tool_record(role, content)
    head = content[:_SCANNED]
    if intent == "command":
        return _calls(head, SHELL_TOOLS)
    if intent == "file_change":
        return head.startswith("[patch] ") or _calls(head, _FILE_TOOLS)
    return is_tool_output(role, content) and FAILURE.search(head) is not None


def best_first(scores: Mapping[K, float]) -> list[tuple[K, float]]:
    """``(id, score)`` best first; ties keep the order the ids were given in."""
    return sorted(scores.items(), key=lambda kv: -kv[1])
