"""Model providers: summarizers (and later embedders and rerankers), reached through factories.

:func:`summarizer_for` picks the summarizer named by the ``summary_provider``
setting and imports it lazily, so an SDK that is not installed only matters to
whoever selects it.
"""

from __future__ import annotations

from lossless.config import Config
from lossless.errors import ConfigError
from lossless.ports import Summarizer
from lossless.tokens import TokenCounter

__all__ = ["SUMMARY_PROVIDERS", "summarizer_for"]

SUMMARY_PROVIDERS = ("offline",)


def summarizer_for(config: Config, counter: TokenCounter) -> Summarizer:
    """The summarizer the configuration asks for (``""`` means the built-in offline one)."""
    provider = config.summary_provider.strip().lower()
    if provider in ("", "offline"):
        from lossless.providers.offline import OfflineSummarizer

        return OfflineSummarizer(counter)
    raise ConfigError(
        f"summary_provider {config.summary_provider!r} is not available: use one of {', '.join(SUMMARY_PROVIDERS)}",
        setting="summary_provider",
    )
