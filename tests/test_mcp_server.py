"""``lcm mcp`` started as a subprocess, driven by the official MCP client over stdio."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from lossless.adapters.service import TOOL_HANDLERS
from lossless.engine import ContextEngine
from lossless.tools import TOOLS

pytestmark = pytest.mark.anyio
FIXTURES = Path(__file__).parent / "fixtures"
LCM = Path(sys.executable).with_name("lcm")  # the installed console script


def server(tmp_path: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(LCM),
        args=["--database", f"sqlite:///{tmp_path / 'lcm.db'}", "mcp", *args],
        env={"LCM_FRESH_TAIL_COUNT": "2"},
    )


def payload(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data: dict[str, Any] = json.loads(result.content[0].text)
    assert result.structured_content == data
    return data


async def test_a_client_session_lists_and_calls_every_tool(tmp_path: Path) -> None:
    async with stdio_client(server(tmp_path)) as (read, write), ClientSession(read, write) as session:
        info = await session.initialize()
        assert info.server_info.name == "lossless"
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert list(tools) == list(TOOL_HANDLERS)
        for name, tool in tools.items():  # the schemas are the core module's, exactly
            assert tool.input_schema == dict(TOOLS[name].input_schema)
            assert tool.description == TOOLS[name].description

        messages = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " * 40, "event_key": f"e{i}"}
            for i in range(24)
        ]
        stored = payload(await session.call_tool("lcm_ingest", {"session_id": "s1", "messages": messages}))
        assert stored["stored"] == 24
        again = payload(await session.call_tool("lcm_ingest", {"session_id": "s1", "messages": messages[:2]}))
        assert again["stored"] == 0 and again["duplicates"] == 2
        compacted = payload(await session.call_tool("lcm_compact", {"conversation": "s1", "force": True}))
        assert compacted["summaries"] and compacted["tokens_after"] < compacted["tokens_before"]

        # Failures are tool-error results with a message saying what to fix; the session goes on.
        missing = await session.call_tool("lcm_compact", {"conversation": "nope"})
        assert missing.is_error and "no conversation 'nope'" in missing.content[0].text
        bad = await session.call_tool("lcm_ingest", {"session_id": "s1", "messages": [{"role": "robot"}]})
        assert bad.is_error and "unknown role 'robot'" in bad.content[0].text
        extra = await session.call_tool("lcm_compact", {"conversation": "s1", "frobnicate": 1})
        assert extra.is_error and "unknown argument(s) frobnicate" in extra.content[0].text
        unknown = await session.call_tool("lcm_nothing", {})
        assert unknown.is_error and "unknown tool 'lcm_nothing'" in unknown.content[0].text


async def test_follow_imports_a_transcript_folder_as_it_grows(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    source = (FIXTURES / "claude-code" / "session.jsonl").read_text().splitlines(keepends=True)
    half = len(source) // 2
    transcript = folder / "session.jsonl"
    transcript.write_text("".join(source[:half]))
    params = server(tmp_path, "--follow", str(folder), "--interval", "0.1")
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        first = await _wait_for_messages(tmp_path, minimum=1)
        with transcript.open("a") as handle:
            handle.write("".join(source[half:]))
        assert await _wait_for_messages(tmp_path, minimum=first + 1) > first


async def _wait_for_messages(tmp_path: Path, *, minimum: int) -> int:
    count = 0
    with anyio.fail_after(30):
        while count < minimum:
            await anyio.sleep(0.1)
            async with await ContextEngine.open(f"sqlite:///{tmp_path / 'lcm.db'}", config=None) as engine:
                count = (await engine.stats()).messages
    return count


async def test_streamable_http_serves_the_same_tools(tmp_path: Path) -> None:
    import socket
    import subprocess

    from mcp.client.streamable_http import streamable_http_client

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [str(LCM), "--database", f"sqlite:///{tmp_path / 'h.db'}", "mcp", "--http", "--port", str(port)]
    process = await anyio.open_process(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        with anyio.fail_after(30):
            while True:  # wait for the port to accept connections
                try:
                    await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    await anyio.sleep(0.1)
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            assert [t.name for t in (await session.list_tools()).tools] == list(TOOL_HANDLERS)
            message = {"role": "user", "content": "over http"}
            done = payload(await session.call_tool("lcm_ingest", {"session_id": "h", "messages": [message]}))
            assert done["stored"] == 1
    finally:
        process.terminate()
        await process.wait()


def test_mcp_over_http_refuses_a_public_address(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from lossless.cli import cli

    result = CliRunner().invoke(
        cli, ["--database", f"sqlite:///{tmp_path / 'x.db'}", "mcp", "--http", "--host", "0.0.0.0"]
    )
    assert result.exit_code == 4 and "loopback only" in result.output


async def test_following_an_empty_folder_waits_for_transcripts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from lossless.adapters.mcp import follow_paths

    folder = tmp_path / "later"
    folder.mkdir()
    async with await ContextEngine.open(f"sqlite:///{tmp_path / 'f.db'}") as engine, anyio.create_task_group() as group:
        group.start_soon(follow_paths, engine, [folder], 0.05)
        await anyio.sleep(0.5)  # several passes over an empty folder
        (folder / "s.jsonl").write_bytes((FIXTURES / "claude-code" / "session.jsonl").read_bytes())
        imported = 0
        for _ in range(400):
            await anyio.sleep(0.05)
            imported = (await engine.stats()).messages
            if imported:
                break
        group.cancel_scope.cancel()
    assert imported > 0
    warnings = [r for r in caplog.records if r.name == "lossless.mcp" and r.levelname == "WARNING"]
    assert len(warnings) == 1 and str(folder) in warnings[0].getMessage()  # said once, not at every pass


def test_a_rendered_text_is_what_the_agent_reads() -> None:
    from lossless.adapters.mcp import _result

    rendered = _result({"text": "2 matches: [msg#4] …", "hits": [4, 9]})
    assert rendered.content[0].text == "2 matches: [msg#4] …" and rendered.structured_content == {
        "text": "2 matches: [msg#4] …",
        "hits": [4, 9],
    }
    assert json.loads(_result({"stored": 1}).content[0].text) == {"stored": 1}
