"""pi sessions (JSONL v1): roles, tool calls, shell commands, compactions, line keys."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from lossless.records import CompactionPart, ReasoningPart, ToolPart

from .helpers import FIXTURES, entries, infos, read, skipped

PI = FIXTURES / "pi" / "session.jsonl"


def test_session_and_messages() -> None:
    events = read(PI, "pi")
    [info] = infos(events)
    assert info.session_id == "9d4c2b7e-51a0-4f3e-8b6d-2e1f0a9c8b71"
    assert info.metadata["cwd"] == "/home/ines/code/ledger"
    found = entries(events)
    assert len(found) == 15
    assert Counter(s.kind for s in skipped(events)) == {"session": 1, "thinking_level_change": 1, "model_change": 1}
    assert all(e.key.startswith("pi:") and e.key == e.message.event_key for e in found)


def test_role_mapping() -> None:
    found = entries(read(PI, "pi"))
    assistant = found[1].message
    assert [type(p).__name__ for p in assistant.parts] == ["ReasoningPart", "TextPart", "ToolPart"]
    assert isinstance(assistant.parts[0], ReasoningPart) and assistant.parts[0].signature
    assert assistant.metadata and assistant.metadata["model"]
    tool = found[2].message
    assert tool.role == "tool" and tool.metadata == {"host_role": "toolResult"}
    shell = next(e.message for e in found if (e.message.metadata or {}).get("host_role") == "bashExecution")
    assert shell.role == "user"
    part = shell.parts[0]
    assert isinstance(part, ToolPart) and part.name == "bash" and isinstance(part.input, dict)
    failed = next(e.message for e in found if e.message.content.startswith("[tool error]"))
    assert failed.parts[0].status == "error"  # type: ignore[union-attr]


def test_aborted_message_and_compaction() -> None:
    found = entries(read(PI, "pi"))
    aborted = next(e.message for e in found if not e.message.parts)
    assert aborted.role == "assistant" and aborted.content == ""
    assert aborted.metadata and aborted.metadata["stopReason"] == "aborted" and aborted.metadata["errorMessage"]
    compaction = next(
        e.message for e in found if isinstance(e.message.parts[:1] and e.message.parts[0], CompactionPart)
    )
    part = compaction.parts[0]
    assert isinstance(part, CompactionPart) and part.tokens_before and part.metadata
    assert "firstKeptEntryIndex" in part.metadata


def test_keys_are_stable_and_resumable() -> None:
    full = entries(read(PI, "pi"))
    assert [e.key for e in entries(read(PI, "pi"))] == [e.key for e in full]
    middle = full[6]
    assert [e.key for e in entries(read(PI, "pi", start_offset=middle.end_offset))] == [e.key for e in full[7:]]


def test_identical_lines_at_different_positions_are_two_entries(tmp_path: Path) -> None:
    header = '{"type":"session","id":"s","timestamp":"2026-01-01T00:00:00Z"}'
    same = '{"type":"message","message":{"role":"user","content":"ok"}}'
    path = tmp_path / "s.jsonl"
    path.write_text(
        "\n".join([header, same, '{"type":"message","message":{"role":"assistant","content":"?"}}', same]) + "\n"
    )
    found = entries(read(path, "pi"))
    assert [e.message.content for e in found] == ["ok", "?", "ok"]
    assert len({e.key for e in found}) == 3  # the repeated line is a second message, not the first again
    # The keys are positions: a re-read, and a read resumed in the middle, give the same ones.
    assert [e.key for e in entries(read(path, "pi"))] == [e.key for e in found]
    resumed = entries(read(path, "pi", start_offset=found[0].end_offset))
    assert [e.key for e in resumed] == [e.key for e in found[1:]]
