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
        "AssembledContext",
        "AfterTurnResult",
        "CompactionResult",
    ):
        assert name in lossless.__all__


def test_result_types_serialise_one_way() -> None:
    """assemble / after_turn / compact results each have the one to_dict() every adapter answers with."""
    from dataclasses import fields

    result = lossless.CompactionResult(
        conversation_id=3, mode="full", stop_reason="done", tokens_before=9, tokens_after=4
    )
    shape = result.to_dict()
    assert {f.name for f in fields(result)} - {"summaries"} <= set(shape)  # every field is there
    assert {"summaries_by_depth", "summaries_by_level", "trigger", "run_id"} <= set(shape)
    turn = lossless.AfterTurnResult(lossless.IngestResult(3), result, 4)
    assert turn.to_dict()["compaction"] == shape
    assert turn.to_dict()["ingest"] == lossless.IngestResult(3).to_dict()


def test_import_does_not_pull_optional_dependencies() -> None:
    heavy = ("tiktoken", "numpy", "psycopg", "openai", "anthropic")
    code = f"import sys, lossless; print(','.join(m for m in {heavy!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
