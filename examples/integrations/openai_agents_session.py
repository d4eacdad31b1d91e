"""The OpenAI Agents SDK with lossless memory: a ``LosslessSession`` and the recall tools.

Offline by default (the model is ``lossless.testing.StubProviderServer``, a loopback server speaking
OpenAI's wire format)::

    pip install 'lossless-context[openai-agents]'
    python examples/integrations/openai_agents_session.py
"""

from __future__ import annotations

import tempfile

import anyio
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from openai import AsyncOpenAI

from lossless import ContextEngine
from lossless.adapters.integrations.openai_agents import LosslessSession, lossless_tools
from lossless.testing import StubProviderServer, StubReply

BUDGET = 1_500


async def main() -> None:
    set_tracing_disabled(True)  # offline: no trace export
    with StubProviderServer(default=StubReply.answer("Noted. " * 80)) as stub, tempfile.TemporaryDirectory() as tmp:
        client = AsyncOpenAI(base_url=stub.openai_base_url, api_key="offline")
        async with await ContextEngine.open(f"sqlite:///{tmp}/agents.db", fresh_tail_count=4) as engine:
            session = LosslessSession(engine, "support-42", token_budget=BUDGET)
            agent = Agent(
                name="support",
                instructions="Answer briefly; search your history with lcm_grep when you need an old detail.",
                model=OpenAIChatCompletionsModel(model="stub-model", openai_client=client),
                tools=lossless_tools(engine, "support-42"),
            )
            await Runner.run(agent, "Our VPN gateway is vpn-7.example.net; remember it.", session=session)
            for turn in range(12):
                await Runner.run(agent, f"Ticket {turn}: the printer on floor {turn} jams. " * 6, session=session)
            stub.script(StubReply.tool_call("lcm_grep", {"pattern": "vpn-\\d+"}), StubReply.answer("vpn-7.example.net"))
            result = await Runner.run(agent, "What was our VPN gateway?", session=session)
            history = await session.get_items()
            stored = await engine.messages("support-42")
            summaries, _ = await engine.summaries("support-42")
            sent = sum(engine.tokens.count(str(item.get("content") or item.get("output") or "")) for item in history)
            print(f"answer: {result.final_output}")
            print(f"stored {len(stored)} messages verbatim, {len(summaries)} summaries")
            print(f"the session gives the model {len(history)} items, ~{sent} tokens (budget {BUDGET})")
        await client.close()


if __name__ == "__main__":
    anyio.run(main)
