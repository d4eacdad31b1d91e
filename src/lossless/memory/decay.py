"""The Weibull decay engine and tier transitions (spec/001 formulas and defaults).

For a memory with importance ``i``, confidence ``c``, ``n`` accesses, mean gap
``g`` days between accesses and ``t`` days since its last access (or creation):

* recency ``R = exp(-(ln 2 / HL) · t^β)`` with ``HL = 30 · e^(1.5·i)`` days
  (a third of that for dynamic memories) and ``β`` by tier: core 0.8,
  working 1.0, peripheral 1.3;
* frequency ``F = (1 - e^(-n/5)) · (0.5 + 0.5·e^(-g/30))``;
* intrinsic ``I = i · c``;
* composite ``0.4·R + 0.3·F + 0.3·I``.

Search boost: a score is multiplied by ``m + (1 - m)·max(floor(tier), composite)``
clamped to ``[m, 1]``, ``m = 0.3``; floors core 0.9, working 0.7, peripheral 0.5.

Tier transitions (:func:`next_tier`), evaluated on every access *and* by the
maintenance sweep — the reference computed them but never ran them:

* peripheral → working: ``n ≥ 3`` and composite ``≥ 0.4``;
* working → core: ``n ≥ 10``, composite ``≥ 0.7`` and importance ``≥ 0.8``;
* working → peripheral: composite ``< 0.15``, or age ``> 60`` days with ``n < 3``;
* core → working: composite ``< 0.15`` and ``n < 3``.

Invariants: every function is pure and total (no I/O, no clock: ``now`` is an
argument); every score lies in [0, 1]; a memory moves at most one tier per
evaluation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from lossless.config import Config
from lossless.memory.records import Memory, Tier

__all__ = ["DecayConfig", "DecayScores", "composite", "config_from", "next_tier", "score", "search_boost"]


@dataclass(frozen=True, slots=True)
class DecayConfig:
    half_life_days: float = 30.0
    importance_modulation: float = 1.5
    recency_weight: float = 0.4
    frequency_weight: float = 0.3
    intrinsic_weight: float = 0.3
    search_boost_min: float = 0.3
    beta: Mapping[Tier, float] = field(
        default_factory=lambda: MappingProxyType({"core": 0.8, "working": 1.0, "peripheral": 1.3})
    )
    floor: Mapping[Tier, float] = field(
        default_factory=lambda: MappingProxyType({"core": 0.9, "working": 0.7, "peripheral": 0.5})
    )
    promote_working_accesses: int = 3
    promote_working_composite: float = 0.4
    promote_core_accesses: int = 10
    promote_core_composite: float = 0.7
    promote_core_importance: float = 0.8
    demote_composite: float = 0.15
    demote_age_days: float = 60.0
    demote_max_accesses: int = 3


DEFAULT = DecayConfig()


def config_from(config: Config) -> DecayConfig:
    """The decay engine the ``memory_decay_*`` settings describe (tier rules keep their spec values)."""
    return DecayConfig(
        half_life_days=config.memory_decay_half_life_days,
        importance_modulation=config.memory_decay_importance_modulation,
        recency_weight=config.memory_decay_recency_weight,
        frequency_weight=config.memory_decay_frequency_weight,
        intrinsic_weight=config.memory_decay_intrinsic_weight,
        search_boost_min=config.memory_search_boost_min,
    )


@dataclass(frozen=True, slots=True)
class DecayScores:
    recency: float
    frequency: float
    intrinsic: float
    composite: float


def _days(later: datetime, earlier: datetime) -> float:
    return max(0.0, (later - earlier).total_seconds() / 86_400)


def score(memory: Memory, now: datetime, config: DecayConfig = DEFAULT) -> DecayScores:
    last = memory.last_accessed_at if memory.access_count > 0 and memory.last_accessed_at else memory.created_at
    t = _days(now, last)
    half_life = config.half_life_days / (3.0 if memory.temporal_type == "dynamic" else 1.0)
    effective = half_life * math.exp(config.importance_modulation * memory.importance)
    recency = math.exp(-(math.log(2) / effective) * t ** config.beta[memory.tier])
    frequency = (1 - math.exp(-memory.access_count / 5)) * (0.5 + 0.5 * math.exp(-memory.access_gap_days / 30))
    intrinsic = memory.importance * memory.confidence
    total = config.recency_weight * recency + config.frequency_weight * frequency + config.intrinsic_weight * intrinsic
    return DecayScores(recency, frequency, intrinsic, min(1.0, max(0.0, total)))


def composite(memory: Memory, now: datetime, config: DecayConfig = DEFAULT) -> float:
    return score(memory, now, config).composite


def search_boost(memory: Memory, now: datetime, config: DecayConfig = DEFAULT) -> float:
    """The factor (in [search_boost_min, 1]) a search score is multiplied by."""
    level = max(config.floor[memory.tier], composite(memory, now, config))
    low = config.search_boost_min
    return min(1.0, max(low, low + (1 - low) * level))


def next_tier(memory: Memory, now: datetime, config: DecayConfig = DEFAULT) -> Tier:
    """The tier ``memory`` should be in now (its own tier when no rule fires)."""
    value = composite(memory, now, config)
    n = memory.access_count
    if memory.tier == "peripheral":
        if n >= config.promote_working_accesses and value >= config.promote_working_composite:
            return "working"
    elif memory.tier == "working":
        if (
            n >= config.promote_core_accesses
            and value >= config.promote_core_composite
            and memory.importance >= config.promote_core_importance
        ):
            return "core"
        age = _days(now, memory.created_at)
        if value < config.demote_composite or (age > config.demote_age_days and n < config.demote_max_accesses):
            return "peripheral"
    elif value < config.demote_composite and n < config.demote_max_accesses:
        return "working"
    return memory.tier
