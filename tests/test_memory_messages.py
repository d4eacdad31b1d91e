"""Semantic and hybrid search over stored messages and summaries, from the vectors the background build stored."""

from __future__ import annotations

import pytest

from lossless.errors import InputError
from lossless.memory.hashing import HashEmbedder
from lossless.memory.message_index import VectorBuilder
from lossless.memory.messages import QUOTED_SHARE, MessageSearch, reciprocal_rank_fusion
from lossless.memory.records import MemoryDraft
from lossless.memory.scopes import MemoryCaller
from lossless.memory.service import MemoryService
from lossless.ports import PreparedMessage, SearchVectorStore, Store
from lossless.records import Message, Summary, utcnow
from lossless.stores import memory_store_for

pytestmark = pytest.mark.anyio


async def build(store: Store, embedder: HashEmbedder) -> int:
    """Run the background build to its end; returns the items embedded."""
    assert isinstance(store, SearchVectorStore)
    return await VectorBuilder(store, embedder).run()


def test_rrf_orders_by_agreement() -> None:
    assert [k for k, _ in reciprocal_rank_fusion([1, 2, 3], [3, 1])] == [1, 3, 2]
    # Any hashable, ordered ids: summary ids fuse the same way, ties broken by id.
    assert [k for k, _ in reciprocal_rank_fusion(["sum_c", "sum_a", "sum_b"], ["sum_b", "sum_c"])] == [
        "sum_c",
        "sum_b",
        "sum_a",
    ]
    assert [k for k, _ in reciprocal_rank_fusion(["sum_b"], ["sum_a"])] == ["sum_a", "sum_b"]


async def test_semantic_and_hybrid_message_search(store: Store) -> None:
    embedder = HashEmbedder()
    service = MemoryService(memory_store_for(store), embedder, MemoryCaller.agent("main"))
    search = MessageSearch(store, service)
    a = await store.get_or_create_conversation(agent_id="main", session_id="a")
    b = await store.get_or_create_conversation(agent_id="main", session_id="b")
    texts = ["lunch was great", "the nightly backup failed again", "backup storage is almost full"]
    await store.append_messages(a.id, [PreparedMessage(Message("user", t), 5, utcnow()) for t in texts])
    await store.append_messages(
        b.id, [PreparedMessage(Message("user", "backup failed in conversation b"), 5, utcnow())]
    )
    ids = [m.id for m in await store.get_messages(a.id)]
    assert await search.search("backup failed", [a.id], limit=2) == []  # nothing built yet: nothing by meaning
    assert await search.coverage([a.id, b.id], "messages") == (0, 4)
    assert [c for batch in embedder.calls for c in batch] == ["backup failed"]  # a search embeds its query only
    assert await build(store, embedder) == 4
    assert await search.coverage([a.id, b.id], "messages") == (4, 4)
    only_a = await search.search("backup failed", [a.id], limit=2)
    assert {h.message_id for h in only_a} == {ids[1], ids[2]} and {h.conversation_id for h in only_a} == {a.id}
    calls = len(embedder.calls)
    await search.search("backup failed", [a.id], limit=2)
    assert len(embedder.calls) == calls  # the loaded vectors and the query vector were kept
    await store.append_messages(a.id, [PreparedMessage(Message("user", "backup fixed"), 5, utcnow())])
    assert len(await search.search("backup", [a.id], limit=5)) == 3  # the new message is not built yet
    assert await build(store, embedder) == 1
    again = await search.search("backup", [a.id], limit=5)
    assert len(again) == 4  # built, and the loaded vectors were reloaded (their count changed)
    outside = (await store.get_messages(b.id))[0].id
    hybrid = await search.search("lunch", [a.id], limit=3, mode="hybrid", fulltext=[ids[0], outside])
    assert hybrid[0].message_id == ids[0] and outside not in [h.message_id for h in hybrid]
    with pytest.raises(InputError):
        await search.search(" ", [a.id])


async def test_a_second_search_of_a_question_may_skip_rereading_the_vectors_states(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``recheck=False`` (hybrid's name-blind search, right after the question's first) ranks the vectors as
    loaded without reading their states; a conversation never loaded is read all the same, and the next
    search that rechecks finds what was built in between."""
    embedder = HashEmbedder()
    service = MemoryService(memory_store_for(store), embedder, MemoryCaller.agent("main"))
    search = MessageSearch(store, service)
    a = await store.get_or_create_conversation(agent_id="main", session_id="a")
    b = await store.get_or_create_conversation(agent_id="main", session_id="b")
    for conversation in (a, b):
        await store.append_messages(
            conversation.id, [PreparedMessage(Message("user", "the nightly backup failed"), 5, utcnow())]
        )
    await build(store, embedder)
    reads: list[list[int]] = []
    states = search.vectors.vector_states

    async def counted(model: str, source: str, conversation_ids: list[int]) -> object:
        reads.append(list(conversation_ids))
        return await states(model, source, conversation_ids)  # type: ignore[arg-type]

    monkeypatch.setattr(search.vectors, "vector_states", counted)
    assert len(await search.search("backup", [a.id], limit=5)) == 1 and reads == [[a.id]]
    assert len(await search.search("nightly backup", [a.id], limit=5, recheck=False)) == 1
    assert reads == [[a.id]]  # loaded a moment ago: not read again
    assert len(await search.search("backup", [a.id, b.id], limit=5, recheck=False)) == 2
    assert reads == [[a.id], [a.id, b.id]]  # b was never loaded: read
    await store.append_messages(a.id, [PreparedMessage(Message("user", "the backup is fixed"), 5, utcnow())])
    await build(store, embedder)
    assert len(await search.search("backup", [a.id], limit=5)) == 2  # rechecked: the new vector is found


async def test_a_search_by_meaning_asks_the_vectors_for_the_limit_only(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each store ranks items by their best chunk already, so ``semantic`` asks it for ``limit`` items (hybrid's
    callers ask for 100 a side); the port's own ``hybrid`` fusion asks for twice as many; the results are the
    store's best, best first."""
    embedder = HashEmbedder()
    service = MemoryService(memory_store_for(store), embedder, MemoryCaller.agent("main"))
    search = MessageSearch(store, service)
    a = await store.get_or_create_conversation(agent_id="main", session_id="a")
    texts = [f"backup report {i} " + "long text " * (i * 40) for i in range(12)]  # some items of several chunks
    await store.append_messages(a.id, [PreparedMessage(Message("user", t), 5, utcnow()) for t in texts])
    await build(store, embedder)
    asked: list[int] = []
    nearest = search._nearest

    async def counted(source: str, qvec: object, conversation_ids: list[int], limit: int, **kw: object) -> object:
        asked.append(limit)
        return await nearest(source, qvec, conversation_ids, limit, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(search, "_nearest", counted)
    found = await search.search("backup report", [a.id], limit=5)
    await search.search("backup report", [a.id], limit=5, mode="hybrid")
    assert asked == [5, 10]
    every = await search.search("backup report", [a.id], limit=12)
    assert [h.score for h in found] == [h.score for h in every[:5]]  # the same best (equal scores tie either way)


async def _summarise(store: Store, conversation_id: int, texts: list[str], content: str) -> Summary:
    """Store ``texts`` as messages and put a leaf summary saying ``content`` in place of them."""
    await store.append_messages(conversation_id, [PreparedMessage(Message("user", t), 5, utcnow()) for t in texts])
    entries = [e for e in await store.get_context(conversation_id) if e.kind == "message"]
    number = len(await store.list_summaries(conversation_id))
    summary = Summary(
        id=f"sum_{conversation_id:08x}{number:08x}",
        conversation_id=conversation_id,
        kind="leaf",
        depth=0,
        content=content,
        token_count=len(content.split()),
        created_at=utcnow(),
        earliest_at=entries[0].created_at,
        latest_at=entries[-1].created_at,
        source_token_count=sum(e.token_count for e in entries),
    )
    await store.replace_with_summary(summary, entries)
    return summary


async def test_summary_search_reindexes_rewritten_summaries(store: Store) -> None:
    from dataclasses import replace

    embedder = HashEmbedder()
    service = MemoryService(memory_store_for(store), embedder, MemoryCaller.agent("main"))
    search = MessageSearch(store, service)
    a = await store.get_or_create_conversation(agent_id="main", session_id="a")
    b = await store.get_or_create_conversation(agent_id="main", session_id="b")
    backup = await _summarise(store, a.id, ["backup failed", "quota"], "the nightly backup failed on a disk quota")
    lunch = await _summarise(store, a.id, ["lunch", "ramen"], "lunch at the ramen place was great")
    outside = await _summarise(store, b.id, ["backup failed in b"], "the backup failed in conversation b")
    await build(store, embedder)
    found = await search.search_summaries("backup failed", [a.id], limit=5)
    assert [h.summary_id for h in found][:1] == [backup.id] and {h.conversation_id for h in found} == {a.id}
    assert outside.id not in {h.summary_id for h in found}
    calls = len(embedder.calls)
    await search.search_summaries("backup failed", [a.id], limit=5)
    assert len(embedder.calls) == calls  # the index was kept and the query came from the cache
    # Rewritten in place: same id; its vectors go with the old text, and the build embeds only the new one.
    new_text = "the deploy to the canary hosts was rolled back"
    assert await store.rewrite_summary(replace(lunch, content=new_text, token_count=9), replaces=lunch.content)
    assert await search.coverage([a.id], "summaries") == (1, 2)
    assert lunch.id not in {h.summary_id for h in await search.search_summaries("ramen lunch", [a.id], limit=5)}
    assert await build(store, embedder) == 1
    rolled = await search.search_summaries("canary rolled back", [a.id], limit=5)
    assert [h.summary_id for h in rolled][:1] == [lunch.id]
    embedded = [text for batch in embedder.calls[calls:] for text in batch]
    assert new_text in embedded and backup.content not in embedded and lunch.content not in embedded
    old = await search.search_summaries("ramen lunch", [a.id], limit=5)
    assert all(h.summary_id != lunch.id or h.score <= 0 for h in old)
    # Hybrid: full-text ids of other conversations are ignored; those of these conversations rank.
    hybrid = await search.search_summaries("ramen", [a.id], limit=5, mode="hybrid", fulltext=[outside.id, backup.id])
    assert outside.id not in {h.summary_id for h in hybrid} and backup.id in {h.summary_id for h in hybrid}
    both = await search.search_summaries("backup failed", [a.id, b.id], limit=5)
    assert {h.summary_id for h in both if h.score > 0} == {backup.id, outside.id}
    with pytest.raises(InputError):
        await search.search_summaries(" ", [a.id])


async def test_memory_leads(store: Store) -> None:
    embedder = HashEmbedder()
    service = MemoryService(memory_store_for(store), embedder, MemoryCaller.agent("main"))
    others = MemoryService(memory_store_for(store), embedder, MemoryCaller.agent("other"))
    known = {"main": service, "other": others}

    def memory_for(agent: str) -> MemoryService:  # as the engine's: a service per agent, its id checked
        return known.get(agent) or MemoryService(memory_store_for(store), embedder, MemoryCaller.agent(agent))

    search = MessageSearch(store, service, memory_for=memory_for)
    a = await store.get_or_create_conversation(agent_id="main", session_id="a")
    b = await store.get_or_create_conversation(agent_id="main", session_id="b")
    texts = ["what about the move?", "we sign the lease in Porto on monday", "great"]
    await store.append_messages(a.id, [PreparedMessage(Message("user", t), 5, utcnow()) for t in texts])
    await store.append_messages(b.id, [PreparedMessage(Message("user", "the lease"), 5, utcnow())])
    ids = [m.id for m in await store.get_messages(a.id)]
    (b_id,) = [m.id for m in await store.get_messages(b.id)]
    assert await search.memory_leads("where are they moving to", [a.id]) == []
    assert embedder.calls == []  # no memory yet: the question is not even embedded
    fact = "They are moving to Porto and sign the lease on monday"
    await service.add(MemoryDraft(fact, conversation_id=a.id, source_message_ids=(ids[0], ids[1])))
    await service.add(MemoryDraft(fact + ".", conversation_id=b.id, source_message_ids=(b_id,)))
    await others.add(MemoryDraft("Porto lease moving", conversation_id=a.id, source_message_ids=(ids[2],)))
    leads = await search.memory_leads("where are they moving to", [a.id])
    assert {lead.message_id for lead in leads} == {ids[0], ids[1]} and all(lead.score > 0 for lead in leads)
    assert {lead.message_id for lead in await search.memory_leads("moving", [a.id], agent="other")} == {ids[2]}
    assert {lead.message_id for lead in await search.memory_leads("moving", [a.id, b.id])} == {ids[0], ids[1], b_id}
    assert await search.memory_leads("moving", []) == []
    assert await search.memory_leads("   ", [a.id]) == []
    assert await search.memory_leads("moving", [a.id], agent="nobody") == []  # no memory of its own
    assert await search.memory_leads("moving", [a.id], agent="not an id!") == []  # refused by the memory layer
    assert await MessageSearch(store, service).memory_leads("moving", [a.id], agent="other") == []


async def test_a_quoted_source_is_led_to_less_than_the_memorys_own(store: Store) -> None:
    """A change of mind cites the statement it takes back: that message gains half the change's lead."""
    service = MemoryService(memory_store_for(store), HashEmbedder(), MemoryCaller.agent("main"))
    search = MessageSearch(store, service)
    a = await store.get_or_create_conversation(agent_id="main", session_id="a")
    texts = ["I'm going vegetarian", "the veggie experiment is over, bacon won"]
    await store.append_messages(a.id, [PreparedMessage(Message("user", t), 5, utcnow()) for t in texts])
    first, later = [m.id for m in await store.get_messages(a.id)]
    told = "The veggie experiment is over. This changes what the user said before: the user is going vegetarian."
    meta = {"speaker": "the user", "revises": True, "quoted_sources": [first]}
    await service.add(MemoryDraft(told, conversation_id=a.id, source_message_ids=(later, first), metadata=meta))
    leads = {lead.message_id: lead.score for lead in await search.memory_leads("is the veggie experiment over", [a.id])}
    assert set(leads) == {first, later} and leads[first] == pytest.approx(QUOTED_SHARE * leads[later])


async def test_a_memory_that_only_quotes_its_message_leads_nowhere(store: Store) -> None:
    """A turn of an agent's session quoted whole says nothing its message does not: it lifts no message."""
    service = MemoryService(memory_store_for(store), HashEmbedder(), MemoryCaller.agent("main"))
    search = MessageSearch(store, service)
    a = await store.get_or_create_conversation(agent_id="main", session_id="a")
    texts = ["update the docs and add a table of the messages", "the docs now have a table of the messages"]
    await store.append_messages(a.id, [PreparedMessage(Message("user", t), 5, utcnow()) for t in texts])
    asked, done = [m.id for m in await store.get_messages(a.id)]
    quote = 'The user said: "Update the docs and add a table of the messages."'
    meta = {"speaker": "the user", "quoted_sources": [asked]}
    await service.add(MemoryDraft(quote, conversation_id=a.id, source_message_ids=(asked,), metadata=meta))
    question = "what did the user want in the docs table of the messages"
    assert await search.memory_leads(question, [a.id]) == []
    told = "The assistant added a table of the messages to the docs."
    await service.add(MemoryDraft(told, conversation_id=a.id, source_message_ids=(done,)))
    assert [lead.message_id for lead in await search.memory_leads(question, [a.id])] == [done]
    # the quote is still a memory: the memory search finds it
    found = await service.search(question, limit=5, record_access=False)
    assert quote in [hit.memory.content for hit in found.hits]


async def test_memory_leads_are_not_crowded_out_by_other_conversations(store: Store) -> None:
    """The memory search draws its candidates from the searched conversations only, before any limit."""
    embedder = HashEmbedder()
    service = MemoryService(memory_store_for(store), embedder, MemoryCaller.agent("main"))
    search = MessageSearch(store, service)
    a = await store.get_or_create_conversation(agent_id="main", session_id="a")
    await store.append_messages(a.id, [PreparedMessage(Message("user", "our cat Miso likes the balcony"), 5, utcnow())])
    (mine,) = [m.id for m in await store.get_messages(a.id)]
    await service.add(
        MemoryDraft("The cat Miso sleeps on the balcony", conversation_id=a.id, source_message_ids=(mine,))
    )
    for n in range(30):  # thirty other conversations, each with a memory that matches the question better
        other = await store.get_or_create_conversation(agent_id="main", session_id=f"other{n}")
        await store.append_messages(
            other.id, [PreparedMessage(Message("user", "where does the cat sleep"), 5, utcnow())]
        )
        (source,) = [m.id for m in await store.get_messages(other.id)]
        text = f"Where does the cat sleep? The cat sleeps on the balcony {n}"
        await service.add(MemoryDraft(text, conversation_id=other.id, source_message_ids=(source,)))
    question = "where does the cat sleep on the balcony"
    (best,) = (await service.search(question, limit=1, record_access=False)).hits
    assert best.memory.conversation_id != a.id, "another conversation's memory is the best store-wide"
    leads = await search.memory_leads(question, [a.id], limit=1)
    assert [lead.message_id for lead in leads] == [mine]
    only_a = await service.search(question, limit=5, record_access=False, conversations=[a.id])
    assert [h.memory.conversation_id for h in only_a.hits] == [a.id]
    assert (await service.search(question, limit=5, record_access=False, conversations=[])).hits == ()
