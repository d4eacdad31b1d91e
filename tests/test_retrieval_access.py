"""Isolation: a caller reads its own conversation family, its agent with all_conversations, and nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import anyio
import pytest

from lossless import ContextEngine, Message
from lossless.config import Config
from lossless.errors import InputError, NotFoundError
from lossless.ports import Store
from lossless.records import Grant, utcnow
from lossless.retrieval import AccessDenied, Caller, GrepOptions, Retriever
from lossless.retrieval.service import FileView
from lossless.tokens import EstimatingCounter

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
    before = await store.get_grant(grant.id)
    assert before is not None and before.tokens_used > 0  # the matches were charged
    expanded = await retriever.expand(sub, summary_ids=[summary_id], include_messages=True)
    used = await store.get_grant(grant.id)
    assert used is not None and used.tokens_used - before.tokens_used == expanded.estimated_tokens > 0
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


async def test_reservations_are_atomic_and_never_pass_the_cap(store: Store) -> None:
    now = utcnow()
    await store.create_grant(Grant("grant_r", "alice", "sub:r", (1,), 1000, now, now + timedelta(minutes=5)))
    taken: list[int | None] = []

    async def reserve() -> None:
        taken.append(await store.reserve_grant("grant_r", 300, now))

    async with anyio.create_task_group() as group:
        for _ in range(8):
            group.start_soon(reserve)
    assert sum(t or 0 for t in taken) == 1000 and sorted(taken).count(0) == 4  # 300+300+300+100, then nothing
    await store.release_grant("grant_r", 250)
    grant = await store.get_grant("grant_r")
    assert grant is not None and grant.tokens_used == 750
    assert await store.reserve_grant("grant_r", 1000, now) == 250
    await store.release_grant("grant_r", 5000)  # never below zero
    grant = await store.get_grant("grant_r")
    assert grant is not None and grant.tokens_used == 0
    assert await store.reserve_grant("grant_r", 1, now + timedelta(minutes=6)) is None  # expired
    assert await store.reserve_grant("grant_nope", 1, now) is None


async def test_parallel_expansions_under_a_grant_return_at_most_its_cap(
    engines: tuple[ContextEngine, ContextEngine],
) -> None:
    alice, bob = engines
    a, _, _, _ = await setup(alice, bob)
    summaries, _ = await alice.summaries(a)
    roots = [s.id for s in summaries]
    now = utcnow()
    await alice.store.create_grant(Grant("grant_p", "alice", "sub:p", (a,), 1000, now, now + timedelta(minutes=5)))
    sub = Caller("alice", session_key="sub:p", grant_id="grant_p")
    full = await Retriever(alice.store).expand(ALICE, summary_ids=roots, include_messages=True)
    assert full.estimated_tokens > 1000  # each expansion alone would take the whole cap
    returned: list[int] = []
    refused: list[str] = []

    async def one() -> None:
        try:
            result = await alice.expand(roots, include_messages=True, caller=sub)
        except AccessDenied as exc:
            refused.append(str(exc))
        else:
            returned.append(result.estimated_tokens)

    async with anyio.create_task_group() as group:
        for _ in range(8):
            group.start_soon(one)
    assert 0 < sum(returned) <= 1000
    assert refused and all("cap" in text for text in refused)
    grant = await alice.store.get_grant("grant_p")
    assert grant is not None and grant.tokens_used == sum(returned)


async def test_every_read_under_a_grant_is_charged_to_its_cap(engines: tuple[ContextEngine, ContextEngine]) -> None:
    alice, bob = engines
    a, _, _, summary_id = await setup(alice, bob)
    now = utcnow()
    cap = 400
    await alice.store.create_grant(Grant("grant_all", "alice", "sub:all", (a,), cap, now, now + timedelta(minutes=5)))
    sub = Caller("alice", session_key="sub:all", grant_id="grant_all")
    count = EstimatingCounter().count
    returned = 0
    refusals: list[str] = []
    for _ in range(12):  # grep, describe and expand in turn until the cap is spent
        try:
            found = await alice.grep("secret", limit=50, caller=sub)
            returned += sum(count(h.snippet) for h in found.hits)
        except AccessDenied as exc:
            refusals.append(str(exc))
        try:
            described = await alice.describe(summary_id, caller=sub)
            assert not isinstance(described, FileView)
            returned += count(described.summary.content)
        except AccessDenied as exc:
            refusals.append(str(exc))
        try:
            returned += (await alice.expand([summary_id], include_messages=True, caller=sub)).estimated_tokens
        except AccessDenied as exc:
            refusals.append(str(exc))
    assert 0 < returned <= cap
    assert refusals and all("token cap" in text and "answer with what was read" in text for text in refusals)
    grant = await alice.store.get_grant("grant_all")
    assert grant is not None and grant.tokens_used <= cap


async def test_a_tiny_cap_refuses_describe_and_grep_and_cuts_long_reads(
    engines: tuple[ContextEngine, ContextEngine],
) -> None:
    alice, bob = engines
    a, _, _, summary_id = await setup(alice, bob)
    now = utcnow()
    await alice.store.create_grant(Grant("grant_5", "alice", "sub:5", (a,), 5, now, now + timedelta(minutes=5)))
    tiny = Caller("alice", session_key="sub:5", grant_id="grant_5")
    with pytest.raises(AccessDenied, match="5-token cap"):
        await alice.describe(summary_id, caller=tiny)
    with pytest.raises(AccessDenied, match="5-token cap"):
        await alice.grep("secret", caller=tiny)
    grant = await alice.store.get_grant("grant_5")
    assert grant is not None and grant.tokens_used == 0  # a refused read charges nothing

    # A cap that fits part of a read: the description is cut, the matches are fewer.
    whole = await alice.describe(summary_id, caller=ALICE)
    assert not isinstance(whole, FileView)
    count = alice.tokens.count  # what the grant is charged in: the engine's own counter
    room = count(whole.render()) - 20
    await alice.store.create_grant(Grant("grant_d", "alice", "sub:d", (a,), room, now, now + timedelta(minutes=5)))
    cut = await alice.describe(summary_id, caller=Caller("alice", session_key="sub:d", grant_id="grant_d"))
    assert not isinstance(cut, FileView)
    assert count(cut.render()) <= room and "token cap is spent" in cut.summary.content
    all_hits = await alice.grep("secret", limit=50, caller=ALICE)
    some = sum(count(h.render()) for h in all_hits.hits[:3])
    await alice.store.create_grant(Grant("grant_g", "alice", "sub:g", (a,), some, now, now + timedelta(minutes=5)))
    fewer = await alice.grep("secret", limit=50, caller=Caller("alice", session_key="sub:g", grant_id="grant_g"))
    assert len(fewer.hits) == 3 and fewer.more and "no tokens left" in fewer.render()


async def test_file_pages_under_a_grant_are_charged(config: Config) -> None:
    async with await ContextEngine.open(config=config.replace(large_file_token_threshold=1000)) as engine:
        body = "\n".join(f"line {i}: the parser reads token {i} of the stream" for i in range(800))
        stored = await engine.ingest("s", Message.user(f'<file name="notes.txt">\n{body}\n</file>'))
        assert stored.conversation_id is not None
        files = await engine.store.list_large_files(stored.conversation_id, limit=5, offset=0)
        assert files
        now = utcnow()
        later = now + timedelta(hours=1)
        # 600 tokens: the file's header and exploration summary (~300 exact tokens) and part of its lines.
        grant = Grant("grant_f", config.agent_id, "sub:f", (stored.conversation_id,), 600, now, later)
        await engine.store.create_grant(grant)
        sub = Caller(config.agent_id, session_key="sub:f", grant_id="grant_f")
        count = engine.tokens.count  # what the grant is charged in: the engine's own counter
        page = await engine.describe(files[0].id, caller=sub)
        assert isinstance(page, FileView) and page.page.text and page.page.truncated
        spent = count(page.render())
        assert spent <= 600
        charged = await engine.store.get_grant("grant_f")
        assert charged is not None and charged.tokens_used == spent


def test_caller_validation() -> None:
    with pytest.raises(InputError):
        Caller("")
    with pytest.raises(InputError):
        Caller("a", session_key="")
