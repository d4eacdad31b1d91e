"""Explorers for logs, prose and binary data (images, PDFs, archives).

Logs and prose can be tens of megabytes: these explorers count with C-speed
string and regular-expression scans (``str.count``, ``re.findall``), look at
most at a bounded number of matching lines, and read headings from the first
megabytes only.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections import Counter
from collections.abc import Iterator

from lossless.exploration._common import clip, count_lines, human_size, plural, preview

__all__ = ["MAGIC", "explore_binary", "explore_image", "explore_log", "explore_prose", "image_format", "looks_like_log"]

_TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d{2}:\d{2}:\d{2}"
    r"|\d{2}/(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)/\d{4}:\d{2}:\d{2}:\d{2}(?: [+-]\d{4})?"
)
_LEVEL = re.compile(r"\b(FATAL|CRITICAL|ERROR|WARNING|WARN|INFO|DEBUG|TRACE)\b")
_LEVEL_KEY = re.compile(r"\blevel[=:]\s*\"?(fatal|critical|error|warning|warn|info|debug|trace)\b", re.I)
_PROBLEM = ("FATAL", "CRITICAL", "ERROR")
_WARNING = ("WARN",)
_VARIABLE = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|0x[0-9a-fA-F]+|\d+(?:\.\d+)*"
)
_SCAN_MATCHES = 20_000


def looks_like_log(text: str) -> bool:
    """Most of the first non-empty lines start with a timestamp or carry a level."""
    lines = [line for line in text[:16384].splitlines()[:40] if line.strip()]
    if len(lines) < 3:
        return False
    hits = sum(1 for line in lines if _TIMESTAMP.match(line.lstrip("[")) or _LEVEL.search(line[:80]))
    return hits * 5 >= len(lines) * 3


def _normalised(line: str, level_end: int) -> str:
    message = line[level_end:].lstrip(" :]-|\t") or line
    message = _TIMESTAMP.sub("", message)
    return clip(_VARIABLE.sub("#", message), 110)


def _is_word(text: str, start: int, end: int) -> bool:
    return (start == 0 or not text[start - 1].isalnum()) and (end == len(text) or not text[end].isalnum())


def _mentions(text: str, word: str, limit: int) -> Iterator[int]:
    """Start offsets of ``word`` as a whole word (``str.find`` runs at C speed; a regex would not)."""
    at, found = text.find(word), 0
    while at >= 0 and found < limit:
        if _is_word(text, at, at + len(word)):
            found += 1
            yield at
        at = text.find(word, at + len(word))


def _level_counts(text: str) -> Counter[str]:
    """Mentions of each level word (upper case, ``WARNING`` counted as ``WARN``); else ``level=…`` keys."""
    counts: Counter[str] = Counter()
    for word in ("FATAL", "CRITICAL", "ERROR", "INFO", "DEBUG", "TRACE"):
        counts[word] = text.count(word)
    counts["WARN"] = text.count("WARN")
    counts = +counts  # drop zeros
    if not counts:
        counts.update(level.upper().replace("WARNING", "WARN") for level in _LEVEL_KEY.findall(text))
    return counts


def _frequent(text: str, levels: tuple[str, ...]) -> list[tuple[str, int]]:
    messages: Counter[str] = Counter()
    for word in levels:
        for at in _mentions(text, word, _SCAN_MATCHES):
            start = text.rfind("\n", 0, at) + 1
            end = text.find("\n", at)
            end = len(text) if end < 0 else end
            line = text[start : min(end, start + 1000)]
            level_end = at - start + len(word)
            if text.startswith("ING", at + len(word)):
                level_end += 3
            messages[_normalised(line, level_end)] += 1
    return messages.most_common(4)


def _span(text: str) -> str | None:
    head = _TIMESTAMP.search(text[:65536])
    tail = _TIMESTAMP.findall(text[-65536:])
    if head is None or not tail:
        return None
    return f"{head.group()} → {tail[-1]}"


def explore_log(text: str, size: int) -> list[str]:
    total = count_lines(text)
    levels = _level_counts(text)
    span = _span(text)
    out = [f"Log, {plural(total, 'line')}, {human_size(size)}" + (f", {span}." if span else ".")]
    if levels:
        out.append("Level mentions: " + ", ".join(f"{name} {count:,}" for name, count in levels.most_common()))
    for label, wanted in (("errors", _PROBLEM), ("warnings", _WARNING)):
        frequent = _frequent(text, wanted) if any(levels.get(name) for name in wanted) else []
        if frequent:
            out.append(f"Most frequent {label}: " + "; ".join(f"({n:,}×) {m}" for m, n in frequent))
    out.append("First line: " + clip(text[:4096].split("\n", 1)[0], 200))
    if total > 1:
        out.append("Last line: " + clip(text[-4096:].rstrip("\n").rsplit("\n", 1)[-1], 200))
    return out


# ---------------------------------------------------------------- prose

_HEADING = re.compile(
    r"^(?:#{1,6}[ \t]+\S.{0,100}"  # Markdown
    r"|(?:\d+\.){1,3}\d*[ \t]+[A-Z][^\n.]{2,80}"  # 1.2 Numbered
    r"|[A-Z][A-Z0-9 ,:&'/-]{3,60}[A-Z0-9])[ \t]*$",  # ALL CAPS
    re.M,
)
_WORD = re.compile(r"\S+")


def explore_prose(text: str, size: int, label: str = "Text document") -> list[str]:
    total = count_lines(text)
    if len(text) <= 4 * 1024 * 1024:
        words = f"{len(_WORD.findall(text)):,} words"
    else:
        sample = text[: 1024 * 1024]
        words = f"about {round(len(_WORD.findall(sample)) * len(text) / len(sample), -3):,.0f} words"
    out = [f"{label}, {plural(total, 'line')}, {words}, {len(text):,} characters ({human_size(size)})."]
    headings = list(dict.fromkeys(m.group().strip() for m in _HEADING.finditer(text[: 2 * 1024 * 1024])))
    if headings:
        out.append("Headings: " + preview([clip(h, 70) for h in headings], 15))
    out.append("Begins: " + clip(text[:600], 480))
    if len(text) > 1200:
        out.append("Ends: " + clip(text[-500:], 360))
    return out


# ---------------------------------------------------------------- binary

#: Leading bytes → (kind, label, MIME type, blob suffix).
MAGIC: tuple[tuple[bytes, str, str, str, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image", "PNG image", "image/png", "png"),
    (b"\xff\xd8\xff", "image", "JPEG image", "image/jpeg", "jpg"),
    (b"GIF87a", "image", "GIF image", "image/gif", "gif"),
    (b"GIF89a", "image", "GIF image", "image/gif", "gif"),
    (b"BM", "image", "BMP image", "image/bmp", "bmp"),
    (b"%PDF-", "pdf", "PDF document", "application/pdf", "pdf"),
    (b"PK\x03\x04", "binary", "ZIP archive (or an Office document)", "application/zip", "zip"),
    (b"\x1f\x8b", "binary", "gzip data", "application/gzip", "gz"),
    (b"\x7fELF", "binary", "ELF executable", "application/octet-stream", "bin"),
)


def image_format(data: bytes) -> tuple[str, str, str] | None:
    """(label, MIME type, suffix) of an image or other recognised binary, from its leading bytes."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WebP image", "image/webp", "webp"
    for magic, _, label, mime, suffix in MAGIC:
        if data.startswith(magic) and (magic != b"BM" or (len(data) > 26 and data[14] in (12, 40, 56, 108, 124))):
            return label, mime, suffix
    return None


def _dimensions(data: bytes) -> tuple[int, int] | None:
    if data.startswith(b"\x89PNG") and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return int(width), int(height)
    if data.startswith(b"GIF") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return int(width), int(height)
    if data.startswith(b"BM") and len(data) >= 26:
        width, height = struct.unpack("<ii", data[18:26])
        return abs(int(width)), abs(int(height))
    if data[:4] == b"RIFF" and data[12:16] == b"VP8X" and len(data) >= 30:
        return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    if data.startswith(b"\xff\xd8"):
        return _jpeg_dimensions(data)
    return None


def _jpeg_dimensions(data: bytes) -> tuple[int, int] | None:
    i = 2
    for _ in range(10_000):
        if i + 9 > len(data) or data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return int(width), int(height)
        i += 2 + length
    return None


def explore_image(data: bytes) -> list[str]:
    found = image_format(data)
    label = found[0] if found else "Image"
    size = _dimensions(data)
    dims = f", {size[0]:,}×{size[1]:,} pixels" if size else ""
    return [f"{label}{dims}, {human_size(len(data))}.", f"SHA-256 {hashlib.sha256(data).hexdigest()[:16]}…"]


def explore_binary(data: bytes) -> list[str]:
    found = image_format(data)
    label = found[0] if found else "Binary data"
    out = [f"{label}, {human_size(len(data))}."]
    if data.startswith(b"%PDF-"):
        version = data[5:8].decode("ascii", "replace")
        pages = len(re.findall(rb"/Type\s*/Page(?![s\w])", data))
        out.append(f"PDF version {version}" + (f", about {plural(pages, 'page')}" if pages else "") + ".")
    out.append(f"First bytes: {data[:24].hex(' ')}")
    out.append(f"SHA-256 {hashlib.sha256(data).hexdigest()[:16]}…")
    return out
