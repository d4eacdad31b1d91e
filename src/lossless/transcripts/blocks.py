"""Content blocks of every provider and host, turned into parts.

One place knows the block shapes: Anthropic (``text``, ``thinking``,
``redacted_thinking``, ``tool_use``, ``tool_result``, ``image``, ``document``),
OpenAI chat and responses (``text``/``input_text``/``output_text``,
``image_url``, ``input_audio``, ``function_call``, ``function_call_output``,
``reasoning``), and pi / OpenClaw (``toolCall``, ``thinking`` with
``thinkingSignature``, ``image`` with ``data``/``mimeType``, ``file``).

Invariants: nothing is dropped silently.  Keys a part has no field for are
kept in the part's ``metadata``; a block of an unknown type becomes a
synthetic text part holding its JSON, so it stays stored and searchable.
(Streaming leftovers that merely repeat another field, such as pi's
``partialJson`` next to ``arguments``, are the one exception.)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from lossless.records import FilePart, JSONValue, Part, ReasoningPart, TextPart, ToolPart
from lossless.transcripts.base import mapping

__all__ = ["block_to_parts", "content_to_parts", "tool_output_text"]

_TEXT_TYPES = {"text", "input_text", "output_text"}
_DROPPED = {"partialJson", "cache_control"}


def _extra(block: Mapping[str, Any], used: set[str]) -> dict[str, JSONValue] | None:
    rest = {k: v for k, v in block.items() if k not in used and k not in _DROPPED and k != "type"}
    return rest or None


def _str(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _data_url(mime: str | None, data: str) -> str:
    return f"data:{mime or 'application/octet-stream'};base64,{data}"


def _parse_arguments(arguments: Any) -> JSONValue:
    """Tool arguments as JSON: OpenAI sends a JSON *string*; keep it as text if it does not parse."""
    if isinstance(arguments, str):
        try:
            parsed: JSONValue = json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments
        return parsed
    result: JSONValue = arguments
    return result


def tool_output_text(content: Any) -> tuple[str, list[Part]]:
    """The text of a tool result's content (a string or a list of blocks) and any attachments in it."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    if isinstance(content, list):
        texts: list[str] = []
        attachments: list[Part] = []
        for block in content:
            if isinstance(block, Mapping) and block.get("type") in _TEXT_TYPES and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif isinstance(block, Mapping):
                attachments.extend(block_to_parts(block))
            else:
                texts.append(_str(block) or "")
        return "\n".join(texts), attachments
    return _str(content) or "", []


def _image(block: Mapping[str, Any]) -> Part:
    source = block.get("source")
    if isinstance(source, Mapping):
        mime = _str(source.get("media_type"))
        url: str | None
        if source.get("type") == "base64" and isinstance(source.get("data"), str):
            url = _data_url(mime, source["data"])
        else:
            url = _str(source.get("url"))
        return FilePart(mime=mime, url=url, metadata=_extra(block, {"source"}))
    if isinstance(block.get("data"), str):  # pi / OpenClaw
        mime = block.get("mimeType") or block.get("mime")
        return FilePart(
            mime=mime,
            url=_data_url(mime, block["data"]),
            metadata=_extra(block, {"data", "mimeType", "mime"}),
        )
    return FilePart(url=_str(block.get("url")), metadata=_extra(block, {"url"}))


def _text(block: Mapping[str, Any]) -> list[Part]:
    text = block.get("text")
    if not isinstance(text, str):
        return _unknown(block)
    return [TextPart(text, metadata=_extra(block, {"text"}))]


def _thinking(block: Mapping[str, Any]) -> list[Part]:
    text = block.get("thinking", block.get("text", ""))
    signature = block.get("signature") or block.get("thinkingSignature")
    used = {"thinking", "text", "signature", "thinkingSignature"}
    return [ReasoningPart(_str(text) or "", signature=_str(signature), metadata=_extra(block, used))]


def _redacted(block: Mapping[str, Any]) -> list[Part]:
    return [ReasoningPart("", redacted=True, metadata=_extra(block, set()))]


def _reasoning(block: Mapping[str, Any]) -> list[Part]:
    text = block.get("text")
    if text is None and isinstance(block.get("summary"), list):
        text = "\n".join(str(s.get("text", "")) for s in block["summary"] if isinstance(s, Mapping))
    return [ReasoningPart(_str(text) or "", metadata=_extra(block, {"text", "summary"}))]


def _tool_use(block: Mapping[str, Any]) -> list[Part]:
    return [
        ToolPart(
            call_id=_str(block.get("id")),
            name=_str(block.get("name")),
            input=block.get("input") if block.get("input") is not None else {},
            metadata=_extra(block, {"id", "name", "input"}),
        )
    ]


def _tool_call(block: Mapping[str, Any]) -> list[Part]:
    arguments = block.get("arguments", block.get("input"))
    return [
        ToolPart(
            # A Responses item has both: ``id`` names the item, ``call_id`` pairs the call with its output.
            call_id=_str(block.get("call_id") or block.get("id")),
            name=_str(block.get("name")),
            input=_parse_arguments(arguments) if arguments is not None else {},
            metadata=_extra(block, {"id", "call_id", "name", "arguments", "input"}),
        )
    ]


def _tool_result(block: Mapping[str, Any]) -> list[Part]:
    text, attachments = tool_output_text(block.get("content"))
    failed = bool(block.get("is_error"))
    part = ToolPart(
        call_id=_str(block.get("tool_use_id")),
        output=None if failed else text,
        error=text if failed else None,
        status="error" if failed else "completed",
        metadata=_extra(block, {"tool_use_id", "content", "is_error"}),
    )
    return [part, *attachments]


def _function_output(block: Mapping[str, Any]) -> list[Part]:
    text, attachments = tool_output_text(block.get("output"))
    part = ToolPart(
        call_id=_str(block.get("call_id")),
        output=text,
        status="completed",
        metadata=_extra(block, {"call_id", "output"}),
    )
    return [part, *attachments]


def _image_url(block: Mapping[str, Any]) -> list[Part]:
    image = block.get("image_url")
    url = image.get("url") if isinstance(image, Mapping) else image
    return [FilePart(url=_str(url), metadata=_extra(block, {"image_url"}))]


def _audio(block: Mapping[str, Any]) -> list[Part]:
    audio = block.get("input_audio")
    if isinstance(audio, Mapping) and isinstance(audio.get("data"), str):
        mime = f"audio/{audio.get('format', 'wav')}"
        return [FilePart(mime=mime, url=_data_url(mime, audio["data"]), metadata=_extra(block, {"input_audio"}))]
    return _unknown(block)


def _file(block: Mapping[str, Any]) -> list[Part]:
    source = block.get("source")
    if isinstance(source, Mapping):
        mime = _str(source.get("media_type"))
        url: str | None
        if source.get("type") == "base64" and isinstance(source.get("data"), str):
            url = _data_url(mime, source["data"])
        elif source.get("type") == "text" and isinstance(source.get("data"), str):
            return [
                FilePart(
                    mime=mime or "text/plain",
                    name=_str(block.get("title")),
                    metadata=_extra(block, {"title", "source"}),
                ),
                TextPart(source["data"]),
            ]
        else:
            url = _str(source.get("url"))
        return [
            FilePart(mime=mime, name=_str(block.get("title")), url=url, metadata=_extra(block, {"source", "title"}))
        ]
    file = mapping(block.get("file")) or block
    used = {"file", "name", "filename", "mime", "mimeType", "mime_type", "url", "file_data"}
    return [
        FilePart(
            mime=_str(file.get("mime") or file.get("mimeType") or file.get("mime_type")),
            name=_str(file.get("name") or file.get("filename")),
            url=_str(file.get("url") or file.get("file_data")),
            metadata=_extra(block, used),
        )
    ]


def _unknown(block: Mapping[str, Any]) -> list[Part]:
    return [
        TextPart(
            json.dumps(dict(block), ensure_ascii=False, sort_keys=True),
            synthetic=True,
            metadata={"block_type": _str(block.get("type"))},
        )
    ]


_HANDLERS: dict[str, Callable[[Mapping[str, Any]], list[Part]]] = {
    **dict.fromkeys(_TEXT_TYPES, _text),
    "thinking": _thinking,
    "redacted_thinking": _redacted,
    "reasoning": _reasoning,
    "tool_use": _tool_use,
    "server_tool_use": _tool_use,
    "toolCall": _tool_call,
    "function_call": _tool_call,
    "tool_call": _tool_call,
    "tool_result": _tool_result,
    "function_call_output": _function_output,
    "image": lambda b: [_image(b)],
    "input_image": _image_url,
    "image_url": _image_url,
    "input_audio": _audio,
    "document": _file,
    "file": _file,
    "input_file": _file,
}


def block_to_parts(block: Mapping[str, Any]) -> list[Part]:
    """The parts for one content block (most blocks give one part; a tool result may add attachments)."""
    handler = _HANDLERS.get(str(block.get("type")))
    return handler(block) if handler else _unknown(block)


def content_to_parts(content: Any) -> list[Part]:
    """Parts for a message's ``content``: a string, a list of blocks, or None."""
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)] if content else []
    if isinstance(content, Mapping):
        return block_to_parts(content)
    if isinstance(content, list):
        parts: list[Part] = []
        for block in content:
            if isinstance(block, Mapping):
                parts.extend(block_to_parts(block))
            elif isinstance(block, str):
                parts.append(TextPart(block))
            else:
                parts.append(TextPart(json.dumps(block), synthetic=True))
        return parts
    return [TextPart(json.dumps(content, ensure_ascii=False), synthetic=True)]
