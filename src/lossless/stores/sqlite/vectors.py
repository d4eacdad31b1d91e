"""SQL of the search vectors on SQLite (the :class:`~lossless.ports.SearchVectorStore` contract).

Vectors of messages live in ``message_vectors``, of summaries in ``summary_vectors``: one row per
(item, model, chunk), a little-endian float32 blob; a blank text is recorded as chunk 0 with no
vector (``dim = 0``) so it counts as indexed.  An item is indexed for a model when its chunk 0
row exists; the build finds the rest with an anti-join on the primary key, walking the item rows
in order from a cursor (so a pass over a large store never rescans what it already covered).
SQLite has no vector index: searches load a conversation's vectors once and keep them in memory
until :func:`states` says rows were added or removed.  The counts :func:`states` reads are kept per
(source, model, conversation) in ``vector_counts`` by triggers on the vector tables (so they follow
inserts, deletes and cascades), with a revision bumped by every change: one row read per conversation,
however many vectors it has.  An index format upgrade copies the rows of items whose embedded texts did
not change from the old format's name to the new one in SQL (:func:`copy`), never through Python.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from lossless.ports import ItemVectors, VectorSource, VectorState, VectorTodo
from lossless.stores.sqlite.statements import chunks

__all__ = ["copy", "drop", "load", "models", "put", "states", "todo", "totals"]

# (vector table, key column, item table, row column)
_TABLES = {
    "messages": ("message_vectors", "message_id", "messages", "message_id"),
    "summaries": ("summary_vectors", "summary_id", "summaries", "summary_rowid"),
}


def todo(conn: sqlite3.Connection, model: str, source: VectorSource, after: int, limit: int) -> list[VectorTodo]:
    vectors, key, items, row = _TABLES[source]
    found = conn.execute(
        f"SELECT i.{row}, i.{key}, i.conversation_id, i.content FROM {items} i "
        f"WHERE i.{row} > ? AND NOT EXISTS (SELECT 1 FROM {vectors} v "
        f"WHERE v.{key} = i.{key} AND v.model = ? AND v.chunk = 0) ORDER BY i.{row} LIMIT ?",
        (after, model, limit),
    ).fetchall()
    return [VectorTodo(r[0], r[1], r[2], r[3]) for r in found]


def put(conn: sqlite3.Connection, model: str, source: VectorSource, items: Sequence[ItemVectors]) -> int:
    vectors, key, item_table, _ = _TABLES[source]
    added = 0
    for item in items:
        exists = conn.execute(
            f"SELECT 1 FROM {item_table} WHERE {key} = ? AND conversation_id = ?", (item.key, item.conversation_id)
        ).fetchone()
        if exists is None:  # the item went meanwhile (its conversation was deleted): nothing to keep
            continue
        rows = [(item.key, model, n, item.conversation_id, len(v) // 4, v) for n, v in enumerate(item.vectors)]
        rows = rows or [(item.key, model, 0, item.conversation_id, 0, b"")]
        before = conn.total_changes
        conn.executemany(
            f"INSERT OR IGNORE INTO {vectors} ({key}, model, chunk, conversation_id, dim, vector) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        added += conn.total_changes > before
    return added


def copy(
    conn: sqlite3.Connection,
    source: VectorSource,
    from_model: str,
    to_model: str,
    items: Sequence[tuple[int | str, int]],
) -> list[int | str]:
    """Copy the rows of ``from_model`` to ``to_model`` for each ``(key, rows)`` whose ``from_model`` rows are all
    there (exactly ``rows`` of them: not an item half deleted); the keys of ``items`` that have ``to_model``
    vectors afterwards (copied here, or written before).  Rows already there are kept (``OR IGNORE``)."""
    vectors, key, _, _ = _TABLES[source]
    done: list[int | str] = []
    for part in chunks(list(items), 400):
        want = ", ".join("(?, ?)" for _ in part)
        pairs = tuple(v for pair in part for v in pair)
        conn.execute(
            f"WITH want(k, n) AS (VALUES {want}) "
            f"INSERT OR IGNORE INTO {vectors} ({key}, model, chunk, conversation_id, dim, vector) "
            f"SELECT v.{key}, ?, v.chunk, v.conversation_id, v.dim, v.vector FROM want w "
            f"JOIN {vectors} v ON v.{key} = w.k AND v.model = ? "
            f"WHERE (SELECT count(*) FROM {vectors} o WHERE o.{key} = w.k AND o.model = ?) = w.n",
            (*pairs, to_model, from_model, from_model),
        )
        done.extend(
            r[0]
            for r in conn.execute(
                f"WITH want(k, n) AS (VALUES {want}) SELECT w.k FROM want w WHERE EXISTS "
                f"(SELECT 1 FROM {vectors} v WHERE v.{key} = w.k AND v.model = ? AND v.chunk = 0)",
                (*pairs, to_model),
            )
        )
    return done


def states(
    conn: sqlite3.Connection, model: str, source: VectorSource, conversation_ids: Sequence[int]
) -> dict[int, VectorState]:
    out: dict[int, VectorState] = {}
    for chunk in chunks(list(dict.fromkeys(conversation_ids))):
        marks = ",".join("?" * len(chunk))
        if source == "messages":  # seq runs 1, 2, … per conversation: its maximum is the count, one index probe
            total_sql = (
                "SELECT conversation_id, (SELECT max(seq) FROM messages m WHERE m.conversation_id = c.conversation_id) "
            )
            total_sql += f"FROM conversations c WHERE conversation_id IN ({marks})"
        else:
            total_sql = "SELECT conversation_id, "
            total_sql += "(SELECT count(*) FROM summaries s WHERE s.conversation_id = c.conversation_id) "
            total_sql += f"FROM conversations c WHERE conversation_id IN ({marks})"
        # every conversation that exists has a total row (possibly 0 or NULL); vectors are counted by triggers
        totals = {r[0]: r[1] or 0 for r in conn.execute(total_sql, tuple(chunk)).fetchall()}
        counts = {
            r[0]: (int(r[1]), int(r[2]), int(r[3]))
            for r in conn.execute(
                "SELECT conversation_id, indexed, rows, revision FROM vector_counts "
                f"WHERE source = ? AND model = ? AND conversation_id IN ({marks})",
                (source, model, *chunk),
            )
        }
        for conversation_id in chunk:
            if conversation_id in totals:
                indexed, rows, revision = counts.get(conversation_id, (0, 0, 0))
                out[conversation_id] = VectorState(indexed, int(totals[conversation_id]), rows, revision)
    return out


def load(
    conn: sqlite3.Connection, model: str, source: VectorSource, conversation_id: int
) -> list[tuple[int | str, bytes]]:
    vectors, key, _, _ = _TABLES[source]
    found = conn.execute(
        f"SELECT {key}, vector FROM {vectors} WHERE model = ? AND conversation_id = ? AND dim > 0 "
        f"ORDER BY {key}, chunk",
        (model, conversation_id),
    ).fetchall()
    return [(r[0], r[1]) for r in found]


def totals(conn: sqlite3.Connection, model: str, source: VectorSource) -> VectorState:
    _, _, items, _ = _TABLES[source]
    total = conn.execute(f"SELECT count(*) FROM {items}").fetchone()[0]
    indexed, rows = conn.execute(
        "SELECT coalesce(sum(indexed), 0), coalesce(sum(rows), 0) FROM vector_counts WHERE source = ? AND model = ?",
        (source, model),
    ).fetchone()
    return VectorState(int(indexed), int(total), int(rows))


def models(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT DISTINCT model FROM vector_counts WHERE rows > 0 OR indexed > 0")]


def drop(conn: sqlite3.Connection, model_names: Sequence[str], limit: int) -> int:
    """Delete up to ``limit`` rows of these models, messages' first (the triggers count them down)."""
    deleted = 0
    for vectors, key, _, _ in _TABLES.values():
        for model in model_names:
            if deleted >= limit:
                return deleted
            done = conn.execute(
                f"DELETE FROM {vectors} WHERE ({key}, model, chunk) IN "
                f"(SELECT {key}, model, chunk FROM {vectors} WHERE model = ? LIMIT ?)",
                (model, limit - deleted),
            )
            deleted += max(0, done.rowcount)  # the statement's own rows, not the triggers' updates
    return deleted
