"""The OpenAI summarizer: chat completions through the official ``openai`` SDK.

Works with OpenAI itself and with any server that speaks the chat-completions
API (vLLM, Ollama, llama.cpp's server, LM Studio, proxies) via ``base_url``.

Invariants:

* The SDK never reads the environment: the key and base URL are always passed
  (a placeholder key for keyless local servers), and the organisation and
  project it may pick up from ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID`` are
  cleared.  Credentials come from :mod:`lossless.config` only.
* The SDK does not retry (``max_retries=0``): :class:`~lossless.providers.guards.GuardedSummarizer`
  owns retrying.  Each call opens and closes its own client, so nothing is
  bound to one event loop and no connection outlives the call.
* Every SDK failure becomes a :class:`~lossless.errors.ProviderError` (see
  :func:`~lossless.providers.base.status_error`); an empty answer is a
  retryable one, an answer cut off at the output cap a non-retryable one.
  Messages never contain the key.
* A server that refuses ``temperature`` (reasoning models) or ``max_tokens``
  (newer OpenAI models, which want ``max_completion_tokens``) with HTTP 400 is
  asked again once without it; the instance remembers, so later calls go
  straight to the accepted form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import openai
from openai import AsyncOpenAI

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
    temperature_for,
    timeout_error,
)

__all__ = ["DEFAULT_OPENAI_BASE_URL", "OpenAISummarizer"]

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"


@dataclass(frozen=True, slots=True)
class _Shape:
    """Which request parameters the server accepts."""

    temperature: bool
    cap_parameter: str  # "max_tokens" or "max_completion_tokens"


class OpenAISummarizer:
    """A :class:`~lossless.ports.Summarizer` backed by an OpenAI-compatible chat-completions API."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None = None,
        timeout_s: float | None = 60.0,
        overage_factor: float = 3.0,
        key_source: str = "the caller",
        provider: str = "openai",
    ) -> None:
        """``api_key`` None means the server needs none; ``base_url`` None means OpenAI's own API."""
        self.provider = provider
        self.model: str | None = model
        self._model = model
        self._api_key = api_key
        self._base_url = base_url or DEFAULT_OPENAI_BASE_URL
        self._timeout_s = timeout_s
        self._overage_factor = overage_factor
        self._key_source = key_source
        official = base_url is None or base_url.rstrip("/") == DEFAULT_OPENAI_BASE_URL
        # OpenAI's own newer models refuse max_tokens; most compatible servers only know it.
        self._shape = _Shape(temperature=True, cap_parameter="max_completion_tokens" if official else "max_tokens")

    def __repr__(self) -> str:
        return f"OpenAISummarizer(model={self._model!r}, base_url={self._base_url!r})"

    def _client(self) -> AsyncOpenAI:
        client = AsyncOpenAI(
            api_key=self._api_key or NO_KEY,
            base_url=self._base_url,
            max_retries=0,
            timeout=self._timeout_s,
        )
        client.organization = None
        client.project = None
        return client

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        prompts = build_prompts(request)
        cap = output_cap(request, self._overage_factor)
        messages = [{"role": "system", "content": prompts.system}, {"role": "user", "content": prompts.user}]
        async with self._client() as client:
            for _ in range(3):  # at most two adaptations of the request shape, then the real answer or error
                shape = self._shape
                params: dict[str, Any] = {"model": self._model, "messages": messages, shape.cap_parameter: cap}
                if shape.temperature:
                    params["temperature"] = temperature_for(request.policy)
                try:
                    response = await client.chat.completions.create(**params)
                except openai.APIStatusError as exc:
                    if not self._adapt(shape, exc):
                        raise self._status_error(exc) from exc
                    continue
                except openai.APITimeoutError as exc:
                    raise timeout_error(self.provider, self._base_url, self._timeout_s) from exc
                except openai.APIConnectionError as exc:
                    raise connection_error(self.provider, self._base_url, str(exc)) from exc
                except openai.OpenAIError as exc:
                    raise ProviderError(
                        self.provider, f"the SDK failed: {type(exc).__name__}", retryable=False
                    ) from exc
                return self._result(response, cap)
        raise ProviderError(self.provider, "the server refused every request shape tried", retryable=False)

    def _adapt(self, shape: _Shape, exc: openai.APIStatusError) -> bool:
        """Learn from a 400 that names an unsupported parameter; True when the request should be sent again."""
        if exc.status_code != 400:
            return False
        text = f"{getattr(exc, 'param', '') or ''} {body_detail(exc.body, exc.message)}".lower()
        unsupported = "unsupported" in text or "not supported" in text or "does not support" in text
        if shape.temperature and "temperature" in text and unsupported:
            self._shape = _Shape(temperature=False, cap_parameter=shape.cap_parameter)
            return True
        if shape.cap_parameter == "max_tokens" and "max_completion_tokens" in text:
            self._shape = _Shape(temperature=shape.temperature, cap_parameter="max_completion_tokens")
            return True
        return False

    def _status_error(self, exc: openai.APIStatusError) -> ProviderError:
        return status_error(
            self.provider,
            exc.status_code,
            body_detail(exc.body, exc.message),
            model=self._model,
            endpoint=self._base_url,
            key_source=self._key_source,
            secrets=[self._api_key],
        )

    def _result(self, response: Any, cap: int) -> SummaryResult:
        choices = getattr(response, "choices", None) or []
        choice = choices[0] if choices else None
        message = getattr(choice, "message", None)
        content = getattr(message, "content", None)
        text = clean_summary_text(content if isinstance(content, str) else "")
        if getattr(choice, "finish_reason", None) == "length":
            raise cut_off_error(self.provider, self._model, cap)
        if not text:
            raise empty_answer_error(self.provider, self._model)
        usage = getattr(response, "usage", None)
        answered_by = getattr(response, "model", None)
        return SummaryResult(
            text=text,
            provider=self.provider,
            model=answered_by if isinstance(answered_by, str) and answered_by else self._model,
            input_tokens=int_or_none(getattr(usage, "prompt_tokens", None)),
            output_tokens=int_or_none(getattr(usage, "completion_tokens", None)),
        )
