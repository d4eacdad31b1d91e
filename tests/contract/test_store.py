"""The Store contract, written once and run against every backend (see ``store`` in conftest)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import anyio
import pytest

from lossless.errors import ConflictError, InputError, NotFoundError
from lossless.ports import PreparedMessage, Store
from lossless.records import (
    BootstrapState,
    CompactionEvent,
    CompactionPart,
    ContextEntry,
    FilePart,
    LargeFile,
    Message,
    ReasoningPart,
    Summary,
    TextPart,
    ToolPart,
    utcnow,
)

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def prep(message: Message, tokens: int = 3, when: datetime = T0) -> PreparedMessage:
    return PreparedMessage(message, tokens, message.created_at or when)


async def new_conversation(store: Store, session: str = "s1", agent: str = "main") -> int:
    conversation = await store.get_or_create_conversation(agent_id=agent, session_id=session)
    return conversation.id


async def test_conversation_is_created_once_and_completed(store: Store) -> None:
    first = await store.get_or_create_conversation(agent_id="main", session_id="abc", source="api")
    again = await store.get_or_create_conversation(agent_id="main", session_id="abc", title="Title", source="pi")
    assert again.id == first.id
    assert again.title == "Title"  # a missing title is filled in
    assert again.source == "api"  # an existing value is kept
    assert (await store.get_conversation(first.id)) == again
    other_agent = await store.get_or_create_conversation(agent_id="other", session_id="abc")
    assert other_agent.id != first.id


async def test_find_conversation_by_session_id_and_active_key(store: Store) -> None:
    old = await store.get_or_create_conversation(agent_id="main", session_id="s-old", session_key="agent:main:chat")
    new = await store.get_or_create_conversation(agent_id="main", session_id="s-new", session_key="agent:main:chat")
    by_key = await store.find_conversation(agent_id="main", session_key="agent:main:chat")
    assert by_key is not None and by_key.id == new.id
    archived = await store.get_conversation(old.id)
    assert archived is not None and not archived.active and archived.archived_at is not None
    assert (await store.find_conversation(agent_id="main", session_id="s-old")) == archived
    assert await store.find_conversation(agent_id="main", session_id="missing") is None
    with pytest.raises(InputError):
        await store.find_conversation(agent_id="main")


async def test_list_conversations_newest_first_and_scoped_by_agent(store: Store) -> None:
    """Order is by last activity: the newest message's time, else the conversation's own update."""
    a = await new_conversation(store, "a")
    b = await new_conversation(store, "b")
    await new_conversation(store, "c", agent="other")
    await store.append_messages(a, [prep(Message.user("bump"), when=utcnow())])
    listed = await store.list_conversations(agent_id="main")
    assert [c.id for c in listed] == [a, b]
    assert len(await store.list_conversations()) == 3
    assert [c.id for c in await store.list_conversations(agent_id="main", limit=1, offset=1)] == [b]


async def test_append_assigns_ids_seq_and_context_items_in_order(store: Store) -> None:
    conv = await new_conversation(store)
    result = await store.append_messages(
        conv, [prep(Message.user("one")), prep(Message.assistant("two")), prep(Message.user("three"))]
    )
    assert [m.seq for m in result.stored] == [1, 2, 3]
    assert [m.content for m in result.stored] == ["one", "two", "three"]
    more = await store.append_messages(conv, [prep(Message.user("four"))])
    assert more.stored[0].seq == 4
    assert more.stored[0].id > result.stored[-1].id
    items = await store.get_context_items(conv)
    assert [i.message_id for i in items] == [m.id for m in (*result.stored, *more.stored)]
    assert all(i.kind == "message" and i.summary_id is None for i in items)
    assert [i.ordinal for i in items] == sorted(i.ordinal for i in items)


async def test_event_keys_make_append_idempotent(store: Store) -> None:
    conv = await new_conversation(store)
    first = await store.append_messages(
        conv,
        [prep(Message.user("a", event_key="k1")), prep(Message.user("b", event_key="k2")), prep(Message.user("c"))],
    )
    assert len(first.stored) == 3 and first.duplicates == 0
    again = await store.append_messages(
        conv,
        [
            prep(Message.user("a", event_key="k1")),
            prep(Message.user("new", event_key="k3")),
            prep(Message.user("dup in batch", event_key="k3")),
            prep(Message.user("c")),  # no key: always stored
        ],
    )
    assert [m.content for m in again.stored] == ["new", "c"]
    assert again.duplicates == 2
    assert await store.count_messages(conv) == 5
    # Keys are per conversation.
    other = await new_conversation(store, "s2")
    assert len((await store.append_messages(other, [prep(Message.user("a", event_key="k1"))])).stored) == 1
    assert await store.last_event_key(conv) == "k3"


async def test_round_trip_of_every_part_type_is_exact(store: Store) -> None:
    conv = await new_conversation(store)
    parts = (
        TextPart("visible text", synthetic=True, metadata={"a": [1, 2]}),
        ReasoningPart("thinking…", signature="sig=="),
        ToolPart(call_id="c1", name="read", input={"path": "/x", "n": 3}, status="pending"),
        ToolPart(call_id="c1", output="file body", status="completed", title="Read /x"),
        FilePart(mime="image/png", name="p.png", url="data:image/png;base64,AAAA"),
        CompactionPart(summary="earlier…", auto=True, tokens_before=12345),
    )
    message = Message.from_parts("assistant", parts, event_key="e", metadata={"model": "m", "usage": {"in": 1}})
    stored = (await store.append_messages(conv, [prep(message)])).stored[0]
    [loaded] = await store.get_messages(conv)
    assert loaded == stored
    assert loaded.parts == parts
    assert loaded.to_message() == Message.from_parts(
        "assistant", parts, event_key="e", metadata={"model": "m", "usage": {"in": 1}}, created_at=T0
    )


async def test_single_part_text_is_not_stored_twice_but_reads_back(store: Store) -> None:
    conv = await new_conversation(store)
    text = "x" * 10_000
    tool = Message.tool_result("call-1", "result " * 1000)
    await store.append_messages(conv, [prep(Message.user(text)), prep(tool)])
    loaded = await store.get_messages(conv)
    assert loaded[0].parts == (TextPart(text),)
    assert loaded[1].parts == tool.parts
    assert loaded[1].content == tool.content


async def test_unicode_nul_and_surrogate_free_text_round_trip(store: Store) -> None:
    conv = await new_conversation(store)
    # U+0000 and U+E000 (the PostgreSQL backend's escape character) must round-trip on every backend.
    texts = [
        "静默模式 测试 🚀",
        "nul\x00inside",
        "tab\tnewline\n\r\n",
        "</summary><content>",
        "",
        "\ue000\ue002\x00\ue000\ue001",
    ]
    await store.append_messages(conv, [prep(Message.user(t)) for t in texts])
    assert [m.content for m in await store.get_messages(conv)] == texts


async def test_lookups_by_text_no_row_can_hold_are_input_errors(store: Store) -> None:
    """A lone surrogate in a looked-up id is a clear InputError on every backend, never a raw UnicodeEncodeError."""
    await new_conversation(store)
    with pytest.raises(InputError, match="surrogate"):
        await store.find_conversation(agent_id="main", session_id="s\ud800")
    with pytest.raises(InputError, match="surrogate"):
        await store.get_large_file("file_\udfff")
    with pytest.raises(InputError, match="surrogate"):
        await store.get_summaries(["sum_\ud800"])


async def test_get_messages_windows(store: Store) -> None:
    conv = await new_conversation(store)
    await store.append_messages(conv, [prep(Message.user(str(i))) for i in range(10)])
    assert [m.content for m in await store.get_messages(conv, after_seq=7)] == ["7", "8", "9"]  # seq starts at 1
    assert [m.content for m in await store.get_messages(conv, limit=2)] == ["0", "1"]
    assert [m.content for m in await store.get_messages(conv, limit=3, newest_first=True)] == ["9", "8", "7"]
    ids = [m.id for m in await store.get_messages(conv)]
    picked = await store.get_messages_by_id([ids[5], ids[1], 999_999, ids[5]])
    assert [m.content for m in picked] == ["5", "1"]


async def test_timestamps_are_utc_aware_and_preserved(store: Store) -> None:
    conv = await new_conversation(store)
    when = datetime(2025, 12, 31, 23, 59, 59, 123456, tzinfo=UTC) + timedelta(hours=0)
    await store.append_messages(conv, [prep(Message.user("x", created_at=when), when=when)])
    [loaded] = await store.get_messages(conv)
    assert loaded.created_at == when and loaded.created_at.tzinfo is not None


async def test_append_to_missing_conversation_fails_cleanly(store: Store) -> None:
    with pytest.raises(NotFoundError):
        await store.append_messages(424242, [prep(Message.user("x"))])
    assert (await store.stats()).messages == 0


async def test_atomic_rolls_back_everything_on_error(store: Store) -> None:
    conv = await new_conversation(store)
    await store.append_messages(conv, [prep(Message.user("kept"))])
    with pytest.raises(RuntimeError):
        async with store.atomic():
            await store.append_messages(conv, [prep(Message.user("lost 1"))])
            other = await store.get_or_create_conversation(agent_id="main", session_id="rolled-back")
            await store.append_messages(other.id, [prep(Message.user("lost 2"))])
            # Inside the block, the task sees its own writes.
            assert await store.count_messages(conv) == 2
            raise RuntimeError("boom")
    assert [m.content for m in await store.get_messages(conv)] == ["kept"]
    assert await store.find_conversation(agent_id="main", session_id="rolled-back") is None


async def test_atomic_commits_and_nests(store: Store) -> None:
    conv = await new_conversation(store)
    async with store.atomic():
        await store.append_messages(conv, [prep(Message.user("outer"))])
        with pytest.raises(ValueError, match="inner"):
            async with store.atomic():
                await store.append_messages(conv, [prep(Message.user("inner"))])
                raise ValueError("inner")
        await store.append_messages(conv, [prep(Message.user("after"))])
    assert [m.content for m in await store.get_messages(conv)] == ["outer", "after"]


async def test_failed_call_inside_atomic_leaves_no_partial_rows(store: Store) -> None:
    conv = await new_conversation(store)
    async with store.atomic():
        with pytest.raises(NotFoundError):
            await store.append_messages(999, [prep(Message.user("x"))])
        await store.append_messages(conv, [prep(Message.user("fine"))])
    assert (await store.stats()).messages == 1


async def test_concurrent_appends_keep_order_and_lose_nothing(store: Store) -> None:
    conv = await new_conversation(store)

    async def writer(n: int) -> None:
        for i in range(20):
            await store.append_messages(conv, [prep(Message.user(f"{n}-{i}", event_key=f"{n}-{i}"))])

    async with anyio.create_task_group() as tg:
        for n in range(8):
            tg.start_soon(writer, n)
    messages = await store.get_messages(conv)
    assert len(messages) == 160
    assert [m.seq for m in messages] == list(range(1, 161))
    for n in range(8):
        mine = [m.content for m in messages if m.content.startswith(f"{n}-")]
        assert mine == [f"{n}-{i}" for i in range(20)]


async def test_reads_do_not_wait_for_an_open_transaction(store: Store) -> None:
    conv = await new_conversation(store)
    await store.append_messages(conv, [prep(Message.user("committed"))])
    inside = anyio.Event()
    release = anyio.Event()

    async def hold() -> None:
        async with store.atomic():
            await store.append_messages(conv, [prep(Message.user("uncommitted"))])
            inside.set()
            await release.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(hold)
        await inside.wait()
        with anyio.fail_after(5):
            seen = [m.content for m in await store.get_messages(conv)]
        release.set()
    assert seen == ["committed"]
    assert await store.count_messages(conv) == 2


async def test_bootstrap_state_round_trip_and_agent_scope(store: Store) -> None:
    conv = await new_conversation(store)
    state = BootstrapState(conv, "/t/a.jsonl", 100, 123456789, 90, "abc", "key-9", utcnow())
    await store.put_bootstrap_state(state)
    assert await store.find_bootstrap_state("main", "/t/a.jsonl") == state
    assert await store.find_bootstrap_state("other", "/t/a.jsonl") is None
    moved = BootstrapState(conv, "/t/a.jsonl", 200, 5, 190, "def", None, utcnow())
    await store.put_bootstrap_state(moved)
    assert await store.find_bootstrap_state("main", "/t/a.jsonl") == moved
    refreshed = await store.get_conversation(conv)
    assert refreshed is not None


def large_file(conversation_id: int, ident: str, *, when: datetime = T0, **fields: object) -> LargeFile:
    values: dict[str, object] = {
        "name": "report.json",
        "mime": "application/json",
        "byte_size": 5_000_000,
        "content_hash": "ab" * 32,
        "exploration_summary": "JSON object, 3 keys",
        "origin": "file_block",
        "kind": "json",
    }
    values.update(fields)
    return LargeFile(
        id=ident,
        conversation_id=conversation_id,
        storage_uri=f"fs:{conversation_id}/{'ab' * 32}.txt",
        created_at=when,
        **values,  # type: ignore[arg-type]
    )


async def test_large_files_round_trip_and_list_by_conversation(store: Store) -> None:
    conv = await new_conversation(store)
    other = await new_conversation(store, "s2")
    first = large_file(conv, "file_00000000000000a1")
    second = large_file(
        conv,
        "file_00000000000000a2",
        when=T0 + timedelta(seconds=1),
        name="odd\x00name | ../../etc/passwd",
        mime=None,
        byte_size=None,
        content_hash=None,
        exploration_summary=None,
        origin=None,
        kind=None,
    )
    elsewhere = large_file(other, "file_00000000000000b1", origin="tool_output")
    assert await store.insert_large_files([second, first, elsewhere]) == 3
    assert await store.get_large_file(first.id) == first
    assert await store.get_large_file(second.id) == second
    assert await store.get_large_file("file_ffffffffffffffff") is None
    assert await store.list_large_files(conv) == [first, second]
    assert await store.list_large_files(conv, limit=1, offset=1) == [second]
    assert await store.list_large_files(other) == [elsewhere]
    assert (await store.stats()).large_files == 3


async def test_large_files_stored_together_list_in_insertion_order(store: Store) -> None:
    conv = await new_conversation(store)
    later, earlier = large_file(conv, "file_00000000000000ff"), large_file(conv, "file_0000000000000001")
    await store.insert_large_files([later, earlier])
    assert [f.id for f in await store.list_large_files(conv)] == [later.id, earlier.id]


async def test_large_file_insert_is_idempotent_and_keeps_the_first_row(store: Store) -> None:
    conv = await new_conversation(store)
    original = large_file(conv, "file_0000000000000001")
    assert await store.insert_large_files([original]) == 1
    replay = large_file(conv, "file_0000000000000001", exploration_summary="a different summary")
    assert await store.insert_large_files([replay, replay]) == 0
    assert await store.get_large_file(original.id) == original
    assert await store.insert_large_files([]) == 0


async def test_large_file_of_a_missing_conversation_is_refused(store: Store) -> None:
    with pytest.raises(NotFoundError, match="conversation"):
        await store.insert_large_files([large_file(424242, "file_0000000000000002")])
    assert (await store.stats()).large_files == 0


async def test_large_file_rows_roll_back_with_the_transaction(store: Store) -> None:
    conv = await new_conversation(store)
    with pytest.raises(RuntimeError):
        async with store.atomic():
            await store.insert_large_files([large_file(conv, "file_0000000000000003")])
            await store.append_messages(conv, [prep(Message.user("[LCM File: file_0000000000000003 | …]"))])
            assert await store.get_large_file("file_0000000000000003") is not None
            raise RuntimeError("crash before commit")
    assert await store.get_large_file("file_0000000000000003") is None
    assert await store.count_messages(conv) == 0


async def test_stats_and_sizes(store: Store) -> None:
    conv = await new_conversation(store)
    await store.append_messages(
        conv, [prep(Message.user("a"), tokens=5), prep(Message.tool_result("c", "b"), tokens=7)]
    )
    stats = await store.stats()
    assert (stats.conversations, stats.messages, stats.context_items) == (1, 2, 2)
    assert stats.message_parts <= 2  # stored part rows (a plain text message may need none)
    assert stats.message_tokens == 12
    assert stats.schema_version >= 1
    assert await store.conversation_sizes([conv, 999]) == {conv: (2, 12)}


async def test_closed_store_refuses_work(store: Store) -> None:
    await store.close()
    with pytest.raises(Exception, match="closed"):
        await store.get_messages(1)


# ---------------------------------------------------------------------- the summary DAG


def leaf_for(conv: int, sources: list[ContextEntry], sid: str = "sum_00000000000000aa", depth: int = 0) -> Summary:
    return Summary(
        id=sid,
        conversation_id=conv,
        kind="leaf" if depth == 0 else "condensed",
        depth=depth,
        content=f"summary {sid}",
        token_count=2,
        created_at=T0,
        earliest_at=T0,
        latest_at=T0 + timedelta(hours=1),
        source_token_count=sum(e.token_count for e in sources),
        file_ids=("file_0123456789abcdef",),
        provider="offline",
        model="m",
        level="aggressive",
        reason="normal: too long",
    )


async def test_context_entries_carry_tool_ids_and_sizes(store: Store) -> None:
    conv = await new_conversation(store)
    call = Message.from_parts("assistant", [ToolPart(call_id="c1", name="read", input={"p": 1})])
    result = Message.tool_result("c1", "body")
    both = Message.from_parts("assistant", [ToolPart(call_id="c2", name="x", input={}, output="done")])
    await store.append_messages(conv, [prep(Message.user("hi"), 5), prep(call, 7), prep(result, 9), prep(both, 3)])
    entries = await store.get_context(conv)
    assert [(e.kind, e.role, e.token_count) for e in entries] == [
        ("message", "user", 5),
        ("message", "assistant", 7),
        ("message", "tool", 9),
        ("message", "assistant", 3),
    ]
    assert [(e.tool_calls, e.tool_results) for e in entries] == [
        ((), ()),
        (("c1",), ()),
        ((), ("c1",)),
        (("c2",), ("c2",)),
    ]
    assert entries[0].created_at == T0


async def test_replace_with_summary_keeps_order_and_lineage(store: Store) -> None:
    conv = await new_conversation(store)
    stored = (await store.append_messages(conv, [prep(Message.user(str(i)), 10) for i in range(6)])).stored
    entries = await store.get_context(conv)
    leaf = leaf_for(conv, entries[1:4])
    await store.replace_with_summary(leaf, entries[1:4])
    after = await store.get_context(conv)
    assert [e.ref for e in after] == [stored[0].id, leaf.id, stored[4].id, stored[5].id]
    assert after[1].depth == 0 and after[1].token_count == 2
    assert [o.ordinal for o in after] == sorted(o.ordinal for o in after)
    assert await store.get_lineage(conv) == {leaf.id: tuple(m.id for m in stored[1:4])}
    assert await store.get_summaries([leaf.id, "sum_missing"]) == [leaf]
    assert await store.list_summaries(conv) == [leaf]
    # A condensed node over two leaves.
    second = leaf_for(conv, after[2:4], "sum_00000000000000bb")
    await store.replace_with_summary(second, after[2:4])
    leaves = [e for e in await store.get_context(conv) if e.kind == "summary"]
    node = leaf_for(conv, leaves, "sum_00000000000000cc", depth=1)
    await store.replace_with_summary(node, leaves)
    final = await store.get_context(conv)
    assert [e.ref for e in final] == [stored[0].id, node.id]
    assert (await store.get_lineage(conv))[node.id] == (leaf.id, second.id)
    stats = await store.stats()
    assert stats.summaries == 3 and stats.messages == 6


async def test_replace_with_summary_refuses_stale_or_invalid_sources(store: Store) -> None:
    conv = await new_conversation(store)
    await store.append_messages(conv, [prep(Message.user(str(i)), 10) for i in range(4)])
    entries = await store.get_context(conv)
    await store.replace_with_summary(leaf_for(conv, entries[0:2]), entries[0:2])
    with pytest.raises(ConflictError):  # the same sources again: they are gone now
        await store.replace_with_summary(leaf_for(conv, entries[0:2], "sum_00000000000000dd"), entries[0:2])
    with pytest.raises(ConflictError):  # not contiguous any more (a summary sits between)
        await store.replace_with_summary(leaf_for(conv, entries[1:3], "sum_00000000000000ee"), entries[1:3])
    current = await store.get_context(conv)
    with pytest.raises(InputError):
        await store.replace_with_summary(leaf_for(conv, [], "sum_00000000000000ff"), [])
    with pytest.raises(InputError):  # a leaf made of a summary
        await store.replace_with_summary(leaf_for(conv, current[0:1], "sum_0000000000000011"), current[0:1])
    with pytest.raises(InputError):  # a depth-1 node made of messages
        await store.replace_with_summary(leaf_for(conv, current[1:3], "sum_0000000000000012", depth=1), current[1:3])
    assert len(await store.list_summaries(conv)) == 1


def event_for(summary: Summary, sources: list[ContextEntry], **changes: object) -> CompactionEvent:
    tokens = sum(e.token_count for e in sources)
    event = CompactionEvent(
        conversation_id=summary.conversation_id,
        summary_id=summary.id,
        run_id="run0000000000001",
        trigger="threshold",
        mode="incremental",
        source_items=len(sources),
        tokens_before=100 + tokens,
        tokens_after=100 + summary.token_count,
        elapsed_ms=12,
        created_at=T0,
    )
    return replace(event, **changes)  # type: ignore[arg-type]


async def test_compaction_events_are_written_with_their_summary(store: Store) -> None:
    conv = await new_conversation(store)
    other = await new_conversation(store, "s2")
    await store.append_messages(conv, [prep(Message.user(str(i)), 10) for i in range(6)])
    entries = await store.get_context(conv)
    first = leaf_for(conv, entries[0:3], "sum_00000000000000e1")
    first_event = event_for(first, entries[0:3])
    empty = await store.summary_fingerprint(conv)
    assert empty[:2] == (0, 0)
    await store.replace_with_summary(first, entries[0:3], first_event)
    assert (await store.summary_fingerprint(conv))[0] == 1  # a new summary changes the fingerprint
    assert await store.summary_fingerprint(other) == empty
    entries = await store.get_context(conv)
    second = leaf_for(conv, entries[1:4], "sum_00000000000000e2")
    later = T0 + timedelta(seconds=1)
    await store.replace_with_summary(
        second, entries[1:4], event_for(second, entries[1:4], trigger="manual", mode="full", created_at=later)
    )
    leaves = [e for e in await store.get_context(conv) if e.kind == "summary"]
    node = leaf_for(conv, leaves, "sum_00000000000000e3", depth=1)
    await store.replace_with_summary(node, leaves)  # a caller may record no event
    events = await store.get_compaction_events(conv)
    assert [(e.summary_id, e.trigger, e.mode, e.source_items) for e in events] == [
        (first.id, "threshold", "incremental", 3),
        (second.id, "manual", "full", 3),
    ]
    assert events[0].event_id is not None and events[1].event_id is not None
    assert events[0].event_id < events[1].event_id
    assert [e.created_at for e in events] == [T0, later]
    assert events[0] == replace(first_event, event_id=events[0].event_id)  # every field round-trips
    assert await store.get_compaction_events(conv, limit=1) == events[1:]
    assert await store.get_compaction_events(conv, limit=0) == []
    assert await store.get_compaction_events(other) == []
    with pytest.raises(InputError):
        await store.get_compaction_events(conv, limit=-1)


async def test_a_compaction_event_that_does_not_match_writes_nothing(store: Store) -> None:
    conv = await new_conversation(store)
    await store.append_messages(conv, [prep(Message.user(str(i)), 10) for i in range(4)])
    entries = await store.get_context(conv)
    leaf = leaf_for(conv, entries[0:2])
    for wrong, message in (
        ({"summary_id": "sum_00000000000000f0"}, "not summary"),
        ({"conversation_id": conv + 1}, "not summary"),
        ({"source_items": 3}, "counts 3 source items"),
        ({"trigger": "cron"}, "trigger must be one of"),
        ({"mode": "sometimes"}, "mode must be"),
        ({"tokens_after": -1}, "cannot be negative"),
    ):
        with pytest.raises(InputError, match=message):
            await store.replace_with_summary(leaf, entries[0:2], event_for(leaf, entries[0:2], **wrong))
    stale = [replace(e, ordinal=e.ordinal + 100) for e in entries[0:2]]
    with pytest.raises(ConflictError):  # stale sources: neither the summary nor its event is written
        await store.replace_with_summary(leaf, stale, event_for(leaf, stale))
    assert await store.get_context(conv) == entries
    assert await store.list_summaries(conv) == []
    assert await store.get_compaction_events(conv) == []


async def test_a_failing_event_insert_rolls_the_whole_replacement_back(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The event is written in the summary's transaction: when the database refuses it, nothing stays."""
    import lossless.stores.postgres.core as pg_core
    import lossless.stores.sqlite.store as sqlite_store

    monkeypatch.setattr(sqlite_store, "check_event", lambda *_: None)
    monkeypatch.setattr(pg_core, "check_event", lambda *_: None)
    conv = await new_conversation(store)
    await store.append_messages(conv, [prep(Message.user(str(i)), 10) for i in range(4)])
    entries = await store.get_context(conv)
    leaf = leaf_for(conv, entries[0:2])
    with pytest.raises(Exception):  # noqa: B017, PT011 - the backend's own CHECK violation, whatever it is called
        await store.replace_with_summary(leaf, entries[0:2], event_for(leaf, entries[0:2], elapsed_ms=-5))
    assert await store.get_context(conv) == entries
    assert await store.list_summaries(conv) == []
    assert await store.get_lineage(conv) == {}
    await store.replace_with_summary(leaf, entries[0:2], event_for(leaf, entries[0:2]))  # and it can be retried
    assert [e.summary_id for e in await store.get_compaction_events(conv)] == [leaf.id]


# ------------------------------------------------------------------ retrieval (issue 5)


async def test_search_covers_indexed_and_pending_rows_and_filters(store: Store) -> None:
    from lossless.ports import SearchRequest

    conv = await new_conversation(store)
    other = await new_conversation(store, "s2")
    texts = ["alpha beta", "gamma deploy", "deployed again", "数据库连接失败"]
    stored = (
        await store.append_messages(
            conv, [prep(Message.user(t), when=T0 + timedelta(minutes=i)) for i, t in enumerate(texts)]
        )
    ).stored
    await store.append_messages(other, [prep(Message.user("deployed elsewhere"))])
    for settle in (False, True):
        if settle:
            await store.wait_indexed()
        words = await store.search(SearchRequest("messages", (conv,), words='"deployed"'))
        assert [r.ref for r in words] == [stored[2].id, stored[1].id]  # stemmed: deploy, deployed
        grams = await store.search(SearchRequest("messages", (conv,), trigrams='"数据库"'))
        assert stored[3].id in [r.ref for r in grams]
        everything = await store.search(SearchRequest("messages", (conv,), limit=2))
        assert [r.ref for r in everything] == [stored[3].id, stored[2].id]
        page2 = await store.search(SearchRequest("messages", (conv,), limit=2, below=everything[-1].key))
        assert [r.ref for r in page2] == [stored[1].id, stored[0].id]
        window = await store.search(
            SearchRequest("messages", (conv,), since=T0 + timedelta(minutes=1), before=T0 + timedelta(minutes=3))
        )
        assert [r.ref for r in window] == [stored[2].id, stored[1].id]
        ranked = await store.search(SearchRequest("messages", (conv, other), words='"deploy"', order="relevance"))
        assert {r.ref for r in ranked} == {stored[1].id, stored[2].id, stored[2].id + 2}
    assert await store.search(SearchRequest("messages", ())) == []


async def test_summary_messages_children_and_links(store: Store) -> None:
    conv = await new_conversation(store)
    stored = (await store.append_messages(conv, [prep(Message.user(str(i)), 10) for i in range(6)])).stored
    entries = await store.get_context(conv)
    first = leaf_for(conv, entries[0:3], "sum_00000000000000a1")
    await store.replace_with_summary(first, entries[0:3])
    entries = await store.get_context(conv)
    second = leaf_for(conv, entries[1:4], "sum_00000000000000a2")
    await store.replace_with_summary(second, entries[1:4])
    leaves = [e for e in await store.get_context(conv) if e.kind == "summary"]
    node = leaf_for(conv, leaves, "sum_00000000000000a3", depth=1)
    await store.replace_with_summary(node, leaves)
    assert await store.get_summary_messages([first.id, second.id, node.id]) == {
        first.id: tuple(m.id for m in stored[0:3]),
        second.id: tuple(m.id for m in stored[3:6]),
    }
    assert await store.get_summary_children([first.id, second.id, node.id]) == {
        first.id: (node.id,),
        second.id: (node.id,),
    }
    child = await store.get_or_create_conversation(agent_id="main", session_id="kid", parent_id=conv, session_key="k")
    await store.get_or_create_conversation(agent_id="other", session_id="x")
    assert await store.list_conversation_links("main") == [(conv, None, None), (child.id, conv, "k")]


async def test_grants_are_durable_charged_revoked_and_swept(store: Store) -> None:
    from lossless.records import Grant

    now = utcnow()
    grant = Grant("grant_1", "main", "sub:1", (1, 2), 100, now, now + timedelta(minutes=5))
    await store.create_grant(grant)
    with pytest.raises(InputError):
        await store.create_grant(grant)
    assert await store.get_grant("grant_1") == grant
    charged = await store.charge_grant("grant_1", 70, now)
    assert charged is not None and charged.tokens_used == 70 and charged.tokens_left == 30
    capped = await store.charge_grant("grant_1", 70, now)
    assert capped is not None and capped.tokens_used == 100
    assert await store.revoke_grant("grant_1", "completed", now)
    assert not await store.revoke_grant("grant_1", "completed", now)
    revoked = await store.get_grant("grant_1")
    assert revoked is not None and revoked.revoke_reason == "completed" and not revoked.usable(now)
    assert await store.charge_grant("grant_1", 1, now) is None
    old = Grant("grant_2", "main", "sub:2", (1,), 10, now, now + timedelta(seconds=1))
    await store.create_grant(old)
    assert await store.sweep_grants(now) == 0
    assert await store.sweep_grants(now + timedelta(seconds=2)) == 1
    swept = await store.get_grant("grant_2")
    assert swept is not None and swept.revoke_reason == "expired"
    assert await store.get_grant("missing") is None


async def test_a_read_snapshot_sees_one_state_while_writers_go_on(store: Store) -> None:
    from lossless.ports import MaintainableStore

    assert isinstance(store, MaintainableStore)
    conv = await new_conversation(store)
    await store.append_messages(conv, [prep(Message.user("one"))])
    seen: list[int] = []
    written = anyio.Event()

    async def writer() -> None:
        await store.append_messages(conv, [prep(Message.user("two")), prep(Message.user("three"))])
        written.set()

    async with store.read_snapshot():
        seen.append(len(await store.get_messages(conv)))
        async with anyio.create_task_group() as group:
            group.start_soon(writer)  # another task: it writes at once, never waiting for the snapshot
            with anyio.fail_after(10):
                await written.wait()
        seen.append(len(await store.get_messages(conv)))
        seen.append(len(await store.get_context_items(conv)))
    seen.append(len(await store.get_messages(conv)))
    assert seen == [1, 1, 1, 3]
