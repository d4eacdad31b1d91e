"""Claude Code session JSONL (``~/.claude/projects/<project>/<session>.jsonl``).

Format: one JSON record per line.  ``user`` and ``assistant`` records carry an
Anthropic-style ``message``; one API response is spread over several
``assistant`` records that share ``message.id``.  ``system`` records are
telemetry, except ``compact_boundary``, which marks a host compaction; the
record after it (``isCompactSummary``) holds the host's summary.  ``summary``
records title the session.  Sub-agents write their own files under
``<session>/subagents/agent-<id>.jsonl`` with ``agentId`` set, and newer
versions also record each sub-agent message inline, in a ``progress`` record
of type ``agent_progress`` (``data.message`` is a user or assistant record,
``data.agentId`` the sub-agent, ``parentToolUseID`` the parent's Task call).
Other ``progress`` records (``bash_progress``, ``hook_progress``: live output
that the tool result repeats), ``file-history-snapshot`` and
``queue-operation`` records are not conversation.

Invariants and decisions:

* One record is one message, keyed by the record's ``uuid``, so a response
  that was still being written when the file was last read is completed on the
  next read without duplicating its first records.
* Records are imported in file order.  The ``parentUuid`` chain is not
  followed: in real files it is broken at compaction boundaries (the
  boundary's logical parent is often absent) and fans out for parallel tool
  calls, so a leaf-path walk would lose most of the conversation.
* A ``user`` record made only of ``tool_result`` blocks becomes a ``tool``
  message; ``isMeta`` text (command caveats, hook output) becomes synthetic text.
* A sub-agent file becomes its own conversation, ``<session id>/agent-<id>``,
  whose parent is the main session.  An ``agent_progress`` record in the main
  file becomes a message of that same conversation (its ``thread``), keyed by
  the inner record's ``uuid``: a sub-agent both inline and in its own file is
  stored once.  In a main file, ``isSidechain`` records (older versions wrote
  sub-agent turns inline, also in their own files) are skipped.
* Every record that does not become a message is reported as skipped with its
  type (``progress:bash_progress``, ``system:turn_duration`` …) and size.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import IO, Any

from lossless.records import CompactionPart, JSONValue, Message, Part, Role, TextPart, ToolPart
from lossless.transcripts.base import (
    Entry,
    Event,
    JsonLine,
    ReadContext,
    SessionInfo,
    Skipped,
    iter_jsonl,
    located,
    mapping,
    timestamp_or,
)
from lossless.transcripts.blocks import content_to_parts

__all__ = ["ClaudeCodeReader"]

_SESSION_META = ("cwd", "gitBranch", "version", "slug")


def _assistant_metadata(record: Mapping[str, Any], message: Mapping[str, Any]) -> dict[str, JSONValue] | None:
    pairs = (
        ("model", message.get("model")),
        ("provider_message_id", message.get("id")),
        ("stop_reason", message.get("stop_reason")),
        ("request_id", record.get("requestId")),
        ("usage", message.get("usage")),
        ("api_error", record.get("isApiErrorMessage")),
    )
    meta: dict[str, JSONValue] = {ours: value for ours, value in pairs if value is not None}
    return meta or None


def _user_message(record: Mapping[str, Any], message: Mapping[str, Any], when: datetime | None, key: str) -> Message:
    parts = content_to_parts(message.get("content"))
    if record.get("isCompactSummary"):
        text = "\n\n".join(p.text for p in parts if isinstance(p, TextPart))
        return Message.from_parts(
            "user",
            [CompactionPart(summary=text, auto=True)],
            created_at=when,
            event_key=key,
            metadata={"host_role": "compact_summary"},
        )
    if record.get("isMeta"):
        parts = [TextPart(p.text, synthetic=True, metadata=p.metadata) if isinstance(p, TextPart) else p for p in parts]
    role: Role = "user"
    if parts and all(isinstance(p, ToolPart) for p in parts):
        role = "tool"
    meta = {"meta": True} if record.get("isMeta") else None
    return Message.from_parts(role, parts, created_at=when, event_key=key, metadata=meta)


def _compact_boundary(record: Mapping[str, Any], when: datetime | None, key: str) -> Message:
    info = mapping(record.get("compactMetadata"))
    tokens = info.get("preTokens")
    trigger = info.get("trigger")
    part: Part = CompactionPart(
        auto=None if trigger is None else trigger == "auto",
        tokens_before=tokens if isinstance(tokens, int) else None,
    )
    content = record.get("content")
    text = content if isinstance(content, str) else "Conversation compacted"
    return Message("system", text, (part,), created_at=when, event_key=key, metadata={"host_role": "compact_boundary"})


def _conversation_message(
    kind: str, record: Mapping[str, Any], message: Mapping[str, Any], when: datetime | None, key: str
) -> Message:
    if kind == "user":
        return _user_message(record, message, when, key)
    return Message.from_parts(
        "assistant",
        content_to_parts(message.get("content")),
        created_at=when,
        event_key=key,
        metadata=_assistant_metadata(record, message),
    )


def _agent_progress(
    record: Mapping[str, Any], item: JsonLine, context: ReadContext, fallback: datetime | None
) -> Iterator[Event]:
    """A sub-agent's message recorded inline: an entry of the sub-agent's conversation (its thread)."""
    data = mapping(record.get("data"))
    inner = mapping(data.get("message"))
    kind, key, message = inner.get("type"), inner.get("uuid"), inner.get("message")
    agent = data.get("agentId") or record.get("parentToolUseID")
    if (
        kind not in ("user", "assistant")
        or not isinstance(key, str)
        or not isinstance(message, Mapping)
        or not (isinstance(agent, str) and agent)
    ):
        yield Skipped(item.line, "progress:agent_progress", item.end_offset, size=len(item.raw))
        return
    meta: dict[str, JSONValue] = {"subagent_id": agent, "inline": True}
    if isinstance(record.get("parentToolUseID"), str):
        meta["parent_tool_call_id"] = record["parentToolUseID"]
    yield SessionInfo(thread=agent, metadata=meta)
    when = timestamp_or(inner.get("timestamp"), fallback, path=context.path, line=item.line)
    with located(context.path, item.line):
        ours = _conversation_message(kind, inner, message, when, key)
    yield Entry(key, ours, item.line, item.end_offset, thread=agent)


class ClaudeCodeReader:
    """Claude Code transcripts, main sessions and sub-agents."""

    format = "claude-code"
    incremental = True

    def read(self, stream: IO[bytes], context: ReadContext) -> Iterator[Event]:
        announced = False
        subagent = False
        last_time = context.fallback_time
        for item in iter_jsonl(stream, context):
            record = item.value
            kind = record.get("type")
            if not announced and isinstance(record.get("sessionId"), str):
                announced = True
                session = record["sessionId"]
                agent = record.get("agentId")
                subagent = isinstance(agent, str) and bool(agent)
                meta: dict[str, JSONValue] = {k: record[k] for k in _SESSION_META if record.get(k) is not None}
                if subagent:
                    meta["subagent_id"] = agent
                yield SessionInfo(
                    session_id=f"{session}/agent-{agent}" if subagent else session,
                    parent_session_id=session if subagent else None,
                    started_at=timestamp_or(record.get("timestamp"), None, path=context.path, line=item.line),
                    metadata=meta,
                )
            when = timestamp_or(record.get("timestamp"), last_time, path=context.path, line=item.line)
            last_time = when or last_time
            key = record.get("uuid")
            message = record.get("message")
            if kind == "summary" and isinstance(record.get("summary"), str):
                yield SessionInfo(title=record["summary"])
                yield Skipped(item.line, "summary", item.end_offset, size=len(item.raw))
            elif kind in ("user", "assistant") and isinstance(key, str) and isinstance(message, Mapping):
                if record.get("isSidechain") and not subagent:
                    yield Skipped(item.line, "sidechain", item.end_offset, size=len(item.raw))
                    continue
                with located(context.path, item.line):
                    ours = _conversation_message(kind, record, message, when, key)
                yield Entry(key, ours, item.line, item.end_offset)
            elif kind == "system" and record.get("subtype") == "compact_boundary" and isinstance(key, str):
                with located(context.path, item.line):
                    ours = _compact_boundary(record, when, key)
                yield Entry(key, ours, item.line, item.end_offset)
            elif kind == "progress" and mapping(record.get("data")).get("type") == "agent_progress" and not subagent:
                yield from _agent_progress(record, item, context, when)
            else:
                if kind == "system" and record.get("subtype"):
                    label = f"system:{record['subtype']}"
                elif kind == "progress" and isinstance(mapping(record.get("data")).get("type"), str):
                    label = f"progress:{record['data']['type']}"
                else:
                    label = str(kind)
                yield Skipped(item.line, label, item.end_offset, size=len(item.raw))
