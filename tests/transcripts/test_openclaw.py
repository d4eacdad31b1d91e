"""OpenClaw v3: the entry tree, the leaf path, and incremental reads that must not cross a branch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lossless.transcripts import NeedsFullRead

from .helpers import FIXTURES, entries, infos, read, skipped

OC = FIXTURES / "openclaw" / "session.jsonl"
ACTIVE = [
    "1a2b3c4d", "2b3c4d5e", "3c4d5e6f", "4d5e6f70", "5e6f7081",
    "708192a3", "8192a3b4", "92a3b4c5", "a3b4c5d6", "b4c5d6e7", "c5d6e7f8", "d6e7f809",
]  # fmt: skip


def test_only_the_leaf_path_is_the_conversation() -> None:
    events = read(OC, "openclaw")
    assert [e.key for e in entries(events)] == ACTIVE
    off = [s for s in skipped(events) if s.kind == "off-branch"]
    assert [s.line for s in off] == [6, 7]
    model_change = next(s for s in skipped(events) if s.kind == "model_change")
    assert model_change.key == "6f708192"  # on the path: incremental reads continue from it
    [info] = infos(events)
    assert info.session_id == "oc-session-1"


def test_compaction_entry() -> None:
    found = entries(read(OC, "openclaw"))
    compaction = next(e for e in found if e.key == "92a3b4c5").message
    assert compaction.parts[0].type == "compaction"
    assert compaction.parts[0].metadata == {"firstKeptEntryId": "5e6f7081"}


def test_incremental_read_continues_the_branch_or_asks_for_a_full_read(tmp_path: Path) -> None:
    events = read(OC, "openclaw")
    found = entries(events)
    last = found[-1]
    path = tmp_path / "s.jsonl"
    data = OC.read_bytes()
    extra = {
        "type": "message",
        "id": "e7f8091a",
        "parentId": last.key,
        "timestamp": "2026-02-27T20:00:00Z",
        "message": {"role": "user", "content": [{"type": "text", "text": "one more"}]},
    }
    path.write_bytes(data + (json.dumps(extra) + "\n").encode())
    more = entries(read(path, "openclaw", start_offset=len(data), last_entry_key=last.key))
    assert [e.key for e in more] == ["e7f8091a"]
    # A new entry that branches off an older one cannot be read incrementally.
    branch = {**extra, "id": "f8091a2b", "parentId": ACTIVE[2]}
    path.write_bytes(data + (json.dumps(branch) + "\n").encode())
    with pytest.raises(NeedsFullRead):
        list(read(path, "openclaw", start_offset=len(data), last_entry_key=last.key))
    # Read whole, the new branch is the conversation.
    assert [e.key for e in entries(read(path, "openclaw"))] == [*ACTIVE[:3], "f8091a2b"]


def test_cycles_in_parent_links_do_not_hang(tmp_path: Path) -> None:
    lines = [
        {"type": "session", "version": 3, "id": "loop"},
        {"type": "message", "id": "a", "parentId": "b", "message": {"role": "user", "content": "x"}},
        {"type": "message", "id": "b", "parentId": "a", "message": {"role": "assistant", "content": "y"}},
    ]
    path = tmp_path / "loop.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert [e.key for e in entries(read(path, "openclaw"))] == ["a", "b"]
