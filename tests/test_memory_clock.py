"""The memory layer's one clock: every time it stores or compares is the clock's it was given, on both backends.

The stores take ``now`` from their caller (the port's "Times are given, never read"); the memory service
passes its clock's; the engine passes its own clock to the service.  Each time is checked for equality
with a fake clock's value set far from the wall clock, so a time read from the wall cannot pass.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lossless import ContextEngine, Message
from lossless.memory.records import Memory, MemoryDraft, MemoryPatch
from lossless.memory.scopes import MemoryCaller
from lossless.memory.service import MemoryService
from lossless.ports import PreparedMessage
from lossless.records import parse_timestamp
from lossless.stores import memory_store_for, open_store
from lossless.testing import HashEmbedder

from . import pg
from .conftest import BACKENDS, backend_url, example_store

pytestmark = pytest.mark.anyio

#: Far from any wall clock this test runs under: a time read from the wall never equals one of these.
START = datetime(2031, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, at: datetime = START) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at

    def move(self, by: timedelta) -> datetime:
        self.at += by
        return self.at


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return backend_url(request, request.param, tmp_path, "clock")


async def _column(url: str, sql: str) -> list[datetime]:
    """One column of times, read past the store (SQLite text or PostgreSQL timestamptz), as UTC datetimes."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            return [parse_timestamp(row[0]) for row in conn.execute(sql)]
    import psycopg

    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(sql)
        return [row[0].astimezone(UTC) for row in await cursor.fetchall()]


async def _stored(service: MemoryService, memory_id: str) -> Memory:
    (memory,) = await service.store.get([memory_id])
    return memory


async def test_a_moving_fake_clock_stamps_every_time_the_memory_layer_writes(url: str) -> None:
    clock = FakeClock()
    store = await open_store(url)
    try:
        conversation = await store.get_or_create_conversation(agent_id="main", session_id="clock")
        service = MemoryService(memory_store_for(store), HashEmbedder(), MemoryCaller.agent("main"), clock=clock)
        added = await service.add(MemoryDraft("Dana keeps the spare key under the blue pot.", category="entities"))
        assert (added.created_at, added.updated_at, added.valid_from) == (START, START, START)
        assert added.invalidated_at is None and added.last_accessed_at is None

        updated_at = clock.move(timedelta(hours=3, microseconds=7))
        updated = await service.update(added.memory_id, MemoryPatch(importance=0.9))
        assert (updated.created_at, updated.updated_at) == (START, updated_at)

        superseded_at = clock.move(timedelta(days=40))
        new = await service.supersede(added.memory_id, MemoryDraft("Dana keeps the spare key in the shed."))
        old = await _stored(service, added.memory_id)
        assert (old.invalidated_at, old.updated_at, old.created_at) == (superseded_at, superseded_at, START)
        assert (new.created_at, new.updated_at, new.valid_from) == (superseded_at, superseded_at, superseded_at)

        accessed_at = clock.move(timedelta(minutes=1))
        hits = (await service.search("spare key shed")).hits
        assert [h.memory.memory_id for h in hits] == [new.memory_id]
        assert (await _stored(service, new.memory_id)).last_accessed_at == accessed_at
        assert hits[0].memory.last_accessed_at is None  # the hit as ranked: before this access

        clock.move(timedelta(days=-400))  # a clock may go back too: the store writes what it says
        await service.store.grant("main", ["global", "agent:main"], now=clock())
        said = await store.append_messages(
            conversation.id, [PreparedMessage(Message.user("I prefer green tea in the mornings."), 8, START)]
        )
        await service.mine(said.stored)
        assert await _column(url, "SELECT granted_at FROM memory_access") == [clock(), clock()]
        assert await _column(url, "SELECT mined_at FROM memory_mined") == [clock()]
        cached = await _column(url, "SELECT created_at FROM embedding_cache")
        assert len(cached) > 3 and set(cached) <= {START, superseded_at, accessed_at, clock()}
        mined = [m for _, m in await service.list() if m.conversation_id == conversation.id]
        assert mined and all((m.created_at, m.updated_at) == (clock(), clock()) for m in mined)
    finally:
        await store.close()


# --------------------------------------------------------------------- any history


@dataclass
class _Expected:
    """What each memory's times must be, as the model of a history tells them."""

    times: dict[str, dict[str, datetime | None]] = field(default_factory=dict)
    current: list[str] = field(default_factory=list)

    def added(self, memory_id: str, at: datetime) -> None:
        self.times[memory_id] = {
            "created_at": at,
            "updated_at": at,
            "valid_from": at,
            "invalidated_at": None,
            "last_accessed_at": None,
        }
        self.current.append(memory_id)


_STEPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "update", "supersede", "search"]),
        st.integers(min_value=0, max_value=50),  # which memory (modulo the current ones)
        st.timedeltas(min_value=timedelta(days=-30), max_value=timedelta(days=400)),  # how the clock moves first
    ),
    min_size=1,
    max_size=12,
)
_WORDS = ["harbour", "violin", "lantern", "orchard", "glacier", "meadow", "compass", "pepper"]


@settings(deadline=None, max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    start=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2090, 1, 1), timezones=st.just(UTC)),
    steps=_STEPS,
)
def test_any_history_under_a_fake_clock_holds_the_clocks_times_and_never_the_walls(
    url: str, tmp_path_factory: pytest.TempPathFactory, start: datetime, steps: list[tuple[str, int, timedelta]]
) -> None:
    """Any sequence of adds, updates, supersedes and searches (each after the clock moves, back or forth):
    every stored time is the clock's value at the step that wrote it, as a model of the history says."""

    async def run() -> None:
        clock = FakeClock(start)
        expected = _Expected()
        async with example_store(url, tmp_path_factory, clean=True) as store:
            service = MemoryService(memory_store_for(store), HashEmbedder(64), MemoryCaller.agent("main"), clock=clock)
            for number, (kind, pick, move) in enumerate(steps):
                now = clock.move(move)
                word = _WORDS[number % len(_WORDS)]
                if kind == "add" or not expected.current:
                    memory = await service.add(MemoryDraft(f"The {word} note number {number}.", category="events"))
                    expected.added(memory.memory_id, now)
                elif kind == "update":
                    target = expected.current[pick % len(expected.current)]
                    await service.update(target, MemoryPatch(content=f"The {word} note, revised at step {number}."))
                    expected.times[target]["updated_at"] = now
                elif kind == "supersede":
                    target = expected.current.pop(pick % len(expected.current))
                    memory = await service.supersede(target, MemoryDraft(f"The {word} note replaced at {number}."))
                    expected.times[target].update(updated_at=now, invalidated_at=now)
                    expected.added(memory.memory_id, now)
                else:
                    for hit in (await service.search(f"{word} note", limit=10)).hits:
                        expected.times[hit.memory.memory_id]["last_accessed_at"] = now
            stored = await service.store.get(list(expected.times))
            assert {m.memory_id: _times(m) for m in stored} == expected.times

    anyio.run(run)


def _times(memory: Memory) -> dict[str, datetime | None]:
    return {
        "created_at": memory.created_at,
        "updated_at": memory.updated_at,
        "valid_from": memory.valid_from,
        "invalidated_at": memory.invalidated_at,
        "last_accessed_at": memory.last_accessed_at,
    }


# --------------------------------------------------------------------- the engine's clock, whatever the wall says


_CHAT = [
    "I prefer green tea over coffee in the mornings.",
    "My sister Dana moved to Lisbon last spring.",
    "I am allergic to peanuts, so no satay for me.",
    "We adopted a beagle called Biscuit in March.",
    "I always take the 7:40 train to work.",
    "My favourite band is Radiohead.",
]
_QUESTIONS = ["what does the user drink in the morning", "where did Dana move", "the dog's name", "train to work"]


Found = list[list[tuple[str, float, tuple[tuple[str, float], ...], datetime]]]


async def _run(url: str, clock: Callable[[], datetime], pause: float) -> Found:
    """One run: a new engine on ``url`` with ``clock`` mines a chat and searches it; ``pause`` seconds of wall
    time pass between the mining and the searches.  What it found, with every score and time."""
    engine = await ContextEngine.open(url, clock=clock, memory_embedder="hash")
    try:
        day = datetime(2030, 1, 1, 9, tzinfo=UTC)
        await engine.ingest_batch(
            "chat",
            [Message.user(text, created_at=day + timedelta(hours=i)) for i, text in enumerate(_CHAT)],
        )
        while await engine.mine_step():
            pass
        await anyio.sleep(pause)
        found: Found = []
        for question in _QUESTIONS:
            result = await engine.memory().search(question, limit=5)
            hits = [(h.memory.content, h.score, h.stages, h.memory.created_at) for h in result.hits]
            # Exact ties are broken by memory id, a random uuid per store: compare the ties in one order.
            found.append(sorted(hits, key=lambda hit: (-hit[1], hit[0])))
        return found
    finally:
        await engine.dispose()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_two_engines_on_the_same_clock_rank_alike_whatever_wall_time_passes(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Two engines with the same frozen clock, opened at different moments and searching after different
    pauses, find the same memories with the same scores, stages and times (the ranking's recency and decay
    are read against the clock, as the times they compare are stamped by it)."""
    frozen = FakeClock(datetime(2030, 2, 1, tzinfo=UTC))
    if backend == "sqlite":
        urls = [f"sqlite:///{tmp_path / f'run{i}.db'}" for i in (1, 2)]
        first = await _run(urls[0], frozen, pause=0.0)
        second = await _run(urls[1], frozen, pause=0.05)
    else:
        server = request.getfixturevalue("pg_server")
        with pg.database(server) as one:
            first = await _run(one, frozen, pause=0.0)
        with pg.database(server) as two:
            second = await _run(two, frozen, pause=0.05)
    assert any(first), "the chat gave memories to find"
    assert first == second
    assert {at for hits in first for _, _, _, at in hits} == {frozen()}
