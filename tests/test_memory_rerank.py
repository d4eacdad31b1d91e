"""Rerank providers over real HTTP to a loopback stub, and the search's fallback when they fail."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from lossless.config import load_config
from lossless.errors import ConfigError, ProviderAuthError, ProviderError
from lossless.memory.hashing import HashEmbedder
from lossless.memory.records import MemoryDraft
from lossless.memory.scopes import MemoryCaller
from lossless.memory.service import MemoryService
from lossless.ports import Store
from lossless.providers import reranker_for
from lossless.providers.rerank import RERANK_PROVIDERS, HttpReranker
from lossless.stores import memory_store_for

pytestmark = pytest.mark.anyio


class RerankStub:
    """Answers every provider's shape: documents containing ``favourite`` score highest."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.status = 200
        self.delay_s = 0.0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                stub.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                time.sleep(stub.delay_s)
                provider = self.path.strip("/")
                docs = body.get("documents") or body.get("texts") or body.get("input", {}).get("documents", [])
                texts = [d["text"] if isinstance(d, dict) else d for d in docs]
                scores = [(i, 0.9 if "favourite" in t else 0.1) for i, t in enumerate(texts)]
                items = [{"index": i, "relevance_score": s, "score": s} for i, s in scores]
                payload: Any = {
                    "jina": {"results": items},
                    "siliconflow": {"results": items},
                    "voyage": {"data": items},
                    "pinecone": {"data": items},
                    "dashscope": {"output": {"results": items}},
                    "tei": items,
                }[provider]
                data = json.dumps(payload if stub.status == 200 else {"error": "no"}).encode()
                try:
                    self.send_response(stub.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub() -> Iterator[RerankStub]:
    server = RerankStub()
    yield server
    server.close()


@pytest.mark.parametrize("provider", RERANK_PROVIDERS)
async def test_each_provider_request_and_response_shape(stub: RerankStub, provider: str) -> None:
    reranker = HttpReranker(provider, api_key="rk-1", endpoint=f"{stub.url}/{provider}")
    scores = await reranker.rerank("editor", ["my favourite editor", "the weather"])
    assert scores == {0: 0.9, 1: 0.1}
    headers, body = stub.requests[0]
    if provider == "pinecone":
        assert headers["api-key"] == "rk-1" and body["documents"] == [
            {"text": "my favourite editor"},
            {"text": "the weather"},
        ]
    else:
        assert headers["authorization"] == "Bearer rk-1"
    expected_keys = {
        "jina": {"model", "query", "documents", "top_n"},
        "siliconflow": {"model", "query", "documents", "top_n"},
        "voyage": {"model", "query", "documents", "top_k"},
        "pinecone": {"model", "query", "documents", "top_n", "return_documents"},
        "dashscope": {"model", "input", "parameters"},
        "tei": {"query", "texts"},
    }[provider]
    assert set(body) == expected_keys


async def test_failures_are_provider_errors(stub: RerankStub) -> None:
    reranker = HttpReranker("jina", api_key="secret-key", endpoint=f"{stub.url}/jina", timeout_s=0.3)
    stub.status = 401
    with pytest.raises(ProviderAuthError) as refused:
        await reranker.rerank("q", ["a"])
    assert "secret-key" not in str(refused.value)
    stub.status = 503
    with pytest.raises(ProviderError) as busy:
        await reranker.rerank("q", ["a"])
    assert busy.value.retryable
    stub.status, stub.delay_s = 200, 1.0
    with pytest.raises(ProviderError):
        await reranker.rerank("q", ["a"])
    bad = HttpReranker("voyage", endpoint=f"{stub.url}/jina")  # answers in jina's shape
    stub.delay_s = 0.0
    with pytest.raises(ProviderError, match="shape"):
        await bad.rerank("q", ["a"])
    with pytest.raises(ConfigError):
        HttpReranker("tei")
    with pytest.raises(ConfigError):
        HttpReranker("cohere")


async def test_search_uses_the_reranker_and_falls_back_to_cosine(stub: RerankStub, store: Store) -> None:
    config = load_config(
        {
            "memory_rerank_provider": "jina",
            "memory_rerank_endpoint": f"{stub.url}/jina",
            "memory_rerank_timeout_ms": 300,
        }
    )
    reranker = reranker_for(config)
    assert reranker is not None
    service = MemoryService(memory_store_for(store), HashEmbedder(), MemoryCaller.agent("main"), reranker=reranker)
    await service.add(MemoryDraft("The editor on the build box is nano.", category="entities"))
    favourite = await service.add(MemoryDraft("My favourite editor is helix.", category="preferences"))
    result = await service.search("editor", explain=True, record_access=False)
    assert result.hits[0].memory.memory_id == favourite.memory_id
    assert "rerank" in dict(result.hits[0].stages) and "rerank" in result.timings_ms
    fused = dict(result.hits[0].stages)["fusion"]
    assert dict(result.hits[0].stages)["rerank"] == pytest.approx(max(0.6 * 0.9 + 0.4 * fused, 0.5 * fused))
    stub.status = 500
    fallback = await service.search("editor", record_access=False)
    assert fallback.hits  # a failing reranker never breaks search
    stages = dict(fallback.hits[0].stages)
    embedder = HashEmbedder()
    query, text = embedder.vector("editor"), embedder.vector(fallback.hits[0].memory.content)
    cosine = sum(a * b for a, b in zip(query, text, strict=True))
    assert stages["rerank"] == pytest.approx(0.7 * stages["fusion"] + 0.3 * cosine, abs=1e-5)
    assert reranker_for(load_config({})) is None
