"""The blob store port: write-once, content-addressed bytes of large files, and conversation locks.

Blobs are durable before ``put`` returns and are written before the rows that refer to them (see
:mod:`lossless.ports.store`), so a crash leaves an orphan blob, never a reference to a missing one.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

__all__ = [
    "BlobStore",
    "ConversationLocks",
]


@runtime_checkable
class ConversationLocks(Protocol):
    """A store shared by several hosts offers a lock per conversation that spans processes.

    The compactor holds it for a whole compaction, so two hosts never summarise one conversation at
    once (PostgreSQL: a session-level advisory lock).  It is an optimisation of work, not of safety:
    :meth:`Store.replace_with_summary` refuses a stale plan either way.
    """

    def conversation_lock(self, conversation_id: int) -> AbstractAsyncContextManager[None]: ...


@runtime_checkable
class BlobStore(Protocol):
    """Write-once, content-addressed storage for the bytes of large files.

    Contract:

    * ``put`` stores ``data`` for a conversation under its SHA-256
      (``content_hash``, lower-case hex, which the implementation verifies) and
      returns a storage URI.  The same bytes in the same conversation give the
      same URI and are stored once; different bytes never overwrite each other.
    * When ``put`` returns, the blob is durable; a reader never sees a partial
      blob (write to a temporary name, flush, rename).
    * Nothing about the location comes from user-supplied text: a URI is made
      of the conversation id, the hash and an extension chosen by the caller
      from a fixed set (``suffix``: 1–8 lower-case letters or digits, or empty).
    * ``get`` returns exactly the bytes that were put.  It raises
      :class:`~lossless.errors.InputError` for a URI this store did not make
      (so a tampered row cannot point it elsewhere) and
      :class:`~lossless.errors.StoreError` when the blob is missing.

    The file-system store is the default; a database-backed one (PostgreSQL,
    so several hosts share blobs) implements the same four members.
    """

    scheme: str

    async def put(self, conversation_id: int, data: bytes, *, content_hash: str, suffix: str = "") -> str: ...

    async def get(self, storage_uri: str) -> bytes: ...

    async def close(self) -> None: ...
