"""Settings: precedence, validation, the file format, and derived values."""

from __future__ import annotations

from pathlib import Path

import pytest

from lossless.config import SETTINGS, Config, load_config
from lossless.errors import ConfigError


def test_settings_table_and_config_fields_match() -> None:
    fields = [f for f in Config.__dataclass_fields__ if f != "sources"]
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
