"""Expansion grants minted for sub-agents a host runs itself: the engine API and ``lcm grants``.

The engine methods run on both backends (the ``config`` fixture); the CLI is driven in process
and, end to end, as the installed ``lcm`` with the MCP client: a granted ``lcm mcp --grant`` session
started from the exact line ``lcm grants create`` prints.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from mcp import ClientSession, StdioServerParameters, stdio_client

from lossless import ContextEngine, Message
from lossless.cli import cli
from lossless.cli.grants import parse_duration
from lossless.config import Config
from lossless.errors import AccessDeniedError, InputError, NotFoundError
from lossless.records import utcnow
from lossless.retrieval import AccessDenied, Caller

from .test_mcp_server import LCM, SECRET, seed

SETTINGS: dict[str, Any] = {
    "fresh_tail_count": 2,
    "leaf_chunk_tokens": 600,
    "leaf_target_tokens": 150,
    "condensed_target_tokens": 150,
    "leaf_min_fanout": 3,
    "summary_max_attempts": 1,
}


def chat(tag: str, count: int = 20) -> list[Message]:
    return [
        Message("user" if i % 2 == 0 else "assistant", f"{tag} secret number {i} " + "filler words here " * 20)
        for i in range(count)
    ]


@pytest.fixture
async def engines(config: Config) -> AsyncIterator[tuple[ContextEngine, ContextEngine]]:
    alice = await ContextEngine.open(config=config.replace(agent_id="alice", **SETTINGS))
    bob = await ContextEngine.open(config=config.replace(agent_id="bob", **SETTINGS))
    try:
        yield alice, bob
    finally:
        await bob.dispose()
        await alice.dispose()


async def setup(alice: ContextEngine, bob: ContextEngine) -> tuple[int, int, int, str]:
    """Alice's compacted conversation, another of hers, and bob's; with a summary id of the first."""
    a = await alice.ingest_batch("a-main", chat("alpha"), session_key="alice:chat")
    a2 = await alice.ingest_batch("a-other", chat("other"), session_key="alice:other")
    b = await bob.ingest_batch("b-main", chat("bravo"), session_key="bob:chat")
    assert a.conversation_id and a2.conversation_id and b.conversation_id
    await alice.compact(a.conversation_id, force=True)
    summaries, _ = await alice.summaries(a.conversation_id)
    return a.conversation_id, a2.conversation_id, b.conversation_id, summaries[0].id


# ---------------------------------------------------------------------- the engine API (both backends)


@pytest.mark.anyio
async def test_a_minted_grant_is_durable_and_bounds_the_sub_agent(
    engines: tuple[ContextEngine, ContextEngine],
) -> None:
    alice, bob = engines
    a, a2, _, summary = await setup(alice, bob)
    grant = await alice.grant_expansion([a, "a-main", str(a)])  # by id, session id, digits: one conversation
    assert grant.id.startswith("grant_") and len(grant.id) == len("grant_") + 16
    assert grant.agent_id == "alice" and grant.conversation_ids == (a,) and grant.grantee
    assert grant.token_cap == alice.config.max_expand_tokens and grant.tokens_used == 0
    assert grant.expires_at - grant.created_at == timedelta(minutes=10) and grant.usable(utcnow())
    assert await alice.store.get_grant(grant.id) == grant == await alice.expansion_grant(grant.id)
    async with await ContextEngine.open(config=alice.config) as reopened:  # durable: another process sees it
        assert await reopened.expansion_grant(grant.id) == grant

    custom = await alice.grant_expansion([a2, a], token_cap=500, ttl=timedelta(hours=2), grantee="task-agent:7")
    assert custom.conversation_ids == (a, a2) and custom.token_cap == 500 and custom.grantee == "task-agent:7"
    assert custom.expires_at - custom.created_at == timedelta(hours=2) and custom.id != grant.id

    sub = Caller("alice", session_key=grant.grantee, grant_id=grant.id)
    expanded = await alice.expand([summary], include_messages=True, caller=sub)
    assert expanded.messages and {m.conversation_id for m in expanded.messages} == {a}
    assert (await alice.expansion_grant(grant.id)).tokens_used == expanded.estimated_tokens > 0
    with pytest.raises(AccessDenied):
        await alice.grep("secret", conversation=a2, caller=sub)

    assert await alice.revoke_expansion_grant(grant.id) is True
    assert await alice.revoke_expansion_grant(grant.id) is False  # already ended
    ended = await alice.expansion_grant(grant.id)
    assert ended.revoked_at is not None and ended.revoke_reason == "revoked" and not ended.usable(utcnow())
    with pytest.raises(AccessDenied, match="revoked"):
        await alice.expand([summary], caller=sub)
    assert (await alice.expansion_grant(custom.id)).usable(utcnow())  # the other grant goes on
    assert await alice.revoke_expansion_grant(custom.id, reason="task done") is True
    assert (await alice.expansion_grant(custom.id)).revoke_reason == "task done"


@pytest.mark.anyio
async def test_grants_cover_only_the_agents_own_conversations(
    engines: tuple[ContextEngine, ContextEngine],
) -> None:
    alice, bob = engines
    a, _, b, _ = await setup(alice, bob)
    with pytest.raises(AccessDeniedError, match="not a conversation of agent 'alice'") as foreign:
        await alice.grant_expansion([a, b])
    with pytest.raises(AccessDeniedError) as missing:
        await alice.grant_expansion([99_999])
    # Refused alike whether the conversation exists (another agent's) or not: nothing leaks.
    assert str(foreign.value).replace(str(b), "N") == str(missing.value).replace("99999", "N")
    with pytest.raises(NotFoundError, match="no conversation 'b-main'"):
        await alice.grant_expansion(["b-main"])

    grant = await alice.grant_expansion([a])
    for call in (bob.expansion_grant(grant.id), bob.revoke_expansion_grant(grant.id)):
        with pytest.raises(NotFoundError, match="no grant"):
            await call
    with pytest.raises(NotFoundError, match="no grant"):
        await alice.expansion_grant("grant_0000000000000000")
    assert (await alice.expansion_grant(grant.id)).usable(utcnow())  # bob could not end it
    with pytest.raises(AccessDenied):  # nor borrow it
        await bob.grep("secret", caller=Caller("bob", grant_id=grant.id))


@pytest.mark.anyio
async def test_expired_grants_are_refused(engines: tuple[ContextEngine, ContextEngine]) -> None:
    alice, bob = engines
    a, _, _, summary = await setup(alice, bob)
    grant = await alice.grant_expansion([a], ttl=timedelta(seconds=30))
    sub = Caller("alice", grant_id=grant.id)
    assert (await alice.expand([summary], include_messages=True, caller=sub)).messages
    later = ContextEngine(alice.store, alice.config, clock=lambda: utcnow() + timedelta(minutes=1))
    with pytest.raises(AccessDenied, match="expired"):
        await later.expand([summary], caller=sub)
    assert await later.revoke_expansion_grant(grant.id) is False  # it had ended already
    assert (await alice.expansion_grant(grant.id)).revoke_reason == "expired"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"conversations": []}, "non-empty list"),
        ({"conversations": "a-main"}, "non-empty list"),
        ({"conversations": [True]}, "conversation must be an id or a session id"),
        ({"conversations": [0]}, "positive integer"),
        ({"conversations": [-3]}, "positive integer"),
        ({"conversations": [""]}, "conversation must be an id or a session id"),
        ({"token_cap": 0}, "token_cap must be an integer from 1 to 10,000,000"),
        ({"token_cap": -5}, "token_cap"),
        ({"token_cap": True}, "token_cap"),
        ({"token_cap": 1.5}, "token_cap"),
        ({"token_cap": 10_000_001}, "token_cap"),
        ({"ttl": timedelta(0)}, "ttl must be a duration from 1 second to 24 hours, got 0:00:00"),
        ({"ttl": timedelta(milliseconds=500)}, "ttl must be"),
        ({"ttl": timedelta(hours=25)}, "ttl must be"),
        ({"ttl": 600}, "ttl must be a duration from 1 second to 24 hours, got 600"),
        ({"grantee": ""}, "grantee must be"),
        ({"grantee": "   "}, "grantee must be"),
        ({"grantee": "x" * 201}, "grantee must be"),
        ({"grantee": "a\nb"}, "grantee must be"),
    ],
)
async def test_bad_grant_requests_are_clear_input_errors(
    engines: tuple[ContextEngine, ContextEngine], arguments: dict[str, Any], says: str
) -> None:
    alice, _ = engines
    done = await alice.ingest_batch("a-main", chat("alpha", 2))
    request: dict[str, Any] = {"conversations": [done.conversation_id], **arguments}
    with pytest.raises(InputError, match=says.replace("(", r"\(")):
        await alice.grant_expansion(request.pop("conversations"), **request)
    with pytest.raises(InputError, match="grant_id"):
        await alice.expansion_grant("")
    grant = await alice.grant_expansion([done.conversation_id])
    with pytest.raises(InputError, match="reason"):
        await alice.revoke_expansion_grant(grant.id, reason="")


# ---------------------------------------------------------------------- lcm grants


def run(db: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--database", db, *args], catch_exceptions=False)


def test_parse_duration() -> None:
    assert parse_duration("90s") == timedelta(seconds=90)
    assert parse_duration("10m") == timedelta(minutes=10)
    assert parse_duration("2H") == timedelta(hours=2)
    assert parse_duration("1h30m") == timedelta(minutes=90)
    assert parse_duration("1d") == timedelta(hours=24)
    for bad in ("", "10", "m", "10x", "-5m", "1.5h", "10 m", "0s", "25h", "1d1s", "9" * 30 + "s"):
        with pytest.raises(InputError, match="--ttl"):
            parse_duration(bad)


def test_lcm_grants_create_show_revoke(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    assert run(db, "import", str(Path(__file__).parent.parent / "examples" / "sample-session.jsonl")).exit_code == 0
    [conversation] = json.loads(run(db, "conversations", "--json").stdout)

    human = run(db, "grants", "create", conversation["session_id"], "--ttl", "2h", "--token-cap", "900")
    assert human.exit_code == 0, human.output
    *_, line = human.stdout.strip().splitlines()
    argv = shlex.split(line)
    grant_id = argv[-1]
    assert argv == ["lcm", "--database", db, "--agent", "main", "mcp", "--grant", grant_id]
    assert grant_id.startswith("grant_") and f"created {grant_id}" in human.stdout

    made = json.loads(run(db, "grants", "create", str(conversation["id"]), "--grantee", "task:1", "--json").stdout)
    assert made["conversation_ids"] == [conversation["id"]] and made["grantee"] == "task:1"
    assert made["token_cap"] == 4000 and made["status"] == "active" and made["tokens_used"] == 0
    assert made["mcp_argv"] == shlex.split(made["mcp_command"]) and made["mcp_argv"][-1] == made["grant_id"]

    shown = json.loads(run(db, "grants", "show", grant_id, "--json").stdout)
    assert shown["grant_id"] == grant_id and shown["token_cap"] == 900 and shown["status"] == "active"
    assert shown["conversation_ids"] == [conversation["id"]] and shown["revoked_at"] is None
    table = run(db, "grants", "show", grant_id)
    assert table.exit_code == 0 and "900 (used 0, left 900)" in table.stdout and "active" in table.stdout

    revoked = json.loads(run(db, "grants", "revoke", grant_id, "--json").stdout)
    assert revoked["revoked"] is True and revoked["status"] == "revoked" and revoked["revoke_reason"] == "revoked"
    again = run(db, "grants", "revoke", grant_id)
    assert again.exit_code == 0 and "had already ended (revoked)" in again.stdout
    assert "revoked at" in run(db, "grants", "show", grant_id).stdout

    # Another agent neither sees nor ends the grant, nor grants main's conversations.
    def as_alice(*args: str) -> Result:
        return CliRunner().invoke(cli, ["--database", db, "--agent", "alice", "grants", *args])

    other = as_alice("show", made["grant_id"])
    assert other.exit_code == 5 and "no grant" in other.output
    assert as_alice("revoke", made["grant_id"]).exit_code == 5
    assert json.loads(run(db, "grants", "show", made["grant_id"], "--json").stdout)["status"] == "active"
    foreign = as_alice("create", str(conversation["id"]))
    assert foreign.exit_code == 11 and "not a conversation of agent 'alice'" in foreign.output
    by_session = as_alice("create", conversation["session_id"], "--json")
    assert by_session.exit_code == 5 and json.loads(by_session.stdout)["error"]["type"] == "NotFoundError"

    # Bad input says what to write.
    for args, code, says in [
        (["create", "1", "--ttl", "10"], 3, "--ttl takes a duration like 90s, 10m, 2h"),
        (["create", "1", "--ttl", "3d"], 3, "--ttl must be from 1s to 24h"),
        (["create", "1", "--ttl", "0s"], 3, "--ttl must be from 1s to 24h"),
        (["create", "1", "--token-cap", "0"], 2, "--token-cap"),
        (["create", "1", "--token-cap", "lots"], 2, "--token-cap"),
        (["create", "1", "--grantee", ""], 3, "grantee must be"),
        (["create"], 2, "CONVERSATIONS"),
        (["create", "nope"], 5, "no conversation 'nope'"),
        (["show", "grant_0000000000000000"], 5, "no grant 'grant_0000000000000000'"),
    ]:
        bad = CliRunner().invoke(cli, ["--database", db, "grants", *args])
        assert bad.exit_code == code and says in bad.output, (args, bad.output)


def test_an_expired_cli_grant_is_refused(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    assert run(db, "import", str(Path(__file__).parent.parent / "examples" / "sample-session.jsonl")).exit_code == 0
    [conversation] = json.loads(run(db, "conversations", "--json").stdout)
    made = json.loads(run(db, "grants", "create", str(conversation["id"]), "--ttl", "1s", "--json").stdout)
    time.sleep(1.2)
    assert json.loads(run(db, "grants", "show", made["grant_id"], "--json").stdout)["status"] == "expired"
    done = subprocess.run(
        [str(LCM), *made["mcp_argv"][1:]], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 11 and "has expired" in done.stderr, done.stderr


# ---------------------------------------------------------------------- end to end: lcm grants → lcm mcp --grant


def lcm(*args: str) -> dict[str, Any]:
    done = subprocess.run([str(LCM), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.anyio
async def test_a_cli_minted_grant_starts_a_granted_mcp_session(tmp_path: Path) -> None:
    granted, summary = await seed(tmp_path, "main", "task", "the build uses ninja")
    other, other_summary = await seed(tmp_path, "main", "elsewhere", "the cache lives in redis")
    _, alice_summary = await seed(tmp_path, "alice", "private", f"the code is {SECRET}")
    db = f"sqlite:///{tmp_path / 'lcm.db'}"
    made = lcm("--database", db, "grants", "create", "task", "--ttl", "5m", "--token-cap", "50000", "--json")
    assert made["conversation_ids"] == [granted]
    command, *args = made["mcp_argv"]  # exactly the printed line, with the installed script's path
    assert command == "lcm" and shlex.join(made["mcp_argv"]) == made["mcp_command"]
    params = StdioServerParameters(command=str(LCM), args=args, env={"LCM_MEMORY_EMBEDDER": "hash"})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        info = await session.initialize()
        assert "expansion sub-agent" in (info.instructions or "")
        assert [t.name for t in (await session.list_tools()).tools] == ["lcm_grep", "lcm_describe", "lcm_expand"]
        expanded = await session.call_tool("lcm_expand", {"summary_ids": [summary], "include_messages": True})
        assert not expanded.is_error and "the build uses ninja" in expanded.content[0].text
        assert {m["conversation_id"] for m in expanded.structured_content["messages"]} == {granted}
        for name, arguments, says in [
            ("lcm_expand", {"summary_ids": [other_summary]}, "no summary"),
            ("lcm_expand", {"summary_ids": [alice_summary]}, "no summary"),
            ("lcm_grep", {"pattern": "redis", "conversation_id": other}, "not within reach"),
        ]:
            refused = await session.call_tool(name, arguments)
            assert refused.is_error and says in refused.content[0].text, (name, refused.content)
            assert SECRET not in refused.content[0].text and "redis" not in refused.content[0].text
        used = lcm("--database", db, "grants", "show", made["grant_id"], "--json")
        assert used["tokens_used"] == expanded.structured_content["estimated_tokens"] > 0

        assert lcm("--database", db, "grants", "revoke", made["grant_id"], "--json")["revoked"] is True
        ended = await session.call_tool("lcm_expand", {"summary_ids": [summary]})
        assert ended.is_error and "was revoked" in ended.content[0].text
