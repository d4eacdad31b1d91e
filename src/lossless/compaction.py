"""Compaction: old history becomes a DAG of summaries that always point back to their sources.

A *leaf pass* replaces the oldest run of raw messages outside the fresh tail
with a leaf summary; a *condensed pass* replaces a run of same-depth summaries
with one summary a level deeper.  Modes:

* ``incremental`` (after a turn): one leaf pass when raw tokens outside the
  fresh tail reach ``leaf_chunk_tokens``, then condensation up to
  ``incremental_max_depth`` with the normal fan-out (``leaf_min_fanout``
  leaves, ``condensed_min_fanout`` deeper nodes);
* ``full`` (an explicit request, or the context over its threshold): every
  leaf pass there is room for (a leftover shorter than ``leaf_min_fanout``
  messages waits), then condensation of any run of at least
  ``condensed_min_fanout_hard`` same-depth nodes, shallowest first;
* ``until_under``: like ``full``, also summarising leftovers of two or more
  messages (or one worth shortening), stopping as soon as the context fits
  ``target_tokens``.  Under a target the fresh tail yields: it keeps at most
  half the target's tokens (never less than the newest message with the call
  it answers), so a budget can be met whatever the message sizes.

Invariants:

* **Nothing is lost.**  A summary replaces context items only together with
  the lineage rows that lead back to them and the pass's
  :class:`~lossless.records.CompactionEvent` (trigger, mode, context tokens
  before and after, time taken), in one store transaction; messages are never
  changed or deleted.
* **System messages are pinned.**  A stored ``system`` message (a policy the
  host recorded) is never folded into a summary; assembly always sends it.
* **Never split a tool call from its result.**  The fresh tail grows backwards
  to take in the calls whose results it holds, and a leaf chunk grows forwards
  to take in the results of the calls it holds.
* **Always terminates.**  Every pass replaces items with a summary that has
  strictly fewer tokens than they had (a summary that is not shorter is
  rejected, and the deterministic fallback is built to be shorter), so the
  context's token total strictly decreases; passes are also bounded by count
  and by a deadline.  Every call returns a :class:`CompactionResult` whose
  ``stop_reason`` says why it stopped.
* **Always progresses.**  A chunk that cannot be summarised shorter (a few
  tokens, e.g. a short question stranded before a message larger than
  ``leaf_chunk_tokens``) grows to take in its next neighbour, and is planned
  again; one that cannot grow any more is set aside for the rest of the call
  and the next chunk is planned — the same unsummarisable chunk is never
  tried twice.  A chunk too small to be worth a summary is grown before the
  summarizer is asked.  A message larger than ``leaf_chunk_tokens`` is shown
  to the summarizer as a head-and-tail excerpt under its id, and when every
  attempt fails its fallback is such an excerpt (the message stays whole in
  the store).  So ``no_progress`` means that what is left outside the fresh
  tail cannot be made shorter (or another writer kept conflicting).
* **Escalation.**  Each summary is tried with the ``normal`` policy, then
  ``aggressive``, then made by deterministic truncation (``fallback``); the
  summary records the level and the reason.  A summarizer that raises, hangs,
  returns nothing or returns too much only costs an attempt.
  :meth:`Compactor.remake` asks again, later, for a summary that fell back
  (the ``remake_summary`` repair of :mod:`lossless.integrity`): same sources,
  same rules, and only a proper (normal or aggressive) answer is returned.
* **One compaction per conversation at a time** in this process, and across
  hosts where the store offers :class:`~lossless.ports.ConversationLocks`
  (PostgreSQL's advisory locks); in any case the store refuses a replacement
  whose sources changed (:class:`ConflictError`), and the pass is planned again.
* **Leaf hooks are best-effort.**  ``on_leaf`` (e.g. memory extraction) runs for
  each new leaf summary after the call's passes, outside the lock; its failure is
  logged and never fails or changes the compaction.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, tzinfo
from typing import Literal

import anyio

from lossless.config import Config
from lossless.context import pairs, tail_start
from lossless.errors import ConflictError, InputError, ProviderUnavailable
from lossless.large_files import find_file_ids
from lossless.ports import ConversationLocks, SegmentItem, Store, Summarizer, SummaryPolicy, SummaryRequest
from lossless.records import (
    COMPACTION_TRIGGERS,
    CompactionEvent,
    CompactionMode,
    CompactionTrigger,
    ContextEntry,
    JSONValue,
    Summary,
    SummaryKind,
    SummaryLevel,
    utcnow,
)
from lossless.segments import message_items, render_items, summary_items
from lossless.tokens import TokenCounter, tail_to_tokens, truncate_to_tokens

__all__ = [
    "TRUNCATION_MARKER",
    "CompactionResult",
    "Compactor",
    "Mode",
    "StopReason",
    "compression_target",
]

Mode = CompactionMode
StopReason = Literal[
    "budget_met", "nothing_eligible", "no_progress", "irreducible_tail", "deadline", "provider_unavailable"
]

log = logging.getLogger("lossless.compaction")

TRUNCATION_MARKER = "[Truncated for context management]"
_MIN_TARGET = 192
_CONFLICT_RETRIES = 5
#: A segment to summarise: its items, the summaries it is made of (condensed), its first and last times.
_Segment = tuple[tuple[SegmentItem, ...], list[Summary], datetime | None, datetime | None]


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one compaction call did and why it stopped."""

    conversation_id: int
    mode: Mode
    stop_reason: StopReason
    tokens_before: int
    tokens_after: int
    summaries: tuple[Summary, ...] = ()
    passes: int = 0
    seconds: float = 0.0
    target_tokens: int | None = None
    trigger: CompactionTrigger = "manual"
    run_id: str = ""

    @property
    def compacted(self) -> bool:
        return bool(self.summaries)

    @property
    def by_depth(self) -> dict[int, int]:
        return dict(sorted(Counter(s.depth for s in self.summaries).items()))

    def to_dict(self) -> dict[str, JSONValue]:
        """The JSON every adapter answers a compaction with (``lcm compact --json``, HTTP, MCP; docs/api.md)."""
        return {
            "conversation_id": self.conversation_id,
            "mode": self.mode,
            "stop_reason": self.stop_reason,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "target_tokens": self.target_tokens,
            "passes": self.passes,
            "seconds": round(self.seconds, 3),
            "summaries_by_depth": {str(k): v for k, v in self.by_depth.items()},
            "summaries_by_level": dict(self.by_level),
            "summaries": [s.id for s in self.summaries],
            "trigger": self.trigger,
            "run_id": self.run_id,
        }

    @property
    def by_level(self) -> dict[str, int]:
        return dict(Counter(s.level for s in self.summaries))


@dataclass(frozen=True, slots=True)
class _Plan:
    kind: SummaryKind
    depth: int
    sources: tuple[ContextEntry, ...]
    previous: ContextEntry | None
    room: bool = False  # the chunk could take in its next neighbour

    @property
    def tokens(self) -> int:
        return sum(e.token_count for e in self.sources)


@dataclass(frozen=True, slots=True)
class _Answer:
    """An acceptable answer of the summarizer."""

    content: str
    tokens: int
    provider: str | None
    model: str | None
    level: SummaryLevel
    reason: str | None


@dataclass(slots=True)
class _Run:
    """Mutable state of one compaction call."""

    mode: Mode
    target: int | None
    deadline: float
    pressure: bool
    trigger: CompactionTrigger
    run_id: str
    created: list[Summary] = field(default_factory=list)
    passes: int = 0
    # (kind, ordinal of the first source) -> the fewest items that chunk must now hold (it was too small)
    grow: dict[tuple[SummaryKind, int], int] = field(default_factory=dict)
    # chunks (kind, first ordinal) that could not be made shorter even grown as far as they can go
    stuck: set[tuple[SummaryKind, int]] = field(default_factory=set)
    failures: int = 0
    # the protected fresh tail's token cap for this call (the engine's follows the host's budget)
    tail_max_tokens: int | None = None


def _summarisable(entry: ContextEntry) -> bool:
    """A raw message that a leaf may take: any but a pinned (system) one."""
    return entry.kind == "message" and entry.role != "system"


def compression_target(base: int, source_tokens: int) -> int:
    """The length to ask for: the configured target, but never more than 35% of the sources (and ≥ 192)."""
    return max(_MIN_TARGET, min(base, math.floor(source_tokens * 0.35)))


class Compactor:
    """Runs compaction passes for conversations of one store (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        summarizer: Summarizer,
        *,
        config: Config,
        counter: TokenCounter,
        zone: tzinfo,
        clock: Callable[[], datetime] = utcnow,
        on_leaf: Callable[[Summary], Awaitable[object]] | None = None,
    ) -> None:
        self.store = store
        self.summarizer = summarizer
        self.on_leaf = on_leaf
        self.config = config
        self.counter = counter
        self.zone = zone
        self._clock = clock
        self._locks: dict[int, anyio.Lock] = {}

    # ------------------------------------------------------------------ public

    def needs_leaf_pass(self, entries: Sequence[ContextEntry], tail_max_tokens: int | None = None) -> bool:
        """The incremental trigger: raw tokens outside the fresh tail reach ``leaf_chunk_tokens``.

        ``tail_max_tokens`` caps the fresh tail (else ``fresh_tail_max_tokens``).  Pinned (``system``)
        messages are never summarised, so they do not count.
        """
        cap = tail_max_tokens if tail_max_tokens is not None else self.config.fresh_tail_max_tokens
        start = tail_start(entries, self.config.fresh_tail_count, cap)
        raw = sum(e.token_count for e in entries[:start] if e.kind == "message" and e.role != "system")
        return raw >= self.config.leaf_chunk_tokens

    async def compact(
        self,
        conversation_id: int,
        *,
        mode: Mode = "full",
        target_tokens: int | None = None,
        trigger: CompactionTrigger = "manual",
        progress: Callable[[CompactionResult], Awaitable[None] | None] | None = None,
        tail_max_tokens: int | None = None,
    ) -> CompactionResult:
        """Compact one conversation; see the module docstring for the modes and guarantees.

        ``trigger`` (who asked: ``threshold``, ``manual`` or ``maintenance``) is recorded on each
        pass's :class:`~lossless.records.CompactionEvent`.  ``tail_max_tokens`` caps the protected
        fresh tail for this call (the engine passes the cap that follows the host's budget).
        """
        if mode == "until_under" and (target_tokens is None or target_tokens < 0):
            raise InputError("mode 'until_under' needs a target_tokens of zero or more")
        if trigger not in COMPACTION_TRIGGERS:
            raise InputError(f"trigger must be one of {', '.join(COMPACTION_TRIGGERS)}, got {trigger!r}")
        lock = self._locks.setdefault(conversation_id, anyio.Lock())
        async with lock:
            if isinstance(self.store, ConversationLocks):  # several hosts share the store
                async with self.store.conversation_lock(conversation_id):
                    result = await self._compact(
                        conversation_id, mode, target_tokens, trigger, progress, tail_max_tokens
                    )
            else:
                result = await self._compact(conversation_id, mode, target_tokens, trigger, progress, tail_max_tokens)
        if self.on_leaf is not None:
            for summary in result.summaries:
                if summary.kind != "leaf":
                    continue
                try:
                    await self.on_leaf(summary)
                except Exception as exc:  # a hook never fails compaction
                    log.warning("the hook on leaf summary %s failed: %s", summary.id, exc, exc_info=exc)
        return result

    # ------------------------------------------------------------------ the loop

    async def _compact(
        self,
        conversation_id: int,
        mode: Mode,
        target: int | None,
        trigger: CompactionTrigger,
        progress: Callable[[CompactionResult], Awaitable[None] | None] | None,
        tail_max_tokens: int | None = None,
    ) -> CompactionResult:
        started = time.monotonic()
        limit_ms = (
            self.config.compact_until_under_deadline_ms if mode == "until_under" else self.config.sweep_deadline_ms
        )
        deadline = started + limit_ms / 1000
        run = _Run(mode, target, deadline, mode == "until_under", trigger, uuid.uuid4().hex[:16])
        run.tail_max_tokens = tail_max_tokens
        entries = await self.store.get_context(conversation_id)
        before = sum(e.token_count for e in entries)
        conflicts = 0
        # Each pass either makes the item count smaller, or turns one oversized message into a summary
        # (which later passes never take alone again), so this bound is never reached; it backs up the proof.
        # A chunk that cannot be shortened either grows by one item or is set aside, so failed attempts are
        # bounded by the item count too (``run.failures``).
        max_passes = 2 * len(entries) + 8
        stop: StopReason

        def result(reason: StopReason, context: Sequence[ContextEntry]) -> CompactionResult:
            return CompactionResult(
                conversation_id,
                mode,
                reason,
                before,
                sum(e.token_count for e in context),
                tuple(run.created),
                run.passes,
                time.monotonic() - started,
                target,
                trigger,
                run.run_id,
            )

        while True:
            tokens_now = sum(e.token_count for e in entries)
            if target is not None and tokens_now <= target:
                stop = "budget_met"
                break
            if time.monotonic() >= run.deadline:
                stop = "deadline"
                break
            if run.passes >= max_passes:
                stop = "no_progress"
                break
            plan = self._plan(entries, run)
            if plan is None:
                stop = self._why_nothing(entries, run)
                break
            pass_started = time.monotonic()
            outcome = await self._summarize(conversation_id, plan, run)
            if outcome is None:
                stop = "provider_unavailable"
                break
            if outcome == "no_progress":
                run.failures += 1
                if run.failures > max_passes:
                    stop = "no_progress"
                    break
                self._set_aside(plan, run)
                continue
            event = CompactionEvent(
                conversation_id=conversation_id,
                summary_id=outcome.id,
                run_id=run.run_id,
                trigger=run.trigger,
                mode=mode,
                source_items=len(plan.sources),
                tokens_before=tokens_now,
                tokens_after=tokens_now - plan.tokens + outcome.token_count,
                elapsed_ms=round((time.monotonic() - pass_started) * 1000),
                created_at=self._clock(),
            )
            try:
                await self.store.replace_with_summary(outcome, plan.sources, event)
            except ConflictError:
                conflicts += 1
                if conflicts > _CONFLICT_RETRIES:
                    stop = "no_progress"
                    break
                await anyio.sleep(0.01 * conflicts)
                entries = await self.store.get_context(conversation_id)
                continue
            conflicts = 0
            run.grow.pop((plan.kind, plan.sources[0].ordinal), None)
            run.created.append(outcome)
            run.passes += 1
            entries = _apply(entries, plan, outcome)
            if progress is not None:
                maybe = progress(result("budget_met", entries))
                if maybe is not None:
                    await maybe

        return result(stop, entries)

    @staticmethod
    def _set_aside(plan: _Plan, run: _Run) -> None:
        """``plan`` could not be made shorter: plan that chunk one item larger next time, or never again."""
        key = (plan.kind, plan.sources[0].ordinal)
        if plan.room:
            run.grow[key] = len(plan.sources) + 1
        else:
            run.grow.pop(key, None)
            run.stuck.add(key)

    def _why_nothing(self, entries: Sequence[ContextEntry], run: _Run) -> StopReason:
        if run.target is not None:
            start = self._tail_start(entries, run)
            if sum(e.token_count for e in entries[start:]) > run.target:
                return "irreducible_tail"
        if run.stuck:  # what is left outside the fresh tail is too small to be made shorter
            return "no_progress"
        return "nothing_eligible"

    # ------------------------------------------------------------------ planning

    def _plan(self, entries: Sequence[ContextEntry], run: _Run) -> _Plan | None:
        if run.mode == "incremental":
            if not run.created and self.needs_leaf_pass(entries, run.tail_max_tokens):
                return self._plan_leaf(entries, run)
            return self._plan_condensed(entries, run, max_depth=self.config.incremental_max_depth)
        return self._plan_leaf(entries, run) or self._plan_condensed(entries, run, max_depth=None)

    def _tail_start(self, entries: Sequence[ContextEntry], run: _Run) -> int:
        """Where the protected fresh tail starts; under a target it holds at most half the target's tokens."""
        cap = run.tail_max_tokens if run.tail_max_tokens is not None else self.config.fresh_tail_max_tokens
        if run.mode == "until_under" and run.target is not None:
            share = max(1, run.target // 2)
            cap = share if cap is None else min(cap, share)
        return tail_start(entries, self.config.fresh_tail_count, cap)

    def _plan_leaf(self, entries: Sequence[ContextEntry], run: _Run) -> _Plan | None:
        start = self._tail_start(entries, run)
        answered = pairs(entries)
        first = 0
        # Pinned (system) messages are never summarised: a chunk is a run of other messages, and a run
        # too small to summarise before a pinned message lets the next run be tried.
        while True:
            first = next((i for i in range(first, start) if _summarisable(entries[i])), start)
            if first >= start:
                return None
            end = first
            while end < start and _summarisable(entries[end]):
                end += 1
            key: tuple[SummaryKind, int] = ("leaf", entries[first].ordinal)
            if key in run.stuck:  # this run of messages cannot be made shorter: plan the next one
                first = end
                continue
            plan = self._leaf_chunk(entries, run, first, end, key, answered)
            if plan is not None or end >= start or entries[end].role != "system":
                return plan
            first = end

    def _leaf_chunk(
        self,
        entries: Sequence[ContextEntry],
        run: _Run,
        first: int,
        end: int,
        key: tuple[SummaryKind, int],
        answered: dict[int, int],
    ) -> _Plan | None:
        """The leaf chunk that starts at ``first`` in the run of messages up to ``end`` (None: not worth one)."""
        at_least = run.grow.get(key, 1)
        chunk_end = first
        tokens = 0
        while chunk_end < end and (
            chunk_end - first < at_least or tokens + entries[chunk_end].token_count <= self.config.leaf_chunk_tokens
        ):
            tokens += entries[chunk_end].token_count
            chunk_end += 1
        # A chunk cut short by a large neighbour and too small to be worth a summary takes the neighbour in
        # (a message over leaf_chunk_tokens reaches the summarizer as a head-and-tail excerpt).
        if chunk_end < end and tokens < self._worth_summarising:
            chunk_end += 1
        # Take in the results of the calls the chunk makes (they are outside the tail: see tail_start).
        # A call that is never answered (an aborted turn) holds nothing back.
        extended = True
        while extended:
            extended = False
            for result_index in range(chunk_end, end):
                if answered.get(result_index, end) < chunk_end:
                    chunk_end = result_index + 1
                    extended = True
        sources = tuple(entries[first:chunk_end])
        # A chunk is worth a summary when it is full (it stopped at the size cap) or has enough messages;
        # a small leftover just before the fresh tail waits for more history, unless under budget pressure.
        full = chunk_end < end or sum(e.token_count for e in sources) >= self.config.leaf_chunk_tokens
        minimum = 2 if run.pressure else self.config.leaf_min_fanout
        if run.pressure and sum(e.token_count for e in sources) >= self._worth_summarising:
            minimum = 1  # under a target, one message worth shortening is shortened
        if not full and len(sources) < minimum and key not in run.grow:
            return None
        previous = next((entries[i] for i in range(first - 1, -1, -1) if entries[i].kind == "summary"), None)
        return _Plan("leaf", 0, sources, previous, room=chunk_end < end)

    @property
    def _worth_summarising(self) -> int:
        """Fewest source tokens a summary can be expected to shrink (a chunk below it grows first)."""
        return min(2 * _MIN_TARGET, self.config.leaf_chunk_tokens // 4)

    def _plan_condensed(self, entries: Sequence[ContextEntry], run: _Run, *, max_depth: int | None) -> _Plan | None:
        depths = sorted({e.depth for e in entries if e.kind == "summary" and e.depth is not None})
        for depth in depths:
            if max_depth is not None and depth + 1 > max_depth:
                break
            if run.mode != "incremental":  # a full sweep condenses whatever it can (at least two nodes)
                fanout = self.config.condensed_min_fanout_hard
            else:
                fanout = self.config.leaf_min_fanout if depth == 0 else self.config.condensed_min_fanout
            index = 0
            while index < len(entries):
                if entries[index].kind != "summary" or entries[index].depth != depth:
                    index += 1
                    continue
                end = index
                while end < len(entries) and entries[end].kind == "summary" and entries[end].depth == depth:
                    end += 1
                key: tuple[SummaryKind, int] = ("condensed", entries[index].ordinal)
                if end - index >= fanout and key not in run.stuck:
                    at_least = max(fanout, run.grow.get(key, fanout))
                    chunk_end = index
                    tokens = 0
                    while chunk_end < end and (
                        chunk_end - index < at_least
                        or tokens + entries[chunk_end].token_count <= self.config.leaf_chunk_tokens
                    ):
                        tokens += entries[chunk_end].token_count
                        chunk_end += 1
                    previous = next(
                        (entries[i] for i in range(index - 1, -1, -1) if entries[i].kind == "summary"), None
                    )
                    sources = tuple(entries[index:chunk_end])
                    return _Plan("condensed", depth + 1, sources, previous, room=chunk_end < end)
                index = end
        return None

    # ------------------------------------------------------------------ summarising

    async def _summarize(self, conversation_id: int, plan: _Plan, run: _Run) -> Summary | Literal["no_progress"] | None:
        """The summary for ``plan`` (escalating as needed); None when the provider is unavailable."""
        items, children, earliest, latest = await self._segment(plan)
        text = render_items(items)
        previous = None
        if plan.previous is not None:
            found = await self.store.get_summaries([plan.previous.ref])  # type: ignore[list-item]
            previous = found[0].content if found else None
        request = SummaryRequest(
            kind=plan.kind,
            depth=plan.depth,
            policy="normal",
            target_tokens=0,
            text=text,
            items=items,
            previous_context=previous,
            custom_instructions=self.config.custom_instructions,
            conversation_id=conversation_id,
            earliest_at=earliest,
            latest_at=latest,
        )
        outcome = await self._ask(request, plan.tokens, pressure=run.pressure)
        if outcome is None:
            return None
        files = await self._source_file_ids(plan, children)
        if isinstance(outcome, _Answer):
            return self._summary(
                conversation_id, plan, outcome.content, outcome.tokens, children, earliest, latest,
                provider=outcome.provider, model=outcome.model, level=outcome.level, reason=outcome.reason,
                source_files=files,
            )  # fmt: skip
        single = plan.kind == "leaf" and len(plan.sources) == 1
        fallback = self._fallback(text, plan.tokens, excerpt=single)
        if fallback is None:
            return "no_progress"
        return self._summary(
            conversation_id, plan, fallback, self.counter.count(fallback), children, earliest, latest,
            provider="truncation", model=None, level="fallback", reason="; ".join(outcome) or None,
            source_files=files,
        )  # fmt: skip

    async def _source_file_ids(self, plan: _Plan, children: Sequence[Summary]) -> list[str]:
        """The large files a summary's sources hold, whatever its text says: a leaf's from its messages'
        stored text (each stored-aside file leaves its ``[LCM File: file_…`` reference there), a condensed
        summary's from its children."""
        if plan.kind != "leaf":
            return [f for c in children for f in c.file_ids]
        messages = await self.store.get_messages_by_id([e.message_id for e in plan.sources if e.message_id is not None])
        return [f for m in messages for f in find_file_ids(m.content)]

    async def _ask(self, request: SummaryRequest, source_tokens: int, *, pressure: bool) -> _Answer | list[str] | None:
        """The first acceptable answer to ``request`` (``normal``, then ``aggressive``), else why each failed.

        None when the provider is unavailable and nothing presses (``pressure``: carry on to the fallback).
        """
        base = self.config.leaf_target_tokens if request.kind == "leaf" else self.config.condensed_target_tokens
        target = compression_target(base, source_tokens)
        reasons: list[str] = []
        deadline_s = self.config.summary_timeout_ms / 1000 * self.config.summary_max_attempts
        attempts: tuple[tuple[SummaryPolicy, int], ...] = (("normal", target), ("aggressive", max(64, target * 3 // 5)))
        for policy, policy_target in attempts:
            try:
                # A guarded summarizer times out and retries each call itself; this outer deadline
                # only stops one that never answers, whoever built it.
                with anyio.fail_after(deadline_s):
                    answer = await self.summarizer.summarize(
                        replace(request, policy=policy, target_tokens=policy_target)
                    )
            except ProviderUnavailable as exc:
                if not pressure:
                    return None
                reasons.append(f"{policy}: {exc}")
                break
            except TimeoutError:
                reasons.append(f"{policy}: no answer within {deadline_s * 1000:.0f} ms")
                continue
            except Exception as exc:
                reasons.append(f"{policy}: {type(exc).__name__}: {exc}"[:300])
                continue
            content = answer.text.strip()
            tokens = self.counter.count(content)
            if not content:
                reasons.append(f"{policy}: empty answer")
            elif tokens >= source_tokens:
                reasons.append(f"{policy}: {tokens} tokens, not shorter than its {source_tokens}-token sources")
            elif tokens > self.config.summary_max_overage_factor * policy_target:
                reasons.append(
                    f"{policy}: {tokens} tokens, over {self.config.summary_max_overage_factor:g}× the target"
                )
            else:
                reason = "; ".join(reasons) or None
                return _Answer(content, tokens, answer.provider, answer.model, policy, reason)
        return reasons

    @asynccontextmanager
    async def holding(self, conversation_id: int) -> AsyncIterator[None]:
        """Hold the locks compaction of the conversation holds (this process's, and the store's across hosts).

        Integrity repairs run under it, so a repair never interleaves with a compaction here.
        """
        async with self._locks.setdefault(conversation_id, anyio.Lock()):
            if isinstance(self.store, ConversationLocks):
                async with self.store.conversation_lock(conversation_id):
                    yield
            else:
                yield

    async def remake(self, summary: Summary) -> Summary | None:
        """A proper (normal or aggressive) summary of ``summary``'s sources by the current summarizer, or None.

        The result is ``summary`` with a new text, token count, level, provider, model and reason (and
        any file ids the new text mentions added); id, lineage, times and counts stay.  Nothing is
        written: store it with :meth:`~lossless.ports.Store.rewrite_summary`.
        """
        if summary.kind == "leaf":
            ids = (await self.store.get_summary_messages([summary.id])).get(summary.id, ())
            items, _, _, _ = await self._render_leaf(list(ids))
            source_tokens = summary.source_token_count
        else:
            ids_ = (await self.store.get_summary_parents([summary.id])).get(summary.id, ())
            items, children, _, _ = await self._render_condensed(list(ids_))
            source_tokens = sum(c.token_count for c in children)
        text = render_items(items)
        if not text.strip() or source_tokens < 1:
            return None
        request = SummaryRequest(
            kind=summary.kind,
            depth=summary.depth,
            policy="normal",
            target_tokens=0,
            text=text,
            items=items,
            custom_instructions=self.config.custom_instructions,
            conversation_id=summary.conversation_id,
            earliest_at=summary.earliest_at,
            latest_at=summary.latest_at,
        )
        outcome = await self._ask(request, source_tokens, pressure=False)
        if not isinstance(outcome, _Answer):
            return None
        why = f"remade from a truncation fallback ({summary.reason})" if summary.reason else "remade from a fallback"
        return replace(
            summary,
            content=outcome.content,
            token_count=outcome.tokens,
            file_ids=tuple(dict.fromkeys([*summary.file_ids, *find_file_ids(outcome.content)])),
            provider=outcome.provider,
            model=outcome.model,
            level=outcome.level,
            reason=why if outcome.reason is None else f"{why}; {outcome.reason}",
        )

    async def _segment(self, plan: _Plan) -> _Segment:
        if plan.kind == "leaf":
            return await self._render_leaf([e.message_id for e in plan.sources if e.message_id is not None])
        return await self._render_condensed([e.summary_id for e in plan.sources if e.summary_id is not None])

    async def _render_leaf(self, ids: list[int]) -> _Segment:
        messages = await self.store.get_messages_by_id(ids)
        items = message_items(messages, self.zone, max_chars=self.config.leaf_chunk_tokens * 4)
        times = [m.created_at for m in messages]
        return items, [], min(times, default=None), max(times, default=None)

    async def _render_condensed(self, ids: list[str]) -> _Segment:
        summaries = await self.store.get_summaries(ids)
        items = summary_items(summaries, self.zone)
        earliest = min((s.earliest_at for s in summaries if s.earliest_at), default=None)
        latest = max((s.latest_at for s in summaries if s.latest_at), default=None)
        return items, summaries, earliest, latest

    def _fallback(self, text: str, source_tokens: int, *, excerpt: bool = False) -> str | None:
        """Deterministic truncation, built to be shorter than the sources; None when that is impossible.

        With ``excerpt`` (one message), the beginning and the end of the text around a note of what was
        left out: the segment's header names the message, so the whole text stays one expansion away.
        """
        marker_tokens = self.counter.count(TRUNCATION_MARKER) + 1
        budget = min(self.config.fallback_max_tokens, source_tokens // 2) - marker_tokens
        if budget < 1:
            return None
        candidate = f"{truncate_to_tokens(text, budget, self.counter).rstrip()}\n{TRUNCATION_MARKER}"
        if excerpt and self.counter.count(text) > budget:
            note = "\n[… the middle of this message is left out here; expand this summary for its whole text …]\n"
            share = budget - self.counter.count(note)
            if share >= 8:
                head = truncate_to_tokens(text, share * 3 // 4, self.counter).rstrip()
                tail = tail_to_tokens(text, share - share * 3 // 4, self.counter).lstrip()
                candidate = f"{head}{note}{tail}\n{TRUNCATION_MARKER}"
        return candidate if self.counter.count(candidate) < source_tokens else None

    def _summary(
        self,
        conversation_id: int,
        plan: _Plan,
        content: str,
        tokens: int,
        children: Sequence[Summary],
        earliest: datetime | None,
        latest: datetime | None,
        *,
        provider: str | None,
        model: str | None,
        level: SummaryLevel,
        reason: str | None,
        source_files: Sequence[str] = (),
    ) -> Summary:
        created = self._clock()
        first = plan.sources[0].ref
        digest = hashlib.sha256(f"{conversation_id}|{first}|{created.isoformat()}|{content}".encode()).hexdigest()
        if plan.kind == "leaf":
            descendants, descendant_tokens = 0, 0
            source_tokens = plan.tokens
        else:
            descendants = sum(c.descendant_count + 1 for c in children)
            descendant_tokens = sum(c.descendant_token_count + c.token_count for c in children)
            source_tokens = sum(c.source_token_count for c in children)
        file_ids = list(dict.fromkeys([*source_files, *find_file_ids(content)]))
        return Summary(
            id=f"sum_{digest[:16]}",
            conversation_id=conversation_id,
            kind=plan.kind,
            depth=plan.depth,
            content=content,
            token_count=tokens,
            created_at=created,
            earliest_at=earliest,
            latest_at=latest,
            descendant_count=descendants,
            descendant_token_count=descendant_tokens,
            source_token_count=source_tokens,
            file_ids=tuple(file_ids),
            provider=provider,
            model=model,
            level=level,
            reason=reason,
        )


def _apply(entries: Sequence[ContextEntry], plan: _Plan, summary: Summary) -> list[ContextEntry]:
    """The context after ``plan`` was replaced by ``summary`` (what the store did, without re-reading it)."""
    first = plan.sources[0].ordinal
    last = plan.sources[-1].ordinal
    replacement = ContextEntry(
        ordinal=first,
        kind="summary",
        token_count=summary.token_count,
        created_at=summary.latest_at or summary.created_at,
        summary_id=summary.id,
        depth=summary.depth,
        earliest_at=summary.earliest_at,
    )
    before = [e for e in entries if e.ordinal < first]
    after = [e for e in entries if e.ordinal > last]
    return [*before, replacement, *after]
