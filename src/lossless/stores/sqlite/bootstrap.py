"""SQL of the bootstrap state on SQLite: how far a session file on disk has been read into a conversation.

One row per (conversation, session file path); writing it also stamps the conversation's
``bootstrapped_at``, in the same transaction.  Lookups go by the agent that owns the conversation
and the file's path, newest first, so a file re-imported under a new conversation resumes from the
latest state.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime

from lossless.records import BootstrapState, format_timestamp

__all__ = ["find", "put"]


def find(conn: sqlite3.Connection, agent_id: str, path: str) -> BootstrapState | None:
    row = conn.execute(
        "SELECT b.conversation_id, b.last_seen_size, b.last_seen_mtime_ns, b.last_processed_offset, "
        "b.last_processed_entry_hash, b.last_entry_key, b.updated_at, b.reconciled_seq "
        "FROM conversation_bootstrap_state b JOIN conversations c USING (conversation_id) "
        "WHERE c.agent_id = ? AND b.session_file_path = ? ORDER BY b.updated_at DESC LIMIT 1",
        (agent_id, path),
    ).fetchone()
    if row is None:
        return None
    return BootstrapState(
        conversation_id=row[0],
        path=path,
        size=row[1],
        mtime_ns=row[2],
        offset=row[3],
        tail_hash=row[4],
        last_entry_key=row[5],
        reconciled_seq=row[7],
        updated_at=datetime.fromisoformat(row[6]),
    )


def put(conn: sqlite3.Connection, state: BootstrapState) -> None:
    conn.execute(
        "INSERT INTO conversation_bootstrap_state (conversation_id, session_file_path, last_seen_size, "
        "last_seen_mtime_ns, last_processed_offset, last_processed_entry_hash, last_entry_key, updated_at, "
        "reconciled_seq) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (conversation_id, session_file_path) DO UPDATE SET "
        "last_seen_size = excluded.last_seen_size, last_seen_mtime_ns = excluded.last_seen_mtime_ns, "
        "last_processed_offset = excluded.last_processed_offset, "
        "last_processed_entry_hash = excluded.last_processed_entry_hash, "
        "last_entry_key = excluded.last_entry_key, updated_at = excluded.updated_at, "
        "reconciled_seq = excluded.reconciled_seq",
        (
            state.conversation_id,
            state.path,
            state.size,
            state.mtime_ns,
            state.offset,
            state.tail_hash,
            state.last_entry_key,
            format_timestamp(state.updated_at),
            state.reconciled_seq,
        ),
    )
    conn.execute(
        "UPDATE conversations SET bootstrapped_at = ? WHERE conversation_id = ?",
        (format_timestamp(state.updated_at), state.conversation_id),
    )
