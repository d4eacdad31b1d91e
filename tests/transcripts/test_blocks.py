"""Content blocks of every provider become parts, and nothing is dropped silently."""

from __future__ import annotations

from lossless.records import FilePart, ReasoningPart, TextPart, ToolPart
from lossless.transcripts.blocks import block_to_parts, content_to_parts, tool_output_text


def test_text_shapes() -> None:
    assert content_to_parts("hi") == [TextPart("hi")]
    assert content_to_parts("") == [] and content_to_parts(None) == []
    for kind in ("text", "input_text", "output_text"):
        assert block_to_parts({"type": kind, "text": "x"}) == [TextPart("x")]
    assert block_to_parts({"type": "text", "text": "x", "citations": [1]}) == [
        TextPart("x", metadata={"citations": [1]})
    ]


def test_reasoning_shapes() -> None:
    assert block_to_parts({"type": "thinking", "thinking": "t", "signature": "s"}) == [
        ReasoningPart("t", signature="s")
    ]
    assert block_to_parts({"type": "thinking", "thinking": "t", "thinkingSignature": "s"}) == [
        ReasoningPart("t", signature="s")
    ]
    redacted = block_to_parts({"type": "redacted_thinking", "data": "opaque"})
    assert redacted == [ReasoningPart("", redacted=True, metadata={"data": "opaque"})]
    summary = block_to_parts({"type": "reasoning", "summary": [{"type": "summary_text", "text": "why"}]})
    assert summary == [ReasoningPart("why")]


def test_tool_shapes() -> None:
    anthropic = block_to_parts({"type": "tool_use", "id": "t1", "name": "read", "input": {"p": 1}, "caller": "x"})
    assert anthropic == [ToolPart(call_id="t1", name="read", input={"p": 1}, metadata={"caller": "x"})]
    pi = block_to_parts({"type": "toolCall", "id": "t2", "name": "ls", "arguments": {"d": "."}, "partialJson": "{"})
    assert pi == [ToolPart(call_id="t2", name="ls", input={"d": "."})]
    openai = block_to_parts({"type": "function_call", "call_id": "t3", "name": "f", "arguments": '{"a": [1]}'})
    assert openai == [ToolPart(call_id="t3", name="f", input={"a": [1]})]
    broken = block_to_parts({"type": "function_call", "call_id": "t4", "name": "f", "arguments": "{not json"})
    assert broken[0].input == "{not json"  # type: ignore[union-attr]


def test_tool_results_keep_their_attachments() -> None:
    parts = block_to_parts(
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "is_error": True,
            "content": [
                {"type": "text", "text": "line 1"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA"}},
                {"type": "text", "text": "line 2"},
            ],
        }
    )
    assert parts == [
        ToolPart(call_id="t1", error="line 1\nline 2", status="error"),
        FilePart(mime="image/png", url="data:image/png;base64,AAA"),
    ]
    assert tool_output_text(None) == ("", [])
    assert tool_output_text({"k": 1}) == ('{"k": 1}', [])
    output = block_to_parts({"type": "function_call_output", "call_id": "c", "output": "done"})
    assert output == [ToolPart(call_id="c", output="done", status="completed")]


def test_files_and_media() -> None:
    assert block_to_parts({"type": "image", "data": "QQ==", "mimeType": "image/jpeg"}) == [
        FilePart(mime="image/jpeg", url="data:image/jpeg;base64,QQ==")
    ]
    assert block_to_parts({"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}) == [
        FilePart(url="https://x/y.png")
    ]
    assert block_to_parts({"type": "image_url", "image_url": {"url": "https://x/z.png"}}) == [
        FilePart(url="https://x/z.png")
    ]
    audio = block_to_parts({"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}})
    assert audio == [FilePart(mime="audio/wav", url="data:audio/wav;base64,UklG")]
    text_doc = block_to_parts(
        {
            "type": "document",
            "title": "notes.md",
            "source": {"type": "text", "media_type": "text/markdown", "data": "# Hi"},
        }
    )
    assert text_doc == [FilePart(mime="text/markdown", name="notes.md"), TextPart("# Hi")]
    openclaw = block_to_parts({"type": "file", "name": "a.csv", "mime": "text/csv", "url": "file:///a.csv"})
    assert openclaw == [FilePart(mime="text/csv", name="a.csv", url="file:///a.csv")]


def test_unknown_blocks_are_kept_as_json_text() -> None:
    [part] = block_to_parts({"type": "hologram", "payload": {"x": 1}})
    assert isinstance(part, TextPart) and part.synthetic
    assert part.metadata == {"block_type": "hologram"}
    assert '"payload": {"x": 1}' in part.text
    mixed = content_to_parts(["plain", 3, {"type": "text", "text": "t"}])
    assert [type(p).__name__ for p in mixed] == ["TextPart", "TextPart", "TextPart"]
    assert mixed[1] == TextPart("3", synthetic=True)
