"""Memory values: what a long-term memory is, what a caller hands in, and what search hands back.

Invariants:

* Values are frozen and do no I/O.  A :class:`MemoryDraft` is what a caller
  (or an extractor) proposes; a :class:`Memory` is what the store holds, with
  its id, tier, access statistics and supersession links.  Identity belongs to
  the store.
* Every memory has three text levels: ``abstract`` (one line, the index entry),
  ``overview`` (a short structured summary) and ``content`` (the full text).
  A draft given only ``content`` derives the other two deterministically
  (:func:`derive_levels`).
* ``importance`` and ``confidence`` lie in [0, 1]; ``category``, ``tier`` and
  ``temporal_type`` are one of their closed sets; timestamps are timezone-aware
  UTC; ``valid_until`` is never before ``valid_from``.
* Provenance is explicit: ``conversation_id`` plus the ids of the source
  messages, in order, with no repeats.  A memory made by hand has none.
* A memory is *current* while ``invalidated_at`` is unset.  Superseding never
  deletes: the old row keeps its text, gains ``superseded_by`` and
  ``invalidated_at``, and stays queryable as history (:meth:`Memory.valid_at`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeAlias, get_args

from lossless.errors import InputError
from lossless.records import format_timestamp, parse_timestamp

__all__ = [
    "CATEGORIES",
    "DEFAULT_IMPORTANCE",
    "MAX_MEMORY_CHARS",
    "TIERS",
    "Category",
    "Decision",
    "DecisionKind",
    "Memory",
    "MemoryDraft",
    "MemoryHit",
    "MemoryPatch",
    "MemoryStats",
    "SearchResult",
    "Tier",
    "derive_levels",
]

Category: TypeAlias = Literal["profile", "preferences", "entities", "events", "cases", "patterns"]
Tier: TypeAlias = Literal["core", "working", "peripheral"]
TemporalType: TypeAlias = Literal["static", "dynamic"]
Source: TypeAlias = Literal["manual", "extraction", "import"]

CATEGORIES: tuple[Category, ...] = get_args(Category)
TIERS: tuple[Tier, ...] = get_args(Tier)
TEMPORAL_TYPES: tuple[TemporalType, ...] = get_args(TemporalType)
SOURCES: tuple[Source, ...] = get_args(Source)

#: Importance given to a memory that does not state one, by category (spec/001 defaults).
DEFAULT_IMPORTANCE: Mapping[Category, float] = {
    "profile": 0.9,
    "preferences": 0.8,
    "entities": 0.7,
    "events": 0.6,
    "cases": 0.8,
    "patterns": 0.85,
}
DEFAULT_CONFIDENCE = 0.7
#: Longest memory content accepted (characters).  Memories are facts, not documents.
MAX_MEMORY_CHARS = 64_000
_ABSTRACT_CHARS = 160
_OVERVIEW_CHARS = 600
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")


def _unit(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
        raise InputError(f"{what} must be a number between 0 and 1, got {value!r}")
    return float(value)


def _choice(value: object, allowed: Sequence[str], what: str) -> None:
    if value not in allowed:
        raise InputError(f"{what} must be one of {', '.join(allowed)}; got {value!r}")


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def derive_levels(content: str) -> tuple[str, str]:
    """The (abstract, overview) a memory gets when only its full content is given.

    The abstract is the first sentence (at most 160 characters), the overview the
    first 600 characters, whitespace collapsed.  Deterministic.
    """
    flat = " ".join(content.split())
    first = _SENTENCE_END.split(flat, maxsplit=1)[0] if flat else ""
    return _clip(first or flat, _ABSTRACT_CHARS), _clip(flat, _OVERVIEW_CHARS)


def _check_text(value: object, what: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise InputError(f"{what} contains a NUL character; remove it")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{what} holds invalid Unicode (a lone surrogate at position {exc.start})") from exc
    if not allow_empty and not value.strip():
        raise InputError(f"{what} must not be empty")
    if len(value) > MAX_MEMORY_CHARS:
        raise InputError(f"{what} is {len(value)} characters; a memory holds at most {MAX_MEMORY_CHARS}")
    return value


@dataclass(frozen=True, slots=True)
class MemoryDraft:
    """A memory to store: its text, kind and provenance.  Validated on construction."""

    content: str
    category: Category = "entities"
    scope: str = "global"
    abstract: str = ""
    overview: str = ""
    importance: float | None = None
    confidence: float = DEFAULT_CONFIDENCE
    temporal_type: TemporalType = "static"
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    fact_key: str | None = None
    conversation_id: int | None = None
    source_message_ids: tuple[int, ...] = ()
    source: Source = "manual"
    metadata: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        _check_text(self.content, "memory content")
        _choice(self.category, CATEGORIES, "category")
        _choice(self.temporal_type, TEMPORAL_TYPES, "temporal_type")
        _choice(self.source, SOURCES, "source")
        _unit(self.confidence, "confidence")
        if self.importance is not None:
            _unit(self.importance, "importance")
        abstract, overview = derive_levels(self.content)
        if not self.abstract.strip():
            object.__setattr__(self, "abstract", abstract)
        if not self.overview.strip():
            object.__setattr__(self, "overview", overview)
        _check_text(self.abstract, "abstract")
        _check_text(self.overview, "overview")
        ids: tuple[object, ...] = tuple(self.source_message_ids)
        if any(isinstance(i, bool) or not isinstance(i, int) or i < 1 for i in ids):
            raise InputError(f"source_message_ids must be positive integers, got {ids!r}")
        if len(set(ids)) != len(ids):
            raise InputError(f"source_message_ids repeat an id: {ids!r}")
        if ids and self.conversation_id is None:
            raise InputError("source_message_ids need the conversation_id they belong to")
        object.__setattr__(self, "source_message_ids", ids)
        for name in ("valid_from", "valid_until"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, parse_timestamp(format_timestamp(value)))
        if self.valid_from and self.valid_until and self.valid_until < self.valid_from:
            raise InputError("valid_until is before valid_from")
        if self.fact_key is not None and not (0 < len(self.fact_key) <= 200):
            raise InputError(f"fact_key must be 1–200 characters, got {self.fact_key!r}")

    @property
    def effective_importance(self) -> float:
        return DEFAULT_IMPORTANCE[self.category] if self.importance is None else self.importance


@dataclass(frozen=True, slots=True)
class MemoryPatch:
    """A change to a stored memory; fields left ``None`` keep their value.

    ``add_sources`` are message ids to add to the memory's provenance (after
    its current sources; ids it already has are not added twice): the messages
    of a candidate merged into it, or that support it.
    """

    content: str | None = None
    abstract: str | None = None
    overview: str | None = None
    category: Category | None = None
    importance: float | None = None
    confidence: float | None = None
    tier: Tier | None = None
    valid_until: datetime | None = None
    fact_key: str | None = None
    add_sources: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        ids: tuple[object, ...] = tuple(self.add_sources)
        if any(isinstance(i, bool) or not isinstance(i, int) or i < 1 for i in ids):
            raise InputError(f"add_sources must be message ids (positive whole numbers), got {ids!r}")
        object.__setattr__(self, "add_sources", ids)
        if self.content is not None:
            _check_text(self.content, "memory content")
        for name in ("abstract", "overview"):
            if getattr(self, name) is not None:
                _check_text(getattr(self, name), name)
        if self.category is not None:
            _choice(self.category, CATEGORIES, "category")
        if self.tier is not None:
            _choice(self.tier, TIERS, "tier")
        for name in ("importance", "confidence"):
            if getattr(self, name) is not None:
                _unit(getattr(self, name), name)
        if not self.add_sources and all(
            getattr(self, name) is None for name in self.__dataclass_fields__ if name != "add_sources"
        ):
            raise InputError("an update must change something: give text, importance, category, …")


@dataclass(frozen=True, slots=True)
class Memory:
    """A stored memory."""

    memory_id: str
    scope: str
    category: Category
    tier: Tier
    abstract: str
    overview: str
    content: str
    importance: float
    confidence: float
    temporal_type: TemporalType
    valid_from: datetime
    valid_until: datetime | None
    fact_key: str | None
    supersedes: str | None
    superseded_by: str | None
    invalidated_at: datetime | None
    access_count: int
    last_accessed_at: datetime | None
    access_gap_days: float
    conversation_id: int | None
    source_message_ids: tuple[int, ...]
    source: Source
    created_at: datetime
    updated_at: datetime
    metadata: Mapping[str, Any] | None = field(default=None, compare=False)

    @property
    def current(self) -> bool:
        return self.invalidated_at is None

    def valid_at(self, when: datetime) -> bool:
        """Whether this memory was the stated truth at ``when`` (for history queries)."""
        if when < self.valid_from:
            return False
        if self.invalidated_at is not None and when >= self.invalidated_at:
            return False
        return self.valid_until is None or when < self.valid_until

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, datetime):
                value = format_timestamp(value)
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, Mapping):
                value = dict(value)
            out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Memory:
        """The inverse of :meth:`to_dict`; validates every field (used by ``import``)."""
        try:
            values = {name: data[name] for name in cls.__dataclass_fields__ if name != "metadata"}
        except KeyError as exc:
            raise InputError(f"memory record is missing the field {exc.args[0]!r}") from exc
        for name in ("valid_from", "created_at", "updated_at"):
            values[name] = parse_timestamp(values[name])
        for name in ("valid_until", "invalidated_at", "last_accessed_at"):
            values[name] = None if values[name] is None else parse_timestamp(values[name])
        _check_text(values["content"], "content")
        _check_text(values["abstract"], "abstract")
        _check_text(values["overview"], "overview")
        _choice(values["category"], CATEGORIES, "category")
        _choice(values["tier"], TIERS, "tier")
        _choice(values["temporal_type"], TEMPORAL_TYPES, "temporal_type")
        _choice(values["source"], SOURCES, "source")
        _unit(values["importance"], "importance")
        _unit(values["confidence"], "confidence")
        if not isinstance(values["memory_id"], str) or not values["memory_id"]:
            raise InputError(f"memory_id must be a non-empty string, got {values['memory_id']!r}")
        count = values["access_count"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InputError(f"access_count must be a non-negative integer, got {count!r}")
        values["source_message_ids"] = tuple(int(i) for i in values["source_message_ids"] or ())
        values["access_gap_days"] = float(values["access_gap_days"])
        meta = data.get("metadata")
        return cls(**values, metadata=dict(meta) if isinstance(meta, Mapping) else None)


@dataclass(frozen=True, slots=True)
class MemoryStats:
    """Counts over the memories a caller can see."""

    total: int
    current: int
    superseded: int
    by_category: Mapping[str, int]
    by_tier: Mapping[str, int]
    by_scope: Mapping[str, int]
    vectors: int
    cached_embeddings: int
    #: Current memories whose decay composite is below ``memory_stale_threshold`` (None: not counted).
    stale: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "current": self.current,
            "superseded": self.superseded,
            "by_category": dict(self.by_category),
            "by_tier": dict(self.by_tier),
            "by_scope": dict(self.by_scope),
            "vectors": self.vectors,
            "cached_embeddings": self.cached_embeddings,
            "stale": self.stale,
        }


#: What dedup may do with a candidate memory.
DecisionKind = Literal["create", "merge", "skip", "support", "contextualize", "contradict", "supersede", "reject"]


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with a candidate: the kind, the memory it is about, why, and who decided."""

    kind: DecisionKind
    target: str | None = None
    reason: str = ""
    #: For ``contextualize``: the situation the candidate holds in (``evening``, ``work``, …).
    context_label: str | None = None
    by: Literal["rules", "model"] = "rules"


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """A memory a search found, its score and the score after each ranking stage."""

    memory: Memory
    score: float
    stages: tuple[tuple[str, float], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"score": round(self.score, 4), "stages": dict(self.stages), "memory": self.memory.to_dict()}


@dataclass(frozen=True, slots=True)
class SearchResult:
    """What a memory search returns: its hits best first, what the stages dropped (with ``explain``) and timings."""

    query: str
    hits: tuple[MemoryHit, ...]
    dropped: tuple[tuple[str, str, tuple[tuple[str, float], ...]], ...] = ()
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    #: Memory id → (the score a cut-off compared, the cut-off) for those ``min_score`` or ``hard_min_score``
    #: dropped: with ``normalized`` fusion the cut-offs read the weighted score, not the ``stages`` shown.
    gates: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    def _dropped(self, memory_id: str, stage: str, scores: tuple[tuple[str, float], ...]) -> dict[str, Any]:
        out: dict[str, Any] = {"memory_id": memory_id, "stage": stage, "stages": dict(scores)}
        if memory_id in self.gates:
            compared, cut_off = self.gates[memory_id]
            out["compared"], out["cut_off"] = round(compared, 4), cut_off
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "hits": [h.to_dict() for h in self.hits],
            "dropped": [self._dropped(m, st, sc) for m, st, sc in self.dropped],
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
        }
