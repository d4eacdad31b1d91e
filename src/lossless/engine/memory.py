"""The engine's long-term memory: one memory service per agent on the engine's store, built on first use.

Invariants:

* The memories of a turn go to the engine agent's scope; only when ``agent_id`` is not configured
  does a session key of the form ``agent:<id>:…`` name another agent (spec 001 scopes), so one
  host serving several agents keeps their memories apart.
* A turn is mined once, and only when it holds a user message; inline (``after_turn``, the leaf
  hook) only its segments that hold a user message: its agent's work is left to the background build.
* The services are built by :mod:`lossless.engine.wiring` (embedder, reranker, extractor and
  dedup judge as the settings name them), lazily: an engine that never uses memory loads none.
  Each runs on the engine's clock: the times its memories are stored, superseded, updated and
  accessed at, and the "now" decay and recency are read against, are the clock's, never the wall's.
* **The backlog is mined in the background** (:meth:`AgentMemory.mine_step`, a batch per call; the
  background workers' idle work and ``lcm index`` call it when ``memory_auto_extract``): messages
  of this engine's agent that nothing mined yet — history imported in bulk, turns stored with
  ``ingest`` — oldest first, each into the scope :meth:`AgentMemory.remember` would pick.  Like the
  vector build it walks the ids after where it stopped, and all of them again every
  :data:`RESCAN_S` seconds (ids committed out of order).  Without an embedder (the base install)
  it stops for the life of the engine with one log line, and says why in ``mining_off``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from lossless.config import Config
from lossless.engine import wiring
from lossless.errors import MissingDependencyError
from lossless.memory.scopes import MemoryCaller
from lossless.ports import Store
from lossless.records import IngestResult, MessageRecord, Summary, utcnow
from lossless.sessions import agent_id_from_session_key

if TYPE_CHECKING:
    from lossless.memory.service import MemoryService, Remembered

__all__ = ["LEAD_MEMORIES", "MINE_BATCH", "RESCAN_S", "AgentMemory"]

#: How many memories expand_query's leads are drawn from (before keeping those of the grant's conversations).
LEAD_MEMORIES = 25
#: Messages one background mining step takes (the offline extractor mines about a thousand a second).
MINE_BATCH = 200
#: How often the backlog walk starts from the first message again (rows committed out of id order).
RESCAN_S = 300.0

log = logging.getLogger("lossless.memory")


class AgentMemory:
    """The engine's ``memory()`` and ``remember()``."""

    def __init__(self, store: Store, config: Config, *, clock: Callable[[], datetime] = utcnow) -> None:
        self.store = store
        self.config = config
        self.clock = clock  # the engine's: every memory service here stamps and compares times by it
        self._services: dict[str, MemoryService] = {}  # by agent id: the engine's, and those session keys name
        self._mined_to = 0  # the backlog walk's cursor: every message id up to it was looked at
        self._last_rescan = time.monotonic()
        self._vectors_done_at: float | None = None  # when a vectors step last found nothing to embed
        #: Why this engine mines no backlog (e.g. no embedder installed); ``None`` while it does.
        self.mining_off: str | None = None

    def memory(self, agent: str | None = None) -> MemoryService:
        """Long-term memory on this engine's store, as the configured agent (built on first use)."""
        agent = agent or self.config.agent_id
        service = self._services.get(agent)
        if service is None:
            service = self._services[agent] = wiring.memory_service(
                self.store, self.config, MemoryCaller.agent(agent), clock=self.clock
            )
        return service

    async def remember(self, ingested: IngestResult, *, session_key: str | None = None) -> Remembered | None:
        """Mine a stored turn for memories, once (``after_turn`` does it when ``memory_auto_extract``).

        The memories go to the engine agent's scope; when ``agent_id`` is not configured, a session key
        of the form ``agent:<id>:…`` names the agent instead (spec 001 scopes), so one host serving
        several agents keeps their memories apart.
        """
        if ingested.conversation_id is None or not any(m.role == "user" for m in ingested.stored):
            return None
        return await self.memory(self._agent_for(session_key)).mine(ingested.stored, defer_work=True)

    async def remember_turn(self, ingested: IngestResult, session_key: str | None) -> Remembered | None:
        """:meth:`remember` as ``after_turn`` calls it: without an embedder it stops (see ``mining_off``)."""
        if self.mining_off is not None:
            return None
        try:
            return await self.remember(ingested, session_key=session_key)
        except MissingDependencyError as exc:
            self._stop_mining(exc)
            return None

    def _agent_for(self, session_key: str | None) -> str | None:
        """The agent whose scope a conversation's memories go to (``None``: the engine's own)."""
        default_agent = self.config.sources.get("agent_id", "default") == "default"
        return agent_id_from_session_key(session_key) if default_agent else None

    async def vectors_step(self, limit: int = MINE_BATCH) -> int:
        """Embed one batch of memories that have no vectors of the current embedder; how many (0: none left).

        Memories stored under another ``memory_embedder`` (a changed setting, an upgrade to a new
        default model) get the current model's vectors in the background, like the messages' search
        vectors.  Without an embedder it stops as mining does.  Once nothing is left it looks again
        only every :data:`RESCAN_S` seconds (this engine stores its own memories with vectors; only
        another host with another embedder adds memories without them), so an idle worker does not
        read the whole memory table at every poll.
        """
        if self.mining_off is not None:
            return 0
        now = time.monotonic()
        if self._vectors_done_at is not None and now - self._vectors_done_at < RESCAN_S:
            return 0
        try:
            done = await self.memory().embed_missing(limit)
        except MissingDependencyError as exc:
            self._stop_mining(exc)
            return 0
        self._vectors_done_at = now if done == 0 else None
        return done

    async def mine_step(self, limit: int = MINE_BATCH) -> int:
        """Mine one batch of this agent's messages that nothing mined yet; how many were looked at (0: none left).

        The background build's memory half (see the module's invariants).  An error other than a
        missing embedder propagates and the same batch is tried again at the next step.
        """
        if self.mining_off is not None:
            return 0
        now = time.monotonic()
        if now - self._last_rescan >= RESCAN_S:
            self._mined_to, self._last_rescan = 0, now
        ids, cursor = await self.memory().store.unmined_messages(
            self.config.agent_id, after=self._mined_to, limit=limit
        )
        if ids:
            by_conversation: dict[int, list[MessageRecord]] = {}
            for message in sorted(await self.store.get_messages_by_id(ids), key=lambda m: m.id):
                by_conversation.setdefault(message.conversation_id, []).append(message)
            try:
                await self._mine_conversations(by_conversation)
            except MissingDependencyError as exc:
                self._stop_mining(exc)
                return 0
        self._mined_to = cursor
        return len(ids)

    async def _mine_conversations(self, by_conversation: dict[int, list[MessageRecord]]) -> None:
        for conversation_id, messages in by_conversation.items():
            conversation = await self.store.get_conversation(conversation_id)
            agent = self._agent_for(conversation.session_key if conversation is not None else None)
            await self.memory(agent).mine(messages)

    async def leads(self, question: str, conversation_ids: tuple[int, ...]) -> list[int]:
        """The source messages of the memories that best match ``question``, best first (expand_query's leads).

        Only memories mined from ``conversation_ids`` count; the search records no access (a lead is
        not a recall).  An empty store answers at once, without embedding the question.
        """
        service = self.memory()
        if (await service.store.stats(await service.reach())).current == 0:
            return []
        wanted = set(conversation_ids)
        found = await service.search(
            question[:2000], limit=LEAD_MEMORIES, record_access=False, conversations=sorted(wanted)
        )
        ids: list[int] = []
        for hit in found.hits:
            if hit.memory.conversation_id in wanted:
                ids += [i for i in hit.memory.source_message_ids if i not in ids]
        return ids

    async def mine_summary(self, leaf: Summary) -> object:
        """Mine a new leaf summary (the compactor's hook when ``memory_auto_extract``); without an embedder it
        stops, as :meth:`remember_turn` does."""
        if self.mining_off is not None:
            return None
        try:
            return await self.memory().mine_summary(self.store, leaf, defer_work=True)
        except MissingDependencyError as exc:
            self._stop_mining(exc)
            return None

    def _stop_mining(self, exc: MissingDependencyError) -> None:
        self.mining_off = str(exc)
        log.info("no mining of long-term memories: %s", exc)
