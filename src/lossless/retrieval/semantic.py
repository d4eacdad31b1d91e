"""Searching messages and summaries by meaning (``lcm_grep`` with ``mode="semantic"`` or ``"hybrid"``).

The vectors come from a :class:`SemanticSearch` port: the engine supplies
:class:`lossless.memory.messages.MessageSearch`, which ranks the vectors that the background build
stored for messages and summaries (with the long-term memory's embedder: the offline local model by
default) and embeds only the query.  This module only turns its rankings into a
:class:`~lossless.retrieval.grep.GrepResult`.

Invariants:

* **Only the conversations passed in** (already checked against the caller's reach) are searched;
  the port is given exactly those ids, and ids it returns from elsewhere are dropped.
* Both modes rank through :func:`~lossless.retrieval.hybrid.hybrid_hits`.  ``semantic`` ranks by meaning
  alone: the cosine of each item's best chunk to the question (for messages, blended with its cosine to the
  question's keywords and to the question without the speakers' names it mentions), scaled to 0–1 over the
  candidates, then hybrid's steps that score no words (neighbouring turns, the substance and asking priors,
  time in the question, what an agent's question asks for; "two weeks before the trip" still dates the
  trip by its best word matches); an item with no positive similarity is no candidate.  ``hybrid`` fuses
  that meaning side with the full-text ranking of the question's words in the same table (BM25, any of its
  keywords; normalised-score fusion) and adds the memory leads, so an exact keyword and a paraphrase both
  rank.  Results are always best match first: with ``scope="both"`` messages and summaries are merged by
  score (both on the same 0–1 scale, plus what the steps add).
* **No hit twice** (``hybrid``, ``scope="both"``): a leaf summary whose best match inside is a message
  already listed above it is folded into that message's hit (``GrepHit.summary``), so the places go to
  other matches and the summary stays one citation away.
* A summary rewritten in place is found by its new text only (its vectors go with the old text).
* **No search waits for embedding.**  While the build has not covered everything searched, a
  ``semantic`` search runs as ``hybrid`` (the built vectors by meaning, every item by its words) and
  its result carries a note saying how much is built (the port's optional ``coverage``).
* **Hybrid without an embedder ranks by words.**  Where no embedder can run (the base install, without
  the ``embeddings`` extra), ``hybrid`` ranks by the question's words alone (BM25, neighbouring turns,
  time) and its result says so and what to install; ``semantic`` raises the missing-dependency error.
* Stored files are not embedded: ``scope="files"`` with these modes is refused by
  :class:`~lossless.retrieval.grep.GrepOptions`.
* ``since`` / ``before`` filter the ranked items by time exactly as the full-text path does (a
  message by when it was stored; a summary when the span it covers overlaps); ``limit``, ``more``
  and the output cap apply as for every grep.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Literal, Protocol

from lossless.errors import InputError
from lossless.ports import SearchRequest, SearchRow, Store
from lossless.questions import FUNCTION_WORDS, STOPWORDS
from lossless.retrieval.grep import (
    SEMANTIC_MODES,
    GrepHit,
    GrepOptions,
    GrepResult,
    no_matches,
)
from lossless.retrieval.hybrid import hybrid_hits
from lossless.retrieval.query import FullTextQuery, QuerySyntax, parse_full_text

__all__ = ["INDEX_BUILDING_NOTE", "SemanticHit", "SemanticSearch", "SemanticSummaryHit", "grep_semantic"]

SearchMode = Literal["semantic", "hybrid"]


class SemanticHit(Protocol):
    """One message the port found, with its similarity (higher is closer)."""

    @property
    def message_id(self) -> int: ...

    @property
    def conversation_id(self) -> int: ...

    @property
    def score(self) -> float: ...


class SemanticSummaryHit(Protocol):
    """One summary the port found, with its similarity (higher is closer)."""

    @property
    def summary_id(self) -> str: ...

    @property
    def conversation_id(self) -> int: ...

    @property
    def score(self) -> float: ...


class SemanticSearch(Protocol):
    """Meaning-based search over stored messages and summaries (see :class:`lossless.memory.messages.MessageSearch`)."""

    async def search(
        self,
        query: str,
        conversation_ids: Sequence[int],
        *,
        limit: int = 20,
        mode: SearchMode = "semantic",
        fulltext: Sequence[int] = (),
    ) -> Sequence[SemanticHit]: ...

    async def search_summaries(
        self,
        query: str,
        conversation_ids: Sequence[int],
        *,
        limit: int = 20,
        mode: SearchMode = "semantic",
        fulltext: Sequence[str] = (),
    ) -> Sequence[SemanticSummaryHit]: ...


#: How the note of a search answered from a partial semantic index opens (the engine watches for it).
INDEX_BUILDING_NOTE = "(semantic index still building:"


async def _partial_index(
    search: SemanticSearch, conversation_ids: tuple[int, ...], scopes: Sequence[Literal["messages", "summaries"]]
) -> str | None:
    """A note saying how much is embedded yet, when the background build has not covered everything."""
    coverage = getattr(search, "coverage", None)
    if coverage is None:
        return None
    parts: list[str] = []
    for scope in scopes:
        indexed, total = await coverage(conversation_ids, scope)
        if indexed < total:
            parts.append(f"{indexed:,} of {total:,} {scope} ({100 * indexed / total:.0f}%)")
    if not parts:
        return None
    return (
        f"{INDEX_BUILDING_NOTE} {' and '.join(parts)} embedded so far; the rest was searched by "
        "its words. Background workers (`lcm worker`, `lcm mcp`, `lcm serve`, `engine.background()`) build it "
        "when idle; `lcm index` or `await engine.build_index()` finishes it now.)"
    )


async def grep_semantic(
    store: Store,
    options: GrepOptions,
    conversation_ids: tuple[int, ...],
    search: SemanticSearch | None,
    *,
    agent: str | None = None,
    without_meaning: str | None = None,
    ahead: Mapping[SearchRequest, list[SearchRow]] | None = None,
) -> GrepResult:
    """Rank the messages and/or summaries of ``conversation_ids`` by meaning, or meaning and words (``hybrid``).

    ``agent``: the caller, whose long-term memories (of those conversations only) ``hybrid`` fuses.
    ``search=None`` (``hybrid`` only): no embedder can run, so the question is ranked by its words alone
    and the result says so, with ``without_meaning`` (why; what to install).  ``ahead``: pages of the keyword
    searches read ahead (:func:`~lossless.retrieval.hybrid.keyword_requests`), used where they answer one.
    """
    if options.mode not in SEMANTIC_MODES or options.scope not in ("messages", "summaries", "both"):
        raise InputError("grep_semantic runs semantic and hybrid searches of messages and summaries")
    if search is None and options.mode != "hybrid":
        raise InputError("a semantic search needs an embedder; only hybrid ranks by words alone without one")
    conversations = len(conversation_ids)
    if not conversation_ids:
        return GrepResult(options, message=no_matches(options, conversations), conversations=conversations)
    scopes: list[Literal["messages", "summaries"]] = (
        ["messages", "summaries"] if options.scope == "both" else [options.scope]
    )
    notes: list[str] = []
    query: FullTextQuery | None = None
    if options.mode == "hybrid":
        parsed = parse_full_text(options.pattern)
        if isinstance(parsed, QuerySyntax):
            notes.append(f"(the keyword half of hybrid search was skipped: {parsed.message})")
        else:
            query = parsed
    if search is None:
        notes.append(f"(ranked by words only, not by meaning: {without_meaning or 'no embedder is configured'})")
    partial = None if search is None else await _partial_index(search, conversation_ids, scopes)
    if partial is not None:
        # Vectors are built in the background, never by a search: while the build is under way a semantic
        # search runs as hybrid (what is built by meaning, everything by its words) and says how much is built.
        notes.append(partial)
        if query is None and options.mode == "semantic":
            parsed = parse_full_text(options.pattern)
            query = None if isinstance(parsed, QuerySyntax) else parsed
    found: list[GrepHit] = []
    more = False
    shared: dict[str, dict[int | str, float]] = {}  # one fused message ranking for both scopes
    for scope in scopes:
        hits, extra = await hybrid_hits(
            store,
            options,
            conversation_ids,
            search,
            scope,
            # semantic: by meaning alone (but while the build runs: what is not built yet is found by its words)
            keyword=query is not None,
            agent=agent,
            # By words alone, a question's glue words ("finally get through") are all that may match: keep them,
            # as the any-word ranking of a full_text question does.
            stopwords=STOPWORDS if search is not None else FUNCTION_WORDS,
            shared=shared,
            ahead=ahead,
        )
        found += hits
        more = more or extra
    if len(scopes) > 1:
        # Both kinds are scored by the same ranking (the meaning side scaled 0-1, plus its steps): one order.
        found.sort(key=lambda h: -(h.score or 0.0))
        found = _folded(found)
        more = more or len(found) > options.limit
        found = found[: options.limit]
    if not found:
        message = "\n".join([no_matches(options, conversations), *notes])
        return GrepResult(options, message=message, conversations=conversations)
    return GrepResult(options, tuple(found), conversations=conversations, more=more, notes=tuple(notes))


def _folded(hits: Sequence[GrepHit]) -> list[GrepHit]:
    """``hits`` (best first) with each summary whose best match inside is a message hit above it folded
    into that hit: the message names the summary, which leaves the list."""
    out: list[GrepHit] = []
    listed: dict[int, int] = {}  # message id -> its place in out
    for hit in hits:
        if hit.scope == "messages" and isinstance(hit.ref, int):
            listed[hit.ref] = len(out)
        elif hit.scope == "summaries" and hit.source is not None and hit.source in listed:
            place = listed[hit.source]
            if out[place].summary is None:
                out[place] = replace(out[place], summary=str(hit.ref))
                continue
        out.append(hit)
    return out
