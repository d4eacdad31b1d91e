"""Search vectors built ahead: embedding throughput, and semantic grep before and after the build.

``python benchmarks/embedding_index.py [--quick] [--json OUT] [--postgres]`` (``--quick``: 20k messages,
else 100k; ``--postgres`` also runs it on the tests' embedded PostgreSQL with pgvector).

Messages are synthetic sentences (one conversation per 10,000), ingested through ``engine.ingest_batch``.
Figures, all through the engine's public API (``engine.grep`` / ``engine.index_step``):

* **local embedder throughput**: messages per second that the background build embeds and stores with
  the offline model (all-MiniLM-L6-v2 int8; the ``embeddings`` extra), on 1,000 messages (200 with
  ``--quick``).  It is also the baseline of the next figure: before vectors were built ahead, the first
  semantic search embedded the whole history inside the call, ``N / throughput`` seconds.
* **semantic grep right after the import**: nothing is embedded yet; the search answers from the
  keyword index with a partial-index note (goal: < 1 s; ratio against the old blocking first search).
* **build write throughput**: the build's own cost with an instant embedder (a deterministic hashing
  embedder at 384 dimensions), i.e. reading the texts and storing the vectors.
* **semantic grep p50 / p95 once indexed**: messages ranked by the stored vectors (goal p50 ≤ 50 ms),
  against brute-force NumPy (``matrix @ q`` + ``argpartition``) over the same vectors in the same run,
  at the full size (every conversation searched: one product over the in-process matrix) and at 5,000
  messages.  The hashing embedder makes query embedding negligible (about 0.1 ms), so the figures exclude it.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # tests/pg.py for --postgres

from _harness import Figure, parse_args, report, timer
from lossless import ContextEngine, Message
from lossless.memory.hashing import HashEmbedder
from lossless.memory.message_index import VectorBuilder
from lossless.ports import SearchVectorStore

WORDS = (  # noqa: SIM905
    "deploy server coffee tea london paris kube pod cert expired disk route cache queue backup login test flaky "
    "migration failed schema index worker lease retry timeout budget token summary agent file patch commit "
    "review branch merge conflict release canary rollback alert page incident latency memory cpu thread"
).split()
PER_CONVERSATION = 10_000
#: The smaller store of the second latency figure (the recall bar is stated at 5,000 messages).
SMALL = 5_000
BATCH = 2_000


def sentences(count: int, seed: int = 16) -> list[str]:
    rng = random.Random(seed)
    return [f"{' '.join(rng.choices(WORDS, k=rng.randint(8, 24)))} (note {i})" for i in range(count)]


async def local_throughput(texts: list[str]) -> float | None:
    """Messages per second the build embeds and stores with the offline model, or None without the extra."""
    try:
        from lossless.providers.embeddings import LocalEmbedder

        embedder = LocalEmbedder()
    except ImportError:
        return None
    with tempfile.TemporaryDirectory() as folder:
        engine = await ContextEngine.open(f"sqlite:///{folder}/local.db")
        try:
            await engine.ingest_batch("local", [Message("user", t) for t in texts])
            assert isinstance(engine.store, SearchVectorStore)
            builder = VectorBuilder(engine.store, embedder)
            await embedder.embed(["warm up"])
            with timer() as elapsed:
                written = await builder.run()
            return written / elapsed()
        finally:
            await engine.dispose()


async def measure(url: str, texts: list[str], queries: list[str]) -> dict[str, float | str]:
    """Import ``texts``, search before and after the build (instant embedder); latencies in ms."""
    engine = await ContextEngine.open(url, memory_embedder="hash")
    try:
        embedder = HashEmbedder(384)
        engine.memory().embedder = embedder  # the same model for the build and the queries
        for start in range(0, len(texts), BATCH):
            session = f"s{start // PER_CONVERSATION}"
            await engine.ingest_batch(session, [Message("user", t) for t in texts[start : start + BATCH]])
        await engine.store.wait_indexed()
        first: list[float] = []
        note = ""
        for query in queries[:5]:
            with timer() as elapsed:
                found = await engine.grep(query, mode="semantic", scope="messages", limit=10)
            first.append(elapsed() * 1000)
            note = found.notes[0] if found.notes else ""
        with timer() as elapsed:
            built = 0
            while done := await engine.index_step():
                built += done
        build_rate = built / elapsed()
        await engine.grep(queries[0], mode="semantic", scope="messages", limit=10)  # loads the vectors once
        latencies = []
        for query in queries:
            with timer() as elapsed:
                found = await engine.grep(query, mode="semantic", scope="messages", limit=10)
            latencies.append(elapsed() * 1000)
            assert found.hits
            assert not found.notes

        return {
            "first": statistics.median(first),
            "note": note,
            "build": build_rate,
            "p50": statistics.median(latencies),
            "p95": float(np.percentile(latencies, 95)),
        }
    finally:
        await engine.dispose()


def brute_force(texts: list[str], queries: list[str]) -> float:
    """p50 ms of NumPy top-10 over the same vectors (the baseline)."""
    embedder = HashEmbedder(384)
    matrix = np.stack([np.asarray(embedder.vector(t), dtype=np.float32) for t in texts])
    times = []
    for query in queries:
        q = np.asarray(embedder.vector(query), dtype=np.float32)
        with timer() as elapsed:
            scores = matrix @ q
            top = np.argpartition(-scores, 10)[:10]
            top[np.argsort(-scores[top])]
        times.append(elapsed() * 1000)
    return statistics.median(times)


async def on_postgres(texts: list[str], queries: list[str]) -> dict[str, float | str]:
    """The same run on the embedded PostgreSQL of the tests, with pgvector (HNSW) where it loads."""
    import psycopg
    from tests import pg  # the embedded server of the tests (ROOT is on sys.path)

    pg.prepare_environment()
    server = pg.start()
    try:
        pg.prepare_template(server)
        with pg.database(server) as url:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            return await measure(url, texts, queries)
    finally:
        server.close()


async def run(count: int, sample: int, postgres: bool) -> list[Figure]:
    figures: list[Figure] = []
    texts = sentences(count)
    queries = [" ".join(random.Random(i).choices(WORDS, k=4)) for i in range(30)]
    rate = await local_throughput(texts[:sample])
    with tempfile.TemporaryDirectory() as folder:
        got = await measure(f"sqlite:///{folder}/bench.db", texts, queries)
    old = count / rate * 1000 if rate else None
    figures.append(
        Figure(
            "semantic grep right after import (p50)",
            float(got["first"]),
            "ms",
            baseline=old,
            goal=1000,
            goal_op="<=",
            goal_on="value",
            note=f"partial-index note: {'yes' if 'still building' in str(got['note']) else 'NO'}; baseline = the "
            f"old first search embedding all {count:,} messages at the measured local rate",
        )
    )
    figures.append(Figure("build write throughput (instant embedder)", float(got["build"]), "msg/s"))
    if rate:
        figures.append(
            Figure(
                "local embedder build throughput",
                rate,
                "msg/s",
                note=f"all-MiniLM-L6-v2 int8, 1 thread, {sample:,} msgs",
            )
        )
    base = brute_force(texts, queries)
    figures.append(
        Figure(
            f"semantic grep p50 once indexed ({count // 1000}k msgs)",
            float(got["p50"]),
            "ms",
            baseline=base,
            goal=50,
            goal_op="<=",
            goal_on="value",
            note="baseline: brute-force NumPy top-10 over the same vectors, same run",
        )
    )
    figures.append(Figure("semantic grep p95 once indexed", float(got["p95"]), "ms", baseline=base))
    small = texts[:SMALL]
    with tempfile.TemporaryDirectory() as folder:
        at_small = await measure(f"sqlite:///{folder}/small.db", small, queries)
    figures.append(
        Figure(
            f"semantic grep p50 once indexed ({SMALL // 1000}k msgs)",
            float(at_small["p50"]),
            "ms",
            baseline=brute_force(small, queries),
            goal=50,
            goal_op="<=",
            goal_on="value",
            note="query embedding excluded (hashing embedder); baseline: brute-force NumPy, same run",
        )
    )
    if postgres:
        on_pg = await on_postgres(texts, queries)
        figures.append(
            Figure(
                "PostgreSQL: semantic grep right after import",
                float(on_pg["first"]),
                "ms",
                goal=1000,
                goal_op="<=",
                goal_on="value",
                note=f"partial-index note: {'yes' if 'still building' in str(on_pg['note']) else 'NO'}",
            )
        )
        figures.append(Figure("PostgreSQL: build write throughput", float(on_pg["build"]), "msg/s"))
        figures.append(
            Figure(
                "PostgreSQL: semantic grep p50 (pgvector)",
                float(on_pg["p50"]),
                "ms",
                baseline=float(got["p50"]),
                goal=50,
                goal_op="<=",
                goal_on="value",
                note="HNSW in the database, conversation filter in SQL; baseline: SQLite in the same run",
            )
        )
    return figures


def main() -> None:
    postgres = "--postgres" in sys.argv
    if postgres:
        sys.argv.remove("--postgres")
    args = parse_args(__doc__.split("\n")[0])
    count, sample = (20_000, 200) if args.quick else (100_000, 1_000)
    started = time.perf_counter()
    figures = anyio.run(run, count, sample, postgres)
    report("embedding_index", figures, args.json)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
