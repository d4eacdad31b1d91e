"""The message word index, filled after the append commits (a thread per store that writes messages).

An append on PostgreSQL stores a message with ``content_tsv`` NULL: computing the ``tsvector`` and
the trigrams of every text inside the writing transaction cost more than everything else an append
does (about 80 µs and 150 µs per average message, on one server core).  This module fills it in:

Invariants:

* **Nothing committed is ever missed by a search.**  Rows whose ``content_tsv`` is NULL are found
  through the partial index ``messages_unindexed_idx`` and matched by computing their word index
  (or reading their text) in the query itself (see :mod:`~lossless.stores.postgres.retrieval`);
  the indexer only makes them cheap to find.  A message's text never changes, so a ``content_tsv``
  once set stays right.
* **Any number of indexers share the work without overlap**: each batch claims its rows with
  ``FOR NO KEY UPDATE SKIP LOCKED`` (in ``message_id`` order) and sets them in one ``UPDATE`` (one
  statement, so it commits or not as a whole); a claim waits for no lock, so it can be in no
  deadlock, and its row locks do not block the ``KEY SHARE`` locks that foreign-key checks take
  (compaction linking a summary to the message); only a delete of the row waits, for one batch.
* **Statistics follow a bulk load**: a run that indexed :data:`ANALYZE_AFTER` rows or more ends
  with ``ANALYZE messages`` (as does :meth:`~lossless.stores.postgres.store.PostgresStore.wait_indexed`),
  so the planner does not keep counting long-indexed rows as waiting.
* **Rows left behind are picked up**: a store that finds unindexed rows when it opens, or appends
  any, wakes its indexer, which works until none is left that it can claim, and looks again every
  :data:`IDLE_SECONDS` while its store is open (rows of an ``atomic()`` block are visible only
  after the block commits).
* **Messages indexed before identifiers were (migration 124), or before the words JSON escapes hide
  were (migration 126), are re-indexed in the background**,
  newest first, after the waiting rows: each batch takes the next range of ids below the mark
  :data:`~lossless.stores.postgres.schema.REDO_KEY` (locking that row, ``SKIP LOCKED``: one indexer
  at a time, never waiting), re-indexes the rows of the range that hold an identifier or such a word (claimed
  ``FOR NO KEY UPDATE SKIP LOCKED``, as a claim does: it waits for no lock, so it can be in no
  deadlock), and moves the mark down, in one statement.  Until a message is re-indexed it is found
  by its words as before (a search never depends on this pass).
* The thread never raises: a failure (the server restarting, the database dropped) is retried
  with a growing pause until the store closes; searches stay complete meanwhile.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from lossless.stores.postgres.schema import REDO_KEY, TSV, TSV_CHARS

__all__ = [
    "ANALYZE",
    "ANALYZE_AFTER",
    "ANY_UNINDEXED",
    "BATCH",
    "CLAIM_BATCH",
    "COUNT_UNINDEXED",
    "IDLE_SECONDS",
    "REDO_BATCH",
    "REDO_IDS",
    "REDO_PENDING",
    "WordIndexer",
]

#: Rows indexed per transaction.
BATCH = 500
#: How long an idle indexer waits before looking for rows again (seconds).
IDLE_SECONDS = 2.0

#: One batch: claim up to ``%s`` unindexed rows (skipping rows another indexer holds) and index them.
CLAIM_BATCH = f"""
WITH batch AS (
    SELECT message_id FROM messages WHERE content_tsv IS NULL ORDER BY message_id LIMIT %s
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE messages SET content_tsv = {TSV} FROM batch WHERE messages.message_id = batch.message_id
"""
#: Message ids re-indexed per batch of the background pass (see the module docstring).
REDO_IDS = 500
#: One batch of that pass, for ``%s`` = ``%s`` = :data:`REDO_IDS`: returns ``(low, rows)``, the mark
#: after the batch (NULL when there was nothing to do, or another indexer holds the mark) and how
#: many rows it re-indexed.  ``content`` is the updated row's (no other table here has the column).
#: Like a claim, it waits for no lock (``SKIP LOCKED`` on the mark and on the rows), so it can be in
#: no deadlock; a row it skips is being deleted (nothing else locks a message whose ``content_tsv``
#: is set), or it is found by its words as before.
REDO_BATCH = f"""
WITH mark AS (
    SELECT value::bigint AS high FROM lcm_meta WHERE key = '{REDO_KEY}' AND value <> '0' FOR UPDATE SKIP LOCKED
), step AS (
    UPDATE lcm_meta SET value = greatest(mark.high - %s, 0)::text FROM mark WHERE lcm_meta.key = '{REDO_KEY}'
    RETURNING mark.high AS high, greatest(mark.high - %s, 0) AS low
), batch AS (
    SELECT m.message_id FROM messages m, step
    WHERE m.message_id > step.low AND m.message_id <= step.high AND m.content_tsv IS NOT NULL
      AND (lcm_identifier_words(left(m.content, {TSV_CHARS})) <> ''
           OR lcm_escaped_words(left(m.content, {TSV_CHARS})) <> '')
    FOR NO KEY UPDATE OF m SKIP LOCKED
), redone AS (
    UPDATE messages SET content_tsv = {TSV} FROM batch WHERE messages.message_id = batch.message_id
    RETURNING 1
)
SELECT (SELECT low FROM step), (SELECT count(*) FROM redone)
"""
#: Whether messages wait for that pass (claimed by an indexer right now or not).
REDO_PENDING = f"SELECT EXISTS (SELECT 1 FROM lcm_meta WHERE key = '{REDO_KEY}' AND value <> '0')"
#: After indexing this many rows in one go, refresh the planner's statistics of ``messages``: taken
#: during a bulk load, they would still count most rows as unindexed, and searches would then scan
#: the table for the few rows really waiting instead of using ``messages_unindexed_idx``.
ANALYZE_AFTER = 10_000
ANALYZE = "ANALYZE messages"
#: Whether any row still waits (claimed by another indexer or not).
ANY_UNINDEXED = "SELECT EXISTS (SELECT 1 FROM messages WHERE content_tsv IS NULL)"
#: How many rows wait.
COUNT_UNINDEXED = "SELECT count(*) FROM messages WHERE content_tsv IS NULL"


class WordIndexer:
    """A daemon thread with its own connection that fills ``content_tsv`` (see the module docstring)."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def notify(self) -> None:
        """Rows were appended (or may be waiting): start the thread if needed and wake it."""
        if self._stop.is_set():
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="lcm-pg-word-indexer", daemon=True)
                self._thread.start()
        self._wake.set()

    def close(self) -> None:
        """Stop the thread (after the batch it is running) and wait for it."""
        self._stop.set()
        self._wake.set()
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        import psycopg

        pause = 0.5
        conn: Any = None
        while not self._stop.is_set():
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self._url, autocommit=True, connect_timeout=10)
                self._wake.clear()
                indexed = 0
                while not self._stop.is_set():
                    done = conn.execute(CLAIM_BATCH, (BATCH,)).rowcount  # one statement: atomic
                    indexed += max(done, 0)
                    if done >= BATCH:
                        continue  # rows appended first: they are not searchable cheaply yet
                    low, redone = conn.execute(REDO_BATCH, (REDO_IDS, REDO_IDS)).fetchone() or (None, 0)
                    indexed += int(redone)
                    if low is None or low == 0:
                        break
                if indexed >= ANALYZE_AFTER:
                    conn.execute(ANALYZE)
                pause = 0.5
                self._wake.wait(IDLE_SECONDS)
            except Exception:  # the server went away, the database was dropped: retry later
                if conn is not None:
                    with contextlib.suppress(Exception):  # closing a broken connection
                        conn.close()
                    conn = None
                self._stop.wait(pause)
                pause = min(pause * 2, 30.0)
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
