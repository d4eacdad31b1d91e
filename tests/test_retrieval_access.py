"""Isolation: a caller reads its own conversation family, its agent with all_conversations, and nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import anyio
import pytest

from lossless import ContextEngine, Message
from lossless.errors import InputError, NotFoundError
from lossless.ports import Store
from lossless.records import Grant, utcnow
from lossless.retrieval import AccessDenied, Caller, GrepOptions, Retriever

from .conftest import BACKENDS, backend_url

pytestmark = pytest.mark.anyio


@pytest.fixture(params=BACKENDS)
async def engines(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[ContextEngine, ContextEngine]]:
    url = backend_url(request, request.param, tmp_path, "shared")
    settings = {
        "fresh_tail_count": 2,
        "leaf_chunk_tokens": 600,
        "leaf_target_tokens": 150,
        "condensed_target_tokens": 150,
        "leaf_min_fanout": 3,
        "summary_max_attempts": 1,
    }
    alice = await ContextEngine.open(url, agent_id="alice", **settings)  # type: ignore[arg-type]
    bob = await ContextEngine.open(url, agent_id="bob", **settings)  # type: ignore[arg-type]
    try:
        yield alice, bob
    finally:
        await bob.dispose()
        await alice.dispose()


def secret_chat(tag: str, count: int = 20) -> list[Message]:
    return [
        Message("user" if i % 2 == 0 else "assistant", f"{tag} secret number {i} " + "filler words here " * 20)
        for i in range(count)
    ]


async def setup(alice: ContextEngine, bob: ContextEngine) -> tuple[int, int, int, str]:
    """Alice's main conversation (compacted), a second alice session, and bob's; returns a summary id of alice."""
    a = await alice.ingest_batch("a-main", secret_chat("alpha"), session_key="alice:chat")
    a2 = await alice.ingest_batch("a-other", secret_chat("other"), session_key="alice:other")
    b = await bob.ingest_batch("b-main", secret_chat("bravo"), session_key="bob:chat")
    assert a.conversation_id and a2.conversation_id and b.conversation_id
    await alice.compact(a.conversation_id, force=True)
    summaries, _ = await alice.summaries(a.conversation_id)
    assert summaries
    return a.conversation_id, a2.conversation_id, b.conversation_id, summaries[0].id


ALICE = Caller("alice", session_key="alice:chat")
BOB = Caller("bob", session_key="bob:chat")


async def test_default_reach_is_the_callers_family(engines: tuple[ContextEngine, ContextEngine]) -> None:
    alice, bob = engines
    a, a2, _, _ = await setup(alice, bob)
    retriever = Retriever(alice.store)
    own = await retriever.grep(ALICE, GrepOptions("secret"))
    assert own.hits and {h.conversation_id for h in own.hits} == {a}
    wide = await retriever.grep(ALICE, GrepOptions("secret", limit=200), all_conversations=True)
    assert {h.conversation_id for h in wide.hits} == {a, a2}
    # A sub-agent spawned from the main session is in the family; so is the parent seen from the child.
    await alice.prepare_subagent_spawn("a-main", "a-child", child_session_key="alice:child")
    await alice.ingest_batch("a-child", [Message.user("child secret note")], session_key="alice:child")
    family = await retriever.grep(ALICE, GrepOptions("child secret"))
    assert len(family.hits) == 1
    from_child = await retriever.grep(Caller("alice", session_key="alice:child"), GrepOptions("alpha secret"))
    assert from_child.hits


async def test_another_agents_conversation_is_unreachable_through_every_tool(
    engines: tuple[ContextEngine, ContextEngine],
) -> None:
    alice, bob = engines
    a, _, b, summary_id = await setup(alice, bob)
    retriever = Retriever(bob.store)
    everything = await retriever.grep(BOB, GrepOptions("secret", limit=200), all_conversations=True)
    assert {h.conversation_id for h in everything.hits} == {b}
    assert not any("alpha" in h.snippet for h in everything.hits)
    with pytest.raises(AccessDenied) as denied:
        await retriever.grep(BOB, GrepOptions("secret"), conversation_id=a)
    with pytest.raises(AccessDenied) as missing:
        await retriever.grep(BOB, GrepOptions("secret"), conversation_id=99_999)
    # The denial is the same whether the conversation exists or not: nothing leaks.
    assert str(denied.value).replace(str(a), "N") == str(missing.value).replace("99999", "N")
    with pytest.raises(NotFoundError) as by_describe:
        await retriever.describe(BOB, summary_id, all_conversations=True)
    with pytest.raises(NotFoundError) as unknown:
        await retriever.describe(BOB, "sum_0000000000000000", all_conversations=True)
    assert str(by_describe.value).replace(summary_id, "X") == str(unknown.value).replace("sum_0000000000000000", "X")
    with pytest.raises(NotFoundError):
        await retriever.expand(BOB, summary_ids=[summary_id], all_conversations=True, include_messages=True)
    via_query = await retriever.expand(BOB, query="alpha", all_conversations=True, include_messages=True)
    assert not via_query.messages and not via_query.summaries
    # The same agent's other session is out of the default reach too.
    with pytest.raises(AccessDenied):
        await Retriever(alice.store).grep(
            Caller("alice", session_key="alice:other"), GrepOptions("x"), conversation_id=a
        )


async def test_a_caller_without_a_conversation_must_say_where(engines: tuple[ContextEngine, ContextEngine]) -> None:
    alice, bob = engines
    await setup(alice, bob)
    with pytest.raises(InputError, match="all_conversations"):
        await Retriever(alice.store).grep(Caller("alice", session_key="nobody"), GrepOptions("secret"))


async def test_grants_bound_reach_and_stop_when_revoked_or_expired(
    engines: tuple[ContextEngine, ContextEngine],
) -> None:
    alice, bob = engines
    a, a2, b, summary_id = await setup(alice, bob)
    store = alice.store
    now = utcnow()
    grant = Grant("grant_t1", "alice", "sub:1", (a,), 10_000, now, now + timedelta(minutes=5))
    await store.create_grant(grant)
    sub = Caller("alice", session_key="sub:1", grant_id=grant.id)
    retriever = Retriever(store)
    found = await retriever.grep(sub, GrepOptions("secret", limit=200), all_conversations=True)
    assert {h.conversation_id for h in found.hits} == {a}
    with pytest.raises(AccessDenied):
        await retriever.grep(sub, GrepOptions("secret"), conversation_id=a2)
    with pytest.raises(AccessDenied):
        await retriever.grep(sub, GrepOptions("secret"), conversation_id=b)
    expanded = await retriever.expand(sub, summary_ids=[summary_id], include_messages=True)
    used = await store.get_grant(grant.id)
    assert used is not None and used.tokens_used == expanded.estimated_tokens > 0
    # Another agent cannot borrow the grant.
    with pytest.raises(AccessDenied):
        await retriever.grep(Caller("bob", grant_id=grant.id), GrepOptions("secret"))
    await store.revoke_grant(grant.id, "completed", utcnow())
    with pytest.raises(AccessDenied, match="revoked"):
        await retriever.expand(sub, summary_ids=[summary_id])
    # An expired grant stops a sub-agent even before the sweep marks it.
    clock_now = [utcnow()]
    short = Grant("grant_t2", "alice", "sub:2", (a,), 10_000, clock_now[0], clock_now[0] + timedelta(seconds=30))
    await store.create_grant(short)
    later = Retriever(store, clock=lambda: clock_now[0])
    sub2 = Caller("alice", session_key="sub:2", grant_id=short.id)
    assert (await later.grep(sub2, GrepOptions("secret"))).hits
    clock_now[0] += timedelta(minutes=1)
    with pytest.raises(AccessDenied, match="expired"):
        await later.grep(sub2, GrepOptions("secret"))


async def test_a_grant_cap_bounds_what_expansion_returns(engines: tuple[ContextEngine, ContextEngine]) -> None:
    alice, bob = engines
    a, _, _, summary_id = await setup(alice, bob)
    now = utcnow()
    await alice.store.create_grant(Grant("grant_t3", "alice", "sub:3", (a,), 50, now, now + timedelta(minutes=5)))
    sub = Caller("alice", session_key="sub:3", grant_id="grant_t3")
    retriever = Retriever(alice.store)
    first = await retriever.expand(sub, summary_ids=[summary_id], include_messages=True, token_cap=1000)
    assert first.estimated_tokens <= 50 and first.truncated
    if first.estimated_tokens < 50:
        second = await retriever.expand(sub, summary_ids=[summary_id], include_messages=True)
        assert first.estimated_tokens + second.estimated_tokens <= 50 or second.truncated
    await alice.store.charge_grant("grant_t3", 50, utcnow())
    with pytest.raises(AccessDenied, match="token cap"):
        await retriever.expand(sub, summary_ids=[summary_id])


async def test_concurrent_charges_are_never_lost_and_never_pass_the_cap(store: Store) -> None:
    now = utcnow()
    await store.create_grant(Grant("grant_c", "alice", "sub:c", (1,), 1000, now, now + timedelta(minutes=5)))
    async with anyio.create_task_group() as group:
        for _ in range(20):
            group.start_soon(store.charge_grant, "grant_c", 7, now)
    charged = await store.get_grant("grant_c")
    assert charged is not None and charged.tokens_used == 140
    async with anyio.create_task_group() as group:
        for _ in range(20):
            group.start_soon(store.charge_grant, "grant_c", 100, now)
    capped = await store.get_grant("grant_c")
    assert capped is not None and capped.tokens_used == 1000
    assert await store.charge_grant("grant_c", 1, now + timedelta(minutes=6)) is None  # expired: not usable


def test_caller_validation() -> None:
    with pytest.raises(InputError):
        Caller("")
    with pytest.raises(InputError):
        Caller("a", session_key="")
