"""The MCP server (``lcm mcp``): the agent tools over the Model Context Protocol, official SDK.

Invariants:

* The tools listed are the session's (:func:`lossless.adapters.service.session_tools`),
  each with its name, description and input schema from :mod:`lossless.tools`:
  a main-agent server lists every tool but ``lcm_expand``; a server started
  with a grant (``lcm mcp --grant GRANT_ID``) is an expansion sub-agent's and
  lists only ``lcm_grep``, ``lcm_describe`` and ``lcm_expand``, reading within
  the grant.  A tool outside the list is refused like an unknown one.
* Every call runs as the server's one caller, the configured agent (with the
  grant, if any): no argument can make it act as another agent.
* A grant is checked when the server starts (a revoked, expired or foreign
  grant refuses to start) and again at every call.
* A failing call never ends the session: an :class:`LcmError` (bad arguments,
  unknown conversation, …) comes back as a tool-error result carrying its
  message; any other exception is logged and reported as an internal error.
* Over stdio nothing but protocol messages is written to stdout (logs go to stderr).
* ``--follow`` paths are re-imported every ``interval`` seconds with
  :meth:`ContextEngine.import_paths` (unchanged files are not read again; grown
  ones from where the last pass stopped); a failing pass is logged and retried.
* Streamable HTTP listens on loopback only (it has no authentication of its own).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from lossless.adapters.service import call_tool, session_tools, tool_specs
from lossless.adapters.web_guard import BrowserGuard
from lossless.config import Config
from lossless.engine import VERSION, ContextEngine
from lossless.errors import ConfigError, InputError, LcmError, MissingDependencyError
from lossless.retrieval import Caller

try:
    import mcp_types as types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("the MCP server (lcm mcp)", "mcp", exc.name or "mcp") from exc

__all__ = ["build_server", "follow_paths", "serve_http", "serve_stdio"]

log = logging.getLogger("lossless.mcp")

INSTRUCTIONS = (
    "lossless keeps every message of your sessions verbatim and compacts old history into summaries that "
    "can always be expanded back. Search the whole history with lcm_grep (it cites [msg#id] and [sum_…] ids), "
    "look a summary or stored file up with lcm_describe, and ask lcm_expand_query a question about compacted "
    "history: a sub-agent expands the summaries and answers with citations. memory_recall and memory_store "
    "keep durable facts across sessions. Hosts that push their transcript use lcm_ingest and lcm_compact."
)
GRANTED_INSTRUCTIONS = (
    "You are an expansion sub-agent holding a read-only grant over part of a stored history. Find what the "
    "question needs with lcm_grep and lcm_describe, read it back with lcm_expand (summary_ids, "
    "include_messages=true), and answer citing the [msg#id] / [sum_…] ids you used. The grant ends when the "
    "delegating agent revokes it or it expires; calls are refused from then on."
)


def _result(payload: dict[str, Any]) -> types.CallToolResult:
    """The tool's text for the agent (``payload["text"]`` when the handler rendered one, else the JSON)."""
    text = payload.get("text")
    if not isinstance(text, str):
        text = json.dumps(payload, ensure_ascii=False)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=payload, is_error=False
    )


def _failure(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def build_server(engine: ContextEngine, *, grant_id: str | None = None) -> Server[Any]:
    """An MCP server exposing the agent tools for ``engine``'s agent (an expansion sub-agent's, with a grant)."""
    caller = Caller(engine.config.agent_id, grant_id=grant_id)
    names = session_tools(caller)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = [
            types.Tool(name=spec.name, description=spec.description, input_schema=dict(spec.input_schema))
            for spec in tool_specs(names)
        ]
        return types.ListToolsResult(tools=tools)

    async def call(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            return _result(await call_tool(engine, params.name, params.arguments, caller=caller, tools=names))
        except LcmError as exc:
            return _failure(f"{params.name} failed ({type(exc).__name__}): {exc}")
        except Exception as exc:
            log.error("tool %s failed unexpectedly", params.name, exc_info=exc)
            return _failure(f"{params.name} failed with an internal error ({type(exc).__name__}); see the server log")

    return Server(
        "lossless",
        version=VERSION,
        instructions=INSTRUCTIONS if grant_id is None else GRANTED_INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call,
    )


async def follow_paths(engine: ContextEngine, paths: Sequence[Path], interval: float) -> None:
    """Import new entries of ``paths`` (files or folders of transcripts) forever, every ``interval`` s.

    A problem is logged when it first appears (not at every pass while it lasts).
    """
    where = ", ".join(map(str, paths))
    reported: set[str] = set()
    while True:
        problems: list[str] = []
        try:
            results = await engine.import_paths(list(paths))
        except Exception as exc:  # a folder with no transcript yet, a file being rewritten, …
            problems.append(f"following {where}: {exc}")
        else:
            stored = sum(r.stored for r in results if not isinstance(r, Exception))
            problems += [f"following: {r}" for r in results if isinstance(r, Exception)]
            if stored:
                log.info("imported %d new message(s) from %s", stored, where)
        for problem in problems:
            if problem not in reported:
                log.warning("%s", problem)
        reported = set(problems)
        await anyio.sleep(interval)


def _logging_to_stderr() -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="lcm mcp: %(levelname)s %(message)s")


async def _session(engine: ContextEngine, grant_id: str | None, follow: Sequence[Path]) -> Server[Any]:
    """The server of this session; a grant must be usable now (and its session only reads)."""
    if grant_id is not None:
        if follow:
            raise InputError("--grant starts a read-only expansion sub-agent session: it cannot --follow transcripts")
        await engine.usable_grant(grant_id)
    return build_server(engine, grant_id=grant_id)


async def serve_stdio(
    config: Config, *, follow: Sequence[Path] = (), interval: float = 2.0, grant_id: str | None = None
) -> None:
    """Serve MCP over stdin/stdout until the client closes it."""
    _logging_to_stderr()
    async with await ContextEngine.open(config=config) as engine:
        server = await _session(engine, grant_id, follow)
        async with anyio.create_task_group() as group:
            if follow:
                group.start_soon(follow_paths, engine, follow, interval)
            group.start_soon(engine.index_in_background)  # semantic grep never embeds: vectors are built here
            async with stdio_server() as (read_stream, write_stream):
                answered, requests = anyio.create_memory_object_stream[Any](0)
                group.start_soon(_answer_unreadable, read_stream, answered, write_stream)
                await server.run(requests, write_stream, server.create_initialization_options())
            group.cancel_scope.cancel()


async def _answer_unreadable(source: Any, forward: Any, write_stream: Any) -> None:
    """Pass messages on; answer a request the SDK could not read (e.g. an escaped lone surrogate) with an error.

    The SDK drops such a line, which leaves its client waiting forever; the standard library still reads it,
    so its id is known and the client gets a JSON-RPC "invalid params" error that says what to fix.
    """
    from mcp.shared.message import SessionMessage

    async with forward:
        async for item in source:
            if isinstance(item, Exception):
                request_id = _unreadable_request_id(item)
                if request_id is not None:
                    error = types.ErrorData(
                        code=types.INVALID_PARAMS,
                        message="the request holds invalid Unicode (a lone surrogate escape such as \\ud800): "
                        "send valid UTF-8 text",
                    )
                    await write_stream.send(
                        SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
                    )
                    continue
            await forward.send(item)


def _unreadable_request_id(error: Exception) -> int | str | None:
    """The id of the request in a line the SDK refused, when the line is a readable JSON-RPC request."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return None
    try:
        line = errors()[0].get("input")
        message = json.loads(line) if isinstance(line, str) else None
    except (ValueError, RecursionError, IndexError, TypeError):
        return None
    if not isinstance(message, dict) or "method" not in message:
        return None
    request_id = message.get("id")
    return request_id if isinstance(request_id, int | str) and not isinstance(request_id, bool) else None


async def serve_http(
    config: Config,
    *,
    host: str = "127.0.0.1",
    port: int = 8766,
    follow: Sequence[Path] = (),
    interval: float = 2.0,
    grant_id: str | None = None,
) -> None:
    """Serve MCP over streamable HTTP at ``http://host:port/mcp`` (loopback only)."""
    import uvicorn

    from lossless.adapters.http import is_loopback, listen_socket

    if not is_loopback(host):
        raise ConfigError(
            f"lcm mcp --http listens on loopback only (got {host!r}): it has no authentication. "
            "For remote access use `lcm serve` with api_tokens"
        )
    _logging_to_stderr()
    sock = listen_socket(host, port)  # a port in use is said plainly, before anything opens
    try:
        async with await ContextEngine.open(config=config) as engine:
            app = (await _session(engine, grant_id, follow)).streamable_http_app(host=host)
            guarded = BrowserGuard(
                app, listen_host=host, hosts=config.api_allowed_hosts, origins=config.api_allowed_origins
            )
            server = uvicorn.Server(uvicorn.Config(guarded, host=host, port=port, log_level="info"))
            async with anyio.create_task_group() as group:
                if follow:
                    group.start_soon(follow_paths, engine, follow, interval)
                group.start_soon(engine.index_in_background)  # semantic grep never embeds: vectors are built here
                await server.serve(sockets=[sock])
                group.cancel_scope.cancel()
    finally:
        sock.close()
