"""Rewriting a summary's text in place on PostgreSQL (:meth:`~lossless.ports.Store.rewrite_summary`).

:class:`SummaryRewrites` is the part of :class:`~lossless.stores.postgres.store.PostgresStore` that
:func:`lossless.stores.sqlite.maintenance.rewrite_summary` implements for SQLite, with the same
observable behaviour.

Invariants:

* **Compare and set.**  The summary's row is locked (``FOR UPDATE``) and its content compared with
  the text the caller read; only when they agree are its text and provenance columns (``content``,
  ``token_count``, ``file_ids``, ``level``, ``provider``, ``model``, ``reason``) replaced.  Its id,
  conversation, kind, depth, times and lineage are never written.
* In the same transaction, every summary made from it (directly or further up the DAG) has its
  ``descendant_token_count`` moved by the change in ``token_count``, so the counts the integrity
  checker compares stay consistent.
* The search index cannot lag: ``content_tsv`` is a stored generated column and both GIN indexes
  are maintained by PostgreSQL inside the writing transaction.
"""

from __future__ import annotations

from lossless.records import Summary
from lossless.stores.postgres.connection import Database
from lossless.stores.rows import dump_json

__all__ = ["SummaryRewrites"]

_ABOVE = """
WITH RECURSIVE above(sid) AS (
    SELECT summary_id FROM summary_parents WHERE parent_summary_id = %(s)s
    UNION SELECT sp.summary_id FROM summary_parents sp JOIN above a ON sp.parent_summary_id = a.sid
)
UPDATE summaries SET descendant_token_count = descendant_token_count + %(d)s
WHERE summary_id IN (SELECT sid FROM above)
"""


class SummaryRewrites:
    """:meth:`~lossless.ports.Store.rewrite_summary` (see the module docstring)."""

    _db: Database

    async def rewrite_summary(self, summary: Summary, *, replaces: str) -> bool:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "SELECT content, token_count FROM summaries WHERE summary_id = %s FOR UPDATE", (summary.id,)
            )
            row = await cursor.fetchone()
            if row is None or row[0] != replaces:
                return False
            await conn.execute(
                "UPDATE summaries SET content = %s, token_count = %s, file_ids = %s, level = %s, provider = %s, "
                "model = %s, reason = %s WHERE summary_id = %s",
                (
                    summary.content,
                    summary.token_count,
                    dump_json(list(summary.file_ids)),
                    summary.level,
                    summary.provider,
                    summary.model,
                    summary.reason,
                    summary.id,
                ),
            )
            # its search vectors are of the old text: the background build embeds the new one
            await conn.execute("DELETE FROM summary_vectors WHERE summary_id = %s", (summary.id,))
            await conn.execute(  # caches keyed on summary_fingerprint() see the change
                "INSERT INTO lcm_meta (key, value) VALUES ('summary_rewrites', '1') "
                "ON CONFLICT (key) DO UPDATE SET value = (lcm_meta.value::bigint + 1)::text"
            )
            delta = summary.token_count - int(row[1])
            if delta:
                await conn.execute(_ABOVE, {"s": summary.id, "d": delta})
            return True

    async def summary_fingerprint(self, conversation_id: int) -> tuple[int, int, int]:
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "SELECT count(*), coalesce(max(summary_rowid), 0), (SELECT coalesce(max(value::bigint), 0) "
                "FROM lcm_meta WHERE key = 'summary_rewrites') FROM summaries WHERE conversation_id = %s",
                (conversation_id,),
            )
            row = await cursor.fetchone()
        assert row is not None
        return int(row[0]), int(row[1]), int(row[2])
