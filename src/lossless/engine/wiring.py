"""Wiring: the one module that imports backends (``lossless.stores``) and providers (``lossless.providers``).

Everything else talks to ports (:mod:`lossless.ports`, :mod:`lossless.memory.ports`,
:mod:`lossless.subagent`); this module turns a :class:`~lossless.config.Config` into the concrete
objects behind them — the store and blob store, the summarizers, the compactor, the large-file
interceptor, the expansion runner and the long-term memory service — and hands them to the engine
(:mod:`lossless.engine.facade`) and to the CLI commands that open stores themselves (``lcm migrate``,
``lcm memory``).  An import-linter contract keeps it the only one.

Invariants:

* Provider SDKs and backend drivers are imported lazily (the provider and store factories do it),
  so importing the engine loads none.
* Nothing here reads the environment: the :class:`Config` is built once, at the edge.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING

from lossless.compaction import Compactor
from lossless.config import Config, load_config, resolve_api_key, resolve_base_url
from lossless.errors import ConfigError
from lossless.interception import Interceptor
from lossless.memory.ports import DedupJudge, Embedder, Extractor
from lossless.memory.scopes import MemoryCaller
from lossless.ports import BlobStore, Store, Summarizer
from lossless.providers import embedder_for as provider_embedder_for
from lossless.providers import embedder_missing, file_summarizer_for, reranker_for, summarizer_for
from lossless.records import Summary, utcnow
from lossless.stores import blob_store_for, memory_store_for, open_store, sqlite_path_from_url
from lossless.stores.transfer import transfer_sqlite_to_postgres
from lossless.subagent import ExpansionRunner
from lossless.tokens import RecentCounter, TokenCounter

if TYPE_CHECKING:
    from lossless.memory.service import MemoryService
    from lossless.retrieval.expansion import Leads

__all__ = [
    "Components",
    "MemorySession",
    "blob_store_for",
    "build",
    "dedup_judge_for",
    "embedder_for",
    "embedder_missing",
    "expansion_runner_for",
    "extractor_for",
    "memory_service",
    "open_memory",
    "open_store",
    "sqlite_path_from_url",
    "transfer_sqlite_to_postgres",
]


@dataclass(frozen=True, slots=True)
class Components:
    """What an engine is made of, built from one :class:`Config` (see :func:`build`)."""

    summarizer: Summarizer
    blobs: BlobStore
    compactor: Compactor
    interceptor: Interceptor


def build(
    store: Store,
    config: Config,
    *,
    tokens: TokenCounter,
    counting: RecentCounter,
    zone: tzinfo,
    clock: Callable[[], datetime],
    summarizer: Summarizer | None = None,
    blobs: BlobStore | None = None,
    file_summarizer: Summarizer | None = None,
    on_leaf: Callable[[Summary], Awaitable[object]] | None = None,
) -> Components:
    """The engine's summarizers, blob store, compactor and interceptor; a given one is used as it is."""
    summarizer = summarizer or summarizer_for(config, tokens)
    blobs = blobs or blob_store_for(config, store)
    compactor = Compactor(store, summarizer, config=config, counter=tokens, zone=zone, clock=clock, on_leaf=on_leaf)
    interceptor = Interceptor(
        store,
        blobs,
        counter=counting,
        threshold=config.large_file_token_threshold,
        summarizer=file_summarizer or file_summarizer_for(config, tokens, summarizer),
        summary_timeout_s=config.summary_timeout_ms / 1000,
        clock=clock,
    )
    return Components(summarizer, blobs, compactor, interceptor)


def expansion_runner_for(config: Config, counter: TokenCounter, leads: Leads | None = None) -> ExpansionRunner:
    """The sub-agent runner ``expansion_provider`` asks for: offline by default (reading ``leads``
    from long-term memory when given), else a model (openai/anthropic)."""
    from lossless.providers.subagent import llm_expansion_runner_for
    from lossless.retrieval.expansion import OfflineExpansionRunner

    return llm_expansion_runner_for(config) or OfflineExpansionRunner(counter, leads)


# ------------------------------------------------------------------ long-term memory


def embedder_for(config: Config) -> Embedder:
    """The memory embedder named by ``memory_embedder`` (auto, e5, local, openai, or the dependency-free hash)."""
    if config.memory_embedder == "hash":
        from lossless.memory.hashing import HashEmbedder

        return HashEmbedder()
    return provider_embedder_for(config)


def _memory_chat(
    config: Config, provider: str, setting: str, *, timeout_s: float, retries: int, label: str
) -> tuple[Callable[[str, str], Awaitable[str]], str]:
    """The chat call (and its model's name) that the memory layer's ``setting`` names on ``provider``."""
    from lossless.providers.chat import chat_for

    model = config.memory_extraction_model or config.summary_model
    if not model:
        raise ConfigError(
            f"{setting} = {provider} needs a model: set memory_extraction_model (or summary_model)",
            setting="memory_extraction_model",
        )
    credential = resolve_api_key(config, provider)
    chat = chat_for(
        provider,
        model,
        api_key=credential.value if credential else None,
        base_url=resolve_base_url(config, provider),
        timeout_s=timeout_s,
        max_retries=retries,
        label=label,
    )
    return chat, model


def extractor_for(config: Config) -> Extractor | None:
    """The model-backed memory extractor named by ``memory_extractor`` (``None``: the offline one)."""
    provider = config.memory_extractor
    if provider == "offline":
        return None
    from lossless.memory.llm_extraction import LlmExtractor

    timeout_s = config.summary_timeout_ms / 1000
    chat, model = _memory_chat(
        config, provider, "memory_extractor", timeout_s=timeout_s, retries=2, label=f"{provider} extractor"
    )
    return LlmExtractor(chat, name=f"{provider}:{model}")


def dedup_judge_for(config: Config) -> DedupJudge | None:
    """The model that makes memory dedup decisions, by ``memory_dedup`` (``None``: the rules decide)."""
    mode = config.memory_dedup
    if mode == "auto":
        mode = config.memory_extractor  # the extractor's provider, or offline
    if mode == "offline":
        return None
    from lossless.memory.llm_dedup import LlmJudge

    timeout_s = config.memory_dedup_timeout_ms / 1000
    chat, model = _memory_chat(
        config, mode, "memory_dedup", timeout_s=timeout_s, retries=1, label=f"{mode} memory dedup"
    )
    return LlmJudge(chat, timeout_s=timeout_s, name=f"{mode}:{model}")


def memory_service(
    store: Store, config: Config, caller: MemoryCaller, *, clock: Callable[[], datetime] = utcnow
) -> MemoryService:
    """The memory service the settings describe, on ``store``'s file, as ``caller``; every time it writes or
    compares (decay, recency, tiers, access) is ``clock``'s (the engine's)."""
    from lossless.memory import decay
    from lossless.memory.admission import PRESETS
    from lossless.memory.ranking import RetrievalConfig
    from lossless.memory.service import MemoryService

    return MemoryService(
        memory_store_for(store),
        embedder_for(config),
        caller,
        retrieval=RetrievalConfig.from_config(config),
        decay_config=decay.config_from(config),
        tag_prefixes=config.memory_tag_prefixes,
        stale_threshold=config.memory_stale_threshold,
        exact_search_max=config.memory_exact_search_max,
        reranker=reranker_for(config),
        admission=PRESETS.get(config.memory_admission),
        extractor=extractor_for(config),
        judge=dedup_judge_for(config),
        clock=clock,
    )


class MemorySession:
    """A :class:`~lossless.memory.service.MemoryService` with the store it runs on (close it when done)."""

    def __init__(self, store: Store, service: MemoryService) -> None:
        self.store = store
        self.service = service

    async def aclose(self) -> None:
        closer = getattr(self.service.embedder, "aclose", None)  # only network embedders hold a client
        if closer is not None:
            await closer()
        await self.store.close()

    async def __aenter__(self) -> MemorySession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def open_memory(
    config: Config | None = None, *, agent_id: str | None = None, system: bool = False
) -> MemorySession:
    """Open long-term memory on the configured database, as ``agent_id`` (or, explicitly, the system).

    The embedder is ``memory_embedder``'s (the offline e5 model by default, else the local one) and the
    fusion ``memory_fusion``'s.  ``system=True`` reaches every scope; nothing else does.
    """
    config = config or load_config({})
    store = await open_store(config.resolved_database_url, config)
    try:
        caller = MemoryCaller.system() if system else MemoryCaller.agent(agent_id or config.agent_id)
        service = memory_service(store, config, caller)
    except BaseException:
        await store.close()
        raise
    return MemorySession(store, service)
