"""A stored :class:`Memory` value for tests: every field set, any of them overridden by keyword."""

from __future__ import annotations

from datetime import UTC, datetime

from lossless.memory.records import Memory

#: The time the memory tests' values are stamped with unless they name another.
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def memory_value(**overrides: object) -> Memory:
    """A manual, static, working-tier memory of ``global`` scope, stamped :data:`NOW`, with ``overrides`` applied."""
    values: dict[str, object] = {
        "memory_id": "mem_x",
        "scope": "global",
        "category": "preferences",
        "tier": "working",
        "abstract": "a",
        "overview": "a",
        "content": "a",
        "importance": 0.8,
        "confidence": 0.7,
        "temporal_type": "static",
        "valid_from": NOW,
        "valid_until": None,
        "fact_key": None,
        "supersedes": None,
        "superseded_by": None,
        "invalidated_at": None,
        "access_count": 0,
        "last_accessed_at": None,
        "access_gap_days": 0.0,
        "conversation_id": None,
        "source_message_ids": (),
        "source": "manual",
        "created_at": NOW,
        "updated_at": NOW,
    }
    values.update(overrides)
    return Memory(**values)  # type: ignore[arg-type]
