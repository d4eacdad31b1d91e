"""Ingest throughput: the engine against raw ``sqlite3.executemany`` of the same rows, in the same run.

Messages are real agent messages (the shared corpus, else the bundled sample session), repeated with
fresh event keys up to the target count.  Baselines, all writing the very rows the engine writes
(message, part and context-item rows, built before timing starts), 1,000 messages per transaction:

* **raw, same schema** — ``executemany`` into the store's own tables;
* **raw + FTS in the transaction** — the same, plus the classic design: porter and trigram FTS5
  tables updated by triggers inside each transaction.

Engine figures:

* **batched ingest** — ``engine.ingest_batch`` in batches of 1,000 (validation, token counting,
  event-key dedup, parts, context items); *acknowledged* is when the call returns (durable),
  *searchable* is when the background indexer has indexed every message as well;
* **durable single-message ingest** — ``engine.ingest`` one message per call, each its own committed
  transaction (``synchronous=normal``: survives a crash of the process), and with ``synchronous=full``
  (also survives power loss);
* a raw insert into a bare table, for context.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import CORPUS, SAMPLE, Figure, parse_args, report, timer
from lossless import ContextEngine, Message
from lossless.records import format_timestamp, utcnow
from lossless.stores.rows import PART_COLUMNS, dump_json, part_to_row
from lossless.tokens import EstimatingCounter
from lossless.transcripts import Entry, ReadContext, detect_format, reader_for

BATCH = 1000


def load_messages() -> list[Message]:
    files = sorted(CORPUS.rglob("*.jsonl")) + sorted(CORPUS.rglob("*.traj")) if CORPUS.is_dir() else [SAMPLE]
    out: list[Message] = []
    for path in files:
        fmt = detect_format(path)
        if fmt is None:
            continue
        with path.open("rb") as stream:
            out += [e.message for e in reader_for(fmt).read(stream, ReadContext(str(path))) if isinstance(e, Entry)]
    return out


def realistic(count: int, pool: list[Message], tag: str) -> list[Message]:
    return [
        Message(m.role, m.content, m.parts, created_at=m.created_at, event_key=f"{tag}-{i}", metadata=m.metadata)
        for i, m in ((i, pool[i % len(pool)]) for i in range(count))
    ]


Rows = list[tuple[object, ...]]


def raw_rows(messages: list[Message]) -> list[tuple[Rows, Rows, Rows]]:
    """The rows the engine writes, in batches, built before any timing starts."""
    counter = EstimatingCounter()
    now = format_timestamp(utcnow())
    batches = []
    for start in range(0, len(messages), BATCH):
        msgs, parts, items = [], [], []
        for offset, m in enumerate(messages[start : start + BATCH]):
            mid = start + offset + 1
            created = format_timestamp(m.created_at or utcnow())
            msgs.append(
                (mid, 1, mid, m.role, m.content, counter.count(m.content), created, m.event_key, dump_json(m.metadata))
            )
            only = len(m.parts) == 1
            parts += [
                (mid * 65536 + o, mid, o, *part_to_row(p, m.content, only_part=only)) for o, p in enumerate(m.parts)
            ]
            items.append((1, mid, mid, now))
        batches.append((msgs, parts, items))
    return batches


FTS_SCHEMA = [
    "CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='message_id', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    "CREATE VIRTUAL TABLE messages_trigram USING fts5(content, content='messages', content_rowid='message_id', "
    "tokenize='trigram', detail=none)",
    "CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN "
    "INSERT INTO messages_fts(rowid, content) VALUES (new.message_id, new.content); "
    "INSERT INTO messages_trigram(rowid, content) VALUES (new.message_id, new.content); END",
]


def raw_insert(path: Path, batches: list[tuple[Rows, Rows, Rows]], *, schema: str) -> float:
    """Insert the rows with executemany; ``schema`` is 'store', 'store+fts' or 'bare'."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = NORMAL")
    if schema == "bare":
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(
            "CREATE TABLE messages (message_id INTEGER PRIMARY KEY, conversation_id INTEGER, seq INTEGER, role TEXT, "
            "content TEXT, token_count INTEGER, created_at TEXT, event_key TEXT, metadata TEXT)"
        )
    else:
        conn.execute(
            "INSERT INTO conversations (agent_id, session_id, created_at, updated_at) VALUES ('main', 'raw', 'x', 'x')"
        )
        if schema == "store+fts":
            for statement in FTS_SCHEMA:
                conn.execute(statement)
    part_sql = (
        f"INSERT INTO message_parts (part_id, message_id, ordinal, {', '.join(PART_COLUMNS)}) "
        f"VALUES ({', '.join('?' * (len(PART_COLUMNS) + 3))})"
    )
    total = sum(len(b[0]) for b in batches)
    with timer() as elapsed:
        for msgs, parts, items in batches:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", msgs)
            if schema != "bare":
                conn.executemany(part_sql, parts)
                conn.executemany(
                    "INSERT INTO context_items (conversation_id, ordinal, item_type, message_id, created_at) "
                    "VALUES (?, ?, 'message', ?, ?)",
                    items,
                )
            conn.execute("COMMIT")
    conn.close()
    return total / elapsed()


async def engine_batched(path: Path, messages: list[Message]) -> tuple[float, float]:
    """(acknowledged msg/s, searchable msg/s)."""
    async with await ContextEngine.open(f"sqlite:///{path}") as engine:
        with timer() as elapsed:
            for start in range(0, len(messages), BATCH):
                await engine.ingest_batch("batched", messages[start : start + BATCH])
            acknowledged = elapsed()
            await engine.store.wait_indexed()
            searchable = elapsed()
        return len(messages) / acknowledged, len(messages) / searchable


async def engine_single(path: Path, messages: list[Message], synchronous: str) -> tuple[float, float]:
    """(acknowledged msg/s, searchable msg/s) for one message per call."""
    async with await ContextEngine.open(f"sqlite:///{path}", sqlite_synchronous=synchronous) as engine:
        await engine.ingest("single", messages[0])  # create the conversation outside the timing
        with timer() as elapsed:
            for message in messages[1:]:
                await engine.ingest("single", message)
            acknowledged = elapsed()
            await engine.store.wait_indexed()
            searchable = elapsed()
        return (len(messages) - 1) / acknowledged, (len(messages) - 1) / searchable


async def main() -> None:
    args = parse_args(__doc__ or "")
    total = 10_000 if args.quick else 100_000
    single_total = 5_000 if args.quick else 100_000
    full_total = 1_000 if args.quick else 5_000
    pool = load_messages()
    batched = realistic(total, pool, "b")
    singles = realistic(single_total, pool, "s")
    mean_chars = sum(len(m.content) for m in batched) / len(batched)
    repeats = 3
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows = raw_rows(batched)
        runs: dict[str, list[float]] = {}

        def keep(name: str, value: float) -> None:
            runs.setdefault(name, []).append(value)

        for attempt in range(repeats):  # best of three: this is a shared, noisy 2-core machine
            run_dir = root / str(attempt)
            run_dir.mkdir()
            for name in ("raw.db", "fts.db"):  # the baselines get the store's own schema
                async with await ContextEngine.open(f"sqlite:///{run_dir / name}"):
                    pass
            keep("raw", raw_insert(run_dir / "raw.db", rows, schema="store"))
            keep("raw_fts", raw_insert(run_dir / "fts.db", rows, schema="store+fts"))
            keep("bare", raw_insert(run_dir / "bare.db", rows, schema="bare"))
            acked_one, searchable_one = await engine_batched(run_dir / "batched.db", batched)
            keep("acked", acked_one)
            keep("searchable", searchable_one)
            single_one, single_searchable_one = await engine_single(run_dir / "single.db", singles, "normal")
            keep("single", single_one)
            keep("single_searchable", single_searchable_one)
            keep("full", (await engine_single(run_dir / "full.db", realistic(full_total, pool, "f"), "full"))[0])
        raw, raw_fts, bare, acked, searchable, single, single_searchable, full = (
            max(runs[k])
            for k in ("raw", "raw_fts", "bare", "acked", "searchable", "single", "single_searchable", "full")
        )
    note = (
        f"{total:,} messages from {len(pool):,} real ones, {mean_chars:,.0f} chars each on average; "
        f"every figure is the best of {repeats} runs"
    )
    figures = [
        Figure("raw executemany, store schema", raw, "msg/s", note=note),
        Figure("raw executemany + FTS in the transaction", raw_fts, "msg/s"),
        Figure("raw executemany, bare table", bare, "msg/s", note="context only: no parts, no indexes"),
        Figure("batched ingest, acknowledged (vs raw)", acked, "msg/s", baseline=raw),
        Figure(
            "batched ingest, searchable (vs raw + FTS)",
            searchable,
            "msg/s",
            baseline=raw_fts,
            goal=0.5,
            goal_op=">=",
            note="until the background indexer has indexed every message",
        ),
        Figure(
            "single-message ingest, durable (sync=normal)",
            single,
            "msg/s",
            goal=5000,
            goal_op=">=",
            goal_on="value",
            note=f"{single_total:,} calls, each its own committed transaction; survives kill -9",
        ),
        Figure("single-message ingest, searchable", single_searchable, "msg/s", baseline=raw_fts),
        Figure(
            "single-message ingest, durable (sync=full)",
            full,
            "msg/s",
            note=f"{full_total:,} calls; fsync per commit, survives power loss",
        ),
    ]
    report("ingest", figures, args.json)


if __name__ == "__main__":
    anyio.run(main)
