"""The HTTP API, driven by a real HTTP client against uvicorn on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import uvicorn
from click.testing import CliRunner

from lossless.adapters.http import RETRIEVAL_ROUTES, STATUS_BY_ERROR, create_app, is_loopback
from lossless.adapters.service import TOOL_HANDLERS
from lossless.cli import cli
from lossless.config import Config, load_config
from lossless.errors import InputError, LcmError, NotFoundError
from lossless.tools import TOOLS

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef00"
FIXTURES = Path(__file__).parent / "fixtures"


class Running:
    """A uvicorn server on a free loopback port, in a thread."""

    def __init__(self, config: Config) -> None:
        self.server = uvicorn.Server(
            uvicorn.Config(create_app(config), host="127.0.0.1", port=0, log_level="warning", lifespan="on")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def make_config(tmp_path: Path, **settings: Any) -> Config:
    values: dict[str, Any] = {
        "database_url": f"sqlite:///{tmp_path / 'lcm.db'}",
        "api_tokens": [f"{ALICE}=alice", f"{BOB}=bob"],
        "fresh_tail_count": 4,
        "memory_embedder": "hash",
        **settings,
    }
    return load_config(values, env={})


@pytest.fixture
def base_url(tmp_path: Path) -> Iterator[str]:
    with Running(make_config(tmp_path, api_import_roots=[str(tmp_path / "imports")])) as url:
        yield url


def client(base_url: str, token: str | None = ALICE) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=base_url, headers=headers, timeout=30)


def assert_error(response: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert {"type", "message", "status", "retryable"} <= set(error)
    assert error["type"] == kind and error["status"] == status and error["message"]
    return error


def turn(i: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"question {i}: what about topic {i}?", "event_key": f"u{i}"},
        {"role": "assistant", "content": f"answer {i}: topic {i} is settled. " * 20, "event_key": f"a{i}"},
    ]


def test_the_lifecycle_over_http(base_url: str) -> None:
    with client(base_url) as http:
        assert http.get("/v1/health").json()["status"] == "ok"
        one = http.post("/v1/ingest", json={"session_id": "s1", "message": turn(0)[0]}).json()
        assert one["stored"] == 1 and one["conversation_id"] > 0
        batch = http.post("/v1/ingest_batch", json={"session_id": "s1", "messages": turn(0) + turn(1)}).json()
        assert batch["stored"] == 3 and batch["duplicates"] == 1
        for i in range(2, 12):
            done = http.post("/v1/after_turn", json={"session_id": "s1", "messages": turn(i), "token_budget": 100_000})
            assert done.status_code == 200 and done.json()["error"] is None
        compacted = http.post("/v1/compact", json={"conversation": "s1", "force": True}).json()
        assert compacted["summaries"] and compacted["tokens_after"] < compacted["tokens_before"]
        openai = http.post("/v1/assemble", json={"session_id": "s1", "token_budget": 4000}).json()
        assert openai["messages"][-1] == {"role": "assistant", "content": turn(11)[1]["content"]}
        assert openai["system_prompt_addition"] and any(isinstance(ref, str) for ref in openai["included"])
        anthropic = http.post(
            "/v1/assemble", json={"session_id": "s1", "token_budget": 4000, "output": "anthropic"}
        ).json()
        assert anthropic["messages"][0]["role"] == "user" and isinstance(anthropic["messages"][0]["content"], list)
        passed = http.post(
            "/v1/assemble",
            json={"session_id": "unknown", "token_budget": 100, "messages": [{"role": "user", "content": "hi"}]},
        ).json()
        assert passed["messages"] == [{"role": "user", "content": "hi"}]

        listed = http.get("/v1/conversations").json()["conversations"]
        assert [c["session_id"] for c in listed] == ["s1"] and listed[0]["agent_id"] == "alice"
        conv_id = listed[0]["id"]
        assert http.get(f"/v1/conversations/{conv_id}").json()["session_id"] == "s1"
        tail = http.get("/v1/conversations/s1/messages", params={"tail": 2}).json()["messages"]
        assert [m["event_key"] for m in tail] == ["u11", "a11"]
        summaries = http.get("/v1/conversations/s1/summaries").json()["summaries"]
        assert summaries and all(s["sources"] for s in summaries)
        events = http.get("/v1/conversations/s1/compactions").json()["events"]
        assert [e["summary_id"] for e in events] == [s["id"] for s in summaries]
        assert events[-1]["trigger"] == "manual" and events[-1]["tokens_after"] == compacted["tokens_after"]
        assert events[0]["kind"] == "leaf" and events[0]["source_items"] >= 1
        newest = http.get("/v1/conversations/s1/compactions", params={"limit": 1}).json()["events"]
        assert newest == events[-1:]
        assert_error(http.get("/v1/conversations/s1/compactions", params={"limit": 0}), 422, "ValidationError")
        assert http.get("/v1/conversations/s1/files").json() == {"files": []}
        checked = http.get("/v1/conversations/s1/integrity").json()
        assert checked["ok"] is True and checked["checked"]["messages"] == 24
        stats = http.get("/v1/stats").json()
        assert stats["messages"] == 24 and "url" not in stats
        metrics = http.get("/v1/metrics").text
        assert "lcm_http_requests_total" in metrics and "lcm_assemble_latency_ms" in metrics


def test_a_caller_sees_only_its_own_agent(tmp_path: Path) -> None:
    config = make_config(tmp_path, large_file_token_threshold=100)
    with Running(config) as base_url, client(base_url, ALICE) as alice, client(base_url, BOB) as bob:
        conv_id = alice.post("/v1/ingest_batch", json={"session_id": "private", "messages": turn(0)}).json()[
            "conversation_id"
        ]
        body = "\n".join(f"line {i}: secret value {i * 7}" for i in range(200))
        attached = {"role": "user", "content": f'<file name="notes.txt">\n{body}\n</file>'}
        assert alice.post("/v1/ingest", json={"session_id": "private", "message": attached}).json()["stored"] == 1
        # (the notes are over this low threshold too, and stored aside as pasted text)
        (stored_file,) = [
            f for f in alice.get("/v1/conversations/private/files").json()["files"] if f["name"] == "notes.txt"
        ]
        described = alice.get(f"/v1/files/{stored_file['id']}", params={"start_line": 1, "end_line": 2}).json()
        assert "secret value 0" in json.dumps(described)
        assert_error(bob.get(f"/v1/files/{stored_file['id']}"), 404, "NotFoundError")
        assert bob.get("/v1/conversations").json() == {"conversations": []}
        for path in (
            f"/v1/conversations/{conv_id}",
            "/v1/conversations/private",
            f"/v1/conversations/{conv_id}/messages",
            "/v1/conversations/private/summaries",
            "/v1/conversations/private/compactions",
            "/v1/conversations/private/files",
            "/v1/conversations/private/integrity",
        ):
            assert_error(bob.get(path), 404, "NotFoundError")
        assert_error(bob.post("/v1/compact", json={"conversation": str(conv_id)}), 404, "NotFoundError")
        # The same session id under bob is a different conversation: bob's assemble sees nothing of alice's.
        assembled = bob.post("/v1/assemble", json={"session_id": "private", "token_budget": 1000}).json()
        assert assembled["messages"] == []
        assert len(alice.get("/v1/conversations/private/messages").json()["messages"]) == 3


def test_authentication_is_required_when_tokens_are_set(base_url: str) -> None:
    with client(base_url, token=None) as anonymous, client(base_url, token="not-a-token-0123456789") as wrong:
        assert anonymous.get("/v1/health").status_code == 200
        for http in (anonymous, wrong):
            response = http.get("/v1/conversations")
            assert_error(response, 401, "Unauthorized")
            assert response.headers["www-authenticate"] == "Bearer"
            assert_error(http.post("/v1/ingest", json={}), 401, "Unauthorized")


def test_every_error_has_one_shape(base_url: str) -> None:
    with client(base_url) as http:
        error = assert_error(http.post("/v1/ingest", json={"session_id": "s"}), 422, "ValidationError")
        assert error["details"] and "message" in error["message"]
        assert_error(
            http.post("/v1/ingest", content=b"{not json", headers={"content-type": "application/json"}),
            422,
            "ValidationError",
        )
        bad_part = {"session_id": "s", "message": {"role": "user", "parts": [{"type": "nonsense"}]}}
        assert "message" in assert_error(http.post("/v1/ingest", json=bad_part), 400, "InputError")["message"]
        missing = assert_error(http.get("/v1/conversations/nope"), 404, "NotFoundError")
        assert "GET /v1/conversations" in missing["message"]  # where an HTTP client lists them, not only the CLI
        assert_error(http.get("/v1/conversations/99999999999999999999999"), 404, "NotFoundError")
        assert_error(http.get("/v1/files/file_0000"), 404, "NotFoundError")
        assert_error(http.get("/v1/no/such/route"), 404, "NotFound")
        assert_error(http.delete("/v1/conversations"), 405, "MethodNotAllowed")
        assert_error(http.post("/v1/bootstrap", json={"path": "/etc/passwd"}), 403, "Forbidden")


def test_error_statuses_are_fixed() -> None:
    # Locks the mapping clients rely on.
    statuses = {cls.__name__: code for cls, code in STATUS_BY_ERROR}
    assert statuses == {
        "InputError": 400,
        "NotFoundError": 404,
        "AccessDeniedError": 403,
        "ConflictError": 409,
        "ProviderAuthError": 502,
        "ProviderUnavailable": 503,
        "ProviderError": 502,
        "MissingDependencyError": 501,
        "ConfigError": 500,
        "StoreError": 500,
        "LcmError": 500,
    }
    assert issubclass(InputError, LcmError) and issubclass(NotFoundError, LcmError)


def test_request_bodies_are_limited(tmp_path: Path) -> None:
    with Running(make_config(tmp_path, api_max_request_bytes=2048)) as url, client(url) as http:
        big = {"session_id": "s", "message": {"role": "user", "content": "x" * 4096}}
        assert_error(http.post("/v1/ingest", json=big), 413, "PayloadTooLarge")

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted while it streams
            yield json.dumps(big).encode()

        assert_error(
            http.post("/v1/ingest", content=chunks(), headers={"content-type": "application/json"}),
            413,
            "PayloadTooLarge",
        )
        assert http.get("/v1/conversations").json() == {"conversations": []}


def test_bootstrap_reads_only_under_the_import_roots(tmp_path: Path, base_url: str) -> None:
    roots = tmp_path / "imports"
    roots.mkdir()
    source = FIXTURES / "claude-code" / "session.jsonl"
    transcript = roots / source.name
    transcript.write_bytes(source.read_bytes())
    with client(base_url) as http:
        done = http.post("/v1/bootstrap", json={"path": str(transcript)})
        assert done.status_code == 200, done.text
        assert done.json()["stored"] > 0
        assert http.post("/v1/bootstrap", json={"path": str(transcript)}).json()["stored"] == 0
        assert_error(http.post("/v1/bootstrap", json={"path": str(roots / ".." / "lcm.db")}), 403, "Forbidden")
        assert_error(http.post("/v1/bootstrap", json={"path": str(roots / "missing.jsonl")}), 404, "NotFoundError")


def test_openapi_is_published(base_url: str) -> None:
    with client(base_url, token=None) as http:
        spec = http.get("/openapi.json").json()
    assert {"/v1/ingest", "/v1/assemble", "/v1/after_turn", "/v1/compact", "/v1/conversations"} <= set(spec["paths"])
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


def test_docs_page_is_self_contained(base_url: str) -> None:
    with client(base_url, token=None) as http:
        page = http.get("/docs")
        spec = http.get("/openapi.json").json()
        assert http.get("/redoc").status_code == 404
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert "<script" not in html and "http://" not in html and "https://" not in html  # nothing loaded from elsewhere
    for path in spec["paths"]:
        assert f"<code>{path}</code>" in html
    assert "/openapi.json" in html


def test_loopback_detection() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "[::1]", "127.8.9.1"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.2", "example.com"))


def test_serve_refuses_a_public_address_without_tokens(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--database", f"sqlite:///{tmp_path / 'x.db'}", "serve", "--host", "0.0.0.0"])
    assert result.exit_code == 4, result.output
    assert "refusing to listen on '0.0.0.0'" in result.output and "api_tokens" in result.output


def test_a_missing_extra_names_the_install_command() -> None:
    code = (
        "import sys; sys.modules['fastapi'] = None; sys.modules['mcp'] = None\n"
        "from lossless.errors import MissingDependencyError\n"
        "for module in ('lossless.adapters.http', 'lossless.adapters.mcp'):\n"
        "    try:\n"
        "        __import__(module)\n"
        "    except MissingDependencyError as exc:\n"
        "        print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "pip install 'lossless-context[server]'" in done.stdout
    assert "pip install 'lossless-context[mcp]'" in done.stdout


def _lcm_serve(
    tmp_path: Path, url: str, *options: str, stderr: int = subprocess.DEVNULL, **env: str
) -> tuple[subprocess.Popen[bytes], int]:
    """``lcm serve`` on ``url`` in a subprocess, on a free loopback port (HOME in ``tmp_path``, ``env`` added)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    lcm = Path(sys.executable).with_name("lcm")
    server = subprocess.Popen(
        [str(lcm), "--database", url, "serve", *options, "--port", str(port)],
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), **env},
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    return server, port


def test_a_public_address_serves_only_authenticated_callers(tmp_path: Path) -> None:
    """``lcm serve`` on 0.0.0.0 (all interfaces) with tokens: no token, no data."""
    server, port = _lcm_serve(
        tmp_path,
        f"sqlite:///{tmp_path / 'p.db'}",
        "--host",
        "0.0.0.0",
        stderr=subprocess.PIPE,
        LCM_API_TOKENS=f"{ALICE}=alice",
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{base}/v1/health", timeout=1)
                break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline, "lcm serve did not start"
                time.sleep(0.1)
        with client(base, token=None) as anonymous, client(base, ALICE) as alice:
            assert_error(anonymous.get("/v1/conversations"), 401, "Unauthorized")
            assert alice.get("/v1/conversations").json() == {"conversations": []}
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=10)
    assert ALICE.encode() not in stderr  # tokens are never logged


def test_lcm_serve_builds_the_semantic_index_while_idle(tmp_path: Path) -> None:
    """``lcm serve`` builds what its searches by meaning read (they never embed): a store imported before
    it started is found by meaning once the build catches up, and the JSON result says how much is built."""
    import anyio

    from lossless import ContextEngine, Message

    url = f"sqlite:///{tmp_path / 'b.db'}"

    async def fill() -> None:
        async with await ContextEngine.open(url, memory_embedder="hash") as engine:
            await engine.ingest_batch(
                "s", [Message.user(f"note {i}: the nightly backup moved to array {i}") for i in range(30)]
            )

    anyio.run(fill)
    server, port = _lcm_serve(tmp_path, url, LCM_MEMORY_EMBEDDER="hash")
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        seen: list[Any] = []
        with client(base, token=None) as http:
            while True:
                try:
                    found = http.post("/v1/grep", json={"pattern": "backup array", "mode": "semantic"}).json()
                except httpx.TransportError:
                    found = None
                if found is not None:
                    seen.append(found.get("notes"))
                    if "notes" not in found:
                        break
                assert server.poll() is None and time.monotonic() < deadline, f"never fully built: {seen[-1:]}"
                time.sleep(0.2)
        assert found["matches"]  # by meaning now, the whole store
        assert all("semantic index still building" in notes[0] for notes in seen[:-1])
    finally:
        server.terminate()
        server.communicate(timeout=10)


def test_every_agent_tool_is_an_endpoint_too(base_url: str) -> None:
    with client(base_url) as http, client(base_url, BOB) as bob:
        spec = http.get("/openapi.json").json()
        for name in TOOL_HANDLERS:
            operation = spec["paths"][f"/v1/tools/{name}"]["post"]
            assert operation["requestBody"]["content"]["application/json"]["schema"] == dict(TOOLS[name].input_schema)
        messages = [m for i in range(8) for m in turn(i)]
        stored = http.post("/v1/tools/lcm_ingest", json={"session_id": "t", "messages": messages}).json()
        assert stored["stored"] == 16
        compacted = http.post("/v1/tools/lcm_compact", json={"conversation": "t", "force": True}).json()
        assert compacted["summaries"]
        assert_error(bob.post("/v1/tools/lcm_compact", json={"conversation": "t"}), 404, "NotFoundError")
        assert_error(http.post("/v1/tools/lcm_compact", json=["t"]), 400, "InputError")
        assert_error(http.post("/v1/tools/lcm_compact", json={"conversation": "t", "x": 1}), 400, "InputError")
        assert_error(
            http.post("/v1/tools/lcm_ingest", content=b"{", headers={"content-type": "application/json"}),
            400,
            "InputError",
        )


def test_retrieval_and_memory_over_http(base_url: str) -> None:
    with client(base_url) as http:
        messages = [m for i in range(10) for m in turn(i)]
        conv_id = http.post("/v1/ingest_batch", json={"session_id": "r", "messages": messages}).json()[
            "conversation_id"
        ]
        summary = http.post("/v1/compact", json={"conversation": "r", "force": True}).json()["summaries"][0]

        found = http.post("/v1/grep", json={"pattern": "topic 3 is settled", "scope": "messages"}).json()
        assert [m["citation"] for m in found["matches"]] == ["[msg#8]"] and "[msg#8]" in found["text"]
        assert http.post("/v1/tools/lcm_grep", json={"pattern": "topic 3 is settled", "scope": "messages"}).json() == (
            found
        )
        summaries = http.post("/v1/grep", json={"pattern": "topic", "scope": "summaries", "conversation_id": conv_id})
        assert summary in {m["id"] for m in summaries.json()["matches"]}
        described = http.post("/v1/describe", json={"id": summary, "token_cap": 100_000}).json()
        assert described["summary_id"] == summary and described["fits_token_cap"] is True
        assert f"[{summary}]" in described["text"]
        expanded = http.post("/v1/expand", json={"summary_ids": [summary], "include_messages": True}).json()
        assert expanded["messages"] and expanded["messages"][0]["content"] == messages[0]["content"]
        answered = http.post("/v1/expand_query", json={"prompt": "What about topic 2?", "query": "topic"}).json()
        assert answered["status"] == "completed" and answered["cited"] and answered["text"] == answered["answer"]

        for mode in ("regex", "full_text"):  # NUL ends an FTS5 query string: it must not reach SQLite as one
            assert http.post("/v1/grep", json={"pattern": "topic\u0000 3", "mode": mode}).status_code == 200
        assert_error(http.post("/v1/grep", json={}), 400, "InputError")
        # An invalid query is a 400 with the one error shape, on both routes; no matches is a 200.
        assert (
            "regular expression"
            in assert_error(http.post("/v1/grep", json={"pattern": "("}), 400, "InputError")["message"]
        )
        assert_error(http.post("/v1/tools/lcm_grep", json={"pattern": "("}), 400, "InputError")
        assert http.post("/v1/grep", json={"pattern": "nowhere to be found"}).json()["matches"] == []
        # Every cited id opens: describe takes the msg#N of a grep match.
        opened = http.post("/v1/describe", json={"id": "msg#8"}).json()
        assert opened["type"] == "message" and opened["message_id"] == "msg#8"
        assert "topic 3 is settled" in opened["content"] and "[msg#8]" in opened["text"]
        capped = http.post("/v1/expand", json={"summary_ids": [summary], "include_messages": True, "token_cap": 5})
        assert capped.json()["truncated"] and capped.json()["omitted"]
        assert_error(http.post("/v1/grep", json={"pattern": "x", "mode": "fuzzy"}), 400, "InputError")
        assert_error(http.post("/v1/grep", json={"pattern": "x", "conversation_id": 999}), 403, "AccessDeniedError")
        assert_error(http.post("/v1/describe", json={"id": "sum_0000"}), 404, "NotFoundError")
        assert_error(http.post("/v1/expand_query", json={"prompt": "?", "token_cap": 10**30}), 400, "InputError")

        stored = http.post("/v1/tools/memory_store", json={"text": "The user drinks green tea."}).json()
        memory_id = stored["stored"]
        assert stored["scope"] == "agent:alice"
        recalled = http.post("/v1/tools/memory_recall", json={"query": "green tea"}).json()["memories"]
        assert [m["id"] for m in recalled] == [memory_id]
        assert http.post("/v1/tools/memory_update", json={"memory_id": memory_id, "importance": 0.9}).json() == {
            "updated": memory_id
        }
        assert [m["importance"] for m in http.post("/v1/tools/memory_list", json={}).json()["memories"]] == [0.9]
        assert http.post("/v1/tools/memory_stats", json={}).json()["total"] == 1
        assert http.post("/v1/tools/memory_forget", json={"memory_id": memory_id}).json() == {"forgotten": memory_id}
        assert_error(http.post("/v1/tools/memory_recall", json={"query": ""}), 400, "InputError")


SECRET = "zebra-secret-4417"


def test_no_endpoint_reads_another_agents_conversation(tmp_path: Path) -> None:
    """Bob, through every route of the OpenAPI document, never gets anything of alice's."""
    config = make_config(tmp_path, large_file_token_threshold=100)
    with Running(config) as base_url, client(base_url, ALICE) as alice, client(base_url, BOB) as bob:
        said = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"note {i}: the code is {SECRET}. " * 12}
            for i in range(12)
        ]
        conv = alice.post("/v1/ingest_batch", json={"session_id": "private", "messages": said}).json()[
            "conversation_id"
        ]
        secret_file = "\n".join(f"line {i}: {SECRET}" for i in range(200))
        attached = {"role": "user", "content": f'<file name="notes.txt">\n{secret_file}\n</file>'}
        assert alice.post("/v1/ingest", json={"session_id": "private", "message": attached}).json()["stored"] == 1
        summary = alice.post("/v1/compact", json={"conversation": "private", "force": True}).json()["summaries"][0]
        files = alice.get("/v1/conversations/private/files").json()["files"]
        (file_id,) = [f["id"] for f in files if f["name"] == "notes.txt"]
        memory = alice.post("/v1/tools/memory_store", json={"text": f"The code is {SECRET}."}).json()["stored"]

        ids = {"conversation": conv, "file_id": file_id}
        mine = {"role": "user", "content": "bob's own words"}
        expand_query = {"prompt": "What is the code?", "summary_ids": [summary]}
        # (method, route, body, bob's status, whether alice's same request reads the secret)
        cases: list[tuple[str, str, Any, int, bool]] = [
            ("GET", "/v1/health", None, 200, False),
            ("GET", "/v1/metrics", None, 200, False),
            ("GET", "/v1/stats", None, 200, False),
            ("POST", "/v1/ingest", {"session_id": "private", "message": mine}, 200, False),
            ("POST", "/v1/ingest_batch", {"session_id": "private", "messages": [mine]}, 200, False),
            ("POST", "/v1/assemble", {"session_id": "private", "token_budget": 100_000}, 200, True),
            ("POST", "/v1/after_turn", {"session_id": "private", "token_budget": 100_000}, 200, False),
            ("POST", "/v1/compact", {"conversation": str(conv)}, 404, False),
            ("POST", "/v1/bootstrap", {"path": str(tmp_path / "lcm.db")}, 403, False),
            ("GET", "/v1/conversations", None, 200, False),
            ("GET", "/v1/conversations/{conversation}", None, 404, False),
            ("GET", "/v1/conversations/{conversation}/messages", None, 404, True),
            ("GET", "/v1/conversations/{conversation}/summaries", None, 404, True),
            ("GET", "/v1/conversations/{conversation}/compactions", None, 404, False),
            ("GET", "/v1/conversations/{conversation}/files", None, 404, False),
            ("GET", "/v1/conversations/{conversation}/integrity", None, 404, False),
            ("GET", "/v1/files/{file_id}", None, 404, True),
        ]
        for prefix, names in (("/v1/", RETRIEVAL_ROUTES), ("/v1/tools/", {n: n for n in TOOL_HANDLERS})):
            for route, tool in names.items():
                path = route if route.startswith("/") else prefix + route
                cases += {
                    "lcm_grep": [
                        ("POST", path, {"pattern": "zebra.secret"}, 200, True),
                        ("POST", path, {"pattern": "zebra", "conversation_id": conv}, 403, True),
                    ],
                    "lcm_describe": [
                        ("POST", path, {"id": summary}, 404, True),
                        ("POST", path, {"id": file_id}, 404, True),
                    ],
                    "lcm_expand": [
                        ("POST", path, {"summary_ids": [summary], "include_messages": True}, 404, True),
                        ("POST", path, {"query": "zebra", "include_messages": True}, 200, True),
                    ],
                    "lcm_expand_query": [
                        ("POST", path, expand_query, 404, True),
                        ("POST", path, {**expand_query, "summary_ids": None, "query": "zebra"}, 200, True),
                        ("POST", path, {**expand_query, "conversation_id": conv}, 403, True),
                    ],
                    "lcm_ingest": [("POST", path, {"session_id": "private", "messages": [mine]}, 200, False)],
                    "lcm_compact": [("POST", path, {"conversation": "private"}, 200, False)],
                    "memory_recall": [("POST", path, {"query": "zebra code"}, 200, True)],
                    "memory_store": [
                        ("POST", path, {"text": "Bob likes maps."}, 200, False),
                        ("POST", path, {"text": "Bob writes here.", "scope": "agent:alice"}, 403, False),
                    ],
                    "memory_forget": [("POST", path, {"memory_id": memory}, 404, False)],
                    "memory_update": [("POST", path, {"memory_id": memory, "text": "overwritten by bob"}, 404, False)],
                    "memory_list": [("POST", path, {}, 200, True)],
                    "memory_stats": [("POST", path, {}, 200, False)],
                }[tool]

        spec = alice.get("/openapi.json").json()
        every = {(method.upper(), route) for route, operations in spec["paths"].items() for method in operations}
        assert {(method, route) for method, route, *_ in cases} == every  # a new endpoint needs a case here

        def send(http: httpx.Client, method: str, route: str, body: Any) -> httpx.Response:
            if body is not None and "summary_ids" in body and body["summary_ids"] is None:
                body = {k: v for k, v in body.items() if k != "summary_ids"}
            return http.request(method, route.format(**ids), json=body)

        for method, route, body, status, alice_reads_it in cases:
            if alice_reads_it:
                theirs = send(alice, method, route, body)
                assert theirs.status_code == 200 and SECRET in theirs.text, (route, body, theirs.text[:300])
            answer = send(bob, method, route, body)
            assert answer.status_code == status, (route, body, answer.text[:500])
            assert SECRET not in answer.text, (route, body)
            if status >= 400:
                assert set(answer.json()) == {"error"}
        # and alice's data is intact: bob's writes went to bob's own conversation and memories
        assert len(alice.get("/v1/conversations/private/messages").json()["messages"]) == 13
        assert alice.post("/v1/tools/memory_list", json={}).json()["memories"][0]["content"] == f"The code is {SECRET}."


def test_a_lone_surrogate_over_http_stores_the_turn_and_says_so(base_url: str) -> None:
    body = (
        '{"session_id": "bad-text", "token_budget": 100000, "messages": ['
        '{"role": "user", "content": "one"}, {"role": "assistant", "content": "cut \\ud83d emoji"}]}'
    )
    with client(base_url) as http:
        done = http.post("/v1/after_turn", content=body, headers={"Content-Type": "application/json"})
        assert done.status_code == 200, done.text
        result = done.json()
        assert result["error"] is None and result["ingest"]["stored"] == 2 and result["ingest"]["repaired"] == 1
        listed = http.get("/v1/conversations/bad-text/messages").json()
        assert [m["content"] for m in listed["messages"]] == ["one", "cut \ufffd emoji"]
        # The agent tool (the MCP server's lcm_ingest runs the same service call) says so too.
        tool = http.post(
            "/v1/tools/lcm_ingest",
            content='{"session_id": "bad-text", "messages": [{"role": "user", "content": "\\udc80 x"}]}',
            headers={"Content-Type": "application/json"},
        )
        assert tool.status_code == 200, tool.text
        assert (tool.json()["stored"], tool.json()["repaired"]) == (1, 1)


@pytest.mark.parametrize(
    "command", [("serve",), ("ui", "--no-browser"), ("mcp", "--http")], ids=["serve", "ui", "mcp-http"]
)
def test_a_port_in_use_is_said_plainly(tmp_path: Path, command: tuple[str, ...]) -> None:
    """Another process listens on the port: exit code 4 and what to do, no traceback, no browser sent there."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        lcm = Path(sys.executable).with_name("lcm")
        done = subprocess.run(
            [str(lcm), "--database", f"sqlite:///{tmp_path / 'p.db'}", *command, "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "HOME": str(tmp_path)},
            check=False,
        )
    assert done.returncode == 4, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr and "choose another with --port" in done.stderr
    assert "Traceback" not in done.stderr and "the explorer is at" not in done.stdout
