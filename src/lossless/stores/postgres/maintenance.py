"""Integrity repairs, retention and the background-job queue on PostgreSQL.

:class:`MaintenanceStatements` is the part of :class:`~lossless.stores.postgres.store.PostgresStore`
that :mod:`lossless.stores.sqlite.maintenance` and :mod:`lossless.stores.sqlite.jobs` implement
for SQLite (:class:`~lossless.ports.MaintainableStore`, :class:`~lossless.ports.RetentionStore`,
:class:`~lossless.ports.JobQueue`), with the same observable behaviour: the contract suite in
``tests/contract/test_operations.py`` runs against both.

Invariants:

* **Canonical rows are never touched by a repair.**  ``restore_context_item`` and
  ``drop_context_item`` write context items only, under the conversation's row lock (the lock
  every writer of the conversation takes first); ``rebuild_search_index`` rebuilds derived indexes.
* **The search index cannot drift here.**  The word index is a stored generated column and both
  GIN indexes are maintained by PostgreSQL inside the writing transaction, so there is no
  companion index to disagree with the rows (see :meth:`MaintenanceStatements.search_index_problems`).
* **Retention deletes only whole conversations, only when asked**, never one that another
  conversation still points at, and locks the conversations it deletes (``FOR UPDATE``) so no
  writer adds to them meanwhile.  Identity columns never hand an id out twice, so no id floor is
  needed (SQLite keeps one in ``lcm_meta``).
* **A claim hands a job to one worker, and never two jobs of one conversation at once.**  Rows
  are picked with ``FOR UPDATE SKIP LOCKED`` (concurrent claimers never wait for each other nor
  take the same row), and a claim for a conversation holds a transaction-level advisory lock on
  it while it checks that no other job of the conversation runs under a live lease and marks its
  own job running; a second claimer for that conversation skips it until the first has
  committed, and then sees its job running.
* ``vacuum`` runs ``VACUUM (ANALYZE)`` on a connection of its own (it cannot run inside a
  transaction) and reports ``pg_database_size`` before and after.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from typing import Any

import psycopg
import psycopg.errors

from lossless.errors import ConflictError, InputError, StoreError
from lossless.ports import IndexDiscrepancy, Job, JobKind, JobReason, JobState, PruneCandidate
from lossless.records import JSONValue, utcnow
from lossless.stores.postgres.connection import Connection, Database, translate
from lossless.stores.postgres.statements import aware, lock_conversation
from lossless.stores.postgres.term_stats import TermStatistics
from lossless.stores.rows import check_job, dump_json, load_json, restore_position

__all__ = ["MaintenanceStatements"]

#: Advisory-lock key space of job claims per conversation ("LCM\5"; see connection.py and core.py).
_LOCK_SPACE_JOB_CLAIM = 0x4C434D05
#: The search indexes that ``rebuild_search_index`` rebuilds (migrations 1 and 122).
_SEARCH_INDEXES = (
    "messages_tsv_gin_idx",
    "messages_trgm_idx",
    "messages_unindexed_idx",
    "summaries_tsv_gin_idx",
    "summaries_trgm_idx",
)

_JOB_COLUMNS = (
    "job_id, kind, reason, requested_at, conversation_id, mode, target_tokens, state, attempts, lease_owner, "
    "lease_expires_ms, finished_at, result, error"
)


def _job_from_row(row: Sequence[Any]) -> Job:
    return Job(
        id=int(row[0]),
        kind=row[1],
        reason=row[2],
        requested_at=row[3],
        conversation_id=None if row[4] is None else int(row[4]),
        mode=row[5],
        target_tokens=row[6],
        state=row[7],
        attempts=row[8],
        lease_owner=row[9],
        lease_expires_ms=None if row[10] is None else int(row[10]),
        finished_at=row[11],
        result=load_json(row[12]),
        error=row[13],
    )


# ---------------------------------------------------------------- context items

# For each context item of a conversation: the smallest seq of that conversation's messages it covers.
_FIRST_SEQ_BY_ITEM = """
WITH RECURSIVE reach(root, sid) AS (
    SELECT summary_id, summary_id FROM context_items WHERE conversation_id = %(c)s AND item_type = 'summary'
    UNION SELECT r.root, sp.parent_summary_id FROM reach r JOIN summary_parents sp ON sp.summary_id = r.sid
),
summary_seq AS (
    SELECT r.root, min(m.seq) AS seq FROM reach r JOIN summary_messages sm ON sm.summary_id = r.sid
    JOIN messages m ON m.message_id = sm.message_id AND m.conversation_id = %(c)s GROUP BY r.root
)
SELECT ci.ordinal, CASE WHEN ci.item_type = 'message' THEN m.seq ELSE ss.seq END
FROM context_items ci
LEFT JOIN messages m ON m.message_id = ci.message_id AND m.conversation_id = ci.conversation_id
LEFT JOIN summary_seq ss ON ss.root = ci.summary_id
WHERE ci.conversation_id = %(c)s ORDER BY ci.ordinal
"""

_SUMMARY_FIRST_SEQ = """
WITH RECURSIVE reach(sid) AS (
    SELECT %(s)s::text UNION SELECT sp.parent_summary_id FROM reach r JOIN summary_parents sp ON sp.summary_id = r.sid
)
SELECT min(m.seq) FROM reach r JOIN summary_messages sm ON sm.summary_id = r.sid
JOIN messages m ON m.message_id = sm.message_id AND m.conversation_id = %(c)s
"""


async def _one(conn: Connection, sql: str, params: Sequence[Any] | dict[str, Any]) -> tuple[Any, ...] | None:
    cursor = await conn.execute(sql, params)
    return await cursor.fetchone()


async def _restore(conn: Connection, conversation_id: int, ref: int | str) -> bool:
    """Put message or summary ``ref`` back at its place by ``seq`` (see :class:`MaintainableStore`)."""
    if not await lock_conversation(conn, conversation_id):
        return False
    if isinstance(ref, str):
        if await _one(
            conn, "SELECT 1 FROM summaries WHERE summary_id = %s AND conversation_id = %s", (ref, conversation_id)
        ) is None or await _one(
            conn, "SELECT 1 FROM context_items WHERE conversation_id = %s AND summary_id = %s", (conversation_id, ref)
        ):
            return False
        row = await _one(conn, _SUMMARY_FIRST_SEQ, {"s": ref, "c": conversation_id})
        if row is None or row[0] is None:
            return False
        seq, column, kind = int(row[0]), "summary_id", "summary"
    else:
        row = await _one(
            conn, "SELECT seq FROM messages WHERE message_id = %s AND conversation_id = %s", (ref, conversation_id)
        )
        if row is None or await _one(
            conn, "SELECT 1 FROM context_items WHERE conversation_id = %s AND message_id = %s", (conversation_id, ref)
        ):
            return False
        seq, column, kind = int(row[0]), "message_id", "message"
    cursor = await conn.execute(_FIRST_SEQ_BY_ITEM, {"c": conversation_id})
    items = [(int(o), None if s is None else int(s)) for o, s in await cursor.fetchall()]
    ordinal, shift = restore_position(items, seq)
    if shift:
        # No free ordinal: shift the items from ``ordinal`` on by one, through negatives, so the
        # primary key never sees two items at one ordinal in the middle of an update.
        await conn.execute(
            "UPDATE context_items SET ordinal = -(ordinal + 1) WHERE conversation_id = %s AND ordinal >= %s",
            (conversation_id, ordinal),
        )
        await conn.execute(
            "UPDATE context_items SET ordinal = -ordinal WHERE conversation_id = %s AND ordinal < 0",
            (conversation_id,),
        )
    await conn.execute(
        f"INSERT INTO context_items (conversation_id, ordinal, item_type, {column}, created_at) "
        "VALUES (%s, %s, %s, %s, %s)",
        (conversation_id, ordinal, kind, ref, utcnow()),
    )
    return True


# ---------------------------------------------------------------- retention

# Other conversations whose context items or summaries point at the rows of conversation %(c)s.
_REFERRERS = """
SELECT ci.conversation_id FROM context_items ci JOIN messages m ON m.message_id = ci.message_id
WHERE m.conversation_id = %(c)s AND ci.conversation_id <> %(c)s
UNION SELECT ci.conversation_id FROM context_items ci JOIN summaries s ON s.summary_id = ci.summary_id
WHERE s.conversation_id = %(c)s AND ci.conversation_id <> %(c)s
UNION SELECT s.conversation_id FROM summary_messages sm JOIN summaries s ON s.summary_id = sm.summary_id
JOIN messages m ON m.message_id = sm.message_id WHERE m.conversation_id = %(c)s AND s.conversation_id <> %(c)s
UNION SELECT s.conversation_id FROM summary_parents sp JOIN summaries s ON s.summary_id = sp.summary_id
JOIN summaries p ON p.summary_id = sp.parent_summary_id WHERE p.conversation_id = %(c)s AND s.conversation_id <> %(c)s
"""

# What a conversation holds: counts, and the bytes of its text (as SQLite's estimate counts them).
_SIZES = """
SELECT
    (SELECT count(*) FROM messages WHERE conversation_id = %(c)s),
    (SELECT coalesce(sum(octet_length(content) + coalesce(octet_length(metadata), 0)), 0)
     FROM messages WHERE conversation_id = %(c)s),
    (SELECT coalesce(sum(coalesce(octet_length(p.text_content), 0) + coalesce(octet_length(p.tool_input), 0)
        + coalesce(octet_length(p.tool_output), 0) + coalesce(octet_length(p.tool_error), 0)), 0)
     FROM messages m JOIN message_parts p ON p.message_id = m.message_id WHERE m.conversation_id = %(c)s),
    (SELECT count(*) FROM summaries WHERE conversation_id = %(c)s),
    (SELECT coalesce(sum(octet_length(content)), 0) FROM summaries WHERE conversation_id = %(c)s),
    (SELECT count(*) FROM large_files WHERE conversation_id = %(c)s),
    (SELECT coalesce(sum(coalesce(octet_length(exploration_summary), 0)), 0) FROM large_files
     WHERE conversation_id = %(c)s)
"""


async def _referrers(conn: Connection, conversation_id: int) -> tuple[int, ...]:
    cursor = await conn.execute(_REFERRERS, {"c": conversation_id})
    return tuple(sorted(int(r[0]) for r in await cursor.fetchall()))


async def _prune_candidate(conn: Connection, conversation_id: int) -> PruneCandidate | None:
    row = await _one(
        conn,
        "SELECT agent_id, session_id, active, archived_at FROM conversations WHERE conversation_id = %s",
        (conversation_id,),
    )
    if row is None:
        return None
    sizes = await _one(conn, _SIZES, {"c": conversation_id})
    assert sizes is not None
    messages, message_bytes, part_bytes, summaries, summary_bytes, files, file_bytes = (int(v) for v in sizes)
    return PruneCandidate(
        conversation_id=conversation_id,
        agent_id=row[0],
        session_id=row[1],
        active=bool(row[2]),
        archived_at=row[3],
        messages=messages,
        summaries=summaries,
        files=files,
        row_bytes=message_bytes + part_bytes + summary_bytes + file_bytes,
        blocked_by=await _referrers(conn, conversation_id),
    )


async def _delete(conn: Connection, ids: Sequence[int]) -> int:
    cursor = await conn.execute(
        "SELECT conversation_id FROM conversations WHERE conversation_id = ANY(%s::bigint[]) "
        "ORDER BY conversation_id FOR UPDATE",
        (list(ids),),
    )
    present = [int(r[0]) for r in await cursor.fetchall()]
    if not present:
        return 0
    chosen = set(ids)
    for conversation_id in present:
        blocked = [c for c in await _referrers(conn, conversation_id) if c not in chosen]
        if blocked:
            raise InputError(
                f"conversation {conversation_id} is still referred to by conversation(s) "
                f"{', '.join(map(str, blocked))} (forked sub-agents); prune those too, or keep it. Nothing was deleted"
            )
    # First every pointer of the chosen conversations (they may point at each other's rows) …
    summaries = "SELECT summary_id FROM summaries WHERE conversation_id = ANY(%s::bigint[])"
    await conn.execute("DELETE FROM context_items WHERE conversation_id = ANY(%s::bigint[])", (present,))
    await conn.execute(f"DELETE FROM summary_parents WHERE summary_id IN ({summaries})", (present,))
    await conn.execute(f"DELETE FROM summary_messages WHERE summary_id IN ({summaries})", (present,))
    # … then the rows themselves (parts, files, bootstrap state, blobs and jobs go with them by cascade).
    await conn.execute("DELETE FROM summaries WHERE conversation_id = ANY(%s::bigint[])", (present,))
    await conn.execute(
        "DELETE FROM message_parts WHERE message_id IN "
        "(SELECT message_id FROM messages WHERE conversation_id = ANY(%s::bigint[]))",
        (present,),
    )
    await conn.execute("DELETE FROM messages WHERE conversation_id = ANY(%s::bigint[])", (present,))
    await conn.execute("DELETE FROM conversations WHERE conversation_id = ANY(%s::bigint[])", (present,))
    return len(present)


# ---------------------------------------------------------------- jobs

_FAIL_EXHAUSTED = """
UPDATE jobs SET state = 'failed', lease_owner = NULL,
    error = coalesce(error || '; ', '') || 'its worker stopped before finishing it ' || attempts || ' times'
WHERE job_id IN (SELECT job_id FROM jobs WHERE state = 'running' AND lease_expires_ms < %(now)s
                 AND attempts >= %(max)s FOR UPDATE SKIP LOCKED)
"""

# The oldest claimable job above %(after)s, locked; jobs other claimers hold are skipped, not waited for.
# A conversation's jobs run in the order they were asked for: only its oldest claimable job is a
# candidate, so a claimer that finds that one locked by another claimer moves on to other
# conversations instead of taking the conversation's next job out of turn.
_CANDIDATE = """
SELECT j.job_id, j.conversation_id FROM jobs j
WHERE j.job_id > %(after)s
  AND (j.state = 'queued' OR (j.state = 'running' AND j.lease_expires_ms < %(now)s AND j.attempts < %(max)s))
  AND (j.conversation_id IS NULL OR (
      NOT EXISTS (
          SELECT 1 FROM jobs r WHERE r.state = 'running' AND r.lease_expires_ms >= %(now)s
          AND r.conversation_id = j.conversation_id AND r.job_id <> j.job_id)
      AND NOT EXISTS (
          SELECT 1 FROM jobs e WHERE e.conversation_id = j.conversation_id AND e.job_id < j.job_id
          AND (e.state = 'queued'
               OR (e.state = 'running' AND e.lease_expires_ms < %(now)s AND e.attempts < %(max)s)))))
ORDER BY j.job_id LIMIT 1 FOR UPDATE SKIP LOCKED
"""

# Re-checked under the conversation's claim lock, in a statement (so a snapshot) of its own.
_OTHER_LIVE = """
SELECT 1 FROM jobs WHERE state = 'running' AND lease_expires_ms >= %(now)s AND conversation_id = %(c)s
AND job_id <> %(j)s
"""


async def _claim(conn: Connection, owner: str, lease_ms: int, now_ms: int, max_attempts: int) -> Job | None:
    params: dict[str, Any] = {"now": now_ms, "max": max_attempts, "after": 0}
    await conn.execute(_FAIL_EXHAUSTED, params)
    while True:
        row = await _one(conn, _CANDIDATE, params)
        if row is None:
            return None
        job_id, conversation_id = int(row[0]), row[1]
        params["after"] = job_id
        if conversation_id is not None:
            taken = await _one(
                conn,
                "SELECT pg_try_advisory_xact_lock(%s, %s)",
                (_LOCK_SPACE_JOB_CLAIM, int(conversation_id) & 0x7FFFFFFF),
            )
            if not (taken and taken[0]):
                continue  # another worker is claiming a job of this conversation right now
            if await _one(conn, _OTHER_LIVE, {"now": now_ms, "c": conversation_id, "j": job_id}) is not None:
                continue
        claimed = await _one(
            conn,
            "UPDATE jobs SET state = 'running', lease_owner = %s, lease_expires_ms = %s, attempts = attempts + 1 "
            f"WHERE job_id = %s RETURNING {_JOB_COLUMNS}",
            (owner, now_ms + lease_ms, job_id),
        )
        assert claimed is not None  # the row is locked by this transaction
        return _job_from_row(claimed)


async def _requeue(conn: Connection, sql: str, params: Sequence[Any]) -> bool | None:
    """Run an update that queues a job again; None if the same job is queued already (unique index)."""
    try:
        async with conn.transaction():  # a savepoint: the conflict undoes only this statement
            cursor = await conn.execute(sql, params)
            return cursor.rowcount == 1
    except psycopg.errors.UniqueViolation:
        return None


class MaintenanceStatements:
    """Repairs, retention and jobs of :class:`~lossless.stores.postgres.store.PostgresStore` (see the module)."""

    _db: Database
    _term_stats: TermStatistics

    # ------------------------------------------------------------ MaintainableStore

    def read_snapshot(self) -> AbstractAsyncContextManager[None]:
        return self._db.snapshot()

    @asynccontextmanager
    async def repair_transaction(self, conversation_id: int) -> AsyncIterator[None]:
        # The conversation's row lock, taken first as every writer of it does, keeps its rows still
        # until the block commits; reads inside see its latest committed state.
        async with self._db.atomic():
            async with self._db.transaction() as conn:
                await lock_conversation(conn, conversation_id)
            yield

    async def search_index_problems(self, limit: int = 1000) -> list[IndexDiscrepancy]:
        """Always empty on PostgreSQL: there is no separate index that could disagree with the rows.

        A summary's word index is a stored generated column (``content_tsv``); a message's is set
        from its (never changing) text by the indexer right after the append, and until then every
        search reads the message through ``messages_unindexed_idx``.  PostgreSQL keeps the GIN
        indexes in the transaction that sets the column, so a row is never missing from them nor
        indexed after it is gone.  Comparing every ``content_tsv`` with the expression it is generated from
        would re-parse the whole history (a full scan of every text), which is not a check to run
        routinely; damage to an index file itself is PostgreSQL's to detect (``amcheck``), and
        :meth:`rebuild_search_index` repairs it.
        """
        return []

    async def rebuild_search_index(self) -> None:
        """``REINDEX`` the word and trigram indexes of messages and summaries, in one transaction.

        Meanwhile writes to those tables wait (reads that do not use the indexes go on); a writer
        that waits longer than the lock timeout gets a retryable :class:`ConflictError`.
        """
        async with self._db.transaction() as conn:
            for name in _SEARCH_INDEXES:
                await conn.execute(f"REINDEX INDEX {name}")  # trusted constant names

    async def restore_context_item(self, conversation_id: int, ref: int | str) -> bool:
        async with self._db.transaction() as conn:
            return await _restore(conn, conversation_id, ref)

    async def drop_context_item(self, conversation_id: int, ordinal: int) -> bool:
        async with self._db.transaction() as conn:
            if not await lock_conversation(conn, conversation_id):
                return False
            cursor = await conn.execute(
                "DELETE FROM context_items ci WHERE ci.conversation_id = %s AND ci.ordinal = %s "
                "AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.message_id = ci.message_id) "
                "AND NOT EXISTS (SELECT 1 FROM summaries s WHERE s.summary_id = ci.summary_id)",
                (conversation_id, ordinal),
            )
            return cursor.rowcount == 1

    # ------------------------------------------------------------ RetentionStore

    async def archived_before(self, agent_id: str, before: datetime) -> list[int]:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "SELECT conversation_id FROM conversations WHERE agent_id = %s AND NOT active "
                "AND archived_at IS NOT NULL AND archived_at < %s ORDER BY conversation_id",
                (agent_id, aware(before)),
            )
            return [int(r[0]) for r in await cursor.fetchall()]

    async def prune_candidates(self, conversation_ids: Sequence[int]) -> list[PruneCandidate]:
        found: list[PruneCandidate] = []
        async with self._db.transaction() as conn:
            for conversation_id in dict.fromkeys(conversation_ids):
                candidate = await _prune_candidate(conn, conversation_id)
                if candidate is not None:
                    found.append(candidate)
        return found

    async def delete_conversations(self, conversation_ids: Sequence[int]) -> int:
        ids = list(dict.fromkeys(conversation_ids))
        if not ids:
            return 0
        async with self._db.transaction() as conn:
            try:
                deleted = await _delete(conn, ids)
            except psycopg.errors.ForeignKeyViolation as exc:
                # A fork started pointing at these rows after the check: its own row lock is not ours.
                raise ConflictError(
                    "another conversation started referring to these conversations meanwhile; nothing was deleted, "
                    "plan the prune again"
                ) from exc
        self._term_stats.clear()  # relevance's word counts: recounted without the rows deleted
        return deleted

    async def vacuum(self) -> tuple[int, int]:
        """``VACUUM (ANALYZE)`` the database; ``(pg_database_size before, after)``.

        A plain ``VACUUM`` makes the space of deleted rows reusable and gives back the empty pages
        at the end of each table; it takes no lock that stops readers or writers (``VACUUM FULL``,
        which would, is left to the operator).
        """
        size = "SELECT pg_database_size(current_database())"
        try:
            async with await psycopg.AsyncConnection.connect(self._db.url, autocommit=True) as conn:
                before = await _one(conn, size, ())
                await conn.execute("VACUUM (ANALYZE)")
                after = await _one(conn, size, ())
        except psycopg.Error as exc:
            raise translate(exc) from exc
        assert before is not None
        assert after is not None
        return int(before[0]), int(after[0])

    # ------------------------------------------------------------ JobQueue

    async def enqueue_job(
        self,
        kind: JobKind,
        *,
        reason: JobReason,
        conversation_id: int | None = None,
        mode: str | None = None,
        target_tokens: int | None = None,
        requested_at: datetime,
    ) -> Job:
        check_job(kind, reason, conversation_id)
        async with self._db.transaction() as conn:
            # The queued job that blocks an insert may be claimed before it is read: then try again.
            for _ in range(10):
                row = await _one(
                    conn,
                    "INSERT INTO jobs (kind, reason, conversation_id, mode, target_tokens, requested_at) "
                    f"VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING {_JOB_COLUMNS}",
                    (kind, reason, conversation_id, mode, target_tokens, aware(requested_at)),
                )
                if row is None:
                    row = await _one(
                        conn,
                        f"SELECT {_JOB_COLUMNS} FROM jobs WHERE kind = %s AND coalesce(conversation_id, 0) = "
                        "coalesce(%s, 0) AND state = 'queued'",
                        (kind, conversation_id),
                    )
                if row is not None:
                    return _job_from_row(row)
        raise StoreError("could not queue the job: the queue kept changing; try again")

    async def claim_job(self, owner: str, *, lease_ms: int, now_ms: int, max_attempts: int) -> Job | None:
        async with self._db.transaction() as conn:
            return await _claim(conn, owner, lease_ms, now_ms, max_attempts)

    async def renew_job(self, job_id: int, owner: str, *, lease_ms: int, now_ms: int) -> bool:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "UPDATE jobs SET lease_expires_ms = %s WHERE job_id = %s AND lease_owner = %s AND state = 'running'",
                (now_ms + lease_ms, job_id, owner),
            )
            return cursor.rowcount == 1

    async def finish_job(
        self,
        job_id: int,
        owner: str,
        *,
        ok: bool,
        result: JSONValue = None,
        error: str | None = None,
        retry: bool = False,
        finished_at: datetime,
    ) -> bool:
        async with self._db.transaction() as conn:
            mine = await _one(
                conn,
                "SELECT 1 FROM jobs WHERE job_id = %s AND lease_owner = %s AND state = 'running' FOR UPDATE",
                (job_id, owner),
            )
            if mine is None:
                return False
            if not ok and retry:
                requeued = await _requeue(
                    conn,
                    "UPDATE jobs SET state = 'queued', lease_owner = NULL, lease_expires_ms = NULL, error = %s "
                    "WHERE job_id = %s",
                    (error, job_id),
                )
                if requeued is not None:
                    return True
                error = f"{error}; not retried: the same job is queued again already"
            await conn.execute(
                "UPDATE jobs SET state = %s, lease_owner = NULL, lease_expires_ms = NULL, finished_at = %s, "
                "result = %s, error = %s WHERE job_id = %s",
                ("done" if ok else "failed", aware(finished_at), dump_json(result), error, job_id),
            )
            return True

    async def release_job(self, job_id: int, owner: str) -> bool:
        async with self._db.transaction() as conn:
            requeued = await _requeue(
                conn,
                "UPDATE jobs SET state = 'queued', lease_owner = NULL, lease_expires_ms = NULL, "
                "attempts = greatest(attempts - 1, 0) WHERE job_id = %s AND lease_owner = %s AND state = 'running'",
                (job_id, owner),
            )
            if requeued is not None:
                return requeued
            # The same job was queued again meanwhile: that one will do the work.
            cursor = await conn.execute(
                "UPDATE jobs SET state = 'failed', lease_owner = NULL, lease_expires_ms = NULL, "
                "error = 'given back at shutdown; the same job is queued again' "
                "WHERE job_id = %s AND lease_owner = %s AND state = 'running'",
                (job_id, owner),
            )
            return cursor.rowcount == 1

    async def list_jobs(self, *, state: JobState | None = None, limit: int = 100) -> list[Job]:
        where, params = ("WHERE state = %s", [state]) if state else ("", [])
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs {where} ORDER BY job_id DESC LIMIT %s", [*params, limit]
            )
            return [_job_from_row(r) for r in await cursor.fetchall()]
