"""The offline extractor: facts in the speaker's name, dates written out, never a fragment, provenance kept."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.memory.extraction import extract
from lossless.memory.fragments import fragment_reason
from lossless.memory.records import Memory
from lossless.ports import Store
from lossless.records import MessageRecord

SAID = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)


def _record(i: int, role: str, text: str) -> MessageRecord:
    return MessageRecord(
        id=i, conversation_id=1, seq=i, role=role, content=text, parts=(), token_count=1, created_at=SAID
    )  # type: ignore[arg-type]


def test_a_chat_between_two_people() -> None:
    drafts = extract(
        1,
        [
            _record(1, "user", "Caroline: Hey Mel! I went to a support group yesterday and it was so powerful."),
            _record(2, "assistant", "Melanie: Wow! I'm planning to go camping with my kids next month."),
            _record(3, "user", "Caroline: Made my grandmother's moussaka from her card. How are you?"),
        ],
    )
    texts = [d.content for d in drafts]
    assert texts == [
        "Caroline went to a support group on 7 May 2023 and it was so powerful.",
        "Melanie is planning to go camping with their kids in June 2023.",
        "Caroline made their grandmother's moussaka from her card (said on 8 May 2023).",
    ]
    assert [d.source_message_ids for d in drafts] == [(1,), (2,), (3,)]
    assert all(d.conversation_id == 1 and d.valid_from == SAID for d in drafts)


def test_a_named_speakers_preferences_are_versioned_per_person() -> None:
    (draft,) = extract(1, [_record(1, "user", "Maya: I prefer tea in the morning.")])
    assert draft.content == "Maya prefers tea in the morning." and draft.fact_key == "preferences:maya:drink"


def test_agent_markdown_and_narration_never_become_memories() -> None:
    text = (
        "**Root Cause Analysis**: I identified:\n- the cache key\n\n## Fix\nNow let me check the tests:\n"
        "Fair enough, let me add the fixture back.\nYou're right, let me update the script.\n"
        "I fixed the flaky login test by adding a wait in `tests/test_login.py`.\n```py\nx = 1\n```\n"
        '[tool call: Edit] {"file_path": "src/app/login.py", "old_string": "a", "new_string": "b"}'
    )
    drafts = extract(1, [_record(4, "assistant", text)])
    texts = [d.content for d in drafts]
    assert texts == [
        "The assistant edited src/app/login.py. The assistant fixed the flaky login test by adding a wait in "
        "tests/test_login.py (said on 8 May 2023)."
    ]
    assert all(fragment_reason(t) is None for t in texts)


def test_the_user_of_an_agent_session() -> None:
    drafts = extract(1, [_record(5, "user", "Fix the login test please. I prefer pytest over unittest.")])
    assert [d.content for d in drafts] == ["The user prefers pytest over unittest."]


@pytest.mark.anyio
async def test_a_change_of_mind_supersedes_what_the_same_person_said(store: Store) -> None:
    turns = [
        ("user", "Tom: I'm selling the old hatchback, it is too old now."),
        ("assistant", "Ana: I'm selling my bike too."),
        ("user", "Tom: Change of plan, I'm keeping the old hatchback after all, it is not too old now."),
    ]
    ids, memories = await _remembered(store, turns)
    current = {m.content: m for m in memories if m.current}
    keeping = (
        "Change of plan, Tom is keeping the old hatchback after all, it is not too old now (said on 10 May 2023). "
        "This changes what Tom said before: Tom is selling the old hatchback, it is too old now (said on 8 May 2023)."
    )
    assert set(current) == {keeping, "Ana is selling their bike too."}  # Ana's statement stays, on its own
    # the change cites its own message first, then the one it takes back: a search finds both
    assert current[keeping].source_message_ids == (ids[2], ids[0])
    history = [m for m in memories if not m.current]
    assert [m.content for m in history] == ["Tom is selling the old hatchback, it is too old now."]
    assert history[0].superseded_by == current[keeping].memory_id
    assert history[0].source_message_ids == (ids[0],)  # history keeps its own provenance


def test_a_change_of_mind_is_remembered_whole_in_the_speakers_name() -> None:
    (draft,) = extract(1, [_record(1, "user", "Maya: The veggie experiment is over. salami won.")])
    assert draft.content == "Maya said: The veggie experiment is over. Salami won (said on 8 May 2023)."
    assert draft.category == "events" and draft.metadata == {"speaker": "Maya", "revises": True}
    (draft,) = extract(1, [_record(2, "user", "Ben: Okay I caved, I missed bacon way too much. Back to eating meat.")])
    assert draft.content == "Ben caved, Ben missed bacon way too much. Ben is back to eating meat (said on 8 May 2023)."
    (draft,) = extract(1, [_record(3, "user", "I'm not drinking coffee anymore, it wrecks my sleep.")])
    # "their" only where the speaker is named in the same clause: after the comma it is "the user's"
    assert draft.content == "The user is not drinking coffee anymore, it wrecks the user's sleep (said on 8 May 2023)."
    assert draft.metadata == {"speaker": "the user", "revises": True}


@pytest.mark.parametrize(
    "text",
    [
        "Maya: The game is over, we lost three to one.",
        "Maya: I never stopped loving jazz, it was my first love.",
        "Maya: My sister quit her job at the bank.",
        "Maya: I stopped by the bakery on the way home.",
    ],
)
def test_what_only_sounds_like_a_change_of_mind_revises_nothing(text: str) -> None:
    drafts = extract(1, [_record(1, "user", text)])
    assert drafts and not any((d.metadata or {}).get("revises") for d in drafts)


async def _remembered(store: Store, turns: list[tuple[str, str]]) -> tuple[list[int], list[Memory]]:
    """Each turn (a day apart) mined in order, as a chat is; the message ids and every memory, history too."""
    from datetime import timedelta

    from lossless.memory.hashing import HashEmbedder
    from lossless.memory.scopes import MemoryCaller
    from lossless.memory.service import MemoryService
    from lossless.ports import PreparedMessage
    from lossless.records import Message
    from lossless.stores import memory_store_for

    service = MemoryService(memory_store_for(store), HashEmbedder(), MemoryCaller.agent("main"))
    conversation = await store.get_or_create_conversation(agent_id="main", session_id="maya")
    await store.append_messages(
        conversation.id,
        [PreparedMessage(Message(role=r, content=c), 9, SAID + timedelta(days=i)) for i, (r, c) in enumerate(turns)],
    )
    messages = await store.get_messages(conversation.id)
    for message in messages:
        await service.remember(conversation.id, [message])
    return [m.id for m in messages], [m for _, m in await service.list(include_superseded=True)]


@pytest.mark.anyio
async def test_a_preference_taken_back_is_superseded_and_stays_as_history(store: Store) -> None:
    ids, memories = await _remembered(
        store,
        [
            ("user", "Maya: I love coffee, two cups every morning."),
            ("user", "Maya: I no longer love coffee, not even one cup in the morning."),
        ],
    )
    (old,) = [m for m in memories if not m.current]
    (new,) = [m for m in memories if m.current]
    assert old.content == "Maya loves coffee, two cups every morning." and old.source_message_ids == (ids[0],)
    assert new.content == (
        "Maya no longer loves coffee, not even one cup in the morning (said on 9 May 2023). "
        "This changes what Maya said before: Maya loves coffee, two cups every morning (said on 8 May 2023)."
    )
    assert (new.category, new.fact_key) == ("preferences", "preferences:maya:drink")
    assert new.supersedes == old.memory_id and new.source_message_ids == (ids[1], ids[0])


@pytest.mark.anyio
async def test_a_change_stands_beside_the_event_it_takes_back(store: Store) -> None:
    ids, memories = await _remembered(
        store,
        [
            ("user", "Maya: I started eating vegetarian food every day this month."),
            ("assistant", "Ana: Good luck, I could never give up bacon."),
            ("user", "Maya: I stopped eating vegetarian food every day, I missed bacon too much."),
        ],
    )
    assert all(m.current for m in memories)  # a record of what happened is never superseded
    (change,) = [m for m in memories if (m.metadata or {}).get("changes")]
    (started,) = [m for m in memories if m.source_message_ids == (ids[0],)]
    assert change.metadata is not None and change.metadata["changes"] == started.memory_id
    assert change.source_message_ids == (ids[2], ids[0])
    assert "This changes what Maya said before: Maya started eating vegetarian food" in change.content
    assert not any("Ana" in m.content and (m.metadata or {}).get("revises") for m in memories)


@pytest.mark.anyio
async def test_a_change_about_something_never_said_takes_nothing_back(store: Store) -> None:
    ids, memories = await _remembered(
        store,
        [("user", "Maya: I love hiking in the hills every weekend."), ("user", "Maya: I quit my job at the bank.")],
    )
    assert all(m.current for m in memories)
    (quit,) = [m for m in memories if (m.metadata or {}).get("revises")]
    assert quit.content == "Maya quit their job at the bank (said on 9 May 2023)."
    assert quit.source_message_ids == (ids[1],) and "changes" not in (quit.metadata or {})


def test_small_talk_is_not_remembered_but_facts_beside_it_are() -> None:
    drafts = extract(
        1,
        [
            _record(1, "user", "Maya: Long time no chat!"),
            _record(2, "assistant", "Jonas: Congratulations!! That's a big step. How did the interviews go?"),
            _record(3, "user", "Maya: Oh my goodness, a dog! How are the kids taking it?"),
            _record(4, "assistant", "Jonas: Happy anniversary in advance! Any gifts planned?"),
            _record(5, "user", "Maya: Thanks! I adopted a beagle called Noodle."),
        ],
    )
    assert [d.content for d in drafts] == ["Maya adopted a beagle called Noodle (said on 8 May 2023)."]
    assert drafts[0].source_message_ids == (5,)


def test_statements_end_calmly_with_the_date_note_inside() -> None:
    drafts = extract(
        1,
        [
            _record(1, "user", "Maya: I registered for the trail race, training starts now!"),
            _record(2, "assistant", "Jonas: Smart. You always overpack though."),
        ],
    )
    assert [d.content for d in drafts] == [
        "Maya registered for the trail race, training starts now (said on 8 May 2023).",
        "Jonas said Maya always overpacks though (said on 8 May 2023).",  # Jonas's word on Maya: said so
    ]


def test_a_greeting_or_thanks_that_tells_something_is_remembered() -> None:
    # Greetings and thanks are judged by fragments.small_talk_reason alone: with a fact in them they stay.
    drafts = extract(
        1,
        [
            _record(1, "user", "Maya: Hello from Lisbon, we arrived yesterday."),
            _record(2, "assistant", "Jonas: Thanks for helping me move last week."),
            _record(3, "user", "Maya: Hi! Thanks for the tip!"),
        ],
    )
    assert [d.source_message_ids for d in drafts] == [(1,), (2,)]
    assert "7 May 2023" in drafts[0].content and "Lisbon" in drafts[0].content
    assert drafts[1].content == "Thanks for helping Jonas move in the week before 8 May 2023."


def test_a_verbless_reply_is_told_with_the_question_it_answers() -> None:
    drafts = extract(
        1,
        [
            _record(1, "assistant", "Jonas: Jealous! How was the sound?"),
            _record(2, "user", "Maya: Loud in the best way. They played all the old songs."),
            _record(3, "assistant", "Jonas: Did you do it yourselves?"),
            _record(4, "user", "Maya: Two coats, two very sore backs."),
        ],
    )
    assert [d.content for d in drafts] == [
        "Jonas asked: How was the sound? Maya answered: Loud in the best way. They played all the old songs "
        "(said on 8 May 2023).",
        "Jonas asked: Did Maya do it themselves? Maya answered: Two coats, two very sore backs (said on 8 May 2023).",
    ]


def test_a_reply_that_points_back_at_a_yes_or_no_question_is_told_with_it() -> None:
    drafts = extract(
        1,
        [
            _record(1, "user", "Maya: Have you been to that new jazz club on the market square yet?"),
            _record(2, "assistant", "Jonas: Yes! We went there last week, the pierogi was incredible."),
            _record(3, "user", "Maya: Did you ever try the ramen bar on the canal?"),
            _record(4, "assistant", "Jonas: We finally went on Friday, loved it."),
            _record(5, "user", "Maya: Did you see the match?"),
            _record(6, "assistant", "Jonas: No, I was at my sister's wedding all day."),  # names what it tells
            _record(7, "user", "Maya: Where did you park the van?"),  # no yes-or-no question
            _record(8, "assistant", "Jonas: I left it by the harbour wall overnight."),
        ],
    )
    assert [d.content for d in drafts] == [
        # the bare "Yes!" answers nothing on its own: the sentence after it is the answer
        "Maya asked: Has Jonas been to that new jazz club on the market square yet? Jonas answered: Jonas and "
        "others went there in the week before 8 May 2023, the pierogi was incredible.",
        "Maya asked: Did Jonas ever try the ramen bar on the canal? Jonas answered: Jonas and others finally "
        "went on Friday, loved it (said on 8 May 2023).",
        "Jonas was at their sister's wedding all day (said on 8 May 2023).",
        "Jonas left it by the harbour wall overnight (said on 8 May 2023).",
    ]


def test_there_is_names_nothing_to_point_back_at() -> None:
    drafts = extract(
        1,
        [
            _record(1, "user", "Maya: Is the new bakery any good?"),
            _record(2, "assistant", "Jonas: There is always a queue before eight on weekdays."),
        ],
    )
    assert [d.content for d in drafts] == [
        "Jonas said there is always a queue before eight on weekdays (said on 8 May 2023)."
    ]


def test_a_verbless_remark_that_names_nothing_is_no_memory() -> None:
    drafts = extract(
        1,
        [
            _record(1, "user", "Maya: I sold my console yesterday."),
            _record(2, "assistant", "Jonas: So no more games for a while then."),  # no question before it
            _record(3, "user", "Maya: Signed up for the harbour 10k. No backing out."),
            _record(4, "assistant", "Jonas: Coffee number three already."),  # names a number: kept
        ],
    )
    assert [d.content for d in drafts] == [
        "Maya sold their console on 7 May 2023.",
        "Maya signed up for the harbour 10k (said on 8 May 2023).",
        "Jonas said it was coffee number three already (said on 8 May 2023).",  # the "it is" it stands for
    ]


def test_we_is_the_speaker_and_others_unless_the_listener_is_taken_in() -> None:
    drafts = extract(
        1,
        [
            _record(1, "user", "Maya: We adopted a puppy yesterday!"),
            _record(2, "assistant", "Jonas: We should meet up next week so I can see her."),
            _record(3, "user", "Maya: I miss you guys, the flat is so quiet."),
        ],
    )
    texts = [d.content for d in drafts]
    assert texts[0] == "Maya and others adopted a puppy on 7 May 2023."
    assert texts[1].startswith("Jonas and Maya should meet up in the week after 8 May 2023")
    assert texts[2].startswith("Maya misses Jonas and the others")
    assert not any("Jonas guys" in t or "Maya and Jonas adopted" in t for t in texts)


def test_a_verbless_remark_is_a_true_sentence_or_part_of_its_answer() -> None:
    drafts = extract(
        1,
        [
            _record(1, "assistant", "Jonas: Where did you go for the honeymoon?"),
            _record(2, "user", "Maya: A cabin by a lake with no phone signal. Still our favourite trip."),
            _record(3, "assistant", "Jonas: RIP my old laptop. The screen went dark and never came back."),
            _record(4, "user", "Maya: Graduation season again, two parties next week."),
            _record(5, "assistant", "Jonas: Decided to quit sugar. Day one today!"),
        ],
    )
    assert [d.content for d in drafts] == [
        # "signal" after "no" is no verb: the reply is told with its question, the remark after it as said
        "Jonas asked: Where did Maya go for the honeymoon? Maya answered: A cabin by a lake "
        "with no phone signal. Still Maya's favourite trip (said on 8 May 2023).",
        "Jonas's old laptop died. The screen went dark and never came back.",
        "Maya said it was graduation season again, two parties in the week after 8 May 2023.",
        "Jonas decided to quit sugar. Day one on 8 May 2023.",  # a change of mind: its remark follows it
    ]
    assert not any(" said:" in d.content for d in drafts)


def test_a_memory_that_names_no_one_says_whose_it_is() -> None:
    drafts = extract(
        1,
        [
            _record(1, "user", "Maya: The bus was late again."),
            _record(2, "assistant", "Jonas: Concert tickets sold out in minutes, so annoying."),
            _record(3, "user", "Maya: Rosa wants a hamster now, no way."),
            _record(4, "assistant", "Jonas: She was thrilled, kept grinning all day."),  # "Jonas said she…": whose?
        ],
    )
    assert [d.content for d in drafts] == [
        "Maya said the bus was late again (said on 8 May 2023).",
        "Jonas said concert tickets sold out in minutes, so annoying (said on 8 May 2023).",
        "Maya said Rosa wants a hamster now, no way (said on 8 May 2023).",
        "Jonas said: She was thrilled, kept grinning all day (said on 8 May 2023).",
    ]


_SAID = [
    "The bus was late again.", "Coffee number three already.", "RIP my phone.", "I adopted a puppy yesterday!",
    "You always overpack.", "Let's meet on Friday.", "We should catch up soon.", "Traffic was awful this morning.",
    "She was thrilled.", "Wedding season again, three invitations on the fridge.", "My sister quit her job.",
    "A tiny island with no phone signal.", "Where did you go?", "Still our favourite trip.",
    "I told you about my trip.",
]  # fmt: skip


@given(
    st.lists(
        st.tuples(st.sampled_from(["Maya", "Jonas"]), st.lists(st.sampled_from(_SAID), min_size=1, max_size=3)),
        min_size=1,
        max_size=5,
    )
)
def test_every_memory_of_a_named_speaker_names_them(turns: list[tuple[str, list[str]]]) -> None:
    messages = [_record(i, "user", f"{who}: {' '.join(said)}") for i, (who, said) in enumerate(turns, 1)]
    for draft in extract(1, messages):
        speaker = (draft.metadata or {})["speaker"]
        assert isinstance(speaker, str) and speaker in draft.content, draft.content
        assert fragment_reason(draft.content) is None
        assert not draft.content.startswith(("Let ", "Maya said: Coffee", "Jonas said: Coffee")), draft.content


def test_a_sentence_about_he_or_she_stays_with_what_says_who_that_is() -> None:
    drafts = extract(
        1,
        [
            _record(1, "user", "Maya: Who usually wins at your game nights?"),
            _record(2, "assistant", "Jonas: My uncle, every single time. He reads the rules like a lawyer."),
        ],
    )
    assert [d.content for d in drafts] == [
        "Maya asked: Who usually wins at Jonas's game nights? Jonas answered: Jonas's uncle, every single time. "
        "He reads the rules like a lawyer."
    ]
