"""Run every benchmark script: ``python benchmarks/run_all.py [--quick] [--json-dir DIR]``.

Each script prints its own table; with ``--json-dir`` each also writes ``DIR/<name>.json``.
Exits non-zero if a script fails (a missed goal is reported, not a failure: timings are never gates).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json-dir", type=Path)
    args = parser.parse_args()
    scripts = sorted(p for p in HERE.glob("*.py") if not p.name.startswith("_") and p.name != "run_all.py")
    failed = []
    for script in scripts:
        command = [sys.executable, str(script)]
        if args.quick:
            command.append("--quick")
        if args.json_dir:
            args.json_dir.mkdir(parents=True, exist_ok=True)
            command += ["--json", str(args.json_dir / f"{script.stem}.json")]
        print(f"\n=== {script.name} ===", flush=True)
        if subprocess.run(command).returncode != 0:
            failed.append(script.name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
