"""The HTTP API (``lcm serve``): the engine's lifecycle and reads over JSON, with FastAPI and uvicorn.

Invariants:

* Every error response has one shape, ``{"error": {"type", "message", "status",
  "retryable"}}`` (plus ``details`` for request validation), whatever raised it:
  an :class:`LcmError` (mapped by :data:`STATUS_BY_ERROR`), a malformed request,
  an unknown route, a body over ``api_max_request_bytes``, or a bug (500, logged,
  with no internals in the body).
* With ``api_tokens`` set, every endpoint but ``/v1/health`` needs
  ``Authorization: Bearer TOKEN``; the token decides the caller's agent identity,
  and each request runs on that agent's engine, so a caller only sees its own
  conversations and files.  Tokens are compared in constant time and never logged.
* :func:`serve` refuses to listen on a non-loopback address without tokens.
* Requests a web page could forge are refused before any route runs, by
  :class:`~lossless.adapters.web_guard.BrowserGuard` (the one place every HTTP face
  goes through): a foreign ``Host`` (421), a cross-origin ``Origin`` or
  ``Sec-Fetch-Site`` (403), and a state-changing request whose body is not
  declared ``application/json`` (415).
* The bootstrap endpoint reads only files under ``api_import_roots`` (off when empty).
* Every agent tool of :data:`lossless.adapters.service.TOOL_HANDLERS` is also
  ``POST /v1/tools/<name>``, its body the tool's arguments, documented with the
  tool's own input schema; the MCP server exposes the same table.  The
  retrieval tools are also ``POST /v1/grep``, ``/v1/describe``, ``/v1/expand``
  and ``/v1/expand_query`` (the same calls).  They run as the token's agent,
  reaching every conversation of that agent (or the one named), never another's.
* The web explorer (``/ui``, :mod:`lossless.adapters.ui`) resolves its caller the same way (its
  session cookie holds a bearer token), so it shows exactly what that agent's API calls may read.
"""

import hmac
import ipaddress
import logging
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio

from lossless.adapters.http_docs import docs_page
from lossless.adapters.service import (
    Engines,
    call_tool,
    check_conversation_ref,
    event_dict,
    jsonable,
    messages_from,
    summary_dict,
    tool_specs,
)
from lossless.adapters.web_guard import BrowserGuard
from lossless.config import Config
from lossless.engine import VERSION, ContextEngine
from lossless.errors import (
    AccessDeniedError,
    ConfigError,
    ConflictError,
    InputError,
    LcmError,
    MissingDependencyError,
    NotFoundError,
    ProviderAuthError,
    ProviderError,
    ProviderUnavailable,
    StoreError,
)
from lossless.large_files import DEFAULT_PAGE_BYTES
from lossless.observability import render_metrics
from lossless.records import JSONValue
from lossless.tools import TOOLS

try:
    import prometheus_client
    from fastapi import APIRouter, Depends, FastAPI, Query, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import HTMLResponse, JSONResponse, Response
    from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
    from pydantic import BaseModel, ConfigDict, Field
    from starlette.exceptions import HTTPException as StarletteHTTPException
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra test in a bare env
    raise MissingDependencyError("the HTTP API (lcm serve)", "server", exc.name or "fastapi") from exc

__all__ = ["STATUS_BY_ERROR", "create_app", "is_loopback", "serve"]

log = logging.getLogger("lossless.http")

#: HTTP status of each error class (most specific first).
STATUS_BY_ERROR: tuple[tuple[type[LcmError], int], ...] = (
    (InputError, 400),
    (NotFoundError, 404),
    (AccessDeniedError, 403),
    (ConflictError, 409),
    (ProviderAuthError, 502),
    (ProviderUnavailable, 503),
    (ProviderError, 502),
    (MissingDependencyError, 501),
    (ConfigError, 500),
    (StoreError, 500),
    (LcmError, 500),
)

_MAX_INT = 1_000_000_000


def status_for(error: LcmError) -> int:
    return next(code for cls, code in STATUS_BY_ERROR if isinstance(error, cls))


def error_body(kind: str, message: str, status: int, *, retryable: bool = False, **extra: Any) -> dict[str, Any]:
    return {"error": {"type": kind, "message": message, "status": status, "retryable": retryable, **extra}}


def _error(kind: str, message: str, status: int, *, retryable: bool = False, **extra: Any) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(error_body(kind, message, status, retryable=retryable, **extra), status, headers=headers)


class ApiError(Exception):
    """An HTTP-level refusal (401, 403) raised inside an endpoint."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_tokens(entries: tuple[str, ...]) -> dict[str, str]:
    """``api_tokens`` (``TOKEN=AGENT_ID`` entries) as token → agent id."""
    tokens: dict[str, str] = {}
    for entry in entries:
        token, _, agent = entry.partition("=")
        tokens[token] = agent
    return tokens


# ----------------------------------------------------------------- request bodies


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MessageIn(_Body):
    """A message as lossless stores it (see ``Message.from_dict``)."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    parts: list[dict[str, Any]] | None = None
    created_at: str | None = None
    event_key: str | None = Field(default=None, min_length=1, max_length=512)
    metadata: dict[str, Any] | None = None


SessionId = Annotated[str, Field(min_length=1, max_length=1024)]
Budget = Annotated[int, Field(ge=1, le=_MAX_INT)]


class IngestIn(_Body):
    session_id: SessionId
    message: MessageIn
    session_key: SessionId | None = None
    is_heartbeat: bool = False


class IngestBatchIn(_Body):
    session_id: SessionId
    messages: list[MessageIn]
    session_key: SessionId | None = None


class AssembleIn(_Body):
    session_id: SessionId
    token_budget: Budget
    prompt: str | None = None
    output: Literal["openai", "anthropic"] = "openai"
    messages: list[MessageIn] = Field(default_factory=list)


class AfterTurnIn(_Body):
    session_id: SessionId
    messages: list[MessageIn] = Field(default_factory=list)
    token_budget: Budget
    session_key: SessionId | None = None
    observed_tokens: Budget | None = None


class CompactIn(_Body):
    conversation: SessionId
    force: bool = False
    target_tokens: Budget | None = None


class BootstrapIn(_Body):
    path: Annotated[str, Field(min_length=1, max_length=4096)]
    session_id: SessionId | None = None
    session_key: SessionId | None = None
    format: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    full: bool = False


def _messages(items: list[MessageIn]) -> list[Any]:
    return messages_from([m.model_dump(exclude_none=True) for m in items])


# ----------------------------------------------------------------- middleware


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes with 413, by Content-Length or while streaming."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await self._refuse(scope, receive, send)
            return
        if declared is not None:
            await self.app(scope, receive, send)
            return
        # No Content-Length (chunked): read the body up to the limit first, then replay it.
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay(message, receive), send)
                return
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.limit:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay(body, receive), send)

    async def _refuse(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        await _error("PayloadTooLarge", _too_large(self.limit), 413)(scope, receive, send)


def _too_large(limit: int) -> str:
    return f"the request body is over the limit of {limit:,} bytes (api_max_request_bytes)"


def _replay(first: MutableMapping[str, Any], receive: Any) -> Callable[[], Awaitable[Any]]:
    """A ``receive`` that hands out ``first`` (the buffered body), then defers to the server's ``receive``."""
    pending = [first]

    async def replay() -> Any:
        return pending.pop() if pending else await receive()

    return replay


# ----------------------------------------------------------------- shared state and the caller


@dataclass(slots=True)
class _Metrics:
    registry: prometheus_client.CollectorRegistry = field(default_factory=prometheus_client.CollectorRegistry)
    requests: prometheus_client.Counter = field(init=False)
    latency: prometheus_client.Histogram = field(init=False)

    def __post_init__(self) -> None:
        self.requests = prometheus_client.Counter(
            "lcm_http_requests", "HTTP requests served", ["method", "route", "status"], registry=self.registry
        )
        self.latency = prometheus_client.Histogram(
            "lcm_http_request_seconds", "Time to serve an HTTP request", ["route"], registry=self.registry
        )


@dataclass(slots=True)
class _State:
    """What the endpoints share, kept on ``app.state.lcm``."""

    tokens: dict[str, str]
    roots: list[Path]
    metrics: _Metrics
    engines: Engines | None = None


def _state(request: Request) -> _State:
    state: _State = request.app.state.lcm
    return state


_bearer = HTTPBearer(auto_error=False, description="A token from the api_tokens setting.")


def _agent_for(state: _State, token: str | None) -> str | None:
    """The agent whose api_tokens entry is ``token`` (every token compared, in constant time), else None."""
    if token is None:
        return None
    given = token.encode()
    agent = None
    for candidate, owner in state.tokens.items():
        if hmac.compare_digest(given, candidate.encode()):
            agent = owner
    return agent


def caller(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> ContextEngine:
    """The engine of the calling agent: the token's agent with api_tokens, else the configured one."""
    state = _state(request)
    assert state.engines is not None, "the app's lifespan opens the engines"
    if not state.tokens:
        return state.engines.base
    if credentials is None:
        raise ApiError(401, "Unauthorized", "this server needs Authorization: Bearer <token> (see api_tokens)")
    agent = _agent_for(state, credentials.credentials)
    if agent is None:
        raise ApiError(401, "Unauthorized", "the bearer token is not one of this server's api_tokens")
    return state.engines.for_agent(agent)


async def ui_engine(request: Request) -> ContextEngine:
    """The web explorer's caller: as :func:`caller`, from its session cookie or a bearer header."""
    from lossless.adapters.ui import COOKIE, LoginRequired

    state = _state(request)
    assert state.engines is not None, "the app's lifespan opens the engines"
    if not state.tokens:
        return state.engines.base
    header = request.headers.get("authorization", "")
    token = request.cookies.get(COOKIE) or (header[7:] if header.lower().startswith("bearer ") else None)
    agent = _agent_for(state, token)
    if agent is None:
        raise LoginRequired
    return state.engines.for_agent(agent)


Caller = Annotated[ContextEngine, Depends(caller)]
router = APIRouter()


# ----------------------------------------------------------------- errors: one shape for all


async def on_lcm_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, LcmError)
    status = status_for(exc)
    if status >= 500:
        log.error("request failed: %s", exc, exc_info=exc)
    return _error(type(exc).__name__, str(exc), status, retryable=bool(getattr(exc, "retryable", False)))


async def on_api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return _error(exc.kind, str(exc), exc.status)


async def on_invalid(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    details = [
        {"where": ".".join(str(p) for p in e.get("loc", ())), "problem": str(e.get("msg", ""))} for e in exc.errors()
    ]
    summary = "; ".join(f"{d['where']}: {d['problem']}" for d in details[:5])
    return _error("ValidationError", f"the request is invalid: {summary}", 422, details=details)


async def on_http(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    kind = {404: "NotFound", 405: "MethodNotAllowed", 413: "PayloadTooLarge"}.get(exc.status_code, "HTTPError")
    return _error(kind, str(exc.detail), exc.status_code)


async def on_bug(_: Request, exc: Exception) -> JSONResponse:
    log.error("unexpected error serving a request", exc_info=exc)
    return _error("InternalError", "the server failed unexpectedly; the error is in its log", 500)


async def measure(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    started = time.perf_counter()
    response = await call_next(request)
    route = getattr(request.scope.get("route"), "path", "unmatched")
    metrics = _state(request).metrics
    metrics.requests.labels(request.method, route, str(response.status_code)).inc()
    metrics.latency.labels(route).observe(time.perf_counter() - started)
    return response


# ----------------------------------------------------------------- endpoints

# -- service


@router.get("/v1/health", tags=["service"])
async def health() -> dict[str, Any]:
    """Liveness: answers without authentication."""
    return {"status": "ok", "version": VERSION}


@router.get("/v1/metrics", tags=["service"], response_class=Response)
async def metrics(request: Request, engine: Caller) -> Response:
    """The engine's metrics (lossless.observability) and this server's request counts and latencies, Prometheus text."""
    engine_metrics, content_type = render_metrics()
    served = prometheus_client.generate_latest(_state(request).metrics.registry)
    return Response(engine_metrics + served, media_type=content_type)


@router.get("/v1/stats", tags=["service"])
async def stats(engine: Caller) -> dict[str, Any]:
    """Store-wide row counts (no content, no database URL)."""
    found = await engine.stats()
    out: dict[str, JSONValue] = jsonable(found)
    out.pop("url", None)
    out.pop("table_bytes", None)
    return out


# -- lifecycle


@router.post("/v1/ingest", tags=["lifecycle"])
async def ingest(body: IngestIn, engine: Caller) -> dict[str, Any]:
    """Store one message of a session."""
    (message,) = _messages([body.message])
    result = await engine.ingest(body.session_id, message, session_key=body.session_key, is_heartbeat=body.is_heartbeat)
    return result.to_dict()


@router.post("/v1/ingest_batch", tags=["lifecycle"])
async def ingest_batch(body: IngestBatchIn, engine: Caller) -> dict[str, Any]:
    """Store messages of a session in order, in one transaction."""
    result = await engine.ingest_batch(body.session_id, _messages(body.messages), session_key=body.session_key)
    return result.to_dict()


@router.post("/v1/assemble", tags=["lifecycle"])
async def assemble(body: AssembleIn, engine: Caller) -> dict[str, Any]:
    """The messages to send the model now, within token_budget, in OpenAI or Anthropic format."""
    context = await engine.assemble(
        body.session_id,
        token_budget=body.token_budget,
        prompt=body.prompt,
        output=body.output,
        messages=_messages(body.messages),
    )
    return context.to_dict()


@router.post("/v1/after_turn", tags=["lifecycle"])
async def after_turn(body: AfterTurnIn, engine: Caller) -> dict[str, Any]:
    """Store a turn's new messages, then compact if a trigger fires.

    A turn that could not be stored is an error response (its status from the error's kind), never a
    200; a compaction that failed after the turn was stored comes back in ``error`` with 200.
    """
    result = await engine.after_turn(
        body.session_id,
        _messages(body.messages),
        token_budget=body.token_budget,
        session_key=body.session_key,
        observed_tokens=body.observed_tokens,
    )
    if result.ingest_failure is not None:
        raise result.ingest_failure
    return result.to_dict()


@router.post("/v1/compact", tags=["lifecycle"])
async def compact(body: CompactIn, engine: Caller) -> dict[str, Any]:
    """Compact a conversation now: force = every pass there is room for; target_tokens = until it fits."""
    result = await engine.compact(
        check_conversation_ref(body.conversation), force=body.force, target_tokens=body.target_tokens
    )
    return result.to_dict()


def _importable(raw: str, roots: list[Path]) -> Path:
    """``raw`` resolved (links followed), if it is a file under one of ``roots``."""
    if not roots:
        raise ApiError(403, "Forbidden", "bootstrap from server files is off: set api_import_roots to allow it")
    try:
        path = Path(raw).resolve()
    except (OSError, ValueError) as exc:
        raise InputError(f"path {raw!r} is not usable: {exc}") from exc
    if not any(path.is_relative_to(root) for root in roots):
        raise ApiError(403, "Forbidden", f"path {raw!r} is outside api_import_roots")
    if not path.is_file():
        raise NotFoundError("transcript file", raw)
    return path


@router.post("/v1/bootstrap", tags=["lifecycle"])
async def bootstrap(request: Request, body: BootstrapIn, engine: Caller) -> dict[str, Any]:
    """Import what a transcript file on the server holds that the store lacks (under api_import_roots)."""
    path = await anyio.to_thread.run_sync(_importable, body.path, _state(request).roots)
    try:
        result = await engine.bootstrap(
            path, session_id=body.session_id, session_key=body.session_key, format_name=body.format, full=body.full
        )
    except OSError as exc:
        raise InputError(f"cannot read {body.path!r}: {exc.strerror or exc}") from exc
    return result.to_dict()


# -- reading back


@router.get("/v1/conversations", tags=["conversations"])
async def conversations(
    engine: Caller,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=_MAX_INT)] = 0,
) -> dict[str, Any]:
    """The caller's conversations, most recently updated first."""
    found = await engine.conversations(limit=limit, offset=offset)
    return {"conversations": [c.to_dict() for c in found]}


@router.get("/v1/conversations/{conversation}", tags=["conversations"])
async def conversation(conversation: str, engine: Caller) -> dict[str, Any]:
    """One conversation, by id or session id."""
    return (await engine.conversation(check_conversation_ref(conversation))).to_dict()


@router.get("/v1/conversations/{conversation}/messages", tags=["conversations"])
async def messages(
    conversation: str,
    engine: Caller,
    tail: Annotated[int | None, Query(ge=0, le=_MAX_INT)] = None,
    after_seq: Annotated[int | None, Query(ge=0, le=2**62)] = None,
    limit: Annotated[int | None, Query(ge=1, le=10_000)] = None,
) -> dict[str, Any]:
    """Stored messages in order (tail = the last N)."""
    found = await engine.messages(check_conversation_ref(conversation), tail=tail, after_seq=after_seq, limit=limit)
    return {"messages": [m.to_dict() for m in found]}


@router.get("/v1/conversations/{conversation}/summaries", tags=["conversations"])
async def summaries(conversation: str, engine: Caller) -> dict[str, Any]:
    """Every summary of a conversation, oldest first, each with the ids it was made from."""
    found, lineage = await engine.summaries(check_conversation_ref(conversation))
    return {"summaries": [summary_dict(s, lineage.get(s.id, ())) for s in found]}


@router.get("/v1/conversations/{conversation}/compactions", tags=["conversations"])
async def compactions(
    conversation: str, engine: Caller, limit: Annotated[int | None, Query(ge=1, le=10_000)] = None
) -> dict[str, Any]:
    """The conversation's compaction passes, oldest first (with limit: the newest ones), with their summaries' kind,
    depth and level."""
    events = await engine.compaction_history(check_conversation_ref(conversation), limit=limit)
    return {"events": [event_dict(e, summary) for e, summary in events]}


@router.get("/v1/conversations/{conversation}/integrity", tags=["conversations"])
async def integrity(conversation: str, engine: Caller) -> dict[str, Any]:
    """Check one conversation's integrity (lineage, context, files); read-only, nothing is repaired."""
    report = await engine.check_integrity(check_conversation_ref(conversation))
    return report.to_dict()


@router.get("/v1/conversations/{conversation}/files", tags=["files"])
async def files(
    conversation: str,
    engine: Caller,
    limit: Annotated[int | None, Query(ge=1, le=10_000)] = None,
    offset: Annotated[int, Query(ge=0, le=_MAX_INT)] = 0,
) -> dict[str, Any]:
    """Large files stored aside for a conversation."""
    found = await engine.files(check_conversation_ref(conversation), limit=limit, offset=offset)
    return {"files": [f.to_dict() for f in found]}


@router.get("/v1/files/{file_id}", tags=["files"])
async def describe_file(
    file_id: str,
    engine: Caller,
    start_line: Annotated[int | None, Query(ge=1, le=_MAX_INT)] = None,
    end_line: Annotated[int | None, Query(ge=1, le=_MAX_INT)] = None,
    max_bytes: Annotated[int, Query(ge=1, le=16 * 1024 * 1024)] = DEFAULT_PAGE_BYTES,
) -> dict[str, Any]:
    """A stored file's metadata, exploration summary and a page of its lines."""
    return (
        await engine.describe_file(file_id, start_line=start_line, end_line=end_line, max_bytes=max_bytes)
    ).to_dict()


# ----------------------------------------------------------------- the agent tools, one endpoint each


def _tool_endpoint(name: str) -> Callable[..., Awaitable[dict[str, Any]]]:
    async def endpoint(request: Request, engine: Caller) -> dict[str, Any]:
        try:
            arguments = await request.json()
        except ValueError as exc:
            raise InputError(f"{name}: the body must be a JSON object of the tool's arguments ({exc})") from exc
        except RecursionError:
            raise InputError(f"{name}: the body nests lists and objects too deep to be read") from None
        if not isinstance(arguments, dict):
            raise InputError(f"{name}: the body must be a JSON object of the tool's arguments")
        return await call_tool(engine, name, arguments)

    return endpoint


#: The retrieval endpoints: path → the agent tool it runs (the same call as ``/v1/tools/<tool>``).
RETRIEVAL_ROUTES = {
    "/v1/grep": "lcm_grep",
    "/v1/describe": "lcm_describe",
    "/v1/expand": "lcm_expand",
    "/v1/expand_query": "lcm_expand_query",
}


def _add_tool_routes(app: FastAPI) -> None:
    """``POST /v1/tools/{name}`` for every tool of the table (and the retrieval paths), with its input schema."""
    routes = [(f"/v1/tools/{spec.name}", spec, "tools", spec.name) for spec in tool_specs()]
    routes += [(path, TOOLS[tool], "retrieval", path.removeprefix("/v1/")) for path, tool in RETRIEVAL_ROUTES.items()]
    for path, spec, tag, name in routes:
        body = {"required": True, "content": {"application/json": {"schema": dict(spec.input_schema)}}}
        app.add_api_route(
            path,
            _tool_endpoint(spec.name),
            methods=["POST"],
            tags=[tag],
            name=name,
            summary=spec.name if tag == "tools" else f"{name} (the {spec.name} tool)",
            description=spec.description,
            openapi_extra={"requestBody": body},
        )


# ----------------------------------------------------------------- the app


def create_app(config: Config, *, engines: Engines | None = None, listen_host: str | None = None) -> FastAPI:
    """The ASGI app.  It opens the engines on ``config`` at startup (unless given) and closes them at shutdown.

    ``listen_host`` is the address the server listens on (a name it answers to besides the loopback
    names and ``api_allowed_hosts``; see :mod:`lossless.adapters.web_guard`).
    """
    state = _State(
        tokens=parse_tokens(config.api_tokens),
        roots=[Path(root).expanduser().resolve() for root in config.api_import_roots],
        metrics=_Metrics(),
        engines=engines,  # given engines serve at once (an in-process ASGI client runs no lifespan)
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        state.engines = engines or await Engines.open(config)
        try:
            yield
        finally:
            if engines is None:
                await state.engines.close()

    app = FastAPI(
        title="lossless",
        version=VERSION,
        description="Lossless context memory for LLM agents: ingest, assemble, compact, search and read back. "
        "Errors always have the shape {error: {type, message, status, retryable}}.",
        lifespan=lifespan,
        docs_url=None,  # FastAPI's pages load their scripts from a CDN: /docs is rendered here instead
        redoc_url=None,
    )
    app.state.lcm = state

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        """The API reference as one self-contained page (works offline)."""
        return HTMLResponse(docs_page(app.openapi()))

    app.include_router(router)
    from lossless.adapters.ui import ui_router

    app.include_router(ui_router(ui_engine, token_valid=lambda token: _agent_for(state, token) is not None))
    _add_tool_routes(app)
    app.add_exception_handler(LcmError, on_lcm_error)
    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(RequestValidationError, on_invalid)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_bug)
    app.middleware("http")(measure)
    app.add_middleware(BodyLimit, limit=config.api_max_request_bytes)
    app.add_middleware(
        BrowserGuard,
        listen_host=listen_host,
        hosts=config.api_allowed_hosts,
        origins=config.api_allowed_origins,
    )
    return app


async def serve(
    config: Config,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    build_index: bool = True,
    sock: socket.socket | None = None,
) -> None:
    """Run the API with uvicorn until interrupted; refuses a non-loopback ``host`` without api_tokens.

    With ``build_index`` (``lcm serve``; not the read-only ``lcm ui``) the server also builds the
    semantic index and mines memories while idle, as the MCP server and workers do: searches by
    meaning never embed stored texts, so without a builder they would rank by words alone.
    ``sock``: already bound by :func:`listen_socket` (``lcm ui`` binds before it opens the browser); the
    server closes it.
    """
    import uvicorn

    check_bind(config, host)
    sock = sock or listen_socket(host, port)
    try:
        engines = await Engines.open(config)
        try:
            app = create_app(config, engines=engines, listen_host=host)
            server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="info"))
            async with anyio.create_task_group() as group:
                if build_index:
                    group.start_soon(engines.base.index_in_background)
                await server.serve(sockets=[sock])
                group.cancel_scope.cancel()
        finally:
            await engines.close()
    finally:
        sock.close()


def listen_socket(host: str, port: int) -> socket.socket:
    """The bound socket a server listens on, as uvicorn binds it; a port it cannot have is a :class:`ConfigError`
    that says what to do (uvicorn itself would exit from inside its task group, with a traceback)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; another server (another `lcm serve` or "
            "`lcm mcp --http`?) may be using that port: stop it, or choose another with --port"
        ) from exc
    sock.set_inheritable(True)
    return sock


def check_bind(config: Config, host: str) -> None:
    if not is_loopback(host) and not config.api_tokens:
        raise ConfigError(
            f"refusing to listen on {host!r} without authentication: anyone who can reach it could read every "
            "conversation. Set api_tokens (e.g. LCM_API_TOKENS='<token>=<agent>'), or listen on 127.0.0.1",
            setting="api_tokens",
        )
