"""Replay every transcript of a corpus at several budgets with the default settings; count turns over budget.

The bar for "the token budget is a hard limit": 0 turns over budget at 8k, 16k and 32k.  Each replay
runs in a fresh temporary SQLite database with the defaults (the offline summarizer, ``tokenizer =
auto``).  Prints one row per transcript and budget, then the totals; exits 1 when any turn was over.

    python scripts/replay_corpus.py [CORPUS] [--budgets 8000,16000,32000] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import anyio

from lossless import ContextEngine
from lossless.bootstrap import discover_transcripts
from lossless.config import load_config
from lossless.replay import replay


async def one(path: Path, budget: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="lcm-replay-corpus-") as scratch:
        config = load_config({"database_url": f"sqlite:///{Path(scratch) / 'r.db'}", "data_dir": scratch})
        async with await ContextEngine.open(config=config) as engine:
            result = await replay(engine, path, budget=budget)
    return {
        "transcript": str(path),
        "budget": budget,
        "turns": result.turns,
        "over_budget_turns": result.violations,
        "max_assembled_tokens": result.max_assembled_tokens,
        "left_out_turns": result.left_out_turns,
        "max_left_out": result.max_left_out,
        "errors": len(result.errors),
        "seconds": round(result.seconds, 1),
    }


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus"
    parser.add_argument("corpus", nargs="?", default=str(default))
    parser.add_argument("--budgets", default="8000,16000,32000")
    parser.add_argument("--json", dest="json_out")
    return parser.parse_args()


async def main() -> int:
    args = parse()
    budgets = [int(b) for b in args.budgets.split(",")]
    rows: list[dict[str, object]] = []
    started = time.perf_counter()
    for path in await anyio.to_thread.run_sync(discover_transcripts, [args.corpus]):
        for budget in budgets:
            try:
                row = await one(path, budget)
            except Exception as exc:  # a file that is not a session is reported, not fatal
                print(f"skip {path.name} at {budget}: {exc}", flush=True)
                continue
            rows.append(row)
            print(
                f"{Path(str(row['transcript'])).name[:40]:40} budget {budget:>7,}  turns {row['turns']:>4}  "
                f"over {row['over_budget_turns']}  max sent {row['max_assembled_tokens']:>7,}  "
                f"left-out turns {row['left_out_turns']:>4} (max {row['max_left_out']})  errors {row['errors']}  "
                f"{row['seconds']} s",
                flush=True,
            )
    over = sum(int(str(r["over_budget_turns"])) for r in rows)
    turns = sum(int(str(r["turns"])) for r in rows)
    print(f"\n{len(rows)} replays, {turns:,} turns, {over} over budget, {time.perf_counter() - started:.0f} s")
    if args.json_out:
        text = json.dumps({"rows": rows, "over_budget_turns": over}, indent=2)
        await anyio.Path(args.json_out).write_text(text)
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(anyio.run(main))
