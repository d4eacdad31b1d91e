"""SQL of the large files stored aside on SQLite (the ``large_files`` table).

A file belongs to a stored conversation (inserting one for an unknown conversation raises
:class:`~lossless.errors.NotFoundError` and writes nothing); ``file_id`` is its content's key, so
inserting the same file again changes nothing and counts zero; listings are in insertion order.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from lossless.errors import NotFoundError
from lossless.records import LargeFile
from lossless.stores.rows import FILE_COLUMNS
from lossless.stores.sqlite.statements import large_file_from_row, large_file_row

__all__ = ["get", "insert", "list_files"]


def insert(conn: sqlite3.Connection, files: Sequence[LargeFile]) -> int:
    """Insert ``files`` not stored yet; returns how many were new."""
    for conversation_id in {f.conversation_id for f in files}:
        if conn.execute("SELECT 1 FROM conversations WHERE conversation_id = ?", (conversation_id,)).fetchone() is None:
            raise NotFoundError("conversation", conversation_id)
    before = conn.total_changes
    conn.executemany(
        f"INSERT INTO large_files ({FILE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (file_id) DO NOTHING",
        [large_file_row(f) for f in files],
    )
    return conn.total_changes - before


def get(conn: sqlite3.Connection, file_id: str) -> LargeFile | None:
    row = conn.execute(f"SELECT {FILE_COLUMNS} FROM large_files WHERE file_id = ?", (file_id,)).fetchone()
    return None if row is None else large_file_from_row(row)


def list_files(conn: sqlite3.Connection, conversation_id: int, limit: int | None, offset: int) -> list[LargeFile]:
    rows = conn.execute(
        f"SELECT {FILE_COLUMNS} FROM large_files WHERE conversation_id = ? ORDER BY created_at, rowid LIMIT ? OFFSET ?",
        (conversation_id, -1 if limit is None else limit, offset),
    ).fetchall()
    return [large_file_from_row(r) for r in rows]
