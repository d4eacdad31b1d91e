"""Semantic search over the lossless store's messages and summaries, with the memory layer's embedder and cache.

The grep tools of the context engine search words; this finds messages and
summaries by meaning, and fuses with any full-text ranking the caller already
has (``mode = "hybrid"``: reciprocal-rank fusion, k = 60).

Invariants:

* No new storage: a message's or summary's chunks are derived from its content
  deterministically (:func:`~lossless.memory.vectors.chunk_text`), and their
  vectors live in the memory layer's embedding cache keyed by (content hash,
  model) — a text is embedded once, ever, per model.
* A message or summary matches by its best chunk.  Only the conversations
  passed in are searched (the caller decides what the agent may see), and
  full-text ids of other conversations are ignored.
* Each conversation has one index of its messages and one of its summaries.
  The message index is rebuilt only when the conversation gained messages
  since it was built (messages are append-only).  Summaries can be rewritten in
  place (same id, new text: :meth:`~lossless.ports.Store.rewrite_summary`), so
  the summary index is keyed on the store's
  :meth:`~lossless.ports.Store.summary_fingerprint` (count, highest row, rewrite
  count: one small query) and rebuilt whenever a summary was added or any
  summary rewritten: a rewritten summary is never found by its old text.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from lossless.errors import InputError
from lossless.memory.service import MemoryService
from lossless.memory.vectors import VectorIndex, to_blob
from lossless.ports import Store

__all__ = ["MessageHit", "MessageSearch", "SummaryHit", "reciprocal_rank_fusion"]


class _Id(Hashable, Protocol):
    """An id fusion can rank: hashable, and ordered among its kind (ties are broken by id)."""

    def __lt__(self, other: Any, /) -> bool: ...


K = TypeVar("K", bound=_Id)
Mode = Literal["semantic", "hybrid"]


@dataclass(frozen=True, slots=True)
class MessageHit:
    message_id: int
    conversation_id: int
    score: float


@dataclass(frozen=True, slots=True)
class SummaryHit:
    summary_id: str
    conversation_id: int
    score: float


def reciprocal_rank_fusion(*rankings: Sequence[K], k: int = 60) -> list[tuple[K, float]]:
    """Ids (message ids, summary ids, any hashable ordered ids) by ``Σ 1/(k + rank)``, best first (ties by id)."""
    scores: dict[K, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, 1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


class MessageSearch:
    """Meaning-based search over stored messages and summaries, embedding them on first use."""

    def __init__(self, store: Store, memory: MemoryService) -> None:
        self.store = store
        self.memory = memory
        self._indexes: dict[int, tuple[int, VectorIndex]] = {}
        self._summary_indexes: dict[int, tuple[tuple[int, int, int], VectorIndex]] = {}

    async def _build(self, revision: int, items: Sequence[tuple[str, str]]) -> VectorIndex:
        """An index of ``(id, text)`` items: one row per chunk of each non-blank text."""
        items = [(key, text) for key, text in items if text.strip()]
        pieces = [self.memory.chunks("", text) for _, text in items]
        vectors = await self.memory.embed([p for chunks in pieces for p in chunks])
        rows: list[tuple[str, str, bool, bytes]] = []
        start = 0
        for (key, _), chunks in zip(items, pieces, strict=True):
            rows.extend((key, "global", True, to_blob(v)) for v in vectors[start : start + len(chunks)])
            start += len(chunks)
        return VectorIndex(revision, rows, exact_max=self.memory.exact_search_max)

    async def _index(self, conversation_id: int) -> VectorIndex:
        count = await self.store.count_messages(conversation_id)
        cached = self._indexes.get(conversation_id)
        if cached is not None and cached[0] == count:
            return cached[1]
        messages = await self.store.get_messages(conversation_id)
        index = await self._build(count, [(str(m.id), m.content) for m in messages])
        self._indexes[conversation_id] = (count, index)
        return index

    async def _summary_index(self, conversation_id: int) -> VectorIndex:
        fingerprint = await self.store.summary_fingerprint(conversation_id)
        cached = self._summary_indexes.get(conversation_id)
        if cached is not None and cached[0] == fingerprint:
            return cached[1]
        summaries = await self.store.list_summaries(conversation_id)
        index = await self._build(len(summaries), [(s.id, s.content) for s in summaries])
        self._summary_indexes[conversation_id] = (fingerprint, index)
        return index

    async def _rank(
        self,
        query: str,
        conversation_ids: Sequence[int],
        *,
        limit: int,
        mode: Mode,
        fulltext: Sequence[K],
        index: Callable[[int], Awaitable[VectorIndex]],
        parse: Callable[[str], K],
        owners: Callable[[list[K]], Awaitable[list[tuple[K, int]]]],
    ) -> list[tuple[K, int, float]]:
        """``(id, conversation id, score)`` of the ``limit`` best items, the same way for messages and summaries."""
        if not query.strip():
            raise InputError("the search query must be non-empty text")
        if not 1 <= limit <= 1000:
            raise InputError(f"limit must be between 1 and 1000, got {limit}")
        if mode not in ("semantic", "hybrid"):
            raise InputError(f"mode must be semantic or hybrid, got {mode!r}")
        (qvec,) = await self.memory.embed([query], task="query")
        hits: list[tuple[K, int, float]] = []
        for conversation_id in dict.fromkeys(conversation_ids):
            found = (await index(conversation_id)).search(qvec, limit=limit * 2)
            hits += [(parse(h.memory_id), conversation_id, h.similarity) for h in found]
        hits.sort(key=lambda h: (-h[2], h[0]))
        if mode == "semantic":
            return hits[:limit]
        owner = {key: conversation_id for key, conversation_id, _ in hits}
        fused = reciprocal_rank_fusion([key for key, _, _ in hits], list(fulltext))
        unknown = [key for key, _ in fused if key not in owner]
        if unknown:  # full-text ids the vectors did not rank: one lookup for all of them
            permitted = set(conversation_ids)
            owner.update((key, c) for key, c in await owners(unknown) if c in permitted)
        # a full-text id outside the permitted conversations is ignored
        return [(key, owner[key], score) for key, score in fused if key in owner][:limit]

    async def search(
        self,
        query: str,
        conversation_ids: Sequence[int],
        *,
        limit: int = 20,
        mode: Mode = "semantic",
        fulltext: Sequence[int] = (),
    ) -> list[MessageHit]:
        """The ``limit`` best messages of ``conversation_ids``; ``hybrid`` fuses with the ``fulltext`` ranking."""

        async def owners(ids: list[int]) -> list[tuple[int, int]]:
            return [(m.id, m.conversation_id) for m in await self.store.get_messages_by_id(ids)]

        ranked = await self._rank(
            query,
            conversation_ids,
            limit=limit,
            mode=mode,
            fulltext=fulltext,
            index=self._index,
            parse=int,
            owners=owners,
        )
        return [MessageHit(m, c, s) for m, c, s in ranked]

    async def search_summaries(
        self,
        query: str,
        conversation_ids: Sequence[int],
        *,
        limit: int = 20,
        mode: Mode = "semantic",
        fulltext: Sequence[str] = (),
    ) -> list[SummaryHit]:
        """The ``limit`` best summaries of ``conversation_ids``; ``hybrid`` fuses with the ``fulltext`` ranking."""

        async def owners(ids: list[str]) -> list[tuple[str, int]]:
            return [(s.id, s.conversation_id) for s in await self.store.get_summaries(ids)]

        ranked = await self._rank(
            query,
            conversation_ids,
            limit=limit,
            mode=mode,
            fulltext=fulltext,
            index=self._summary_index,
            parse=str,
            owners=owners,
        )
        return [SummaryHit(s, c, score) for s, c, score in ranked]
