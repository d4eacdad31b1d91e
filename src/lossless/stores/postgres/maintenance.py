"""(being written) PostgreSQL statements: see store.py for the split."""

from __future__ import annotations

from lossless.stores.postgres.connection import Database

__all__ = ["MaintenanceStatements"]


class MaintenanceStatements:
    _db: Database
