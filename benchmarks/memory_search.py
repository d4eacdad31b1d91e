"""Memory search latency over 100k memories, against brute-force NumPy on the same vectors, in the same run.

``python benchmarks/memory_search.py [--quick] [--json OUT]`` (``--quick``: 20k memories).

Memories are synthetic sentences with 384-dimensional unit vectors drawn around 1,000 cluster centres
(so neighbourhoods look like real embeddings'); they are stored through the memory store (rows, both FTS5
tables, vector blobs, one transaction per 2,000).  Each query is a perturbed copy of a stored memory's
vector plus three of its words, and its vector is precomputed, so the figures **exclude query embedding**.

Figures: the full hybrid search (vector + keyword + the ranking pipeline + fetching the rows), p50 and p95,
goal p50 ≤ 20 ms; its vector and keyword stages alone; and the baseline — ``matrix @ q`` + ``argpartition``
top-10 in NumPy over the same matrix — with the ratio of each to it.  Above ``memory_exact_search_max``
vectors (50,000; 10,000 with ``--quick``) the vector stage preselects candidates with a sign-bit sketch, so
the recall@10 of the vector stage against exact top-10 is reported too (goal ≥ 0.95).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Figure, parse_args, report, timer
from lossless.memory.records import MemoryDraft
from lossless.memory.scopes import MemoryCaller
from lossless.memory.service import MemoryService
from lossless.memory.vectors import DEFAULT_EXACT_MAX, VectorIndex, normalize, to_blob
from lossless.records import utcnow
from lossless.stores import memory_store_for, open_store

DIM = 384
BATCH = 2000


class Precomputed:
    """An embedder that returns vectors it was given (queries are embedded before timing)."""

    model = "bench-384"
    dimensions = DIM
    max_chars = 100_000

    def __init__(self) -> None:
        self.vectors: dict[str, list[float]] = {}

    async def embed(self, texts: Sequence[str], *, task: str = "passage") -> list[list[float]]:
        return [self.vectors[t] for t in texts]


def corpus(count: int, rng: np.random.Generator) -> tuple[list[str], np.ndarray]:
    syllables = ["ka", "lo", "mi", "ren", "tu", "vo", "sa", "ne", "ri", "po", "gal", "dor", "fin", "ul", "zeb"]
    vocab = sorted({"".join(rng.choice(syllables, size=int(rng.integers(2, 4)))) for _ in range(4000)})
    words = rng.choice(len(vocab), size=(count, 12))
    texts = [" ".join(vocab[w] for w in row) + f" item{i}." for i, row in enumerate(words)]
    centres = normalize(rng.normal(size=(1000, DIM)))
    owner = rng.integers(0, 1000, size=count)
    vectors = normalize(centres[owner] + 0.6 * normalize(rng.normal(size=(count, DIM))))
    return texts, vectors


async def run(count: int, queries: int, exact_max: int) -> list[Figure]:
    rng = np.random.default_rng(20261122)
    texts, vectors = corpus(count, rng)
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(f"sqlite:///{Path(tmp) / 'bench.db'}")
        try:
            memories = memory_store_for(store)
            embedder = Precomputed()
            with timer() as elapsed:
                for start in range(0, count, BATCH):
                    drafts = [
                        MemoryDraft(t, category="entities", scope="agent:bench", abstract=t[:60], overview=t[:60])
                        for t in texts[start : start + BATCH]
                    ]
                    blobs = [(embedder.model, (to_blob(v),)) for v in vectors[start : start + BATCH]]
                    await memories.insert(drafts, blobs, now=utcnow())
            figures.append(Figure(f"store {count:,} memories", count / elapsed(), "/s", note="rows + FTS5 + vectors"))
            service = MemoryService(memories, embedder, MemoryCaller.agent("bench"), exact_search_max=exact_max)
            picks = rng.integers(0, count, size=queries)
            questions = []
            for i, pick in enumerate(picks):
                words = texts[pick].split()
                question = f"{words[1]} {words[4]} {words[7]} q{i}"
                noisy = normalize(vectors[pick] + 0.4 * normalize(rng.normal(size=DIM)))[0]
                embedder.vectors[question] = noisy.tolist()
                questions.append((question, noisy))
            await service.embed([q for q, _ in questions], task="query")  # cache: timings exclude embedding
            await service.search(questions[0][0], limit=10, record_access=False)  # load the vector matrix once
            total: list[float] = []
            vector_stage: list[float] = []
            keyword_stage: list[float] = []
            for question, _ in questions:
                start = time.perf_counter()
                result = await service.search(question, limit=10, record_access=False)
                total.append((time.perf_counter() - start) * 1000 - result.timings_ms["embed"])
                vector_stage.append(result.timings_ms["vector"])
                keyword_stage.append(result.timings_ms["keyword"])
            revision, rows = await memories.load_vectors(embedder.model)
            index = VectorIndex(revision, rows, exact_max=exact_max)
            recall: list[float] = []
            for _, q in questions:
                truth = np.argsort(-(vectors @ q))[:10]
                got = {h.memory_id for h in index.search(q, limit=10, scopes=["agent:bench"])}
                recall.append(len(got & {index.ids[i] for i in truth.tolist()}) / 10)
            matrix = np.ascontiguousarray(vectors, dtype=np.float32)
            brute: list[float] = []
            for _, q in questions:
                start = time.perf_counter()
                scores = matrix @ q.astype(np.float32)
                top = np.argpartition(-scores, 10)[:10]
                top[np.argsort(-scores[top])]
                brute.append((time.perf_counter() - start) * 1000)
        finally:
            await store.close()

    def p(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(len(ordered) * q))]

    base = statistics.median(brute)
    figures += [
        Figure("brute-force NumPy top-10, p50", base, "ms", note="matrix @ q + argpartition, same vectors"),
        Figure(
            f"hybrid search over {count:,}, p50",
            statistics.median(total),
            "ms",
            baseline=base,
            goal=20.0,
            goal_op="<=",
            goal_on="value",
            note="excludes query embedding; vector + keyword + pipeline + rows",
        ),
        Figure(f"hybrid search over {count:,}, p95", p(total, 0.95), "ms", baseline=base),
        Figure("  vector stage, p50", statistics.median(vector_stage), "ms", baseline=base),
        Figure("  keyword stage, p50", statistics.median(keyword_stage), "ms", baseline=base),
        Figure(
            "  vector recall@10 vs exact",
            statistics.fmean(recall),
            "",
            goal=0.95 if count > exact_max else None,
            goal_op=">=" if count > exact_max else None,
            goal_on="value",
            note=("sign-bit sketch + exact rescoring" if count > exact_max else "exact search")
            + f" (exact up to {exact_max:,})",
        ),
    ]
    return figures


def main() -> None:
    args = parse_args(__doc__.split("\n")[0])
    count, queries = (20_000, 100) if args.quick else (100_000, 200)
    # --quick is too small for the default threshold (50,000): lower it so the sketch path is measured too.
    exact_max = 10_000 if args.quick else DEFAULT_EXACT_MAX
    report("memory_search", anyio.run(run, count, queries, exact_max), args.json)


if __name__ == "__main__":
    main()
