"""Bootstrap: idempotent, incremental, all-or-nothing imports of transcript files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from lossless.bootstrap import FileImport, discover_transcripts
from lossless.engine import ContextEngine
from lossless.errors import InputError, TranscriptError

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
    first = await engine.import_paths([corpus])
    assert all(isinstance(r, FileImport) and r.status == "imported" for r in first), first
    imported = {Path(r.path) for r in first if isinstance(r, FileImport)}
    assert imported == {p.resolve() for p in corpus_transcripts()}  # every transcript, none skipped
    counts = await row_counts(engine)
    assert counts[1] > 5000
    second = await engine.import_paths([corpus])
    assert {r.status for r in second if isinstance(r, FileImport)} == {"unchanged"}
    assert await row_counts(engine) == counts
    # Even when every file is read whole again, the event keys keep every message single.
    third = await engine.import_paths([corpus], full=True)
    assert sum(r.stored for r in third if isinstance(r, FileImport)) == 0
    assert sum(r.duplicates for r in third if isinstance(r, FileImport)) == counts[1]
    assert await row_counts(engine) == counts


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


async def test_invalid_utf8_and_raw_nul_name_their_line(engine: ContextEngine, tmp_path: Path) -> None:
    good = [line.encode() for line in pi_lines(1)]  # a header and one message: the bad line is line 3
    for bad, problem in ((b'{"type":"message","x":"\xff\xfe"}', "not valid UTF-8"), (b'{"a":"\x00"}', "NUL byte")):
        path = tmp_path / "bad.jsonl"
        path.write_bytes(b"\n".join([*good, bad, good[1]]) + b"\n")
        with pytest.raises(TranscriptError, match=f":3: .*{problem}"):
            await engine.bootstrap(path)
    assert (await engine.stats()).messages == 0


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
