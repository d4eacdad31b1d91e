"""Session patterns: globs over session keys."""

from __future__ import annotations

import pytest

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
