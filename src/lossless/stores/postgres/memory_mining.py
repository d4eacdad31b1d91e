"""The record of which messages long-term memory has mined, on PostgreSQL (migration 6).

A mixin of :class:`~lossless.stores.postgres.memory.PostgresMemoryStore` (kept apart to hold that
module's size).  A claim is one ``INSERT … ON CONFLICT DO NOTHING RETURNING``: of two concurrent
claims of the same message exactly one gets it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from lossless.stores.postgres.connection import Database

__all__ = ["MinedMessages"]


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
                (when, ids),
            )
            claimed = {int(row[0]) for row in await cursor.fetchall()}
        return [i for i in ids if i in claimed]

    async def release_messages(self, message_ids: Sequence[int]) -> None:
        ids = list(dict.fromkeys(message_ids))
        if ids:
            async with self._db.transaction() as conn:
                await conn.execute("DELETE FROM memory_mined WHERE message_id = ANY(%s::bigint[])", (ids,))
