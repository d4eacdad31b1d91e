"""Session patterns: globs over session keys."""

from __future__ import annotations

import pytest

from lossless import Message
from lossless.config import Config
from lossless.sessions import SessionPolicy, glob_to_regex


@pytest.mark.parametrize(
    ("pattern", "key", "matches"),
    [
        ("cron:*", "cron:nightly", True),
        ("cron:*", "cron:nightly:run-3", False),  # * stops at ':'
        ("cron:**", "cron:nightly:run-3", True),  # ** does not
        ("agent:*:heartbeat", "agent:main:heartbeat", True),
        ("agent:*:heartbeat", "agent:main:discord:heartbeat", False),
        ("agent:?:x", "agent:a:x", True),
        ("agent:?:x", "agent::x", False),
        ("a.b", "aXb", False),  # regex metacharacters are literal
        ("exact", "exact", True),
        ("exact", "exactly", False),
        ("Case", "case", False),
    ],
)
def test_glob_semantics(pattern: str, key: str, matches: bool) -> None:
    assert bool(glob_to_regex(pattern).match(key)) is matches


def test_ignored_wins_over_stateless() -> None:
    policy = SessionPolicy(ignore=("tmp:*",), stateless=("tmp:*", "ro:**"))
    assert policy.classify("tmp:1") == "ignored"
    assert policy.classify("ro:a:b") == "stateless"
    assert policy.classify("agent:main") == "normal"
    assert "ignore_session_patterns" in (policy.write_block_reason("tmp:1") or "")
    assert "stateless" in (policy.write_block_reason("ro:a") or "")
    assert policy.write_block_reason("agent:main") is None
    assert SessionPolicy(stateless=("ro:*",), skip_stateless=False).write_block_reason("ro:a") is None


@pytest.mark.anyio
@pytest.mark.parametrize("retain", [0, 2, 64])
async def test_a_new_session_under_the_same_key_carries_the_deep_summaries(config: Config, retain: int) -> None:
    from lossless import ContextEngine

    from .test_compaction import chat, settings

    engine = await ContextEngine.open(config=config.replace(new_session_retain_depth=retain, **settings()))
    try:
        await engine.ingest_batch("old", chat(60), session_key="agent:main:chat")
        await engine.compact("old", force=True)  # one deep summary …
        await engine.ingest_batch("old", chat(20, start=60), session_key="agent:main:chat")
        await engine.compact("old", mode="incremental")  # … and leaves after it
        old = await engine.conversation("old")
        before = await engine.store.get_context(old.id)
        depths = [e.depth for e in before if e.kind == "summary"]
        assert 0 in depths and max(d or 0 for d in depths) >= 2, depths
        expected = [e.summary_id for e in before if e.kind == "summary" and (e.depth or 0) >= retain]
        # /new: a new session id under the same key.  The old session is archived, not lost.
        await engine.after_turn(
            "new", [Message.user("hello again")], token_budget=100_000, session_key="agent:main:chat"
        )
        new = await engine.conversation("new")
        context = await engine.store.get_context(new.id)
        assert [e.summary_id for e in context if e.kind == "summary"] == expected
        assert [e.kind for e in context][-1] == "message" and len([e for e in context if e.kind == "message"]) == 1
        assert not (await engine.conversation("old")).active
        assembled = await engine.assemble("new", token_budget=100_000)
        assert assembled.summaries_included == len(expected)
        # The same session again, or a session without a key, carries nothing more.
        await engine.ingest("new", Message.user("and again"), session_key="agent:main:chat")
        assert len(await engine.store.get_context(new.id)) == len(context) + 1
    finally:
        await engine.dispose()


def test_the_agent_id_of_a_session_key() -> None:
    from lossless.sessions import agent_id_from_session_key

    assert agent_id_from_session_key("agent:main:discord:channel:123") == "main"
    assert agent_id_from_session_key("agent:ops") == "ops"
    for key in (None, "", "agent:", "cron:nightly", "agents:main:x", "agent:has space:x"):
        assert agent_id_from_session_key(key) is None
