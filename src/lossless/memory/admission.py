"""Admission control (AMAC-v1): should an extracted candidate become a memory at all?  Opt-in.

Score = weighted sum of five features, each in [0, 1]:

* **utility** — how useful the fact is, as rated by a model; without one it is
  0.5 (the reference's value when the rating fails), so it never decides alone;
* **confidence** — how well the conversation supports it:
  ``0.7·F1 + 0.3·coverage − 0.25·unsupported``, where F1 is the best
  longest-common-subsequence F1 of the candidate's words against one source
  span (sentence), coverage the share of its words found in the sources, and
  unsupported the share that is not;
* **novelty** — ``1 − max cosine`` against the nearest same-category memories
  (``novelty_pool`` of them);
* **recency** — ``1 − e^(−ln 2 · gap / half-life)``, ``gap`` = days since the
  most similar existing memory was last updated (1 when there is none): a
  fact just stored is not worth storing again;
* **type prior** — by category (profile .95, preferences .9, entities .75,
  events .45, cases .8, patterns .85).

Decision: below ``reject`` → rejected; otherwise passed on to dedup with the
hint ``add`` (score ≥ ``admit`` and max similarity < 0.55) or
``update_or_merge``.  Presets (reject/admit, weights u/c/n/r/t, pool,
half-life): balanced .45/.60, .1/.1/.1/.1/.6, 8, 14 d; conservative .52/.68,
.16/.16/.18/.08/.42, 10, 10 d; high-recall .34/.52, .08/.1/.08/.14/.6, 6, 21 d.

Invariants: pure and deterministic; the score lies in [0, 1]; the features
are reported with every decision so a rejection can be explained.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Literal

from lossless.memory.records import Category, Memory, MemoryDraft
from lossless.text import CJK_RUN

__all__ = ["PRESETS", "Admission", "AdmissionConfig", "admit"]

_TYPE_PRIORS: Mapping[Category, float] = MappingProxyType(
    {"profile": 0.95, "preferences": 0.9, "entities": 0.75, "events": 0.45, "cases": 0.8, "patterns": 0.85}
)
_WORD = re.compile(r"\w+", re.UNICODE)
_SPAN = re.compile(r"[^.!?。！？\n]+")


@dataclass(frozen=True, slots=True)
class AdmissionConfig:
    reject: float = 0.45
    admit: float = 0.60
    utility_weight: float = 0.1
    confidence_weight: float = 0.1
    novelty_weight: float = 0.1
    recency_weight: float = 0.1
    type_prior_weight: float = 0.6
    novelty_pool: int = 8
    recency_half_life_days: float = 14.0
    type_priors: Mapping[Category, float] = field(default_factory=lambda: _TYPE_PRIORS)


PRESETS: Mapping[str, AdmissionConfig] = MappingProxyType(
    {
        "balanced": AdmissionConfig(),
        "conservative": AdmissionConfig(0.52, 0.68, 0.16, 0.16, 0.18, 0.08, 0.42, 10, 10.0),
        "high-recall": AdmissionConfig(0.34, 0.52, 0.08, 0.1, 0.08, 0.14, 0.60, 6, 21.0),
    }
)


@dataclass(frozen=True, slots=True)
class Admission:
    admitted: bool
    hint: Literal["add", "update_or_merge", "reject"]
    score: float
    features: Mapping[str, float]


def _words(text: str) -> list[str]:
    tokens = _WORD.findall(text.lower())
    out: list[str] = []
    for token in tokens:  # CJK runs have no spaces: count their characters as words
        if CJK_RUN.fullmatch(token):
            out.extend(token)
        else:
            out.append(token)
    return out


def _lcs(a: Sequence[str], b: Sequence[str]) -> int:
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, 1):
            current.append(previous[j - 1] + 1 if x == y else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def confidence(candidate: str, sources: Sequence[str]) -> float:
    words = _words(candidate)[:200]
    if not words:
        return 0.0
    spans = [_words(s)[:200] for text in sources for s in _SPAN.findall(text)]
    best = 0.0
    for span in spans:
        if not span:
            continue
        common = _lcs(words, span)
        if common:
            precision, recall = common / len(span), common / len(words)
            best = max(best, 2 * precision * recall / (precision + recall))
    seen = {w for span in spans for w in span}
    coverage = sum(1 for w in words if w in seen) / len(words)
    return min(1.0, max(0.0, 0.7 * best + 0.3 * coverage - 0.25 * (1.0 - coverage)))


def admit(
    draft: MemoryDraft,
    sources: Sequence[str],
    neighbours: Sequence[tuple[Memory, float]],
    now: datetime,
    config: AdmissionConfig = PRESETS["balanced"],
    *,
    utility: float | None = None,
) -> Admission:
    """Score ``draft`` against the conversation it came from and its nearest same-category memories."""
    same = [(m, s) for m, s in neighbours if m.category == draft.category][: config.novelty_pool]
    max_similarity = max((s for _, s in same), default=0.0)
    if same:
        nearest = max(same, key=lambda pair: pair[1])[0]
        gap = max(0.0, (now - nearest.updated_at).total_seconds() / 86_400)
        recency = 1.0 - math.exp(-math.log(2) * gap / config.recency_half_life_days)
    else:
        recency = 1.0
    features = {
        "utility": 0.5 if utility is None else min(1.0, max(0.0, utility)),
        "confidence": confidence(draft.content, sources),
        "novelty": min(1.0, max(0.0, 1.0 - max_similarity)),
        "recency": recency,
        "type_prior": config.type_priors[draft.category],
    }
    score = (
        config.utility_weight * features["utility"]
        + config.confidence_weight * features["confidence"]
        + config.novelty_weight * features["novelty"]
        + config.recency_weight * features["recency"]
        + config.type_prior_weight * features["type_prior"]
    )
    score = min(1.0, max(0.0, score))
    if score < config.reject:
        return Admission(False, "reject", score, features)
    hint: Literal["add", "update_or_merge"] = (
        "add" if score >= config.admit and max_similarity < 0.55 else "update_or_merge"
    )
    return Admission(True, hint, score, features)
