"""OpenAI-style chat lists (JSON and JSONL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lossless.errors import TranscriptError
from lossless.records import FilePart, ToolPart

from .helpers import FIXTURES, entries, infos, read

JSON = FIXTURES / "openai-chat" / "chat.json"
JSONL = FIXTURES / "openai-chat" / "chat.jsonl"


def test_json_list() -> None:
    found = entries(read(JSON, "openai-chat"))
    assert [e.message.role for e in found] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    call = found[2].message.parts[0]
    assert isinstance(call, ToolPart) and call.name == "lookup_order" and call.input == {"order_id": "HP-20931"}
    result = found[3].message.parts[0]
    assert isinstance(result, ToolPart) and result.call_id == call.call_id
    image = found[5].message.parts[1]
    assert isinstance(image, FilePart) and (image.url or "").startswith("data:image/")


def test_jsonl_with_parallel_calls() -> None:
    found = entries(read(JSONL, "openai-chat"))
    calls = [p for p in found[2].message.parts if isinstance(p, ToolPart)]
    assert len(calls) == 2
    results = [e.message.parts[0] for e in found[3:5]]
    assert {r.call_id for r in results} == {c.call_id for c in calls}  # type: ignore[union-attr]
    middle = found[3]
    rest = entries(read(JSONL, "openai-chat", start_offset=middle.end_offset))
    assert [e.key for e in rest] == [e.key for e in found[4:]]


def test_object_with_messages_and_roles(tmp_path: Path) -> None:
    path = tmp_path / "conv.json"
    path.write_text(
        json.dumps(
            {
                "id": "conv-7",
                "title": "T",
                "messages": [
                    {"role": "developer", "content": "rules"},
                    {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": '{"a": 1}'}},
                    {"role": "function", "name": "f", "content": "42"},
                ],
            }
        )
    )
    events = read(path, "openai-chat")
    assert infos(events)[0].session_id == "conv-7"
    found = entries(events)
    assert [e.message.role for e in found] == ["system", "assistant", "tool"]
    assert found[0].message.metadata == {"host_role": "developer"}
    assert found[1].message.parts[0].input == {"a": 1}  # type: ignore[union-attr]


def test_errors_name_the_message(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"role": "user", "content": "ok"}, {"role": "wizard", "content": "x"}]))
    with pytest.raises(TranscriptError, match=r"messages\[1\]: unknown role 'wizard'"):
        read(path, "openai-chat")
    path.write_text(json.dumps({"messages": "nope"}))
    with pytest.raises(TranscriptError, match="expected a JSON list"):
        read(path, "openai-chat")
    lines = tmp_path / "bad.jsonl"
    lines.write_text('{"role": "user", "content": "a"}\n["not", "an", "object"]\n')
    with pytest.raises(TranscriptError, match=r":2: is a JSON list"):
        read(lines, "openai-chat")
