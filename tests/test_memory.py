"""Long-term memory: storage, provenance, scopes, search pipeline, decay/tiers, extraction, dedup."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lossless.errors import AccessDeniedError, InputError, NotFoundError
from lossless.memory import decay
from lossless.memory.extraction import decide
from lossless.memory.ports import NearestNeighbours
from lossless.memory.ranking import Candidate, RetrievalConfig, finish, fuse
from lossless.memory.records import Memory, MemoryDraft, MemoryPatch
from lossless.memory.scopes import MemoryCaller, check_scope, reachable_scopes
from lossless.memory.service import MemoryService
from lossless.memory.vectors import (
    VectorIndex,
    calibrate,
    chunk_text,
    from_blob,
    normalize,
    pairwise,
    to_blob,
    uncalibrate,
)
from lossless.ports import PreparedMessage, Store
from lossless.records import Message, utcnow
from lossless.stores import memory_store_for, open_store
from lossless.testing import HashEmbedder
from tests.memories import memory_value

from .conftest import BACKENDS, backend_url, example_store

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 6, 1, tzinfo=UTC)
#: Property tests share one database per backend and test (a PostgreSQL database per example would cost
#: a fifth of a second each); each example opens its own store on it, and cleans it where it must.
SHARED_DATABASE = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# Every test taking ``store`` (conftest: parametrized by backend) runs on SQLite and on PostgreSQL.


@pytest.fixture(params=BACKENDS)
def memory_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database URL of each backend, for property tests that open stores per example."""
    return backend_url(request, request.param, tmp_path, "mem")


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
def service(store: Store, embedder: HashEmbedder) -> MemoryService:
    return MemoryService(memory_store_for(store), embedder, MemoryCaller.agent("main"))


def _memory(**overrides: object) -> Memory:
    return memory_value(**overrides)


# ------------------------------------------------------------------ records and storage


def test_draft_validates_and_derives_levels() -> None:
    draft = MemoryDraft("I prefer tea. Always green, never black.", category="preferences")
    assert draft.abstract == "I prefer tea."
    assert draft.effective_importance == 0.8
    with pytest.raises(InputError, match="category"):
        MemoryDraft("x", category="facts")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="between 0 and 1"):
        MemoryDraft("x", importance=1.5)
    with pytest.raises(InputError, match="conversation_id"):
        MemoryDraft("x", source_message_ids=(1,))
    with pytest.raises(InputError, match="NUL"):
        MemoryDraft("a\x00b")
    with pytest.raises(InputError, match="change something"):
        MemoryPatch()


async def test_add_update_in_place_and_roundtrip(service: MemoryService) -> None:
    memory = await service.add(MemoryDraft("The staging database is on host db-7.", category="entities"))
    assert memory.scope == "agent:main" and memory.tier == "working"
    updated = await service.update(memory.memory_id, MemoryPatch(content="The staging database moved to db-9."))
    assert updated.memory_id == memory.memory_id and "db-9" in updated.content
    assert updated.abstract == "The staging database moved to db-9."
    found = await service.search("db-9", record_access=False)
    assert [h.memory.memory_id for h in found.hits] == [memory.memory_id]
    assert not (await service.search("db-7", record_access=False)).hits or "db-9" in found.hits[0].memory.content
    assert Memory.from_dict(updated.to_dict()) == updated


async def test_provenance_is_checked_and_kept(store: Store, service: MemoryService) -> None:
    conversation = await store.get_or_create_conversation(agent_id="main", session_id="s1")
    now = utcnow()
    await store.append_messages(
        conversation.id,
        [PreparedMessage(Message(role="user", content=f"message {i}"), 3, now) for i in range(3)],
    )
    ids = [m.id for m in await store.get_messages(conversation.id)]
    memory = await service.add(
        MemoryDraft(
            "I live in Lyon.", category="profile", conversation_id=conversation.id, source_message_ids=(ids[2], ids[0])
        )
    )
    assert memory.conversation_id == conversation.id and memory.source_message_ids == (ids[2], ids[0])
    with pytest.raises(NotFoundError):
        await service.add(MemoryDraft("x y z", conversation_id=conversation.id, source_message_ids=(999_999,)))
    assert (await service.stats()).total == 1  # the refused draft wrote nothing


async def test_an_update_can_add_source_messages(store: Store, service: MemoryService) -> None:
    conversation = await store.get_or_create_conversation(agent_id="main", session_id="s1")
    other = await store.get_or_create_conversation(agent_id="main", session_id="s2")
    now = utcnow()
    for conv in (conversation.id, other.id):
        await store.append_messages(
            conv, [PreparedMessage(Message(role="user", content=f"message {i}"), 3, now) for i in range(4)]
        )
    ids = [m.id for m in await store.get_messages(conversation.id)]
    elsewhere = [m.id for m in await store.get_messages(other.id)]
    memory = await service.add(
        MemoryDraft(
            "I live in Lyon.", category="profile", conversation_id=conversation.id, source_message_ids=(ids[1],)
        )
    )
    grown = await service.update(memory.memory_id, MemoryPatch(add_sources=(ids[3], ids[1], ids[0], ids[3])))
    assert grown.source_message_ids == (ids[1], ids[3], ids[0])  # appended in order, none twice
    assert grown.content == memory.content and grown.memory_id == memory.memory_id
    again = await service.update(memory.memory_id, MemoryPatch(add_sources=(ids[0],), importance=0.9))
    assert again.source_message_ids == grown.source_message_ids and again.importance == 0.9
    with pytest.raises(NotFoundError):  # a message of another conversation is not this memory's provenance
        await service.update(memory.memory_id, MemoryPatch(add_sources=(elsewhere[0],)))
    assert (await service.get(memory.memory_id)).source_message_ids == grown.source_message_ids
    manual = await service.add(MemoryDraft("Tabs, not spaces.", category="preferences"))
    with pytest.raises(InputError, match="belongs to no conversation"):
        await service.update(manual.memory_id, MemoryPatch(add_sources=(ids[0],)))
    for bad in ((0,), (True,), ("3",)):
        with pytest.raises(InputError, match="add_sources"):
            MemoryPatch(add_sources=bad)  # type: ignore[arg-type]


async def test_supersede_keeps_history_queryable(service: MemoryService) -> None:
    old = await service.add(MemoryDraft("I prefer coffee.", category="preferences", fact_key="preferences:drink"))
    new = await service.supersede(old.memory_id, MemoryDraft("I prefer tea now.", category="preferences"))
    assert new.supersedes == old.memory_id and new.fact_key == "preferences:drink"
    (stored_old,) = await service.store.get([old.memory_id])
    assert stored_old.superseded_by == new.memory_id and stored_old.invalidated_at is not None
    current = await service.search("prefer", record_access=False)
    assert [h.memory.memory_id for h in current.hits] == [new.memory_id]
    before = stored_old.invalidated_at - timedelta(microseconds=1)
    history = await service.search("prefer coffee", as_of=before)
    assert [h.memory.memory_id for h in history.hits] == [old.memory_id]
    listed = await service.list(fact_key="preferences:drink", include_superseded=True)
    assert [m.memory_id for _, m in listed] == [old.memory_id, new.memory_id]
    with pytest.raises(InputError, match="already superseded"):
        await service.supersede(old.memory_id, MemoryDraft("I prefer water."))


async def test_concurrent_writers_neither_fork_history_nor_lose_accesses(store: Store) -> None:
    import anyio

    memories = memory_store_for(store)
    (old,) = await memories.insert([MemoryDraft("I prefer coffee.", category="preferences")], [("m", ())], now=NOW)
    outcomes: list[str] = []

    async def supersede(text: str) -> None:
        try:
            outcomes.append((await memories.supersede(old.memory_id, MemoryDraft(text), ("m", ()), now=NOW)).content)
        except InputError as exc:
            outcomes.append(str(exc))

    async with anyio.create_task_group() as group:
        for text in ("I prefer tea.", "I prefer water.", "I prefer juice."):
            group.start_soon(supersede, text)
    assert sum("already superseded" in o for o in outcomes) == 2  # exactly one new version
    async with anyio.create_task_group() as group:
        for _ in range(12):
            group.start_soon(memories.record_access, [old.memory_id], NOW)
    ((_, stored),) = await memories.list_memories(None, include_superseded=True, fact_key=None, limit=1)
    assert stored.access_count == 12


async def test_forget_by_prefix_and_export_import_without_cap(tmp_path: Path, service: MemoryService) -> None:
    drafts = [MemoryDraft(f"Fact number {i} about project apollo.", category="events") for i in range(1205)]
    vectors = [("hash-256", ()) for _ in drafts]
    await service.store.insert(
        [MemoryDraft(d.content, category="events", scope="agent:main") for d in drafts], vectors, now=NOW
    )
    exported = [m async for m in service.export(batch=500)]
    assert len(exported) == 1205  # the reference stopped at 1000
    target = exported[0]
    forgotten = await service.forget(target.memory_id[:12])
    assert forgotten.memory_id == target.memory_id
    other = await open_store(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        clone = MemoryService(memory_store_for(other), HashEmbedder(), MemoryCaller.agent("main"))
        assert await clone.import_(exported[:50]) == 50
        assert await clone.import_(exported[:60]) == 10  # ids already present are skipped
        assert (await clone.stats()).total == 60
    finally:
        await other.close()


# ------------------------------------------------------------------ embedding and vectors


async def test_embeddings_are_cached_by_content_hash(service: MemoryService, embedder: HashEmbedder) -> None:
    await service.embed(["alpha beta", "gamma"])
    await service.embed(["gamma", "alpha beta"])
    assert embedder.calls == [["alpha beta", "gamma"]]


async def test_long_text_matched_by_best_chunk_not_average(store: Store) -> None:
    import numpy as np

    embedder = HashEmbedder(max_chars=200)
    service = MemoryService(memory_store_for(store), embedder, MemoryCaller.agent("main"))
    filler = " ".join(f"word{i}" for i in range(400))
    long = await service.add(MemoryDraft(f"{filler} the kubernetes ingress certificate expired", category="cases"))
    (_, stored) = await service.store.load_vectors(embedder.model)
    rows = [row for row in stored if row[0] == long.memory_id]
    assert len(rows) > 10
    index = VectorIndex(0, stored)
    query = embedder.vector("kubernetes ingress certificate expired")
    (hit,) = index.search(query, limit=1)
    averaged = normalize(index.matrix.mean(axis=0))[0]
    assert hit.memory_id == long.memory_id
    assert hit.similarity > 0.5 > 2 * float(averaged @ np.asarray(query, dtype=np.float32))


@given(st.text(min_size=0, max_size=3000), st.integers(min_value=50, max_value=800))
@settings(max_examples=60, deadline=None)
def test_chunks_cover_the_text_and_respect_the_size(text: str, size: int) -> None:
    pieces = chunk_text(text, size)
    assert all(len(p) <= size for p in pieces)
    words = text.split()
    joined = " ".join(pieces)
    assert all(w in joined for w in words if len(w) < size // 2)  # longer words may be cut


def test_vector_index_is_exact_against_brute_force() -> None:
    import numpy as np

    rng = np.random.default_rng(7)
    vectors = normalize(rng.normal(size=(300, 16)))
    rows = [(f"mem_{i:04d}", "global" if i % 3 else "agent:a", True, to_blob(v)) for i, v in enumerate(vectors)]
    index = VectorIndex(1, rows)
    query = normalize(rng.normal(size=16))[0]
    expected = sorted(range(300), key=lambda i: -float(vectors[i] @ query))[:10]
    assert [h.memory_id for h in index.search(query, limit=10)] == [f"mem_{i:04d}" for i in expected]
    scoped = index.search(query, limit=5, scopes=["agent:a"])
    assert all(int(h.memory_id[4:]) % 3 == 0 for h in scoped)


@given(
    st.lists(st.integers(1, 3), min_size=1, max_size=40),
    st.lists(st.sampled_from(["global", "agent:a"]), min_size=40, max_size=40),
    st.lists(st.booleans(), min_size=40, max_size=40),
    st.sets(st.integers(0, 45)),
    st.integers(1, 12),
    st.integers(0, 2**32 - 1),
)
@settings(max_examples=80, deadline=None)
def test_vector_index_search_among_some_memories_is_brute_force_over_them(
    chunks: list[int], scopes: list[str], current: list[bool], only: set[int], limit: int, seed: int
) -> None:
    """``only`` (the memories of the conversations searched): the best chunk of each of those memories alone,
    ranked as over the whole index, ties by id; the subset's rows are kept, and asking again gives the same."""
    import numpy as np

    rng = np.random.default_rng(seed)
    rows = [
        (f"mem_{i:03d}", scopes[i], current[i], to_blob(normalize(rng.normal(size=8))[0]))
        for i, n in enumerate(chunks)
        for _ in range(n)
    ]
    index = VectorIndex(1, rows)
    query = normalize(rng.normal(size=8))[0]
    wanted = frozenset(f"mem_{i:03d}" for i in only)  # some name no memory of the index
    best: dict[str, float] = {}
    for memory_id, scope, is_current, blob in rows:
        if memory_id in wanted and scope == "agent:a" and is_current:
            best[memory_id] = max(best.get(memory_id, -2.0), float(from_blob(blob) @ query))
    expected = sorted(best, key=lambda m: (-best[m], m))[:limit]
    for _ in range(2):
        hits = index.search(query, limit=limit, scopes=["agent:a"], only=wanted)
        assert [h.memory_id for h in hits] == expected
        assert [h.similarity for h in hits] == pytest.approx([best[m] for m in expected], abs=1e-5)
    assert index.search(query, limit=limit, only=set()) == []


async def test_a_memory_added_after_a_search_of_some_conversations_is_found_by_the_next(store: Store) -> None:
    """The memories of the conversations searched are kept per store revision: one added (or removed) since
    is found (or gone) at the next search of those conversations."""
    service = MemoryService(memory_store_for(store), HashEmbedder(), MemoryCaller.agent("main"))
    a = await store.get_or_create_conversation(agent_id="main", session_id="a")
    b = await store.get_or_create_conversation(agent_id="main", session_id="b")
    await service.add(MemoryDraft("The cat Miso sleeps on the balcony", conversation_id=a.id))
    await service.add(MemoryDraft("The lighthouse cabin is booked for June", conversation_id=b.id))
    question = "where is the lighthouse cabin"
    before = await service.search(question, limit=5, record_access=False, conversations=[a.id])
    assert all(h.memory.conversation_id == a.id for h in before.hits)
    added = await service.add(MemoryDraft("The lighthouse cabin has a blue door", conversation_id=a.id))
    after = await service.search(question, limit=5, record_access=False, conversations=[a.id])
    assert added.memory_id in [h.memory.memory_id for h in after.hits]
    assert all(h.memory.conversation_id == a.id for h in after.hits)
    await service.forget(added.memory_id)
    again = await service.search(question, limit=5, record_access=False, conversations=[a.id])
    assert added.memory_id not in [h.memory.memory_id for h in again.hits]


async def test_a_memory_read_by_one_host_is_what_the_next_read_finds_after_another_hosts_writes(
    memory_url: str,
) -> None:
    """Two hosts on one store: whatever the second writes (an access, a tier, an edit, a deleted conversation, a
    removal), the first host's next ``get`` returns the memory as stored now (PostgreSQL keeps the records it read
    per revision, and reads the columns that change without a bump every time)."""
    one, two = await open_store(memory_url), await open_store(memory_url)
    try:
        here, there = memory_store_for(one), memory_store_for(two)
        chat = await one.get_or_create_conversation(agent_id="main", session_id="hosts")
        (kept, other) = await here.insert(
            [
                MemoryDraft("Dana booked the lighthouse cabin", conversation_id=chat.id),
                MemoryDraft("Jonas adopted a beagle", conversation_id=chat.id),
            ],
            [("m", ()), ("m", ())],
            now=NOW,
        )
        ids = [kept.memory_id, other.memory_id]

        async def both() -> tuple[list[Memory], list[Memory]]:
            """What the first host reads (twice: from the store, then from what it read) and the second reads."""
            first = await here.get(ids)
            assert await here.get(ids) == first
            return first, await there.get(ids)

        first, second = await both()
        assert first == second and [m.memory_id for m in first] == ids
        await there.record_access([kept.memory_id], NOW)
        first, second = await both()
        assert first == second and first[0].access_count == 1 and first[0].last_accessed_at == NOW
        await there.set_tiers({kept.memory_id: "peripheral"})
        first, second = await both()
        assert first == second and first[0].tier == "peripheral"
        await there.update(
            kept.memory_id, MemoryPatch(abstract="Dana booked the cabin by the lighthouse"), None, now=NOW
        )
        first, second = await both()
        assert first == second and first[0].abstract == "Dana booked the cabin by the lighthouse"
        assert await two.delete_conversations([chat.id]) == 1  # memories outlive it, citing no conversation
        first, second = await both()
        assert first == second and [m.conversation_id for m in first] == [None, None]
        await there.delete([other.memory_id])
        first, second = await both()
        assert first == second and [m.memory_id for m in first] == [kept.memory_id]
    finally:
        await one.close()
        await two.close()


async def test_a_memory_read_inside_a_block_that_rolls_back_is_not_what_later_reads_find(store: Store) -> None:
    """A read inside ``atomic()`` sees the block's own writes, which a rollback undoes: what it read is kept
    for no later read, even once another write brings the store to the revision the block had reached."""
    memories = memory_store_for(store)
    (memory,) = await memories.insert([MemoryDraft("Dana booked the lighthouse cabin")], [("m", ())], now=NOW)
    with pytest.raises(RuntimeError):
        async with store.atomic():
            await memories.update(memory.memory_id, MemoryPatch(abstract="Dana booked a tent"), None, now=NOW)
            (inside,) = await memories.get([memory.memory_id])
            assert inside.abstract == "Dana booked a tent"
            raise RuntimeError("rolled back")
    await memories.update(
        memory.memory_id, MemoryPatch(abstract="Dana booked the cabin by the lighthouse"), None, now=NOW
    )
    (last,) = await memories.get([memory.memory_id])
    assert last.abstract == "Dana booked the cabin by the lighthouse"


# ------------------------------------------------------------------ keyword search


async def test_keyword_search_ands_the_words_and_ors_them_only_when_no_memory_holds_them_all(
    service: MemoryService,
) -> None:
    both = await service.add(MemoryDraft("The walrus and the pelican met at the harbour"))
    one = await service.add(MemoryDraft("A pelican nests on the lighthouse"))

    async def found(query: str) -> set[str]:
        return {h.memory_id for h in await service.store.keyword_search(query, None, limit=5)}

    assert await found("walrus pelican") == {both.memory_id}  # AND: the memory that holds both words only
    assert await found("pelican lighthouse") == {one.memory_id}
    assert await found("walrus lighthouse") == {both.memory_id, one.memory_id}  # none holds both: OR
    assert await found("walrus zeppelin") == {both.memory_id}  # a word no memory holds is dropped


async def test_cjk_and_exact_tokens_are_found_by_keyword(service: MemoryService) -> None:
    zh = await service.add(MemoryDraft("我喜欢喝咖啡，尤其是拿铁。", category="preferences"))
    ja = await service.add(MemoryDraft("私は東京に住んでいます。", category="profile"))
    ko = await service.add(MemoryDraft("저는 김치찌개를 좋아합니다.", category="preferences"))
    key = await service.add(MemoryDraft("The deploy token is ZX-4471-QQ.", category="entities"))
    for query, expected in (("咖啡", zh), ("拿铁咖啡", zh), ("東京", ja), ("김치찌개", ko), ("ZX-4471-QQ", key)):
        hits = await service.store.keyword_search(query, None, limit=5)
        assert hits and hits[0].memory_id == expected.memory_id, query


async def test_identifiers_are_found_by_their_words(service: MemoryService) -> None:
    """``computeDiff`` is found by "compute diff" as well as written; changed or deleted text leaves no word behind."""
    edit = await service.add(
        MemoryDraft("The assistant edited diff.go (in computeDiff; adding parseHTTPHeaders).", category="events")
    )
    other = await service.add(MemoryDraft("Maya prefers tea over coffee.", category="preferences"))

    async def found(query: str) -> list[str]:
        return [h.memory_id for h in await service.store.keyword_search(query, None, limit=5)]

    for query in ("compute diff", "computeDiff", "parse HTTP headers", "parse headers", "diff go"):
        assert await found(query) == [edit.memory_id], query
    assert await found("tea") == [other.memory_id]
    await service.update(edit.memory_id, MemoryPatch(content="The assistant edited merge.go (in readJSONBody)."))
    assert await found("compute diff") == []
    assert await found("read json body") == [edit.memory_id]
    assert await service.store.delete([edit.memory_id]) == 1
    assert await found("read json body") == [] and await found("readJSONBody") == []


@given(st.text(max_size=80))
@settings(SHARED_DATABASE, max_examples=40)
def test_keyword_search_accepts_any_text(memory_url: str, tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    import anyio

    async def run() -> None:
        async with example_store(memory_url, tmp_path_factory, clean=False) as store:
            memories = memory_store_for(store)
            if not (await memories.stats(None)).total:
                await memories.insert(
                    [MemoryDraft("Seed: ünïcode 漢字かな 한국어 words, ids like ZX-1_2 and 50%.")], [("m", ())], now=NOW
                )
            await memories.keyword_search(text, ["global"], limit=5)

    anyio.run(run)


# ------------------------------------------------------------------ scopes


def test_scope_names_and_default_reach() -> None:
    assert check_scope("project:lossless") == "project:lossless"
    for bad in ("", "agents:x", "global;drop", "agent:", "custom:a b"):
        with pytest.raises(InputError):
            check_scope(bad)
    assert reachable_scopes(MemoryCaller.agent("bot"), {}) == ("global", "agent:bot", "reflection:agent:bot")
    assert reachable_scopes(MemoryCaller.agent("bot"), {"bot": ["project:x"]}) == ("project:x", "reflection:agent:bot")
    assert reachable_scopes(MemoryCaller.agent("system"), {}) == ("global", "agent:system", "reflection:agent:system")
    assert reachable_scopes(MemoryCaller.system(), {}) is None


async def test_scopes_filter_reads_and_refuse_writes(store: Store, embedder: HashEmbedder) -> None:
    memories = memory_store_for(store)
    alice = MemoryService(memories, embedder, MemoryCaller.agent("alice"))
    bob = MemoryService(memories, embedder, MemoryCaller.agent("bob"))
    secret = await alice.add(MemoryDraft("Alice's private launch code is 8812.", category="entities"))
    wifi = MemoryDraft("The office wifi is called Ganymede.", category="entities")
    with pytest.raises(AccessDeniedError, match="explicit grant"):  # global is everyone's: writing needs a grant
        await alice.add(wifi, scope="global")
    await memories.grant("alice", ["global", "agent:alice"], now=NOW)
    shared = await alice.add(wifi, scope="global")
    assert not [h for h in (await bob.search("launch code 8812")).hits if h.memory.memory_id == secret.memory_id]
    assert (await bob.search("wifi Ganymede")).hits
    with pytest.raises(AccessDeniedError, match="grant"):
        await bob.add(MemoryDraft("sneaky"), scope="agent:alice")
    with pytest.raises(AccessDeniedError):
        await bob.search("x", scopes=["agent:alice"])
    with pytest.raises(NotFoundError):
        await bob.forget(secret.memory_id)
    # Bob reads alice's global memory but, without a grant naming global, cannot change or forget it.
    for change in (
        bob.forget(shared.memory_id),
        bob.update(shared.memory_id, MemoryPatch(content="The wifi is called Evil.")),
        bob.supersede(shared.memory_id, MemoryDraft("The wifi is called Evil.")),
    ):
        with pytest.raises(AccessDeniedError, match="explicit grant"):
            await change
    assert (await bob.get(shared.memory_id)).content == wifi.content
    await memories.grant("bob", ["agent:alice"], now=NOW)
    assert (await bob.search("launch code 8812")).hits[0].memory.memory_id == secret.memory_id
    everything = MemoryService(memories, embedder, MemoryCaller.system())
    assert (await everything.stats()).total == 2


# ------------------------------------------------------------------ decay and tiers


@given(
    importance=st.floats(0, 1),
    confidence=st.floats(0, 1),
    accesses=st.integers(0, 500),
    gap=st.floats(0, 1000),
    age=st.floats(0, 5000),
    tier=st.sampled_from(["core", "working", "peripheral"]),
    dynamic=st.booleans(),
)
def test_decay_scores_are_bounded(
    importance: float, confidence: float, accesses: int, gap: float, age: float, tier: str, dynamic: bool
) -> None:
    memory = _memory(
        importance=importance,
        confidence=confidence,
        access_count=accesses,
        access_gap_days=gap,
        tier=tier,
        temporal_type="dynamic" if dynamic else "static",
        created_at=NOW - timedelta(days=age),
        last_accessed_at=NOW - timedelta(days=age / 2) if accesses else None,
    )
    scores = decay.score(memory, NOW)
    for value in (scores.recency, scores.frequency, scores.intrinsic, scores.composite):
        assert 0.0 <= value <= 1.0
    assert 0.3 <= decay.search_boost(memory, NOW) <= 1.0
    assert decay.next_tier(memory, NOW) in {"core", "working", "peripheral"}


def test_weibull_formula_and_dynamic_third_half_life() -> None:
    memory = _memory(importance=0.0, created_at=NOW - timedelta(days=30))
    assert decay.score(memory, NOW).recency == pytest.approx(0.5)
    dynamic = _memory(importance=0.0, temporal_type="dynamic", created_at=NOW - timedelta(days=10))
    assert decay.score(dynamic, NOW).recency == pytest.approx(0.5)


def test_tier_transitions() -> None:
    fresh = NOW - timedelta(hours=1)
    busy = {
        "access_count": 12,
        "last_accessed_at": fresh,
        "access_gap_days": 0.1,
        "created_at": NOW - timedelta(days=5),
    }
    assert decay.next_tier(_memory(tier="peripheral", **busy), NOW) == "working"
    assert decay.next_tier(_memory(tier="working", importance=0.9, confidence=1.0, **busy), NOW) == "core"
    assert decay.next_tier(_memory(tier="working", importance=0.5, **busy), NOW) == "working"
    stale = _memory(tier="working", created_at=NOW - timedelta(days=61), access_count=1, last_accessed_at=fresh)
    assert decay.next_tier(stale, NOW) == "peripheral"
    gone = _memory(tier="core", importance=0.0, confidence=0.0, created_at=NOW - timedelta(days=3000))
    assert decay.next_tier(gone, NOW) == "working"


async def test_tiers_move_on_access(store: Store, embedder: HashEmbedder) -> None:
    clock = [NOW]
    service = MemoryService(memory_store_for(store), embedder, MemoryCaller.agent("main"), clock=lambda: clock[0])
    memory = await service.add(MemoryDraft("My favourite editor is helix.", category="preferences", importance=0.9))
    for _ in range(11):
        clock[0] += timedelta(minutes=5)
        result = await service.search("favourite editor helix")
        assert result.hits[0].memory.memory_id == memory.memory_id
    (stored,) = await service.store.get([memory.memory_id])
    assert stored.access_count == 11 and stored.tier == "core"
    clock[0] += timedelta(days=4000)
    await service.store.update(memory.memory_id, MemoryPatch(importance=0.0, confidence=0.0), None, now=clock[0])
    assert await service.maintain() == {}  # 11 accesses: core stays core (needs < 3 to demote)


# ------------------------------------------------------------------ ranking pipeline


def test_pipeline_records_every_stage_and_explains_drops() -> None:
    good = Candidate(_memory(memory_id="mem_good", content="green tea"), cosine=0.9, bm25_raw=8.0, vector_rank=1)
    weak = Candidate(_memory(memory_id="mem_weak"), cosine=-0.9, vector_rank=2)
    exact = Candidate(_memory(memory_id="mem_exact"), bm25_raw=30.0, keyword_rank=1)
    weighted = RetrievalConfig(fusion="weighted")
    pool, dropped = fuse([good, weak, exact], weighted)
    assert [d.memory.memory_id for d in dropped] == ["mem_weak"] and dropped[0].dropped_at == "min_score"
    results, late = finish(pool, limit=1, now=NOW, config=weighted)
    assert len(results) == 1 and [s.dropped_at for s in late] == ["limit"]
    names = [name for name, _ in results[0].stages]
    assert names == ["fusion", "recency", "importance", "length", "time_decay"]


@given(
    st.lists(
        st.tuples(st.one_of(st.none(), st.floats(-1, 1)), st.one_of(st.none(), st.floats(0, 200))),
        min_size=1,
        max_size=30,
    ),
    st.sampled_from(["normalized", "weighted", "rrf"]),
    st.floats(0, 1),
)
def test_pipeline_scores_stay_in_unit_interval(
    pairs: list[tuple[float | None, float | None]], fusion: str, time_boost: float
) -> None:
    """Each stage's score stays in its range; the time stage adds at most its boost (every other candidate)."""
    config = RetrievalConfig(fusion=fusion)  # type: ignore[arg-type]
    candidates = [
        Candidate(
            _memory(memory_id=f"mem_{i}"),
            cosine=c,
            bm25_raw=b,
            vector_rank=i + 1 if c is not None else None,
            keyword_rank=i + 1 if b is not None else None,
        )
        for i, (c, b) in enumerate(pairs)
        if c is not None or b is not None
    ]
    boosts = {c.memory.memory_id: time_boost for c in candidates[::2]}
    pool, dropped = fuse(candidates, config, boosts)
    results, late = finish(pool, limit=5, now=NOW, config=config, rerank_failed=True, boosts=boosts)
    assert len(results) + len(late) + len(dropped) == len(candidates)
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    for scored in (*results, *late, *dropped):
        timed = boosts.get(scored.memory.memory_id, 0.0)
        for name, value in scored.stages:
            high = 1.0 if name in ("fusion", "rerank") else 1.0 + config.recency_weight + timed
            assert 0.0 <= value <= high + 1e-12


def test_normalized_fusion_puts_both_lists_on_one_scale() -> None:
    # The nearest by meaning and the best keyword match score 1 on their side; the weakest vector hit 0.
    near = Candidate(_memory(memory_id="mem_near"), cosine=0.6, bm25_raw=2.0, vector_rank=1, keyword_rank=2)
    far = Candidate(_memory(memory_id="mem_far"), cosine=0.2, vector_rank=2)
    words = Candidate(_memory(memory_id="mem_words"), cosine=0.1, bm25_raw=8.0, keyword_rank=1)
    config = RetrievalConfig()
    assert config.fusion == "normalized"
    pool, dropped = fuse([near, far, words], config)
    scores = {s.memory.memory_id: s.score for s in pool}
    assert not dropped  # relative scores: no absolute cut-off
    assert scores["mem_near"] == pytest.approx(0.7 * 1.0 + 0.3 * 2.0 / 8.0)
    assert scores["mem_far"] == pytest.approx(0.0)
    assert scores["mem_words"] == pytest.approx(0.3)  # a keyword-only hit: nothing on the vector side
    # Saturated raw BM25 no longer outranks meaning: under weighted fusion the keyword match wins.
    assert pool[0].memory.memory_id == "mem_near"
    weighted, _ = fuse([near, far, words], RetrievalConfig(fusion="weighted"))
    assert weighted[0].memory.memory_id == "mem_words"
    # The weights are the settings'; one vector hit alone is the best on its side.
    (alone,), _ = fuse([near], RetrievalConfig(vector_weight=0.5, bm25_weight=0.5))
    assert alone.score == pytest.approx(0.5 + 0.5 * 1.0)
    # The cut-offs stay absolute: a lone hit unrelated to the query is the best on its scale, yet dropped.
    unrelated = Candidate(_memory(memory_id="mem_unrelated"), cosine=-0.5, vector_rank=1)
    kept, dropped = fuse([unrelated], config)
    assert not kept and dropped[0].dropped_at == "min_score" and dropped[0].score == pytest.approx(0.7)


def test_rerank_blend_and_mmr_demotion() -> None:
    a = Candidate(_memory(memory_id="mem_a"), cosine=0.9, vector_rank=1)
    b = Candidate(_memory(memory_id="mem_b"), cosine=0.88, vector_rank=2)
    c = Candidate(_memory(memory_id="mem_c"), cosine=0.5, vector_rank=3)
    pool, _ = fuse([a, b, c], RetrievalConfig())
    results, _ = finish(pool, limit=3, now=NOW, config=RetrievalConfig(), rerank_scores={"mem_c": 1.0})
    stages = dict(next(r for r in results if r.memory.memory_id == "mem_c").stages)
    assert stages["rerank"] == pytest.approx(0.6 * 1.0 + 0.4 * stages["fusion"])
    twins = {frozenset({"mem_a", "mem_b"})}
    results, _ = finish(
        pool, limit=3, now=NOW, config=RetrievalConfig(), similarity=lambda x, y: 0.99 if {x, y} in twins else 0.0
    )
    assert [r.memory.memory_id for r in results][-1] == "mem_b"
    # The vectors' own pairwise cosines (MMR's one-step check) demote the same twin.
    vectors = {"mem_a": [1.0, 0.0, 0.0], "mem_b": [0.99, 0.1, 0.0], "mem_c": [0.0, 0.0, 1.0]}
    similarity = pairwise({key: normalize(v)[0] for key, v in vectors.items()}, 0.0)
    results, _ = finish(pool, limit=3, now=NOW, config=RetrievalConfig(), similarity=similarity)
    assert [r.memory.memory_id for r in results][-1] == "mem_b" and dict(results[-1].stages).get("mmr") is not None


def test_the_names_stage_puts_the_named_ones_memories_first() -> None:
    other = Candidate(
        _memory(memory_id="mem_other", content="Tom can play Blackbird on the piano."), cosine=0.9, vector_rank=1
    )
    named = Candidate(
        _memory(memory_id="mem_named", content="Jonas can play Moon River on the piano."), cosine=0.85, vector_rank=2
    )
    pool, _ = fuse([other, named], RetrievalConfig(fusion="weighted"))  # close scores: the stage decides
    results, _ = finish(pool, limit=2, now=NOW, config=RetrievalConfig(fusion="weighted"), names=("jonas",))
    assert [r.memory.memory_id for r in results] == ["mem_named", "mem_other"]
    assert dict(results[1].stages)["names"] == pytest.approx(0.8 * dict(results[1].stages)["time_decay"])
    plain, _ = finish(pool, limit=2, now=NOW, config=RetrievalConfig(fusion="weighted"))
    assert [r.memory.memory_id for r in plain] == ["mem_other", "mem_named"]
    # Nobody holds the name: nothing moves (the stage only reorders among the named).
    nobody, _ = finish(pool, limit=2, now=NOW, config=RetrievalConfig(fusion="weighted"), names=("priya",))
    assert [r.memory.memory_id for r in nobody] == ["mem_other", "mem_named"]
    off, _ = finish(
        pool, limit=2, now=NOW, config=RetrievalConfig(fusion="weighted", name_factor=1.0), names=("jonas",)
    )
    assert [r.memory.memory_id for r in off] == ["mem_other", "mem_named"]


@given(ids=st.lists(st.from_regex(r"mem_[0-9a-f]{32}", fullmatch=True), min_size=3, max_size=3, unique=True))
def test_an_exact_tie_is_ordered_by_content_whatever_the_ids(ids: list[str]) -> None:
    """Memory ids are random per store: two stores holding the same memories (two runs of a benchmark)
    rank a tie alike."""
    texts = [
        "Ben's colleague's party was fun.",
        "Kwame's colleague's party was fun.",
        "Tom's colleague's party is fun.",
    ]
    config = RetrievalConfig(fusion="weighted")
    candidates = [
        Candidate(_memory(memory_id=i, content=t), cosine=0.8, vector_rank=1)
        for i, t in zip(ids, reversed(texts), strict=True)
    ]
    pool, _ = fuse(candidates, config)
    results, _ = finish(pool, limit=3, now=NOW, config=config)
    assert len({r.score for r in results}) == 1
    assert [r.memory.content for r in results] == texts


async def test_explain_lists_dropped_candidates(service: MemoryService) -> None:
    await service.add(MemoryDraft("Deploys happen on Tuesdays.", category="patterns"))
    await service.add(MemoryDraft("Unrelated note about llamas.", category="entities"))
    result = await service.search("deploys tuesdays", explain=True, record_access=False)
    assert result.hits[0].memory.content.startswith("Deploys")
    assert {stage for _, stage, _ in result.dropped} <= {"min_score", "hard_min_score", "noise", "limit"}
    assert set(result.timings_ms) == {"embed", "vector", "keyword", "rank"}


async def test_rrf_mode_ranks_agreeing_lists_first(store: Store, embedder: HashEmbedder) -> None:
    service = MemoryService(
        memory_store_for(store), embedder, MemoryCaller.agent("main"), retrieval=RetrievalConfig(fusion="rrf")
    )
    await service.add(MemoryDraft("Postgres runs on port 5433 in staging.", category="entities"))
    await service.add(MemoryDraft("Redis runs on port 6380.", category="entities"))
    result = await service.search("postgres staging port", record_access=False)
    assert result.hits[0].memory.content.startswith("Postgres")


# ------------------------------------------------------------------ extraction and dedup


async def test_remember_extracts_with_provenance_and_versions_preferences(store: Store, service: MemoryService) -> None:
    conversation = await store.get_or_create_conversation(agent_id="main", session_id="chat")
    now = utcnow()
    turns = [
        ("user", "Hi there!"),
        ("user", "My name is Ada Lovelace. I prefer coffee in the morning."),
        ("assistant", "Noted, I prefer nothing."),
        ("user", "Do you remember my name?"),
        ("user", "We decided to ship the parser on Friday."),
    ]
    await store.append_messages(
        conversation.id, [PreparedMessage(Message(role=r, content=c), 5, now) for r, c in turns]
    )
    messages = await store.get_messages(conversation.id)
    first = await service.remember(conversation.id, messages)
    kinds = {d.category: (decision.kind, touched) for d, decision, touched in first.decisions}
    assert set(kinds) == {"profile", "preferences", "events"}
    assert all(kind == "create" for kind, _ in kinds.values())
    (pref,) = await service.store.get([kinds["preferences"][1] or ""])
    assert pref.fact_key == "preferences:drink" and pref.source_message_ids == (messages[1].id,)
    assert pref.conversation_id == conversation.id and pref.source == "extraction"

    await store.append_messages(
        conversation.id,
        [PreparedMessage(Message(role="user", content="These days I prefer tea in the morning."), 5, utcnow())],
    )
    later = await store.get_messages(conversation.id)
    second = await service.remember(conversation.id, later[-1:])
    ((draft, decision, _touched),) = second.decisions
    assert decision.kind == "supersede" and decision.target == pref.memory_id
    history = await service.list(fact_key="preferences:drink", include_superseded=True)
    assert [m.content for _, m in history] == [pref.content, draft.content]
    again = await service.remember(conversation.id, later[-1:])
    assert again.decisions[0][1].kind == "support"
    assert (await service.stats()).current == 3


async def test_each_draft_is_embedded_once_and_stored_with_those_vectors(store: Store) -> None:
    """Extraction embeds each draft's texts once, in one call: the vector its dedup compares is one of
    those it is stored with, and the stored vectors are the draft's own (as embedding it again gives)."""
    embedder = HashEmbedder(max_chars=120)
    service = MemoryService(memory_store_for(store), embedder, MemoryCaller.agent("main"))
    conversation = await store.get_or_create_conversation(agent_id="main", session_id="once")
    long = "We decided to move the nightly export to the new cluster, " + "and to keep the old one for a week " * 6
    turns = [
        "My name is Ada Lovelace. I prefer coffee in the morning.",
        "We decided to ship the parser on Friday.",
        long + ".",
        "I live in Lisbon with my two cats.",
    ]
    await store.append_messages(
        conversation.id, [PreparedMessage(Message(role="user", content=c), 5, utcnow()) for c in turns]
    )
    remembered = await service.remember(conversation.id, await store.get_messages(conversation.id))
    created = [d for d, decision, _ in remembered.decisions if decision.kind == "create"]
    assert len(created) >= 4 and any(len(service.chunks(d.abstract, d.content)) > 1 for d in created)
    embedded = [text for call in embedder.calls for text in call]
    assert len(embedder.calls) == 1 and len(embedded) == len(set(embedded))
    assert sorted(embedded) == sorted(t for d in created for t in service.chunks(d.abstract, d.content))
    _, rows = await service.store.load_vectors(embedder.model)
    stored = sorted(to_blob(normalize(v)[0]) for v in await HashEmbedder(max_chars=120).embed(embedded))
    assert sorted(vector for _, _, _, vector in rows) == stored
    again = await service.remember(conversation.id, await store.get_messages(conversation.id))
    assert len(embedder.calls) == 1  # the same drafts: their vectors are cached, and each is a duplicate
    assert {decision.kind for _, decision, _ in again.decisions} <= {"skip", "support", "merge"}


async def test_vectors_given_for_another_draft_are_refused(service: MemoryService) -> None:
    one = await service.add(MemoryDraft("Deploys happen on Tuesdays.", category="patterns"))
    (_, rows) = await service.store.load_vectors(service.embedder.model)
    (vector,) = [blob for memory_id, _, _, blob in rows if memory_id == one.memory_id]
    long = MemoryDraft("A first sentence. " + "word " * 900, category="patterns")
    with pytest.raises(InputError, match="vectors given"):
        await service.add(long, vectors=(service.embedder.model, (vector,)))
    with pytest.raises(InputError, match="vectors given"):
        await service.supersede(one.memory_id, long, vectors=("another-model", (vector,)))


# ------------------------------------------------------------------ PostgreSQL: the optional pgvector index


def _pgvector_loads() -> bool:
    """Whether the embedded server's pgvector can load here: it was built for AVX2+FMA (tests/pg.py)."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return True
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            flags = info.read()
    except OSError:
        return True
    return " avx2" in flags and " fma" in flags


async def test_pgvector_index_answers_like_exact_search_and_stays_in_step(pg_url: str) -> None:
    """Above the exact-search size, PostgreSQL with pgvector answers nearest-neighbour queries itself."""
    import psycopg

    if not _pgvector_loads():
        pytest.skip("the embedded pgvector needs AVX2 and FMA, which this CPU lacks")
    store = await open_store(pg_url)
    try:
        memories = memory_store_for(store)
        assert isinstance(memories, NearestNeighbours)
        embedder = HashEmbedder(64)
        await memories.grant("main", ["global", "agent:main"], now=NOW)  # it writes global memories too
        exact = MemoryService(memories, embedder, MemoryCaller.agent("main"), exact_search_max=10**6)
        import random

        rng = random.Random(7)
        words = "deploy server coffee tea london paris kube pod cert expired disk route cache queue".split()  # noqa: SIM905
        added = [
            await exact.add(
                MemoryDraft(" ".join(rng.sample(words, 5)) + f" note{i}.", category="events"),
                scope=None if i % 3 else "global",
            )
            for i in range(45)
        ]
        probe = to_blob(embedder.vector("deploy server"))
        assert await memories.nearest("hash-64", probe, limit=5, scopes=None, exact_max=10) is None  # no pgvector
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            await conn.execute("CREATE EXTENSION vector")
        ann = MemoryService(memories, embedder, MemoryCaller.agent("main"), exact_search_max=20)
        assert await memories.nearest(embedder.model, probe, limit=5, scopes=None, exact_max=100) is None  # small
        await exact.supersede(added[0].memory_id, MemoryDraft("deploy server moved to kube pod.", category="events"))
        await exact.update(added[1].memory_id, MemoryPatch(content="backup disk expired again."))
        await exact.forget(added[2].memory_id)
        for query in ("deploy server", "coffee london", "kube pod cert", "backup disk expired", "tea"):
            for scopes in (None, ["global"]):
                want = await exact.search(query, scopes=scopes, record_access=False)
                got = await ann.search(query, scopes=scopes, record_access=False)
                assert [(h.memory.memory_id, round(h.score, 4)) for h in got.hits] == [
                    (h.memory.memory_id, round(h.score, 4)) for h in want.hits
                ], (query, scopes)
                index = VectorIndex(0, (await memories.load_vectors(embedder.model))[1])
                vector = embedder.vector(query)
                found = await memories.nearest(
                    embedder.model, to_blob(vector), limit=8, scopes=scopes, include_superseded=True, exact_max=20
                )
                assert found is not None
                expected = index.search(vector, limit=8, scopes=scopes, include_superseded=True)
                # The same similarities, each the memory's own (float32 here, pgvector's arithmetic there:
                # the hash embedder makes many ties, and near-ties may swap).
                assert [round(s, 4) for _, s in found] == [round(h.similarity, 4) for h in expected]
                own = index.similarity(vector, [i for i, _ in found])
                assert all(abs(own[i] - s) < 1e-5 for i, s in found)
                assert scopes is None or all(m.scope in scopes for m in await memories.get([i for i, _ in found]))
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            cursor = await conn.execute("SELECT (SELECT count(*) FROM memory_vector_ann), count(*) FROM memory_vectors")
            assert await cursor.fetchone() == (len(added) + 1, len(added) + 1)  # +1 superseding, −1 forgotten
    finally:
        await store.close()


# ------------------------------------------------------------------ a random history keeps the store consistent


@given(st.lists(st.tuples(st.sampled_from(["add", "update", "supersede", "forget"]), st.integers(0, 9)), max_size=25))
@settings(SHARED_DATABASE, max_examples=15)
def test_random_histories_keep_index_rows_and_vectors_in_step(
    memory_url: str, tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int]]
) -> None:
    import anyio

    async def run() -> None:
        async with example_store(memory_url, tmp_path_factory, clean=True) as store:
            service = MemoryService(memory_store_for(store), HashEmbedder(64), MemoryCaller.agent("main"))
            live: dict[str, str] = {}  # memory id -> its unique token
            history: set[str] = set()
            for counter, (op, pick) in enumerate(ops, 1):
                token = f"tok{counter}x"
                ids = sorted(live)
                target = ids[pick % len(ids)] if ids else None
                if op == "add" or target is None:
                    memory = await service.add(MemoryDraft(f"note {token} here", category="events"))
                    live[memory.memory_id] = token
                elif op == "update":
                    await service.update(target, MemoryPatch(content=f"changed {token} now"))
                    live[target] = token
                elif op == "supersede":
                    memory = await service.supersede(target, MemoryDraft(f"replaced {token} later", category="events"))
                    history.add(target)
                    del live[target]
                    live[memory.memory_id] = token
                else:
                    await service.forget(target)
                    del live[target]
            for memory_id, token in live.items():
                hits = await service.store.keyword_search(token, None, limit=5)
                assert [h.memory_id for h in hits] == [memory_id]
            stats = await service.stats()
            assert stats.current == len(live) and stats.vectors >= len(live)
            listed = {m.memory_id for _, m in await service.list(limit=1000)}
            assert listed == set(live)
            everything = {m.memory_id for _, m in await service.list(limit=1000, include_superseded=True)}
            assert set(live) <= everything and everything - set(live) <= history

    anyio.run(run)


def test_sketch_preselection_keeps_recall_and_exact_scores() -> None:
    import numpy as np

    rng = np.random.default_rng(11)
    centres = normalize(rng.normal(size=(50, 64)))
    vectors = normalize(centres[rng.integers(0, 50, size=6000)] + 0.6 * normalize(rng.normal(size=(6000, 64))))
    rows = [(f"mem_{i:05d}", "global", True, to_blob(v)) for i, v in enumerate(vectors)]
    exact = VectorIndex(1, rows)
    sketched = VectorIndex(1, rows, exact_max=1000)
    assert sketched.approximate and not exact.approximate
    found = 0
    for q in normalize(vectors[:40] + 0.3 * normalize(rng.normal(size=(40, 64)))):
        truth = exact.search(q, limit=10)
        guess = sketched.search(q, limit=10)
        found += len({h.memory_id for h in truth} & {h.memory_id for h in guess})
        scores = {h.memory_id: h.similarity for h in truth}
        assert all(h.similarity == pytest.approx(scores[h.memory_id]) for h in guess if h.memory_id in scores)
    assert found / 400 >= 0.95


@given(st.text(max_size=300))
@settings(SHARED_DATABASE, max_examples=40)
def test_any_query_text_gives_results_or_a_clear_input_error(
    memory_url: str, tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    import anyio

    async def run() -> None:
        async with example_store(memory_url, tmp_path_factory, clean=False) as store:
            service = MemoryService(memory_store_for(store), HashEmbedder(32), MemoryCaller.agent("main"))
            await service.add(MemoryDraft("Seed memory about søme ünïcode and 漢字.", category="entities"))
            try:
                await service.search(text)
            except InputError:
                assert not text.strip() or any(0xD800 <= ord(c) <= 0xDFFF for c in text)

    anyio.run(run)


def test_drafts_refuse_lone_surrogates() -> None:
    with pytest.raises(InputError, match="invalid Unicode"):
        MemoryDraft("bad \ud800 text")


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("I'm allergic to shellfish.", "profile"),
        ("My manager is called Tomasz.", "profile"),
        ("私は抹茶が大好きです。", "preferences"),
        ("The cause was an expired TLS certificate.", "cases"),
        ("We booked the boat ride for Tuesday.", "events"),
        ("The backup job runs every Monday at noon.", "patterns"),
        ("Our Postgres primary runs on version 16.", "entities"),
        ("My editor is Helix.", "entities"),
        ("The weather is nice today.", None),
        ("Can you list the files?", None),
        ("Thanks, that works!", None),
    ],
)
def test_offline_extractor_categories(text: str, category: str | None) -> None:
    from lossless.memory.extraction import extract
    from lossless.records import MessageRecord

    record = MessageRecord(
        id=7, conversation_id=1, seq=0, role="user", content=text, parts=(), token_count=1, created_at=NOW
    )
    drafts = extract(1, [record])
    assert [d.category for d in drafts] == ([category] if category else [])
    assert all(d.source_message_ids == (7,) and d.conversation_id == 1 for d in drafts)


# ------------------------------------------------------------------ models whose cosines sit high (e5)


class _Crowded:
    """The hash embedder's vectors with a shared extra component: the cosine of any two texts becomes
    ``(1 - lift) · cos + lift``, as with models such as e5 whose unrelated texts score about 0.8."""

    def __init__(self, lift: float, *, declare: bool) -> None:
        self.inner = HashEmbedder()
        self.lift = lift
        if declare:
            self.similarity_floor = lift

    @property
    def model(self) -> str:
        return f"{self.inner.model}-crowded-{self.lift}"

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions + 1

    @property
    def max_chars(self) -> int:
        return self.inner.max_chars

    async def embed(self, texts: list[str], *, task: str = "passage") -> list[list[float]]:
        scale = (1.0 - self.lift) ** 0.5
        return [[v * scale for v in vector] + [self.lift**0.5] for vector in await self.inner.embed(texts, task=task)]


def test_an_event_naming_another_file_or_name_is_another_fact() -> None:
    """Near vectors are no duplicate when the two name different files or code names (agent work reads alike)."""
    earlier = _memory(category="events", content="The assistant edited src/cli/hooks.go (adding outputHookMessage).")
    same = MemoryDraft("The assistant edited src/cli/hooks.go (adding outputHookMessage).", category="events")
    other_file = MemoryDraft(
        "The assistant edited src/cli/hooks_test.go (adding outputHookMessage).", category="events"
    )
    other_name = MemoryDraft("The assistant edited src/cli/hooks.go (adding hookResponse).", category="events")
    assert decide(same, [(earlier, 0.99)]).kind == "skip"
    assert decide(other_file, [(earlier, 0.99)]).kind == "create"
    assert decide(other_name, [(earlier, 0.99)]).kind == "create"


def test_a_statement_of_another_date_is_another_fact() -> None:
    """A recurring event (the offline extractor dates each statement) is no duplicate of the last one,
    nor a restatement of a dated fact of the same key; the same statement of the same date is."""
    gym = "Lars said the gym was packed on 7 July 2023."
    for category in ("events", "patterns", "preferences"):
        earlier = _memory(category=category, content=gym)
        again = MemoryDraft(gym, category=category)
        later = MemoryDraft("Lars said the gym was packed on 13 July 2023.", category=category)
        assert decide(again, [(earlier, 0.99)]).kind in ("skip", "support")
        assert decide(later, [(earlier, 0.99)]).kind == "create"
    visit = _memory(
        category="entities", content="Grace's cousin is visiting in August 2024.", fact_key="entities:cousin"
    )
    moved = MemoryDraft("Grace's cousin is visiting in October 2024.", category="entities", fact_key="entities:cousin")
    assert decide(moved, [(visit, 0.99)]).kind == "supersede"


@given(st.floats(0.0, 0.95), st.floats(-1.0, 1.0))
def test_calibrate_and_uncalibrate_are_inverse(floor: float, similarity: float) -> None:
    assert abs(uncalibrate(calibrate(similarity, floor), floor) - similarity) < 1e-9
    assert calibrate(1.0, floor) == pytest.approx(1.0) and calibrate(floor, floor) == pytest.approx(0.0)
    assert calibrate(similarity, 0.0) == similarity


@given(
    st.lists(st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=3), min_size=1, max_size=6),
    st.sampled_from([0.0, 0.8]),
    st.data(),
)
def test_pairwise_gives_each_pairs_calibrated_cosine(
    rows: list[list[float]], floor: float, data: st.DataObject
) -> None:
    """MMR's lookups: the same value as the pair's own dot product; -1 for a memory without a vector or unknown."""
    vectors = {f"m{i}": normalize(row)[0] for i, row in enumerate(rows) if any(abs(v) > 1e-3 for v in row)}
    listed = {**vectors, "none": None}
    similarity = pairwise(listed, floor)
    for a, b in data.draw(st.lists(st.tuples(st.sampled_from(sorted(listed)), st.sampled_from(sorted(listed))))):
        va, vb = listed[a], listed[b]
        expected = -1.0 if va is None or vb is None else calibrate(float(va @ vb), floor)
        assert similarity(a, b) == pytest.approx(expected, abs=1e-5)
    assert similarity("m0", "unknown") == -1.0


@given(
    st.lists(st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=3), min_size=1, max_size=6),
    st.sampled_from([0.0, 0.8]),
    st.floats(-1.5, 1.0),
    st.data(),
)
def test_pairwise_above_is_the_pairs_compared_one_by_one(
    rows: list[list[float]], floor: float, threshold: float, data: st.DataObject
) -> None:
    """MMR's check in one step: exactly ``any(similarity(a, b) > threshold for b in others)``, the pairs
    with no vector (-1) included."""
    vectors = {f"m{i}": normalize(row)[0] for i, row in enumerate(rows) if any(abs(v) > 1e-3 for v in row)}
    listed = {**vectors, "none": None}
    similarity = pairwise(listed, floor)
    names = sorted([*listed, "unknown"])
    a = data.draw(st.sampled_from(names))
    others = data.draw(st.lists(st.sampled_from(names), max_size=5))
    assert similarity.above(a, others, threshold) == any(similarity(a, b) > threshold for b in others)


async def test_a_model_with_high_cosines_dedups_and_ranks_like_any_other(store: Store) -> None:
    """A declared similarity floor puts a crowded model's cosines back on the common scale: the same
    memories are kept and found as with the plain model; undeclared, distinct facts merge as duplicates."""
    conversation = await store.get_or_create_conversation(agent_id="main", session_id="crowded")
    turns = [
        "My name is Ada Lovelace. I prefer coffee in the morning.",
        "We decided to ship the parser on Friday.",
        "I live in Lisbon with my two cats.",
    ]
    await store.append_messages(
        conversation.id, [PreparedMessage(Message(role="user", content=c), 5, utcnow()) for c in turns]
    )
    messages = await store.get_messages(conversation.id)
    kept: dict[str, list[str]] = {}
    ranked: dict[str, list[tuple[str, float]]] = {}
    for name, embedder in (
        ("plain", HashEmbedder()),
        ("declared", _Crowded(0.8, declare=True)),
        ("undeclared", _Crowded(0.8, declare=False)),
    ):
        service = MemoryService(memory_store_for(store), embedder, MemoryCaller.agent(f"agent-{name}"))
        remembered = await service.remember(conversation.id, messages)
        kept[name] = sorted(d.content for d, decision, _ in remembered.decisions if decision.kind == "create")
        found = await service.search("two cats in Lisbon", limit=5, record_access=False)
        ranked[name] = [(h.memory.content, round(h.score, 3)) for h in found.hits]
    assert len(kept["plain"]) >= 3 and "Lisbon" in ranked["plain"][0][0]
    assert kept["declared"] == kept["plain"] and ranked["declared"] == ranked["plain"]
    assert len(kept["undeclared"]) < len(kept["plain"])  # raw cosines of 0.8+ read as near-duplicates
