"""Bootstrap: idempotent, incremental, all-or-nothing imports of transcript files."""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from lossless import Message
from lossless.bootstrap import FileImport, discover_transcripts, import_transcript
from lossless.config import Config
from lossless.engine import ContextEngine
from lossless.errors import InputError, TranscriptError
from lossless.ingest import prepare_messages
from lossless.interception import write_batch
from lossless.ports import Store
from lossless.records import utcnow
from lossless.tokens import EstimatingCounter

from .conftest import FIXTURES, ROOT, corpus_transcripts

pytestmark = pytest.mark.anyio

SAMPLE = ROOT / "examples" / "sample-session.jsonl"


def pi_lines(count: int, start: int = 0) -> list[str]:
    """A pi v1 session, one JSON object per line (header first when start == 0)."""
    lines = []
    if start == 0:
        lines.append(json.dumps({"type": "session", "id": "pi-test", "timestamp": "2026-01-01T00:00:00Z"}))
    for i in range(start, start + count):
        role = "user" if i % 2 == 0 else "assistant"
        message = {"role": role, "content": [{"type": "text", "text": f"message number {i} 静默 ✓"}]}
        stamp = f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z"
        lines.append(json.dumps({"type": "message", "timestamp": stamp, "message": message}, ensure_ascii=False))
    return lines


async def row_counts(engine: ContextEngine) -> tuple[int, ...]:
    stats = await engine.stats()
    return (stats.conversations, stats.messages, stats.message_parts, stats.context_items)


async def test_corpus_imported_twice_stores_nothing_new(engine: ContextEngine, corpus: Path) -> None:
    """The whole corpus imported: every transcript, every Claude Code text stored (see
    :func:`_claude_code_text_is_stored`); imported again, nothing new, even when read whole."""
    first = await engine.import_paths([corpus])
    assert all(isinstance(r, FileImport) and r.status == "imported" for r in first), first
    imported = {Path(r.path) for r in first if isinstance(r, FileImport)}
    assert imported == {p.resolve() for p in corpus_transcripts()}  # every transcript, none skipped
    await _claude_code_text_is_stored(engine, {Path(r.path): r for r in first if isinstance(r, FileImport)})
    counts = await row_counts(engine)
    assert counts[1] > 5000
    second = await engine.import_paths([corpus])
    assert {r.status for r in second if isinstance(r, FileImport)} == {"unchanged"}
    assert await row_counts(engine) == counts
    # Even when every file is read whole again, the event keys keep every message single.
    third = await engine.import_paths([corpus], full=True)
    assert sum(r.stored for r in third if isinstance(r, FileImport)) == 0
    # (A sub-agent recorded both inline in its session and in its own file is read twice: its messages
    # are duplicates in both files, stored once.)
    assert sum(r.duplicates for r in third if isinstance(r, FileImport)) >= counts[1]
    assert await row_counts(engine) == counts


def _transcript_texts(path: Path) -> list[str]:
    """Every piece of conversation text in a Claude Code file, read straight from the JSON: text,
    thinking, string tool inputs and tool results, of the session and of sub-agents recorded inline."""
    out: list[str] = []

    def content(value: object) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, list):
            for block in value:
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                if kind in ("text", "thinking"):
                    out.append(str(block.get(kind, "")))
                elif kind == "tool_use":
                    out.extend(v for v in (block.get("input") or {}).values() if isinstance(v, str))
                elif kind == "tool_result":
                    content(block.get("content"))

    with path.open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            data = record.get("data") if isinstance(record.get("data"), dict) else {}
            if record.get("type") == "progress" and data.get("type") == "agent_progress":
                record = data.get("message") or {}
            if record.get("type") in ("user", "assistant") and isinstance(record.get("message"), dict):
                content(record["message"].get("content"))
    return [t.strip() for t in out if t.strip()]


def _strings(value: object, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)


async def _claude_code_text_is_stored(engine: ContextEngine, imports: dict[Path, FileImport]) -> None:
    """Lossless import: every text of every real Claude Code session (sub-agents recorded inline in
    ``progress`` records included) is in the store's Claude Code conversations, and every record not
    stored as a message is reported by type with its size.

    (Checked on the corpus import of the test above, which imports these files in the same order as
    one ``bootstrap`` each would, rather than by importing them a second time.)"""
    paths = [p for p in corpus_transcripts() if p.suffix == ".jsonl" and "pi-mono" not in str(p)]
    results = [imports[p.resolve()] for p in paths]
    pieces: list[str] = []
    for conversation in await engine.conversations(limit=10_000):
        if conversation.source != "claude-code":  # only what these files stored may account for them
            continue
        for message in await engine.messages(conversation.id):
            _strings(message.to_dict(), pieces)
        pieces += [
            (await engine.read_file(stored.id)).decode("utf-8", "replace")
            for stored in await engine.store.list_large_files(conversation.id)
        ]
    whole = {piece.strip() for piece in pieces}
    stored_text = "\n".join(pieces)
    for path, result in zip(paths, results, strict=True):
        texts = _transcript_texts(path)
        missing = [t for t in texts if t not in whole and t not in stored_text]
        assert texts and not missing, f"{path.name}: {len(missing)} of {len(texts)} texts not stored: {missing[:2]!r}"
        assert set(result.skipped_bytes) == set(result.skipped_records), path
        assert all(result.skipped_bytes[kind] > 0 for kind in result.skipped_records), path
        assert "progress" not in result.skipped_records and "progress:agent_progress" not in result.skipped_records
    inline = next(r for p, r in zip(paths, results, strict=True) if "f4" in p.parts)
    # The session whose Task sub-agents live only in agent_progress records: two sub-agent
    # conversations, hung off the session, hold the 248 messages.
    assert sum(inline.subagents.values()) == 248 and len(inline.subagents) == 2
    family = {c.session_id: c for c in await engine.conversations(limit=10_000)}
    for session_id in inline.subagents:
        assert family[session_id].parent_id == inline.conversation_id
        assert family[session_id].title  # titled by the prompt the sub-agent was given


async def test_untitled_sessions_get_their_first_prompt_and_last_activity(engine: ContextEngine, corpus: Path) -> None:
    """A transcript with no title record is titled by the first thing typed; its last activity is
    its newest message's time, not the time of the import."""
    path = corpus / "marot-spotter" / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
    result = await engine.bootstrap(path)
    [conversation] = [c for c in await engine.conversations() if c.id == result.conversation_id]
    assert conversation.title is not None and conversation.title.startswith("Work on bead spotter-dov.")
    assert len(conversation.title) <= 80
    last = (await engine.messages(conversation.id, tail=1))[0]
    assert conversation.updated_at == last.created_at
    assert conversation.updated_at < conversation.created_at  # written long before it was imported


async def test_a_bare_slash_command_does_not_title_a_session(engine: ContextEngine, corpus: Path) -> None:
    """This pi session opens with "/mode" typed alone: the title is the first prompt with a subject."""
    result = await engine.bootstrap(corpus / "badlogic-pi-mono" / "large-session.jsonl")
    [conversation] = [c for c in await engine.conversations() if c.id == result.conversation_id]
    assert (await engine.messages(conversation.id, limit=1))[0].content == "/mode"  # stored all the same
    assert conversation.title is not None
    assert conversation.title.startswith("read packages/coding-agent/docs/theme.md in full")


async def test_subagent_conversations_hang_off_their_session(engine: ContextEngine, corpus: Path) -> None:
    folder = corpus / "marot-spotter"
    await engine.import_paths([folder])
    conversations = {c.session_id: c for c in await engine.conversations()}
    main = conversations["4d5611e5-241a-462a-8d15-5122611a9569"]
    sub = conversations["4d5611e5-241a-462a-8d15-5122611a9569/agent-a2898e3"]
    assert sub.parent_id == main.id and main.parent_id is None
    assert main.source == "claude-code"


async def test_truncated_mid_line_then_completed_imports_exactly_once(engine: ContextEngine, tmp_path: Path) -> None:
    source = SAMPLE.read_bytes()
    once = tmp_path / "once.jsonl"
    once.write_bytes(source)
    reference = await engine.bootstrap(once, session_id="reference")
    growing = tmp_path / "growing.jsonl"
    # Cut inside lines (one of them inside a multi-byte character), then complete the file.
    cuts = sorted({len(source) // 7, len(source) // 3 + 1, len(source) // 2 + 3, len(source) - 5})
    for cut in cuts:
        growing.write_bytes(source[:cut])
        await engine.bootstrap(growing, session_id="growing")
    growing.write_bytes(source)
    last = await engine.bootstrap(growing, session_id="growing")
    assert last.status == "appended"
    copy = await engine.messages("growing")
    original = await engine.messages("reference")
    assert len(copy) == reference.stored == len(original)
    assert [m.event_key for m in copy] == [m.event_key for m in original]
    assert [m.content for m in copy] == [m.content for m in original]


async def test_cut_inside_a_multibyte_character_is_not_an_error(engine: ContextEngine, tmp_path: Path) -> None:
    lines = pi_lines(3)
    data = ("\n".join(lines) + "\n").encode()
    cut = data.rindex("✓".encode()) + 1  # in the middle of the 3-byte character
    path = tmp_path / "s.jsonl"
    path.write_bytes(data[:cut])
    assert (await engine.bootstrap(path)).stored == 2
    path.write_bytes(data)
    assert (await engine.bootstrap(path)).stored == 1


async def test_append_only_growth_reads_only_the_new_bytes(engine: ContextEngine, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(pi_lines(200)) + "\n")
    first = await engine.bootstrap(path)
    assert first.stored == 200
    # Overwrite the *start* of the file with garbage of the same length (far from the hashed tail),
    # then append.  A full read would hit the garbage; an incremental one never looks at it.
    data = bytearray(path.read_bytes())
    data[100:200] = b"x" * 100
    data += ("\n".join(pi_lines(5, start=200)) + "\n").encode()
    path.write_bytes(bytes(data))
    second = await engine.bootstrap(path)
    assert (second.status, second.stored, second.duplicates) == ("appended", 5, 0)
    # A change inside the hashed tail is noticed: the file is read whole (and here, found corrupt).
    data[-300:-290] = b"y" * 10
    data += b"\n"
    path.write_bytes(bytes(data))
    with pytest.raises(TranscriptError):
        await engine.bootstrap(path)


async def test_unchanged_file_is_not_read(engine: ContextEngine, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(pi_lines(10)) + "\n")
    await engine.bootstrap(path)
    stat = path.stat()
    # Same size and mtime, different bytes: nothing is read, so nothing changes.
    path.write_text("\n".join(pi_lines(10)).replace("message", "MESSAGE") + "\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    result = await engine.bootstrap(path)
    assert (result.status, result.stored) == ("unchanged", 0)


async def test_rewritten_file_is_read_whole_and_deduplicated(engine: ContextEngine, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(pi_lines(10)) + "\n")
    await engine.bootstrap(path)
    path.write_text("\n".join(pi_lines(4)) + "\n")  # truncated: offset now past the end
    result = await engine.bootstrap(path)
    assert (result.status, result.stored, result.duplicates) == ("imported", 0, 4)


@pytest.mark.parametrize(
    ("lines", "line_no", "problem"),
    [
        (['{"type": "message", oops}'], 3, "is not valid JSON"),
        (['{"type":"message","message":{"role":"robot","content":"x"}}'], 3, "unknown message role 'robot'"),
        (["[1, 2, 3]"], 3, "expected an object"),
    ],
)
async def test_corrupt_line_rolls_back_the_file_and_names_the_line(
    engine: ContextEngine, tmp_path: Path, lines: list[str], line_no: int, problem: str
) -> None:
    await engine.ingest("other", __import__("lossless").Message.user("stored before"))
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([*pi_lines(1), *lines, *pi_lines(2, start=1)[0:]]) + "\n")
    with pytest.raises(TranscriptError) as caught:
        await engine.bootstrap(path)
    assert caught.value.line == line_no and problem in str(caught.value)
    assert str(path) in str(caught.value)
    stats = await engine.stats()
    assert stats.messages == 1  # only the message stored before; nothing from the bad file
    assert [c.session_id for c in await engine.conversations()] == ["other"]


async def test_raw_nul_and_bytes_outside_strings_name_their_line(engine: ContextEngine, tmp_path: Path) -> None:
    good = [line.encode() for line in pi_lines(1)]  # a header and one message: the bad line is line 3
    for bad, problem in ((b'{"type":"message",\xff\xfe}', "not valid JSON"), (b'{"a":"\x00"}', "NUL byte")):
        path = tmp_path / "bad.jsonl"
        path.write_bytes(b"\n".join([*good, bad, good[1]]) + b"\n")
        with pytest.raises(TranscriptError, match=f":3: .*{problem}"):
            await engine.bootstrap(path)
    assert (await engine.stats()).messages == 0


async def test_invalid_utf8_inside_a_message_is_stored_with_its_bytes_recoverable(
    engine: ContextEngine, tmp_path: Path
) -> None:
    good = [line.encode() for line in pi_lines(1)]
    bad = b'{"type":"message","message":{"role":"user","content":"caf\xe9 \xff\xfe end"}}'
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b"\n".join([*good, bad, good[1]]) + b"\n")
    result = await engine.bootstrap(path)
    assert (result.stored, result.repaired) == (3, 1)  # the repeated good line is a message of its own
    stored = await engine.messages("pi-test")
    assert stored[1].content == "caf\ufffd \ufffd\ufffd end"
    original = await engine.restore_message(stored[1])
    assert original.content.encode("utf-8", "surrogateescape") == b"caf\xe9 \xff\xfe end"  # the exact bytes


async def test_escaped_nul_is_stored_verbatim(engine: ContextEngine, tmp_path: Path) -> None:
    path = tmp_path / "nul.jsonl"
    message = {"role": "user", "content": [{"type": "text", "text": "before\u0000after"}]}
    path.write_text(json.dumps({"type": "message", "timestamp": "2026-01-01T00:00:00Z", "message": message}) + "\n")
    await engine.bootstrap(path, session_id="nul")
    [stored] = await engine.messages("nul")
    assert stored.content == "before\x00after"


async def test_oversized_message_is_refused_with_file_and_line(tmp_path: Path) -> None:
    engine = await ContextEngine.open(f"sqlite:///{tmp_path / 'x.db'}", max_message_bytes=1 << 20)
    async with engine:
        path = tmp_path / "big.jsonl"
        big = {"type": "message", "message": {"role": "user", "content": "z" * (3 << 20)}}
        path.write_text("\n".join([pi_lines(0)[0], json.dumps(big)]) + "\n")
        with pytest.raises(
            TranscriptError, match=r"big\.jsonl:2: line is over 3 MiB, too long for the message size limit"
        ):
            await engine.bootstrap(path)


async def test_fifty_megabyte_message_with_default_limits(engine: ContextEngine, tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    with path.open("w") as handle:
        handle.write(pi_lines(1)[0] + "\n")
        handle.write('{"type":"message","message":{"role":"user","content":"' + "q" * (50 << 20) + '"}}\n')
    # Plain text over the large-file threshold is stored aside whatever its size (issue 18): nothing
    # is refused, the stored message is a short reference, and the 50 MB come back exactly.
    imported = await engine.bootstrap(path)
    assert imported.conversation_id is not None
    records = await engine.messages(imported.conversation_id)
    assert all(len(r.content) < 5000 for r in records)
    (stored,) = [f for f in await engine.files(imported.conversation_id) if f.byte_size == 50 << 20]
    assert await engine.read_file(stored.id) == b"q" * (50 << 20)


async def test_missing_paths_and_empty_folders(engine: ContextEngine, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        await engine.bootstrap(tmp_path / "nope.jsonl")
    with pytest.raises(InputError, match="does not exist"):
        discover_transcripts([tmp_path / "nope"])
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("hello")
    (empty / "data.json").write_text('{"hello": "world"}')
    with pytest.raises(InputError, match="holds no transcript"):
        discover_transcripts([empty])
    notes = empty / "notes.txt"
    with pytest.raises(InputError, match="not a transcript lossless recognises"):
        await engine.bootstrap(notes)


async def test_folder_import_reports_each_file(engine: ContextEngine, tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "good.jsonl").write_text("\n".join(pi_lines(3)) + "\n")
    (folder / "bad.jsonl").write_text("\n".join([*pi_lines(1), "{not json"]) + "\n")
    (folder / "ignored.txt").write_text("not a transcript")
    results = await engine.import_paths([folder])
    assert len(results) == 2
    errors = [r for r in results if isinstance(r, Exception)]
    good = [r for r in results if isinstance(r, FileImport)]
    assert len(errors) == 1 and isinstance(errors[0], TranscriptError)
    assert good[0].stored == 3
    with pytest.raises(TranscriptError):
        await engine.import_paths([folder], stop_on_error=True)


async def test_ignored_sessions_are_not_stored(tmp_path: Path) -> None:
    engine = await ContextEngine.open(f"sqlite:///{tmp_path / 'x.db'}", ignore_session_patterns=["pi-*"])
    async with engine:
        path = tmp_path / "s.jsonl"
        path.write_text("\n".join(pi_lines(3)) + "\n")
        result = await engine.bootstrap(path)
        assert result.status == "skipped" and "ignore_session_patterns" in (result.reason or "")
        assert (await engine.stats()).messages == 0


async def test_own_fixtures_import(engine: ContextEngine, tmp_path: Path) -> None:
    copy = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, copy, ignore=shutil.ignore_patterns("bad"))
    results = await engine.import_paths([copy])
    assert results and all(isinstance(r, FileImport) for r in results), results
    formats = {r.format for r in results if isinstance(r, FileImport)}
    assert formats == {"claude-code", "pi", "openclaw", "swe-agent", "openai-chat"}
    again = await engine.import_paths([copy], full=True)
    assert sum(r.stored for r in again if isinstance(r, FileImport)) == 0


async def test_a_reread_counts_the_tokens_of_the_new_entries_only(store: Store, tmp_path: Path) -> None:
    """A file read whole again is matched on its entries' keys before any entry is prepared: what the
    store holds costs no token count (nor a large-file scan); only the new entries are counted."""
    counted: list[str] = []

    class Counting(EstimatingCounter):
        def count(self, text: str) -> int:
            counted.append(text)
            return super().count(text)

    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(pi_lines(10)) + "\n")
    first = await import_transcript(store, path, config=Config(), counter=Counting())
    assert (first.stored, len(counted)) == (10, 10)
    counted.clear()
    path.write_text("\n".join(pi_lines(12)) + "\n")
    again = await import_transcript(store, path, config=Config(), counter=Counting(), full=True)
    assert (again.status, again.stored, again.duplicates) == ("imported", 2, 10)
    assert counted == ["message number 10 静默 ✓", "message number 11 静默 ✓"]
    assert first.conversation_id is not None
    stored = await store.get_messages(first.conversation_id)
    assert [m.token_count for m in stored] == [EstimatingCounter().count(m.content) for m in stored]
    assert [m.content for m in stored] == [f"message number {i} 静默 ✓" for i in range(12)]


async def test_entries_matched_to_live_messages_cost_no_token_count(store: Store, tmp_path: Path) -> None:
    """Entries the store holds from live ingest (no entry keys) are matched on role and content: prepared,
    as the match needs, but not counted; only the entries written are, and every stored count is right."""
    counted: list[str] = []

    class Counting(EstimatingCounter):
        def count(self, text: str) -> int:
            counted.append(text)
            return super().count(text)

    texts = [f"message number {i} 静默 ✓" for i in range(10)]
    conversation = await store.get_or_create_conversation(agent_id=Config().agent_id, session_id="pi-test")
    live, _ = prepare_messages(
        [Message("user" if i % 2 == 0 else "assistant", texts[i]) for i in (0, 1, 2, 3, 5, 6)],
        counter=EstimatingCounter(),
        now=utcnow(),
        max_message_bytes=Config().max_message_bytes,
    )
    await write_batch(store, conversation.id, live)
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(pi_lines(10)) + "\n")
    result = await import_transcript(store, path, config=Config(), counter=Counting())
    # 0-3, 5 and 6 are the live ones; 4 (older than the anchor, 6) is left out; 7-9 are new.
    assert (result.stored, result.duplicates, result.left_out) == (3, 6, 1)
    assert counted == texts[7:]
    stored = await store.get_messages(conversation.id)
    assert [m.content for m in stored] == [texts[i] for i in (0, 1, 2, 3, 5, 6, 7, 8, 9)]
    assert [m.token_count for m in stored] == [EstimatingCounter().count(m.content) for m in stored]


async def test_large_files_in_a_transcript_are_stored_aside_and_reimports_reuse_them(
    engine: ContextEngine, tmp_path: Path
) -> None:
    log = "2026-02-14T08:00:01Z INFO worker tick ok\n" * 20_000
    lines = pi_lines(2)
    text = f'Please look at this log:\n<file name="run.log">\n{log}\n</file>'
    message = {"role": "user", "content": [{"type": "text", "text": text}]}
    lines.append(json.dumps({"type": "message", "timestamp": "2026-01-01T01:00:00Z", "message": message}))
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    first = await engine.bootstrap(path)
    assert first.stored == 3
    [file] = await engine.files(first.session_id or "")
    assert (file.name, file.kind) == ("run.log", "log")
    assert await engine.read_file(file.id) == log.encode()
    records = await engine.messages(first.session_id or "")
    assert file.id in records[-1].content and len(records[-1].content) < 4000
    restored = await engine.restore_message(records[-1])
    assert restored.content == text
    again = await engine.bootstrap(path, full=True)
    assert (again.stored, again.duplicates) == (0, 3)
    assert [f.id for f in await engine.files(first.session_id or "")] == [file.id]


def transcript_messages(path: Path) -> list[Message]:
    """The messages of a transcript as the bootstrap reads them, without their entry keys (as a live host sends)."""
    from lossless.transcripts import Entry, ReadContext, detect_format, reader_for

    format_name = detect_format(path)
    assert format_name is not None
    with path.open("rb") as stream:
        events = list(reader_for(format_name).read(stream, ReadContext(str(path))))
    # The session's own messages: those of sub-agents recorded inline go to their own conversations.
    return [replace(e.message, event_key=None) for e in events if isinstance(e, Entry) and e.thread is None]


async def test_live_ingest_then_bootstrap_of_every_corpus_transcript_stores_each_message_once(
    engine: ContextEngine, corpus: Path
) -> None:
    """The host's lifecycle: turns stored live (no entry ids), then bootstrap() of the whole file."""
    rng = random.Random(20)
    transcripts = corpus_transcripts()
    assert transcripts
    for number, path in enumerate(transcripts):
        messages = transcript_messages(path)
        live = rng.randint(0, len(messages))
        session = f"live-{number}"
        for start in range(0, live, 40):
            await engine.ingest_batch(session, messages[start : min(live, start + 40)])
        result = await engine.bootstrap(path, session_id=session)
        stored = await engine.messages(session, limit=None) if messages else []
        assert len(stored) == len(messages), (path, live, result)
        assert [m.role for m in stored] == [m.role for m in messages], path
        for kept, sent in zip(stored, messages, strict=True):
            if kept.content != sent.content:  # a large file stored aside: put back, it is the same text
                assert (await engine.restore_message(kept)).content == sent.content, path
        own = result.stored - sum(result.subagents.values())
        assert (own, result.duplicates, result.left_out) == (len(messages) - live, live, 0)


async def test_bootstrap_imports_only_what_follows_the_anchor(engine: ContextEngine, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(pi_lines(10)) + "\n")
    lines = [json.loads(line)["message"]["content"][0]["text"] for line in pi_lines(10)[1:]]
    # The host stored messages 0-5 live, then crashed after writing 6-9 to its file but before storing them.
    for i in range(6):
        await engine.ingest("pi-test", Message("user" if i % 2 == 0 else "assistant", lines[i]))
    first = await engine.bootstrap(path)
    assert (first.stored, first.duplicates) == (4, 6)
    # Live again: 10 and 11 are stored before the file gets them; the file then catches up and goes on.
    for i in (10, 11):
        await engine.ingest("pi-test", Message("user" if i % 2 == 0 else "assistant", f"message number {i} 静默 ✓"))
    with path.open("a") as out:
        out.write("\n".join(pi_lines(4, start=10)) + "\n")
    second = await engine.bootstrap(path)
    assert (second.status, second.stored, second.duplicates) == ("appended", 2, 2)
    texts = [m.content for m in await engine.messages("pi-test")]
    assert texts == [f"message number {i} 静默 ✓" for i in range(14)]
    # Nothing new: an unchanged file is not read, a full read finds everything stored.
    assert (await engine.bootstrap(path)).status == "unchanged"
    again = await engine.bootstrap(path, full=True)
    assert (again.stored, again.duplicates) == (0, 14)


async def test_repeated_texts_keep_their_positions(engine: ContextEngine, tmp_path: Path) -> None:
    """The n-th "ok" of the file is the n-th "ok" of the store: a third "ok" in the file is new."""
    lines = [json.dumps({"type": "session", "id": "rep", "timestamp": "2026-01-01T00:00:00Z"})]
    lines += [
        json.dumps({"type": "message", "message": {"role": "user", "content": text}})
        for text in ("ok", "ok", "go on", "ok")
    ]
    path = tmp_path / "rep.jsonl"
    path.write_text("\n".join(lines) + "\n")
    await engine.ingest_batch("rep", [Message.user("ok"), Message.user("ok")])
    result = await engine.bootstrap(path)
    assert (result.stored, result.duplicates) == (2, 2)
    assert [m.content for m in await engine.messages("rep")] == ["ok", "ok", "go on", "ok"]


async def test_entries_older_than_the_anchor_that_the_store_lacks_are_counted_not_imported(
    engine: ContextEngine, tmp_path: Path
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(pi_lines(4)) + "\n")
    await engine.ingest("pi-test", Message.assistant("message number 1 静默 ✓"))
    result = await engine.bootstrap(path)
    assert (result.stored, result.duplicates, result.left_out) == (2, 1, 1)
    assert result.to_dict()["left_out"] == 1


async def test_live_messages_keyed_like_the_file_resolve_repeated_texts(engine: ContextEngine, tmp_path: Path) -> None:
    """A store-only "ok" (crash before the file write) is not taken for a later "ok" when keys are given."""
    path = tmp_path / "ok.jsonl"
    header = json.dumps({"type": "session", "id": "okay", "timestamp": "2026-01-01T00:00:00Z"})
    line = json.dumps({"type": "message", "message": {"role": "user", "content": "ok"}})

    async def write_and_key(count: int) -> list[Message]:
        with path.open("a") as out:
            out.write("".join(f'{line[:-1]}, "n": {i}}}\n' for i in range(count)))
        from lossless.transcripts import Entry, ReadContext, reader_for

        with path.open("rb") as stream:
            return [e.message for e in reader_for("pi").read(stream, ReadContext(str(path))) if isinstance(e, Entry)]

    path.write_text(header + "\n")
    first = await write_and_key(1)
    await engine.ingest("okay", first[0])  # written and stored, with the file's key
    await engine.ingest("okay", Message.user("ok", event_key="never-written"))  # stored, then the host crashed
    assert (await engine.bootstrap(path)).stored == 0
    path.write_text(header + "\n")
    both = await write_and_key(2)  # the next "ok" is written and stored with its key …
    await engine.ingest("okay", both[1])
    assert (await engine.bootstrap(path)).stored == 0
    path.write_text(header + "\n")
    await write_and_key(3)  # … and a third is written, then the host crashed before storing it
    result = await engine.bootstrap(path)
    assert result.stored == 1
    assert [m.content for m in await engine.messages("okay")] == ["ok"] * 4


async def test_identical_pi_lines_are_two_messages_and_reimports_store_nothing(
    engine: ContextEngine, tmp_path: Path
) -> None:
    """pi entries have no ids: their keys are positions, so byte-identical lines stay two messages."""
    header = json.dumps({"type": "session", "id": "twice", "timestamp": "2026-01-01T00:00:00Z"})
    same = json.dumps({"type": "message", "message": {"role": "user", "content": "ok"}})
    other = json.dumps({"type": "message", "message": {"role": "assistant", "content": "done"}})
    path = tmp_path / "twice.jsonl"
    path.write_text("\n".join([header, same, same, other]) + "\n")
    first = await engine.bootstrap(path)
    assert (first.stored, first.duplicates) == (3, 0)
    assert (await engine.bootstrap(path)).status == "unchanged"
    whole = await engine.bootstrap(path, full=True)
    assert (whole.stored, whole.duplicates) == (0, 3)
    # Appended: the same line once more is a third "ok", read from where the last import stopped.
    with path.open("a") as out:
        out.write(same + "\n")
    appended = await engine.bootstrap(path)
    assert (appended.status, appended.stored, appended.duplicates) == ("appended", 1, 0)
    again = await engine.bootstrap(path, full=True)
    assert (again.stored, again.duplicates) == (0, 4)
    assert [m.content for m in await engine.messages("twice")] == ["ok", "ok", "done", "ok"]


async def test_pi_file_imported_under_line_hash_keys_is_not_imported_again(
    engine: ContextEngine, tmp_path: Path
) -> None:
    """A store filled by a version that keyed pi entries by a hash of the line alone: a full re-read
    matches the stored messages on role and content, so nothing is stored twice."""
    import hashlib

    path = tmp_path / "old.jsonl"
    lines = pi_lines(6)
    path.write_text("\n".join(lines) + "\n")
    old = [
        Message(
            "user" if i % 2 == 0 else "assistant",
            f"message number {i} 静默 ✓",
            event_key="pi:" + hashlib.sha256(line.encode()).hexdigest()[:32],
        )
        for i, line in enumerate(lines[1:])
    ]
    await engine.ingest_batch("pi-test", old)
    result = await engine.bootstrap(path)
    assert (result.stored, result.duplicates) == (0, 6)
    assert len(await engine.messages("pi-test")) == 6
