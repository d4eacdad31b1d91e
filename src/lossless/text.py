"""Words and CJK text: the one tokenizer the keyword searches, the relevance ranking and the hash embedder share.

Invariants:

* One definition of CJK text (:data:`CJK_CHARS`), so what one search, ranker, embedder or memory
  check treats as CJK every other one does.
* Words are ``\\w+`` runs, lower-cased by the callers that compare them; CJK text has no spaces
  between words, so a run of CJK characters is split into overlapping character bigrams
  (:func:`cjk_bigrams`), or kept whole where a search matches substrings (:func:`keyword_terms`).
* Pure functions of their input: no I/O, no state.
"""

from __future__ import annotations

import itertools
import re

__all__ = ["CJK_CHAR", "CJK_CHARS", "CJK_RUN", "STOP_WORDS", "WORD", "cjk_bigrams", "keyword_terms", "search_terms"]

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
