"""The offline extractive answer: the sentences that answer, cited, dates written out, within the cap."""

from __future__ import annotations

from datetime import UTC, datetime

from lossless.retrieval.answers import (
    MAX_SENTENCES,
    Passage,
    extractive_answer,
    is_when_question,
    question_kind,
    readable,
)
from lossless.tokens import EstimatingCounter

PASSAGES = [
    Passage("msg#1", "Lars: I made soup, it was mostly okay.", datetime(2023, 3, 8, tzinfo=UTC)),
    Passage(
        "msg#2", "Lars: Home from Valparaiso! Still dreaming about the castle ruins.", datetime(2023, 4, 3, tzinfo=UTC)
    ),
    Passage(
        "msg#3",
        "Mei: I started Korean on an app yesterday, every morning before work.",
        datetime(2023, 5, 2, tzinfo=UTC),
    ),
]


def test_a_when_question_gets_the_date_written_out() -> None:
    assert is_when_question("When did Lars get back from Valparaiso?")
    text, cited = extractive_answer("When did Lars get back from Valparaiso?", PASSAGES, EstimatingCounter(), 200) or (
        "",
        (),
    )
    assert (
        text.splitlines()[0]
        == "[msg#2] On 3 April 2023, Lars: Home from Valparaiso! Still dreaming about the castle ruins."
    )
    assert cited[0] == "msg#2"
    text, _ = extractive_answer("When did Mei start learning Korean?", PASSAGES, EstimatingCounter(), 200) or ("", ())
    assert "1 May 2023" in text.splitlines()[0]


def test_the_answer_fits_the_cap_and_nothing_matching_gives_none() -> None:
    found = extractive_answer("What did Lars cook?", PASSAGES, EstimatingCounter(), 60)
    assert found is not None and EstimatingCounter().count(found[0]) <= 60
    assert extractive_answer("zebra quantum?", [], EstimatingCounter(), 100) is None


DAY = datetime(2024, 3, 5, tzinfo=UTC)


def answer(question: str, passages: list[Passage], cap: int = 400) -> list[str]:
    found = extractive_answer(question, passages, EstimatingCounter(), cap)
    assert found is not None
    return found[0].splitlines()


def test_question_kinds() -> None:
    assert question_kind("When did Ana move?") == "when"
    assert question_kind("Which day of the week is choir?") == "when"
    assert question_kind("Who wrote the book Ana was reading?") == "who"
    assert question_kind("Where did Ana go on holiday?") == "where"
    assert question_kind("How long did the race take?") == "amount"
    assert question_kind("Which file did we change to add the retry?") == "file"
    assert question_kind("What went wrong when we ran the linter?") == "error"
    assert question_kind("What did Ana bake?") == "what"
    assert question_kind("Which employer is Ana joining?") == question_kind("What novel is Ana reading?") == "which"
    assert question_kind("What kind of music does Ana like?") == "what"


def test_a_which_question_prefers_a_sentence_naming_the_thing() -> None:
    passages = [
        Passage("msg#1", "Ana: Work has been a slog lately, honestly.", DAY),
        Passage("msg#2", "Ana: Told them at work today: I'm starting at Ravenpoint Energy soon.", DAY),
    ]
    # Both share "work" and the search put the slog first; the one naming a place of work answers.
    assert answer("Which employer is Ana going to work for?", passages)[0].startswith("[msg#2]")


def test_a_when_question_writes_out_the_date_a_relative_time_points_to() -> None:
    passages = [
        Passage("msg#1", "Ana: The choir was lovely.", DAY),
        Passage("msg#2", "Ana: We moved into the new flat last Friday, finally!", DAY),
    ]
    lines = answer("When did Ana move into the new flat?", passages)
    assert (
        lines[0] == "[msg#2] Ana: We moved into the new flat on Friday, 1 March 2024, finally! (said on 5 March 2024)"
    )


def test_small_talk_said_again_and_again_loses_to_the_fact() -> None:
    # The search put the small talk first, and it shares "work" with the question; it is said in three messages.
    filler = [Passage(f"msg#{i}", "Ana: Work was busy but fine.", DAY) for i in (1, 2, 3)]
    fact = Passage("msg#9", "Ana: I enrolled in an evening class on astronomy at the college.", DAY)
    lines = answer("What is Ana studying after work?", [*filler, fact])
    assert lines[0].startswith("[msg#9]")
    assert sum("busy but fine" in line for line in lines) <= 1  # the same words are quoted once


def test_the_reply_to_a_turn_that_asked_about_the_subject_is_quoted() -> None:
    passages = [
        Passage("msg#10", "Ben: Have you been to the jazz club on the market square yet?", DAY, 0, False, 1),
        Passage("msg#11", "Ana: Yes! We went there last week, the pierogi was incredible.", DAY, 0, True, 1),
        Passage("msg#40", "Ana: There's a jazz club opening near the office.", DAY, 1, False, 1),
    ]
    lines = answer("What did Ana think of the jazz club on the market square?", passages)
    assert lines[0].startswith("[msg#11]") and "pierogi" in lines[0]


def test_a_who_or_where_question_prefers_a_sentence_naming_someone_or_somewhere() -> None:
    passages = [
        Passage("msg#1", "Ana: I need a holiday so badly, honestly.", DAY),
        Passage("msg#2", "Ana: Home from our holiday in Porto! Still dreaming about the harbour.", DAY),
    ]
    assert answer("Where did Ana go on holiday?", passages)[0].startswith("[msg#2]")


def test_a_tool_call_reads_as_what_it_did_and_its_error_answers_what_went_wrong() -> None:
    call = '[tool call: Bash] {"command": "golangci-lint run ./...", "description": "Run the linter"}'
    assert readable(call) == "Bash: golangci-lint run ./... — Run the linter"
    edit = '[tool call: Edit] {"file_path": "/src/cli/hooks_handlers.go", "old_string": "a"}'
    assert readable(edit) == "Edit: /src/cli/hooks_handlers.go"
    assert readable("[tool error] Exit code 127") == "Tool error: Exit code 127"
    passages = [
        Passage("msg#5", call, DAY, 0, False, 1),
        Passage("msg#6", "[tool error] Exit code 127\n(eval):1: command not found: golangci-lint", DAY, 0, True, 1),
        Passage("msg#7", "I ran the linter and it looked fine earlier.", DAY, 1, False, 1),
    ]
    lines = answer("What went wrong when we ran golangci lint run?", passages)
    assert any(line.startswith("[msg#6]") and "Exit code 127" in line for line in lines[:2])
    file_lines = answer("Which file did we change to add the hooks handler?", [Passage("msg#3", edit, DAY)])
    assert "hooks_handlers.go" in file_lines[0]


def test_at_most_max_sentences_lines_each_cited_within_the_cap() -> None:
    passages = [Passage(f"msg#{i}", f"Ana: The garden plan number {i} has roses and tulips.", DAY) for i in range(20)]
    found = extractive_answer("What is in Ana's garden plan?", passages, EstimatingCounter(), 2000)
    assert found is not None
    text, cited = found
    assert len(text.splitlines()) == MAX_SENTENCES and len(cited) == MAX_SENTENCES
    assert all(line.startswith("[msg#") for line in text.splitlines())
    small = extractive_answer("What is in Ana's garden plan?", passages, EstimatingCounter(), 50)
    assert small is not None and EstimatingCounter().count(small[0]) <= 50
