"""The background job queue port: compaction and integrity jobs, claimed by workers under a lease.

A job is handed to one worker at a time; an expired lease lets another claim it again, up to a
number of attempts; a conversation's jobs run one at a time, in the order they were queued (the
contract is :class:`JobQueue`'s docstring).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from lossless.records import (
    CompactionTrigger,
    JSONValue,
)

__all__ = [
    "Job",
    "JobKind",
    "JobQueue",
    "JobReason",
    "JobState",
]


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
