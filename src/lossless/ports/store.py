"""The store port: conversations, messages, the summary DAG, context and search, kept by a backend.

Invariants every :class:`Store` implementation keeps (the contract suite in
``tests/contract/`` checks them against each backend):

* **Messages are immutable and never lost.**  Once ``append_messages`` returns,
  its messages are durable (survive a process crash) and are never changed or
  deleted by any other method of this protocol.
* **Idempotent by event key.**  ``(conversation_id, event_key)`` is unique: a
  message whose key is already stored (or repeated earlier in the same call) is
  skipped and counted as a duplicate, never stored twice.
* **Order.**  ``seq`` increases by one per stored message within a conversation,
  in the order given; each stored message is appended to the conversation's
  context items in the same transaction.
* **Atomic.**  A call either stores everything it reports or nothing.  Inside
  ``async with store.atomic():`` all calls made by the same task join one
  transaction, committed at the end or rolled back on an exception.
* **Search is complete.**  A search finds every stored row that matches, the
  moment ``append_messages`` returns.  How the indexes keep up is the
  backend's: both index in a background thread after the append commits
  (SQLite into a companion file, :mod:`lossless.stores.sqlite.index`;
  PostgreSQL into the rows' word-index column, :mod:`lossless.stores.postgres.indexer`),
  and each search also matches the rows the indexer has not reached yet.
* **Concurrency.**  Calls may be made concurrently from many tasks (and, for the
  SQLite backend, many processes on one file).  Writes are serialised; a write
  that cannot get the lock in time raises :class:`~lossless.errors.ConflictError`
  having written nothing.
* **Large files are write-once.**  A ``large_files`` row is never changed;
  inserting an id that is already stored keeps the stored row (so a replayed
  ingest is harmless).  Rows belong to a conversation and go with it.

A :class:`BlobStore` keeps the bytes those rows point at (see its docstring):
content-addressed per conversation, write-once, durable before ``put``
returns.  Blobs are written *before* the transaction that inserts the rows and
messages referring to them, so a crash in between leaves an orphan blob, never
a reference to a missing one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

from lossless.records import (
    BootstrapState,
    CompactionEvent,
    ContextEntry,
    ContextRow,
    Conversation,
    Grant,
    JSONValue,
    LargeFile,
    Message,
    MessageRecord,
    Summary,
)

__all__ = [
    "AppendResult",
    "PreparedMessage",
    "SearchRequest",
    "SearchRow",
    "Store",
    "StoreStats",
]


@dataclass(frozen=True, slots=True)
class PreparedMessage:
    """A message ready to store: validated, with its token count and final timestamp."""

    message: Message
    token_count: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What ``append_messages`` stored, and how many it skipped as duplicates."""

    stored: tuple[MessageRecord, ...] = ()
    duplicates: int = 0


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Row counts and sizes, for ``lcm stats``."""

    url: str
    backend: str
    schema_version: int
    conversations: int
    messages: int
    message_parts: int
    summaries: int
    context_items: int
    large_files: int
    total_bytes: int | None = None
    table_bytes: Mapping[str, int] = field(default_factory=dict)
    message_tokens: int = 0


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """A page of a search over one table (``scope``), limited to ``conversation_ids``.

    ``words`` is an FTS5 expression for the word index (porter, unicode61);
    ``trigrams`` one for the trigram index (substring pre-filter, case-insensitive).
    ``literals``, when given, are substrings every match contains exactly as
    written (a case-sensitive regex's required fragments): a backend may
    pre-filter with them instead of ``trigrams`` (PostgreSQL does: ``LIKE`` on
    its trigram index); either way the caller re-checks every row.  ``since`` is
    inclusive, ``before`` exclusive (a summary is in range when the time span of
    what it covers overlaps it).
    """

    scope: Literal["messages", "summaries"]
    conversation_ids: tuple[int, ...]
    words: str | None = None
    trigrams: str | None = None
    literals: tuple[str, ...] = ()
    since: datetime | None = None
    before: datetime | None = None
    order: Literal["recency", "relevance"] = "recency"
    limit: int = 200
    below: int | None = None
    offset: int = 0


@dataclass(frozen=True, slots=True)
class SearchRow:
    """A candidate row: ``key`` is its row id (the message id, or the summary's row number) for paging."""

    scope: Literal["messages", "summaries"]
    key: int
    ref: int | str
    conversation_id: int
    created_at: datetime
    content: str
    role: str | None = None
    kind: str | None = None
    depth: int | None = None
    rank: float | None = None


class Store(Protocol):
    """Persistence for conversations, messages, the summary DAG and bootstrap state.

    See the module docstring for the invariants.  All methods are coroutines
    except :meth:`atomic`, which returns an async context manager.
    """

    url: str
    backend: str

    def atomic(self) -> AbstractAsyncContextManager[None]:
        """Group the calling task's store calls into one transaction (nestable)."""
        ...

    async def close(self) -> None: ...

    # -- conversations

    async def get_or_create_conversation(
        self,
        *,
        agent_id: str,
        session_id: str,
        session_key: str | None = None,
        title: str | None = None,
        source: str | None = None,
        parent_id: int | None = None,
        metadata: Mapping[str, JSONValue] | None = None,
    ) -> Conversation:
        """The conversation ``(agent_id, session_id)``, created if it does not exist yet.

        For an existing conversation, a ``title``, ``session_key``, ``source`` or
        ``parent_id`` it lacks is filled in; values it already has are kept.
        """
        ...

    async def get_conversation(self, conversation_id: int) -> Conversation | None: ...

    async def find_conversation(
        self, *, agent_id: str, session_id: str | None = None, session_key: str | None = None
    ) -> Conversation | None:
        """Look a conversation up by session id, or by the active conversation's session key."""
        ...

    async def list_conversations(
        self, *, agent_id: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[Conversation]:
        """Conversations, most recently updated first."""
        ...

    async def conversation_sizes(self, conversation_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
        """``{conversation id: (message count, token total)}`` for the given conversations."""
        ...

    async def archive_conversation(self, conversation_id: int) -> None:
        """Mark a conversation inactive (it stays stored and searchable)."""
        ...

    async def discard_conversation(self, conversation_id: int) -> None:
        """Remove a conversation that has no messages of its own (an abandoned spawn); else InputError."""
        ...

    # -- messages

    async def append_messages(self, conversation_id: int, messages: Sequence[PreparedMessage]) -> AppendResult:
        """Store ``messages`` in order, skipping event-key duplicates (see the invariants)."""
        ...

    async def get_messages(
        self,
        conversation_id: int,
        *,
        after_seq: int | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[MessageRecord]:
        """Messages with their parts, by ``seq`` (ascending unless ``newest_first``)."""
        ...

    async def get_messages_by_id(self, message_ids: Sequence[int]) -> list[MessageRecord]:
        """The messages with these ids (missing ids are left out), in the order asked."""
        ...

    async def count_messages(self, conversation_id: int) -> int: ...

    async def last_event_key(self, conversation_id: int) -> str | None:
        """The event key of the newest message that has one."""
        ...

    # -- the active context

    async def get_context_items(self, conversation_id: int) -> list[ContextRow]:
        """The conversation's context items, by ordinal."""
        ...

    async def get_context(self, conversation_id: int) -> list[ContextEntry]:
        """The context items with their sizes, times and tool-call ids, by ordinal; no message text is read."""
        ...

    async def copy_context(self, conversation_id: int, entries: Sequence[ContextEntry]) -> None:
        """Append context items pointing at ``entries``' messages/summaries (a forked sub-agent's start)."""
        ...

    # -- the summary DAG

    async def replace_with_summary(
        self, summary: Summary, sources: Sequence[ContextEntry], event: CompactionEvent | None = None
    ) -> None:
        """Atomically store ``summary`` with its lineage and put it in place of the context items ``sources``.

        ``sources`` are contiguous context items of ``summary.conversation_id``
        exactly as the store holds them now: all messages for a leaf, or all
        summaries one level shallower for a condensed summary.  ``event``, when
        given, is recorded in the same transaction (its ``event_id`` is ignored).
        If the context changed in the meantime nothing is written and
        :class:`ConflictError` is raised (read the context again and retry); if
        ``sources`` cannot be the sources of ``summary``, or ``event`` is not an
        event of this replacement, it is an :class:`InputError`.
        """
        ...

    async def summary_fingerprint(self, conversation_id: int) -> tuple[int, int, int]:
        """A cheap value that changes whenever a summary of the conversation is added or any summary's text is
        rewritten (for caches of derived data, e.g. a semantic index): its summary count, highest summary row
        and the store's count of rewrites."""
        ...

    async def get_compaction_events(self, conversation_id: int, *, limit: int | None = None) -> list[CompactionEvent]:
        """The conversation's compaction events, oldest first; with ``limit``, only the newest ``limit``."""
        ...

    async def get_summaries(self, summary_ids: Sequence[str]) -> list[Summary]:
        """The summaries with these ids (missing ids are left out), in the order asked."""
        ...

    async def list_summaries(self, conversation_id: int) -> list[Summary]:
        """All summaries of a conversation, oldest first."""
        ...

    async def get_summary_parents(self, summary_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """For each condensed summary among ``summary_ids``, the summaries it was made from, in order."""
        ...

    async def get_lineage(self, conversation_id: int) -> dict[str, tuple[int | str, ...]]:
        """For each summary of the conversation, its sources in order: message ids or summary ids."""
        ...

    async def rewrite_summary(self, summary: Summary, *, replaces: str) -> bool:
        """Give the stored summary ``summary.id`` a new text, atomically, if its content is still ``replaces``.

        Only ``content``, ``token_count``, ``file_ids``, ``level``, ``provider``, ``model`` and
        ``reason`` are taken from ``summary``; its id, conversation, kind, depth, times and lineage
        stay as stored.  The ``descendant_token_count`` of every summary made from it (directly or
        further up) changes by the difference in ``token_count``, in the same transaction, and the
        full-text indexes follow the new text.  Returns False (writing nothing) when the summary
        does not exist or its content is no longer ``replaces`` (a stale plan).  Used only by the
        explicit ``remake_summary`` repair (:mod:`lossless.integrity`).
        """
        ...

    # -- transcript bootstrap

    async def find_bootstrap_state(self, agent_id: str, path: str) -> BootstrapState | None:
        """The import state of transcript ``path`` for one of ``agent_id``'s conversations."""
        ...

    async def put_bootstrap_state(self, state: BootstrapState) -> None: ...

    # -- large files

    async def insert_large_files(self, files: Sequence[LargeFile]) -> int:
        """Store ``files``; an id already stored is kept as it is.  Returns how many were new.

        Raises :class:`~lossless.errors.NotFoundError` if a file's conversation does not exist.
        """
        ...

    async def get_large_file(self, file_id: str) -> LargeFile | None: ...

    async def list_large_files(
        self, conversation_id: int, *, limit: int | None = None, offset: int = 0
    ) -> list[LargeFile]:
        """A conversation's files, oldest first; files stored at the same time in the order inserted."""
        ...

    # -- search

    async def wait_indexed(self) -> None:
        """Wait until full-text search covers every row committed so far (bound it with ``anyio.fail_after``).

        Backends that index inside the write transaction return at once; the
        SQLite backend indexes in the background (within milliseconds) and its
        searches also scan the rows not yet indexed, so this is only needed to
        measure or inspect the index itself.
        """
        ...

    # -- housekeeping

    async def stats(self) -> StoreStats: ...

    # -- retrieval (grep, describe, expand) and delegation grants

    async def search(self, request: SearchRequest) -> list[SearchRow]:
        """One page of candidate rows for a search (see :class:`SearchRequest`); covers the whole history.

        With ``words`` every row returned matches that FTS5 expression exactly;
        with ``trigrams`` rows are a superset (the caller re-checks them); with
        neither, every row in reach is a candidate.  Pages: ``recency`` rows come
        newest id first, strictly below ``below``; ``relevance`` rows (``words``
        only) best first from ``offset``.
        """
        ...

    async def get_summary_messages(self, summary_ids: Sequence[str]) -> dict[str, tuple[int, ...]]:
        """For each leaf summary among ``summary_ids``, the ids of the messages it covers, in order."""
        ...

    async def get_summary_children(self, summary_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """For each summary among ``summary_ids`` that was condensed further, the summaries made from it."""
        ...

    async def list_conversation_links(self, agent_id: str) -> list[tuple[int, int | None, str | None]]:
        """``(conversation id, parent id, session key)`` of every conversation of ``agent_id``."""
        ...

    async def create_grant(self, grant: Grant) -> None:
        """Store a new grant durably (its id must be new, else InputError)."""
        ...

    async def get_grant(self, grant_id: str) -> Grant | None: ...

    async def charge_grant(self, grant_id: str, tokens: int, now: datetime) -> Grant | None:
        """Add ``tokens`` to a usable grant's ``tokens_used`` (at most up to its cap); None if it is not usable."""
        ...

    async def reserve_grant(self, grant_id: str, tokens: int, now: datetime) -> int | None:
        """Take up to ``tokens`` from a usable grant's remaining cap in one atomic step; how many were taken.

        The check and the charge are one conditional update, so concurrent reservations never take
        more than the cap in total.  Returns 0 when the cap is spent, None if the grant is not
        usable (unknown, revoked or expired).
        """
        ...

    async def release_grant(self, grant_id: str, tokens: int) -> None:
        """Give back ``tokens`` of a reservation that a read did not use (``tokens_used`` never drops below 0)."""
        ...

    async def revoke_grant(self, grant_id: str, reason: str, now: datetime) -> bool:
        """Revoke a grant (idempotent); True if this call revoked it."""
        ...

    async def sweep_grants(self, now: datetime) -> int:
        """Revoke every grant that has expired by ``now`` (reason ``expired``); returns how many."""
        ...
