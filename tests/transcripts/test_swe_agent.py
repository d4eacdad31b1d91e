"""SWE-agent trajectories: the history as messages, function calls paired with observations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lossless.errors import TranscriptError
from lossless.records import ToolPart
from tests.conftest import corpus_transcripts

from .helpers import FIXTURES, entries, infos, read

TRAJ = FIXTURES / "swe-agent" / "task-1.traj"


def test_history_becomes_messages() -> None:
    events = read(TRAJ, "swe-agent")
    [info] = infos(events)
    assert info.session_id is not None and info.session_id.startswith("swe-agent:task-1:")
    assert info.metadata["exit_status"] == "submitted"
    found = entries(events)
    assert len(found) == 14
    assert [e.message.role for e in found[:4]] == ["system", "user", "assistant", "tool"]
    call = next(p for p in found[2].message.parts if isinstance(p, ToolPart))
    result = found[3].message.parts[0]
    assert isinstance(result, ToolPart) and result.call_id == call.call_id and call.name == "bash"
    assert found[2].message.metadata and found[2].message.metadata["message_type"] == "action"


def test_two_runs_of_one_task_are_two_sessions(tmp_path: Path) -> None:
    document = json.loads(TRAJ.read_text())
    document["history"][1]["content"] += " (second attempt)"
    other = tmp_path / "task-1.traj"
    other.write_text(json.dumps(document))
    assert infos(read(TRAJ, "swe-agent"))[0].session_id != infos(read(other, "swe-agent"))[0].session_id


def test_bad_documents(tmp_path: Path) -> None:
    path = tmp_path / "bad.traj"
    path.write_text('{"history": 3}')
    with pytest.raises(TranscriptError, match="'history' list"):
        read(path, "swe-agent")
    path.write_text('{"history": [')
    with pytest.raises(TranscriptError, match="not valid JSON"):
        read(path, "swe-agent")
    path.write_text(json.dumps({"history": [{"role": "robot", "content": "x"}]}))
    with pytest.raises(TranscriptError, match=r"history\[0\]: unknown role 'robot'"):
        read(path, "swe-agent")


@pytest.mark.corpus
@pytest.mark.parametrize("path", [p for p in corpus_transcripts() if p.suffix == ".traj"], ids=lambda p: p.name)
def test_real_trajectories(path: Path, corpus: Path) -> None:
    found = entries(read(path, "swe-agent"))
    assert found and found[0].message.role == "system"
