"""Settings: precedence, validation, the file format, and derived values."""

from __future__ import annotations

from pathlib import Path

import pytest

from lossless.config import (
    SETTINGS,
    Config,
    Credential,
    default_key_file,
    load_config,
    resolve_api_key,
    resolve_base_url,
)
from lossless.errors import ConfigError


def test_settings_table_and_config_fields_match() -> None:
    fields = [f for f in Config.__dataclass_fields__ if f not in ("sources", "provider_environment")]
    assert [s.name for s in SETTINGS] == fields
    for setting in SETTINGS:
        assert getattr(Config(), setting.name) == setting.default, setting.name
        assert setting.env == "LCM_" + setting.name.upper()
    assert len({s.key for s in SETTINGS}) == len(SETTINGS)


def test_reference_defaults() -> None:
    config = load_config(env={})
    assert config.context_threshold == 0.75
    assert config.fresh_tail_count == 64
    assert (config.leaf_min_fanout, config.condensed_min_fanout, config.condensed_min_fanout_hard) == (8, 4, 2)
    assert (config.leaf_chunk_tokens, config.leaf_target_tokens, config.condensed_target_tokens) == (20000, 2400, 2000)
    assert config.large_file_token_threshold == 25000
    assert config.summary_timeout_ms == 60000 and config.delegation_timeout_ms == 120000
    assert (config.circuit_breaker_threshold, config.circuit_breaker_cooldown_ms) == (5, 1_800_000)
    assert config.resolved_bootstrap_max_tokens == 6000
    assert config.replace(leaf_chunk_tokens=40000).resolved_bootstrap_max_tokens == 12000
    assert all(source == "default" for source in config.sources.values())


def test_precedence_argument_env_file_default(tmp_path: Path) -> None:
    file = tmp_path / "lcm.toml"
    file.write_text("fresh_tail_count = 10\nleafMinFanout = 5\ncontext_threshold = 0.5\n")
    env = {"LCM_CONFIG_FILE": str(file), "LCM_FRESH_TAIL_COUNT": "20", "LCM_CONTEXT_THRESHOLD": "0.6"}
    config = load_config({"fresh_tail_count": 30}, env=env)
    assert config.fresh_tail_count == 30 and config.sources["fresh_tail_count"] == "argument"
    assert config.context_threshold == 0.6 and config.sources["context_threshold"] == "env:LCM_CONTEXT_THRESHOLD"
    assert config.leaf_min_fanout == 5 and config.sources["leaf_min_fanout"].startswith("file:")
    assert config.leaf_chunk_tokens == 20000 and config.sources["leaf_chunk_tokens"] == "default"


def test_lossless_table_and_default_file_location(tmp_path: Path) -> None:
    default = tmp_path / "home" / ".config" / "lossless" / "config.toml"
    default.parent.mkdir(parents=True)
    default.write_text('[lossless]\nagent_id = "builder"\n')
    assert load_config().agent_id == "builder"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LCM_FRESH_TAIL_COUNT": "many"}, "fresh_tail_count (env:LCM_FRESH_TAIL_COUNT) = 'many' is invalid"),
        ({"LCM_CONTEXT_THRESHOLD": "1.5"}, "between 0.05 and 1"),
        ({"LCM_ENABLED": "maybe"}, "expected true or false"),
        ({"LCM_TOKENIZER": "o200k"}, "did you mean 'o200k_base'"),
        ({"LCM_TIMEZONE": "Mars/Base"}, "unknown time zone"),
        ({"LCM_AGENT_ID": "has space"}, "agent_id"),
        ({"LCM_DATABASE_URL": "mysql://x"}, "not supported"),
        ({"LCM_CONDENSED_MIN_FANOUT_HARD": "6"}, "must not exceed condensed_min_fanout"),
        ({"LCM_LEAF_TARGET_TOKENS": "30000"}, "must be smaller than leaf_chunk_tokens"),
        ({"LCM_IGNORE_SESSION_PATTERNS": "[1, 2]"}, "list of strings"),
        ({"LCM_CONFIG_FILE": "/nonexistent/lcm.toml"}, "does not exist"),
    ],
)
def test_invalid_values_fail_fast_with_name_value_and_range(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        load_config(env=env)


def test_unknown_keys_are_refused_with_a_suggestion(tmp_path: Path) -> None:
    file = tmp_path / "c.toml"
    file.write_text("fresh_tail_cont = 3\n")
    with pytest.raises(ConfigError, match="did you mean 'fresh_tail_count'"):
        load_config(config_file=file)
    with pytest.raises(ConfigError, match="unknown setting 'nope'"):
        load_config({"nope": 1})
    file.write_text("this is = not toml [")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(config_file=file)


def test_value_parsing() -> None:
    config = load_config(
        env={
            "LCM_IGNORE_SESSION_PATTERNS": "cron:*, agent:*:heartbeat",
            "LCM_STATELESS_SESSION_PATTERNS": '["a:**"]',
            "LCM_SKIP_STATELESS_SESSIONS": "off",
            "LCM_MAX_ASSEMBLY_TOKEN_BUDGET": "",
            "LCM_SUMMARY_MAX_OVERAGE_FACTOR": "2",
            "TZ": "Europe/Paris",
        }
    )
    assert config.ignore_session_patterns == ("cron:*", "agent:*:heartbeat")
    assert config.stateless_session_patterns == ("a:**",)
    assert config.skip_stateless_sessions is False
    assert config.max_assembly_token_budget is None
    assert config.summary_max_overage_factor == 2.0
    assert config.timezone == "Europe/Paris" and config.sources["timezone"] == "env:TZ"


def test_database_url_resolution(tmp_path: Path) -> None:
    assert load_config(env={}).resolved_database_url.endswith("/lossless/lcm.db")
    assert load_config(env={"LCM_DATA_DIR": str(tmp_path)}).resolved_database_url == f"sqlite:///{tmp_path}/lcm.db"
    assert load_config(env={"LCM_DATABASE_PATH": "/var/x.db"}).resolved_database_url == "sqlite:////var/x.db"
    both = load_config(env={"LCM_DATABASE_PATH": "/var/x.db", "LCM_DATABASE_URL": "sqlite:///y.db"})
    assert both.resolved_database_url == "sqlite:///y.db"


def test_replace_validates_again() -> None:
    config = Config()
    assert config.replace(fresh_tail_count=3).fresh_tail_count == 3
    with pytest.raises(ConfigError):
        config.replace(fresh_tail_count=-1)
    with pytest.raises(ConfigError):
        config.replace(freshTailCount=True)
    assert config.replace(freshTailCount=5).fresh_tail_count == 5


#: Every key of the reference specification's configuration table (spec/001).
SPEC_KEYS = [
    "enabled",
    "databasePath",
    "ignoreSessionPatterns",
    "statelessSessionPatterns",
    "skipStatelessSessions",
    "contextThreshold",
    "freshTailCount",
    "newSessionRetainDepth",
    "leafMinFanout",
    "condensedMinFanout",
    "condensedMinFanoutHard",
    "incrementalMaxDepth",
    "leafChunkTokens",
    "bootstrapMaxTokens",
    "leafTargetTokens",
    "condensedTargetTokens",
    "maxExpandTokens",
    "largeFileTokenThreshold",
    "summaryProvider",
    "summaryModel",
    "largeFileSummaryProvider",
    "largeFileSummaryModel",
    "expansionProvider",
    "expansionModel",
    "delegationTimeoutMs",
    "summaryTimeoutMs",
    "timezone",
    "pruneHeartbeatOk",
    "maxAssemblyTokenBudget",
    "summaryMaxOverageFactor",
    "customInstructions",
    "circuitBreakerThreshold",
    "circuitBreakerCooldownMs",
]


def test_every_reference_key_is_a_setting() -> None:
    keys = {s.key for s in SETTINGS}
    assert [k for k in SPEC_KEYS if k not in keys] == []
    assert {"databaseUrl", "dataDir", "agentId"} <= keys


# ---------------------------------------------------------------- secrets and provider credentials

SECRET = "sk-test-0123456789abcdef0123456789"


def test_secrets_are_never_shown() -> None:
    config = load_config({"summary_api_key": SECRET}, env={"ANTHROPIC_API_KEY": SECRET + "-env"})
    assert [s.name for s in SETTINGS if s.secret] == ["summary_api_key", "api_tokens", "memory_rerank_api_key"]
    rerank = load_config({"memory_rerank_api_key": SECRET})
    assert SECRET not in repr(rerank) and SECRET not in str(rerank.as_dict())
    assert SECRET not in repr(config) and SECRET not in str(config)
    assert f"summary_api_key='sk-t…(redacted, {len(SECRET)} chars)'" in repr(config)
    assert "provider_environment=[ANTHROPIC_API_KEY]" in repr(config)
    assert SECRET not in str(config.as_dict())
    assert config.as_dict(reveal_secrets=True)["summary_api_key"] == SECRET
    credential = resolve_api_key(config, "openai")
    assert credential is not None and credential.value == SECRET
    assert SECRET not in repr(credential) and SECRET not in str(credential)
    assert config.replace(fresh_tail_count=3).provider_environment == {"ANTHROPIC_API_KEY": SECRET + "-env"}


def test_only_the_known_provider_variables_are_captured() -> None:
    config = load_config(env={"OPENAI_API_KEY": " k1 ", "OPENAI_ORG_ID": "org", "ANTHROPIC_BASE_URL": "", "HOME": "/"})
    assert dict(config.provider_environment) == {"OPENAI_API_KEY": "k1"}


def test_api_key_order_setting_then_provider_variable_then_key_file(tmp_path: Path) -> None:
    key_file = tmp_path / "key.txt"
    key_file.write_text("\n  from-file  \nsecond line\n")
    env = {"OPENAI_API_KEY": "from-env", "LCM_SUMMARY_API_KEY_FILE": str(key_file)}
    full = load_config(env={**env, "LCM_SUMMARY_API_KEY": "from-setting"})
    assert resolve_api_key(full, "openai") == Credential("from-setting", "env:LCM_SUMMARY_API_KEY")
    no_setting = load_config(env=env)
    assert resolve_api_key(no_setting, "openai") == Credential("from-env", "env:OPENAI_API_KEY")
    # ANTHROPIC_API_KEY is not set, so the anthropic provider falls through to the key file.
    assert resolve_api_key(no_setting, "anthropic") == Credential("from-file", f"key file {key_file}")


def test_default_key_file_is_used_only_when_present() -> None:
    config = load_config(env={})
    assert resolve_api_key(config, "anthropic") is None
    path = default_key_file("anthropic")
    assert path.name == "anthropic.key" and path.parent.name == "lossless"
    path.parent.mkdir(parents=True)
    path.write_text("sk-ant-default\n")
    credential = resolve_api_key(config, "anthropic")
    assert credential is not None and credential.value == "sk-ant-default"


@pytest.mark.parametrize(("content", "message"), [(None, "does not exist"), ("", "is empty"), ("\n \n", "is empty")])
def test_a_named_key_file_must_hold_a_key(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "openai.key"
    if content is not None:
        path.write_text(content)
    config = load_config({"summary_api_key_file": str(path)}, env={})
    with pytest.raises(ConfigError, match=message) as caught:
        resolve_api_key(config, "openai")
    assert caught.value.setting == "summary_api_key_file"


def test_base_url_order_and_validation() -> None:
    assert resolve_base_url(load_config(env={}), "openai") is None
    env = {"OPENAI_BASE_URL": "http://localhost:11434/v1"}
    assert resolve_base_url(load_config(env=env), "openai") == "http://localhost:11434/v1"
    assert resolve_base_url(load_config(env=env), "anthropic") is None
    chosen = load_config({"summary_base_url": "http://127.0.0.1:8000/v1"}, env=env)
    assert resolve_base_url(chosen, "openai") == "http://127.0.0.1:8000/v1"
    with pytest.raises(ConfigError, match="summary_base_url"):
        load_config({"summary_base_url": "localhost:8000"}, env={})
    with pytest.raises(ConfigError, match="OPENAI_BASE_URL = 'ftp://x' is not an http"):
        resolve_base_url(load_config(env={"OPENAI_BASE_URL": "ftp://x"}), "openai")
    with pytest.raises(ConfigError, match="use one of openai, anthropic"):
        resolve_base_url(Config(), "mistral")


def test_spend_guard_defaults() -> None:
    config = load_config(env={})
    assert (config.summary_call_window_ms, config.summary_max_calls_per_window) == (600_000, 24)
    assert config.summary_spend_backoff_ms == 1_800_000 and config.summary_max_attempts == 3


def test_api_tokens_are_secret_and_validated() -> None:
    token = "tok-0123456789abcdefXYZ"
    config = load_config({"api_tokens": f"{token}=alice, other-token-0123456789=bob"}, env={})
    assert config.api_tokens == (f"{token}=alice", "other-token-0123456789=bob")
    assert token not in repr(config) and token not in str(config.as_dict())
    with pytest.raises(ConfigError, match="TOKEN=AGENT_ID") as caught:
        load_config({"api_tokens": "short-secret=alice"}, env={})
    assert "short-secret" not in str(caught.value)
    # Not even a prefix of a token is shown (a bad entry's message neither), only the agent it names.
    shown = config.as_dict()["api_tokens"]
    assert shown == [f"…(redacted, {len(token)} chars)=alice", "…(redacted, 22 chars)=bob"]
    assert "tok-" not in repr(config) and "othe" not in repr(config)
    with pytest.raises(ConfigError) as bad:
        load_config({"api_tokens": f"{token}=alice, nope"}, env={})
    assert "tok-" not in str(bad.value)


def test_duplicate_api_tokens_are_refused() -> None:
    token = "tok-0123456789abcdefXYZ"
    for entries in (f"{token}=alice, {token}=alice", f"{token}=alice, other-token-0123456789=bob, {token}=bob"):
        with pytest.raises(ConfigError, match="same token") as caught:
            load_config({"api_tokens": entries}, env={})
        assert caught.value.setting == "api_tokens" and token not in str(caught.value)


def test_lcm_config_show_prints_no_part_of_an_api_token(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from lossless.cli import cli

    token = "Zq9-secret-token-0123456789"
    monkeypatch.setenv("LCM_API_TOKENS", f"{token}=alice")
    for args in (["config", "show"], ["config", "show", "--json"]):
        shown = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert shown.exit_code == 0, shown.output
        assert "api_tokens" in shown.output and "alice" in shown.output
        assert token[:3] not in shown.output and "Zq9" not in shown.output
