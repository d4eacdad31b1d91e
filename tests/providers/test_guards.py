"""GuardedSummarizer: timeouts, retries with backoff, the circuit breaker and the spend guard.

The clock and the sleep are fakes, so every pause is instant and every count exact.
"""

from __future__ import annotations

import pytest

from lossless.config import Config
from lossless.errors import ProviderAuthError, ProviderError, ProviderUnavailable
from lossless.ports import Summarizer
from lossless.providers.guards import GuardedSummarizer, GuardPolicy
from lossless.providers.openai import OpenAISummarizer
from lossless.testing import FakeStep, FakeSummarizer, StubProviderServer, StubReply

from .conftest import KEY, leaf_request

pytestmark = pytest.mark.anyio


class FakeTime:
    """A clock that only moves when told to, and a sleep that moves it."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def time() -> FakeTime:
    return FakeTime()


def guarded(inner: Summarizer, time: FakeTime, **policy: object) -> GuardedSummarizer:
    return GuardedSummarizer(inner, GuardPolicy(**policy), clock=time.clock, sleep=time.sleep, jitter=lambda: 0.5)  # type: ignore[arg-type]


def retryable(status: int = 503) -> ProviderError:
    return ProviderError("fake", f"HTTP {status}", retryable=True, status=status)


def auth_error() -> ProviderAuthError:
    return ProviderAuthError("fake", "the API key was refused", status=401)


# ---------------------------------------------------------------- passing through


async def test_a_good_answer_passes_through(time: FakeTime) -> None:
    fake = FakeSummarizer("Did X.\nFiles: none\nExpand for details about: y", provider="p", model="m")
    guard = guarded(fake, time)
    result = await guard.summarize(leaf_request())
    assert result.text.startswith("Did X.") and (guard.provider, guard.model) == ("p", "m")
    assert len(fake.calls) == 1 and time.sleeps == []


async def test_long_answers_are_left_for_the_engine_to_judge(time: FakeTime) -> None:
    result = await guarded(FakeSummarizer(FakeStep.long(10)), time).summarize(leaf_request(target_tokens=50))
    assert len(result.text.split()) == 500


# ---------------------------------------------------------------- retries


async def test_retryable_errors_are_retried_with_growing_jittered_backoff(time: FakeTime) -> None:
    fake = FakeSummarizer(retryable(429), retryable(500), retryable(503), "ok")
    guard = guarded(fake, time, max_attempts=4, backoff_initial_s=1.0, backoff_max_s=3.0)
    assert (await guard.summarize(leaf_request())).text == "ok"
    assert len(fake.calls) == 4
    # half of each exponential step is fixed, half jittered (jitter 0.5 here); the step is capped at 3 s
    assert time.sleeps == [0.75, 1.5, 2.25]


def test_backoff_bounds() -> None:
    policy = GuardPolicy(backoff_initial_s=2.0, backoff_max_s=10.0)
    assert [policy.backoff_s(n, 0.0) for n in (1, 2, 3, 4, 5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert [policy.backoff_s(n, 1.0) for n in (1, 2, 3, 4, 5)] == [2.0, 4.0, 8.0, 10.0, 10.0]
    assert policy.backoff_s(1, 7.0) == 2.0  # a jitter source out of range is clamped


async def test_attempts_are_bounded(time: FakeTime) -> None:
    fake = FakeSummarizer(*[retryable() for _ in range(10)])
    with pytest.raises(ProviderError, match="HTTP 503"):
        await guarded(fake, time, max_attempts=3).summarize(leaf_request())
    assert len(fake.calls) == 3 and len(time.sleeps) == 2


async def test_final_errors_are_not_retried(time: FakeTime) -> None:
    fake = FakeSummarizer(ProviderError("fake", "HTTP 400", status=400), "never used")
    with pytest.raises(ProviderError, match="HTTP 400"):
        await guarded(fake, time).summarize(leaf_request())
    assert len(fake.calls) == 1 and time.sleeps == []


async def test_empty_answers_are_retried_then_reported(time: FakeTime) -> None:
    fake = FakeSummarizer(FakeStep.empty(), "  \n ", "finally")
    assert (await guarded(fake, time).summarize(leaf_request())).text == "finally"
    always_empty = FakeSummarizer(*[FakeStep.empty()] * 3)
    with pytest.raises(ProviderError, match="empty summary") as caught:
        await guarded(always_empty, time).summarize(leaf_request())
    assert caught.value.retryable and len(always_empty.calls) == 3


async def test_unexpected_exceptions_become_final_provider_errors(time: FakeTime) -> None:
    fake = FakeSummarizer(ValueError("boom"), "never used")
    with pytest.raises(ProviderError, match="failed unexpectedly \\(ValueError\\)") as caught:
        await guarded(fake, time).summarize(leaf_request())
    assert not caught.value.retryable and isinstance(caught.value.__cause__, ValueError)
    assert len(fake.calls) == 1


async def test_a_result_of_the_wrong_type_is_a_final_error(time: FakeTime) -> None:
    class Broken:
        provider, model = "broken", None

        async def summarize(self, request: object) -> object:
            return "just a string"

    with pytest.raises(ProviderError, match="returned str instead of a SummaryResult"):
        await guarded(Broken(), time).summarize(leaf_request())  # type: ignore[arg-type]


async def test_a_hanging_summarizer_times_out_then_the_retry_succeeds(time: FakeTime) -> None:
    fake = FakeSummarizer(FakeStep.hang(), FakeStep.hang(), "recovered")
    guard = guarded(fake, time, timeout_s=0.05, max_attempts=3)
    assert (await guard.summarize(leaf_request())).text == "recovered"
    assert len(fake.calls) == 3


async def test_a_summarizer_that_always_hangs_ends_in_a_timeout_error(time: FakeTime) -> None:
    fake = FakeSummarizer(*[FakeStep.hang()] * 2)
    with pytest.raises(ProviderError, match=r"no summary within 0\.05 s") as caught:
        await guarded(fake, time, timeout_s=0.05, max_attempts=2).summarize(leaf_request())
    assert caught.value.retryable and len(fake.calls) == 2


# ---------------------------------------------------------------- circuit breaker


async def test_the_breaker_opens_after_consecutive_auth_failures_and_closes_after_a_success(time: FakeTime) -> None:
    fake = FakeSummarizer(*[auth_error() for _ in range(3)])
    guard = guarded(fake, time, breaker_threshold=3, breaker_cooldown_s=600)
    for _ in range(3):
        with pytest.raises(ProviderAuthError):
            await guard.summarize(leaf_request())
    assert len(fake.calls) == 3 and time.sleeps == []  # auth errors are never retried
    assert guard.breaker_open_until() == time.now + 600

    # While open, calls fail at once without reaching the provider.
    time.now += 599
    with pytest.raises(ProviderUnavailable, match=r"paused for 1 s after 3 consecutive authentication failures"):
        await guard.summarize(leaf_request())
    assert len(fake.calls) == 3

    # After the cool-down one trial goes through; a success closes the breaker.
    time.now += 1
    assert (await guard.summarize(leaf_request())).text
    assert guard.breaker_open_until() is None and len(fake.calls) == 4


async def test_a_failed_trial_reopens_the_breaker_for_a_new_cooldown(time: FakeTime) -> None:
    fake = FakeSummarizer(auth_error(), auth_error(), auth_error())
    guard = guarded(fake, time, breaker_threshold=2, breaker_cooldown_s=60)
    for _ in range(2):
        with pytest.raises(ProviderAuthError):
            await guard.summarize(leaf_request())
    time.now += 60
    with pytest.raises(ProviderAuthError):
        await guard.summarize(leaf_request())
    assert guard.breaker_open_until() == time.now + 60
    with pytest.raises(ProviderUnavailable):
        await guard.summarize(leaf_request())
    assert len(fake.calls) == 3


async def test_only_a_success_resets_the_auth_failure_count(time: FakeTime) -> None:
    fake = FakeSummarizer(auth_error(), ProviderError("fake", "HTTP 400"), auth_error(), "ok", auth_error())
    guard = guarded(fake, time, breaker_threshold=2)
    for _ in range(3):
        with pytest.raises(ProviderError):
            await guard.summarize(leaf_request())
    assert guard.breaker_open_until() is not None  # two auth failures, with a non-auth error between them
    time.now += guard.policy.breaker_cooldown_s
    assert (await guard.summarize(leaf_request())).text == "ok"
    with pytest.raises(ProviderAuthError):
        await guard.summarize(leaf_request())
    assert guard.breaker_open_until() is None  # the count started again at the success


# ---------------------------------------------------------------- spend guard


async def test_the_spend_guard_pauses_one_conversation_and_always_reopens(time: FakeTime) -> None:
    fake = FakeSummarizer()
    guard = guarded(fake, time, spend_max_calls=3, spend_window_s=600, spend_backoff_s=1800)
    for _ in range(3):
        await guard.summarize(leaf_request(conversation_id=1))
        time.now += 10
    with pytest.raises(ProviderUnavailable, match=r"conversation 1 made 3 summarizer calls within 10 min; .* 30 min"):
        await guard.summarize(leaf_request(conversation_id=1))
    assert guard.spend_paused_until(1) == time.now + 1800
    assert len(fake.calls) == 3

    # Other conversations are not affected.
    await guard.summarize(leaf_request(conversation_id=2))

    # Refused calls during the pause neither count nor extend it.
    for _ in range(50):
        time.now += 30
        with pytest.raises(ProviderUnavailable):
            await guard.summarize(leaf_request(conversation_id=1))
    time.now += 1800 - 50 * 30
    assert guard.spend_paused_until(1) is None
    for _ in range(3):  # a fresh window after the pause
        await guard.summarize(leaf_request(conversation_id=1))
    assert len(fake.calls) == 3 + 1 + 3


async def test_the_window_slides(time: FakeTime) -> None:
    guard = guarded(FakeSummarizer(), time, spend_max_calls=2, spend_window_s=100)
    await guard.summarize(leaf_request())
    time.now += 60
    await guard.summarize(leaf_request())
    time.now += 41  # the first call has left the window
    await guard.summarize(leaf_request())
    with pytest.raises(ProviderUnavailable):
        await guard.summarize(leaf_request())


async def test_retries_count_against_the_spend_guard(time: FakeTime) -> None:
    fake = FakeSummarizer(retryable(), retryable(), "ok")
    guard = guarded(fake, time, spend_max_calls=2, max_attempts=3)
    with pytest.raises(ProviderUnavailable, match="spend guard"):
        await guard.summarize(leaf_request())
    assert len(fake.calls) == 2


async def test_requests_without_a_conversation_share_one_budget(time: FakeTime) -> None:
    guard = guarded(FakeSummarizer(), time, spend_max_calls=1)
    await guard.summarize(leaf_request(conversation_id=None))
    with pytest.raises(ProviderUnavailable, match="requests without a conversation"):
        await guard.summarize(leaf_request(conversation_id=None))


async def test_the_spend_guard_can_be_off(time: FakeTime) -> None:
    guard = guarded(FakeSummarizer(), time, spend_max_calls=None)
    for _ in range(100):
        await guard.summarize(leaf_request())


async def test_idle_conversations_are_forgotten(time: FakeTime) -> None:
    guard = guarded(FakeSummarizer(), time, spend_max_calls=5, spend_window_s=10)
    for conversation in range(1100):
        await guard.summarize(leaf_request(conversation_id=conversation))
    time.now += 11
    await guard.summarize(leaf_request(conversation_id=5000))
    assert len(guard._spend) <= 2


# ---------------------------------------------------------------- policy


def test_policy_from_config() -> None:
    config = Config().replace(
        summary_timeout_ms=2500,
        summary_max_attempts=5,
        circuit_breaker_threshold=7,
        circuit_breaker_cooldown_ms=60_000,
        summary_call_window_ms=120_000,
        summary_max_calls_per_window=9,
        summary_spend_backoff_ms=30_000,
    )
    policy = GuardPolicy.from_config(config)
    assert (policy.timeout_s, policy.max_attempts, policy.breaker_threshold, policy.breaker_cooldown_s) == (
        2.5,
        5,
        7,
        60.0,
    )
    assert (policy.spend_window_s, policy.spend_max_calls, policy.spend_backoff_s) == (120.0, 9, 30.0)
    assert GuardPolicy.from_config(config, spend_guard=False).spend_max_calls is None
    with pytest.raises(ValueError, match="at least 1"):
        GuardPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="spend_max_calls"):
        GuardPolicy(spend_max_calls=0)


# ---------------------------------------------------------------- end to end, over HTTP


async def test_over_http_429_and_500_are_retried_then_succeed(time: FakeTime, stub: StubProviderServer) -> None:
    stub.script(StubReply.error(429, "slow down"), StubReply.error(500, "oops"), StubReply.answer("Done.\nFiles: none"))
    inner = OpenAISummarizer("gpt-test", api_key=KEY, base_url=stub.openai_base_url, timeout_s=5)
    result = await guarded(inner, time).summarize(leaf_request())
    assert result.text == "Done.\nFiles: none"
    assert len(stub.requests) == 3 and len(time.sleeps) == 2


async def test_over_http_400_is_not_retried_and_401_trips_the_breaker(time: FakeTime, stub: StubProviderServer) -> None:
    inner = OpenAISummarizer("gpt-test", api_key=KEY, base_url=stub.openai_base_url, timeout_s=5)
    guard = guarded(inner, time, breaker_threshold=2)
    stub.script(StubReply.error(400, "bad"), StubReply.error(401, "no"), StubReply.error(401, "{api_key}"))
    with pytest.raises(ProviderError, match="HTTP 400"):
        await guard.summarize(leaf_request())
    assert len(stub.requests) == 1
    for _ in range(2):
        with pytest.raises(ProviderAuthError) as caught:
            await guard.summarize(leaf_request())
        assert KEY not in str(caught.value)
    with pytest.raises(ProviderUnavailable, match="circuit breaker"):
        await guard.summarize(leaf_request())
    assert len(stub.requests) == 3 and time.sleeps == []


async def test_over_http_a_slow_server_is_timed_out_by_the_guard(time: FakeTime, stub: StubProviderServer) -> None:
    stub.script(StubReply.slow(30), StubReply.answer("Second try.\nFiles: none"))
    inner = OpenAISummarizer("gpt-test", api_key=KEY, base_url=stub.openai_base_url, timeout_s=None)
    # 1 s, not less: the retry's own round trip must fit in it on a loaded machine (0.2 s did not, at load 6)
    result = await guarded(inner, time, timeout_s=1.0).summarize(leaf_request())
    assert result.text.startswith("Second try.") and len(stub.requests) == 2
