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

__all__ = ["TOOLS", "ToolSpec", "register"]

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


# ----------------------------------------------------------------- lifecycle tools (hosts that push their transcript)

_MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "role": {"type": "string", "enum": ["system", "user", "assistant", "tool"]},
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
        "metadata": {"type": "object"},
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
                "messages": {"type": "array", "items": _MESSAGE_SCHEMA, "minItems": 1},
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
                "force": {"type": "boolean", "default": False},
                "target_tokens": {"type": "integer", "minimum": 1},
            },
            "required": ["conversation"],
            "additionalProperties": False,
        },
    )
)
