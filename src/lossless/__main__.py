"""The ``lcm`` command's entry point (also ``python -m lossless``): it can take Ctrl-C before the command line loads.

Invariant: at import this module loads only the standard library's :mod:`sys` and :mod:`json` and
:mod:`lossless.constants` (a leaf), so a Ctrl-C while :mod:`lossless.cli` and click are still being
imported ends as one at any later moment does: the ``interrupted:`` line (or, with ``--json``, the JSON
error) and exit status 130, never a traceback.  Nothing is written before the command line has loaded.
"""

from __future__ import annotations

import json
import sys

from lossless.constants import EXIT_INTERRUPTED, INTERRUPTED

__all__ = ["main"]


def main() -> None:
    """Load the command line and run it."""
    try:
        from lossless.cli import main as run
    except KeyboardInterrupt:
        if "--json" in sys.argv[1:]:
            print(json.dumps({"ok": False, "error": {"type": "Interrupted", "message": INTERRUPTED}}))
        sys.stderr.write(f"interrupted: {INTERRUPTED}\n")
        raise SystemExit(EXIT_INTERRUPTED) from None
    run()


if __name__ == "__main__":
    main()
