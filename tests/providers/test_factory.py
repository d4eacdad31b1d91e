"""summarizer_for(): provider selection, credential order, clear configuration errors, lazy SDK imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lossless.config import Config, default_key_file, load_config
from lossless.errors import ConfigError, MissingDependencyError, ProviderAuthError
from lossless.providers import SUMMARY_PROVIDERS, GuardedSummarizer, summarizer_for
from lossless.providers.anthropic import AnthropicSummarizer
from lossless.providers.offline import OfflineSummarizer
from lossless.providers.openai import OpenAISummarizer
from lossless.testing import StubProviderServer, StubReply

from .conftest import leaf_request

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("name", ["", "offline", " Offline "])
async def test_offline_by_default_guarded_without_a_spend_limit(name: str) -> None:
    summarizer = summarizer_for(Config(summary_provider=name))
    assert isinstance(summarizer, GuardedSummarizer) and isinstance(summarizer.inner, OfflineSummarizer)
    assert summarizer.provider == "offline" and summarizer.policy.spend_max_calls is None
    assert (await summarizer.summarize(leaf_request())).text


def test_openai_and_anthropic_are_guarded_with_the_configured_limits() -> None:
    for name, cls in (("openai", OpenAISummarizer), ("Anthropic", AnthropicSummarizer)):
        config = Config(
            summary_provider=name,
            summary_model="some-model",
            summary_api_key="sk-x",
            summary_timeout_ms=1500,
            summary_max_calls_per_window=5,
        )
        summarizer = summarizer_for(config)
        assert isinstance(summarizer.inner, cls) and summarizer.model == "some-model"
        assert summarizer.provider == name.lower()
        assert summarizer.policy.timeout_s == 1.5 and summarizer.policy.spend_max_calls == 5


def test_an_unknown_provider_lists_the_valid_ones() -> None:
    with pytest.raises(
        ConfigError, match=r"'opnai' is not a summarizer provider \(did you mean 'openai'\?\)"
    ) as caught:
        summarizer_for(Config(summary_provider="opnai"))
    assert all(name in str(caught.value) for name in SUMMARY_PROVIDERS)
    assert caught.value.setting == "summary_provider"


def test_a_provider_without_a_model_says_what_to_set() -> None:
    with pytest.raises(ConfigError, match=r"needs a model: set summary_model \(LCM_SUMMARY_MODEL\)") as caught:
        summarizer_for(Config(summary_provider="openai", summary_api_key="sk-x"))
    assert caught.value.setting == "summary_model"


@pytest.mark.parametrize(("provider", "variable"), [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")])
def test_a_missing_key_says_which_variable_setting_or_file_to_use(provider: str, variable: str) -> None:
    with pytest.raises(ConfigError) as caught:
        summarizer_for(load_config({"summary_provider": provider, "summary_model": "m"}, env={}))
    message = str(caught.value)
    assert variable in message and "summary_api_key (LCM_SUMMARY_API_KEY)" in message
    assert str(default_key_file(provider)) in message and "summary_base_url" in message
    assert caught.value.setting == "summary_api_key"


async def test_a_keyless_local_server_needs_only_a_base_url(stub: StubProviderServer) -> None:
    config = load_config(
        {"summary_provider": "openai", "summary_model": "llama3.1"}, env={"OPENAI_BASE_URL": stub.openai_base_url}
    )
    await summarizer_for(config).summarize(leaf_request())
    assert stub.requests[0].model == "llama3.1" and stub.requests[0].path == "/v1/chat/completions"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_credential_order_setting_then_variable_then_key_file(
    provider: str, stub: StubProviderServer, tmp_path: Path
) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("key-from-file\n")
    base_url = stub.openai_base_url if provider == "openai" else stub.anthropic_base_url
    variable = f"{provider.upper()}_API_KEY"
    settings = {"summary_provider": provider, "summary_model": "m", "summary_base_url": base_url}

    cases = [
        ({variable: "key-from-env"}, {"summary_api_key": "key-from-setting"}, "key-from-setting"),
        ({variable: "key-from-env"}, {}, "key-from-env"),
        ({}, {}, "key-from-file"),
    ]
    for env, more, expected in cases:
        config = load_config({**settings, **more}, env={"LCM_SUMMARY_API_KEY_FILE": str(key_file), **env})
        await summarizer_for(config).summarize(leaf_request())
        assert stub.requests[-1].api_key == expected


async def test_a_refused_key_names_where_it_came_from(stub: StubProviderServer, tmp_path: Path) -> None:
    stub.script(StubReply.error(401, "invalid key {api_key}"))
    config = load_config(
        {"summary_provider": "openai", "summary_model": "m", "summary_base_url": stub.openai_base_url},
        env={"OPENAI_API_KEY": "sk-live-0123456789abcdef"},
    )
    with pytest.raises(ProviderAuthError, match="the key came from env:OPENAI_API_KEY") as caught:
        await summarizer_for(config).summarize(leaf_request())
    assert "sk-live-0123456789abcdef" not in str(caught.value)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_missing_sdk_names_the_extra(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, provider, None)  # makes "import openai" fail as if not installed
    monkeypatch.delitem(sys.modules, f"lossless.providers.{provider}")
    config = Config(summary_provider=provider, summary_model="m", summary_api_key="k")
    with pytest.raises(MissingDependencyError, match=rf"pip install 'lossless-context\[{provider}\]'") as caught:
        summarizer_for(config)
    assert caught.value.extra == provider and isinstance(caught.value, ImportError)


def test_providers_do_not_load_an_sdk_until_asked() -> None:
    code = "import sys, lossless.providers; print(sorted(m for m in ('openai', 'anthropic') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_the_engine_compacts_through_a_real_sdk_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    """Configuration → summarizer_for → official SDK → HTTP → stub server → summaries in the DAG → assembly."""
    from lossless import ContextEngine, Message

    monkeypatch.setenv("OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY", "sk-e2e-key")
    with StubProviderServer() as stub:
        base = stub.openai_base_url if provider == "openai" else stub.anthropic_base_url
        async with await ContextEngine.open(
            f"sqlite:///{tmp_path / 'e2e.db'}",
            summary_provider=provider,
            summary_model="model-e2e",
            summary_base_url=base,
            fresh_tail_count=2,
            leaf_chunk_tokens=300,
            leaf_target_tokens=100,
            leaf_min_fanout=2,
            summary_max_attempts=1,
        ) as engine:
            for i in range(8):
                text = " ".join(f"step{i}-{j}" for j in range(60))
                await engine.ingest_batch("e2e", [Message.user(text), Message.assistant(f"did {i}")])
            result = await engine.compact("e2e", force=True)
            summaries, _ = await engine.summaries("e2e")
            context = await engine.assemble("e2e", token_budget=100_000)
    assert result.compacted and summaries
    assert {(s.provider, s.model, s.level) for s in summaries} == {(provider, "model-e2e", "normal")}
    assert all(s.content.startswith("The stub summarised the segment.") for s in summaries)
    assert len(stub.requests) == len(summaries)
    assert all(r.api == provider and r.model == "model-e2e" and r.api_key == "sk-e2e-key" for r in stub.requests)
    assert "step0-0" in stub.requests[0].user  # the segment's text went to the provider
    assert "The stub summarised the segment." in str(context.messages[0]["content"])


def test_large_file_summaries_follow_the_summarizer_unless_configured() -> None:
    from lossless.providers import file_summarizer_for

    def config(**values: str) -> Config:
        return Config(summary_provider="openai", summary_model="m", summary_api_key="sk-k", **values)  # type: ignore[arg-type]

    assert file_summarizer_for(Config()) is None  # offline: the deterministic exploration summary
    main = summarizer_for(config())
    assert file_summarizer_for(config(), main=main) is main
    own = file_summarizer_for(config(large_file_summary_model="small"), main=main)
    assert own is not main and isinstance(own, GuardedSummarizer) and own.inner.model == "small"
    assert file_summarizer_for(config(large_file_summary_provider="offline")) is None
    with pytest.raises(ConfigError, match="large-file summaries") as raised:
        file_summarizer_for(Config(large_file_summary_provider="anthropic"))
    assert raised.value.setting == "large_file_summary_provider"


async def test_a_large_prose_file_is_described_by_the_configured_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lossless import ContextEngine, Message

    monkeypatch.setenv("OPENAI_API_KEY", "sk-k")
    prose = "\n\n".join(f"Paragraph {i}. The team met and agreed on the plan for week {i}." for i in range(3000))
    with StubProviderServer(StubReply(text="Minutes of weekly planning meetings.")) as stub:
        async with await ContextEngine.open(
            f"sqlite:///{tmp_path / 'files.db'}",
            large_file_summary_provider="openai",
            large_file_summary_model="describer",
            summary_base_url=stub.openai_base_url,
            large_file_token_threshold=1000,
        ) as engine:
            result = await engine.ingest("s", Message.user(f'<file name="notes.txt">{prose}</file>'))
            [file] = await engine.files("s")
    assert "Minutes of weekly planning meetings." in file.exploration_summary
    assert "[LCM File: " in result.stored[0].content
    [request] = stub.requests
    assert request.model == "describer" and "Paragraph 0." in request.user
