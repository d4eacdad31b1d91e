"""How long an ``lcm`` command takes to start: the wall time of whole processes, against Python's own start-up.

Hooks of coding agents run ``lcm`` on every turn (``lcm hook claude-code …``, docs/integrations.md),
so the command's start-up is paid again and again.  Each figure is the median wall time of a fresh
process (``--quick``: 7 runs, else 21), the commands interleaved so that a change in the machine's
load hits them alike.  Baselines, measured in the same run:

* ``python -c pass``: the interpreter's own start-up, what no command can go under;
* ``import lossless.engine``: the eager import of the engine and the SQLite store, what every
  command paid before the command line loaded only what each command needs (the ratio of a
  command that opens a store to it is its import cost over the old floor, the store's work on top).

Commands: ``lcm --version``, ``lcm --help`` (every command's one-line help), ``lcm grep --help``,
``lcm stats`` on a small store, and the hook Claude Code runs at a session's start with an empty
payload (it opens, creating if need be, the store and imports nothing).  The figures are timings, so
they are reported and never asserted; ``tests/test_cli_startup.py`` guards the lazy design itself.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import SAMPLE, Figure, parse_args, report

_LCM = [sys.executable, "-c", "from lossless.cli import main; main()"]


def _wall(argv: list[str], stdin: str = "") -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv[3:]} failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return elapsed


def main() -> None:
    args = parse_args(__doc__ or "")
    runs = 7 if args.quick else 21
    with tempfile.TemporaryDirectory(prefix="lcm-startup-") as tmp:
        os.environ["LCM_DATA_DIR"] = tmp
        config = Path(tmp) / "config.toml"
        config.write_text("")  # empty: the user's own is not read
        os.environ["LCM_CONFIG_FILE"] = str(config)
        db = ["--database", f"sqlite:///{Path(tmp) / 'lcm.db'}"]
        hook_db = ["--database", f"sqlite:///{Path(tmp) / 'hook.db'}"]
        subprocess.run([*_LCM, *db, "import", str(SAMPLE)], capture_output=True, check=True)
        cases: dict[str, tuple[list[str], str]] = {
            "python -c pass": ([sys.executable, "-c", "pass"], ""),
            "import lossless.engine (eager)": (
                [sys.executable, "-c", "import lossless.engine, lossless.stores.sqlite"],
                "",
            ),
            "lcm --version": ([*_LCM, "--version"], ""),
            "lcm --help": ([*_LCM, "--help"], ""),
            "lcm grep --help": ([*_LCM, "grep", "--help"], ""),
            "lcm stats (small store)": ([*_LCM, *db, "stats"], ""),
            "lcm hook claude-code session-start": ([*_LCM, *hook_db, "hook", "claude-code", "session-start"], "{}"),
        }
        for argv, stdin in cases.values():  # warm the bytecode cache and the page cache
            _wall(argv, stdin)
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(runs):
            for name, (argv, stdin) in cases.items():
                times[name].append(_wall(argv, stdin))
    ms = {name: statistics.median(values) * 1000 for name, values in times.items()}
    python, eager = ms["python -c pass"], ms["import lossless.engine (eager)"]
    figures = [
        Figure("python -c pass (baseline)", python, "ms"),
        Figure("import lossless.engine (eager)", eager, "ms", baseline=python),
    ]
    figures += [
        Figure(name, ms[name], "ms", baseline=python, note="ratio: to python -c pass")
        for name in ("lcm --version", "lcm --help", "lcm grep --help")
    ]
    figures += [
        Figure(name, ms[name], "ms", baseline=eager, note="ratio: to the eager engine import")
        for name in ("lcm stats (small store)", "lcm hook claude-code session-start")
    ]
    report(f"cli_startup (median of {runs} processes each)", figures, args.json)


if __name__ == "__main__":
    main()
