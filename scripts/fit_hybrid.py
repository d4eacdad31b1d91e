"""Fit the weights of hybrid search's message ranking on the dev split's dumped signals (``scripts/hybrid_signals.py``).

``python scripts/hybrid_signals.py --pad-with test --embed-cache FILE --out signals.json``
``python scripts/fit_hybrid.py signals.json [more.json …] [--loco]``

The ranking (``lossless.retrieval.hybrid``) scores each candidate message as

    base  = k * keyword + (1 - k) * meaning + m * best * memory     (k: agent_keyword in an agent's session)
    score = (base + b * base(turn before) + a * base(turn after)) * substance(S) * asking + t * in_window + i * intent
    (substance: 1 for a tool's output)

(each side min-max scaled; memory: the lead's score over the best lead's; best: the best fused score;
``b``/``a`` are ``tool_before``/``tool_after`` for a pair of turns of which either is a tool's call or output,
``before``/``after`` otherwise; asking: ``q`` for a chat turn that ends by asking, else 1; intent: the message is
the record the question asks for)

over the 200 best by ``base`` and their neighbouring turns.  This script replays that formula offline on
the dumped signals (it reproduces the benchmark's figures for the shipped constants) and fits the weights
by coordinate ascent over small grids, maximising ``R@5 + R@10 / 2 + R@1 / 10`` on the dev questions,
starting from :data:`START` (the shipped constants).  There is no randomness: a run is the same every time.
``--loco`` checks the fit by leaving one conversation out: fit on the others, score the one left out, and
compare with the starting constants on the same questions.  Fit on the dev split only; the test split is
reported by ``recall.py`` and never dumped or fitted.  Several dumps (e.g. the paraphrased and the literal
wording of the dev questions, ``hybrid_signals.py --wording literal``) are fitted together, each question
counting once; ``--loco`` leaves a conversation out of all of them at once.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

KS = (1, 5, 10, 25, 50)
#: The shipped constants (:mod:`lossless.retrieval.hybrid`), as a starting point and a reference.
START = {
    "keyword": 0.15,
    "agent_keyword": 0.25,
    "memory": 0.4,
    "before": 0.0,
    "after": 0.45,
    "tool_before": 0.3,
    "tool_after": 0.15,
    "best_only": 0,
    "substance": 6,
    "asking": 0.8,
    "time": 0.5,
    "intent": 0.3,
}
#: What the fit may choose from, per weight.
GRIDS: dict[str, list[float]] = {
    "keyword": [0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4],
    "agent_keyword": [0.15, 0.2, 0.25, 0.3, 0.35, 0.5],
    "memory": [0.2, 0.4, 0.6, 0.8, 1.0, 1.2],
    "before": [0.0, 0.15, 0.3, 0.45, 0.6],
    "after": [0.0, 0.15, 0.3, 0.45, 0.6],
    "tool_before": [0.15, 0.3, 0.45, 0.6, 0.8],
    "tool_after": [0.0, 0.15, 0.3, 0.45],
    "best_only": [0, 1],
    "substance": [4, 6, 8, 10],
    "asking": [0.6, 0.7, 0.8, 0.9, 1.0],
    "time": [0.2, 0.3, 0.4, 0.5, 0.6],
    "intent": [0.2, 0.3, 0.4, 0.5],
}
TRUNCATE = 200


def _scaled(values: np.ndarray) -> np.ndarray:
    present = ~np.isnan(values)
    out = np.zeros_like(values)
    if present.any():
        high, low = values[present].max(), values[present].min()
        out[present] = (values[present] - low) / (high - low) if high > low else 1.0
    return out


def load(*paths: Path) -> list[dict[str, Any]]:
    """Each dumped question (of every file) as arrays over its candidates."""
    questions = [
        q for path in paths for _, q in sorted(json.loads(path.read_text(encoding="utf-8"))["questions"].items())
    ]
    out = []
    for q in questions:
        keys = list(q["items"])
        index = {k: i for i, k in enumerate(keys)}
        items = [q["items"][k] for k in keys]

        def column(name: str, items: list[dict[str, Any]] = items) -> np.ndarray:
            return np.array([np.nan if it[name] is None else it[name] for it in items], dtype=float)

        def link(name: str, items: list[dict[str, Any]] = items, index: dict[str, int] = index) -> np.ndarray:
            return np.array([-1 if it[name] is None else index.get(str(it[name]), -1) for it in items])

        before, after = link("prev"), link("next")
        for i in range(len(items)):  # read both ways: the turn after i has i before it
            if after[i] >= 0 and before[after[i]] < 0:
                before[after[i]] = i
            if before[i] >= 0 and after[before[i]] < 0:
                after[before[i]] = i
        memory = np.nan_to_num(column("mem"), nan=0.0)
        top = memory.max() if memory.size else 0.0
        evidence = set(q["evidence"])
        out.append(
            {
                "conversation": q["conversation"],
                "agent_session": bool(q.get("agent_session")),
                "events": [it["event"] for it in items],
                "wanted_events": list(q["evidence"]),
                "measured": q.get("measured"),
                "evidence": np.array([it["event"] in evidence for it in items]),
                "wanted": len(evidence),
                "keyword": _scaled(column("kw")),
                "meaning": _scaled(column("sem")),
                "matched": ~np.isnan(column("kw")) | ~np.isnan(column("sem")),
                "memory": memory / top if top > 0 else memory,
                "core": np.array([it["core"] for it in items]),
                "before": before,
                "after": after,
                "words": column("words"),
                "window": np.array([it["window"] for it in items], dtype=float),
                "tool": np.array([bool(it.get("tool")) for it in items]),
                "asks": np.array([bool(it.get("asks")) for it in items]),
                "output": np.array([bool(it.get("output")) for it in items]),
                "intent": np.array([bool(it.get("intent")) for it in items], dtype=float),
            }
        )
    return out


def scores(q: dict[str, Any], w: dict[str, float]) -> np.ndarray:
    """The ranking's score of every candidate of ``q`` under weights ``w`` (-inf: not ranked)."""
    k = w["agent_keyword"] if q["agent_session"] else w["keyword"]  # a tool's output among the keyword matches
    base = np.where(q["core"], k * q["keyword"] + (1 - k) * q["meaning"], 0.0)
    best = (base[q["matched"]].max() if q["matched"].any() else 0.0) or 1.0
    base = base + w["memory"] * best * q["memory"]
    kept = np.zeros(len(base), bool)
    kept[np.argsort(-base, kind="stable")[:TRUNCATE]] = True
    kept &= q["core"]
    base = np.where(kept, base, 0.0)

    tool = q["tool"]

    def inherited(link: np.ndarray, share: float, tool_share: float) -> np.ndarray:
        safe = np.maximum(link, 0)
        shares = np.where(tool | tool[safe], tool_share, share)
        return np.where((link >= 0) & kept[safe], shares * base[safe], 0.0)

    from_before = inherited(q["before"], w["before"], w["tool_before"])
    from_after = inherited(q["after"], w["after"], w["tool_after"])
    added = np.maximum(from_before, from_after) if w["best_only"] else from_before + from_after
    score = base + added
    reached = kept | (added > 0)
    enough = w["substance"]
    substance = np.where(q["output"], 1.0, np.clip(q["words"], 1, enough) / enough)  # a tool's output is spared
    score = score * substance * np.where(q["asks"], w["asking"], 1.0)
    score = score + w["time"] * q["window"] + w["intent"] * q["intent"]
    return np.where(reached, score, -np.inf)


def ranks(q: dict[str, Any], w: dict[str, float]) -> list[int | None]:
    """Where the replay ranks each evidence message of ``q`` in its top 50 (1-based; ``None``: not there), as
    ``recall.py`` reports a method's ranks."""
    top = [q["events"][i] for i in _top(scores(q, w))]
    return [top.index(e) + 1 if e in top else None for e in q["wanted_events"]]


def agreement(questions: list[dict[str, Any]], w: dict[str, float] = START) -> tuple[int, int]:
    """How many questions the replay ranks exactly as the benchmark measured (of those whose dump holds the
    measured ranks): the replay is only worth fitting on while the two agree."""
    held = [q for q in questions if q["measured"] is not None]
    return sum(1 for q in held if ranks(q, w) == q["measured"]), len(held)


def _top(score: np.ndarray) -> np.ndarray:
    """The indexes of the 50 best-scored candidates that are ranked at all, best first (ties in dump order)."""
    order = np.argsort(-score, kind="stable")
    return order[score[order] > -np.inf][:50]


def metrics(q: dict[str, Any], score: np.ndarray) -> list[float]:
    order = _top(score)
    found = q["evidence"][order]
    first = np.nonzero(found)[0]
    return [found[:k].sum() / q["wanted"] for k in KS] + [1.0 / (first[0] + 1) if len(first) else 0.0]


def evaluate(questions: list[dict[str, Any]], w: dict[str, float]) -> np.ndarray:
    """R@1/5/10/25/50 and MRR in % over ``questions``."""
    figures: np.ndarray = np.array([metrics(q, scores(q, w)) for q in questions]).mean(axis=0) * 100
    return figures


def objective(figures: np.ndarray) -> float:
    return float(figures[1] + 0.5 * figures[2] + 0.1 * figures[0])


def fit(questions: list[dict[str, Any]], start: dict[str, float], rounds: int = 4) -> dict[str, float]:
    """Coordinate ascent: each weight in turn takes the grid value that scores best, until nothing moves."""
    weights = dict(start)
    best = objective(evaluate(questions, weights))
    for _ in range(rounds):
        moved = False
        for name, grid in GRIDS.items():
            for value in grid:
                trial = weights | {name: value}
                figure = objective(evaluate(questions, trial))
                if figure > best + 1e-9:
                    best, weights, moved = figure, trial, True
        if not moved:
            break
    return weights


def _row(label: str, figures: np.ndarray) -> str:
    return f"{label:<28}" + "".join(f"{v:>8.1f}" for v in figures)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("signals", type=Path, nargs="+", help="the dev split's dumps from scripts/hybrid_signals.py")
    parser.add_argument("--loco", action="store_true", help="also fit leaving each conversation out in turn")
    parser.add_argument("--fix", action="append", default=[], metavar="NAME=VALUE", help="hold a weight fixed")
    args = parser.parse_args()
    questions = load(*args.signals)
    for pin in args.fix:
        name, value = pin.split("=")
        GRIDS[name] = [float(value)]
    header = f"{'':<28}" + "".join(f"{c:>8}" for c in (*(f"R@{k}" for k in KS), "MRR"))
    fitted = fit(questions, START)
    print(header)
    print(_row("shipped (START)", evaluate(questions, START)))
    same, measured = agreement(questions)
    if measured:
        print(f"replay = benchmark: the same evidence ranks for {same} of {measured} questions")
    print(_row("fitted", evaluate(questions, fitted)))
    print("fitted weights:", fitted)
    for name in GRIDS:  # what each weight adds: the fitted weights with that one back at its starting value
        if fitted[name] != START[name]:
            print(_row(f"  ... {name} back to {START[name]}", evaluate(questions, fitted | {name: START[name]})))
    if args.loco:
        start_rows, fitted_rows = [], []
        for left_out in sorted({q["conversation"] for q in questions}):
            train = [q for q in questions if q["conversation"] != left_out]
            held = [q for q in questions if q["conversation"] == left_out]
            weights = fit(train, START)
            start_rows += [metrics(q, scores(q, START)) for q in held]
            fitted_rows += [metrics(q, scores(q, weights)) for q in held]
            before, after = evaluate(held, START), evaluate(held, weights)
            print(
                f"  {left_out} left out: R@5 {before[1]:.1f} -> {after[1]:.1f}, R@10 {before[2]:.1f} -> {after[2]:.1f}"
            )
            print(f"    weights: {weights}")
        print(_row("start, per left-out conv", np.array(start_rows).mean(axis=0) * 100))
        print(_row("fitted without that conv", np.array(fitted_rows).mean(axis=0) * 100))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
