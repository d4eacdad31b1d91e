"""Semantic and hybrid search over stored messages, through the memory layer's embedder and cache."""

from __future__ import annotations

import pytest

from lossless.errors import InputError
from lossless.memory.hashing import HashEmbedder
from lossless.memory.messages import MessageSearch, reciprocal_rank_fusion
from lossless.memory.scopes import Caller
from lossless.memory.service import MemoryService
from lossless.ports import PreparedMessage, Store
from lossless.records import Message, utcnow
from lossless.stores import memory_store_for

pytestmark = pytest.mark.anyio


def test_rrf_orders_by_agreement() -> None:
    assert [k for k, _ in reciprocal_rank_fusion([1, 2, 3], [3, 1])] == [1, 3, 2]


async def test_semantic_and_hybrid_message_search(store: Store) -> None:
    embedder = HashEmbedder()
    service = MemoryService(memory_store_for(store), embedder, Caller.agent("main"))
    search = MessageSearch(store, service)
    a = await store.get_or_create_conversation(agent_id="main", session_id="a")
    b = await store.get_or_create_conversation(agent_id="main", session_id="b")
    texts = ["the nightly backup failed again", "lunch was great", "backup storage is almost full"]
    await store.append_messages(a.id, [PreparedMessage(Message("user", t), 5, utcnow()) for t in texts])
    await store.append_messages(
        b.id, [PreparedMessage(Message("user", "backup failed in conversation b"), 5, utcnow())]
    )
    ids = [m.id for m in await store.get_messages(a.id)]
    only_a = await search.search("backup failed", [a.id], limit=2)
    assert [h.message_id for h in only_a] == [ids[0], ids[2]] and {h.conversation_id for h in only_a} == {a.id}
    calls = len(embedder.calls)
    await search.search("backup failed", [a.id], limit=2)
    assert len(embedder.calls) == calls  # messages and the query came from the caches
    await store.append_messages(a.id, [PreparedMessage(Message("user", "backup fixed"), 5, utcnow())])
    again = await search.search("backup", [a.id], limit=5)
    assert len(again) == 4  # the new message was indexed on the next search
    outside = (await store.get_messages(b.id))[0].id
    hybrid = await search.search("lunch", [a.id], limit=3, mode="hybrid", fulltext=[ids[1], outside])
    assert hybrid[0].message_id == ids[1] and outside not in [h.message_id for h in hybrid]
    with pytest.raises(InputError):
        await search.search(" ", [a.id])
