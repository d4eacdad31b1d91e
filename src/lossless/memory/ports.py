"""The memory layer's ports: where memories are kept, and what turns text into vectors.

Invariants a :class:`MemoryStore` keeps (``tests/test_memory.py`` checks them; the times,
``tests/test_memory_clock.py``):

* **Transactional.**  Each method is one transaction: ``insert`` stores every
  draft with its source links and vectors or nothing; ``update`` changes a row
  in place (never delete-then-add); ``supersede`` inserts the new version and
  invalidates the old one together.
* **History is kept.**  Superseding never deletes; only ``delete`` removes a
  memory (with its vectors and source links).
* **Provenance is checked.**  A draft naming a conversation and source messages
  is refused (``NotFoundError``) unless they exist and belong together.
* **Scopes are filters, not hints.**  Every read taking ``scopes`` returns only
  memories in those scopes; ``None`` (all scopes) is for system callers only —
  the memory service decides, the store obeys.
* **Mining is claimed once.**  ``claim_messages`` records each stored message at
  most once (rows vanish with their conversation); of two claims of the same
  message, one gets it — so no message is mined for memories twice.
* **Times are given, never read.**  Every time a store writes — ``created_at``,
  ``updated_at``, ``invalidated_at``, a draft's ``valid_from`` when it names none,
  an access, a mining claim, a grant, a cached embedding — is the ``now`` (or
  ``when``) its caller passed: no store method reads a clock (Python's or the
  database's ``now()``), so the memory service's one clock decides every time
  that decay and recency compare.
* Keyword search is safe for any query text (no FTS syntax reaches SQLite) and
  finds Chinese, Japanese and Korean text (trigram index plus a bigram scan).

An :class:`Embedder` is deterministic for a given model and returns unit-length
``float32`` vectors of ``dimensions`` each, one per input, in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from lossless.memory.records import Decision, Memory, MemoryDraft, MemoryPatch, MemoryStats, Tier
from lossless.records import MessageRecord

__all__ = [
    "DedupJudge",
    "Embedder",
    "EmbeddingTask",
    "Extractor",
    "KeywordHit",
    "MemoryStore",
    "NearestNeighbours",
    "Reranker",
    "StoredVectors",
]

#: (model name, one float32 blob per chunk).  An empty tuple of blobs stores no vectors.
StoredVectors: TypeAlias = tuple[str, tuple[bytes, ...]]
EmbeddingTask: TypeAlias = Literal["query", "passage"]


@dataclass(frozen=True, slots=True)
class KeywordHit:
    """A keyword match and its raw BM25-style score (higher is better, unbounded)."""

    memory_id: str
    score: float


@runtime_checkable
class Embedder(Protocol):
    """Text in, unit vectors out."""

    @property
    def model(self) -> str:
        """Identifies the vector space: vectors of different models are never compared."""
        ...

    @property
    def dimensions(self) -> int: ...

    @property
    def max_chars(self) -> int:
        """Longest text embedded as one vector; longer texts are chunked by the caller."""
        ...

    async def embed(self, texts: Sequence[str], *, task: EmbeddingTask = "passage") -> list[list[float]]: ...


@runtime_checkable
class Reranker(Protocol):
    """A cross-encoder: relevance of each document to the query, by document index (any failure raises)."""

    @property
    def name(self) -> str: ...

    async def rerank(self, query: str, documents: Sequence[str]) -> dict[int, float]: ...


@runtime_checkable
class Extractor(Protocol):
    """Turns a conversation segment into at most five memory drafts with provenance (failures raise)."""

    name: str

    async def extract(self, conversation_id: int, messages: Sequence[MessageRecord]) -> list[MemoryDraft]: ...


@runtime_checkable
class DedupJudge(Protocol):
    """A model that makes the dedup decisions, writes merged texts and rates utility (failures raise).

    ``decide`` returns ``None`` where the deterministic rules decide alone; whatever it returns
    already obeys the category rules.
    """

    name: str

    async def decide(self, draft: MemoryDraft, neighbours: Sequence[tuple[Memory, float]]) -> Decision | None: ...

    async def merge(
        self, existing: Memory, draft: MemoryDraft, *, context_label: str | None
    ) -> tuple[str, str, str]: ...

    async def rate(self, drafts: Sequence[MemoryDraft], sources: Sequence[str]) -> list[float]: ...


class MemoryStore(Protocol):
    """Memories with their vectors, keyword index, embedding cache and scope grants."""

    async def insert(
        self, drafts: Sequence[MemoryDraft], vectors: Sequence[StoredVectors], *, now: datetime
    ) -> list[Memory]: ...

    async def supersede(self, old_id: str, draft: MemoryDraft, vectors: StoredVectors, *, now: datetime) -> Memory: ...

    async def update(
        self, memory_id: str, patch: MemoryPatch, vectors: StoredVectors | None, *, now: datetime
    ) -> Memory: ...

    async def delete(self, memory_ids: Sequence[str]) -> int: ...

    async def import_memories(self, memories: Sequence[Memory], vectors: Sequence[StoredVectors]) -> int: ...

    async def record_access(self, memory_ids: Sequence[str], when: datetime) -> list[Memory]: ...

    async def set_tiers(self, changes: Mapping[str, Tier]) -> None: ...

    async def get(self, memory_ids: Sequence[str]) -> list[Memory]: ...

    async def find_by_prefix(self, prefix: str, scopes: Sequence[str] | None) -> list[Memory]: ...

    async def list_memories(
        self,
        scopes: Sequence[str] | None,
        *,
        category: str | None = None,
        include_superseded: bool = False,
        fact_key: str | None = None,
        after_rowid: int = 0,
        limit: int = 100,
    ) -> list[tuple[int, Memory]]: ...

    async def keyword_search(
        self,
        query: str,
        scopes: Sequence[str] | None,
        *,
        limit: int,
        include_superseded: bool = False,
        conversations: Sequence[int] | None = None,
    ) -> list[KeywordHit]:
        """The best ``limit`` memories of ``scopes`` for the query's words (``conversations``: mined there only)."""
        ...

    async def memory_ids_from(self, conversation_ids: Sequence[int]) -> set[str]:
        """The ids of the memories mined from these conversations (current or not)."""
        ...

    async def load_vectors(self, model: str) -> tuple[int, list[tuple[str, str, bool, bytes]]]: ...

    async def revision(self) -> int: ...

    async def memories_without_vectors(self, model: str, limit: int = 500) -> list[Memory]: ...

    async def put_vectors(self, memory_id: str, vectors: StoredVectors) -> None: ...

    async def stats(self, scopes: Sequence[str] | None) -> MemoryStats: ...

    async def cached_embeddings(self, hashes: Sequence[str], model: str) -> dict[str, bytes]: ...

    async def cache_embeddings(self, items: Mapping[str, bytes], model: str, *, now: datetime) -> None: ...

    async def grants(self) -> dict[str, list[str]]: ...

    async def claim_messages(self, message_ids: Sequence[int], when: datetime) -> list[int]:
        """Record stored messages as mined for memories; returns those not recorded before (in the given order)."""
        ...

    async def release_messages(self, message_ids: Sequence[int]) -> None:
        """Forget that these messages were mined (a mining that failed gives its claim back)."""
        ...

    async def unmined_messages(self, agent_id: str, *, after: int = 0, limit: int = 200) -> tuple[list[int], int]:
        """Up to ``limit`` ids, ascending, of ``agent_id``'s stored messages after ``after`` never mined.

        Also returns where to continue from: the last message id looked at (``after`` when there is
        none newer), so a caller walking the backlog never reads the same mined rows twice.
        """
        ...

    async def grant(self, agent_id: str, scopes: Iterable[str], *, now: datetime) -> None: ...

    async def revoke(self, agent_id: str, scopes: Iterable[str]) -> int: ...


@runtime_checkable
class NearestNeighbours(Protocol):
    """Optional: a :class:`MemoryStore` that searches vectors itself (PostgreSQL with pgvector).

    ``nearest`` has the contract of :meth:`lossless.memory.vectors.VectorIndex.search` — memories
    by their best chunk's cosine with ``query`` (a float32 blob), best first, ties by id, only in
    ``scopes`` (``None``: all), current ones unless ``include_superseded``, at least
    ``min_similarity`` — as ``(memory_id, similarity)`` pairs.  It answers ``None`` when the caller
    should search exactly in memory instead: no index here, or at most ``exact_max`` chunk vectors
    of ``model``.  ``vectors_of`` returns :meth:`MemoryStore.load_vectors` rows of some memories.
    """

    async def nearest(
        self,
        model: str,
        query: bytes,
        *,
        limit: int,
        scopes: Sequence[str] | None,
        include_superseded: bool = False,
        min_similarity: float = -1.0,
        exact_max: int,
    ) -> list[tuple[str, float]] | None: ...

    async def vectors_of(self, model: str, memory_ids: Sequence[str]) -> list[tuple[str, str, bool, bytes]]: ...
