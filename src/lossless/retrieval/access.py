"""Who may read what: callers, their reach, and delegation grants.

Invariants:

* Every retrieval call runs as a :class:`Caller`.  Its **default reach** is its
  own conversation family: the conversation of its session (by session key or
  session id), every conversation of the same agent under the same session key
  (earlier sessions archived by a reset), and the ancestors and descendants of
  those through sub-agent links.  ``all_conversations`` widens the reach to
  every conversation of the caller's agent, never further.
* A caller holding a **grant** (an expansion sub-agent) reaches exactly the
  grant's conversations, and only while the grant is neither revoked nor
  expired; each check re-reads the grant from the store, so a revocation
  stops a running sub-agent at its next call.
* **Denials do not leak.**  A conversation, summary or file out of reach gets
  the same error whether it exists elsewhere or not (:class:`AccessDenied`
  for conversations asked for by id, :class:`~lossless.errors.NotFoundError`
  for summary and file ids).
* No I/O beyond the :class:`~lossless.ports.Store` port.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from lossless.errors import AccessDeniedError, InputError
from lossless.ports import Store
from lossless.records import Grant

__all__ = ["AccessDenied", "Caller", "Reach", "check_reach_options", "reach_from_links", "resolve_reach"]


#: The retrieval tools' name for :class:`lossless.errors.AccessDeniedError` (one error for every refusal).
AccessDenied = AccessDeniedError


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: an agent, the session it is in, and (for an expansion sub-agent) the grant it holds."""

    agent_id: str
    session_key: str | None = None
    session_id: str | None = None
    grant_id: str | None = None

    def __post_init__(self) -> None:
        agent: object = self.agent_id
        if not isinstance(agent, str) or not agent:
            raise InputError(f"a caller needs a non-empty agent_id, got {self.agent_id!r}")
        for name in ("session_key", "session_id", "grant_id"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise InputError(f"caller {name} must be a non-empty string or None, got {value!r}")

    def describe(self) -> str:
        where = self.session_key or self.session_id
        return f"agent {self.agent_id!r}" + (f", session {where!r}" if where else "")


@dataclass(frozen=True, slots=True)
class Reach:
    """The conversations one call may read, and (under a grant) the grant it draws on."""

    conversation_ids: tuple[int, ...]
    grant: Grant | None = None
    own: int | None = None

    def allows(self, conversation_id: int) -> bool:
        return conversation_id in self.conversation_ids


def _family(links: list[tuple[int, int | None, str | None]], roots: Iterable[int], session_key: str | None) -> set[int]:
    parent_of = {cid: parent for cid, parent, _ in links}
    children: dict[int, list[int]] = {}
    for cid, parent, _ in links:
        if parent is not None:
            children.setdefault(parent, []).append(cid)
    seeds = set(roots)
    if session_key is not None:
        seeds |= {cid for cid, _, key in links if key == session_key}
    # up to the top ancestor of each seed, then every descendant
    tops: set[int] = set()
    for seed in seeds:
        node, seen = seed, {seed}
        while parent_of.get(node) is not None and parent_of[node] not in seen:
            node = parent_of[node]  # type: ignore[assignment]
            seen.add(node)
        tops.add(node)
    family, stack = set(), list(tops | seeds)
    while stack:
        node = stack.pop()
        if node in family or node not in parent_of:
            continue
        family.add(node)
        stack += children.get(node, [])
    return family


def _denied(caller: Caller, what: str) -> AccessDenied:
    return AccessDenied(
        f"{what} is not within reach of {caller.describe()}: a caller reads its own conversation family by "
        "default, all_conversations=true reaches the other conversations of its own agent, and anything "
        "else needs an expansion grant (use lcm_expand_query)"
    )


async def check_grant(store: Store, caller: Caller, now: datetime) -> Grant:
    """The caller's grant, if it is still valid; else :class:`AccessDenied`."""
    assert caller.grant_id is not None
    grant = await store.get_grant(caller.grant_id)
    if grant is None or grant.agent_id != caller.agent_id:
        raise AccessDenied(
            f"grant {caller.grant_id!r} is not valid for {caller.describe()}: no grant of this agent has that id "
            "(grants are per agent: check the id and --agent, or make one with `lcm grants create`)"
        )
    if grant.revoked_at is not None:
        raise AccessDenied(
            f"grant {grant.id!r} was revoked ({grant.revoke_reason or 'revoked'}); "
            "the expansion is over: ask lcm_expand_query again"
        )
    if not grant.usable(now):
        raise AccessDenied(f"grant {grant.id!r} has expired; the expansion is over: ask lcm_expand_query again")
    return grant


def check_reach_options(conversation_id: object, all_conversations: object) -> None:
    """Refuse a ``conversation_id`` that is not a positive integer and an ``all_conversations`` that is not a bool."""
    if conversation_id is not None and (type(conversation_id) is not int or conversation_id < 1):
        raise InputError(f"conversation_id must be a positive integer, got {conversation_id!r}")
    if type(all_conversations) is not bool:
        raise InputError(f"all_conversations must be true or false, got {all_conversations!r}")


def reach_from_links(
    caller: Caller,
    links: list[tuple[int, int | None, str | None]],
    own: int | None,
    *,
    conversation_id: int | None = None,
    all_conversations: bool = False,
    require_target: bool = True,
) -> Reach:
    """The reach of a caller without a grant, from its agent's conversation links and its own conversation.

    ``links`` are :meth:`~lossless.ports.Store.list_conversation_links` of the caller's agent and
    ``own`` the id of the caller's session's conversation (None if it has none or names no session);
    the rest as :func:`resolve_reach`.  No I/O: a store that reads ``links`` together with other
    data (:class:`~lossless.ports.ReachSearchStore`) gets the same reach as :func:`resolve_reach`.
    """
    if all_conversations:
        everything = tuple(cid for cid, _, _ in links)
        if conversation_id is not None:
            if conversation_id not in everything:
                raise _denied(caller, f"conversation {conversation_id}")
            return Reach((conversation_id,), own=own)
        return Reach(everything, own=own)
    family = _family(links, [] if own is None else [own], caller.session_key)
    if conversation_id is not None:
        if conversation_id not in family:
            raise _denied(caller, f"conversation {conversation_id}")
        return Reach((conversation_id,), own=own)
    if not family and require_target:
        raise InputError(
            f"{caller.describe()} has no conversation of its own yet: pass conversation_id, or "
            "all_conversations=true to search every conversation of this agent"
        )
    return Reach(tuple(sorted(family)), own=own)


async def resolve_reach(
    store: Store,
    caller: Caller,
    *,
    now: datetime,
    conversation_id: int | None = None,
    all_conversations: bool = False,
    require_target: bool = True,
) -> Reach:
    """The conversations this call may read (see the module invariants).

    ``conversation_id`` narrows the reach to that one conversation (denied when
    outside the caller's reach); without it and without ``all_conversations``
    the reach is the caller's family, which must not be empty when
    ``require_target``.
    """
    check_reach_options(conversation_id, all_conversations)
    if caller.grant_id is not None:
        grant = await check_grant(store, caller, now)
        ids = grant.conversation_ids
        if conversation_id is not None:
            if conversation_id not in ids:
                raise _denied(caller, f"conversation {conversation_id}")
            ids = (conversation_id,)
        return Reach(tuple(ids), grant)
    links = await store.list_conversation_links(caller.agent_id)
    own: int | None = None
    if caller.session_key is not None or caller.session_id is not None:
        found = await store.find_conversation(
            agent_id=caller.agent_id, session_id=caller.session_id, session_key=caller.session_key
        )
        own = None if found is None else found.id
    return reach_from_links(
        caller,
        links,
        own,
        conversation_id=conversation_id,
        all_conversations=all_conversations,
        require_target=require_target,
    )
