"""Test doubles for your own tests: a scriptable fake summarizer and a stub provider HTTP server.

* :class:`FakeSummarizer` is a :class:`~lossless.ports.Summarizer` that needs
  nothing: deterministic summaries by default, or, call by call, a scripted
  text, an exception, a delay, a hang, an empty or an over-long answer.  It
  records every request.
* :class:`StubProviderServer` is a real HTTP server on ``127.0.0.1`` (a thread
  of the standard library's ``http.server``) that speaks enough of OpenAI's
  chat-completions and Anthropic's messages wire formats for their official
  SDKs to work against it.  Each call takes the next scripted
  :class:`StubReply` (an answer, an error status in the provider's own error
  shape, a delay, an empty, cut-off or oversized answer) and is recorded as a
  :class:`RecordedRequest`.

Invariants: both are deterministic (no randomness, no clock beyond scripted
delays); the server listens on loopback only, on a free port, and closing it
ends scripted delays at once; nothing here imports an SDK.
"""

from __future__ import annotations

import json
import math
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, Self

import anyio

from lossless.memory.hashing import HashEmbedder
from lossless.ports import SummaryRequest, SummaryResult
from lossless.prompts import EXPAND_FOOTER, FILES_NONE, level_of

__all__ = [
    "FakeStep",
    "FakeSummarizer",
    "HashEmbedder",
    "RecordedRequest",
    "Scripted",
    "StubProviderServer",
    "StubReply",
    "default_fake_summary",
]

_CHARS_PER_TOKEN = 4


# ---------------------------------------------------------------------- FakeSummarizer


@dataclass(frozen=True, slots=True)
class FakeStep:
    """What one call of a :class:`FakeSummarizer` does.

    In order: wait ``delay_s`` (``math.inf`` hangs until cancelled), raise
    ``error`` if set, else return ``text`` (or, with ``length_factor``, a text
    about that many times the request's target; with ``answer``, what it makes
    of the request; with none of them, the default deterministic summary).
    """

    text: str | None = None
    error: BaseException | None = None
    delay_s: float = 0.0
    length_factor: float | None = None
    answer: Callable[[SummaryRequest], str] | None = None

    @classmethod
    def reply(cls, text: str) -> FakeStep:
        return cls(text=text)

    @classmethod
    def fail(cls, error: BaseException) -> FakeStep:
        return cls(error=error)

    @classmethod
    def hang(cls) -> FakeStep:
        return cls(delay_s=math.inf)

    @classmethod
    def slow(cls, delay_s: float, text: str | None = None) -> FakeStep:
        return cls(text=text, delay_s=delay_s)

    @classmethod
    def empty(cls) -> FakeStep:
        return cls(text="")

    @classmethod
    def long(cls, factor: float = 10.0) -> FakeStep:
        return cls(length_factor=factor)

    @classmethod
    def computed(cls, answer: Callable[[SummaryRequest], str]) -> FakeStep:
        return cls(answer=answer)

    @classmethod
    def head(cls, words: int) -> FakeStep:
        """Answer with the first ``words`` words of the segment."""
        return cls(answer=lambda request: " ".join(request.text.split()[:words]))


#: One item of a :class:`FakeSummarizer` script: a step, a reply, an exception to raise, or a reply maker.
Scripted = FakeStep | str | BaseException | Callable[[SummaryRequest], str]


class FakeSummarizer:
    """A deterministic, scriptable :class:`~lossless.ports.Summarizer` that records its calls.

    ``script`` items are used one per call, in order; a ``str`` is a reply, an
    exception is raised, and a callable makes the reply from the request.  When
    the script runs out, every call gets the default summary: the start of the
    segment cut to the target length (at four characters a token), then ``Files:
    none`` and the ``Expand for details about:`` line — or, with
    ``repeat_last``, the last step again.
    """

    def __init__(
        self,
        *script: Scripted,
        provider: str = "fake",
        model: str | None = "fake-1",
        repeat_last: bool = False,
    ) -> None:
        self.provider = provider
        self.model = model
        self.calls: list[SummaryRequest] = []
        self._script: deque[FakeStep] = deque(_as_step(item) for item in script)
        self._repeat_last = repeat_last
        self._last: FakeStep | None = None

    def script(self, *steps: Scripted) -> None:
        """Queue more steps after those not used yet."""
        self._script.extend(_as_step(item) for item in steps)

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.calls.append(request)
        if self._script:
            step = self._last = self._script.popleft()
        else:
            step = self._last if self._repeat_last and self._last is not None else FakeStep()
        if step.delay_s == math.inf:
            await anyio.sleep_forever()
        elif step.delay_s > 0:
            await anyio.sleep(step.delay_s)
        if step.error is not None:
            raise step.error
        if step.length_factor is not None:
            words = max(1, math.ceil(request.target_tokens * step.length_factor))
            text = " ".join(f"word{i % 100}" for i in range(words))
        elif step.text is not None:
            text = step.text
        elif step.answer is not None:
            text = step.answer(request)
        else:
            text = default_fake_summary(request)
        return SummaryResult(
            text=text,
            provider=self.provider,
            model=self.model,
            input_tokens=math.ceil(len(request.text) / _CHARS_PER_TOKEN),
            output_tokens=math.ceil(len(text) / _CHARS_PER_TOKEN),
        )


def default_fake_summary(request: SummaryRequest) -> str:
    """The fake's default answer: the segment's start, cut to the target, plus the two required lines."""
    footer = f"{FILES_NONE}\n{EXPAND_FOOTER} the rest of the {level_of(request)} segment"
    budget = max(0, request.target_tokens * _CHARS_PER_TOKEN - len(footer) - 1)
    excerpt = " ".join(request.text.split())[:budget].strip()
    return f"{excerpt}\n{footer}" if excerpt else footer


def _as_step(item: Scripted) -> FakeStep:
    if isinstance(item, FakeStep):
        return item
    if isinstance(item, str):
        return FakeStep(text=item)
    if isinstance(item, BaseException):
        return FakeStep(error=item)
    return FakeStep(answer=item)


# ---------------------------------------------------------------------- StubProviderServer

Api = Literal["openai", "anthropic"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


@dataclass(frozen=True, slots=True)
class StubReply:
    """One scripted answer of a :class:`StubProviderServer`.

    ``status`` 200 answers with ``text``; any other status answers with the
    provider's error body (``message`` may contain ``{api_key}``, replaced by
    the key the request sent, to check that clients never repeat it).
    ``cut_off`` marks the answer as stopped at the output cap
    (``finish_reason: "length"`` / ``stop_reason: "max_tokens"``).
    ``reasoning`` is returned the way reasoning models do it: a ``thinking``
    block before the text (Anthropic) or a ``reasoning_content`` field (the
    OpenAI-compatible servers vLLM and DeepSeek use).
    """

    text: str = ""
    status: int = 200
    message: str = ""
    error_type: str | None = None
    param: str | None = None
    delay_s: float = 0.0
    cut_off: bool = False
    reasoning: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    #: Tool calls the model makes, as ``(tool name, arguments)``: ``tool_calls`` / ``tool_use`` in the reply.
    tool_calls: tuple[tuple[str, Mapping[str, Any]], ...] = ()

    @classmethod
    def tool_call(cls, name: str, arguments: Mapping[str, Any], *more: tuple[str, Mapping[str, Any]]) -> StubReply:
        """A reply in which the model calls tool ``name`` with ``arguments`` (and any ``more`` calls)."""
        return cls(tool_calls=((name, dict(arguments)), *more))

    @classmethod
    def answer(cls, text: str, *, delay_s: float = 0.0, cut_off: bool = False, reasoning: str = "") -> StubReply:
        return cls(text=text, delay_s=delay_s, cut_off=cut_off, reasoning=reasoning)

    @classmethod
    def error(
        cls,
        status: int,
        message: str = "",
        *,
        error_type: str | None = None,
        param: str | None = None,
        delay_s: float = 0.0,
    ) -> StubReply:
        return cls(
            status=status,
            message=message or f"stub error {status}",
            error_type=error_type,
            param=param,
            delay_s=delay_s,
        )

    @classmethod
    def empty(cls) -> StubReply:
        return cls(text="")

    @classmethod
    def oversized(cls, words: int = 20_000, *, cut_off: bool = False) -> StubReply:
        return cls(text=" ".join(f"filler{i % 1000}" for i in range(words)), cut_off=cut_off)

    @classmethod
    def slow(cls, delay_s: float, text: str = "late answer") -> StubReply:
        return cls(text=text, delay_s=delay_s)


#: What the server answers when its script is empty.
DEFAULT_REPLY = StubReply(text=f"The stub summarised the segment.\n{FILES_NONE}\n{EXPAND_FOOTER} everything")


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the stub received (header names in lower case)."""

    api: Api
    method: str
    path: str
    headers: Mapping[str, str]
    body: Mapping[str, Any] = field(default_factory=dict)

    @property
    def api_key(self) -> str | None:
        """The key sent as ``x-api-key`` or as an ``Authorization: Bearer`` token."""
        if "x-api-key" in self.headers:
            return self.headers["x-api-key"]
        auth = self.headers.get("authorization", "")
        return auth[len("Bearer ") :] if auth.startswith("Bearer ") else None

    @property
    def model(self) -> str | None:
        value = self.body.get("model")
        return value if isinstance(value, str) else None

    @property
    def temperature(self) -> float | None:
        value = self.body.get("temperature")
        return float(value) if isinstance(value, int | float) else None

    @property
    def max_tokens(self) -> int | None:
        """The output cap, under whichever name the client sent it."""
        for name in ("max_tokens", "max_completion_tokens"):
            value = self.body.get(name)
            if isinstance(value, int):
                return value
        return None

    @property
    def system(self) -> str:
        """The system prompt (Anthropic's ``system``, or OpenAI's system messages)."""
        if self.api == "anthropic":
            return _text_of(self.body.get("system"))
        return "\n".join(_text_of(m.get("content")) for m in self._messages() if m.get("role") == "system")

    @property
    def user(self) -> str:
        """The text of the user messages."""
        return "\n".join(_text_of(m.get("content")) for m in self._messages() if m.get("role") == "user")

    def _messages(self) -> list[Mapping[str, Any]]:
        messages = self.body.get("messages")
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return ""


class StubProviderServer:
    """A loopback HTTP server speaking the OpenAI and Anthropic wire formats, with scripted replies.

    Use it as a context manager::

        with StubProviderServer(StubReply.error(429), StubReply.answer("ok")) as stub:
            client = AsyncOpenAI(api_key="k", base_url=stub.openai_base_url)
            ...
            assert stub.requests[0].model == "my-model"

    OpenAI clients use :attr:`openai_base_url` (``…/v1``), Anthropic clients
    :attr:`anthropic_base_url`.  Requests to ``…/chat/completions`` get OpenAI
    shapes, requests to ``…/messages`` Anthropic ones; anything else is a 404.
    """

    def __init__(self, *script: StubReply, default: StubReply = DEFAULT_REPLY) -> None:
        self.default = default
        self._script: deque[StubReply] = deque(script)
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    def start(self) -> Self:
        if self._server is not None:
            return self
        self._stopping.clear()
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="stub-provider", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- addresses

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the stub server is not running: use it as a context manager or call start()")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    # -- script and records

    def script(self, *replies: StubReply) -> None:
        """Queue more replies after those not used yet."""
        with self._lock:
            self._script.extend(replies)

    @property
    def requests(self) -> list[RecordedRequest]:
        """The requests received so far, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    def _next(self, request: RecordedRequest) -> StubReply:
        with self._lock:
            self._requests.append(request)
            return self._script.popleft() if self._script else self.default

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)


def _handler_for(stub: StubProviderServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_StubHandler):
        owner = stub

    return Handler


class _StubHandler(BaseHTTPRequestHandler):
    owner: StubProviderServer
    server_version = "lossless-stub/1"

    def log_message(self, format: str, *args: Any) -> None:  # the stub is quiet
        return

    def do_GET(self) -> None:
        self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found_error"}})

    def do_POST(self) -> None:
        api: Api | None
        if self.path.rstrip("/").endswith("/embeddings"):
            self._embeddings()
            return
        if self.path.rstrip("/").endswith("/chat/completions"):
            api = "openai"
        elif self.path.rstrip("/").endswith("/messages"):
            api = "anthropic"
        else:
            api = None
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        if api is None or not isinstance(body, dict):
            problem = f"no route {self.path}" if api is None else "the body is not a JSON object"
            self._send(404 if api is None else 400, _error_body(api or "openai", 404 if api is None else 400, problem))
            return
        headers = {name.lower(): value for name, value in self.headers.items()}
        request = RecordedRequest(api=api, method="POST", path=self.path, headers=headers, body=body)
        reply = self.owner._next(request)
        self.owner._wait(reply.delay_s)
        if reply.status != 200:
            message = reply.message.replace("{api_key}", request.api_key or "")
            self._send(reply.status, _error_body(api, reply.status, message, reply.error_type, reply.param))
            return
        self._send(200, _answer_body(api, request, reply))

    def _embeddings(self) -> None:
        """OpenAI's embeddings route: vectors from :class:`HashEmbedder` (``dimensions`` honoured, default 64)."""
        length = int(self.headers.get("content-length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("input"), list | str):
            self._send(400, _error_body("openai", 400, "input must be a string or a list of strings"))
            return
        headers = {name.lower(): value for name, value in self.headers.items()}
        request = RecordedRequest(api="openai", method="POST", path=self.path, headers=headers, body=body)
        reply = self.owner._next(request)
        self.owner._wait(reply.delay_s)
        if reply.status != 200:
            self._send(reply.status, _error_body("openai", reply.status, reply.message, reply.error_type))
            return
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        embedder = HashEmbedder(int(body.get("dimensions") or 64))
        data = [{"object": "embedding", "index": i, "embedding": embedder.vector(str(t))} for i, t in enumerate(texts)]
        tokens = sum(len(str(t)) // _CHARS_PER_TOKEN + 1 for t in texts)
        self._send(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model") or "stub-embed",
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def _send(self, status: int, payload: Mapping[str, Any]) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            if status == 429:
                self.send_header("retry-after", "0")
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (a timeout test): nothing to answer
            self.close_connection = True


def _error_body(
    api: Api, status: int, message: str, error_type: str | None = None, param: str | None = None
) -> dict[str, Any]:
    kind = error_type or _ERROR_TYPES.get(status, "api_error")
    if api == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


def _answer_body(api: Api, request: RecordedRequest, reply: StubReply) -> dict[str, Any]:
    model = request.model or "stub-model"
    input_tokens = reply.input_tokens
    if input_tokens is None:
        input_tokens = math.ceil(len(request.system + request.user) / _CHARS_PER_TOKEN)
    output_tokens = reply.output_tokens
    if output_tokens is None:
        output_tokens = math.ceil(len(reply.text) / _CHARS_PER_TOKEN)
    number = len(request.path) + len(reply.text)
    if api == "anthropic":
        content: list[dict[str, Any]] = []
        if reply.reasoning:
            content.append({"type": "thinking", "thinking": reply.reasoning, "signature": "stub-signature"})
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for i, (name, arguments) in enumerate(reply.tool_calls):
            content.append({"type": "tool_use", "id": f"toolu_stub{number}_{i}", "name": name, "input": arguments})
        stop = "tool_use" if reply.tool_calls else "max_tokens" if reply.cut_off else "end_turn"
        return {
            "id": f"msg_stub{number}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        }
    return {
        "id": f"chatcmpl-stub{number}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": reply.text or (None if reply.tool_calls else ""),
                    **({"reasoning_content": reply.reasoning} if reply.reasoning else {}),
                    **(
                        {
                            "tool_calls": [
                                {
                                    "id": f"call_stub{number}_{i}",
                                    "type": "function",
                                    "function": {"name": name, "arguments": json.dumps(arguments)},
                                }
                                for i, (name, arguments) in enumerate(reply.tool_calls)
                            ]
                        }
                        if reply.tool_calls
                        else {}
                    ),
                },
                "finish_reason": "tool_calls" if reply.tool_calls else "length" if reply.cut_off else "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": input_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        },
    }
