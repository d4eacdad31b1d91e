"""Shared fixtures.

* Every test runs with a clean environment: no ``LCM_*`` or ``TZ`` variables and
  per-user folders pointing into the test's temporary directory, so a
  developer's own configuration or database can never leak in.
* ``corpus`` is the real transcript corpus in ``../shared/corpus``.  Where it is
  absent (a user's checkout) the tests that need it skip with the reason; in CI
  (``CI`` or ``LCM_CI`` set) a skip of any kind is turned into a failure, so
  nothing can silently stop running there.
* ``store`` is parametrized by backend: every contract test runs against each.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lossless.config import Config
from lossless.engine import ContextEngine
from lossless.ports import Store
from lossless.stores import open_store

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
CORPUS = (ROOT.parent / "shared" / "corpus").resolve()
IN_CI = bool(os.environ.get("CI") or os.environ.get("LCM_CI"))


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("LCM_") or name == "TZ":
            monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"the shared transcript corpus is not present at {CORPUS}")
    return CORPUS


def corpus_transcripts() -> list[Path]:
    """Every transcript file of the corpus (empty where the corpus is absent)."""
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.rglob("*") if p.suffix in (".jsonl", ".traj") and p.is_file())


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport | None:
    """In CI, a skipped test is a failed test: nothing may silently stop running."""
    if not IN_CI:
        return None
    report = pytest.TestReport.from_item_and_call(item, call)
    if report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, which is not allowed: {report.longrepr}"
    return report


BACKENDS = ["sqlite"]


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    backend = request.param
    if backend == "sqlite":
        opened = await open_store(f"sqlite:///{tmp_path / 'store.db'}")
    else:  # pragma: no cover - other backends join later
        raise AssertionError(backend)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return Config(database_url=f"sqlite:///{tmp_path / 'engine.db'}", data_dir=tmp_path / "data")


@pytest.fixture
async def engine(config: Config) -> AsyncIterator[ContextEngine]:
    opened = await ContextEngine.open(config=config)
    try:
        yield opened
    finally:
        await opened.dispose()
