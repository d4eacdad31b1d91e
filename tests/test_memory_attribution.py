"""Whose a memory is: verbless remarks made sentences, memories that name no one told as what was said."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.memory.attribution import Vocabulary, attributed, remark
from lossless.memory.fragments import fragment_reason
from lossless.speakers import named_in


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        ("RIP my laptop.", "My laptop died."),  # what the idiom says
        ("R.I.P. the old kettle!", "The old kettle died."),
        ("Tea number four already.", "I said it was tea number four already."),  # the "it is" left out
        (
            "Graduation season again, two parties this weekend.",
            "I said it was graduation season again, two parties this weekend.",
        ),
        ("Wedding season again!", "I said it was wedding season again."),  # "-ing" but a noun
        ("Rosa's birthday tomorrow.", "I said it was Rosa's birthday tomorrow."),  # a name keeps its capital
        ("Day one today!", "I said it was day one today."),
        # no noun phrase: "it was" would not stand for what is left out
        ("After the gig, so tired.", None),
        ("Practising scales until midnight.", None),
        ("Stuck in traffic again.", None),
        ("Really looking forward to it.", None),
        ("Finally home.", None),
    ],
)
def test_a_verbless_remark_becomes_a_sentence_only_where_that_stays_true(said: str, expected: str | None) -> None:
    assert remark(said) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The bus was late again.", "Maya said the bus was late again."),
        ("There's a new bakery by the station.", "Maya said there's a new bakery by the station."),
        ("Jonas always overpacks.", "Maya said Jonas always overpacks."),  # a name keeps its capital
        ("Rosa wants a hamster now.", "Maya said Rosa wants a hamster now."),
        ("Café Luz got a bad review.", "Maya said Café Luz got a bad review."),
        ("Concert tickets sold out in minutes.", "Maya said concert tickets sold out in minutes."),  # "Concert
        ("Flights to Oslo are expensive.", "Maya said flights to Oslo are expensive."),  # tickets": no name
        ("She was thrilled, she kept grinning.", "Maya said: She was thrilled, she kept grinning."),
        ("He reads the rules aloud.", "Maya said: He reads the rules aloud."),  # "Maya said he…" could be Maya
        ("Maya went to Porto.", "Maya went to Porto."),  # names the speaker: unchanged
        ("Maya's bike got stolen.", "Maya's bike got stolen."),
    ],
)
def test_a_memory_that_names_no_one_is_what_its_speaker_said(text: str, expected: str) -> None:
    assert attributed(text, "Maya") == expected


def test_the_conversation_tells_a_common_word_from_a_name() -> None:
    words = Vocabulary.of(["Maya: the traffic on the ring road is bad", "Jonas: Milestone: Rosa lost a tooth"])
    assert "traffic" in words.lower and "rosa" in words.names and "traffic" not in words.names
    assert attributed("Traffic was awful today.", "Jonas", words) == "Jonas said traffic was awful today."
    assert attributed("Traffic was awful today.", "Jonas") == "Jonas said Traffic was awful today."  # no evidence
    assert attributed("Rosa was thrilled.", "Jonas", words) == "Jonas said Rosa was thrilled."
    # A label is no name: lowered after "said", whatever follows it; a name with a colon keeps its capital.
    assert attributed("Milestone: Rosa lost a tooth.", "Jonas", words) == "Jonas said milestone: Rosa lost a tooth."
    assert attributed("Rosa: dinner is ready.", "Jonas", words) == "Jonas said Rosa: dinner is ready."
    speakers = Vocabulary.of([], people=["Ana Lopez"])
    assert remark("Ana's turn again.", speakers) == "I said it was Ana's turn again."


_OPENINGS = ["The bus", "Traffic", "Rosa", "There", "It", "Everyone", "Petrol prices", "Concert tickets", "A friend",
             "She", "They", "Jonas", "Maya's cat", "Most of it", "Work", "I"]  # fmt: skip
_RESTS = ["was late again.", "is blooming!", "has been grey all week.", "went on sale, so annoying.",
          "keeps talking about it.", "got a bad review, apparently."]  # fmt: skip


@given(st.sampled_from(_OPENINGS), st.sampled_from(_RESTS), st.sampled_from(["Maya", "Ana Lopez", "the user"]))
def test_an_attributed_memory_names_its_speaker_and_keeps_every_word(opening: str, rest: str, speaker: str) -> None:
    text = f"{opening} {rest}"
    out = attributed(text, speaker)
    assert named_in(out, [speaker])
    assert out.endswith(text[1:]) and out[-len(text)].lower() == text[0].lower()  # only the first letter may change
    assert attributed(out, speaker) == out  # told once
    assert fragment_reason(out) is None


@given(
    st.sampled_from(["Coffee", "Tea", "Pizza", "Day", "Wedding", "Exam", "Birthday", "Rosa's"]),
    st.sampled_from(["number three", "season", "one", "week", "night", "party"]),
    st.sampled_from(["", " already", " again", " today", ", three invitations on the fridge"]),
    st.sampled_from([".", "!", "!!"]),
)
def test_a_noun_phrase_remark_is_said_in_full(head: str, noun: str, tail: str, end: str) -> None:
    said = f"{head} {noun}{tail}{end}"
    out = remark(said)
    assert out is not None and out.startswith("I said it was ") and out.endswith(".")
    assert out[len("I said it was ") :].lower() == f"{head} {noun}{tail}.".lower()  # the words as said
