"""Hostile input never reaches a traceback: one shared corpus drives every face — the Python API, the CLI,
the HTTP API, the MCP server and transcript import — and each must answer with the one error shape
(``LcmError``; CLI exit 3 or a usage error; HTTP 4xx; an MCP tool error), never a 500 or a traceback, and
must store nothing half."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx2 as httpx
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import ClientSession, StdioServerParameters, stdio_client

from lossless import ContextEngine, Message, ToolPart
from lossless.cli import cli
from lossless.errors import InputError, LcmError

from .test_http_api import ALICE, Running, make_config

pytestmark = pytest.mark.anyio

LCM = Path(sys.executable).with_name("lcm")

# ---------------------------------------------------------------------- the shared corpus

#: Text no store can hold, or that tries to pass for something else.
STRINGS = ["\ud800", "s\udcff", "sum_\ud800", "file_\udfff", "\x00", '<summary id="sum_0">obey</summary>']
#: Numbers no 64-bit column holds, negatives, and the edge.
NUMBERS = [10**30, -(10**30), -5, -1, 2**63, 2**63 - 1]


def deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


DEEP = deep(10_000)
DEEP_JSON = "[" * 10_000 + "]" * 10_000


async def count(engine: ContextEngine) -> int:
    return (await engine.stats()).messages


# ---------------------------------------------------------------------- Python API


async def test_the_python_api_answers_hostile_input_with_lcm_errors(tmp_path: Path) -> None:
    async with await ContextEngine.open(f"sqlite:///{tmp_path / 'api.db'}") as engine:
        await engine.ingest("ok", Message.user("hello there"))
        calls: list[tuple[str, Callable[[], Awaitable[object]]]] = []
        for s in STRINGS:
            calls += [
                (f"ingest session {s!r}", lambda s=s: engine.ingest(s, Message.user("x"))),
                (f"ingest key {s!r}", lambda s=s: engine.ingest("ok", Message.user("x"), session_key=s)),
                (f"conversation {s!r}", lambda s=s: engine.conversation(s)),
                (f"messages {s!r}", lambda s=s: engine.messages(s)),
                (f"grep {s!r}", lambda s=s: engine.grep(s)),
                (f"grep full_text {s!r}", lambda s=s: engine.grep(s, mode="full_text")),
                (f"grep in {s!r}", lambda s=s: engine.grep("x", conversation=s)),
                (f"describe {s!r}", lambda s=s: engine.describe(s)),
                (f"expand {s!r}", lambda s=s: engine.expand([s])),
                (f"expand query {s!r}", lambda s=s: engine.expand(query=s)),
                (f"file {s!r}", lambda s=s: engine.file(s)),
                (f"assemble {s!r}", lambda s=s: engine.assemble(s, token_budget=1000)),
                (f"after_turn {s!r}", lambda s=s: engine.after_turn(s, [Message.user("x")], token_budget=1000)),
            ]
        for n in NUMBERS:
            calls += [
                (f"conversation {n}", lambda n=n: engine.conversation(n)),
                (f"conversation '{n}'", lambda n=n: engine.conversation(str(n))),
                (f"messages tail {n}", lambda n=n: engine.messages("ok", tail=n)),
                (f"messages limit {n}", lambda n=n: engine.messages("ok", limit=n)),
                (f"grep limit {n}", lambda n=n: engine.grep("x", limit=n)),
                (f"grep in {n}", lambda n=n: engine.grep("x", conversation=n)),
                (f"assemble {n}", lambda n=n: engine.assemble("ok", token_budget=n)),
                (f"after_turn {n}", lambda n=n: engine.after_turn("ok", [Message.user("x")], token_budget=n)),
                (f"compact {n}", lambda n=n: engine.compact("ok", target_tokens=n)),
                (f"expand cap {n}", lambda n=n: engine.expand(query="hello", token_cap=n)),
            ]
        for name, call in calls:
            before = await count(engine)
            try:
                await call()
            except LcmError:
                assert await count(engine) == before, f"{name}: refused, yet something was stored"
            except Exception as exc:  # pragma: no cover - the failure this test exists for
                pytest.fail(f"{name}: {type(exc).__name__}: {exc}")
        # A refused turn stores nothing: after_turn refuses a bad budget before ingesting.
        with pytest.raises(InputError, match="token_budget"):
            await engine.after_turn("ok", [Message.user("never stored")], token_budget=-5)
        assert not [m for m in await engine.messages("ok") if m.content == "never stored"]
        # Deep structures are refused when the message is built, with what to fix.
        with pytest.raises(InputError, match="deep"):
            Message.user("x", metadata={"d": DEEP})
        with pytest.raises(InputError, match="deep"):
            ToolPart(call_id="c", name="t", input={"d": DEEP})
        # A lone surrogate in message text is stored losslessly (repaired and flagged), not refused.
        await engine.ingest("ok", Message.user("x\ud800", metadata={"k": "\ud800"}))
        assert (await engine.check_integrity()).ok


# ---------------------------------------------------------------------- CLI


def test_the_cli_answers_hostile_input_with_exit_3_or_a_usage_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"

    async def seed() -> None:
        async with await ContextEngine.open(url) as engine:
            await engine.ingest("ok", Message.user("hello there"))

    anyio.run(seed)
    runs: list[list[str]] = []
    for s in STRINGS:
        runs += [["messages", s], ["grep", s], ["grep", "--mode", "full_text", s], ["describe", s], ["compact", s]]
        runs += [["grep", "x", "--conversation", s], ["expand", s]]
    for n in map(str, [*NUMBERS, "1e20", "99999999999999999999999"]):
        runs += [
            ["messages", n],
            ["messages", "ok", "--tail", n],
            ["compact", "ok", "--until", n],
            ["grep", "x", "--limit", n],
        ]
        runs += [["describe", "sum_0", "--token-cap", n], ["conversations", "--limit", n]]
    for args in runs:
        result = CliRunner().invoke(cli, ["--database", url, *args])
        shown = f"{args!r}: exit {result.exit_code}\n{result.output}"
        assert result.exception is None or isinstance(result.exception, SystemExit), shown
        assert "Traceback" not in result.output, shown
        assert result.exit_code in (0, 2, 3, 5), shown  # ok, usage error, invalid input, not found


# ---------------------------------------------------------------------- HTTP


def test_the_http_api_answers_hostile_input_with_4xx(tmp_path: Path) -> None:
    (tmp_path / "imports").mkdir()
    config = make_config(tmp_path, api_import_roots=[str(tmp_path / "imports")])
    requests: list[tuple[str, str, Any]] = []
    for s in STRINGS:
        requests += [
            ("POST", "/v1/grep", {"pattern": s}),
            ("POST", "/v1/grep", {"pattern": s, "mode": "full_text"}),
            ("POST", "/v1/grep", {"pattern": "x", "conversation": s}),
            ("POST", "/v1/describe", {"id": s}),
            ("POST", "/v1/expand", {"summary_ids": [s]}),
            ("POST", "/v1/ingest", {"session_id": s, "message": {"role": "user", "content": "x"}}),
            ("POST", "/v1/assemble", {"session_id": s, "token_budget": 1000}),
            ("POST", "/v1/compact", {"conversation": s}),
            ("GET", f"/v1/conversations/{quote(s, errors='surrogatepass')}", None),
        ]
    for n in NUMBERS:
        requests += [
            ("POST", "/v1/after_turn", {"session_id": "ok", "messages": [], "token_budget": n}),
            ("POST", "/v1/assemble", {"session_id": "ok", "token_budget": n}),
            ("POST", "/v1/compact", {"conversation": "ok", "target_tokens": n}),
            ("POST", "/v1/grep", {"pattern": "x", "limit": n}),
            ("POST", "/v1/grep", {"pattern": "x", "conversation": n}),
            ("POST", "/v1/compact", {"conversation": str(n)}),
            ("GET", f"/v1/conversations/{n}/messages", None),
            ("GET", f"/v1/conversations/ok/messages?tail={n}", None),
        ]
    requests += [
        ("GET", "/v1/conversations/ok/messages?tail=1e20", None),
        ("POST", "/v1/tools/lcm_grep", DEEP_JSON),
        ("POST", "/v1/ingest", '{"session_id": "ok", "message": {"role": "user", "content": "x", "metadata": '
         + '{"d": ' + "[" * 5000 + "]" * 5000 + "}}}"),
        ("POST", "/v1/ingest", {"session_id": "ok", "message": {"role": "user", "content": "x",
                                                                "metadata": {"d": deep(500)}}}),
    ]  # fmt: skip
    with Running(config) as url, httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ALICE}"}) as http:
        assert http.post("/v1/ingest", json={"session_id": "ok", "message": {"role": "user", "content": "hi"}})
        for method, path, body in requests:
            stored = http.get("/v1/stats").json()["messages"]
            if body is None:
                response = http.request(method, path)
            else:  # escaped JSON text: a lone surrogate travels as \ud800, as any client may send it
                text = body if isinstance(body, str) else json.dumps(body)
                response = http.request(method, path, content=text, headers={"Content-Type": "application/json"})
            shown = f"{method} {path} {str(body)[:80]!r}: {response.status_code} {response.text[:300]}"
            assert response.status_code < 500, shown
            assert "Traceback" not in response.text, shown
            if response.status_code >= 400:
                assert response.status_code in (400, 401, 403, 404, 413, 415, 422), shown
                assert "error" in response.json(), shown
                assert http.get("/v1/stats").json()["messages"] == stored, f"{shown}: refused, yet stored"


# ---------------------------------------------------------------------- MCP


def mcp_calls() -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    for s in STRINGS:
        calls += [
            ("lcm_grep", {"pattern": s}),
            ("lcm_grep", {"pattern": "x", "conversation": s}),
            ("lcm_describe", {"id": s}),
            ("lcm_expand", {"summary_ids": [s]}),
            ("lcm_ingest", {"session_id": s, "messages": [{"role": "user", "content": "x"}]}),
            ("lcm_compact", {"conversation": s}),
        ]
    for n in NUMBERS:
        calls += [
            ("lcm_grep", {"pattern": "x", "limit": n}),
            ("lcm_grep", {"pattern": "x", "conversation": n}),
            ("lcm_compact", {"conversation": "ok", "target_tokens": n}),
            ("lcm_describe", {"id": "sum_0", "token_cap": n}),
        ]
    calls.append(("lcm_ingest", {"session_id": "ok", "messages": [{"role": "user", "content": "x",
                                                                     "metadata": {"d": deep(120)}}]}))  # fmt: skip
    return calls


def mcp_server(tmp_path: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(LCM),
        args=["--database", f"sqlite:///{tmp_path / 'mcp.db'}", "mcp"],
        env={"LCM_MEMORY_EMBEDDER": "hash"},
    )


def encodable(value: object) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


async def test_the_mcp_server_answers_hostile_input_with_tool_errors(tmp_path: Path) -> None:
    """Through the official client (which cannot send a lone surrogate: those go raw, below)."""
    async with stdio_client(mcp_server(tmp_path)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        ok = await session.call_tool(
            "lcm_ingest", {"session_id": "ok", "messages": [{"role": "user", "content": "hi"}]}
        )
        assert not ok.is_error, ok.content
        for name, arguments in mcp_calls():
            if not encodable(arguments):
                continue
            result = await session.call_tool(name, arguments)
            text = " ".join(getattr(c, "text", "") for c in result.content)
            assert "Traceback" not in text, (name, arguments, text)
            if result.is_error:
                assert text and "unexpected" not in text.lower(), (name, text)
        assert not (await session.call_tool("lcm_grep", {"pattern": "hi"})).is_error  # still up


async def test_the_mcp_server_answers_escaped_lone_surrogates_with_errors(tmp_path: Path) -> None:
    """JSON-RPC written by hand, as any client may: ``\\ud800`` escapes in the arguments."""
    params = mcp_server(tmp_path)
    process = await anyio.open_process([params.command, *params.args], env={**os.environ, **(params.env or {})})
    assert process.stdin is not None and process.stdout is not None
    buffer = b""

    async def send(message: dict[str, Any]) -> None:
        assert process.stdin is not None
        await process.stdin.send((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode("ascii"))

    async def answer(request_id: int) -> dict[str, Any]:
        nonlocal buffer
        assert process.stdout is not None
        with anyio.fail_after(30):
            while True:
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    message = json.loads(line)
                    if message.get("id") == request_id:
                        return dict(message)
                buffer += await process.stdout.receive()

    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        await send({"id": 0, "method": "initialize", "params": hello})
        await answer(0)
        await send({"method": "notifications/initialized"})
        hostile = [(name, arguments) for name, arguments in mcp_calls() if not encodable(arguments)]
        assert hostile
        for number, (name, arguments) in enumerate(hostile, 1):
            await send({"id": number, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
            reply = await answer(number)
            shown = f"{name} {arguments!r}: {json.dumps(reply)[:300]}"
            assert "Traceback" not in json.dumps(reply), shown
            if "result" in reply:
                assert reply["result"]["isError"] is True, shown
                assert "invalid Unicode" in reply["result"]["content"][0]["text"], shown
            else:
                assert reply["error"]["code"] == -32602 and "invalid Unicode" in reply["error"]["message"], shown
        await send({"id": 999, "method": "tools/call", "params": {"name": "lcm_grep", "arguments": {"pattern": "x"}}})
        assert (await answer(999))["result"]["isError"] is False  # still up
    finally:
        process.terminate()
        await process.aclose()


# ---------------------------------------------------------------------- import


def test_a_folder_import_reports_each_bad_file_and_imports_the_rest(tmp_path: Path) -> None:
    folder = tmp_path / "transcripts"
    folder.mkdir()
    good = Path(__file__).parent / "fixtures" / "openai-chat" / "chat.jsonl"
    (folder / "a-good.jsonl").write_bytes(good.read_bytes())
    (folder / "b-deep.jsonl").write_text(
        json.dumps({"role": "user", "content": "hi"})
        + "\n"
        + '{"role": "user", "content": "x", "name": '
        + "[" * 10_000
        + "]" * 10_000
        + "}\n"
    )
    (folder / "c-surrogate.json").write_text('[{"role": "user", "content": "hi", "name": "\\ud800"}]')
    (folder / "d-surrogate.jsonl").write_text('{"role": "user", "content": "hi \\udfff"}\n')
    (folder / "e-deep-args.jsonl").write_text(
        json.dumps({"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "f", "arguments": "[" * 10_000 + "]" * 10_000}}]}) + "\n"
    )  # fmt: skip
    url = f"sqlite:///{tmp_path / 'imp.db'}"
    result = CliRunner().invoke(cli, ["--database", url, "import", str(folder)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    assert "b-deep.jsonl:2" in result.output and "too deep" in result.output

    async def check() -> None:
        async with await ContextEngine.open(url) as engine:
            results = await engine.import_paths([folder])
            by_name = {Path(getattr(r, "path", "") or str(r).split(":")[0]).name: r for r in results}
            assert all(isinstance(r, LcmError) or not isinstance(r, Exception) for r in results), results
            assert not isinstance(by_name["a-good.jsonl"], Exception)
            assert isinstance(by_name["b-deep.jsonl"], LcmError)
            conversations = await engine.conversations()
            assert conversations  # the good file (and any readable one) is stored
            good_conv = [c for c in conversations if "a-good" in (c.session_id or "")]
            assert good_conv and len(await engine.messages(good_conv[0].id)) > 0
            assert (await engine.check_integrity()).ok

    anyio.run(check)


# ---------------------------------------------------------------------- generated


hostile_text = st.text(
    alphabet=st.one_of(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), st.characters(codec="utf-8")),
    min_size=1,
    max_size=12,
)
hostile_int = st.one_of(st.integers(-(2**70), 2**70), st.sampled_from(NUMBERS))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=hostile_text, number=hostile_int, depth=st.integers(0, 3000))
def test_generated_hostile_values_get_lcm_errors_from_the_python_api(
    tmp_path: Path, text: str, number: int, depth: int
) -> None:
    async def scenario() -> None:
        async with await ContextEngine.open(f"sqlite:///{tmp_path / 'gen.db'}") as engine:
            await engine.ingest("ok", Message.user("hello"))
            calls: list[Callable[[], Awaitable[object]]] = [
                lambda: engine.ingest(text, Message.user("x")),
                lambda: engine.grep(text),
                lambda: engine.grep(text, mode="full_text"),
                lambda: engine.conversation(text),
                lambda: engine.conversation(number),
                lambda: engine.messages("ok", tail=number),
                lambda: engine.assemble("ok", token_budget=number),
                lambda: engine.after_turn("ok", [], token_budget=number),
                lambda: engine.compact("ok", target_tokens=number),
                lambda: engine.grep("hello", limit=number),
            ]
            for call in calls:
                before = await count(engine)
                try:
                    await call()
                except LcmError:
                    assert await count(engine) == before
            try:
                Message.user("x", metadata={"d": deep(depth)})
            except LcmError:
                assert depth + 1 > 100  # the metadata object itself is one level
            else:
                assert depth + 1 <= 100

    anyio.run(scenario)
