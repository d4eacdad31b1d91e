"""Searching the whole stored history: regex (linear time) and safe full-text, over messages and summaries.

This module runs ``regex`` and ``full_text`` searches of messages and summaries;
:mod:`~lossless.retrieval.files` searches stored large files (``scope="files"``)
and :mod:`~lossless.retrieval.semantic` runs ``semantic`` / ``hybrid`` searches;
:class:`~lossless.retrieval.service.Retriever` picks the one the options ask for.

Invariants:

* **Whole history, no silent cap.**  Candidates are read page after page until
  ``limit`` matches are found or the reach is exhausted; no row cap applies.
* **Linear-time regex.**  Patterns run on RE2 (``google-re2``), which has no
  backtracking, so no pattern can hang a server (``(a+)+$`` against 1 MB
  returns in milliseconds).  Literal fragments every match must contain are
  looked up in the trigram index first, so a selective pattern reads few rows.
* **Bad user input is a result, not an exception.**  A regex that does not
  compile or a full-text query outside the supported language returns a
  :class:`GrepResult` whose ``message`` says what to change; only invalid
  *options* (a limit of 0, an unknown mode) raise :class:`InputError`.
* **Bounded output.**  :meth:`GrepResult.render` never exceeds
  :data:`MAX_OUTPUT_CHARS`; when it would, it ends with a note on how to narrow
  the search.  Each hit carries a snippet of about :data:`SNIPPET_CHARS` around
  its first match and a citation (``[msg#12]`` / ``[sum_…]``).
* **A question is never answered by one stray match.**  ``full_text`` keeps
  exact AND semantics; when nothing has every word it falls back to the ranked
  any-word search (``fallback``), and when ``sort="relevance"`` found fewer than
  ``limit`` items with every word, items with any of the keywords follow them,
  best first; both cases say so in a note.  The any-word matches are ranked by
  the store alone, or by ``rank_any_word`` when the caller passes one (the
  retrieval service passes :func:`lossless.retrieval.hybrid.keyword_hits`, which
  may add the turn next to a match; its note says so).
* No I/O beyond the :class:`~lossless.ports.Store` port.
"""

from __future__ import annotations

import functools
import heapq
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

import anyio

from lossless.constants import DEFAULT_LIMIT, MAX_CONTEXT, MAX_LIMIT
from lossless.errors import InputError, check_unicode
from lossless.ports import BatchSearchStore, SearchRequest, SearchRow, Store
from lossless.questions import FUNCTION_WORDS, keywords
from lossless.records import JSONValue, format_timestamp
from lossless.retrieval.query import (
    FullTextQuery,
    QuerySyntax,
    Term,
    ignores_case,
    parse_full_text,
    required_literals,
    trigram_expression,
)

__all__ = [
    "MAX_CONTEXT",
    "MAX_OUTPUT_CHARS",
    "SEMANTIC_MODES",
    "SNIPPET_CHARS",
    "ContextTurn",
    "GrepHit",
    "GrepOptions",
    "GrepResult",
    "compile_regex",
    "first_page_requests",
    "grep",
    "no_matches",
    "snippet",
    "with_context",
]

Mode = Literal["regex", "full_text", "semantic", "hybrid"]
Scope = Literal["messages", "summaries", "both", "files"]
#: Ranks the any-word matches of a full-text query: ``(store, options, scopes, conversation ids)`` →
#: ``(hits best first, whether there are more)``; see :func:`grep`'s ``rank_any_word``.
AnyWordRanker = Callable[
    [Store, "GrepOptions", list[Literal["messages", "summaries"]], tuple[int, ...]],
    Awaitable[tuple[list["GrepHit"], bool]],
]
#: The modes that search by meaning (messages and summaries; see :mod:`lossless.retrieval.semantic`).
SEMANTIC_MODES = ("semantic", "hybrid")
Sort = Literal["recency", "relevance"]

MAX_OUTPUT_CHARS = 40_000
SNIPPET_CHARS = 200
MAX_PATTERN_CHARS = 2_000
_PAGE = 500
#: What the any-word note adds when a ranker may bring in the turns next to the matches.
_NEXT_TO = " (or are the turn right before or after one that has)"
#: Memory RE2 may use for one compiled pattern (bounds what a huge counted repetition can cost).
_RE2_MAX_MEM = 32 << 20


@dataclass(frozen=True, slots=True)
class GrepOptions:
    """The validated options of one search."""

    pattern: str
    mode: Mode = "regex"
    scope: Scope = "both"
    since: datetime | None = None
    before: datetime | None = None
    limit: int = DEFAULT_LIMIT
    sort: Sort = "recency"
    #: Neighbouring turns returned with each message hit (that many before and after it).
    context: int = 0

    def __post_init__(self) -> None:
        pattern: object = self.pattern
        if not isinstance(pattern, str) or not pattern:
            raise InputError(f"pattern must be a non-empty string, got {self.pattern!r}")
        if len(self.pattern) > MAX_PATTERN_CHARS:
            raise InputError(f"pattern is {len(self.pattern):,} characters; the most is {MAX_PATTERN_CHARS:,}")
        check_unicode(self.pattern, "pattern")
        if self.mode not in ("regex", "full_text", *SEMANTIC_MODES):
            raise InputError(f"mode must be 'regex', 'full_text', 'semantic' or 'hybrid', got {self.mode!r}")
        if self.scope not in ("messages", "summaries", "both", "files"):
            raise InputError(f"scope must be 'messages', 'summaries', 'both' or 'files', got {self.scope!r}")
        if self.mode in SEMANTIC_MODES and self.scope == "files":
            raise InputError(
                f"mode={self.mode!r} searches messages and summaries by meaning, not stored files; use "
                "scope='messages', 'summaries' or 'both', or mode='full_text' / 'regex' to search files"
            )
        if self.sort not in ("recency", "relevance"):
            raise InputError(f"sort must be 'recency' or 'relevance', got {self.sort!r}")
        if type(self.context) is not int or not 0 <= self.context <= MAX_CONTEXT:
            raise InputError(f"context must be an integer from 0 to {MAX_CONTEXT}, got {self.context!r}")
        if type(self.limit) is not int or not 1 <= self.limit <= MAX_LIMIT:
            raise InputError(f"limit must be an integer from 1 to {MAX_LIMIT}, got {self.limit!r}")
        for name in ("since", "before"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
                raise InputError(f"{name} must be a timezone-aware datetime, got {value!r}")
        if self.since is not None and self.before is not None and self.since >= self.before:
            raise InputError(
                f"since ({self.since.isoformat()}) must be earlier than before ({self.before.isoformat()})"
            )


@dataclass(frozen=True, slots=True)
class GrepHit:
    """One match: where it is, when, and a snippet around it.

    A file match (``scope="files"``) is one line of a stored file: ``ref`` is the file id, ``line``
    the 1-based line number and ``name`` the file's name.  ``score`` is the similarity of a
    semantic or hybrid match.
    """

    scope: Literal["messages", "summaries", "files"]
    ref: int | str
    conversation_id: int
    created_at: datetime
    snippet: str
    role: str | None = None
    kind: str | None = None
    depth: int | None = None
    rank: float | None = None
    line: int | None = None
    name: str | None = None
    score: float | None = None
    #: Neighbouring turns of a message hit (``context=N``), in conversation order, the hit itself left out.
    context: tuple[ContextTurn, ...] = ()
    #: A summary hit of ``hybrid``: the message it condenses that matched best (the one to expand to), if any did.
    source: int | None = None
    #: A message hit of ``hybrid`` with ``scope="both"``: the leaf summary that condenses it, whose own hit
    #: (this message its best match, ranked below it) was folded into this one.
    summary: str | None = None

    @property
    def citation(self) -> str:
        return f"[msg#{self.ref}]" if self.scope == "messages" else f"[{self.ref}]"

    def render(self) -> str:
        stamp = format_timestamp(self.created_at)[:19].replace("T", " ")
        if self.scope == "files":
            return (
                f"- {self.citation} line {self.line} · {self.name or '(unnamed)'} · conversation "
                f"{self.conversation_id} · {stamp}\n  {self.snippet}"
            )
        what = self.role if self.scope == "messages" else f"{self.kind} summary, depth {self.depth}"
        if self.score is not None:
            what = f"{what} · score {self.score:.3f}"
        if self.source is not None:
            what = f"{what} · best match inside: [msg#{self.source}]"
        if self.summary is not None:
            what = f"{what} · condensed in [{self.summary}]"
        text = f"- {self.citation} conversation {self.conversation_id} · {stamp} · {what}\n  {self.snippet}"
        if self.context:
            text += "".join(f"\n    {turn.render(self.ref)}" for turn in self.context)
        return text

    def to_dict(self) -> dict[str, JSONValue]:
        out: dict[str, JSONValue] = {
            "citation": self.citation,
            "type": {"messages": "message", "summaries": "summary", "files": "file"}[self.scope],
            "id": self.ref,
            "conversation_id": self.conversation_id,
            "created_at": format_timestamp(self.created_at),
            "role": self.role,
            "kind": self.kind,
            "depth": self.depth,
            "snippet": self.snippet,
        }
        if self.scope == "files":
            out |= {"line": self.line, "name": self.name}
        if self.score is not None:
            out["score"] = round(self.score, 6)
        if self.context:
            out["context"] = [turn.to_dict() for turn in self.context]
        if self.source is not None:
            out["source_message_id"] = self.source
        if self.summary is not None:
            out["summary_id"] = self.summary
        return out


@dataclass(frozen=True, slots=True)
class ContextTurn:
    """A turn next to a message hit: its id, place, speaker, time and (shortened) text."""

    id: int
    seq: int
    role: str
    created_at: datetime
    text: str

    def render(self, hit: int | str) -> str:
        side = "before" if isinstance(hit, int) and self.id < hit else "after"
        return f"({side}) [msg#{self.id}] {self.role}: {self.text}"

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "id": self.id,
            "seq": self.seq,
            "role": self.role,
            "created_at": format_timestamp(self.created_at),
            "text": self.text,
        }


@dataclass(frozen=True, slots=True)
class GrepResult:
    """Matches in order, or a ``message`` saying why there are none and what to try."""

    options: GrepOptions
    hits: tuple[GrepHit, ...] = ()
    message: str | None = None
    conversations: int = 0
    more: bool = False
    notes: tuple[str, ...] = field(default=())
    #: True when a full-text query matched nothing with all its words and these are any-word matches.
    fallback: bool = False

    def render(self, max_chars: int = MAX_OUTPUT_CHARS) -> str:
        """Markdown for an agent: a header line, one entry per hit, capped at ``max_chars``."""
        if self.message is not None and not self.hits:
            return self.message
        order = "best match" if self.options.mode in SEMANTIC_MODES else self.options.sort
        head = (
            f"{len(self.hits)} match{'es' if len(self.hits) != 1 else ''} for {self.options.mode} "
            f"{self.options.pattern!r} in {self.options.scope} ({order} first)"
        )
        lines = [head]
        used = len(head) + 1
        for shown, hit in enumerate(self.hits):
            text = hit.render()
            if used + len(text) + 1 > max_chars - 300:
                lines.append(
                    f"… output capped at {max_chars:,} characters after {shown} of {len(self.hits)} matches: "
                    "narrow the search with conversation_id, since/before, scope, a more specific pattern "
                    "or a lower limit"
                )
                break
            lines.append(text)
            used += len(text) + 1
        if self.more:
            lines.append(
                f"(there are more matches beyond limit={self.options.limit}; raise the limit or narrow the search)"
            )
        lines += list(self.notes)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, JSONValue]:
        out: dict[str, JSONValue] = {
            "pattern": self.options.pattern,
            "mode": self.options.mode,
            "scope": self.options.scope,
            "sort": self.options.sort,
            "matches": [h.to_dict() for h in self.hits],
            "more": self.more,
            "message": self.message,
        }
        if self.fallback:
            out["fallback"] = "any_word"
        if self.notes:  # e.g. a search by meaning answered from a partial index says how much is built
            out["notes"] = [str(note) for note in self.notes]
        return out


def compile_regex(pattern: str) -> tuple[Any, str | None]:
    """``(compiled RE2 pattern, None)`` or ``(None, what is wrong)``."""
    try:
        import re2
    except ImportError as exc:  # pragma: no cover - a core dependency
        from lossless.errors import MissingDependencyError

        raise MissingDependencyError("regex search", "all", "google-re2") from exc
    options = re2.Options()
    options.log_errors = False
    options.max_mem = _RE2_MAX_MEM
    try:
        return re2.compile(pattern, options), None
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        return None, (
            f"the pattern {pattern!r} is not a valid regular expression ({detail}); patterns use RE2 syntax "
            "(no backreferences or lookaround): escape special characters with \\, or use mode='full_text'"
        )


def snippet(text: str, start: int, end: int) -> str:
    """About SNIPPET_CHARS characters of ``text`` around ``start``…``end``, on one line."""
    width = SNIPPET_CHARS
    span = max(0, min(end, start + width) - start)
    left = max(0, start - (width - span) // 2)
    right = min(len(text), left + width)
    left = max(0, right - width)
    piece = " ".join(text[left:right].split())
    return ("…" if left > 0 else "") + piece + ("…" if right < len(text) else "")


Matcher = Callable[[str], "tuple[int, int] | None"]


def _regex_matcher(compiled: Any) -> Matcher:
    def find(text: str) -> tuple[int, int] | None:
        found = compiled.search(text)
        return None if found is None else (found.start(), found.end())

    return find


def _term_locator(query: FullTextQuery, exact: bool) -> Matcher:
    """Where a hit's first term occurs (for the snippet); with ``exact`` a row lacking the terms is no match."""
    words = [t.text for t in query.terms]
    pattern = re.compile("|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)), re.IGNORECASE)

    def find(text: str) -> tuple[int, int] | None:
        if exact and not query.matches_substrings(text):
            return None
        found = pattern.search(text)
        if found is None:
            return None if exact else (0, 0)
        return found.start(), found.end()

    return find


@dataclass(frozen=True, slots=True)
class _Plan:
    words: str | None = None
    trigrams: str | None = None
    literals: tuple[str, ...] = ()
    matcher: Matcher | None = None
    exact: bool = True  # whether candidate rows still need the matcher to decide


def _plan(options: GrepOptions) -> _Plan | str:
    return _plan_of(options.mode, options.pattern)


@functools.lru_cache(maxsize=256)
def _plan_of(mode: Mode, pattern: str) -> _Plan | str:
    """The plan of a pattern, or what is wrong with it; kept for repeated searches (plans are never changed)."""
    if mode == "regex":
        compiled, problem = compile_regex(pattern)
        if problem is not None:
            return problem
        fragments = required_literals(pattern)
        return _Plan(
            trigrams=trigram_expression(fragments),
            literals=() if ignores_case(pattern) else tuple(f for f in fragments if len(f) >= 3),
            matcher=_regex_matcher(compiled),
        )
    parsed = parse_full_text(pattern)
    if isinstance(parsed, QuerySyntax):
        return parsed.message
    if parsed.cjk:
        # Word search cannot split CJK text: find substrings instead, pre-filtered by trigrams.
        trigrams = None
        if len(parsed.groups) == 1:
            trigrams = trigram_expression([t.text for t in parsed.groups[0]])
        return _Plan(trigrams=trigrams, matcher=_term_locator(parsed, exact=True))
    return _Plan(words=parsed.fts_expression(), matcher=_term_locator(parsed, exact=False), exact=False)


def _page_size(options: GrepOptions, plan: _Plan) -> int:
    # Every row a word query returns is a hit (its matcher only places the snippet): one row past
    # the limit tells whether there are more.  Rows a matcher may still reject come a page at a time.
    return _PAGE if plan.exact else options.limit + 1


def _request(
    options: GrepOptions,
    plan: _Plan,
    scope: Literal["messages", "summaries"],
    conversation_ids: tuple[int, ...],
    *,
    below: int | None = None,
    offset: int = 0,
) -> SearchRequest:
    """The store request for one page of one scope."""
    return SearchRequest(
        scope=scope,
        conversation_ids=conversation_ids,
        words=plan.words,
        trigrams=plan.trigrams,
        literals=plan.literals,
        since=options.since,
        before=options.before,
        order="relevance" if options.sort == "relevance" and plan.words is not None else "recency",
        limit=_page_size(options, plan),
        below=below,
        offset=offset,
    )


async def _search_scope(
    store: Store,
    options: GrepOptions,
    plan: _Plan,
    scope: Literal["messages", "summaries"],
    conversation_ids: tuple[int, ...],
    first: list[SearchRow] | None = None,
) -> tuple[list[GrepHit], bool]:
    """Up to ``limit`` hits in one table, and whether there are more (``first``: the first page, read already)."""
    assert plan.matcher is not None
    relevance = options.sort == "relevance" and plan.words is not None
    hits: list[GrepHit] = []
    seen: set[int] = set()
    below: int | None = None
    offset = 0
    page = _page_size(options, plan)
    while True:
        request = _request(options, plan, scope, conversation_ids, below=below, offset=offset)
        rows: list[SearchRow] = first if first is not None else await store.search(request)
        first = None
        for row in rows:
            if row.key in seen:
                continue
            seen.add(row.key)
            span = plan.matcher(row.content)
            if span is None:
                continue
            if len(hits) == options.limit:
                return hits, True
            hits.append(
                GrepHit(
                    scope=scope,
                    ref=row.ref,
                    conversation_id=row.conversation_id,
                    created_at=row.created_at,
                    snippet=snippet(row.content, *span),
                    role=row.role,
                    kind=row.kind,
                    depth=row.depth,
                    rank=row.rank,
                )
            )
        if len(rows) < page or not rows:
            return hits, False
        if relevance:
            offset += page
        else:
            below = min(r.key for r in rows)


async def _search_scopes(
    store: Store,
    options: GrepOptions,
    plan: _Plan,
    scopes: list[Literal["messages", "summaries"]],
    conversation_ids: tuple[int, ...],
    first_pages: list[list[SearchRow]] | None = None,
) -> tuple[list[GrepHit], bool]:
    """The hits of each scope, in ``scopes`` order, and whether any has more; the scopes are searched at once.

    ``first_pages`` are each scope's first page, read already (the rows of :func:`first_page_requests`).
    Else a store that answers several searches in one request (:class:`~lossless.ports.BatchSearchStore`)
    gets every scope's first page in one; a scope needing more pages reads them on its own.
    """
    results: dict[str, tuple[list[GrepHit], bool]] = {}
    firsts: dict[str, list[SearchRow]] = {}
    if first_pages is not None:
        firsts = dict(zip(scopes, first_pages, strict=True))
    elif len(scopes) > 1 and isinstance(store, BatchSearchStore):
        pages = await store.search_many([_request(options, plan, scope, conversation_ids) for scope in scopes])
        firsts = dict(zip(scopes, pages, strict=True))

    async def one(scope: Literal["messages", "summaries"]) -> None:
        results[scope] = await _search_scope(store, options, plan, scope, conversation_ids, firsts.get(scope))

    async with anyio.create_task_group() as group:
        for scope in scopes:
            group.start_soon(one, scope)
    return [hit for scope in scopes for hit in results[scope][0]], any(results[scope][1] for scope in scopes)


def _scopes(options: GrepOptions) -> list[Literal["messages", "summaries"]]:
    """The tables a search of messages and summaries reads (its callers have refused ``files`` already)."""
    scope = options.scope
    if scope == "messages" or scope == "summaries":
        return [scope]
    assert scope == "both"
    return ["messages", "summaries"]


def first_page_requests(options: GrepOptions, conversation_ids: tuple[int, ...]) -> list[SearchRequest] | None:
    """The store requests for the first page of each scope :func:`grep` searches (None: it searches none).

    A caller may read these pages ahead (e.g. together with the reach) and hand them to
    :func:`grep` as ``first_pages``; None for options :func:`grep` refuses (an invalid pattern,
    files, semantic modes), which then report their error from :func:`grep` itself.
    """
    if options.scope == "files" or options.mode in SEMANTIC_MODES:
        return None
    plan = _plan(options)
    if isinstance(plan, str):
        return None
    return [_request(options, plan, scope, conversation_ids) for scope in _scopes(options)]


async def grep(
    store: Store,
    options: GrepOptions,
    conversation_ids: tuple[int, ...],
    *,
    first_pages: list[list[SearchRow]] | None = None,
    rank_any_word: AnyWordRanker | None = None,
) -> GrepResult:
    """Search ``conversation_ids`` (already checked against the caller's reach) as ``options`` say.

    Only regex and full-text searches of messages and summaries run here (see the module docstring).
    ``first_pages``: the rows of :func:`first_page_requests` for these options and conversations,
    read already (then the common case reads nothing more).
    ``rank_any_word`` ranks the any-word matches a full-text query falls back to (or is topped up with);
    without it they come in the store's order of relevance (BM25 on both backends) alone.
    """
    if options.scope == "files" or options.mode in SEMANTIC_MODES:
        raise InputError(
            f"mode={options.mode!r} / scope={options.scope!r} needs file contents or an embedder: "
            "search through a Retriever (or the engine)"
        )
    plan = _plan(options)
    if isinstance(plan, str):  # an invalid query is an error, never an empty result
        raise InputError(plan)
    scopes = _scopes(options)
    found, more = await _search_scopes(store, options, plan, scopes, conversation_ids, first_pages)
    if len(scopes) > 1:
        if options.sort == "relevance" and plan.words is not None:
            ordered = sorted(found, key=lambda h: h.rank if h.rank is not None else 0.0)
        else:
            ordered = heapq.nlargest(len(found), found, key=lambda h: h.created_at)
        more = more or len(ordered) > options.limit
        found = ordered[: options.limit]
    notes: tuple[str, ...] = ()
    relevance_order = options.sort == "relevance" and plan.words is not None
    if options.sort == "relevance" and plan.words is None:
        notes = ("(relevance order applies to full-text word queries; these matches are newest first)",)
    if not found and options.mode == "full_text" and plan.words is not None:
        return await _any_word(store, options, scopes, conversation_ids, rank_any_word)
    if options.mode == "full_text" and relevance_order and 0 < len(found) < options.limit and not more:
        # Ranked by relevance (a question, not a grep): the items with every word come first, then
        # items with any of its keywords, best first, so a question is never answered by one stray match.
        partial = await _any_word(store, options, scopes, conversation_ids, rank_any_word)
        have = {(h.scope, h.ref) for h in found}
        unseen = [h for h in partial.hits if (h.scope, h.ref) not in have]
        added = unseen[: options.limit - len(found)]
        if added:
            notes += (
                f"(the first {len(found)} have every word of {options.pattern!r}; the next {len(added)} have "
                f"some of its keywords{_NEXT_TO if rank_any_word is not None else ''}, best match first)",
            )
            found += added
            more = partial.more or len(unseen) > len(added)
    if not found:
        return GrepResult(
            options,
            message=no_matches(options, len(conversation_ids)),
            conversations=len(conversation_ids),
        )
    return GrepResult(options, tuple(found), conversations=len(conversation_ids), more=more, notes=notes)


async def _any_word(
    store: Store,
    options: GrepOptions,
    scopes: list[Literal["messages", "summaries"]],
    conversation_ids: tuple[int, ...],
    rank_any_word: AnyWordRanker | None = None,
) -> GrepResult:
    """The ranked any-word search a full-text query falls back to when no item has all its words.

    Function words are dropped (:data:`~lossless.questions.FUNCTION_WORDS`); matches come best
    first (by ``rank_any_word`` when given) and the result says that this is what happened.
    """
    words = keywords(options.pattern, stopwords=FUNCTION_WORDS)
    ranked = replace(options, sort="relevance")
    if rank_any_word is not None:
        found, more = await rank_any_word(store, ranked, scopes, conversation_ids)
    else:
        query = FullTextQuery(tuple((Term(w),) for w in words))
        plan = _Plan(words=query.fts_expression(), matcher=_term_locator(query, exact=False), exact=False)
        found, more = await _search_scopes(store, ranked, plan, scopes, conversation_ids)
        if len(scopes) > 1:
            found.sort(key=lambda h: h.rank if h.rank is not None else 0.0)
            more = more or len(found) > options.limit
            found = found[: options.limit]
    if not found:
        return GrepResult(
            options, message=no_matches(options, len(conversation_ids)), conversations=len(conversation_ids)
        )
    note = (
        f"(nothing has every word of {options.pattern!r}; these matches have any of "
        f"{', '.join(words[:12])}{', …' if len(words) > 12 else ''}{_NEXT_TO if rank_any_word is not None else ''}, "
        "best match first)"
    )
    return GrepResult(
        ranked, tuple(found), conversations=len(conversation_ids), more=more, notes=(note,), fallback=True
    )


def no_matches(options: GrepOptions, conversations: int) -> str:
    """The "no matches" message, with what to try instead."""
    where = f"{conversations} conversation{'s' if conversations != 1 else ''}"
    tips = []
    if options.mode == "regex":
        tips.append("mode='full_text' for word search (stems words: deploy finds deployed)")
    elif options.mode == "full_text":
        tips.append("fewer or shorter words, prefix* search, or mode='regex' for exact text")
    else:
        tips.append("other words for what you mean, or mode='full_text' / 'regex' for exact words and stored files")
    if options.scope != "both":
        files = options.scope == "files" or options.mode in SEMANTIC_MODES
        tips.append("scope='both'" if files else "scope='both' or scope='files'")
    if options.since is not None or options.before is not None:
        tips.append("a wider since/before range")
    tips.append("all_conversations=true to search every conversation of this agent")
    return f"no matches for {options.mode} {options.pattern!r} in {options.scope} across {where}; try " + ", or ".join(
        tips
    )


async def with_context(store: Store, result: GrepResult) -> GrepResult:
    """``result`` with each message hit carrying ``options.context`` turns before and after it."""
    n = result.options.context
    if n == 0 or not result.hits:
        return result
    hits: list[GrepHit] = []
    cache: dict[tuple[int, int], list[Any]] = {}
    wanted = [h.ref for h in result.hits if h.scope == "messages" and isinstance(h.ref, int)]
    records = {m.id: m for m in await store.get_messages_by_id(wanted)}
    for hit in result.hits:
        record = records.get(hit.ref) if hit.scope == "messages" and isinstance(hit.ref, int) else None
        if record is None:
            hits.append(hit)
            continue
        key = (record.conversation_id, record.seq)
        if key not in cache:
            cache[key] = await store.get_messages(
                record.conversation_id, after_seq=max(0, record.seq - n - 1), limit=2 * n + 1
            )
        turns = tuple(
            ContextTurn(m.id, m.seq, m.role, m.created_at, snippet(m.content, 0, 0))
            for m in cache[key]
            if m.id != record.id and abs(m.seq - record.seq) <= n
        )
        hits.append(replace(hit, context=turns))
    return replace(result, hits=tuple(hits))
