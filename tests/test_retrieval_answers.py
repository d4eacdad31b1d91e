"""The offline extractive answer: the sentences that answer, cited, dates written out, within the cap."""

from __future__ import annotations

from datetime import UTC, datetime

from lossless.retrieval.answers import Passage, extractive_answer, is_when_question
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
