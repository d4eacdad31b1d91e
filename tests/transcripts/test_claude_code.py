"""Claude Code transcripts: records to messages, sub-agents, compactions, resumable reads."""

from __future__ import annotations

from collections import Counter

import pytest

from lossless.records import CompactionPart, ReasoningPart, TextPart, ToolPart
from tests.conftest import corpus_transcripts

from .helpers import FIXTURES, entries, infos, read, skipped

MAIN = FIXTURES / "claude-code" / "session.jsonl"
SUB = FIXTURES / "claude-code" / "session" / "subagents" / "agent-abc1234.jsonl"


def test_main_session_messages_and_roles() -> None:
    events = read(MAIN, "claude-code")
    found = [e for e in entries(events) if e.thread is None]
    assert len(found) == 20
    assert Counter(e.message.role for e in found) == {"assistant": 10, "tool": 5, "user": 4, "system": 1}
    info = infos(events)
    assert info[0].session_id == "11111111-2222-3333-4444-555555555555"
    assert info[0].metadata["gitBranch"] == "main"
    assert [i.title for i in info if i.title] == ["Fix E501 in render.py; render_title callers"]
    kinds = Counter(s.kind for s in skipped(events))
    assert kinds == {
        "progress:hook_progress": 1,
        "summary": 1,
        "system:turn_duration": 1,
        "system:stop_hook_summary": 1,
        "file-history-snapshot": 1,
    }
    assert all(s.size > 0 for s in skipped(events))  # every record left out is reported with its size


def test_inline_subagent_progress_becomes_the_subagents_thread() -> None:
    events = read(MAIN, "claude-code")
    inline = [e for e in entries(events) if e.thread is not None]
    assert [(e.thread, e.key, e.message.role) for e in inline] == [
        ("abc1234", "f1d0ea34-aeef-45ba-8094-30e5e594f484", "user")
    ]
    assert inline[0].message.content.startswith("List every caller of render_title()")
    (thread,) = [i for i in infos(events) if i.thread is not None]
    assert thread.thread == "abc1234"
    assert thread.metadata["parent_tool_call_id"] == "toolu_01KqUOo9vrzlN5VPX0Xtl9dZ"
    # The sub-agent's own file holds the same record under the same key: stored once.
    assert "f1d0ea34-aeef-45ba-8094-30e5e594f484" in {e.key for e in entries(read(SUB, "claude-code"))}


def test_blocks_become_parts_and_keys_are_record_uuids() -> None:
    found = entries(read(MAIN, "claude-code"))
    assert all(e.key == e.message.event_key for e in found)
    assert len({e.key for e in found}) == len(found)
    thinking = found[1].message
    assert isinstance(thinking.parts[0], ReasoningPart) and thinking.parts[0].signature
    assert thinking.metadata and thinking.metadata["provider_message_id"].startswith("msg_")
    call = found[3].message.parts[0]
    assert isinstance(call, ToolPart) and call.name == "Bash" and call.input and call.is_call
    result = found[4].message
    assert result.role == "tool"
    assert isinstance(result.parts[0], ToolPart) and result.parts[0].status == "error"
    assert result.parts[0].call_id == call.call_id


def test_parallel_tool_calls_share_one_response() -> None:
    found = entries(read(MAIN, "claude-code"))
    read_call, grep_call = found[5].message, found[6].message
    assert read_call.metadata and grep_call.metadata
    assert read_call.metadata["provider_message_id"] == grep_call.metadata["provider_message_id"]
    results = {p.call_id for e in found[7:9] for p in e.message.parts if isinstance(p, ToolPart)}
    calls = {p.call_id for m in (read_call, grep_call) for p in m.parts if isinstance(p, ToolPart)}
    assert results == calls


def test_host_compaction_and_meta_records() -> None:
    found = entries(read(MAIN, "claude-code"))
    boundary = next(e.message for e in found if e.message.role == "system")
    part = boundary.parts[0]
    assert isinstance(part, CompactionPart) and part.auto is True and (part.tokens_before or 0) > 1000
    summary = next(e.message for e in found if (e.message.metadata or {}).get("host_role") == "compact_summary")
    assert isinstance(summary.parts[0], CompactionPart) and "continued" in (summary.parts[0].summary or "")
    caveat = next(e.message for e in found if (e.message.metadata or {}).get("meta"))
    assert isinstance(caveat.parts[0], TextPart) and caveat.parts[0].synthetic


def test_subagent_file_is_its_own_conversation() -> None:
    events = read(SUB, "claude-code")
    [info] = infos(events)
    assert info.session_id == "11111111-2222-3333-4444-555555555555/agent-abc1234"
    assert info.parent_session_id == "11111111-2222-3333-4444-555555555555"
    assert info.metadata["subagent_id"] == "abc1234"
    assert len(entries(events)) == 6  # sidechain records are kept in a sub-agent file


def test_resuming_from_any_entry_gives_the_same_keys() -> None:
    full = entries(read(MAIN, "claude-code"))
    for index, entry in enumerate(full[:-1]):
        rest = entries(read(MAIN, "claude-code", start_offset=entry.end_offset))
        assert [e.key for e in rest] == [e.key for e in full[index + 1 :]]
        assert rest[0].line == full[index + 1].line  # line numbers stay true after a resume


@pytest.mark.corpus
@pytest.mark.parametrize(
    "path", [p for p in corpus_transcripts() if p.suffix == ".jsonl" and "pi-mono" not in str(p)], ids=lambda p: p.name
)
def test_real_claude_code_files(path: object, corpus: object) -> None:
    from pathlib import Path

    assert isinstance(path, Path)
    events = read(path, "claude-code")
    found = entries(events)
    assert found and len({e.key for e in found}) == len(found)
    assert all(e.message.created_at is not None for e in found)
    assert entries(read(path, "claude-code")) == found  # deterministic
