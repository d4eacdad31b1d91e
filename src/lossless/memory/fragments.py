"""Is a text a whole statement, or a fragment? The check every extracted memory passes.

A memory must read on its own, weeks later, without the conversation around
it.  :func:`fragment_reason` names what makes a text a fragment, or returns
``None`` for a complete statement:

* ``empty`` / ``too short`` — fewer than three words (CJK: fewer than four characters);
* ``heading`` — a markdown heading, a bold label (``**Root cause**:``) or a text
  ending in a colon (a list's stub);
* ``list stub`` — starts with a bullet or a number of a list;
* ``code`` / ``tool noise`` — code fences, statements of code, tool-call
  markers, JSON, tracebacks, shell prompts;
* ``no verb`` / ``no subject`` — no verb found, or the verb comes first (an
  instruction or a clipped clause, not a statement about someone);
* ``unfinished`` — does not end as a sentence (``.``, ``!``, ``?`` or their CJK
  forms, possibly inside a closing quote or bracket), or ends in an ellipsis.

Invariants: pure and deterministic (no I/O, no model); English texts get the
grammar checks, texts mostly in Chinese, Japanese or Korean only the shape
checks (their verbs are not found by word lists).
"""

from __future__ import annotations

import re

from lossless.text import CJK_CHAR

__all__ = ["fragment_reason", "is_fragment"]

_CJK = CJK_CHAR
_HEADING = re.compile(r"^\s*(?:#{1,6}\s|\*\*[^*]+\*\*\s*:?\s*$|\*\*[^*]+:\*\*|__[^_]+__\s*:)|:\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+•]\s|\d{1,3}[.)]\s|\[[ xX]\]\s)")
_CODE = re.compile(
    r"```|^\s*(?:def|class|import|from \S+ import|function|const|let|var|return|if \(|for \(|#include"
    r"|SELECT\s.+\sFROM)\b"
    r"|(?:\b\d+:\s.*){3}|\s//\s|[;{}]\s*$|=>|\)\s*\{|==|!=|:=|\b\w+\([^()]*\)\s*[;{]|^\s*[$>]\s",
    re.I,
)
_TOOL = re.compile(
    r"\[tool (?:call|result|error)|Traceback \(most recent|^\s*[{\[]\s*\"|<\/?[a-z_]+>|^\s*\[\w+\]", re.I
)
_END = re.compile(r"[.!?。！？][\"'’”)\]]*\s*$")
_ELLIPSIS = re.compile(r"(?:\.\.\.|…)[\"'’”)\]]*\s*$")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")

_AUX = frozenset(
    [
        "am",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "has",
        "have",
        "had",
        "do",
        "does",
        "did",
        "will",
        "would",
        "shall",
        "should",
        "can",
        "could",
        "may",
        "might",
        "must",
        "isn't",
        "aren't",
        "wasn't",
        "weren't",
        "hasn't",
        "haven't",
        "hadn't",
        "doesn't",
        "don't",
        "didn't",
        "won't",
        "wouldn't",
        "can't",
        "couldn't",
        "shouldn't",
        "'s",
        "'re",
        "'ve",
        "'d",
        "'ll",
    ]
)
# Verbs common in what people tell each other and in agent work, base forms; inflections are derived.
_VERBS = frozenset(
    [
        "accept",
        "add",
        "adopt",
        "agree",
        "allow",
        "announce",
        "answer",
        "appear",
        "apply",
        "arrive",
        "ask",
        "attend",
        "avoid",
        "bake",
        "become",
        "begin",
        "believe",
        "belong",
        "borrow",
        "break",
        "bring",
        "build",
        "buy",
        "call",
        "care",
        "carry",
        "catch",
        "cause",
        "celebrate",
        "change",
        "check",
        "choose",
        "clean",
        "close",
        "collect",
        "come",
        "commit",
        "compare",
        "complete",
        "consider",
        "contain",
        "continue",
        "cook",
        "cost",
        "create",
        "cut",
        "dance",
        "deal",
        "decide",
        "delete",
        "deliver",
        "depend",
        "deploy",
        "describe",
        "design",
        "die",
        "discover",
        "discuss",
        "dislike",
        "do",
        "draw",
        "dream",
        "drink",
        "drive",
        "drop",
        "eat",
        "enjoy",
        "enter",
        "explain",
        "fail",
        "fall",
        "feel",
        "fight",
        "fill",
        "find",
        "finish",
        "fit",
        "fix",
        "fly",
        "follow",
        "forget",
        "found",
        "get",
        "give",
        "go",
        "graduate",
        "grow",
        "hate",
        "have",
        "hear",
        "help",
        "hike",
        "hire",
        "hit",
        "hold",
        "hope",
        "host",
        "hurt",
        "identify",
        "implement",
        "improve",
        "include",
        "install",
        "introduce",
        "invite",
        "join",
        "keep",
        "kill",
        "know",
        "land",
        "last",
        "learn",
        "leave",
        "let",
        "like",
        "listen",
        "live",
        "look",
        "lose",
        "love",
        "make",
        "marry",
        "mean",
        "meet",
        "merge",
        "migrate",
        "miss",
        "move",
        "name",
        "need",
        "open",
        "organize",
        "own",
        "paint",
        "pass",
        "pay",
        "pick",
        "plan",
        "play",
        "practice",
        "prefer",
        "prepare",
        "promote",
        "publish",
        "put",
        "quit",
        "reach",
        "read",
        "realize",
        "receive",
        "recommend",
        "record",
        "reduce",
        "refactor",
        "release",
        "remember",
        "remove",
        "rename",
        "rent",
        "repair",
        "replace",
        "report",
        "require",
        "resolve",
        "rest",
        "retire",
        "return",
        "review",
        "ride",
        "run",
        "save",
        "say",
        "schedule",
        "see",
        "seem",
        "sell",
        "send",
        "serve",
        "set",
        "share",
        "ship",
        "show",
        "sign",
        "sing",
        "sit",
        "sleep",
        "solve",
        "speak",
        "spend",
        "start",
        "stay",
        "stop",
        "struggle",
        "study",
        "succeed",
        "suggest",
        "support",
        "swim",
        "switch",
        "take",
        "talk",
        "teach",
        "tell",
        "test",
        "think",
        "throw",
        "train",
        "travel",
        "try",
        "turn",
        "understand",
        "upgrade",
        "use",
        "visit",
        "volunteer",
        "wait",
        "wake",
        "walk",
        "want",
        "watch",
        "wear",
        "win",
        "wish",
        "work",
        "worry",
        "write",
    ]
)
_IRREGULAR_PAST = frozenset(
    [
        "became",
        "began",
        "bought",
        "brought",
        "built",
        "came",
        "caught",
        "chose",
        "did",
        "drank",
        "drew",
        "drove",
        "ate",
        "fell",
        "felt",
        "fought",
        "found",
        "flew",
        "forgot",
        "got",
        "gave",
        "went",
        "grew",
        "had",
        "heard",
        "held",
        "hurt",
        "kept",
        "knew",
        "left",
        "lent",
        "lost",
        "made",
        "meant",
        "met",
        "paid",
        "put",
        "quit",
        "read",
        "rode",
        "ran",
        "said",
        "saw",
        "sold",
        "sent",
        "set",
        "showed",
        "sat",
        "slept",
        "spoke",
        "spent",
        "stood",
        "swam",
        "took",
        "taught",
        "told",
        "thought",
        "threw",
        "understood",
        "woke",
        "wore",
        "won",
        "wrote",
        "gone",
        "done",
        "seen",
        "taken",
        "given",
        "known",
        "written",
        "broken",
        "chosen",
    ]
)
_NOT_VERBS = frozenset(
    [
        "this",
        "his",
        "its",
        "yes",
        "less",
        "unless",
        "always",
        "perhaps",
        "news",
        "bus",
        "gas",
        "was",
        "thus",
        "chaos",
        "series",
        "analysis",
        "status",
        "process",
        "class",
        "address",
        "business",
        "across",
        "plus",
    ]
)


_SUBJECTS = frozenset(["i", "he", "she", "it", "they", "we", "you", "this", "that", "there"])


def _is_verb(word: str) -> bool:
    w = word.lower().strip("'’")
    if w in _AUX or w in _IRREGULAR_PAST or w in _VERBS:
        return True
    if w.endswith(("n't", "n’t")):
        return True
    if w in _NOT_VERBS or len(w) < 4:
        return False
    for stem in (w[:-1], w[:-2], w[:-3] + "y" if w.endswith("ies") else "", w[:-2] if w.endswith("ed") else ""):
        if stem and stem in _VERBS:
            return True
    if w.endswith("ed") and len(w) > 4:
        return True
    if w.endswith("ing") and len(w) > 5:
        return w[:-3] in _VERBS or w[:-3] + "e" in _VERBS or (len(w) > 6 and w[-4] == w[-5] and w[:-4] in _VERBS)
    return False


def fragment_reason(text: str) -> str | None:
    """Why ``text`` is a fragment rather than a statement (``None``: it is a complete statement)."""
    stripped = " ".join(text.split())
    if not stripped:
        return "empty"
    if _HEADING.search(stripped):
        return "heading"
    if _BULLET.match(stripped):
        return "list stub"
    if _TOOL.search(stripped):
        return "tool noise"
    if _CODE.search(stripped):
        return "code"
    symbols = sum(stripped.count(c) for c in "(){}[]=<>;|\\$#@`")
    if symbols >= 4 and symbols > 0.06 * len(stripped):
        return "code"
    if _ELLIPSIS.search(stripped):
        return "unfinished"
    cjk = len(_CJK.findall(stripped))
    if cjk * 2 >= len(stripped.replace(" ", "")):
        if cjk < 4:
            return "too short"
        return None if _END.search(stripped) or stripped[-1] in "。！？" else "unfinished"
    words = _WORD.findall(re.sub(r"\([^()]*\)", " ", stripped))  # a parenthesis is no part of the clause
    if len(words) < 3:
        return "too short"
    if not _END.search(stripped):
        return "unfinished"
    verbs = [i for i, w in enumerate(words) if _is_verb(w)]
    if not verbs:
        return "no verb"
    first = words[0].lower()
    if verbs[0] == 0 and first not in ("there", "here"):
        later = any(words[v - 1].lower() in _SUBJECTS or words[v - 1][:1].isupper() for v in verbs[1:])
        if not later:
            return "no subject"
    return None


def is_fragment(text: str) -> bool:
    """Whether ``text`` fails :func:`fragment_reason`."""
    return fragment_reason(text) is not None
