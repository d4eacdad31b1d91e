"""An agent's session in its own words: what its user asked for and what it answered, as statements a memory
can hold.

In an agent's session the user's turns are its work orders ("Update the docs, add a table of the
messages, then push."), the choices they made and what they reported ("I don't see anything in the
logs"); the agent's reply that ends its turn holds what it concluded ("PR #162 is the only one that
touches it…").  Later questions ask for exactly these ("what did the user want changed in the docs?").
Told in the third person they lose their substance, so :func:`request_statement` quotes the turn's own
words: ``The user said: "Update the documentation, add a table for messaging.".`` (or ``The user asked:
"…?"`` when the quote ends by asking); :func:`reply_statement` quotes the agent's reply (``The assistant
replied: "…"``) and :func:`refusal_statement` what the user typed when they refused a tool call
(``[tool error] The user doesn't want to proceed … the user said: …``).  Which reply ends a turn is the
extractor's call (:mod:`lossless.memory.extraction`: the user's turn follows it).

Invariants:

* Pure: no I/O; the same text gives the same statement.
* Only the turn's prose is quoted (:func:`~lossless.memory.statements.prose_sentences`): code, logs and
  tool lines it pastes are left out, sentences are kept whole and in order, at most
  :data:`QUOTE_CHARS` characters of them (a first sentence longer than that is cut at a word and ends
  with "…").  The quote never holds a double quote of its own (each becomes a single one).
* Nothing for a turn a harness wrote in the user's name (:func:`by_harness`: markup such as
  ``<command-name>``, a skill's text, "[Request interrupted by user]", the summary of a conversation
  continued), nor for one with fewer than :data:`MIN_WORDS` words that carry something ("push it",
  "yes", "let's do it").
"""

from __future__ import annotations

import re

from lossless.memory.fragments import fragment_reason
from lossless.memory.statements import prose_sentences
from lossless.questions import STOPWORDS
from lossless.text import CJK_CHAR, CJK_RUN

__all__ = ["MIN_WORDS", "QUOTE_CHARS", "by_harness", "refusal_statement", "reply_statement", "request_statement"]

#: Characters of the user's prose a statement quotes.
QUOTE_CHARS = 300
#: Words (not stopwords, three letters or more, in any script) a turn must hold to be remembered.
MIN_WORDS = 3
#: A turn the harness wrote in the user's name: its markup (``<command-name>``, ``<local-command-stdout>``: a
#: compound tag name, so a user's ``<div>`` is not taken for it), a skill's text, an interruption, a summary.
_HARNESS = re.compile(
    r"^\s*(?:<[a-z]+(?:[-_][a-z]+)+>|\[Request interrupted\b|Base directory for this skill:|Caveat: The messages below|"
    r"This session is being continued from a previous conversation)",
    re.I,
)
#: What a tool's output says when the user refused the call, and what they typed with it.
_REFUSAL = re.compile(r"\bthe user doesn't want to proceed with this tool use\b.*?\bthe user said:\s*(.+)", re.I | re.S)
#: A word of three letters or more, in any script written with spaces (a CJK text counts a word per two characters).
_WORD = re.compile(r"[^\W\d_][\w'-]{2,}")
#: A sentence that is no prose: code, a tool's line, or a console's (prompt and result marks).
_NOT_PROSE = ("code", "tool noise")
_CONSOLE = re.compile(r"[⏺⎿❯]|^\$ ")


def by_harness(text: str) -> bool:
    """Whether a turn in the user's name was written by the agent's harness (its markup, a skill, a summary)."""
    return _HARNESS.match(text) is not None


def request_statement(text: str) -> str | None:
    """``The user said: "…"`` (``asked`` when the quote ends with a question) for a user's turn, or ``None``."""
    if by_harness(text):
        return None
    quote = _quote(text)
    if quote is None:
        return None
    verb = "asked" if quote.endswith("?") else "said"
    return f'The user {verb}: "{quote}".'


def reply_statement(text: str) -> str | None:
    """``The assistant replied: "…"`` for the agent's answer that ends its turn (the user speaks next), or ``None``."""
    quote = None if "[tool call: " in text else _quote(text)
    return None if quote is None else f'The assistant replied: "{quote}".'


def refusal_statement(output: str) -> str | None:
    """``The user refused a tool call and said: "…"`` for a tool's output that says so, or ``None``."""
    found = _REFUSAL.search(output)
    if found is None:
        return None
    quote = _quote(found.group(1))
    return None if quote is None else f'The user refused a tool call and said: "{quote}".'


def _quote(text: str) -> str | None:
    """The prose of ``text``, whole sentences up to :data:`QUOTE_CHARS` characters, or ``None`` if it says little."""
    kept: list[str] = []
    size = 0
    for sentence in prose_sentences(text):
        sentence = " ".join(sentence.replace('"', "'").split())
        if _CONSOLE.search(sentence) or fragment_reason(sentence) in _NOT_PROSE:
            continue
        if size + len(sentence) + 1 > QUOTE_CHARS:
            if not kept:  # one long sentence: as much of it as fits, cut at a word
                kept.append(sentence[: QUOTE_CHARS - 1].rsplit(" ", 1)[0].rstrip(" ,;:") + "…")
            break
        kept.append(sentence)
        size += len(sentence) + 1
    quote = " ".join(kept).strip(" '")
    words = [w for w in _WORD.findall(CJK_RUN.sub(" ", quote)) if w.lower() not in STOPWORDS]
    return quote if len(words) + len(CJK_CHAR.findall(quote)) // 2 >= MIN_WORDS else None
