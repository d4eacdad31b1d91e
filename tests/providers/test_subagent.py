"""The model-driven expansion sub-agent over the official SDKs, against the loopback stub server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lossless import ContextEngine, Message
from lossless.config import Config
from lossless.engine.wiring import expansion_runner_for
from lossless.errors import ConfigError, ProviderError
from lossless.providers.subagent import LLMExpansionRunner
from lossless.retrieval import Caller, Retriever
from lossless.retrieval.expansion import OfflineExpansionRunner, expand_query
from lossless.testing import StubProviderServer, StubReply
from lossless.tokens import EstimatingCounter

pytestmark = pytest.mark.anyio
COUNTER = EstimatingCounter()
CALLER = Caller("main", session_key="k")


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[ContextEngine]:
    opened = await ContextEngine.open(
        f"sqlite:///{tmp_path / 's.db'}",
        fresh_tail_count=2,
        leaf_chunk_tokens=600,
        leaf_target_tokens=150,
        condensed_target_tokens=150,
        leaf_min_fanout=3,
        summary_max_attempts=1,
    )
    try:
        yield opened
    finally:
        await opened.dispose()


async def seeded(engine: ContextEngine) -> tuple[int, str]:
    history = [Message("user" if i % 2 == 0 else "assistant", f"turn {i} " + "blah " * 60) for i in range(20)]
    history[4] = Message("assistant", "The launch code word is PELICAN-42.")
    result = await engine.ingest_batch("s", history, session_key="k")
    assert result.conversation_id is not None
    await engine.compact(result.conversation_id, force=True)
    summaries, _ = await engine.summaries(result.conversation_id)
    return result.conversation_id, summaries[0].id


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_tool_loop_reads_through_the_grant_and_answers(engine: ContextEngine, api: str) -> None:
    _, summary_id = await seeded(engine)
    with StubProviderServer(
        StubReply.tool_call("lcm_grep", {"pattern": "PELICAN", "all_conversations": True}),
        StubReply.tool_call("lcm_expand", {"summary_ids": [summary_id], "include_messages": True}),
        StubReply.tool_call("lcm_expand_query", {"prompt": "recurse"}),  # not a sub-agent tool
        StubReply.answer(f"The code word is PELICAN-42 [msg#5] [{summary_id}]."),
    ) as stub:
        base = stub.openai_base_url if api == "openai" else stub.anthropic_base_url
        runner = LLMExpansionRunner(api, "stub-model", api_key="sk-test-secret", base_url=base)
        result = await expand_query(
            Retriever(engine.store), CALLER, runner, COUNTER, prompt="What is the code word?", query="launch code"
        )
        requests = stub.requests
    assert result.status == "completed" and "PELICAN-42" in result.answer
    assert set(result.cited) == {"msg#5", summary_id} and result.tool_calls == 3
    assert len(requests) == 4
    offered = requests[0].body["tools"]
    names = {t["function"]["name"] if api == "openai" else t["name"] for t in offered}
    assert names == {"lcm_grep", "lcm_describe", "lcm_expand"}
    # What the tools returned went back to the model, and the refused tool got an error result.
    sent = str(requests[2].body["messages"])
    assert "PELICAN-42" in sent
    assert "cannot be called here" in str(requests[3].body["messages"])
    grant = await engine.store.get_grant(result.grant_id or "")
    assert grant is not None and grant.revoke_reason == "completed" and grant.tokens_used > 0


async def test_provider_failure_revokes_the_grant(engine: ContextEngine) -> None:
    await seeded(engine)
    with StubProviderServer(StubReply.error(401, "bad key {api_key}")) as stub:
        runner = LLMExpansionRunner("openai", "m", api_key="sk-test-secret", base_url=stub.openai_base_url)
        with pytest.raises(ProviderError) as failed:
            await expand_query(Retriever(engine.store), CALLER, runner, COUNTER, prompt="q", query="launch")
    assert "sk-test-secret" not in str(failed.value)


async def test_bad_tool_arguments_are_answered_not_raised(engine: ContextEngine) -> None:
    await seeded(engine)
    with StubProviderServer(
        StubReply.tool_call("lcm_grep", {"pattern": "x", "bogus": 1}),
        StubReply.answer("I could not find it."),
    ) as stub:
        runner = LLMExpansionRunner("anthropic", "m", api_key="k", base_url=stub.anthropic_base_url)
        result = await expand_query(Retriever(engine.store), CALLER, runner, COUNTER, prompt="q", query="launch")
        assert "has no argument 'bogus'" in str(stub.requests[1].body["messages"])
    assert result.status == "completed"


def test_runner_factory(tmp_path: Path) -> None:
    assert isinstance(expansion_runner_for(Config(), COUNTER), OfflineExpansionRunner)
    runner = expansion_runner_for(
        Config(expansion_provider="openai", expansion_model="m", summary_api_key="k"), COUNTER
    )
    assert isinstance(runner, LLMExpansionRunner) and runner.name == "openai:m"
    with pytest.raises(ConfigError):
        expansion_runner_for(Config(expansion_provider="cohere"), COUNTER)
    with pytest.raises(ConfigError):
        expansion_runner_for(Config(expansion_provider="anthropic"), COUNTER)
