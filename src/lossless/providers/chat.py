"""A plain chat call over any OpenAI-compatible API, for the memory extractor and dedup step.

Invariants: one request per call with ``temperature`` 0 and a JSON answer asked
for in the prompt (not through ``response_format``, which many compatible
servers lack); SDK errors become :class:`~lossless.errors.ProviderError`
without the key; the SDK's own retries cover 408/409/429/5xx.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from lossless.errors import MissingDependencyError, ProviderAuthError, ProviderError

__all__ = ["openai_chat"]


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
