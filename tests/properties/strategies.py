"""Hypothesis strategies for values (valid Unicode only: lone surrogates are refused by design)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from lossless.records import (
    AgentPart,
    CompactionPart,
    FilePart,
    Message,
    Part,
    PatchPart,
    ReasoningPart,
    RetryPart,
    SnapshotPart,
    StepFinishPart,
    StepStartPart,
    SubtaskPart,
    TextPart,
    ToolPart,
)

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
maybe_text = st.none() | text
json_scalar = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | text
json_value = st.recursive(
    json_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
metadata = st.none() | st.dictionaries(text, json_value, min_size=1, max_size=3)


def _part(cls: Any, **fields: Any) -> st.SearchStrategy[Part]:
    return st.builds(cls, metadata=metadata, **fields)


parts: st.SearchStrategy[Part] = st.one_of(
    _part(TextPart, text=text, synthetic=st.booleans(), ignored=st.booleans()),
    _part(ReasoningPart, text=text, signature=maybe_text, redacted=st.booleans()),
    _part(
        ToolPart,
        call_id=maybe_text,
        name=maybe_text,
        input=st.none() | st.dictionaries(text, json_value, max_size=3),
        output=maybe_text,
        error=maybe_text,
        status=st.none() | st.sampled_from(["pending", "running", "completed", "error"]),
        title=maybe_text,
    ),
    _part(PatchPart, hash=maybe_text, files=st.lists(text, max_size=3).map(tuple)),
    _part(FilePart, mime=maybe_text, name=maybe_text, url=maybe_text),
    _part(SubtaskPart, prompt=maybe_text, description=maybe_text, agent=maybe_text),
    _part(
        CompactionPart,
        summary=maybe_text,
        auto=st.none() | st.booleans(),
        tokens_before=st.none() | st.integers(0, 10**9),
    ),
    _part(StepStartPart, snapshot=maybe_text),
    _part(
        StepFinishPart,
        reason=maybe_text,
        cost=st.none() | st.floats(0, 1e6, allow_nan=False),
        tokens_in=st.none() | st.integers(0, 10**9),
        tokens_out=st.none() | st.integers(0, 10**9),
        snapshot=maybe_text,
    ),
    _part(SnapshotPart, hash=maybe_text),
    _part(AgentPart, name=maybe_text),
    _part(RetryPart, attempt=st.none() | st.integers(0, 100), error=maybe_text),
)

roles = st.sampled_from(["system", "user", "assistant", "tool"])


NO_KEYS: st.SearchStrategy[str | None] = st.none()


@st.composite
def messages(draw: st.DrawFn, *, keys: st.SearchStrategy[str | None] = NO_KEYS) -> Message:
    role = draw(roles)
    part_list = draw(st.lists(parts, max_size=4))
    if draw(st.booleans()):
        return Message.from_parts(role, part_list, event_key=draw(keys), metadata=draw(metadata))
    return Message(role, draw(text), tuple(part_list), event_key=draw(keys), metadata=draw(metadata))
