"""retry_conflicts: only lost races are retried, a bounded number of times."""

from __future__ import annotations

import pytest

from lossless.errors import ConflictError, InputError
from lossless.retries import retry_conflicts

pytestmark = pytest.mark.anyio


async def test_a_conflict_is_retried_until_the_write_succeeds() -> None:
    calls: list[int] = []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConflictError("lost a race")
        return "stored"

    assert await retry_conflicts(flaky, base_delay=0) == "stored"
    assert len(calls) == 3


async def test_the_last_conflict_reaches_the_caller() -> None:
    calls: list[int] = []

    async def always() -> None:
        calls.append(1)
        raise ConflictError("still locked")

    with pytest.raises(ConflictError, match="still locked"):
        await retry_conflicts(always, attempts=3, base_delay=0)
    assert len(calls) == 3


async def test_other_errors_are_not_retried() -> None:
    calls: list[int] = []

    async def bad() -> None:
        calls.append(1)
        raise InputError("bad input")

    with pytest.raises(InputError):
        await retry_conflicts(bad, base_delay=0)
    assert len(calls) == 1
