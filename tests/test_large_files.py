"""Finding large payloads, the references that replace them, exact restoration, and paging by lines."""

from __future__ import annotations

import base64

import pytest

from lossless.errors import InputError
from lossless.large_files import (
    MAX_PAGE_BYTES,
    RECORD_KEY,
    FileRef,
    Payload,
    file_id_for,
    file_ids_in,
    file_scope,
    find_file_ids,
    find_payloads,
    format_reference,
    page_lines,
    referenced_file_ids,
    restore,
    rewrite,
)
from lossless.records import FilePart, Message, TextPart, ToolPart
from lossless.tokens import EstimatingCounter

COUNTER = EstimatingCounter()
THRESHOLD = 100
BODY = "".join(f"row {i}: the quick brown fox jumps over the lazy dog\n" for i in range(60))  # > 100 tokens
SMALL = "just a few words"


def find(message: Message) -> tuple[Payload, ...]:
    return find_payloads(message, threshold=THRESHOLD, counter=COUNTER)


def intercept(message: Message, scope: str = "scope") -> tuple[Message, dict[str, bytes], tuple[Payload, ...]]:
    payloads = find(message)
    refs = [
        FileRef(file_id_for(scope, p.content_hash, p.name, p.mime), p.name, p.mime or "text/plain", len(p.data), "S")
        for p in payloads
    ]
    blobs = {ref.id: p.data for p, ref in zip(payloads, refs, strict=True)}
    return rewrite(message, payloads, refs), blobs, payloads


def round_trip(message: Message) -> tuple[Message, tuple[Payload, ...]]:
    rewritten, blobs, payloads = intercept(message)
    assert restore(rewritten, blobs.__getitem__) == message
    return rewritten, payloads


# ---------------------------------------------------------------- <file> blocks


@pytest.mark.parametrize(
    ("tag", "name", "mime"),
    [
        ('<file name="paper.pdf" mime="application/pdf">', "paper.pdf", "application/pdf"),
        ("<file mime='text/csv' name='data.csv'>", "data.csv", "text/csv"),
        ('<file name="notes.md">', "notes.md", None),
        ("<file name=report.txt mime=text/plain >", "report.txt", "text/plain"),
        ('<file\n  name="multi line.txt"\n  mime="TEXT/Plain">', "multi line.txt", "text/plain"),
        ('<file NAME="upper.txt" extra flag>', "upper.txt", None),
        ('<file name="it\'s.txt">', "it's.txt", None),
        ("<file name='say \"hi\".txt'>", 'say "hi".txt', None),
        ('<file name="esc \\"q\\".txt">', 'esc "q".txt', None),
        ('<file name="a&amp;b &quot;c&quot;.txt">', 'a&b "c".txt', None),
        ('<file name="a>b.txt">', "a>b.txt", None),
        ("<file>", None, None),
    ],
)
def test_file_blocks_with_any_attribute_style(tag: str, name: str | None, mime: str | None) -> None:
    message = Message.user(f"Please review:\n{tag}\n{BODY}\n</file>\nThanks.")
    rewritten, payloads = round_trip(message)
    [payload] = payloads
    assert (payload.name, payload.mime, payload.origin) == (name, mime, "file_block")
    assert payload.data == BODY.encode()  # one newline after the tag belongs to the tag
    assert BODY not in rewritten.content
    assert rewritten.content.startswith("Please review:\n[LCM File: file_")
    assert rewritten.content.endswith("\nThanks.")


def test_small_blocks_and_plain_messages_pass_through_untouched() -> None:
    message = Message.user(f'<file name="tiny.txt">{SMALL}</file> and text')
    assert find(message) == ()
    assert intercept(message)[0] is message
    (pasted,) = find(Message.user(BODY * 3))  # big plain text, no file block: stored aside whole (issue 18)
    assert (pasted.name, pasted.start, pasted.end) == ("pasted text", 0, len(BODY * 3))


def test_several_files_are_handled_independently() -> None:
    other = BODY.replace("fox", "cat")
    message = Message.user(
        f'<file name="a.txt">{BODY}</file> small: <file name="s.txt">{SMALL}</file> <file name="b.txt">{other}</file>'
    )
    rewritten, payloads = round_trip(message)
    assert [p.name for p in payloads] == ["a.txt", "b.txt"]
    assert f'<file name="s.txt">{SMALL}</file>' in rewritten.content
    assert len(file_ids_in(rewritten.content)) == 2
    assert file_ids_in(rewritten.content) == referenced_file_ids(rewritten)


@pytest.mark.parametrize(
    "text",
    [
        f'<file name="unclosed.txt">\n{BODY}',
        f"{BODY}</file> stray close",
        f'<file name="outer.txt">\nintro <file name="inner.txt">{BODY}</file> outro\n</file>',
        f'<file name="outer.txt"> unclosed outer <file name="inner.txt">{BODY}</file> tail',
        f'<file name="x" mime="text/plain"/>{BODY}',
        f'<file name="no end of tag {BODY}',
        f'<file name="q>{BODY}</file>',
        f"<file name='../../etc/passwd'>{BODY}</file>",
        f'<file name="C:\\Windows\\CON">{BODY}</file>',
        f'<file name="nul\x00byte.txt">{BODY}</file>',
        f'<file name="a" mime="b" name="second wins?">{BODY}</file></file></file>',
        f'<file name="{"x" * 5000}">{BODY}</file>',
        f"<filename>{BODY}</filename> <file-x>{BODY}</file-x>",
        f'<file name="crlf.txt">\r\n{BODY}\r\n</file>',
        f'<file name="data-url.txt">data:image/png;base64,{"QUJD" * 200}</file>',
    ],
)
def test_bad_or_odd_input_loses_no_text(text: str) -> None:
    round_trip(Message.user(f"before {text} after"))


def test_nesting_intercepts_the_outer_block_and_unclosed_outer_the_inner() -> None:
    closed = Message.user(f'<file name="outer.txt">x <file name="inner.txt">{BODY}</file> y</file>')
    [payload] = find(closed)
    assert payload.name == "outer.txt" and b'<file name="inner.txt">' in payload.data
    unclosed = Message.user(f'<file name="outer.txt">x <file name="inner.txt">{BODY}</file> y')
    [inner] = find(unclosed)
    assert inner.name == "inner.txt"


def test_names_are_shown_sanitised_but_kept_exactly_in_the_record() -> None:
    message = Message.user(f'<file name="../../etc/passwd\x00 | x]y">{BODY}</file>')
    rewritten, payloads = round_trip(message)
    assert payloads[0].name == "../../etc/passwd\ufffd \u00a6 x)y"
    head = rewritten.content.split("\n", 1)[0]
    assert head.count("|") == 3 and "\x00" not in head


def test_lone_surrogates_are_left_for_the_ingest_check() -> None:
    assert find(Message.user(f'<file name="x">{BODY}\udc80</file>')) == ()


def test_a_huge_number_of_tags_is_handled_in_linear_time() -> None:
    message = Message.user("<file " * 200_000 + '<file name="a' + "\n" * 10 + "</file>" * 50_000)
    # No block parses; the 1.5 MB of text is stored aside whole, as pasted text.
    assert [(p.name, p.start, p.end) for p in find(message)] == [("pasted text", 0, len(message.content))]


# ---------------------------------------------------------------- tool outputs and data URLs


def test_large_tool_output_is_intercepted_whole_and_the_rendered_content_follows() -> None:
    message = Message.tool_result("call-1", BODY * 2, name="bash")
    rewritten, [payload] = round_trip(message)
    assert (payload.origin, payload.name) == ("tool_output", "bash output")
    [part] = rewritten.parts
    assert isinstance(part, ToolPart) and part.output is not None and part.output.startswith("[LCM File: ")
    assert rewritten.content == part.output  # still stored once (content == output)


def test_tool_output_with_a_large_block_keeps_its_other_text() -> None:
    message = Message.tool_result("c", f"cat says:\n<file name='x.log'>\n{BODY}</file>\nexit 0", name="cat")
    rewritten, [payload] = round_trip(message)
    assert payload.origin == "file_block"
    assert rewritten.content.startswith("cat says:\n[LCM File:") and rewritten.content.endswith("exit 0")


def test_tool_call_and_result_in_one_part_and_a_custom_content() -> None:
    part = ToolPart(call_id="c", name="read", input={"path": "a.py"}, output=BODY * 2, status="completed")
    rendered = Message.from_parts("assistant", [part])
    round_trip(rendered)
    custom = Message("assistant", f"I ran it and got:\n{BODY * 2}\n(twice: {BODY * 2})", (part,))
    rewritten, payloads = round_trip(custom)
    assert len({p.content_hash for p in payloads}) == 1
    assert BODY not in rewritten.content


def test_data_urls_in_file_parts_are_stored_decoded() -> None:
    image = bytes(range(256)) * 40
    url = "data:image/png;base64," + base64.b64encode(image).decode()
    message = Message.from_parts("user", [TextPart("look"), FilePart(mime="image/png", name="shot.png", url=url)])
    rewritten, [payload] = round_trip(message)
    assert (payload.data, payload.encoding, payload.origin, payload.name) == (image, "b64", "data_url", "shot.png")
    assert rewritten.content == message.content  # the rendered content never held the URL
    file_part = rewritten.parts[1]
    assert isinstance(file_part, FilePart) and file_part.url is not None and file_part.url.startswith("[LCM File: ")


def test_non_canonical_base64_and_plain_data_urls_are_kept_as_text() -> None:
    for url in (
        "data:image/png;base64," + "QUJD" * 300 + "\n",
        "data:text/plain," + "hello%20world " * 200,
        "data:;base64," + "QUJD" * 300 + "=",
    ):
        round_trip(Message.from_parts("user", [FilePart(url=url)]))


def test_inline_data_urls_in_text() -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(3000)).decode()
    message = Message.user(f"![chart](data:image/png;base64,{png}) and the rest")
    rewritten, [payload] = round_trip(message)
    assert payload.mime == "image/png" and payload.encoding == "b64"
    assert rewritten.content.endswith(") and the rest")


# ---------------------------------------------------------------- ids, references, records


def test_ids_are_deterministic_and_scoped() -> None:
    digest = "ab" * 32
    scope = file_scope("main", "session-1")
    assert file_id_for(scope, digest, "a.txt", None) == file_id_for(scope, digest, "a.txt", None)
    assert file_id_for(scope, digest, "a.txt", None) != file_id_for(file_scope("main", "other"), digest, "a.txt", None)
    assert file_id_for(scope, digest, "a.txt", None) != file_id_for(scope, digest, "b.txt", None)
    assert len(file_id_for(scope, digest, None, None)) == len("file_") + 16


def test_the_same_payload_twice_in_a_message_shares_an_id() -> None:
    message = Message.user(f'<file name="a.txt">{BODY}</file> again: <file name="a.txt">{BODY}</file>')
    rewritten, blobs, _ = intercept(message)
    assert len(blobs) == 1 and len(referenced_file_ids(rewritten)) == 1
    assert len(file_ids_in(rewritten.content)) == 1


def test_reference_format() -> None:
    ref = FileRef("file_0123456789abcdef", "paper.pdf", "application/pdf", 42150, "  A paper.\n")
    assert format_reference(ref) == (
        "[LCM File: file_0123456789abcdef | paper.pdf | application/pdf | 42,150 bytes]\n\n"
        "Exploration Summary:\nA paper."
    )
    assert format_reference(FileRef("file_0123456789abcdef", None, "text/plain", 1, "x")).startswith(
        "[LCM File: file_0123456789abcdef | (unnamed) |"
    )


def test_callers_metadata_under_the_record_key_is_kept() -> None:
    message = Message.user(f"<file>{BODY}</file>", metadata={RECORD_KEY: {"mine": True}, "other": 1})
    rewritten, _ = round_trip(message)
    assert rewritten.metadata is not None and rewritten.metadata["other"] == 1
    # Intercepting an already rewritten message (with more payloads) nests and still restores.
    again = Message(rewritten.role, rewritten.content + f"<file>{BODY.upper()}</file>", metadata=rewritten.metadata)
    twice, blobs, _ = intercept(again)
    assert restore(twice, blobs.__getitem__) == again


def test_restore_leaves_plain_messages_alone_and_refuses_damaged_records() -> None:
    plain = Message.user("hello")
    assert restore(plain, lambda _: b"") is plain
    assert referenced_file_ids(plain) == []
    rewritten, blobs, _ = intercept(Message.user(f"x <file>{BODY}</file>"))
    assert rewritten.metadata is not None
    record = rewritten.metadata[RECORD_KEY]
    assert isinstance(record, dict)
    moved = Message(rewritten.role, "shifted " + rewritten.content, metadata=rewritten.metadata)
    with pytest.raises(InputError, match="does not match"):
        restore(moved, blobs.__getitem__)
    for bad in ("nonsense", {"v": 2, "slots": []}, {**record, "slots": [{"part": None}]}):
        broken = Message(rewritten.role, rewritten.content, metadata={RECORD_KEY: bad})
        with pytest.raises(InputError, match=RECORD_KEY):
            restore(broken, blobs.__getitem__)
    with pytest.raises(InputError, match="one FileRef per payload"):
        rewrite(plain, find(Message.user(f"<file>{BODY}</file>")), [])


# ---------------------------------------------------------------- pages


def test_page_lines_ranges_and_caps() -> None:
    data = "".join(f"line {i}\n" for i in range(1, 101)).encode()
    whole = page_lines(data)
    assert (whole.start_line, whole.end_line, whole.total_lines, whole.truncated) == (1, 100, 100, False)
    assert whole.text == data.decode() and whole.next_start_line is None
    middle = page_lines(data, start_line=10, end_line=12)
    assert middle.text == "line 10\nline 11\nline 12\n" and middle.next_start_line == 13
    capped = page_lines(data, start_line=95, max_bytes=20)
    assert (capped.text, capped.end_line, capped.truncated) == ("line 95\nline 96\n", 96, True)
    past = page_lines(data, start_line=500)
    assert (past.text, past.end_line, past.next_start_line) == ("", 499, None)
    assert page_lines(b"no newline at end", start_line=1).total_lines == 1
    assert page_lines(b"").total_lines == 0


def test_page_lines_cuts_an_overlong_line_at_a_character_boundary() -> None:
    data = ("é" * 100 + "\nnext\n").encode()
    page = page_lines(data, max_bytes=11)
    assert page.partial and page.truncated and page.text == "é" * 5 and page.next_start_line == 2


def test_page_lines_of_binary_data_and_bad_arguments() -> None:
    binary = page_lines(b"\x89PNG\r\n\x1a\n\xff\xfe")
    assert binary.binary and binary.text is None and binary.next_start_line is None
    assert binary.to_dict()["binary"] is True
    with pytest.raises(InputError, match="start_line"):
        page_lines(b"x", start_line=0)
    with pytest.raises(InputError, match="end_line"):
        page_lines(b"x", start_line=5, end_line=2)
    with pytest.raises(InputError, match="max_bytes"):
        page_lines(b"x", max_bytes=MAX_PAGE_BYTES + 1)


def test_page_lines_skips_quickly_to_a_far_line() -> None:
    data = b"x\n" * 3_000_000
    page = page_lines(data, start_line=2_999_999)
    assert page.text == "x\nx\n" and page.total_lines == 3_000_000


def test_find_file_ids_reads_bare_ids_in_order_without_repeats() -> None:
    text = "a file_0123456789abcdef b file_0123456789abcdef file_fedcba9876543210 file_0123 xfile_0123456789abcdef"
    assert find_file_ids(text) == ["file_0123456789abcdef", "file_fedcba9876543210"]
    assert find_file_ids(format_reference(FileRef("file_00000000000000aa", "a.txt", "text/plain", 10, "x"))) == [
        "file_00000000000000aa"
    ]
