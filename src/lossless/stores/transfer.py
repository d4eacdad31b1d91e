"""Copy a whole store from SQLite to PostgreSQL (``lcm migrate``): streaming, resumable, verified.

Invariants:

* **Rows are copied as they are**, ids included (conversation, message, summary,
  memory, job and compaction-event ids), so every reference — lineage, context items, memory
  provenance, large-file ids quoted in summaries — stays valid; afterwards each
  identity sequence is moved past the highest copied id, so new rows never
  collide.  Columns are matched by name; a value is converted by the target
  column's type (SQLite's 0/1 → boolean, ISO text → timestamptz, …); generated
  columns (the word indexes) are computed by PostgreSQL.
* **Streaming**: rows are read in primary-key order in batches and written one
  batch per transaction, so memory stays flat whatever the store's size.
* **Resumable**: every insert is ``ON CONFLICT DO NOTHING``, and the big tables
  resume from the highest key already in the target, so an interrupted copy is
  finished by running the same command again; nothing is ever written twice.
* **Verified**: the result lists the row count of every table in source and
  target; :attr:`TransferResult.ok` is true only when they are equal.  (The CLI
  also runs the integrity checker on the target.)
* The source is only read (it is brought up to the current schema first, as
  opening it with this version would).  The large files' bytes are copied too,
  into the target's blob store, and each ``storage_uri`` is rewritten to point
  there.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import anyio.to_thread

from lossless.errors import InputError, StoreError
from lossless.ports import BlobStore

__all__ = ["TABLES", "TableCount", "TransferResult", "transfer_sqlite_to_postgres"]

#: Tables in copy order (references before referrers), with the integer key a resumed copy starts from.
TABLES: tuple[tuple[str, str | None], ...] = (
    ("conversations", "conversation_id"),
    ("messages", "message_id"),
    ("message_parts", "message_id"),
    ("summaries", "summary_rowid"),
    ("summary_messages", None),
    ("summary_parents", None),
    ("context_items", None),
    ("compaction_events", "event_id"),
    ("large_files", None),
    ("conversation_bootstrap_state", None),
    ("expansion_grants", None),
    ("memories", "memory_rowid"),
    ("memory_sources", "memory_rowid"),
    ("memory_vectors", "memory_rowid"),
    ("embedding_cache", None),
    ("memory_access", None),
    ("memory_mined", "message_id"),
    ("message_vectors", "message_id"),
    ("summary_vectors", None),
    ("jobs", "job_id"),
)

_BATCH = 2000

Progress = Callable[[str, int, int], Awaitable[None] | None]


@dataclass(frozen=True, slots=True)
class TableCount:
    table: str
    source: int
    target: int
    copied: int

    @property
    def ok(self) -> bool:
        return self.source == self.target


@dataclass(frozen=True, slots=True)
class TransferResult:
    """What a copy did: per-table counts, blobs copied, blobs missing from the source."""

    tables: tuple[TableCount, ...]
    blobs_copied: int = 0
    blobs_missing: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.tables) and not self.blobs_missing

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "tables": [
                {"table": t.table, "source": t.source, "target": t.target, "copied": t.copied} for t in self.tables
            ],
            "blobs_copied": self.blobs_copied,
            "blobs_missing": list(self.blobs_missing),
        }


def _convert(data_type: str) -> Callable[[Any], Any] | None:
    if data_type == "boolean":
        return lambda v: None if v is None else bool(v)
    if data_type.startswith("timestamp"):
        return lambda v: None if v is None else (v if isinstance(v, datetime) else datetime.fromisoformat(v))
    if data_type == "bytea":
        return lambda v: None if v is None else bytes(v)
    return None


async def transfer_sqlite_to_postgres(
    source_path: str,
    target_url: str,
    *,
    source_blobs: BlobStore | None = None,
    target_blobs: BlobStore | None = None,
    progress: Progress | None = None,
) -> TransferResult:
    """Copy the SQLite store at ``source_path`` into the (migrated) PostgreSQL database at ``target_url``."""
    import psycopg

    from lossless.stores.postgres.connection import nul_safe

    source = await anyio.to_thread.run_sync(_open_source, source_path)
    try:
        async with await psycopg.AsyncConnection.connect(target_url, autocommit=True) as target:
            await target.execute("SET TIME ZONE 'UTC'")
            nul_safe(target)  # text holding U+0000 is stored exactly as the backend itself stores it
            columns = await _target_columns(target)
            counts: list[TableCount] = []
            for table, key in TABLES:
                if table not in columns or not await anyio.to_thread.run_sync(_has_table, source, table):
                    continue
                copied = await _copy_table(source, target, table, key, columns[table], progress)
                counts.append(TableCount(table, 0, 0, copied))
            await _copy_parents(source, target)
            # pgvector's derived copy of the memory vectors (if any) misses the rows copied in here;
            # dropped, it is rebuilt from memory_vectors on the next search that needs it.
            await target.execute("DROP TABLE IF EXISTS memory_vector_ann")
            # Likewise pgvector's column of the search vectors: the next build pass adds and fills it again.
            for table in ("message_vectors", "summary_vectors"):
                await target.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS embedding")
            await _copy_meta(source, target)
            await _advance_identities(target)
            blobs_copied, missing = 0, list[str]()
            if source_blobs is not None and target_blobs is not None:
                blobs_copied, missing = await _copy_blobs(source, target, source_blobs, target_blobs, progress)
            verified = []
            for entry in counts:
                source_rows = await anyio.to_thread.run_sync(_count, source, entry.table)
                row = await (await target.execute(f"SELECT count(*) FROM {entry.table}")).fetchone()
                verified.append(TableCount(entry.table, source_rows, int(row[0]) if row else 0, entry.copied))
            return TransferResult(tuple(verified), blobs_copied, tuple(missing))
    except psycopg.Error as exc:
        raise StoreError(f"copying into PostgreSQL failed (run the same command again to resume): {exc}") from exc
    finally:
        source.close()


def _open_source(path: str) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise InputError(f"cannot read the SQLite database {path!r}: {exc}") from exc
    return conn


def _has_table(conn: sqlite3.Connection, table: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    return row is not None


def _count(conn: sqlite3.Connection, table: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


async def _target_columns(target: Any) -> dict[str, dict[str, str]]:
    """``{table: {column: data_type}}`` of the target's ordinary (not generated) columns."""
    rows = await (
        await target.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND is_generated = 'NEVER' ORDER BY table_name, ordinal_position"
        )
    ).fetchall()
    found: dict[str, dict[str, str]] = {}
    for table, column, data_type in rows:
        found.setdefault(str(table), {})[str(column)] = str(data_type)
    return found


async def _copy_table(
    source: sqlite3.Connection,
    target: Any,
    table: str,
    key: str | None,
    target_columns: dict[str, str],
    progress: Progress | None,
) -> int:
    source_columns = await anyio.to_thread.run_sync(
        lambda: [str(row[1]) for row in source.execute(f"PRAGMA table_info({table})")]
    )
    names = [c for c in source_columns if c in target_columns]
    if table == "conversations":  # parents are linked afterwards (a parent may come later in id order)
        names = [c for c in names if c != "parent_conversation_id"]
    converters = [_convert(target_columns[c]) for c in names]
    start: Any = None
    if key is not None:
        row = await (await target.execute(f"SELECT max({key}) FROM {table}")).fetchone()
        start = row[0] if row else None
    where = f" WHERE {key} >= ?" if key is not None and start is not None else ""
    order = f" ORDER BY {key}" if key is not None else ""
    params: tuple[Any, ...] = () if not where else (start,)
    remaining = await anyio.to_thread.run_sync(
        lambda: int(source.execute(f"SELECT count(*) FROM {table}{where}", params).fetchone()[0])
    )
    cursor = await anyio.to_thread.run_sync(
        lambda: source.execute(
            f"SELECT {', '.join(names)} FROM {table}{where}{order}",
            params,
        )
    )
    insert = (
        f"INSERT INTO {table} ({', '.join(names)}) OVERRIDING SYSTEM VALUE "
        f"VALUES ({', '.join(['%s'] * len(names))}) ON CONFLICT DO NOTHING"
    )
    copied = 0
    while True:
        batch: Sequence[Any] = await anyio.to_thread.run_sync(cursor.fetchmany, _BATCH)
        if not batch:
            break
        rows = [
            tuple(value if convert is None else convert(value) for value, convert in zip(row, converters, strict=True))
            for row in batch
        ]
        async with target.transaction(), target.cursor() as cur:
            await cur.executemany(insert, rows)
            copied += max(cur.rowcount, 0)  # rows actually inserted: a resumed run skips what is there
        if progress is not None:
            outcome = progress(table, copied, remaining)
            if outcome is not None:
                await outcome
    return copied


async def _copy_parents(source: sqlite3.Connection, target: Any) -> None:
    pairs = await anyio.to_thread.run_sync(
        lambda: source.execute(
            "SELECT conversation_id, parent_conversation_id FROM conversations WHERE parent_conversation_id IS NOT NULL"
        ).fetchall()
    )
    if pairs:
        async with target.transaction(), target.cursor() as cur:
            await cur.executemany(
                "UPDATE conversations SET parent_conversation_id = %s WHERE conversation_id = %s "
                "AND parent_conversation_id IS DISTINCT FROM %s",
                [(parent, child, parent) for child, parent in pairs],
            )


async def _copy_meta(source: sqlite3.Connection, target: Any) -> None:
    """Counters kept in ``lcm_meta`` (not the store's own id, nor SQLite's id floors)."""
    if not await anyio.to_thread.run_sync(_has_table, source, "lcm_meta"):
        return
    rows = await anyio.to_thread.run_sync(
        lambda: source.execute(
            "SELECT key, value FROM lcm_meta WHERE key <> 'store_id' AND key NOT LIKE '%floor'"
        ).fetchall()
    )
    async with target.transaction(), target.cursor() as cur:
        await cur.executemany(
            "INSERT INTO lcm_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            rows,
        )


async def _advance_identities(target: Any) -> None:
    """Move every identity sequence past the highest id now in its table."""
    rows = await (
        await target.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND is_identity = 'YES'"
        )
    ).fetchall()
    for table, column in rows:
        await target.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
            f"coalesce((SELECT max({column}) FROM {table}), 0) + 1, false)"
        )


async def _copy_blobs(
    source: sqlite3.Connection,
    target: Any,
    source_blobs: BlobStore,
    target_blobs: BlobStore,
    progress: Progress | None,
) -> tuple[int, list[str]]:
    rows = await anyio.to_thread.run_sync(
        lambda: source.execute(
            "SELECT file_id, conversation_id, storage_uri, content_hash FROM large_files ORDER BY file_id"
        ).fetchall()
    )
    copied, missing = 0, []
    for done, (file_id, conversation_id, uri, digest) in enumerate(rows, 1):
        # Always put: blob stores are write-once and deduplicated, so a resumed run writes nothing twice.
        try:
            data = await source_blobs.get(uri)
        except StoreError:
            missing.append(str(file_id))
            continue
        suffix = uri.rsplit(".", 1)[1] if "." in uri.rsplit("/", 1)[-1] else ""
        new_uri = await target_blobs.put(int(conversation_id), data, content_hash=str(digest), suffix=suffix)
        await target.execute("UPDATE large_files SET storage_uri = %s WHERE file_id = %s", (new_uri, file_id))
        copied += 1
        if progress is not None:
            outcome = progress("large file bytes", done, len(rows))
            if outcome is not None:
                await outcome
    return copied, missing
