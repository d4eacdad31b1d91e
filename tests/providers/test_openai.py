"""The OpenAI summarizer, driven through the official SDK over loopback HTTP against the stub server."""

from __future__ import annotations

import pytest

from lossless.errors import ProviderAuthError, ProviderError
from lossless.prompts import build_prompts
from lossless.providers.base import NO_KEY
from lossless.providers.openai import OpenAISummarizer
from lossless.testing import StubProviderServer, StubReply

from .conftest import KEY, leaf_request

pytestmark = pytest.mark.anyio


def summarizer(stub: StubProviderServer, **options: object) -> OpenAISummarizer:
    values: dict[str, object] = {
        "api_key": KEY,
        "base_url": stub.openai_base_url,
        "timeout_s": 5.0,
        "key_source": "env:OPENAI_API_KEY",
    }
    values.update(options)
    return OpenAISummarizer("gpt-test", **values)  # type: ignore[arg-type]


async def test_a_summary_and_the_request_that_made_it(stub: StubProviderServer) -> None:
    stub.script(
        StubReply(
            text="Fixed the flaky test.\nFiles: tests/test_io.py modified\nExpand for details about: logs",
            input_tokens=321,
            output_tokens=17,
        )
    )
    request = leaf_request()
    result = await summarizer(stub).summarize(request)
    assert result.text.startswith("Fixed the flaky test.")
    assert (result.provider, result.model, result.input_tokens, result.output_tokens) == ("openai", "gpt-test", 321, 17)

    [sent] = stub.requests
    assert sent.api == "openai" and sent.path == "/v1/chat/completions"
    assert sent.model == "gpt-test" and sent.temperature == 0.2
    assert sent.max_tokens == 1200 and "max_tokens" in sent.body  # 400 × the default overage factor 3
    prompts = build_prompts(request)
    assert sent.system == prompts.system and sent.user == prompts.user
    assert sent.headers["authorization"] == f"Bearer {KEY}" and sent.api_key == KEY
    assert "openai-organization" not in sent.headers and "openai-project" not in sent.headers
    assert sent.headers["x-stainless-retry-count"] == "0"


async def test_aggressive_policy_is_cooler_and_the_cap_follows_the_factor(stub: StubProviderServer) -> None:
    await summarizer(stub, overage_factor=1.5).summarize(leaf_request(policy="aggressive", target_tokens=1000))
    [sent] = stub.requests
    assert sent.temperature == 0.1 and sent.max_tokens == 1500


async def test_the_sdk_never_reads_the_environment(stub: StubProviderServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://192.0.2.1:9/v1")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-from-env")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-from-env")
    await summarizer(stub).summarize(leaf_request())
    await summarizer(stub, api_key=None).summarize(leaf_request())
    first, keyless = stub.requests
    assert first.api_key == KEY and keyless.api_key == NO_KEY
    for sent in (first, keyless):
        assert "openai-organization" not in sent.headers and "openai-project" not in sent.headers


async def test_reasoning_and_preambles_are_stripped(stub: StubProviderServer) -> None:
    stub.script(
        StubReply.answer(
            "<think>first I will list the files</think>\nSure, here is the summary:\nDid X.", reasoning="r"
        ),
    )
    result = await summarizer(stub).summarize(leaf_request())
    assert result.text == "Did X."


@pytest.mark.parametrize("answer", ["", "   \n", "<think>only thinking, cut short"])
async def test_an_empty_answer_is_a_retryable_error(stub: StubProviderServer, answer: str) -> None:
    stub.script(StubReply.answer(answer))
    with pytest.raises(ProviderError, match="empty summary") as caught:
        await summarizer(stub).summarize(leaf_request())
    assert caught.value.retryable


async def test_an_answer_cut_off_at_the_cap_is_refused(stub: StubProviderServer) -> None:
    stub.script(StubReply.oversized(words=50, cut_off=True))
    with pytest.raises(ProviderError, match="cut off at the 1200-token output cap") as caught:
        await summarizer(stub).summarize(leaf_request())
    assert not caught.value.retryable


async def test_an_oversized_answer_is_returned_for_the_engine_to_judge(stub: StubProviderServer) -> None:
    stub.script(StubReply.oversized(words=5000))
    result = await summarizer(stub).summarize(leaf_request())
    assert len(result.text.split()) == 5000


@pytest.mark.parametrize("status", [401, 403])
async def test_refused_credentials_are_an_auth_error_without_the_key(stub: StubProviderServer, status: int) -> None:
    stub.script(StubReply.error(status, "Incorrect API key provided: {api_key}."))
    with pytest.raises(ProviderAuthError) as caught:
        await summarizer(stub).summarize(leaf_request())
    error = caught.value
    assert error.status == status and not error.retryable and error.provider == "openai"
    assert KEY not in str(error) and KEY not in repr(error)
    assert "sk-t…(redacted" in str(error) and "env:OPENAI_API_KEY" in str(error)
    assert stub.requests[0].api_key == KEY


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503])
async def test_transient_statuses_are_retryable(stub: StubProviderServer, status: int) -> None:
    stub.script(StubReply.error(status, "try later"))
    with pytest.raises(ProviderError, match=f"HTTP {status}") as caught:
        await summarizer(stub).summarize(leaf_request())
    assert caught.value.retryable and caught.value.status == status
    assert not isinstance(caught.value, ProviderAuthError)
    assert len(stub.requests) == 1  # the SDK's own retries are off


@pytest.mark.parametrize(
    ("status", "hint"), [(400, "retrying will not help"), (404, "check summary_model"), (422, "HTTP 422")]
)
async def test_other_client_errors_are_final(stub: StubProviderServer, status: int, hint: str) -> None:
    stub.script(StubReply.error(status, "bad request"))
    with pytest.raises(ProviderError, match=hint) as caught:
        await summarizer(stub).summarize(leaf_request())
    assert not caught.value.retryable and caught.value.status == status


async def test_a_server_that_refuses_max_tokens_gets_max_completion_tokens(stub: StubProviderServer) -> None:
    stub.script(
        StubReply.error(
            400,
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
            param="max_tokens",
        )
    )
    chosen = summarizer(stub)
    assert (await chosen.summarize(leaf_request())).text
    await chosen.summarize(leaf_request())
    refused, adapted, remembered = stub.requests
    assert "max_tokens" in refused.body and "max_completion_tokens" not in refused.body
    assert adapted.body["max_completion_tokens"] == 1200 and "max_tokens" not in adapted.body
    assert "max_tokens" not in remembered.body


async def test_a_model_that_refuses_temperature_is_asked_without_it(stub: StubProviderServer) -> None:
    stub.script(
        StubReply.error(
            400,
            "Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) is supported.",
            param="temperature",
        )
    )
    assert (await summarizer(stub).summarize(leaf_request())).text
    refused, adapted = stub.requests
    assert refused.temperature == 0.2 and "temperature" not in adapted.body


async def test_a_slow_server_times_out_as_a_retryable_error(stub: StubProviderServer) -> None:
    stub.script(StubReply.slow(30))
    with pytest.raises(ProviderError, match=r"no answer from .* within 0\.2 s") as caught:
        await summarizer(stub, timeout_s=0.2).summarize(leaf_request())
    assert caught.value.retryable


async def test_an_unreachable_server_is_a_retryable_error() -> None:
    with StubProviderServer() as gone:
        base_url = gone.openai_base_url
    with pytest.raises(ProviderError, match="cannot reach") as caught:
        await OpenAISummarizer("m", api_key=KEY, base_url=base_url, timeout_s=2).summarize(leaf_request())
    assert caught.value.retryable and KEY not in str(caught.value)


def test_repr_shows_no_key() -> None:
    shown = repr(OpenAISummarizer("gpt-test", api_key=KEY, base_url="http://127.0.0.1:1/v1"))
    assert shown == "OpenAISummarizer(model='gpt-test', base_url='http://127.0.0.1:1/v1')"
