"""Background workers: claim jobs from the store's queue, run them under a renewed lease, record the outcome.

The same :class:`Worker` runs embedded (``ContextEngine.background()``, as a task in the host's
event loop) and as a process of its own (``lcm worker``); several of either may serve one store.

Invariants:

* **One job per conversation at a time.**  The queue never hands out a job for a conversation
  that has one running under a live lease (see :class:`~lossless.ports.JobQueue`); compaction's
  own check of the context range it replaces keeps it safe even if a lease is lost mid-way.
* **Leases.**  While a job runs, its lease is renewed every third of ``lease_ms``.  If renewal
  fails (another worker took the job after the lease expired), the job is cancelled here.  A
  worker that dies leaves its job to be claimed again once the lease expires, up to
  ``max_attempts`` claims.
* **Errors never stop a worker.**  A job that raises is recorded as failed (queued again while
  attempts remain); the loop goes on.
* **Graceful stop.**  When ``stop`` is set the worker claims nothing more; the running job gets
  ``grace_s`` to finish, then it is cancelled (every store write is a transaction, rolled back on
  cancellation) and given back to the queue, this attempt not counted.
* **Idle time builds search vectors.**  With no job to claim, the worker runs one step of the
  runner's ``run_idle_step`` (the engine's search-vector build: a batch of embeddings) before it
  waits; jobs always come first, one step is about a second.
* No I/O of its own beyond the ports; time comes from ``clock`` (epoch seconds).
"""

from __future__ import annotations

import logging
import math
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import anyio

from lossless.observability import record
from lossless.ports import Job, JobQueue
from lossless.records import JSONValue

__all__ = ["JobRunner", "Worker", "WorkerSettings", "worker_id"]

log = logging.getLogger("lossless.worker")


class JobRunner(Protocol):
    """What runs the work of a job (the engine): each returns a JSON summary of what it did."""

    async def run_compaction_job(self, job: Job) -> JSONValue: ...

    async def run_integrity_job(self, job: Job) -> JSONValue: ...


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    lease_ms: int = 300_000
    poll_ms: int = 1000
    max_attempts: int = 5
    grace_s: float = 30.0


def worker_id() -> str:
    """``host:pid:random``: unique per worker, readable in ``lcm jobs``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class _LeaseLost(Exception):
    pass


def _innermost(exc: BaseException) -> BaseException:
    """The first real exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        lost = [e for e in exc.exceptions if isinstance(e, _LeaseLost)]
        exc = lost[0] if lost else exc.exceptions[0]
    return exc


class Worker:
    """Runs queued jobs until stopped (see the module docstring)."""

    def __init__(
        self,
        queue: JobQueue,
        runner: JobRunner,
        settings: WorkerSettings | None = None,
        *,
        owner: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.queue = queue
        self.runner = runner
        self.settings = settings or WorkerSettings()
        self.owner = owner or worker_id()
        self.clock = clock
        self.done = 0
        self.failed = 0
        self.current: Job | None = None

    def _now_ms(self) -> int:
        return math.floor(self.clock() * 1000)

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    async def run(self, stop: anyio.Event, *, once: bool = False) -> int:
        """Claim and run jobs until ``stop`` is set (or, with ``once``, until the queue is empty)."""
        log.info("worker %s started", self.owner, extra={"worker": self.owner})
        while not stop.is_set():
            try:
                job = await self.queue.claim_job(
                    self.owner,
                    lease_ms=self.settings.lease_ms,
                    now_ms=self._now_ms(),
                    max_attempts=self.settings.max_attempts,
                )
            except Exception as exc:  # a locked or unreachable store: wait and try again
                log.warning("worker %s could not claim a job: %s", self.owner, exc)
                job = None
            if job is None:
                if once:
                    break
                if await self._idle_work():
                    continue
                with anyio.move_on_after(self.settings.poll_ms / 1000):
                    await stop.wait()
                continue
            await self._run_job(job, stop)
        log.info("worker %s stopped after %d jobs", self.owner, self.done + self.failed, extra={"worker": self.owner})
        return self.done

    async def _idle_work(self) -> bool:
        """One step of the runner's background work (the search-vector build) when no job waits.

        Returns whether it did something (then the worker looks for a job again at once).  Its
        errors never stop the worker: it is logged, and the worker waits its poll interval.
        """
        step = getattr(self.runner, "run_idle_step", None)
        if step is None:
            return False
        try:
            return bool(await step())
        except Exception as exc:
            log.warning("worker %s: background step failed: %s", self.owner, exc, extra={"worker": self.owner})
            return False

    async def _run_job(self, job: Job, stop: anyio.Event) -> None:
        self.current = job
        outcome: str = "done"
        result: JSONValue = None
        error: str | None = None
        fields: dict[str, object] = {"job_id": job.id, "job_kind": job.kind, "conversation_id": job.conversation_id,
                  "trigger_reason": job.reason, "worker": self.owner}  # fmt: skip
        try:
            async with anyio.create_task_group() as group:
                holder: dict[str, JSONValue] = {}

                async def work() -> None:
                    holder["result"] = await self._execute(job)
                    group.cancel_scope.cancel()  # stops the lease and stop watchers

                group.start_soon(self._keep_lease, job)
                group.start_soon(self._watch_stop, stop, group.cancel_scope)
                group.start_soon(work)
            if "result" in holder:
                result = holder["result"]
            else:
                outcome = "released"
        except Exception as exc:
            inner = _innermost(exc)
            if isinstance(inner, _LeaseLost):
                outcome = "lease_lost"
            else:
                outcome, error = "failed", f"{type(inner).__name__}: {inner}"
        finally:
            self.current = None
        with anyio.CancelScope(shield=True):
            await self._record(job, outcome, result, error, fields)

    async def _record(
        self, job: Job, outcome: str, result: JSONValue, error: str | None, fields: dict[str, object]
    ) -> None:
        try:
            if outcome == "done":
                await self.queue.finish_job(job.id, self.owner, ok=True, result=result, finished_at=self._now())
                self.done += 1
                log.info("job %d (%s) done", job.id, job.kind, extra=fields)
            elif outcome == "failed":
                retry = job.attempts < self.settings.max_attempts
                await self.queue.finish_job(
                    job.id, self.owner, ok=False, error=error, retry=retry, finished_at=self._now()
                )
                self.failed += 1
                log.error("job %d (%s) failed%s: %s", job.id, job.kind, ", will retry" if retry else "", error,
                          extra=fields)  # fmt: skip
            elif outcome == "released":
                await self.queue.release_job(job.id, self.owner)
                log.info("job %d (%s) given back unfinished at shutdown", job.id, job.kind, extra=fields)
            else:
                log.warning("job %d (%s) lost its lease; another worker has it", job.id, job.kind, extra=fields)
        except Exception as exc:  # the lease will expire and the job be retried
            log.error("could not record the outcome of job %d: %s", job.id, exc, extra=fields)
        record("lcm_jobs", kind=job.kind, outcome=outcome)

    async def _execute(self, job: Job) -> JSONValue:
        if job.kind == "compaction":
            return await self.runner.run_compaction_job(job)
        return await self.runner.run_integrity_job(job)

    async def _keep_lease(self, job: Job) -> None:
        every = self.settings.lease_ms / 3000
        while True:
            await anyio.sleep(every)
            try:
                kept = await self.queue.renew_job(
                    job.id, self.owner, lease_ms=self.settings.lease_ms, now_ms=self._now_ms()
                )
            except Exception as exc:  # keep going: the lease may still hold
                log.warning("could not renew the lease of job %d: %s", job.id, exc)
                continue
            if not kept:
                raise _LeaseLost

    async def _watch_stop(self, stop: anyio.Event, scope: anyio.CancelScope) -> None:
        await stop.wait()
        with anyio.move_on_after(self.settings.grace_s):
            await anyio.sleep_forever()
        scope.cancel()
