"""Compaction keeps up, turn after turn: a long replay of random message sizes at a small budget.

Each turn stores a user and an assistant message through ``after_turn`` (default settings, the offline
summarizer) at a 4,000-token budget.  Message sizes are log-uniform from 1 token to 3 × ``leaf_chunk_tokens``
(60,000 by default), so tiny messages sit between ones far larger than a leaf chunk.  Figures:

* **turns over threshold + turn** — turns after which the stored context exceeds the compaction threshold
  (``context_threshold`` × budget) by more than that turn's own size; goal 0;
* **most tokens over the threshold** — with the size of the turn that caused it;
* **stored / raw tokens** — the stored context after the last turn against every token stored (the
  baseline: what the context would hold with no compaction), in the same run;
* **no_progress stops** — compactions that ended without making the context smaller while it was over
  the threshold; goal 0.
"""

from __future__ import annotations

import math
import random
import sys
import tempfile
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Figure, parse_args, report, timer
from lossless import ContextEngine, Message

BUDGET = 4000


async def main() -> None:
    args = parse_args(__doc__ or "")
    turns = 300 if args.quick else 2000
    rng = random.Random(24)
    with tempfile.TemporaryDirectory() as tmp, timer() as elapsed:
        async with await ContextEngine.open(f"sqlite:///{Path(tmp) / 'r.db'}") as engine:
            largest = 3 * engine.config.leaf_chunk_tokens
            threshold = int(engine.config.context_threshold * BUDGET)
            per_word = engine.tokens.count(" ".join(f"w{i}" for i in range(1000))) / 1000

            def text(turn: int, role: str) -> str:
                tokens = math.exp(rng.uniform(0, math.log(largest)))
                words = max(1, int(tokens / per_word))
                return f"{role} {turn}: " + " ".join(f"w{rng.randrange(1000)}" for _ in range(words))

            over = stalls = 0
            worst = 0  # tokens over the threshold after a turn, at most
            worst_turn = 0  # that turn's own size
            raw = 0
            stored = 0
            for turn in range(turns):
                messages = [Message.user(text(turn, "q")), Message.assistant(text(turn, "a"))]
                size = sum(engine.tokens.count(m.content) for m in messages)
                raw += size
                done = await engine.after_turn("replay", messages, token_budget=BUDGET)
                if done.error:
                    raise SystemExit(f"turn {turn}: {done.error}")
                stored = done.context_tokens
                if stored - threshold > worst:
                    worst, worst_turn = stored - threshold, size
                over += stored > threshold + size
                if done.compaction is not None and done.compaction.stop_reason == "no_progress":
                    stalls += done.compaction.tokens_after >= done.compaction.tokens_before
    figures = [
        Figure(f"turns over threshold + turn ({turns} turns)", over, "n", goal=0, goal_op="<=", goal_on="value"),
        Figure(
            "most tokens over the threshold after a turn",
            worst,
            "tok",
            note=f"threshold {threshold:,} tokens; that turn's own messages: {worst_turn:,} tokens",
        ),
        Figure("stored / raw tokens after the replay", stored, "tok", baseline=raw),
        Figure("no_progress stops", stalls, "n", goal=0, goal_op="<=", goal_on="value"),
        Figure("replay time", elapsed(), "s"),
    ]
    report("compaction_replay", figures, args.json)


if __name__ == "__main__":
    anyio.run(main)
