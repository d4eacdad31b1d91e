"""Optional store capabilities: integrity checks, batched and reach-first search, one-trip session context.

Each is a separate ``runtime_checkable`` Protocol a backend may implement; callers test with
``isinstance`` and fall back to the plain :class:`~lossless.ports.store.Store` path otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from lossless.ports.store import SearchRequest, SearchRow
from lossless.records import (
    ContextEntry,
    Conversation,
    MessageRecord,
    Summary,
)

__all__ = [
    "BatchSearchStore",
    "IndexDiscrepancy",
    "MaintainableStore",
    "ReachPages",
    "ReachSearchStore",
    "SessionContext",
    "SessionContextStore",
]


@dataclass(frozen=True, slots=True)
class IndexDiscrepancy:
    """A row on which a derived full-text index and the canonical rows disagree.

    ``source`` is ``messages`` or ``summaries``; ``row_id`` the indexed key (a message id, or the
    summary's row number); ``issue`` is ``stale`` (indexed, but no such row) or ``missing`` (a row
    the index claims to cover but does not hold).
    """

    source: str
    row_id: int
    issue: Literal["stale", "missing"]


@runtime_checkable
class BatchSearchStore(Protocol):
    """A store that answers several searches in one request (a server round trip saved per extra search).

    Optional: where a store lacks it the searches are made one :meth:`Store.search` each, at once.
    """

    async def search_many(self, requests: Sequence[SearchRequest]) -> list[list[SearchRow]]:
        """For each request, in order, exactly what :meth:`Store.search` returns for it."""
        ...


@dataclass(frozen=True, slots=True)
class ReachPages:
    """A caller's reach as the store holds it, and pages of searches, all read from one state of the store.

    ``links`` are :meth:`Store.list_conversation_links`'s, ``own`` the id of the conversation
    :meth:`Store.find_conversation` finds for the caller's session (None when none was asked or
    found), ``pages`` one per request, as :meth:`Store.search` returns it, and ``named`` the id of
    the agent's conversation with the session id asked as ``named_session`` (None when none was
    asked or found).
    """

    links: list[tuple[int, int | None, str | None]]
    own: int | None
    pages: list[list[SearchRow]]
    named: int | None = None


@runtime_checkable
class ReachSearchStore(Protocol):
    """A store that reads an agent's conversations and runs searches in one request (one round trip per grep).

    Optional: where a store lacks it, a grep reads the caller's reach first and searches after.
    The searches name their conversations (a guess the retriever checks against ``links``), so
    the store never decides who may read what.
    """

    async def search_with_links(
        self,
        agent_id: str,
        requests: Sequence[SearchRequest],
        *,
        session_id: str | None = None,
        session_key: str | None = None,
        named_session: str | None = None,
    ) -> ReachPages:
        """:meth:`Store.list_conversation_links`, :meth:`Store.find_conversation` (only when a session is
        named: the caller's own, and ``named_session``, the session id naming the conversation searched)
        and :meth:`Store.search` of each request, from one state of the store."""
        ...


@dataclass(frozen=True, slots=True)
class SessionContext:
    """A session's conversation with everything assembling its context reads, all from one state of the store.

    ``entries`` are :meth:`Store.get_context`'s; ``messages`` the entries' messages with their parts
    (by id), ``summaries`` the entries' summaries (by id) and ``parents`` the condensed ones' parents,
    exactly as :meth:`Store.get_messages_by_id`, :meth:`Store.get_summaries` and
    :meth:`Store.get_summary_parents` would give them.
    """

    conversation: Conversation
    entries: tuple[ContextEntry, ...]
    messages: Mapping[int, MessageRecord]
    summaries: Mapping[str, Summary]
    parents: Mapping[str, tuple[str, ...]]


@runtime_checkable
class SessionContextStore(Protocol):
    """A store that reads a session's whole context in one request (a server round trip saved per read).

    Optional: the engine reads the same data with :meth:`Store.find_conversation`,
    :meth:`Store.get_context` and the batched reads where a store lacks it.
    """

    async def read_session_context(self, *, agent_id: str, session_id: str) -> SessionContext | None:
        """The conversation ``(agent_id, session_id)`` and its context; ``None`` when there is no such conversation."""
        ...


@runtime_checkable
class MaintainableStore(Protocol):
    """What the integrity checker and ``lcm doctor --apply`` need beyond :class:`Store`.

    Every method here is non-destructive for canonical data: it touches derived data (the search
    index) or context items, never a message, part, summary or lineage row.
    """

    def read_snapshot(self) -> AbstractAsyncContextManager[None]:
        """A block in which every read of the current task sees one consistent state of the store.

        SQLite: one read transaction on one connection; PostgreSQL: one ``REPEATABLE READ`` read-only
        transaction.  Writers are never blocked by it.
        """
        ...

    def repair_transaction(self, conversation_id: int) -> AbstractAsyncContextManager[None]:
        """One write transaction in which the conversation cannot change under the current task.

        Reads inside it see the conversation's latest committed state and every writer of it
        (ingest, compaction, another repair) waits until the block ends; the block's writes
        commit together.  SQLite: the database write lock; PostgreSQL: the conversation's row lock.
        """
        ...

    async def search_index_problems(self, limit: int = 1000) -> list[IndexDiscrepancy]:
        """Rows on which the full-text indexes disagree with the canonical rows (at most ``limit``)."""
        ...

    async def rebuild_search_index(self) -> None:
        """Empty the full-text indexes and index every row again; returns once they are complete."""
        ...

    async def restore_context_item(self, conversation_id: int, ref: int | str) -> bool:
        """Put a message (an int id) or summary (a str id) that the active context does not reach back in it.

        It goes at its place by ``seq``.  Returns False (and writes nothing) if the row is not the
        conversation's or is already a context item.
        """
        ...

    async def drop_context_item(self, conversation_id: int, ordinal: int) -> bool:
        """Remove a context item whose message or summary does not exist; False if it does exist or is gone."""
        ...
