"""Crash and concurrency proof, CI size: a few kill -9 rounds and a few concurrent writers on one file.

The full run (at least 100 kills) is ``python -m tests.stress.crash``; see tests/stress/crash.py.
"""

from __future__ import annotations

from pathlib import Path

from .stress.crash import concurrent_writers, kill_rounds, verify


def test_kill_9_during_ingest_and_compaction_loses_nothing(tmp_path: Path) -> None:
    database = tmp_path / "crash.db"
    outcome = verify(database, kill_rounds(database, 3, seed=7, max_delay=0.6))
    assert outcome.kills == 3 and outcome.acknowledged
    assert outcome.lost == [] and outcome.duplicates == [] and outcome.problems == []


def test_concurrent_processes_on_one_file(tmp_path: Path) -> None:
    database = tmp_path / "shared.db"
    outcome = verify(database, concurrent_writers(database, 3, 45))
    assert len(outcome.acknowledged) == 3 * 45
    assert outcome.lost == [] and outcome.duplicates == [] and outcome.problems == []
