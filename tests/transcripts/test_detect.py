"""Format detection (``lossless.transcripts``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lossless.errors import InputError
from lossless.transcripts import FORMATS, detect_format, reader_for, why_unrecognised
from tests.conftest import corpus_transcripts

from .helpers import FIXTURES


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("claude-code/session.jsonl", "claude-code"),
        ("claude-code/session/subagents/agent-abc1234.jsonl", "claude-code"),
        ("pi/session.jsonl", "pi"),
        ("openclaw/session.jsonl", "openclaw"),
        ("swe-agent/task-1.traj", "swe-agent"),
        ("openai-chat/chat.json", "openai-chat"),
        ("openai-chat/chat.jsonl", "openai-chat"),
        ("bad/not-a-transcript/notes.txt", None),
        ("bad/not-a-transcript/data.json", None),
    ],
)
def test_fixtures_are_recognised(path: str, expected: str | None) -> None:
    assert detect_format(FIXTURES / path) == expected


def test_claude_code_file_that_starts_with_titles(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    records = [
        {"type": "summary", "summary": "Title", "leafUuid": "u1"},
        {"type": "user", "uuid": "u1", "sessionId": "s"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    assert detect_format(path) == "claude-code"


def test_reasons_for_unrecognised_files(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text("{broken\n")
    assert detect_format(path) is None
    assert "line 1 is not valid JSON" in why_unrecognised(path)
    path.write_text("")
    assert why_unrecognised(path) == "it is empty"
    assert "cannot be read" in why_unrecognised(tmp_path / "missing.jsonl")


def test_reader_lookup() -> None:
    assert {reader_for(name).format for name in FORMATS} == set(FORMATS)
    with pytest.raises(InputError, match="unknown transcript format 'word'"):
        reader_for("word")


@pytest.mark.corpus
def test_every_corpus_transcript_is_recognised(corpus: Path) -> None:
    found = {str(p.relative_to(corpus)): detect_format(p) for p in corpus_transcripts()}
    assert len(found) >= 13 and None not in found.values(), found
