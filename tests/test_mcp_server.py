"""``lcm mcp`` started as a subprocess, driven by the official MCP client over stdio."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from lossless.adapters.service import GRANTED_TOOLS, MAIN_TOOLS, TOOL_HANDLERS, messages_from
from lossless.config import load_config
from lossless.engine import ContextEngine
from lossless.memory.records import MemoryDraft
from lossless.records import Grant, utcnow
from lossless.tools import SUBAGENT_TOOLS, TOOLS

pytestmark = pytest.mark.anyio
FIXTURES = Path(__file__).parent / "fixtures"
LCM = Path(sys.executable).with_name("lcm")  # the installed console script
SECRET = "zebra-secret-4417"


def server(tmp_path: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(LCM),
        args=["--database", f"sqlite:///{tmp_path / 'lcm.db'}", "mcp", *args],
        env={"LCM_FRESH_TAIL_COUNT": "2", "LCM_MEMORY_EMBEDDER": "hash"},
    )


def engine_config(tmp_path: Path, agent: str) -> Any:
    settings = {"database_url": f"sqlite:///{tmp_path / 'lcm.db'}", "agent_id": agent, "fresh_tail_count": 2}
    return load_config({**settings, "memory_embedder": "hash"}, env={})


async def seed(tmp_path: Path, agent: str, session: str, words: str) -> tuple[int, str]:
    """A compacted conversation of ``agent`` whose messages say ``words``: its id and a summary id."""
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"note {i}: {words}. " * 30, "event_key": f"n{i}"}
        for i in range(12)
    ]
    async with await ContextEngine.open(config=engine_config(tmp_path, agent)) as engine:
        await engine.ingest_batch(session, messages_from(messages))
        done = await engine.compact(session, force=True)
        return done.conversation_id, done.summaries[0].id


def payload(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data: dict[str, Any] = json.loads(result.content[0].text)
    assert result.structured_content == data
    return data


async def test_a_client_session_lists_and_calls_every_tool(tmp_path: Path) -> None:
    alice_conversation, alice_summary = await seed(tmp_path, "alice", "private", f"the code is {SECRET}")
    async with await ContextEngine.open(config=engine_config(tmp_path, "alice")) as alice:
        alice_memory = (await alice.memory().add(MemoryDraft(f"The code is {SECRET}."))).memory_id
    async with stdio_client(server(tmp_path)) as (read, write), ClientSession(read, write) as session:
        info = await session.initialize()
        assert info.server_info.name == "lossless" and "lcm_expand_query" in (info.instructions or "")
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert list(tools) == list(MAIN_TOOLS) and "lcm_expand" not in tools  # the main agent delegates expansion
        assert set(tools) | {"lcm_expand"} == set(TOOL_HANDLERS)
        for name, tool in tools.items():  # the schemas are the core module's, exactly
            assert tool.input_schema == dict(TOOLS[name].input_schema)
            assert tool.description == TOOLS[name].description
        called: set[str] = set()

        async def call(name: str, arguments: dict[str, Any]) -> Any:
            called.add(name)
            return await session.call_tool(name, arguments)

        messages = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " * 40, "event_key": f"e{i}"}
            for i in range(24)
        ]
        stored = payload(await call("lcm_ingest", {"session_id": "s1", "messages": messages}))
        assert stored["stored"] == 24
        again = payload(await call("lcm_ingest", {"session_id": "s1", "messages": messages[:2]}))
        assert again["stored"] == 0 and again["duplicates"] == 2
        compacted = payload(await call("lcm_compact", {"conversation": "s1", "force": True}))
        assert compacted["summaries"] and compacted["tokens_after"] < compacted["tokens_before"]
        summary = compacted["summaries"][0]

        # Retrieval: the agent reads rendered text with citations; the structured result comes along.
        fourth = stored["message_ids"][3]
        found = await call("lcm_grep", {"pattern": "message 3 ", "scope": "messages"})
        assert not found.is_error and f"[msg#{fourth}]" in found.content[0].text
        assert [m["id"] for m in found.structured_content["matches"]] == [fourth]
        described = await call("lcm_describe", {"id": summary, "token_cap": 100_000})
        assert not described.is_error and described.content[0].text.startswith(f"[{summary}]")
        # Every id a tool cites opens with lcm_describe, messages too.
        message = await call("lcm_describe", {"id": f"msg#{fourth}"})
        assert not message.is_error and message.structured_content["content"] == messages[3]["content"]
        # An invalid query is a tool error, distinct from finding nothing.
        invalid = await session.call_tool("lcm_grep", {"pattern": "("})
        assert invalid.is_error and "not a valid regular expression" in invalid.content[0].text
        nothing = await call("lcm_grep", {"pattern": "nowhere to be found"})
        assert not nothing.is_error and nothing.structured_content["matches"] == []
        answered = await call("lcm_expand_query", {"prompt": "What did message 3 say?", "summary_ids": [summary]})
        assert not answered.is_error and answered.structured_content["status"] == "completed"
        assert answered.content[0].text == answered.structured_content["answer"] and "[msg#" in answered.content[0].text
        refused = await session.call_tool("lcm_expand", {"summary_ids": [summary]})
        assert refused.is_error and "granted expansion sub-agent session" in refused.content[0].text

        # Long-term memory.
        memory_id = payload(await call("memory_store", {"text": "The user deploys with make ship."}))["stored"]
        recalled = payload(await call("memory_recall", {"query": "how to deploy"}))["memories"]
        assert [m["id"] for m in recalled] == [memory_id]
        assert payload(await call("memory_update", {"memory_id": memory_id, "importance": 0.9})) == {
            "updated": memory_id
        }
        assert [m["importance"] for m in payload(await call("memory_list", {}))["memories"]] == [0.9]
        assert payload(await call("memory_stats", {}))["by_scope"] == {"agent:main": 1}
        assert payload(await call("memory_forget", {"memory_id": memory_id})) == {"forgotten": memory_id}
        assert called == set(MAIN_TOOLS)

        # Another agent's conversation, summaries and memories are out of reach, whatever the arguments.
        denied = await session.call_tool("lcm_grep", {"pattern": "zebra", "conversation_id": alice_conversation})
        assert denied.is_error and "not within reach of agent 'main'" in denied.content[0].text
        searched = await session.call_tool("lcm_grep", {"pattern": "zebra", "all_conversations": True})
        assert not searched.is_error and searched.structured_content["matches"] == []
        for name, arguments in [
            ("lcm_describe", {"id": alice_summary}),
            ("lcm_expand_query", {"prompt": "What is the code?", "summary_ids": [alice_summary]}),
            ("lcm_expand_query", {"prompt": "What is the code?", "query": "zebra"}),
            ("lcm_compact", {"conversation": str(alice_conversation)}),
            ("memory_recall", {"query": "the code"}),
            ("memory_forget", {"memory_id": alice_memory}),
            ("memory_store", {"text": "written into alice", "scope": "agent:alice"}),
        ]:
            result = await session.call_tool(name, arguments)
            assert SECRET not in result.content[0].text, name
            assert result.is_error or name in ("memory_recall", "lcm_expand_query"), name

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
            assert [t.name for t in (await session.list_tools()).tools] == list(MAIN_TOOLS)
            message = {"role": "user", "content": "over http"}
            done = payload(await session.call_tool("lcm_ingest", {"session_id": "h", "messages": [message]}))
            assert done["stored"] == 1
        import httpx2 as httpx  # what a web page could send: refused before MCP sees it

        async with httpx.AsyncClient(timeout=30) as http:
            plain = await http.post(url, content=b"{}", headers={"content-type": "text/plain"})
            assert plain.status_code == 415, plain.text
            rebound = await http.post(url, json={}, headers={"host": f"evil.example:{port}"})
            assert rebound.status_code == 421, rebound.text
            cross = await http.post(url, json={}, headers={"origin": "https://evil.example"})
            assert cross.status_code == 403, cross.text
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


async def test_lcm_expand_runs_only_in_a_granted_session_and_within_its_grant(tmp_path: Path) -> None:
    granted, summary = await seed(tmp_path, "main", "task", "the build uses ninja")
    other, other_summary = await seed(tmp_path, "main", "elsewhere", "the cache lives in redis")
    _, alice_summary = await seed(tmp_path, "alice", "private", f"the code is {SECRET}")
    async with await ContextEngine.open(config=engine_config(tmp_path, "main")) as engine:
        now = utcnow()
        grant = Grant("grant_subagent", "main", "sub:1", (granted,), 50_000, now, now + timedelta(minutes=10))
        await engine.store.create_grant(grant)
        params = server(tmp_path, "--grant", grant.id)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            info = await session.initialize()
            assert "expansion sub-agent" in (info.instructions or "")
            tools = (await session.list_tools()).tools
            assert [t.name for t in tools] == list(GRANTED_TOOLS) == [s.name for s in SUBAGENT_TOOLS]
            assert all(t.input_schema == dict(TOOLS[t.name].input_schema) for t in tools)

            expanded = await session.call_tool("lcm_expand", {"summary_ids": [summary], "include_messages": True})
            assert not expanded.is_error and "the build uses ninja" in expanded.content[0].text
            assert {m["conversation_id"] for m in expanded.structured_content["messages"]} == {granted}
            found = (await session.call_tool("lcm_grep", {"pattern": "ninja|redis"})).structured_content
            assert found["matches"] and {m["conversation_id"] for m in found["matches"]} == {granted}
            assert not (await session.call_tool("lcm_describe", {"id": summary})).is_error

            # Outside the grant: another conversation of the same agent, another agent, other tools.
            for name, arguments, says in [
                ("lcm_expand", {"summary_ids": [other_summary]}, "no summary"),
                ("lcm_describe", {"id": alice_summary}, "no summary"),
                ("lcm_grep", {"pattern": "redis", "conversation_id": other}, "not within reach"),
                ("lcm_expand_query", {"prompt": "?", "query": "redis"}, "not available to an expansion sub-agent"),
                ("lcm_ingest", {"session_id": "x", "messages": [{"role": "user"}]}, "not available"),
                ("memory_recall", {"query": "code"}, "not available"),
            ]:
                refused = await session.call_tool(name, arguments)
                assert refused.is_error and says in refused.content[0].text, (name, refused.content)
                assert SECRET not in refused.content[0].text and "redis" not in refused.content[0].text

            # The delegating side ends the grant: the session's next call is refused.
            await engine.store.revoke_grant(grant.id, "completed", utcnow())
            ended = await session.call_tool("lcm_grep", {"pattern": "ninja"})
            assert ended.is_error and "was revoked" in ended.content[0].text


def test_a_session_with_an_unusable_grant_does_not_start(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'lcm.db'}"
    done = subprocess.run(
        [str(LCM), "--database", database, "mcp", "--grant", "grant_nope"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 11, done.stderr  # AccessDeniedError's exit code
    assert "grant 'grant_nope' is not valid for agent 'main'" in done.stderr + done.stdout
    assert "make one with `lcm grants create`" in done.stderr  # and what to do


async def test_parallel_lcm_expand_calls_stay_within_the_grants_cap(tmp_path: Path) -> None:
    granted, _ = await seed(tmp_path, "main", "task", "the build uses ninja and caches objects")
    async with await ContextEngine.open(config=engine_config(tmp_path, "main")) as engine:
        summaries, _ = await engine.summaries(granted)
        roots = [s.id for s in summaries]
        now = utcnow()
        grant = Grant("grant_par", "main", "sub:par", (granted,), 1000, now, now + timedelta(minutes=10))
        await engine.store.create_grant(grant)
        async with (
            stdio_client(server(tmp_path, "--grant", grant.id)) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            results: list[Any] = []

            async def expand() -> None:
                arguments = {"summary_ids": roots, "include_messages": True}
                results.append(await session.call_tool("lcm_expand", arguments))

            async with anyio.create_task_group() as group:
                for _ in range(6):
                    group.start_soon(expand)
        returned = sum(r.structured_content["estimated_tokens"] for r in results if not r.is_error)
        refused = [r.content[0].text for r in results if r.is_error]
        assert 0 < returned <= 1000
        assert all("token cap" in text for text in refused)
        used = await engine.store.get_grant(grant.id)
        assert used is not None and used.tokens_used == returned
