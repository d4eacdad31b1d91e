"""Contracts of the operations ports — job queue, maintenance, retention — run against every backend.

They use only the ports (no SQL, no engine), so a new backend (PostgreSQL) runs them unchanged
through the ``store`` fixture.
"""

from __future__ import annotations

from datetime import UTC, datetime

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lossless.errors import InputError
from lossless.ports import Job, JobQueue, MaintainableStore, PreparedMessage, RetentionStore, Store
from lossless.records import Message, Summary

from .test_store import new_conversation, prep

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def queue_of(store: Store) -> JobQueue:
    assert isinstance(store, JobQueue)
    return store


async def two_conversations(store: Store) -> tuple[int, int]:
    return await new_conversation(store, "a"), await new_conversation(store, "b")


async def test_queue_contract(store: Store) -> None:
    q = queue_of(store)
    a, b = await two_conversations(store)
    first = await q.enqueue_job("compaction", reason="threshold", conversation_id=a, mode="full", requested_at=NOW)
    again = await q.enqueue_job("compaction", reason="manual", conversation_id=a, requested_at=NOW)
    assert again.id == first.id and first.state == "queued" and first.mode == "full"
    other = await q.enqueue_job("compaction", reason="manual", conversation_id=b, requested_at=NOW)
    with pytest.raises(InputError):
        await q.enqueue_job("compaction", reason="manual", requested_at=NOW)
    with pytest.raises(InputError):
        await q.enqueue_job("compaction", reason="whenever", conversation_id=a, requested_at=NOW)  # type: ignore[arg-type]

    claimed = await q.claim_job("w1", lease_ms=1000, now_ms=0, max_attempts=3)
    assert claimed is not None and claimed.id == first.id and claimed.state == "running" and claimed.attempts == 1
    # While it runs, a new job for the same conversation may be queued but is not handed out.
    second = await q.enqueue_job("compaction", reason="manual", conversation_id=a, requested_at=NOW)
    assert second.id != first.id
    got = await q.claim_job("w2", lease_ms=100_000, now_ms=10, max_attempts=3)
    assert got is not None and got.id == other.id
    assert await q.claim_job("w3", lease_ms=1000, now_ms=20, max_attempts=3) is None

    assert not await q.renew_job(first.id, "w2", lease_ms=1000, now_ms=500)
    assert await q.renew_job(first.id, "w1", lease_ms=1000, now_ms=500)  # lease now until 1500
    assert await q.claim_job("w3", lease_ms=1000, now_ms=1400, max_attempts=3) is None
    # w1 dies: once its lease expires the job is claimed again (the older one first).
    retried = await q.claim_job("w3", lease_ms=1000, now_ms=1600, max_attempts=3)
    assert retried is not None and retried.id == first.id and retried.attempts == 2 and retried.lease_owner == "w3"
    assert not await q.finish_job(first.id, "w1", ok=True, finished_at=NOW)  # not w1's any more
    assert await q.finish_job(first.id, "w3", ok=True, result={"n": 1}, finished_at=NOW)
    assert await q.finish_job(other.id, "w2", ok=False, error="boom", retry=True, finished_at=NOW)
    jobs = {j.id: j for j in await q.list_jobs()}
    assert jobs[first.id].state == "done" and jobs[first.id].result == {"n": 1}
    assert jobs[other.id].state == "queued" and jobs[other.id].error == "boom"
    assert [j.id for j in await q.list_jobs(state="queued")] == sorted([second.id, other.id], reverse=True)


async def test_a_job_whose_worker_keeps_dying_is_failed(store: Store) -> None:
    q = queue_of(store)
    a, _ = await two_conversations(store)
    job = await q.enqueue_job("compaction", reason="manual", conversation_id=a, requested_at=NOW)
    for attempt in range(2):
        claimed = await q.claim_job(f"w{attempt}", lease_ms=100, now_ms=attempt * 1000, max_attempts=2)
        assert claimed is not None and claimed.id == job.id
    assert await q.claim_job("w9", lease_ms=100, now_ms=5000, max_attempts=2) is None
    [failed] = await q.list_jobs(state="failed")
    assert failed.id == job.id and "2 times" in (failed.error or "")


async def test_release_gives_a_job_back_without_counting_the_attempt(store: Store) -> None:
    q = queue_of(store)
    a, _ = await two_conversations(store)
    job = await q.enqueue_job("integrity", reason="maintenance", conversation_id=a, requested_at=NOW)
    assert (await q.claim_job("w", lease_ms=1000, now_ms=0, max_attempts=3)) is not None
    assert not await q.release_job(job.id, "someone else")
    assert await q.release_job(job.id, "w")
    [back] = await q.list_jobs(state="queued")
    assert back.id == job.id and back.attempts == 0 and back.lease_owner is None


async def test_a_retry_or_release_never_makes_a_second_queued_job(store: Store) -> None:
    q = queue_of(store)
    a, b = await two_conversations(store)
    for conversation_id, give_back in ((a, False), (b, True)):
        job = await q.enqueue_job("compaction", reason="manual", conversation_id=conversation_id, requested_at=NOW)
        claimed = await q.claim_job("w", lease_ms=1000, now_ms=0, max_attempts=3)
        assert claimed is not None and claimed.id == job.id
        waiting = await q.enqueue_job("compaction", reason="manual", conversation_id=conversation_id, requested_at=NOW)
        if give_back:
            assert await q.release_job(job.id, "w")
        else:
            assert await q.finish_job(job.id, "w", ok=False, error="boom", retry=True, finished_at=NOW)
        jobs = {j.id: j for j in await q.list_jobs()}
        assert jobs[job.id].state == "failed" and "queued again" in (jobs[job.id].error or "")
        assert jobs[waiting.id].state == "queued"
        again = await q.claim_job("w", lease_ms=1000, now_ms=0, max_attempts=3)  # clear the way for the next round
        assert again is not None and again.id == waiting.id
        assert await q.finish_job(waiting.id, "w", ok=True, finished_at=NOW)


async def test_concurrent_claims_never_share_a_job_or_a_conversation(store: Store) -> None:
    q = queue_of(store)
    conversations = [await new_conversation(store, f"c{n}") for n in range(4)]
    for conversation_id in conversations:
        await q.enqueue_job("compaction", reason="manual", conversation_id=conversation_id, requested_at=NOW)
        await q.enqueue_job("integrity", reason="maintenance", conversation_id=conversation_id, requested_at=NOW)
    claimed: list[Job] = []

    async def claim(n: int) -> None:
        job = await q.claim_job(f"w{n}", lease_ms=60_000, now_ms=0, max_attempts=3)
        if job is not None:
            claimed.append(job)

    async with anyio.create_task_group() as group:
        for n in range(12):
            group.start_soon(claim, n)
    # Every conversation's first job is taken, by one worker; its second waits for the first to end.
    assert sorted(j.conversation_id or 0 for j in claimed) == conversations
    assert len({j.id for j in claimed}) == 4 and all(j.kind == "compaction" for j in claimed)
    running = await q.list_jobs(state="running")
    assert sorted(j.id for j in running) == sorted(j.id for j in claimed)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["enqueue", "claim", "finish", "expire"]), st.integers(0, 3)), max_size=30))
async def test_no_two_live_jobs_of_one_conversation(store: Store, steps: list) -> None:  # type: ignore[type-arg]
    q = queue_of(store)
    # The store is shared by every example: each uses conversations of its own.
    ids = [await new_conversation(store, f"p{id(steps)}-{n}-{len(await store.list_conversations())}") for n in range(4)]
    now = 0
    running: dict[int, Job] = {}
    for action, n in steps:
        if action == "enqueue":
            await q.enqueue_job("compaction", reason="manual", conversation_id=ids[n], requested_at=NOW)
        elif action == "claim":
            job = await q.claim_job(f"w{now}", lease_ms=100, now_ms=now, max_attempts=5)
            if job is not None and job.conversation_id in ids:
                running[job.id] = job
        elif action == "finish" and running:
            job = running.pop(min(running))
            await q.finish_job(job.id, job.lease_owner or "", ok=True, finished_at=NOW)
        else:
            now += 150  # every lease expires
        live = [j for j in await q.list_jobs(state="running", limit=100_000) if (j.lease_expires_ms or 0) >= now]
        conversations = [j.conversation_id for j in live if j.conversation_id in ids]
        assert len(conversations) == len(set(conversations))
        queued = [(j.kind, j.conversation_id) for j in await q.list_jobs(state="queued", limit=100_000)]
        assert len(queued) == len(set(queued))


# ---------------------------------------------------------------- maintenance


async def fill(store: Store, conversation_id: int, count: int, start: int = 0) -> list[int]:
    messages: list[PreparedMessage] = [
        prep(Message.user(f"message {i} about topic{i}", event_key=f"k{conversation_id}-{i}"))
        for i in range(start, start + count)
    ]
    result = await store.append_messages(conversation_id, messages)
    return [m.id for m in result.stored]


async def summarise_first(store: Store, conversation_id: int, n: int, depth: int = 0) -> Summary:
    entries = (await store.get_context(conversation_id))[:n]
    summary = Summary(
        id=f"sum_{conversation_id}_{entries[0].ordinal}_{depth}",
        conversation_id=conversation_id,
        kind="leaf" if depth == 0 else "condensed",
        depth=depth,
        content="a summary",
        token_count=2,
        created_at=NOW,
    )
    await store.replace_with_summary(summary, entries)
    return summary


async def test_context_items_are_restored_in_order_and_dropped_only_when_dangling(store: Store) -> None:
    assert isinstance(store, MaintainableStore)
    cid = await new_conversation(store)
    ids = await fill(store, cid, 8)
    summary = await summarise_first(store, cid, 4)
    # The first raw message after the summary leaves the context (as damage would).
    items = await store.get_context_items(cid)
    assert [i.summary_id for i in items[:1]] == [summary.id]
    assert not await store.drop_context_item(cid, items[1].ordinal)  # it points at a message that exists
    assert not await store.restore_context_item(cid, ids[5])  # already in the context
    assert not await store.restore_context_item(cid, 999_999)
    assert not await store.restore_context_item(cid, "sum_missing")
    other = await new_conversation(store, "other")
    assert not await store.restore_context_item(other, ids[6])  # not that conversation's

    assert await store.search_index_problems() == []
    await store.rebuild_search_index()
    assert await store.search_index_problems() == []


async def test_restore_refuses_what_a_fork_shares_or_already_holds(store: Store) -> None:
    """Only a damaged store lacks one of its own messages (the repair is tested on one in test_integrity)."""
    assert isinstance(store, MaintainableStore)
    cid = await new_conversation(store)
    ids = await fill(store, cid, 6)
    await summarise_first(store, cid, 2)
    child = await new_conversation(store, "child")
    entries = await store.get_context(cid)
    await store.copy_context(child, [e for e in entries if e.message_id != ids[3]])
    assert not await store.restore_context_item(child, ids[3])  # the parent's message, not the child's
    own = await fill(store, child, 3, start=100)
    assert not await store.restore_context_item(child, own[1])  # already in the child's context
    assert [e.message_id for e in await store.get_context(child)][-3:] == own


# ---------------------------------------------------------------- retention


async def test_deleted_conversations_take_their_rows_and_ids_are_not_reused(store: Store) -> None:
    assert isinstance(store, RetentionStore)
    gone = await new_conversation(store, "gone")
    kept = await new_conversation(store, "kept")
    await fill(store, kept, 3)
    ids = await fill(store, gone, 6, start=10)
    await summarise_first(store, gone, 3)
    [candidate] = await store.prune_candidates([gone, 424242])
    assert candidate.messages == 6 and candidate.summaries == 1 and candidate.blocked_by == ()
    assert candidate.row_bytes > 0 and candidate.session_id == "gone"
    assert await store.delete_conversations([gone]) == 1
    assert await store.get_conversation(gone) is None
    assert await store.get_messages_by_id(ids) == []
    assert await store.delete_conversations([gone]) == 0
    newer = await fill(store, kept, 1, start=50)
    assert newer[0] > max(ids)
    assert await store.search_index_problems() == []  # type: ignore[attr-defined]


async def test_a_conversation_a_fork_shares_is_not_deleted_alone(store: Store) -> None:
    assert isinstance(store, RetentionStore)
    parent = await new_conversation(store, "parent")
    await fill(store, parent, 4)
    # Enough text that deleting it frees pages for VACUUM to give back.
    bulk = [prep(Message.user(f"bulk {i}: " + " ".join(f"w{i}x{j}" for j in range(400)))) for i in range(40)]
    await store.append_messages(parent, bulk)
    child = await new_conversation(store, "child")
    await store.copy_context(child, await store.get_context(parent))
    [candidate] = await store.prune_candidates([parent])
    assert candidate.blocked_by == (child,)
    with pytest.raises(InputError, match="still referred to"):
        await store.delete_conversations([parent])
    assert await store.get_conversation(parent) is not None
    assert await store.delete_conversations([parent, child]) == 2
    before, after = await store.vacuum()
    assert before > 0
    assert after > 0
    if store.backend == "sqlite":
        # SQLite rewrites the file.  PostgreSQL runs a plain VACUUM (no exclusive lock: agents keep
        # writing), which makes the space reusable but may add free-space and visibility maps.
        assert after < before


async def test_archived_before(store: Store) -> None:
    assert isinstance(store, RetentionStore)
    cid = await new_conversation(store, "old")
    await new_conversation(store, "active")
    await store.archive_conversation(cid)
    assert await store.archived_before("main", datetime(2100, 1, 1, tzinfo=UTC)) == [cid]
    assert await store.archived_before("main", datetime(2000, 1, 1, tzinfo=UTC)) == []
    assert await store.archived_before("other", datetime(2100, 1, 1, tzinfo=UTC)) == []
