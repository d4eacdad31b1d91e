"""schemathesis against the HTTP API's own OpenAPI document: no generated request gets a 5xx."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from lossless.adapters.http import create_app
from lossless.config import load_config

from .test_http_api import ALICE, Running, make_config

# The document comes from the app itself; the requests go to a running server.
schema = schemathesis.openapi.from_dict(create_app(load_config({"api_tokens": [f"{ALICE}=alice"]}, env={})).openapi())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder: Path = tmp_path_factory.mktemp("fuzz")
    (folder / "imports").mkdir()
    with Running(make_config(folder, api_import_roots=[str(folder / "imports")], api_max_request_bytes=65536)) as url:
        yield url


@schema.parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_makes_the_server_fail(case: schemathesis.Case, server: str) -> None:
    case.call_and_validate(base_url=server, headers={"Authorization": f"Bearer {ALICE}"}, checks=[not_a_server_error])
