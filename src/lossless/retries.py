"""Bounded retry of store writes that lost a race with another writer.

Invariants:

* Only :class:`~lossless.errors.ConflictError` is retried: the store promises that a call which
  raises it wrote nothing, so running it again cannot duplicate anything (and ingest is idempotent
  by ``event_key`` besides).
* At most ``attempts`` tries, with jittered exponential backoff between them; the last conflict,
  and any other error, propagate unchanged.  Cancellation is never swallowed.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from lossless.errors import ConflictError

__all__ = ["CONFLICT_ATTEMPTS", "retry_conflicts"]

T = TypeVar("T")

#: Tries of a write that keeps losing races before its ConflictError reaches the caller.
CONFLICT_ATTEMPTS = 4


async def retry_conflicts(
    operation: Callable[[], Awaitable[T]], *, attempts: int = CONFLICT_ATTEMPTS, base_delay: float = 0.02
) -> T:
    """``await operation()``, again after a short pause when it raises :class:`ConflictError`."""
    for attempt in range(1, attempts + 1):
        try:
            return await operation()
        except ConflictError:
            if attempt == attempts:
                raise
            await anyio.sleep(base_delay * 2 ** (attempt - 1) * (0.5 + random.random()))
    raise AssertionError("unreachable")  # pragma: no cover
