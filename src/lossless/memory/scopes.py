"""Memory scopes and who may reach them.

Scope names: ``global``, ``agent:<id>``, ``custom:<name>``, ``project:<id>``,
``user:<id>`` and ``reflection:agent:<id>``.

Invariants:

* A scope name is validated before it reaches SQL or a filter
  (:func:`check_scope`); ids are 1–128 characters of letters, digits and
  ``. _ : @ -``.
* Reach is computed, never assumed.  An agent with explicit grants reaches
  exactly those scopes plus its own reflection scope, to read and to write; an
  agent without grants reads ``global``, ``agent:<id>`` and
  ``reflection:agent:<id>`` (the reference defaults) but **writes only its
  own two**: ``global`` is shared by every agent, so changing it (adding,
  updating, superseding, forgetting, importing) takes an explicit grant that
  lists it.  An empty grant list is an explicit "nothing but its reflections".
* There is **no implicit bypass identity**: the agent id ``system`` is an
  ordinary agent.  Only a caller built with :meth:`MemoryCaller.system` sees every
  scope, and code has to ask for one by name.
* Writes to a scope the caller cannot reach raise
  :class:`~lossless.errors.AccessDeniedError` and write nothing; so do reads
  that name such a scope explicitly (no silent fallback to other scopes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from lossless.errors import AccessDeniedError, InputError

__all__ = ["MemoryCaller", "check_scope", "default_write_scope", "reachable_scopes", "require_reach"]

_ID = r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}"
_SCOPE = re.compile(rf"^(global|agent:{_ID}|custom:{_ID}|project:{_ID}|user:{_ID}|reflection:agent:{_ID})$")


def check_scope(scope: object) -> str:
    """Return ``scope`` if it is a valid scope name, else raise :class:`InputError`."""
    if not isinstance(scope, str) or not _SCOPE.match(scope):
        raise InputError(
            f"{scope!r} is not a memory scope: use global, agent:<id>, custom:<name>, project:<id>, "
            "user:<id> or reflection:agent:<id> (ids: letters, digits and . _ : @ -)"
        )
    return scope


@dataclass(frozen=True, slots=True)
class MemoryCaller:
    """Who is asking: an agent (the usual case) or, explicitly, the system."""

    agent_id: str
    is_system: bool = False

    def __post_init__(self) -> None:
        if not self.is_system and not re.fullmatch(_ID, self.agent_id or ""):
            raise InputError(f"agent id {self.agent_id!r} is not valid (1–128 letters, digits and . _ : @ -)")

    @classmethod
    def agent(cls, agent_id: str) -> MemoryCaller:
        return cls(agent_id)

    @classmethod
    def system(cls) -> MemoryCaller:
        """The maintenance identity that reaches every scope.  Never the default for anything."""
        return cls("<system>", is_system=True)


def reachable_scopes(
    caller: MemoryCaller, grants: Mapping[str, Sequence[str]], *, write: bool = False
) -> tuple[str, ...] | None:
    """The scopes ``caller`` reaches to read (or, with ``write``, to change); ``None``: every scope (system only)."""
    if caller.is_system:
        return None
    own_reflection = f"reflection:agent:{caller.agent_id}"
    if caller.agent_id in grants:
        scopes = [check_scope(s) for s in grants[caller.agent_id]]
        return tuple(dict.fromkeys([*scopes, own_reflection]))
    if write:  # global is everyone's: writing to it needs an explicit grant
        return (f"agent:{caller.agent_id}", own_reflection)
    return ("global", f"agent:{caller.agent_id}", own_reflection)


def require_reach(caller: MemoryCaller, scopes: Iterable[str], reach: Sequence[str] | None, *, action: str) -> None:
    """Raise :class:`AccessDeniedError` unless every scope is in ``reach``."""
    if reach is None:
        return
    for scope in scopes:
        check_scope(scope)
        if scope not in reach:
            if scope == "global" and action != "read":
                raise AccessDeniedError(
                    f"agent {caller.agent_id!r} may not {action} memory scope 'global': the global scope is shared "
                    "by every agent, so changing it needs an explicit grant, e.g. `lcm memory grant "
                    f"{caller.agent_id} global agent:{caller.agent_id}` (a grant lists every scope it reaches)"
                )
            raise AccessDeniedError(
                f"agent {caller.agent_id!r} may not {action} memory scope {scope!r}; it reaches "
                f"{', '.join(reach)}. Grant access with `lcm memory grant {caller.agent_id} {scope}` "
                "or use a scope it reaches"
            )


def default_write_scope(caller: MemoryCaller, reach: Sequence[str] | None) -> str:
    """Where a memory goes when the caller names no scope: its agent scope if reachable, else global."""
    own = f"agent:{caller.agent_id}"
    if reach is None or own in reach:
        return "global" if caller.is_system else own
    if "global" in reach:
        return "global"
    raise AccessDeniedError(f"agent {caller.agent_id!r} reaches no writable scope; name one it was granted")
