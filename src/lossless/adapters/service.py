"""What the MCP server and the HTTP API share: engines per caller, the tool table, JSON shapes.

Adapters translate; they never own compaction or lineage rules.  This module
turns arguments that arrived as JSON into engine calls and engine results back
into JSON, once, so both servers behave the same.

Invariants:

* :data:`TOOL_HANDLERS` maps each agent tool name to one engine call; the
  tool's contract (description, input schema) is the one in
  :data:`lossless.tools.TOOLS`, never redefined here.  Adding a tool to both
  servers is one entry in this table (plus its spec in :mod:`lossless.tools`).
* :func:`call_tool` refuses unknown and missing arguments with an
  :class:`InputError` before the engine sees them; everything else is checked
  by the engine (and the value types it builds).
* Every call runs as one :class:`~lossless.retrieval.Caller` of the engine's
  own agent (a caller of another agent is refused), so retrieval and memory
  apply that agent's reach and nothing of another agent is ever read.
* **Sessions.**  A main-agent session (no grant) has :data:`MAIN_TOOLS`:
  retrieval without ``lcm_expand`` (it delegates with ``lcm_expand_query``),
  the lifecycle tools and the memory tools.  A session holding an expansion
  grant has :data:`GRANTED_TOOLS` (exactly :data:`lossless.tools.SUBAGENT_TOOLS`)
  and every call re-checks the grant, so a revoked or expired grant ends it.
* Without a session of its own (no session id or key, no grant) a caller's
  retrieval reaches every conversation of its agent unless it names one.
* :class:`Engines` gives each agent identity its own :class:`ContextEngine`
  over one shared store, so a caller acting as agent ``a`` only ever reaches
  ``a``'s conversations (the engine scopes every read to its ``agent_id``).
* Nothing here reads the environment or does I/O of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from lossless.config import Config
from lossless.engine import ContextEngine
from lossless.errors import AccessDeniedError, InputError, NotFoundError
from lossless.memory.toolcalls import MEMORY_TOOLS, call_memory_tool
from lossless.records import CompactionEvent, JSONValue, Message, Summary, jsonable
from lossless.retrieval import Caller
from lossless.retrieval.dag import DEFAULT_MAX_DEPTH, MAX_TOKEN_CAP
from lossless.retrieval.expansion import DEFAULT_MAX_TOKENS as DEFAULT_ANSWER_TOKENS
from lossless.retrieval.toolcalls import check_arguments as check_retrieval_arguments
from lossless.tools import SUBAGENT_TOOLS, TOOLS, ToolSpec

__all__ = [
    "GRANTED_TOOLS",
    "MAIN_TOOLS",
    "TOOL_HANDLERS",
    "Engines",
    "call_tool",
    "check_conversation_ref",
    "jsonable",
    "messages_from",
    "session_tools",
    "summary_dict",
    "tool_specs",
]

_MAX_ROW_ID = 2**63 - 1


class Engines:
    """One :class:`ContextEngine` per agent identity, all over the store of ``base``.

    ``base`` serves its own ``config.agent_id``; other identities get an engine
    made on first use with the same configuration, store, blobs, token counter
    and summarizer.  :meth:`close` releases the shared store once.
    """

    def __init__(self, base: ContextEngine) -> None:
        self.base = base
        self._by_agent: dict[str, ContextEngine] = {base.config.agent_id: base}

    @classmethod
    async def open(cls, config: Config) -> Engines:
        return cls(await ContextEngine.open(config=config))

    @property
    def config(self) -> Config:
        return self.base.config

    def for_agent(self, agent_id: str) -> ContextEngine:
        engine = self._by_agent.get(agent_id)
        if engine is None:
            base = self.base
            engine = ContextEngine(
                base.store,
                base.config.replace(agent_id=agent_id),
                token_counter=base.tokens,
                summarizer=base.summarizer,
                blobs=base.blobs,
            )
            self._by_agent[agent_id] = engine
        return engine

    async def close(self) -> None:
        await self.base.dispose()  # the store and blobs are shared: close them once


# ----------------------------------------------------------------- JSON shapes


def summary_dict(summary: Summary, sources: tuple[int | str, ...] = ()) -> dict[str, JSONValue]:
    out: dict[str, JSONValue] = jsonable(summary)
    out["sources"] = list(sources)
    return out


def event_dict(event: CompactionEvent, summary: Summary | None) -> dict[str, JSONValue]:
    """A compaction event as JSON, with what its summary says about the pass (kind, depth, level)."""
    return {
        "event_id": event.event_id,
        "run_id": event.run_id,
        "created_at": event.created_at.isoformat(),
        "trigger": event.trigger,
        "mode": event.mode,
        "summary_id": event.summary_id,
        "kind": summary.kind if summary else None,
        "depth": summary.depth if summary else None,
        "level": summary.level if summary else None,
        "source_items": event.source_items,
        "tokens_before": event.tokens_before,
        "tokens_after": event.tokens_after,
        "elapsed_ms": event.elapsed_ms,
    }


# ----------------------------------------------------------------- argument checks


def messages_from(value: object, what: str = "messages") -> list[Message]:
    """Messages from their JSON form (see :meth:`Message.from_dict`); :class:`InputError` names the bad one."""
    if not isinstance(value, list):
        raise InputError(f"{what} must be a list of message objects, got {type(value).__name__}")
    out: list[Message] = []
    for index, item in enumerate(value):
        try:
            out.append(Message.from_dict(item))
        except InputError as exc:
            raise InputError(f"{what}[{index}]: {exc}") from exc
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            raise InputError(f"{what}[{index}] is not a valid message: {exc}") from exc
    return out


def check_conversation_ref(ref: str) -> str:
    """``ref`` if it can name a conversation; an id too large for the store is simply not found."""
    if ref.isdigit() and (not ref.isascii() or int(ref) > _MAX_ROW_ID):
        raise NotFoundError("conversation", ref)
    return ref


def _check_arguments(spec: ToolSpec, arguments: Mapping[str, Any]) -> None:
    schema = spec.input_schema
    known = set(schema.get("properties", {}))
    unknown = sorted(set(arguments) - known)
    if unknown:
        raise InputError(f"{spec.name}: unknown argument(s) {', '.join(unknown)}; it takes {', '.join(sorted(known))}")
    missing = [name for name in schema.get("required", ()) if name not in arguments]
    if missing:
        raise InputError(f"{spec.name}: missing required argument(s) {', '.join(missing)}")


def _string(arguments: Mapping[str, Any], name: str, *, required: bool = True) -> str | None:
    value = arguments.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise InputError(f"{name} must be a non-empty string, got {value!r:.80}")
    return value


# ----------------------------------------------------------------- the tool table

ToolHandler = Callable[[ContextEngine, Caller, Mapping[str, Any]], Awaitable[dict[str, JSONValue]]]


async def _ingest_tool(engine: ContextEngine, _: Caller, arguments: Mapping[str, Any]) -> dict[str, JSONValue]:
    _check_arguments(TOOLS["lcm_ingest"], arguments)
    session_id = _string(arguments, "session_id")
    assert session_id is not None
    messages = messages_from(arguments.get("messages"))
    if not messages:
        raise InputError("messages must hold at least one message")
    result = await engine.ingest_batch(
        session_id, messages, session_key=_string(arguments, "session_key", required=False)
    )
    return result.to_dict()


async def _compact_tool(engine: ContextEngine, _: Caller, arguments: Mapping[str, Any]) -> dict[str, JSONValue]:
    _check_arguments(TOOLS["lcm_compact"], arguments)
    conversation = _string(arguments, "conversation")
    assert conversation is not None
    force = arguments.get("force", False)
    if not isinstance(force, bool):
        raise InputError(f"force must be true or false, got {force!r:.80}")
    target = arguments.get("target_tokens")
    if target is not None and (type(target) is not int or target < 1):
        raise InputError(f"target_tokens must be a positive integer, got {target!r:.80}")
    result = await engine.compact(check_conversation_ref(conversation), force=force, target_tokens=target)
    return result.to_dict()


def _reach(caller: Caller, args: Mapping[str, Any]) -> dict[str, Any]:
    """Where a retrieval call reads: the named conversation, else the caller's default reach."""
    own_session = caller.grant_id is not None or caller.session_id is not None or caller.session_key is not None
    return {
        "conversation": args.get("conversation_id"),
        "all_conversations": args.get("all_conversations", not own_session),
        "caller": caller,
    }


def _token_cap(args: Mapping[str, Any]) -> int | None:
    cap = args.get("token_cap")
    if cap is not None and not 1 <= cap <= MAX_TOKEN_CAP:
        raise InputError(f"token_cap must be an integer from 1 to {MAX_TOKEN_CAP:,}, got {cap!r}")
    return cap


def _rendered(data: Mapping[str, JSONValue], text: str) -> dict[str, JSONValue]:
    return {**data, "text": text}


async def _grep_tool(engine: ContextEngine, caller: Caller, arguments: Mapping[str, Any]) -> dict[str, JSONValue]:
    args = check_retrieval_arguments("lcm_grep", arguments)
    found = await engine.grep(
        args["pattern"],
        mode=args.get("mode", "regex"),
        scope=args.get("scope", "both"),
        since=args.get("since"),
        before=args.get("before"),
        limit=args.get("limit", 50),
        sort=args.get("sort", "recency"),
        context=args.get("context", 0),
        **_reach(caller, args),
    )
    return _rendered(found.to_dict(), found.render())


async def _describe_tool(engine: ContextEngine, caller: Caller, arguments: Mapping[str, Any]) -> dict[str, JSONValue]:
    args = check_retrieval_arguments("lcm_describe", arguments)
    described = await engine.describe(
        args["id"],
        token_cap=_token_cap(args),
        start_line=args.get("start_line"),
        end_line=args.get("end_line"),
        **_reach(caller, args),
    )
    return _rendered(described.to_dict(), described.render())


async def _expand_tool(engine: ContextEngine, caller: Caller, arguments: Mapping[str, Any]) -> dict[str, JSONValue]:
    args = check_retrieval_arguments("lcm_expand", arguments)
    expanded = await engine.expand(
        args.get("summary_ids"),
        query=args.get("query"),
        max_depth=args.get("max_depth", DEFAULT_MAX_DEPTH),
        token_cap=_token_cap(args),
        include_messages=args.get("include_messages", False),
        **_reach(caller, args),
    )
    return _rendered(expanded.to_dict(), expanded.render())


async def _expand_query_tool(
    engine: ContextEngine, caller: Caller, arguments: Mapping[str, Any]
) -> dict[str, JSONValue]:
    args = check_retrieval_arguments("lcm_expand_query", arguments)
    answered = await engine.expand_query(
        args["prompt"],
        query=args.get("query"),
        summary_ids=args.get("summary_ids"),
        max_tokens=args.get("max_tokens", DEFAULT_ANSWER_TOKENS),
        token_cap=_token_cap(args),
        **_reach(caller, args),
    )
    return _rendered(answered.to_dict(), answered.answer)


def _memory_tool(name: str) -> ToolHandler:
    async def handler(engine: ContextEngine, _: Caller, arguments: Mapping[str, Any]) -> dict[str, JSONValue]:
        result: dict[str, JSONValue] = await call_memory_tool(engine.memory(), name, arguments)
        return result

    return handler


#: Agent tool name → the engine call behind it.  Both servers expose these tools, with the contracts
#: of :data:`lossless.tools.TOOLS`.  A handler returns a JSON object; when it also renders text for
#: the agent (citations and all) it puts it under ``"text"``, which MCP shows as the result.
TOOL_HANDLERS: dict[str, ToolHandler] = {
    "lcm_grep": _grep_tool,
    "lcm_describe": _describe_tool,
    "lcm_expand_query": _expand_query_tool,
    "lcm_expand": _expand_tool,
    "lcm_ingest": _ingest_tool,
    "lcm_compact": _compact_tool,
    **{name: _memory_tool(name) for name in MEMORY_TOOLS},
}

#: The tools of a main-agent session: everything but lcm_expand (the main agent delegates expansion).
MAIN_TOOLS: tuple[str, ...] = tuple(name for name in TOOL_HANDLERS if name != "lcm_expand")
#: The tools of a session holding an expansion grant: the sub-agent's read-only three.
GRANTED_TOOLS: tuple[str, ...] = tuple(spec.name for spec in SUBAGENT_TOOLS)


def session_tools(caller: Caller) -> tuple[str, ...]:
    """The tools an agent session of ``caller`` lists and may call (see the module invariants)."""
    return GRANTED_TOOLS if caller.grant_id is not None else MAIN_TOOLS


def tool_specs(names: Collection[str] | None = None) -> list[ToolSpec]:
    """The specs of ``names`` (default: every tool of the table), in table order."""
    return [TOOLS[name] for name in TOOL_HANDLERS if names is None or name in names]


def _not_here(name: str, caller: Caller, allowed: Collection[str]) -> InputError:
    if name == "lcm_expand":
        return InputError(
            "lcm_expand runs only in a granted expansion sub-agent session (lcm mcp --grant GRANT_ID); "
            "ask lcm_expand_query instead: its sub-agent expands the summaries and answers with citations"
        )
    if caller.grant_id is not None:
        return InputError(
            f"{name} is not available to an expansion sub-agent: this session (grant {caller.grant_id}) "
            f"reads only with {', '.join(allowed)}"
        )
    return InputError(f"{name} is not available in this session: the tools are {', '.join(allowed)}")


async def call_tool(
    engine: ContextEngine,
    name: str,
    arguments: Mapping[str, Any] | None,
    *,
    caller: Caller | None = None,
    tools: Collection[str] | None = None,
) -> dict[str, JSONValue]:
    """Run tool ``name`` as ``caller`` (default: ``engine``'s agent, no session); a bad call is an LcmError.

    ``tools`` restricts the call to a session's tools (see :func:`session_tools`); a caller
    holding a grant may only ever call :data:`GRANTED_TOOLS`.
    """
    handler = TOOL_HANDLERS.get(name)
    if handler is None:
        raise InputError(f"unknown tool {name!r}: the tools are {', '.join(tools or TOOL_HANDLERS)}")
    who = caller or Caller(engine.config.agent_id)
    if who.agent_id != engine.config.agent_id:
        raise AccessDeniedError(f"{who.describe()} cannot call tools on agent {engine.config.agent_id!r}'s engine")
    allowed: Collection[str] = tools if tools is not None else TOOL_HANDLERS
    if who.grant_id is not None:
        allowed = [n for n in allowed if n in GRANTED_TOOLS]
    if name not in allowed:
        raise _not_here(name, who, allowed)
    arguments = arguments or {}
    if not isinstance(arguments, Mapping):
        raise InputError(f"{name}: arguments must be an object")
    for key, value in arguments.items():  # no store takes an integer over 64 bits
        if type(value) is int and abs(value) > _MAX_ROW_ID:
            raise InputError(f"{name}: {key} is out of range ({value:.3g})")
    return await handler(engine, who, arguments)
