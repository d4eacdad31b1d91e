"""When a memory is, and the time in a question: which memories the memory search boosts for it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.memory import dating
from lossless.memory.ranking import Candidate, RetrievalConfig, finish, fuse
from lossless.memory.records import Memory, MemoryDraft
from lossless.memory.scopes import MemoryCaller
from lossless.memory.service import MemoryService
from lossless.ports import Store
from lossless.questions import TimeWindow
from lossless.stores import memory_store_for
from lossless.testing import HashEmbedder
from tests.memories import memory_value

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _memory(memory_id: str = "mem_x", content: str = "a", said: datetime = NOW) -> Memory:
    return memory_value(
        memory_id=memory_id,
        category="events",
        abstract=content[:160],
        overview=content[:600],
        content=content,
        importance=0.6,
        valid_from=said,
    )


def _day(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


def test_a_memorys_times_are_when_it_was_said_and_the_dates_it_names() -> None:
    said = _day(2023, 9, 20) + timedelta(hours=14)
    memory = _memory(content="Maya flew out on 2023-09-12 and was back in October 2023.", said=said)
    assert dating.times(memory) == (
        (_day(2023, 9, 20), _day(2023, 9, 21)),
        (_day(2023, 9, 12), _day(2023, 9, 13)),
        (_day(2023, 10, 1), _day(2023, 11, 1)),
    )
    # Dates without their year are not read from a memory: there is no anchor to place them.
    assert dating.times(_memory(content="back on 12 September", said=said)) == ((_day(2023, 9, 20), _day(2023, 9, 21)),)


def test_inside_means_a_time_wholly_inside_a_window() -> None:
    week = TimeWindow(_day(2023, 9, 11), _day(2023, 9, 16))
    bought = _memory(content="Maya bought a rain jacket (said on 13 September 2023).", said=_day(2023, 9, 13))
    assert dating.inside(bought, [week])
    # A month named does not lie inside a week of it; the month does lie inside its year.
    month = _memory(content="Maya moved in September 2023.", said=_day(2024, 1, 5))
    assert not dating.inside(month, [week])
    assert dating.inside(month, [TimeWindow(_day(2023, 1, 1), _day(2024, 1, 1))])
    assert not dating.inside(bought, [])


def test_relative_expressions_read_against_as_of_else_the_newest_memory() -> None:
    memories = [_memory("mem_a", said=_day(2023, 9, 13)), _memory("mem_b", said=_day(2023, 12, 8))]
    assert dating.anchor(memories) == _day(2023, 12, 8)
    assert dating.anchor(memories, as_of=_day(2023, 10, 1)) == _day(2023, 10, 1)
    assert dating.anchor([]) is None
    asked = dating.asked("what did Maya buy last month?")
    assert asked is not None and asked.offset is None
    (window,) = dating.windows(asked, memories)
    assert window.contains(_day(2023, 11, 20)) and not window.contains(_day(2023, 9, 13))
    (earlier,) = dating.windows(asked, memories, as_of=_day(2023, 10, 1))
    assert earlier.contains(_day(2023, 9, 13))
    assert dating.windows(asked, []) == []
    assert dating.asked("what did Maya buy?") is None


def test_the_meaning_side_is_asked_without_the_time_words() -> None:
    def meant(question: str) -> str:
        asked = dating.asked(question)
        assert asked is not None
        return asked.meant()

    assert meant("Where did Maya go on holiday around September 2023?") == "Where did Maya go on holiday around"
    assert meant("what did Maya order last month?") == "what did Maya order"
    # An event offset's words say which event: the question stays whole; so does a question of time words only.
    event = "What did Maya buy about a week before the trip to Porto?"
    assert meant(event) == event
    assert meant("in May 2024") == "in May 2024"
    # The same whatever day the search runs: "29 February" is a day (read at the clock it was one only in a
    # leap year, and the 29 was embedded with the question in other years).
    assert meant("What did Maya do on 29 February?") == "What did Maya do on"


def test_an_event_offset_is_placed_from_the_events_memories() -> None:
    asked = dating.asked("What did Maya buy about a week before the trip to Porto?")
    assert asked is not None and asked.offset is not None
    assert dating.event_query(asked.offset, ("maya", "porto")) == "trip Porto maya"
    home = _memory(content="Maya is home from Porto (said on 20 September 2023).", said=_day(2023, 9, 20))
    (window,) = dating.event_windows(asked.offset, [home])
    assert window.contains(_day(2023, 9, 13)) and not window.contains(_day(2023, 9, 20))


async def test_boosts_go_to_the_memories_of_the_time_asked() -> None:
    home = _memory("mem_home", "Maya is home from Porto.", said=_day(2023, 9, 20))
    jacket = _memory("mem_jacket", "Maya bought a rain jacket.", said=_day(2023, 9, 13))
    plants = _memory("mem_plants", "Maya bought too many plants.", said=_day(2023, 8, 2))
    asked_for: list[str] = []

    async def find(words: str) -> Sequence[Memory]:  # the store's keyword search, as the service passes it
        asked_for.append(words)
        return [home]

    question = dating.asked("What did Maya buy about a week before the trip to Porto?")
    boosts = await dating.boosts(question, [home, jacket, plants], None, find)
    assert boosts == {"mem_jacket": dating.EVENT_BOOST} and asked_for == ["trip Porto maya"]
    in_august = dating.asked("What did Maya buy in August 2023?")
    assert await dating.boosts(in_august, [home, jacket, plants], None, find) == {"mem_plants": dating.TIME_BOOST}
    assert await dating.boosts(None, [home], None, find) == {}
    assert len(asked_for) == 1  # a window expression needs no event lookup


@given(
    st.lists(st.tuples(st.floats(-1, 1), st.floats(0, 50)), min_size=1, max_size=12),
    st.integers(0, 11),
    st.sampled_from(["normalized", "weighted"]),
)
def test_a_memory_inside_the_window_never_ranks_below_itself_outside(
    pairs: list[tuple[float, float]], pick: int, fusion: str
) -> None:
    """All else equal, the boost of the time stage only lifts: the boosted memory's score and rank never drop."""
    config = RetrievalConfig(fusion=fusion)  # type: ignore[arg-type]
    candidates = [
        Candidate(_memory(f"mem_{i:02}"), cosine=c, bm25_raw=b, vector_rank=i + 1, keyword_rank=i + 1)
        for i, (c, b) in enumerate(pairs)
    ]
    chosen = candidates[pick % len(candidates)].memory.memory_id
    boosts = {chosen: dating.TIME_BOOST}

    def rank(given_boosts: dict[str, float]) -> tuple[int, float]:
        pool, _ = fuse(candidates, config, given_boosts)
        results, late = finish(pool, limit=len(candidates), now=NOW, config=config, boosts=given_boosts)
        order = [s.memory.memory_id for s in (*results, *late)]
        scores = {s.memory.memory_id: s.score for s in results}
        return (order.index(chosen) if chosen in order else len(candidates)), scores.get(chosen, -1.0)

    outside_rank, outside_score = rank({})
    inside_rank, inside_score = rank(boosts)
    assert inside_rank <= outside_rank
    assert inside_score >= outside_score


async def test_the_memory_search_finds_what_happened_before_an_event(store: Store) -> None:
    service = MemoryService(memory_store_for(store), HashEmbedder(), MemoryCaller.agent("main"))
    facts = [
        ("Maya bought too many plants at the garden centre.", _day(2023, 8, 2)),
        ("Maya bought a proper rain jacket for travelling.", _day(2023, 9, 13)),
        ("Maya bought a new kettle for the kitchen.", _day(2023, 10, 30)),
        ("Maya is home from the trip to Porto, dreaming about the harbour.", _day(2023, 9, 20)),
    ]
    for content, said in facts:
        await service.add(MemoryDraft(content, category="events", valid_from=said))
    before = await service.search("What did Maya buy about a week before the trip to Porto?", record_access=False)
    bought = [h.memory.content for h in before.hits if "bought" in h.memory.content]
    assert bought[0].startswith("Maya bought a proper rain jacket")
    stages = dict(next(h for h in before.hits if "rain jacket" in h.memory.content).stages)
    assert "time" in stages
    # A month of its own, relative to the newest memory (30 October 2023): "in August" is August 2023.
    august = await service.search("What did Maya buy in August?", record_access=False)
    assert next(h.memory.content for h in august.hits if "bought" in h.memory.content).startswith("Maya bought too")
    # as_of moves the anchor: "last month" as of 5 October 2023 is September, not October.
    last_month = await service.search("What did Maya buy last month?", as_of=_day(2023, 10, 5), record_access=False)
    assert last_month.hits and "rain jacket" in last_month.hits[0].memory.content
    assert all("kettle" not in h.memory.content for h in last_month.hits)  # not yet valid on 5 October 2023


@pytest.mark.parametrize("question", ["What did Maya buy?", "What did Maya buy before?"])
async def test_a_question_without_a_time_gets_no_time_stage(store: Store, question: str) -> None:
    service = MemoryService(memory_store_for(store), HashEmbedder(), MemoryCaller.agent("main"))
    await service.add(MemoryDraft("Maya bought a rain jacket.", category="events", valid_from=_day(2023, 9, 13)))
    result = await service.search(question, record_access=False)
    assert result.hits and all("time" not in dict(h.stages) for h in result.hits)


async def test_the_finder_reads_the_events_memories_best_first_within_reach(store: Store) -> None:
    memories = memory_store_for(store)
    service = MemoryService(memories, HashEmbedder(), MemoryCaller.agent("main"))
    home = await service.add(MemoryDraft("Maya is home from Porto.", category="events", valid_from=_day(2023, 9, 20)))
    await service.add(MemoryDraft("Jonas was in Porto once.", category="events", valid_from=_day(2023, 5, 2)))
    await service.add(MemoryDraft("Maya bought a kettle.", category="events", valid_from=_day(2023, 9, 2)))
    found = await dating.finder(memories, None, False, None)("Porto Maya")
    assert found[0].memory_id == home.memory_id and len(found) <= dating.EVENT_MENTIONS
    assert await dating.finder(memories, ["nobody"], False, None)("Porto Maya") == []  # another scope: nothing
    assert await dating.finder(memories, None, False, [987])("Porto Maya") == []  # another conversation's
