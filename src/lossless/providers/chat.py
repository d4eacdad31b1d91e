"""A plain chat call — any OpenAI-compatible API, or Anthropic's messages API — for the memory extractor and dedup step.

Invariants: one request per call (``temperature`` 0 where the API takes it) and a JSON answer asked
for in the prompt (not through ``response_format``, which many compatible
servers lack); SDK errors become :class:`~lossless.errors.ProviderError`
without the key; the SDK's own retries cover 408/409/429/5xx.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from lossless.errors import MissingDependencyError, ProviderAuthError, ProviderError

__all__ = ["CHAT_PROVIDERS", "anthropic_chat", "chat_for", "openai_chat"]

CHAT_PROVIDERS = ("openai", "anthropic")
#: The longest answer asked of Anthropic (its API needs a bound; five memories fit well within it).
ANTHROPIC_MAX_TOKENS = 4096


def openai_chat(
    model: str,
    *,
    api_key: str | None,
    base_url: str | None,
    timeout_s: float = 60.0,
    max_retries: int = 2,
    label: str = "openai extractor",
) -> Callable[[str, str], Awaitable[str]]:
    try:
        import openai
    except ImportError as exc:
        raise MissingDependencyError("the OpenAI memory extractor", "openai", "openai") from exc
    client = openai.AsyncOpenAI(
        api_key=api_key or "no-key", base_url=base_url, timeout=timeout_s, max_retries=max_retries
    )

    async def chat(system: str, user: str) -> str:
        try:
            response = await client.chat.completions.create(
                model=model,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                temperature=0,
            )
        except openai.AuthenticationError as exc:
            raise ProviderAuthError(label, "the API key was refused", status=exc.status_code) from exc
        except openai.APIStatusError as exc:
            retryable = exc.status_code in (408, 409, 429) or exc.status_code >= 500
            raise ProviderError(label, f"HTTP {exc.status_code}", retryable=retryable) from exc
        except openai.APIError as exc:
            raise ProviderError(label, f"request failed: {type(exc).__name__}", retryable=True) from exc
        if not response.choices:
            raise ProviderError(label, "the answer has no choices")
        return response.choices[0].message.content or ""

    return chat


def anthropic_chat(
    model: str,
    *,
    api_key: str | None,
    base_url: str | None,
    timeout_s: float = 60.0,
    max_retries: int = 2,
    label: str = "anthropic extractor",
) -> Callable[[str, str], Awaitable[str]]:
    try:
        import anthropic
    except ImportError as exc:
        raise MissingDependencyError("the Anthropic memory extractor", "anthropic", "anthropic") from exc
    client = anthropic.AsyncAnthropic(
        api_key=api_key or "no-key", base_url=base_url, timeout=timeout_s, max_retries=max_retries
    )

    async def chat(system: str, user: str) -> str:
        try:
            response = await client.messages.create(
                model=model,
                system=system,
                messages=[{"role": "user", "content": user}],
                max_tokens=ANTHROPIC_MAX_TOKENS,
            )
        except anthropic.AuthenticationError as exc:
            raise ProviderAuthError(label, "the API key was refused", status=exc.status_code) from exc
        except anthropic.APIStatusError as exc:
            retryable = exc.status_code in (408, 409, 429) or exc.status_code >= 500
            raise ProviderError(label, f"HTTP {exc.status_code}", retryable=retryable) from exc
        except anthropic.APIError as exc:
            raise ProviderError(label, f"request failed: {type(exc).__name__}", retryable=True) from exc
        return "".join(getattr(block, "text", "") for block in response.content)

    return chat


def chat_for(
    provider: str,
    model: str,
    *,
    api_key: str | None,
    base_url: str | None,
    timeout_s: float,
    max_retries: int,
    label: str,
) -> Callable[[str, str], Awaitable[str]]:
    """The chat call of ``provider`` (``openai`` or ``anthropic``)."""
    make = anthropic_chat if provider == "anthropic" else openai_chat
    return make(model, api_key=api_key, base_url=base_url, timeout_s=timeout_s, max_retries=max_retries, label=label)
