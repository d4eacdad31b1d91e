"""SQL of the background-job queue on SQLite (the :class:`~lossless.ports.JobQueue` contract).

Every function runs inside one ``BEGIN IMMEDIATE`` write transaction of the store, which holds the
database write lock: a claim reads and updates the queue with no other writer in between, so two
workers (threads or processes) can never claim the same job, nor two jobs of one conversation.
(The PostgreSQL store does the same with ``SELECT … FOR UPDATE SKIP LOCKED``.)  Lease times are
epoch milliseconds from the caller's clock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from lossless.ports import Job
from lossless.records import JSONValue, format_timestamp
from lossless.stores.rows import dump_json, load_json

__all__ = ["claim", "enqueue", "finish", "list_jobs", "release", "renew"]

COLUMNS = (
    "job_id, kind, reason, requested_at, conversation_id, mode, target_tokens, state, attempts, lease_owner, "
    "lease_expires_ms, finished_at, result, error"
)


def job_from_row(row: Sequence[Any]) -> Job:
    return Job(
        id=row[0],
        kind=row[1],
        reason=row[2],
        requested_at=datetime.fromisoformat(row[3]),
        conversation_id=row[4],
        mode=row[5],
        target_tokens=row[6],
        state=row[7],
        attempts=row[8],
        lease_owner=row[9],
        lease_expires_ms=row[10],
        finished_at=None if row[11] is None else datetime.fromisoformat(row[11]),
        result=load_json(row[12]),
        error=row[13],
    )


def _get(conn: sqlite3.Connection, job_id: int) -> Job:
    return job_from_row(conn.execute(f"SELECT {COLUMNS} FROM jobs WHERE job_id = ?", (job_id,)).fetchone())


def enqueue(
    conn: sqlite3.Connection,
    kind: str,
    reason: str,
    conversation_id: int | None,
    mode: str | None,
    target_tokens: int | None,
    requested_at: datetime,
) -> Job:
    cursor = conn.execute(
        "INSERT INTO jobs (kind, reason, conversation_id, mode, target_tokens, requested_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (kind, reason, conversation_id, mode, target_tokens, format_timestamp(requested_at)),
    )
    if cursor.rowcount == 1 and cursor.lastrowid is not None:
        return _get(conn, cursor.lastrowid)
    row = conn.execute(
        "SELECT job_id FROM jobs WHERE kind = ? AND coalesce(conversation_id, 0) = coalesce(?, 0) AND state = 'queued'",
        (kind, conversation_id),
    ).fetchone()
    return _get(conn, row[0])


def claim(conn: sqlite3.Connection, owner: str, lease_ms: int, now_ms: int, max_attempts: int) -> Job | None:
    # Jobs whose lease ran out once too often are given up on.
    conn.execute(
        "UPDATE jobs SET state = 'failed', lease_owner = NULL, "
        "error = coalesce(error || '; ', '') || 'its worker stopped before finishing it ' || attempts || ' times' "
        "WHERE state = 'running' AND lease_expires_ms < ? AND attempts >= ?",
        (now_ms, max_attempts),
    )
    row = conn.execute(
        "SELECT j.job_id FROM jobs j WHERE (j.state = 'queued' OR (j.state = 'running' AND j.lease_expires_ms < ?1)) "
        "AND (j.conversation_id IS NULL OR NOT EXISTS (SELECT 1 FROM jobs r WHERE r.state = 'running' "
        "AND r.lease_expires_ms >= ?1 AND r.conversation_id = j.conversation_id AND r.job_id <> j.job_id)) "
        "ORDER BY j.job_id LIMIT 1",
        (now_ms,),
    ).fetchone()
    if row is None:
        return None
    job_id = row[0]
    conn.execute(
        "UPDATE jobs SET state = 'running', lease_owner = ?, lease_expires_ms = ?, attempts = attempts + 1 "
        "WHERE job_id = ?",
        (owner, now_ms + lease_ms, job_id),
    )
    return _get(conn, job_id)


def renew(conn: sqlite3.Connection, job_id: int, owner: str, lease_ms: int, now_ms: int) -> bool:
    cursor = conn.execute(
        "UPDATE jobs SET lease_expires_ms = ? WHERE job_id = ? AND lease_owner = ? AND state = 'running'",
        (now_ms + lease_ms, job_id, owner),
    )
    return cursor.rowcount == 1


def finish(
    conn: sqlite3.Connection,
    job_id: int,
    owner: str,
    ok: bool,
    result: JSONValue,
    error: str | None,
    retry: bool,
    finished_at: datetime,
) -> bool:
    row = conn.execute(
        "SELECT 1 FROM jobs WHERE job_id = ? AND lease_owner = ? AND state = 'running'", (job_id, owner)
    ).fetchone()
    if row is None:
        return False
    if not ok and retry:
        try:
            conn.execute(
                "UPDATE jobs SET state = 'queued', lease_owner = NULL, lease_expires_ms = NULL, error = ? "
                "WHERE job_id = ?",
                (error, job_id),
            )
            return True
        except sqlite3.IntegrityError:
            error = f"{error}; not retried: the same job is queued again already"
    conn.execute(
        "UPDATE jobs SET state = ?, lease_owner = NULL, lease_expires_ms = NULL, finished_at = ?, result = ?, "
        "error = ? WHERE job_id = ?",
        ("done" if ok else "failed", format_timestamp(finished_at), dump_json(result), error, job_id),
    )
    return True


def release(conn: sqlite3.Connection, job_id: int, owner: str) -> bool:
    try:
        cursor = conn.execute(
            "UPDATE jobs SET state = 'queued', lease_owner = NULL, lease_expires_ms = NULL, "
            "attempts = max(attempts - 1, 0) WHERE job_id = ? AND lease_owner = ? AND state = 'running'",
            (job_id, owner),
        )
    except sqlite3.IntegrityError:
        # The same job was queued again meanwhile: that one will do the work.
        cursor = conn.execute(
            "UPDATE jobs SET state = 'failed', lease_owner = NULL, lease_expires_ms = NULL, "
            "error = 'given back at shutdown; the same job is queued again' "
            "WHERE job_id = ? AND lease_owner = ? AND state = 'running'",
            (job_id, owner),
        )
    return cursor.rowcount == 1


def list_jobs(conn: sqlite3.Connection, state: str | None, limit: int) -> list[Job]:
    where, params = ("WHERE state = ?", [state]) if state else ("", [])
    rows = conn.execute(f"SELECT {COLUMNS} FROM jobs {where} ORDER BY job_id DESC LIMIT ?", (*params, limit))
    return [job_from_row(r) for r in rows]
