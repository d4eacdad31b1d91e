"""scripts/hybrid_signals.py and scripts/fit_hybrid.py: the offline replay of hybrid's message ranking is the
ranking the product measures, so weights fitted on it are weights of the product.

The dump records each candidate's signals as the ranking computes them; once the ranking gains a step the dump
does not record, the replay drifts from what ``recall.py`` measures and a fit on it tunes something else (it
had: the dump missed the meaning side's two later steps and replayed 4-8 points of R@10 low).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_replay_ranks_the_evidence_as_the_benchmark_measured(tmp_path: Path) -> None:
    data = json.loads((ROOT / "benchmarks" / "data" / "recall-written-dev.json").read_text(encoding="utf-8"))
    chat = data["conversations"][0]  # one hand-written chat: speakers' and other names, times, questions back
    questions = [q for q in data["questions"] if q["conversation_id"] == chat["id"]]
    small = tmp_path / "small.json"
    small.write_text(json.dumps({**data, "conversations": [chat], "questions": questions}), encoding="utf-8")
    out = tmp_path / "signals.json"
    command = [sys.executable, str(ROOT / "scripts" / "hybrid_signals.py"), "--dataset", str(small)]
    done = subprocess.run(
        [*command, "--embedder", "hash", "--out", str(out)], capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-2000:]
    fit = script("fit_hybrid")
    replayed = fit.load(out)
    same, measured = fit.agreement(replayed)
    assert measured == len(questions) > 40
    assert same >= 0.95 * measured, f"the replay ranks {measured - same} of {measured} questions otherwise"
    # And the replay is no constant: other weights rank some questions otherwise.
    assert fit.agreement(replayed, fit.START | {"keyword": 0.6, "after": 0.0})[0] < same
