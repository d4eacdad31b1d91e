"""Retention: explicit, whole-conversation pruning, planned before anything is deleted.

Invariants:

* **Nothing is deleted implicitly.**  :func:`plan_prune` only reads; a :class:`PrunePlan` is
  carried out only by an explicit call (``ContextEngine.prune`` / ``lcm prune --apply``).
* Only whole conversations go, with every row and blob of theirs.  A conversation that another
  conversation still points at (a forked sub-agent sharing its context) is kept and listed in
  ``PrunePlan.kept`` with the reason, unless the plan deletes that other conversation too.
* No I/O of its own: everything goes through the store and blob-store ports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lossless.errors import StoreError
from lossless.ports import PruneCandidate, RetentionStore, Store
from lossless.records import JSONValue, format_timestamp

__all__ = ["PrunePlan", "PruneResult", "plan_prune", "require_retention"]


@dataclass(frozen=True, slots=True)
class PrunePlan:
    """The conversations a prune would delete, and those it keeps (with why)."""

    delete: tuple[PruneCandidate, ...] = ()
    kept: tuple[tuple[PruneCandidate, str], ...] = ()

    @property
    def messages(self) -> int:
        return sum(c.messages for c in self.delete)

    @property
    def row_bytes(self) -> int:
        return sum(c.row_bytes for c in self.delete)

    def to_dict(self) -> dict[str, JSONValue]:
        def one(c: PruneCandidate) -> dict[str, JSONValue]:
            return {
                "conversation_id": c.conversation_id,
                "session_id": c.session_id,
                "active": c.active,
                "archived_at": None if c.archived_at is None else format_timestamp(c.archived_at),
                "messages": c.messages,
                "summaries": c.summaries,
                "files": c.files,
                "row_bytes": c.row_bytes,
            }

        return {
            "delete": [one(c) for c in self.delete],
            "kept": [{**one(c), "reason": why} for c, why in self.kept],
            "messages": self.messages,
            "row_bytes": self.row_bytes,
        }


@dataclass(frozen=True, slots=True)
class PruneResult:
    """What a prune deleted, and the space the file gave back after ``VACUUM`` (when it ran)."""

    conversations: int
    messages: int
    blob_bytes: int = 0
    bytes_before: int | None = None
    bytes_after: int | None = None

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "conversations": self.conversations,
            "messages": self.messages,
            "blob_bytes": self.blob_bytes,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
        }


def require_retention(store: Store) -> RetentionStore:
    if not isinstance(store, RetentionStore):
        raise StoreError(f"the {store.backend} store does not support pruning yet; nothing was deleted")
    return store


async def plan_prune(store: Store, conversation_ids: Sequence[int]) -> PrunePlan:
    """Which of ``conversation_ids`` can go.  A candidate pointed at from outside the set is kept.

    Keeping one may keep others that point at it only through it, so this iterates to a fixed point.
    """
    retention = require_retention(store)
    candidates = await retention.prune_candidates(conversation_ids)
    chosen = {c.conversation_id for c in candidates}
    kept: dict[int, str] = {}
    changed = True
    while changed:
        changed = False
        for c in candidates:
            if c.conversation_id in kept:
                continue
            outside = [b for b in c.blocked_by if b not in chosen or b in kept]
            if outside:
                kept[c.conversation_id] = (
                    f"conversation(s) {', '.join(map(str, outside))} still point at its messages or summaries"
                )
                changed = True
    return PrunePlan(
        delete=tuple(c for c in candidates if c.conversation_id not in kept),
        kept=tuple((c, kept[c.conversation_id]) for c in candidates if c.conversation_id in kept),
    )
