"""What the SDK-backed summarizers share: sampling choices, the output cap, and error mapping.

Invariants:

* No SDK is imported here; the provider modules translate their SDK's
  exceptions into the status/detail pairs these helpers classify.
* :func:`status_error` is the single table from HTTP status to error class:
  401/403 → :class:`~lossless.errors.ProviderAuthError`; 408, 409, 429 and
  5xx (Anthropic's 529 included) → retryable
  :class:`~lossless.errors.ProviderError`; any other status → not retryable.
* Every message built here passes through :func:`scrub`, which removes the
  API key (should a server echo it) and bounds the length; messages say what
  to do next.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable

from lossless.errors import ProviderAuthError, ProviderError, redact
from lossless.ports import SummaryPolicy, SummaryRequest

__all__ = [
    "MIN_OUTPUT_CAP",
    "NO_KEY",
    "body_detail",
    "connection_error",
    "cut_off_error",
    "empty_answer_error",
    "int_or_none",
    "output_cap",
    "scrub",
    "status_error",
    "temperature_for",
    "timeout_error",
]

#: Sent as the key to servers that need none (local OpenAI-compatible servers), so the SDK never looks for one.
NO_KEY = "no-key-needed"
#: The smallest output cap sent, so tiny targets still leave room for the Files and Expand lines.
MIN_OUTPUT_CAP = 64
_MAX_DETAIL = 300
_TEMPERATURES: dict[SummaryPolicy, float] = {"normal": 0.2, "aggressive": 0.1}


def temperature_for(policy: SummaryPolicy) -> float:
    """0.2 for the normal policy, 0.1 for the aggressive one."""
    return _TEMPERATURES[policy]


def output_cap(request: SummaryRequest, overage_factor: float) -> int:
    """Most output tokens to ask for: ``target × overage factor`` (a longer answer would be rejected anyway)."""
    return max(MIN_OUTPUT_CAP, math.ceil(max(1, request.target_tokens) * overage_factor))


def int_or_none(value: object) -> int | None:
    """``value`` when it is a real integer (token counts in usage blocks), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` on one line, at most 300 characters, with every secret replaced by its redacted form."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, redact(secret))
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) > _MAX_DETAIL:
        text = text[: _MAX_DETAIL - 1] + "…"
    return text


def body_detail(body: object, fallback: str) -> str:
    """The human-readable message in a provider's error body, else ``fallback``."""
    if isinstance(body, dict):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
        nested = body.get("error")
        if nested is not None and nested is not body:
            return body_detail(nested, fallback)
        return json.dumps(body)[:_MAX_DETAIL]
    if isinstance(body, str) and body:
        return body
    return fallback


def status_error(
    provider: str,
    status: int,
    detail: str,
    *,
    model: str,
    endpoint: str,
    key_source: str,
    secrets: Iterable[str | None] = (),
) -> ProviderError:
    """The :class:`ProviderError` for an HTTP error status (see the module invariants)."""
    said = scrub(detail, secrets)
    if status in (401, 403):
        return ProviderAuthError(
            provider,
            f"the API key was refused (HTTP {status}: {said}); the key came from {key_source}: "
            "set a valid key (see docs/summarizers.md, 'Credentials')",
            retryable=False,
            status=status,
        )
    if status == 429:
        return ProviderError(
            provider,
            f"rate limited (HTTP 429: {said}); it will be retried, but if this persists lower the call rate "
            "(summary_max_calls_per_window) or raise the account's quota",
            retryable=True,
            status=status,
        )
    if status in (408, 409) or status >= 500:
        return ProviderError(
            provider,
            f"the server failed (HTTP {status}: {said}) at {endpoint}; it will be retried",
            retryable=True,
            status=status,
        )
    if status == 404:
        return ProviderError(
            provider,
            f"not found (HTTP 404: {said}) at {endpoint}: check summary_model ({model!r}) and summary_base_url",
            retryable=False,
            status=status,
        )
    return ProviderError(
        provider,
        f"the request was refused (HTTP {status}: {said}) for model {model!r} at {endpoint}: "
        "check summary_model and summary_base_url; retrying will not help",
        retryable=False,
        status=status,
    )


def timeout_error(provider: str, endpoint: str, seconds: float | None) -> ProviderError:
    within = f" within {seconds:g} s" if seconds else ""
    return ProviderError(
        provider,
        f"no answer from {endpoint}{within}; it will be retried (raise summary_timeout_ms for slow local models)",
        retryable=True,
    )


def connection_error(provider: str, endpoint: str, detail: str) -> ProviderError:
    return ProviderError(
        provider,
        f"cannot reach {endpoint} ({scrub(detail)}): check that the server is running and summary_base_url; "
        "it will be retried",
        retryable=True,
    )


def empty_answer_error(provider: str, model: str) -> ProviderError:
    return ProviderError(
        provider,
        f"model {model!r} returned an empty summary (or only reasoning); it will be retried",
        retryable=True,
    )


def cut_off_error(provider: str, model: str, cap: int) -> ProviderError:
    return ProviderError(
        provider,
        f"model {model!r} was cut off at the {cap}-token output cap (target × summary_max_overage_factor): "
        "the answer ignored the target length and would be rejected; compaction escalates instead",
        retryable=False,
    )
