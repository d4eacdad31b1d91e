"""The public API: a sorted, complete ``__all__``; importing lossless stays light."""

from __future__ import annotations

import subprocess
import sys

import lossless


def test_all_is_sorted_and_importable() -> None:
    names = lossless.__all__
    # isort style, as ruff keeps it: CONSTANTS, then Classes, then functions.
    assert names == sorted(names, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n))
    assert len(set(names)) == len(names)
    for name in names:
        assert hasattr(lossless, name), name


def test_errors_and_values_are_exported() -> None:
    for name in (
        "LcmError",
        "InputError",
        "ContextEngine",
        "Message",
        "TextPart",
        "ToolPart",
        "Config",
        "CompactionEvent",
    ):
        assert name in lossless.__all__


def test_import_does_not_pull_optional_dependencies() -> None:
    heavy = ("tiktoken", "numpy", "psycopg", "openai", "anthropic")
    code = f"import sys, lossless; print(','.join(m for m in {heavy!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
