"""The agent tools' contracts: names, descriptions and JSON Schemas, defined once.

Every adapter (the MCP server, the HTTP API, function-calling integrations, the
expansion sub-agent) exposes exactly these definitions, so an agent sees the same
tool whichever way it reaches the engine.

Invariants:

* A tool's name is unique in :data:`TOOLS` and matches ``^[a-z][a-z0-9_]{0,63}$``
  (valid for OpenAI, Anthropic and MCP alike).
* ``input_schema`` is a JSON Schema object (``{"type": "object", ...}``) whose
  ``properties`` and ``required`` describe the arguments exactly;
  ``additionalProperties`` is false, so an adapter can reject unknown arguments
  with a clear message before the engine sees them.
* Definitions are plain data: no I/O, no engine, no adapter here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["DESCRIBE", "EXPAND", "EXPAND_QUERY", "GREP", "SUBAGENT_TOOLS", "TOOLS", "ToolSpec", "register"]

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One agent tool: what it is called, what it does, and the arguments it takes."""

    name: str
    description: str
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} must match {_NAME.pattern}")
        if self.input_schema.get("type") != "object":
            raise ValueError(f"tool {self.name!r}: input_schema must be a JSON Schema of type 'object'")

    def openai(self) -> dict[str, Any]:
        """The definition in OpenAI's function-calling shape."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.input_schema)},
        }

    def anthropic(self) -> dict[str, Any]:
        """The definition in Anthropic's tool-use shape."""
        return {"name": self.name, "description": self.description, "input_schema": dict(self.input_schema)}


_registry: dict[str, ToolSpec] = {}

#: Every tool, by name (read-only view; tools are added with :func:`register` at import time).
TOOLS: Mapping[str, ToolSpec] = MappingProxyType(_registry)


def register(spec: ToolSpec) -> ToolSpec:
    """Add a tool to :data:`TOOLS` (a module defining tools calls this once per tool, at import)."""
    existing = _registry.get(spec.name)
    if existing is not None and existing != spec:
        raise ValueError(f"tool {spec.name!r} is defined twice with different contracts")
    _registry[spec.name] = spec
    return spec


# ---------------------------------------------------------------------- the retrieval tools

_CONVERSATION = {
    "conversation_id": {
        "type": "integer",
        "minimum": 1,
        "description": "Search or read this conversation only. Default: every conversation in your reach — "
        "in a session of your own, that conversation and its sub-agents; with no session (as under lcm mcp), "
        "every conversation of your agent.",
    },
    "all_conversations": {
        "type": "boolean",
        "description": "Reach every conversation of your agent instead of only your own (default false).",
    },
}

GREP = register(
    ToolSpec(
        "lcm_grep",
        "Search the whole stored history of the conversation, including what compaction summarised away. "
        "mode 'regex' (default; RE2 syntax, linear time), 'full_text' (words, \"exact phrases\", prefix*, OR), "
        "'semantic' (messages and summaries by meaning) or 'hybrid' (meaning and words). scope 'files' searches "
        "the lines of stored large files. Returns matches newest first (semantic: best first) with [msg#id] / "
        "[sum_…] / [file_…] citations and a snippet each; follow up with lcm_describe or lcm_expand. "
        "To answer a question in plain words, use mode 'hybrid' (best ranked, by words alone where no embedder is "
        "installed; add context=1 to see the turns around each match), or 'full_text' with sort 'relevance'; "
        "a full_text query whose words never all occur together falls back to any of its words, best first, "
        "and says so.",
        {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "Regex or query."},
                "mode": {
                    "type": "string",
                    "enum": ["regex", "full_text", "semantic", "hybrid"],
                    "description": "Default regex; semantic and hybrid search messages and summaries, not files.",
                },
                "scope": {
                    "type": "string",
                    "enum": ["messages", "summaries", "both", "files"],
                    "description": "What to search (default both: messages and summaries; files: stored large "
                    "files, text only, one match per line).",
                },
                **_CONVERSATION,
                "since": {"type": "string", "description": "ISO-8601 time; only items at or after it."},
                "before": {"type": "string", "description": "ISO-8601 time; only items before it."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 200, "description": "Default 50."},
                "sort": {
                    "type": "string",
                    "enum": ["recency", "relevance"],
                    "description": "Newest first (default) or best full-text match first.",
                },
                "context": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 5,
                    "description": "Return each message match with this many turns before and after it (default 0).",
                },
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
    )
)

DESCRIBE = register(
    ToolSpec(
        "lcm_describe",
        "Look up a summary (sum_…), a stored large file (file_…) or a message (msg#N) by id: a summary's content, "
        "depth, time range, lineage, source messages and the token cost of expanding it; a file's metadata, "
        "exploration summary and its lines page by page; a message's conversation, position, time and whole content.",
        {
            "type": "object",
            "properties": {
                "id": {
                    "type": "string",
                    "pattern": "^(sum_|file_|msg#[0-9])",
                    "description": "A sum_…, file_… or msg#N id, as the other tools cite them.",
                },
                **_CONVERSATION,
                "token_cap": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Say whether expanding the whole summary would fit in this many tokens.",
                },
                "start_line": {"type": "integer", "minimum": 1, "description": "Files: first line to show."},
                "end_line": {"type": "integer", "minimum": 1, "description": "Files: last line to show."},
            },
            "required": ["id"],
            "additionalProperties": False,
        },
    )
)

EXPAND = register(
    ToolSpec(
        "lcm_expand",
        "Expand summaries back into what they were made from: the summaries below them and (with "
        "include_messages) the original messages, in order, with ids, up to token_cap. Give summary_ids, or a "
        "query to expand its best-matching summaries.",
        {
            "type": "object",
            "properties": {
                "summary_ids": {
                    "type": "array",
                    "items": {"type": "string", "pattern": "^sum_"},
                    "minItems": 1,
                    "maxItems": 50,
                    "description": "Summaries to expand (or give query).",
                },
                "query": {"type": "string", "minLength": 1, "description": "Full-text query; expands the top hits."},
                "max_depth": {"type": "integer", "minimum": 1, "maximum": 64, "description": "Levels (default 3)."},
                "token_cap": {"type": "integer", "minimum": 1, "description": "Most tokens to return."},
                "include_messages": {"type": "boolean", "description": "Include source messages (default false)."},
                **_CONVERSATION,
            },
            "additionalProperties": False,
        },
    )
)

EXPAND_QUERY = register(
    ToolSpec(
        "lcm_expand_query",
        "Ask a question about compacted history. A sub-agent with read-only access to the relevant "
        "conversations expands summaries and reads the original messages, then returns a focused answer "
        "(at most max_tokens) citing the ids it used. Give a query to find the relevant summaries, or summary_ids.",
        {
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "minLength": 1, "description": "The question to answer."},
                "query": {"type": "string", "minLength": 1, "description": "Full-text query to find summaries."},
                "summary_ids": {
                    "type": "array",
                    "items": {"type": "string", "pattern": "^sum_"},
                    "minItems": 1,
                    "maxItems": 50,
                    "description": "Summaries to read from (or give query).",
                },
                "max_tokens": {"type": "integer", "minimum": 50, "maximum": 20000, "description": "Default 2000."},
                "token_cap": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Most tokens the sub-agent may read (default from settings).",
                },
                **_CONVERSATION,
            },
            "required": ["prompt"],
            "additionalProperties": False,
        },
    )
)

#: The tools an expansion sub-agent gets: never lcm_expand_query (no sub-agent spawns another).
SUBAGENT_TOOLS: tuple[ToolSpec, ...] = (GREP, DESCRIBE, EXPAND)


# ----------------------------------------------------------------- lifecycle tools (hosts that push their transcript)

_MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "role": {
            "type": "string",
            "enum": ["system", "user", "assistant", "tool"],
            "description": "Who wrote it; tool for a tool's result.",
        },
        "content": {"type": "string", "description": "The message text (rendered from parts when omitted)."},
        "parts": {
            "type": "array",
            "items": {"type": "object"},
            "description": "Structured parts (text, tool, reasoning, file, …) as lossless stores them.",
        },
        "created_at": {"type": "string", "description": "ISO 8601 time with a zone (default: now)."},
        "event_key": {
            "type": "string",
            "minLength": 1,
            "maxLength": 512,
            "description": "A stable id of the message: ingesting the same key again is a no-op.",
        },
        "metadata": {"type": "object", "description": "Any JSON object, stored with the message as given."},
    },
    "required": ["role"],
    "additionalProperties": False,
}

register(
    ToolSpec(
        "lcm_ingest",
        "Store messages of a session verbatim in lossless memory, in order. Messages with an event_key that "
        "is already stored are skipped, so sending a turn twice is harmless. Returns how many were stored.",
        {
            "type": "object",
            "properties": {
                "session_id": {"type": "string", "minLength": 1, "description": "The host's session id."},
                "messages": {
                    "type": "array",
                    "items": _MESSAGE_SCHEMA,
                    "minItems": 1,
                    "description": "The new messages, oldest first; each is stored verbatim.",
                },
                "session_key": {"type": "string", "minLength": 1, "description": "Optional routing key."},
            },
            "required": ["session_id", "messages"],
            "additionalProperties": False,
        },
    )
)

register(
    ToolSpec(
        "lcm_compact",
        "Compact a conversation's older history into summaries now (nothing is deleted: every summary can "
        "be expanded back). With target_tokens, compacts until the context fits; with force, runs every "
        "pass there is room for; else only what the thresholds call for. Says why it stopped.",
        {
            "type": "object",
            "properties": {
                "conversation": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The conversation's id or its session id.",
                },
                "force": {
                    "type": "boolean",
                    "default": False,
                    "description": "Run every pass there is room for, not only what the thresholds call for.",
                },
                "target_tokens": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Compact until the conversation's context is at most this many tokens.",
                },
            },
            "required": ["conversation"],
            "additionalProperties": False,
        },
    )
)


# ---------------------------------------------------------------- long-term memory tools

_CATEGORY_SCHEMA: dict[str, Any] = {
    "type": "string",
    "enum": ["profile", "preferences", "entities", "events", "cases", "patterns"],
    "description": "Kind of memory: profile (who the user is), preferences, entities (named things and facts), "
    "events (what happened, decisions), cases (problems and their fixes), patterns (habits, workflows).",
}
_SCOPE_SCHEMA: dict[str, Any] = {
    "type": "string",
    "pattern": r"^(global|(agent|custom|project|user|reflection:agent):[A-Za-z0-9][A-Za-z0-9._:@-]{0,127})$",
    "description": "Memory scope: global, agent:<id>, custom:<name>, project:<id>, user:<id> or "
    "reflection:agent:<id>. Only scopes this agent may reach are accepted.",
}
_MEMORY_ID_SCHEMA: dict[str, Any] = {
    "type": "string",
    "minLength": 8,
    "maxLength": 64,
    "pattern": "^[A-Za-z0-9_]+$",
    "description": "A memory id (mem_…) or an unambiguous prefix of at least 8 characters.",
}

MEMORY_RECALL = register(
    ToolSpec(
        "memory_recall",
        "Search long-term memory for facts, preferences and past decisions relevant to a query (in a coding "
        "session also what the user asked for, what the agent answered, the files it edited and the commands that "
        "failed). Returns the best matches with their scores, categories and the ids of the conversation messages "
        "each came from.",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "What to look for."},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 20,
                    "default": 5,
                    "description": "Most memories to return.",
                },
                "scope": _SCOPE_SCHEMA,
                "category": _CATEGORY_SCHEMA,
                "as_of": {
                    "type": "string",
                    "format": "date-time",
                    "description": "Answer as things stood at this time (superseded memories included).",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    )
)
MEMORY_STORE = register(
    ToolSpec(
        "memory_store",
        "Save one durable fact to long-term memory (a preference, a decision, a fix, a name). Keep it to one "
        "self-contained statement; do not store greetings, questions or tool output.",
        {
            "type": "object",
            "properties": {
                "text": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 64000,
                    "description": "The fact, as one self-contained statement.",
                },
                "category": _CATEGORY_SCHEMA,
                "importance": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                    "description": "0 to 1 (default: by category); higher is kept longer and ranked higher.",
                },
                "scope": _SCOPE_SCHEMA,
                "fact_key": {
                    "type": "string",
                    "maxLength": 200,
                    "description": "What the fact is about, e.g. preferences:drink; a new value supersedes the old.",
                },
            },
            "required": ["text"],
            "additionalProperties": False,
        },
    )
)
MEMORY_FORGET = register(
    ToolSpec(
        "memory_forget",
        "Delete one memory by id (use memory_recall or memory_list to find it).",
        {
            "type": "object",
            "properties": {"memory_id": _MEMORY_ID_SCHEMA},
            "required": ["memory_id"],
            "additionalProperties": False,
        },
    )
)
MEMORY_UPDATE = register(
    ToolSpec(
        "memory_update",
        "Change a memory: new text (re-indexed), importance or category. With supersede=true the old text is kept "
        "as history and the new text becomes the current version.",
        {
            "type": "object",
            "properties": {
                "memory_id": _MEMORY_ID_SCHEMA,
                "text": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 64000,
                    "description": "The new text (re-indexed).",
                },
                "importance": {"type": "number", "minimum": 0, "maximum": 1, "description": "0 to 1."},
                "category": _CATEGORY_SCHEMA,
                "supersede": {
                    "type": "boolean",
                    "default": False,
                    "description": "Keep the old text as history and store text as the current version.",
                },
            },
            "required": ["memory_id"],
            "additionalProperties": False,
        },
    )
)
MEMORY_LIST = register(
    ToolSpec(
        "memory_list",
        "List stored memories in the order they were saved, optionally by scope or category.",
        {
            "type": "object",
            "properties": {
                "scope": _SCOPE_SCHEMA,
                "category": _CATEGORY_SCHEMA,
                "include_superseded": {
                    "type": "boolean",
                    "default": False,
                    "description": "Also list the old versions that newer ones replaced.",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 50,
                    "default": 20,
                    "description": "Most memories to return.",
                },
                "after": {"type": "integer", "minimum": 0, "default": 0, "description": "Paging cursor."},
            },
            "additionalProperties": False,
        },
    )
)
MEMORY_STATS = register(
    ToolSpec(
        "memory_stats",
        "Counts of the memories this agent can reach, by category, tier and scope.",
        {"type": "object", "properties": {}, "additionalProperties": False},
    )
)
