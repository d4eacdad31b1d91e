"""Cross-encoder rerankers over HTTP: jina, siliconflow, voyage, pinecone, dashscope and tei.

Each provider's request and response shape (spec/001):

========== ============================================== =======================================
provider   request                                        response
========== ============================================== =======================================
jina       ``{model, query, documents, top_n}``            ``results[].{index, relevance_score}``
siliconflow same as jina                                   same as jina
voyage     ``{model, query, documents, top_k}``            ``data[].{index, relevance_score}``
pinecone   ``{model, query, documents: [{text}], top_n}``  ``data[].{index, score}``
           with an ``Api-Key`` header
dashscope  ``{model, input: {query, documents},``          ``output.results[].{index, relevance_score}``
           ``parameters: {top_n}}``
tei        ``{query, texts}``                              bare array of ``{index, score}``
========== ============================================== =======================================

Invariants: one POST per call through the standard library's HTTP client in a
worker thread, bounded by ``timeout_s``; any failure (connection, timeout,
HTTP status, a body of the wrong shape, an index out of range) raises
:class:`~lossless.errors.ProviderError` — the memory service then falls back
to cosine blending, so a reranker can slow a search down by at most its
timeout and can never break it.  Keys go in headers only and never appear in
error messages.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import anyio
import anyio.to_thread

from lossless.errors import ConfigError, ProviderAuthError, ProviderError

__all__ = ["RERANK_PROVIDERS", "HttpReranker"]

Provider = Literal["jina", "siliconflow", "voyage", "pinecone", "dashscope", "tei"]
RERANK_PROVIDERS: tuple[Provider, ...] = ("jina", "siliconflow", "voyage", "pinecone", "dashscope", "tei")
_ENDPOINTS: Mapping[str, str] = {
    "jina": "https://api.jina.ai/v1/rerank",
    "siliconflow": "https://api.siliconflow.cn/v1/rerank",
    "voyage": "https://api.voyageai.com/v1/rerank",
    "pinecone": "https://api.pinecone.io/rerank",
    "dashscope": "https://dashscope.aliyuncs.com/api/v1/services/rerank/text-rerank/text-rerank",
}
_MODELS: Mapping[str, str] = {
    "jina": "jina-reranker-v3",
    "siliconflow": "BAAI/bge-reranker-v2-m3",
    "voyage": "rerank-2",
    "pinecone": "bge-reranker-v2-m3",
    "dashscope": "gte-rerank",
    "tei": "",
}


class HttpReranker:
    """A hosted (or self-hosted TEI) cross-encoder, scoring documents against a query."""

    def __init__(
        self,
        provider: str,
        *,
        model: str = "",
        api_key: str | None = None,
        endpoint: str = "",
        timeout_s: float = 5.0,
    ) -> None:
        if provider not in RERANK_PROVIDERS:
            raise ConfigError(
                f"unknown rerank provider {provider!r}: use one of {', '.join(RERANK_PROVIDERS)}",
                setting="memory_rerank_provider",
            )
        self.provider: Provider = provider
        self.model = model or _MODELS[provider]
        self.endpoint = endpoint or _ENDPOINTS.get(provider, "")
        if not self.endpoint:
            raise ConfigError("the tei reranker needs memory_rerank_endpoint (e.g. http://localhost:8080/rerank)")
        self._api_key = api_key
        self.timeout_s = timeout_s

    @property
    def name(self) -> str:
        return f"{self.provider}:{self.model}" if self.model else self.provider

    def request(self, query: str, documents: Sequence[str]) -> tuple[dict[str, str], dict[str, Any]]:
        """The (headers, body) this provider expects."""
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self._api_key:
            if self.provider == "pinecone":
                headers["api-key"] = self._api_key
            else:
                headers["authorization"] = f"Bearer {self._api_key}"
        n = len(documents)
        docs = list(documents)
        body: dict[str, Any]
        if self.provider in ("jina", "siliconflow"):
            body = {"model": self.model, "query": query, "documents": docs, "top_n": n}
        elif self.provider == "voyage":
            body = {"model": self.model, "query": query, "documents": docs, "top_k": n}
        elif self.provider == "pinecone":
            body = {
                "model": self.model,
                "query": query,
                "documents": [{"text": d} for d in docs],
                "top_n": n,
                "return_documents": False,
            }
            headers["x-pinecone-api-version"] = "2025-04"
        elif self.provider == "dashscope":
            body = {
                "model": self.model,
                "input": {"query": query, "documents": docs},
                "parameters": {"top_n": n, "return_documents": False},
            }
        else:
            body = {"query": query, "texts": docs}
        return headers, body

    def parse(self, payload: Any, count: int) -> dict[int, float]:
        """Scores by document index from this provider's response body."""
        try:
            if self.provider in ("jina", "siliconflow"):
                items, key = payload["results"], "relevance_score"
            elif self.provider == "voyage":
                items, key = payload["data"], "relevance_score"
            elif self.provider == "pinecone":
                items, key = payload["data"], "score"
            elif self.provider == "dashscope":
                items, key = payload["output"]["results"], "relevance_score"
            else:
                items, key = payload, "score"
            scores = {int(item["index"]): float(item[key]) for item in items}
        except (KeyError, TypeError, ValueError) as exc:
            raise ProviderError(self.name, f"unexpected rerank response shape ({exc!r})") from exc
        if any(not 0 <= i < count for i in scores):
            raise ProviderError(self.name, "the reranker returned an index outside the documents sent")
        return scores

    def _post(self, headers: dict[str, str], body: dict[str, Any]) -> Any:
        data = json.dumps(body).encode()
        request = urllib.request.Request(self.endpoint, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code in (401, 403):
                raise ProviderAuthError(self.name, "the API key was refused", status=exc.code) from exc
            retryable = exc.code in (408, 409, 429) or exc.code >= 500
            raise ProviderError(self.name, f"HTTP {exc.code}", retryable=retryable, status=exc.code) from exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise ProviderError(self.name, f"request failed: {type(exc).__name__}", retryable=True) from exc
        except ValueError as exc:
            raise ProviderError(self.name, "the response is not JSON") from exc

    async def rerank(self, query: str, documents: Sequence[str]) -> dict[int, float]:
        if not documents:
            return {}
        headers, body = self.request(query, documents)
        with anyio.fail_after(self.timeout_s + 1.0):
            payload = await anyio.to_thread.run_sync(self._post, headers, body, abandon_on_cancel=True)
        return self.parse(payload, len(documents))
