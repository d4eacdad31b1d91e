"""Row-level SQL for retrieval: searches over the companion index, DAG lookups, and delegation grants.

Invariants:

* **Complete.**  A search reads the index (rows up to its watermark, attached
  as ``idx`` on reader connections) *and* the rows above the watermark, read
  in the same snapshot, so a row committed before the call is never missed.
  For a word query those newer rows are matched exactly by loading them into a
  connection-private in-memory FTS5 table with the same tokenizer and the same indexed text
  (:func:`lossless.stores.sqlite.index.word_text` of the source).
* **No user text in SQL.**  FTS5 expressions arrive already built from quoted
  terms (see :mod:`lossless.retrieval.query`) and are bound as parameters, as
  are conversation ids (one JSON array) and times.
* Functions take a connection inside the caller's transaction and open none.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from lossless.errors import InputError
from lossless.ports import SearchRequest, SearchRow
from lossless.records import Grant, format_timestamp
from lossless.stores.rows import GRANT_COLUMNS
from lossless.stores.sqlite.index import word_text
from lossless.stores.sqlite.statements import chunks, grant_from_row, grant_row, timestamp

_PENDING = "lcm_pending_words"


def _watermark(conn: sqlite3.Connection, source: str) -> int | None:
    """The index's watermark for ``source``; None when no index is attached to this connection."""
    names = {row[1] for row in conn.execute("PRAGMA database_list")}
    if "idx" not in names:
        return None
    row = conn.execute("SELECT watermark FROM idx.index_state WHERE source = ?", (source,)).fetchone()
    return 0 if row is None else int(row[0])


def _shape(request: SearchRequest) -> tuple[str, str, str, str, str]:
    """(table, key column, selected columns, time-from column, time-to column) for the request's scope."""
    if request.scope == "messages":
        return (
            "messages",
            "message_id",
            "t.message_id, t.message_id, t.conversation_id, t.created_at, t.content, t.role, NULL, NULL",
            "t.created_at",
            "t.created_at",
        )
    return (
        "summaries",
        "summary_rowid",
        "t.summary_rowid, t.summary_id, t.conversation_id, coalesce(t.latest_at, t.created_at), t.content, "
        "NULL, t.kind, t.depth",
        "coalesce(t.latest_at, t.created_at)",
        "coalesce(t.earliest_at, t.created_at)",
    )


def _filters(request: SearchRequest, time_from: str, time_to: str) -> tuple[str, list[Any]]:
    clauses = ["t.conversation_id IN (SELECT value FROM json_each(?))"]
    params: list[Any] = [json.dumps(list(request.conversation_ids))]
    if request.since is not None:
        clauses.append(f"{time_from} >= ?")
        params.append(format_timestamp(request.since))
    if request.before is not None:
        clauses.append(f"{time_to} < ?")
        params.append(format_timestamp(request.before))
    return " AND ".join(clauses), params


def _row(scope: str, values: Sequence[Any], rank: float | None = None) -> SearchRow:
    created = timestamp(values[3])
    assert created is not None
    return SearchRow(
        scope=scope,  # type: ignore[arg-type]
        key=values[0],
        ref=values[1],
        conversation_id=values[2],
        created_at=created,
        content=values[4],
        role=values[5],
        kind=values[6],
        depth=values[7],
        rank=rank,
    )


def search(conn: sqlite3.Connection, request: SearchRequest) -> list[SearchRow]:
    """One page of candidates (see :meth:`lossless.ports.Store.search`)."""
    if not request.conversation_ids or request.limit < 1:
        return []
    if request.order == "relevance" and request.words is None:
        raise InputError("relevance order needs a word query")
    table, key, columns, time_from, time_to = _shape(request)
    where, params = _filters(request, time_from, time_to)
    mark = _watermark(conn, request.scope)
    indexed_top = 0 if mark is None else mark
    rows: list[SearchRow] = []

    # 1. Rows above the watermark: not in the index yet, few (the indexer keeps up within moments).
    first_page = request.order == "recency" or request.offset == 0
    if first_page:
        upper = request.below if request.order == "recency" and request.below is not None else None
        # The unary + keeps the planner on the primary-key range (few rows) rather than the
        # conversation index (every row of every conversation in reach) before ANALYZE has run.
        pending_where = where.replace("t.conversation_id IN", "+t.conversation_id IN", 1)
        pending_sql = f"SELECT {columns} FROM {table} t WHERE t.{key} > ? AND {pending_where}"
        pending_params: list[Any] = [indexed_top, *params]
        if upper is not None:
            pending_sql += f" AND t.{key} < ?"
            pending_params.append(upper)
        pending_sql += f" ORDER BY t.{key} DESC"
        pending = conn.execute(pending_sql, pending_params).fetchall()
        if request.words is not None and pending:
            words = word_text(request.scope)
            keep = _match_pending(conn, request.words, [(r[0], words(r[4])) for r in pending])
            pending = [r for r in pending if r[0] in keep]
        if request.order == "recency":
            pending = pending[: request.limit]
        rows += [_row(request.scope, r) for r in pending]
        if request.order == "recency" and len(rows) >= request.limit:
            return rows

    # 2. Indexed rows.
    if mark is None or indexed_top == 0:
        return rows
    upper = indexed_top + 1
    if request.order == "recency" and request.below is not None:
        upper = min(upper, request.below)
    if request.words is not None or request.trigrams is not None:
        index_table = f"{request.scope}_fts" if request.words is not None else f"{request.scope}_trigram"
        expression = request.words if request.words is not None else request.trigrams
        if request.order == "relevance":
            sql = (
                f"SELECT {columns}, f.rank FROM idx.{index_table} f JOIN {table} t ON t.{key} = f.rowid "
                f"WHERE f.{index_table} MATCH ? AND f.rowid < ? AND {where} ORDER BY f.rank LIMIT ? OFFSET ?"
            )
            found = conn.execute(sql, [expression, upper, *params, request.limit, request.offset]).fetchall()
            return rows + [_row(request.scope, r[:8], r[8]) for r in found]
        sql = (
            f"SELECT {columns} FROM idx.{index_table} f JOIN {table} t ON t.{key} = f.rowid "
            f"WHERE f.{index_table} MATCH ? AND f.rowid < ? AND {where} ORDER BY f.rowid DESC LIMIT ?"
        )
        found = conn.execute(sql, [expression, upper, *params, request.limit - len(rows)]).fetchall()
    else:
        sql = f"SELECT {columns} FROM {table} t WHERE t.{key} < ? AND {where} ORDER BY t.{key} DESC LIMIT ?"
        found = conn.execute(sql, [upper, *params, request.limit - len(rows)]).fetchall()
    return rows + [_row(request.scope, r) for r in found]


def _match_pending(conn: sqlite3.Connection, expression: str, rows: list[tuple[int, str]]) -> set[int]:
    """Which of ``rows`` match ``expression``, using a private in-memory index with the word tokenizer."""
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_PENDING} USING fts5("
        "content, tokenize='porter unicode61 remove_diacritics 2')"
    )
    conn.execute(f"DELETE FROM temp.{_PENDING}")
    try:
        conn.executemany(f"INSERT INTO temp.{_PENDING}(rowid, content) VALUES (?, ?)", rows)
        return {
            r[0] for r in conn.execute(f"SELECT rowid FROM temp.{_PENDING} WHERE {_PENDING} MATCH ?", (expression,))
        }
    finally:
        conn.execute(f"DELETE FROM temp.{_PENDING}")


# ---------------------------------------------------------------------- the DAG


def summary_messages(conn: sqlite3.Connection, summary_ids: Sequence[str]) -> dict[str, tuple[int, ...]]:
    found: dict[str, list[int]] = {}
    for chunk in chunks(list(dict.fromkeys(summary_ids))):
        for summary_id, message_id in conn.execute(
            "SELECT summary_id, message_id FROM summary_messages "
            f"WHERE summary_id IN ({','.join('?' * len(chunk))}) ORDER BY summary_id, ordinal",
            tuple(chunk),
        ):
            found.setdefault(summary_id, []).append(message_id)
    return {k: tuple(v) for k, v in found.items()}


def summary_children(conn: sqlite3.Connection, summary_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
    found: dict[str, list[str]] = {}
    for chunk in chunks(list(dict.fromkeys(summary_ids))):
        for parent, child in conn.execute(
            "SELECT sp.parent_summary_id, sp.summary_id FROM summary_parents sp "
            "JOIN summaries s ON s.summary_id = sp.summary_id "
            f"WHERE sp.parent_summary_id IN ({','.join('?' * len(chunk))}) ORDER BY sp.parent_summary_id, "
            "s.summary_rowid",
            tuple(chunk),
        ):
            found.setdefault(parent, []).append(child)
    return {k: tuple(v) for k, v in found.items()}


def conversation_links(conn: sqlite3.Connection, agent_id: str) -> list[tuple[int, int | None, str | None]]:
    return [
        (r[0], r[1], r[2])
        for r in conn.execute(
            "SELECT conversation_id, parent_conversation_id, session_key FROM conversations WHERE agent_id = ? "
            "ORDER BY conversation_id",
            (agent_id,),
        )
    ]


# ---------------------------------------------------------------------- grants


def insert_grant(conn: sqlite3.Connection, grant: Grant) -> None:
    if conn.execute("SELECT 1 FROM expansion_grants WHERE grant_id = ?", (grant.id,)).fetchone():
        raise InputError(f"grant {grant.id!r} already exists; make a new id")
    conn.execute(
        f"INSERT INTO expansion_grants ({GRANT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        grant_row(grant),
    )


def select_grant(conn: sqlite3.Connection, grant_id: str) -> Grant | None:
    row = conn.execute(f"SELECT {GRANT_COLUMNS} FROM expansion_grants WHERE grant_id = ?", (grant_id,)).fetchone()
    return None if row is None else grant_from_row(row)


def charge(conn: sqlite3.Connection, grant_id: str, tokens: int, now: datetime) -> Grant | None:
    cursor = conn.execute(
        "UPDATE expansion_grants SET tokens_used = min(token_cap, tokens_used + ?) "
        "WHERE grant_id = ? AND revoked_at IS NULL AND expires_at > ?",
        (max(0, tokens), grant_id, format_timestamp(now)),
    )
    if cursor.rowcount == 0:
        return None
    return select_grant(conn, grant_id)


def reserve(conn: sqlite3.Connection, grant_id: str, tokens: int, now: datetime) -> int | None:
    """Take up to ``tokens`` of a usable grant's remaining cap (the caller's write transaction makes it atomic)."""
    row = conn.execute(
        "SELECT token_cap - tokens_used FROM expansion_grants "
        "WHERE grant_id = ? AND revoked_at IS NULL AND expires_at > ?",
        (grant_id, format_timestamp(now)),
    ).fetchone()
    if row is None:
        return None
    taken = max(0, min(int(tokens), int(row[0])))
    if taken:
        conn.execute(
            "UPDATE expansion_grants SET tokens_used = tokens_used + ? "
            "WHERE grant_id = ? AND tokens_used + ? <= token_cap",
            (taken, grant_id, taken),
        )
    return taken


def release(conn: sqlite3.Connection, grant_id: str, tokens: int) -> None:
    conn.execute(
        "UPDATE expansion_grants SET tokens_used = max(0, tokens_used - ?) WHERE grant_id = ?",
        (max(0, int(tokens)), grant_id),
    )


def revoke(conn: sqlite3.Connection, grant_id: str, reason: str, now: datetime) -> bool:
    cursor = conn.execute(
        "UPDATE expansion_grants SET revoked_at = ?, revoke_reason = ? WHERE grant_id = ? AND revoked_at IS NULL",
        (format_timestamp(now), reason, grant_id),
    )
    return cursor.rowcount > 0


def sweep(conn: sqlite3.Connection, now: datetime) -> int:
    stamp = format_timestamp(now)
    cursor = conn.execute(
        "UPDATE expansion_grants SET revoked_at = ?, revoke_reason = 'expired' "
        "WHERE revoked_at IS NULL AND expires_at <= ?",
        (stamp, stamp),
    )
    return cursor.rowcount
