"""grep over a large store: indexed search against a naive scan of the same rows, in the same run.

The store holds N messages (1,000,000; ``--quick``: 100,000) in 100 conversations of one agent:
synthetic prose from a 3,000-word vocabulary, where one message in 20 also carries one of 5,000
rare words (so each rare word is in about N/100,000 messages), and one message in 20,000 reports
``deadline exceeded for job j<number>``.  Every search runs as the agent's operator over all 100
conversations, newest first, limit 50.

* **full-text grep** — ``mode="full_text"`` for a rare word (a different one each run); the
  baseline is the naive way: ``content LIKE '%word%'`` newest first, limit 50, over the same rows.
* **selective regex grep** — ``deadline exceeded for job j\\d+`` (RE2, with the trigram
  pre-filter); the baseline scans every row newest first with Python's ``re`` until 50 matches.
* **ReDoS** — ``(a+)+$`` against one 1 MB message of ``a``s ending in ``!`` (catastrophic for a
  backtracking engine); the baseline is the same RE2 search of a 1 MB string in memory.

p50 of the runs is reported; the goals are the issue's bars (value goals, in ms).
"""

from __future__ import annotations

import random
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Figure, parse_args, report, timer
from lossless.ports import PreparedMessage
from lossless.records import Message
from lossless.retrieval import Caller, GrepOptions, Retriever
from lossless.retrieval.grep import compile_regex
from lossless.stores.sqlite.store import SQLiteStore

CONVERSATIONS = 100
BATCH = 5000
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def vocabulary(rng: random.Random) -> tuple[list[str], list[str]]:
    letters = "abcdefghijklmnopqrstuvwxyz"

    def word(low: int, high: int) -> str:
        return "".join(rng.choice(letters) for _ in range(rng.randint(low, high)))

    common = list(dict.fromkeys(word(3, 8) for _ in range(3500)))[:3000]
    rare = list(dict.fromkeys("q" + word(6, 9) + "z" for _ in range(6000)))[:5000]
    return common, rare


def texts(count: int, rng: random.Random, common: list[str], rare: list[str], first: int) -> list[str]:
    out = []
    for i in range(count):
        words = rng.choices(common, k=rng.randint(15, 45))
        if rng.random() < 0.05:
            words.insert(rng.randrange(len(words)), rng.choice(rare))
        if (first + i) % 20_000 == 7:
            words += ["deadline", "exceeded", "for", "job", f"j{rng.randint(100, 99999)}"]
        out.append(" ".join(words))
    return out


async def build(path: Path, count: int) -> tuple[SQLiteStore, list[int], list[str], float]:
    rng = random.Random(5)
    common, rare = vocabulary(rng)
    store = await SQLiteStore.open(path)
    ids = []
    for c in range(CONVERSATIONS):
        conv = await store.get_or_create_conversation(agent_id="bench", session_id=f"s{c}")
        ids.append(conv.id)
    per = count // CONVERSATIONS
    with timer() as elapsed:
        for c, conv_id in enumerate(ids):
            body = texts(per, rng, common, rare, c * per)
            for start in range(0, per, BATCH):
                chunk = body[start : start + BATCH]
                prepared = [
                    PreparedMessage(
                        Message("user" if k % 2 else "assistant", text),
                        len(text) // 4,
                        T0 + timedelta(seconds=c * per + start + k),
                    )
                    for k, text in enumerate(chunk)
                ]
                await store.append_messages(conv_id, prepared)
        await store.wait_indexed()
    return store, ids, rare, elapsed()


def p50(values: list[float]) -> float:
    return statistics.median(values)


async def main() -> None:
    args = parse_args(__doc__ or "")
    count = 100_000 if args.quick else 1_000_000
    runs = 15 if args.quick else 25
    baseline_runs = 3
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        store, _, rare, build_s = await build(db, count)
        print(f"built {count:,} messages in {CONVERSATIONS} conversations, indexed, in {build_s:.1f} s", flush=True)
        retriever = Retriever(store)
        operator = Caller("bench")
        rng = random.Random(11)
        words = rng.sample(rare, runs)

        # -- full text
        timings, found = [], 0
        for word in words:
            start = time.perf_counter()
            result = await retriever.grep(operator, GrepOptions(word, mode="full_text"), all_conversations=True)
            timings.append((time.perf_counter() - start) * 1000)
            found += len(result.hits)
        raw = sqlite3.connect(db)
        baseline = []
        for word in words[:baseline_runs]:
            start = time.perf_counter()
            raw.execute(
                "SELECT message_id, content FROM messages WHERE content LIKE ? ORDER BY message_id DESC LIMIT 50",
                (f"%{word}%",),
            ).fetchall()
            baseline.append((time.perf_counter() - start) * 1000)
        figures.append(
            Figure(
                f"full-text grep p50 ({count:,} msgs)",
                p50(timings),
                "ms",
                baseline=p50(baseline),
                goal=20,
                goal_op="<=",
                goal_on="value",
                note=f"{found / len(words):.1f} hits per query; {p50(baseline) / p50(timings):,.0f}x faster than the "
                "baseline: LIKE scan newest first, limit 50",
            )
        )

        # -- selective regex
        pattern = r"deadline exceeded for job j\d+"
        timings, hits = [], 0
        for _ in range(runs):
            start = time.perf_counter()
            result = await retriever.grep(operator, GrepOptions(pattern, scope="messages"), all_conversations=True)
            timings.append((time.perf_counter() - start) * 1000)
            hits = len(result.hits)
        compiled = re.compile(pattern)
        baseline = []
        for _ in range(baseline_runs):
            start = time.perf_counter()
            matched = 0
            for (content,) in raw.execute("SELECT content FROM messages ORDER BY message_id DESC"):
                if compiled.search(content):
                    matched += 1
                    if matched == 50:
                        break
            baseline.append((time.perf_counter() - start) * 1000)
        figures.append(
            Figure(
                f"selective regex grep p50 ({count:,} msgs)",
                p50(timings),
                "ms",
                baseline=p50(baseline),
                goal=100,
                goal_op="<=",
                goal_on="value",
                note=f"{hits} hits; {p50(baseline) / p50(timings):,.0f}x faster than the baseline: Python re over "
                "every row newest first until 50 matches",
            )
        )
        raw.close()

        # -- ReDoS
        evil = await store.get_or_create_conversation(agent_id="bench", session_id="evil")
        await store.append_messages(evil.id, [PreparedMessage(Message.user("a" * 1_000_000 + "!"), 250_000, T0)])
        start = time.perf_counter()
        result = await retriever.grep(operator, GrepOptions("(a+)+$"), conversation_id=evil.id, all_conversations=True)
        redos = (time.perf_counter() - start) * 1000
        assert not result.hits
        compiled_re2, _ = compile_regex("(a+)+$")
        start = time.perf_counter()
        compiled_re2.search("a" * 1_000_000 + "!")
        in_memory = (time.perf_counter() - start) * 1000
        figures.append(
            Figure(
                "ReDoS (a+)+$ vs 1 MB message",
                redos,
                "ms",
                baseline=in_memory,
                goal=1000,
                goal_op="<=",
                goal_on="value",
                note="baseline: the same RE2 search of a 1 MB string in memory",
            )
        )
        await store.close()
    report("retrieval", figures, args.json)


if __name__ == "__main__":
    anyio.run(main)
