"""Message records kept across reads (lossless.stores.postgres.message_records), on a real PostgreSQL server.

Every read with kept records must return exactly what a read without them returns: after another host
deletes a conversation, after a row is written again by hand, after a block that rolled back, with
metadata a caller changed, with stored parts; and the kept records stay within their bounds.
"""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless import Message
from lossless.parts import TextPart, ToolPart
from lossless.ports import PreparedMessage
from lossless.records import MessageRecord
from lossless.stores import open_store
from lossless.stores.postgres import PostgresStore
from lossless.stores.postgres.message_records import MessageRecords

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


async def _store(url: str) -> PostgresStore:
    store = await open_store(url)
    assert isinstance(store, PostgresStore)
    return store


async def _append(store: PostgresStore, session: str, messages: list[Message]) -> list[int]:
    conversation = await store.get_or_create_conversation(agent_id="main", session_id=session)
    stored = await store.append_messages(conversation.id, [PreparedMessage(m, 5, T0) for m in messages])
    return [m.id for m in stored.stored]


async def _plain(url: str, ids: list[int]) -> list[MessageRecord]:
    """The read of a store that keeps nothing yet (a fresh one)."""
    fresh = await _store(url)
    try:
        return await fresh.get_messages_by_id(ids)
    finally:
        await fresh.close()


async def test_a_second_read_is_the_first_and_a_fresh_stores(pg_url: str) -> None:
    store = await _store(pg_url)
    try:
        ids = await _append(store, "s", [Message.user(f"turn {i}") for i in range(6)])
        wanted = [ids[3], 10**12, ids[0], ids[3], ids[5]]  # a missing id, a repeat, any order
        first = await store.get_messages_by_id(wanted)
        assert len(store._message_records) == 3
        again = await store.get_messages_by_id([*wanted, ids[1]])  # kept and not kept in one read
        assert [m.id for m in first] == [ids[3], ids[0], ids[5]]
        assert again[:3] == first and again == await _plain(pg_url, [*wanted, ids[1]])
        assert all(again[i] is first[i] for i in range(3))  # served, not rebuilt
    finally:
        await store.close()


async def test_a_conversation_another_host_deleted_is_not_served(pg_url: str) -> None:
    host, other = await _store(pg_url), await _store(pg_url)
    try:
        gone = await _append(host, "gone", [Message.user("secret"), Message.assistant("noted")])
        kept = await _append(host, "kept", [Message.user("stays")])
        assert len(await host.get_messages_by_id([*gone, *kept])) == 3
        conversation = await other.find_conversation(agent_id="main", session_id="gone")
        assert conversation is not None
        await other.delete_conversations([conversation.id])
        assert [m.content for m in await host.get_messages_by_id([*gone, *kept])] == ["stays"]
        assert gone[0] not in host._message_records and kept[0] in host._message_records
    finally:
        await host.close()
        await other.close()


async def test_a_row_written_again_is_read_again(pg_url: str) -> None:
    """Any write makes a new row version: the kept record is not served (the word index's own write included)."""
    store = await _store(pg_url)
    try:
        (message_id,) = await _append(store, "s", [Message.user("before", metadata={"speaker": "Maya"})])
        assert (await store.get_messages_by_id([message_id]))[0].content == "before"
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            await conn.execute(
                "UPDATE messages SET content = 'after', metadata = '{\"speaker\": \"Jonas\"}' WHERE message_id = %s",
                (message_id,),
            )
        (read,) = await store.get_messages_by_id([message_id])
        assert (read.content, read.metadata) == ("after", {"speaker": "Jonas"})
        assert read == (await _plain(pg_url, [message_id]))[0]
        assert (await store.get_messages_by_id([message_id]))[0].content == "after"  # and kept as it is now
    finally:
        await store.close()


async def test_reads_inside_a_block_keep_nothing_and_a_rolled_back_append_is_never_served(pg_url: str) -> None:
    store = await _store(pg_url)
    try:
        (outside,) = await _append(store, "s", [Message.user("committed")])
        inside: list[int] = []
        with pytest.raises(RuntimeError):
            async with store.atomic():
                inside += await _append(store, "s", [Message.user("rolled back")])
                read = await store.get_messages_by_id([outside, *inside])
                assert [m.content for m in read] == ["committed", "rolled back"]
                raise RuntimeError("roll back")
        assert len(store._message_records) == 0
        assert [m.content for m in await store.get_messages_by_id([outside, *inside])] == ["committed"]
        # Kept outside, then read inside a block that deletes it: the block's state, not the kept record.
        with pytest.raises(RuntimeError):
            async with store.atomic():
                conversation = await store.find_conversation(agent_id="main", session_id="s")
                assert conversation is not None
                await store.delete_conversations([conversation.id])
                assert await store.get_messages_by_id([outside]) == []
                raise RuntimeError("roll back")
        assert [m.content for m in await store.get_messages_by_id([outside])] == ["committed"]
    finally:
        await store.close()


async def test_metadata_is_never_shared_and_messages_with_parts_are_not_kept(pg_url: str) -> None:
    store = await _store(pg_url)
    try:
        tool = Message.from_parts("assistant", [TextPart("calling"), ToolPart(call_id="c1", name="sh", input={"a": 1})])
        with_metadata, with_parts = await _append(store, "s", [Message.user("hi", metadata={"speaker": "Maya"}), tool])
        first = await store.get_messages_by_id([with_metadata, with_parts])
        assert with_metadata in store._message_records and with_parts not in store._message_records
        assert first[0].metadata is not None
        first[0].metadata["speaker"] = "changed by a caller"
        again = await store.get_messages_by_id([with_metadata, with_parts])
        assert again[0].metadata == {"speaker": "Maya"}
        assert again == await _plain(pg_url, [with_metadata, with_parts])
        assert any(isinstance(p, ToolPart) for p in again[1].parts)
    finally:
        await store.close()


def _record(message_id: int, size: int) -> MessageRecord:
    content = "x" * size
    return MessageRecord(message_id, 1, message_id, "user", content, (TextPart(content),), 1, T0)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.integers(1, 12), st.integers(0, 40)), max_size=60),
    st.integers(1, 5),
    st.integers(0, 100),
)
def test_kept_records_stay_within_their_bounds(ops: list[tuple[bool, int, int]], limit: int, chars: int) -> None:
    records = MessageRecords(limit=limit, chars=chars)
    model: dict[int, int] = {}  # id -> size, oldest kept first
    for keep, message_id, size in ops:
        if keep:
            records.keep(_record(message_id, size), "1", None)
            model.pop(message_id, None)
            model[message_id] = size
            while model and (len(model) > limit or sum(model.values()) > chars):
                del model[next(iter(model))]
        else:
            records.forget(message_id)
            model.pop(message_id, None)
        assert len(records) == len(model) <= limit
        assert all(message_id in records for message_id in model)
        assert records._chars == sum(model.values()) <= chars
