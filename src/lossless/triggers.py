"""Compaction triggers: whether a conversation's context should be compacted now, and why.

One pure function, :func:`decide`, serves ``after_turn``, the public
``evaluate()`` and the worker's re-check before a queued job runs, so all three
always agree.

Invariants:

* The pressure is the larger of the stored context's tokens and the prompt
  size the host observed (tool schemas, its system prompt, injected memories
  are part of what the model sees, not of what is stored).
* Triggers, first match wins: ``threshold`` (pressure over
  ``context_threshold`` × budget: a full compaction down to the threshold less
  the host's own overhead), ``message_count`` (more raw messages than
  ``max_active_messages``: a full compaction), ``leaf_chunk`` (raw tokens
  outside the fresh tail reach ``leaf_chunk_tokens``: an incremental pass).
  Otherwise the decision is not to compact, with the reason.
* Pinned (``system``) messages are never summarised, so they do not count
  towards the message-count trigger.
* Pure: entries and settings in, a decision out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from lossless.config import Config
from lossless.records import ContextEntry

__all__ = ["CompactionDecision", "DecisionReason", "decide"]

DecisionReason = Literal["threshold", "message_count", "leaf_chunk", "under_threshold", "disabled"]


@dataclass(frozen=True, slots=True)
class CompactionDecision:
    """Whether to compact, why, how (``mode``, ``target_tokens``), and the figures the decision used."""

    compact: bool
    reason: DecisionReason
    mode: Literal["incremental", "full"] | None
    target_tokens: int | None
    stored_tokens: int
    observed_tokens: int | None
    threshold: int
    active_messages: int
    max_active_messages: int | None

    @property
    def pressure(self) -> int:
        """The tokens the decision weighed: the larger of stored and observed."""
        return max(self.stored_tokens, self.observed_tokens or 0)

    @property
    def explanation(self) -> str:
        """The decision in a sentence."""
        if self.reason == "disabled":
            return "automatic compaction is off (autocompact_disabled)"
        if self.reason == "threshold":
            source = "observed prompt" if (self.observed_tokens or 0) > self.stored_tokens else "stored context"
            return f"the {source} holds {self.pressure:,} tokens, over the threshold of {self.threshold:,}"
        if self.reason == "message_count":
            return (
                f"the context holds {self.active_messages:,} raw messages, more than max_active_messages "
                f"({self.max_active_messages:,})"
            )
        if self.reason == "leaf_chunk":
            return "raw history outside the fresh tail reached leaf_chunk_tokens"
        return f"{self.pressure:,} tokens is under the threshold of {self.threshold:,}; no trigger fired"

    def to_dict(self) -> dict[str, Any]:
        return {
            "compact": self.compact,
            "reason": self.reason,
            "explanation": self.explanation,
            "mode": self.mode,
            "target_tokens": self.target_tokens,
            "stored_tokens": self.stored_tokens,
            "observed_tokens": self.observed_tokens,
            "threshold": self.threshold,
            "active_messages": self.active_messages,
            "max_active_messages": self.max_active_messages,
        }


def decide(
    entries: Sequence[ContextEntry],
    *,
    budget: int,
    config: Config,
    needs_leaf_pass: bool,
    observed_tokens: int | None = None,
) -> CompactionDecision:
    """The compaction decision for a context (see the module invariants)."""
    stored = sum(e.token_count for e in entries)
    threshold = int(config.context_threshold * budget)
    active = sum(1 for e in entries if e.kind == "message" and e.role != "system")
    limit = config.max_active_messages

    def decision(
        reason: DecisionReason, mode: Literal["incremental", "full"] | None, target: int | None
    ) -> CompactionDecision:
        return CompactionDecision(
            mode is not None, reason, mode, target, stored, observed_tokens, threshold, active, limit
        )

    if config.autocompact_disabled:
        return decision("disabled", None, None)
    overhead = max(0, (observed_tokens or 0) - stored)  # what the host adds around the stored context
    if max(stored, observed_tokens or 0) > threshold:
        return decision("threshold", "full", max(0, threshold - overhead))
    if limit is not None and active > limit:
        return decision("message_count", "full", None)
    if needs_leaf_pass:
        return decision("leaf_chunk", "incremental", None)
    return decision("under_threshold", None, None)
