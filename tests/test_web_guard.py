"""Requests a web page could forge, refused by every HTTP face: a real HTTP client against ``lcm serve`` on loopback."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from fastapi.routing import APIRoute

from lossless.adapters.http import create_app
from lossless.adapters.web_guard import BrowserGuard, allowed_hosts, host_name
from lossless.config import Config, load_config

from .test_http_api import Running


def open_config(tmp_path: Path, **settings: Any) -> Config:
    """The default deployment the issue is about: loopback, no api_tokens."""
    values = {"database_url": f"sqlite:///{tmp_path / 'lcm.db'}", "memory_embedder": "hash", **settings}
    return load_config(values, env={})


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    config = open_config(tmp_path, api_allowed_origins=["https://tools.example.com"], api_allowed_hosts=["lcm.lan"])
    with Running(config) as url:
        yield url


def state_changing_routes(config: Config) -> list[str]:
    app = create_app(config)
    paths = [r.path for r in app.routes if isinstance(r, APIRoute) and r.methods & {"POST", "PUT", "PATCH", "DELETE"}]
    assert len(paths) > 10 and "/v1/tools/memory_forget" in paths
    return paths


def test_bodies_a_browser_sends_without_preflight_are_refused_on_every_state_changing_route(
    tmp_path: Path, server: str
) -> None:
    with httpx.Client(base_url=server, timeout=30) as http:
        added = http.post("/v1/tools/memory_store", json={"text": "The deploy key lives in vault."})
        assert added.status_code == 200, added.text
        memory_id = added.json()["stored"]
        forged = [
            ("text/plain", json.dumps({"memory_id": memory_id})),
            ("application/x-www-form-urlencoded", "memory_id=" + memory_id),
            ("multipart/form-data; boundary=x", "--x\r\n\r\n--x--\r\n"),
            (None, json.dumps({"memory_id": memory_id})),
        ]
        for path in state_changing_routes(open_config(tmp_path)):
            for content_type, body in forged:
                headers = {"content-type": content_type} if content_type else {}
                answer = http.post(path, content=body.encode(), headers=headers)
                assert answer.status_code == 415, (path, content_type, answer.text)
                error = answer.json()["error"]
                assert error["type"] == "UnsupportedMediaType" and "application/json" in error["message"]
        # The memory a text/plain request tried to forget is still there.
        recalled = http.post("/v1/tools/memory_recall", json={"query": "deploy key"})
        assert recalled.status_code == 200 and memory_id in recalled.text
        charset = http.post(
            "/v1/tools/memory_recall",
            content=b'{"query": "deploy key"}',
            headers={"content-type": "application/json; charset=utf-8"},
        )
        assert charset.status_code == 200


def test_a_foreign_host_is_refused_and_own_names_answer(server: str) -> None:
    port = server.rsplit(":", 1)[1]
    with httpx.Client(base_url=server, timeout=30) as http:
        for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example", ""):
            answer = http.get("/v1/conversations", headers={"host": host})
            assert answer.status_code == 421, (host, answer.text)
            assert answer.json()["error"]["type"] == "MisdirectedRequest"
        rebinding = http.post("/v1/ingest", headers={"host": "evil.example"}, json={})
        assert rebinding.status_code == 421
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", "lcm.lan:80"):
            assert http.get("/v1/conversations", headers={"host": host}).status_code == 200, host


def test_cross_origin_requests_are_refused_unless_allowed(server: str) -> None:
    with httpx.Client(base_url=server, timeout=30) as http:
        for origin in ("https://evil.example", "null", "http://localhost:1", "http://127.0.0.1"):
            answer = http.post("/v1/tools/memory_recall", json={"query": "x"}, headers={"origin": origin})
            assert answer.status_code == 403, (origin, answer.text)
            assert answer.json()["error"]["type"] == "CrossOriginRefused"
        for site in ("cross-site", "same-site"):
            answer = http.get("/v1/conversations", headers={"sec-fetch-site": site})
            assert answer.status_code == 403, site
        same_origin = {"origin": server, "sec-fetch-site": "same-origin"}
        assert http.post("/v1/tools/memory_recall", json={"query": "x"}, headers=same_origin).status_code == 200
        allowed = {"origin": "https://tools.example.com"}
        assert http.post("/v1/tools/memory_recall", json={"query": "x"}, headers=allowed).status_code == 200
        assert http.get("/v1/health", headers={"sec-fetch-site": "none"}).status_code == 200


def test_allowed_hosts_follow_the_listen_address_and_the_setting() -> None:
    assert host_name("[::1]:8765") == "::1" and host_name("Example.COM:80") == "example.com"
    assert allowed_hosts("127.0.0.1") == frozenset({"localhost", "127.0.0.1", "::1"})
    assert "10.0.0.5" in (allowed_hosts("10.0.0.5") or ())
    assert allowed_hosts("0.0.0.0") is None  # every interface: unknown names (api_tokens guard it)
    assert allowed_hosts("0.0.0.0", ["lcm.example.com"]) == frozenset(
        {"localhost", "127.0.0.1", "::1", "lcm.example.com"}
    )
    assert allowed_hosts("127.0.0.1", ["*"]) is None
    guard = BrowserGuard(None, listen_host="127.0.0.1")
    scope = {"type": "http", "method": "GET", "headers": [(b"host", b"evil.example")]}
    refusal = guard.check(scope)
    assert refusal is not None and refusal[0] == 421


def test_the_settings_are_validated(tmp_path: Path) -> None:
    from lossless.errors import ConfigError

    with pytest.raises(ConfigError, match="api_allowed_origins"):
        open_config(tmp_path, api_allowed_origins=["evil.example"])
    with pytest.raises(ConfigError, match="api_allowed_hosts"):
        open_config(tmp_path, api_allowed_hosts=["http://x/"])


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@contextmanager
def _hostile_site() -> Iterator[str]:
    """A web page on another origin (http://localhost:<another port>/) that a user happens to open."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<p>cute cats</p>"
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    site = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://localhost:{site.server_address[1]}/"
    finally:
        site.shutdown()
        site.server_close()


def test_a_hostile_page_in_a_real_browser_can_neither_change_nor_read_the_store(tmp_path: Path) -> None:
    """Chromium on a page of another site: no-preflight POSTs, CORS reads and DNS rebinding all refused."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (dev extra)")
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (apt-get install chromium); .ci/run installs it")
    with (
        Running(open_config(tmp_path)) as server,
        httpx.Client(base_url=server, timeout=30) as http,
        _hostile_site() as hostile,
    ):
        port = server.rsplit(":", 1)[1]
        stored = http.post("/v1/tools/memory_store", json={"text": "The deploy key lives in vault."})
        memory_id = stored.json()["stored"]
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM,
                # rebind.example resolves to this machine, as DNS rebinding makes it.
                args=["--no-sandbox", "--disable-gpu", "--host-resolver-rules=MAP rebind.example 127.0.0.1"],
            )
            try:
                page = browser.new_page()
                page.goto(hostile)  # another site (another port of this machine: no private-network block)
                statuses: dict[str, int] = {}
                page.on("response", lambda r: statuses.__setitem__(r.url.rsplit("/", 1)[-1], r.status))
                page.evaluate(
                    """async ([base, id]) => {
                        const body = JSON.stringify({memory_id: id});
                        for (const type of ['text/plain', 'application/x-www-form-urlencoded']) {
                            try {
                                await fetch(base + '/v1/tools/memory_forget', {
                                    method: 'POST', mode: 'no-cors', headers: {'Content-Type': type}, body});
                            } catch (e) {}
                        }
                        try { await fetch(base + '/v1/conversations'); } catch (e) {}
                    }""",
                    [server, memory_id],
                )
                refused = {k: v for k, v in statuses.items() if k in ("memory_forget", "conversations")}
                assert refused and set(refused.values()) <= {403, 415}, statuses  # the server answered, and refused
                # DNS rebinding: the page's own name now points at the server; the Host gives it away.
                answer = page.goto(f"http://rebind.example:{port}/v1/conversations")
                assert answer is not None and answer.status == 421
                assert "MisdirectedRequest" in page.content()
            finally:
                browser.close()
        kept = http.post("/v1/tools/memory_recall", json={"query": "deploy key"})
        assert kept.status_code == 200 and memory_id in kept.text  # nothing was forgotten
