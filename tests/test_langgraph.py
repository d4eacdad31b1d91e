"""The LangGraph drop-in, driven by LangGraph's prebuilt agent loop against a loopback model stub."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lossless import ContextEngine
from lossless.errors import InputError, LcmError
from lossless.testing import StubProviderServer, StubReply

pytest.importorskip("langgraph", reason="the langgraph extra is not installed")

from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from lossless.adapters.integrations.langgraph import (
    LosslessHooks,
    LosslessStore,
    lossless_tools,
    namespace_scope,
)

pytestmark = [
    pytest.mark.anyio,
    # create_react_agent is the prebuilt loop this drop-in targets; LangGraph 1.x marks it as moved.
    pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecationWarning"),
]

BUDGET = 1_500
FACT = "The staging database password rotates every 36 hours; the on-call key is KESTREL-7731."


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[ContextEngine]:
    async with await ContextEngine.open(f"sqlite:///{tmp_path / 'lg.db'}", fresh_tail_count=4) as engine:
        yield engine


def _sent_tokens(engine: ContextEngine, messages: list[dict[str, object]]) -> int:
    text = [str(m.get("content") or "") for m in messages]
    text += [c["function"]["arguments"] for m in messages for c in m.get("tool_calls") or ()]  # type: ignore[union-attr]
    return sum(engine.tokens.count(t) for t in text)


async def test_graph_stores_every_message_once_sends_within_budget_and_recalls_a_compacted_fact(
    engine: ContextEngine,
) -> None:
    with StubProviderServer(default=StubReply.answer("Noted. " + "Details follow. " * 60)) as stub:
        model = ChatOpenAI(model="stub-model", base_url=stub.openai_base_url, api_key="offline")  # type: ignore[arg-type]
        hooks = LosslessHooks(engine, token_budget=BUDGET)
        agent = create_react_agent(
            model,
            lossless_tools(engine, "thread-1"),
            pre_model_hook=hooks.pre_model_hook,
            post_model_hook=hooks.post_model_hook,
            checkpointer=InMemorySaver(),
        )
        config = {"configurable": {"thread_id": "thread-1"}}
        await agent.ainvoke({"messages": [("user", f"Please remember this: {FACT}")]}, config)
        for turn in range(14):
            question = f"Question {turn}: how should we size the pool? " + "context " * 80
            await agent.ainvoke({"messages": [("user", question)]}, config)
        history_requests = len(stub.requests)
        stub.script(StubReply.tool_call("lcm_grep", {"pattern": "KESTREL-\\d+"}), StubReply.answer("KESTREL-7731"))
        state = await agent.ainvoke({"messages": [("user", "What was the on-call key?")]}, config)

    assert state["messages"][-1].content == "KESTREL-7731"
    assert len(state["messages"]) == 15 * 2 + 4  # the graph's own state is untouched: every message
    stored = await engine.messages("thread-1")
    assert len(stored) == 15 * 2 + 4
    assert [m.role for m in stored[-4:]] == ["user", "assistant", "tool", "assistant"]
    assert stored[0].content == f"Please remember this: {FACT}"
    summaries, _ = await engine.summaries("thread-1")
    assert summaries
    for request in stub.requests[:history_requests]:
        assert _sent_tokens(engine, request.body["messages"]) <= BUDGET
    tool_message = stub.requests[-1].body["messages"][-1]
    assert tool_message["role"] == "tool" and "KESTREL-7731" in tool_message["content"]
    assert json.loads(tool_message["content"])["matches"]


async def test_hooks_need_a_session(engine: ContextEngine) -> None:
    hooks = LosslessHooks(engine, token_budget=100)
    with pytest.raises(InputError, match="thread_id"):
        await hooks.pre_model_hook({"messages": [("user", "hi")]}, {})
    with pytest.raises(InputError, match="token_budget"):
        LosslessHooks(engine, token_budget=0)


async def test_store_items_are_memories_with_history(engine: ContextEngine) -> None:
    store = LosslessStore(engine)
    await store.aput(("user", "alice"), "food", {"content": "Alice likes ramen"})
    await store.aput(("user", "alice"), "food", {"content": "Alice now prefers udon", "since": "2026"})
    await store.aput(("user", "bob"), "food", {"content": "Bob eats soba"})
    item = await store.aget(("user", "alice"), "food")
    assert item is not None and item.value == {"content": "Alice now prefers udon", "since": "2026"}
    assert item.namespace == ("user", "alice") and item.key == "food"
    assert await store.aget(("user", "alice"), "drink") is None
    # The older value stays as history in the memory layer (superseded, not overwritten).
    history = [m async for m in engine.memory().export()]
    assert {m.content for m in history} >= {"Alice likes ramen", "Alice now prefers udon"}
    found = await store.asearch(("user", "alice"), query="udon")
    assert [(i.key, i.value["content"]) for i in found] == [("food", "Alice now prefers udon")]
    assert found[0].score is not None
    listed = await store.asearch(("user",))
    assert {i.value["content"] for i in listed} == {"Alice now prefers udon", "Bob eats soba"}
    filtered = await store.asearch(("user",), filter={"since": "2026"})
    assert [i.value["content"] for i in filtered] == ["Alice now prefers udon"]
    assert await store.alist_namespaces() == [("user", "alice"), ("user", "bob")]
    assert await store.alist_namespaces(max_depth=1) == [("user",)]
    await store.adelete(("user", "bob"), "food")
    assert await store.aget(("user", "bob"), "food") is None
    with pytest.raises(LcmError, match="async"):
        store.get(("user", "alice"), "food")


def test_namespaces_map_to_scopes() -> None:
    assert namespace_scope(("user", "u1", "prefs")) == "user:u1"
    assert namespace_scope(("project", "p")) == "project:p"
    assert namespace_scope(("global",)) == "global"
    assert namespace_scope(("notes", "x")) == "custom:notes:x"
