"""Pydantic AI with lossless memory: the ``LosslessHistory`` capability and the recall toolset.

Offline by default (the model is ``lossless.testing.StubProviderServer``)::

    pip install 'lossless-context[pydantic-ai]' openai
    python examples/integrations/pydantic_ai_agent.py
"""

from __future__ import annotations

import tempfile

import anyio
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from lossless import ContextEngine
from lossless.adapters.integrations.pydantic_ai import LosslessHistory, lossless_toolset
from lossless.testing import StubProviderServer, StubReply


async def main() -> None:
    with StubProviderServer(default=StubReply.answer("Noted. " * 80)) as stub, tempfile.TemporaryDirectory() as tmp:
        model = OpenAIChatModel("stub-model", provider=OpenAIProvider(base_url=stub.openai_base_url, api_key="x"))
        async with await ContextEngine.open(f"sqlite:///{tmp}/pai.db", fresh_tail_count=4) as engine:
            history = LosslessHistory(engine, "support-42", token_budget=1_500)
            agent = Agent(model, capabilities=[history], toolsets=[lossless_toolset(engine, "support-42")])
            await agent.run("Our VPN gateway is vpn-7.example.net; remember it.")
            for turn in range(12):  # no message_history passed: the engine is the history
                await agent.run(f"Ticket {turn}: the printer on floor {turn} jams. " * 6)
            stub.script(StubReply.tool_call("lcm_grep", {"pattern": "vpn-\\d+"}), StubReply.answer("vpn-7.example.net"))
            result = await agent.run("What was our VPN gateway?")
            stored = await engine.messages("support-42")
            summaries, _ = await engine.summaries("support-42")
            print(f"answer: {result.output}")
            print(f"stored {len(stored)} messages verbatim, {len(summaries)} summaries")


if __name__ == "__main__":
    anyio.run(main)
