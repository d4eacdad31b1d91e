"""The memory facade: store, embed, search, update, forget, extract, maintain — for one caller.

Invariants:

* Every call is made *as* a :class:`~lossless.memory.scopes.MemoryCaller`; reads see
  only the scopes it reaches, writes to other scopes raise
  :class:`~lossless.errors.AccessDeniedError` before anything is written.
* Text is embedded in chunks (never averaged), and each chunk's vector is
  cached by (content hash, model) in the store, so re-embedding the same text
  never calls the embedder again.
* Search runs the pipeline of :mod:`lossless.memory.ranking`; a query that names a speaker of its
  candidates is also searched without that name, and the memories naming none of the query's
  people are ranked by the better of the two cosines (:mod:`lossless.memory.people`); a search that
  returns memories counts one access of each and applies the tier rules
  (:mod:`lossless.memory.decay`) at once; :meth:`MemoryService.maintain`
  applies them to every memory.
* Extraction (:meth:`MemoryService.remember`) drops candidates that repeat one
  another (cosine ≥ 0.85), compares each with its three nearest current
  memories at similarity ≥ 0.7, and applies the decision — the rules', or a
  :class:`~lossless.memory.ports.DedupJudge`'s under the same category rules;
  superseded and contradicted memories stay queryable with ``as_of``.  A
  statement older than the memory it would supersede or contradict is skipped
  (mining old history never overwrites a newer value).  A change of mind (a draft
  flagged ``revises``) is first told with the same speaker's earlier statement it
  takes back, when one is alike enough by topic (:mod:`lossless.memory.changes`).
* The judge is a side line (:mod:`lossless.memory.judging`): any failure of it (timeout, garbage, refusal) is
  logged and the rules decide (the rules' merge text, utility 0.5) — a
  candidate is never lost to it and no error reaches the caller.
* :meth:`MemoryService.mine` mines each stored message at most once: it claims
  the messages in the store's mining record first, and gives back the claims of
  what it could not finish (or was asked to leave: ``defer_work``).
* A search limited to some conversations reads their memories' ids once per store revision (a memory
  added or removed bumps it; conversation ids are never reused) and searches their vectors alone.
* **One clock.**  Every time the service has the store write (a memory added, updated,
  superseded or accessed, a mining claim, a cached embedding) and every "now" it ranks, decays,
  admits or moves tiers by is one reading of ``clock`` (the engine's); the store reads none.
* Extraction embeds each draft once (one call for all of them): the dedup vector
  is one of the vectors the memory is stored with, and those are stored as they are.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from lossless.errors import InputError, NotFoundError, ProviderError
from lossless.memory import admission as amac
from lossless.memory import changes, dating, decay, extraction, judging, llm_dedup, mining, querying
from lossless.memory.admission import AdmissionConfig
from lossless.memory.people import cosines, named_people, names_one, without_people
from lossless.memory.ports import (
    DedupJudge,
    Embedder,
    EmbeddingTask,
    Extractor,
    MemoryStore,
    NearestNeighbours,
    Reranker,
    StoredVectors,
)
from lossless.memory.querying import holds_tags, split_tags
from lossless.memory.ranking import Candidate, RetrievalConfig, Scored, finish, fuse, rerank_window
from lossless.memory.records import CATEGORIES, Memory, MemoryDraft, MemoryHit, MemoryPatch, MemoryStats, SearchResult
from lossless.memory.scopes import MemoryCaller, check_scope, default_write_scope, reachable_scopes, require_reach
from lossless.memory.vectors import (
    DEFAULT_EXACT_MAX,
    VectorHit,
    VectorIndex,
    calibrate,
    chunk_text,
    from_blob,
    normalize,
    pairwise,
    similarity_floor,
    to_blob,
    uncalibrate,
)
from lossless.ports import Store
from lossless.records import MessageRecord, Summary, content_hash, utcnow

if TYPE_CHECKING:
    from lossless.memory.vectors import F32

__all__ = ["MemoryHit", "MemoryService", "Remembered", "SearchResult"]

log = logging.getLogger("lossless.memory")

BATCH_DEDUP_SIMILARITY = 0.85
PREFILTER_SIMILARITY = 0.7
PREFILTER_NEIGHBOURS = 3
#: A change of mind looks for the statement it takes back among this many nearest memories.
CHANGE_CANDIDATES = 48
MAX_LIMIT = 100
RECENT_EMBEDDINGS = 2048
#: Sets of conversations whose memory ids a service keeps (per store revision) for searches limited to them.
RECENT_CONVERSATION_SETS = 64


@dataclass(frozen=True, slots=True)
class Remembered:
    """What one extraction did: each candidate with the decision taken and the memory it touched."""

    decisions: tuple[tuple[MemoryDraft, extraction.Decision, str | None], ...]


class MemoryService:
    """Long-term memory for one caller over one store and one embedder."""

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        caller: MemoryCaller,
        *,
        retrieval: RetrievalConfig | None = None,
        decay_config: decay.DecayConfig = decay.DEFAULT,
        clock: Callable[[], datetime] = utcnow,
        exact_search_max: int = DEFAULT_EXACT_MAX,
        reranker: Reranker | None = None,
        admission: AdmissionConfig | None = None,
        extractor: Extractor | None = None,
        judge: DedupJudge | None = None,
        tag_prefixes: Sequence[str] = (),
        stale_threshold: float = 0.3,
    ) -> None:
        self.tag_prefixes = tuple(tag_prefixes)
        self.stale_threshold = stale_threshold
        self.store = store
        self.embedder = embedder
        self.caller = caller
        self.retrieval = retrieval or RetrievalConfig()
        self.decay_config = decay_config
        self.clock = clock
        self.exact_search_max = exact_search_max
        self.reranker = reranker
        self.admission = admission
        self.extractor = extractor
        self.judge = judge
        self._index: VectorIndex | None = None
        self._grants: tuple[int, dict[str, list[str]]] | None = None
        self._recent: OrderedDict[str, bytes] = OrderedDict()  # in-process front of the embedding cache
        self._from_revision: int | None = None  # the revision the memories-by-conversation below were read at
        self._from: dict[tuple[int, ...], frozenset[str]] = {}

    # ------------------------------------------------------------------ scopes

    async def reach(self, revision: int | None = None, *, write: bool = False) -> tuple[str, ...] | None:
        """The scopes this caller reaches (``None``: all), from grants cached per store revision.

        ``write``: the scopes it may change (``global`` only with an explicit grant; see
        :mod:`lossless.memory.scopes`).
        """
        if revision is None:
            revision = await self.store.revision()
        if self._grants is None or self._grants[0] != revision:
            self._grants = (revision, await self.store.grants())
        return reachable_scopes(self.caller, self._grants[1], write=write)

    async def _read_scopes(self, scopes: Sequence[str] | None, revision: int | None = None) -> tuple[str, ...] | None:
        reach = await self.reach(revision)
        if scopes:
            require_reach(self.caller, scopes, reach, action="read")
            return tuple(scopes)
        return reach

    async def _write_scope(self, scope: str | None) -> str:
        reach = await self.reach(write=True)
        if scope is None:
            return default_write_scope(self.caller, reach)
        require_reach(self.caller, [check_scope(scope)], reach, action="write to")
        return scope

    # --------------------------------------------------------------- embedding

    async def embed(self, texts: Sequence[str], *, task: EmbeddingTask = "passage") -> list[F32]:
        """One normalized vector per text, through the (content hash, model) cache."""
        model = self.embedder.model
        keys = [content_hash(model, task, t) for t in texts]
        cached = {k: self._recent[k] for k in keys if k in self._recent}
        if len(cached) < len(keys):
            cached.update(await self.store.cached_embeddings([k for k in keys if k not in cached], model))
        missing = [i for i, k in enumerate(keys) if k not in cached]
        fresh: dict[str, bytes] = {}
        if missing:
            vectors = await self.embedder.embed([texts[i] for i in missing], task=task)
            if len(vectors) != len(missing):
                raise InputError(f"the embedder returned {len(vectors)} vectors for {len(missing)} texts")
            for i, vector in zip(missing, vectors, strict=True):
                fresh[keys[i]] = to_blob(normalize(vector)[0])
            await self.store.cache_embeddings(fresh, model, now=self.clock())
        blobs = [cached.get(k) or fresh[k] for k in keys]
        for key, blob in zip(keys, blobs, strict=True):
            self._recent[key] = blob
            self._recent.move_to_end(key)
        while len(self._recent) > RECENT_EMBEDDINGS:
            self._recent.popitem(last=False)
        return [from_blob(b) for b in blobs]

    def chunks(self, abstract: str, content: str) -> list[str]:
        """The texts a memory (or message) is embedded as: its content in chunks, the abstract first if new."""
        return self._chunked(abstract, content)[0]

    def _chunked(self, abstract: str, content: str) -> tuple[list[str], int]:
        """:meth:`chunks`, and where the content's first chunk is among them (1 when the abstract is apart)."""
        pieces = chunk_text(content, self.embedder.max_chars)
        return ([abstract, *pieces], 1) if _apart(abstract, pieces) else (pieces, 0)

    async def _vectors_for(self, abstract: str, content: str) -> StoredVectors:
        vectors = await self.embed(self.chunks(abstract, content))
        return self.embedder.model, tuple(to_blob(v) for v in vectors)

    async def _drafts_vectors(self, drafts: Sequence[MemoryDraft]) -> list[tuple[F32, StoredVectors]]:
        """Each draft's dedup vector and the vectors it is stored with, from one embedding of its chunks.

        The dedup vector is that of the content's first chunk, itself one of the stored vectors (the
        abstract, when it is embedded apart, comes before it): a draft is embedded once, whatever
        becomes of it.  One embedding call for all the drafts.
        """
        chunked = [self._chunked(d.abstract, d.content) for d in drafts]
        flat = iter(await self.embed([text for each, _ in chunked for text in each]))
        out: list[tuple[F32, StoredVectors]] = []
        for each, first in chunked:
            vectors = [next(flat) for _ in each]
            out.append((vectors[first], (self.embedder.model, tuple(to_blob(v) for v in vectors))))
        return out

    async def embed_missing(self, limit: int = 200) -> int:
        """Embed up to ``limit`` memories that have no vectors of this service's model; how many (0: none left).

        After ``memory_embedder`` changes (or a store is upgraded to a new default model), memories
        keep their old model's vectors and are invisible to vector search until this has run over
        them; the background build calls it (:meth:`lossless.engine.memory.AgentMemory.vectors_step`).
        One embedding call for the whole batch; every memory gets at least one vector.
        """
        missing = await self.store.memories_without_vectors(self.embedder.model, limit)
        pieces = [self.chunks(m.abstract, m.content) for m in missing]
        vectors = iter(await self.embed([text for texts in pieces for text in texts]))
        for memory, texts in zip(missing, pieces, strict=True):
            blobs = tuple(to_blob(next(vectors)) for _ in texts)
            await self.store.put_vectors(memory.memory_id, (self.embedder.model, blobs))
        return len(missing)

    async def _vector_index(self, revision: int | None = None) -> VectorIndex:
        if revision is None:
            revision = await self.store.revision()
        if self._index is None or self._index.revision != revision:
            revision, rows = await self.store.load_vectors(self.embedder.model)
            self._index = VectorIndex(revision, rows, exact_max=self.exact_search_max)
        return self._index

    async def _memories_from(self, conversations: Sequence[int], revision: int) -> frozenset[str]:
        """The ids of the memories mined from ``conversations``, kept per store revision (a memory added or
        removed changes the revision)."""
        key = tuple(sorted(set(conversations)))
        if self._from_revision != revision:
            self._from_revision, self._from = revision, {}
        found = self._from.get(key)
        if found is None:
            found = frozenset(await self.store.memory_ids_from(key))
            if len(self._from) >= RECENT_CONVERSATION_SETS:
                self._from.pop(next(iter(self._from)))
            self._from[key] = found
        return found

    async def _nearest(
        self,
        vector: F32,
        *,
        limit: int,
        scopes: Sequence[str] | None,
        include_superseded: bool = False,
        min_similarity: float = -1.0,
        revision: int | None = None,
        only: Collection[str] | None = None,
    ) -> tuple[list[VectorHit], VectorIndex | None]:
        """Vector hits, from the store's own index where it offers one (then no in-memory index).

        ``only``: among these memories alone (searched in memory: the store's index has no such filter).
        Similarities (and ``min_similarity``) are on the common scale (:func:`~lossless.memory.vectors.calibrate`).
        """
        floor = similarity_floor(self.embedder)
        raw_min = min_similarity if min_similarity <= -1.0 else uncalibrate(min_similarity, floor)
        if isinstance(self.store, NearestNeighbours) and only is None:
            found = await self.store.nearest(
                self.embedder.model,
                to_blob(normalize(vector)[0]),
                limit=limit,
                scopes=scopes,
                include_superseded=include_superseded,
                min_similarity=raw_min,
                exact_max=self.exact_search_max,
            )
            if found is not None:
                return [VectorHit(memory_id, calibrate(s, floor)) for memory_id, s in found], None
        index = await self._vector_index(revision)
        hits = index.search(
            vector,
            limit=limit,
            scopes=scopes,
            include_superseded=include_superseded,
            min_similarity=raw_min,
            only=only,
        )
        return [VectorHit(h.memory_id, calibrate(h.similarity, floor)) for h in hits], index

    # ------------------------------------------------------------------ writes

    async def add(
        self, draft: MemoryDraft, *, scope: str | None = None, vectors: StoredVectors | None = None
    ) -> Memory:
        """Store one memory as given (no dedup: that is :meth:`remember`'s job).

        ``vectors``: the draft's own, already embedded (:meth:`remember` passes those it compared); else embedded here.
        """
        target = await self._write_scope(scope or (draft.scope if draft.scope != "global" else None))
        if draft.scope != target:
            draft = _with_scope(draft, target)
        vectors = self._checked(vectors, draft) or await self._vectors_for(draft.abstract, draft.content)
        (memory,) = await self.store.insert([draft], [vectors], now=self.clock())
        return memory

    def _checked(self, vectors: StoredVectors | None, draft: MemoryDraft) -> StoredVectors | None:
        """``vectors`` if they can be a draft's of this service's model: one per text it is embedded as."""
        if vectors is None:
            return None
        model, blobs = vectors
        if model != self.embedder.model or len(blobs) != len(self.chunks(draft.abstract, draft.content)):
            raise InputError(
                f"the vectors given are {len(blobs)} of model {model!r}; this draft is embedded as "
                f"{len(self.chunks(draft.abstract, draft.content))} of {self.embedder.model!r}"
            )
        return vectors

    async def store_fact(self, draft: MemoryDraft, *, scope: str | None = None) -> Memory:
        """Store a memory as a person or agent states it: a draft with a ``fact_key`` that already has a
        current memory (in ``scope``, else in any reachable scope) supersedes it, keeping the old one as
        history; anything else is added.  The one path of ``memory_store`` and ``lcm memory add``."""
        if draft.fact_key:
            page = await self.list(fact_key=draft.fact_key, scopes=[scope] if scope else None)
            if page:
                return await self.supersede(page[-1][1].memory_id, draft)
        return await self.add(draft, scope=scope)

    async def _visible(self, memory_id: str) -> Memory:
        reach = await self.reach()
        found = await self.store.get([memory_id])
        if not found and len(memory_id) >= 8:
            matches = await self.store.find_by_prefix(memory_id, reach)
            if len(matches) > 1:
                raise InputError(f"{memory_id!r} matches several memories; give more of the id")
            found = matches
        if not found or (reach is not None and found[0].scope not in reach):
            raise NotFoundError("memory", memory_id, "see `lcm memory list` for the ids you can reach")
        return found[0]

    async def update(self, memory_id: str, patch: MemoryPatch) -> Memory:
        """Change a memory in place, in one transaction (re-embedding it when its text changes)."""
        memory = await self._visible(memory_id)
        await self._write_scope(memory.scope)
        vectors = None
        if patch.content is not None or patch.abstract is not None:
            vectors = await self._vectors_for(patch.abstract or memory.abstract, patch.content or memory.content)
        return await self.store.update(memory.memory_id, patch, vectors, now=self.clock())

    async def supersede(self, memory_id: str, draft: MemoryDraft, *, vectors: StoredVectors | None = None) -> Memory:
        """Replace a memory by a new version; the old one stays as history (``as_of`` finds it).

        ``vectors``: the draft's own, already embedded, as for :meth:`add`.
        """
        old = await self._visible(memory_id)
        await self._write_scope(old.scope)
        if draft.scope != old.scope:
            draft = _with_scope(draft, old.scope)
        if draft.fact_key is None and old.fact_key is not None:
            draft = _with_fact_key(draft, old.fact_key)
        vectors = self._checked(vectors, draft) or await self._vectors_for(draft.abstract, draft.content)
        return await self.store.supersede(old.memory_id, draft, vectors, now=self.clock())

    async def forget(self, memory_id: str) -> Memory:
        memory = await self._visible(memory_id)
        await self._write_scope(memory.scope)
        await self.store.delete([memory.memory_id])
        return memory

    # ------------------------------------------------------------------- reads

    async def get(self, memory_id: str) -> Memory:
        return await self._visible(memory_id)

    async def list(
        self,
        *,
        scopes: Sequence[str] | None = None,
        category: str | None = None,
        include_superseded: bool = False,
        fact_key: str | None = None,
        limit: int = 50,
        after: int = 0,
    ) -> list[tuple[int, Memory]]:
        if category is not None and category not in CATEGORIES:
            raise InputError(f"category must be one of {', '.join(CATEGORIES)}; got {category!r}")
        filter_ = await self._read_scopes(scopes)
        return await self.store.list_memories(
            filter_,
            category=category,
            include_superseded=include_superseded,
            fact_key=fact_key,
            after_rowid=after,
            limit=limit,
        )

    async def export(self, *, scopes: Sequence[str] | None = None, batch: int = 1000) -> AsyncIterator[Memory]:
        """Every memory the caller reaches, history included — no row cap."""
        after = 0
        while True:
            page = await self.list(scopes=scopes, include_superseded=True, limit=batch, after=after)
            if not page:
                return
            for _, memory in page:
                yield memory
            after = page[-1][0]

    async def import_(self, memories: Sequence[Memory]) -> int:
        """Store exported memories (ids and history kept; already present ids skipped), re-embedded here."""
        reach = await self.reach(write=True)
        require_reach(self.caller, {m.scope for m in memories}, reach, action="write to")
        pieces = [self.chunks(m.abstract, m.content) for m in memories]
        flat = await self.embed([p for chunks in pieces for p in chunks])  # one batch for the lot
        vectors: list[StoredVectors] = []
        start = 0
        for chunks in pieces:
            vectors.append((self.embedder.model, tuple(to_blob(v) for v in flat[start : start + len(chunks)])))
            start += len(chunks)
        return await self.store.import_memories(memories, vectors)

    async def stats(self, *, scopes: Sequence[str] | None = None) -> MemoryStats:
        """Counts by category, tier and scope; ``stale``: current memories whose decay composite is below
        ``stale_threshold`` (read over every memory the caller reaches)."""
        counted = await self.store.stats(await self._read_scopes(scopes))
        now = self.clock()
        stale = 0
        async for memory in self.export(scopes=scopes):
            if memory.current and decay.composite(memory, now, self.decay_config) < self.stale_threshold:
                stale += 1
        return replace(counted, stale=stale)

    async def search(
        self,
        query: str,
        *,
        limit: int = 5,
        scopes: Sequence[str] | None = None,
        category: str | None = None,
        as_of: datetime | None = None,
        record_access: bool = True,
        explain: bool = False,
        expand: bool = False,
        conversations: Sequence[int] | None = None,
        people: bool = True,
        revision: int | None = None,
        ageless: bool = False,
    ) -> SearchResult:
        """The pipeline of :mod:`lossless.memory.ranking` over vector and keyword candidates.

        Tag words of the query (``proj:atlas``, see :mod:`lossless.memory.querying`) filter the
        results; ``expand`` adds synonyms to the keyword side (the CLI's searches, by default);
        ``conversations`` keeps the memories mined from those conversations only, before the
        candidates are drawn (so the memories of a store's other conversations never crowd them out).
        A time the query names ("last May", "a week before the trip to Porto") boosts the memories of
        that time, read against ``as_of`` when given (:mod:`lossless.memory.dating`).  With ``people``, a
        query that names a speaker is also searched without the name (:mod:`lossless.memory.people`);
        hybrid grep's memory leads turn it off, its own meaning side reading the question without names.
        ``revision``: the store's revision as the caller has just read it (hybrid grep's memory leads read it once
        per question); ``None``: read here.  ``ageless``: recency and time decay read every memory as of when
        it was stored, so the ranking does not depend on the clock (hybrid grep's memory leads).
        """
        querying.check_query(query)
        asked = split_tags(query, self.tag_prefixes)
        searched = asked.text
        if not 1 <= limit <= MAX_LIMIT:
            raise InputError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
        if category is not None and category not in CATEGORIES:
            raise InputError(f"category must be one of {', '.join(CATEGORIES)}; got {category!r}")
        timings: dict[str, float] = {}
        clock = time.perf_counter()
        if revision is None:
            revision = await self.store.revision()
        filter_ = await self._read_scopes(scopes, revision)
        when = dating.asked(searched)  # "last May", "a week before the trip": boosts the memories of that time
        meant = when.meant() if when else searched
        (qvec,) = await self.embed([meant], task="query")
        timings["embed"] = (time.perf_counter() - clock) * 1000
        history = as_of is not None
        pool = self.retrieval.pool_size(limit) * (4 if asked.tags else 1) * (dating.TIME_POOL if when else 1)
        clock = time.perf_counter()
        only = None if conversations is None else await self._memories_from(conversations, revision)
        vector_hits, index = await self._nearest(
            qvec, limit=pool, scopes=filter_, include_superseded=history, revision=revision, only=only
        )
        timings["vector"] = (time.perf_counter() - clock) * 1000
        clock = time.perf_counter()
        keyword_query = querying.expand(searched) if expand else searched
        keyword_hits = await self.store.keyword_search(
            keyword_query, filter_, limit=pool, include_superseded=history, conversations=conversations
        )
        timings["keyword"] = (time.perf_counter() - clock) * 1000
        clock = time.perf_counter()
        ids = list(dict.fromkeys([h.memory_id for h in vector_hits] + [h.memory_id for h in keyword_hits]))
        memories = {m.memory_id: m for m in await self.store.get(ids)}  # keyword ghosts vanish here
        # A query naming a speaker ("What did Jonas misplace?") is searched without the name too (people).
        named = named_people(searched, memories.values()) if people else []
        blind_text = without_people(meant, named)
        blind_hits: list[VectorHit] = []
        if blind_text is not None:
            clock = time.perf_counter()
            (bvec,) = await self.embed([blind_text], task="query")
            blind_hits, blind_index = await self._nearest(
                bvec, limit=pool, scopes=filter_, include_superseded=history, revision=revision, only=only
            )
            index = index or blind_index
            more = [h.memory_id for h in blind_hits if h.memory_id not in memories]
            memories.update((m.memory_id, m) for m in await self.store.get(more))
            ids = list(dict.fromkeys([*ids, *more]))
            timings["vector"] += (time.perf_counter() - clock) * 1000
        if index is None:  # the store searched: the candidates' own vectors serve the cosines and MMR
            assert isinstance(self.store, NearestNeighbours)
            index = VectorIndex(revision, await self.store.vectors_of(self.embedder.model, ids))
        floor = similarity_floor(self.embedder)
        if blind_hits:
            found = list(dict.fromkeys([h.memory_id for h in vector_hits] + [h.memory_id for h in blind_hits]))
            scored = cosines(
                [h.memory_id for h in vector_hits],
                {k: calibrate(v, floor) for k, v in index.similarity(qvec, found).items()},
                {k: calibrate(v, floor) for k, v in index.similarity(bvec, found).items()},
                [k for k in found if k in memories and names_one(memories[k], named)],
            )
            vector_hits = [VectorHit(k, v) for k, v in sorted(scored.items(), key=lambda kv: -kv[1])]
            keyword_ids = {h.memory_id for h in keyword_hits}
            ids = [k for k in ids if k in scored or k in keyword_ids]
        vector_rank = {h.memory_id: (h.similarity, rank) for rank, h in enumerate(vector_hits, 1)}
        keyword_rank = {h.memory_id: (h.score, rank) for rank, h in enumerate(keyword_hits, 1)}
        # Keyword-only hits still get their cosine (for the rerank fallback and explain); fusion
        # treats them as keyword-only all the same, as specified.
        keyword_only = [i for i in keyword_rank if i not in vector_rank]
        extra = {k: calibrate(v, floor) for k, v in index.similarity(qvec, keyword_only).items()}
        candidates: list[Candidate] = []
        for memory_id in ids:
            memory = memories.get(memory_id)
            if memory is None or (category and memory.category != category) or not holds_tags(memory, asked.tags):
                continue
            if as_of is not None and not memory.valid_at(as_of):
                continue
            cosine, vrank = vector_rank.get(memory_id, (extra.get(memory_id), None))
            raw, krank = keyword_rank.get(memory_id, (None, None))
            candidates.append(Candidate(memory, cosine=cosine, bm25_raw=raw, vector_rank=vrank, keyword_rank=krank))
        boosts = await dating.boosts(
            when, [c.memory for c in candidates], as_of, dating.finder(self.store, filter_, history, conversations)
        )
        fused, dropped = fuse(candidates, self.retrieval, boosts)
        now = self.clock()
        similarity = pairwise(
            {s.memory.memory_id: index.vector_of(s.memory.memory_id) for s in fused[: 4 * limit]}, floor
        )

        rerank_scores: dict[str, float] | None = None
        rerank_failed = False
        window = rerank_window(fused, limit)
        if self.reranker is not None and window:
            clock_rerank = time.perf_counter()
            try:
                by_index = await self.reranker.rerank(searched, [s.memory.content for s in window])
                rerank_scores = {window[i].memory.memory_id: score for i, score in by_index.items()}
            except (ProviderError, TimeoutError) as exc:
                log.warning("reranker %s failed (%s); blending with cosine instead", self.reranker.name, exc)
                rerank_failed = True
            timings["rerank"] = (time.perf_counter() - clock_rerank) * 1000
        results, late = finish(
            fused,
            limit=limit,
            now=now,
            config=self.retrieval,
            decay_config=self.decay_config,
            rerank_scores=rerank_scores,
            rerank_failed=rerank_failed,
            similarity=similarity,
            names=querying.names(searched),
            boosts=boosts,
            keep_dropped=explain,
            ageless=ageless,
        )
        timings["rank"] = (time.perf_counter() - clock) * 1000
        hits = tuple(MemoryHit(s.memory, s.score, s.stages) for s in results)
        if record_access and hits and not history:
            touched = await self.store.record_access([h.memory.memory_id for h in hits], now)
            await self._apply_tiers(touched, now)
        all_dropped: list[Scored] = [*dropped, *late] if explain else []
        return SearchResult(
            query,
            hits,
            tuple((s.memory.memory_id, s.dropped_at or "", s.stages) for s in all_dropped),
            timings,
            gates={s.memory.memory_id: s.gate for s in all_dropped if s.gate is not None},
        )

    # ------------------------------------------------------------- lifecycle

    async def _apply_tiers(self, memories: Sequence[Memory], now: datetime) -> dict[str, str]:
        changes = {}
        for memory in memories:
            tier = decay.next_tier(memory, now, self.decay_config)
            if tier != memory.tier:
                changes[memory.memory_id] = tier
        await self.store.set_tiers(changes)
        return dict(changes)

    async def maintain(self) -> dict[str, str]:
        """Apply the tier rules to every current memory the caller reaches; returns the moves made."""
        now = self.clock()
        moved: dict[str, str] = {}
        async for memory in self.export():
            if memory.current:
                moved.update(await self._apply_tiers([memory], now))
        return moved

    async def remember(self, conversation_id: int, messages: Sequence[MessageRecord]) -> Remembered:
        """Extract memories from ``messages`` and apply the dedup decision to each."""
        drafts = await self._extract(conversation_id, messages)
        if not drafts:
            return Remembered(())
        scope = await self._write_scope(None)
        drafts = [_with_scope(d, scope) for d in drafts]
        floor = similarity_floor(self.embedder)
        kept: list[tuple[MemoryDraft, F32, StoredVectors]] = []
        for draft, (vector, stored) in zip(drafts, await self._drafts_vectors(drafts), strict=True):
            if any(  # files, code names or dates of their own: another fact, however alike
                calibrate(float(vector @ other), floor) >= BATCH_DEDUP_SIMILARITY
                and not extraction.told_apart(d.content, draft.content)
                for d, other, _ in kept
            ):
                continue
            kept.append((draft, vector, stored))
        out: list[tuple[MemoryDraft, extraction.Decision, str | None]] = []
        sources = [m.content for m in messages]
        utilities = await judging.utilities(self.judge, self.admission, [d for d, _, _ in kept], sources)
        for (draft, vector, stored), utility in zip(kept, utilities, strict=True):
            if self.admission is not None:
                pool, _ = await self._nearest(vector, limit=self.admission.novelty_pool, scopes=[scope])
                near = {m.memory_id: m for m in await self.store.get([h.memory_id for h in pool])}
                verdict = amac.admit(
                    draft,
                    sources,
                    [(near[h.memory_id], h.similarity) for h in pool if h.memory_id in near],
                    self.clock(),
                    self.admission,
                    utility=utility,
                )
                if not verdict.admitted:
                    features = ", ".join(f"{k} {v:.2f}" for k, v in verdict.features.items())
                    reason = f"admission score {verdict.score:.2f} < {self.admission.reject} ({features})"
                    out.append((draft, extraction.Decision("reject", reason=reason), None))
                    continue
            hits, _ = await self._nearest(
                vector, limit=PREFILTER_NEIGHBOURS, scopes=[scope], min_similarity=PREFILTER_SIMILARITY
            )
            found = {m.memory_id: m for m in await self.store.get([h.memory_id for h in hits])}
            neighbours: Sequence[tuple[Memory, float]] = [
                (found[h.memory_id], h.similarity) for h in hits if h.memory_id in found
            ]
            embedded = draft
            if (draft.metadata or {}).get("revises"):
                draft, neighbours = await self._with_earlier(draft, vector, scope, neighbours)
            decision = await judging.decide(self.judge, draft, neighbours)
            if decision.by == "model" and decision.kind == "create":
                draft = llm_dedup.keyless(draft, neighbours)
            same_text = (draft.abstract, draft.content) == (embedded.abstract, embedded.content)
            touched = await self._apply(draft, decision, stored if same_text else None)
            out.append((draft, decision, touched))
        return Remembered(tuple(out))

    async def _with_earlier(
        self, draft: MemoryDraft, vector: F32, scope: str, neighbours: Sequence[tuple[Memory, float]]
    ) -> tuple[MemoryDraft, Sequence[tuple[Memory, float]]]:
        """A change of mind told with the earlier statement it takes back, which leads its neighbours.

        The statement is the same speaker's, older and current: of the :data:`CHANGE_CANDIDATES`
        memories nearest the draft (in the draft's own conversation first, then anywhere in
        ``scope``), the one most alike by topic — names and dates left out, both embedded as queries
        (:func:`~lossless.memory.changes.topic`, :func:`~lossless.memory.changes.earlier_statement`).
        None found: the draft and neighbours as they were.
        """
        speaker = (draft.metadata or {}).get("speaker")
        speaker = speaker if isinstance(speaker, str) else None
        floor = similarity_floor(self.embedder)
        looks: list[Collection[str] | None] = []
        if draft.conversation_id is not None:
            own = await self.store.memory_ids_from([draft.conversation_id])
            if own:
                looks.append(own)
        looks.append(None)
        for only in looks:
            hits, _ = await self._nearest(vector, limit=CHANGE_CANDIDATES, scopes=[scope], only=only)
            pool = changes.candidates(draft, await self.store.get([h.memory_id for h in hits]))
            if not pool:
                continue
            texts = [changes.topic(t, speaker) for t in (draft.content, *(m.content for m in pool))]
            mine, *theirs = await self.embed(texts, task="query")
            scored = [(m, calibrate(float(mine @ v), floor)) for m, v in zip(pool, theirs, strict=True)]
            link = changes.earlier_statement(draft, scored)
            if link is not None:
                rest = [(m, s) for m, s in neighbours if m.memory_id != link[0].memory_id]
                return changes.with_history(draft, link[0]), [link, *rest]
        return draft, neighbours

    async def mine(self, messages: Sequence[MessageRecord], *, defer_work: bool = False) -> Remembered:
        """:meth:`remember` over the messages never mined before, in segments, recording them as mined.

        The messages may come from several conversations (a forked context); each segment is mined
        as its own conversation's.  A segment with a user's or an assistant's message is mined (an
        agent's stretch of work between two prompts of its user gives its work facts: the files it
        edited, and what by name); one of tool output alone is recorded and skipped.

        ``defer_work``: segments without a user message (an agent's work) are given back unmined, for
        the background build (:meth:`lossless.engine.memory.AgentMemory.mine_step`) to mine, so a turn's
        mining inline (``after_turn``, the compactor's leaf hook) embeds no more than its prompt's share.
        """
        claimed = set(await self.store.claim_messages([m.id for m in messages], self.clock()))
        segments = mining.segments(sorted((m for m in messages if m.id in claimed), key=lambda m: m.id))
        if defer_work:
            work = [not any(m.role == "user" for m in s) and mining.worked(s) for s in segments]
            await self.store.release_messages([m.id for s, w in zip(segments, work, strict=True) if w for m in s])
            segments = [s for s, w in zip(segments, work, strict=True) if not w]
        out: list[tuple[MemoryDraft, extraction.Decision, str | None]] = []
        for done, segment in enumerate(segments):
            try:
                if any(m.role == "user" for m in segment) or mining.worked(segment):
                    out.extend((await self.remember(segment[0].conversation_id, segment)).decisions)
            except Exception:
                await self.store.release_messages([m.id for s in segments[done:] for m in s])
                raise
        return Remembered(tuple(out))

    async def mine_summary(self, store: Store, summary: Summary, *, defer_work: bool = False) -> Remembered:
        """:meth:`mine` over the source messages of a leaf summary of ``store`` (the compactor's hook)."""
        ids = (await store.get_summary_messages([summary.id])).get(summary.id, ())
        return await self.mine(await store.get_messages_by_id(list(ids)), defer_work=defer_work)

    async def _extract(self, conversation_id: int, messages: Sequence[MessageRecord]) -> Sequence[MemoryDraft]:
        if self.extractor is not None:
            try:
                return await self.extractor.extract(conversation_id, messages)
            except (ProviderError, TimeoutError) as exc:
                log.warning("extractor %s failed (%s); using the offline extractor", self.extractor.name, exc)
        return extraction.extract(conversation_id, messages)

    async def _apply(
        self, draft: MemoryDraft, decision: extraction.Decision, vectors: StoredVectors | None = None
    ) -> str | None:
        """Carry out ``decision`` for ``draft`` (``vectors``: the draft's, if embedded already); the memory touched."""
        if decision.kind == "create" or decision.target is None:
            return (await self.add(draft, vectors=vectors)).memory_id
        if decision.kind == "supersede":
            return (await self.supersede(decision.target, draft, vectors=vectors)).memory_id
        if decision.kind == "contradict":
            note = {"dedup": "contradict", "contradicts": decision.target, "reason": decision.reason}
            draft = replace(draft, metadata={**(draft.metadata or {}), **note})
            return (await self.supersede(decision.target, draft, vectors=vectors)).memory_id
        target = await self._visible(decision.target)
        # What the candidate's messages said is now part of the target: they join its provenance
        # (a memory's provenance names one conversation, so only when the candidate is of the same).
        same = draft.conversation_id is not None and draft.conversation_id == target.conversation_id
        sources = tuple(i for i in draft.source_message_ids if i not in target.source_message_ids) if same else ()
        if decision.kind in ("merge", "contextualize"):
            label = (decision.context_label or "general") if decision.kind == "contextualize" else None
            merged = await judging.merged(self.judge, target, draft, label)
            if merged is None and not sources:
                return target.memory_id
            patch = MemoryPatch(add_sources=sources) if merged is None else replace(merged, add_sources=sources)
            return (await self.update(target.memory_id, patch)).memory_id
        if decision.kind == "support":
            boosted = min(1.0, target.confidence + 0.05)
            patch = MemoryPatch(confidence=boosted, add_sources=sources)
            return (await self.update(target.memory_id, patch)).memory_id
        return target.memory_id  # skip


def _apart(abstract: str, pieces: Sequence[str]) -> bool:
    """Whether ``abstract`` is embedded as a text of its own: it says something the first chunk does not hold."""
    return bool(abstract.strip()) and abstract not in pieces[0]


def _with_scope(draft: MemoryDraft, scope: str) -> MemoryDraft:
    return replace(draft, scope=scope)


def _with_fact_key(draft: MemoryDraft, fact_key: str) -> MemoryDraft:
    return replace(draft, fact_key=fact_key)
