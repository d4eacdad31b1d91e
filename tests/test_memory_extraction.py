"""The offline extractor: facts in the speaker's name, dates written out, never a fragment, provenance kept."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lossless.memory.extraction import extract
from lossless.memory.fragments import fragment_reason
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
    from datetime import timedelta

    from lossless.memory.hashing import HashEmbedder
    from lossless.memory.scopes import MemoryCaller
    from lossless.memory.service import MemoryService
    from lossless.ports import PreparedMessage
    from lossless.records import Message
    from lossless.stores import memory_store_for

    service = MemoryService(memory_store_for(store), HashEmbedder(), MemoryCaller.agent("main"))
    conversation = await store.get_or_create_conversation(agent_id="main", session_id="tom")
    turns = [
        ("user", "Tom: I'm selling the old hatchback, it is too old now."),
        ("assistant", "Ana: I'm selling my bike too."),
        ("user", "Tom: Change of plan, I'm keeping the old hatchback after all, it is not too old now."),
    ]
    await store.append_messages(
        conversation.id,
        [PreparedMessage(Message(role=r, content=c), 9, SAID + timedelta(days=i)) for i, (r, c) in enumerate(turns)],
    )
    messages = await store.get_messages(conversation.id)
    for message in messages:
        await service.remember(conversation.id, [message])
    current = [m.content for _, m in await service.list()]
    assert any("keeping the old hatchback" in text for text in current)
    assert not any("Tom is selling" in text for text in current)
    assert "Ana is selling their bike too." in current  # another person's statement stays, on its own
    history = [m for _, m in await service.list(include_superseded=True) if not m.current]
    assert [m.content for m in history] == ["Tom is selling the old hatchback, it is too old now."]
