"""Vectors: chunking long texts, packing float32 blobs, and exact search with NumPy.

Invariants:

* Long texts are never averaged into one vector: :func:`chunk_text` splits them
  into overlapping pieces of at most ``max_chars``, each piece gets its own
  vector, and a memory scores as its **best** chunk (:meth:`VectorIndex.search`).
* Blobs are little-endian ``float32``, ``4 × dimensions`` bytes; vectors are
  unit length, so a dot product is the cosine similarity.
* :class:`VectorIndex` is exact (brute force) up to ``exact_max`` chunk vectors
  (50,000 by default): the same results a full scan gives, in the same order
  (ties broken by memory id).  Above that, a sign-bit sketch preselects the
  1,000 (or 64 × limit) nearest rows by Hamming distance and only those are
  scored — same result type and scores, recall measured against exact search
  by ``benchmarks/memory_search.py``.  It is an immutable snapshot of one store
  revision; the service swaps in a new one when ``memory_revision`` changes.
* A search among some memories only (``only``: those of the conversations searched) is a product
  over their rows alone, kept per distinct set (:data:`_SUBSETS` of them): its cost follows the
  conversations searched, not the store's whole history.
* :class:`Pairwise` (MMR's cosines) gives the same doubles as :func:`calibrate` of each pair's
  product, and compares one text with all the chosen ones in one step.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from lossless.errors import MissingDependencyError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    F32: TypeAlias = npt.NDArray[np.float32]
else:

    class _LazyNumpy:
        """NumPy, imported on first use: the base install (no ``embeddings`` extra) imports this
        module fine, and only a vector operation says which extra it needs."""

        def __getattr__(self, name: str) -> Any:
            try:
                module = importlib.import_module("numpy")
            except ImportError as exc:
                raise MissingDependencyError("long-term memory search", "embeddings", "numpy") from exc
            globals()["np"] = module  # later calls reach numpy directly
            return getattr(module, name)

    np = _LazyNumpy()

__all__ = [
    "Pairwise",
    "VectorIndex",
    "calibrate",
    "chunk_text",
    "from_blob",
    "normalize",
    "pairwise",
    "similarity_floor",
    "to_blob",
    "uncalibrate",
]


def similarity_floor(embedder: object) -> float:
    """The cosine an embedder gives two unrelated texts (its ``similarity_floor``; 0 when it declares none).

    Models differ: all-MiniLM puts unrelated sentences near 0, e5 near 0.8.  Memory thresholds
    (duplicates, neighbours, ranking cut-offs, MMR) are set on the first kind of scale;
    :func:`calibrate` maps a model's cosines onto it.
    """
    floor = getattr(embedder, "similarity_floor", 0.0)
    return float(floor) if isinstance(floor, int | float) and 0.0 <= floor < 1.0 else 0.0


def calibrate(similarity: float, floor: float) -> float:
    """A cosine on the common scale: ``(s - floor) / (1 - floor)``; 1 stays 1, the floor becomes 0."""
    return similarity if floor == 0.0 else (similarity - floor) / (1.0 - floor)


class Pairwise:
    """The calibrated cosine of any two of some vectors (MMR's lookups): -1 where either has none or is not listed.

    The first lookup of a vector computes its cosines with all the others in one product (kept), so
    comparing one text with many chosen ones costs one product, not one per pair; :meth:`above` then
    compares it with all of them in one step.  Calling it is :func:`pairwise`'s function.
    """

    def __init__(self, vectors: Mapping[str, F32 | None], floor: float) -> None:
        present = [(key, vector) for key, vector in vectors.items() if vector is not None]
        self._position = {key: i for i, (key, _) in enumerate(present)}
        self._matrix = np.stack([vector for _, vector in present]) if present else np.zeros((0, 0), dtype=np.float32)
        self._floor = floor
        self._rows: dict[int, npt.NDArray[np.float64]] = {}

    def _row(self, i: int) -> npt.NDArray[np.float64]:
        """Row ``i``'s calibrated cosines with every vector: the same doubles :func:`calibrate` gives one by one."""
        row = self._rows.get(i)
        if row is None:
            row = (self._matrix @ self._matrix[i]).astype(np.float64)
            if self._floor != 0.0:
                row = (row - self._floor) / (1.0 - self._floor)
            self._rows[i] = row
        return row

    def __call__(self, a: str, b: str) -> float:
        i, j = self._position.get(a), self._position.get(b)
        if i is None or j is None:
            return -1.0
        return float(self._row(i)[j])

    def above(self, a: str, others: Sequence[str], threshold: float) -> bool:
        """Whether ``a``'s similarity to any of ``others`` exceeds ``threshold`` (as asking it pair by pair)."""
        if not others:
            return False
        i = self._position.get(a)
        listed = [j for j in (self._position.get(b) for b in others) if j is not None]
        if i is None or len(listed) < len(others):  # a pair with no vector counts -1
            if threshold < -1.0:
                return True
            if i is None:
                return False
        return bool(listed) and bool((self._row(i)[listed] > threshold).any())


def pairwise(vectors: Mapping[str, F32 | None], floor: float) -> Pairwise:
    """The calibrated cosine of any two of ``vectors`` (-1 where either has none or is unlisted): :class:`Pairwise`."""
    return Pairwise(vectors, floor)


def uncalibrate(similarity: float, floor: float) -> float:
    """The inverse of :func:`calibrate` (a threshold on the common scale, as the model's cosine)."""
    return similarity if floor == 0.0 else floor + similarity * (1.0 - floor)


#: Chunk vectors searched exactly; above this the sign-bit sketch preselects candidates.
DEFAULT_EXACT_MAX = 50_000
#: Candidates the sketch passes to the exact step (at least; 64 × limit when larger).
SKETCH_CANDIDATES = 1000


def _sketch(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.uint64]:
    """Sign bits of each row, as 64-bit words, stored word-major (``words × rows``) for fast column scans."""
    bits = np.packbits(matrix > 0, axis=1)
    pad = (-bits.shape[1]) % 8
    if pad:
        bits = np.pad(bits, ((0, 0), (0, pad)))
    return np.ascontiguousarray(np.ascontiguousarray(bits).view(np.uint64).T)


def _hamming(sketch: npt.NDArray[np.uint64], query: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    distance = np.zeros(sketch.shape[1], dtype=np.int64)
    for word in range(sketch.shape[0]):
        mixed = sketch[word] ^ query[word]
        if hasattr(np, "bitwise_count"):  # numpy >= 2.0
            distance += np.bitwise_count(mixed)
        else:  # pragma: no cover - numpy 1.x
            distance += np.unpackbits(mixed.view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1)
    return distance


def chunk_text(text: str, max_chars: int, overlap: int = 200) -> list[str]:
    """Pieces of ``text`` of at most ``max_chars`` characters, cut at whitespace where possible."""
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    text = text.strip()
    if len(text) <= max_chars:
        return [text]
    overlap = min(overlap, max_chars // 4)
    pieces: list[str] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + max_chars)
        if end < len(text):
            cut = text.rfind(" ", start + max_chars // 2, end)
            end = cut if cut > start else end
        pieces.append(text[start:end].strip())
        if end >= len(text):
            break
        start = max(end - overlap, start + 1)
    return [p for p in pieces if p]


def normalize(vectors: npt.ArrayLike) -> F32:
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim == 1:
        array = array[None, :]
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: F32 = (array / norms).astype(np.float32, copy=False)
    return out


def to_blob(vector: npt.ArrayLike) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def from_blob(blob: bytes) -> F32:
    return np.frombuffer(blob, dtype="<f4").astype(np.float32, copy=False)


@dataclass(frozen=True, slots=True)
class VectorHit:
    memory_id: str
    similarity: float


#: How many subsets of memories (a search's ``only``: the memories of the conversations searched) an index keeps.
_SUBSETS = 64


@dataclass(frozen=True, slots=True)
class _Among:
    """A subset of an index's memories: their positions (ascending), their chunk rows, and each row's memory."""

    memories: npt.NDArray[np.int64]
    matrix: F32
    owner: npt.NDArray[np.int64]


class VectorIndex:
    """An exact cosine index over one model's chunk vectors (one row per chunk)."""

    def __init__(
        self,
        revision: int,
        rows: Sequence[tuple[str, str, bool, bytes]],
        *,
        exact_max: int = DEFAULT_EXACT_MAX,
    ) -> None:
        self.revision = revision
        self.ids: list[str] = []
        owner: list[int] = []
        scope_of: list[str] = []
        current: list[bool] = []
        position: dict[str, int] = {}
        for memory_id, scope, is_current, _ in rows:
            if memory_id not in position:
                position[memory_id] = len(self.ids)
                self.ids.append(memory_id)
                scope_of.append(scope)
                current.append(is_current)
            owner.append(position[memory_id])
        self.owner = np.asarray(owner, dtype=np.int64)
        self.scopes = np.asarray(scope_of, dtype=object)
        self.current = np.asarray(current, dtype=bool)
        if rows:
            self.matrix: F32 = np.frombuffer(b"".join(r[3] for r in rows), dtype="<f4").reshape(len(rows), -1)
        else:
            self.matrix = np.zeros((0, 1), dtype=np.float32)
        self._scope_masks: dict[tuple[str, ...] | None, npt.NDArray[np.bool_]] = {}
        self._rows: dict[str, list[int]] | None = None
        self._position: dict[str, int] | None = None
        self._subsets: dict[frozenset[str], _Among] = {}
        # Above ``exact_max`` chunk vectors, a sign-bit sketch of every vector (48 bytes for 384
        # dimensions) picks the candidates by Hamming distance; the candidates are then scored
        # exactly.  Approximate in which rows reach the exact step, exact in the scores returned.
        self.approximate = len(rows) > exact_max
        self._sketch = _sketch(self.matrix) if self.approximate else None

    def __len__(self) -> int:
        return len(self.ids)

    def _mask(self, scopes: Sequence[str] | None, include_superseded: bool) -> npt.NDArray[np.bool_]:
        key = None if scopes is None else tuple(sorted(scopes))
        mask = self._scope_masks.get(key)
        if mask is None:
            mask = np.ones(len(self.ids), dtype=bool) if key is None else np.isin(self.scopes, list(key))
            self._scope_masks[key] = mask
        return mask if include_superseded else mask & self.current

    def search(
        self,
        query: npt.ArrayLike,
        *,
        limit: int,
        scopes: Sequence[str] | None = None,
        include_superseded: bool = False,
        min_similarity: float = -1.0,
        only: Collection[str] | None = None,
    ) -> list[VectorHit]:
        """The ``limit`` memories most similar to ``query`` (by their best chunk), best first (``only``: of those)."""
        if not self.ids or limit < 1:
            return []
        q = normalize(query)[0]
        if q.shape[0] != self.matrix.shape[1]:
            return []
        allowed = self._mask(scopes, include_superseded)
        if only is not None and not self.approximate:
            return self._search_among(self._among(only), q, allowed, limit, min_similarity)
        if only is not None:
            if self._position is None:
                self._position = {memory_id: i for i, memory_id in enumerate(self.ids)}
            chosen = np.zeros(len(self.ids), dtype=bool)
            chosen[[self._position[m] for m in only if m in self._position]] = True
            allowed = allowed & chosen
        if self._sketch is not None:
            best = self._approximate(q, allowed, limit)
        else:
            chunk_sims = self.matrix @ q
            if len(chunk_sims) == len(self.ids):  # one chunk per memory: rows are memories
                best = chunk_sims
            else:
                best = np.full(len(self.ids), -np.inf, dtype=np.float32)
                np.maximum.at(best, self.owner, chunk_sims)
        best = np.where(allowed, best, -np.inf)
        k = min(limit, int(allowed.sum()))
        if k <= 0:
            return []
        top = np.argpartition(-best, k - 1)[:k] if k < len(best) else np.arange(len(best))
        ordered = sorted(top.tolist(), key=lambda i: (-float(best[i]), self.ids[i]))
        return [
            VectorHit(self.ids[i], float(best[i]))
            for i in ordered
            if np.isfinite(best[i]) and best[i] >= min_similarity
        ]

    def _among(self, only: Collection[str]) -> _Among:
        """The rows of the memories of ``only``, kept per distinct ``only`` (a frozenset is looked up by value)."""
        key = only if isinstance(only, frozenset) else frozenset(only)
        among = self._subsets.get(key)
        if among is None:
            if self._position is None:
                self._position = {memory_id: i for i, memory_id in enumerate(self.ids)}
            memories = np.asarray(sorted({self._position[m] for m in key if m in self._position}), dtype=np.int64)
            rows = np.flatnonzero(np.isin(self.owner, memories))
            owner = np.searchsorted(memories, self.owner[rows])
            among = _Among(memories, np.ascontiguousarray(self.matrix[rows]), owner)
            if len(self._subsets) >= _SUBSETS:
                self._subsets.pop(next(iter(self._subsets)))
            self._subsets[key] = among
        return among

    def _search_among(
        self, among: _Among, q: F32, allowed: npt.NDArray[np.bool_], limit: int, min_similarity: float
    ) -> list[VectorHit]:
        """:meth:`search` within one subset of the memories: a product over their rows only."""
        if not len(among.memories):
            return []
        chunk_sims = among.matrix @ q
        if len(chunk_sims) == len(among.memories):  # one chunk per memory
            best = chunk_sims
        else:
            best = np.full(len(among.memories), -np.inf, dtype=np.float32)
            np.maximum.at(best, among.owner, chunk_sims)
        permitted = allowed[among.memories]
        best = np.where(permitted, best, -np.inf)
        k = min(limit, int(permitted.sum()))
        if k <= 0:
            return []
        top = np.argpartition(-best, k - 1)[:k] if k < len(best) else np.arange(len(best))
        ids = [self.ids[i] for i in among.memories.tolist()]
        ordered = sorted(top.tolist(), key=lambda i: (-float(best[i]), ids[i]))
        return [
            VectorHit(ids[i], float(best[i])) for i in ordered if np.isfinite(best[i]) and best[i] >= min_similarity
        ]

    def _approximate(self, q: F32, allowed: npt.NDArray[np.bool_], limit: int) -> F32:
        assert self._sketch is not None
        distance = _hamming(self._sketch, _sketch(q[None, :])[:, 0])
        if not allowed.all():
            distance[~allowed[self.owner]] = np.iinfo(np.int64).max
        wanted = min(len(distance), max(SKETCH_CANDIDATES, 64 * limit))
        rows = np.argpartition(distance, wanted - 1)[:wanted] if wanted < len(distance) else np.arange(len(distance))
        rows.sort()  # gather in memory order
        best = np.full(len(self.ids), -np.inf, dtype=np.float32)
        np.maximum.at(best, self.owner[rows], self.matrix[rows] @ q)
        return best

    def _rows_of(self) -> dict[str, list[int]]:
        if self._rows is None:
            rows: dict[str, list[int]] = {}
            for row, owner in enumerate(self.owner.tolist()):
                rows.setdefault(self.ids[owner], []).append(row)
            self._rows = rows
        return self._rows

    def similarity(self, query: npt.ArrayLike, memory_ids: Sequence[str]) -> dict[str, float]:
        """Best-chunk cosine of ``query`` with each listed memory that has vectors."""
        q = normalize(query)[0]
        if not self.ids or q.shape[0] != self.matrix.shape[1]:
            return {}
        rows_of = self._rows_of()
        out: dict[str, float] = {}
        for memory_id in memory_ids:
            rows = rows_of.get(memory_id)
            if rows:
                out[memory_id] = float(np.max(self.matrix[rows] @ q))
        return out

    def vector_of(self, memory_id: str) -> F32 | None:
        """The first chunk's vector of a memory (its abstract), or ``None``."""
        rows = self._rows_of().get(memory_id)
        return None if not rows else self.matrix[rows[0]]
