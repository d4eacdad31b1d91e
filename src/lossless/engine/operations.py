"""The engine's operations: integrity checks and repairs, retention, the compaction record, background jobs.

Composed into :class:`~lossless.engine.ContextEngine` (which forwards its public methods here).
Everything works through the engine's store, blob store and compaction policy; see
:mod:`lossless.integrity`, :mod:`lossless.retention`, :mod:`lossless.workers` and
:mod:`lossless.observability` for the invariants.  A queued compaction job runs the same policy
as a turn (:class:`~lossless.engine.turn.CompactionPolicy`), after checking it still has work.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import TYPE_CHECKING, get_args

import anyio

from lossless.compaction import Mode
from lossless.config import Config
from lossless.engine.conversations import Conversations
from lossless.errors import InputError, StoreError
from lossless.integrity import (
    IntegrityChecker,
    IntegrityReport,
    RepairOutcome,
    RepairPlan,
    StallCheck,
    plan_repairs,
)
from lossless.observability import record
from lossless.ports import BlobStore, Job, JobQueue, JobReason, JobState, PrunableBlobStore, Store
from lossless.records import CompactionEvent, JSONValue, Summary
from lossless.retention import PrunePlan, PruneResult, plan_prune, require_retention
from lossless.workers import Worker, WorkerSettings

if TYPE_CHECKING:
    from lossless.engine.turn import CompactionPolicy

__all__ = ["Operations"]

log = logging.getLogger("lossless.engine")


class Operations:
    """Integrity, retention, the compaction record and background jobs of one engine."""

    def __init__(
        self,
        store: Store,
        blobs: BlobStore,
        config: Config,
        *,
        conversations: Conversations,
        policy: CompactionPolicy,
        clock: Callable[[], datetime],
        idle_step: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self.store = store
        self.blobs = blobs
        self.config = config
        self.conversations = conversations
        self.policy = policy
        self.compactor = policy.compactor
        self._clock = clock
        self._idle_step = idle_step
        #: The embedded worker while :meth:`background` runs (then ``after_turn`` queues compactions).
        self._background_worker: Worker | None = None

    @property
    def in_background(self) -> bool:
        """Whether :meth:`background` runs an embedded worker (``after_turn`` then queues its compactions)."""
        return self._background_worker is not None

    async def _conversation_id(self, conversation: int | str | None) -> int | None:
        return None if conversation is None else (await self.conversations.get(conversation)).id

    # -------------------------------------------------------------- integrity

    async def check_integrity(self, conversation: int | str | None = None) -> IntegrityReport:
        """Check one conversation of this agent, or (``None``) the whole store; see :mod:`lossless.integrity`."""
        conversation_id = await self._conversation_id(conversation)
        stalls = StallCheck(
            self.config.fresh_tail_count, self.config.fresh_tail_max_tokens, self.config.leaf_chunk_tokens
        )
        report = await IntegrityChecker(self.store, self.blobs, stalls=stalls).run(conversation_id)
        for kind, count in report.counts().items():
            record("lcm_integrity_failures", count, kind=kind)
        if report.problems:
            log.warning(
                "integrity check found %d problems",
                len(report.problems),
                extra={"conversation_id": conversation_id, "problems": report.counts()},
            )
        return report

    async def repair_integrity(self, plan: RepairPlan) -> RepairOutcome:
        """Apply a plan made by :func:`lossless.integrity.plan_repairs` (non-destructive repairs only).

        ``remake_summary`` repairs ask this engine's summarizer (through its compactor).  Context repairs
        run under the conversation's compaction lock and are re-checked inside their transaction.
        """
        checker = IntegrityChecker(self.store, self.blobs, remake=self.compactor.remake, lock=self.compactor.holding)
        return await checker.apply(plan)

    # -------------------------------------------------------------- retention

    async def plan_prune(
        self, *, archived_before: datetime | None = None, conversations: Sequence[int | str] = ()
    ) -> PrunePlan:
        """What an explicit prune would delete: this agent's conversations archived before a time, and/or named ones.

        Reads only.  Carry the plan out with :meth:`prune`.
        """
        if archived_before is None and not conversations:
            raise InputError("say what to prune: archived_before=<time> and/or conversations=[…]")
        if archived_before is not None and archived_before.tzinfo is None:
            raise InputError("archived_before must be timezone-aware (e.g. 2026-01-01T00:00:00+00:00)")
        ids = [(await self.conversations.get(ref)).id for ref in conversations]
        if archived_before is not None:
            ids += await require_retention(self.store).archived_before(self.config.agent_id, archived_before)
        return await plan_prune(self.store, list(dict.fromkeys(ids)))

    async def prune(self, plan: PrunePlan, *, vacuum: bool = True) -> PruneResult:
        """Delete the conversations of ``plan`` with their rows and blobs, then (by default) ``VACUUM``."""
        retention = require_retention(self.store)
        ids = [c.conversation_id for c in plan.delete]
        deleted = await retention.delete_conversations(ids)
        freed = 0
        if isinstance(self.blobs, PrunableBlobStore):
            for conversation_id in ids:
                freed += await self.blobs.remove_conversation(conversation_id)
        self.conversations.clear()
        before = after = None
        if vacuum and deleted:
            before, after = await retention.vacuum()
        log.info(
            "pruned %d conversations",
            deleted,
            extra={"conversation_ids": ids, "messages": plan.messages, "blob_bytes": freed},
        )
        return PruneResult(deleted, plan.messages, freed, before, after)

    async def vacuum(self) -> tuple[int, int]:
        """Give the database file's free pages back to the file system; ``(bytes before, after)``."""
        return await require_retention(self.store).vacuum()

    # -------------------------------------------------------------- the compaction record

    async def summaries(self, conversation: int | str) -> tuple[list[Summary], dict[str, tuple[int | str, ...]]]:
        """All summaries of a conversation (oldest first) and, for each, its sources in order."""
        conv = await self.conversations.get(conversation)
        return await self.store.list_summaries(conv.id), await self.store.get_lineage(conv.id)

    async def compaction_events(self, conversation: int | str, *, limit: int | None = None) -> list[CompactionEvent]:
        """The conversation's compaction passes, oldest first (with ``limit``: the newest ``limit`` of them).

        Each was recorded in the transaction that put its summary in place: who asked (``trigger``),
        the ``mode``, how many context items it replaced, the context's tokens before and after, and
        how long the summary took; ``run_id`` groups the passes of one compaction call.
        """
        if limit is not None and limit < 1:
            raise InputError(f"limit must be a positive whole number, got {limit!r}")
        conv = await self.conversations.get(conversation)
        return await self.store.get_compaction_events(conv.id, limit=limit)

    async def compaction_history(
        self, conversation: int | str, *, limit: int | None = None
    ) -> list[tuple[CompactionEvent, Summary | None]]:
        """:meth:`compaction_events`, each with the summary its pass made (None if it is gone)."""
        events = await self.compaction_events(conversation, limit=limit)
        found = {s.id: s for s in await self.store.get_summaries([e.summary_id for e in events])}
        return [(e, found.get(e.summary_id)) for e in events]

    # -------------------------------------------------------------- background jobs

    async def run_idle_step(self) -> bool:
        """A worker's idle work when no job waits (the engine's search-vector build); False when there is none."""
        return False if self._idle_step is None else await self._idle_step()

    def queue(self) -> JobQueue:
        """The store's job queue (:class:`StoreError` for a store without one)."""
        if not isinstance(self.store, JobQueue):
            raise StoreError(f"the {self.store.backend} store has no job queue; run compaction directly")
        return self.store

    async def jobs(self, *, state: JobState | None = None, limit: int = 100) -> list[Job]:
        """The store's background jobs, newest first (``state``: only those in it)."""
        if state is not None and state not in get_args(JobState):
            raise InputError(f"state must be one of {', '.join(get_args(JobState))}, got {state!r}")
        return await self.queue().list_jobs(state=state, limit=limit)

    async def enqueue_compaction(
        self,
        conversation: int | str,
        *,
        reason: JobReason = "manual",
        mode: Mode = "incremental",
        target_tokens: int | None = None,
    ) -> Job:
        """Queue a compaction job for a worker (an equal job already waiting is returned instead)."""
        if mode not in ("incremental", "full", "until_under"):
            raise InputError(f"mode must be incremental, full or until_under, got {mode!r}")
        if target_tokens is not None and (type(target_tokens) is not int or target_tokens < 0):
            raise InputError(f"target_tokens must be a non-negative integer, got {target_tokens!r}")
        conv = await self.conversations.get(conversation)
        return await self.queue().enqueue_job(
            "compaction",
            reason=reason,
            conversation_id=conv.id,
            mode=mode,
            target_tokens=target_tokens,
            requested_at=self._clock(),
        )

    async def enqueue_integrity(
        self, conversation: int | str | None = None, *, mode: str = "scan", reason: JobReason = "maintenance"
    ) -> Job:
        """Queue an integrity check (``scan``, or ``scan_and_plan`` to also record the repair plan)."""
        if mode not in ("scan", "scan_and_plan"):
            raise InputError(f"mode must be 'scan' or 'scan_and_plan', got {mode!r}")
        conversation_id = await self._conversation_id(conversation)
        return await self.queue().enqueue_job(
            "integrity", reason=reason, conversation_id=conversation_id, mode=mode, requested_at=self._clock()
        )

    async def run_compaction_job(self, job: Job) -> JSONValue:
        """Run a compaction job (for :class:`~lossless.workers.Worker`): recompute pressure, compact, record."""
        assert job.conversation_id is not None
        conversation = await self.store.get_conversation(job.conversation_id)
        if conversation is None:
            return {"skipped": "the conversation no longer exists"}
        mode: Mode = job.mode if job.mode in ("incremental", "full", "until_under") else "incremental"  # type: ignore[assignment]
        target = job.target_tokens
        if job.reason == "threshold":
            # Queued by a trigger: the context may have changed since (another pass, a manual compact).
            stale = await self._stale_job_reason(conversation.id, mode, target)
            if stale is not None:
                return {"skipped": stale}
        result = await self.policy.run(
            conversation.id, mode=mode, trigger=job.reason, target_tokens=target, session_id=conversation.session_id
        )
        return {
            "stop_reason": result.stop_reason,
            "tokens_before": result.tokens_before,
            "tokens_after": result.tokens_after,
            "summaries": len(result.summaries),
        }

    async def _stale_job_reason(self, conversation_id: int, mode: Mode, target: int | None) -> str | None:
        """Why a trigger's queued job has nothing left to do now, or None when it still has."""
        entries = await self.store.get_context(conversation_id)
        tokens = sum(e.token_count for e in entries)
        if target is not None:
            if tokens > target:
                return None
            return f"the context is already under the threshold ({tokens:,} <= {target:,} tokens)"
        if mode == "incremental":
            if self.compactor.needs_leaf_pass(entries):
                return None
            return "no trigger fires any more: raw history outside the fresh tail is under leaf_chunk_tokens"
        active = sum(1 for e in entries if e.kind == "message" and e.role != "system")
        limit = self.config.max_active_messages
        if limit is not None and active <= limit:
            return f"the context holds {active:,} raw messages, not more than max_active_messages ({limit:,})"
        return None

    async def run_integrity_job(self, job: Job) -> JSONValue:
        """Run an integrity job: check, and with ``scan_and_plan`` record the plan (never applied here)."""
        report = await IntegrityChecker(self.store, self.blobs).run(job.conversation_id)
        for kind, count in report.counts().items():
            record("lcm_integrity_failures", count, kind=kind)
        out: dict[str, JSONValue] = {"ok": report.ok, "problem_counts": dict(report.counts())}
        if job.mode == "scan_and_plan":
            out["plan"] = plan_repairs(report).to_dict()
        if not report.ok:
            log.warning("integrity job %d found %d problems", job.id, len(report.problems), extra={"job_id": job.id})
        return out

    def worker(self, settings: WorkerSettings | None = None, *, owner: str | None = None) -> Worker:
        """A :class:`~lossless.workers.Worker` running this engine's jobs (settings default to the config's)."""
        settings = settings or WorkerSettings(
            lease_ms=self.config.worker_lease_ms,
            poll_ms=self.config.worker_poll_ms,
            max_attempts=self.config.worker_max_attempts,
        )
        return Worker(self.queue(), self, settings, owner=owner)

    @asynccontextmanager
    async def background(self, settings: WorkerSettings | None = None) -> AsyncIterator[Worker]:
        """Run an embedded worker while the block runs; ``after_turn`` then queues its compactions.

        ``async with engine.background(): …``.  On exit the worker stops claiming, lets the running
        job finish within its grace period, and gives it back to the queue otherwise.
        """
        if self._background_worker is not None:
            raise InputError("background() is already running for this engine")
        worker = self.worker(settings)
        stop = anyio.Event()
        self._background_worker = worker
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(worker.run, stop)
                try:
                    yield worker
                finally:
                    stop.set()
        finally:
            self._background_worker = None
