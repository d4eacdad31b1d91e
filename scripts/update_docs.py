"""Regenerate the parts of the docs that are derived from code (run after changing settings).

python scripts/update_docs.py          # rewrite in place
python scripts/update_docs.py --check  # exit 1 if anything is stale (tests do this)
"""

from __future__ import annotations

import sys
from pathlib import Path

from lossless.config import settings_markdown

ROOT = Path(__file__).resolve().parent.parent
BLOCKS = {
    ROOT / "docs" / "configuration.md": ("<!-- settings:start -->", "<!-- settings:end -->", settings_markdown),
}


def rendered(path: Path) -> str:
    start, end, make = BLOCKS[path]
    text = path.read_text(encoding="utf-8")
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    return f"{head}{start}\n{make()}{end}{tail}"


def main() -> int:
    stale = []
    for path in BLOCKS:
        new = rendered(path)
        if new != path.read_text(encoding="utf-8"):
            stale.append(path)
            if "--check" not in sys.argv:
                path.write_text(new, encoding="utf-8")
    if stale and "--check" in sys.argv:
        print("stale: " + ", ".join(str(p) for p in stale) + " (run python scripts/update_docs.py)")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
