"""Semantic search over the lossless store's messages and summaries, from their stored vectors.

The grep tools of the context engine search words; this finds messages and
summaries by meaning, and fuses with any full-text ranking the caller already
has (``mode = "hybrid"``: reciprocal-rank fusion, k = 60).

Invariants:

* **A search never embeds stored text.**  Vectors are built ahead, in the background, by
  :class:`~lossless.memory.message_index.VectorBuilder` and kept durably by the store
  (:class:`~lossless.ports.SearchVectorStore`); a search embeds only its query.  What is not
  built yet is simply not ranked by meaning: :meth:`MessageSearch.coverage` says how much is,
  and the grep layer searches the rest by its words and says so.
* A message or summary matches by its best chunk.  Only the conversations
  passed in are searched (the caller decides what the agent may see), and
  full-text ids of other conversations are ignored.
* Where the store searches vectors itself (PostgreSQL with pgvector: HNSW, the conversation
  filter in SQL) it answers; otherwise each conversation's vectors are loaded once into one
  in-process matrix (:class:`~lossless.memory.vector_blocks.VectorBlocks`) and held until the
  store's ``(rows, revision)`` of that conversation changes: only changed conversations are read
  again, and a search of many conversations is one matrix product.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from lossless.errors import InputError, StoreError
from lossless.memory.message_index import index_model
from lossless.memory.querying import MAX_QUERY_CHARS
from lossless.memory.service import MemoryService
from lossless.memory.vector_blocks import VectorBlocks
from lossless.memory.vectors import to_blob
from lossless.ports import SearchVectorStore, Store, VectorSource, VectorState

__all__ = ["MemoryLead", "MessageHit", "MessageSearch", "SummaryHit", "reciprocal_rank_fusion"]


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
class MemoryLead:
    """A message that a long-term memory was mined from, led to by the memory's search score."""

    message_id: int
    conversation_id: int
    score: float


#: A source a memory cites only for what it quotes (the earlier statement a change of mind takes
#: back, :func:`lossless.memory.changes.with_history`) is led to with this share of the memory's score.
#: A memory that only quotes (each of its sources: a turn of an agent's session quoted whole,
#: :mod:`lossless.memory.requests`) leads nowhere: it restates nothing its message does not say itself.
QUOTED_SHARE = 0.5


def _quoted(metadata: Mapping[str, Any] | None) -> frozenset[int]:
    """The sources a memory cites for what it quotes, not for what it says itself."""
    ids = (metadata or {}).get("quoted_sources")
    return frozenset(i for i in ids if isinstance(i, int)) if isinstance(ids, list) else frozenset()


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
    """Meaning-based search over stored messages and summaries, from the vectors the background build stored."""

    def __init__(
        self, store: Store, memory: MemoryService, memory_for: Callable[[str], MemoryService] | None = None
    ) -> None:
        if not isinstance(store, SearchVectorStore):
            raise StoreError(f"the {store.backend} store keeps no search vectors; semantic search needs one that does")
        self.store = store
        self.vectors: SearchVectorStore = store
        self.memory = memory
        #: The memory service of another agent (its own scopes), for :meth:`memory_leads`.
        self._memory_for = memory_for
        self._memory_counts: dict[str, tuple[int, int]] = {}
        self._blocks: dict[VectorSource, VectorBlocks] = {}
        self._handed_states: dict[tuple[VectorSource, tuple[int, ...]], dict[int, VectorState]] = {}

    @property
    def model(self) -> str:
        """The name the vectors are stored under (the embedder's model and the index format version)."""
        return index_model(self.memory.embedder.model)

    @property
    def query_form(self) -> str | None:
        """What of a question the embedder ranks best by (its ``query_form``: ``"question"`` or ``"keywords"``;
        None: it does not say, and hybrid grep keeps its default)."""
        form = getattr(self.memory.embedder, "query_form", None)
        return form if form in ("question", "keywords") else None

    async def _states(
        self, source: VectorSource, conversation_ids: Sequence[int], *, keep: bool = False
    ) -> dict[int, VectorState]:
        """The store's vector states; read once per search (what ``coverage`` read, the ranking takes over)."""
        key = (source, tuple(conversation_ids))
        if not keep:
            handed = self._handed_states.pop(key, None)
            if handed is not None:
                return handed
        states = await self.vectors.vector_states(self.model, source, conversation_ids)
        if keep:
            self._handed_states[key] = states
        return states

    async def coverage(self, conversation_ids: Sequence[int], source: VectorSource) -> tuple[int, int]:
        """``(indexed, total)`` items of ``source`` in the conversations: how much a search ranks by meaning."""
        states = await self._states(source, conversation_ids, keep=True)
        return sum(s.indexed for s in states.values()), sum(s.total for s in states.values())

    async def _query_vector(self, query: str) -> Any:
        """The query's vector, through the memory layer's embedding cache (a repeated query is not embedded again)."""
        (vector,) = await self.memory.embed([query], task="query")
        return vector

    async def _nearest(
        self, source: VectorSource, qvec: Any, conversation_ids: Sequence[int], limit: int, *, recheck: bool = True
    ) -> list[tuple[str, int, float]]:
        """``(key, conversation id, cosine)`` of the nearest stored items, best first.

        ``recheck=False``: conversations whose vectors this process has loaded are ranked as loaded, without
        reading whether they changed (a second search for one question, right after the first read them)."""
        found = await self.vectors.nearest_items(self.model, source, to_blob(qvec), conversation_ids, limit=limit)
        if found is not None:
            return [(str(key), c, score) for key, c, score in found]
        blocks = self._blocks.setdefault(source, VectorBlocks())
        if not recheck and all(c in blocks.spans for c in conversation_ids):
            return blocks.search(qvec, conversation_ids, limit)
        states = await self._states(source, conversation_ids)
        versions = {c: (s.rows, s.revision) for c, s in states.items()}
        gone = [c for c in conversation_ids if c not in states and c in blocks.spans]
        stale = blocks.stale(versions)
        if stale or gone:  # vectors added or removed since they were loaded: reload those conversations only
            loaded = {}
            for conversation_id in stale:
                rows = versions[conversation_id][0]
                vectors = await self.vectors.load_item_vectors(self.model, source, conversation_id) if rows else []
                loaded[conversation_id] = (versions[conversation_id], vectors)
            blocks.update(loaded, gone)
        return blocks.search(qvec, conversation_ids, limit)

    async def _rank(
        self,
        query: str,
        conversation_ids: Sequence[int],
        *,
        source: VectorSource,
        limit: int,
        mode: Mode,
        fulltext: Sequence[K],
        parse: Callable[[str], K],
        owners: Callable[[list[K]], Awaitable[list[tuple[K, int]]]],
        recheck: bool = True,
    ) -> list[tuple[K, int, float]]:
        """``(id, conversation id, score)`` of the ``limit`` best items, the same way for messages and summaries."""
        if not query.strip():
            raise InputError("the search query must be non-empty text")
        if not 1 <= limit <= 1000:
            raise InputError(f"limit must be between 1 and 1000, got {limit}")
        if mode not in ("semantic", "hybrid"):
            raise InputError(f"mode must be semantic or hybrid, got {mode!r}")
        qvec = await self._query_vector(query)
        # Each store ranks items by their best chunk already: twice as many only where the port fuses (hybrid).
        depth = limit * 2 if mode == "hybrid" else limit
        found = await self._nearest(source, qvec, list(conversation_ids), depth, recheck=recheck)
        hits = [(parse(key), conversation_id, score) for key, conversation_id, score in found]
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

    async def memory_leads(
        self, query: str, conversation_ids: Sequence[int], *, agent: str | None = None, limit: int = 25
    ) -> list[MemoryLead]:
        """The source messages of the long-term memories that best match ``query``, best first.

        The memory search runs as ``agent`` (its memory scopes; ``None``: this engine's agent), and
        only memories mined from ``conversation_ids`` lead anywhere: another agent's memories and
        those of conversations out of reach never count.  A message several memories cite keeps its
        best score.  No memory in reach (none mined yet, or memory not used): no leads, and no query
        embedded for them.
        """
        allowed = set(conversation_ids)
        if not allowed or not query.strip():
            return []
        try:
            service = self.memory if agent is None or self._memory_for is None else self._memory_for(agent)
        except InputError:  # a retrieval agent id the memory layer does not accept: it has no memories
            return []
        if agent is not None and self._memory_for is None and service.caller.agent_id != agent:
            return []
        revision = await service.store.revision()  # read once for the question (the search takes it over)
        if not await self._has_memories(service, revision):
            return []
        try:  # a question the memory search refuses (e.g. lone surrogates) simply leads nowhere
            # people=False: hybrid's meaning side reads a question without the names it mentions already;
            # a second memory search per such question cost its p50 about 12 ms and moved no dev R@10.
            result = await service.search(
                query[:MAX_QUERY_CHARS],
                limit=limit,
                record_access=False,
                conversations=sorted(allowed),
                people=False,
                revision=revision,
                ageless=True,  # grep ranks the same whenever it is asked: a fact's age is no evidence
            )
        except InputError:
            return []
        out: dict[int, MemoryLead] = {}
        for hit in result.hits:
            conversation_id = hit.memory.conversation_id
            if conversation_id is None or conversation_id not in allowed:
                continue
            quoted = _quoted(hit.memory.metadata)
            if quoted.issuperset(hit.memory.source_message_ids):  # only quotes: its message has these words itself
                continue
            for message_id in hit.memory.source_message_ids:
                score = hit.score * (QUOTED_SHARE if message_id in quoted else 1.0)
                if message_id not in out or score > out[message_id].score:
                    out[message_id] = MemoryLead(message_id, conversation_id, score)
        return sorted(out.values(), key=lambda lead: (-lead.score, lead.message_id))

    async def _has_memories(self, service: MemoryService, revision: int) -> bool:
        """Whether ``service``'s caller reaches any current memory (counted once per store revision)."""
        key = service.caller.agent_id
        known = self._memory_counts.get(key)
        if known is None or known[0] != revision:
            counted = await service.store.stats(await service.reach(revision))
            known = self._memory_counts[key] = (revision, counted.current)
        return known[1] > 0

    async def search(
        self,
        query: str,
        conversation_ids: Sequence[int],
        *,
        limit: int = 20,
        mode: Mode = "semantic",
        fulltext: Sequence[int] = (),
        recheck: bool = True,
    ) -> list[MessageHit]:
        """The ``limit`` best messages of ``conversation_ids``; ``hybrid`` fuses with the ``fulltext`` ranking.

        ``recheck=False``: the vectors as this process last loaded them (read only for conversations it has not
        loaded): for a second search of the same question right after a first, which read whether they changed.
        """

        async def owners(ids: list[int]) -> list[tuple[int, int]]:
            return [(m.id, m.conversation_id) for m in await self.store.get_messages_by_id(ids)]

        ranked = await self._rank(
            query,
            conversation_ids,
            limit=limit,
            mode=mode,
            fulltext=fulltext,
            source="messages",
            parse=int,
            owners=owners,
            recheck=recheck,
        )
        return [MessageHit(m, c, s) for m, c, s in ranked]

    async def search_again(self, query: str, conversation_ids: Sequence[int], *, limit: int = 20) -> list[MessageHit]:
        """:meth:`search` by meaning with ``recheck=False``: a second search for one question right after the
        first (hybrid grep's search of the question without the names it mentions)."""
        return await self.search(query, conversation_ids, limit=limit, recheck=False)

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
            source="summaries",
            parse=str,
            owners=owners,
        )
        return [SummaryHit(s, c, score) for s, c, score in ranked]
