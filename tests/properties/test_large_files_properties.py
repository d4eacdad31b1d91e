"""Interception is lossless: ``restore(rewrite(m)) == m`` for arbitrary messages, whatever they hold."""

from __future__ import annotations

import base64

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lossless.large_files import FileRef, file_id_for, file_ids_in, find_payloads, referenced_file_ids, restore, rewrite
from lossless.records import FilePart, Message, TextPart, ToolPart
from lossless.tokens import EstimatingCounter

from .strategies import messages, metadata, roles, text

COUNTER = EstimatingCounter()
THRESHOLD = 8  # tokens: small, so that short generated bodies are intercepted too

chars = st.characters(blacklist_categories=("Cs",))
noise = st.text(alphabet=st.sampled_from("<>/=\"' \n\rfile\\&;:,|[]\x00é😀"), max_size=30)
body = st.text(alphabet=chars, min_size=0, max_size=120)
attr_value = st.text(alphabet=chars, max_size=12)


@st.composite
def attribute(draw: st.DrawFn) -> str:
    key = draw(st.sampled_from(["name", "mime", "NAME", "type", "x", "filename"]))
    value = draw(attr_value)
    style = draw(st.sampled_from(["dq", "sq", "bare", "flag", "escaped"]))
    if style == "dq":
        return f'{key}="{value.replace(chr(34), "")}"'
    if style == "sq":
        return f"{key}='{value.replace(chr(39), '')}'"
    if style == "bare":
        return f"{key}={value.replace(' ', '_') or 'v'}"
    if style == "escaped":
        return f'{key}="{value.replace(chr(34), chr(92) + chr(34))}"'
    return key


@st.composite
def file_block(draw: st.DrawFn) -> str:
    attrs = draw(st.lists(attribute(), max_size=3))
    space = draw(st.sampled_from([" ", "\n", "  ", "\t"]))
    opening = "<file" + "".join(space + a for a in attrs) + draw(st.sampled_from([">", " >", "/>"]))
    lead = draw(st.sampled_from(["", "\n", "\r\n"]))
    trail = draw(st.sampled_from(["", "\n", "\r\n"]))
    closing = draw(st.sampled_from(["</file>", "</file >", "", "</file></file>"]))
    return opening + lead + draw(body) + trail + closing


@st.composite
def data_url(draw: st.DrawFn) -> str:
    raw = draw(st.binary(max_size=200))
    encoded = base64.b64encode(raw).decode()
    if draw(st.booleans()):
        encoded += draw(st.sampled_from(["", "=", "\n", "A", "!"]))
    mime = draw(st.sampled_from(["image/png", "application/pdf", "", "text/plain;charset=utf-8"]))
    return f"data:{mime};base64,{encoded}"


rich_text = st.lists(st.one_of(text, noise, file_block(), data_url()), max_size=5).map("".join)

rich_parts = st.one_of(
    st.builds(TextPart, text=rich_text, metadata=metadata),
    st.builds(
        ToolPart,
        call_id=st.none() | text,
        name=st.none() | text,
        input=st.none() | st.dictionaries(text, text, max_size=2),
        output=st.none() | rich_text,
        error=st.none() | text,
    ),
    st.builds(FilePart, mime=st.none() | text, name=st.none() | attr_value, url=st.none() | data_url() | text),
)


@st.composite
def rich_messages(draw: st.DrawFn) -> Message:
    parts = draw(st.lists(rich_parts, max_size=4))
    role = draw(roles)
    meta = draw(metadata)
    if draw(st.booleans()):
        return Message.from_parts(role, parts, metadata=meta)
    content = draw(st.one_of(rich_text, st.just("")))
    if parts and draw(st.booleans()):
        # a content of the caller's own that repeats a part's text verbatim
        part = parts[0]
        content += getattr(part, "output", None) or getattr(part, "text", None) or ""
    return Message(role, content, tuple(parts), metadata=meta)


def intercept_and_restore(message: Message) -> None:
    payloads = find_payloads(message, threshold=THRESHOLD, counter=COUNTER)
    refs = [
        FileRef(file_id_for("scope", p.content_hash, p.name, p.mime), p.name, p.mime or "x/y", len(p.data), "sum")
        for p in payloads
    ]
    blobs = {ref.id: p.data for p, ref in zip(payloads, refs, strict=True)}
    rewritten = rewrite(message, payloads, refs)
    assert restore(rewritten, blobs.__getitem__) == message
    assert set(referenced_file_ids(rewritten)) == set(blobs)
    assert set(file_ids_in(rewritten.content)) <= set(blobs)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=rich_messages())
def test_restore_inverts_interception(message: Message) -> None:
    intercept_and_restore(message)


@settings(max_examples=100, deadline=None)
@given(message=messages())
def test_restore_inverts_interception_of_any_message(message: Message) -> None:
    intercept_and_restore(message)
