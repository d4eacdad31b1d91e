"""Properties of ingest: no duplicate and no lost message, whatever the replays, and exact round trips."""

from __future__ import annotations

import itertools
from pathlib import Path

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lossless.ports import PreparedMessage
from lossless.records import Message, utcnow
from lossless.stores.sqlite import SQLiteStore

from .strategies import messages

_counter = itertools.count()

batches = st.lists(
    st.lists(messages(keys=st.none() | st.sampled_from([f"k{i}" for i in range(8)])), max_size=6),
    max_size=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=batches)
def test_replayed_batches_store_each_key_once_and_everything_else(tmp_path: Path, batches: list[list[Message]]) -> None:
    async def scenario() -> None:
        store = await SQLiteStore.open(tmp_path / "p.db")
        try:
            conversation = await store.get_or_create_conversation(agent_id="main", session_id=f"s{next(_counter)}")
            expected: list[Message] = []
            seen: set[str] = set()
            reported_duplicates = 0
            for batch in [*batches, *batches]:  # replay everything once more
                now = utcnow()
                result = await store.append_messages(
                    conversation.id, [PreparedMessage(m, 1, m.created_at or now) for m in batch]
                )
                reported_duplicates += result.duplicates
                for message in batch:
                    if message.event_key is None or message.event_key not in seen:
                        expected.append(message)
                        if message.event_key is not None:
                            seen.add(message.event_key)
            stored = await store.get_messages(conversation.id)
            assert [(m.role, m.content, m.parts, m.event_key, m.metadata) for m in stored] == [
                (m.role, m.content, m.parts, m.event_key, m.metadata) for m in expected
            ]
            assert [m.seq for m in stored] == list(range(1, len(stored) + 1))
            total = 2 * sum(len(b) for b in batches)
            assert reported_duplicates == total - len(stored)
            items = await store.get_context_items(conversation.id)
            assert [i.message_id for i in items] == [m.id for m in stored]
        finally:
            await store.close()

    anyio.run(scenario)
