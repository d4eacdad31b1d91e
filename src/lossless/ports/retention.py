"""The retention ports: explicit deletion of whole conversations (``lcm prune``) and file compaction (``lcm vacuum``).

Nothing here runs on its own: only an explicit call deletes, only whole conversations, and never
one that another conversation still points at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

__all__ = [
    "PrunableBlobStore",
    "PruneCandidate",
    "RetentionStore",
]


@dataclass(frozen=True, slots=True)
class PruneCandidate:
    """A conversation that an explicit prune would delete, with what goes with it.

    ``row_bytes`` is the size of the text its rows hold (messages, parts, summaries, file rows), an
    estimate of the space it frees; ``blocked_by`` lists other conversations whose context or
    summaries still point at its rows (a forked sub-agent): it is kept while they remain.
    """

    conversation_id: int
    agent_id: str
    session_id: str
    active: bool
    archived_at: datetime | None
    messages: int
    summaries: int
    files: int
    row_bytes: int
    blocked_by: tuple[int, ...] = ()


@runtime_checkable
class RetentionStore(Protocol):
    """Explicit, whole-conversation deletion (``lcm prune``) and file compaction (``lcm vacuum``).

    Nothing here runs on its own: only an explicit call deletes, and only whole conversations.
    Message and summary row ids are never reused after a delete, and the search index forgets the
    deleted rows.
    """

    async def archived_before(self, agent_id: str, before: datetime) -> list[int]:
        """Ids of ``agent_id``'s archived (inactive) conversations archived before ``before``."""
        ...

    async def prune_candidates(self, conversation_ids: Sequence[int]) -> list[PruneCandidate]:
        """What deleting these conversations would remove (missing ids are left out)."""
        ...

    async def delete_conversations(self, conversation_ids: Sequence[int]) -> int:
        """Delete these conversations and every row of theirs; returns how many were deleted.

        A conversation another conversation still points at (see :class:`PruneCandidate`) raises
        :class:`~lossless.errors.InputError` and nothing is deleted.
        """
        ...

    async def vacuum(self) -> tuple[int, int]:
        """Rebuild the database file to return free pages to the file system; ``(bytes before, after)``."""
        ...


@runtime_checkable
class PrunableBlobStore(Protocol):
    """A :class:`BlobStore` that can drop every blob of a deleted conversation."""

    async def remove_conversation(self, conversation_id: int) -> int:
        """Delete the conversation's blobs; returns the bytes freed."""
        ...
