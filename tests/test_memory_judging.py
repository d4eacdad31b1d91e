"""The dedup judge as a side line: its answers when it gives them, the rules' when it fails."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.memory import extraction, judging
from lossless.memory.admission import AdmissionConfig
from lossless.memory.records import Decision, Memory, MemoryDraft, MemoryPatch
from tests.memories import memory_value

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _memory(memory_id: str, content: str, *, valid_from: datetime = NOW) -> Memory:
    return memory_value(
        memory_id=memory_id,
        abstract=content,
        overview=content,
        content=content,
        importance=0.5,
        valid_from=valid_from,
        created_at=valid_from,
        updated_at=valid_from,
    )


class Judge:
    """A judge that answers as scripted, or raises when ``fails``."""

    name = "scripted"

    def __init__(self, *, fails: bool = False, decision: Decision | None = None) -> None:
        self.fails = fails
        self.decision = decision

    async def decide(self, draft: MemoryDraft, neighbours: Sequence[tuple[Memory, float]]) -> Decision | None:
        if self.fails:
            raise TimeoutError("slow model")
        return self.decision

    async def merge(self, existing: Memory, draft: MemoryDraft, *, context_label: str | None) -> tuple[str, str, str]:
        if self.fails:
            raise ValueError("garbage")
        return ("merged", "merged", f"{existing.content} / {draft.content}")

    async def rate(self, drafts: Sequence[MemoryDraft], sources: Sequence[str]) -> list[float]:
        if self.fails:
            raise RuntimeError("refused")
        return [0.9] * len(drafts)


DRAFT = MemoryDraft("Prefers tea in the evening.", category="preferences")
NEIGHBOURS = [(_memory("mem_a", "Prefers coffee in the morning."), 0.8)]


async def test_a_failing_judge_leaves_the_decision_to_the_rules() -> None:
    expected = extraction.decide(DRAFT, NEIGHBOURS)
    assert await judging.decide(Judge(fails=True), DRAFT, NEIGHBOURS) == expected
    assert await judging.decide(None, DRAFT, NEIGHBOURS) == expected
    assert await judging.decide(Judge(decision=None), DRAFT, NEIGHBOURS) == expected  # None: the rules decide


async def test_the_judges_decision_is_taken_when_it_gives_one() -> None:
    chosen = Decision("merge", "mem_a", "same preference", by="model")
    assert await judging.decide(Judge(decision=chosen), DRAFT, NEIGHBOURS) == chosen


@given(kind=st.sampled_from(["supersede", "contradict"]), days=st.integers(1, 400))
async def test_an_older_statement_never_replaces_a_newer_memory(kind: str, days: int) -> None:
    newer = _memory("mem_new", "Lives in Porto.", valid_from=NOW)
    draft = MemoryDraft("Lives in Lisbon.", category="entities", valid_from=NOW - timedelta(days=days))
    decision = Decision(kind, "mem_new", "moved", by="model")  # type: ignore[arg-type]  # a sampled kind
    got = await judging.decide(Judge(decision=decision), draft, [(newer, 0.9)])
    assert (got.kind, got.target, got.by) == ("skip", "mem_new", "model")
    later = MemoryDraft("Lives in Lisbon.", category="entities", valid_from=NOW + timedelta(days=days))
    assert await judging.decide(Judge(decision=decision), later, [(newer, 0.9)]) == decision


async def test_utilities_are_rated_only_with_a_judge_and_admission_control() -> None:
    drafts = [DRAFT, DRAFT]
    admission = AdmissionConfig()
    assert await judging.utilities(Judge(), admission, drafts, ["x"]) == [0.9, 0.9]
    assert await judging.utilities(Judge(), None, drafts, ["x"]) == [None, None]
    assert await judging.utilities(None, admission, drafts, ["x"]) == [None, None]
    assert await judging.utilities(Judge(fails=True), admission, drafts, ["x"]) == [None, None]


async def test_a_merge_is_the_judges_text_else_the_candidate_appended() -> None:
    target = _memory("mem_a", "Prefers coffee.")
    assert await judging.merged(Judge(), target, DRAFT, None) == MemoryPatch(
        content="Prefers coffee. / Prefers tea in the evening.", abstract="merged", overview="merged"
    )
    appended = await judging.merged(Judge(fails=True), target, DRAFT, "evening")
    assert appended == MemoryPatch(content="Prefers coffee.\n(evening) Prefers tea in the evening.")
    assert await judging.merged(None, target, DRAFT, None) == MemoryPatch(
        content="Prefers coffee.\nPrefers tea in the evening."
    )
    already = _memory("mem_b", "Prefers coffee. Prefers tea in the evening.")
    assert await judging.merged(None, already, DRAFT, None) is None  # nothing new
