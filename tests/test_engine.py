"""The ContextEngine facade: ingest rules, conversations, isolation, concurrency."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from lossless import ContextEngine, InputError, Message, NotFoundError, ToolPart
from lossless.config import Config

pytestmark = pytest.mark.anyio


async def test_info() -> None:
    info = ContextEngine.info
    assert (info.id, info.owns_compaction) == ("lossless", True)
    assert info.version


async def test_ingest_and_read_back(engine: ContextEngine) -> None:
    first = await engine.ingest("s1", Message.user("hello"))
    assert first.conversation_id is not None and first.stored_count == 1
    batch = await engine.ingest_batch(
        "s1",
        [
            Message.from_parts("assistant", [ToolPart(call_id="c1", name="read", input={"path": "a.py"})]),
            Message.tool_result("c1", "print('hi')", name="read"),
            Message.assistant("Done."),
        ],
    )
    assert batch.conversation_id == first.conversation_id
    assert [m.seq for m in batch.stored] == [2, 3, 4]
    records = await engine.messages("s1")
    assert [m.role for m in records] == ["user", "assistant", "tool", "assistant"]
    assert [m.content for m in await engine.messages("s1", tail=2)] == ["print('hi')", "Done."]
    assert all(m.token_count > 0 for m in records)


async def test_event_keys_deduplicate_across_calls(engine: ContextEngine) -> None:
    await engine.ingest("s", Message.user("a", event_key="turn-1"))
    again = await engine.ingest("s", Message.user("a", event_key="turn-1"))
    assert (again.stored_count, again.duplicates) == (0, 1)
    assert len(await engine.messages("s")) == 1


async def test_heartbeats_are_skipped(tmp_path: Path) -> None:
    async with await ContextEngine.open(f"sqlite:///{tmp_path / 'h.db'}", prune_heartbeat_ok=True) as engine:
        poll = await engine.ingest("s", Message.user("heartbeat poll"), is_heartbeat=True)
        assert (poll.stored_count, poll.skipped, poll.skip_reason) == (0, 1, "heartbeat")
        ack = await engine.ingest_batch("s", [Message.assistant("HEARTBEAT_OK"), Message.user("real")])
        assert (ack.stored_count, ack.skipped) == (1, 1)
        assert [m.content for m in await engine.messages("s")] == ["real"]


async def test_ignored_stateless_and_disabled(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    async with await ContextEngine.open(
        url, ignore_session_patterns=["cron:*"], stateless_session_patterns=["view:**"]
    ) as engine:
        ignored = await engine.ingest("x", Message.user("a"), session_key="cron:nightly")
        assert ignored.skip_reason is not None and "ignore" in ignored.skip_reason
        stateless = await engine.ingest("y", Message.user("a"), session_key="view:a:b")
        assert stateless.skip_reason is not None and "stateless" in stateless.skip_reason
        assert (await engine.stats()).messages == 0
    async with await ContextEngine.open(url, enabled=False) as engine:
        off = await engine.ingest("z", Message.user("a"))
        assert off.skipped == 1 and "disabled" in (off.skip_reason or "")


async def test_new_session_under_a_key_archives_the_old_one(engine: ContextEngine) -> None:
    await engine.ingest("session-1", Message.user("a"), session_key="agent:main:chat")
    await engine.ingest("session-2", Message.user("b"), session_key="agent:main:chat")
    old = await engine.conversation("session-1")
    new = await engine.conversation("session-2")
    assert not old.active and new.active
    # Writing to the old session again re-activates nothing silently: it stays archived.
    await engine.ingest("session-1", Message.user("late"))
    assert len(await engine.messages("session-1")) == 2


async def test_conversations_are_scoped_to_the_agent(config: Config, tmp_path: Path) -> None:
    async with await ContextEngine.open(config=config) as alice:
        await alice.ingest("shared-name", Message.user("alice's secret"))
        alice_id = (await alice.conversation("shared-name")).id
    async with await ContextEngine.open(config=config.replace(agent_id="bob")) as bob:
        assert await bob.conversations() == []
        with pytest.raises(NotFoundError):
            await bob.conversation(alice_id)
        with pytest.raises(NotFoundError):
            await bob.messages("shared-name")
        await bob.ingest("shared-name", Message.user("bob's"))
        assert (await bob.conversation("shared-name")).id != alice_id


async def test_bad_input_is_refused_clearly(engine: ContextEngine) -> None:
    with pytest.raises(InputError, match="session_id must be a non-empty string"):
        await engine.ingest("", Message.user("x"))
    with pytest.raises(InputError, match=r"expected lossless\.Message"):
        await engine.ingest_batch("s", [{"role": "user"}])  # type: ignore[list-item]
    with pytest.raises(InputError, match="takes a list"):
        await engine.ingest_batch("s", Message.user("x"))  # type: ignore[arg-type]
    await engine.ingest("s", Message.user("x"))
    with pytest.raises(InputError, match="tail must be"):
        await engine.messages("s", tail=-1)
    with pytest.raises(NotFoundError, match="lcm conversations"):
        await engine.conversation("nope")
    assert (await engine.stats()).messages == 1


async def test_different_conversations_ingest_concurrently(engine: ContextEngine) -> None:
    async def chat(name: str) -> None:
        for i in range(25):
            await engine.ingest(name, Message.user(f"{name} {i}", event_key=f"{name}-{i}"))

    async with anyio.create_task_group() as tg:
        for n in range(6):
            tg.start_soon(chat, f"session-{n}")
    for n in range(6):
        assert [m.content for m in await engine.messages(f"session-{n}")] == [f"session-{n} {i}" for i in range(25)]


async def test_open_with_settings_and_conversation_lookup_by_id(tmp_path: Path) -> None:
    async with await ContextEngine.open(f"sqlite:///{tmp_path / 'o.db'}", fresh_tail_count=7) as engine:
        assert engine.config.fresh_tail_count == 7
        result = await engine.ingest("abc", Message.user("x"))
        assert result.conversation_id is not None
        assert (await engine.conversation(result.conversation_id)).session_id == "abc"
        assert (await engine.conversation(str(result.conversation_id))).session_id == "abc"


async def test_default_store_lives_in_the_user_data_directory(tmp_path: Path) -> None:
    async with await ContextEngine.open() as engine:
        await engine.ingest("s", Message.user("x"))
        assert engine.store.url == f"sqlite:///{tmp_path / 'home' / '.local' / 'share' / 'lossless' / 'lcm.db'}"
    assert (tmp_path / "home" / ".local" / "share" / "lossless" / "lcm.db").is_file()
