"""Integrity checks and repairs beside a live writer, CI size (the full run: ``python -m tests.stress.doctor_race``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import BACKENDS, backend_url
from .stress.doctor_race import race

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_doctor_beside_a_live_writer_never_cries_wolf_nor_corrupts(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    url = backend_url(request, backend, tmp_path, "race")
    database: Path | str = tmp_path / "race.db" if backend == "sqlite" else url
    run = await race(database, 160)
    assert run.checks >= 3  # the loop really ran beside the writer
    assert run.writer_errors == 0
    assert run.false_alarms == 0, run.alarm_kinds
    assert run.final_problems == 0
