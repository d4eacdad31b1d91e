"""SQLite backend: one file, WAL, a single writer and pooled readers."""

from lossless.stores.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
