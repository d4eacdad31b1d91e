"""How far the token estimate is from exact counts on real transcripts, and the margin that covers it.

Reads every transcript of a corpus folder (default ``../shared/corpus``), counts each message's text
with the calibrated estimator and with tiktoken's ``o200k_base`` (needs the ``tokenizer`` extra),
and reports the error per message and over windows of consecutive messages the size of a context
(8k, 32k, 128k estimated tokens) — the windows are what the assembly margin must cover.

    python scripts/token_margin.py [CORPUS] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from lossless.bootstrap import discover_transcripts
from lossless.replay import read_entries
from lossless.tokens import EstimatingCounter, TiktokenCounter


def windows(pairs: list[tuple[int, int]], size: int) -> list[float]:
    """exact / estimate over consecutive runs of messages holding about ``size`` estimated tokens."""
    out: list[float] = []
    est = exact = 0
    for e, x in pairs:
        est += e
        exact += x
        if est >= size:
            out.append(exact / est)
            est = exact = 0
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus"
    parser.add_argument("corpus", nargs="?", default=str(default))
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    estimate, exact = EstimatingCounter(), TiktokenCounter("o200k_base")
    per_file: dict[str, list[tuple[int, int]]] = {}
    for path in discover_transcripts([args.corpus]):
        try:
            _, entries = read_entries(path)
        except Exception as exc:  # a file that is not a transcript is reported and skipped
            print(f"skip {path}: {exc}", file=sys.stderr)
            continue
        texts = [e.message.content for e in entries if e.message.content]
        per_file[str(path)] = [(estimate.count(t), exact.count(t)) for t in texts]
    pairs = [p for ps in per_file.values() for p in ps]
    total_est = sum(e for e, _ in pairs)
    total_exact = sum(x for _, x in pairs)
    ratios = sorted(x / e for e, x in pairs if e >= 20)
    report: dict[str, object] = {
        "files": len(per_file),
        "messages": len(pairs),
        "estimated_tokens": total_est,
        "exact_tokens": total_exact,
        "total_ratio": round(total_exact / total_est, 4),
        "message_ratio_p50": round(statistics.median(ratios), 4),
        "message_ratio_p95": round(ratios[int(0.95 * (len(ratios) - 1))], 4),
        "message_ratio_p99": round(ratios[int(0.99 * (len(ratios) - 1))], 4),
        "message_ratio_max": round(ratios[-1], 4),
    }
    for size in (1_000, 8_000, 32_000, 128_000):
        found = sorted(r for ps in per_file.values() for r in windows(ps, size))
        if found:
            report[f"window_{size}_max"] = round(found[-1], 4)
            report[f"window_{size}_p99"] = round(found[int(0.99 * (len(found) - 1))], 4)
            report[f"window_{size}_count"] = len(found)
    for key, value in report.items():
        print(f"{key:24} {value}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
