"""The engine's reads of the summary DAG by id: batched, in the order asked, and scoped to one agent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from lossless import ContextEngine, Message
from lossless.config import Config

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
SMALL = {
    "fresh_tail_count": 4,
    "leaf_chunk_tokens": 300,
    "leaf_target_tokens": 60,
    "condensed_target_tokens": 60,
    "leaf_min_fanout": 3,
    "condensed_min_fanout": 2,
    "condensed_min_fanout_hard": 2,
}


def turns(n: int, tag: str) -> list[Message]:
    words = " ".join(f"{tag}{i}" for i in range(40))
    return [Message.user(f"{tag} turn {k}: {words}", created_at=T0 + timedelta(minutes=k)) for k in range(n)]


async def test_the_dag_read_by_id_matches_the_conversations_lineage(config: Config) -> None:
    async with await ContextEngine.open(config=config.replace(agent_id="alice", **SMALL)) as alice:
        await alice.ingest_batch("a", turns(80, "alpha"))
        await alice.compact("a", force=True)
        summaries, lineage = await alice.summaries("a")
        condensed = [s for s in summaries if s.depth > 0]
        leaves = [s for s in summaries if s.depth == 0]
        assert condensed and leaves
        ids = [s.id for s in reversed(summaries)]
        assert [s.id for s in await alice.summaries_by_id([*ids, "sum_nope", ids[0]])] == ids  # order kept, once
        sources = await alice.summary_sources([s.id for s in condensed])
        assert sources == {s.id: tuple(lineage[s.id]) for s in condensed}
        covered = await alice.summary_messages([s.id for s in leaves])
        assert covered == {s.id: tuple(lineage[s.id]) for s in leaves}
        up = await alice.condensed_into([sources[condensed[0].id][0]])
        assert up == {sources[condensed[0].id][0]: (condensed[0].id,)}
        first = covered[leaves[0].id]
        assert [m.id for m in await alice.messages_by_id([*reversed(first), 10**12])] == list(reversed(first))


async def test_another_agents_summaries_and_messages_are_left_out(config: Config) -> None:
    async with await ContextEngine.open(config=config.replace(agent_id="alice", **SMALL)) as alice:
        await alice.ingest_batch("a", turns(40, "alpha"))
        await alice.compact("a", force=True)
        alice_summaries, _ = await alice.summaries("a")
        alice_messages = [m.id for m in await alice.messages("a")]
    async with await ContextEngine.open(config=config.replace(agent_id="bob", **SMALL)) as bob:
        ids = [s.id for s in alice_summaries]
        assert ids
        assert await bob.summaries_by_id(ids) == []
        assert await bob.summary_sources(ids) == {}
        assert await bob.summary_messages(ids) == {}
        assert await bob.condensed_into(ids) == {}
        assert await bob.messages_by_id(alice_messages) == []
        await bob.ingest("b", Message.user("bob's own"))
        (own,) = await bob.messages("b")
        assert [m.id for m in await bob.messages_by_id([*alice_messages, own.id])] == [own.id]
