"""The Pydantic AI drop-in, driven by Pydantic AI's own agent loop against a loopback model stub."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lossless import ContextEngine
from lossless.errors import InputError
from lossless.testing import StubProviderServer, StubReply

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from lossless.adapters.integrations.pydantic_ai import LosslessHistory, lossless_toolset

pytestmark = pytest.mark.anyio

BUDGET = 1_500
FACT = "The staging database password rotates every 36 hours; the on-call key is KESTREL-7731."


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[ContextEngine]:
    async with await ContextEngine.open(f"sqlite:///{tmp_path / 'pai.db'}", fresh_tail_count=4) as engine:
        yield engine


def _sent_tokens(engine: ContextEngine, messages: list[dict[str, object]]) -> int:
    """Tokens of the history in a request: every message but the agent's own instructions."""
    text = [str(m.get("content") or "") for m in messages if m["role"] != "system" or "Be brief" not in str(m)]
    text += [c["function"]["arguments"] for m in messages for c in m.get("tool_calls") or ()]  # type: ignore[union-attr]
    return sum(engine.tokens.count(t) for t in text)


async def test_agent_runs_store_every_message_once_send_within_budget_and_recall_a_compacted_fact(
    engine: ContextEngine,
) -> None:
    with StubProviderServer(default=StubReply.answer("Noted. " + "Details follow. " * 60)) as stub:
        model = OpenAIChatModel("stub-model", provider=OpenAIProvider(base_url=stub.openai_base_url, api_key="x"))
        history = LosslessHistory(engine, "pai-1", token_budget=BUDGET)
        agent = Agent(
            model, instructions="Be brief.", capabilities=[history], toolsets=[lossless_toolset(engine, "pai-1")]
        )

        result = await agent.run(f"Please remember this: {FACT}")
        messages = result.all_messages()
        for turn in range(14):
            # Half the runs pass their history back in, as Pydantic AI users do: nothing is stored twice.
            passed = messages if turn % 2 else None
            result = await agent.run(
                f"Question {turn}: how should we size the pool? " + "context " * 80, message_history=passed
            )
            messages = result.all_messages()
        history_requests = len(stub.requests)
        stub.script(StubReply.tool_call("lcm_grep", {"pattern": "KESTREL-\\d+"}), StubReply.answer("KESTREL-7731"))
        result = await agent.run("What was the on-call key?")

    assert result.output == "KESTREL-7731"
    stored = await engine.messages("pai-1")
    assert len(stored) == 15 * 2 + 4
    asked = [m.content for m in stored if m.role == "user"]
    assert len(asked) == len(set(asked)) == 16  # every prompt once, whether or not its history was passed back
    assert [m.role for m in stored[-4:]] == ["user", "assistant", "tool", "assistant"]
    summaries, _ = await engine.summaries("pai-1")
    assert summaries
    for request in stub.requests[:history_requests]:
        assert _sent_tokens(engine, request.body["messages"]) <= BUDGET
    tool_message = stub.requests[-1].body["messages"][-1]
    assert tool_message["role"] == "tool" and "KESTREL-7731" in tool_message["content"]
    assert json.loads(tool_message["content"])["matches"]


async def test_the_run_history_stays_what_pydantic_ai_built(engine: ContextEngine) -> None:
    with StubProviderServer(default=StubReply.answer("fine")) as stub:
        model = OpenAIChatModel("stub-model", provider=OpenAIProvider(base_url=stub.openai_base_url, api_key="x"))
        agent = Agent(model, capabilities=[LosslessHistory(engine, "pai-2", token_budget=4_000)])
        result = await agent.run("hello")
    assert [type(m).__name__ for m in result.all_messages()] == ["ModelRequest", "ModelResponse"]
    assert [m.content for m in await engine.messages("pai-2")] == ["hello", "fine"]


async def test_bad_settings_are_refused(engine: ContextEngine) -> None:
    with pytest.raises(InputError, match="token_budget"):
        LosslessHistory(engine, "x", token_budget=-1)
    with pytest.raises(InputError, match="session_id"):
        LosslessHistory(engine, "", token_budget=100)
