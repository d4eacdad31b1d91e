"""A session's whole context in one round trip on PostgreSQL (:class:`~lossless.ports.SessionContextStore`).

:class:`ContextReads` is the part of :class:`~lossless.stores.postgres.store.PostgresStore` that
reads, for one assembly, what the engine would otherwise read in three dependent steps (the
conversation, its context entries, then their messages, parts, summaries and parents).

Invariants:

* **One round trip.**  Every statement names the conversation by ``(agent_id, session_id)``
  through a subquery and the context's members through ``= ANY(ARRAY(…))`` over ``context_items``
  (an array the primary-key indexes answer, never a scan of ``message_parts``), so none needs
  another's result: all are sent in one pipeline with one ``Sync``.
* **One state.**  They run in one ``REPEATABLE READ READ ONLY`` transaction
  (:meth:`~lossless.stores.postgres.connection.Database.read_all`), so the entries, their
  messages and summaries are never from both sides of a concurrent compaction.
* **The same values** as :meth:`~lossless.ports.Store.find_conversation`,
  :meth:`~lossless.ports.Store.get_context`, :meth:`~lossless.ports.Store.get_messages_by_id`,
  :meth:`~lossless.ports.Store.get_summaries` and :meth:`~lossless.ports.Store.get_summary_parents`
  (the same row conversions; the contract suite compares them on a compacted conversation).
"""

from __future__ import annotations

from lossless.ports import SessionContext
from lossless.stores.postgres.connection import Database
from lossless.stores.postgres.core import CONTEXT_ENTRIES, context_entry
from lossless.stores.postgres.statements import (
    CONVERSATION_COLUMNS,
    MESSAGE_COLUMNS,
    PART_SELECT,
    SUMMARY_COLUMNS,
    attach_parts,
    conversation_from_row,
    summary_from_row,
)

__all__ = ["ContextReads"]

_CONVERSATION = "(SELECT conversation_id FROM conversations WHERE agent_id = %(a)s AND session_id = %(s)s)"
_MESSAGE_IDS = (
    f"SELECT ci.message_id FROM context_items ci WHERE ci.conversation_id = {_CONVERSATION} "
    "AND ci.message_id IS NOT NULL"
)
_SUMMARY_IDS = (
    f"SELECT ci.summary_id FROM context_items ci WHERE ci.conversation_id = {_CONVERSATION} "
    "AND ci.summary_id IS NOT NULL"
)
_STATEMENTS = (
    f"SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.agent_id = %(a)s AND c.session_id = %(s)s",
    CONTEXT_ENTRIES.replace("%(c)s", _CONVERSATION),
    f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE message_id = ANY(ARRAY({_MESSAGE_IDS}))",
    f"SELECT {PART_SELECT} FROM message_parts p WHERE p.message_id = ANY(ARRAY({_MESSAGE_IDS})) "
    "ORDER BY p.message_id, p.ordinal",
    f"SELECT {SUMMARY_COLUMNS} FROM summaries WHERE summary_id = ANY(ARRAY({_SUMMARY_IDS}))",
    "SELECT summary_id, parent_summary_id FROM summary_parents "
    f"WHERE summary_id = ANY(ARRAY({_SUMMARY_IDS})) ORDER BY summary_id, ordinal",
)


class ContextReads:
    """:meth:`read_session_context` (see the module docstring)."""

    _db: Database

    async def read_session_context(self, *, agent_id: str, session_id: str) -> SessionContext | None:
        params = {"a": agent_id, "s": session_id}
        results = await self._db.read_all([(sql, params) for sql in _STATEMENTS], prepare=True)
        conversation, entries, messages, parts, summaries, parents = results
        if not conversation:
            return None
        lineage: dict[str, list[str]] = {}
        for summary_id, parent in parents:
            lineage.setdefault(summary_id, []).append(parent)
        return SessionContext(
            conversation=conversation_from_row(conversation[0]),
            entries=tuple(context_entry(row) for row in entries),
            messages={m.id: m for m in attach_parts(messages, parts)},
            summaries={s.id: s for s in map(summary_from_row, summaries)},
            parents={k: tuple(v) for k, v in lineage.items()},
        )
