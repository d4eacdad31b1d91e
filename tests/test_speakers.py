"""lossless.speakers: who said a message, and the speakers a question names."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from lossless.speakers import capitalised, named_in, speaker_label, spoken, without_names


def test_the_speaker_comes_from_the_metadata_first_then_a_name_prefix() -> None:
    assert speaker_label("Maya: Meet Noodle!", None) == ("Maya", 6)
    assert speaker_label("Maya: Meet Noodle!", {"speaker": "Ines"}) == ("Ines", 0)
    assert speaker_label("Mary Ann: hi there", {}) == ("Mary Ann", 10)
    assert speaker_label("hello", {"name": "Kwame"}) == ("Kwame", 0)
    assert speaker_label("hello", {"name": "  "}) is None


def test_roles_and_labels_are_no_speakers() -> None:
    assert speaker_label("user: hi", None) is None
    assert speaker_label("hi", {"speaker": "assistant"}) is None
    assert speaker_label("Note: the build is green", None) is None
    assert speaker_label("Error: disk full", None) is None
    assert speaker_label("maya: lower case is no name", None) is None
    assert speaker_label("Maya:no space after the colon", None) is None


def test_names_are_found_as_whole_words_with_or_without_a_possessive() -> None:
    names = ["Maya", "Jonas", "Mary Ann"]
    assert named_in("Which breed is the dog Jonas adopted?", names) == ["Jonas"]
    assert named_in("What did Maya's kids call Jonas’s cat?", names) == ["Maya", "Jonas"]
    assert named_in("Did Mary Ann and Maya meet?", names) == ["Mary Ann", "Maya"]
    assert named_in("the mayan ruins, maya, Mayas", names) == []
    assert named_in("anything", []) == []


def test_without_names_leaves_the_rest_of_the_question_as_it_was() -> None:
    names = ["Maya", "Jonas"]
    assert without_names("Which breed is the dog Jonas adopted?", names) == "Which breed is the dog adopted?"
    assert without_names("Which of Maya's children lost a tooth?", names) == "Which of children lost a tooth?"
    assert without_names("When did Maya and Jonas meet?", names) == "When did and meet?"
    assert without_names("no names here", names) == "no names here"
    assert without_names("Jonas?", names) == "?"


@given(st.lists(st.sampled_from(["Maya", "Jonas", "the", "dog", "Maya's", "adopted", "?", ","]), max_size=12))
def test_no_name_survives_and_no_other_word_is_lost(parts: list[str]) -> None:
    text = " ".join(parts)
    out = without_names(text, ["Maya", "Jonas"])
    assert named_in(out, ["Maya", "Jonas"]) == []
    kept = [w for w in re.findall(r"\w+", text) if w not in ("Maya", "Jonas", "s")]
    assert [w for w in re.findall(r"\w+", out) if w != "s"] == kept


def test_a_turn_named_by_its_metadata_is_spoken_as_the_prefix_form_writes_it() -> None:
    assert spoken("Meet Noodle!", {"speaker": "Maya"}) == "Maya: Meet Noodle!"
    assert spoken("Meet Noodle!", {"name": "Mary Ann"}) == "Mary Ann: Meet Noodle!"
    assert spoken("Maya: Meet Noodle!", {"speaker": "Maya"}) == "Maya: Meet Noodle!"  # named in the text too
    assert spoken("Maya: Meet Noodle!", None) == "Maya: Meet Noodle!"  # the prefix form itself
    assert spoken("Meet Noodle!", {"speaker": "assistant"}) == "Meet Noodle!"  # a role names nobody
    assert spoken("Meet Noodle!", None) == "Meet Noodle!"
    assert spoken("  ", {"speaker": "Maya"}) == "  "  # blank stays blank (nothing is embedded for it)


@given(st.text(max_size=40), st.sampled_from(["Maya", "Mary Ann", "assistant", ""]))
def test_spoken_reads_back_to_the_same_speaker_and_text(text: str, name: str) -> None:
    out = spoken(text, {"speaker": name})
    assert out.endswith(text)  # the text is kept whole, at most a name put before it
    if out != text:
        assert out == f"{name}: {text}"
        found = speaker_label(out, None)
        assert found is not None and found[0] == name  # the prefix form reads back the same speaker


def test_the_capitalised_words_after_the_first_are_the_candidate_names() -> None:
    assert capitalised("How does Grandma Iris want her toast served?") == ["Grandma", "Iris"]
    assert capitalised("Did Hiroshi's Toronto visit happen before Hiroshi's trip?") == ["Hiroshi", "Toronto"]
    assert capitalised("Where did I put the keys?") == []  # one letter, and the question's first word, are no names
    assert capitalised("When did Maya-Lee move?") == ["Maya-Lee"] and capitalised("") == []
