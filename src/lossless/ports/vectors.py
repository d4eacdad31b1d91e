"""The search-vector port: vectors of messages and summaries, built ahead in the background and read by semantic search.

A search never builds vectors: it reads what is stored and can say what share is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

__all__ = [
    "ItemVectors",
    "SearchVectorStore",
    "VectorSource",
    "VectorState",
    "VectorTodo",
]


#: What search vectors cover: stored messages, or summaries.
VectorSource = Literal["messages", "summaries"]


@dataclass(frozen=True, slots=True)
class VectorTodo:
    """A message or summary that has no search vectors for a model yet.

    ``row`` orders the work and is the cursor of the next call (the message id, or the summary's
    row number); ``key`` is the message id or the summary id.
    """

    row: int
    key: int | str
    conversation_id: int
    content: str


@dataclass(frozen=True, slots=True)
class ItemVectors:
    """The search vectors of one message or summary: one little-endian float32 blob per chunk.

    No vectors (a blank text) is recorded too, so the text counts as indexed and is not asked for again.
    """

    key: int | str
    conversation_id: int
    vectors: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class VectorState:
    """One conversation's search vectors for one model and source.

    ``indexed`` of ``total`` items have vectors (or are blank); ``rows`` counts the chunk vectors.
    ``revision`` (where the store keeps one) changes with every vector added or removed; an in-memory
    copy of the vectors is stale when ``(rows, revision)`` differs from what it was loaded at.
    """

    indexed: int
    total: int
    rows: int
    revision: int = 0


@runtime_checkable
class SearchVectorStore(Protocol):
    """Durable search vectors of messages and summaries, per embedding model.

    Contract: vectors are written by the background build (never by a search); a summary rewritten
    in place loses its vectors in the rewriting transaction (so it is never found by its old text
    and the build embeds it again); vectors go with their message, summary and conversation.
    Writing vectors that are already stored is harmless (the stored ones are kept).  Optional, where a store
    has them: ``vector_models`` and ``drop_item_vectors`` (an old index format's space given back) and
    ``copy_item_vectors`` (an index format upgrade copies the vectors of unchanged texts in the store).
    """

    async def vectors_todo(
        self, model: str, source: VectorSource, *, after: int = 0, limit: int = 256
    ) -> list[VectorTodo]:
        """Up to ``limit`` items with ``row > after`` that have no vectors for ``model``, by ``row``."""
        ...

    async def put_item_vectors(self, model: str, source: VectorSource, items: Sequence[ItemVectors]) -> int:
        """Store the items' vectors (one transaction); returns how many items were new."""
        ...

    async def vector_states(
        self, model: str, source: VectorSource, conversation_ids: Sequence[int]
    ) -> dict[int, VectorState]:
        """The state of each listed conversation (one that does not exist is left out)."""
        ...

    async def vector_totals(self, model: str, source: VectorSource) -> VectorState:
        """The state of the whole store (every conversation)."""
        ...

    async def load_item_vectors(
        self, model: str, source: VectorSource, conversation_id: int
    ) -> list[tuple[int | str, bytes]]:
        """``(key, vector)`` of every chunk vector of the conversation, by key then chunk."""
        ...

    async def nearest_items(
        self,
        model: str,
        source: VectorSource,
        query: bytes,
        conversation_ids: Sequence[int],
        *,
        limit: int,
    ) -> list[tuple[int | str, int, float]] | None:
        """``(key, conversation id, cosine)`` of the nearest items, best first, answered by the database's
        own vector index; ``None`` where it has none (then the caller searches the loaded vectors)."""
        ...
