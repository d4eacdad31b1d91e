"""scripts/make_recall_data.py: the shipped recall datasets are what the seeded generator writes.

The recall figures in docs/ are only reproducible if ``benchmarks/data/recall-{dev,test}.json`` are
exactly the generator's output; format 3's ``aggregate`` questions are only fair if each one's
evidence is every turn where the person it names told a fact of its theme, in different sessions; and
format 4's ``adversarial`` questions only test what they claim if they name the person who did *not*
tell the fact, and that person never told one of its topic.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data"


@pytest.fixture(scope="module")
def generated(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("recall-data")
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_recall_data.py"), "--corpus", str(corpus), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    return out


@pytest.mark.parametrize("split", ["dev", "test"])
def test_the_shipped_datasets_are_the_generators_output_byte_for_byte(generated: Path, split: str) -> None:
    name = f"recall-{split}.json"
    assert (generated / name).read_bytes() == (DATA / name).read_bytes()


@pytest.mark.parametrize("split", ["dev", "test"])
def test_aggregate_questions_come_last_and_cite_every_turn_of_the_person_named(split: str) -> None:
    data: dict[str, Any] = json.loads((DATA / f"recall-{split}.json").read_text(encoding="utf-8"))
    assert data["format"] == 5
    questions = data["questions"]
    kinds = [q["type"] for q in questions]
    first, last = kinds.index("aggregate"), kinds.index("adversarial")
    chats = [
        q for q in questions if q["conversation_id"].startswith("c") and q["type"] not in ("aggregate", "adversarial")
    ]
    assert [q["id"] for q in chats] == [
        f"{split}-q{i:04d}" for i in range(285)
    ]  # format 2's chat questions keep their ids
    assert set(kinds[285:first]) <= {"agent-edit", "agent-error"}  # then the agent sessions' questions
    assert set(kinds[first:last]) == {"aggregate"}
    assert [q["id"] for q in questions] == [f"{split}-q{i:04d}" for i in range(len(questions))]
    messages = {m["id"]: m for c in data["conversations"] for m in c["messages"]}
    for question in questions[first:last]:
        evidence = question["evidence"]
        assert len(evidence) >= 2
        sessions = {key.split("-")[1] for key in evidence}
        assert len(sessions) >= 2, question["id"]
        speakers = {messages[key]["content"].split(":", 1)[0] for key in evidence}
        assert len(speakers) == 1, question["id"]
        (speaker,) = speakers
        assert speaker in question["question"] and speaker in question["literal"]
        assert all(key.startswith(question["conversation_id"] + "-") for key in evidence)


@pytest.mark.parametrize("split", ["dev", "test"])
def test_adversarial_questions_come_last_and_name_the_person_who_did_not_tell_it(split: str) -> None:
    data: dict[str, Any] = json.loads((DATA / f"recall-{split}.json").read_text(encoding="utf-8"))
    questions = data["questions"]
    kinds = [q["type"] for q in questions]
    first = kinds.index("adversarial")
    assert first == kinds.index("aggregate") + sum(k == "aggregate" for k in kinds)  # format 3's ids stay
    assert set(kinds[first:]) == {"adversarial"}
    assert len(questions) - first >= 30
    conversations = {c["id"]: c for c in data["conversations"]}
    for question in questions[first:]:
        conversation = conversations[question["conversation_id"]]
        speakers = {m["content"].split(":", 1)[0] for m in conversation["messages"]}
        assert len(speakers) == 2
        (teller,) = {m["content"].split(":", 1)[0] for m in conversation["messages"] if m["id"] in question["evidence"]}
        (other,) = speakers - {teller}
        for wording in (question["question"], question["literal"]):
            assert other in wording and teller not in wording, question["id"]
        # the fact is one a single-fact question asks its teller about, with the same evidence
        assert any(
            q["type"] == "single" and q["evidence"] == question["evidence"] and teller in q["question"]
            for q in questions[:first]
        ), question["id"]
