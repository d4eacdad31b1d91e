"""Ports: the small protocols the core talks to.  Backends implement them; the core never imports one.

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
from typing import Literal, Protocol, runtime_checkable

from lossless.records import (
    BootstrapState,
    CompactionEvent,
    CompactionTrigger,
    ContextEntry,
    ContextRow,
    Conversation,
    Grant,
    JSONValue,
    LargeFile,
    Message,
    MessageRecord,
    Part,
    Role,
    Summary,
    SummaryKind,
)

__all__ = [
    "AppendResult",
    "BatchSearchStore",
    "BlobStore",
    "ConversationLocks",
    "IndexDiscrepancy",
    "Job",
    "JobKind",
    "JobQueue",
    "JobReason",
    "JobState",
    "MaintainableStore",
    "PreparedMessage",
    "PrunableBlobStore",
    "PruneCandidate",
    "ReachPages",
    "ReachSearchStore",
    "RetentionStore",
    "SearchRequest",
    "SearchRow",
    "SegmentItem",
    "SessionContext",
    "SessionContextStore",
    "Store",
    "StoreStats",
    "Summarizer",
    "SummaryPolicy",
    "SummaryRequest",
    "SummaryResult",
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


# ---------------------------------------------------------------------- blobs


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


# ---------------------------------------------------------------------- summarizers

SummaryPolicy = Literal["normal", "aggressive"]


@dataclass(frozen=True, slots=True)
class SegmentItem:
    """One item of a segment of history, as a summarizer is given it: a message or a summary.

    ``text`` is what the rendered segment shows for the item (cut to the segment's length cap);
    the other fields are the facts its header line shows, so no summarizer has to parse them
    back out of the text — text that only looks like a header stays text.
    """

    ref: str  # "msg#12" or "sum_…" ("text" for prose that came without items)
    text: str
    role: Role | None = None  # messages
    at: str | None = None  # messages: the shown (local) time
    tool: str | None = None  # tool results: the tool(s) whose result this is
    depth: int | None = None  # summaries
    span: str | None = None  # summaries: "<from> → <to>", shown times
    time: datetime | None = None  # messages: when it was stored (UTC)
    parts: tuple[Part, ...] = ()  # messages: the structured parts

    @property
    def is_message(self) -> bool:
        return self.ref.startswith("msg#")


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """One summarisation: a segment of history, rendered and as items, and how to summarise it.

    ``depth`` is the depth of the summary to produce: 0 for a leaf (the segment
    is raw messages), 1 or more for a condensed node (the segment is summaries
    one level down).  ``text`` is the segment as a model reads it
    (:mod:`lossless.segments`); ``items`` are the same items, structured, for
    summarizers that work on them (empty when a caller passes prose only).
    ``previous_context`` is the most recent earlier summary, so the summary can
    avoid repeating what is already known.
    """

    kind: SummaryKind
    depth: int
    policy: SummaryPolicy
    target_tokens: int
    text: str
    previous_context: str | None = None
    custom_instructions: str = ""
    conversation_id: int | None = None
    earliest_at: datetime | None = None
    latest_at: datetime | None = None
    items: tuple[SegmentItem, ...] = ()


@dataclass(frozen=True, slots=True)
class SummaryResult:
    """What a summarizer produced, and which provider and model produced it."""

    text: str
    provider: str
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


@runtime_checkable
class Summarizer(Protocol):
    """Turns a segment of history into a shorter text.

    Contract: ``summarize`` may take long, return text that is too long or
    empty, or raise (a :class:`~lossless.errors.ProviderError` when it knows
    why); the compaction engine applies timeouts and validates the result, so
    a misbehaving summarizer can never corrupt the DAG.  Implementations hold no
    per-call state and are safe to call concurrently.
    """

    provider: str
    model: str | None

    async def summarize(self, request: SummaryRequest) -> SummaryResult: ...


# ---------------------------------------------------------------------- maintenance


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
    found), ``pages`` one per request, as :meth:`Store.search` returns it.
    """

    links: list[tuple[int, int | None, str | None]]
    own: int | None
    pages: list[list[SearchRow]]


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
    ) -> ReachPages:
        """:meth:`Store.list_conversation_links`, :meth:`Store.find_conversation` (only when a session is
        named) and :meth:`Store.search` of each request, from one state of the store."""
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


# ---------------------------------------------------------------------- retention


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


# ---------------------------------------------------------------------- background jobs

JobKind = Literal["compaction", "integrity"]
JobReason = CompactionTrigger  # a job is asked for for the same reasons a compaction runs
JobState = Literal["queued", "running", "done", "failed"]


@dataclass(frozen=True, slots=True)
class Job:
    """A background job (``spec/002`` worker contracts).

    ``mode`` is, for a compaction, the compaction mode (``incremental``, ``full``, ``until_under``
    with ``target_tokens``); for an integrity job, ``scan`` or ``scan_and_plan``.
    """

    id: int
    kind: JobKind
    reason: JobReason
    requested_at: datetime
    conversation_id: int | None = None
    mode: str | None = None
    target_tokens: int | None = None
    state: JobState = "queued"
    attempts: int = 0
    lease_owner: str | None = None
    lease_expires_ms: int | None = None
    finished_at: datetime | None = None
    result: JSONValue = None
    error: str | None = None


@runtime_checkable
class JobQueue(Protocol):
    """A durable queue of background jobs, shared by every worker on the store.

    Contract: a claim hands a job to one worker at a time, under a lease (``lease_expires_ms``, epoch
    milliseconds) that the worker renews while it runs; a job whose lease expired (its worker
    crashed or hung) can be claimed again, until ``max_attempts`` claims have been made — then it
    is marked ``failed``.  A claim never hands out a job for a conversation that has another job
    running under a live lease.  At most one *queued* job exists per kind and conversation: asking
    again returns the one waiting.  Only the lease owner can renew, finish or release a job.
    """

    async def enqueue_job(
        self,
        kind: JobKind,
        *,
        reason: JobReason,
        conversation_id: int | None = None,
        mode: str | None = None,
        target_tokens: int | None = None,
        requested_at: datetime,
    ) -> Job:
        """Queue a job (or return the equal kind's job already queued for that conversation)."""
        ...

    async def claim_job(self, owner: str, *, lease_ms: int, now_ms: int, max_attempts: int) -> Job | None:
        """The oldest claimable job, now leased to ``owner``; ``None`` when there is none.

        A conversation's jobs are claimed one at a time, in the order they were queued.
        """
        ...

    async def renew_job(self, job_id: int, owner: str, *, lease_ms: int, now_ms: int) -> bool:
        """Extend ``owner``'s lease; False if the job is no longer ``owner``'s (it must stop)."""
        ...

    async def finish_job(
        self,
        job_id: int,
        owner: str,
        *,
        ok: bool,
        result: JSONValue = None,
        error: str | None = None,
        retry: bool = False,
        finished_at: datetime,
    ) -> bool:
        """Record the outcome (``retry``: queue it again if attempts remain); False if not ``owner``'s."""
        ...

    async def release_job(self, job_id: int, owner: str) -> bool:
        """Give a job back unfinished (graceful shutdown): queued again, this attempt not counted."""
        ...

    async def list_jobs(self, *, state: JobState | None = None, limit: int = 100) -> list[Job]:
        """Jobs, newest first."""
        ...


# ---------------------------------------------------------------------- search vectors

#: What search vectors cover: stored messages, or summaries.
VectorSource = Literal["messages", "summaries"]


@dataclass(frozen=True, slots=True)
class VectorTodo:
    """A message or summary that has no search vectors for a model yet.

    ``row`` orders the work and is the cursor of the next call (the message id, or the summary's
    row number); ``key`` is the message id or the summary id.
    """

    row: int
    key: int | str
    conversation_id: int
    content: str


@dataclass(frozen=True, slots=True)
class ItemVectors:
    """The search vectors of one message or summary: one little-endian float32 blob per chunk.

    No vectors (a blank text) is recorded too, so the text counts as indexed and is not asked for again.
    """

    key: int | str
    conversation_id: int
    vectors: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class VectorState:
    """One conversation's search vectors for one model and source.

    ``indexed`` of ``total`` items have vectors (or are blank); ``rows`` counts the chunk vectors.
    ``revision`` (where the store keeps one) changes with every vector added or removed; an in-memory
    copy of the vectors is stale when ``(rows, revision)`` differs from what it was loaded at.
    """

    indexed: int
    total: int
    rows: int
    revision: int = 0


@runtime_checkable
class SearchVectorStore(Protocol):
    """Durable search vectors of messages and summaries, per embedding model.

    Contract: vectors are written by the background build (never by a search); a summary rewritten
    in place loses its vectors in the rewriting transaction (so it is never found by its old text
    and the build embeds it again); vectors go with their message, summary and conversation.
    Writing vectors that are already stored is harmless (the stored ones are kept).
    """

    async def vectors_todo(
        self, model: str, source: VectorSource, *, after: int = 0, limit: int = 256
    ) -> list[VectorTodo]:
        """Up to ``limit`` items with ``row > after`` that have no vectors for ``model``, by ``row``."""
        ...

    async def put_item_vectors(self, model: str, source: VectorSource, items: Sequence[ItemVectors]) -> int:
        """Store the items' vectors (one transaction); returns how many items were new."""
        ...

    async def vector_states(
        self, model: str, source: VectorSource, conversation_ids: Sequence[int]
    ) -> dict[int, VectorState]:
        """The state of each listed conversation (one that does not exist is left out)."""
        ...

    async def vector_totals(self, model: str, source: VectorSource) -> VectorState:
        """The state of the whole store (every conversation)."""
        ...

    async def load_item_vectors(
        self, model: str, source: VectorSource, conversation_id: int
    ) -> list[tuple[int | str, bytes]]:
        """``(key, vector)`` of every chunk vector of the conversation, by key then chunk."""
        ...

    async def nearest_items(
        self,
        model: str,
        source: VectorSource,
        query: bytes,
        conversation_ids: Sequence[int],
        *,
        limit: int,
    ) -> list[tuple[int | str, int, float]] | None:
        """``(key, conversation id, cosine)`` of the nearest items, best first, answered by the database's
        own vector index; ``None`` where it has none (then the caller searches the loaded vectors)."""
        ...
