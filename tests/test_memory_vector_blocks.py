"""The in-process matrix of stored search vectors: exact best-chunk search, reloaded only where stale."""

from __future__ import annotations

import math
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from lossless.memory.vector_blocks import VectorBlocks


def _blob(vector: list[float]) -> bytes:
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return struct.pack(f"<{len(vector)}f", *(v / norm for v in vector))


def _unpack(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


# conversation -> items -> chunks -> a 4-dimensional vector
_vector = st.lists(st.integers(-4, 4).map(float), min_size=4, max_size=4).filter(lambda v: any(v))
_items = st.lists(st.lists(_vector, min_size=1, max_size=3), min_size=0, max_size=6)
_stores = st.dictionaries(st.integers(1, 6), _items, min_size=1, max_size=4)


def _rows(conversation: int, items: list[list[list[float]]]) -> list[tuple[int | str, bytes]]:
    return [(f"{conversation}-{n:02d}", _blob(chunk)) for n, chunks in enumerate(items) for chunk in chunks]


def _brute(
    data: dict[int, list[list[list[float]]]], query: list[float], searched: list[int], limit: int
) -> list[tuple[str, int, float]]:
    q = _unpack(_blob(query))
    scored = []
    for conversation in dict.fromkeys(searched):
        for n, chunks in enumerate(data.get(conversation, [])):
            best = max(sum(a * b for a, b in zip(_unpack(_blob(c)), q, strict=True)) for c in chunks)
            scored.append((f"{conversation}-{n:02d}", conversation, best))
    scored.sort(key=lambda h: (-h[2], h[0]))
    return scored[:limit]


@settings(max_examples=60, deadline=None)
@given(
    data=_stores,
    query=_vector,
    searched=st.lists(st.integers(1, 7), min_size=1, max_size=5),
    limit=st.integers(1, 8),
    reloaded=st.sets(st.integers(1, 6)),
)
def test_search_equals_brute_force_after_any_reload(
    data: dict[int, list[list[list[float]]]],
    query: list[float],
    searched: list[int],
    limit: int,
    reloaded: set[int],
) -> None:
    blocks = VectorBlocks()
    blocks.update({c: ((len(items), 1), _rows(c, items)) for c, items in data.items()})
    # Reload some conversations with new content (or as new ones): only they change.
    changed = dict(data)
    for conversation in reloaded:
        changed[conversation] = [[[1.0, 0.0, 0.0, float(conversation)]]]
    blocks.update({c: ((1, 2), _rows(c, changed[c])) for c in reloaded})
    got = blocks.search(_unpack(_blob(query)), searched, limit)
    want = _brute(changed, query, searched, limit)
    assert [(k, c) for k, c, _ in got] == [(k, c) for k, c, _ in want] or [round(s, 4) for *_, s in got] == [
        round(s, 4) for *_, s in want
    ]
    assert all(math.isclose(a[2], b[2], abs_tol=1e-4) for a, b in zip(got, want, strict=True))


def test_stale_names_changed_and_missing_conversations_and_drops_gone_ones() -> None:
    blocks = VectorBlocks()
    blocks.update({1: ((1, 1), [("a", _blob([1, 0]))]), 2: ((1, 1), [("b", _blob([0, 1]))])})
    assert blocks.stale({1: (1, 1), 2: (1, 1)}) == []
    assert blocks.stale({1: (1, 2), 2: (1, 1), 3: (0, 0)}) == [1, 3]  # a revision bump, and one never loaded
    blocks.update({}, gone=[1])
    assert blocks.search([1.0, 0.0], [1, 2], 5) == [("b", 2, 0.0)]
    assert blocks.search([1.0, 0.0, 0.0], [2], 5) == []  # another dimension compares with nothing
    blocks.update({2: ((0, 2), [])})
    assert len(blocks) == 0 and blocks.search([1.0, 0.0], [2], 5) == []
