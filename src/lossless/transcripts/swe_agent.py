"""SWE-agent trajectories (``*.traj``): one JSON document with the agent's full chat ``history``.

Format: ``{"environment", "trajectory": [steps], "history": [messages], "info"}``.
``history`` is an OpenAI-style message list (``role``, ``content``,
``tool_calls``, ``tool_call_ids``) with SWE-agent extras (``thought``,
``action``, ``agent``, ``message_type``, ``is_demo``).  ``trajectory`` repeats
the same steps as action/observation pairs, so only ``history`` is imported.

Invariants: the session id is ``swe-agent:<file stem>:<hash of the opening
messages>`` so two runs on the same task do not merge; a message's key is
``traj:<index>:<hash>``.  ``thought``/``action`` are kept in the metadata only
where they add something the content does not already say.  Messages have no
timestamps: they get the file's modification time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from lossless.errors import TranscriptError
from lossless.records import JSONValue, Message, ToolPart, canonical_json
from lossless.transcripts.base import Entry, Event, ReadContext, SessionInfo, load_document, mapping
from lossless.transcripts.openai_chat import chat_message

__all__ = ["SWEAgentReader"]


class SWEAgentReader:
    """SWE-agent ``.traj`` files."""

    format = "swe-agent"
    incremental = False

    def read(self, stream: IO[bytes], context: ReadContext) -> Iterator[Event]:
        document, size = load_document(stream, context.path)
        if not isinstance(document, Mapping) or not isinstance(document.get("history"), list):
            raise TranscriptError(context.path, None, "a .traj file must be an object with a 'history' list")
        history: list[Any] = document["history"]
        stem = Path(context.path).name.removesuffix(".traj")
        opening = hashlib.sha256(canonical_json(history[:3]).encode("utf-8", "surrogatepass")).hexdigest()[:12]
        info = mapping(document.get("info"))
        meta: dict[str, JSONValue] = {
            k: info[k] for k in ("exit_status", "model_stats", "swe_agent_version") if info.get(k) is not None
        }
        if isinstance(document.get("environment"), str):
            meta["environment"] = document["environment"]
        yield SessionInfo(session_id=f"swe-agent:{stem}:{opening}", title=stem, metadata=meta)
        for index, data in enumerate(history):
            where = f"history[{index}]"
            message = chat_message(
                _as_chat(data),
                index=index,
                when=context.fallback_time,
                where=where,
                path=context.path,
                line=None,
            )
            message = _with_extras(message, data)
            yield Entry(message.event_key or "", message, None, size)


def _as_chat(data: Any) -> Any:
    """SWE-agent's tool messages name their call in ``tool_call_ids`` (a list), not ``tool_call_id``."""
    if isinstance(data, Mapping) and data.get("role") == "tool" and "tool_call_id" not in data:
        ids = data.get("tool_call_ids")
        if isinstance(ids, list) and ids:
            return {**data, "tool_call_id": ids[0]}
    return data


def _with_extras(message: Message, data: Any) -> Message:
    if not isinstance(data, Mapping):
        return message
    meta: dict[str, JSONValue] = dict(message.metadata or {})
    for key in ("agent", "message_type", "is_demo"):
        if data.get(key) is not None:
            meta[key] = data[key]
    content = message.content
    for key in ("thought", "action"):
        value = data.get(key)
        if isinstance(value, str) and value.strip() and value.strip() not in content:
            meta[key] = value
    ids = data.get("tool_call_ids")
    if isinstance(ids, list) and len(ids) > 1 and all(isinstance(p, ToolPart) for p in message.parts):
        meta["tool_call_ids"] = ids
    if not meta:
        return message
    return Message(
        message.role,
        message.content,
        message.parts,
        created_at=message.created_at,
        event_key=message.event_key,
        metadata=meta,
    )
