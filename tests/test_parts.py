"""Message parts: validation, rendering and round trips."""

from __future__ import annotations

import pytest

from lossless.errors import InputError
from lossless.parts import (
    PART_TYPES,
    AgentPart,
    CompactionPart,
    FilePart,
    PatchPart,
    ReasoningPart,
    RetryPart,
    SnapshotPart,
    StepFinishPart,
    StepStartPart,
    SubtaskPart,
    TextPart,
    ToolPart,
    is_part,
    part_from_dict,
    render_parts,
)

ALL_PARTS = [
    TextPart("hello", synthetic=True),
    ReasoningPart("because", signature="s"),
    ToolPart(call_id="1", name="bash", input={"cmd": "ls"}, output="a\nb", status="completed", title="t"),
    PatchPart(hash="abc", files=("a.py", "b.py")),
    FilePart(mime="text/plain", name="x.txt", url="file:///x.txt"),
    SubtaskPart(prompt="do it", description="sub", agent="explore"),
    CompactionPart(summary="sum", auto=False, tokens_before=10),
    StepStartPart(snapshot="s1"),
    StepFinishPart(reason="stop", cost=0.5, tokens_in=1, tokens_out=2, snapshot="s2"),
    SnapshotPart(hash="h"),
    AgentPart(name="build"),
    RetryPart(attempt=2, error="rate limited"),
]


def test_every_part_type_has_a_class() -> None:
    assert sorted(p.type for p in ALL_PARTS) == sorted(PART_TYPES)


@pytest.mark.parametrize("part", ALL_PARTS, ids=lambda p: p.type)
def test_part_dict_round_trip(part: object) -> None:
    data = part.to_dict()  # type: ignore[attr-defined]
    assert part_from_dict(data) == part


def test_part_from_dict_rejects_unknown_type_and_fields() -> None:
    with pytest.raises(InputError, match="unknown part type 'video'"):
        part_from_dict({"type": "video"})
    with pytest.raises(InputError, match="unknown field"):
        part_from_dict({"type": "text", "text": "x", "colour": "red"})


def test_part_validation() -> None:
    with pytest.raises(InputError, match="text must be a string"):
        TextPart(3)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="tool status 'done'"):
        ToolPart(status="done")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="JSON-serialisable"):
        ToolPart(input={"x": object()})  # type: ignore[dict-item]
    with pytest.raises(InputError, match="metadata must be a mapping"):
        TextPart("x", metadata=[1])  # type: ignore[arg-type]


def test_render_parts_flattens_in_order() -> None:
    text = render_parts(
        [
            TextPart("Let me look."),
            ToolPart(call_id="c", name="read", input={"path": "a.py"}),
            ReasoningPart(""),
            StepStartPart(),
        ]
    )
    assert text == 'Let me look.\n\n[tool call: read] {"path": "a.py"}'
    assert render_parts([TextPart("only")]) == "only"
    assert render_parts([ToolPart(call_id="c", output="out")]) == "out"
    assert "[tool error] boom" in render_parts([ToolPart(call_id="c", error="boom")])


def test_is_part_accepts_only_part_values() -> None:
    assert all(is_part(p) for p in ALL_PARTS)
    assert not is_part({"type": "text", "text": "x"})
    assert not is_part("x")
