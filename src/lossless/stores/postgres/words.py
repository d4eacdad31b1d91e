"""Word queries on PostgreSQL: the restricted FTS5 expression as ``tsquery`` terms and a ``WHERE`` condition.

:mod:`lossless.stores.postgres.retrieval` searches with what this module makes of
:attr:`~lossless.ports.SearchRequest.words` and :attr:`~lossless.ports.SearchRequest.trigrams`.

Invariants:

* **No user text ever becomes SQL or ``tsquery`` syntax.**  The restricted FTS5 expression (quoted
  terms, ``*`` for a prefix, ``AND``, ``OR`` between parenthesised groups; see
  :mod:`lossless.retrieval.query`) is parsed here (:func:`parse_words`); each term's text is a bound
  parameter of ``phraseto_tsquery('english', %s)`` (or, for a prefix, of ``to_tsquery`` over one
  quoted, escaped lexeme).  PostgreSQL turns each term into a ``tsquery`` first
  (:func:`resolve_terms`); the search then binds those values back as ``%s::tsquery`` and combines
  them with ``&&`` / ``||`` in SQL whose shape comes from the parse, never from the text
  (:func:`word_condition`).
* **Word terms match like the word index, stop words included.**  Query and index both use the
  ``english`` configuration (Snowball English, "Porter 2": a few words stem differently from
  SQLite's original Porter stemmer — ``deploy`` also finds ``deployment`` here).  A term made of
  stop words only (``the``, ``is not``, ``the*``), which the ``tsvector`` does not hold, is
  matched instead by a regular expression over whole words in any case (letters and digits only,
  so nothing in it is a regex operator).  Stop words *inside* a phrase match any word at that
  place (``"fix the bug"`` also finds ``fix a bug``): there a word search returns more than FTS5
  would, never less.
* **Trigram pre-filters only ever over-approximate.**  Each quoted fragment becomes
  ``content ~ %s``, a regular expression that matches the fragment in any case
  (:func:`fragment_regex`), which the ``pg_trgm`` GIN index answers; the caller re-checks every row.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lossless.errors import InputError
from lossless.stores.postgres.connection import Connection
from lossless.text import identifier_words

__all__ = [
    "WordCondition",
    "WordTerm",
    "fragment_regex",
    "parse_trigrams",
    "parse_words",
    "resolve_terms",
    "word_condition",
]


@dataclass(frozen=True, slots=True)
class WordTerm:
    """One quoted term of a word expression: its text, and whether its last word is a prefix."""

    text: str
    prefix: bool = False


_TOKEN = re.compile(r'\s*(?:"((?:[^"]|"")*)"(\*?)|(AND|OR)(?![^\s()"])|(\()|(\)))')


def parse_words(expression: str) -> tuple[tuple[WordTerm, ...], ...]:
    """The groups of an FTS5 word expression as :mod:`lossless.retrieval.query` builds it (OR of ANDs).

    Accepts ``"a" AND "b"*``, ``("a" AND "b") OR ("c")`` and the like; anything else (an unquoted
    word, nested groups, an operator in the wrong place) is an :class:`InputError`.
    """
    groups: list[list[WordTerm]] = [[]]
    depth = 0
    expect_term = True
    position = 0
    end = len(expression.rstrip())
    while position < end:
        match = _TOKEN.match(expression, position)
        if match is None or match.end() == position:
            raise InputError(f"not a word-search expression this store understands: {expression!r}")
        position = match.end()
        quoted, star, operator, opening, closing = match.groups()
        if quoted is not None:
            if not expect_term:
                raise InputError(f"two terms without an operator in {expression!r}")
            groups[-1].append(WordTerm(quoted.replace('""', '"'), prefix=bool(star)))
            expect_term = False
        elif operator == "AND":
            if expect_term:
                raise InputError(f"AND without a term before it in {expression!r}")
            expect_term = True
        elif operator == "OR":
            if expect_term or depth:
                raise InputError(f"OR must stand between groups in {expression!r}")
            groups.append([])
            expect_term = True
        elif opening is not None:
            if depth or not expect_term or groups[-1]:
                raise InputError(f"a group must stand on its own in {expression!r}")
            depth = 1
        elif closing is not None:
            if not depth or expect_term:
                raise InputError(f"unbalanced parentheses in {expression!r}")
            depth = 0
    if depth or expect_term or not all(groups):
        raise InputError(f"incomplete word-search expression {expression!r}")
    return tuple(tuple(g) for g in groups)


def parse_trigrams(expression: str) -> tuple[str, ...]:
    """The quoted fragments of a trigram expression (``"abc" AND "bcd"``), unescaped."""
    groups = parse_words(expression)
    if len(groups) > 1 or any(t.prefix for t in groups[0]):
        raise InputError(f"a trigram pre-filter is an AND of quoted fragments, got {expression!r}")
    return tuple(t.text for t in groups[0])


@functools.cache
def _case_classes() -> dict[str, str]:
    """For each cased character, every character a case-insensitive match may take its place with.

    The closure of single-character ``lower``/``upper``/``casefold`` mappings (``σ``, ``ς`` and
    ``Σ``; ``s``, ``S`` and ``ſ``; ``k``, ``K`` and the Kelvin sign …): a superset of the simple case
    folding that RE2's ``(?i)`` and SQLite's trigram index apply.  Built once (about 0.1 s).
    """
    parent: dict[str, str] = {}

    def root(c: str) -> str:
        while parent[c] != c:
            c = parent[c]
        return c

    for code in range(0x20000):  # no character above plane 1 has a case
        c = chr(code)
        for variant in (c.lower(), c.upper(), c.casefold()):
            if len(variant) == 1 and variant != c:
                parent.setdefault(c, c)
                parent.setdefault(variant, variant)
                a, b = root(c), root(variant)
                if a != b:
                    parent[a] = b
    groups: dict[str, list[str]] = {}
    for c in parent:
        groups.setdefault(root(c), []).append(c)
    return {c: "".join(sorted(group)) for group in groups.values() for c in group}


def fragment_regex(fragment: str) -> str | None:
    """A case-insensitive, locale-independent regular expression for a literal ``fragment``.

    Each cased character becomes a bracket of its case variants (``[Σςσ]``), every other ASCII
    character but a letter or digit is escaped with ``\\`` (a literal in PostgreSQL's regular
    expressions), and any other character stands for itself; ``pg_trgm`` answers ``~`` from its
    index.  (``ILIKE`` would depend on the database's ``LC_CTYPE`` and fold ``ς`` and ``Σ`` apart,
    hiding matches of a case-insensitive pattern.)  None for a fragment no stored text can hold
    (U+0000).
    """
    if "\x00" in fragment:
        return None
    table = _case_classes()
    out: list[str] = []
    for c in fragment:
        variants = table.get(c)
        if variants is not None:
            out.append(f"[{variants}]")
        elif c.isascii() and not c.isalnum():
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


#: Words as the word index's tokenizer sees them (letters and digits; ``_`` separates, as in unicode61).
_WORD = re.compile(r"[^\W_]+")


def _lexeme_prefix(word: str) -> str:
    """``'word':*`` as ``to_tsquery`` input: one quoted lexeme (quotes and backslashes escaped)."""
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "':*"


def _term_sql(term: WordTerm) -> tuple[str, list[Any]]:
    """SQL computing the term's ``tsquery`` (as text) from bound parameters only."""
    text = term.text.replace("\x00", " ")  # a separator to the word index; PostgreSQL refuses it in text
    if not term.prefix:
        split = identifier_words(text)
        if not split:
            return "phraseto_tsquery('english', %s)::text", [text]
        # An identifier also matches its words in a row (the word index holds them: schema.TSV), as on
        # SQLite, whose tokenizer already splits ``a_b.go`` (PostgreSQL's parser keeps it one lexeme).
        return "(phraseto_tsquery('english', %s) || phraseto_tsquery('english', %s))::text", [text, split]
    words = list(_WORD.finditer(text))
    if not words:
        return "''", []
    last = words[-1]
    head = text[: last.start()]
    prefix = "to_tsquery('english', %s)"
    if _WORD.search(head) is None:
        return f"{prefix}::text", [_lexeme_prefix(last.group())]
    return f"tsquery_phrase(phraseto_tsquery('english', %s), {prefix})::text", [head, _lexeme_prefix(last.group())]


def _term_regex(term: WordTerm) -> str | None:
    """A regular expression, matching in any case, for a term whose words the word index does not hold.

    The words are letters and digits only (no regex operator can be among them; cased letters
    become brackets of their case variants, as in :func:`fragment_regex`); they must stand whole
    (a prefix: only at their start), separated by anything but letters and digits.
    """
    words = _WORD.findall(term.text)
    if not words:
        return None
    table = _case_classes()
    cased = ["".join(f"[{table[c]}]" if c in table else c for c in word) for word in words]
    return "(^|[^[:alnum:]])" + "[^[:alnum:]]+".join(cased) + ("" if term.prefix else "([^[:alnum:]]|$)")


@dataclass(slots=True)
class WordCondition:
    """A word query as SQL: the WHERE condition, the ``tsquery`` for ranking, and their parameters."""

    where: str
    where_params: list[Any]
    query: str | None
    query_params: list[Any]
    #: Whether the condition is exactly "any of the query's terms" (one ``tsquery`` term per group).
    any_word: bool = False


#: Resolved terms kept per store (a term's ``tsquery`` depends only on its text and the server's
#: ``english`` configuration); cleared when it reaches this many.
_RESOLVED_TERMS = 4096


async def resolve_terms(conn: Connection, terms: Sequence[WordTerm], memo: dict[WordTerm, str]) -> list[str]:
    """Each term's ``tsquery`` as text ('' for stop words only), asking the server only for new terms."""
    known = {t: memo[t] for t in terms if t in memo}
    missing = list(dict.fromkeys(t for t in terms if t not in known))
    if missing:
        pieces = [_term_sql(t) for t in missing]
        cursor = await conn.execute(
            "SELECT " + ", ".join(sql for sql, _ in pieces),
            [p for _, params in pieces for p in params],
        )
        row = await cursor.fetchone()
        assert row is not None
        new = dict(zip(missing, (value or "" for value in row), strict=True))
        if len(memo) + len(missing) > _RESOLVED_TERMS:
            memo.clear()
        memo.update(new)
        known.update(new)
    return [known[t] for t in terms]


def word_condition(expression: str, resolved_terms: Mapping[WordTerm, str]) -> WordCondition:
    """Each term as its resolved ``tsquery`` (or, for stop words only, a regex), combined.

    ``resolved_terms`` holds every term of ``expression`` (:func:`resolve_terms`).
    """
    groups = parse_words(expression)
    resolved = iter([resolved_terms[t] for g in groups for t in g])
    group_sql: list[str] = []
    group_params: list[Any] = []
    query_groups: list[str] = []
    query_params: list[Any] = []
    plain = True  # whether every group is a tsquery alone (then one GIN-indexable @@ serves)
    single = True  # whether every group is one term
    for group in groups:
        tsqueries: list[str] = []
        regexes: list[str | None] = []
        for term in group:
            value = next(resolved)
            if value:
                tsqueries.append(value)
            else:
                regexes.append(_term_regex(term))
        if None in regexes:  # a term with nothing searchable in it matches nothing, as in FTS5
            continue
        conditions: list[str] = []
        if tsqueries:
            combined = "(" + " && ".join(["%s::tsquery"] * len(tsqueries)) + ")"
            conditions.append(f"t.content_tsv @@ {combined}")
            group_params += tsqueries
            query_groups.append(combined)
            query_params += tsqueries
        for regex in regexes:
            conditions.append("t.content ~ %s")
            group_params.append(regex)
        plain = plain and not regexes
        single = single and len(group) == 1
        group_sql.append("(" + " AND ".join(conditions) + ")")
    if not group_sql:
        return WordCondition("false", [], None, [])
    query = "(" + " || ".join(query_groups) + ")" if query_groups else None
    if plain and query is not None:
        return WordCondition(f"t.content_tsv @@ {query}", list(query_params), query, query_params, single)
    return WordCondition("(" + " OR ".join(group_sql) + ")", group_params, query, query_params)
