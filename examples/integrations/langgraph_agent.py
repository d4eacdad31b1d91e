"""LangGraph with lossless memory: model hooks, the recall tools, and long-term memory as the graph's store.

Offline by default (the model is ``lossless.testing.StubProviderServer``, reached through ChatOpenAI)::

    pip install 'lossless-context[langgraph]' langchain-openai
    python examples/integrations/langgraph_agent.py
"""

from __future__ import annotations

import tempfile
import warnings

import anyio
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from langgraph.warnings import LangGraphDeprecationWarning

from lossless import ContextEngine
from lossless.adapters.integrations.langgraph import LosslessHooks, LosslessStore, lossless_tools
from lossless.testing import StubProviderServer, StubReply

warnings.filterwarnings("ignore", category=LangGraphDeprecationWarning)  # create_react_agent "moved"


async def main() -> None:
    with StubProviderServer(default=StubReply.answer("Noted. " * 80)) as stub, tempfile.TemporaryDirectory() as tmp:
        model = ChatOpenAI(model="stub-model", base_url=stub.openai_base_url, api_key="offline")  # type: ignore[arg-type]
        async with await ContextEngine.open(f"sqlite:///{tmp}/lg.db", fresh_tail_count=4) as engine:
            hooks = LosslessHooks(engine, token_budget=1_500)  # the session is the thread_id
            store = LosslessStore(engine)
            agent = create_react_agent(
                model,
                lossless_tools(engine, "support-42"),
                pre_model_hook=hooks.pre_model_hook,
                post_model_hook=hooks.post_model_hook,
                checkpointer=InMemorySaver(),
                store=store,
            )
            config = {"configurable": {"thread_id": "support-42"}}
            await agent.ainvoke({"messages": [("user", "Our VPN gateway is vpn-7.example.net.")]}, config)
            for turn in range(12):
                await agent.ainvoke({"messages": [("user", f"Ticket {turn}: printer jams. " * 6)]}, config)
            stub.script(StubReply.tool_call("lcm_grep", {"pattern": "vpn-\\d+"}), StubReply.answer("vpn-7.example.net"))
            state = await agent.ainvoke({"messages": [("user", "What was our VPN gateway?")]}, config)
            await store.aput(("user", "dana"), "editor", {"content": "Dana prefers vim"})
            found = await store.asearch(("user", "dana"), query="vim")
            stored = await engine.messages("support-42")
            summaries, _ = await engine.summaries("support-42")
            print(f"answer: {state['messages'][-1].content}")
            print(f"stored {len(stored)} messages verbatim, {len(summaries)} summaries")
            print(f"long-term memory: {found[0].value['content']}")


if __name__ == "__main__":
    anyio.run(main)
