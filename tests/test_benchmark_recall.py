"""benchmarks/recall.py: what each wording asks, and that the plain baseline's query stays put."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import recall  # type: ignore[import-not-found]

DATASET: dict[str, Any] = {
    "conversations": [
        {
            "id": "c1",
            "messages": [
                {"id": "m1", "role": "user", "content": "Maya: I signed up for piano lessons on Thursdays."},
                {"id": "m2", "role": "assistant", "content": "Jonas: Lovely, which teacher?"},
            ],
        }
    ],
    "questions": [
        {
            "id": "q1",
            "conversation_id": "c1",
            "question": "What is Maya learning to play?",
            "literal": "Which lessons did Maya sign up for?",
            "evidence": ["m1"],
        },
        {"id": "q2", "conversation_id": "c1", "question": "Why did the build fail?", "evidence": ["m2"]},
    ],
}


def test_each_wording_asks_its_own_text() -> None:
    assert [q["question"] for q in recall.worded(DATASET, "paraphrase")["questions"]] == [
        "What is Maya learning to play?",
        "Why did the build fail?",
    ]
    assert [q["question"] for q in recall.worded(DATASET, "literal")["questions"]] == [
        "Which lessons did Maya sign up for?",
        "Why did the build fail?",  # no literal wording: as written
    ]
    assert [q["question"] for q in recall.worded(DATASET, "terse")["questions"]] == [
        "lessons Maya sign",
        "build fail",
    ]
    assert DATASET["questions"][0]["question"] == "What is Maya learning to play?"  # the input is left alone


def test_the_baseline_asks_the_same_words_in_the_literal_and_the_terse_wording() -> None:
    baseline = recall.Baseline(DATASET["conversations"])
    literal = recall.worded(DATASET, "literal")["questions"][0]["question"]
    terse = recall.worded(DATASET, "terse")["questions"][0]["question"]
    assert baseline.search(literal, "c1") == baseline.search(terse, "c1") == ["m1"]
    assert baseline.search("the of and", "c1") == []  # stopwords only: no query


def test_speakers_move_from_the_text_to_the_metadata() -> None:
    agent = {"id": "a1", "messages": [{"id": "x", "role": "assistant", "content": "Error: exit 1"}]}
    moved = recall.speakers_in_metadata({**DATASET, "conversations": [*DATASET["conversations"], agent]})
    chat = moved["conversations"][0]["messages"]
    assert [(m["content"], m["metadata"]) for m in chat] == [
        ("I signed up for piano lessons on Thursdays.", {"speaker": "Maya"}),
        ("Lovely, which teacher?", {"speaker": "Jonas"}),
    ]
    assert [m["id"] for m in chat] == ["m1", "m2"]  # evidence ids unchanged
    assert moved["conversations"][1] == agent  # no name prefix: left alone
    assert DATASET["conversations"][0]["messages"][0]["content"].startswith("Maya: ")  # the input is not changed


def test_session_dates_stamp_each_turn_with_its_sessions_start() -> None:
    """Turns no more than three hours apart are one session; a longer gap starts the next."""
    times = ["2023-05-08T13:56:00Z", "2023-05-08T14:20:00Z", "2023-05-08T16:50:00Z", "2023-05-09T09:00:00Z"]
    chat = {"id": "c1", "messages": [{"id": f"m{i}", "created_at": t} for i, t in enumerate(times)]}
    dated = recall.session_dated({"conversations": [chat]})["conversations"][0]["messages"]
    assert [m["created_at"] for m in dated] == [times[0], times[0], times[0], times[3]]
    assert [m["id"] for m in dated] == ["m0", "m1", "m2", "m3"]  # evidence ids and order unchanged
    assert chat["messages"][1]["created_at"] == times[1]  # the input is not changed
    assert recall.stored_as({"conversations": [chat]}, "turn", "as-written") == {"conversations": [chat]}


def test_one_role_makes_every_chat_turn_the_users_and_leaves_agent_sessions_alone() -> None:
    call = {"id": "x", "role": "assistant", "content": "[tool call: Bash]"}
    agent = {"id": "a1", "kind": "agent", "messages": [call]}
    stored = recall.one_role({**DATASET, "conversations": [*DATASET["conversations"], agent]})
    assert [(m["id"], m["role"]) for m in stored["conversations"][0]["messages"]] == [("m1", "user"), ("m2", "user")]
    assert stored["conversations"][1] == agent
    assert DATASET["conversations"][0]["messages"][1]["role"] == "assistant"  # the input is not changed


def test_the_runs_clock_is_frozen_at_the_newest_message_stored() -> None:
    """Every run of a dataset has the same "now": the newest message date of what it stores (padding too)."""
    chat = {"id": "c1", "messages": [{"created_at": "2023-05-08T13:56:00Z"}, {"created_at": "2023-06-01T09:00:00Z"}]}
    pad = {"id": "p1", "messages": [{"created_at": "2023-07-02T10:30:00+02:00"}]}
    clock = recall.frozen_clock([chat])
    assert clock() == clock() == datetime(2023, 6, 1, 9, tzinfo=UTC)
    assert recall.frozen_clock([chat, pad])() == datetime(2023, 7, 2, 8, 30, tzinfo=UTC)
