"""The shipped test doubles: FakeSummarizer and the StubProviderServer's wire formats."""

from __future__ import annotations

import json
import math
import threading
import urllib.error
import urllib.request
from typing import Any

import anyio
import pytest

from lossless.ports import Summarizer, SummaryRequest
from lossless.prompts import EXPAND_FOOTER, FILES_NONE
from lossless.testing import FakeStep, FakeSummarizer, StubProviderServer, StubReply, default_fake_summary


def request(**changes: object) -> SummaryRequest:
    values: dict[str, object] = {
        "kind": "leaf",
        "depth": 0,
        "policy": "normal",
        "target_tokens": 30,
        "text": "user: " + "alpha beta gamma " * 50,
    }
    values.update(changes)
    return SummaryRequest(**values)  # type: ignore[arg-type]


# ---------------------------------------------------------------- FakeSummarizer


@pytest.mark.anyio
async def test_fake_default_summary_is_deterministic_and_within_target() -> None:
    fake = FakeSummarizer()
    assert isinstance(fake, Summarizer)
    first = await fake.summarize(request())
    second = await fake.summarize(request())
    assert first == second and first.provider == "fake" and first.model == "fake-1"
    assert len(first.text) <= 30 * 4
    lines = first.text.splitlines()
    assert lines[0].startswith("user: alpha beta") and lines[1] == FILES_NONE and lines[-1].startswith(EXPAND_FOOTER)
    assert first.input_tokens == math.ceil(len(request().text) / 4)
    assert fake.calls == [request(), request()]
    assert default_fake_summary(request(target_tokens=1)).startswith(FILES_NONE)


@pytest.mark.anyio
async def test_fake_follows_its_script_then_the_default() -> None:
    boom = RuntimeError("boom")
    fake = FakeSummarizer("scripted", boom, FakeStep.empty(), FakeStep.long(3), FakeStep.slow(0.01, "late"))
    assert (await fake.summarize(request())).text == "scripted"
    with pytest.raises(RuntimeError, match="boom"):
        await fake.summarize(request())
    assert (await fake.summarize(request())).text == ""
    assert len((await fake.summarize(request(target_tokens=20))).text.split()) == 60
    assert (await fake.summarize(request())).text == "late"
    fake.script(FakeStep.reply("queued later"))
    assert (await fake.summarize(request())).text == "queued later"
    assert (await fake.summarize(request())).text == default_fake_summary(request())
    assert len(fake.calls) == 7


@pytest.mark.anyio
async def test_fake_hang_waits_until_cancelled() -> None:
    fake = FakeSummarizer(FakeStep.hang(), FakeStep.fail(ValueError("x")))
    with anyio.move_on_after(0.05) as scope:
        await fake.summarize(request())
    assert scope.cancelled_caught
    with pytest.raises(ValueError, match="x"):
        await fake.summarize(request())


@pytest.mark.anyio
async def test_fake_computes_replies_and_can_repeat_its_last_step() -> None:
    fake = FakeSummarizer(FakeStep.head(2), lambda r: r.text.upper(), repeat_last=True)
    segment = request(text="alpha beta gamma")
    assert (await fake.summarize(segment)).text == "alpha beta"
    assert (await fake.summarize(segment)).text == "ALPHA BETA GAMMA"
    assert (await fake.summarize(segment)).text == "ALPHA BETA GAMMA"  # the last step again, not the default
    assert len(fake.calls) == 3


# ---------------------------------------------------------------- StubProviderServer


def post(url: str, body: object, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


def test_stub_speaks_the_openai_chat_completions_format() -> None:
    body = {
        "model": "gpt-x",
        "temperature": 0.2,
        "max_tokens": 99,
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hello there"}],
    }
    with StubProviderServer(StubReply.answer("hi", reasoning="hmm"), StubReply.answer("cut", cut_off=True)) as stub:
        status, answer = post(f"{stub.openai_base_url}/chat/completions", body, {"authorization": "Bearer k1"})
        _, cut = post(f"{stub.openai_base_url}/chat/completions", body)
        [sent, _] = stub.requests
    assert status == 200 and answer["object"] == "chat.completion" and answer["model"] == "gpt-x"
    choice = answer["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "hi", "reasoning_content": "hmm"}
    assert choice["finish_reason"] == "stop" and cut["choices"][0]["finish_reason"] == "length"
    usage = answer["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert (sent.api, sent.model, sent.temperature, sent.max_tokens, sent.api_key) == ("openai", "gpt-x", 0.2, 99, "k1")
    assert (sent.system, sent.user) == ("sys", "hello there")


def test_stub_speaks_the_anthropic_messages_format() -> None:
    body = {
        "model": "claude-x",
        "max_tokens": 50,
        "system": [{"type": "text", "text": "sys"}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
    }
    with StubProviderServer(StubReply.answer("hi", reasoning="hmm"), StubReply.oversized(10, cut_off=True)) as stub:
        status, answer = post(f"{stub.anthropic_base_url}/v1/messages", body, {"x-api-key": "k2"})
        _, cut = post(f"{stub.anthropic_base_url}/v1/messages", body)
        sent = stub.requests[0]
    assert status == 200 and answer["type"] == "message" and answer["stop_reason"] == "end_turn"
    assert [block["type"] for block in answer["content"]] == ["thinking", "text"]
    assert cut["stop_reason"] == "max_tokens" and len(cut["content"][0]["text"].split()) == 10
    assert (sent.api, sent.model, sent.max_tokens, sent.api_key, sent.system, sent.user) == (
        "anthropic",
        "claude-x",
        50,
        "k2",
        "sys",
        "hello",
    )
    assert sent.temperature is None


def test_stub_errors_use_each_providers_error_shape() -> None:
    with StubProviderServer(
        StubReply.error(429, "slow down {api_key}"), StubReply.error(400, "bad", param="temperature")
    ) as stub:
        status, anthropic_error = post(f"{stub.url}/v1/messages", {"model": "m"}, {"x-api-key": "k3"})
        status2, openai_error = post(f"{stub.openai_base_url}/chat/completions", {"model": "m"})
    assert status == 429 and anthropic_error == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "slow down k3"},
    }
    assert status2 == 400 and openai_error == {
        "error": {"message": "bad", "type": "invalid_request_error", "param": "temperature", "code": None}
    }


def test_stub_refuses_unknown_routes_and_bad_bodies() -> None:
    with StubProviderServer() as stub:
        assert post(f"{stub.url}/v1/audio/speech", {})[0] == 404
        assert post(f"{stub.url}/v1/embeddings", {})[0] == 400  # embeddings is a route; it needs "input"
        assert post(f"{stub.openai_base_url}/chat/completions", b"not json")[0] == 400
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(f"{stub.url}/v1/models", timeout=5)
        caught.value.close()
        assert caught.value.code == 404
        assert stub.requests == []


def test_stub_answers_with_its_default_when_the_script_is_empty() -> None:
    with StubProviderServer(default=StubReply.answer("always this")) as stub:
        for _ in range(3):
            _, answer = post(f"{stub.openai_base_url}/chat/completions", {"model": "m", "messages": []})
            assert answer["choices"][0]["message"]["content"] == "always this"
        assert len(stub.requests) == 3


def test_closing_the_stub_ends_scripted_delays() -> None:
    stub = StubProviderServer(StubReply.slow(60)).start()
    outcome: list[object] = []

    def call() -> None:
        try:
            outcome.append(post(f"{stub.openai_base_url}/chat/completions", {"model": "m"}))
        except OSError as error:
            outcome.append(error)

    caller = threading.Thread(target=call)
    caller.start()
    while not stub.requests:
        threading.Event().wait(0.01)
    stub.close()
    caller.join(timeout=10)
    assert not caller.is_alive() and outcome
    stub.close()  # closing twice is harmless
    with pytest.raises(RuntimeError, match="not running"):
        _ = stub.url
