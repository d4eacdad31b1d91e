"""Large files and bootstrap state through the Store port, on each backend.

On SQLite the SQL is in ``stores/sqlite/large_files`` and ``stores/sqlite/bootstrap``.  New rows are
counted, repeats change nothing, an unknown conversation is refused without writing, listings page
in insertion order, and the newest bootstrap state wins.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from lossless.errors import NotFoundError
from lossless.ports import Store
from lossless.records import BootstrapState, LargeFile

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _file(n: int, conversation_id: int) -> LargeFile:
    return LargeFile(
        id=f"file_{n:016x}",
        conversation_id=conversation_id,
        storage_uri=f"fs:{conversation_id}/{n}.txt",
        created_at=T0 + timedelta(seconds=n),
        name=f"f{n}.txt",
        byte_size=100 + n,
    )


async def test_large_files_insert_count_page_and_refuse_unknown(store: Store) -> None:
    conversation = await store.get_or_create_conversation(agent_id="agent", session_id="files")
    files = [_file(n, conversation.id) for n in range(5)]
    assert await store.insert_large_files(files[:3]) == 3
    assert await store.insert_large_files(files) == 2  # the first three are already stored
    assert await store.insert_large_files([]) == 0
    assert [f.id for f in await store.list_large_files(conversation.id)] == [f.id for f in files]
    assert [f.id for f in await store.list_large_files(conversation.id, limit=2, offset=1)] == [
        f.id for f in files[1:3]
    ]
    got = await store.get_large_file(files[4].id)
    assert got is not None and got.name == "f4.txt" and got.byte_size == 104
    assert await store.get_large_file("file_missing") is None
    with pytest.raises(NotFoundError):
        await store.insert_large_files([_file(9, conversation.id), _file(10, conversation.id + 999)])
    assert await store.get_large_file(_file(9, conversation.id).id) is None  # nothing of the batch written


async def test_bootstrap_state_round_trip_newest_wins(store: Store) -> None:
    first = await store.get_or_create_conversation(agent_id="agent", session_id="one")
    second = await store.get_or_create_conversation(agent_id="agent", session_id="two")
    assert await store.find_bootstrap_state("agent", "/s.jsonl") is None
    older = BootstrapState(first.id, "/s.jsonl", size=10, mtime_ns=1, offset=10, tail_hash="a", updated_at=T0)
    await store.put_bootstrap_state(older)
    await store.put_bootstrap_state(
        BootstrapState(first.id, "/s.jsonl", size=20, mtime_ns=2, offset=20, tail_hash="b", updated_at=T0)
    )  # same conversation and path: updated in place
    found = await store.find_bootstrap_state("agent", "/s.jsonl")
    assert found is not None and (found.offset, found.tail_hash) == (20, "b")
    newer = BootstrapState(second.id, "/s.jsonl", size=30, mtime_ns=3, offset=30, updated_at=T0 + timedelta(hours=1))
    await store.put_bootstrap_state(newer)
    found = await store.find_bootstrap_state("agent", "/s.jsonl")
    assert found is not None and (found.conversation_id, found.offset) == (second.id, 30)
    assert await store.find_bootstrap_state("other-agent", "/s.jsonl") is None
