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
with a prompt at a 32k budget (so the BM25 relevance fill has to choose); the goal is the largest
store's p50 at most 1.5x the 1k store's.  For contrast, the time to read the whole history once
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
TIGHT = 32_000  # the relevance fill runs only when the context does not fit: measure it at a smaller budget
TAIL = 64
LEAF = 100
FANOUT = 10
COUNTER = EstimatingCounter()


def history(count: int, pool: list[Message]) -> list[Message]:
    messages = realistic(count, pool, "m")
    cut = max(0, count - TAIL * 2)
    return [
        Message(m.role, m.content[:300], created_at=m.created_at, event_key=m.event_key) for m in messages[:cut]
    ] + [Message(m.role, m.content, m.parts, created_at=m.created_at, event_key=m.event_key) for m in messages[cut:]]


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


async def measure(path: Path, count: int, pool: list[Message], runs: int) -> dict[str, float]:
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
        await engine.assemble("raw", token_budget=BUDGET)  # warm the page cache, as a live session is
        for mode, prompt, budget in (
            ("newest", None, BUDGET),
            ("prompt", "why did the rate limiter test fail at midnight", TIGHT),
        ):
            samples = []
            for _ in range(runs):
                with timer() as elapsed:
                    context = await engine.assemble("raw", token_budget=budget, prompt=prompt)
                samples.append(elapsed() * 1000)
            out[f"{mode}_p50"] = statistics.median(samples)
            out[f"{mode}_p95"] = p(samples, 0.95)
            out[f"{mode}_tokens"] = context.estimated_tokens
        if count <= 100_000:
            with timer() as elapsed:
                everything = await engine.messages(conversation.id, limit=None)
            out["naive_ms"] = elapsed() * 1000
            assert len(everything) == count
    return out


async def main() -> None:
    args = parse_args(__doc__ or "")
    sizes = [1_000, 10_000, 100_000] if args.quick else [1_000, 100_000, 1_000_000]
    runs = 15 if args.quick else 30
    pool = load_messages()
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for count in sizes:
            results[count] = await measure(Path(scratch) / f"a{count}.db", count, pool, runs)
            r = results[count]
            print(
                f"{count:>9,} messages: built in {r['build_s']:.1f} s, {int(r['summaries'])} summaries, "
                f"{int(r['context_items'])} context items, {int(r['newest_tokens']):,} tokens assembled",
                flush=True,
            )
    small, large = sizes[0], sizes[-1]
    figures: list[Figure] = []
    for count in sizes:
        r = results[count]
        for mode, label in (("newest", "128k"), ("prompt", "32k, prompt")):
            base = results[small][f"{mode}_p50"]
            goal = count == large
            figures.append(
                Figure(
                    f"assemble p50, {count:,} msgs ({label})",
                    r[f"{mode}_p50"],
                    "ms",
                    baseline=base,
                    goal=1.5 if goal else None,
                    goal_op="<=" if goal else None,
                    note=f"p95 {r[f'{mode}_p95']:.1f} ms; baseline: the {small:,}-message store, same run",
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
