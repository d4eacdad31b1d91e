"""The OpenAI Agents SDK drop-in, driven by the SDK's own Runner against a loopback model stub."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from lossless import ContextEngine
from lossless.testing import StubProviderServer, StubReply

agents = pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

from lossless.adapters.integrations.openai_agents import (  # noqa: E402
    LosslessSession,
    chat_to_items,
    item_to_message,
    lossless_tools,
)

pytestmark = pytest.mark.anyio

BUDGET = 1_500
FACT = "The staging database password rotates every 36 hours; the on-call key is KESTREL-7731."


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[ContextEngine]:
    async with await ContextEngine.open(f"sqlite:///{tmp_path / 'agents.db'}", fresh_tail_count=4) as engine:
        yield engine


def _history_tokens(engine: ContextEngine, messages: list[dict[str, Any]]) -> int:
    """Tokens of what the session contributed to a request: everything between the instructions and the
    run's own new input (the last user message)."""
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    text = [
        *(m["content"] for m in messages[1:last_user] if isinstance(m.get("content"), str)),
        *(c["function"]["arguments"] for m in messages[1:last_user] for c in m.get("tool_calls") or ()),
    ]
    return sum(engine.tokens.count(t) for t in text)


async def test_runner_stores_every_item_once_sends_within_budget_and_recalls_a_compacted_fact(
    engine: ContextEngine,
) -> None:
    set_tracing_disabled(True)
    with StubProviderServer(default=StubReply.answer("Noted. " + "Details follow. " * 60)) as stub:
        client = AsyncOpenAI(base_url=stub.openai_base_url, api_key="offline")
        model = OpenAIChatCompletionsModel(model="stub-model", openai_client=client)
        session = LosslessSession(engine, "agents-1", token_budget=BUDGET)
        agent = Agent(name="helper", instructions="Be brief.", model=model, tools=lossless_tools(engine, "agents-1"))

        await Runner.run(agent, f"Please remember this: {FACT}", session=session)
        for turn in range(14):
            await Runner.run(
                agent, f"Question {turn}: how should we size the pool? " + "context " * 80, session=session
            )
        history_requests = len(stub.requests)
        # The fact's turn is long compacted: the model asks the recall tool for it, then answers.
        stub.script(StubReply.tool_call("lcm_grep", {"pattern": "KESTREL-\\d+"}), StubReply.answer("KESTREL-7731"))
        result = await Runner.run(agent, "What was the on-call key?", session=session)
        await client.close()

    assert result.final_output == "KESTREL-7731"
    stored = await engine.messages("agents-1")
    # 15 plain turns (user + assistant) and the recall turn (user, call, result, answer): each once.
    assert len(stored) == 15 * 2 + 4
    assert [m.role for m in stored[-4:]] == ["user", "assistant", "tool", "assistant"]
    assert stored[0].content == f"Please remember this: {FACT}"
    summaries, _ = await engine.summaries("agents-1")
    assert summaries, "the history outgrew the budget, so it was compacted"
    for request in stub.requests[:history_requests]:
        assert _history_tokens(engine, request.body["messages"]) <= BUDGET
    # The tool result the model read holds the original message, verbatim.
    tool_message = stub.requests[-1].body["messages"][-1]
    assert tool_message["role"] == "tool" and "KESTREL-7731" in tool_message["content"]
    found = json.loads(tool_message["content"])["matches"]
    assert found and found[0]["conversation_id"] == stored[0].conversation_id


async def test_get_items_is_the_assembled_context_and_limit_takes_the_newest(engine: ContextEngine) -> None:
    session = LosslessSession(engine, "agents-2", token_budget=4_000)
    assert await session.get_items() == []
    await session.add_items([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}])
    items = await session.get_items()
    assert items == [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}]
    assert await session.get_items(limit=1) == [{"role": "assistant", "content": "hi there"}]
    assert await session.get_items(limit=0) == []


async def test_function_calls_and_results_round_trip_with_their_call_ids(engine: ContextEngine) -> None:
    session = LosslessSession(engine, "agents-3", token_budget=4_000)
    call = {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": '{"q": "x"}', "id": "fc_1"}
    output = {"type": "function_call_output", "call_id": "call_1", "output": "found x"}
    await session.add_items([{"role": "user", "content": "look x up"}, call, output])
    await session.add_items([call, output])  # a retry of the same items stores nothing twice
    assert len(await engine.messages("agents-3")) == 3
    items = await session.get_items()
    assert {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": '{"q": "x"}'} in items
    assert {"type": "function_call_output", "call_id": "call_1", "output": "found x"} in items


async def test_pop_and_clear_keep_everything_stored(engine: ContextEngine) -> None:
    session = LosslessSession(engine, "agents-4", token_budget=4_000)
    await session.add_items([{"role": "user", "content": "first"}, {"role": "assistant", "content": "oops"}])
    popped = await session.pop_item()
    assert popped == {"role": "assistant", "content": "oops"}
    assert await session.get_items() == [{"role": "user", "content": "first"}]
    assert await session.current_session_id() == "agents-4~1"
    # A new session object finds the newest generation.
    again = LosslessSession(engine, "agents-4", token_budget=4_000)
    assert await again.current_session_id() == "agents-4~1"
    await again.clear_session()
    assert await again.get_items() == []
    # Nothing was deleted: the popped answer is still stored and searchable.
    assert [m.content for m in await engine.messages("agents-4")] == ["first", "oops"]
    assert await LosslessSession(engine, "never", token_budget=100).pop_item() is None


async def test_items_the_engine_has_no_type_for_are_kept_as_json() -> None:
    message = item_to_message({"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"q": "x"}})
    assert message.role == "assistant" and '"web_search_call"' in message.content
    assert message.event_key == "agents:ws_1"
    # The SDK's placeholder id is never a key (every chat-completions item carries it).
    assert item_to_message({"role": "assistant", "content": "a", "id": "__fake_id__"}).event_key is None


def test_chat_messages_become_responses_items() -> None:
    chat = [
        {"role": "system", "content": "guide"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "u"}}],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": "r"},
    ]
    assert chat_to_items(chat) == [
        {"role": "system", "content": "guide"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "see"},
                {"type": "input_image", "image_url": "u", "detail": "auto"},
            ],
        },
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "r"},
    ]


async def test_bad_input_is_refused_clearly(engine: ContextEngine) -> None:
    from lossless.errors import InputError

    with pytest.raises(InputError, match="token_budget"):
        LosslessSession(engine, "x", token_budget=0)
    with pytest.raises(InputError, match="session_id"):
        LosslessSession(engine, "", token_budget=10)
    session = LosslessSession(engine, "agents-5", token_budget=100)
    with pytest.raises(InputError, match="JSON object"):
        await session.add_items(["not an item"])
    assert await engine.conversations() == []  # nothing stored half
