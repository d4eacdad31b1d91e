"""Storage backends, reached only through :func:`open_store`.

``open_store(url)`` picks the backend from the URL scheme and imports it
lazily, so a missing optional dependency only matters to those who use it:

* ``sqlite:///relative/or/absolute/path.db`` (``sqlite:////abs/path.db`` also works)
* ``postgresql://user@host/db`` — the ``postgres`` extra (psycopg 3 + psycopg-pool)

:func:`blob_store_for` picks where the bytes of large files go: files under
``large_files_dir``, or (PostgreSQL, ``large_files_storage = "database"``) the database itself.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from lossless.config import Config
from lossless.errors import ConfigError, MissingDependencyError
from lossless.memory.ports import MemoryStore
from lossless.ports import BlobStore, Store

__all__ = ["blob_store_for", "memory_store_for", "open_store", "sqlite_path_from_url"]

SCHEMES = ("sqlite", "postgresql", "postgres")


def sqlite_path_from_url(url: str) -> str:
    """The file path in a SQLite URL, SQLAlchemy-style: what follows ``sqlite:///`` verbatim.

    ``sqlite:///lcm.db`` is relative to the working directory, ``sqlite:////var/lcm.db``
    (four slashes) is absolute, and ``sqlite:///~/lcm.db`` is in the home directory.
    """
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        raise ConfigError(
            f"{url!r} is not a SQLite URL: write sqlite:///relative.db or sqlite:////absolute/path.db",
            setting="database_url",
        )
    path = unquote(url[len(prefix) :])
    if not path or path.endswith("/"):
        raise ConfigError(f"{url!r} names no database file", setting="database_url")
    if path == ":memory:":
        raise ConfigError(
            "an in-memory SQLite database cannot be shared by the store's connections: use a file path",
            setting="database_url",
        )
    return path


async def open_store(url: str, config: Config | None = None) -> Store:
    """Open the store at ``url`` (migrating its schema if needed)."""
    config = config or Config()
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        from lossless.stores.sqlite import SQLiteStore

        return await SQLiteStore.open(
            sqlite_path_from_url(url),
            synchronous=config.sqlite_synchronous,
            busy_timeout_ms=config.sqlite_busy_timeout_ms,
        )
    if scheme in ("postgresql", "postgres"):
        try:
            from lossless.stores.postgres import PostgresStore
        except ImportError as exc:
            raise MissingDependencyError("the PostgreSQL backend", "postgres", exc.name or "psycopg") from exc
        return await PostgresStore.open(
            url, pool_size=config.postgres_pool_size, lock_timeout_ms=config.postgres_lock_timeout_ms
        )
    raise ConfigError(
        f"unsupported database URL {url!r}: use one of {', '.join(s + '://' for s in SCHEMES)}",
        setting="database_url",
    )


def blob_store_for(config: Config | None = None, store: Store | None = None) -> BlobStore:
    """The blob store for large files.

    With ``large_files_storage = "database"`` the bytes go into ``store``'s own database (PostgreSQL:
    every host sees them).  Otherwise a folder per conversation: ``large_files_dir`` when set; else,
    for a SQLite database, ``<database>-files`` beside the database file (so a database and its
    files travel together and two databases never share a folder); else ``files`` in the data
    directory.
    """
    from lossless.stores.blobs import FileBlobStore

    config = config or Config()
    if config.large_files_storage == "database":
        factory = getattr(store, "blob_store", None)
        if factory is None:
            raise ConfigError(
                "large_files_storage = 'database' needs a PostgreSQL database (postgresql://…); "
                "with SQLite, large files are kept in a folder (large_files_storage = 'filesystem')",
                setting="large_files_storage",
            )
        database_blobs: BlobStore = factory()
        return database_blobs
    folder = config.large_files_dir
    if folder is None:
        url = config.resolved_database_url
        if urlsplit(url).scheme == "sqlite":
            database = Path(sqlite_path_from_url(url)).expanduser().resolve()
            folder = database.with_name(database.name + "-files")
        else:
            folder = config.resolved_large_files_dir
    return FileBlobStore(folder)


def memory_store_for(store: Store) -> MemoryStore:
    """The long-term memory store that lives beside ``store`` (same file, same transactions)."""
    factory = getattr(store, "memory_store", None)
    if factory is None:
        raise ConfigError(
            f"the {getattr(store, 'backend', type(store).__name__)} backend has no long-term memory yet; "
            "use a sqlite:/// database",
            setting="database_url",
        )
    memory_store: MemoryStore = factory()
    return memory_store
