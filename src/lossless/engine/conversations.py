"""Conversations of one agent: finding them (by id or session id), their messages, and their lifecycle.

Invariants:

* Every conversation made here belongs to ``config.agent_id``; another agent's conversation is
  :class:`~lossless.errors.NotFoundError`, as if it did not exist.
* The session → conversation cache is only a shortcut for ingest: whatever another process may
  have changed (prune, reset, restart) is read from the store, and the cache is cleared by every
  operation that archives, removes or replaces a conversation.
* Sub-agent spawns (``isolated`` or ``fork``) and restarts never remove a stored message: the old
  conversation is archived and the new one linked to it as its child.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

from lossless.config import Config
from lossless.errors import LIST_CONVERSATIONS, InputError, NotFoundError, check_integer, check_unicode
from lossless.ports import Store
from lossless.records import ContextEntry, Conversation, Grant, MessageRecord
from lossless.sessions import open_session

__all__ = ["Conversations", "SpawnHandle", "conversation_number", "require_text"]

_CACHE_SIZE = 4096


def require_text(value: object, what: str) -> None:
    """``value`` is a non-empty string of valid Unicode, else :class:`InputError` naming ``what``."""
    if not isinstance(value, str) or not value:
        raise InputError(f"{what} must be a non-empty string, got {value!r}")
    check_unicode(value, what)


def conversation_number(ref: int | str) -> int | None:
    """The conversation id ``ref`` names (an int, or a string of ASCII digits), checked; None for a session id."""
    if isinstance(ref, str):
        if not (ref.isascii() and ref.isdigit()):
            return None
        if len(ref) > 19:  # more digits than any 64-bit id (and int() refuses over 4,300)
            raise InputError(f"conversation id {ref[:40]}… is out of range: ids are positive 64-bit integers")
        ref = int(ref)
    return check_integer(ref, "conversation id")


@dataclass(slots=True)
class SpawnHandle:
    """A prepared sub-agent conversation; :meth:`rollback` removes it if the spawn fails."""

    conversation: Conversation
    mode: Literal["isolated", "fork"]
    _rollback: Callable[[SpawnHandle], Awaitable[None]] = field(repr=False)
    #: With a ``ttl``: the child's read grant over the parent's history (``lcm mcp --grant``), until then.
    grant: Grant | None = None

    async def rollback(self) -> None:
        """Undo :meth:`ContextEngine.prepare_subagent_spawn` (only while the child has stored nothing)."""
        await self._rollback(self)


#: Mints a read grant: ``(conversations, *, ttl=, grantee=)`` (the engine's ``grant_expansion``).
GrantMinter = Callable[..., Awaitable[Grant]]
#: Ends a grant with a reason (the engine's ``revoke_expansion_grant``).
GrantRevoker = Callable[[str, str], Awaitable[bool]]


class Conversations:
    """This agent's conversations on one store (the engine's ``conversation``, ``messages``, spawns, restarts)."""

    def __init__(self, store: Store, config: Config) -> None:
        self.store = store
        self.config = config
        self._cache: OrderedDict[tuple[str, str], Conversation] = OrderedDict()

    # -------------------------------------------------------------- lookups

    async def for_session(self, session_id: str, session_key: str | None) -> Conversation:
        """The active conversation of a session, opened (or made) on first use and cached for ingest."""
        require_text(session_id, "session_id")
        if session_key is not None:
            require_text(session_key, "session_key")
        cache_key = (session_id, session_key or "")
        cached = self._cache.get(cache_key)
        if cached is not None:
            self._cache.move_to_end(cache_key)
            return cached
        found = await self.store.find_conversation(agent_id=self.config.agent_id, session_id=session_id)
        if found is None or (session_key is not None and found.session_key != session_key) or not found.active:
            found = await open_session(
                self.store,
                agent_id=self.config.agent_id,
                session_id=session_id,
                session_key=session_key,
                retain_depth=self.config.new_session_retain_depth,
                source="api",
            )
        self._cache[cache_key] = found
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return found

    async def find(self, session_id: str) -> Conversation | None:
        """A session's conversation as the store has it now (never the cache: another process may have pruned it)."""
        return await self.store.find_conversation(agent_id=self.config.agent_id, session_id=session_id)

    async def get(self, ref: int | str) -> Conversation:
        """A conversation of this agent by id (an int or digits) or by session id."""
        conversation: Conversation | None = None
        if not isinstance(ref, int) or isinstance(ref, bool):
            require_text(ref, "conversation")
        number = conversation_number(ref)
        if number is not None:
            conversation = await self.store.get_conversation(number)
            if conversation is not None and conversation.agent_id != self.config.agent_id:
                conversation = None
        if conversation is None and isinstance(ref, str):
            conversation = await self.find(ref)
        if conversation is None:
            raise NotFoundError(
                "conversation",
                ref,
                f"list this agent's ({self.config.agent_id}) conversations to find it ({LIST_CONVERSATIONS})",
            )
        return conversation

    async def recent(self, *, limit: int = 100, offset: int = 0) -> list[Conversation]:
        """This agent's conversations, most recently updated first."""
        return await self.store.list_conversations(agent_id=self.config.agent_id, limit=limit, offset=offset)

    async def messages(
        self,
        conversation: int | str,
        *,
        tail: int | None = None,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[MessageRecord]:
        """Stored messages of a conversation in order; ``tail=N`` gives the last N."""
        for name, value in (("tail", tail), ("after_seq", after_seq), ("limit", limit)):
            if value is not None:
                check_integer(value, name)
        conv = await self.get(conversation)
        if tail is not None:
            newest = await self.store.get_messages(conv.id, limit=tail, newest_first=True)
            return newest[::-1]
        return await self.store.get_messages(conv.id, after_seq=after_seq, limit=limit)

    async def sizes(self, conversations: Sequence[Conversation]) -> dict[int, tuple[int, int]]:
        """``{conversation id: (message count, token total)}`` for conversations of this agent."""
        return await self.store.conversation_sizes([c.id for c in conversations if c.agent_id == self.config.agent_id])

    async def context(self, conversation: int | str) -> list[ContextEntry]:
        """The conversation's active context items in order: what ``assemble`` chooses from."""
        return await self.store.get_context((await self.get(conversation)).id)

    def forget(self, conversation_id: int) -> bool:
        """Drop every cache entry naming ``conversation_id``; whether there was one."""
        stale = [key for key, cached in self._cache.items() if cached.id == conversation_id]
        for key in stale:
            del self._cache[key]
        return bool(stale)

    def clear(self) -> None:
        """Forget every cached session (after anything that archives, removes or replaces conversations)."""
        self._cache.clear()

    # -------------------------------------------------------------- sub-agents and restarts

    async def prepare_spawn(
        self,
        parent_session_id: str,
        child_session_id: str,
        *,
        mode: Literal["isolated", "fork"],
        child_session_key: str | None,
        ttl: timedelta | None,
        grant: GrantMinter,
        revoke: GrantRevoker,
    ) -> SpawnHandle:
        """A sub-agent's conversation (see :meth:`ContextEngine.prepare_subagent_spawn`)."""
        if mode not in ("isolated", "fork"):
            raise InputError(f"mode must be 'isolated' or 'fork', got {mode!r}")
        parent = await self.for_session(parent_session_id, None)
        if await self.find(child_session_id) is not None:
            raise InputError(f"session {child_session_id!r} already exists; a sub-agent needs a new session id")
        minted = None
        if ttl is not None:
            minted = await grant([parent.id], ttl=ttl, grantee=child_session_key or child_session_id)
        child = await self.store.get_or_create_conversation(
            agent_id=self.config.agent_id,
            session_id=child_session_id,
            session_key=child_session_key,
            parent_id=parent.id,
            source="subagent",
            metadata={"spawn": mode, **({"grant_id": minted.id} if minted else {})},
        )
        if mode == "fork":
            entries = await self.store.get_context(parent.id)
            budget = self.config.resolved_bootstrap_max_tokens
            start = len(entries)
            used = 0
            while start > 0 and used + entries[start - 1].token_count <= budget:
                start -= 1
                used += entries[start].token_count
            await self.store.copy_context(child.id, entries[start:])

        async def rollback(handle: SpawnHandle) -> None:
            if handle.grant is not None:
                await revoke(handle.grant.id, "error")
            await self.store.discard_conversation(handle.conversation.id)
            self.clear()

        return SpawnHandle(child, mode, rollback, minted)

    async def end_spawn(self, child_session_id: str, revoke: GrantRevoker) -> None:
        """A sub-agent finished or was swept: archive its conversation and end its read grant."""
        child = await self.find(child_session_id)
        if child is None:
            raise NotFoundError("conversation", child_session_id, "the sub-agent was never prepared or stored")
        grant_id = (child.metadata or {}).get("grant_id")
        if isinstance(grant_id, str):  # its read grant ends with it
            await revoke(grant_id, "completed")
        await self.store.archive_conversation(child.id)
        self.clear()

    async def restart(
        self, session_id: str, new_session_id: str, *, carry_context: bool, drop_newest: int
    ) -> list[MessageRecord]:
        """Go on with a session as a new one (see :meth:`ContextEngine.restart_session`)."""
        if drop_newest < 0:
            raise InputError(f"drop_newest must be zero or more, got {drop_newest}")
        old = await self.get(session_id)
        require_text(new_session_id, "new_session_id")
        if await self.find(new_session_id):
            raise InputError(f"session {new_session_id!r} already exists; a restart needs a new session id")
        entries = await self.store.get_context(old.id) if carry_context else []
        keep = len(entries)
        while keep > 0 and len(entries) - keep < drop_newest and entries[keep - 1].kind == "message":
            keep -= 1
        dropped_ids = [e.message_id for e in entries[keep:] if e.message_id is not None]
        await self.store.archive_conversation(old.id)  # first: one active conversation per session key
        new = await self.store.get_or_create_conversation(
            agent_id=self.config.agent_id,
            session_id=new_session_id,
            session_key=old.session_key,
            parent_id=old.id,
            source="restart",
            metadata={"restart_of": old.session_id},
        )
        await self.store.copy_context(new.id, entries[:keep])
        self.clear()
        by_id = {m.id: m for m in await self.store.get_messages_by_id(dropped_ids)}
        return [by_id[i] for i in dropped_ids if i in by_id]
