"""Semantic search over the lossless store's messages, with the memory layer's embedder and cache.

The grep tools of the context engine search words; this finds messages by
meaning, and fuses with any full-text ranking the caller already has
(``mode = "hybrid"``: reciprocal-rank fusion, k = 60).

Invariants:

* No new storage: a message's chunks are derived from its content
  deterministically (:func:`~lossless.memory.vectors.chunk_text`), and their
  vectors live in the memory layer's embedding cache keyed by (content hash,
  model) — a message is embedded once, ever, per model.
* A message matches by its best chunk.  Only the conversations passed in are
  searched (the caller decides what the agent may see).
* The per-conversation index is rebuilt only when the conversation gained
  messages since it was built (messages are append-only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from lossless.errors import InputError
from lossless.memory.service import MemoryService
from lossless.memory.vectors import VectorIndex, to_blob
from lossless.ports import Store

__all__ = ["MessageHit", "MessageSearch", "reciprocal_rank_fusion"]


@dataclass(frozen=True, slots=True)
class MessageHit:
    message_id: int
    conversation_id: int
    score: float


def reciprocal_rank_fusion(*rankings: Sequence[int], k: int = 60) -> list[tuple[int, float]]:
    """Ids by ``Σ 1/(k + rank)`` over the rankings, best first (ties by id)."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, 1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


class MessageSearch:
    """Meaning-based search over stored messages, embedding them on first use."""

    def __init__(self, store: Store, memory: MemoryService) -> None:
        self.store = store
        self.memory = memory
        self._indexes: dict[int, tuple[int, VectorIndex]] = {}

    async def _index(self, conversation_id: int) -> VectorIndex:
        count = await self.store.count_messages(conversation_id)
        cached = self._indexes.get(conversation_id)
        if cached is not None and cached[0] == count:
            return cached[1]
        messages = [m for m in await self.store.get_messages(conversation_id) if m.content.strip()]
        pieces = [self.memory.chunks("", m.content) for m in messages]
        vectors = await self.memory.embed([p for chunks in pieces for p in chunks])
        rows: list[tuple[str, str, bool, bytes]] = []
        start = 0
        for message, chunks in zip(messages, pieces, strict=True):
            rows.extend((str(message.id), "global", True, to_blob(v)) for v in vectors[start : start + len(chunks)])
            start += len(chunks)
        index = VectorIndex(count, rows, exact_max=self.memory.exact_search_max)
        self._indexes[conversation_id] = (count, index)
        return index

    async def search(
        self,
        query: str,
        conversation_ids: Sequence[int],
        *,
        limit: int = 20,
        mode: Literal["semantic", "hybrid"] = "semantic",
        fulltext: Sequence[int] = (),
    ) -> list[MessageHit]:
        """The ``limit`` best messages of ``conversation_ids``; ``hybrid`` fuses with the ``fulltext`` ranking."""
        if not query.strip():
            raise InputError("the search query must be non-empty text")
        if not 1 <= limit <= 1000:
            raise InputError(f"limit must be between 1 and 1000, got {limit}")
        if mode not in ("semantic", "hybrid"):
            raise InputError(f"mode must be semantic or hybrid, got {mode!r}")
        (qvec,) = await self.memory.embed([query], task="query")
        hits: list[tuple[int, int, float]] = []
        for conversation_id in dict.fromkeys(conversation_ids):
            index = await self._index(conversation_id)
            hits += [(int(h.memory_id), conversation_id, h.similarity) for h in index.search(qvec, limit=limit * 2)]
        hits.sort(key=lambda h: (-h[2], h[0]))
        owner = {message_id: conversation_id for message_id, conversation_id, _ in hits}
        if mode == "semantic":
            return [MessageHit(m, c, s) for m, c, s in hits[:limit]]
        fused = reciprocal_rank_fusion([m for m, _, _ in hits], list(fulltext))
        unknown = [m for m, _ in fused if m not in owner]
        if unknown:  # full-text ids the vectors did not rank: one lookup for all of them
            permitted = set(conversation_ids)
            found = await self.store.get_messages_by_id(unknown)
            owner.update((m.id, m.conversation_id) for m in found if m.conversation_id in permitted)
        # a full-text id outside the permitted conversations is ignored
        return [MessageHit(m, owner[m], score) for m, score in fused if m in owner][:limit]
