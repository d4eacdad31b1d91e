"""The turn: ingest, assemble, and compact when a trigger fires — one write path and one compaction policy.

Invariants:

* **One write path.**  Every ingest is :func:`~lossless.interception.write_batch` (the transcript
  importer uses the same): large files' blobs first, then their rows and the messages in one
  store transaction.  A write that lost a race for the conversation's lock wrote nothing and is
  retried (:func:`~lossless.retries.retry_conflicts`); no conversation lock is held for an append,
  since whatever rewrites the context (compaction) re-checks its range when it commits.
* Ingest is idempotent for messages with an ``event_key``; heartbeat polls and sessions excluded by
  the session patterns are skipped, and the result says so.  Large payloads are stored aside
  before the size check, so ``max_message_bytes`` applies to what is left.
* **One compaction policy** (:class:`CompactionPolicy`): the budget is clamped to
  ``max_assembly_token_budget`` once, the trigger (:mod:`lossless.triggers`) weighs the context as
  read once for the turn, and a ``full`` pass that leaves the context over its target is followed
  by an ``until_under`` pass to it — the same for ``after_turn``, queued jobs and manual calls.
* ``after_turn`` never raises once the budget is valid: a failure is reported in its result.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Literal

import anyio

from lossless.assembly import AssembledContext, RenderCache, assemble
from lossless.budget import CountCache, tail_token_cap
from lossless.compaction import CompactionResult, Compactor, Mode
from lossless.config import Config
from lossless.engine.conversations import Conversations, require_text
from lossless.errors import ConflictError, InputError, NotFoundError, check_integer
from lossless.formats import OutputFormat
from lossless.ingest import INVALID_UNICODE_KEY, prepare_messages, was_repaired
from lossless.interception import Interceptor, PendingFile, write_batch
from lossless.large_files import file_scope
from lossless.observability import record, timed
from lossless.ports import AppendResult, PreparedMessage, Store
from lossless.records import (
    CompactionTrigger,
    ContextEntry,
    IngestResult,
    JSONValue,
    Message,
    MessageRecord,
    Summary,
    ToolPart,
)
from lossless.retries import retry_conflicts
from lossless.sessions import SessionPolicy
from lossless.tokens import RecentCounter, TokenCounter
from lossless.triggers import CompactionDecision, decide

if TYPE_CHECKING:
    from lossless.engine.operations import Operations

__all__ = ["AfterTurnResult", "CompactionPolicy", "Turns"]

log = logging.getLogger("lossless.engine")


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

    def to_dict(self) -> dict[str, JSONValue]:
        """The JSON every adapter answers a turn with (HTTP, MCP; docs/api.md)."""
        return {
            "ingest": self.ingest.to_dict(),
            "compaction": self.compaction.to_dict() if self.compaction else None,
            "context_tokens": self.context_tokens,
            "error": self.error,
            "decision": self.decision.to_dict() if self.decision else None,
        }


def require_budget(value: object) -> None:
    if type(value) is not int or value < 1:
        raise InputError(f"token_budget must be a positive integer, got {value!r}")


def require_observed(value: object) -> None:
    if value is not None and (type(value) is not int or value < 0):
        raise InputError(f"observed_tokens must be a non-negative integer (the host's prompt size), got {value!r}")


class CompactionPolicy:
    """When to compact and how far: the budget clamp, the trigger, and full-then-until-under."""

    def __init__(self, compactor: Compactor, config: Config) -> None:
        self.compactor = compactor
        self.config = config

    def clamp(self, token_budget: int) -> int:
        """The budget assembly and compaction work to: the host's, capped by ``max_assembly_token_budget``."""
        return min(token_budget, self.config.max_assembly_token_budget or token_budget)

    def decide(
        self, entries: Sequence[ContextEntry], token_budget: int, observed_tokens: int | None
    ) -> CompactionDecision:
        """The trigger's decision for a context (``entries``, read once by the caller)."""
        budget = self.clamp(token_budget)
        tail_cap = tail_token_cap(budget, self.config.fresh_tail_max_tokens)
        return decide(
            entries,
            budget=budget,
            config=self.config,
            needs_leaf_pass=self.compactor.needs_leaf_pass(entries, tail_cap),
            observed_tokens=observed_tokens,
        )

    async def run(
        self,
        conversation_id: int,
        *,
        mode: Mode,
        trigger: CompactionTrigger,
        target_tokens: int | None = None,
        token_budget: int | None = None,
        session_id: str | None = None,
        progress: Callable[[CompactionResult], Awaitable[None] | None] | None = None,
    ) -> CompactionResult:
        """Compact in ``mode``; a ``full`` pass that leaves the context over ``target_tokens`` goes on until under."""
        tail_cap = (
            None
            if token_budget is None
            else tail_token_cap(self.clamp(token_budget), self.config.fresh_tail_max_tokens)
        )
        result = self.recorded(
            await self.compactor.compact(
                conversation_id,
                mode=mode,
                target_tokens=target_tokens if mode == "until_under" else None,
                trigger=trigger,
                tail_max_tokens=tail_cap,
                progress=progress,
            ),
            session_id,
        )
        if mode == "full" and target_tokens is not None and result.tokens_after > target_tokens:
            result = self.recorded(
                await self.compactor.compact(
                    conversation_id,
                    mode="until_under",
                    target_tokens=target_tokens,
                    trigger=trigger,
                    tail_max_tokens=tail_cap,
                    progress=progress,
                ),
                session_id,
            )
        return result

    @staticmethod
    def recorded(result: CompactionResult, session_id: str | None = None) -> CompactionResult:
        """Record a finished compaction: metrics, and one structured log line (plus one per summary)."""
        record("lcm_compaction_runs", trigger=result.trigger, stop_reason=result.stop_reason)
        for summary in result.summaries:
            record("lcm_summaries_created", kind=summary.kind)
        if not result.summaries:
            return result
        fields = {
            "conversation_id": result.conversation_id,
            "session_id": session_id,
            "compaction_id": result.run_id,
            "trigger_reason": result.trigger,
        }
        for summary in result.summaries:
            log.debug(
                "summary %s created (%s, depth %d)",
                summary.id,
                summary.kind,
                summary.depth,
                extra={**fields, "summary_id": summary.id},
            )
        log.info(
            "compacted conversation %d: %d → %d tokens, %d summaries (%s)",
            result.conversation_id,
            result.tokens_before,
            result.tokens_after,
            len(result.summaries),
            result.stop_reason,
            extra={**fields, "token_before": result.tokens_before, "token_after": result.tokens_after},
        )
        return result


class Turns:
    """The engine's ``ingest``, ``ingest_batch``, ``assemble``, ``after_turn``, ``evaluate`` and ``compact``."""

    def __init__(
        self,
        store: Store,
        config: Config,
        *,
        tokens: TokenCounter,
        counting: RecentCounter,
        zone: tzinfo,
        clock: Callable[[], datetime],
        interceptor: Interceptor,
        conversations: Conversations,
        policy: CompactionPolicy,
        operations: Operations,
        remember: Callable[[IngestResult, str | None], Awaitable[object]],
    ) -> None:
        self.store = store
        self.config = config
        self.tokens = tokens
        self.counting = counting  # interception and the ingest checks share counts
        self.zone = zone
        self.clock = clock
        self.interceptor = interceptor
        self.conversations = conversations
        self.policy = policy
        self.operations = operations
        self.remember = remember
        self._sessions = SessionPolicy(
            config.ignore_session_patterns, config.stateless_session_patterns, config.skip_stateless_sessions
        )
        self._rendered = RenderCache()  # summaries are rendered once, not on every turn
        self._assembly_counts = CountCache(tokens)  # a context is counted once, not on every turn
        self._nonce_key = secrets.token_bytes(16)  # marks real summaries (see lossless.assembly)

    # -------------------------------------------------------------- ingest

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
        reason = self._sessions.write_block_reason(session_key or session_id)
        if reason is not None:
            return IngestResult(None, skipped=len(messages), skip_reason=reason)
        require_text(session_id, "session_id")
        planned = await self.interceptor.plan(messages, scope=file_scope(self.config.agent_id, session_id))
        files = planned.files
        prepared, dropped = prepare_messages(
            planned.messages,  # type: ignore[arg-type]  # non-messages are refused here
            counter=self.counting,
            now=self.clock(),
            max_message_bytes=self.config.max_message_bytes,
            prune_heartbeat_ok=self.config.prune_heartbeat_ok,
        )
        conversation = await self.conversations.for_session(session_id, session_key)
        try:
            result = await self._write(conversation.id, prepared, files)
        except NotFoundError as exc:
            # The cached conversation was deleted meanwhile (``lcm prune``, perhaps by another process):
            # forget it, and store into the session's conversation as it is now (made anew if need be).
            if exc.kind != "conversation" or not self.conversations.forget(conversation.id):
                raise
            conversation = await self.conversations.for_session(session_id, session_key)
            result = await self._write(conversation.id, prepared, files)
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
            conversation.id, result.stored, result.duplicates, dropped, "heartbeat" if dropped else None, repaired
        )

    async def _write(
        self, conversation_id: int, prepared: list[PreparedMessage], files: Sequence[PendingFile]
    ) -> AppendResult:
        return await retry_conflicts(
            lambda: write_batch(self.store, conversation_id, prepared, files, self.interceptor)
        )

    # -------------------------------------------------------------- assembly

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
        require_text(session_id, "session_id")
        require_budget(token_budget)
        if output not in ("openai", "anthropic"):
            raise InputError(f"output must be 'openai' or 'anthropic', got {output!r}")
        budget = self.policy.clamp(token_budget)
        conversation = await self.conversations.find(session_id) if self.config.enabled else None
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
        return hmac.new(self._nonce_key, str(conversation_id).encode(), hashlib.sha256).hexdigest()[:16]

    def _pass_through(self, messages: Sequence[Message], output: OutputFormat, budget: int) -> AssembledContext:
        """The host's own messages, under the same budget rules as a stored context."""
        now = self.clock()
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

    # -------------------------------------------------------------- the turn

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
        require_budget(token_budget)  # a caller's mistake: refused before anything is stored
        try:
            require_observed(observed_tokens)
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
                await self.remember(ingested, session_key)
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
        require_text(session_id, "session_id")
        require_budget(token_budget)
        require_observed(observed_tokens)
        conversation = await self.conversations.find(session_id)
        entries = await self.store.get_context(conversation.id) if conversation is not None else []
        return self.policy.decide(entries, token_budget, observed_tokens)

    async def _maybe_compact(
        self, ingested: IngestResult, token_budget: int, session_id: str, observed_tokens: int | None
    ) -> AfterTurnResult:
        assert ingested.conversation_id is not None
        conversation_id = ingested.conversation_id
        entries = await self.store.get_context(conversation_id)  # the turn's one read of the context
        tokens = sum(e.token_count for e in entries)
        decision = self.policy.decide(entries, token_budget, observed_tokens)
        if not decision.compact or decision.mode is None:
            return AfterTurnResult(ingested, context_tokens=tokens, decision=decision)
        trigger: Literal["threshold"] = "threshold"
        target = decision.target_tokens
        if self.operations.in_background:  # embedded workers compact; the turn only queues the job
            await self.operations.enqueue_compaction(
                conversation_id, reason=trigger, mode=decision.mode, target_tokens=target
            )
            return AfterTurnResult(ingested, None, tokens, decision=decision)
        compaction = await self.policy.run(
            conversation_id,
            mode=decision.mode,
            trigger=trigger,
            target_tokens=target,
            token_budget=token_budget,
            session_id=session_id,
        )
        return AfterTurnResult(ingested, compaction, compaction.tokens_after, decision=decision)

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
        conv = await self.conversations.get(conversation)
        chosen: Mode = mode or ("until_under" if target_tokens is not None else "full" if force else "incremental")
        result = await self.policy.compactor.compact(
            conv.id, mode=chosen, target_tokens=target_tokens, trigger="manual", progress=progress
        )
        return self.policy.recorded(result, conv.session_id)
