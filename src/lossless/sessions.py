"""Session policy: which sessions are stored, which may only read, and which are ignored.

Invariants:

* Patterns are globs over the session key (or the session id when there is
  no key): ``*`` matches any run of characters except ``:``, ``**`` matches
  anything, ``?`` one character other than ``:``; everything else is literal.
  Matching is case-sensitive and covers the whole key.
* ``ignored`` wins over ``stateless``; an ignored session is never stored.  A
  stateless session may read; its writes are skipped while
  ``skip_stateless_sessions`` is on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

__all__ = ["SessionClass", "SessionPolicy", "glob_to_regex"]

SessionClass = Literal["normal", "ignored", "stateless"]


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
