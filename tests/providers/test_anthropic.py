"""The Anthropic summarizer, driven through the official SDK over loopback HTTP against the stub server."""

from __future__ import annotations

import pytest

from lossless.errors import ProviderAuthError, ProviderError
from lossless.prompts import build_prompts
from lossless.providers.anthropic import AnthropicSummarizer
from lossless.providers.base import NO_KEY
from lossless.testing import StubProviderServer, StubReply

from .conftest import KEY, leaf_request

pytestmark = pytest.mark.anyio


def summarizer(stub: StubProviderServer, **options: object) -> AnthropicSummarizer:
    values: dict[str, object] = {
        "api_key": KEY,
        "base_url": stub.anthropic_base_url,
        "timeout_s": 5.0,
        "key_source": "key file /home/me/.config/lossless/anthropic.key",
    }
    values.update(options)
    return AnthropicSummarizer("claude-test", **values)  # type: ignore[arg-type]


async def test_a_summary_and_the_request_that_made_it(stub: StubProviderServer) -> None:
    stub.script(
        StubReply(text="Fixed it.\nFiles: none\nExpand for details about: logs", input_tokens=99, output_tokens=9)
    )
    request = leaf_request(depth=2, kind="condensed", target_tokens=500)
    result = await summarizer(stub).summarize(request)
    assert result.text == "Fixed it.\nFiles: none\nExpand for details about: logs"
    assert (result.provider, result.model, result.input_tokens, result.output_tokens) == (
        "anthropic",
        "claude-test",
        99,
        9,
    )
    [sent] = stub.requests
    assert sent.api == "anthropic" and sent.path == "/v1/messages"
    prompts = build_prompts(request)
    assert sent.body["system"] == prompts.system
    assert sent.body["messages"] == [{"role": "user", "content": prompts.user}]
    assert sent.model == "claude-test" and sent.max_tokens == 1500
    assert sent.api_key == KEY and "anthropic-version" in sent.headers
    assert sent.headers["x-stainless-retry-count"] == "0"


async def test_no_sampling_parameters_are_sent(stub: StubProviderServer) -> None:
    await summarizer(stub).summarize(leaf_request(policy="aggressive"))
    [sent] = stub.requests
    assert not {"temperature", "top_p", "top_k"} & set(sent.body)


async def test_the_sdk_never_reads_the_environment(stub: StubProviderServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-the-environment")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "token-from-the-environment")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://192.0.2.1:9")
    await summarizer(stub).summarize(leaf_request())
    await summarizer(stub, api_key=None).summarize(leaf_request())
    first, keyless = stub.requests
    assert first.api_key == KEY and keyless.api_key == NO_KEY
    assert all("environment" not in value for sent in (first, keyless) for value in sent.headers.values())


async def test_thinking_blocks_never_reach_the_summary(stub: StubProviderServer) -> None:
    stub.script(StubReply.answer("Did X.", reasoning="Let me think about what to keep..."))
    assert (await summarizer(stub).summarize(leaf_request())).text == "Did X."


async def test_an_empty_answer_is_a_retryable_error(stub: StubProviderServer) -> None:
    stub.script(StubReply.empty(), StubReply.answer("", reasoning="thinking only"))
    for _ in range(2):
        with pytest.raises(ProviderError, match="empty summary") as caught:
            await summarizer(stub).summarize(leaf_request())
        assert caught.value.retryable


async def test_an_answer_stopped_at_max_tokens_is_refused(stub: StubProviderServer) -> None:
    stub.script(StubReply.oversized(words=80, cut_off=True))
    with pytest.raises(ProviderError, match="cut off at the 1200-token output cap") as caught:
        await summarizer(stub).summarize(leaf_request())
    assert not caught.value.retryable


async def test_an_oversized_answer_is_returned_for_the_engine_to_judge(stub: StubProviderServer) -> None:
    stub.script(StubReply.oversized(words=4000))
    assert len((await summarizer(stub).summarize(leaf_request())).text.split()) == 4000


@pytest.mark.parametrize("status", [401, 403])
async def test_refused_credentials_are_an_auth_error_without_the_key(stub: StubProviderServer, status: int) -> None:
    stub.script(StubReply.error(status, "invalid x-api-key {api_key}"))
    with pytest.raises(ProviderAuthError) as caught:
        await summarizer(stub).summarize(leaf_request())
    error = caught.value
    assert error.status == status and not error.retryable and error.provider == "anthropic"
    assert KEY not in str(error) and "anthropic.key" in str(error)


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503, 529])
async def test_transient_statuses_are_retryable(stub: StubProviderServer, status: int) -> None:
    stub.script(StubReply.error(status, "overloaded"))
    with pytest.raises(ProviderError, match=f"HTTP {status}: overloaded") as caught:
        await summarizer(stub).summarize(leaf_request())
    assert caught.value.retryable and caught.value.status == status
    assert len(stub.requests) == 1


@pytest.mark.parametrize("status", [400, 404, 413])
async def test_other_client_errors_are_final(stub: StubProviderServer, status: int) -> None:
    stub.script(StubReply.error(status, "no such model"))
    with pytest.raises(ProviderError, match=f"HTTP {status}: no such model") as caught:
        await summarizer(stub).summarize(leaf_request())
    assert not caught.value.retryable


async def test_a_slow_server_times_out_as_a_retryable_error(stub: StubProviderServer) -> None:
    stub.script(StubReply.slow(30))
    with pytest.raises(ProviderError, match=r"within 0\.2 s") as caught:
        await summarizer(stub, timeout_s=0.2).summarize(leaf_request())
    assert caught.value.retryable


async def test_an_unreachable_server_is_a_retryable_error() -> None:
    with StubProviderServer() as gone:
        base_url = gone.anthropic_base_url
    with pytest.raises(ProviderError, match="cannot reach") as caught:
        await AnthropicSummarizer("m", api_key=KEY, base_url=base_url, timeout_s=2).summarize(leaf_request())
    assert caught.value.retryable


def test_repr_shows_no_key() -> None:
    assert KEY not in repr(AnthropicSummarizer("claude-test", api_key=KEY))
