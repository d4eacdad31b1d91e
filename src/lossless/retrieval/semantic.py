"""Searching messages by meaning (``lcm_grep`` with ``mode="semantic"`` or ``"hybrid"``).

The vectors come from a :class:`SemanticSearch` port: the engine supplies
:class:`lossless.memory.messages.MessageSearch`, which embeds messages with the long-term memory's
embedder and cache (the offline local model by default).  This module only turns its ranking into
a :class:`~lossless.retrieval.grep.GrepResult`.

Invariants:

* **Only the conversations passed in** (already checked against the caller's reach) are searched;
  the port is given exactly those ids, and ids it returns from elsewhere are dropped.
* ``semantic`` ranks messages by the cosine similarity of their best chunk to the query (a
  message with no positive similarity is left out);
  ``hybrid`` fuses that ranking with the full-text ranking of the same words (BM25 over the word
  index, any of the query's terms; reciprocal-rank fusion, k = 60), so an exact keyword and a
  paraphrase both rank.  Results are always best match first.
* Summaries and files are not embedded: with ``scope="both"`` the result says so in a note.
* ``since`` / ``before`` filter the ranked messages by their time; ``limit`` and the output cap
  apply as for every grep.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal, Protocol

from lossless.errors import InputError
from lossless.ports import Store
from lossless.retrieval.grep import GrepHit, GrepOptions, GrepResult, grep, no_matches, snippet
from lossless.retrieval.query import FullTextQuery, QuerySyntax, Term, parse_full_text

__all__ = ["SemanticHit", "SemanticSearch", "grep_semantic"]

#: The most candidates asked of the port (its own cap) when times filter them afterwards.
_MAX_CANDIDATES = 1000
_FULL_TEXT_DEPTH = 200


class SemanticHit(Protocol):
    """One message the port found, with its similarity (higher is closer)."""

    @property
    def message_id(self) -> int: ...

    @property
    def conversation_id(self) -> int: ...

    @property
    def score(self) -> float: ...


class SemanticSearch(Protocol):
    """Meaning-based search over stored messages (see :class:`lossless.memory.messages.MessageSearch`)."""

    async def search(
        self,
        query: str,
        conversation_ids: Sequence[int],
        *,
        limit: int = 20,
        mode: Literal["semantic", "hybrid"] = "semantic",
        fulltext: Sequence[int] = (),
    ) -> Sequence[SemanticHit]: ...


def _any_term(query: FullTextQuery) -> str:
    """The query as an OR of all its terms, in the full-text language (for the keyword half of hybrid)."""

    def one(term: Term) -> str:
        if term.phrase:
            return '"' + term.text + '"'
        return term.text + ("*" if term.prefix else "")

    return " OR ".join(dict.fromkeys(one(t) for t in query.terms))


async def _keyword_ranking(
    store: Store, options: GrepOptions, conversation_ids: tuple[int, ...]
) -> tuple[list[int], str | None]:
    """Message ids by full-text relevance to any of the pattern's terms, and a note if there are none."""
    parsed = parse_full_text(options.pattern)
    if isinstance(parsed, QuerySyntax):
        return [], f"(the keyword half of hybrid search was skipped: {parsed.message})"
    keyword = GrepOptions(
        _any_term(parsed),
        mode="full_text",
        scope="messages",
        since=options.since,
        before=options.before,
        limit=_FULL_TEXT_DEPTH,
        sort="relevance",
    )
    found = await grep(store, keyword, conversation_ids)
    return [int(h.ref) for h in found.hits], None


def _locate(text: str, words: Sequence[str]) -> tuple[int, int]:
    """Where the first query word occurs in ``text`` (for the snippet), else its start."""
    if words:
        pattern = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
        found = re.search(pattern, text, re.IGNORECASE)
        if found is not None:
            return found.start(), found.end()
    return 0, 0


async def grep_semantic(
    store: Store, options: GrepOptions, conversation_ids: tuple[int, ...], search: SemanticSearch
) -> GrepResult:
    """Rank the messages of ``conversation_ids`` by meaning (``semantic``) or meaning and words (``hybrid``)."""
    if options.mode not in ("semantic", "hybrid") or options.scope not in ("messages", "both"):
        raise InputError("grep_semantic runs semantic and hybrid searches of messages")
    conversations = len(conversation_ids)
    notes: list[str] = []
    if options.scope == "both":
        notes.append("(semantic search covers messages; search summaries and files with mode='full_text' or 'regex')")
    if not conversation_ids:
        return GrepResult(options, message=no_matches(options, conversations), conversations=conversations)
    fulltext: list[int] = []
    if options.mode == "hybrid":
        fulltext, skipped = await _keyword_ranking(store, options, conversation_ids)
        if skipped is not None:
            notes.append(skipped)
    filtered = options.since is not None or options.before is not None
    window = _MAX_CANDIDATES if filtered else options.limit + 1
    ranked = await search.search(
        options.pattern,
        list(conversation_ids),
        limit=window,
        mode="hybrid" if options.mode == "hybrid" else "semantic",
        fulltext=fulltext,
    )
    allowed = set(conversation_ids)
    # A message sharing nothing with the query (similarity 0 or less) is no match, only a rank.
    ranked = [h for h in ranked if h.conversation_id in allowed and (options.mode == "hybrid" or h.score > 0)]
    records = {m.id: m for m in await store.get_messages_by_id([h.message_id for h in ranked])}
    words = [w for w in re.findall(r"\w+", options.pattern) if len(w) > 1]
    hits: list[GrepHit] = []
    more = False
    for found in ranked:
        record = records.get(found.message_id)
        if record is None or record.conversation_id not in allowed:
            continue
        when = record.created_at
        if (options.since is not None and when < options.since) or (
            options.before is not None and when >= options.before
        ):
            continue
        if len(hits) == options.limit:
            more = True
            break
        hits.append(
            GrepHit(
                scope="messages",
                ref=record.id,
                conversation_id=record.conversation_id,
                created_at=when,
                snippet=snippet(record.content, *_locate(record.content, words)),
                role=record.role,
                score=found.score,
            )
        )
    if not hits:
        message = "\n".join([no_matches(options, conversations), *notes])
        return GrepResult(options, message=message, conversations=conversations)
    return GrepResult(options, tuple(hits), conversations=conversations, more=more, notes=tuple(notes))
