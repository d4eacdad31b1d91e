"""The fragment checker: whole statements pass, headings, list stubs, code, tool noise and clipped clauses fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.memory.fragments import _NOUN_NEXT as _DETERMINED
from lossless.memory.fragments import _VERBS, fragment_reason, has_verb, is_fragment, small_talk_reason

LABELLED = Path(__file__).parent / "data" / "fragments-labelled.json"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("**Root Cause Analysis**: I identified:", "heading"),
        ("## Fix", "heading"),
        ("- the cache key", "list stub"),
        ("[tool call: Edit] {}", "tool noise"),
        ("if (x == 1) { y(); }", "code"),
        ("The assistant updated the", "unfinished"),
        ("Fix the flaky login test.", "no subject"),
        ("Thanks!", "too short"),
        ("The user's favourite colour…", "unfinished"),
        ("Maya went to Porto on 20 September 2023.", None),
        ("Change of plan, Tom is keeping the hatchback after all.", None),
        ("Maya's heating broke, brr.", None),  # irregular past tenses are verbs
        ("Even a tiny bit of it is too much.", None),
        ("私は抹茶が大好きです。", None),
        # a contraction holds its verb and its subject; an "-s" verb agrees with the subject before it
        ("There's a vegetarian place near the station that's always full.", None),
        ("It's a great place.", None),
        ("Let's meet on Friday.", None),  # "let" of a chat, not of code
        ("Maya always overpacks though.", None),
        ("The middle drags, then it grabs Jonas.", None),
        ("Coffee number three already.", "no verb"),
        ("Two coats, two very sore backs.", "no verb"),
    ],
)
def test_reasons(text: str, reason: str | None) -> None:
    assert fragment_reason(text) == reason
    assert is_fragment(text) is (reason is not None)


def test_precision_on_the_hand_labelled_sample() -> None:
    rows = json.loads(LABELLED.read_text(encoding="utf-8"))
    flagged = [r for r in rows if is_fragment(r["text"])]
    precision = sum(1 for r in flagged if r["fragment"]) / len(flagged)
    recall = sum(1 for r in flagged if r["fragment"]) / sum(1 for r in rows if r["fragment"])
    assert len(rows) >= 140 and precision >= 0.9 and recall >= 0.9


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Long time no chat!", "greeting"),
        ("Good morning", "greeting"),
        ("Thanks for the recipe!", "thanks"),
        ("Happy anniversary in advance!", "wishes"),
        ("Congratulations!!", "wishes"),
        ("Good luck, Maya!", "wishes"),  # a speaker's name is no fact
        ("That's a big step.", "reaction"),
        ("No way, that's brilliant.", "reaction"),
        ("I'm so happy for you!", "reaction"),
        ("That sounds like a plan.", "reaction"),
        ("You and your spicy food.", "reaction"),
        ("A dog!", "exclamation"),
        ("After three years!", "exclamation"),
        ("No backing out.", "remark"),  # verbless, names nothing
        ("So no more games for a while then.", "remark"),
        ("Loud in the best way.", "remark"),  # alone; as the answer to a question the extractor keeps it
        ("That's the dream.", "reaction"),
        # facts are kept
        ("Thanks for helping me move last week.", None),
        ("Hello from Lisbon!", None),
        ("Home from Porto!", None),
        ("My new puppy!", None),
        ("Day one today!", None),
        ("It's a golden retriever.", None),
        ("That was in 2019.", None),
        ("I love that place.", None),
        ("Coffee number three already.", None),  # countable, about the speaker: kept (see the module docstring)
        ("Two coats, two very sore backs.", None),  # a remark's number may be spelt out
        ("Just Wednesdays, two hours.", None),
        ("Still our favourite trip.", None),  # something of the speaker's
        ("A tiny island with no phone signal.", "remark"),  # "signal" after "no" is a noun: verbless
        ("Practising with the app until then, and maybe a tutor later.", None),  # "-ing": what they are doing
        ("Morning run done.", None),
        ("我今天很开心！", None),
    ],
)
def test_small_talk(text: str, reason: str | None) -> None:
    assert small_talk_reason(text, ("Maya", "Jonas")) == reason


def test_has_verb() -> None:
    assert has_verb("There's homework though.")
    assert has_verb("She always overpacks.")
    assert not has_verb("Home from Porto.")
    assert not has_verb("Two coats, two very sore backs.")  # "backs" follows no subject: a noun
    # after a determiner or "no" a word is a noun ("no phone signal", "a walk"); a noun that starts with a
    # verb is no inflection of it ("signal" is no "sign", "teacher" no "teach")
    assert not has_verb("A tiny island with one shop and no phone signal.")
    assert not has_verb("Best teacher of the year.")
    assert not has_verb("Still the plan.")
    assert not has_verb("Day one on 8 May 2023.")  # the month, not the modal
    assert has_verb("She signals left and plans ahead.")
    assert has_verb("May I join?")
    assert fragment_reason("Coffee with no sign of the rain.") == "no verb"


@given(st.sampled_from(sorted(_DETERMINED)), st.sampled_from(sorted(_VERBS)))
def test_a_verb_after_a_determiner_is_a_noun(determiner: str, verb: str) -> None:
    assert not has_verb(f"Only {determiner} {verb} here.")
