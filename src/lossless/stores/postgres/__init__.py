"""The PostgreSQL backend (the ``postgres`` extra): the same Store contract as SQLite, for many hosts."""

from lossless.stores.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
