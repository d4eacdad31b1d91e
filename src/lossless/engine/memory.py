"""The engine's long-term memory: one memory service per agent on the engine's store, built on first use.

Invariants:

* The memories of a turn go to the engine agent's scope; only when ``agent_id`` is not configured
  does a session key of the form ``agent:<id>:…`` name another agent (spec 001 scopes), so one
  host serving several agents keeps their memories apart.
* A turn is mined once, and only when it holds a user message.
* The services are built by :mod:`lossless.engine.wiring` (embedder, reranker, extractor and
  dedup judge as the settings name them), lazily: an engine that never uses memory loads none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lossless.config import Config
from lossless.engine import wiring
from lossless.memory.scopes import MemoryCaller
from lossless.ports import Store
from lossless.records import IngestResult, Summary
from lossless.sessions import agent_id_from_session_key

if TYPE_CHECKING:
    from lossless.memory.service import MemoryService, Remembered

__all__ = ["LEAD_MEMORIES", "AgentMemory"]

#: How many memories expand_query's leads are drawn from (before keeping those of the grant's conversations).
LEAD_MEMORIES = 25


class AgentMemory:
    """The engine's ``memory()`` and ``remember()``."""

    def __init__(self, store: Store, config: Config) -> None:
        self.store = store
        self.config = config
        self._services: dict[str, MemoryService] = {}  # by agent id: the engine's, and those session keys name

    def memory(self, agent: str | None = None) -> MemoryService:
        """Long-term memory on this engine's store, as the configured agent (built on first use)."""
        agent = agent or self.config.agent_id
        service = self._services.get(agent)
        if service is None:
            service = self._services[agent] = wiring.memory_service(self.store, self.config, MemoryCaller.agent(agent))
        return service

    async def remember(self, ingested: IngestResult, *, session_key: str | None = None) -> Remembered | None:
        """Mine a stored turn for memories, once (``after_turn`` does it when ``memory_auto_extract``).

        The memories go to the engine agent's scope; when ``agent_id`` is not configured, a session key
        of the form ``agent:<id>:…`` names the agent instead (spec 001 scopes), so one host serving
        several agents keeps their memories apart.
        """
        if ingested.conversation_id is None or not any(m.role == "user" for m in ingested.stored):
            return None
        default_agent = self.config.sources.get("agent_id", "default") == "default"
        agent = agent_id_from_session_key(session_key) if default_agent else None
        return await self.memory(agent).mine(ingested.stored)

    async def leads(self, question: str, conversation_ids: tuple[int, ...]) -> list[int]:
        """The source messages of the memories that best match ``question``, best first (expand_query's leads).

        Only memories mined from ``conversation_ids`` count; the search records no access (a lead is
        not a recall).  An empty store answers at once, without embedding the question.
        """
        service = self.memory()
        if (await service.store.stats(await service.reach())).current == 0:
            return []
        found = await service.search(question[:2000], limit=LEAD_MEMORIES, record_access=False)
        wanted = set(conversation_ids)
        ids: list[int] = []
        for hit in found.hits:
            if hit.memory.conversation_id in wanted:
                ids += [i for i in hit.memory.source_message_ids if i not in ids]
        return ids

    async def mine_summary(self, leaf: Summary) -> object:
        """Mine a new leaf summary (the compactor's hook when ``memory_auto_extract``)."""
        return await self.memory().mine_summary(self.store, leaf)
