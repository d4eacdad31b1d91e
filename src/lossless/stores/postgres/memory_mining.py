"""The record of which messages long-term memory has mined, on PostgreSQL (migration 6).

A mixin of :class:`~lossless.stores.postgres.memory.PostgresMemoryStore` (kept apart to hold that
module's size).  A claim is one ``INSERT … ON CONFLICT DO NOTHING RETURNING``: of two concurrent
claims of the same message exactly one gets it.  The backlog of messages never mined is walked a
window of ids at a time (an anti-join over every message would be planned as a hash join that reads
the whole history on each call).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from lossless.stores.postgres.connection import Database
from lossless.stores.postgres.statements import aware

__all__ = ["MinedMessages"]

#: The largest window of message ids one backlog read looks at.
_WINDOW = 8192


class MinedMessages:
    _db: Database

    async def claim_messages(self, message_ids: Sequence[int], when: datetime) -> list[int]:
        ids = list(dict.fromkeys(message_ids))
        if not ids:
            return []
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "INSERT INTO memory_mined (message_id, conversation_id, mined_at) "
                "SELECT message_id, conversation_id, %s FROM messages WHERE message_id = ANY(%s::bigint[]) "
                "ON CONFLICT (message_id) DO NOTHING RETURNING message_id",
                (aware(when), ids),
            )
            claimed = {int(row[0]) for row in await cursor.fetchall()}
        return [i for i in ids if i in claimed]

    async def release_messages(self, message_ids: Sequence[int]) -> None:
        ids = list(dict.fromkeys(message_ids))
        if ids:
            async with self._db.transaction() as conn:
                await conn.execute("DELETE FROM memory_mined WHERE message_id = ANY(%s::bigint[])", (ids,))

    async def unmined_messages(self, agent_id: str, *, after: int = 0, limit: int = 200) -> tuple[list[int], int]:
        found: list[int] = []
        window = 2 * limit  # grows while the windows hold mostly mined messages
        async with self._db.transaction() as conn:
            while True:
                cursor = await conn.execute(
                    "SELECT w.message_id, c.agent_id = %s AND NOT EXISTS "
                    "(SELECT 1 FROM memory_mined d WHERE d.message_id = w.message_id) "
                    "FROM (SELECT message_id, conversation_id FROM messages WHERE message_id > %s "
                    "ORDER BY message_id LIMIT %s) w JOIN conversations c USING (conversation_id) "
                    "ORDER BY w.message_id",
                    (agent_id, after, window),
                )
                rows = await cursor.fetchall()
                for message_id, todo in rows:
                    if len(found) == limit:
                        break
                    after = int(message_id)
                    if todo:
                        found.append(after)
                if len(found) >= limit or len(rows) < window:
                    return found, after
                window = min(_WINDOW, 2 * window)
