"""A disk cache of embeddings for benchmark runs (``--embed-cache FILE``): a text is embedded once per model.

Iterating on retrieval re-runs the same benchmark many times; with the offline model, embedding the
dev split's messages takes minutes on a small machine.  :class:`CachingEmbedder` wraps the engine's
embedder and keeps every vector it returns in a SQLite file keyed by (model, task, text), so a later
run embeds only texts it has not seen.  Vectors are the wrapped model's, unchanged: results are the
same with or without the cache; only the setup time differs (the benchmarks say when it was used).
"""

from __future__ import annotations

import hashlib
import sqlite3
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class CachingEmbedder:
    """An :class:`~lossless.memory.ports.Embedder` that answers from ``path`` what it embedded before."""

    def __init__(self, inner: Any, path: Path) -> None:
        self.inner = inner
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")
        self.hits = self.misses = 0

    @property
    def model(self) -> str:
        return str(self.inner.model)

    @property
    def dimensions(self) -> int:
        return int(self.inner.dimensions)

    @property
    def max_chars(self) -> int:
        return int(self.inner.max_chars)

    @property
    def similarity_floor(self) -> float:
        return float(getattr(self.inner, "similarity_floor", 0.0))

    @property
    def query_form(self) -> str | None:
        return getattr(self.inner, "query_form", None)

    def _key(self, task: str, text: str) -> str:
        return hashlib.sha256(f"{self.model}\x00{task}\x00{text}".encode()).hexdigest()

    async def embed(self, texts: Sequence[str], *, task: Any = "passage") -> list[list[float]]:
        keys = [self._key(str(task), t) for t in texts]
        found: dict[str, list[float]] = {}
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            rows = self.db.execute(
                f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(part))})", part
            ).fetchall()
            found.update((k, list(struct.unpack(f"<{len(v) // 4}f", v))) for k, v in rows)
        missing = [i for i, k in enumerate(keys) if k not in found]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if missing:
            fresh = await self.inner.embed([texts[i] for i in missing], task=task)
            rows = []
            for i, vector in zip(missing, fresh, strict=True):
                values = [float(v) for v in vector]
                found[keys[i]] = values
                rows.append((keys[i], struct.pack(f"<{len(values)}f", *values)))
            self.db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
            self.db.commit()
        return [found[k] for k in keys]
