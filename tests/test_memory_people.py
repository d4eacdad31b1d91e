"""Questions that name a person: the other person's memories by the question without the names."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.memory import people
from lossless.memory.people import cosines, named_people, names_one, without_people
from lossless.memory.records import Memory, MemoryDraft
from lossless.memory.scopes import MemoryCaller
from lossless.memory.service import MemoryService
from lossless.ports import Store
from lossless.stores import memory_store_for
from lossless.testing import HashEmbedder
from tests.memories import memory_value

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _memory(memory_id: str, content: str, speaker: str | None = None) -> Memory:
    return memory_value(
        memory_id=memory_id,
        category="events",
        abstract=content,
        overview=content,
        content=content,
        importance=0.5,
        metadata=None if speaker is None else {"speaker": speaker},
    )


def test_the_people_named_are_the_candidates_speakers_the_query_names() -> None:
    memories = [
        _memory("a", "Maya lost her keys.", "Maya"),
        _memory("b", "Jonas runs.", "Jonas"),
        _memory("c", "The user likes tea.", "the user"),
        _memory("d", "No speaker here."),
    ]
    assert named_people("What did Jonas's sister and Maya lose?", memories) == ["Jonas", "Maya"]
    assert named_people("What did the user like?", memories) == []  # a role is no name
    assert named_people("what did jonas lose?", memories) == []  # names are capitalised, as written
    assert named_people("What did Priya lose?", memories) == []  # not a speaker of these memories
    assert named_people("What did Jonasz lose?", memories) == []  # whole words only


def test_the_query_without_the_people_keeps_every_other_word() -> None:
    assert without_people("What did Jonas misplace?", ["Jonas"]) == "What did misplace?"
    assert without_people("Which of Maya's children lost a tooth?", ["Maya"]) == "Which of children lost a tooth?"
    assert without_people("What did Jonas misplace?", []) is None
    assert without_people("Jonas?", ["Jonas"]) is None  # nothing left to search for


def test_a_memory_names_a_person_by_the_whole_word() -> None:
    assert names_one(_memory("a", "Maya's keys are at the café."), ["Maya"])
    assert not names_one(_memory("a", "The Mayan ruins."), ["Maya"])
    assert not names_one(_memory("a", "Maya is here."), [])


_IDS = st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=8)
_COS = st.floats(-1.0, 1.0, allow_nan=False)


@given(
    asked_hits=_IDS,
    blind_hits=_IDS,
    naming=_IDS,
    values=st.dictionaries(st.sampled_from("abcdefgh"), st.tuples(_COS, _COS), min_size=8),
)
def test_the_other_persons_memories_get_the_better_cosine_and_nothing_widens_the_scale(
    asked_hits: list[str], blind_hits: list[str], naming: list[str], values: dict[str, tuple[float, float]]
) -> None:
    found = list(dict.fromkeys([*asked_hits, *blind_hits]))
    asked = {k: values[k][0] for k in found}
    blind = {k: values[k][1] for k in found}
    out = cosines(asked_hits, asked, blind, naming)
    assert set(asked_hits) <= set(out)  # every hit found as asked is kept
    lowest = min((asked[k] for k in asked_hits), default=float("-inf"))
    for key, score in out.items():
        if key in naming:
            assert score == asked[key]  # the named person's memories: the question as asked
        else:
            assert score == max(asked[key], blind[key]) >= asked[key]
        if key not in asked_hits:
            assert score >= lowest  # a new candidate never lowers the scale's bottom
    assert set(out) <= set(found)


def test_without_people_the_cosines_are_as_asked() -> None:
    assert cosines(["a", "b"], {"a": 0.5, "b": 0.2}, {}, []) == {"a": 0.5, "b": 0.2}


# ------------------------------------------------------------------ through memory search (both backends)

#: Thirty memories of Jonas's, half of them naming him three times, and one of Maya's: by a bag of
#: words (the test embedder), the name is what the question as asked mostly matches, as e5's vectors do.
_JONAS = [f"Jonas lost game {i} of chess, Jonas said Jonas was tired." for i in range(15)] + [
    f"Jonas plays the piano on day {i}." for i in range(15)
]
_MAYA = "Maya has lost her keys somewhere in the big old market by the river today."
_QUESTION = "What has Jonas lost?"


async def _service(store: Store) -> MemoryService:
    service = MemoryService(memory_store_for(store), HashEmbedder(), MemoryCaller.agent("main"))
    for text in _JONAS:
        await service.add(MemoryDraft(text, category="events", metadata={"speaker": "Jonas"}))
    await service.add(MemoryDraft(_MAYA, category="events", metadata={"speaker": "Maya"}))
    return service


@pytest.mark.anyio
async def test_a_question_naming_the_wrong_person_finds_the_other_persons_memory(store: Store) -> None:
    service = await _service(store)
    result = await service.search(_QUESTION, limit=10, record_access=False)
    assert _MAYA in [h.memory.content for h in result.hits]
    assert result.hits[0].memory.content in _JONAS  # Jonas's own memories still come first


@pytest.mark.anyio
async def test_without_the_step_the_name_keeps_the_other_persons_memory_out(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The test above fails without the step: the name alone decides (so the test can fail)."""
    service = await _service(store)
    monkeypatch.setattr("lossless.memory.service.without_people", lambda query, named: None)
    result = await service.search(_QUESTION, limit=10, record_access=False)
    assert _MAYA not in [h.memory.content for h in result.hits]
    assert people.without_people(_QUESTION, ["Jonas"]) == "What has lost?"


@pytest.mark.anyio
async def test_people_false_searches_the_question_as_asked_only(store: Store) -> None:
    """Hybrid grep's memory leads pass ``people=False`` (its meaning side reads the question without names)."""
    service = await _service(store)
    result = await service.search(_QUESTION, limit=10, record_access=False, people=False)
    assert _MAYA not in [h.memory.content for h in result.hits]  # as the step monkeypatched off above
