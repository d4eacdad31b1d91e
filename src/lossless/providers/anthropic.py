"""The Anthropic summarizer: the messages API through the official ``anthropic`` SDK.

Invariants:

* The SDK never reads the environment for credentials or its endpoint: the
  key (a placeholder for keyless proxies) and the base URL are always passed,
  which also stops its profile and workload-identity discovery.  Credentials
  come from :mod:`lossless.config` only.
* The SDK does not retry (``max_retries=0``): :class:`~lossless.providers.guards.GuardedSummarizer`
  owns retrying.  Each call opens and closes its own client.
* No sampling parameter is sent: the API version the 2.x SDK speaks
  (2026-10-21) refuses ``temperature``, ``top_p`` and ``top_k`` at any value,
  and recent models refuse them on older versions too, so the SDK no longer
  offers them.  The aggressive policy is carried by the prompt alone.
* The system prompt goes in ``system``; only ``text`` content blocks make the
  summary (thinking blocks never leak into it).  Every SDK failure becomes a
  :class:`~lossless.errors.ProviderError`; an empty answer is a retryable one,
  an answer stopped at the output cap a non-retryable one.  Messages never
  contain the key.
"""

from __future__ import annotations

from typing import Any

import anthropic
from anthropic import AsyncAnthropic

from lossless.errors import ProviderError
from lossless.ports import SummaryRequest, SummaryResult
from lossless.prompts import build_prompts, clean_summary_text
from lossless.providers.base import (
    NO_KEY,
    body_detail,
    connection_error,
    cut_off_error,
    empty_answer_error,
    int_or_none,
    output_cap,
    status_error,
    timeout_error,
)

__all__ = ["DEFAULT_ANTHROPIC_BASE_URL", "AnthropicSummarizer"]

DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"


class AnthropicSummarizer:
    """A :class:`~lossless.ports.Summarizer` backed by Anthropic's messages API."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None = None,
        timeout_s: float | None = 60.0,
        overage_factor: float = 3.0,
        key_source: str = "the caller",
        provider: str = "anthropic",
    ) -> None:
        """``api_key`` None means the endpoint needs none; ``base_url`` None means Anthropic's own API."""
        self.provider = provider
        self.model: str | None = model
        self._model = model
        self._api_key = api_key
        self._base_url = base_url or DEFAULT_ANTHROPIC_BASE_URL
        self._timeout_s = timeout_s
        self._overage_factor = overage_factor
        self._key_source = key_source

    def __repr__(self) -> str:
        return f"AnthropicSummarizer(model={self._model!r}, base_url={self._base_url!r})"

    def _client(self) -> AsyncAnthropic:
        return AsyncAnthropic(
            api_key=self._api_key or NO_KEY,
            base_url=self._base_url,
            max_retries=0,
            timeout=self._timeout_s,
        )

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        prompts = build_prompts(request)
        cap = output_cap(request, self._overage_factor)
        async with self._client() as client:
            try:
                response = await client.messages.create(
                    model=self._model,
                    system=prompts.system,
                    messages=[{"role": "user", "content": prompts.user}],
                    max_tokens=cap,
                )
            except anthropic.APIStatusError as exc:
                raise status_error(
                    self.provider,
                    exc.status_code,
                    body_detail(exc.body, exc.message),
                    model=self._model,
                    endpoint=self._base_url,
                    key_source=self._key_source,
                    secrets=[self._api_key],
                ) from exc
            except anthropic.APITimeoutError as exc:
                raise timeout_error(self.provider, self._base_url, self._timeout_s) from exc
            except anthropic.APIConnectionError as exc:
                raise connection_error(self.provider, self._base_url, str(exc)) from exc
            except anthropic.AnthropicError as exc:
                raise ProviderError(self.provider, f"the SDK failed: {type(exc).__name__}", retryable=False) from exc
        return self._result(response, cap)

    def _result(self, response: Any, cap: int) -> SummaryResult:
        blocks = getattr(response, "content", None) or []
        raw = "\n".join(
            block.text for block in blocks if getattr(block, "type", None) == "text" and isinstance(block.text, str)
        )
        text = clean_summary_text(raw)
        if getattr(response, "stop_reason", None) == "max_tokens":
            raise cut_off_error(self.provider, self._model, cap)
        if not text:
            raise empty_answer_error(self.provider, self._model)
        usage = getattr(response, "usage", None)
        answered_by = getattr(response, "model", None)
        return SummaryResult(
            text=text,
            provider=self.provider,
            model=answered_by if isinstance(answered_by, str) and answered_by else self._model,
            input_tokens=int_or_none(getattr(usage, "input_tokens", None)),
            output_tokens=int_or_none(getattr(usage, "output_tokens", None)),
        )
