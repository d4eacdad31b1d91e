"""One PostgreSQL store: a connection pool, transactions, ``atomic()``, migrations and error translation.

Invariants:

* **Every store call is one transaction** (``READ COMMITTED``) on a pooled
  connection; inside :meth:`Database.atomic` the calls of the owning task share
  the block's connection, each in a savepoint of its transaction, so a failed
  call undoes only itself and the block commits or rolls back as a whole.
* **Writers to one conversation are serialised by a row lock** on that
  conversation (``SELECT … FOR UPDATE``, taken first by every statement group
  that assigns ``seq`` or context ordinals); writers to different conversations
  never wait for each other.  Compaction additionally holds a session-level
  advisory lock per conversation (:meth:`Database.conversation_lock`), so two
  hosts never summarise the same conversation at once.
* **Driver errors never leak**: lock timeouts, deadlocks and serialization
  failures become :class:`~lossless.errors.ConflictError` (retryable, nothing
  written); anything else a :class:`~lossless.errors.StoreError` naming the
  server's message.
* **Any text round-trips**, U+0000 included: PostgreSQL text cannot hold it,
  so every connection escapes it in parameters and unescapes it in results
  (:func:`escape_text`, :func:`nul_safe`); the stored form differs from the
  text only where it holds U+0000 or U+E000.
* **Migrations** run once per version, each in its own transaction together
  with its ``lcm_migrations`` row, under a transaction-level advisory lock so
  that several processes opening a fresh database at once apply them once.
* A transaction that is cancelled is rolled back, shielded from the
  cancellation; the connection goes back to the pool clean.
"""

from __future__ import annotations

import contextvars
import hashlib
import re
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import psycopg
import psycopg.errors
from psycopg import AsyncConnection
from psycopg.abc import Buffer
from psycopg.adapt import Dumper, Loader
from psycopg.pq import TransactionStatus
from psycopg_pool import AsyncConnectionPool

from lossless.errors import ConflictError, InputError, SchemaError, StoreError
from lossless.stores.postgres.schema import MIGRATIONS

__all__ = ["ESC", "Connection", "Database", "escape_text", "nul_safe", "translate", "unescape_text"]

#: The connection type every backend function takes (rows come back as tuples).
Connection = AsyncConnection[tuple[Any, ...]]
#: A statement's parameters (positional or named).
Params = Sequence[Any] | Mapping[str, Any]

#: Key space of this package's advisory locks (first argument of the two-int form).
_LOCK_SPACE_MIGRATION = 0x4C434D00  # "LCM\0"
_LOCK_SPACE_CONVERSATION = 0x4C434D01


@dataclass(slots=True)
class _Atomic:
    database: Database
    owner: int
    connection: Connection


_CURRENT: contextvars.ContextVar[_Atomic | None] = contextvars.ContextVar("lcm_pg_atomic", default=None)


def translate(exc: psycopg.Error) -> Exception:
    """The package error for a driver error (see the module invariants)."""
    if isinstance(
        exc,
        psycopg.errors.SerializationFailure
        | psycopg.errors.DeadlockDetected
        | psycopg.errors.LockNotAvailable
        | psycopg.errors.QueryCanceled,
    ):
        return ConflictError(
            f"another writer got in the way ({exc.diag.message_primary}); nothing was written, try again"
        )
    if isinstance(exc, psycopg.errors.UntranslatableCharacter | psycopg.errors.CharacterNotInRepertoire) or (
        isinstance(exc, psycopg.DataError) and "0x00" in str(exc)
    ):
        return InputError(
            "PostgreSQL cannot store the NUL character (U+0000) in text; nothing was written. "
            "Remove it from the text, or use a sqlite:/// database"
        )
    if isinstance(exc, ValueError | psycopg.DataError) and "NUL" in str(exc):
        return InputError(
            "PostgreSQL cannot store the NUL character (U+0000) in text; nothing was written. "
            "Remove it from the text, or use a sqlite:/// database"
        )
    message = exc.diag.message_primary or str(exc)
    if isinstance(exc, psycopg.errors.DiskFull):
        return StoreError(
            f"the database server's disk is full (PostgreSQL: {message}): this write was not stored, and nothing "
            "stored before it was lost; free some space on the server and try again"
        )
    return StoreError(f"PostgreSQL error: {message}")


#: PostgreSQL text cannot hold U+0000, so the backend escapes it on the way in and back out:
#: NUL is written as ``ESC + "\ue002"`` and ESC itself as ``ESC + "\ue001"`` (ESC is U+E000, a
#: private-use character).  Text holding neither is sent and read unchanged (one scan each way).
ESC = "\ue000"
_DECODED = {"\ue001": ESC, "\ue002": "\x00"}
_ESCAPED = re.compile("\ue000([\ue001\ue002])")


def escape_text(text: str) -> str:
    """``text`` in the form PostgreSQL can store (see :data:`ESC`); the identity for ordinary text."""
    if "\x00" not in text and ESC not in text:
        return text
    return text.replace(ESC, ESC + "\ue001").replace("\x00", ESC + "\ue002")


def unescape_text(text: str) -> str:
    """The inverse of :func:`escape_text`."""
    if ESC not in text:
        return text
    return _ESCAPED.sub(lambda m: _DECODED[m.group(1)], text)


class _NulSafeStrDumper(Dumper):
    """Python ``str`` parameters, escaped (sent with an unknown type, as psycopg does by default)."""

    oid = 0

    def dump(self, obj: str) -> bytes:
        return escape_text(obj).encode()


class _NulSafeTextLoader(Loader):
    """``text``/``varchar`` results, unescaped."""

    def load(self, data: Buffer) -> str:
        return unescape_text(str(data, "utf-8"))  # decoded from the buffer itself, not from a copy of it


def nul_safe(conn: AsyncConnection[Any]) -> None:
    """Make ``conn`` store and return any text, U+0000 included, exactly (see :data:`ESC`)."""
    conn.adapters.register_dumper(str, _NulSafeStrDumper)
    for name in ("text", "varchar", "bpchar", "name"):
        conn.adapters.register_loader(name, _NulSafeTextLoader)


def advisory_key(conversation_id: int) -> tuple[int, int]:
    """The two-int advisory lock key of a conversation."""
    return _LOCK_SPACE_CONVERSATION, int(conversation_id) & 0x7FFFFFFF


class Database:
    """A pool of connections to one PostgreSQL database, with the package's transaction rules."""

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 8, lock_timeout_ms: int = 10_000) -> None:
        self.url = url
        self._lock_timeout_ms = lock_timeout_ms
        self._pool = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            kwargs={"autocommit": True},
            configure=self._configure,
            name="lossless",
        )
        self._closed = False

    async def _configure(self, conn: Connection) -> None:
        nul_safe(conn)
        # A writer that cannot get a row lock in time gives up with a retryable ConflictError.
        await conn.execute(f"SET lock_timeout = {int(self._lock_timeout_ms)}")
        await conn.execute("SET TIME ZONE 'UTC'")

    async def open(self) -> None:
        try:
            # One direct connection first: a wrong host, database or password is reported at once
            # (the pool would keep retrying until its timeout).
            probe = await AsyncConnection.connect(self.url, autocommit=True, connect_timeout=10)
            await probe.close()
            await self._pool.open(wait=True, timeout=30)
        except psycopg.Error as exc:
            await self._pool.close()
            raise StoreError(f"cannot connect to PostgreSQL at {_redacted(self.url)}: {exc}") from exc
        except Exception as exc:  # pool timeouts are not psycopg.Error
            await self._pool.close()
            raise StoreError(f"cannot connect to PostgreSQL at {_redacted(self.url)}: {exc}") from exc
        await self._migrate()

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._pool.close()

    # -- transactions

    @property
    def in_block(self) -> bool:
        """Whether the current task is inside :meth:`atomic` or :meth:`snapshot` (its reads may be rolled back)."""
        return self._own_atomic() is not None

    def _own_atomic(self) -> _Atomic | None:
        current = _CURRENT.get()
        if current is not None and current.database is self and current.owner == _task_id():
            return current
        return None

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        """One atomic unit of work: a transaction, or a savepoint inside :meth:`atomic`."""
        if self._closed:
            raise StoreError("the store is closed")
        owned = self._own_atomic()
        with _translated():
            if owned is not None:
                async with owned.connection.transaction():
                    yield owned.connection
                return
            async with self._pool.connection() as conn, conn.transaction():
                yield conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[Connection]:
        """A connection for reads, without the ``BEGIN``/``COMMIT`` round trips of :meth:`transaction`.

        Each statement runs on its own (autocommit) and sees everything committed before it began,
        just as it would inside a ``READ COMMITTED`` transaction; a read that must see one state
        across statements sends them in one pipeline or one statement.  Inside :meth:`atomic` or
        :meth:`snapshot` it is :meth:`transaction` (the block's connection and snapshot).
        """
        if self._closed:
            raise StoreError("the store is closed")
        if self._own_atomic() is not None:
            async with self.transaction() as conn:
                yield conn
            return
        with _translated():
            async with self._pool.connection() as conn:
                yield conn

    async def read_all(
        self, statements: Sequence[tuple[str, Params]], *, prepare: bool | None = None
    ) -> list[list[Any]]:
        """The rows of each read statement, all sent at once: one round trip, one snapshot.

        One pipeline holding ``BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY``, the statements and
        ``COMMIT``, then one ``Sync``: the statements cannot depend on one another's results, and they
        see one state of the database.  Inside :meth:`atomic` or :meth:`snapshot` they run one after
        another in that block's transaction.  ``prepare`` is psycopg's (``None``: prepared from the
        fifth run on a connection; ``False`` for statements whose best plan depends on their values).
        """
        if self._closed:
            raise StoreError("the store is closed")
        if self._own_atomic() is not None:
            async with self.transaction() as conn:
                return [
                    await (await conn.execute(sql, params, prepare=prepare)).fetchall() for sql, params in statements
                ]
        with _translated():
            async with self._pool.connection() as conn:
                try:
                    async with conn.pipeline():
                        await conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                        cursors = [await conn.execute(sql, params, prepare=prepare) for sql, params in statements]
                        await conn.execute("COMMIT")
                    # Leaving the pipeline sent the one Sync and received every result.
                    return [await cursor.fetchall() for cursor in cursors]
                finally:
                    if conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
                        with anyio.CancelScope(shield=True):  # failed or cancelled before COMMIT
                            await conn.execute("ROLLBACK")

    @asynccontextmanager
    async def atomic(self) -> AsyncIterator[None]:
        """One transaction for every store call the current task makes inside the block."""
        if self._own_atomic() is not None:
            async with self.transaction():
                yield
            return
        async with self._task_block("BEGIN", keep=True):
            yield

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[None]:
        """Every store call of the current task inside the block reads one consistent snapshot.

        One ``REPEATABLE READ READ ONLY`` transaction on one connection (each call a savepoint of
        it), so a series of reads (an integrity check) never mixes states before and after a write.
        Inside :meth:`atomic` the block just runs in that transaction.
        """
        if self._own_atomic() is not None:
            yield
            return
        async with self._task_block("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", keep=False):
            yield

    @asynccontextmanager
    async def _task_block(self, begin: str, *, keep: bool) -> AsyncIterator[None]:
        """A transaction (``begin``) on one pooled connection that the current task's store calls join.

        Rolled back if the block raises; otherwise committed when ``keep``, else rolled back (a read-only
        snapshot has nothing to keep).  BEGIN and its end are shielded from cancellation.
        """
        if self._closed:
            raise StoreError("the store is closed")
        try:
            async with self._pool.connection() as conn:
                token = _CURRENT.set(_Atomic(self, _task_id(), conn))
                try:
                    with anyio.CancelScope(shield=True):
                        await conn.execute(begin)
                    try:
                        yield
                    except BaseException:
                        with anyio.CancelScope(shield=True):
                            await conn.execute("ROLLBACK")
                        raise
                    with anyio.CancelScope(shield=True):
                        await conn.execute("COMMIT" if keep else "ROLLBACK")
                finally:
                    _CURRENT.reset(token)
        except psycopg.Error as exc:
            raise translate(exc) from exc

    @asynccontextmanager
    async def conversation_lock(self, conversation_id: int, *, wait: bool = True) -> AsyncIterator[bool]:
        """Hold the conversation's advisory lock (session level) for the block; yields whether it was taken.

        With ``wait=True`` it waits at most ``lock_timeout_ms`` (``postgres_lock_timeout_ms``), then
        raises a retryable :class:`ConflictError` naming the conversation: another host is compacting
        it, and a slow summarizer must not hold this caller for minutes.  With ``wait=False`` the
        block runs at once with ``False`` when another session holds it.  The lock lives on a
        connection of its own, so the block's own transactions are unaffected.
        """
        space, key = advisory_key(conversation_id)
        try:
            async with self._pool.connection() as conn:
                if wait:
                    try:
                        await conn.execute("SELECT pg_advisory_lock(%s, %s)", (space, key))
                    except psycopg.errors.LockNotAvailable as exc:
                        raise ConflictError(
                            f"conversation {conversation_id} is being compacted by another process (its lock was "
                            f"not free within postgres_lock_timeout_ms = {self._lock_timeout_ms} ms); nothing was "
                            "written, try again later"
                        ) from exc
                    taken = True
                else:
                    row = await (await conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (space, key))).fetchone()
                    taken = bool(row and row[0])
                try:
                    yield taken
                finally:
                    if taken:
                        with anyio.CancelScope(shield=True):
                            await conn.execute("SELECT pg_advisory_unlock(%s, %s)", (space, key))
        except psycopg.Error as exc:
            raise translate(exc) from exc

    # -- schema

    async def _migrate(self) -> None:
        """Apply pending migrations, one transaction each; refuse a schema newer than this code."""
        latest = max(m.version for m in MIGRATIONS)
        try:
            async with self._pool.connection() as conn:
                for migration in MIGRATIONS:
                    async with conn.transaction():
                        await conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_LOCK_SPACE_MIGRATION,))
                        await conn.execute(
                            "CREATE TABLE IF NOT EXISTS lcm_migrations ("
                            "version integer PRIMARY KEY, name text NOT NULL, "
                            "applied_at timestamptz NOT NULL DEFAULT now())"
                        )
                        row = await (
                            await conn.execute("SELECT coalesce(max(version), 0) FROM lcm_migrations")
                        ).fetchone()
                        current = int(row[0]) if row else 0
                        if current > latest:
                            raise SchemaError(
                                f"the database schema is version {current} but this lossless knows only up to "
                                f"{latest}: upgrade lossless-context to open it"
                            )
                        applied = await (
                            await conn.execute("SELECT 1 FROM lcm_migrations WHERE version = %s", (migration.version,))
                        ).fetchone()
                        if applied is not None:
                            continue
                        try:
                            for statement in migration.statements:
                                await conn.execute(statement)  # trusted constant SQL
                        except psycopg.Error as exc:
                            raise SchemaError(
                                f"migration {migration.version} ({migration.name}) failed: {exc}"
                            ) from exc
                        await conn.execute(
                            "INSERT INTO lcm_migrations (version, name) VALUES (%s, %s)",
                            (migration.version, migration.name),
                        )
        except psycopg.Error as exc:
            raise SchemaError(f"cannot migrate the PostgreSQL schema: {exc}") from exc

    async def schema_version(self) -> int:
        async with self.transaction() as conn:
            row = await (await conn.execute("SELECT coalesce(max(version), 0) FROM lcm_migrations")).fetchone()
            return int(row[0]) if row else 0


@contextmanager
def _translated() -> Iterator[None]:
    """Driver and encoding errors as the package's errors (see the module invariants)."""
    try:
        yield
    except psycopg.Error as exc:
        raise translate(exc) from exc
    except UnicodeEncodeError as exc:  # text no row can hold (a lone surrogate), in a write or a lookup
        raise InputError(
            f"text with invalid Unicode (a lone surrogate at position {exc.start}) cannot be stored or looked "
            "up; nothing was written"
        ) from exc
    except ValueError as exc:
        if "NUL" in str(exc) or "0x00" in str(exc):
            raise translate(psycopg.DataError(str(exc))) from exc
        raise


def _task_id() -> int:
    try:
        return anyio.get_current_task().id
    except RuntimeError:  # pragma: no cover - outside an event loop
        return 0


def _redacted(url: str) -> str:
    """``url`` with any password replaced (errors never print secrets)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def stable_lock_key(name: str) -> int:
    """A 31-bit advisory lock key for an arbitrary name (e.g. a job kind)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=4).digest(), "big") & 0x7FFFFFFF
