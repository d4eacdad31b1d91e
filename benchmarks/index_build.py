"""The semantic index's build on real coding-agent sessions: capped (the product) against uncapped, and an
upgrade from format 3 (uncapped) to 4 against a fresh build, same run.

``python benchmarks/index_build.py [--quick] [--json OUT] [--messages N] [--embedder e5|local|hash]
[--sets entireio-cli,pi-mono] [--capped-first]``

Agent sessions are mostly tool output (file dumps, test logs, diffs), so a message is often many chunks.
The build embeds only the first chunks of a long message (:class:`~lossless.memory.message_index.ChunkCap`:
one of a tool output, four of any other, plus the context chunk; the rest is found by its words).  For each
set of sessions of ``../shared/corpus`` below (read with the product's transcript readers, stored through
``engine.ingest_batch`` with their roles and parts), two figures:

* **embedded texts, whole session**: the texts (and characters) the build hands the embedder, capped
  against uncapped (format 3), counted through the builder itself with an instant embedder (a
  deterministic hashing embedder): the work the cap saves, on every message of the session.
* **build throughput** (messages per second) with the real model (``e5``, the default offline model, or
  ``local``), capped against uncapped, on the opening of each session of the set, ``--messages`` in all
  (default 350; 28 with ``--quick``: CI's quick run stays a couple of minutes), the two builds back to
  back in this process on fresh stores (a
  ``VectorBuilder`` run to its end, as ``lcm index`` does; uncapped first, or capped first with
  ``--capped-first``: run both orders where the load moves); ratio = capped / uncapped.
* **upgrade from format 3**: a store built uncapped (format 3, what stores held before format 4) is
  upgraded by the product's build, which copies the vectors of every item whose texts did not change
  and embeds the rest (:data:`~lossless.memory.message_index.FORMATS`): the texts it embeds on the
  whole session (instant embedder) against a fresh build's, and its seconds with the real model on the
  same opening against the fresh capped build's seconds (ratio = upgrade / fresh: what an upgrade now
  costs, where before it was a fresh build).

The machine may be shared: compare figures of one run only (its load average is printed).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Figure, report
from lossless import ContextEngine, Message
from lossless.errors import MissingDependencyError
from lossless.memory.hashing import HashEmbedder
from lossless.memory.message_index import DEFAULT_CAP, UNCAPPED, ChunkCap, VectorBuilder
from lossless.ports import SearchVectorStore
from lossless.transcripts import Entry, ReadContext, reader_for

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"
#: Named sets of sessions (glob under the corpus, format): the Claude Code sessions of the entireio CLI (7 files,
#: 5,069 messages, as ``lcm import`` stores them), and a pi coding-agent session (another agent's shape).
SETS = [
    ("entireio-cli", "entireio-cli/*/*/*/full.jsonl", "claude-code"),
    ("pi-mono", "badlogic-pi-mono/large-session.jsonl", "pi"),
]


class Counting:
    """An embedder that counts the texts and characters it is handed, then asks the model it wraps."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.texts = self.chars = 0

    @property
    def model(self) -> str:
        return str(self.inner.model)

    @property
    def dimensions(self) -> int:
        return int(self.inner.dimensions)

    @property
    def max_chars(self) -> int:
        return int(self.inner.max_chars)

    async def embed(self, texts: Sequence[str], *, task: Any = "passage") -> list[list[float]]:
        self.texts += len(texts)
        self.chars += sum(len(t) for t in texts)
        vectors: list[list[float]] = await self.inner.embed(texts, task=task)
        return vectors


def sessions(pattern: str, fmt: str) -> dict[str, list[Message]]:
    """Each file's messages, by its path, read with the product's transcript reader."""
    out: dict[str, list[Message]] = {}
    for path in sorted(CORPUS.glob(pattern)):
        with path.open("rb") as stream:
            entries = reader_for(fmt).read(stream, ReadContext(str(path)))
            out[str(path.relative_to(CORPUS))] = [e.message for e in entries if isinstance(e, Entry)]
    return out


Built = tuple[int, float, Counting]


async def build(stored: dict[str, list[Message]], embedder: Any, cap: ChunkCap) -> Built:
    """Store the sessions in a fresh SQLite store and build their vectors: (messages, seconds, counts)."""
    built, _ = await build_and_upgrade(stored, embedder, cap, upgrade=False)
    return built


async def build_and_upgrade(
    stored: dict[str, list[Message]], embedder: Any, cap: ChunkCap, *, upgrade: bool = True
) -> tuple[Built, Built | None]:
    """:func:`build`, then (``upgrade``) the product's build in the same store: its (messages, seconds, counts)."""
    with tempfile.TemporaryDirectory() as folder:
        engine = await ContextEngine.open(f"sqlite:///{folder}/build.db")
        try:
            for session, messages in stored.items():
                await engine.ingest_batch(session, messages)
            assert isinstance(engine.store, SearchVectorStore)
            runs: list[Built] = []
            for step_cap in (cap, DEFAULT_CAP) if upgrade else (cap,):
                counting = Counting(embedder)
                builder = VectorBuilder(engine.store, counting, cap=step_cap)
                started = time.perf_counter()
                written = await builder.run()
                runs.append((written, time.perf_counter() - started, counting))
            return runs[0], runs[1] if upgrade else None
        finally:
            await engine.dispose()


def model(name: str) -> Any:
    if name == "hash":
        return HashEmbedder(384, max_chars=1500)
    from lossless.providers.embeddings import E5Embedder, LocalEmbedder

    return E5Embedder() if name == "e5" else LocalEmbedder()


async def run(sample: int, embedder_name: str, names: Sequence[str], capped_first: bool) -> list[Figure]:
    figures: list[Figure] = []
    embedder: Any = model(embedder_name)
    try:
        await embedder.embed(["warm up"])
    except MissingDependencyError as exc:  # no model extra: the text counts only
        print(f"{exc}: the build throughput is left out", file=sys.stderr)
        embedder = None
    for name, pattern, fmt in [s for s in SETS if s[0] in names]:
        stored = sessions(pattern, fmt)
        count = sum(len(m) for m in stored.values())
        size = embedder.max_chars if embedder is not None else 1500
        _, fresh_s, whole_capped = await build(stored, HashEmbedder(384, max_chars=size), DEFAULT_CAP)
        (_, _, whole_all), upgraded = await build_and_upgrade(stored, HashEmbedder(384, max_chars=size), UNCAPPED)
        assert upgraded is not None
        figures.append(
            Figure(
                f"{name}: texts embedded (all {count:,} msgs)",
                whole_capped.texts,
                "txt",
                baseline=whole_all.texts,
                note=f"characters {whole_capped.chars:,} against {whole_all.chars:,} uncapped "
                f"(ratio {whole_capped.chars / max(whole_all.chars, 1):.2f})",
            )
        )
        figures.append(
            Figure(
                f"{name}: texts an upgrade from format 3 embeds (all {count:,} msgs)",
                upgraded[2].texts,
                "txt",
                baseline=whole_capped.texts,
                note=f"against a fresh build's, on {upgraded[0]:,} items (the rest copied); characters "
                f"{upgraded[2].chars:,} against {whole_capped.chars:,}; {upgraded[1]:.1f} s against {fresh_s:.1f} s "
                "with the instant embedder (the copying's own cost)",
            )
        )
        if embedder is None:
            continue
        each = -(-sample // len(stored))  # the opening of every session of the set
        head = {session: messages[:each] for session, messages in stored.items()}
        if capped_first:
            done_capped, seconds_capped, counted_capped = await build(head, embedder, DEFAULT_CAP)
            (done_all, seconds_all, counted_all), upgrade = await build_and_upgrade(head, embedder, UNCAPPED)
        else:
            (done_all, seconds_all, counted_all), upgrade = await build_and_upgrade(head, embedder, UNCAPPED)
            done_capped, seconds_capped, counted_capped = await build(head, embedder, DEFAULT_CAP)
        assert upgrade is not None
        rate_all, rate_capped = done_all / seconds_all, done_capped / seconds_capped
        figures.append(
            Figure(
                f"{name}: build msg/s ({done_capped} msgs)",
                rate_capped,
                "m/s",
                baseline=rate_all,
                note=f"{embedder.model}; texts embedded {counted_capped.texts:,} capped, {counted_all.texts:,} "
                f"uncapped; {seconds_capped:.1f} s against {seconds_all:.1f} s",
            )
        )
        figures.append(
            Figure(
                f"{name}: upgrade from format 3, s ({upgrade[0]} msgs)",
                upgrade[1],
                "s",
                baseline=seconds_capped,
                note=f"{embedder.model}; against a fresh build's {seconds_capped:.1f} s; texts embedded "
                f"{upgrade[2].texts:,} against {counted_capped.texts:,}",
            )
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="28 messages for the model's build")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON to OUT")
    parser.add_argument("--messages", type=int, help="messages per set for the model's build (default 350)")
    parser.add_argument("--embedder", choices=("e5", "local", "hash"), default="e5")
    parser.add_argument("--sets", default=",".join(s[0] for s in SETS), help="which session sets, comma-separated")
    parser.add_argument("--capped-first", action="store_true", help="build capped, then uncapped (to bracket load)")
    args = parser.parse_args()
    sample = args.messages or (28 if args.quick else 350)
    if not CORPUS.is_dir():  # a checkout without ../shared: nothing to measure (run_all goes on)
        print(f"index_build: skipped, the corpus is not at {CORPUS}")
        return
    names = [n.strip() for n in args.sets.split(",") if n.strip()]
    figures = anyio.run(run, sample, args.embedder, names, args.capped_first)
    report("index_build", figures, args.json)
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
