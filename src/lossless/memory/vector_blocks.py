"""The in-process copy of stored search vectors: one matrix per (model, source), a block per conversation.

:class:`~lossless.memory.messages.MessageSearch` ranks messages and summaries by the vectors the
background build stored.  Where the store has no vector index of its own (SQLite), reading them back
for every search would cost more than the search itself, so they are kept here, in one contiguous
matrix ordered by conversation: a search of one conversation multiplies its slice of rows, a search of
many multiplies the whole matrix once (one large product is several times faster than many small ones).

Invariants:

* **Never stale.**  Each block records the ``(rows, revision)`` of the store's
  :class:`~lossless.ports.VectorState` it was loaded at; :meth:`VectorBlocks.stale` names every
  searched conversation whose state differs (vectors added by any process, or removed with a rewritten
  summary or a deleted conversation), and the caller reloads exactly those before searching.  Blocks
  of conversations not searched are kept as they are; a conversation that no longer exists is dropped.
* **Exact.**  Scores are the cosine of the query with an item's best chunk, over every stored vector
  of the searched conversations; ties are broken by key, so results do not depend on block order.
  (A sign-bit sketch, as long-term memory search uses above 50,000 vectors, was tried here and kept
  only a fifth of the exact top ten on the benchmark's vectors, so message search stays exact.)
* Updating replaces the matrix (a copy of the kept rows plus the reloaded ones); a search never sees
  a half-updated one.  Callers hold no lock: the event loop runs one update at a time.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lossless.errors import MissingDependencyError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["VectorBlocks"]

Version = tuple[int, int]


def _numpy() -> Any:
    try:
        return importlib.import_module("numpy")
    except ImportError as exc:  # pragma: no cover - the embeddings extra brings NumPy
        raise MissingDependencyError("semantic search", "embeddings", "numpy") from exc


@dataclass(frozen=True, slots=True)
class _Span:
    """Where one conversation's vectors are: rows ``start:end`` of the matrix, items ``first:last``."""

    start: int
    end: int
    first: int
    last: int
    version: Version


class VectorBlocks:
    """Every loaded conversation's chunk vectors of one model and source, as one matrix."""

    def __init__(self) -> None:
        xp = _numpy()
        #: First row of each item (an item's chunks are consecutive rows).
        self.starts: npt.NDArray[np.int64] = xp.zeros(0, dtype=xp.int64)
        self.matrix: npt.NDArray[np.float32] = xp.zeros((0, 0), dtype=xp.float32)
        #: Item index of each row (an item with several chunks has several rows).
        self.owner: npt.NDArray[np.int64] = xp.zeros(0, dtype=xp.int64)
        #: Conversation of each item.
        self.conversation: npt.NDArray[np.int64] = xp.zeros(0, dtype=xp.int64)
        self.keys: list[str] = []
        self.spans: dict[int, _Span] = {}

    def __len__(self) -> int:
        return len(self.keys)

    def stale(self, versions: Mapping[int, Version]) -> list[int]:
        """The conversations (of ``versions``, the current state of each) whose block is missing or out of date."""
        return [c for c, version in versions.items() if (span := self.spans.get(c)) is None or span.version != version]

    def update(
        self, loaded: Mapping[int, tuple[Version, Sequence[tuple[int | str, bytes]]]], gone: Sequence[int] = ()
    ) -> None:
        """Replace the blocks of ``loaded`` and drop those of ``gone``.

        ``loaded`` maps a conversation to its version and its ``(key, vector blob)`` rows, by key and chunk.
        """
        xp = _numpy()
        drop = set(gone) | set(loaded)
        parts: list[tuple[int, Version, Any, list[str], Any]] = []  # (conversation, version, rows, keys, owner)
        for conversation_id, span in self.spans.items():
            if conversation_id in drop:
                continue
            owner = self.owner[span.start : span.end] - span.first
            kept = self.matrix[span.start : span.end]
            parts.append((conversation_id, span.version, kept, self.keys[span.first : span.last], owner))
        dim = self.matrix.shape[1] if self.matrix.shape[0] else 0
        for conversation_id, (version, rows) in loaded.items():
            keys: list[str] = []
            owner_list: list[int] = []
            for key, _ in rows:
                text = str(key)
                if not keys or keys[-1] != text:
                    keys.append(text)
                owner_list.append(len(keys) - 1)
            if rows:
                matrix = xp.frombuffer(b"".join(blob for _, blob in rows), dtype="<f4").reshape(len(rows), -1)
                if dim and matrix.shape[1] != dim:  # another dimension: not comparable with the rest
                    raise ValueError(f"vectors of {matrix.shape[1]} dimensions beside ones of {dim}")
                dim = matrix.shape[1]
            else:
                matrix = xp.zeros((0, dim), dtype=xp.float32)
            parts.append((conversation_id, version, matrix, keys, xp.asarray(owner_list, dtype=xp.int64)))
        parts.sort(key=lambda p: p[0])
        spans: dict[int, _Span] = {}
        keys_all: list[str] = []
        owners: list[Any] = []
        conversations: list[int] = []
        start = 0
        for conversation_id, version, matrix, keys, owner in parts:
            first = len(keys_all)
            spans[conversation_id] = _Span(start, start + matrix.shape[0], first, first + len(keys), version)
            owners.append(owner + first)
            keys_all += keys
            conversations += [conversation_id] * len(keys)
            start += matrix.shape[0]
        blocks = [p[2] for p in parts if p[2].shape[0]]
        self.matrix = (
            xp.ascontiguousarray(xp.concatenate(blocks), dtype=xp.float32)
            if blocks
            else xp.zeros((0, dim), dtype=xp.float32)
        )
        self.owner = xp.concatenate(owners) if owners else xp.zeros(0, dtype=xp.int64)
        changes = xp.concatenate([xp.ones(min(1, len(self.owner)), dtype=bool), self.owner[1:] != self.owner[:-1]])
        self.starts = xp.flatnonzero(changes).astype(xp.int64)
        self.conversation = xp.asarray(conversations, dtype=xp.int64)
        self.keys = keys_all
        self.spans = spans

    def search(self, query: Any, conversation_ids: Sequence[int], limit: int) -> list[tuple[str, int, float]]:
        """``(key, conversation id, cosine)`` of the ``limit`` items nearest ``query`` (a unit vector), best first."""
        xp = _numpy()
        spans = [self.spans[c] for c in dict.fromkeys(conversation_ids) if c in self.spans]
        spans = [s for s in spans if s.end > s.start]
        if not spans or limit < 1:
            return []
        q = xp.asarray(query, dtype=xp.float32).reshape(-1)
        if q.shape[0] != self.matrix.shape[1]:
            return []
        wanted = sum(s.end - s.start for s in spans)
        if len(spans) == 1 or 2 * wanted < self.matrix.shape[0]:
            pieces = [self._best(q, s.start, s.end, s.first, s.last) for s in spans]
            items = xp.concatenate([xp.arange(s.first, s.last) for s in spans])
            scores = xp.concatenate(pieces)
        else:  # most of the matrix: one product over all of it, then keep the searched conversations
            scores = self._best(q, 0, self.matrix.shape[0], 0, len(self.keys))
            items = xp.flatnonzero(xp.isin(self.conversation, [c for c in conversation_ids if c in self.spans]))
            scores = scores[items]
        k = min(limit, len(items))
        top = xp.argpartition(-scores, k - 1)[:k] if k < len(items) else xp.arange(len(items))
        found = items[top]  # one conversion per array, not per item (the same ints and doubles)
        chosen = [
            (self.keys[item], conversation, score)
            for item, conversation, score in zip(
                found.tolist(), self.conversation[found].tolist(), scores[top].tolist(), strict=True
            )
        ]
        chosen.sort(key=lambda h: (-h[2], h[0]))
        return chosen

    def _best(self, q: Any, start: int, end: int, first: int, last: int) -> Any:
        """Best-chunk cosine of each item ``first:last`` (rows ``start:end``)."""
        xp = _numpy()
        sims = self.matrix[start:end] @ q
        if end - start == last - first:  # one chunk per item: rows are items
            return sims
        return xp.maximum.reduceat(sims, self.starts[first:last] - start)
