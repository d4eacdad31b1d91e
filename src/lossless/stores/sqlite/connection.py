"""One SQLite store: a writer connection, a pool of readers, transactions, and the search index thread.

Invariants:

* **The event loop never waits on SQLite.**  A small write (one short
  transaction, the common case of ingesting a message) runs inline: it takes
  well under a millisecond, less than a hand-off to a worker thread would
  cost.  Anything that could take long runs in a worker thread: big batches
  (``heavy=True``), every statement of an ``atomic()`` block, every read, and
  any write that finds another *process* holding the write lock (the inline
  attempt never waits: it uses a zero busy timeout and falls back to a thread
  that does).  The writer never checkpoints the WAL on commit; the index
  thread does, in the background, without waiting for or blocking writers.
  Such a checkpoint cannot make the WAL start over while writes keep coming,
  so when the index thread finds the WAL long (``restart_due``, see
  :mod:`.index`), the next write, still holding the write lock after it
  committed, runs a ``RESTART`` checkpoint in a worker thread: it has little
  left to copy and waits for no one (a reader still in the WAL makes it give
  up until the next time), and the WAL file stays bounded during a sustained
  burst.
* **Writes are serialised** in this process by an ``anyio.Lock`` and across
  processes by ``BEGIN IMMEDIATE``; a write that cannot get the lock within
  ``busy_timeout_ms`` raises :class:`ConflictError` having written nothing.
* **Each write call is atomic**: its own transaction, or, inside
  :meth:`Database.atomic`, a savepoint of the enclosing transaction.  A
  transaction that is cancelled is rolled back (shielded from the
  cancellation); a statement that is running is never abandoned half-way.
* **Reads** run on reader connections inside a read transaction (one
  consistent snapshot per call) and never wait for writers (WAL).  Inside
  ``atomic()`` the owning task reads through the writer and sees its own
  uncommitted rows.  Inside :meth:`Database.snapshot` every read of the
  owning task runs in one read transaction on one reader connection, so a
  series of reads (an integrity check) sees one consistent state of the file.
  Reader connections have the search index attached as ``idx``.
* **Durability**: WAL with ``synchronous=NORMAL`` by default, so a committed
  transaction survives a crash of the process (kill -9); ``synchronous=FULL``
  also survives power loss.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread

from lossless.errors import ConflictError, InputError, SchemaError, StoreError
from lossless.records import format_timestamp, utcnow
from lossless.stores.sqlite.index import Rewritten, SearchIndex, indexed_text_sql
from lossless.stores.sqlite.schema import MIGRATIONS

__all__ = ["Database"]

T = TypeVar("T")


@dataclass(slots=True)
class _Transaction:
    database: Database
    owner: int


_CURRENT: contextvars.ContextVar[_Transaction | None] = contextvars.ContextVar("lossless_sqlite_tx", default=None)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    database: Database
    owner: int
    connection: sqlite3.Connection


_SNAPSHOT: contextvars.ContextVar[_Snapshot | None] = contextvars.ContextVar("lossless_sqlite_snap", default=None)


class _Busy(Exception):
    """The inline write found another process holding the write lock."""


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class Database:
    """Connections to one SQLite store, with the threading and transaction rules above."""

    def __init__(
        self,
        path: Path,
        *,
        synchronous: str = "normal",
        busy_timeout_ms: int = 10_000,
        readers: int = 4,
    ) -> None:
        self.path = path
        self._synchronous = synchronous.upper()
        self._busy_timeout_ms = busy_timeout_ms
        self._writer: sqlite3.Connection | None = None
        self._write_lock = anyio.Lock(fast_acquire=True)
        self._reader_slots = anyio.Semaphore(readers)
        self._free_readers: list[sqlite3.Connection] = []
        self._all_readers: list[sqlite3.Connection] = []
        self._savepoints = itertools.count(1)
        self._closed = False
        self.index: SearchIndex | None = None

    # -- lifecycle

    def _connect(self, *, busy_timeout_ms: int) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the SQLite database {str(self.path)!r}: {exc}") from exc
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute("PRAGMA cache_size = -16000")
        # The memory word index's triggers (migration 125) index each text with its identifiers' words.
        conn.create_function("lcm_indexed_text", 1, indexed_text_sql, deterministic=True)
        return conn

    def _connect_reader(self) -> sqlite3.Connection:
        conn = self._connect(busy_timeout_ms=self._busy_timeout_ms)
        if self.index is not None:
            conn.execute("ATTACH DATABASE ? AS idx", (str(self.index.path),))
        return conn

    async def open(self) -> None:
        """Create the file if needed, switch it to WAL, bring its schema up to date, start indexing."""

        def setup() -> sqlite3.Connection:
            self.path = self.path.expanduser()
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the database folder {str(self.path.parent)!r}: {exc}") from exc
            conn = self._connect(busy_timeout_ms=self._busy_timeout_ms)
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                _migrate(conn, self._busy_timeout_ms)
                conn.execute("PRAGMA wal_autocheckpoint = 0")  # the index thread checkpoints instead
                conn.execute("PRAGMA busy_timeout = 0")  # inline writes never wait; see write()
                index = SearchIndex(
                    self.path, synchronous=self._synchronous, connect_timeout=self._busy_timeout_ms / 1000
                )
                index.prepare()
                self.index = index
            except BaseException:
                conn.close()
                raise
            return conn

        try:
            self._writer = await anyio.to_thread.run_sync(setup)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{str(self.path)!r} is not a usable SQLite database: {exc}") from exc
        assert self.index is not None
        self.index.start()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        async with self._write_lock:
            writer, self._writer = self._writer, None
            readers, self._all_readers, self._free_readers = self._all_readers, [], []
            index = self.index

            def shut() -> None:
                if index is not None:
                    index.settle()  # what was committed is indexed before the process may end
                    index.stop()
                for conn in readers:
                    conn.close()
                if writer is not None:
                    with contextlib.suppress(sqlite3.Error):
                        writer.execute("PRAGMA optimize")
                    writer.close()

            await anyio.to_thread.run_sync(shut)

    # -- running statements

    def _writer_conn(self) -> sqlite3.Connection:
        if self._writer is None:
            raise StoreError("the store is closed")
        return self._writer

    def _own_transaction(self) -> _Transaction | None:
        tx = _CURRENT.get()
        if tx is not None and tx.database is self and tx.owner == anyio.get_current_task().id:
            return tx
        return None

    def _written(self) -> None:
        if self.index is not None:
            self.index.kick()

    async def write(self, fn: Callable[[sqlite3.Connection], T], *, heavy: bool = False) -> T:
        """Run ``fn(connection)`` as one atomic write (see the module invariants for where it runs)."""
        try:
            if self._own_transaction() is not None:
                return await anyio.to_thread.run_sync(self._in_savepoint, fn)
            async with self._write_lock:
                conn = self._writer_conn()
                if not heavy:
                    try:
                        result = _in_transaction(conn, fn, wait_ms=0)
                    except _Busy:
                        pass  # another process is writing: wait for it in a worker thread
                    else:
                        self._written()
                        if self.index is not None and self.index.restart_due:
                            await self._restart_wal(conn)
                        return result
                result = await anyio.to_thread.run_sync(_in_transaction, conn, fn, self._busy_timeout_ms)
                self._written()
                if self.index is not None and self.index.restart_due:
                    await self._restart_wal(conn)
                return result
        except sqlite3.Error as exc:
            raise _translate(exc) from exc
        except UnicodeEncodeError as exc:
            raise InputError(
                f"text with invalid Unicode (a lone surrogate at position {exc.start}) cannot be stored; "
                "nothing was written"
            ) from exc
        except OverflowError as exc:
            raise InputError(f"a number is beyond a signed 64-bit integer ({exc}); nothing was written") from exc

    async def _restart_wal(self, conn: sqlite3.Connection) -> None:
        """Make the WAL start over (the caller holds the write lock and has committed; see the invariants)."""
        assert self.index is not None
        try:
            with anyio.CancelScope(shield=True):  # the write it follows has committed: its result must get back
                await anyio.to_thread.run_sync(_restart_wal, conn)
        finally:
            self.index.wal_restarted()

    def _in_savepoint(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._writer_conn()
        if not conn.in_transaction:
            raise StoreError(_LOST_TRANSACTION)
        name = f"lcm_sp{next(self._savepoints)}"
        conn.execute(f"SAVEPOINT {name}")
        try:
            result = fn(conn)
        except BaseException:
            _rollback_to(conn, name)
            raise
        conn.execute(f"RELEASE {name}")
        return result

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(connection)`` against one consistent snapshot, in a worker thread."""
        try:
            if self._own_transaction() is not None:
                return await anyio.to_thread.run_sync(fn, self._writer_conn())
            snap = _SNAPSHOT.get()
            if snap is not None and snap.database is self and snap.owner == anyio.get_current_task().id:
                return await anyio.to_thread.run_sync(fn, snap.connection)
            return await self._read_pooled(fn)
        except sqlite3.Error as exc:
            raise _translate(exc) from exc
        except UnicodeEncodeError as exc:  # a lookup by a text no row can hold
            raise InputError(f"invalid Unicode (a lone surrogate at position {exc.start}) in a lookup") from exc
        except OverflowError as exc:  # a lookup by a number no column can hold
            raise InputError(f"a number is beyond a signed 64-bit integer ({exc})") from exc

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[None]:
        """Every read the current task makes inside the block sees one consistent state (one read transaction)."""
        snap = _SNAPSHOT.get()
        owner = anyio.get_current_task().id
        if self._own_transaction() is not None or (snap is not None and snap.database is self and snap.owner == owner):
            yield
            return
        async with self._reader_slots:
            conn = self._free_readers.pop() if self._free_readers else None
            if conn is None:
                if self._closed:
                    raise StoreError("the store is closed")
                conn = await anyio.to_thread.run_sync(self._connect_reader)
                self._all_readers.append(conn)

            def begin() -> None:
                conn.execute("BEGIN")
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the snapshot starts here

            try:
                try:
                    await anyio.to_thread.run_sync(begin)
                except sqlite3.Error as exc:
                    raise _translate(exc) from exc
                token = _SNAPSHOT.set(_Snapshot(self, owner, conn))
                try:
                    yield
                finally:
                    _SNAPSHOT.reset(token)
                    with anyio.CancelScope(shield=True):
                        await anyio.to_thread.run_sync(_end_read, conn)
            finally:
                if self._closed:
                    conn.close()
                else:
                    self._free_readers.append(conn)

    async def _read_pooled(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        async with self._reader_slots:
            conn = self._free_readers.pop() if self._free_readers else None
            if conn is None:
                if self._closed:
                    raise StoreError("the store is closed")
                conn = await anyio.to_thread.run_sync(self._connect_reader)
                self._all_readers.append(conn)
            try:
                return await anyio.to_thread.run_sync(_in_read_transaction, conn, fn)
            finally:
                if self._closed:
                    conn.close()
                else:
                    self._free_readers.append(conn)

    @asynccontextmanager
    async def atomic(self) -> AsyncIterator[None]:
        """One transaction for every store call the current task makes inside the block."""
        if self._own_transaction() is not None:
            name = f"lcm_sp{next(self._savepoints)}"
            conn = self._writer_conn()
            await anyio.to_thread.run_sync(conn.execute, f"SAVEPOINT {name}")
            try:
                yield
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(_rollback_to, conn, name)
                raise
            await anyio.to_thread.run_sync(conn.execute, f"RELEASE {name}")
            return
        async with self._write_lock:
            conn = self._writer_conn()
            await anyio.to_thread.run_sync(_begin_immediate, conn, self._busy_timeout_ms)
            token = _CURRENT.set(_Transaction(self, anyio.get_current_task().id))
            try:
                yield
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(_abandon, conn)
                raise
            else:
                if not conn.in_transaction:
                    raise StoreError(_LOST_TRANSACTION)
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(_commit, conn)
                self._written()
            finally:
                _CURRENT.reset(token)

    async def rewrite(self, source: str, fn: Callable[[sqlite3.Connection], list[Rewritten]]) -> list[Rewritten]:
        """Run ``fn`` as one write that changes indexed rows of ``source`` in place; the index follows.

        ``fn`` returns ``(key, content before, content after)`` for each row it changed.  The index's
        write lock is held from before the write until the index agrees (see :mod:`.index`); if the
        index cannot be updated after the write committed, it is rebuilt.
        """
        if self._own_transaction() is not None:
            raise InputError("rows cannot be rewritten inside atomic(); nothing was written")
        index = self.index
        if index is None:
            return await self.write(fn)
        lock = await anyio.to_thread.run_sync(index.lock_for_rewrite)
        try:
            changed = await self.write(fn)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(index.finish_rewrite, lock, source, [])
            raise
        with anyio.CancelScope(shield=True):
            try:
                await anyio.to_thread.run_sync(index.finish_rewrite, lock, source, changed)
            except sqlite3.Error:
                await anyio.to_thread.run_sync(index.rebuild)  # the index is derived: start it over
        return changed

    async def wait_indexed(self) -> None:
        """Wait until the search index covers everything committed so far (tests, benchmarks, tools)."""
        index = self.index
        if index is None:
            return
        while not await anyio.to_thread.run_sync(index.wait_idle, 0.5):
            if index.failure is not None:
                break
        if index.failure is not None:
            raise StoreError(f"the search index thread failed: {index.failure}") from index.failure

    async def vacuum(self) -> tuple[int, int]:
        """``VACUUM`` the main file (under the write lock, outside any transaction); ``(bytes before, after)``."""
        if self._own_transaction() is not None:
            raise InputError("VACUUM cannot run inside atomic()")

        def run(conn: sqlite3.Connection) -> tuple[int, int]:
            def size() -> int:
                page_size = conn.execute("PRAGMA page_size").fetchone()[0]
                return int(page_size * conn.execute("PRAGMA page_count").fetchone()[0])

            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            try:
                # optimize first and measure after it: the statistics it may add (sqlite_stat1, a
                # page or two) are not what VACUUM reclaims, and the figures say what VACUUM did.
                conn.execute("PRAGMA optimize")
                before = size()
                conn.execute("VACUUM")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                conn.execute("PRAGMA busy_timeout = 0")
            return before, size()

        try:
            async with self._write_lock:
                return await anyio.to_thread.run_sync(run, self._writer_conn())
        except sqlite3.Error as exc:
            raise _translate(exc) from exc


_LOST_TRANSACTION = (
    "SQLite rolled back this atomic() block's transaction after an error inside it (a full disk?): "
    "nothing in it was written"
)
#: SQLite's result code for a full disk (or a database at its max_page_count).
_SQLITE_FULL = 13


def _translate(exc: sqlite3.Error) -> StoreError:
    if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
        return ConflictError("the database is locked by another writer; nothing was written, try again")
    if _is_full(exc):
        return StoreError(
            f"the disk is full (SQLite: {exc}): this write was not stored, and nothing stored before it was "
            "lost; free some space (or run `lcm prune` / `lcm vacuum`) and try again"
        )
    return StoreError(f"SQLite error: {exc}")


def _is_full(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return (code is not None and code & 0xFF == _SQLITE_FULL) or "disk is full" in str(exc)


def _abandon(conn: sqlite3.Connection) -> None:
    """Roll back the open transaction, if SQLite has not already (it does on a full disk, among others)."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _begin_immediate(conn: sqlite3.Connection, wait_ms: int) -> None:
    """``BEGIN IMMEDIATE``, waiting up to ``wait_ms`` for another process's write lock."""
    if wait_ms:
        conn.execute(f"PRAGMA busy_timeout = {int(wait_ms)}")
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if _is_busy(exc):
            if not wait_ms:
                raise _Busy from exc
            raise ConflictError(
                "another process holds the database write lock; nothing was written, try again"
            ) from exc
        raise StoreError(f"cannot start a write transaction: {exc}") from exc
    finally:
        if wait_ms:
            conn.execute("PRAGMA busy_timeout = 0")


def _commit(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        _abandon(conn)
        if _is_full(exc):
            raise _translate(exc) from exc
        raise StoreError(f"commit failed, nothing was written: {exc}") from exc


def _restart_wal(conn: sqlite3.Connection) -> None:
    """``RESTART`` checkpoint on the writer, which waits for nothing (its busy timeout is 0)."""
    with contextlib.suppress(sqlite3.OperationalError):  # another process writing, a reader in the WAL
        conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()


def _rollback_to(conn: sqlite3.Connection, name: str) -> None:
    if not conn.in_transaction:  # SQLite rolled the whole transaction back already (a full disk)
        return
    conn.execute(f"ROLLBACK TO {name}")
    conn.execute(f"RELEASE {name}")


def _in_transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T], wait_ms: int) -> T:
    _begin_immediate(conn, wait_ms)
    try:
        result = fn(conn)
    except BaseException:
        _abandon(conn)
        raise
    _commit(conn)
    return result


def _end_read(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.execute("COMMIT")


def _in_read_transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    conn.execute("BEGIN")
    try:
        return fn(conn)
    finally:
        conn.execute("COMMIT")


def _migrate(conn: sqlite3.Connection, wait_ms: int) -> None:
    """Apply pending migrations, one transaction each; refuse a schema newer than this code."""
    latest = max(m.version for m in MIGRATIONS)
    for migration in MIGRATIONS:
        _begin_immediate(conn, wait_ms)
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS lcm_migrations ("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
            current = conn.execute("SELECT coalesce(max(version), 0) FROM lcm_migrations").fetchone()[0]
            if current > latest:
                raise SchemaError(
                    f"the database schema is version {current} but this lossless knows only up to {latest}: "
                    "upgrade lossless-context to open it"
                )
            # Each migration is applied once, by its own record: numbers assigned to parallel work may
            # land out of order (5 before 3), and a later, lower-numbered one must still run.
            applied = conn.execute("SELECT 1 FROM lcm_migrations WHERE version = ?", (migration.version,)).fetchone()
            if applied is None:
                for statement in migration.statements:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO lcm_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.name, format_timestamp(utcnow())),
                )
        except BaseException as exc:
            conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise SchemaError(f"migration {migration.version} ({migration.name}) failed: {exc}") from exc
            raise
        conn.execute("COMMIT")
