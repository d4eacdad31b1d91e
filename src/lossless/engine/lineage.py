"""Reads of the summary DAG by id, for this agent only: what a browser of the DAG (the web explorer) needs.

Invariants:

* Every read is scoped to ``config.agent_id``: a summary or message of another agent's conversation
  is left out of the answer, as if it did not exist (never an error that would tell it exists).
* Reads are batched: each call is a fixed number of store reads whatever the number of ids, and
  touches only the rows named (never a conversation's whole DAG), so a page built from them costs
  the same at any history size.
* Nothing here writes.
"""

from __future__ import annotations

from collections.abc import Sequence

from lossless.config import Config
from lossless.ports import Store
from lossless.records import MessageRecord, Summary

__all__ = ["Lineage"]


class Lineage:
    """The summary DAG by id (the engine's ``summaries_by_id``, ``summary_sources`` and kin)."""

    def __init__(self, store: Store, config: Config) -> None:
        self.store = store
        self.config = config

    async def _own(self, conversation_ids: set[int]) -> set[int]:
        """Those of ``conversation_ids`` that belong to this agent."""
        mine: set[int] = set()
        for conversation_id in conversation_ids:
            found = await self.store.get_conversation(conversation_id)
            if found is not None and found.agent_id == self.config.agent_id:
                mine.add(conversation_id)
        return mine

    async def summaries_by_id(self, summary_ids: Sequence[str]) -> list[Summary]:
        """The summaries named (this agent's; unknown ids left out), in the order asked."""
        if not summary_ids:
            return []
        found = {s.id: s for s in await self.store.get_summaries(list(dict.fromkeys(summary_ids)))}
        mine = await self._own({s.conversation_id for s in found.values()})
        return [found[i] for i in dict.fromkeys(summary_ids) if i in found and found[i].conversation_id in mine]

    async def _owned_ids(self, summary_ids: Sequence[str]) -> list[str]:
        return [s.id for s in await self.summaries_by_id(summary_ids)]

    async def summary_sources(self, summary_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """For each condensed summary named, the summaries it was made from, in order."""
        owned = await self._owned_ids(summary_ids)
        return await self.store.get_summary_parents(owned) if owned else {}

    async def summary_messages(self, summary_ids: Sequence[str]) -> dict[str, tuple[int, ...]]:
        """For each leaf summary named, the ids of the messages it was made from, in order."""
        owned = await self._owned_ids(summary_ids)
        return await self.store.get_summary_messages(owned) if owned else {}

    async def condensed_into(self, summary_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """For each summary named, the condensed summaries made from it (one level up the DAG)."""
        owned = await self._owned_ids(summary_ids)
        return await self.store.get_summary_children(owned) if owned else {}

    async def messages_by_id(self, message_ids: Sequence[int]) -> list[MessageRecord]:
        """The stored messages named (this agent's; unknown ids left out), in the order asked."""
        if not message_ids:
            return []
        found = {m.id: m for m in await self.store.get_messages_by_id(list(dict.fromkeys(message_ids)))}
        mine = await self._own({m.conversation_id for m in found.values()})
        return [found[i] for i in dict.fromkeys(message_ids) if i in found and found[i].conversation_id in mine]
