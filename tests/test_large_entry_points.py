"""Large content is intercepted at every entry point, by the one path (``Interceptor.plan``), for every role.

A 20 MB message of each role (user, assistant, tool, system) goes in through the Python API
(``ingest`` and ``after_turn``), HTTP (``/v1/ingest`` and ``/v1/tools/lcm_ingest``), MCP
(``lcm_ingest``), the transcript importer (``lcm import``) and ``lcm mcp --follow``; each time the
stored message is a small reference, the bytes are stored aside and read back exactly, and the
context assembled at 8,000 tokens fits.  (The counter is the estimate here, to keep 20 MB cheap.)
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from lossless import ContextEngine, Message
from lossless.records import ToolPart

from .test_http_api import ALICE, Running, make_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROLES = ("user", "assistant", "tool", "system")


@functools.cache  # made on first use: every xdist worker imports this module to collect it
def _rows() -> str:
    return "".join(f"row {i:07d}: the quick brown fox jumps over the lazy dog 0123456789\n" for i in range(310_000))


def big(role: str) -> str:
    """About 20 MB of text, different for each role (so each is a file of its own)."""
    return f"{role} dump\n{_rows()}"


def wire(role: str) -> dict[str, Any]:
    """The message as the HTTP API and MCP take it (a tool message as plain text, as in the issue)."""
    return {"role": role, "content": big(role)}


def message(role: str) -> Message:
    return Message(role, big(role))  # type: ignore[arg-type]


async def check_store(engine: ContextEngine, session: str) -> None:
    """Each role's message is stored small, its file aside and exact; assembly at 8,000 fits."""
    stored = await engine.messages(session)
    assert {m.role for m in stored} >= set(ROLES)
    for record in stored:
        assert record.token_count < engine.config.large_file_token_threshold
    files = await engine.files(session)
    assert len(files) >= len(ROLES)
    for role in ROLES:
        data = big(role).encode()
        (found,) = [f for f in files if f.byte_size == len(data) and f.content_hash is not None and (
            await engine.read_file(f.id)) == data]  # fmt: skip
        assert found.exploration_summary
    context = await engine.assemble(session, token_budget=8000)
    assert context.estimated_tokens <= 8000 and not context.over_budget


def estimate_engine(tmp_path: Path, name: str) -> Any:
    return ContextEngine.open(f"sqlite:///{tmp_path / name}", data_dir=tmp_path / f"{name}-data", tokenizer="estimate")


async def test_python_api_ingest_and_after_turn(tmp_path: Path) -> None:
    async with await estimate_engine(tmp_path, "api.db") as engine:
        for role in ROLES:
            result = await engine.ingest("ingest", message(role))
            assert result.stored and result.stored[0].token_count < 1000
        await check_store(engine, "ingest")
        for role in ROLES:
            result = await engine.after_turn("turns", [message(role)], token_budget=8000)
            assert result.error is None
        # A tool result (a part, not plain text) of 20 MB goes the same way.
        call = ToolPart(call_id="c1", name="dump", input={"what": "all"})
        await engine.after_turn("turns", [Message.from_parts("assistant", [call])], token_budget=8000)
        result = await engine.after_turn("turns", [Message.tool_result("c1", big("result"))], token_budget=8000)
        assert result.error is None and result.ingest.stored[0].token_count < 1000
        await check_store(engine, "turns")


def test_http_ingest_and_tools_ingest(tmp_path: Path) -> None:
    config = make_config(tmp_path, tokenizer="estimate")
    headers = {"Authorization": f"Bearer {ALICE}"}
    with Running(config) as url, httpx.Client(base_url=url, headers=headers, timeout=120) as http:
        for role in ROLES:
            response = http.post("/v1/ingest", json={"session_id": "one", "message": wire(role)})
            assert response.status_code == 200, response.text[:500]
            response = http.post("/v1/tools/lcm_ingest", json={"session_id": "tools", "messages": [wire(role)]})
            assert response.status_code == 200, response.text[:500]
        for session in ("one", "tools"):
            assembled = http.post("/v1/assemble", json={"session_id": session, "token_budget": 8000}).json()
            assert assembled["estimated_tokens"] <= 8000 and not assembled["over_budget"]

    async def verify() -> None:
        async with await ContextEngine.open(config=config.replace(agent_id="alice")) as engine:
            await check_store(engine, "one")
            await check_store(engine, "tools")

    anyio.run(verify)


LCM = Path(sys.executable).with_name("lcm")


def transcript(path: Path) -> None:
    """An OpenAI-chat JSONL transcript with a 20 MB message of each role."""
    lines = [
        {"role": "system", "content": big("system")},
        {"role": "user", "content": big("user")},
        {"role": "assistant", "content": big("assistant")},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "dump", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": big("tool")},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


async def test_mcp_lcm_ingest_import_and_follow(tmp_path: Path) -> None:
    db = tmp_path / "mcp.db"
    env = {"LCM_TOKENIZER": "estimate", "LCM_DATA_DIR": str(tmp_path / "mcp-data"), "LCM_MEMORY_EMBEDDER": "hash"}
    folder = tmp_path / "follow"
    folder.mkdir()
    params = StdioServerParameters(
        command=str(LCM),
        args=["--database", f"sqlite:///{db}", "mcp", "--follow", str(folder), "--interval", "0.2"],
        env=env,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for role in ROLES:
            result = await session.call_tool("lcm_ingest", {"session_id": "mcp", "messages": [wire(role)]})
            assert not result.is_error, result.content
        transcript(folder / "followed.jsonl")  # picked up by --follow
        with anyio.fail_after(120):
            while True:
                await anyio.sleep(0.5)
                async with await ContextEngine.open(f"sqlite:///{db}", tokenizer="estimate") as engine:
                    if len(await engine.conversations()) >= 2 and (await engine.stats()).large_files >= 8:
                        break
    # The importer, as `lcm import` runs it.
    imported = tmp_path / "import"
    imported.mkdir()
    transcript(imported / "imported.jsonl")
    process = await anyio.run_process(
        [str(LCM), "--database", f"sqlite:///{tmp_path / 'import.db'}", "import", str(imported)],
        env={**env, "LCM_DATA_DIR": str(tmp_path / "import-data")},
        check=False,
    )
    assert process.returncode == 0, process.stderr.decode()[-2000:]
    async with await ContextEngine.open(
        f"sqlite:///{db}", tokenizer="estimate", data_dir=tmp_path / "mcp-data"
    ) as engine:
        await check_store(engine, "mcp")
        followed = [c for c in await engine.conversations() if c.session_id != "mcp"]
        await check_store(engine, followed[0].session_id)
    async with await ContextEngine.open(
        f"sqlite:///{tmp_path / 'import.db'}", tokenizer="estimate", data_dir=tmp_path / "import-data"
    ) as engine:
        (conversation,) = await engine.conversations()
        await check_store(engine, conversation.session_id)
