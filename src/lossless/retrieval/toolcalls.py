"""Running a retrieval tool call as an agent makes it: JSON arguments in, a text result out, never an exception.

Invariants:

* Arguments are checked against the tool's schema in :data:`lossless.tools.TOOLS`
  (unknown names, wrong types) before anything runs; times are ISO-8601 text.
* What the agent gets is always a :class:`ToolOutcome`: a rendered result, a
  "no matches — try …" message, or an ``error`` naming what to change.
  ``denied`` marks a refusal (out of reach, or a grant that ended), so a
  sub-agent runner can stop at once.
* Only ``lcm_grep``, ``lcm_describe`` and ``lcm_expand`` run here;
  ``lcm_expand_query`` is the engine's (it spawns a sub-agent).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lossless.errors import InputError, LcmError
from lossless.records import JSONValue, parse_timestamp
from lossless.retrieval.access import AccessDenied, Caller
from lossless.retrieval.grep import GrepOptions
from lossless.retrieval.service import Retriever
from lossless.tools import TOOLS

__all__ = ["ToolOutcome", "call_tool", "check_arguments"]

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "boolean": (bool,),
    "array": (list, tuple),
}


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """A tool call's result as the agent sees it."""

    text: str
    data: Mapping[str, JSONValue] = field(default_factory=dict)
    error: bool = False
    denied: bool = False
    cited: tuple[str, ...] = ()


def check_arguments(name: str, arguments: object) -> dict[str, Any]:
    """The arguments, checked against tool ``name``'s schema; :class:`InputError` says what is wrong."""
    spec = TOOLS.get(name)
    if spec is None:
        raise InputError(f"unknown tool {name!r}; the tools are {', '.join(sorted(TOOLS))}")
    if not isinstance(arguments, Mapping):
        raise InputError(f"{name} takes a JSON object of arguments, got {type(arguments).__name__}")
    properties: Mapping[str, Any] = spec.input_schema.get("properties", {})
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        raise InputError(f"{name} has no argument {', '.join(map(repr, unknown))}; it takes {', '.join(properties)}")
    for required in spec.input_schema.get("required", ()):
        if required not in arguments:
            raise InputError(f"{name} needs the argument {required!r}")
    for key, value in arguments.items():
        kind = properties[key].get("type")
        expected = _TYPES.get(kind, ())
        bad_bool = kind == "integer" and isinstance(value, bool)
        if expected and (not isinstance(value, expected) or bad_bool):
            raise InputError(f"{name}: {key} must be a JSON {kind}, got {value!r}")
    return dict(arguments)


def _time(arguments: Mapping[str, Any], key: str) -> Any:
    value = arguments.get(key)
    return None if value is None else parse_timestamp(value)


async def call_tool(retriever: Retriever, caller: Caller, name: str, arguments: object) -> ToolOutcome:
    """Run one retrieval tool call for ``caller`` (see the module invariants)."""
    try:
        args = check_arguments(name, arguments)
        reach: dict[str, Any] = {
            "conversation_id": args.get("conversation_id"),
            "all_conversations": bool(args.get("all_conversations", False)),
        }
        if name == "lcm_grep":
            options = GrepOptions(
                args["pattern"],
                mode=args.get("mode", "regex"),
                scope=args.get("scope", "both"),
                since=_time(args, "since"),
                before=_time(args, "before"),
                limit=args.get("limit", 50),
                sort=args.get("sort", "recency"),
                context=args.get("context", 0),
            )
            found = await retriever.grep(caller, options, **reach)
            cited = tuple(h.citation.strip("[]") for h in found.hits)
            return ToolOutcome(found.render(), found.to_dict(), cited=cited)
        if name == "lcm_describe":
            described = await retriever.describe(
                caller,
                args["id"],
                token_cap=args.get("token_cap"),
                start_line=args.get("start_line"),
                end_line=args.get("end_line"),
                **reach,
            )
            return ToolOutcome(described.render(), described.to_dict(), cited=(args["id"],))
        if name == "lcm_expand":
            expanded = await retriever.expand(
                caller,
                summary_ids=args.get("summary_ids"),
                query=args.get("query"),
                max_depth=args.get("max_depth", 3),
                token_cap=args.get("token_cap"),
                include_messages=args.get("include_messages", False),
                **reach,
            )
            cited = tuple(s.id for s in expanded.summaries) + tuple(f"msg#{m.id}" for m in expanded.messages)
            return ToolOutcome(expanded.render(), expanded.to_dict(), cited=cited)
        raise InputError(f"{name} cannot be called here: the retrieval tools are lcm_grep, lcm_describe, lcm_expand")
    except AccessDenied as exc:
        return ToolOutcome(f"denied: {exc}", {"error": str(exc)}, error=True, denied=True)
    except LcmError as exc:
        return ToolOutcome(f"error: {exc}", {"error": str(exc)}, error=True)
