"""Statements that stand alone: speakers, prose without markup, dates written out, third person."""

from __future__ import annotations

import re
from datetime import date

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from lossless.memory.statements import (
    dates_named,
    format_date,
    prose_sentences,
    resolve_dates,
    speaker_of,
    third_person,
    with_subject,
)

SAID = date(2023, 5, 8)  # a Monday


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I went there yesterday.", "I went there on 7 May 2023."),
        ("We met last week.", "We met in the week before 8 May 2023."),
        ("I moved here two weeks ago.", "I moved here two weeks before 8 May 2023."),
        ("I fly to Oslo next month.", "I fly to Oslo in June 2023."),
        ("We married last year.", "We married in 2022."),
        ("I saw her last Friday.", "I saw her on Friday, 5 May 2023."),
        ("It was busy since last week.", "It was busy since the week before 8 May 2023."),
        ("I graduated in 2010.", "I graduated in 2010."),
    ],
)
def test_relative_dates_are_written_out(text: str, expected: str) -> None:
    out, moved = resolve_dates(text, SAID)
    assert out == expected and moved is (out != text)


def test_the_dates_a_statement_names_are_read_as_written() -> None:
    said = "Lars said the gym was packed on 7 July 2023 (said on 9 July 2023)."
    assert dates_named(said) == {"7 July 2023", "9 July 2023"}
    assert dates_named("The release moved from May 2024 to 2024-06-03, then to 2025.") == {
        "May 2024",
        "2024-06-03",
        "2025",
    }
    assert dates_named("Maya may come, or may not.") == frozenset()  # the verb is no month
    assert dates_named("on 7\n July   2023") == dates_named("on 7 July 2023")


@given(st.dates(date(1900, 1, 1), date(2099, 12, 31)), st.dates(date(1900, 1, 1), date(2099, 12, 31)))
def test_a_date_written_out_is_named_as_itself(one: date, other: date) -> None:
    """Every date the extractor writes out (:func:`format_date`) is found again, and two differ when they do."""
    first, second = (f"It happened on {format_date(d)}." for d in (one, other))
    assert dates_named(first) == {format_date(one)}
    assert (dates_named(first) == dates_named(second)) is (one == other)


def test_format_date() -> None:
    assert format_date(date(2023, 5, 7)) == "7 May 2023"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I love painting sunsets.", "Caroline loves painting sunsets."),
        ("I'm planning to go camping with my kids.", "Caroline is planning to go camping with their kids."),
        ("My dream is to have a family.", "Caroline's dream is to have a family."),
        ("I really enjoy pottery.", "Caroline really enjoys pottery."),
        ("I went to the group with you.", "Caroline went to the group with Melanie."),
        # "we" names the listener only when the sentence takes them in; else the speaker "and others"
        ("We need a plan.", "Caroline and others need a plan."),
        ("We went to Lisbon last week.", "Caroline and others went to Lisbon last week."),
        ("We adopted a puppy!", "Caroline and others adopted a puppy!"),
        ("We're calling her Noodle.", "Caroline and others are calling her Noodle."),
        ("We love our dog.", "Caroline and others love their dog."),
        ("We did it ourselves.", "Caroline and others did it themselves."),
        ("We're dog-sitting for my cousin.", "Caroline and others are dog-sitting for Caroline's cousin."),
        ("They invited us to the wedding.", "They invited Caroline and others to the wedding."),
        ("There's a puppy in our flat now.", "There's a puppy in Caroline's flat now."),
        ("We should meet up soon.", "Caroline and Melanie should meet up soon."),  # a proposal to the listener
        ("We could grab lunch on Friday.", "Caroline and Melanie could grab lunch on Friday."),
        ("Shall we grab lunch?", "Shall Caroline and Melanie grab lunch?"),
        ("We both love jazz.", "Caroline and Melanie both love jazz."),
        ("You and I should go hiking.", "Melanie and Caroline should go hiking."),
        ("The two of us should meet up.", "Caroline and Melanie should meet up."),
        ("Let's meet at our usual place.", "Caroline suggested that Caroline and Melanie meet at their usual place."),
        ("We should catch up at our usual cafe.", "Caroline and Melanie should catch up at their usual cafe."),
        # "you guys" / "you all" / "you two": the listener and the people with them
        ("Are you guys coming to the party?", "Are Melanie and the others coming to the party?"),
        ("I miss you guys.", "Caroline misses Melanie and the others."),
        ("I told you guys about the move.", "Caroline told Melanie and the others about the move."),
        ("You guys are the best.", "Melanie and the others are the best."),
        ("Y'all should come.", "Melanie and the others should come."),
        ("I love you all.", "Caroline loves Melanie and the others."),
        ("I miss you two!", "Caroline misses Melanie and their companion!"),
        ("Both of you are welcome.", "Melanie and their companion are welcome."),
        ("I got you two tickets.", "Caroline got Melanie two tickets."),  # "two" counts the tickets
        # a question put to "you" agrees too; "yourself" is the listener
        ("Do you need to carry medication now?", "Does Melanie need to carry medication now?"),
        ("Are you coming?", "Is Melanie coming?"),
        ("Haven't you seen it?", "Hasn't Melanie seen it?"),
        ("Did you do it yourselves?", "Did Melanie do it themselves?"),
        ("Did you have her written recipe?", "Did Melanie have her written recipe?"),  # after "did": bare verb
        ("Will you have time?", "Will Melanie have time?"),
        ("I want you to have it.", "Caroline wants Melanie to have it."),
        ("I think you have a point.", "Caroline thinks Melanie has a point."),
        ("Treat yourself.", "Treat Melanie."),
        ("What do you think?", "What does Melanie think?"),
        ("They have you covered.", "They have Melanie covered."),  # no question: the verb stays
        ("I no longer eat meat.", "Caroline no longer eats meat."),
        ("I barely slept.", "Caroline barely slept."),  # any "-ly" word before the verb is an adverb
        ("I rarely reply to emails.", "Caroline rarely replies to emails."),
        ("I apply for jobs daily.", "Caroline applies for jobs daily."),  # "-ly" verbs are verbs
        ("I no longer.", "Caroline no longer."),
        # set phrases with "my", "our" or "you" name no possession: they stay
        ("Oh my goodness, a dog!", "Oh my goodness, a dog!"),
        ("My bad, I forgot.", "My bad, Caroline forgot."),
        ("Oh my, that was close.", "Oh my, that was close."),
        ("Thank you for the map.", "Thank you for the map."),
        ("My dog ate my homework.", "Caroline's dog ate Caroline's homework."),  # a real possession is still told
        ("Oh my dog is sick.", "Oh Caroline's dog is sick."),
        # "you" as a subject takes a verb that agrees, as "I" does; modals and past tense stay
        ("You always overpack though.", "Melanie always overpacks though."),
        ("You need a checklist before you get off.", "Melanie needs a checklist before Melanie gets off."),
        ("I hope you like it.", "Caroline hopes Melanie likes it."),
        ("You rarely reply.", "Melanie rarely replies."),
        ("You should come.", "Melanie should come."),
        ("You went there.", "Melanie went there."),
        ("You'd hate it.", "Melanie would hate it."),
        ("You have a cat.", "Melanie has a cat."),
        ("You don't drink.", "Melanie doesn't drink."),
        ("You are a star.", "Melanie is a star."),
        # "you" as an object is only named
        ("I told you about it.", "Caroline told Melanie about it."),
        ("The middle drags, then it grabs you.", "The middle drags, then it grabs Melanie."),
        ("You and your spicy food.", "Melanie and their spicy food."),
        # "their"/"them" only where no one else could be meant: else the name
        ("I hurt my shoulder climbing.", "Caroline hurt their shoulder climbing."),
        ("I told you about my trip.", "Caroline told Melanie about Caroline's trip."),
        ("I hope you like your present.", "Caroline hopes Melanie likes Melanie's present."),
        ("I was nervous, but they seemed to like me.", "Caroline was nervous, but they seemed to like Caroline."),
        ("I have an exam on Friday, wish me luck.", "Caroline has an exam on Friday, wish Caroline luck."),
        ("I met Ana at my flat.", "Caroline met Ana at Caroline's flat."),
        ("We took my car.", "Caroline and others took Caroline's car."),
        # "let's" / "let us" propose: told as a proposal, never "Let Caroline and Melanie meet"
        ("Let us meet at the station.", "Caroline suggested that Caroline and Melanie meet at the station."),
        ("Let's not argue about it.", "Caroline suggested that Caroline and Melanie not argue about it."),
        (
            "I'm free on Friday, so let's grab lunch.",
            "Caroline is free on Friday, so Caroline suggested that Caroline and Melanie grab lunch.",
        ),
        (
            "Our landlord won't let us paint the walls.",
            "Caroline's landlord won't let Caroline and others paint the walls.",
        ),
    ],
)
def test_third_person(text: str, expected: str) -> None:
    assert third_person(text, "Caroline", "Melanie") == expected


def test_an_agents_we_is_the_agent_and_its_user() -> None:
    said = third_person("We can add a check in the hook.", "the assistant", "the user", we_with_other=True)
    assert said == "The assistant and the user can add a check in the hook."


def test_an_agents_our_is_the_projects() -> None:
    said = third_person(
        "Our tests pass now and we fixed our CI config.", "the assistant", "the user", we_with_other=True
    )
    assert said == "The tests pass now and the assistant and the user fixed the CI config."
    assert "the user's" not in third_person(
        "The conflict was just our lock file.", "the assistant", "the user", we_with_other=True
    )


def test_a_users_we_at_work_is_the_two_of_them_for_a_plan() -> None:
    plan = third_person("We need to fix the tui tests.", "the user", "the assistant", at_work=True)
    assert plan == "The user and the assistant need to fix the tui tests."
    past = third_person("We got a report from a customer.", "the user", "the assistant", at_work=True)
    assert past == "The user and others got a report from a customer."


def test_i_twice_in_a_row_both_agree() -> None:
    said = third_person("I think I see the issue.", "the assistant")
    assert said == "The assistant thinks the assistant sees the issue."


def test_we_without_a_known_listener_is_the_speaker_and_others() -> None:
    assert third_person("We should meet up soon.", "Maya") == "Maya and others should meet up soon."
    assert third_person("Let's meet soon.", "Maya") == "Maya suggested that Maya and others meet soon."
    assert third_person("I miss you guys.", "Maya") == "Maya misses you guys."  # no listener to name


_PIECES = ["my ", "oh ", "you ", "god", "thank", "I ", "\x00", "0", ",", "!", "a", "we ", "us ", "guys ", "two ",
           "all ", "let's ", "should ", "yourself ", "our ", "Do "]  # fmt: skip


@given(st.lists(st.sampled_from(_PIECES)).map("".join))
@example("\x000\x00 oh my god you")
def test_third_person_never_fails_and_leaves_no_marker(text: str) -> None:
    out = third_person(text, "Caroline", "Melanie")
    assert out.count("\x00") == text.count("\x00")


def test_a_missing_subject_is_the_speaker() -> None:
    assert with_subject("Made my grandmother's moussaka.") == "I made my grandmother's moussaka."
    assert with_subject("Still dreaming about the hike.") == "I'm still dreaming about the hike."
    assert with_subject("The hike was long.") == "The hike was long."
    assert with_subject("Family came over on Sunday.") == "Family came over on Sunday."  # "-ly" but a noun
    assert with_subject("Shopping before a trip is the best part.") == "Shopping before a trip is the best part."
    assert with_subject("Cooking for six was chaos.") == "Cooking for six was chaos."  # "-ing" phrase: subject
    assert with_subject("Running late, is that ok?") == "I'm running late, is that ok?"  # not in the same clause
    # a verbless opening that tells the speaker's state, or something they have coming
    assert with_subject("Home from Porto!") == "I'm home from Porto!"
    assert with_subject("Back from Lisbon, so tired.") == "I'm back from Lisbon, so tired."
    assert with_subject("Back pain again.") == "Back pain again."  # no state: "pain" is no particle
    assert with_subject("Home is where the heart is.") == "Home is where the heart is."  # it has a verb
    assert with_subject("Dentist appointment tomorrow, dreading it.") == (
        "I have a dentist appointment tomorrow, dreading it."
    )
    assert with_subject("Job interview on Monday.") == "I have a job interview on Monday."
    assert with_subject("My interview went well.") == "My interview went well."
    assert with_subject("Burnt the moussaka tonight.") == "I burnt the moussaka tonight."
    assert with_subject("Wedding season again.") == "Wedding season again."  # a noun in "-ing"


def test_speaker_from_metadata_prefix_or_role() -> None:
    assert speaker_of("user", "Maya: hi there", None) == ("Maya", "hi there", True)
    assert speaker_of("assistant", "text", {"speaker": "Jonas"}) == ("Jonas", "text", True)
    assert speaker_of("user", "Note: this matters", None) == ("the user", "Note: this matters", False)


def test_prose_drops_markup_code_and_tool_lines() -> None:
    text = (
        "## Fix\n**Root Cause**: the cache key was stale.\n```py\nx = 1\n```\n"
        "- removed the old key\n[tool call: Bash] {}\nYeah, it works now. Tests pass!"
    )
    assert prose_sentences(text) == ["The cache key was stale.", "Removed the old key", "It works now.", "Tests pass!"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("So no more games for a while then.", "No more games for a while then."),  # "no" here is the content
        ("No, I went home.", "I went home."),
        ("No way, that's brilliant.", "No way, that's brilliant."),
        ("Great news: I got the job.", "Great news: I got the job."),
        ("Great! I got the job.", "I got the job."),
        ("Thanks for the recipe!", "Thanks for the recipe!"),  # whole, for the small-talk check to see
        ("Ha, you and your spicy food.", "You and your spicy food."),
        ("Oh my goodness, a dog!", "A dog!"),
        ("Ha Long Bay was misty.", "Ha Long Bay was misty."),
        ("You won't believe it, the orchid is blooming.", "The orchid is blooming."),
        ("Use time.Now() here.", "Use time.Now() here."),  # code is no run-on sentence ("done.Now let me" is)
        ("No - I never went there.", "I never went there."),  # a dash before a space is punctuation
        ("No-one came to the party.", "No-one came to the party."),  # a hyphen is part of the word
        ("No `--mock` or `--dry-run` flag exists.", "No --mock or --dry-run flag exists."),  # nor a flag's dashes
    ],
)
def test_interjections_are_cut_only_where_they_add_nothing(text: str, expected: str) -> None:
    assert prose_sentences(text) == [expected]


@given(
    st.sampled_from(["We", "we", "Honestly we", "Last week we", "Robin said we"]),
    st.sampled_from(["adopted", "went to", "love", "painted", "visited", "are calling", "bought", "can live with"]),
    st.sampled_from(["a puppy", "Lisbon", "the fence", "our parents", "it", "us"]),
    st.sampled_from(["", " last week", " together", " again", " ourselves"]),
)
def test_a_plain_we_never_names_the_listener(opening: str, verb: str, what: str, tail: str) -> None:
    out = third_person(f"{opening} {verb} {what}{tail}.", "Caroline", "Melanie")
    assert "Melanie" not in out and "Caroline and others" in out


@given(
    st.sampled_from(
        [
            "I told you about",
            "I showed Melanie",
            "They liked",
            "I hurt",
            "You saw",
            "I met Ana at",
            "I love",
            "We lost",
            "Honestly I hate",
            "I asked them about",
        ]
    ),
    st.sampled_from(["my car", "me", "my sister's flat", "mine"]),
    st.sampled_from(["", " yesterday", ", and you loved my car", ", wish me luck"]),
)
def test_their_and_them_never_stand_where_someone_else_could_be_meant(opening: str, what: str, tail: str) -> None:
    out = third_person(f"{opening} {what}{tail}.", "Caroline", "Melanie")
    for found in re.finditer(r"\b(?:their|them|theirs|themselves)\b", out):
        clause = re.split(r"[,;:]", out[: found.start()])[-1]
        assert "Caroline" in clause, out  # the speaker is named in the clause
        assert not re.search(r"Melanie|Ana|\b[Tt]hey\b|\b[Yy]ou|others", clause), out  # and no one else


@given(
    st.sampled_from(["Let's", "let's", "Let us", "Okay, let's", "So let us"]),
    st.sampled_from(["meet", "grab lunch", "not argue", "go to our usual place", "try my recipe"]),
    st.sampled_from(["", " soon", " together", " on Friday"]),
)
def test_a_proposal_is_told_as_one(opening: str, what: str, tail: str) -> None:
    out = third_person(f"{opening} {what}{tail}.", "Caroline", "Melanie")
    assert "Caroline suggested that Caroline and Melanie " in out, out
    assert not re.search(r"\b[Ll]et(?:['’]s| us| Caroline)\b", out), out  # no "Let Caroline and Melanie meet"
