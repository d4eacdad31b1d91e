"""Words and CJK text: the one tokenizer the keyword searches, the relevance ranking and the hash embedder share.

Invariants:

* One definition of CJK text (:data:`CJK_CHARS`), so what one search, ranker, embedder or memory
  check treats as CJK every other one does.
* Words are ``\\w+`` runs, lower-cased by the callers that compare them; CJK text has no spaces
  between words, so a run of CJK characters is split into overlapping character bigrams
  (:func:`cjk_bigrams`), or kept whole where a search matches substrings (:func:`keyword_terms`).
* **Identifiers are indexed by their words too.**  :func:`indexed_text` is a text followed by the
  words of its identifiers (:func:`identifier_words`: ``outputHookMessage`` → ``output Hook
  Message``, ``golangci-lint`` → ``golangci lint``, ``cli/manual_commit.go`` → ``cli manual commit
  go``), so a question's words find them; the text itself comes first, unchanged, so every word of
  it is still indexed as before.  The rules use ASCII character classes only and read the same as
  a Python and a PostgreSQL regular expression (:data:`IDENTIFIER_PATTERN` and friends), so the
  PostgreSQL word index computes exactly what :func:`identifier_words` does.
* **A word a JSON escape hides is indexed too (messages).**  A tool call is stored with its arguments
  as JSON, where each line of code starts after an escape (``"func a() {\\n\\tif x {\\n\\t\\tGetOrCreate(id)"``):
  both word indexes read ``\\tif`` as the word ``tif``, so ``GetOrCreate`` and ``if`` were not found in
  the edit that wrote them.  :func:`indexed_message_text` adds the words after such escapes
  (:func:`escaped_words`, :data:`ESCAPED_WORD`: ``\\n``, ``\\t``, ``\\r``, ``\\b`` or ``\\f``
  followed by letters or digits), after the text and its identifiers' words, which stay as they were.
  A backslash that is no escape (``C:\\new``) adds a stray word (``ew``) and hides nothing.
* Pure functions of their input: no I/O, no state.
"""

from __future__ import annotations

import itertools
import re
from functools import lru_cache

__all__ = [
    "CJK_CHAR",
    "CJK_CHARS",
    "CJK_RUN",
    "ESCAPED_WORD",
    "IDENTIFIER_ACRONYM",
    "IDENTIFIER_CAMEL",
    "IDENTIFIER_PATTERN",
    "IDENTIFIER_SEPARATORS",
    "IDENTIFIER_SPLIT",
    "IDENTIFIER_SPLITTING",
    "STOP_WORDS",
    "WORD",
    "cjk_bigrams",
    "escaped_words",
    "identifier_words",
    "indexed_message_text",
    "indexed_text",
    "keyword_terms",
    "search_terms",
    "topic_words",
]

#: The character ranges treated as CJK text (for a regex character class): radicals, kana, bopomofo,
#: CJK ideographs (extension A, the unified block, the compatibility block and the supplementary
#: planes), Hangul syllables and half-width katakana.  CJK punctuation (U+3000–U+303F) is not text.
CJK_CHARS = (
    "\u2e80-\u2fdf\u3040-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003ffff"
)
#: One CJK character.
CJK_CHAR = re.compile(f"[{CJK_CHARS}]")
#: A run of CJK characters.
CJK_RUN = re.compile(f"[{CJK_CHARS}]+")
#: A word (letters, digits, underscore, in any script).
WORD = re.compile(r"\w+")
_CJK_SPLIT = re.compile(f"([{CJK_CHARS}]+)")
_MAX_TERMS = 32

_STOP_TEXT = """
a about an and any are as at be been but by can could did do does for from had has have how i if in into is it
its me my of on or our should so than that the their them then there these they this to was we were what when
where which who why will with would you your
"""
#: English function words left out of keyword queries (they match nearly every text).
STOP_WORDS = frozenset(_STOP_TEXT.split())


def cjk_bigrams(run: str) -> list[str]:
    """The overlapping character bigrams of a CJK run (a one-character run is itself)."""
    return [a + b for a, b in itertools.pairwise(run)] or ([run] if run else [])


def search_terms(text: str) -> list[str]:
    """Ranking terms: lower-cased words; each run of CJK characters inside a word becomes its bigrams."""
    out: list[str] = []
    for word in WORD.findall(text.lower()):
        for index, piece in enumerate(_CJK_SPLIT.split(word)):
            if not piece:
                continue
            if index % 2:  # a CJK run (split() puts captured runs at odd positions)
                out += cjk_bigrams(piece)
            else:
                out.append(piece)
    return out


def keyword_terms(query: str, max_terms: int = _MAX_TERMS) -> tuple[list[str], list[str]]:
    """(word terms, CJK runs) of a keyword query; words lower-cased and unique, both capped at ``max_terms``."""
    cjk = CJK_RUN.findall(query)
    rest = CJK_RUN.sub(" ", query)
    words = list(dict.fromkeys(w.lower() for w in WORD.findall(rest)))
    return words[:max_terms], cjk[:max_terms]


# ---------------------------------------------------------------------- identifiers

#: Characters that join the words of an identifier: snake_case, kebab-case, dotted names, paths
#: (``/`` and ``\\``), ``std::vector``.  Each becomes a space in an identifier's words.
IDENTIFIER_SEPARATORS = "_./\\:-"
_SEPARATOR_CLASS = "[_./\\\\:-]"
#: A compound: ASCII letters and digits, joined by separators (never starting or ending with one).
IDENTIFIER_PATTERN = f"[A-Za-z0-9]+(?:{_SEPARATOR_CLASS}+[A-Za-z0-9]+)*"
#: A compound that splits into more than one word: a separator, a lower-case letter or digit followed
#: by a capital (``outputHook``, ``utf8Encode``), or an acronym followed by a word (``HTTPServer``).
IDENTIFIER_SPLIT = f"{_SEPARATOR_CLASS}|[a-z0-9][A-Z]|[A-Z][A-Z][a-z]"
#: camelCase: a space between a lower-case letter or digit and the capital after it (``\\1 \\2``).
IDENTIFIER_CAMEL = "([a-z0-9])([A-Z])"
#: An acronym before a word: a space before the acronym's last capital (``HTTPServer`` → ``HTTP Server``).
IDENTIFIER_ACRONYM = "([A-Z])([A-Z][a-z])"

#: The compounds that split (those :data:`IDENTIFIER_PATTERN` matches and :data:`IDENTIFIER_SPLIT`
#: finds something in), found in one pass: a compound starts after no letter or digit, splits if a
#: camelCase or acronym boundary is in its first run or a separator and a letter or digit follow
#: that run, and is taken whole (greedy, and nothing after it: the longest match).
IDENTIFIER_SPLITTING = (
    "(?<![A-Za-z0-9])"
    f"(?=[A-Za-z0-9]*(?:[a-z0-9][A-Z]|[A-Z][A-Z][a-z]|[A-Za-z0-9]{_SEPARATOR_CLASS}+[A-Za-z0-9]))"
    f"{IDENTIFIER_PATTERN}"
)
_SPLITTING_COMPOUND = re.compile(IDENTIFIER_SPLITTING)
_HAS_LETTER = re.compile("[A-Za-z]")
_CAMEL = re.compile(IDENTIFIER_CAMEL)
_ACRONYM = re.compile(IDENTIFIER_ACRONYM)
_SEPARATORS_AS_SPACES = str.maketrans(IDENTIFIER_SEPARATORS, " " * len(IDENTIFIER_SEPARATORS))


def identifier_words(text: str) -> str:
    """The words of the identifiers in ``text``, one identifier a line ('' when it has none).

    An identifier is a compound (:data:`IDENTIFIER_PATTERN`) with a letter that splits into more
    than one word (:data:`IDENTIFIER_SPLIT`); its words are the compound with a space at each
    camelCase and acronym boundary and each separator a space (so two separators in a row leave
    two spaces).  Case is kept: the word indexes fold it.  Digits stay with their word
    (``utf8Encode`` → ``utf8 Encode``).
    """
    found = "\n".join(c for c in _SPLITTING_COMPOUND.findall(text) if _HAS_LETTER.search(c) is not None)
    if not found:
        return ""
    # No boundary spans two lines (a newline is no letter): one substitution over all of them.
    return _ACRONYM.sub(r"\1 \2", _CAMEL.sub(r"\1 \2", found)).translate(_SEPARATORS_AS_SPACES)


def indexed_text(text: str) -> str:
    """What the word indexes index for ``text``: the text itself, then the words of its identifiers.

    The stored text is never changed; only the index sees this.  A text with no identifier is
    indexed as it is.
    """
    words = identifier_words(text)
    return f"{text}\n{words}" if words else text


#: A JSON string escape and the letters and digits glued to it (``\\tif``: the group is ``if``); reads
#: the same as a Python and a PostgreSQL regular expression.
ESCAPED_WORD = r"\\[nrtbf]([A-Za-z0-9]+)"
_ESCAPED_WORD = re.compile(ESCAPED_WORD)


def escaped_words(text: str) -> str:
    """The words JSON string escapes hide in ``text``, one a line ('' when it has none): ``\\tif`` → ``if``."""
    return "\n".join(_ESCAPED_WORD.findall(text)) if "\\" in text else ""


def indexed_message_text(text: str) -> str:
    """What the messages' word index indexes for ``text``: :func:`indexed_text`, then :func:`escaped_words`."""
    indexed = indexed_text(text)
    hidden = escaped_words(text)
    return f"{indexed}\n{hidden}" if hidden else indexed


@lru_cache(maxsize=4096)
def topic_words(text: str, stopwords: frozenset[str]) -> int:
    """How many words of ``text`` carry a topic: of three letters or more and not in ``stopwords`` (lowercase);
    a CJK run, written without spaces, counts a word per two characters (at least one).  Kept per text: a
    search reads the same turns again and again."""
    words = WORD.findall(text)
    if text.isascii():  # no CJK can be in it
        return sum(1 for word in words if len(word) > 2 and word.lower() not in stopwords)
    count = 0
    for word in words:
        if CJK_CHAR.search(word):
            count += max(1, len(word) // 2)
        elif len(word) > 2 and word.lower() not in stopwords:
            count += 1
    return count
