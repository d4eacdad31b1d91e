"""The hybrid retrieval pipeline: fusion, then the post-fusion stages, with every score recorded.

Stages, in order (spec/001 defaults in :class:`RetrievalConfig`):

1. **fusion** — ``normalized`` (the default): each list's scores are put on one
   scale within the query — the cosine of a vector hit as
   ``(cos - lowest) / (highest - lowest)`` over the vector hits, a BM25 score as
   ``raw / best raw`` — and fused as ``(0.7·n_v + 0.3·n_b) / (0.7 + 0.3)`` (the
   ``vector_weight`` / ``bm25_weight``; a hit missing from a list scores 0 there).
   ``weighted`` (the reference's): vector score ``s_v = 1/(1 + (1 - cos))``, BM25
   score ``s_b = sigmoid(raw/5)``; with a vector hit the fused score is
   ``max(0.7·s_v + 0.3·s_b, 0.92·s_b if s_b ≥ 0.75)`` (the exact-match floor), a
   keyword-only hit keeps ``s_b``; clamped to [0, 1].  Its BM25 side saturates on
   SQLite's raw scores, so the floor lets any memory sharing two rare words with
   the query outrank the nearest by meaning (measured in docs/memory.md).
   ``rrf``: reciprocal-rank fusion ``Σ 1/(60 + rank)`` normalised so rank 1 in
   both lists scores 1.  ``normalized`` and ``rrf`` scores are relative to the
   query's candidates: the best is near 1 whether or not it is relevant.
   Keyword hits whose memory no longer exists (ghosts) are dropped here.
2. **min_score** (0.3; not with ``rrf``) → the candidate pool.  With ``normalized``
   fusion this and the hard cut-off below read the reference's weighted score of the
   candidate (carried through the same boosts and factors), so a query that matches
   nothing still finds nothing, while the order comes from the normalized scores.
3. **rerank** — over the top ``2·limit`` only: ``0.6·cross-encoder + 0.4·fused``
   with preservation floors for strong keyword matches; candidates the
   reranker did not return get ``0.8·fused`` (or their floor); on any reranker
   failure ``0.7·fused + 0.3·cosine``.  No reranker: unchanged.
4. **recency** ``+ 0.1·e^(-age/14 d)``; 4b. **time** ``+ boost`` for a memory inside the time the
   query names (``boosts``, from :mod:`lossless.memory.dating`; such a memory's boost counts in the
   min_score and hard_min_score gates too, so a weak match of the right time is not cut);
   5. **importance** ``× (0.7 + 0.3·importance)``;
6. **length** ``× max(0.3, 1/(1 + 0.5·log2(max(chars/500, 1))))``;
7. **time_decay** — the Weibull search boost (:mod:`lossless.memory.decay`), or the
   reference's legacy half-life formula, or off;
8. **hard_min_score** (0.35; not with ``rrf``); 9. **noise** filter;
9b. **names** — when the query calls something by name (``names``: "Maya",
    "Kubernetes") and some remaining result holds one of those names, the results
    holding none of them are scored ``× name_factor`` (0.8): a question about Maya
    is answered by Maya's memories before anyone else's similar ones.  It only
    reorders (it comes after the cut-offs);
10. **mmr** — a result whose cosine with an already chosen one exceeds 0.85 is
    moved behind the others; 11. **limit**.

Invariants: pure (no I/O, ``now`` is an argument), deterministic (exact ties
broken by content, then memory id: ids are random, so two stores holding the same
memories rank them alike), every score lies in [0, 1] after fusion and rerank and in
[0, 1 + recency_weight + boost] after the additive recency and time boosts (later
stages only multiply by factors ≤ 1), and every
candidate's path is recorded — kept results with the score after each stage,
dropped ones with the stage that dropped them (the explain mode).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache
from typing import Literal, cast

from lossless.config import Config
from lossless.memory import decay
from lossless.memory.records import Memory

__all__ = ["Candidate", "RankResult", "RetrievalConfig", "Scored", "finish", "fuse", "rerank_window"]

Fusion = Literal["weighted", "rrf", "normalized"]
TimeDecay = Literal["weibull", "legacy", "off"]

_NOISE = re.compile(
    r"^\s*(?:"
    r"(?:hi|hello|hey|thanks|thank you|ok|okay|sure|good (?:morning|night))\b[\s!.]*$"
    r"|(?:i (?:don't|do not) (?:know|remember|have (?:any )?(?:information|memory)))"
    r"|(?:do you remember|what did i (?:say|tell you)|can you recall)"
    r"|(?:\[?(?:debug|trace|diagnostic)\]?[: ])"
    r")",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class RetrievalConfig:
    fusion: Fusion = "normalized"
    vector_weight: float = 0.7
    bm25_weight: float = 0.3
    bm25_floor_at: float = 0.75
    bm25_floor_factor: float = 0.92
    rrf_k: int = 60
    min_score: float = 0.3
    candidate_pool: int = 20
    rerank_blend: float = 0.6
    rerank_unreturned_penalty: float = 0.8
    recency_half_life_days: float = 14.0
    recency_weight: float = 0.1
    length_norm_anchor: int = 500
    time_decay: TimeDecay = "weibull"
    time_decay_half_life_days: float = 60.0
    reinforcement_factor: float = 0.5
    max_half_life_multiplier: float = 3.0
    hard_min_score: float = 0.35
    noise_filter: bool = True
    mmr_threshold: float = 0.85
    #: The names stage's factor for results that hold none of the query's names (1: off).
    name_factor: float = 0.8

    def pool_size(self, limit: int) -> int:
        return max(self.candidate_pool, 2 * limit)

    @classmethod
    def from_config(cls, config: Config) -> RetrievalConfig:
        """The pipeline the ``memory_*`` settings describe (their defaults are this class's)."""
        time_decay: TimeDecay = config.memory_time_decay  # type: ignore[assignment]  # validated choice
        return cls(
            fusion=config.memory_fusion,  # type: ignore[arg-type]  # a validated choice
            vector_weight=config.memory_vector_weight,
            bm25_weight=config.memory_bm25_weight,
            min_score=config.memory_min_score,
            candidate_pool=config.memory_candidate_pool,
            recency_half_life_days=config.memory_recency_half_life_days,
            recency_weight=config.memory_recency_weight,
            length_norm_anchor=config.memory_length_norm_anchor,
            time_decay=time_decay,
            time_decay_half_life_days=config.memory_time_decay_half_life_days,
            reinforcement_factor=config.memory_reinforcement_factor,
            max_half_life_multiplier=config.memory_max_half_life_multiplier,
            hard_min_score=config.memory_hard_min_score,
        )


@dataclass(frozen=True, slots=True)
class Candidate:
    """One memory found by vector search, keyword search or both."""

    memory: Memory
    cosine: float | None = None
    bm25_raw: float | None = None
    vector_rank: int | None = None
    keyword_rank: int | None = None

    @property
    def vector_score(self) -> float | None:
        return None if self.cosine is None else 1.0 / (1.0 + (1.0 - self.cosine))

    @property
    def bm25_score(self) -> float | None:
        return None if self.bm25_raw is None else 1.0 / (1.0 + math.exp(-self.bm25_raw / 5.0))


@dataclass(frozen=True, slots=True)
class Scored:
    candidate: Candidate
    score: float
    stages: tuple[tuple[str, float], ...] = ()
    dropped_at: str | None = None
    #: ``normalized`` fusion: the reference's weighted score, carried through the same boosts and
    #: factors, that the absolute cut-offs (min_score, hard_min_score) read — relative scores cannot.
    absolute: float | None = None
    #: When a cut-off dropped it (``min_score``, ``hard_min_score``): the score it compared, and the cut-off.
    gate: tuple[float, float] | None = None

    @property
    def memory(self) -> Memory:
        return self.candidate.memory

    def at(self, stage: str, value: float, *, clamp: bool = True) -> Scored:
        value = max(0.0, value)
        if clamp:
            value = min(1.0, value)
        return replace(self, score=value, stages=(*self.stages, (stage, value)))

    def drop(self, stage: str, gate: tuple[float, float] | None = None) -> Scored:
        return replace(self, dropped_at=stage, gate=gate)


@dataclass(frozen=True, slots=True)
class RankResult:
    results: tuple[Scored, ...]
    dropped: tuple[Scored, ...] = field(default=())
    reranker: str = "none"


def _order(items: Sequence[Scored]) -> list[Scored]:
    """Best first; an exact tie by content, then id (ids are random per store: content ranks a tie alike in any)."""
    return sorted(items, key=lambda s: (-s.score, s.memory.content, s.memory.memory_id))


def _weighted(c: Candidate, config: RetrievalConfig) -> float:
    """The reference's weighted fusion of one candidate, in [0, 1]."""
    sv = c.vector_score if c.vector_rank is not None else None  # a vector *hit*, not just a known cosine
    sb = c.bm25_score
    if sv is None:
        return min(1.0, sb or 0.0)
    weighted = config.vector_weight * sv + config.bm25_weight * (sb or 0.0)
    floor = config.bm25_floor_factor * sb if sb is not None and sb >= config.bm25_floor_at else 0.0
    return min(1.0, max(0.0, weighted, floor))


def _gate(s: Scored) -> float:
    """What the absolute cut-offs compare: the reference's score where the fusion's own is relative."""
    return s.score if s.absolute is None else s.absolute


def _normalizer(candidates: Sequence[Candidate], config: RetrievalConfig) -> Callable[[Candidate], float]:
    """The ``normalized`` fusion for this query's candidates (see the module docstring)."""
    cosines = [c.cosine for c in candidates if c.vector_rank is not None and c.cosine is not None]
    low, high = min(cosines, default=0.0), max(cosines, default=0.0)
    best_raw = max((c.bm25_raw for c in candidates if c.bm25_raw is not None), default=0.0)
    total = config.vector_weight + config.bm25_weight

    def score(c: Candidate) -> float:
        nv = 0.0
        if c.vector_rank is not None and c.cosine is not None:
            nv = (c.cosine - low) / (high - low) if high > low else 1.0
        nb = max(0.0, c.bm25_raw) / best_raw if c.bm25_raw is not None and best_raw > 0 else 0.0
        return (config.vector_weight * nv + config.bm25_weight * nb) / total if total > 0 else 0.0

    return score


def fuse(
    candidates: Sequence[Candidate], config: RetrievalConfig, boosts: Mapping[str, float] | None = None
) -> tuple[list[Scored], list[Scored]]:
    """Stages 1–2: (pool above min_score best first, dropped); ``boosts``: the time stage's, counted in the gate."""
    boosts = boosts or {}
    kept: list[Scored] = []
    dropped: list[Scored] = []
    normalized = _normalizer(candidates, config) if config.fusion == "normalized" else None
    for c in candidates:
        absolute = None
        if normalized is not None:
            value, absolute = normalized(c), _weighted(c, config)
        elif config.fusion == "rrf":
            total = sum(1.0 / (config.rrf_k + r) for r in (c.vector_rank, c.keyword_rank) if r is not None)
            value = total / (2.0 / (config.rrf_k + 1))
        else:
            value = _weighted(c, config)
        value = min(1.0, max(0.0, value))  # as ``Scored.at`` records a clamped stage
        s = Scored(c, value, (("fusion", value),), absolute=absolute)
        compared = _gate(s) + boosts.get(c.memory.memory_id, 0.0)
        if config.fusion != "rrf" and compared < config.min_score:
            dropped.append(s.drop("min_score", (compared, config.min_score)))
        else:
            kept.append(s)
    return _order(kept), dropped


def rerank_window(pool: Sequence[Scored], limit: int) -> list[Scored]:
    return list(pool[: 2 * limit])


def _rerank(
    pool: list[Scored],
    limit: int,
    rerank_scores: Mapping[str, float] | None,
    failed: bool,
    config: RetrievalConfig,
) -> list[Scored]:
    window = {s.memory.memory_id for s in rerank_window(pool, limit)}
    out: list[Scored] = []
    for s in pool:
        if s.memory.memory_id not in window or (rerank_scores is None and not failed):
            out.append(s)
            continue
        fused = s.score
        if failed or rerank_scores is None:
            out.append(s.at("rerank", 0.7 * fused + 0.3 * max(0.0, s.candidate.cosine or 0.0)))
            continue
        sb = s.candidate.bm25_score or 0.0
        returned = s.memory.memory_id in rerank_scores
        if sb >= 0.75:
            floor = fused * (0.95 if returned else 1.0)
        elif sb >= 0.6:
            floor = fused * (0.9 if returned else 0.95)
        else:
            floor = fused * (0.5 if returned else 0.8)
        if returned:
            blended = config.rerank_blend * rerank_scores[s.memory.memory_id] + (1 - config.rerank_blend) * fused
        else:
            blended = config.rerank_unreturned_penalty * fused
        out.append(s.at("rerank", max(blended, floor)))
    return _order(out)


@lru_cache(maxsize=8192)
def _noise(text: str) -> bool:
    """Whether ``text`` is a non-answer the noise filter drops (kept per text: the same memories come back)."""
    return _NOISE.search(text) is not None


def _above(similarity: Callable[[str, str], float]) -> Callable[[str, Sequence[str], float], bool]:
    """Whether a memory is more similar than a threshold to any of others: the similarity's own ``above``
    (:class:`~lossless.memory.vectors.Pairwise`: one step for all of them), else pair by pair."""
    above = getattr(similarity, "above", None)
    if callable(above):
        return cast("Callable[[str, Sequence[str], float], bool]", above)
    return lambda a, others, threshold: any(similarity(a, b) > threshold for b in others)


def _legacy_decay(memory: Memory, now: datetime, config: RetrievalConfig) -> float:
    age = max(0.0, (now - memory.created_at).total_seconds() / 86_400)
    half_life = config.time_decay_half_life_days / (3.0 if memory.temporal_type == "dynamic" else 1.0)
    if memory.access_count and memory.last_accessed_at:
        since = max(0.0, (now - memory.last_accessed_at).total_seconds() / 86_400)
        reinforced = 1 + config.reinforcement_factor * math.log(1 + memory.access_count * 2 ** (-since / 30))
        half_life = min(half_life * reinforced, half_life * config.max_half_life_multiplier)
    return 0.5 + 0.5 * math.exp(-age / half_life)


def finish(
    pool: Sequence[Scored],
    *,
    limit: int,
    now: datetime,
    config: RetrievalConfig,
    decay_config: decay.DecayConfig = decay.DEFAULT,
    rerank_scores: Mapping[str, float] | None = None,
    rerank_failed: bool = False,
    similarity: Callable[[str, str], float] | None = None,
    names: Sequence[str] = (),
    boosts: Mapping[str, float] | None = None,
    keep_dropped: bool = True,
    ageless: bool = False,
) -> tuple[list[Scored], list[Scored]]:
    """Stages 3–11 on the fused pool: (results best first, dropped); ``names``: the query's, lower case;
    ``keep_dropped=False``: those beyond the limit are left out of the dropped list (no one reads them);
    ``boosts``: memory id → what the time stage adds (the memories inside the query's time);
    ``ageless``: recency and time decay read each memory as of when it was stored (age 0), so the
    result does not depend on ``now`` (hybrid grep's memory leads: when a fact was stored says
    nothing of whether its message answers a question)."""
    boosts = boosts or {}
    dropped: list[Scored] = []
    items = _rerank(list(pool), limit, rerank_scores, rerank_failed, config)
    staged: list[Scored] = []
    for s in items:
        m = s.memory
        at = m.created_at if ageless else now
        age = max(0.0, (at - m.created_at).total_seconds() / 86_400)
        # Additive, as specified, and not clamped: clamping here would tie every strong match at 1.
        boost = config.recency_weight * math.exp(-age / config.recency_half_life_days)
        ratio = max(len(m.content) / config.length_norm_anchor, 1.0)
        factors = [
            ("importance", 0.7 + 0.3 * m.importance),
            ("length", max(0.3, 1.0 / (1.0 + 0.5 * math.log2(ratio)))),
        ]
        if config.time_decay == "weibull":
            factors.append(("time_decay", decay.search_boost(m, at, decay_config)))
        elif config.time_decay == "legacy":
            factors.append(("time_decay", _legacy_decay(m, at, config)))
        # The same path as ``s.at(stage, …, clamp=False)`` stage by stage, built in one step.
        score = max(0.0, s.score + boost)
        stages = [*s.stages, ("recency", score)]
        absolute = None if s.absolute is None else s.absolute + boost
        timed = boosts.get(m.memory_id, 0.0)
        if timed:
            score += timed
            stages.append(("time", score))
            absolute = None if absolute is None else absolute + timed
        for stage, factor in factors:
            score = max(0.0, score * factor)
            stages.append((stage, score))
            absolute = None if absolute is None else absolute * factor
        s = Scored(s.candidate, score, tuple(stages), s.dropped_at, absolute)  # ``replace``, built directly
        if config.fusion != "rrf" and _gate(s) < config.hard_min_score:
            dropped.append(s.drop("hard_min_score", (_gate(s), config.hard_min_score)))
        elif config.noise_filter and (_noise(m.abstract) or _noise(m.content)):
            dropped.append(s.drop("noise"))
        else:
            staged.append(s)
    if names and config.name_factor < 1.0:
        patterns = [re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", re.IGNORECASE) for name in names]
        holds = [any(p.search(s.memory.content) for p in patterns) for s in staged]
        if any(holds):
            staged = [
                s if held else s.at("names", s.score * config.name_factor, clamp=False)
                for s, held in zip(staged, holds, strict=True)
            ]
    ordered = _order(staged)
    if similarity is not None and config.mmr_threshold < 1.0:
        chosen: list[Scored] = []
        chosen_ids: list[str] = []
        demoted: list[Scored] = []
        above = _above(similarity)
        for position, s in enumerate(ordered):
            if len(chosen) == limit:  # the rest falls beyond the limit whatever its similarity
                demoted += ordered[position:]
                break
            if above(s.memory.memory_id, chosen_ids, config.mmr_threshold):
                demoted.append(s.at("mmr", s.score, clamp=False))
            else:
                chosen.append(s)
                chosen_ids.append(s.memory.memory_id)
        ordered = chosen + demoted
    if keep_dropped:
        dropped.extend(s.drop("limit") for s in ordered[limit:])
    return ordered[:limit], dropped
