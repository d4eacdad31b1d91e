"""SQL for integrity checks and repairs on the SQLite store (the PostgreSQL store mirrors these).

Every function runs inside the store's reader or writer thread on a connection it is given, within
the caller's transaction.  Invariants:

* **Canonical rows are never touched here**, with one explicit exception: the ``remake_summary``
  repair gives a truncation-fallback summary a summarizer's text (:func:`rewrite_summary`: its
  text and provenance columns, and the token counts above it; never its id, lineage or times).
  Other repairs write only context items (a pointer list) and, through
  :meth:`SearchIndex.rebuild`, the disposable index file.
* A restored context item goes where the message belongs by ``seq``: before the first context
  item that covers a later message of the conversation, so the active context stays in order.
* Reads of the index use the reader connection's ``idx`` attachment, in one snapshot with the
  main file.
* Retention deletes only whole conversations, only when asked, and never one that another
  conversation still points at.  Before deleting, it raises ``message_id_floor`` and
  ``summary_rowid_floor`` in ``lcm_meta`` so no id the index knows is ever reused; the rows it
  deleted are then removed from the index (:meth:`SearchIndex.forget`) after the commit.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from lossless.errors import InputError
from lossless.ports import IndexDiscrepancy, PruneCandidate
from lossless.records import Summary
from lossless.stores.rows import dump_json, restore_position
from lossless.stores.sqlite.index import SOURCES, Forgotten, Rewritten

__all__ = [
    "archived_before",
    "delete_conversations",
    "drop_context_item",
    "index_discrepancies",
    "prune_candidate",
    "restore_context_item",
    "rewrite_summary",
]


def index_discrepancies(conn: sqlite3.Connection, limit: int) -> list[IndexDiscrepancy]:
    """Rows the index holds that do not exist (stale), and rows at or below its watermark it lacks (missing)."""
    found: list[IndexDiscrepancy] = []
    for source in SOURCES:
        row = conn.execute("SELECT watermark FROM idx.index_state WHERE source = ?", (source.name,)).fetchone()
        mark = 0 if row is None else int(row[0])
        for suffix in ("fts", "trigram"):
            shadow = f"idx.{source.name}_{suffix}_docsize"
            stale = conn.execute(
                f"SELECT d.id FROM {shadow} d WHERE NOT EXISTS "
                f"(SELECT 1 FROM main.{source.table} t WHERE t.{source.key} = d.id) ORDER BY d.id LIMIT ?",
                (limit,),
            ).fetchall()
            missing = conn.execute(
                f"SELECT t.{source.key} FROM main.{source.table} t WHERE t.{source.key} <= ? AND NOT EXISTS "
                f"(SELECT 1 FROM {shadow} d WHERE d.id = t.{source.key}) ORDER BY t.{source.key} LIMIT ?",
                (mark, limit),
            ).fetchall()
            found += [IndexDiscrepancy(source.name, r[0], "stale") for r in stale]
            found += [IndexDiscrepancy(source.name, r[0], "missing") for r in missing]
    unique = list(dict.fromkeys(found))  # the two tables of a source usually agree: report each row once
    return unique[:limit]


def _first_seq_by_item(conn: sqlite3.Connection, conversation_id: int) -> list[tuple[int, int | None]]:
    """``(ordinal, smallest seq of this conversation's messages the item covers)`` for each context item."""
    summary_seq = dict(
        conn.execute(
            "WITH RECURSIVE reach(root, sid) AS ("
            " SELECT summary_id, summary_id FROM context_items WHERE conversation_id = ?1 AND item_type = 'summary'"
            " UNION SELECT r.root, sp.parent_summary_id FROM reach r"
            " JOIN summary_parents sp ON sp.summary_id = r.sid) "
            "SELECT r.root, min(m.seq) FROM reach r JOIN summary_messages sm ON sm.summary_id = r.sid "
            "JOIN messages m ON m.message_id = sm.message_id AND m.conversation_id = ?1 GROUP BY r.root",
            (conversation_id,),
        ).fetchall()
    )
    out: list[tuple[int, int | None]] = []
    for ordinal, kind, seq, summary_id in conn.execute(
        "SELECT ci.ordinal, ci.item_type, m.seq, ci.summary_id FROM context_items ci "
        "LEFT JOIN messages m ON m.message_id = ci.message_id AND m.conversation_id = ci.conversation_id "
        "WHERE ci.conversation_id = ? ORDER BY ci.ordinal",
        (conversation_id,),
    ):
        out.append((ordinal, seq if kind == "message" else summary_seq.get(summary_id)))
    return out


def _summary_first_seq(conn: sqlite3.Connection, conversation_id: int, summary_id: str) -> int | None:
    row = conn.execute(
        "WITH RECURSIVE reach(sid) AS (SELECT ?2 UNION SELECT sp.parent_summary_id FROM reach r "
        "JOIN summary_parents sp ON sp.summary_id = r.sid) "
        "SELECT min(m.seq) FROM reach r JOIN summary_messages sm ON sm.summary_id = r.sid "
        "JOIN messages m ON m.message_id = sm.message_id AND m.conversation_id = ?1",
        (conversation_id, summary_id),
    ).fetchone()
    return None if row is None else row[0]


def restore_context_item(conn: sqlite3.Connection, conversation_id: int, ref: int | str, created_at: str) -> bool:
    """Put message or summary ``ref`` of the conversation back into its context (see the module docstring)."""
    if isinstance(ref, str):
        if (
            conn.execute(
                "SELECT 1 FROM summaries WHERE summary_id = ? AND conversation_id = ?", (ref, conversation_id)
            ).fetchone()
            is None
            or conn.execute(
                "SELECT 1 FROM context_items WHERE conversation_id = ? AND summary_id = ?", (conversation_id, ref)
            ).fetchone()
        ):
            return False
        seq = _summary_first_seq(conn, conversation_id, ref)
        if seq is None:
            return False
        column, kind = "summary_id", "summary"
    else:
        row = conn.execute(
            "SELECT seq FROM messages WHERE message_id = ? AND conversation_id = ?", (ref, conversation_id)
        ).fetchone()
        if (
            row is None
            or conn.execute(
                "SELECT 1 FROM context_items WHERE conversation_id = ? AND message_id = ?", (conversation_id, ref)
            ).fetchone()
        ):
            return False
        seq, column, kind = row[0], "message_id", "message"
    items = _first_seq_by_item(conn, conversation_id)
    ordinal, shift = restore_position(items, seq)
    if shift:
        # No free ordinal: shift the items from ``ordinal`` on by one (through negatives, so the
        # primary key never sees two items at one ordinal mid-update).
        conn.execute(
            "UPDATE context_items SET ordinal = -(ordinal + 1) WHERE conversation_id = ? AND ordinal >= ?",
            (conversation_id, ordinal),
        )
        conn.execute(
            "UPDATE context_items SET ordinal = -ordinal WHERE conversation_id = ? AND ordinal < 0",
            (conversation_id,),
        )
    conn.execute(
        f"INSERT INTO context_items (conversation_id, ordinal, item_type, {column}, created_at) VALUES (?, ?, ?, ?, ?)",
        (conversation_id, ordinal, kind, ref, created_at),
    )
    return True


def drop_context_item(conn: sqlite3.Connection, conversation_id: int, ordinal: int) -> bool:
    row = conn.execute(
        "SELECT ci.item_type, m.message_id, s.summary_id FROM context_items ci "
        "LEFT JOIN messages m ON m.message_id = ci.message_id "
        "LEFT JOIN summaries s ON s.summary_id = ci.summary_id "
        "WHERE ci.conversation_id = ? AND ci.ordinal = ?",
        (conversation_id, ordinal),
    ).fetchone()
    if row is None or row[1] is not None or row[2] is not None:
        return False
    conn.execute("DELETE FROM context_items WHERE conversation_id = ? AND ordinal = ?", (conversation_id, ordinal))
    return True


def rewrite_summary(conn: sqlite3.Connection, summary: Summary, replaces: str) -> list[Rewritten]:
    """Store ``summary``'s new text if the stored one is still ``replaces`` (see ``Store.rewrite_summary``).

    Returns the index row to re-index, ``[(summary_rowid, old content, new content)]``, or ``[]``.
    """
    row = conn.execute(
        "SELECT summary_rowid, content, token_count FROM summaries WHERE summary_id = ?", (summary.id,)
    ).fetchone()
    if row is None or row[1] != replaces:
        return []
    conn.execute(
        "UPDATE summaries SET content = ?, token_count = ?, file_ids = ?, level = ?, provider = ?, model = ?, "
        "reason = ? WHERE summary_id = ?",
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
    conn.execute("DELETE FROM summary_vectors WHERE summary_id = ?", (summary.id,))
    conn.execute(  # caches keyed on summary_fingerprint() see the change
        "INSERT INTO lcm_meta (key, value) VALUES ('summary_rewrites', '1') "
        "ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
    )
    delta = summary.token_count - row[2]
    if delta:
        conn.execute(
            "WITH RECURSIVE above(sid) AS (SELECT summary_id FROM summary_parents WHERE parent_summary_id = ?1 "
            "UNION SELECT sp.summary_id FROM summary_parents sp JOIN above a ON sp.parent_summary_id = a.sid) "
            "UPDATE summaries SET descendant_token_count = descendant_token_count + ?2 "
            "WHERE summary_id IN (SELECT sid FROM above)",
            (summary.id, delta),
        )
    return [(row[0], row[1], summary.content)]


# ---------------------------------------------------------------- retention


def archived_before(conn: sqlite3.Connection, agent_id: str, before: str) -> list[int]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT conversation_id FROM conversations WHERE agent_id = ? AND active = 0 "
            "AND archived_at IS NOT NULL AND archived_at < ? ORDER BY conversation_id",
            (agent_id, before),
        )
    ]


def referrers(conn: sqlite3.Connection, conversation_id: int) -> tuple[int, ...]:
    """Other conversations whose context items or summaries point at this conversation's rows."""
    rows = conn.execute(
        "SELECT ci.conversation_id FROM context_items ci JOIN messages m ON m.message_id = ci.message_id "
        "WHERE m.conversation_id = ?1 AND ci.conversation_id <> ?1 "
        "UNION SELECT ci.conversation_id FROM context_items ci JOIN summaries s ON s.summary_id = ci.summary_id "
        "WHERE s.conversation_id = ?1 AND ci.conversation_id <> ?1 "
        "UNION SELECT s.conversation_id FROM summary_messages sm JOIN summaries s ON s.summary_id = sm.summary_id "
        "JOIN messages m ON m.message_id = sm.message_id WHERE m.conversation_id = ?1 AND s.conversation_id <> ?1 "
        "UNION SELECT s.conversation_id FROM summary_parents sp JOIN summaries s ON s.summary_id = sp.summary_id "
        "JOIN summaries p ON p.summary_id = sp.parent_summary_id "
        "WHERE p.conversation_id = ?1 AND s.conversation_id <> ?1",
        (conversation_id,),
    ).fetchall()
    return tuple(sorted(r[0] for r in rows))


def prune_candidate(conn: sqlite3.Connection, conversation_id: int) -> PruneCandidate | None:
    row = conn.execute(
        "SELECT agent_id, session_id, active, archived_at FROM conversations WHERE conversation_id = ?",
        (conversation_id,),
    ).fetchone()
    if row is None:
        return None
    messages, message_bytes = conn.execute(
        "SELECT count(*), coalesce(sum(length(CAST(content AS BLOB)) + coalesce(length(metadata), 0)), 0) "
        "FROM messages WHERE conversation_id = ?",
        (conversation_id,),
    ).fetchone()
    part_bytes = conn.execute(
        "SELECT coalesce(sum(coalesce(length(CAST(p.text_content AS BLOB)), 0) + coalesce(length(p.tool_input), 0) "
        "+ coalesce(length(CAST(p.tool_output AS BLOB)), 0) + coalesce(length(p.tool_error), 0)), 0) "
        "FROM messages m JOIN message_parts p ON p.part_id BETWEEN m.message_id * 65536 "
        "AND m.message_id * 65536 + 65535 WHERE m.conversation_id = ?",
        (conversation_id,),
    ).fetchone()[0]
    summaries, summary_bytes = conn.execute(
        "SELECT count(*), coalesce(sum(length(CAST(content AS BLOB))), 0) FROM summaries WHERE conversation_id = ?",
        (conversation_id,),
    ).fetchone()
    files, file_bytes = conn.execute(
        "SELECT count(*), coalesce(sum(coalesce(length(exploration_summary), 0)), 0) FROM large_files "
        "WHERE conversation_id = ?",
        (conversation_id,),
    ).fetchone()
    return PruneCandidate(
        conversation_id=conversation_id,
        agent_id=row[0],
        session_id=row[1],
        active=bool(row[2]),
        archived_at=None if row[3] is None else datetime.fromisoformat(row[3]),
        messages=messages,
        summaries=summaries,
        files=files,
        row_bytes=int(message_bytes + part_bytes + summary_bytes + file_bytes),
        blocked_by=referrers(conn, conversation_id),
    )


def _raise_floor(conn: sqlite3.Connection, key: str, value: int | None) -> None:
    if value is None:
        return
    conn.execute(
        "INSERT INTO lcm_meta (key, value) VALUES (?1, CAST(?2 AS TEXT)) ON CONFLICT (key) DO UPDATE SET "
        "value = CAST(max(CAST(value AS INTEGER), ?2) AS TEXT)",
        (key, value),
    )


def delete_conversations(conn: sqlite3.Connection, conversation_ids: Sequence[int]) -> Forgotten:
    """Delete whole conversations (see :class:`RetentionStore`); returns the rows the index must forget."""
    chosen = set(conversation_ids)
    for conversation_id in conversation_ids:
        blocked = [c for c in referrers(conn, conversation_id) if c not in chosen]
        if blocked:
            raise InputError(
                f"conversation {conversation_id} is still referred to by conversation(s) "
                f"{', '.join(map(str, blocked))} (forked sub-agents); prune those too, or keep it. Nothing was deleted"
            )
    forgotten: Forgotten = {"messages": [], "summaries": []}
    per_conversation: list[list[tuple[int, str]]] = []
    for conversation_id in conversation_ids:
        messages = conn.execute(
            "SELECT message_id, content FROM messages WHERE conversation_id = ?", (conversation_id,)
        ).fetchall()
        summaries = conn.execute(
            "SELECT summary_rowid, content FROM summaries WHERE conversation_id = ?", (conversation_id,)
        ).fetchall()
        forgotten["messages"] += messages
        forgotten["summaries"] += summaries
        _raise_floor(conn, "message_id_floor", max((m[0] for m in messages), default=None))
        _raise_floor(conn, "summary_rowid_floor", max((s[0] for s in summaries), default=None))
        per_conversation.append(messages)
    # First every pointer of the chosen conversations (they may point at each other's rows) …
    in_conversation = "SELECT summary_id FROM summaries WHERE conversation_id = ?"
    for conversation_id in conversation_ids:
        conn.execute("DELETE FROM context_items WHERE conversation_id = ?", (conversation_id,))
        conn.execute(f"DELETE FROM summary_parents WHERE summary_id IN ({in_conversation})", (conversation_id,))
        conn.execute(f"DELETE FROM summary_messages WHERE summary_id IN ({in_conversation})", (conversation_id,))
    # … then the rows themselves.
    for conversation_id, messages in zip(conversation_ids, per_conversation, strict=True):
        conn.execute("DELETE FROM summaries WHERE conversation_id = ?", (conversation_id,))
        conn.executemany(
            "DELETE FROM message_parts WHERE part_id BETWEEN ?1 * 65536 AND ?1 * 65536 + 65535",
            [(m[0],) for m in messages],
        )
        conn.execute("DELETE FROM messages WHERE conversation_id = ?", (conversation_id,))
        conn.execute("DELETE FROM large_files WHERE conversation_id = ?", (conversation_id,))
        conn.execute("DELETE FROM conversation_bootstrap_state WHERE conversation_id = ?", (conversation_id,))
        conn.execute("DELETE FROM conversations WHERE conversation_id = ?", (conversation_id,))
    return forgotten
