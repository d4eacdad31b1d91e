"""The memory_* agent tools, called the way an adapter calls them."""

from __future__ import annotations

import pytest

from lossless.errors import AccessDeniedError, InputError
from lossless.memory.hashing import HashEmbedder
from lossless.memory.scopes import MemoryCaller
from lossless.memory.service import MemoryService
from lossless.memory.toolcalls import MEMORY_TOOLS, call_memory_tool, check_arguments
from lossless.ports import Store
from lossless.stores import memory_store_for
from lossless.tools import TOOLS

pytestmark = pytest.mark.anyio


@pytest.fixture
def service(store: Store) -> MemoryService:
    return MemoryService(memory_store_for(store), HashEmbedder(), MemoryCaller.agent("main"))


def test_every_memory_tool_has_a_spec() -> None:
    assert set(MEMORY_TOOLS) <= set(TOOLS)


@pytest.mark.parametrize(
    ("name", "arguments", "problem"),
    [
        ("memory_recall", {}, "missing required"),
        ("memory_recall", {"query": "x", "top": 3}, "unknown argument"),
        ("memory_recall", {"query": 7}, "must be a string"),
        ("memory_recall", {"query": "x", "limit": 99}, "between"),
        ("memory_recall", {"query": "x", "limit": True}, "must be a integer"),
        ("memory_store", {"text": "x", "category": "facts"}, "one of"),
        ("memory_store", {"text": "x", "scope": "root"}, "not valid"),
        ("memory_forget", {"memory_id": "short"}, "length"),
        ("lcm_grep", {}, "unknown memory tool"),
    ],
)
def test_bad_arguments_are_refused_with_the_argument_named(
    name: str, arguments: dict[str, object], problem: str
) -> None:
    with pytest.raises(InputError, match=problem):
        check_arguments(name, arguments)


async def test_store_recall_update_forget_list_stats(service: MemoryService) -> None:
    stored = await call_memory_tool(
        service,
        "memory_store",
        {"text": "I prefer dark roast coffee.", "category": "preferences", "fact_key": "preferences:drink"},
    )
    assert stored["scope"] == "agent:main"
    recalled = await call_memory_tool(service, "memory_recall", {"query": "dark roast coffee"})
    card = recalled["memories"][0]
    assert card["id"] == stored["stored"] and card["source"] == {"conversation_id": None, "message_ids": []}
    newer = await call_memory_tool(
        service,
        "memory_store",
        {"text": "I prefer green tea now.", "category": "preferences", "fact_key": "preferences:drink"},
    )
    assert newer["superseded"] == stored["stored"]
    history = await call_memory_tool(service, "memory_list", {"include_superseded": True})
    assert [m["current"] for m in history["memories"]] == [False, True]
    updated = await call_memory_tool(service, "memory_update", {"memory_id": newer["stored"], "importance": 0.95})
    assert updated == {"updated": newer["stored"]}
    with pytest.raises(InputError, match="supersede needs text"):
        await call_memory_tool(service, "memory_update", {"memory_id": newer["stored"], "supersede": True})
    stats = await call_memory_tool(service, "memory_stats", {})
    assert stats["current"] == 1 and stats["superseded"] == 1
    assert await call_memory_tool(service, "memory_forget", {"memory_id": newer["stored"]}) == {
        "forgotten": newer["stored"]
    }
    with pytest.raises(AccessDeniedError):
        await call_memory_tool(service, "memory_store", {"text": "x y", "scope": "agent:other"})
