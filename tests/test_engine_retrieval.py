"""The engine's retrieval facade: grep, describe (summaries and files), expand, expand_query."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lossless import ContextEngine, Message
from lossless.errors import InputError, NotFoundError
from lossless.retrieval import AccessDenied, Caller, FileView, SummaryDescription

from .conftest import BACKENDS, backend_url

pytestmark = pytest.mark.anyio


@pytest.fixture(params=BACKENDS)
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ContextEngine]:
    opened = await ContextEngine.open(
        backend_url(request, request.param, tmp_path, "e"),
        fresh_tail_count=2,
        leaf_chunk_tokens=600,
        leaf_target_tokens=150,
        condensed_target_tokens=150,
        leaf_min_fanout=3,
        summary_max_attempts=1,
        large_file_token_threshold=1000,
    )
    try:
        yield opened
    finally:
        await opened.dispose()


async def seeded(engine: ContextEngine) -> int:
    history = [Message("user" if i % 2 == 0 else "assistant", f"turn {i} " + "chatter " * 60) for i in range(20)]
    history[3] = Message("assistant", "Decision: we ship on Friday after the canary passes.")
    log = "\n".join(f"line {n}: status ok" for n in range(2000))
    history[6] = Message.user(f'Here is the log:\n<file name="run.log">\n{log}\n</file>\n')
    result = await engine.ingest_batch("s1", history, session_key="k1")
    assert result.conversation_id is not None
    await engine.compact(result.conversation_id, force=True)
    return result.conversation_id


async def test_facade_round_trip(engine: ContextEngine) -> None:
    conv = await seeded(engine)
    found = await engine.grep("ship on Friday", mode="full_text", scope="messages")
    assert len(found.hits) == 1 and found.hits[0].conversation_id == conv
    by_session = await engine.grep("canary", conversation="s1", since="2000-01-01T00:00:00Z")
    assert by_session.hits
    summaries, _ = await engine.summaries(conv)
    top = max(summaries, key=lambda s: s.depth)
    described = await engine.describe(top.id)
    assert isinstance(described, SummaryDescription) and described.summary.id == top.id
    expanded = await engine.expand([top.id], max_depth=top.depth + 1, include_messages=True)
    assert expanded.token_cap == engine.config.max_expand_tokens and expanded.messages
    [file] = await engine.files(conv)
    view = await engine.describe(file.id, start_line=10, end_line=11)
    assert isinstance(view, FileView) and view.page.text == "line 9: status ok\nline 10: status ok\n"
    answer = await engine.expand_query("When do we ship?", query="ship Friday")
    assert "Friday" in answer.answer and answer.status == "completed" and answer.runner == "offline"


async def test_facade_applies_the_callers_reach(engine: ContextEngine) -> None:
    conv = await seeded(engine)
    other = await engine.ingest_batch("s2", [Message.user("other session ships Monday")], session_key="k2")
    assert other.conversation_id is not None
    mine = Caller(engine.config.agent_id, session_key="k1")
    found = await engine.grep("ships? on|Monday", caller=mine)
    assert {h.conversation_id for h in found.hits} == {conv}
    with pytest.raises(AccessDenied):
        await engine.grep("Monday", conversation=other.conversation_id, caller=mine)
    stranger = Caller("someone-else", session_key="k1")
    with pytest.raises(InputError):
        await engine.grep("Friday", caller=stranger)
    [file] = await engine.files(conv)
    with pytest.raises(NotFoundError):
        await engine.describe(file.id, caller=stranger, all_conversations=True)
    with pytest.raises(NotFoundError):
        await engine.grep("x", conversation="no-such-session")


async def test_a_time_bound_that_is_not_a_time_says_what_to_write(engine: ContextEngine) -> None:
    await seeded(engine)
    for bound in ("since", "before"):
        with pytest.raises(InputError, match=rf"^{bound} 'last tuesday' is not a time: write an ISO-8601"):
            await engine.grep("canary", **{bound: "last tuesday"})  # type: ignore[arg-type]
    assert (await engine.grep("canary", since="2000-01-01", before="2999-12-31T23:59Z")).hits  # a date alone is fine
