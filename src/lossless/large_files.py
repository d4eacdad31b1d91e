"""Large files: find oversized payloads in a message, replace them by references, restore them exactly.

Pure: no I/O.  The engine stores the bytes (a :class:`~lossless.ports.BlobStore`)
and the rows; this module decides what is intercepted and how the message is
rewritten.

What is intercepted (each payload on its own, when its tokens exceed the threshold):

* ``<file name=… mime=…>…</file>`` blocks in text (the message content, text
  parts, tool outputs).  Attributes may come in any order, quoted either way
  (backslash-escaped quotes and HTML entities are understood) or unquoted;
  ``mime`` may be missing.  Tags nest: a closing tag closes the innermost open
  block, and only outermost blocks are intercepted.  A tag that does not parse,
  a self-closing tag, an unclosed block or a stray ``</file>`` is ordinary text.
* ``data:…;base64,…`` URLs, in text or as a file part's URL (images, PDFs …);
  canonical base64 is stored decoded, so the blob is the real file.
* Tool outputs: an output still over the threshold once its own blocks are
  taken out is intercepted whole.
* Plain text: a text part (of any role: a paste, a log, a dump) still over
  the threshold once its own blocks are taken out is intercepted whole, as
  ``pasted text`` (origin ``file_block``), so no entry point stores a huge
  message inline.

Invariants:

* **Lossless.**  The rewritten message carries, under the metadata key
  :data:`RECORD_KEY`, where each reference sits and the original text around
  the stored bytes (the opening and closing tags, the ``data:`` header), so
  ``restore(rewrite(m), blobs) == m`` for every message (property-tested).  A
  caller's own metadata under that key is kept inside the record and put back.
  Offsets count Unicode code points.
* **Each reference is** ``[LCM File: file_<16 hex> | name | mime | N bytes]``,
  a blank line, ``Exploration Summary:`` and the summary.  Names are shown
  sanitised (no control characters, no ``]``, at most 200 characters); the
  exact original tag is in the record.
* **Ids are deterministic:** ``file_`` + 16 hex digits of a SHA-256 over the
  conversation scope, the content hash, the name and the MIME type.  The same
  file pasted twice in a conversation, or a message ingested again, gets the
  same id; within one message identical payloads share one id.
* **Linear time.**  Tags are found with one regular-expression scan and
  matched with a stack; an opening tag is at most :data:`MAX_TAG_CHARS`
  characters and quoted values end at the next quote, so no input makes the
  parser quadratic.  Messages without ``<file`` or ``data:`` and without a
  long tool output cost a few substring checks.
* Text that cannot be stored (a lone surrogate) is never intercepted, so the
  ingest check refuses it with its usual message.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from lossless.constants import DEFAULT_PAGE_BYTES, MAX_PAGE_BYTES
from lossless.errors import InputError
from lossless.records import (
    FileOrigin,
    FilePart,
    JSONValue,
    Message,
    Part,
    TextPart,
    ToolPart,
    canonical_json,
    render_parts,
)
from lossless.tokens import EstimatingCounter, TokenCounter

__all__ = [
    "DEFAULT_PAGE_BYTES",
    "MAX_PAGE_BYTES",
    "MAX_TAG_CHARS",
    "RECORD_KEY",
    "FileRef",
    "Page",
    "Payload",
    "Slot",
    "file_id_for",
    "file_ids_in",
    "file_scope",
    "find_file_ids",
    "find_payloads",
    "format_reference",
    "may_hold_payloads",
    "page_lines",
    "referenced_file_ids",
    "restore",
    "rewrite",
]

#: The message metadata key that holds the restore record of a rewritten message.
RECORD_KEY = "lcm.large_files"
#: The longest ``<file …>`` opening tag recognised; longer ones stay ordinary text.
MAX_TAG_CHARS = 4096
_MAX_DATA_HEADER = 1024
_MAX_NAME = 200
#: Tokens a part of a text may count beyond the whole text (a tokenizer's merges across the cut).
_MARGIN = 64

Encoding = Literal["utf8", "b64"]
Field = Literal["content", "text", "output", "url"]

_TAGS = re.compile(r"<file(?=[\s>/])|</file\s*>")
_DATA_URL = re.compile(
    r"data:(?:[A-Za-z0-9!#$&^_.+-]{1,127}/[A-Za-z0-9!#$&^_.+-]{1,127})?"
    r"(?:;[A-Za-z0-9!#$&^_.+-]{1,64}=[^;,\s\"'<>]{0,256}){0,8};base64,([A-Za-z0-9+/]*={0,2})"
)
_REFERENCE = re.compile(r"\[LCM File: (file_[0-9a-f]{16}) \|")
_FILE_ID = re.compile(r"\bfile_[0-9a-f]{16}\b")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


@dataclass(frozen=True, slots=True)
class Slot:
    """Where a string sits in a message: its content, or a field of one of its parts."""

    part: int | None = None
    field: Field = "content"


@dataclass(frozen=True, slots=True)
class Payload:
    """One intercepted payload: ``text[start:end] == prefix + <data as text> + suffix`` of its slot."""

    slot: Slot
    start: int
    end: int
    prefix: str
    suffix: str
    data: bytes
    encoding: Encoding
    origin: FileOrigin
    name: str | None = None
    mime: str | None = None
    #: Hex SHA-256 of ``data`` (computed once).
    content_hash: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "content_hash", hashlib.sha256(self.data).hexdigest())


@dataclass(frozen=True, slots=True)
class FileRef:
    """What a reference says about a stored payload."""

    id: str
    name: str | None
    mime: str
    byte_size: int
    summary: str


# ---------------------------------------------------------------- references and ids


def display_name(name: str | None) -> str | None:
    """A name safe to show in a reference line: no control characters or ``]``, at most 200 characters."""
    if name is None:
        return None
    cleaned = _CONTROL.sub("\ufffd", name).replace("]", ")").replace("|", "\u00a6").strip()
    if len(cleaned) > _MAX_NAME:
        cleaned = cleaned[: _MAX_NAME - 1] + "…"
    return cleaned or None


@functools.lru_cache(maxsize=4096)
def file_scope(agent_id: str, session_id: str) -> str:
    """The scope file ids are made in: one conversation, named by its agent and session."""
    return canonical_json([agent_id, session_id])


def file_id_for(scope: str, content_hash: str, name: str | None, mime: str | None) -> str:
    """The id of a payload in a conversation (``scope``): deterministic, so replays reuse it."""
    digest = hashlib.sha256(canonical_json([scope, content_hash, name, mime]).encode("utf-8", "surrogatepass"))
    return "file_" + digest.hexdigest()[:16]


def format_reference(ref: FileRef) -> str:
    """The text that replaces a payload in the message."""
    head = f"[LCM File: {ref.id} | {ref.name or '(unnamed)'} | {ref.mime} | {ref.byte_size:,} bytes]"
    return f"{head}\n\nExploration Summary:\n{ref.summary.strip()}"


def file_ids_in(text: str) -> list[str]:
    """The file ids of the references in ``text``, in order, without repeats."""
    return list(dict.fromkeys(_REFERENCE.findall(text)))


def find_file_ids(text: str) -> list[str]:
    """Large-file ids mentioned in ``text``, in order of first appearance."""
    return list(dict.fromkeys(_FILE_ID.findall(text)))


# ---------------------------------------------------------------- finding payloads


def _unescape(value: str) -> str:
    if "\\" in value:
        value = re.sub(r"\\(.)", r"\1", value, flags=re.S)
    return html.unescape(value) if "&" in value else value


def _attr_value(text: str, i: int, limit: int) -> tuple[str, int] | None:
    """The attribute value starting at ``i`` (quoted either way, or bare) and where it ends."""
    quote = text[i]
    if quote in "\"'":
        j = i + 1
        while j < limit and text[j] != quote:
            j += 2 if text[j] == "\\" else 1
        if j >= limit:
            return None
        return _unescape(text[i + 1 : j]), j + 1
    start = i
    while i < limit and not text[i].isspace() and text[i] not in ">\"'<":
        i += 1
    if i == start:
        return None
    return _unescape(text[start:i]), i


def _open_tag(text: str, pos: int) -> tuple[int, dict[str, str]] | None:
    """Parse the opening tag at ``pos`` (``<file`` …): its end and attributes, or None if it is not one."""
    limit = min(len(text), pos + MAX_TAG_CHARS)
    i = pos + 5
    attrs: dict[str, str] = {}
    while True:
        while i < limit and text[i].isspace():
            i += 1
        if i >= limit or text[i] == "<" or text.startswith("/>", i):
            return None  # unterminated, or self-closing (no body)
        if text[i] == ">":
            return i + 1, attrs
        start = i
        while i < limit and not text[i].isspace() and text[i] not in "=></\"'":
            i += 1
        if i == start:
            return None
        key = text[start:i].lower()
        while i < limit and text[i].isspace():
            i += 1
        value = ""
        if i < limit and text[i] == "=":
            i += 1
            while i < limit and text[i].isspace():
                i += 1
            parsed = _attr_value(text, i, limit) if i < limit else None
            if parsed is None:
                return None
            value, i = parsed
        attrs.setdefault(key, value)


def _file_blocks(text: str) -> list[tuple[int, int, int, int, dict[str, str]]]:
    """Outermost complete blocks: (open start, body start, close start, close end, attributes)."""
    if "<file" not in text:
        return []
    stack: list[tuple[int, int, dict[str, str]]] = []
    pairs: list[tuple[int, int, int, int, dict[str, str]]] = []
    resume = 0
    for match in _TAGS.finditer(text):
        start = match.start()
        if start < resume:
            continue  # inside an opening tag already parsed (a quoted attribute)
        if text.startswith("</", start):
            if stack:
                open_start, body_start, attrs = stack.pop()
                pairs.append((open_start, body_start, start, match.end(), attrs))
            continue
        parsed = _open_tag(text, start)
        if parsed is not None:
            resume = parsed[0]
            stack.append((start, parsed[0], parsed[1]))
    pairs.sort(key=lambda p: p[0])
    outermost: list[tuple[int, int, int, int, dict[str, str]]] = []
    reach = -1
    for pair in pairs:
        if pair[0] >= reach:
            outermost.append(pair)
            reach = pair[3]
    return outermost


def _encodable(*texts: str) -> bool:
    try:
        for text in texts:
            text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _may_exceed(text: str, threshold: int) -> bool:
    """Whether ``text`` can have more than ``threshold`` tokens: no counter gives more than one per UTF-8 byte."""
    if len(text) * 4 <= threshold:
        return False
    if text.isascii():
        return len(text) > threshold
    return len(text.encode("utf-8", "surrogatepass")) > threshold


_ESTIMATE = EstimatingCounter()


def _surely_over(text: str, threshold: int) -> bool:
    """Over the threshold by any counter: the fast estimate says more than four times it.

    (The estimate is within a few percent of exact counts on real text and never off by a factor of
    two, so an exact tokenizer need not read megabytes to learn they are over 25,000 tokens.)
    """
    return len(text) > threshold * 4 and _ESTIMATE.count(text) > threshold * 4


def _over(text: str, threshold: int, counter: TokenCounter) -> bool:
    return _may_exceed(text, threshold) and (_surely_over(text, threshold) or counter.count(text) > threshold)


def _decoded(body: str) -> tuple[bytes, Encoding]:
    """Canonical base64 is stored decoded (the real file); anything else as its UTF-8 text."""
    try:
        raw = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        return body.encode("utf-8"), "utf8"
    if base64.b64encode(raw).decode("ascii") != body:
        return body.encode("utf-8"), "utf8"
    return raw, "b64"


def _mime_of_header(header: str) -> str | None:
    mime = header[5:].split(";", 1)[0].split(",", 1)[0].strip().lower()
    return mime or None


def _text_payloads(slot: Slot, text: str, threshold: int, counter: TokenCounter) -> list[Payload]:
    found: list[Payload] = []
    taken: list[tuple[int, int]] = []
    for open_start, body_start, close_start, close_end, attrs in _file_blocks(text):
        taken.append((open_start, close_end))
        lead = body_start
        if text.startswith("\r\n", lead):
            lead += 2
        elif text.startswith("\n", lead):
            lead += 1
        tail = close_start
        if tail > lead and text[tail - 1] == "\n":
            tail -= 2 if tail - 1 > lead and text[tail - 2] == "\r" else 1
        body = text[lead:tail]
        prefix, suffix = text[open_start:lead], text[tail:close_end]
        if not _over(body, threshold, counter) or not _encodable(prefix, body, suffix):
            continue
        name = attrs.get("name") or attrs.get("filename") or attrs.get("path")
        mime = attrs.get("mime") or attrs.get("type") or attrs.get("content-type")
        found.append(
            Payload(
                slot,
                open_start,
                close_end,
                prefix,
                suffix,
                body.encode("utf-8"),
                "utf8",
                "file_block",
                display_name(name),
                display_name(mime.lower()) if mime else None,
            )
        )
    if "base64," in text:
        for match in _DATA_URL.finditer(text):
            start, end = match.span()
            if any(a < end and start < b for a, b in taken):
                continue
            body = match.group(1)
            if not _over(body, threshold, counter):
                continue
            header = text[start : match.start(1)]
            data, encoding = _decoded(body)
            found.append(
                Payload(slot, start, end, header, "", data, encoding, "data_url", None, _mime_of_header(header))
            )
    found.sort(key=lambda p: p.start)
    return found


def _without(text: str, payloads: Sequence[Payload]) -> str:
    pieces, at = [], 0
    for payload in payloads:
        pieces.append(text[at : payload.start])
        at = payload.end
    pieces.append(text[at:])
    return "".join(pieces)


def _part_payloads(index: int, part: Part, threshold: int, counter: TokenCounter) -> list[Payload]:
    if isinstance(part, TextPart):
        text = part.text
        slot = Slot(index, "text")
        inner = _text_payloads(slot, text, threshold, counter)
        rest = _without(text, inner) if inner else text
        if _over(rest, threshold, counter) and _encodable(text):
            # A plain text over the threshold (a paste, a log, a dump in any role) is stored aside whole.
            return [Payload(slot, 0, len(text), "", "", text.encode("utf-8"), "utf8", "file_block", "pasted text")]
        return inner
    if isinstance(part, ToolPart) and part.output is not None:
        output = part.output
        slot = Slot(index, "output")
        inner = _text_payloads(slot, output, threshold, counter)
        rest = _without(output, inner) if inner else output
        if _over(rest, threshold, counter) and _encodable(output):
            label = f"{part.name} output" if part.name else "tool output"
            return [Payload(slot, 0, len(output), "", "", output.encode("utf-8"), "utf8", "tool_output", label)]
        return inner
    if isinstance(part, FilePart) and part.url is not None and part.url.startswith("data:"):
        url = part.url
        comma = url.find(",", 0, _MAX_DATA_HEADER)
        if comma < 0 or not _over(url, threshold, counter) or not _encodable(url):
            return []
        header, body = url[: comma + 1], url[comma + 1 :]
        data, encoding = _decoded(body) if header.endswith(";base64,") else (body.encode("utf-8"), "utf8")
        mime = part.mime or _mime_of_header(header)
        return [
            Payload(
                Slot(index, "url"),
                0,
                len(url),
                header,
                "",
                data,
                encoding,
                "data_url",
                display_name(part.name),
                display_name(mime.lower()) if mime else None,
            )
        ]
    return []


def may_hold_payloads(message: Message, threshold: int) -> bool:
    """A cheap test, false for nearly every message, that :func:`find_payloads` may find something."""
    shortest = threshold // 4  # no string of fewer characters can exceed the threshold
    content = message.content
    if len(content) > shortest and ("<file" in content or "base64," in content) and _may_exceed(content, threshold):
        return True
    for part in message.parts:
        kind = type(part)
        if kind is TextPart:
            text = part.text  # type: ignore[union-attr]
            if len(text) > shortest and _may_exceed(text, threshold):  # a file block, a data URL or plain text
                return True
        elif kind is ToolPart:
            output = part.output  # type: ignore[union-attr]
            if output is not None and len(output) > shortest and _may_exceed(output, threshold):
                return True
        elif kind is FilePart:
            url = part.url  # type: ignore[union-attr]
            if url is not None and len(url) > shortest and url.startswith("data:") and _may_exceed(url, threshold):
                return True
    return False


def _content_rendered(message: Message) -> bool:
    return bool(message.parts) and message.content == render_parts(message.parts)


def find_payloads(message: Message, *, threshold: int, counter: TokenCounter) -> tuple[Payload, ...]:
    """Every payload of ``message`` over ``threshold`` tokens, by slot (content first) and position."""
    if not may_hold_payloads(message, threshold):
        return ()
    rendered = _content_rendered(message)
    content = message.content
    if rendered and not _surely_over(content, threshold) and counter.count(content) < threshold - _MARGIN:
        # The content holds every text and tool output, and it is under the threshold (counting it
        # costs nothing extra: ingest counts it anyway); only file parts' data: URLs can be over.
        parts = enumerate(message.parts)
        return tuple(
            p for i, part in parts if isinstance(part, FilePart) for p in _part_payloads(i, part, threshold, counter)
        )
    from_parts: list[Payload] = []
    for index, part in enumerate(message.parts):
        from_parts += _part_payloads(index, part, threshold, counter)
    if rendered:
        return tuple(from_parts)  # the content is re-rendered from the rewritten parts
    content = message.content
    in_content = _text_payloads(Slot(), content, threshold, counter)
    # A whole tool output or data URL repeated verbatim in a content of the caller's own making.
    for whole in (p for p in from_parts if p.origin == "tool_output" or p.slot.field == "url"):
        text = whole.prefix + (
            base64.b64encode(whole.data).decode("ascii") if whole.encoding == "b64" else whole.data.decode("utf-8")
        )
        at = content.find(text)
        while at >= 0:
            in_content.append(replace(whole, slot=Slot(), start=at, end=at + len(text)))
            at = content.find(text, at + len(text))
    in_content.sort(key=lambda p: (p.start, -(p.end - p.start)))
    kept: list[Payload] = []
    for payload in in_content:
        if not kept or payload.start >= kept[-1].end:
            kept.append(payload)
    return (*kept, *from_parts)


# ---------------------------------------------------------------- rewriting and restoring


def _splice(text: str, payloads: Sequence[Payload], refs: Sequence[FileRef]) -> tuple[str, list[JSONValue]]:
    pieces: list[str] = []
    splices: list[JSONValue] = []
    at = 0
    length = 0
    for payload, ref in zip(payloads, refs, strict=True):
        before = text[at : payload.start]
        pieces.append(before)
        length += len(before)
        reference = format_reference(ref)
        pieces.append(reference)
        splices.append([length, length + len(reference), ref.id, payload.prefix, payload.suffix, payload.encoding])
        length += len(reference)
        at = payload.end
    pieces.append(text[at:])
    return "".join(pieces), splices


def _slot_text(message: Message, slot: Slot) -> str:
    if slot.part is None:
        return message.content
    value = getattr(message.parts[slot.part], slot.field)
    assert isinstance(value, str)
    return value


def rewrite(message: Message, payloads: Sequence[Payload], refs: Sequence[FileRef]) -> Message:
    """``message`` with each payload replaced by the reference of its :class:`FileRef` (same order)."""
    if len(payloads) != len(refs):
        raise InputError(f"rewrite needs one FileRef per payload, got {len(refs)} for {len(payloads)}")
    if not payloads:
        return message
    by_slot: dict[Slot, list[int]] = {}
    for i, payload in enumerate(payloads):
        by_slot.setdefault(payload.slot, []).append(i)
    rendered = _content_rendered(message)
    parts = list(message.parts)
    content = message.content
    slots: list[JSONValue] = []
    for slot, indexes in by_slot.items():
        ordered = sorted(indexes, key=lambda i: payloads[i].start)
        text, splices = _splice(_slot_text(message, slot), [payloads[i] for i in ordered], [refs[i] for i in ordered])
        if slot.part is None:
            content = text
        else:
            parts[slot.part] = replace(parts[slot.part], **{slot.field: text})  # type: ignore[arg-type]
        slots.append({"part": slot.part, "field": slot.field, "splices": splices})
    if rendered:
        content = render_parts(parts)
    record: dict[str, JSONValue] = {"v": 1, "rendered": rendered, "slots": slots}
    metadata: dict[str, JSONValue] = dict(message.metadata or {})
    if RECORD_KEY in metadata:
        record["shadowed"] = [metadata[RECORD_KEY]]
    metadata[RECORD_KEY] = record
    return Message(
        message.role,
        content,
        tuple(parts),
        created_at=message.created_at,
        event_key=message.event_key,
        metadata=metadata,
    )


def _record(message: Message) -> dict[str, Any] | None:
    record = (message.metadata or {}).get(RECORD_KEY)
    if record is None:
        return None
    if not isinstance(record, dict) or record.get("v") != 1 or not isinstance(record.get("slots"), list):
        raise InputError(f"message metadata {RECORD_KEY!r} is not a large-file record lossless can read")
    return record


def referenced_file_ids(message: Message) -> list[str]:
    """The ids of the files a rewritten message refers to, in order, without repeats."""
    record = _record(message)
    if record is None:
        return []
    return list(dict.fromkeys(str(s[2]) for slot in record["slots"] for s in slot["splices"]))


def _unsplice(text: str, splices: Sequence[Any], read: Callable[[str], bytes]) -> str:
    pieces: list[str] = []
    at = 0
    for start, end, file_id, prefix, suffix, encoding in splices:
        if not (at <= start <= end <= len(text)) or not text.startswith(f"[LCM File: {file_id} ", start):
            raise InputError(f"the large-file record does not match the message text at {start} ({file_id})")
        data = read(file_id)
        body = base64.b64encode(data).decode("ascii") if encoding == "b64" else data.decode("utf-8")
        pieces += [text[at:start], prefix, body, suffix]
        at = end
    pieces.append(text[at:])
    return "".join(pieces)


def restore(message: Message, read: Callable[[str], bytes]) -> Message:
    """The original of a rewritten message, byte for byte; ``read(file_id)`` returns a file's bytes.

    A message that was not rewritten is returned as it is.
    """
    record = _record(message)
    if record is None:
        return message
    parts = list(message.parts)
    content = message.content
    try:
        for slot in record["slots"]:
            index, field, splices = slot["part"], slot["field"], slot["splices"]
            if index is None:
                content = _unsplice(content, splices, read)
            else:
                original = _unsplice(getattr(parts[index], field), splices, read)
                parts[index] = replace(parts[index], **{field: original})
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"message metadata {RECORD_KEY!r} is damaged: {exc!r}") from exc
    if record.get("rendered"):
        content = render_parts(parts)
    metadata = dict(message.metadata or {})
    del metadata[RECORD_KEY]
    if "shadowed" in record:
        metadata[RECORD_KEY] = record["shadowed"][0]
    return Message(
        message.role,
        content,
        tuple(parts),
        created_at=message.created_at,
        event_key=message.event_key,
        metadata=metadata or None,
    )


# ---------------------------------------------------------------- reading stored files by lines

_SKIP_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class Page:
    """Lines ``start_line``…``end_line`` (1-based, inclusive) of a stored file.

    ``text`` is ``None`` for binary content (not UTF-8): read its bytes with
    ``read_file``.  ``truncated`` means the byte cap stopped the page before
    ``end_line``; :attr:`next_start_line` is where the next page begins.  A
    single line longer than the cap is cut (``partial``); the rest of that line
    is only in the bytes.
    """

    text: str | None
    start_line: int
    end_line: int
    total_lines: int
    truncated: bool = False
    partial: bool = False

    @property
    def binary(self) -> bool:
        return self.text is None

    @property
    def next_start_line(self) -> int | None:
        if self.text is None or self.end_line >= self.total_lines:
            return None
        return self.end_line + 1

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "text": self.text,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "total_lines": self.total_lines,
            "truncated": self.truncated,
            "partial": self.partial,
            "binary": self.binary,
            "next_start_line": self.next_start_line,
        }


def _line_offset(data: bytes, line: int) -> int:
    """Byte offset where 1-based ``line`` starts (``len(data)`` past the end)."""
    pos, current = 0, 1
    while pos + _SKIP_CHUNK < len(data):  # skip whole chunks, counting their newlines at C speed
        newlines = data.count(b"\n", pos, pos + _SKIP_CHUNK)
        if current + newlines >= line:
            break
        current += newlines
        pos += _SKIP_CHUNK
    while current < line:
        found = data.find(b"\n", pos)
        if found < 0:
            return len(data)
        pos, current = found + 1, current + 1
    return pos


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def page_lines(
    data: bytes, *, start_line: int | None = None, end_line: int | None = None, max_bytes: int = DEFAULT_PAGE_BYTES
) -> Page:
    """The lines ``start_line``…``end_line`` of ``data`` (default: from the first), at most ``max_bytes``."""
    start = 1 if start_line is None else start_line
    if not _whole(start) or start < 1:
        raise InputError(f"start_line must be 1 or more, got {start_line!r}")
    if end_line is not None and (not _whole(end_line) or end_line < start):
        raise InputError(f"end_line must be at least start_line ({start}), got {end_line!r}")
    if not _whole(max_bytes) or not 1 <= max_bytes <= MAX_PAGE_BYTES:
        raise InputError(
            f"max_bytes must be between 1 and {MAX_PAGE_BYTES:,}, got {max_bytes!r}: "
            "read further pages from next_start_line"
        )
    total = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return Page(None, 0, 0, total)
    pos = _line_offset(data, start)
    end, line, truncated, partial = pos, start - 1, False, False
    last = total if end_line is None else min(end_line, total)
    while line < last:
        newline = data.find(b"\n", end)
        stop = len(data) if newline < 0 else newline + 1
        if stop - pos > max_bytes:
            truncated = True
            if line == start - 1:  # one line longer than the cap: cut it
                end, line, partial = pos + max_bytes, start, True
            break
        end, line = stop, line + 1
    text = data[pos:end].decode("utf-8", "ignore" if partial else "strict")
    return Page(text, start, line, total, truncated, partial)
