"""Provider message formats: stored messages and summaries as OpenAI chat messages or Anthropic messages.

Invariants:

* **Every tool result follows its call, every call has its result.**  A
  result that arrived after other messages is moved up to sit right after its
  call (both APIs require that).  After rendering,
  :func:`sanitize_openai` / :func:`sanitize_anthropic` turn a result
  whose call is not in the context, or a call whose result is not, into plain
  text — the model still reads what happened, and the provider's API accepts
  the request.
* Empty assistant messages are dropped.  Anthropic output alternates roles
  (consecutive messages of one role are merged) and starts with a user turn.
* Reasoning parts are left out (providers reject replayed reasoning without
  its original context); host compaction summaries and other parts render as
  text, so nothing the model needs disappears silently.
* Stored text cannot pass for a summary: :func:`quote_wrappers` escapes every
  ``<summary`` / ``</summary`` (and ``<summary_ref``) tag in the text the model
  reads of a stored message (``&lt;summary …``); the store keeps it verbatim.
* Pure: values in, JSON-ready dicts out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

from lossless.records import (
    CompactionPart,
    FilePart,
    MessageRecord,
    ReasoningPart,
    TextPart,
    ToolPart,
    render_parts,
)

__all__ = [
    "OutputFormat",
    "quote_stored",
    "quote_wrappers",
    "render_anthropic",
    "render_openai",
    "sanitize_anthropic",
    "sanitize_openai",
]

OutputFormat = Literal["openai", "anthropic"]
Chat = dict[str, Any]


def _arguments(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value if value is not None else {}, ensure_ascii=False)


def _input_object(value: object) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"input": value}
        return parsed if isinstance(parsed, dict) else {"input": parsed}
    return {} if value is None else {"input": value}


def _result_text(part: ToolPart) -> str:
    if part.error is not None:
        return part.error if part.output is None else f"{part.output}\n{part.error}"
    return part.output or ""


def _image(part: FilePart) -> bool:
    return bool(part.url) and (part.mime or "").startswith("image/")


def _other_text(part: object) -> str:
    return render_parts([part]) if not isinstance(part, ReasoningPart) else ""  # type: ignore[list-item]


# ---------------------------------------------------------------------- summary look-alikes

_WRAPPER_TAG = re.compile(r"<(/?\s*summary(?:_ref)?)(?=[\s/>]|$)", re.IGNORECASE)


def quote_wrappers(text: str) -> str:
    """``text`` with every tag that could pass for a summary wrapper escaped: ``<summary`` → ``&lt;summary``."""
    if "<" not in text:
        return text
    return _WRAPPER_TAG.sub(lambda found: "&lt;" + found.group(1), text)


def _quote_blocks(content: object) -> object:
    if isinstance(content, str):
        return quote_wrappers(content)
    if not isinstance(content, list):
        return content
    blocks: list[object] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            block = {**block, "text": quote_wrappers(block["text"])}
        elif isinstance(block, dict) and block.get("type") == "tool_result":
            block = {**block, "content": _quote_blocks(block.get("content"))}
        blocks.append(block)
    return blocks


def quote_stored(chats: list[Chat]) -> list[Chat]:
    """Rendered stored messages with :func:`quote_wrappers` applied to all the text the model reads.

    (Tool-call inputs, the model's own structured arguments, are left as they are.)
    """
    return [{**chat, "content": _quote_blocks(chat["content"])} if "content" in chat else chat for chat in chats]


# ---------------------------------------------------------------------- OpenAI


def _openai_user_content(parts: Sequence[object]) -> str | list[Chat]:
    blocks: list[Chat] = []
    for part in parts:
        if isinstance(part, TextPart):
            blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, FilePart) and _image(part):
            blocks.append({"type": "image_url", "image_url": {"url": part.url}})
        elif isinstance(part, CompactionPart):
            blocks.append({"type": "text", "text": part.summary or "[earlier history was compacted by the host]"})
        else:
            text = _other_text(part)
            if text:
                blocks.append({"type": "text", "text": text})
    if all(b["type"] == "text" for b in blocks):
        return "\n\n".join(b["text"] for b in blocks)
    return blocks


def render_openai(record: MessageRecord) -> list[Chat]:
    """One stored message as OpenAI chat messages (a combined call+result part becomes two)."""
    if record.role == "system":
        return [{"role": "system", "content": record.content}]
    calls = [p for p in record.parts if isinstance(p, ToolPart) and p.call_id and p.input is not None]
    results = [p for p in record.parts if isinstance(p, ToolPart) and p.call_id and p.is_result]
    others = [p for p in record.parts if not (isinstance(p, ToolPart) and p.call_id and (p in calls or p in results))]
    out: list[Chat] = []
    if record.role == "assistant":
        text = "\n\n".join(t for t in (_other_text(p) for p in others) if t)
        message: Chat = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [
                {
                    "id": p.call_id,
                    "type": "function",
                    "function": {"name": p.name or "tool", "arguments": _arguments(p.input)},
                }
                for p in calls
            ]
        out.append(message)
        # Parts that carry both halves (call and output) answer themselves right away.
        out += [{"role": "tool", "tool_call_id": p.call_id, "content": _result_text(p)} for p in calls if p.is_result]
        return out
    out += [{"role": "tool", "tool_call_id": p.call_id, "content": _result_text(p)} for p in results if p not in calls]
    if others or not out:
        content = _openai_user_content(others) if record.role != "tool" else render_parts(others)
        if content:
            out.append({"role": "user", "content": content})
    return out


def _answers(
    messages: list[Chat], is_call: Callable[[Chat], Sequence[str]], results: Callable[[Chat], Sequence[str]]
) -> dict[tuple[int, str], int]:
    """``(call message index, call id)`` -> index of the later message holding its result.

    A result answers the nearest earlier call with its id, so a reused id is
    matched to the right call even when other messages sit in between.
    """
    last_call: dict[str, int] = {}
    found: dict[tuple[int, str], int] = {}
    for index, message in enumerate(messages):
        for call_id in results(message):
            caller = last_call.get(call_id)
            if caller is not None and (caller, call_id) not in found:
                found[caller, call_id] = index
        for call_id in is_call(message):
            last_call[call_id] = index
    return found


def sanitize_openai(messages: list[Chat]) -> list[Chat]:
    """Pair calls with results (see the module invariants) and drop empty assistant messages.

    OpenAI requires a call's results right after the assistant message that makes
    it, so a result that arrived later (a user interjected first) is moved up.
    """
    answers = _answers(
        messages,
        lambda m: [c["id"] for c in m.get("tool_calls") or []] if m.get("role") == "assistant" else [],
        lambda m: [m["tool_call_id"]] if m.get("role") == "tool" else [],
    )
    placed = set(answers.values())
    out: list[Chat] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            calls = message.get("tool_calls") or []
            # One call per id in a message (its result can answer only one); repeats become text.
            firsts = {c["id"]: c for c in reversed(calls)}
            kept = [c for c in calls if (index, c["id"]) in answers and firsts[c["id"]] is c]
            lost = [c for c in calls if not any(c is k for k in kept)]
            text = message.get("content") or ""
            if lost:
                notes = [
                    f"[tool call {c['function']['name']} {c['function']['arguments']} — no result in context]"
                    for c in lost
                ]
                text = "\n\n".join([t for t in [text, *notes] if t])
            if not kept and not text:
                continue
            fixed: Chat = {"role": "assistant", "content": text or None}
            if kept:
                fixed["tool_calls"] = kept
            out.append(fixed)
            out += [messages[answers[index, c["id"]]] for c in kept]
        elif role == "tool":
            if index not in placed:
                out.append(
                    {
                        "role": "user",
                        "content": f"[result of tool call {message['tool_call_id']}]\n{message['content']}",
                    }
                )
        else:
            out.append(message)
    return out


# ---------------------------------------------------------------------- Anthropic


def _data_url(url: str) -> tuple[str, str] | None:
    if url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return head or "application/octet-stream", data
    return None


def _anthropic_image(part: FilePart) -> Chat:
    decoded = _data_url(part.url or "")
    if decoded:
        return {"type": "image", "source": {"type": "base64", "media_type": decoded[0], "data": decoded[1]}}
    return {"type": "image", "source": {"type": "url", "url": part.url}}


def render_anthropic(record: MessageRecord) -> list[Chat]:
    """One stored message as Anthropic messages (role ``user`` or ``assistant``, content blocks)."""
    if record.role == "system":
        return [{"role": "user", "content": [{"type": "text", "text": f"[system] {record.content}"}]}]
    if record.role == "assistant":
        blocks: list[Chat] = []
        answers: list[Chat] = []
        for part in record.parts:
            if isinstance(part, ToolPart) and part.call_id and part.input is not None:
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": part.call_id,
                        "name": part.name or "tool",
                        "input": _input_object(part.input),
                    }
                )
                if part.is_result:
                    answers.append(_tool_result(part))
            else:
                text = _other_text(part)
                if text:
                    blocks.append({"type": "text", "text": text})
        out: list[Chat] = [{"role": "assistant", "content": blocks}]
        if answers:
            out.append({"role": "user", "content": answers})
        return out
    content: list[Chat] = []
    for part in record.parts:
        if isinstance(part, ToolPart) and part.call_id and part.is_result and part.input is None:
            content.append(_tool_result(part))
        elif isinstance(part, FilePart) and _image(part):
            content.append(_anthropic_image(part))
        elif isinstance(part, CompactionPart):
            content.append({"type": "text", "text": part.summary or "[earlier history was compacted by the host]"})
        else:
            text = _other_text(part)
            if text:
                content.append({"type": "text", "text": text})
    return [{"role": "user", "content": content}]


def _tool_result(part: ToolPart) -> Chat:
    block: Chat = {"type": "tool_result", "tool_use_id": part.call_id, "content": _result_text(part)}
    if part.status == "error" or (part.error is not None and part.output is None):
        block["is_error"] = True
    return block


def sanitize_anthropic(messages: list[Chat]) -> list[Chat]:
    """Pair tool_use with tool_result in the next user turn, merge same-role turns, start with a user turn.

    A result that arrived later (other turns came first) is moved up to the user
    turn right after its call.
    """
    out: list[Chat] = []
    merged = _merge_turns(_move_results_up(messages))
    for index, message in enumerate(merged):
        if message["role"] == "assistant":
            following = merged[index + 1]["content"] if index + 1 < len(merged) else []
            out.append({"role": "assistant", "content": _answered_uses(message["content"], following)})
        else:
            previous = out[-1]["content"] if out and out[-1]["role"] == "assistant" else []
            out.append({"role": "user", "content": _called_results(message["content"], previous)})
    if out and out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": [{"type": "text", "text": "[the conversation so far]"}]})
    return out


def _move_results_up(messages: list[Chat]) -> list[Chat]:
    answers = _answers(
        messages,
        lambda m: [b["id"] for b in m["content"] if b.get("type") == "tool_use"] if m["role"] == "assistant" else [],
        lambda m: (
            [b["tool_use_id"] for b in m["content"] if b.get("type") == "tool_result"] if m["role"] == "user" else []
        ),
    )
    moved: set[int] = set()  # id() of each result block moved up to its call
    ordered: list[Chat] = []
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            ordered.append({"role": message["role"], "content": [b for b in message["content"] if id(b) not in moved]})
            continue
        ordered.append(message)
        results: list[Chat] = []
        for call_id in dict.fromkeys(b["id"] for b in message["content"] if b.get("type") == "tool_use"):
            if (index, call_id) in answers:
                source = messages[answers[index, call_id]]["content"]
                block = next(b for b in source if b.get("type") == "tool_result" and b["tool_use_id"] == call_id)
                moved.add(id(block))
                results.append(block)
        if results:
            ordered.append({"role": "user", "content": results})
    return ordered


def _merge_turns(messages: list[Chat]) -> list[Chat]:
    merged: list[Chat] = []
    for message in messages:
        if not message["content"]:
            continue
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1] = {"role": message["role"], "content": [*merged[-1]["content"], *message["content"]]}
        else:
            merged.append({"role": message["role"], "content": list(message["content"])})
    return merged


def _answered_uses(content: list[Chat], following: list[Chat]) -> list[Chat]:
    """An assistant turn's blocks, with each tool_use the next turn does not answer turned into text."""
    answered = {b["tool_use_id"] for b in following if b.get("type") == "tool_result"}
    # One tool_use per id in a turn: the last one, which its result answers; repeats become text.
    kept: set[int] = set()
    for position in range(len(content) - 1, -1, -1):
        block = content[position]
        if block.get("type") == "tool_use" and block["id"] in answered:
            answered.discard(block["id"])
            kept.add(position)
    blocks: list[Chat] = []
    for position, block in enumerate(content):
        if block.get("type") == "tool_use" and position not in kept:
            arguments = json.dumps(block["input"], ensure_ascii=False)
            blocks.append({"type": "text", "text": f"[tool call {block['name']} {arguments} — no result in context]"})
        else:
            blocks.append(block)
    return blocks


def _called_results(content: list[Chat], previous: list[Chat]) -> list[Chat]:
    """A user turn's blocks, results first, with each result the turn before did not call turned into text."""
    called = {b["id"] for b in previous if b.get("type") == "tool_use"}
    blocks: list[Chat] = []
    for block in content:
        if block.get("type") == "tool_result" and block["tool_use_id"] in called:
            called.discard(block["tool_use_id"])  # one result per call: a repeat becomes text
            blocks.append(block)
        elif block.get("type") == "tool_result":
            text = block["content"] if isinstance(block["content"], str) else json.dumps(block["content"])
            blocks.append({"type": "text", "text": f"[result of tool call {block['tool_use_id']}]\n{text}"})
        else:
            blocks.append(block)
    # Tool results answer the turn before: they come first in the user turn.
    blocks.sort(key=lambda b: b.get("type") != "tool_result")
    return blocks
