"""GuardedSummarizer: timeouts, retries, a circuit breaker and a spend guard around any summarizer.

Invariants:

* **Bounded.**  One ``summarize`` call makes at most ``max_attempts`` provider
  calls, each cut off after ``timeout_s``, with backoff sleeps in between that
  never exceed ``backoff_max_s``.  Nothing here waits for a pause to end: a
  paused call fails at once with :class:`~lossless.errors.ProviderUnavailable`.
* **Only ProviderErrors escape.**  A timeout becomes a retryable
  :class:`~lossless.errors.ProviderError`, an empty or blank answer a
  retryable one, and any other exception from the inner summarizer a
  non-retryable one (the original kept as ``__cause__``).  Cancellation from
  outside is never swallowed.  Long or odd answers are returned as they are:
  judging them is the compaction engine's job.
* **Circuit breaker.**  ``breaker_threshold`` consecutive authentication
  failures (:class:`~lossless.errors.ProviderAuthError`) open it for
  ``breaker_cooldown_s``; while open, calls raise ``ProviderUnavailable``
  without reaching the provider.  After the cool-down one trial call goes
  through: success closes the breaker, another authentication failure opens it
  for a new cool-down.  Only a success resets the count.
* **Spend guard, per conversation.**  Each provider call (retries included)
  counts against its conversation's sliding window of ``spend_window_s``.
  The call that would exceed ``spend_max_calls`` in the window is refused and
  pauses that conversation for ``spend_backoff_s``, measured from that moment.
  The pause **always ends on time**: refused calls are not counted and do not
  extend it, and when it ends the window starts empty.  (The reference's guard
  could block a conversation for good, lossless-claw #902.)  Requests without
  a ``conversation_id`` share one budget.
* **Deterministic under test.**  The clock, the sleep and the jitter source are
  injected; state is per instance (one instance per provider configuration).
"""

from __future__ import annotations

import math
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

from lossless.config import Config
from lossless.errors import ProviderAuthError, ProviderError, ProviderUnavailable
from lossless.ports import Summarizer, SummaryRequest, SummaryResult

__all__ = ["GuardPolicy", "GuardedSummarizer"]

#: Conversation states are swept for expired entries when there are more than this many.
_SWEEP_AT = 1024


@dataclass(frozen=True, slots=True)
class GuardPolicy:
    """The limits a :class:`GuardedSummarizer` applies (all durations in seconds).

    ``timeout_s`` None means no per-call deadline; ``spend_max_calls`` None
    turns the spend guard off (the offline summarizer costs nothing).
    """

    timeout_s: float | None = 60.0
    max_attempts: int = 3
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0
    breaker_threshold: int = 5
    breaker_cooldown_s: float = 1800.0
    spend_window_s: float = 600.0
    spend_max_calls: int | None = 24
    spend_backoff_s: float = 1800.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.breaker_threshold < 1:
            raise ValueError("max_attempts and breaker_threshold must be at least 1")
        if self.spend_max_calls is not None and self.spend_max_calls < 1:
            raise ValueError("spend_max_calls must be at least 1 (or None to turn the spend guard off)")

    @classmethod
    def from_config(cls, config: Config, *, spend_guard: bool = True) -> GuardPolicy:
        """The policy the settings describe (``summary_timeout_ms``, ``circuit_breaker_*``, ``summary_*``)."""
        return cls(
            timeout_s=config.summary_timeout_ms / 1000,
            max_attempts=config.summary_max_attempts,
            breaker_threshold=config.circuit_breaker_threshold,
            breaker_cooldown_s=config.circuit_breaker_cooldown_ms / 1000,
            spend_window_s=config.summary_call_window_ms / 1000,
            spend_max_calls=config.summary_max_calls_per_window if spend_guard else None,
            spend_backoff_s=config.summary_spend_backoff_ms / 1000,
        )

    def backoff_s(self, retry: int, jitter: float) -> float:
        """Sleep before retry number ``retry`` (1-based): exponential, capped, with half of it jittered."""
        ceiling = min(self.backoff_max_s, self.backoff_initial_s * 2.0 ** (retry - 1))
        return ceiling / 2 + ceiling / 2 * min(max(jitter, 0.0), 1.0)


@dataclass(slots=True)
class _Spend:
    calls: deque[float] = field(default_factory=deque)
    paused_until: float | None = None


class GuardedSummarizer:
    """Wraps a :class:`~lossless.ports.Summarizer` with the protections in the module docstring."""

    def __init__(
        self,
        inner: Summarizer,
        policy: GuardPolicy | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.inner = inner
        self.policy = policy or GuardPolicy()
        self.provider = inner.provider
        self.model = inner.model
        self._clock = clock
        self._sleep = sleep
        self._jitter = jitter
        self._auth_failures = 0
        self._open_until: float | None = None
        self._trial_running = False
        self._spend: dict[int | None, _Spend] = {}

    def __repr__(self) -> str:
        return f"GuardedSummarizer({self.inner!r}, {self.policy!r})"

    # -- state, for callers that want to show it

    def breaker_open_until(self) -> float | None:
        """When (on the injected clock) the breaker lets a trial call through, or None when closed."""
        return self._open_until

    def spend_paused_until(self, conversation_id: int | None) -> float | None:
        """When (on the injected clock) the conversation's calls resume, or None when not paused."""
        state = self._spend.get(conversation_id)
        if state is None or state.paused_until is None or state.paused_until <= self._clock():
            return None
        return state.paused_until

    # -- the call

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        attempt = 0
        while True:
            attempt += 1
            trial = self._admit_breaker()
            try:
                self._admit_spend(request.conversation_id)
                result = await self._attempt(request)
            except ProviderAuthError:
                self._record_auth_failure()
                raise
            except ProviderError as exc:
                if not exc.retryable or isinstance(exc, ProviderUnavailable) or attempt >= self.policy.max_attempts:
                    raise
                await self._sleep(self.policy.backoff_s(attempt, self._jitter()))
                continue
            finally:
                if trial:
                    self._trial_running = False
            self._auth_failures = 0
            self._open_until = None
            return result

    async def _attempt(self, request: SummaryRequest) -> SummaryResult:
        timeout = self.policy.timeout_s
        try:
            with anyio.fail_after(timeout):
                outcome: object = await self.inner.summarize(request)
        except ProviderError:
            raise
        except TimeoutError as exc:
            within = f" within {timeout:g} s (summary_timeout_ms)" if timeout is not None else ""
            raise ProviderError(self.provider, f"no summary{within}; it will be retried", retryable=True) from exc
        except Exception as exc:
            raise ProviderError(
                self.provider,
                f"the summarizer failed unexpectedly ({type(exc).__name__}); this is a bug in it, "
                "not retried (see the chained exception)",
                retryable=False,
            ) from exc
        if not isinstance(outcome, SummaryResult) or not isinstance(outcome.text, str):
            raise ProviderError(
                self.provider,
                f"the summarizer returned {type(outcome).__name__} instead of a SummaryResult with text; "
                "this is a bug in it, not retried",
                retryable=False,
            )
        if not outcome.text.strip():
            raise ProviderError(
                self.provider, "the summarizer returned an empty summary; it will be retried", retryable=True
            )
        return outcome

    # -- circuit breaker

    def _admit_breaker(self) -> bool:
        """Refuse the call while the breaker is open; True when this call is the trial after a cool-down."""
        if self._open_until is None:
            return False
        now = self._clock()
        if now < self._open_until:
            raise ProviderUnavailable(
                self.provider,
                f"calls are paused for {_duration(self._open_until - now)} after "
                f"{self._auth_failures} consecutive authentication failures (circuit breaker): "
                "fix the API key; the next call after the pause is a trial",
            )
        if self._trial_running:
            raise ProviderUnavailable(
                self.provider, "a trial call is checking whether the API key works again; try again shortly"
            )
        self._trial_running = True
        return True

    def _record_auth_failure(self) -> None:
        self._auth_failures += 1
        if self._auth_failures >= self.policy.breaker_threshold:
            self._open_until = self._clock() + self.policy.breaker_cooldown_s

    # -- spend guard

    def _admit_spend(self, conversation_id: int | None) -> None:
        limit = self.policy.spend_max_calls
        if limit is None:
            return
        now = self._clock()
        if len(self._spend) > _SWEEP_AT:
            self._sweep(now)
        state = self._spend.setdefault(conversation_id, _Spend())
        if state.paused_until is not None:
            if now < state.paused_until:
                raise self._spend_error(conversation_id, state.paused_until - now)
            state.paused_until = None
            state.calls.clear()
        horizon = now - self.policy.spend_window_s
        while state.calls and state.calls[0] <= horizon:
            state.calls.popleft()
        if len(state.calls) >= limit:
            state.paused_until = now + self.policy.spend_backoff_s
            state.calls.clear()
            raise self._spend_error(conversation_id, self.policy.spend_backoff_s)
        state.calls.append(now)

    def _spend_error(self, conversation_id: int | None, remaining_s: float) -> ProviderUnavailable:
        who = "requests without a conversation" if conversation_id is None else f"conversation {conversation_id}"
        return ProviderUnavailable(
            self.provider,
            f"spend guard: {who} made {self.policy.spend_max_calls} summarizer calls within "
            f"{_duration(self.policy.spend_window_s)}; its calls resume in {_duration(remaining_s)} "
            "(summary_max_calls_per_window, summary_call_window_ms, summary_spend_backoff_ms)",
        )

    def _sweep(self, now: float) -> None:
        horizon = now - self.policy.spend_window_s
        for key in list(self._spend):
            state = self._spend[key]
            paused = state.paused_until is not None and state.paused_until > now
            if not paused and (not state.calls or state.calls[-1] <= horizon):
                del self._spend[key]


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 1:
        return "less than a second"
    if seconds < 120:
        return f"{math.ceil(seconds)} s"
    minutes = math.ceil(seconds / 60)
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes / 60:.1f} h"
