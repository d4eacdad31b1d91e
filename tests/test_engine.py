"""The ContextEngine facade: ingest rules, conversations, isolation, concurrency."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import anyio
import pytest

from lossless import ContextEngine, FilePart, InputError, Message, NotFoundError, StoreError, TextPart, ToolPart
from lossless.config import Config, load_config
from lossless.engine import AfterTurnResult
from lossless.ports import SummaryRequest, SummaryResult
from lossless.retrieval import FileView
from lossless.stores import open_store
from lossless.stores.blobs import FileBlobStore
from lossless.testing import FakeSummarizer

from .conftest import FIXTURES
from .test_compaction import covered, scripted

pytestmark = pytest.mark.anyio


def _blob_root(engine: ContextEngine) -> Path:
    assert isinstance(engine.blobs, FileBlobStore)
    return engine.blobs.root


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


# ---------------------------------------------------------------- large files


def _log(size: int) -> str:
    lines = (
        "2026-02-14T08:00:01.120Z INFO  api request served path=/v1/items status=200 in 12ms\n" * 30
        + "2026-02-14T08:00:02.500Z ERROR api upstream timeout host=db-2 after 5000ms\n"
    )
    return lines * (size // len(lines))


def _code(size: int) -> str:
    unit = (FIXTURES / "files" / "ratelimit.py").read_text()
    return unit * (size // len(unit))


def _json(size: int) -> str:
    item = '{"id": 1, "name": "widget", "price": 9.99, "tags": ["a", "b"]}'
    count = size // (len(item) + 2)
    return '{"version": 2, "items": [' + ", ".join([item] * count) + "]}"


def _strings(value: object) -> list[str]:
    """Every string inside ``value`` (the assembled messages: dicts, lists and text)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def _image(size: int) -> bytes:
    header = (
        b"\x89PNG\r\n\x1a\n" + (13).to_bytes(4, "big") + b"IHDR" + (4000).to_bytes(4, "big") * 2 + b"\x08\x06\0\0\0"
    )
    return header + bytes(range(256)) * (size // 256)


async def test_a_message_of_four_large_files_is_stored_small_and_recovered_exactly(engine: ContextEngine) -> None:
    code, data, log, image = _code(200_000), _json(5_000_000), _log(50_000_000), _image(10_000_000)
    text = (
        "Here is everything:\n"
        f'<file name="src/app.py" mime="text/x-python">\n{code}\n</file>\n'
        f"<file name='data.json'>\n{data}\n</file>\n"
        f'<file mime="text/plain" name="server.log">\n{log}\n</file>\n'
        "Thoughts?"
    )
    url = "data:image/png;base64," + base64.b64encode(image).decode()
    original = Message.from_parts(
        "user", [TextPart(text), FilePart(mime="image/png", name="photo.png", url=url)], event_key="turn-1"
    )
    assert len(text) + len(url) > engine.config.max_message_bytes  # only interception lets it in

    result = await engine.ingest("s", original)
    [stored] = result.stored
    assert len(stored.content) < 8000 and stored.token_count < 2000
    assert stored.content.startswith("Here is everything:\n[LCM File: file_") and "Thoughts?" in stored.content
    files = await engine.files("s")
    assert sorted((f.name or "", f.origin or "", f.kind or "") for f in files) == [
        ("data.json", "file_block", "json"),
        ("photo.png", "data_url", "image"),
        ("server.log", "file_block", "log"),
        ("src/app.py", "file_block", "python"),
    ]
    by_name = {f.name: f for f in files}
    for name, content in (("src/app.py", code), ("data.json", data), ("server.log", log)):
        assert await engine.read_file(by_name[name].id) == content.encode()
        assert by_name[name].id in stored.content
    assert await engine.read_file(by_name["photo.png"].id) == image
    assert "4,000×4,000 pixels" in (by_name["photo.png"].exploration_summary or "")

    described = await engine.describe_file(by_name["server.log"].id, start_line=31, end_line=32)
    assert described.page.text == log.splitlines(keepends=True)[30] + log.splitlines(keepends=True)[31]
    assert described.page.total_lines == log.count("\n") and described.page.next_start_line == 33
    assert "Level mentions: INFO" in (described.file.exploration_summary or "")
    first_page = await engine.describe_file(by_name["data.json"].id)
    assert first_page.page.truncated and first_page.page.partial  # one 5 MB line, cut at the default cap
    assert (await engine.describe_file(by_name["photo.png"].id)).page.binary

    [record] = await engine.messages("s")
    assert await engine.restore_message(record) == Message.from_parts(
        "user",
        [TextPart(text), FilePart(mime="image/png", name="photo.png", url=url)],
        event_key="turn-1",
        created_at=record.created_at,
    )
    again = await engine.ingest("s", original)  # a replay: same ids, nothing new
    assert (again.stored_count, again.duplicates) == (0, 1)
    assert len(await engine.files("s")) == 4

    # The assembled context holds the references and exploration summaries, never the bodies.
    assembled = await engine.assemble("s", token_budget=100_000)
    sent = "\n".join(_strings(assembled.messages))
    assert len(sent) < 8000 and assembled.estimated_tokens < 2000
    for f in files:
        assert f"[LCM File: {f.id} |" in sent
        assert (f.exploration_summary or "").splitlines()[0] in sent
    for body in (code, data, log):
        middle = len(body) // 2
        assert body[middle : middle + 200] not in sent
    assert base64.b64encode(image[4096:8192]).decode()[:200] not in sent and "base64," not in sent


async def test_the_same_file_pasted_twice_is_stored_once(engine: ContextEngine, config: Config) -> None:
    code = _code(150_000)
    first = await engine.ingest("s", Message.user(f'<file name="a.py">\n{code}\n</file>'))
    second = await engine.ingest("s", Message.user(f'again:\n<file name="a.py">\n{code}\n</file>'))
    renamed = await engine.ingest("s", Message.user(f'<file name="b.py">\n{code}\n</file>'))
    files = await engine.files("s")
    assert len(files) == 2 and {f.name for f in files} == {"a.py", "b.py"}
    assert files[0].id in first.stored[0].content and files[0].id in second.stored[0].content
    assert files[1].id in renamed.stored[0].content
    assert files[0].storage_uri == files[1].storage_uri  # two ids, one blob
    folder = _blob_root(engine) / str(first.conversation_id)
    assert [p.name for p in folder.iterdir()] == [f"{files[0].content_hash}.txt"]


async def test_user_supplied_names_never_reach_the_file_system(engine: ContextEngine, config: Config) -> None:
    body = _log(200_000)
    for name in ("../../etc/passwd", "CON", "nul\x00byte", "/abs/path", "..\\..\\win.ini"):
        await engine.ingest("s", Message.user(f'<file name="{name}">\n{body}{name}\n</file>'))
    stored = sorted(p.relative_to(_blob_root(engine)) for p in _blob_root(engine).rglob("*"))
    conversation = (await engine.conversation("s")).id
    assert all(
        str(p) == str(conversation) or re.fullmatch(rf"{conversation}/[0-9a-f]{{64}}\.txt", str(p)) for p in stored
    )
    assert len(stored) == 6
    names = [f.name for f in await engine.files("s")]
    assert "nul\ufffdbyte" in names and "../../etc/passwd" in names


async def test_bad_blocks_lose_no_text(engine: ContextEngine) -> None:
    body = _code(120_000)
    texts = [
        f'<file name="unclosed.py">\n{body}',
        f'<file name="outer"><file name="inner.py">\n{body}\n</file> and more',
        f"<file name='say \"hi\".py'>\n{body}\n</file>",
        f'<file name="dir/sub\\x.py" mime="text/x-python">\n{body}\n</file></file>',
    ]
    for i, text in enumerate(texts):
        message = Message.user(f"intro {i}\n{text}\noutro", event_key=f"k{i}")
        [record] = (await engine.ingest("bad", message)).stored
        assert await engine.restore_message(record) == Message.user(
            f"intro {i}\n{text}\noutro", event_key=f"k{i}", created_at=record.created_at
        )
    records = await engine.messages("bad")
    # Unclosed: not a file block, but plain text over the threshold — stored aside whole (issue 18).
    assert "| pasted text |" in records[0].content
    assert all(len(r.content) < 5000 for r in records)


async def test_the_size_limit_applies_to_what_remains(tmp_path: Path) -> None:
    config = Config(database_url=f"sqlite:///{tmp_path / 'l.db'}", data_dir=tmp_path, max_message_bytes=100_000)
    async with await ContextEngine.open(config=config) as engine:
        body = _log(300_000)
        ok = await engine.ingest("s", Message.user(f'<file name="big.log">\n{body}\n</file>'))
        assert ok.stored_count == 1
        # Each of these parts is under the large-file threshold, so they stay; together they are over the limit.
        under = [TextPart(f"{i} {_log(40_000)}") for i in range(4)]
        with pytest.raises(InputError, match="max_message_bytes"):
            await engine.ingest(
                "s", Message.from_parts("user", [TextPart(f'<file name="b.log">\n{body}\n</file>'), *under])
            )
        assert len(await engine.files("s")) == 1  # refused batches stored no file …
        assert len(list((tmp_path / "l.db-files").rglob("*.txt"))) == 1  # … and no blob


async def test_large_tool_outputs_are_stored_aside(engine: ContextEngine) -> None:
    output = _log(400_000)
    result = await engine.ingest("t", Message.tool_result("call-9", output, name="bash"))
    [record] = result.stored
    [file] = await engine.files("t")
    assert (file.name, file.origin, file.kind) == ("bash output", "tool_output", "log")
    assert record.content == record.parts[0].output  # type: ignore[union-attr]
    assert (await engine.restore_message(record)).parts[0] == ToolPart(
        call_id="call-9", name="bash", output=output, status="completed"
    )


async def test_files_are_scoped_to_the_agent(config: Config) -> None:
    async with await ContextEngine.open(config=config) as alice:
        await alice.ingest("secret", Message.user(f'<file name="s.log">\n{_log(200_000)}\n</file>'))
        [file] = await alice.files("secret")
    async with await ContextEngine.open(config=config.replace(agent_id="bob")) as bob:
        for call in (bob.file, bob.read_file, bob.describe_file):
            with pytest.raises(NotFoundError, match="lcm files"):
                await call(file.id)
        with pytest.raises(NotFoundError):
            await bob.files("secret")
    async with await ContextEngine.open(config=config) as alice:
        with pytest.raises(NotFoundError, match="no file 'file_0000000000000000'"):
            await alice.file("file_0000000000000000")
        with pytest.raises(InputError, match="start_line"):
            await alice.describe_file(file.id, start_line=0)


async def test_a_damaged_blob_is_reported(engine: ContextEngine, config: Config) -> None:
    await engine.ingest("d", Message.user(f'<file name="x.log">\n{_log(200_000)}\n</file>'))
    [file] = await engine.files("d")
    path = _blob_root(engine) / file.storage_uri.removeprefix("fs:")
    path.write_bytes(b"tampered")
    with pytest.raises(StoreError, match="SHA-256"):
        await engine.read_file(file.id)
    path.unlink()
    with pytest.raises(StoreError, match="missing"):
        await engine.read_file(file.id)


# ---------------------------------------------------------------------- the turn lifecycle


async def _open(tmp_path: Path, summarizer: FakeSummarizer, **settings: object) -> ContextEngine:
    base: dict[str, object] = {
        "fresh_tail_count": 4,
        "leaf_chunk_tokens": 400,
        "leaf_target_tokens": 100,
        "condensed_target_tokens": 100,
        "leaf_min_fanout": 2,
        "condensed_min_fanout": 2,
        "summary_max_attempts": 1,
    }
    base.update(settings)
    config = Config(database_url=f"sqlite:///{tmp_path / 'life.db'}", data_dir=tmp_path / "data", **base)  # type: ignore[arg-type]
    store = await open_store(config.resolved_database_url, config)
    return ContextEngine(store, config, summarizer=summarizer)


def _turn(i: int, words: int = 30) -> list[Message]:
    return [Message.user(" ".join(f"q{i}_{j}" for j in range(words))), Message.assistant(f"answer {i}")]


async def test_no_summarizer_call_below_the_thresholds(tmp_path: Path) -> None:
    fake = FakeSummarizer()
    engine = await _open(tmp_path, fake, fresh_tail_count=64, leaf_chunk_tokens=20_000)
    try:
        for i in range(40):
            result = await engine.after_turn("quiet", _turn(i), token_budget=200_000)
            assert result.error is None and result.compaction is None
        assert fake.calls == []
        out = await engine.assemble("quiet", token_budget=200_000)
        assert len(out.messages) == 80 and out.system_prompt_addition is None
    finally:
        await engine.dispose()


async def test_a_leaf_pass_runs_once_raw_history_outside_the_tail_reaches_the_chunk(tmp_path: Path) -> None:
    fake = FakeSummarizer()
    engine = await _open(tmp_path, fake)
    try:
        results = [await engine.after_turn("leafy", _turn(i), token_budget=1_000_000) for i in range(12)]
        first = next(i for i, r in enumerate(results) if r.compaction and r.compaction.compacted)
        assert first > 0, "the first turns are all under leaf_chunk_tokens"
        assert all(r.error is None for r in results)
        assert fake.calls and all(c.kind in ("leaf", "condensed") for c in fake.calls)
        out = await engine.assemble("leafy", token_budget=1_000_000)
        assert out.summaries_included >= 1 and out.system_prompt_addition is not None
        assert out.messages[-1] == {"role": "assistant", "content": "answer 11"}
        events = await engine.compaction_events("leafy")
        assert events and {e.trigger for e in events} == {"threshold"}  # after_turn asked, not a person
        assert {e.mode for e in events} == {"incremental"}
    finally:
        await engine.dispose()


async def test_over_the_context_threshold_a_full_compaction_brings_it_under(tmp_path: Path) -> None:
    fake = FakeSummarizer()
    engine = await _open(tmp_path, fake, leaf_chunk_tokens=100_000)  # no leaf trigger: only the threshold
    try:
        conversation = None
        for i in range(30):
            result = await engine.after_turn("big", _turn(i, 60), token_budget=3000)
            conversation = result.ingest.conversation_id
            assert result.error is None
            assert result.context_tokens <= 3000 * 0.75 or result.compaction is not None
        assert conversation is not None and fake.calls
        entries = await engine.store.get_context(conversation)
        assert sum(e.token_count for e in entries) <= 3000 * 0.75
        out = await engine.assemble("big", token_budget=3000)
        assert out.estimated_tokens <= 3000
    finally:
        await engine.dispose()


async def test_after_turn_never_raises(tmp_path: Path) -> None:
    engine = await _open(tmp_path, FakeSummarizer())
    try:
        bad = await engine.after_turn("", _turn(0), token_budget=1000)
        assert bad.error is not None and "session_id" in bad.error

        async def broken(*args: object, **kwargs: object) -> None:
            raise RuntimeError("disk on fire")

        engine.compactor.compact = broken  # type: ignore[method-assign]
        engine.compactor.needs_leaf_pass = lambda entries, *_: True  # type: ignore[method-assign]
        result = await engine.after_turn("s", _turn(1), token_budget=1000)
        assert result.error == "compaction failed: disk on fire"
        assert len(result.ingest.stored) == 2  # the turn was stored all the same
        assert len(await engine.messages("s")) == 2
    finally:
        await engine.dispose()


class _Gate:
    """A summarizer that waits until released, then fails: a provider stuck in the middle of a call."""

    provider = "gate"
    model = None

    def __init__(self) -> None:
        self.entered = anyio.Event()
        self.release = anyio.Event()

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.entered.set()
        await self.release.wait()
        raise RuntimeError("the model went away")


async def test_a_stuck_summarizer_never_blocks_ingest(tmp_path: Path) -> None:
    """While after_turn's compaction waits on a summarizer, other turns are stored (same session and others);
    the compaction then ends in a truncation summary that says why, with its event recorded."""
    gate = _Gate()
    engine = await _open(tmp_path, gate, summary_timeout_ms=60_000)  # type: ignore[arg-type]
    try:
        for i in range(6):  # under the leaf trigger
            await engine.ingest_batch("h", _turn(i))
        engine.compactor.needs_leaf_pass = lambda entries, *_: True  # type: ignore[method-assign]
        results: list[AfterTurnResult] = []

        async def turn() -> None:
            results.append(await engine.after_turn("h", _turn(6), token_budget=1_000_000))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(turn)
                await gate.entered.wait()  # the turn is stored; its compaction is inside the summarizer
                for i in range(7, 10):
                    assert len((await engine.ingest_batch("h", _turn(i))).stored) == 2
                    assert len((await engine.ingest_batch("other", _turn(i))).stored) == 2
                assert results == []  # all stored while the compaction was still waiting
                gate.release.set()
        (result,) = results
        assert result.error is None and len(result.ingest.stored) == 2
        assert result.compaction is not None and result.compaction.summaries
        leaf = result.compaction.summaries[0]
        assert leaf.level == "fallback" and leaf.reason is not None and "the model went away" in leaf.reason
        assert len(await engine.messages("h")) == 20
        events = await engine.compaction_events("h")
        assert [e.summary_id for e in events] == [s.id for s in result.compaction.summaries]
        assert (await engine.check_integrity()).ok
    finally:
        await engine.dispose()


async def test_autocompact_disabled_never_compacts(tmp_path: Path) -> None:
    fake = FakeSummarizer()
    engine = await _open(tmp_path, fake, autocompact_disabled=True)
    try:
        for i in range(20):
            await engine.after_turn("manual", _turn(i, 60), token_budget=1000)
        assert fake.calls == []
        forced = await engine.compact("manual", force=True)
        assert forced.compacted and fake.calls
    finally:
        await engine.dispose()


async def test_assemble_passes_host_messages_through_when_it_cannot_help(tmp_path: Path) -> None:
    engine = await _open(tmp_path, FakeSummarizer())
    host = [Message.user("hello"), Message.assistant("hi there")]
    try:
        unknown = await engine.assemble("never-seen", token_budget=100, messages=host)
        assert unknown.messages == ({"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"})
        assert unknown.system_prompt_addition is None
    finally:
        await engine.dispose()
    engine = await _open(tmp_path, FakeSummarizer(), enabled=False)
    try:
        await engine.after_turn("s", _turn(0), token_budget=1000)
        disabled = await engine.assemble("s", token_budget=100, messages=host, output="anthropic")
        assert disabled.messages[0] == {"role": "user", "content": [{"type": "text", "text": "hello"}]}
        assert await engine.conversations() == []
        # The host's own messages are held to the budget too: the newest goes as an excerpt.
        huge = [Message.user("word " * 50_000), Message.assistant("an answer " * 40_000)]
        passed = await engine.assemble("s", token_budget=2_000, messages=huge)
        assert passed.estimated_tokens <= 2_000 and not passed.over_budget
        assert passed.messages[-1]["role"] == "assistant" and "left out here" in passed.messages[-1]["content"]
    finally:
        await engine.dispose()


async def test_assemble_refuses_bad_input_clearly(engine: ContextEngine) -> None:
    await engine.ingest("s", Message.user("x"))
    for budget in (0, -5, 1.5, "100", None, True):
        with pytest.raises(InputError, match="token_budget"):
            await engine.assemble("s", token_budget=budget)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="output"):
        await engine.assemble("s", token_budget=100, output="xml")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="session_id"):
        await engine.assemble("", token_budget=100)


async def test_max_assembly_token_budget_caps_what_the_host_asks_for(tmp_path: Path) -> None:
    engine = await _open(tmp_path, FakeSummarizer(), max_assembly_token_budget=300, fresh_tail_count=1)
    try:
        for i in range(10):
            await engine.ingest_batch("capped", _turn(i))
        out = await engine.assemble("capped", token_budget=100_000)
        assert out.estimated_tokens <= 300
    finally:
        await engine.dispose()


# ---------------------------------------------------------------------- sub-agents


async def test_an_isolated_subagent_starts_empty_and_is_archived_when_it_ends(engine: ContextEngine) -> None:
    await engine.ingest_batch("parent", _turn(0))
    handle = await engine.prepare_subagent_spawn("parent", "child")
    parent = await engine.conversation("parent")
    assert handle.mode == "isolated" and handle.conversation.parent_id == parent.id
    assert await engine.store.get_context(handle.conversation.id) == []
    await engine.ingest("child", Message.user("sub-task"))
    await engine.on_subagent_ended("child")
    child = await engine.conversation(handle.conversation.id)
    assert child.archived_at is not None
    assert [m.content for m in await engine.messages(handle.conversation.id)] == ["sub-task"]
    with pytest.raises(NotFoundError):
        await engine.on_subagent_ended("nobody")


async def test_a_forked_subagent_shares_the_newest_parent_context_within_its_cap(tmp_path: Path) -> None:
    engine = await _open(tmp_path, FakeSummarizer(), bootstrap_max_tokens=200)
    try:
        for i in range(10):
            await engine.ingest_batch("parent", _turn(i))
        await engine.compact("parent", force=True)
        handle = await engine.prepare_subagent_spawn("parent", "fork", mode="fork")
        parent_items = await engine.store.get_context((await engine.conversation("parent")).id)
        child_items = await engine.store.get_context(handle.conversation.id)
        assert child_items, "a fork starts with context"
        assert sum(e.token_count for e in child_items) <= 200
        assert [e.ref for e in child_items] == [e.ref for e in parent_items[-len(child_items) :]]
        out = await engine.assemble("fork", token_budget=10_000)
        assert out.included == tuple(e.ref for e in child_items)
    finally:
        await engine.dispose()


async def test_a_failed_spawn_rolls_back_and_the_id_can_be_used_again(engine: ContextEngine) -> None:
    await engine.ingest("parent", Message.user("x"))
    handle = await engine.prepare_subagent_spawn("parent", "child", mode="fork")
    with pytest.raises(InputError, match="already exists"):
        await engine.prepare_subagent_spawn("parent", "child")
    await handle.rollback()
    assert await engine.store.find_conversation(agent_id=engine.config.agent_id, session_id="child") is None
    again = await engine.prepare_subagent_spawn("parent", "child")
    assert again.conversation.id != handle.conversation.id
    with pytest.raises(InputError, match="mode"):
        await engine.prepare_subagent_spawn("parent", "other", mode="clone")  # type: ignore[arg-type]


async def test_restarting_a_session_keeps_everything_and_the_store_stays_sound(tmp_path: Path) -> None:
    engine = await _open(tmp_path, FakeSummarizer(), fresh_tail_count=4)
    try:
        for i in range(6):
            await engine.ingest_batch("talk", _turn(i))
        await engine.compact("talk", force=True)
        before = await engine.store.get_context((await engine.conversation("talk")).id)
        dropped = await engine.restart_session("talk", "talk~1", carry_context=True, drop_newest=1)
        assert [m.id for m in dropped] == [before[-1].message_id]  # the newest raw message left the context
        after = await engine.store.get_context((await engine.conversation("talk~1")).id)
        assert [e.ref for e in after] == [e.ref for e in before[:-1]]
        new = await engine.conversation("talk~1")
        old = await engine.conversation("talk")
        assert new.parent_id == old.id and old.archived_at is not None
        cleared = await engine.restart_session("talk~1", "talk~2")
        assert cleared == [] and await engine.store.get_context((await engine.conversation("talk~2")).id) == []
        await engine.ingest("talk~2", Message.user("fresh start"))
        assert len(await engine.messages("talk")) == 12  # nothing removed anywhere
        report = await engine.check_integrity()
        assert report.problems == (), report.problems
        with pytest.raises(InputError, match="already exists"):
            await engine.restart_session("talk~2", "talk")
        with pytest.raises(InputError, match="drop_newest"):
            await engine.restart_session("talk~2", "talk~3", drop_newest=-1)
    finally:
        await engine.dispose()


async def test_concurrent_turns_of_one_conversation_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    """Many after_turn calls of one session at once (each may compact): every message is stored once and
    the context still expands to exactly the stored messages, in order."""
    engine = await _open(tmp_path, FakeSummarizer(), fresh_tail_count=2, leaf_chunk_tokens=300)
    try:

        async def turn(i: int) -> None:
            result = await engine.after_turn("busy", _turn(i, 40), token_budget=2000)
            assert result.error is None

        async with anyio.create_task_group() as group:
            for i in range(24):
                group.start_soon(turn, i)
        conversation = await engine.conversation("busy")
        stored = await engine.messages("busy")
        assert len(stored) == 48 and len({m.content for m in stored}) == 48
        assert await covered(engine.store, conversation.id) == [m.id for m in stored]
        assert await engine.store.get_lineage(conversation.id), "the turns crossed the thresholds: compacted"
    finally:
        await engine.dispose()


async def test_a_file_id_in_a_depth_two_summary_describes_the_original_bytes(config: Config) -> None:
    """Round trip: ingest a large file → compact → condense to depth ≥ 2 → describe returns it byte for byte."""
    from lossless.large_files import find_file_ids

    def keeps_file_refs(request: object) -> str:  # a summarizer told to keep file references
        text: str = request.text  # type: ignore[attr-defined]
        return " ".join(text.split()[:12] + find_file_ids(text))

    settings = {
        "fresh_tail_count": 4,
        "leaf_chunk_tokens": 600,
        "leaf_target_tokens": 200,
        "condensed_target_tokens": 200,
        "leaf_min_fanout": 4,
        "condensed_min_fanout": 3,
        "condensed_min_fanout_hard": 2,
        "large_file_token_threshold": 1000,
    }
    store = await open_store(config.resolved_database_url, config)
    engine = ContextEngine(
        store,
        config.replace(**settings),
        summarizer=scripted(keeps_file_refs),  # type: ignore[arg-type]
    )
    try:
        content = "".join(f"{n:05d} résumé\tline with trailing spaces   \r\n" for n in range(2000)) + "no newline"
        chat = [
            Message("user" if i % 2 == 0 else "assistant", f"turn {i}: " + " ".join(f"w{i}_{k}" for k in range(40)))
            for i in range(120)
        ]
        chat[3] = Message.user(f'Please keep this:\n<file name="notes.txt" mime="text/plain">\n{content}\n</file>\n')
        await engine.ingest_batch("s", chat)
        [stored] = await engine.files("s")
        for _ in range(5):
            await engine.compact("s", force=True)
        summaries, _ = await engine.summaries("s")
        deep = [s for s in summaries if s.depth >= 2 and stored.id in s.file_ids]
        assert deep, [(s.depth, s.file_ids) for s in summaries]
        file_id = deep[0].file_ids[0]
        assert file_id == stored.id
        view = await engine.describe(file_id, max_bytes=512 * 1024)
        assert isinstance(view, FileView) and view.page.text is not None and not view.page.truncated
        assert view.page.text.encode() == content.encode()
        described = await engine.describe_file(file_id, max_bytes=512 * 1024)
        assert described.page.text == content
        assert await engine.read_file(file_id) == content.encode()
    finally:
        await engine.dispose()


async def test_a_lone_surrogate_in_one_message_stores_the_whole_turn_losslessly(engine: ContextEngine) -> None:
    turn = [Message.user("first"), Message.assistant("cut emoji \ud83d here"), Message.user("third")]
    result = await engine.after_turn("bad-text", turn, token_budget=100_000)
    assert result.error is None and result.ingest.stored_count == 3 and result.ingest.repaired == 1
    stored = await engine.messages("bad-text")
    assert [m.content for m in stored] == ["first", "cut emoji \ufffd here", "third"]
    assert (await engine.restore_message(stored[1])) == Message.assistant(
        "cut emoji \ud83d here", created_at=stored[1].created_at
    )
    found = await engine.grep("cut emoji", conversation="bad-text")
    assert found.hits  # searchable as stored


async def test_a_spawn_with_a_ttl_gives_the_child_a_read_grant_that_ends_with_it(engine: ContextEngine) -> None:
    from datetime import timedelta

    await engine.ingest("parent", Message.user("the parent's history"))
    handle = await engine.prepare_subagent_spawn(
        "parent", "child", child_session_key="agent:main:sub:1", ttl=timedelta(minutes=5)
    )
    assert handle.grant is not None and handle.grant.grantee == "agent:main:sub:1"
    parent = await engine.conversation("parent")
    assert handle.grant.conversation_ids == (parent.id,)
    assert timedelta(minutes=4) < handle.grant.expires_at - handle.grant.created_at <= timedelta(minutes=5)
    assert (await engine.expansion_grant(handle.grant.id)).revoked_at is None
    await engine.on_subagent_ended("child")
    ended = await engine.expansion_grant(handle.grant.id)
    assert ended.revoked_at is not None and ended.revoke_reason == "completed"
    failed = await engine.prepare_subagent_spawn("parent", "child-2", ttl=timedelta(seconds=30))
    assert failed.grant is not None
    await failed.rollback()
    assert (await engine.expansion_grant(failed.grant.id)).revoke_reason == "error"
    assert (await engine.prepare_subagent_spawn("parent", "child-3")).grant is None  # no ttl, no grant
    with pytest.raises(InputError, match="ttl"):
        await engine.prepare_subagent_spawn("parent", "child-4", ttl=timedelta(days=3))


async def test_memories_of_a_turn_go_to_the_agent_its_session_key_names(config: Config) -> None:
    from lossless.engine import open_memory

    settings = config.replace(memory_auto_extract=True, memory_embedder="hash")
    async with await ContextEngine.open(config=settings) as engine:
        said = [Message.user("I prefer green tea in the morning before work.")]
        await engine.after_turn("s-ops", said, token_budget=100_000, session_key="agent:ops:discord:channel:7")
        await engine.after_turn("s-plain", [Message.user("I prefer black coffee after lunch.")], token_budget=100_000)
    async with await open_memory(settings, system=True) as session:
        listed = await session.service.list()
        scopes = {m.scope for _, m in listed}
        assert "agent:ops" in scopes and f"agent:{settings.agent_id}" in scopes, listed
    # An engine whose agent_id is configured keeps every memory in its own scope: no key can move them.
    configured = load_config(
        {"database_url": settings.database_url, "data_dir": str(settings.data_dir), "agent_id": "main"},
        env={},
    ).replace(memory_auto_extract=True, memory_embedder="hash")
    async with await ContextEngine.open(config=configured) as engine:
        await engine.after_turn(
            "s-ops-2", [Message.user("I prefer oolong tea at night.")], token_budget=100_000, session_key="agent:ops:x"
        )
    async with await open_memory(settings, system=True) as session:
        oolong = [m for _, m in await session.service.list() if "oolong" in m.content]
        assert oolong and {m.scope for m in oolong} == {"agent:main"}


async def test_open_closes_the_store_when_a_setting_is_refused(tmp_path: Path) -> None:
    """A setting the engine refuses after the store opened: the error, and no index thread left running."""
    import threading

    from lossless.errors import ConfigError

    with pytest.raises(ConfigError, match="needs a model"):
        await ContextEngine.open(f"sqlite:///{tmp_path / 'refused.db'}", summary_provider="openai")
    assert not [t.name for t in threading.enumerate() if t.name.endswith("refused.db")]
