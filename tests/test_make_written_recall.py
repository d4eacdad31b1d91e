"""scripts/make_written_recall.py: the shipped written recall sets are what their sources make, and a
source that is not in the documented shape is refused with the line that is wrong.

The written chats are only a fair yardstick if every question's evidence names turns that exist, in its
own conversation, and each turn's date comes from its session line.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "make_written_recall.py"


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_written_recall", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_sets_are_what_the_sources_make() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("split", ["dev", "test"])
def test_every_question_cites_turns_of_its_own_chat(split: str) -> None:
    data = json.loads((ROOT / "benchmarks" / "data" / f"recall-written-{split}.json").read_text(encoding="utf-8"))
    turns = {m["id"]: c["id"] for c in data["conversations"] for m in c["messages"]}
    assert len(data["conversations"]) >= 3 and len(data["questions"]) >= 200
    for question in data["questions"]:
        assert question["evidence"] and all(turns[e] == question["conversation_id"] for e in question["evidence"])
    assert ("never tune" in data["description"]) == (split == "test")


def test_a_source_is_parsed_into_dated_turns_and_questions(tmp_path: Path) -> None:
    source = tmp_path / "w99.txt"
    source.write_text(
        "# w99: Ana, Ben\n## 2023-05-07 14:02\n[1] Ana: Back from Lisbon!\n[2] Ben: How was it?\n"
        "## 2023-05-21 09:00\n[3] Ana: Still dreaming of the pastries.\n"
        "## questions\nQ multi | 1, 3 | Where did Ana travel, and what does she miss? | Lisbon; the pastries\n",
        encoding="utf-8",
    )
    conversation, questions = script().parse(source)
    messages = conversation["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert [m["created_at"] for m in messages] == [
        "2023-05-07T14:02:00Z",
        "2023-05-07T14:04:00Z",
        "2023-05-21T09:00:00Z",
    ]
    assert messages[2]["content"] == "Ana: Still dreaming of the pastries."
    assert questions[0]["evidence"] == ["w99-m0001", "w99-m0003"] and questions[0]["type"] == "multi"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("## 2023-05-07 14:02\n[2] Ana: hi\n", "should be [1]"),
        ("## 2023-05-07 14:02\n[1] Cleo: hi\n", "not Ana or Ben"),
        ("[1] Ana: hi\n", "session line"),
        ("## 2023-05-07 14:02\n[1] Ana: hi\n## questions\nQ single | 4 | Who? | Ana\n", "does not exist"),
        ("## 2023-05-07 14:02\n[1] Ana: hi\n## questions\nQ guess | 1 | Who? | Ana\n", "type one of"),
    ],
)
def test_a_source_out_of_shape_is_refused_with_its_line(tmp_path: Path, body: str, says: str) -> None:
    source = tmp_path / "w99.txt"
    source.write_text("# w99: Ana, Ben\n" + body, encoding="utf-8")
    module = script()
    with pytest.raises(module.SourceError, match=re.escape(says)) as refused:
        module.parse(source)
    assert "w99.txt:" in str(refused.value)


SLICE = {
    "id": "a99",
    "kind": "agent",
    "source": "corpus/session.jsonl",
    "messages": [
        {
            "id": "a99-m0000",
            "role": "user",
            "content": "make the retry limit five",
            "created_at": "2026-01-01T10:00:00Z",
        },
        {
            "id": "a99-m0001",
            "role": "assistant",
            "content": "[tool call: Edit] {}",
            "created_at": "2026-01-01T10:01:00Z",
        },
    ],
}


def test_agent_questions_are_read_over_their_sessions_slice(tmp_path: Path) -> None:
    source = tmp_path / "a99.txt"
    source.write_text(
        "# a99\nQ edit | a99-m0001 | Where did the retry limit change? | the upload client\n"
        "Q request | a99-m0000 | What did the user want the retry limit to be? | five\n",
        encoding="utf-8",
    )
    conversation, questions = script().parse_agent(source, {"a99": SLICE})
    assert conversation is SLICE  # the slice whole, as the generated split ships it
    assert [q["type"] for q in questions] == ["agent-edit", "agent-request"]
    assert questions[0]["evidence"] == ["a99-m0001"] and questions[1]["id"] == "a99-q002"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("# a98\n", "no agent session 'a98'"),
        ("# a99\nQ edit | a99-m0007 | Where? | there\n", "names no message of a99"),
        ("# a99\nQ guess | a99-m0001 | Where? | there\n", "type one of"),
        ("# a99\nWhere did it change? | there\n", "want 'Q type"),
        ("a99\n", "the first line must be '# aNN'"),
    ],
)
def test_an_agent_source_out_of_shape_is_refused(tmp_path: Path, text: str, says: str) -> None:
    source = tmp_path / "a99.txt"
    source.write_text(text, encoding="utf-8")
    module = script()
    with pytest.raises(module.SourceError, match=re.escape(says)):
        module.parse_agent(source, {"a99": SLICE})
