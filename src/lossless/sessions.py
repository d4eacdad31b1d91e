"""Session policy: which sessions are stored, which may only read, and which are ignored.

Invariants:

* Patterns are globs over the session key (or the session id when there is
  no key): ``*`` matches any run of characters except ``:``, ``**`` matches
  anything, ``?`` one character other than ``:``; everything else is literal.
  Matching is case-sensitive and covers the whole key.
* ``ignored`` wins over ``stateless``; an ignored session is never stored.  A
  stateless session may read; its writes are skipped while
  ``skip_stateless_sessions`` is on.
* **A new session under a session key carries the old one's long memory.**
  When a session id is first seen under a key whose active session is another
  (a host's ``/new``), that session is archived and the new one's context
  starts with the old one's summaries of depth ``new_session_retain_depth`` and
  deeper, in order (shared, not copied: expanding them leads to the old
  session's messages).  Raw messages and shallower summaries stay behind.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from lossless.ports import Store
from lossless.records import Conversation

__all__ = ["SessionClass", "SessionPolicy", "agent_id_from_session_key", "glob_to_regex", "open_session"]

SessionClass = Literal["normal", "ignored", "stateless"]


_AGENT_KEY = re.compile(r"agent:([A-Za-z0-9._@-]{1,128})(?::.*)?\Z", re.DOTALL)


def agent_id_from_session_key(session_key: str | None) -> str | None:
    """The agent a session key of the form ``agent:<id>`` or ``agent:<id>:…`` names (spec 001 scopes), else None."""
    if not session_key:
        return None
    found = _AGENT_KEY.match(session_key)
    return found.group(1) if found else None


@lru_cache(maxsize=512)
def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Compile a session glob (see the module docstring) to an anchored regex."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^:]*")
        elif char == "?":
            out.append("[^:]")
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def _matches(patterns: Iterable[str], key: str) -> bool:
    return any(glob_to_regex(p).match(key) for p in patterns)


@dataclass(frozen=True, slots=True)
class SessionPolicy:
    """The configured session patterns, applied to one session key at a time."""

    ignore: tuple[str, ...] = ()
    stateless: tuple[str, ...] = ()
    skip_stateless: bool = True

    def classify(self, key: str) -> SessionClass:
        if _matches(self.ignore, key):
            return "ignored"
        if _matches(self.stateless, key):
            return "stateless"
        return "normal"

    def write_block_reason(self, key: str) -> str | None:
        """Why writes from session ``key`` are skipped, or None when they are stored."""
        kind = self.classify(key)
        if kind == "ignored":
            return f"session {key!r} matches ignore_session_patterns"
        if kind == "stateless" and self.skip_stateless:
            return f"session {key!r} is stateless (statelessSessionPatterns); its writes are skipped"
        return None


async def open_session(
    store: Store,
    *,
    agent_id: str,
    session_id: str,
    session_key: str | None,
    retain_depth: int,
    **details: Any,
) -> Conversation:
    """The conversation of ``session_id``, made if need be; a new session under ``session_key`` takes over
    the previous one's summaries of depth ``retain_depth`` and deeper (see the module docstring).

    ``details`` (title, source, parent_id, metadata) go to :meth:`Store.get_or_create_conversation`.
    """
    previous = None
    if session_key is not None and await store.find_conversation(agent_id=agent_id, session_id=session_id) is None:
        previous = await store.find_conversation(agent_id=agent_id, session_key=session_key)
    conversation = await store.get_or_create_conversation(
        agent_id=agent_id, session_id=session_id, session_key=session_key, **details
    )
    if previous is not None and previous.id != conversation.id and not await store.get_context(conversation.id):
        kept = [
            e for e in await store.get_context(previous.id) if e.kind == "summary" and (e.depth or 0) >= retain_depth
        ]
        if kept:
            await store.copy_context(conversation.id, kept)
    return conversation
