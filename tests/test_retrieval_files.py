"""``lcm_grep`` with ``scope="files"``: the lines of stored large files, within the caller's reach."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from lossless import ContextEngine, FilePart, Message, TextPart
from lossless.cli import cli
from lossless.config import Config
from lossless.errors import InputError
from lossless.retrieval import Caller, GrepOptions
from lossless.retrieval.files import grep_files
from lossless.retrieval.toolcalls import call_tool
from lossless.tools import GREP

pytestmark = pytest.mark.anyio

LOG = "\n".join(
    f"2026-02-14T08:{n // 60 % 60:02d}:{n % 60:02d}Z INFO request {n} served"
    + ("\n2026-02-14T09:00:00Z ERROR upstream timeout host=db-7 after 3000ms" if n in (120, 777) else "")
    for n in range(1500)
)
CODE = "\n".join(f"def handler_{n}(request):\n    return respond(request, status={200 + n % 3})" for n in range(700))


def _image() -> bytes:
    header = b"\x89PNG\r\n\x1a\n" + (13).to_bytes(4, "big") + b"IHDR" + (64).to_bytes(4, "big") * 2 + b"\x08\x06\0\0\0"
    return header + bytes(range(256)) * 200 + b"ERROR upstream timeout"


@pytest.fixture
async def engine(config: Config) -> AsyncIterator[ContextEngine]:
    opened = await ContextEngine.open(config=config.replace(large_file_token_threshold=1000))
    try:
        yield opened
    finally:
        await opened.dispose()


async def seed(engine: ContextEngine, session: str = "s1", key: str = "k1") -> int:
    url = "data:image/png;base64," + base64.b64encode(_image()).decode()
    first = await engine.ingest(
        session,
        Message.from_parts(
            "user",
            [
                TextPart(f'the logs:\n<file name="server.log">\n{LOG}\n</file>\n'),
                FilePart(mime="image/png", name="shot.png", url=url),
            ],
        ),
        session_key=key,
    )
    await engine.ingest(session, Message.user(f'<file name="app.py">\n{CODE}\n</file>'), session_key=key)
    assert first.conversation_id is not None
    return first.conversation_id


async def test_regex_and_full_text_find_lines_of_stored_files(engine: ContextEngine) -> None:
    conv = await seed(engine)
    files = {f.name: f for f in await engine.files(conv)}
    found = await engine.grep(r"ERROR upstream \w+", scope="files")
    log_id = files["server.log"].id
    assert [(h.ref, h.line) for h in found.hits] == [(log_id, 122), (log_id, 780)]
    lines = LOG.split("\n")
    assert all(lines[h.line - 1] == h.snippet for h in found.hits if h.line is not None)
    hit = found.hits[0]
    assert hit.citation == f"[{log_id}]" and hit.conversation_id == conv and hit.name == "server.log"
    text = found.render()
    assert f"[{log_id}] line 122 · server.log" in text and "1 binary file was skipped" in text
    data = found.to_dict()["matches"][0]  # type: ignore[index]
    assert data["type"] == "file" and data["line"] == 122 and data["name"] == "server.log"  # type: ignore[index]
    # The line numbers are the ones describe pages by.
    view = await engine.describe(log_id, start_line=122, end_line=122)
    assert "ERROR upstream timeout" in view.render()

    words = await engine.grep('upstream "host=db-7" OR handler_12*', mode="full_text", scope="files", limit=200)
    by_file = {f.name: [h.line for h in words.hits if h.ref == f.id] for f in files.values()}
    assert by_file["server.log"] == [122, 780]
    assert by_file["app.py"] == [2 * n + 1 for n in (12, *range(120, 130))]  # handler_12, handler_120…129
    assert by_file["shot.png"] == []  # binary: skipped, though its bytes hold the words
    stemmed = await engine.grep("timeout", mode="full_text", scope="files")  # a word start: timeouts would match
    assert len(stemmed.hits) == 2
    anchored = await engine.grep(r"^def handler_1\d\(", scope="files", limit=3)
    assert [h.line for h in anchored.hits] == [21, 23, 25] and anchored.more
    assert "more matches beyond limit=3" in anchored.render()


async def test_bad_patterns_filters_and_empty_results_are_messages(engine: ContextEngine) -> None:
    await seed(engine)
    with pytest.raises(InputError, match="not a valid regular expression"):
        await engine.grep("(unclosed", scope="files")
    with pytest.raises(InputError, match="NEAR"):
        await engine.grep("NEAR(a b)", mode="full_text", scope="files")
    nothing = await engine.grep("no such text anywhere", scope="files")
    assert not nothing.hits and "no matches" in (nothing.message or "") and "binary" in (nothing.message or "")
    future = await engine.grep("ERROR", scope="files", since=engine.clock() + timedelta(days=1))
    assert not future.hits and "no stored files" in (future.message or "")
    assert (await engine.grep("ERROR", scope="files", before=engine.clock() + timedelta(days=1))).hits
    relevance = await engine.grep("ERROR", scope="files", sort="relevance")
    assert relevance.hits and "newest file first" in relevance.render()
    with pytest.raises(InputError, match="semantic"):
        await engine.grep("errors", scope="files", mode="semantic")
    with pytest.raises(InputError, match="scope='files'"):
        await grep_files(engine.store, GrepOptions("x"), (1,), None)


async def test_files_of_other_conversations_and_agents_are_not_searched(engine: ContextEngine, config: Config) -> None:
    conv = await seed(engine)
    other = await seed(engine, session="s2", key="k2")
    stranger = await ContextEngine.open(config=config.replace(agent_id="someone-else", large_file_token_threshold=1000))
    try:
        theirs = await seed(stranger, session="theirs", key="k1")
        # The operator of each agent reaches all of that agent's files, never the other agent's.
        mine = await engine.grep("ERROR upstream", scope="files")
        assert {h.conversation_id for h in mine.hits} == {conv, other}
        assert {h.conversation_id for h in (await stranger.grep("ERROR upstream", scope="files")).hits} == {theirs}
        # An agent's own call reaches its conversation family only (session key k1), whatever it asks for.
        caller = Caller(engine.config.agent_id, session_key="k1")
        family = await engine.grep("ERROR upstream", scope="files", caller=caller)
        assert {h.conversation_id for h in family.hits} == {conv}
        outcome = await call_tool(
            engine.recall.retriever,
            caller,
            "lcm_grep",
            {"pattern": "ERROR", "scope": "files", "conversation_id": theirs},
        )
        assert outcome.error and outcome.denied and "ERROR upstream" not in outcome.text
        ok = await call_tool(engine.recall.retriever, caller, "lcm_grep", {"pattern": "host=db-7", "scope": "files"})
        assert not ok.error and all(c.startswith("file_") for c in ok.cited) and len(ok.cited) == 2
    finally:
        await stranger.dispose()


def test_the_tool_schema_offers_files_and_semantic_modes() -> None:
    assert "files" in GREP.input_schema["properties"]["scope"]["enum"]
    assert {"semantic", "hybrid"} <= set(GREP.input_schema["properties"]["mode"]["enum"])


def test_lcm_grep_scope_files(tmp_path: Path) -> None:
    import anyio

    db = f"sqlite:///{tmp_path}/f.db"

    async def setup() -> None:
        async with await ContextEngine.open(db, large_file_token_threshold=1000) as engine:
            await seed(engine)

    anyio.run(setup)
    result = CliRunner().invoke(cli, ["--database", db, "grep", "ERROR", "--scope", "files", "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert [m["line"] for m in found["matches"]] == [122, 780] and found["scope"] == "files"
    human = CliRunner().invoke(cli, ["--database", db, "grep", "respond", "--scope", "files", "--limit", "2"])
    assert human.exit_code == 0 and "app.py" in human.output and "line 2 " in human.output
