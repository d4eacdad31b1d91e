"""Running the ``memory_*`` agent tools: validate the arguments against the shared schema, call the service.

Every adapter (MCP server, HTTP API, function-calling loop) hands a tool call to
:func:`call_memory_tool` and gets a JSON-ready dict back.

Invariants:

* Arguments are checked against the tool's JSON Schema in :mod:`lossless.tools`
  before anything runs (unknown or missing arguments, wrong types, values out of
  range or not matching the pattern raise :class:`~lossless.errors.InputError`
  naming the argument), so a model's malformed call writes nothing.
* The call runs as the service's caller: the same scope rules as everywhere.
* Results carry provenance (conversation id and source message ids) so an agent
  can expand a memory back to the messages it came from.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lossless.errors import InputError
from lossless.memory.records import Memory, MemoryDraft, MemoryPatch
from lossless.memory.service import MemoryService
from lossless.records import parse_timestamp
from lossless.tools import TOOLS

__all__ = ["MEMORY_TOOLS", "call_memory_tool", "check_arguments"]

MEMORY_TOOLS = ("memory_recall", "memory_store", "memory_forget", "memory_update", "memory_list", "memory_stats")
_TYPES: Mapping[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def check_arguments(name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` validated against tool ``name``'s schema (the subset the memory tools use)."""
    spec = TOOLS.get(name)
    if spec is None or name not in MEMORY_TOOLS:
        raise InputError(f"unknown memory tool {name!r}: use one of {', '.join(MEMORY_TOOLS)}")
    if not isinstance(arguments, Mapping):
        raise InputError(f"{name}: arguments must be a JSON object")
    schema = spec.input_schema
    properties: Mapping[str, Any] = schema.get("properties", {})
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        raise InputError(
            f"{name}: unknown argument(s) {', '.join(unknown)}; it takes {', '.join(properties) or 'none'}"
        )
    missing = [key for key in schema.get("required", ()) if key not in arguments]
    if missing:
        raise InputError(f"{name}: missing required argument(s) {', '.join(missing)}")
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        rule = properties[key]
        kind = rule.get("type")
        allowed = _TYPES.get(kind, (object,))
        if (kind != "boolean" and isinstance(value, bool)) or not isinstance(value, allowed):
            raise InputError(f"{name}: argument {key!r} must be a {kind}, got {type(value).__name__}")
        if "enum" in rule and value not in rule["enum"]:
            raise InputError(f"{name}: argument {key!r} must be one of {', '.join(rule['enum'])}; got {value!r}")
        if isinstance(value, str):
            if not rule.get("minLength", 0) <= len(value) <= rule.get("maxLength", len(value)):
                raise InputError(f"{name}: argument {key!r} has a length outside the allowed range")
            if "pattern" in rule and not re.search(rule["pattern"], value):
                raise InputError(f"{name}: argument {key!r} is not valid: {value!r}")
        if kind in ("integer", "number") and not rule.get("minimum", value) <= value <= rule.get("maximum", value):
            raise InputError(
                f"{name}: argument {key!r} must be between {rule.get('minimum')} and {rule.get('maximum')}"
            )
        out[key] = value
    return out


def _card(memory: Memory, score: float | None = None) -> dict[str, Any]:
    card: dict[str, Any] = {
        "id": memory.memory_id,
        "category": memory.category,
        "scope": memory.scope,
        "tier": memory.tier,
        "abstract": memory.abstract,
        "content": memory.content,
        "importance": memory.importance,
        "valid_from": memory.to_dict()["valid_from"],
        "current": memory.current,
        "source": {"conversation_id": memory.conversation_id, "message_ids": list(memory.source_message_ids)},
    }
    if score is not None:
        card["score"] = round(score, 4)
    if not memory.current:
        card["superseded_by"] = memory.superseded_by
    return card


async def call_memory_tool(service: MemoryService, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Run one ``memory_*`` tool call and return its JSON-ready result."""
    args = check_arguments(name, arguments)
    if name == "memory_recall":
        as_of = parse_timestamp(args["as_of"]) if "as_of" in args else None
        result = await service.search(
            args["query"],
            limit=args.get("limit", 5),
            scopes=[args["scope"]] if "scope" in args else None,
            category=args.get("category"),
            as_of=as_of,
        )
        return {"memories": [_card(h.memory, h.score) for h in result.hits]}
    if name == "memory_store":
        draft = MemoryDraft(
            args["text"],
            category=args.get("category", "entities"),
            importance=args.get("importance"),
            fact_key=args.get("fact_key"),
        )
        memory = await service.store_fact(draft, scope=args.get("scope"))
        if memory.supersedes:
            return {"stored": memory.memory_id, "scope": memory.scope, "superseded": memory.supersedes}
        return {"stored": memory.memory_id, "scope": memory.scope}
    if name == "memory_forget":
        memory = await service.forget(args["memory_id"])
        return {"forgotten": memory.memory_id}
    if name == "memory_update":
        if args.get("supersede"):
            if "text" not in args:
                raise InputError("memory_update: supersede needs text, the new version")
            old = await service.get(args["memory_id"])
            draft = MemoryDraft(
                args["text"],
                category=args.get("category", old.category),
                importance=args.get("importance", old.importance),
                temporal_type=old.temporal_type,
            )
            memory = await service.supersede(old.memory_id, draft)
            return {"stored": memory.memory_id, "superseded": memory.supersedes}
        patch = MemoryPatch(content=args.get("text"), importance=args.get("importance"), category=args.get("category"))
        memory = await service.update(args["memory_id"], patch)
        return {"updated": memory.memory_id}
    if name == "memory_list":
        page = await service.list(
            scopes=[args["scope"]] if "scope" in args else None,
            category=args.get("category"),
            include_superseded=args.get("include_superseded", False),
            limit=args.get("limit", 20),
            after=args.get("after", 0),
        )
        return {"memories": [_card(m) for _, m in page], "next_after": page[-1][0] if page else None}
    return (await service.stats()).to_dict()
