"""An agent loop with lossless memory, in the OpenAI SDK's message format.

Each turn: store the user's message (``ingest``), ask the engine for the context to send
(``assemble``, within the token budget), call the model, then hand the engine the model's
answer (``after_turn``: it stores it and compacts old history when a threshold is crossed).

Offline by default: the "model" is ``lossless.testing.StubProviderServer``, a loopback server
speaking OpenAI's chat-completions wire format, so this runs with no key and no network::

    python examples/agent_loop.py --turns 12

Against a real OpenAI-compatible endpoint: ``--model gpt-4o-mini --base-url https://api.openai.com/v1``
(the key comes from OPENAI_API_KEY).  Needs the ``openai`` extra.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
from typing import Any

import anyio
from openai import AsyncOpenAI

from lossless import ContextEngine, Message
from lossless.testing import StubProviderServer, StubReply

SYSTEM = "You are a helpful assistant with lossless memory of this conversation."
QUESTIONS = [
    "Our service times out under load. Where should we start?",
    "The p99 latency doubles when the cache is cold. Why would that be?",
    "Would a write-through cache help with the timeouts?",
    "What about connection pooling to the database?",
    "How should we size the pool for 400 requests per second?",
    "Which metrics would tell us the pool is too small?",
]


async def run_loop(engine: ContextEngine, model: AsyncOpenAI, model_name: str, *, turns: int, budget: int) -> None:
    session = "agent-loop-example"
    largest = 0  # the most tokens any one request carried, as measured below
    for turn in range(turns):
        question = f"{QUESTIONS[turn % len(QUESTIONS)]} (turn {turn + 1})"
        # 1. Store the user's message as it arrives (the event_key makes a retry harmless).
        await engine.ingest(session, Message.from_dict({"role": "user", "content": question, "event_key": f"u{turn}"}))

        # 2. Before the model call: the context to send, within the budget, in OpenAI format.
        context = await engine.assemble(session, token_budget=budget, prompt=question, output="openai")
        system = SYSTEM + ("\n\n" + context.system_prompt_addition if context.system_prompt_addition else "")
        messages: list[Any] = [{"role": "system", "content": system}, *context.messages]
        # What this request really carries: the assembled context plus our own system prompt.
        sent = context.estimated_tokens + engine.tokens.count(SYSTEM)
        largest = max(largest, sent)
        reply = await model.chat.completions.create(model=model_name, messages=messages)
        answer = reply.choices[0].message.content or ""

        # 3. After the model answered: store the answer; compaction runs only when a trigger fires.
        done = await engine.after_turn(
            session,
            [Message.from_dict({"role": "assistant", "content": answer, "event_key": f"a{turn}"})],
            token_budget=budget,
        )
        summaries = context.summaries_included
        compacted = f", compacted to {done.context_tokens} tokens" if done.compaction else ""
        print(
            f"turn {turn + 1:>2}: sent {len(messages):>2} messages, ~{sent} tokens ({summaries} summaries){compacted}"
        )
        if done.error:
            print(f"         after_turn reported: {done.error}")
    stored = await engine.messages(session)
    print(f"stored {len(stored)} messages verbatim; the largest request was ~{largest} tokens", end="")
    if largest <= budget:
        print(f", within the {budget}-token budget")
    else:  # assemble keeps to the budget: this would be an engine fault
        print(f", OVER the {budget}-token budget: report this, it is a bug")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--budget", type=int, default=1500, help="token budget of each model call")
    parser.add_argument("--database", help="database URL (default: a temporary SQLite file)")
    parser.add_argument("--model", default="stub-model")
    parser.add_argument("--base-url", help="an OpenAI-compatible API; default: the offline stub")
    args = parser.parse_args()

    with contextlib.ExitStack() as stack:
        if args.base_url:
            base_url, key = args.base_url, os.environ.get("OPENAI_API_KEY", "")
        else:  # offline: a loopback server answering each call with a long, scripted reply
            stub = stack.enter_context(StubProviderServer(default=StubReply.answer(_long_answer())))
            base_url, key = stub.openai_base_url, "offline"
        database = args.database or f"sqlite:///{stack.enter_context(tempfile.TemporaryDirectory())}/agent.db"
        model = AsyncOpenAI(api_key=key, base_url=base_url)
        # A short fresh tail so that compaction shows within a dozen turns.
        async with await ContextEngine.open(database, fresh_tail_count=4) as engine:
            await run_loop(engine, model, args.model, turns=args.turns, budget=args.budget)
        await model.close()


def _long_answer() -> str:
    return " ".join(
        f"Point {i}: measure before changing anything, then change one thing and measure again." for i in range(8)
    )


if __name__ == "__main__":
    anyio.run(main)
