"""Fixtures for the provider tests: a running stub provider server and a typical request."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lossless.ports import SummaryRequest
from lossless.testing import StubProviderServer

KEY = "sk-test-SECRET-0123456789abcdef"


@pytest.fixture
def stub() -> Iterator[StubProviderServer]:
    with StubProviderServer() as server:
        yield server


def leaf_request(**changes: object) -> SummaryRequest:
    values: dict[str, object] = {
        "kind": "leaf",
        "depth": 0,
        "policy": "normal",
        "target_tokens": 400,
        "text": "[09:00] user: please fix the flaky test in tests/test_io.py",
        "conversation_id": 7,
    }
    values.update(changes)
    return SummaryRequest(**values)  # type: ignore[arg-type]
