"""Exploration summaries: one per kind of content, bounded, deterministic, and never an exception."""

from __future__ import annotations

import base64
import json
import struct

import pytest

from lossless.exploration import Exploration, detect_kind, explore
from lossless.tokens import EstimatingCounter

from .conftest import FIXTURES

FILES = FIXTURES / "files"
COUNTER = EstimatingCounter()


def explore_fixture(name: str, *, named: bool = True) -> Exploration:
    return explore((FILES / name).read_bytes(), name=name if named else None)


@pytest.mark.parametrize(
    ("name", "kind", "expected"),
    [
        (
            "inventory.json",
            "json",
            [
                "JSON object (5 keys)",
                "nesting depth 4",
                '"items": array[4] of object',
                "sku (str), name (str), qty (int), price (float)",
                'Sample items[0]: {"sku": "BOLT-M6"',
            ],
        ),
        (
            "orders.csv",
            "csv",
            [
                "6 columns, 6 rows plus a header row",
                "order_id (int",
                "placed_on (date",
                "amount_eur (float, e.g. 129.90, 15.00; 7.5…1204)",
                "express (bool",
                "Row: 1001,2026-01-03",
            ],
        ),
        ("latency.tsv", "tsv", ["TSV table, 4 columns, 3 rows", "ts (datetime", "status (int"]),
        (
            "deploy.yaml",
            "yaml",
            ["YAML, 1 document", "apiVersion: apps/v1", "metadata (2 entries)", "spec (3 entries)"],
        ),
        ("pyproject.toml", "toml", ["TOML, 2 top-level keys", "[project]: name, version", "[tool]: ruff, mypy"]),
        (
            "catalog.xml",
            "xml",
            ["root <catalog> (updated='2026-02-11')", "<book> ×2, <magazine> ×1", "book: id, lang", "depth 3"],
        ),
        (
            "status.html",
            "html",
            ["titled 'Service status'", "h1: All systems operational", "h2: Scheduled maintenance", "links 2"],
        ),
        (
            "ratelimit.py",
            "python",
            [
                "Python module, 47 lines",
                "Docstring: Sliding-window rate limiting",
                "collections (deque)",
                "class SlidingLimiter(Window): __init__(limit: int=MAX_REQUESTS",
                "hit(now: float | None=None) -> bool",
                "def reset_all(limiters: list[SlidingLimiter]) -> int",
                "Constants: MAX_REQUESTS, WINDOW_SECONDS",
            ],
        ),
        (
            "client.ts",
            "typescript",
            [
                'import { fetchJson } from "./http"',
                "export interface RetryPolicy",
                "export class OrderClient",
                "async getOrder(id: string): Promise<Order>",
                "export function isRetryable(status: number): boolean",
            ],
        ),
        (
            "server.go",
            "go",
            ["Go source, 29 lines", "net/http", "type Server struct", "func (s *Server) Start() error"],
        ),
        (
            "queue.rs",
            "rust",
            [
                "use std::sync::{Arc, Mutex}",
                "pub trait Job",
                "impl<T> JobQueue<T>",
                "pub async fn pop(&self) -> Option<T>",
            ],
        ),
        (
            "Invoice.java",
            "java",
            ["import java.math.BigDecimal", "public class Invoice", "public static Invoice empty()"],
        ),
        ("ringbuf.c", "c", ["#include <stdlib.h>", "struct ringbuf", "void rb_free(struct ringbuf *rb)"]),
        ("matrix.cpp", "cpp", ["#include <vector>", "namespace linalg", "double trace(const Matrix<double>& m"]),
        (
            "worker.log",
            "log",
            [
                "Log, 10 lines",
                "2026-02-14T08:00:01.120Z → 2026-02-14T08:01:02.300Z",
                "ERROR 4, INFO 3, WARN 2, DEBUG 1",
                "(3×) worker-# connection refused to db-#:# (attempt #)",
                "(1×) worker-# slow query took #ms on table orders",
            ],
        ),
        (
            "design-notes.md",
            "markdown",
            ["Markdown document, 17 lines", "# Billing redesign, ## Goals, ## Non-goals", "Begins: # Billing redesign"],
        ),
    ],
)
def test_each_kind_gets_its_summary(name: str, kind: str, expected: list[str]) -> None:
    found = explore_fixture(name)
    assert found.kind == kind
    for piece in expected:
        assert piece in found.summary, f"{piece!r} missing from:\n{found.summary}"
    assert COUNTER.count(found.summary) <= 400
    assert found.suffix == "txt"


@pytest.mark.parametrize(
    "name",
    [
        "inventory.json",
        "orders.csv",
        "deploy.yaml",
        "pyproject.toml",
        "catalog.xml",
        "status.html",
        "ratelimit.py",
        "client.ts",
        "server.go",
        "queue.rs",
        "Invoice.java",
        "ringbuf.c",
        "matrix.cpp",
        "worker.log",
    ],
)
def test_kinds_are_recognised_from_the_content_alone(name: str) -> None:
    assert explore_fixture(name, named=False).kind == explore_fixture(name).kind


def test_the_mime_type_wins_over_the_name_and_text_mime_types_sniff() -> None:
    data = (FILES / "inventory.json").read_bytes()
    assert detect_kind(data, name="x.txt", mime="application/vnd.api+json")[0] == "json"
    assert detect_kind(data, name="x.txt", mime="text/plain")[0] == "json"
    assert detect_kind(b"<a><b/></a>", mime="image/svg+xml")[0] == "xml"
    # Text extracted from a PDF arrives with the PDF's type: it is read as text.
    assert detect_kind(b"Chapter one\n\nIt was a dark night.", mime="application/pdf")[0] == "text"


def test_json_lines() -> None:
    records = "".join(json.dumps({"id": i, "event": "click", "at": f"2026-01-0{i % 9 + 1}"}) + "\n" for i in range(50))
    found = explore(records.encode(), name="events.jsonl")
    assert found.kind == "jsonl" and "JSON Lines, 50 lines" in found.summary
    assert "id (int), event (str), at (str)" in found.summary
    assert explore(records.encode()).kind == "jsonl"


def test_large_json_array_reports_length_and_record_keys() -> None:
    data = json.dumps([{"id": i, "name": f"n{i}", "ok": i % 2 == 0} for i in range(20_000)]).encode()
    found = explore(data)
    assert "JSON array[20,000] of object" in found.summary and "ok (bool)" in found.summary


def png(width: int, height: int, extra: int = 0) -> bytes:
    header = struct.pack(">I", 13) + b"IHDR" + struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + header + bytes(extra)


def jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + (16).to_bytes(2, "big") + b"JFIF\x00" + bytes(9)
    sof = b"\xff\xc0" + (17).to_bytes(2, "big") + b"\x08" + struct.pack(">HH", height, width) + bytes(12)
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


@pytest.mark.parametrize(
    ("data", "expected", "suffix"),
    [
        (png(1920, 1080, 5000), "PNG image, 1,920×1,080 pixels", "png"),
        (jpeg(640, 480), "JPEG image, 640×480 pixels", "jpg"),
        (b"GIF89a" + struct.pack("<HH", 32, 16) + bytes(100), "GIF image, 32×16 pixels", "gif"),
        (
            b"RIFF\x00\x00\x00\x00WEBPVP8X" + bytes(8) + (99).to_bytes(3, "little") + (49).to_bytes(3, "little"),
            "WebP image, 100×50 pixels",
            "webp",
        ),
    ],
)
def test_images(data: bytes, expected: str, suffix: str) -> None:
    found = explore(data, name="picture")
    assert (found.kind, found.suffix) == ("image", suffix)
    assert found.summary.startswith(expected)
    assert found.mime.startswith("image/")


def test_pdf_and_other_binary_data() -> None:
    pdf = b"%PDF-1.7\n1 0 obj << /Type /Pages >>\n2 0 obj << /Type /Page >>\n3 0 obj << /Type /Page >>\n%%EOF"
    found = explore(pdf, name="paper.pdf")
    assert (found.kind, found.mime, found.suffix) == ("pdf", "application/pdf", "pdf")
    assert "PDF version 1.7, about 2 pages" in found.summary
    blob = explore(bytes(range(256)) * 10)
    assert (blob.kind, blob.suffix, blob.mime) == ("binary", "bin", "application/octet-stream")
    assert "First bytes: 00 01 02" in blob.summary
    assert explore(b"PK\x03\x04" + bytes(50)).summary.startswith("ZIP archive")


@pytest.mark.parametrize(
    ("data", "name"),
    [
        (b'{"truncated": [1, 2, ', "broken.json"),
        (b"[" * 100_000 + b"]" * 100_000, "deep.json"),
        (b"def broken(:\n    pass\n", "broken.py"),
        (b"(" * 200_000, "deep.py"),
        (b"<root><unclosed></root>", "bad.xml"),
        (b'<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;">]><x>&b;</x>', "bomb.xml"),
        (b"key = [unclosed", "bad.toml"),
        (b"", "empty.csv"),
        (b"", None),
        (b"\xff\xfe\x00garbage", "x.json"),
        (b"just some words", "code.rs"),
        ("ünïcödé ✓ 静默 😀\n".encode() * 50, "notes.txt"),
    ],
)
def test_malformed_input_never_raises(data: bytes, name: str | None) -> None:
    found = explore(data, name=name)
    assert found.summary
    assert COUNTER.count(found.summary) <= 400


def test_summaries_are_deterministic_and_cut_to_the_token_budget() -> None:
    code = (FILES / "ratelimit.py").read_bytes()
    assert explore(code, name="a.py") == explore(code, name="a.py")
    short = explore(code, name="a.py", max_tokens=40)
    assert COUNTER.count(short.summary) <= 40 and short.summary.startswith("Python module")


def test_long_prose_gets_counts_headings_head_and_tail() -> None:
    chapters = "".join(
        f"# Chapter {i}\n\n" + "Words of the chapter go on and on. " * 200 + "\n\n" for i in range(1, 30)
    )
    found = explore(chapters.encode(), name="book.txt")
    assert found.kind == "markdown" and found.prose
    summary = found.summary
    assert "# Chapter 1, # Chapter 2" in summary and "Begins: # Chapter 1" in summary and "Ends: " in summary
    assert "words" in summary.split("\n", 1)[0]


def test_control_characters_in_samples_are_replaced() -> None:
    found = explore(b"first line with \x1b[31mcolour\x1b[0m and a \x00 nul\n" * 3, name="a.txt")
    assert "\x1b" not in found.summary and "\x00" not in found.summary


def test_base64_text_is_not_mistaken_for_anything_structured() -> None:
    found = explore(base64.b64encode(bytes(3000)), name=None)
    assert found.kind == "text"
