"""Turning what a user types into safe index queries: full-text parsing and regex literal extraction.

Invariants:

* **User text never becomes raw FTS5 syntax.**  :func:`parse_full_text` accepts
  a small, documented language (words, ``"exact phrases"``, ``prefix*``, ``OR``)
  and emits an FTS5 expression in which every term is a quoted string, so no
  input can reach FTS5's own operators (``NEAR``, column filters, ``^``, …).
  Input outside the language gives a :class:`QuerySyntax` with a message saying
  what to write instead; nothing here raises for bad user text.
* **Pre-filters only ever over-approximate.**  :func:`required_literals`
  returns fragments that *every* match of the regex contains, or nothing; a
  row that the trigram filter drops can never match the pattern.  When in
  doubt (alternation at the top level, unknown escapes), it returns fewer
  fragments, never wrong ones.
* Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from lossless.text import CJK_CHAR

__all__ = [
    "FullTextQuery",
    "QuerySyntax",
    "Term",
    "has_cjk",
    "ignores_case",
    "parse_full_text",
    "required_literals",
    "trigram_expression",
]

#: Most trigrams one fragment contributes to a pre-filter (evenly spread); more only slow the query.
_MAX_TRIGRAMS_PER_FRAGMENT = 6
_MAX_FRAGMENTS = 4


@dataclass(frozen=True, slots=True)
class Term:
    """One searchable unit: a word, or an exact phrase; ``prefix`` matches any word starting with it."""

    text: str
    phrase: bool = False
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class FullTextQuery:
    """A parsed full-text query: any of ``groups`` matches when all of its terms do."""

    groups: tuple[tuple[Term, ...], ...]

    @property
    def terms(self) -> tuple[Term, ...]:
        return tuple(t for group in self.groups for t in group)

    @property
    def cjk(self) -> bool:
        """Whether word search cannot find these terms (CJK text has no spaces between words)."""
        return any(has_cjk(t.text) for t in self.terms)

    def fts_expression(self) -> str:
        """The FTS5 expression for the word index: every term quoted, so no user text is an operator."""

        def one(term: Term) -> str:
            # FTS5 ends a query string at NUL ("unterminated string"); the word index never holds one
            quoted = '"' + term.text.replace('"', '""').replace("\x00", " ") + '"'
            return quoted + "*" if term.prefix else quoted

        parts = [" AND ".join(one(t) for t in group) for group in self.groups]
        if len(parts) == 1:
            return parts[0]
        return " OR ".join(f"({p})" for p in parts)

    def matches_substrings(self, text: str) -> bool:
        """Substring semantics (used for CJK terms): some group has every term in ``text``, ignoring case."""
        folded = text.casefold()
        return any(all(t.text.casefold() in folded for t in group) for group in self.groups)


@dataclass(frozen=True, slots=True)
class QuerySyntax:
    """A full-text query that cannot be run as written, and what to write instead."""

    message: str


_WORDISH = re.compile(r"\w", re.UNICODE)
_HINT = 'write words, "exact phrases", prefix* and OR between alternatives, or use mode="regex"'


def _check_token(token: str, alternatives: bool) -> QuerySyntax | None:
    if "(" in token or ")" in token:
        if token.upper().startswith("NEAR"):
            return QuerySyntax(f"NEAR(…) groups are not supported in full-text queries: {_HINT}")
        if alternatives:  # "(a OR b) c" would group, and a group is not in the language
            return QuerySyntax(f"parentheses do not group alternatives in full-text queries: {_HINT}")
    if token.startswith("*") or "*" in token[:-1]:
        return QuerySyntax(f"'*' must come at the end of a word (prefix search, as in deploy*): {_HINT}")
    return None


def parse_full_text(text: str) -> FullTextQuery | QuerySyntax:
    """Parse a user's full-text query (see the module docstring for the language)."""
    if not text.strip():
        return QuerySyntax(f"the query is empty: {_HINT}")
    if text.count('"') % 2:
        return QuerySyntax(f'the query has an unmatched double quote ("): {_HINT}')
    groups: list[list[Term]] = [[]]
    pending_or = False
    pieces = re.split(r'("[^"]*")', text)
    # Outside a query with OR, parentheses are a sentence's punctuation ("who came (kids and pets)?").
    alternatives = any(token == "OR" for piece in pieces[::2] for token in piece.split())
    for index, piece in enumerate(pieces):
        if index % 2:  # a quoted phrase
            inner = piece[1:-1].strip()
            if _WORDISH.search(inner):
                groups[-1].append(Term(inner, phrase=True))
                pending_or = False
            continue
        for token in piece.split():
            if token == "OR":
                if not groups[-1]:
                    return QuerySyntax(f"OR must stand between two terms: {_HINT}")
                groups.append([])
                pending_or = True
                continue
            problem = _check_token(token, alternatives)
            if problem is not None:
                return problem
            for part in token.replace("(", " ").replace(")", " ").split():
                prefix = part.endswith("*")
                word = part[:-1] if prefix else part
                if not _WORDISH.search(word):
                    continue  # punctuation alone carries nothing searchable
                groups[-1].append(Term(word, prefix=prefix))
                pending_or = False
    if pending_or:
        return QuerySyntax(f"OR must stand between two terms: {_HINT}")
    cleaned = tuple(tuple(g) for g in groups if g)
    if not cleaned:
        return QuerySyntax(f"the query has no searchable words: {_HINT}")
    return FullTextQuery(cleaned)


def has_cjk(text: str) -> bool:
    """Whether ``text`` has Chinese, Japanese or Korean characters (:data:`lossless.text.CJK_CHARS`)."""
    return CJK_CHAR.search(text) is not None


# ---------------------------------------------------------------------- regex literals

_META = set(".^$*+?()[]{}|\\")
#: Escapes that stand for one literal character.
_LITERAL_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v"}


def _skip_group(pattern: str, i: int) -> int:
    """Index just past the group opening at ``pattern[i] == '('``."""
    depth, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":
            i = _skip_class(pattern, i)
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def _skip_class(pattern: str, i: int) -> int:
    """Index just past the character class opening at ``pattern[i] == '['``."""
    n = len(pattern)
    i += 1
    if i < n and pattern[i] == "^":
        i += 1
    if i < n and pattern[i] == "]":
        i += 1
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[" and i + 1 < n and pattern[i + 1] == ":":
            end = pattern.find(":]", i + 2)
            i = n if end < 0 else end + 2
            continue
        if ch == "]":
            return i + 1
        i += 1
    return n


def _quantifier(pattern: str, i: int) -> tuple[int, int] | None:
    """``(min repeats, index after)`` for a quantifier at ``i`` (with any lazy/possessive suffix), or None."""
    n = len(pattern)
    if i >= n:
        return None
    ch = pattern[i]
    if ch in "*?+":
        low, j = (1 if ch == "+" else 0), i + 1
    elif ch == "{":
        match = re.match(r"\{(\d*)(,\d*)?\}", pattern[i:])
        if match is None or (not match.group(1) and not match.group(2)):
            return None
        low, j = int(match.group(1) or 0), i + match.end()
    else:
        return None
    if j < n and pattern[j] in "?+":
        j += 1
    return low, j


def _top_level_alternation(pattern: str) -> bool:
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            i += 2
        elif ch == "[":
            i = _skip_class(pattern, i)
        elif ch == "(":
            i = _skip_group(pattern, i)
        elif ch == "|":
            return True
        else:
            i += 1
    return False


def required_literals(pattern: str) -> list[str]:
    """Literal fragments every match of ``pattern`` must contain (may be empty: then nothing can be pre-filtered).

    Conservative by construction: groups, classes and anything unusual end the
    current fragment and are skipped; an optional item (``?``, ``*``, ``{0,…}``)
    removes the character before it; a repeated item (``+``, ``{n,…}``) ends the
    fragment after its first copy.  A case-insensitive pattern still yields
    fragments: the trigram index is case-insensitive.
    """
    if _top_level_alternation(pattern):
        return []
    fragments: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            fragments.append("".join(current))
            current.clear()

    i, n = 0, len(pattern)
    while i < n:
        atom, i = _next_atom(pattern, i)
        if atom is None:
            flush()
            quant = _quantifier(pattern, i)
            if quant is not None:
                i = quant[1]
            continue
        quant = _quantifier(pattern, i)
        if quant is None:
            current.append(atom)
            continue
        low, i = quant
        if low >= 1:
            current.append(atom)
        flush()
    flush()
    return fragments


def _next_atom(pattern: str, i: int) -> tuple[str | None, int]:
    """The literal character at ``i`` (None for anything else: a class, group, escape class or operator) and the
    index after it (a following quantifier is left for the caller)."""
    ch, n = pattern[i], len(pattern)
    if ch == "\\" and i + 1 < n:
        nxt = pattern[i + 1]
        if nxt in _LITERAL_ESCAPES:
            return _LITERAL_ESCAPES[nxt], i + 2
        if not nxt.isalnum() and nxt != "_":
            return nxt, i + 2
        if nxt in "pPx" and i + 2 < n and pattern[i + 2] == "{":  # \p{Greek}, \x{263a}
            end = pattern.find("}", i + 2)
            return None, n if end < 0 else end + 1
        if nxt == "x":  # \x41: exactly two hex digits (anything else is not a literal we can read)
            digits = pattern[i + 2 : i + 4]
            if len(digits) == 2 and all(c in "0123456789abcdefABCDEF" for c in digits):
                return chr(int(digits, 16)), i + 4
            return None, min(n, i + 4)
        if nxt in "01234567":  # \0, \12, \123: an octal character code of up to three digits
            end = i + 1
            while end < n and end < i + 4 and pattern[end] in "01234567":
                end += 1
            return chr(int(pattern[i + 1 : end], 8)), end
        if nxt == "Q":  # \Q…\E quotes text: skip all of it (it ends the fragment)
            end = pattern.find("\\E", i + 2)
            return None, n if end < 0 else end + 2
        return None, i + 2  # \d, \w, \b, \C …: not a plain literal
    if ch == "[":
        return None, _skip_class(pattern, i)
    if ch == "(":
        return None, _skip_group(pattern, i)
    if ch in _META:
        return None, i + 1
    return ch, i + 1


_FLAGS = re.compile(r"\(\?[a-zA-Z]*i[a-zA-Z]*[:)]")


def ignores_case(pattern: str) -> bool:
    """Whether any part of ``pattern`` matches case-insensitively (an ``(?i)`` or ``(?i:…)`` flag).

    Errs towards True (a flag-like text inside a class or after a backslash counts too): then the
    caller just pre-filters case-insensitively, which is never wrong.
    """
    return _FLAGS.search(pattern) is not None


def trigram_expression(fragments: Sequence[str]) -> str | None:
    """An FTS5 query for the trigram index that every row containing all ``fragments`` matches, or None.

    The index is built with ``detail=none``, which cannot answer phrases, so each
    fragment becomes an AND of (up to a handful of) its trigrams: a superset,
    re-checked against the text by the caller.
    """
    chosen: list[str] = []
    # Fragments are used exactly as written: normalising them (NFC) could miss text stored in another form.
    for fragment in sorted({f for f in fragments if len(f) >= 3}, key=len, reverse=True)[:_MAX_FRAGMENTS]:
        # a trigram with NUL cannot be written in an FTS5 query (it ends the string): leave it to the re-check
        grams = [fragment[k : k + 3] for k in range(len(fragment) - 2) if "\x00" not in fragment[k : k + 3]]
        if len(grams) > _MAX_TRIGRAMS_PER_FRAGMENT:
            step = (len(grams) - 1) / (_MAX_TRIGRAMS_PER_FRAGMENT - 1)
            grams = [grams[round(k * step)] for k in range(_MAX_TRIGRAMS_PER_FRAGMENT)]
        chosen += grams
    unique = list(dict.fromkeys(chosen))
    if not unique:
        return None
    return " AND ".join('"' + g.replace('"', '""') + '"' for g in unique)
