"""Assembly latency does not grow with the total history: p50 of ``engine.assemble`` at 1k, 100k and 1M
stored messages (``--quick``: 1k, 10k, 100k), against the 1k store measured in the same run.

Each store holds one conversation of N real agent messages (the shared corpus, else the bundled sample,
repeated; the older history's text is cut to 300 characters to keep building a 1M-message store to a
couple of minutes — assembly never reads those rows, only the context's), compacted as the engine
compacts: leaf summaries of 100 messages, condensed summaries of 10 summaries per level, so the
context is a handful of summaries per depth plus the 64-message fresh tail of full-length messages.
Rows are bulk-loaded with ``executemany`` and the summaries written through the store's own
``replace_with_summary``; the search index is caught up before timing.

Figures: p50 (and p95) of ``assemble`` at a 128k-token budget (newest-first; everything fits), and
with a prompt at the fresh tail's size + 8k (so the BM25 relevance fill has to choose); the goal is
the largest store's 128k p50 at most 1.5x the 1k store's.  Every store has the same fresh tail, and
the sizes are timed interleaved, run by run.  For contrast, the time to read the whole history once
(what a naive "load everything and truncate" assembler does) up to 100k messages.
"""

from __future__ import annotations

import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Figure, parse_args, report, timer
from ingest import load_messages, raw_insert, raw_rows, realistic
from lossless import ContextEngine, Message
from lossless.records import ContextEntry, Summary, format_timestamp, utcnow
from lossless.tokens import EstimatingCounter

BUDGET = 128_000
HEADROOM = 8_000  # the prompt mode's budget: the fresh tail plus this, so the relevance fill must choose
TAIL = 64
LEAF = 100
FANOUT = 10
COUNTER = EstimatingCounter()


def history(count: int, pool: list[Message]) -> list[Message]:
    """``count`` messages whose newest ``2 * TAIL`` are the same in every store (so every store sends the
    same fresh tail) and whose older history is the pool, cycled, cut to 300 characters."""
    messages = realistic(count, pool, "m")
    cut = max(0, count - TAIL * 2)
    recent = pool[-(count - cut) :]
    older = [Message(m.role, m.content[:300], created_at=m.created_at, event_key=m.event_key) for m in messages[:cut]]
    return older + [
        Message(m.role, m.content, m.parts, created_at=m.created_at, event_key=f"t-{i}") for i, m in enumerate(recent)
    ]


def summary_text(pool: list[Message], index: int) -> str:
    """About 400 tokens of real text, as a summary of that size would hold."""
    text = " ".join(m.content for m in pool[index % len(pool) : index % len(pool) + 20])
    return (text or "summary")[:1600]


async def compact(engine: ContextEngine, conversation_id: int, pool: list[Message]) -> dict[int, int]:
    """Summarise all but the tail: leaves of LEAF messages, then FANOUT summaries per condensed level."""
    made: dict[int, int] = {}
    number = 0
    depth = 0
    while True:
        entries = await engine.store.get_context(conversation_id)
        if depth == 0:
            messages = [e for e in entries if e.kind == "message"]
            candidates = messages[: max(0, len(messages) - TAIL)]
            size = LEAF
        else:
            candidates = [e for e in entries if e.kind == "summary" and e.depth == depth - 1]
            size = FANOUT
        groups = [candidates[i : i + size] for i in range(0, len(candidates) - size + 1, size)]
        if not groups:
            return made
        for group in groups:
            number += 1
            await engine.store.replace_with_summary(make_summary(conversation_id, depth, group, pool, number), group)
        made[depth] = len(groups)
        depth += 1


def make_summary(conversation_id: int, depth: int, group: list[ContextEntry], pool: list[Message], n: int) -> Summary:
    content = summary_text(pool, n)
    return Summary(
        f"sum_{n:016x}",
        conversation_id,
        "leaf" if depth == 0 else "condensed",
        depth,
        content,
        COUNTER.count(content),
        utcnow(),
        group[0].earliest_at or group[0].created_at,
        group[-1].created_at,
        descendant_count=len(group) if depth else 0,
        source_token_count=sum(e.token_count for e in group),
    )


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def build(path: Path, count: int, pool: list[Message]) -> dict[str, float]:
    """Create the store of ``count`` messages at ``path``, compacted; return what it holds."""
    async with await ContextEngine.open(f"sqlite:///{path}") as engine:
        await engine.conversations()  # the schema exists once the engine has opened the file
    started = time.perf_counter()
    messages = history(count, pool)
    base = utcnow() - timedelta(minutes=count)
    messages = [
        Message(m.role, m.content, m.parts, created_at=base + timedelta(minutes=i), event_key=m.event_key)
        for i, m in enumerate(messages)
    ]
    raw_insert(path, raw_rows(messages), schema="store")
    with sqlite3.connect(path) as conn:  # the raw loader leaves placeholder times on its conversation row
        now = format_timestamp(utcnow())
        conn.execute("UPDATE conversations SET created_at = ?, updated_at = ?", (now, now))
    out: dict[str, float] = {}
    async with await ContextEngine.open(f"sqlite:///{path}", fresh_tail_count=TAIL) as engine:
        conversation = await engine.conversation("raw")
        made = await compact(engine, conversation.id, pool)
        await engine.store.wait_indexed()
        out["build_s"] = time.perf_counter() - started
        out["context_items"] = len(await engine.store.get_context(conversation.id))
        out["summaries"] = sum(made.values())
        if count <= 100_000:
            with timer() as elapsed:
                everything = await engine.messages(conversation.id, limit=None)
            out["naive_ms"] = elapsed() * 1000
            assert len(everything) == count
    return out


PROMPT = "why did the rate limiter test fail at midnight"


async def sample(paths: dict[int, Path], runs: int, results: dict[int, dict[str, float]]) -> None:
    """Time ``assemble`` on every store, interleaved run by run, so a change in the machine's load
    (other processes, CPU frequency) touches every size alike."""
    samples: dict[tuple[int, str], list[float]] = {(n, mode): [] for n in paths for mode in ("newest", "prompt")}
    engines = {n: await ContextEngine.open(f"sqlite:///{path}", fresh_tail_count=TAIL) for n, path in paths.items()}
    try:
        tails = set()
        for engine in engines.values():  # warm the page cache, as a live session is
            tails.add((await engine.assemble("raw", token_budget=BUDGET)).tail_tokens)
        assert len(tails) == 1, f"the stores' fresh tails differ: {tails}"
        tight = tails.pop() + HEADROOM
        modes = (("newest", None, BUDGET), ("prompt", PROMPT, tight))
        for n in results:
            results[n]["tight"] = tight
        for _ in range(runs):
            for n, engine in engines.items():
                for mode, prompt, budget in modes:
                    with timer() as elapsed:
                        context = await engine.assemble("raw", token_budget=budget, prompt=prompt)
                    samples[n, mode].append(elapsed() * 1000)
                    results[n][f"{mode}_tokens"] = context.estimated_tokens
    finally:
        for engine in engines.values():
            await engine.dispose()
    for (n, mode), values in samples.items():
        results[n][f"{mode}_p50"] = statistics.median(values)
        results[n][f"{mode}_p95"] = p(values, 0.95)


async def main() -> None:
    args = parse_args(__doc__ or "")
    sizes = [1_000, 10_000, 100_000] if args.quick else [1_000, 100_000, 1_000_000]
    runs = 21 if args.quick else 41
    pool = load_messages()
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        paths = {count: Path(scratch) / f"a{count}.db" for count in sizes}
        for count, path in paths.items():
            results[count] = await build(path, count, pool)
            r = results[count]
            print(
                f"{count:>9,} messages: built in {r['build_s']:.1f} s, {int(r['summaries'])} summaries, "
                f"{int(r['context_items'])} context items",
                flush=True,
            )
        await sample(paths, runs, results)
    small, large = sizes[0], sizes[-1]
    figures: list[Figure] = []
    for count in sizes:
        r = results[count]
        for mode, label in (("newest", "128k"), ("prompt", f"{r['tight'] / 1000:.0f}k, prompt")):
            base = results[small][f"{mode}_p50"]
            goal = count == large and mode == "newest"
            figures.append(
                Figure(
                    f"assemble p50, {count:,} msgs ({label})",
                    r[f"{mode}_p50"],
                    "ms",
                    baseline=base,
                    goal=1.5 if goal else None,
                    goal_op="<=" if goal else None,
                    note=(
                        f"p95 {r[f'{mode}_p95']:.1f} ms, {int(r[f'{mode}_tokens']):,} tokens sent; "
                        f"baseline: the {small:,}-message store, same run, interleaved"
                    ),
                )
            )
        if "naive_ms" in r:
            figures.append(
                Figure(
                    f"naive: read all {count:,} msgs once",
                    r["naive_ms"],
                    "ms",
                    baseline=r["newest_p50"],
                    note="what an assembler that loads the whole history pays per turn; ratio vs assemble p50",
                )
            )
    report("assembly", figures, args.json)


if __name__ == "__main__":
    anyio.run(main)
