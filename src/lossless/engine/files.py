"""Large files stored aside at ingest: reading them back, paging through them, restoring messages.

Invariants:

* Files are read back only through this agent's conversations: another agent's file id is
  :class:`~lossless.errors.NotFoundError`, as if it did not exist.
* Bytes are checked against their SHA-256 on every read; a changed or damaged blob is a
  :class:`~lossless.errors.StoreError`, never silently returned.
* Hashing, paging and restoring run in a worker thread: a 50 MB file does not hold up the event loop.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import anyio
import anyio.to_thread

from lossless.config import Config
from lossless.engine.conversations import Conversations, require_text
from lossless.errors import NotFoundError, StoreError
from lossless.ingest import original_message
from lossless.large_files import DEFAULT_PAGE_BYTES, Page, page_lines, referenced_file_ids, restore
from lossless.ports import BlobStore, Store
from lossless.records import JSONValue, LargeFile, Message, MessageRecord

__all__ = ["FileDescription", "Files"]


@dataclass(frozen=True, slots=True)
class FileDescription:
    """A stored large file: its metadata and exploration summary, and a page of its lines."""

    file: LargeFile
    page: Page

    def to_dict(self) -> dict[str, JSONValue]:
        return {**self.file.to_dict(), "content": self.page.to_dict()}


class Files:
    """The engine's ``file``, ``files``, ``read_file``, ``describe_file`` and ``restore_message``."""

    def __init__(self, store: Store, blobs: BlobStore, config: Config, conversations: Conversations) -> None:
        self.store = store
        self.blobs = blobs
        self.config = config
        self.conversations = conversations

    async def file(self, file_id: str) -> LargeFile:
        """A stored large file of one of this agent's conversations."""
        require_text(file_id, "file_id")
        found = await self.store.get_large_file(file_id)
        if found is not None:
            conversation = await self.store.get_conversation(found.conversation_id)
            if conversation is not None and conversation.agent_id == self.config.agent_id:
                return found
        raise NotFoundError(
            "file", file_id, f"list the files of this agent's ({self.config.agent_id}) conversations with `lcm files`"
        )

    async def files(self, conversation: int | str, *, limit: int | None = None, offset: int = 0) -> list[LargeFile]:
        """The large files stored for a conversation of this agent, oldest first."""
        conv = await self.conversations.get(conversation)
        return await self.store.list_large_files(conv.id, limit=limit, offset=offset)

    async def read_file(self, file_id: str) -> bytes:
        """The exact bytes of a stored file (checked against its SHA-256)."""
        return await self.read(await self.file(file_id))

    async def read(self, found: LargeFile) -> bytes:
        """The bytes of ``found`` (a row already checked to be this agent's), checked against its SHA-256."""
        data = await self.blobs.get(found.storage_uri)
        if found.content_hash is not None:
            digest = await anyio.to_thread.run_sync(lambda: hashlib.sha256(data).hexdigest())
            if digest != found.content_hash:
                raise StoreError(
                    f"the bytes stored for {found.id!r} ({found.storage_uri}) do not match their SHA-256: "
                    "the blob was changed or damaged on disk; restore it from a backup"
                )
        return data

    async def describe_file(
        self,
        file_id: str,
        *,
        start_line: int | None = None,
        end_line: int | None = None,
        max_bytes: int = DEFAULT_PAGE_BYTES,
    ) -> FileDescription:
        """Metadata, exploration summary and lines ``start_line``…``end_line`` (at most ``max_bytes``) of a file."""
        found = await self.file(file_id)
        data = await self.read(found)
        page = await anyio.to_thread.run_sync(
            lambda: page_lines(data, start_line=start_line, end_line=end_line, max_bytes=max_bytes)
        )
        return FileDescription(found, page)

    async def restore_message(self, message: Message | MessageRecord) -> Message:
        """The message exactly as it was ingested (with the time it was stored at), its large files put back.

        A message stored with invalid Unicode shown as U+FFFD comes back with the host's original code units.
        """
        original = original_message(message.to_message() if isinstance(message, MessageRecord) else message)
        contents = {file_id: await self.read_file(file_id) for file_id in referenced_file_ids(original)}
        return await anyio.to_thread.run_sync(lambda: restore(original, contents.__getitem__))
