"""The ContextEngine: the one object hosts, the CLI and the servers talk to.

It follows the context-engine lifecycle of the reference (``info``,
``bootstrap``, ``ingest``, ``ingest_batch``, …, ``dispose``); this version
implements storage and import — ingest, bootstrap from transcripts, and
reading conversations back.  Assembly and compaction build on it.

Invariants:

* Every conversation the engine creates belongs to ``config.agent_id``.
* Each ingest is one store transaction (appends are serialised by the store);
  multi-step rewrites of a conversation (compaction) take that conversation's
  lock, so different conversations proceed concurrently.
* Ingest is idempotent for messages with an ``event_key``; heartbeat polls and
  sessions excluded by the session patterns are skipped, and the result says so.
* Large payloads (``<file>`` blocks, long tool outputs, ``data:`` URLs over
  ``large_file_token_threshold``) are stored aside before the size check, so
  ``max_message_bytes`` applies to what is left.  Their bytes are written
  before the transaction that stores the rows and messages referring to them:
  a crash in between leaves an orphan blob, never a dangling reference (see
  :mod:`lossless.interception`).
* Files are read back only through this agent's conversations: another
  agent's file id is :class:`NotFoundError`, as if it did not exist.
* Nothing here reads the environment: the :class:`Config` is built once, at
  the edge (:meth:`ContextEngine.open` or the CLI).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, tzinfo
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal
from zoneinfo import ZoneInfo

import anyio

from lossless._version import VERSION as VERSION  # re-exported: the adapters name it from here
from lossless.assembly import AssembledContext, RenderCache, assemble
from lossless.bootstrap import FileImport, discover_transcripts, import_transcript
from lossless.budget import CountCache, tail_token_cap
from lossless.compaction import CompactionResult, Compactor, Mode
from lossless.config import Config, load_config
from lossless.errors import (
    ConflictError,
    InputError,
    NotFoundError,
    StoreError,
    TranscriptError,
    check_integer,
    check_unicode,
)
from lossless.formats import OutputFormat
from lossless.ingest import INVALID_UNICODE_KEY, original_message, prepare_messages, was_repaired
from lossless.interception import Interceptor, PendingFile
from lossless.large_files import DEFAULT_PAGE_BYTES, Page, file_scope, page_lines, referenced_file_ids, restore
from lossless.maintenance import MaintenanceMixin
from lossless.observability import record, timed
from lossless.ports import AppendResult, BlobStore, PreparedMessage, Store, StoreStats, Summarizer
from lossless.recall import RecallMixin
from lossless.records import (
    ContextEntry,
    Conversation,
    Grant,
    IngestResult,
    JSONValue,
    LargeFile,
    Message,
    MessageRecord,
    Summary,
    ToolPart,
    utcnow,
)
from lossless.retries import retry_conflicts
from lossless.sessions import SessionPolicy, agent_id_from_session_key, open_session
from lossless.tokens import RecentCounter, TokenCounter, token_counter_for
from lossless.triggers import CompactionDecision, decide

if TYPE_CHECKING:
    from lossless.memory.scopes import Caller as MemoryCaller
    from lossless.memory.service import MemoryService, Remembered

__all__ = [
    "AfterTurnResult",
    "ContextEngine",
    "EngineInfo",
    "FileDescription",
    "ImportProgress",
    "MemorySession",
    "SpawnHandle",
    "open_memory",
]

log = logging.getLogger("lossless.engine")


#: Called after each file of an import: (files done, files in all, that file's result or error).
ImportProgress = Callable[[int, int, FileImport | Exception], Awaitable[None] | None]


@dataclass(frozen=True, slots=True)
class AfterTurnResult:
    """What ``after_turn`` did.  It never raises: a failure is reported in ``error``."""

    ingest: IngestResult
    compaction: CompactionResult | None = None
    context_tokens: int = 0
    error: str | None = None
    #: The trigger decision the turn was weighed by (None when nothing was stored).
    decision: CompactionDecision | None = None
    #: The exception that kept the turn from being stored (``ingest`` stored nothing), for adapters
    #: that must answer with an error status rather than a success carrying ``error``.
    ingest_failure: Exception | None = field(default=None, repr=False, compare=False)


@dataclass(slots=True)
class SpawnHandle:
    """A prepared sub-agent conversation; :meth:`rollback` removes it if the spawn fails."""

    conversation: Conversation
    mode: Literal["isolated", "fork"]
    _engine: ContextEngine
    #: With a ``ttl``: the child's read grant over the parent's history (``lcm mcp --grant``), until then.
    grant: Grant | None = None

    async def rollback(self) -> None:
        """Undo :meth:`ContextEngine.prepare_subagent_spawn` (only while the child has stored nothing)."""
        if self.grant is not None:
            await self._engine.revoke_expansion_grant(self.grant.id, "error")
        await self._engine.store.discard_conversation(self.conversation.id)
        self._engine._conversations.clear()


@dataclass(frozen=True, slots=True)
class EngineInfo:
    id: str
    name: str
    version: str
    owns_compaction: bool


def _local_zone() -> tzinfo:
    zone = datetime.now().astimezone().tzinfo
    assert zone is not None
    return zone


@dataclass(frozen=True, slots=True)
class FileDescription:
    """A stored large file: its metadata and exploration summary, and a page of its lines."""

    file: LargeFile
    page: Page

    def to_dict(self) -> dict[str, JSONValue]:
        return {**self.file.to_dict(), "content": self.page.to_dict()}


def _require_text(value: object, what: str) -> None:
    if not isinstance(value, str) or not value:
        raise InputError(f"{what} must be a non-empty string, got {value!r}")
    check_unicode(value, what)


def conversation_number(ref: int | str) -> int | None:
    """The conversation id ``ref`` names (an int, or a string of ASCII digits), checked; None for a session id."""
    if isinstance(ref, str):
        if not (ref.isascii() and ref.isdigit()):
            return None
        if len(ref) > 19:  # more digits than any 64-bit id (and int() refuses over 4,300)
            raise InputError(f"conversation id {ref[:40]}… is out of range: ids are positive 64-bit integers")
        ref = int(ref)
    return check_integer(ref, "conversation id")


def _require_budget(value: object) -> None:
    if type(value) is not int or value < 1:
        raise InputError(f"token_budget must be a positive integer, got {value!r}")


def _require_observed(value: object) -> None:
    if value is not None and (type(value) is not int or value < 0):
        raise InputError(f"observed_tokens must be a non-negative integer (the host's prompt size), got {value!r}")


class ContextEngine(RecallMixin, MaintenanceMixin):
    """Lossless context management for one agent identity over one store.

    Open one with ``await ContextEngine.open()`` (the embedded SQLite default)
    or ``ContextEngine.open("sqlite:///path.db")``, preferably as
    ``async with await ContextEngine.open() as engine: …``.
    """

    info = EngineInfo(id="lossless", name="Lossless Context Engine", version=VERSION, owns_compaction=True)

    def __init__(
        self,
        store: Store,
        config: Config | None = None,
        *,
        token_counter: TokenCounter | None = None,
        summarizer: Summarizer | None = None,
        clock: Callable[[], datetime] = utcnow,
        blobs: BlobStore | None = None,
        file_summarizer: Summarizer | None = None,
    ) -> None:
        from lossless.providers import file_summarizer_for, summarizer_for
        from lossless.stores import blob_store_for

        self.store = store
        self.config = config or Config()
        self.tokens = token_counter or token_counter_for(self.config.tokenizer)
        self._counting = RecentCounter(self.tokens)  # interception and the ingest checks share counts
        self.summarizer = summarizer or summarizer_for(self.config, self.tokens)
        self.zone: tzinfo = ZoneInfo(self.config.timezone) if self.config.timezone else _local_zone()
        self.compactor = Compactor(
            self.store, self.summarizer, config=self.config, counter=self.tokens, zone=self.zone, clock=clock,
            on_leaf=(lambda leaf: self.memory().mine_summary(store, leaf)) if self.config.memory_auto_extract else None,
        )  # fmt: skip
        self._clock = clock
        self.blobs = blobs or blob_store_for(self.config, store)
        self.interceptor = Interceptor(
            store,
            self.blobs,
            counter=self._counting,
            threshold=self.config.large_file_token_threshold,
            summarizer=file_summarizer or file_summarizer_for(self.config, self.tokens, self.summarizer),
            summary_timeout_s=self.config.summary_timeout_ms / 1000,
            clock=clock,
        )
        self._policy = SessionPolicy(
            self.config.ignore_session_patterns,
            self.config.stateless_session_patterns,
            self.config.skip_stateless_sessions,
        )
        self._conversations: OrderedDict[tuple[str, str], Conversation] = OrderedDict()
        self._rendered = RenderCache()  # summaries are rendered once, not on every turn
        self._assembly_counts = CountCache(self.tokens)  # a context is counted once, not on every turn
        self._nonce_key = secrets.token_bytes(16)  # marks real summaries (see lossless.assembly)
        self._agent_memory: dict[str, MemoryService] = {}  # agents named by session keys (see remember)

    # -------------------------------------------------------------- lifecycle

    @classmethod
    async def open(
        cls, database_url: str | None = None, *, config: Config | None = None, **settings: Any
    ) -> ContextEngine:
        """Open an engine on ``database_url`` (default: the configured one, else SQLite in the data dir).

        ``settings`` override configuration values by name (e.g. ``fresh_tail_count=32``);
        without ``config`` the configuration is loaded from the environment and config file.
        """
        from lossless.stores import open_store

        if config is None:
            config = load_config({"database_url": database_url, **settings})
        elif settings or database_url:
            config = config.replace(**({"database_url": database_url} if database_url else {}), **settings)
        store = await open_store(config.resolved_database_url, config)
        return cls(store, config)

    async def __aenter__(self) -> ContextEngine:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.dispose()

    async def dispose(self) -> None:
        """Release the store's connections.  The engine cannot be used afterwards."""
        await self.blobs.close()
        await self.store.close()

    # -------------------------------------------------------------- conversations

    async def _conversation_for(self, session_id: str, session_key: str | None) -> Conversation:
        _require_text(session_id, "session_id")
        if session_key is not None:
            _require_text(session_key, "session_key")
        cache_key = (session_id, session_key or "")
        cached = self._conversations.get(cache_key)
        if cached is not None:
            self._conversations.move_to_end(cache_key)
            return cached
        found = await self.store.find_conversation(agent_id=self.config.agent_id, session_id=session_id)
        if found is None or (session_key is not None and found.session_key != session_key) or not found.active:
            found = await open_session(
                self.store,
                agent_id=self.config.agent_id,
                session_id=session_id,
                session_key=session_key,
                retain_depth=self.config.new_session_retain_depth,
                source="api",
            )
        self._conversations[cache_key] = found
        if len(self._conversations) > 4096:
            self._conversations.popitem(last=False)
        return found

    async def conversation(self, ref: int | str) -> Conversation:
        """A conversation of this agent by id (an int or digits) or by session id."""
        conversation: Conversation | None = None
        if not isinstance(ref, int) or isinstance(ref, bool):
            _require_text(ref, "conversation")
        number = conversation_number(ref)
        if number is not None:
            conversation = await self.store.get_conversation(number)
            if conversation is not None and conversation.agent_id != self.config.agent_id:
                conversation = None
        if conversation is None and isinstance(ref, str):
            conversation = await self.store.find_conversation(agent_id=self.config.agent_id, session_id=ref)
        if conversation is None:
            raise NotFoundError(
                "conversation",
                ref,
                f"list this agent's ({self.config.agent_id}) conversations with `lcm conversations`",
            )
        return conversation

    async def conversations(self, *, limit: int = 100, offset: int = 0) -> list[Conversation]:
        """This agent's conversations, most recently updated first."""
        return await self.store.list_conversations(agent_id=self.config.agent_id, limit=limit, offset=offset)

    async def messages(
        self,
        conversation: int | str,
        *,
        tail: int | None = None,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[MessageRecord]:
        """Stored messages of a conversation in order; ``tail=N`` gives the last N."""
        for name, value in (("tail", tail), ("after_seq", after_seq), ("limit", limit)):
            if value is not None:
                check_integer(value, name)
        conv = await self.conversation(conversation)
        if tail is not None:
            newest = await self.store.get_messages(conv.id, limit=tail, newest_first=True)
            return newest[::-1]
        return await self.store.get_messages(conv.id, after_seq=after_seq, limit=limit)

    async def stats(self) -> StoreStats:
        return await self.store.stats()

    # -------------------------------------------------------------- ingest

    async def ingest(
        self,
        session_id: str,
        message: Message,
        *,
        session_key: str | None = None,
        is_heartbeat: bool = False,
    ) -> IngestResult:
        """Store one message (see :meth:`ingest_batch`); heartbeat polls are skipped."""
        if is_heartbeat:
            return IngestResult(None, skipped=1, skip_reason="heartbeat")
        return await self.ingest_batch(session_id, [message], session_key=session_key)

    @timed("lcm_ingest_latency_ms")
    async def ingest_batch(
        self, session_id: str, messages: Sequence[Message], *, session_key: str | None = None
    ) -> IngestResult:
        """Store ``messages`` in order, in one transaction, and append them to the active context.

        Messages whose ``event_key`` is already stored are skipped and counted as
        duplicates.  Nothing is stored for ignored or stateless sessions, or when
        the engine is disabled; ``skip_reason`` says which.
        """
        if isinstance(messages, Message):
            raise InputError("ingest_batch takes a list of messages; use ingest() for one")
        messages = list(messages)
        if not self.config.enabled:
            return IngestResult(None, skipped=len(messages), skip_reason="disabled (enabled = false)")
        reason = self._policy.write_block_reason(session_key or session_id)
        if reason is not None:
            return IngestResult(None, skipped=len(messages), skip_reason=reason)
        _require_text(session_id, "session_id")
        planned = await self.interceptor.plan(messages, scope=file_scope(self.config.agent_id, session_id))
        files = planned.files
        prepared, dropped = prepare_messages(
            planned.messages,  # type: ignore[arg-type]  # non-messages are refused here
            counter=self._counting,
            now=self._clock(),
            max_message_bytes=self.config.max_message_bytes,
            prune_heartbeat_ok=self.config.prune_heartbeat_ok,
        )
        conversation = await self._conversation_for(session_id, session_key)
        try:
            result = await self._append(conversation.id, prepared, files)
        except NotFoundError as exc:
            # The cached conversation was deleted meanwhile (``lcm prune``, perhaps by another process):
            # forget it, and store into the session's conversation as it is now (made anew if need be).
            if exc.kind != "conversation" or not self._forget_conversation(conversation.id):
                raise
            conversation = await self._conversation_for(session_id, session_key)
            result = await self._append(conversation.id, prepared, files)
        repaired = sum(1 for m in result.stored if was_repaired(m.to_message()))
        if repaired:
            log.warning(
                "session %r: %d message(s) held invalid Unicode (lone surrogates); stored with U+FFFD in their "
                "place, the original kept in their metadata (%s)",
                session_id,
                repaired,
                INVALID_UNICODE_KEY,
            )
        return IngestResult(
            conversation.id,
            result.stored,
            result.duplicates,
            dropped,
            "heartbeat" if dropped else None,
            repaired,
        )

    # -------------------------------------------------------------- assembly and the turn

    async def _find(self, session_id: str) -> Conversation | None:
        # Read from the store, not the cache: another process may have pruned or reset the session.
        return await self.store.find_conversation(agent_id=self.config.agent_id, session_id=session_id)

    @timed("lcm_assemble_latency_ms")
    async def assemble(
        self,
        session_id: str,
        *,
        token_budget: int,
        prompt: str | None = None,
        output: OutputFormat = "openai",
        messages: Sequence[Message] = (),
    ) -> AssembledContext:
        """The messages to send the model now: summaries, then the fresh tail, within ``token_budget``.

        ``prompt`` (the user's new message) switches the budget fill from newest-first to
        most-relevant-first.  ``messages`` are the host's own messages, passed through unchanged when
        the engine is disabled (``enabled = false``) or does not know the session yet.
        """
        _require_text(session_id, "session_id")
        _require_budget(token_budget)
        if output not in ("openai", "anthropic"):
            raise InputError(f"output must be 'openai' or 'anthropic', got {output!r}")
        budget = min(token_budget, self.config.max_assembly_token_budget or token_budget)
        conversation = await self._find(session_id) if self.config.enabled else None
        if conversation is None:
            return self._pass_through(messages, output, budget)
        entries = await self.store.get_context(conversation.id)
        message_ids = [e.message_id for e in entries if e.message_id is not None]
        summary_ids = [e.summary_id for e in entries if e.summary_id is not None]
        # Three independent batched reads, run at once (the store reads on a pool of connections).
        records: dict[int, MessageRecord] = {}
        summaries: dict[str, Summary] = {}
        parents: dict[str, tuple[str, ...]] = {}

        async def read_messages() -> None:
            records.update((m.id, m) for m in await self.store.get_messages_by_id(message_ids))

        async def read_summaries() -> None:
            summaries.update((s.id, s) for s in await self.store.get_summaries(summary_ids))

        async def read_parents() -> None:
            parents.update(await self.store.get_summary_parents(summary_ids))  # leaves have none

        async with anyio.create_task_group() as group:
            group.start_soon(read_messages)
            if summary_ids:
                group.start_soon(read_summaries)
                group.start_soon(read_parents)
        assembled = assemble(
            entries,
            records,
            summaries,
            parents,
            budget=budget,
            fresh_tail_count=self.config.fresh_tail_count,
            fresh_tail_max_tokens=self.config.fresh_tail_max_tokens,
            counter=self._assembly_counts,
            zone=self.zone,
            prompt=prompt,
            output=output,
            cache=self._rendered,
            nonce=self._nonce(conversation.id),
        )
        record("lcm_context_tokens", assembled.estimated_tokens)
        return assembled

    def _nonce(self, conversation_id: int) -> str:
        """This process's nonce for a conversation's summaries: stable across turns, unknowable to stored text."""
        digest = hmac.new(self._nonce_key, str(conversation_id).encode(), hashlib.sha256).hexdigest()
        return digest[:16]

    def _pass_through(self, messages: Sequence[Message], output: OutputFormat, budget: int) -> AssembledContext:
        """The host's own messages, under the same budget rules as a stored context."""
        now = self._clock()
        records = {
            i: MessageRecord(i, 0, i, m.role, m.content, m.parts, self.tokens.count(m.content), m.created_at or now)
            for i, m in enumerate(messages, 1)
        }
        entries = [
            ContextEntry(
                ordinal=i,
                kind="message",
                token_count=r.token_count,
                created_at=r.created_at,
                message_id=i,
                role=r.role,
                tool_calls=tuple(
                    p.call_id
                    for p in r.parts
                    if isinstance(p, ToolPart) and p.call_id and (p.input is not None or not p.is_result)
                ),
                tool_results=tuple(p.call_id for p in r.parts if isinstance(p, ToolPart) and p.call_id and p.is_result),
            )
            for i, r in records.items()
        ]
        assembled = assemble(
            entries,
            records,
            {},
            {},
            budget=budget,
            fresh_tail_count=self.config.fresh_tail_count,
            fresh_tail_max_tokens=self.config.fresh_tail_max_tokens,
            counter=self.tokens,
            zone=self.zone,
            output=output,
        )
        # The host's messages have no stored ids, and are not stored: nothing to name or to look up.
        return replace(assembled, included=(), dropped=(), left_out=(), system_prompt_addition=None)

    async def after_turn(
        self,
        session_id: str,
        messages: Sequence[Message] = (),
        *,
        token_budget: int,
        session_key: str | None = None,
        observed_tokens: int | None = None,
    ) -> AfterTurnResult:
        """Store the turn's new messages, then compact if needed.  Never raises (see ``error``), except
        :class:`~lossless.errors.InputError` for a ``token_budget`` that is not a positive integer
        (nothing is stored then).

        Compaction runs only when a trigger fires (see :mod:`lossless.triggers` and :meth:`evaluate`)
        — so no summarizer call is made below them: a full compaction when the larger of the stored
        context and ``observed_tokens`` (the prompt size the host saw) is over ``context_threshold``
        × ``token_budget``, or when the context holds more than ``max_active_messages`` raw
        messages; else an incremental leaf pass when ``leaf_chunk_tokens`` of raw history lie
        outside the fresh tail.
        """
        _require_budget(token_budget)  # a caller's mistake: refused before anything is stored
        try:
            _require_observed(observed_tokens)
        except InputError as exc:
            return AfterTurnResult(IngestResult(None), error=str(exc))
        try:
            ingested = await self.ingest_batch(session_id, list(messages), session_key=session_key)
        except Exception as exc:
            log.error("after_turn could not store the turn of %r: %s", session_id, exc, exc_info=exc)
            return AfterTurnResult(IngestResult(None), error=f"ingest failed: {exc}", ingest_failure=exc)
        if ingested.conversation_id is None:
            return AfterTurnResult(ingested)
        if self.config.memory_auto_extract:
            try:
                await self.remember(ingested, session_key=session_key)
            except Exception as exc:  # memory is a side line: it never fails the turn
                log.warning("after_turn memory extraction for %r failed: %s", session_id, exc, exc_info=exc)
        try:
            return await self._maybe_compact(ingested, token_budget, session_id, observed_tokens)
        except ConflictError as exc:  # another process compacts this conversation right now: the job is in hand
            log.info("after_turn left the compaction of %r to another process: %s", session_id, exc)
            return AfterTurnResult(ingested)
        except Exception as exc:
            log.error("after_turn compaction of %r failed: %s", session_id, exc, exc_info=exc)
            return AfterTurnResult(ingested, error=f"compaction failed: {exc}")

    async def evaluate(
        self, session_id: str, *, token_budget: int, observed_tokens: int | None = None
    ) -> CompactionDecision:
        """Whether ``after_turn`` would compact this session now, and why — without compacting.

        ``observed_tokens`` is the prompt size the host measured (its system prompt, tool schemas and
        injected memories included); the larger of it and the stored context is weighed.
        """
        _require_text(session_id, "session_id")
        _require_budget(token_budget)
        _require_observed(observed_tokens)
        conversation = await self._find(session_id)
        entries = await self.store.get_context(conversation.id) if conversation is not None else []
        return self._decide(entries, token_budget, observed_tokens)

    def _decide(
        self, entries: Sequence[ContextEntry], token_budget: int, observed_tokens: int | None
    ) -> CompactionDecision:
        budget = min(token_budget, self.config.max_assembly_token_budget or token_budget)
        tail_cap = tail_token_cap(budget, self.config.fresh_tail_max_tokens)
        return decide(
            entries,
            budget=budget,
            config=self.config,
            needs_leaf_pass=self.compactor.needs_leaf_pass(entries, tail_cap),
            observed_tokens=observed_tokens,
        )

    async def _maybe_compact(
        self, ingested: IngestResult, token_budget: int, session_id: str, observed_tokens: int | None = None
    ) -> AfterTurnResult:
        assert ingested.conversation_id is not None
        conversation_id = ingested.conversation_id
        entries = await self.store.get_context(conversation_id)
        tokens = sum(e.token_count for e in entries)
        decision = self._decide(entries, token_budget, observed_tokens)
        if not decision.compact or decision.mode is None:
            return AfterTurnResult(ingested, context_tokens=tokens, decision=decision)
        budget = min(token_budget, self.config.max_assembly_token_budget or token_budget)
        tail_cap = tail_token_cap(budget, self.config.fresh_tail_max_tokens)
        target = decision.target_tokens
        reason: Literal["threshold"] = "threshold"
        if self._background_worker is not None:  # embedded workers compact; the turn only queues the job
            await self.enqueue_compaction(conversation_id, reason=reason, mode=decision.mode, target_tokens=target)
            return AfterTurnResult(ingested, None, tokens, decision=decision)
        compaction = self._compacted(
            await self.compactor.compact(conversation_id, mode=decision.mode, trigger=reason, tail_max_tokens=tail_cap),
            session_id,
        )
        if target is not None and compaction.tokens_after > target:
            compaction = self._compacted(
                await self.compactor.compact(
                    conversation_id, mode="until_under", target_tokens=target, trigger=reason, tail_max_tokens=tail_cap
                ),
                session_id,
            )
        return AfterTurnResult(ingested, compaction, compaction.tokens_after, decision=decision)

    # -------------------------------------------------------------- sub-agents

    async def prepare_subagent_spawn(
        self,
        parent_session_id: str,
        child_session_id: str,
        *,
        mode: Literal["isolated", "fork"] = "isolated",
        child_session_key: str | None = None,
        ttl: timedelta | None = None,
    ) -> SpawnHandle:
        """Set up a sub-agent's conversation before it starts.

        ``isolated``: an empty conversation, linked to its parent.  ``fork``: the child's context
        starts with the newest of the parent's context items, up to ``bootstrap_max_tokens`` (they
        are shared, not copied: expanding them leads to the parent's messages).  Call
        :meth:`SpawnHandle.rollback` if the spawn then fails.

        ``ttl`` (spec 004's optional TTL; 1 s to 24 h): the child also gets a read grant over the
        parent's history that ends after ``ttl`` — or earlier, at :meth:`on_subagent_ended` or
        rollback (``handle.grant.id`` is what ``lcm mcp --grant`` takes).
        """
        if mode not in ("isolated", "fork"):
            raise InputError(f"mode must be 'isolated' or 'fork', got {mode!r}")
        parent = await self._conversation_for(parent_session_id, None)
        existing = await self.store.find_conversation(agent_id=self.config.agent_id, session_id=child_session_id)
        if existing is not None:
            raise InputError(f"session {child_session_id!r} already exists; a sub-agent needs a new session id")
        grant = None
        if ttl is not None:
            grant = await self.grant_expansion([parent.id], ttl=ttl, grantee=child_session_key or child_session_id)
        child = await self.store.get_or_create_conversation(
            agent_id=self.config.agent_id,
            session_id=child_session_id,
            session_key=child_session_key,
            parent_id=parent.id,
            source="subagent",
            metadata={"spawn": mode, **({"grant_id": grant.id} if grant else {})},
        )
        if mode == "fork":
            entries = await self.store.get_context(parent.id)
            budget = self.config.resolved_bootstrap_max_tokens
            start = len(entries)
            used = 0
            while start > 0 and used + entries[start - 1].token_count <= budget:
                start -= 1
                used += entries[start].token_count
            await self.store.copy_context(child.id, entries[start:])
        return SpawnHandle(child, mode, self, grant)

    async def on_subagent_ended(self, child_session_id: str) -> None:
        """A sub-agent finished or was swept: archive its conversation (it stays stored and searchable)."""
        child = await self.store.find_conversation(agent_id=self.config.agent_id, session_id=child_session_id)
        if child is None:
            raise NotFoundError("conversation", child_session_id, "the sub-agent was never prepared or stored")
        grant_id = (child.metadata or {}).get("grant_id")
        if isinstance(grant_id, str):  # its read grant ends with it
            await self.revoke_expansion_grant(grant_id, "completed")
        await self.store.archive_conversation(child.id)
        self._conversations.clear()

    async def restart_session(
        self, session_id: str, new_session_id: str, *, carry_context: bool = False, drop_newest: int = 0
    ) -> list[MessageRecord]:
        """Go on with ``session_id`` as a new conversation ``new_session_id``; nothing stored is removed.

        The old conversation is archived (it stays stored and searchable) and the new one is
        linked to it as its parent.  ``carry_context``: the new context starts as the old one
        (shared items, not copies), less its newest ``drop_newest`` raw messages — a host's
        "undo" — which are returned, oldest first; otherwise it starts empty (a host's "clear").
        Only raw messages at the end of the context can be left out: a summary stops the count.
        """
        if drop_newest < 0:
            raise InputError(f"drop_newest must be zero or more, got {drop_newest}")
        old = await self.conversation(session_id)
        _require_text(new_session_id, "new_session_id")
        if await self.store.find_conversation(agent_id=self.config.agent_id, session_id=new_session_id):
            raise InputError(f"session {new_session_id!r} already exists; a restart needs a new session id")
        entries = await self.store.get_context(old.id) if carry_context else []
        keep = len(entries)
        while keep > 0 and len(entries) - keep < drop_newest and entries[keep - 1].kind == "message":
            keep -= 1
        dropped_ids = [e.message_id for e in entries[keep:] if e.message_id is not None]
        await self.store.archive_conversation(old.id)  # first: one active conversation per session key
        new = await self.store.get_or_create_conversation(
            agent_id=self.config.agent_id,
            session_id=new_session_id,
            session_key=old.session_key,
            parent_id=old.id,
            source="restart",
            metadata={"restart_of": old.session_id},
        )
        await self.store.copy_context(new.id, entries[:keep])
        self._conversations.clear()
        by_id = {m.id: m for m in await self.store.get_messages_by_id(dropped_ids)}
        return [by_id[i] for i in dropped_ids if i in by_id]

    # -------------------------------------------------------------- compaction

    async def compact(
        self,
        conversation: int | str,
        *,
        force: bool = False,
        mode: Mode | None = None,
        target_tokens: int | None = None,
        progress: Callable[[CompactionResult], Awaitable[None] | None] | None = None,
    ) -> CompactionResult:
        """Compact a conversation into summaries.

        ``mode`` defaults to ``until_under`` when ``target_tokens`` is given, else ``full`` with
        ``force`` (a host's ``/compact`` command: every pass there is room for), else
        ``incremental`` (only what the thresholds call for).  Always returns a result whose
        ``stop_reason`` says why it stopped.
        """
        if target_tokens is not None:
            check_integer(target_tokens, "target_tokens")
        conv = await self.conversation(conversation)
        chosen: Mode = mode or ("until_under" if target_tokens is not None else "full" if force else "incremental")
        result = await self.compactor.compact(
            conv.id, mode=chosen, target_tokens=target_tokens, trigger="manual", progress=progress
        )
        return self._compacted(result, conv.session_id)

    async def _append(
        self, conversation_id: int, prepared: list[PreparedMessage], files: Sequence[PendingFile]
    ) -> AppendResult:
        # No conversation lock here: an append is one store transaction, and whatever rewrites
        # the context (compaction) re-checks its range when it commits.
        # A write that lost a race (another host holds the conversation's lock) wrote nothing: retry it.
        if files:
            return await retry_conflicts(lambda: self._append_with_files(conversation_id, prepared, files))
        return await retry_conflicts(lambda: self.store.append_messages(conversation_id, prepared))

    def _forget_conversation(self, conversation_id: int) -> bool:
        """Drop every cache entry naming ``conversation_id``; whether there was one."""
        stale = [key for key, cached in self._conversations.items() if cached.id == conversation_id]
        for key in stale:
            del self._conversations[key]
        return bool(stale)

    async def _append_with_files(
        self, conversation_id: int, prepared: list[PreparedMessage], files: Sequence[PendingFile]
    ) -> AppendResult:
        rows = await self.interceptor.store_files(files, conversation_id)  # durable before the rows commit
        async with self.store.atomic():
            await self.store.insert_large_files(rows)
            return await self.store.append_messages(conversation_id, prepared)

    # -------------------------------------------------------------- large files

    async def file(self, file_id: str) -> LargeFile:
        """A stored large file of one of this agent's conversations."""
        _require_text(file_id, "file_id")
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
        conv = await self.conversation(conversation)
        return await self.store.list_large_files(conv.id, limit=limit, offset=offset)

    async def read_file(self, file_id: str) -> bytes:
        """The exact bytes of a stored file (checked against its SHA-256)."""
        return await self._read(await self.file(file_id))

    async def _read(self, found: LargeFile) -> bytes:
        file_id = found.id
        data = await self.blobs.get(found.storage_uri)
        if found.content_hash is not None:
            digest = await anyio.to_thread.run_sync(lambda: hashlib.sha256(data).hexdigest())
            if digest != found.content_hash:
                raise StoreError(
                    f"the bytes stored for {file_id!r} ({found.storage_uri}) do not match their SHA-256: "
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
        data = await self._read(found)
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

    # -------------------------------------------------------------- transcripts

    async def bootstrap(
        self,
        session_file: str | os.PathLike[str],
        *,
        session_id: str | None = None,
        session_key: str | None = None,
        format_name: str | None = None,
        full: bool = False,
    ) -> FileImport:
        """Reconcile a transcript file with the store: import whatever it has that the store lacks.

        Cheap to call at every session start: an unchanged file is not read and
        a grown one is read from where the last call stopped.
        """
        result = await import_transcript(
            self.store,
            session_file,
            config=self.config,
            counter=self._counting,
            format_name=format_name,
            full=full,
            session_id=session_id,
            session_key=session_key,
            interceptor=self.interceptor,
        )
        self._conversations.clear()
        return result

    async def import_paths(
        self,
        paths: Sequence[str | os.PathLike[str]],
        *,
        full: bool = False,
        progress: ImportProgress | None = None,
        stop_on_error: bool = False,
    ) -> list[FileImport | Exception]:
        """Import every transcript in ``paths`` (files, or folders searched recursively).

        Each file is imported on its own (all or nothing); a file that fails is
        reported as its exception in the result list and the others go on,
        unless ``stop_on_error``.
        """
        files = await anyio.to_thread.run_sync(discover_transcripts, list(paths))
        results: list[FileImport | Exception] = []
        for done, path in enumerate(files, 1):
            try:
                outcome: FileImport | Exception = await self.bootstrap(path, full=full)
            except (InputError, OSError) as exc:
                if stop_on_error:
                    raise
                outcome = exc
            except (RecursionError, UnicodeError, ValueError, OverflowError) as exc:  # one bad file; the rest go on
                log.warning("import of %s failed: %s", path, exc, exc_info=exc)
                problem = TranscriptError(str(path), None, f"cannot be imported ({type(exc).__name__}: {exc})")
                if stop_on_error:
                    raise problem from exc
                outcome = problem
            results.append(outcome)
            if progress is not None:
                maybe = progress(done, len(files), outcome)
                if maybe is not None:
                    await maybe
        return results

    # -------------------------------------------------------------- long-term memory

    _memory_service: MemoryService | None = None

    def memory(self) -> MemoryService:
        """Long-term memory on this engine's store, as the configured agent (built on first use)."""
        if self._memory_service is None:
            from lossless.memory.scopes import Caller as MemoryCaller

            self._memory_service = _memory_service(self.store, self.config, MemoryCaller.agent(self.config.agent_id))
        return self._memory_service

    async def remember(self, ingested: IngestResult, *, session_key: str | None = None) -> Remembered | None:
        """Mine a stored turn for memories, once (``after_turn`` does it when ``memory_auto_extract``).

        The memories go to the engine agent's scope; when ``agent_id`` is not configured, a session key
        of the form ``agent:<id>:…`` names the agent instead (spec 001 scopes), so one host serving
        several agents keeps their memories apart.
        """
        if ingested.conversation_id is None or not any(m.role == "user" for m in ingested.stored):
            return None
        agent = (
            agent_id_from_session_key(session_key)
            if self.config.sources.get("agent_id", "default") == "default"
            else None
        )
        if agent is None or agent == self.config.agent_id:
            return await self.memory().mine(ingested.stored)
        from lossless.memory.scopes import Caller as MemoryCaller

        service = self._agent_memory.get(agent)
        if service is None:
            service = self._agent_memory[agent] = _memory_service(self.store, self.config, MemoryCaller.agent(agent))
        return await service.mine(ingested.stored)


# ------------------------------------------------------------------ long-term memory


class MemorySession:
    """A :class:`~lossless.memory.service.MemoryService` with the store it runs on (close it when done)."""

    def __init__(self, store: Store, service: MemoryService) -> None:
        self.store = store
        self.service = service

    async def aclose(self) -> None:
        closer = getattr(self.service.embedder, "aclose", None)
        if closer is not None:
            await closer()
        await self.store.close()

    async def __aenter__(self) -> MemorySession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def open_memory(
    config: Config | None = None, *, agent_id: str | None = None, system: bool = False
) -> MemorySession:
    """Open long-term memory on the configured database, as ``agent_id`` (or, explicitly, the system).

    The embedder is ``memory_embedder``'s (the offline local model by default) and the
    fusion ``memory_fusion``'s.  ``system=True`` reaches every scope; nothing else does.
    """
    from lossless.memory.scopes import Caller as MemoryCaller
    from lossless.stores import open_store

    config = config or load_config({})
    store = await open_store(config.resolved_database_url, config)
    try:
        caller = MemoryCaller.system() if system else MemoryCaller.agent(agent_id or config.agent_id)
        service = _memory_service(store, config, caller)
    except BaseException:
        await store.close()
        raise
    return MemorySession(store, service)


def _memory_service(store: Store, config: Config, caller: MemoryCaller) -> MemoryService:
    """The memory service the settings describe, on ``store``'s file."""
    from lossless.memory import decay
    from lossless.memory.admission import PRESETS
    from lossless.memory.ranking import RetrievalConfig
    from lossless.memory.service import MemoryService
    from lossless.providers import dedup_judge_for, embedder_for, extractor_for, reranker_for
    from lossless.stores import memory_store_for

    return MemoryService(
        memory_store_for(store),
        embedder_for(config),
        caller,
        retrieval=RetrievalConfig.from_config(config),
        decay_config=decay.config_from(config),
        tag_prefixes=config.memory_tag_prefixes,
        stale_threshold=config.memory_stale_threshold,
        exact_search_max=config.memory_exact_search_max,
        reranker=reranker_for(config),
        admission=PRESETS.get(config.memory_admission),
        extractor=extractor_for(config),
        judge=dedup_judge_for(config),
    )
