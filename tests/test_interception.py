"""Interception at ingest: planning writes nothing, summaries never fail, blobs are shared, replays reuse."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from lossless.errors import ProviderError
from lossless.interception import EXPLORATION_PROMPT, Interceptor
from lossless.large_files import file_scope
from lossless.ports import Store, SummaryRequest, SummaryResult
from lossless.records import Message
from lossless.stores.blobs import FileBlobStore
from lossless.tokens import EstimatingCounter

from .conftest import FIXTURES

pytestmark = pytest.mark.anyio

SCOPE = file_scope("main", "s1")
PROSE = "".join(f"Paragraph {i}. The committee met and discussed the budget at length.\n\n" for i in range(400))
CODE = (FIXTURES / "files" / "ratelimit.py").read_text() * 40


def block(body: str, name: str = "doc.txt") -> str:
    return f'<file name="{name}">\n{body}\n</file>'


class Summarizer:
    provider = "fake"
    model: str | None = "m"

    def __init__(self, answer: str | Exception = "A summary of the meeting notes.", delay: float = 0.0) -> None:
        self.answer = answer
        self.delay = delay
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.requests.append(request)
        if self.delay:
            await anyio.sleep(self.delay)
        if isinstance(self.answer, Exception):
            raise self.answer
        return SummaryResult(self.answer, "fake")


def interceptor(store: Store, tmp_path: Path, summarizer: Summarizer | None = None, **kwargs: float) -> Interceptor:
    return Interceptor(
        store,
        FileBlobStore(tmp_path / "files"),
        counter=EstimatingCounter(),
        threshold=1000,
        summarizer=summarizer,
        **kwargs,  # type: ignore[arg-type]
    )


async def test_planning_rewrites_but_writes_nothing(store: Store, tmp_path: Path) -> None:
    planned = await interceptor(store, tmp_path).plan(
        [Message.user(block(CODE, "app.py")), "not a message"], scope=SCOPE
    )
    message, passthrough = planned.messages
    assert passthrough == "not a message"
    assert isinstance(message, Message) and message.content.startswith("[LCM File: file_")
    assert "Python module" in message.content and len(message.content) < 3000
    [pending] = planned.files
    assert (pending.kind, pending.mime, pending.suffix) == ("python", "text/x-python", "txt")
    assert planned.referenced == (pending.id,)
    assert not (tmp_path / "files").exists() and (await store.stats()).large_files == 0


async def test_store_files_writes_each_content_once(store: Store, tmp_path: Path) -> None:
    conversation = await store.get_or_create_conversation(agent_id="main", session_id="s1")
    intercepting = interceptor(store, tmp_path)
    planned = await intercepting.plan(
        [Message.user(block(CODE, "a.py") + block(CODE, "copy-of-a.py")), Message.user(block(CODE, "a.py"))],
        scope=SCOPE,
    )
    assert len(planned.files) == 2  # two names, two ids …
    rows = await intercepting.store_files(planned.files, conversation.id)
    assert len({row.storage_uri for row in rows}) == 1  # … one blob
    assert [p.name for p in (tmp_path / "files" / str(conversation.id)).iterdir()] == [rows[0].content_hash + ".txt"]
    assert {row.name for row in rows} == {"a.py", "copy-of-a.py"}
    assert all(row.origin == "file_block" and row.byte_size == len(CODE.encode()) for row in rows)


async def test_a_known_file_keeps_its_summary_and_is_not_explored_again(store: Store, tmp_path: Path) -> None:
    conversation = await store.get_or_create_conversation(agent_id="main", session_id="s1")
    summarizer = Summarizer()
    intercepting = interceptor(store, tmp_path, summarizer)
    first = await intercepting.plan([Message.user(block(PROSE))], scope=SCOPE)
    await store.insert_large_files(await intercepting.store_files(first.files, conversation.id))
    again = await intercepting.plan([Message.user(block(PROSE))], scope=SCOPE)
    assert again.files == () and again.messages == first.messages
    assert len(summarizer.requests) == 1


async def test_prose_is_summarised_by_the_configured_summarizer(store: Store, tmp_path: Path) -> None:
    summarizer = Summarizer()
    planned = await interceptor(store, tmp_path, summarizer).plan([Message.user(block(PROSE))], scope=SCOPE)
    [pending] = planned.files
    assert pending.summary.startswith("Text document, ")
    assert pending.summary.endswith("A summary of the meeting notes.")
    [request] = summarizer.requests
    assert request.custom_instructions == EXPLORATION_PROMPT and request.text.startswith("Paragraph 0.")
    code = await interceptor(store, tmp_path, summarizer).plan([Message.user(block(CODE, "a.py"))], scope=SCOPE)
    assert len(summarizer.requests) == 1 and "Python module" in code.files[0].summary


@pytest.mark.parametrize(
    "summarizer",
    [
        Summarizer(ProviderError("fake", "rate limited", retryable=True)),
        Summarizer(RuntimeError("a bug in the provider")),
        Summarizer("   "),
        Summarizer("far too long " * 400),
        Summarizer(None),  # type: ignore[arg-type]
        Summarizer(delay=5.0),
    ],
)
async def test_a_failing_summarizer_falls_back_to_the_deterministic_summary(
    store: Store, tmp_path: Path, summarizer: Summarizer
) -> None:
    plain = await interceptor(store, tmp_path).plan([Message.user(block(PROSE))], scope=SCOPE)
    planned = await interceptor(store, tmp_path, summarizer, summary_timeout_s=0.05).plan(
        [Message.user(block(PROSE))], scope=SCOPE
    )
    assert planned.files[0].summary == plain.files[0].summary
    assert "Begins: Paragraph 0." in planned.files[0].summary
