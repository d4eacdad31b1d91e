"""The strict, streaming JSONL reader every JSONL format shares."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest

from lossless.errors import TranscriptError
from lossless.transcripts.base import ReadContext, iter_jsonl, line_number_at, timestamp_or


def lines(data: bytes, **context: object) -> list[tuple[int, int, dict[str, object]]]:
    return [(j.line, j.end_offset, j.value) for j in iter_jsonl(io.BytesIO(data), ReadContext("t.jsonl", **context))]  # type: ignore[arg-type]


def test_reads_objects_with_lines_and_offsets() -> None:
    data = b'{"a": 1}\n\n  \n{"b": 2}\n'
    assert lines(data) == [(1, 9, {"a": 1}), (4, len(data), {"b": 2})]
    assert lines(data, start_offset=9) == [(4, len(data), {"b": 2})]


def test_unfinished_last_line_is_left_for_later() -> None:
    assert lines(b'{"a": 1}\n{"b": ') == [(1, 9, {"a": 1})]
    assert lines('{"a": 1}\n{"b": "é'.encode()[:-1]) == [(1, 9, {"a": 1})]  # cut inside a character
    assert lines(b'{"a": 1}\n{"b": 2}') == [(1, 9, {"a": 1}), (2, 17, {"b": 2})]  # complete, just no newline


@pytest.mark.parametrize(
    ("data", "line", "problem"),
    [
        (b'{"a": 1}\n{oops}\n', 2, "not valid JSON"),
        (b'{"a": 1}\n[1]\n', 2, "is a JSON list"),
        (b'\n\n{"a": \xff}\n', 3, "not valid JSON"),  # a bad byte outside a string
        (b'{"a": "\x00"}\n', 1, "raw NUL byte"),
    ],
)
def test_corrupt_lines_name_their_line(data: bytes, line: int, problem: str) -> None:
    with pytest.raises(TranscriptError) as caught:
        lines(data)
    assert caught.value.line == line and problem in str(caught.value) and caught.value.path == "t.jsonl"


def test_invalid_utf8_inside_a_string_is_kept_as_escaped_bytes() -> None:
    [(_, _, value)] = lines(b'{"a": "caf\xe9"}\n')
    assert value == {"a": "caf\udce9"}  # surrogateescape: the ingest stores U+FFFD and keeps the byte
    assert value["a"].encode("utf-8", "surrogateescape") == b"caf\xe9"


def test_line_size_limit() -> None:
    with pytest.raises(TranscriptError, match="line is over"):
        lines(b'{"a": "' + b"x" * 2000 + b'"}\n', max_line_bytes=1000)


def test_line_numbers_at_offsets() -> None:
    stream = io.BytesIO(b"a\nb\nc\n")
    assert [line_number_at(stream, o) for o in (0, 2, 4)] == [1, 2, 3]


def test_timestamps() -> None:
    fallback = datetime(2026, 1, 1, tzinfo=UTC)
    assert timestamp_or(None, fallback, path="p", line=1) == fallback
    assert timestamp_or("2026-02-03T04:05:06Z", None, path="p", line=1) == datetime(2026, 2, 3, 4, 5, 6, tzinfo=UTC)
    with pytest.raises(TranscriptError, match="p:7: not an ISO-8601 timestamp"):
        timestamp_or("soon", None, path="p", line=7)
    with pytest.raises(TranscriptError, match="neither text nor a number"):
        timestamp_or([1], None, path="p", line=7)
