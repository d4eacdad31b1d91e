"""(being written) The long-term memory store on PostgreSQL."""

from __future__ import annotations

from lossless.stores.postgres.connection import Database

__all__ = ["PostgresMemoryStore"]


class PostgresMemoryStore:
    def __init__(self, database: Database) -> None:
        self._db = database
