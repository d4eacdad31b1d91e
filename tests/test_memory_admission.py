"""Admission control (AMAC-v1): features, presets, and the opt-in gate in extraction."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless.memory.admission import PRESETS, admit, confidence
from lossless.memory.hashing import HashEmbedder
from lossless.memory.records import CATEGORIES, MemoryDraft
from lossless.memory.scopes import MemoryCaller
from lossless.memory.service import MemoryService
from lossless.ports import PreparedMessage, Store
from lossless.records import Message, utcnow
from lossless.stores import memory_store_for

from .test_memory import _memory

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def test_confidence_rewards_grounded_text() -> None:
    source = ["We decided to ship the parser on Friday. Then we had lunch."]
    assert confidence("We decided to ship the parser on Friday.", source) == pytest.approx(1.0)
    assert confidence("The user owns three cats in Lisbon.", source) == 0.0
    assert 0.2 < confidence("We decided to ship on Monday.", source) < 0.9
    assert confidence("我喜欢咖啡", ["我喜欢咖啡和茶"]) > 0.7


def test_presets_follow_the_spec() -> None:
    assert (PRESETS["balanced"].reject, PRESETS["balanced"].admit) == (0.45, 0.60)
    assert (PRESETS["conservative"].reject, PRESETS["conservative"].admit) == (0.52, 0.68)
    assert (PRESETS["high-recall"].reject, PRESETS["high-recall"].admit) == (0.34, 0.52)
    for preset in PRESETS.values():
        total = (
            preset.utility_weight
            + preset.confidence_weight
            + preset.novelty_weight
            + preset.recency_weight
            + preset.type_prior_weight
        )
        assert total == pytest.approx(1.0)


def test_decisions_and_hints() -> None:
    text = "We shipped release 4.2 today."
    event = MemoryDraft(text, category="events")
    fresh = admit(event, [text], [], NOW)
    assert fresh.admitted and fresh.hint == "add"  # grounded, novel: admitted despite the low events prior
    twin = _memory(memory_id="mem_t", category="events", content=text, updated_at=NOW - timedelta(minutes=5))
    repeat = admit(event, [text], [(twin, 1.0)], NOW)
    assert not repeat.admitted and repeat.hint == "reject"
    assert repeat.features["novelty"] == 0.0 and repeat.features["recency"] < 0.01
    profile = MemoryDraft("My name is Ada.", category="profile")
    near = _memory(
        memory_id="mem_p", category="profile", content="My name is Ada L.", updated_at=NOW - timedelta(days=60)
    )
    merged = admit(profile, ["My name is Ada."], [(near, 0.8)], NOW)
    assert merged.admitted and merged.hint == "update_or_merge"


@given(
    category=st.sampled_from(CATEGORIES),
    similarity=st.floats(0, 1),
    age=st.floats(0, 400),
    preset=st.sampled_from(sorted(PRESETS)),
    text=st.text(min_size=1, max_size=200).filter(lambda t: t.strip() and "\x00" not in t),
)
@settings(max_examples=60, deadline=None)
def test_score_is_bounded_and_reject_means_below_threshold(
    category: str, similarity: float, age: float, preset: str, text: str
) -> None:
    draft = MemoryDraft(text, category=category)  # type: ignore[arg-type]
    neighbour = _memory(category=category, updated_at=NOW - timedelta(days=age))
    result = admit(draft, [text], [(neighbour, similarity)], NOW, PRESETS[preset])
    assert 0.0 <= result.score <= 1.0
    assert all(0.0 <= v <= 1.0 for v in result.features.values())
    assert result.admitted == (result.score >= PRESETS[preset].reject)


@pytest.mark.anyio
async def test_extraction_rejects_through_admission(store: Store) -> None:
    conversation = await store.get_or_create_conversation(agent_id="main", session_id="s")
    await store.append_messages(
        conversation.id,
        [PreparedMessage(Message(role="user", content="We decided to move standup to 10:00."), 9, utcnow())],
    )
    messages = await store.get_messages(conversation.id)
    service = MemoryService(
        memory_store_for(store), HashEmbedder(), MemoryCaller.agent("main"), admission=PRESETS["conservative"]
    )
    first = await service.remember(conversation.id, messages)
    assert [d.kind for _, d, _ in first.decisions] == ["create"]
    again = await service.remember(conversation.id, messages)
    ((_, decision, touched),) = again.decisions
    assert decision.kind == "reject" and touched is None and "admission score" in decision.reason
    assert (await service.stats()).current == 1
