"""The search index: derived full-text indexes in a companion file, kept up to date by a background thread.

Why a companion file, filled in the background: full-text indexing is the
costly part of storing a message (about 0.35 ms of tokenising per 1 KB for
the word and trigram indexes together, and far more per row when each row is
its own transaction).  Done inside the ingest transaction it would cap durable
single-message ingest at a few hundred messages per second and hold the write
lock while tokenising.  Here the ingest transaction writes only the canonical
rows; this thread indexes them moments later, in batches, under the index
file's own lock, on another core.

Invariants:

* **Exact, never drifting.**  For each source (``messages``, ``summaries``)
  the index holds exactly the rows with id ``<= watermark``; the watermark is
  advanced in the same transaction as the index rows it covers.  Ids only grow
  and are committed in id order, so nothing below the watermark can appear
  later.  A query is complete when it searches the index *and* scans the few
  rows above the watermark (:meth:`SearchIndex.lag` says how many).
* **No copy of the text.**  The index tables are contentless FTS5 tables: the
  text stays in the main file only; callers re-check candidates against it.
  ``*_fts`` use ``porter unicode61`` (word search); ``*_trigram`` use the
  trigram tokenizer with ``detail=none`` (substring search for CJK text and
  regex pre-filtering), about a fifth of the size of a full-detail index.
* **Identifiers by their words.**  The word tables index :func:`lossless.text.indexed_text` of a
  text (the text, then the words of its identifiers: ``outputHookMessage`` is also ``output hook
  message``; for messages :func:`lossless.text.indexed_message_text`, which adds the words JSON
  escapes hide: ``\\tif`` is also ``if``), each source by its own function (:attr:`Source.words`) on
  every insert and delete alike, so a contentless delete removes exactly what was inserted.  The
  trigram tables index the text itself (substrings and regexes match the original).
* **NUL does not end the text.**  SQLite's trigram tokenizer stops at U+0000,
  which would hide everything after one from the substring pre-filter, so the
  trigram tables index the text with NUL replaced by a space (:func:`trigram_text`;
  the same mapping on every insert and delete).  A query's trigrams never hold
  NUL, so the pre-filter stays a superset of the true matches.
* **Disposable.**  The file can be deleted at any time; it is rebuilt from the
  main file.  It is also rebuilt (in a transaction, safe with other processes)
  when it belongs to another store, has another layout version, or claims rows
  the main file does not have (e.g. after restoring an older backup).
* Several processes may index the same store: each batch re-reads the
  watermark inside the index's write transaction, so no row is indexed twice.
* **Rows changed in place** (only a summary's text, by the explicit
  ``remake_summary`` repair) are re-indexed under the index's write lock, taken
  *before* the main file is written and held until the index agrees
  (:meth:`SearchIndex.lock_for_rewrite`, :meth:`SearchIndex.finish_rewrite`):
  the indexer cannot index the new text meanwhile, so a row at or below the
  watermark holds exactly the old text, which is removed before the new text
  goes in.
* **Nothing left behind by a short process.**  The thread catches up at start (rows another process,
  or this store's last run, left unindexed) and, when the store closes, is given up to
  :data:`CLOSE_CATCH_UP_SECONDS` to index what was committed (:meth:`SearchIndex.settle`), so a
  command that stores and ends at once leaves its rows indexed.
* **Writers first.**  Indexing starts once this process's writes pause for
  25 ms, or at once when 10,000 rows are waiting, so a burst of ingest is not
  slowed by indexing while the number of rows a search must scan stays bounded.
* **The main file's WAL stays short, also during a burst.**  This thread
  checkpoints it (``PASSIVE``: never waiting for, nor blocking, a writer or a
  reader) at most every 100 ms, between index batches and while it waits for a
  pause in the writes alike.  A passive checkpoint cannot make the WAL start
  over while writes keep coming, so once it holds :data:`RESTART_FRAMES` frames
  this thread sets :attr:`SearchIndex.restart_due` and the writer, between two
  of its transactions, restarts it (see :mod:`.connection`); a restart needs
  every reader out of the WAL, so this thread pauses its own reads of the main
  file (50 ms at most) until the writer has tried.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lossless.text import indexed_message_text, indexed_text

__all__ = ["INDEX_VERSION", "SOURCES", "Forgotten", "Rewritten", "SearchIndex", "index_path_for", "word_text"]

log = logging.getLogger("lossless.index")

#: What the trigram tables index for a text: NUL (where SQLite's trigram tokenizer would stop) as a
#: space.  SQL's own text functions stop at NUL too, so the test is on the bytes and the replacement
#: is a Python function (called only for the rare text that holds a NUL).
_TRIGRAM_TEXT_SQL = "CASE WHEN instr(CAST(content AS BLOB), x'00') > 0 THEN lcm_trigram_text(content) ELSE content END"


def trigram_text(text: str) -> str:
    """The text the trigram tables index for ``text`` (what ``_TRIGRAM_TEXT_SQL`` computes)."""
    return text.replace("\x00", " ")


def _trigram_text_sql(value: str | bytes | None) -> str | bytes | None:
    return trigram_text(value) if isinstance(value, str) else value


def indexed_text_sql(value: str | bytes | None) -> str | bytes | None:
    """``lcm_indexed_text(x)`` in SQL: :func:`lossless.text.indexed_text` of a text, anything else as it is."""
    return indexed_text(value) if isinstance(value, str) else value


def _indexed_message_text_sql(value: str | bytes | None) -> str | bytes | None:
    """``lcm_indexed_message_text(x)``: :func:`lossless.text.indexed_message_text` of a text, anything else as it is."""
    return indexed_message_text(value) if isinstance(value, str) else value


#: The layout and text of the index; a file with another version is rebuilt (in the background).
INDEX_VERSION = 4  # 2: NUL is indexed as a space in the trigram tables; 3: identifiers' words (word tables);
# 4: messages' words hidden by JSON escapes (word tables)
_BATCH = 256
#: The main file's WAL is checkpointed (PASSIVE) at most this often …
_CHECKPOINT_SECONDS = 0.1
#: … and made to start over once it holds this many frames (64 MB with 4 KB pages); the thread
#: stops reading the main file for up to this long meanwhile.
RESTART_FRAMES = 16_384
_RESTART_WAIT_SECONDS = 0.05
#: The indexer waits for this long a pause in this process's writes before it starts …
_QUIET_SECONDS = 0.025
#: … unless this many rows are waiting: then it indexes at once, whatever the writers do.
_MAX_LAG = 10_000
#: Closing the store waits at most this long for the thread to index what is committed (:meth:`SearchIndex.settle`):
#: a command that stores and ends at once (``lcm import``) leaves its rows indexed, not to be scanned by every
#: later search (unranked) until some longer-lived process indexes them.  Indexing runs at about 3 MB of text a
#: second, so a larger backlog is left to the next process, as before.
CLOSE_CATCH_UP_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class Source:
    """A main-file table the index covers, and what its word table indexes for a text (``words``; in SQL,
    ``words_sql``: a function each indexer connection registers, called once per row of a batch)."""

    name: str
    table: str
    key: str
    words: Callable[[str], str]
    words_sql: str


SOURCES = (
    Source("messages", "messages", "message_id", indexed_message_text, "lcm_indexed_message_text(content)"),
    Source("summaries", "summaries", "summary_rowid", indexed_text, "lcm_indexed_text(content)"),
)
_BY_NAME = {source.name: source for source in SOURCES}


def word_text(source_name: str) -> Callable[[str], str]:
    """What the word table of source ``source_name`` indexes for a text (:attr:`Source.words`)."""
    return _BY_NAME[source_name].words


#: Rows deleted from the main file, by source name: ``(key, the content that was indexed)``.
Forgotten = dict[str, list[tuple[int, str]]]
#: A row whose content changed in place: ``(key, content before, content after)``.
Rewritten = tuple[int, str, str]


def index_path_for(main: Path) -> Path:
    return main.with_name(main.name + "-index")


def _schema() -> list[str]:
    statements = [
        "CREATE TABLE IF NOT EXISTS index_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS index_state (source TEXT PRIMARY KEY, watermark INTEGER NOT NULL)",
    ]
    for source in SOURCES:
        statements += [
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {source.name}_fts USING fts5("
            "content, content='', tokenize='porter unicode61 remove_diacritics 2')",
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {source.name}_trigram USING fts5("
            "content, content='', tokenize='trigram', detail=none)",
        ]
    return statements


class SearchIndex:
    """Owns the index file and the thread that keeps it caught up with the main file."""

    def __init__(self, main_path: Path, *, synchronous: str = "NORMAL", connect_timeout: float = 10.0) -> None:
        self.main_path = main_path
        self.path = index_path_for(main_path)
        self._synchronous = synchronous
        self._timeout = connect_timeout
        self._wake = threading.Event()
        self._urgent = threading.Event()
        self._last_write = 0.0
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._checkpointed = 0.0
        #: Set by this thread when the main file's WAL is long: the writer restarts it (see :mod:`.connection`).
        self.restart_due = False
        self._restarted = threading.Event()
        self.on_error: Callable[[BaseException], None] | None = None

    # -- connections (each thread makes its own)

    def _connect_index(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=self._timeout)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        return conn

    def _connect_main(self) -> sqlite3.Connection:
        return sqlite3.connect(self.main_path, isolation_level=None, timeout=self._timeout)

    def _connect_indexer(self) -> sqlite3.Connection:
        """The index file, with the main file attached read-only as ``src``.

        Read-only matters: ``BEGIN IMMEDIATE`` then takes the write lock of the index file
        alone, and only a read snapshot of the main file, so writers there never wait for it.
        """
        conn = sqlite3.connect(
            self.path.as_uri(), isolation_level=None, timeout=self._timeout, uri=True, check_same_thread=False
        )
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        conn.execute("ATTACH DATABASE ? AS src", (f"{self.main_path.resolve().as_uri()}?mode=ro",))
        conn.create_function("lcm_trigram_text", 1, _trigram_text_sql, deterministic=True)
        conn.create_function("lcm_indexed_text", 1, indexed_text_sql, deterministic=True)
        conn.create_function("lcm_indexed_message_text", 1, _indexed_message_text_sql, deterministic=True)
        return conn

    # -- set-up

    def prepare(self) -> None:
        """Create the index file, or rebuild it if it does not match the main file.  Blocking."""
        main = self._connect_main()
        index = self._connect_index()
        try:
            store_id = main.execute("SELECT value FROM lcm_meta WHERE key = 'store_id'").fetchone()[0]
            tops = {
                s.name: main.execute(f"SELECT coalesce(max({s.key}), 0) FROM {s.table}").fetchone()[0] for s in SOURCES
            }
            index.execute("BEGIN IMMEDIATE")
            try:
                for statement in _schema():
                    index.execute(statement)
                meta = dict(index.execute("SELECT key, value FROM index_meta").fetchall())
                marks = dict(index.execute("SELECT source, watermark FROM index_state").fetchall())
                stale = (
                    meta.get("store_id") != store_id
                    or meta.get("version") != str(INDEX_VERSION)
                    or any(marks.get(s.name, 0) > tops[s.name] for s in SOURCES)
                    or set(marks) != {s.name for s in SOURCES}
                )
                if stale:
                    _reset(index, store_id)
                index.execute("COMMIT")
            except BaseException:
                index.execute("ROLLBACK")
                raise
        finally:
            main.close()
            index.close()

    def rebuild(self) -> None:
        """Empty the index and let the thread index every row again (call :meth:`wait_idle` to wait).  Blocking."""
        main = self._connect_main()
        index = self._connect_index()
        try:
            store_id = main.execute("SELECT value FROM lcm_meta WHERE key = 'store_id'").fetchone()[0]
            index.execute("BEGIN IMMEDIATE")
            try:
                _reset(index, store_id)
                index.execute("COMMIT")
            except BaseException:
                index.execute("ROLLBACK")
                raise
        finally:
            main.close()
            index.close()
        self.kick()

    def forget(self, rows: Forgotten) -> None:
        """Remove rows just deleted from the main file from the index.  Blocking; call after the delete commits.

        Only rows at or below the watermark were indexed; the watermark is read inside the index's
        write transaction, so a batch the indexer committed meanwhile is covered, and a later batch
        cannot see the deleted rows.
        """
        if not any(rows.values()):
            return
        index = self._connect_index()
        try:
            index.execute("BEGIN IMMEDIATE")
            try:
                for source in SOURCES:
                    mark = index.execute(
                        "SELECT watermark FROM index_state WHERE source = ?", (source.name,)
                    ).fetchone()
                    indexed = [(key, text) for key, text in rows.get(source.name, ()) if mark and key <= mark[0]]
                    for suffix in ("fts", "trigram"):
                        table = f"{source.name}_{suffix}"
                        index.executemany(
                            f"INSERT INTO {table}({table}, rowid, content) VALUES ('delete', ?, ?)",
                            [(key, (source.words if suffix == "fts" else trigram_text)(text)) for key, text in indexed],
                        )
                index.execute("COMMIT")
            except BaseException:
                index.execute("ROLLBACK")
                raise
        finally:
            index.close()

    def lock_for_rewrite(self) -> sqlite3.Connection:
        """Take the index's write lock before rows change in place (see the module docstring).  Blocking.

        Hand the connection to :meth:`finish_rewrite` (it may be used from another thread).
        """
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=self._timeout, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            conn.close()
            raise
        return conn

    def finish_rewrite(self, conn: sqlite3.Connection, source_name: str, rows: list[Rewritten]) -> None:
        """Replace the indexed text of ``rows`` (committed in the main file), then release the lock.  Blocking.

        A row above the watermark was never indexed: the indexer will index its new text.  With no
        ``rows`` (the main write failed) this only releases the lock.
        """
        try:
            mark = conn.execute("SELECT watermark FROM index_state WHERE source = ?", (source_name,)).fetchone()
            indexed = [row for row in rows if mark is not None and row[0] <= mark[0]]
            for suffix in ("fts", "trigram"):
                table = f"{source_name}_{suffix}"
                shown = word_text(source_name) if suffix == "fts" else trigram_text
                conn.executemany(
                    f"INSERT INTO {table}({table}, rowid, content) VALUES ('delete', ?, ?)",
                    [(key, shown(old)) for key, old, _ in indexed],
                )
                conn.executemany(
                    f"INSERT INTO {table}(rowid, content) VALUES (?, ?)",
                    [(key, shown(new)) for key, _, new in indexed],
                )
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()

    # -- the background thread

    def start(self) -> None:
        # At once, not at the first poll a second later: rows that another process (or this store's last run)
        # left unindexed are caught up with even in a process that lives less than a second (``lcm grep``).
        self._wake.set()
        self._thread = threading.Thread(target=self._run, name=f"lossless-index:{self.main_path.name}", daemon=True)
        self._thread.start()

    def kick(self) -> None:
        """New rows were committed: index them soon."""
        self._last_write = time.monotonic()
        # Event.set and Event.clear take a lock each; on the ingest path, skip the ones with nothing to do.
        # Skipping is safe: the thread clears _wake *before* it reads the main file, so a _wake seen set
        # here is cleared only after this commit, and the catch-up that follows sees it (_idle matters only
        # to wait_idle, which clears it itself).
        if self._idle.is_set():
            self._idle.clear()
        if not self._wake.is_set():
            self._wake.set()

    def settle(self, timeout: float = CLOSE_CATCH_UP_SECONDS) -> bool:
        """Before the store closes: let the thread catch up with what was committed (at most ``timeout`` seconds),
        so that rows written just before a short process ends are searchable by their words, and ranked, from the
        next one.  True when it caught up; False when it has failed, is not running, or ran out of time."""
        if self._thread is None or not self._thread.is_alive() or self._failure is not None:
            return False
        return self.wait_idle(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def wait_idle(self, timeout: float) -> bool:
        """Block until the thread has caught up with everything committed before the call."""
        self._urgent.set()
        self._idle.clear()
        self._wake.set()
        return self._idle.wait(timeout)

    @property
    def failure(self) -> BaseException | None:
        return self._failure

    def _run(self) -> None:
        conn = self._connect_indexer()
        main = self._connect_main()  # writable, for checkpoints only
        try:
            while not self._stop.is_set():
                self._wake.wait(1.0)  # also polls for rows written by other processes
                self._wake.clear()
                try:
                    self._catch_up(conn, main)
                    self._checkpoint(main)
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) and "busy" not in str(exc):
                        raise
                    self._wake.set()  # another process holds the index lock; try again
                    self._stop.wait(0.05)
                    continue
                if not self._wake.is_set():
                    self._urgent.clear()
                    self._idle.set()
        except BaseException as exc:
            self._failure = exc
            self._idle.set()
            if self.on_error is not None:
                self.on_error(exc)
        finally:
            conn.close()
            main.close()

    def _catch_up(self, conn: sqlite3.Connection, main: sqlite3.Connection) -> None:
        while not self._stop.is_set():
            self._checkpoint(main)  # also during a burst: the thread may not leave this loop for long
            quiet = time.monotonic() - self._last_write
            if quiet < _QUIET_SECONDS and not self._urgent.is_set() and self.lag(conn) < _MAX_LAG:
                self._stop.wait(_QUIET_SECONDS - quiet)
                continue
            if not self.index_batch(conn):
                return

    def lag(self, conn: sqlite3.Connection) -> int:
        """Rows committed to the main file that the index does not cover yet."""
        total = 0
        for source in SOURCES:
            row = conn.execute(
                f"SELECT coalesce((SELECT max({source.key}) FROM src.{source.table}), 0) - "
                "(SELECT watermark FROM index_state WHERE source = ?)",
                (source.name,),
            ).fetchone()
            total += max(0, row[0])
        return total

    def index_batch(self, conn: sqlite3.Connection, size: int = _BATCH) -> int:
        """Index up to ``size`` new rows of each source, each source in one transaction; returns the count.

        The rows go from the main file into the index in one ``INSERT … SELECT`` per table, so
        SQLite does the whole batch without coming back to Python (or the GIL) per row.
        """
        done = 0
        for source in SOURCES:
            conn.execute("BEGIN IMMEDIATE")
            try:
                mark = conn.execute("SELECT watermark FROM index_state WHERE source = ?", (source.name,)).fetchone()[0]
                top = conn.execute(
                    f"SELECT max({source.key}), count(*) FROM (SELECT {source.key} FROM src.{source.table} "
                    f"WHERE {source.key} > ? ORDER BY {source.key} LIMIT ?)",
                    (mark, size),
                ).fetchone()
                if top[0] is not None:
                    for suffix in ("fts", "trigram"):
                        text = source.words_sql if suffix == "fts" else _TRIGRAM_TEXT_SQL
                        conn.execute(
                            f"INSERT INTO {source.name}_{suffix}(rowid, content) SELECT {source.key}, {text} "
                            f"FROM src.{source.table} WHERE {source.key} > ? AND {source.key} <= ?",
                            (mark, top[0]),
                        )
                    conn.execute("UPDATE index_state SET watermark = ? WHERE source = ?", (top[0], source.name))
                    done += top[1]
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return done

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        """Copy the main file's WAL into the database, without waiting (at most every 100 ms).

        The writer never checkpoints on commit, so commits stay short; without this, a long burst of
        single-message writes grows the WAL by gigabytes and every commit slows down.
        """
        now = time.monotonic()
        if now - self._checkpointed < _CHECKPOINT_SECONDS:
            return
        self._checkpointed = now
        try:
            row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.OperationalError:
            return
        if row is not None and row[1] >= RESTART_FRAMES:
            # The restart needs every reader out of the WAL, this thread's reads of the main file
            # included: hold them back until the writer has done it (one write away, in a burst).
            self._restarted.clear()
            self.restart_due = True
            self._restarted.wait(_RESTART_WAIT_SECONDS)

    def wal_restarted(self) -> None:
        """The writer has tried the restart :attr:`restart_due` asked for (whether a reader let it or not)."""
        self.restart_due = False
        self._restarted.set()


def _reset(index: sqlite3.Connection, store_id: str) -> None:
    """Empty every index table and start over (inside the caller's transaction)."""
    for source in SOURCES:
        for suffix in ("fts", "trigram"):
            table = f"{source.name}_{suffix}"
            index.execute(f"INSERT INTO {table}({table}) VALUES ('delete-all')")
    index.execute("DELETE FROM index_state")
    index.execute("DELETE FROM index_meta")
    index.executemany(
        "INSERT INTO index_meta (key, value) VALUES (?, ?)", [("store_id", store_id), ("version", str(INDEX_VERSION))]
    )
    index.executemany("INSERT INTO index_state (source, watermark) VALUES (?, 0)", [(s.name,) for s in SOURCES])
