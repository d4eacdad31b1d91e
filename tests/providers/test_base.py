"""The shared provider helpers: the status table, the output cap, and scrubbing secrets from messages."""

from __future__ import annotations

import pytest

from lossless.errors import ProviderAuthError, ProviderError
from lossless.providers.base import MIN_OUTPUT_CAP, body_detail, output_cap, scrub, status_error, temperature_for

from .conftest import leaf_request


@pytest.mark.parametrize(
    ("status", "cls", "retryable"),
    [
        (401, ProviderAuthError, False),
        (403, ProviderAuthError, False),
        (408, ProviderError, True),
        (409, ProviderError, True),
        (429, ProviderError, True),
        (500, ProviderError, True),
        (529, ProviderError, True),
        (400, ProviderError, False),
        (404, ProviderError, False),
        (422, ProviderError, False),
    ],
)
def test_status_table(status: int, cls: type[ProviderError], retryable: bool) -> None:
    error = status_error("p", status, "detail", model="m", endpoint="http://x", key_source="argument")
    assert type(error) is cls and error.retryable is retryable and error.status == status
    assert str(error).startswith("p: ") and "detail" in str(error)


def test_scrub_redacts_secrets_flattens_and_bounds() -> None:
    secret = "sk-abcdefghijklmnop"
    text = scrub(f"bad key {secret}\n\n  again {secret}" + "x" * 1000, [secret, None, ""])
    assert secret not in text and text.count("sk-a…(redacted, 19 chars)") == 2
    assert "\n" not in text and len(text) == 300 and text.endswith("…")


def test_body_detail_finds_the_message() -> None:
    assert body_detail({"error": {"message": "nested"}}, "f") == "nested"
    assert body_detail({"message": "flat"}, "f") == "flat"
    assert body_detail({"detail": "odd"}, "f") == '{"detail": "odd"}'
    assert body_detail("text body", "f") == "text body"
    assert body_detail(None, "fallback") == "fallback"


def test_output_cap_and_temperature() -> None:
    assert output_cap(leaf_request(target_tokens=1000), 3.0) == 3000
    assert output_cap(leaf_request(target_tokens=333), 1.5) == 500
    assert output_cap(leaf_request(target_tokens=5), 3.0) == MIN_OUTPUT_CAP
    assert (temperature_for("normal"), temperature_for("aggressive")) == (0.2, 0.1)
