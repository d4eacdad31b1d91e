"""expand_query: grants created, scoped, always revoked; no recursion; bounded, cited answers."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import anyio
import pytest

from lossless import ContextEngine, Message
from lossless.errors import InputError, ProviderError
from lossless.records import utcnow
from lossless.retrieval import AccessDenied, Caller, Retriever
from lossless.retrieval.expansion import (
    ExpansionAnswer,
    ExpansionTask,
    ExpansionTools,
    OfflineExpansionRunner,
    expand_query,
)
from lossless.tokens import EstimatingCounter

from .conftest import BACKENDS, backend_url

pytestmark = pytest.mark.anyio
COUNTER = EstimatingCounter()
CALLER = Caller("main", session_key="k")


@pytest.fixture(params=BACKENDS)
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ContextEngine]:
    opened = await ContextEngine.open(
        backend_url(request, request.param, tmp_path, "x"),
        fresh_tail_count=2,
        leaf_chunk_tokens=600,
        leaf_target_tokens=150,
        condensed_target_tokens=150,
        leaf_min_fanout=3,
        summary_max_attempts=1,
    )
    try:
        yield opened
    finally:
        await opened.dispose()


FACT = "The database password rotation happens every Tuesday at 03:00 UTC via the vault-rotator job."


async def seeded(engine: ContextEngine) -> int:
    history = [
        Message("user" if i % 2 == 0 else "assistant", f"turn {i} about unrelated planning " + "blah " * 60)
        for i in range(24)
    ]
    history[5] = Message("assistant", FACT)
    result = await engine.ingest_batch("s", history, session_key="k")
    assert result.conversation_id is not None
    await engine.compact(result.conversation_id, force=True)
    await engine.ingest_batch("other", [Message.user("rotation of another kind")], session_key="k2")
    return result.conversation_id


async def grants(engine: ContextEngine) -> list[tuple[str, str | None]]:
    """Every stored grant with its revoke reason, read from the table itself."""
    store = engine.store
    if store.backend == "postgres":
        async with store._db.transaction() as conn:  # type: ignore[attr-defined]
            cursor = await conn.execute("SELECT grant_id, revoke_reason FROM expansion_grants ORDER BY created_at")
            return [(r[0], r[1]) for r in await cursor.fetchall()]
    rows = await store._db.read(  # type: ignore[attr-defined]
        lambda conn: conn.execute("SELECT grant_id, revoke_reason FROM expansion_grants").fetchall()
    )
    return [(r[0], r[1]) for r in rows]


async def test_offline_runner_answers_with_cited_passages_and_revokes(engine: ContextEngine) -> None:
    conv = await seeded(engine)
    summaries, _ = await engine.summaries(conv)
    retriever = Retriever(engine.store)
    result = await expand_query(
        retriever,
        CALLER,
        OfflineExpansionRunner(COUNTER),
        COUNTER,
        prompt="When does the password rotation happen?",
        summary_ids=[s.id for s in summaries if s.depth == max(x.depth for x in summaries)],
        max_tokens=200,
    )
    assert result.status == "completed" and "Tuesday at 03:00" in result.answer
    assert any(c.startswith("msg#") for c in result.cited) and COUNTER.count(result.answer) <= 200
    assert await grants(engine) == [(result.grant_id, "completed")]
    by_query = await expand_query(
        retriever, CALLER, OfflineExpansionRunner(COUNTER), COUNTER, prompt="password rotation?", query="rotation"
    )
    assert "Tuesday" in by_query.answer and by_query.status == "completed"
    nothing = await expand_query(retriever, CALLER, OfflineExpansionRunner(COUNTER), COUNTER, prompt="?", query="zebra")
    assert nothing.status == "empty" and nothing.grant_id is None


async def test_offline_runner_reads_the_turns_around_a_match_and_keeps_to_the_cap(engine: ContextEngine) -> None:
    # The answer shares no word with the question: it is the reply to the turn that does.
    chat = [Message.user(f"Ben: The market was quiet and grey again, day {i}.") for i in range(12)]
    chat[5] = Message.user("Ben: Have you been to that jazz club on the market square yet?")
    chat[6] = Message.assistant("Ana: Yes! We went there last week, the pierogi was incredible.")
    result = await engine.ingest_batch("chat", chat, session_key="k")
    records = await engine.messages(result.conversation_id)
    reply = next(r.id for r in records if "pierogi" in r.content)
    question = "What did Ana think of the jazz club on the market square?"
    answered = await engine.expand_query(question, query="jazz OR club OR market OR square", conversation="chat")
    assert answered.status == "completed" and "pierogi" in answered.answer
    assert f"msg#{reply}" in answered.cited and answered.answer.startswith("[msg#")
    # A small grant cap: fewer matches are read, and the answer still comes from what was.
    small = await engine.expand_query(
        question, query="jazz OR club OR market OR square", conversation="chat", token_cap=150
    )
    assert small.status == "completed" and small.answer.startswith("[msg#")
    assert small.grant_id is not None
    grant = await engine.store.get_grant(small.grant_id)
    assert grant is not None and 0 < grant.tokens_used <= 150
    assert answered.grant_id is not None
    uncapped = await engine.store.get_grant(answered.grant_id)
    assert uncapped is not None and uncapped.tokens_used > 150  # so the cap did cut what was read


async def test_offline_runner_follows_memory_leads_within_the_grant(engine: ContextEngine) -> None:
    # The answer shares no word with the question, nor do the turns around it: only a lead finds it.
    chat = [Message.user(f"Ben: The weather was grey again, day {i}.") for i in range(40)]
    chat[2] = Message.user("Ben: Ana has left the market job, I hear.")
    chat[30] = Message.user("Ana: Handed in my notice today. Starting at Ravenpoint Energy soon.")
    result = await engine.ingest_batch("chat", chat, session_key="k")
    other = await engine.ingest_batch("elsewhere", [Message.user("Ana: Starting at Ravenpoint Energy too.")])
    assert result.conversation_id is not None and other.conversation_id is not None
    records = await engine.messages(result.conversation_id)
    fact = next(r.id for r in records if "Ravenpoint" in r.content)
    outside = (await engine.messages(other.conversation_id))[0].id
    asked: list[tuple[str, tuple[int, ...]]] = []

    async def leads(question: str, conversations: tuple[int, ...]) -> list[int]:
        asked.append((question, conversations))
        return [outside, fact]  # a lead outside the grant is not read

    question = "Which employer is she joining after the market job?"
    retriever = Retriever(engine.store)
    plain = await expand_query(
        retriever, CALLER, OfflineExpansionRunner(COUNTER), COUNTER, prompt=question, query="market",
        conversation_id=result.conversation_id,
    )  # fmt: skip
    assert "Ravenpoint" not in plain.answer
    led = await expand_query(
        retriever, CALLER, OfflineExpansionRunner(COUNTER, leads), COUNTER, prompt=question, query="market",
        conversation_id=result.conversation_id,
    )  # fmt: skip
    assert led.status == "completed" and "Ravenpoint" in led.answer and f"msg#{fact}" in led.cited
    assert f"msg#{outside}" not in led.cited and asked == [(question, (result.conversation_id,))]

    async def broken(question: str, conversations: tuple[int, ...]) -> list[int]:
        raise ProviderError("embedder", "no model")

    fallback = await expand_query(
        retriever, CALLER, OfflineExpansionRunner(COUNTER, broken), COUNTER, prompt=question, query="market",
        conversation_id=result.conversation_id,
    )  # fmt: skip
    assert fallback.status == "completed" and fallback.answer == plain.answer  # the search alone answers


async def test_the_engine_reads_its_memories_as_leads(tmp_path: Path) -> None:
    engine = await ContextEngine.open(f"sqlite:///{tmp_path / 'leads.db'}", memory_embedder="hash")
    try:
        chat = [Message.user(f"Ben: The market was quiet and grey again, day {i}.") for i in range(12)]
        chat[7] = Message.user("Ana: My cousin Oskar is getting married next spring, I'm the best person!")
        result = await engine.ingest_batch("chat", chat)
        assert result.conversation_id is not None
        records = await engine.messages(result.conversation_id)
        leads = engine.parts["memory"].leads  # type: ignore[attr-defined]  # what the offline runner is given
        assert await leads("Who is getting married?", (result.conversation_id,)) == []  # no memories yet
        await engine.memory().mine(records)
        fact = next(r.id for r in records if "Oskar" in r.content)
        assert (await leads("Which cousin of Ana is getting married?", (result.conversation_id,)))[0] == fact
        assert await leads("Which cousin of Ana is getting married?", (result.conversation_id + 1,)) == []
        answered = await engine.expand_query(
            "Which cousin of Ana is getting married?", query="cousin", conversation="chat"
        )
        assert "Oskar" in answered.answer and f"msg#{fact}" in answered.cited
    finally:
        await engine.dispose()


class Scripted:
    """A runner that does what a test tells it."""

    name = "scripted"

    def __init__(self, action: str) -> None:
        self.action = action
        self.seen: list[str] = []

    async def run(self, task: ExpansionTask, tools: ExpansionTools) -> ExpansionAnswer:
        if self.action == "hang":
            await anyio.sleep(math.inf)
        if self.action == "fail":
            raise ProviderError("scripted", "the model broke")
        if self.action == "recurse":
            await expand_query(tools.retriever, Caller("main", session_key="k"), self, COUNTER, prompt="x", query="y")
        if self.action == "revoked":
            assert tools.caller.grant_id is not None
            await tools.retriever.store.revoke_grant(tools.caller.grant_id, "error", utcnow())
            await tools.call("lcm_grep", {"pattern": "rotation"})
        if self.action == "escape":
            out = await tools.call("lcm_grep", {"pattern": "rotation", "all_conversations": True, "limit": 200})
            self.seen = [str(m["conversation_id"]) for m in out.data["matches"]]  # type: ignore[index,union-attr]
        if self.action == "long":
            return ExpansionAnswer("word " * 10_000, ("sum_x",))
        return ExpansionAnswer("done")


async def test_grant_is_revoked_on_timeout_and_error(engine: ContextEngine) -> None:
    await seeded(engine)
    retriever = Retriever(engine.store)
    timed = await expand_query(
        retriever, CALLER, Scripted("hang"), COUNTER, prompt="q", query="rotation", timeout_s=0.2
    )
    assert timed.status == "timeout"
    with pytest.raises(ProviderError):
        await expand_query(retriever, CALLER, Scripted("fail"), COUNTER, prompt="q", query="rotation")
    assert sorted(reason or "" for _, reason in await grants(engine)) == ["error", "timeout"]


async def test_no_recursion_and_no_escape(engine: ContextEngine) -> None:
    conv = await seeded(engine)
    retriever = Retriever(engine.store)
    recursed = await expand_query(retriever, CALLER, Scripted("recurse"), COUNTER, prompt="q", query="rotation")
    assert recursed.status == "denied" and "cannot start another" in recursed.answer
    with pytest.raises(AccessDenied):
        await expand_query(
            retriever, Caller("main", grant_id="grant_any"), Scripted("ok"), COUNTER, prompt="q", query="rotation"
        )
    escape = Scripted("escape")
    await expand_query(retriever, CALLER, escape, COUNTER, prompt="q", query="rotation", all_conversations=True)
    # The grant covers the conversations the query found, and the sub-agent sees no more than that.
    assert escape.seen and set(escape.seen) <= {str(conv), str(conv + 1)}
    stopped = await expand_query(retriever, CALLER, Scripted("revoked"), COUNTER, prompt="q", query="rotation")
    assert stopped.status == "denied" and "revoked" in stopped.answer


async def test_answer_is_cut_to_max_tokens_and_expired_grants_are_swept(engine: ContextEngine) -> None:
    await seeded(engine)
    retriever = Retriever(engine.store)
    long = await expand_query(retriever, CALLER, Scripted("long"), COUNTER, prompt="q", query="rotation", max_tokens=60)
    assert COUNTER.count(long.answer) <= 60
    from lossless.records import Grant

    now = utcnow()
    await engine.store.create_grant(Grant("grant_old", "main", "g", (1,), 5, now, now + timedelta(seconds=1)))
    later = now + timedelta(minutes=10)
    await expand_query(retriever, CALLER, Scripted("ok"), COUNTER, prompt="q", query="rotation", clock=lambda: later)
    assert ("grant_old", "expired") in await grants(engine)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"prompt": ""},
        {"prompt": "q", "max_tokens": 10},
        {"prompt": "q", "token_cap": 0},
        {"prompt": "q", "query": None},
        {"prompt": "q", "summary_ids": "sum_x", "query": None},
    ],
)
async def test_bad_arguments(engine: ContextEngine, kwargs: dict[str, object]) -> None:
    await seeded(engine)
    arguments = {"query": "rotation", **kwargs}
    with pytest.raises(InputError):
        await expand_query(Retriever(engine.store), CALLER, Scripted("ok"), COUNTER, **arguments)  # type: ignore[arg-type]
