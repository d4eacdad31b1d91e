"""The database :class:`~lossless.ports.BlobStore`: large-file bytes in PostgreSQL, shared by every host.

Selected with ``large_files_storage = "database"``.  Storage URIs are
``db:<conversation id>/<sha256>[.<ext>]``; the bytes live in ``large_file_blobs``,
keyed by (conversation, SHA-256).

Invariants (the port's, kept the same way as the file-system store):

* **No user text in a key.**  A URI is an integer, 64 hex digits and an
  extension from ``[a-z0-9]{1,8}``; :meth:`get` accepts nothing else, so a
  tampered ``large_files`` row cannot make it read another conversation's row.
* **Write-once and deduplicated.**  ``INSERT … ON CONFLICT DO NOTHING``: the same
  bytes pasted twice in a conversation are stored once; different bytes have a
  different key, so nothing is overwritten.  The hash is verified before writing.
* **Atomic and durable.**  One row in one transaction: a reader sees the whole
  blob or none, and a returned ``put`` is committed.
* **Removed only with their conversation**: the rows cascade when ``lcm prune``
  deletes the conversation, never otherwise.
"""

from __future__ import annotations

import hashlib
import re

from lossless.errors import InputError, StoreError
from lossless.stores.blobs import check_put
from lossless.stores.postgres.connection import Database

__all__ = ["DatabaseBlobStore"]

_URI = re.compile(r"db:(0|[1-9][0-9]{0,18})/([0-9a-f]{64})(?:\.([a-z0-9]{1,8}))?")


class DatabaseBlobStore:
    """Blobs as rows of ``large_file_blobs`` (see the module docstring)."""

    scheme = "db"

    def __init__(self, database: Database) -> None:
        self._db = database

    def __repr__(self) -> str:
        return "DatabaseBlobStore()"

    @staticmethod
    def _key(storage_uri: str) -> tuple[int, str]:
        uri: object = storage_uri  # rows come from outside: check the type too
        match = _URI.fullmatch(uri) if isinstance(uri, str) else None
        if match is None:
            raise InputError(
                f"{storage_uri!r:.120} is not a storage URI of the database blob store "
                "(expected db:<conversation id>/<sha256>.<ext>); the large_files row may have been edited"
            )
        return int(match.group(1)), match.group(2)

    async def put(self, conversation_id: int, data: bytes, *, content_hash: str, suffix: str = "") -> str:
        check_put(conversation_id, content_hash, suffix)
        payload = bytes(data)
        if hashlib.sha256(payload).hexdigest() != content_hash:
            raise InputError("content_hash is not the SHA-256 of the data: refusing to store it under that name")
        async with self._db.transaction() as conn:
            await conn.execute(
                "INSERT INTO large_file_blobs (conversation_id, content_hash, data) VALUES (%s, %s, %s) "
                "ON CONFLICT (conversation_id, content_hash) DO NOTHING",
                (conversation_id, content_hash, payload),
            )
        return f"db:{conversation_id}/{content_hash}" + (f".{suffix}" if suffix else "")

    async def get(self, storage_uri: str) -> bytes:
        conversation_id, digest = self._key(storage_uri)
        async with self._db.transaction() as conn:
            row = await (
                await conn.execute(
                    "SELECT data FROM large_file_blobs WHERE conversation_id = %s AND content_hash = %s",
                    (conversation_id, digest),
                )
            ).fetchone()
        if row is None:
            raise StoreError(f"the bytes of {storage_uri!r} are missing from the database (large_file_blobs)")
        return bytes(row[0])

    async def close(self) -> None:
        return None

    async def remove_conversation(self, conversation_id: int) -> int:
        """Delete a deleted conversation's blobs (they also cascade with it); returns the bytes freed."""
        value: object = conversation_id
        if type(value) is not int or conversation_id < 0:
            raise InputError(f"conversation_id must be a non-negative integer, got {conversation_id!r}")
        async with self._db.transaction() as conn:
            row = await (
                await conn.execute(
                    "WITH gone AS (DELETE FROM large_file_blobs WHERE conversation_id = %s "
                    "RETURNING octet_length(data) AS n) SELECT coalesce(sum(n), 0) FROM gone",
                    (conversation_id,),
                )
            ).fetchone()
        return int(row[0]) if row else 0
