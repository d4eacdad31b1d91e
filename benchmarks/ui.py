"""The web explorer's pages stay fast however long the history: server time of each ``/ui`` page at 1k and
1M stored messages (``--quick``: 1k and 50k), the 1k store measured in the same run as the baseline.

The stores are those of ``benchmarks/assembly.py`` (one conversation of real agent messages, compacted
into leaves of 100 messages and condensed levels of 10).  Each page is requested through the ASGI app
``lcm serve`` runs (httpx's ASGI transport: the app's own routing, identity, rendering and the store, no
socket), interleaved across the stores run by run.  Goal: every page's p95 at most 100 ms on the largest
store.  ``LOSSLESS_BENCH_STORES=DIR`` keeps the built stores in DIR and reuses them on the next run.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Figure, parse_args, report
from assembly import build
from ingest import load_messages
from lossless import ContextEngine
from lossless.adapters.http import create_app
from lossless.adapters.service import Engines
from lossless.config import load_config

GOAL_MS = 100.0


async def pages_of(path: Path) -> dict[str, str]:
    async with await ContextEngine.open(f"sqlite:///{path}") as engine:
        conv = await engine.conversation("raw")
        entries = await engine.store.get_context(conv.id)
        summary = next(e.summary_id for e in entries if e.summary_id is not None)
        newest = (await engine.messages(conv.id, tail=1))[0]
        oldest = (await engine.messages(conv.id, limit=1))[0]
    return {
        "conversations": "/ui/",
        "conversation (newest page)": f"/ui/c/{conv.id}",
        "conversation (oldest page)": f"/ui/c/{conv.id}?after=0",
        "summary": f"/ui/s/{summary}",
        "message (newest)": f"/ui/m/{newest.id}",
        "message (oldest: DAG descent)": f"/ui/m/{oldest.id}",
        "search full_text": "/ui/search?q=rate+limiter+midnight&mode=full_text",
        "search regex": "/ui/search?q=Limiter%5Cw%2B&mode=regex&scope=messages",
        "compaction history": f"/ui/c/{conv.id}/compactions",
        "memories": "/ui/memories",
    }


async def measure(paths: dict[int, Path], runs: int) -> dict[int, dict[str, list[float]]]:
    times: dict[int, dict[str, list[float]]] = {}
    clients: dict[int, tuple[httpx.AsyncClient, Engines, dict[str, str]]] = {}
    for size, path in paths.items():
        config = load_config({"database_url": f"sqlite:///{path}", "memory_embedder": "hash"}, env={})
        engines = await Engines.open(config)
        app = create_app(config, engines=engines)
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")
        clients[size] = (client, engines, await pages_of(path))
        times[size] = {}
    try:
        for run in range(runs + 1):  # the first run warms caches and is not counted
            for size, (client, _, pages) in clients.items():
                for name, url in pages.items():
                    started = time.perf_counter()
                    response = await client.get(url)
                    elapsed = (time.perf_counter() - started) * 1000
                    if response.status_code != 200:
                        raise RuntimeError(f"{url} answered {response.status_code}: {response.text[:300]}")
                    if run:
                        times[size].setdefault(name, []).append(elapsed)
    finally:
        for client, engines, _ in clients.values():
            await client.aclose()
            await engines.close()
    return times


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


async def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    sizes = [1_000, 50_000] if args.quick else [1_000, 1_000_000]
    runs = 15 if args.quick else 30
    pool = load_messages()
    keep = os.environ.get("LOSSLESS_BENCH_STORES")  # a folder to keep the built stores in, and reuse them from
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(keep or tmp)
        await anyio.Path(folder).mkdir(parents=True, exist_ok=True)
        paths = {}
        for size in sizes:
            paths[size] = folder / f"ui-{size}.db"
            if keep and await anyio.Path(paths[size]).exists():
                print(f"reusing the {size:,}-message store in {paths[size]}")
                continue
            built = await build(paths[size], size, pool)
            print(f"built {size:,} messages in {built['build_s']:.1f} s ({built['summaries']:.0f} summaries)")
        times = await measure(paths, runs)
    small, large = sizes[0], sizes[-1]
    figures = [
        Figure(
            f"{name} p95 @{large:,}",
            p95(times[large][name]),
            "ms",
            baseline=p95(times[small][name]),
            goal=GOAL_MS,
            goal_op="<=",
            goal_on="value",
            note=f"p50 {statistics.median(times[large][name]):.1f} ms; baseline = p95 @{small:,}",
        )
        for name in times[large]
    ]
    report("ui", figures, args.json)


if __name__ == "__main__":
    anyio.run(main)
