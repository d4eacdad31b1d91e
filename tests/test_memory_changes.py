"""Changes of mind: which sentences take something back, and how the change is told with what it changes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.memory.changes import (
    LINK_SIMILARITY,
    candidates,
    earlier_statement,
    is_change,
    topic,
    with_history,
)
from lossless.memory.records import Memory, MemoryDraft

SAID = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "sentence",
    [
        "I quit smoking last month.",
        "I've finally given up on keto.",
        "We called off the wedding.",
        "I no longer eat meat.",
        "I'm not drinking coffee anymore.",
        "Not doing keto any more.",
        "My vegan phase is over.",
        "The no-sugar challenge is officially over.",
        "My drinking days are over.",
        "The trip is off.",
        "I switched back to vim.",
        "Back to eating meat.",
        "I'm going back to using my old phone.",
        "Change of plan, I'm keeping the hatchback after all.",
        "We're not moving to Leeds after all.",
        "Never mind about selling, the car stays.",
        "I decided to stop eating meat.",
        "I'm going to give up sugar.",
        "I stopped going to the gym.",
        "I dropped out of the pottery class.",
        "I cancelled my gym membership.",
        "I'm ditching the diet.",
        "I caved, I missed burgers way too much.",
        "On second thought, I'll skip the gym.",
        "I changed my mind about the trip.",
        "I've decided against the PhD.",
        "We decided not to buy the house.",
        "I ended things with Sam.",
        "Finally quit my job.",
    ],
)
def test_how_people_say_they_changed_their_mind(sentence: str) -> None:
    assert is_change(sentence)


@pytest.mark.parametrize(
    "sentence",
    [
        "The game is over.",  # what merely ends is no change of mind
        "The meeting is over, finally.",
        "Party's over, folks.",
        "The rain finally stopped.",
        "My laptop stopped working.",
        "I never stopped loving jazz.",  # negated
        "I'm not giving up!",
        "Don't give up!",
        "The experiment is not over yet.",
        "I almost gave up.",  # not done
        "I might quit.",
        "I'm thinking of quitting.",
        "If I quit, I lose the bonus.",
        "I was trying to stop smoking.",
        "I give up, what is it?",
        "My sister quit her job.",  # someone else's
        "She stopped eating meat.",
        "I think she quit.",
        "They called off the match.",
        "Our flight got cancelled.",
        "I see the flag is not used anymore.",
        "I stopped by the bakery.",  # look-alikes
        "We stopped at a café on the way.",
        "I couldn't stop laughing.",
        "I ended up buying it.",
        "We ended the night at a karaoke bar.",
        "After all, it's his birthday.",
        "It's his birthday after all.",
        "After all these years, we still talk.",
        "I can't take it anymore.",
        "I don't know anymore.",
        "Never mind, I found it.",
        "Back to work tomorrow.",
        "Thinking of going back to uni to study architecture.",
        "Cancelled.",
    ],
)
def test_what_is_not_a_change_of_mind(sentence: str) -> None:
    assert not is_change(sentence)


@given(st.text(max_size=300))
def test_any_text_is_judged_without_error(text: str) -> None:
    assert is_change(text) in (True, False)


def test_topic_leaves_out_the_speaker_the_dates_and_the_history() -> None:
    assert topic("Maya decided to stop eating meat (said on 23 October 2023).", "Maya") == (
        "decided to stop eating meat."
    )
    told = "Maya said: The veggie experiment is over. Salami won (said on 12 January 2024). This changes what …"
    assert topic(told, "Maya") == "The veggie experiment is over. Salami won."
    assert topic("Maya's flat was cold on Friday, 5 May 2023.", "Maya") == "their flat was cold."
    assert topic("The user no longer drinks coffee.", "the user") == "no longer drinks coffee."
    assert topic("Maya said the train was late again (said on 8 May 2023).", "Maya") == "the train was late again."
    assert topic("Maya said it was wedding season again.", "Maya") == "wedding season again."
    assert topic("Maya", "Maya") == "Maya"  # nothing left: the text as it was


def _memory(
    memory_id: str,
    content: str,
    *,
    days: int = 0,
    speaker: str = "Maya",
    category: str = "events",
    fact_key: str | None = None,
    sources: tuple[int, ...] = (1,),
    conversation: int = 1,
    superseded: bool = False,
) -> Memory:
    when = SAID + timedelta(days=days)
    return Memory(
        memory_id=memory_id,
        scope="global",
        category=category,  # type: ignore[arg-type]
        tier="working",
        abstract=content,
        overview=content,
        content=content,
        importance=0.5,
        confidence=0.8,
        temporal_type="static",
        valid_from=when,
        valid_until=None,
        fact_key=fact_key,
        supersedes=None,
        superseded_by="mem_next" if superseded else None,
        invalidated_at=when if superseded else None,
        access_count=0,
        last_accessed_at=None,
        access_gap_days=0.0,
        conversation_id=conversation,
        source_message_ids=sources,
        source="extraction",
        created_at=when,
        updated_at=when,
        metadata={"speaker": speaker},
    )


def _change(content: str = "Maya said: The veggie experiment is over (said on 18 May 2023).") -> MemoryDraft:
    return MemoryDraft(
        content=content,
        category="events",
        metadata={"speaker": "Maya", "revises": True},
        conversation_id=1,
        source_message_ids=(9,),
        source="extraction",
        valid_from=SAID + timedelta(days=10),
    )


def test_only_the_same_speakers_older_current_memories_are_candidates() -> None:
    mine = _memory("a", "Maya is going vegetarian.", sources=(1,))
    others = [
        _memory("b", "Ana is going vegetarian.", speaker="Ana", sources=(2,)),
        _memory("c", "Maya loves steak.", superseded=True, sources=(3,)),
        _memory("d", "Maya went vegan.", days=20, sources=(4,)),  # said after the change
        _memory("e", "Maya said: The veggie experiment is over.", sources=(9,)),  # the change's own message
    ]
    assert [m.memory_id for m in candidates(_change(), [mine, *others])] == ["a"]


def test_the_most_similar_statement_is_taken_back_and_never_a_weak_match() -> None:
    plan = _memory("a", "Maya is going vegetarian.")
    soup = _memory("b", "Maya made soup.", sources=(2,))
    assert earlier_statement(_change(), [(soup, LINK_SIMILARITY + 0.01), (plan, 0.8)]) == (plan, 0.8)
    assert earlier_statement(_change(), [(soup, LINK_SIMILARITY - 0.01)]) is None
    assert earlier_statement(_change(), []) is None
    keyed = _memory("k", "Maya loves coffee.", category="preferences", fact_key="preferences:maya:drink")
    draft = replace(_change("Maya no longer drinks coffee."), fact_key="preferences:maya:drink")
    assert earlier_statement(draft, [(plan, 0.9), (keyed, 0.1)]) == (keyed, 0.1)  # its own fact key wins


def test_the_change_says_what_it_changes_and_cites_both_messages() -> None:
    plan = _memory("a", "Maya is going vegetarian from May 2023.", sources=(1, 2))
    told = with_history(_change(), plan)
    assert told.content == (
        "Maya said: The veggie experiment is over (said on 18 May 2023). "
        "This changes what Maya said before: Maya is going vegetarian from May 2023."
    )
    assert told.source_message_ids == (9, 1, 2)
    assert told.category == "events" and told.fact_key is None  # an event stays current beside it
    assert told.metadata == {"speaker": "Maya", "revises": True, "changes": "a", "quoted_sources": [1, 2]}
    assert told.abstract == "Maya said: The veggie experiment is over (said on 18 May 2023)."


def test_an_undated_earlier_fact_gets_its_date_and_a_versioned_one_its_key() -> None:
    liked = _memory("p", "Maya loves coffee.", category="preferences", fact_key="preferences:maya:drink")
    told = with_history(_change("Maya gave up coffee (said on 18 May 2023)."), liked)
    assert told.content.endswith("This changes what Maya said before: Maya loves coffee (said on 8 May 2023).")
    assert (told.category, told.fact_key) == ("preferences", "preferences:maya:drink")


def test_another_conversations_statement_is_quoted_but_not_cited() -> None:
    elsewhere = _memory("x", "Maya is going vegetarian.", conversation=2, sources=(50,))
    told = with_history(_change(), elsewhere)
    assert told.source_message_ids == (9,) and "Maya is going vegetarian" in told.content
    assert "quoted_sources" not in (told.metadata or {})


def test_a_change_of_a_change_quotes_only_the_last_statement() -> None:
    back = _memory(
        "b",
        "Maya is back to eating meat (said on 1 May 2023). This changes what Maya said before: Maya is vegetarian.",
        sources=(3, 1),
    )
    told = with_history(_change("Maya went vegetarian again (said on 18 May 2023)."), back)
    assert told.content == (
        "Maya went vegetarian again (said on 18 May 2023). "
        "This changes what Maya said before: Maya is back to eating meat (said on 1 May 2023)."
    )
    assert told.source_message_ids == (9, 3, 1)


_STORED_TEXT = st.text(  # what a stored memory can hold: no NUL, no lone surrogate
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=500
).filter(str.strip)


@given(_STORED_TEXT, st.lists(st.integers(1, 50), max_size=4, unique=True))
def test_the_change_keeps_its_own_words_and_sources_first(earlier: str, sources: list[int]) -> None:
    told = with_history(_change(), _memory("e", earlier, sources=tuple(sources) or (1,)))
    assert told.content.startswith(_change().content + " This changes what Maya said before: ")
    assert told.source_message_ids[0] == 9 and len(set(told.source_message_ids)) == len(told.source_message_ids)
    assert set(told.source_message_ids) == {9, *(sources or [1])}


def test_a_long_earlier_statement_is_quoted_in_part() -> None:
    long = "Maya is going vegetarian. " + "She has a plan for every meal of the week and a list. " * 12
    told = with_history(_change(), _memory("l", long))
    quoted = told.content.split("said before: ", 1)[1]
    assert quoted.startswith("Maya is going vegetarian.") and len(quoted) <= 360
