"""A deterministic, dependency-free embedder: feature hashing of words and CJK bigrams.

For tests and for offline setups that want keyword-like vectors with no model
(``memory_embedder = "hash"``).  Invariants: same text, same vector, on every
machine; unit length; texts sharing no feature are orthogonal in expectation.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

from lossless.text import CJK_RUN, cjk_bigrams

__all__ = ["HashEmbedder"]


class HashEmbedder:
    """A deterministic, offline :class:`~lossless.memory.ports.Embedder` for tests.

    Feature hashing of lower-cased words and CJK character bigrams into
    ``dimensions`` signed buckets, then unit length.  Texts that share words get
    similar vectors, unrelated texts near-orthogonal ones; no model, no network,
    same output on every machine.  ``calls`` records each batch embedded (to
    check caching).
    """

    def __init__(self, dimensions: int = 256, *, max_chars: int = 2000) -> None:
        self._dimensions = dimensions
        self._max_chars = max_chars
        self.calls: list[list[str]] = []

    @property
    def model(self) -> str:
        return f"hash-{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def max_chars(self) -> int:
        return self._max_chars

    def vector(self, text: str) -> list[float]:
        values = [0.0] * self._dimensions
        lowered = text.lower()
        features = re.findall(r"[a-z0-9]+", lowered)
        for run in CJK_RUN.findall(lowered):
            features.extend(cjk_bigrams(run))
        for feature in features:
            digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self._dimensions
            values[bucket] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(v * v for v in values))
        if norm == 0:
            values[0] = 1.0
            return values
        return [v / norm for v in values]

    async def embed(self, texts: Sequence[str], *, task: str = "passage") -> list[list[float]]:
        self.calls.append(list(texts))
        return [self.vector(t) for t in texts]
