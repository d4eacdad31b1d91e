"""Replay: a recorded session played through after_turn + assemble keeps every promise — on the bundled
sample and on every real transcript of the corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from lossless import ContextEngine, InputError, Message, ToolPart
from lossless.replay import replay, split_turns

from .conftest import ROOT, corpus_transcripts

pytestmark = pytest.mark.anyio

SAMPLE = ROOT / "examples" / "sample-session.jsonl"


def test_turns_start_where_the_user_speaks_and_not_at_tool_results() -> None:
    call = Message.from_parts("assistant", [ToolPart(call_id="c", name="ls", input={})])
    result_as_user = Message.from_parts("user", [ToolPart(call_id="c", name="ls", output="a.py")])
    messages = [
        Message.system("rules"),
        Message.user("first"),
        call,
        result_as_user,
        Message.tool_result("c", "again"),
        Message.assistant("done"),
        Message.user("second"),
        Message.assistant("ok"),
    ]
    turns = list(split_turns(messages))
    assert [len(t) for t in turns] == [1, 5, 2]
    assert turns[1][0].content == "first" and turns[2][0].content == "second"
    assert list(split_turns([])) == []


async def open_engine(tmp_path: Path, name: str = "replay", **settings: object) -> ContextEngine:
    return await ContextEngine.open(f"sqlite:///{tmp_path / name}.db", data_dir=tmp_path / "data", **settings)


async def test_a_small_budget_is_never_exceeded_and_what_was_left_out_is_reported(tmp_path: Path) -> None:
    # Memories mined with the hash embedder (none is read here; the next test mines with the default).
    async with await open_engine(tmp_path, memory_embedder="hash") as engine:
        result = await replay(engine, SAMPLE, budget=2_000, checkpoints=20)
    assert result.violations == 0 and result.over_budget_turns == 0 and result.errors == ()
    assert result.max_assembled_tokens <= 2_000
    assert result.left_out_turns >= 1 and result.max_left_out >= 1
    assert any(point.left_out for point in result.checkpoints)
    report = result.to_dict()
    assert report["left_out_turns"] == result.left_out_turns
    assert {"left_out", "excerpted"} <= set(report["checkpoints"][0])  # type: ignore[index]


async def test_the_sample_session_replays_within_budget(tmp_path: Path) -> None:
    seen: list[int] = []
    async with await open_engine(tmp_path) as engine:
        result = await replay(
            engine, SAMPLE, budget=32_000, checkpoints=4, progress=lambda done, total, point: seen.append(done)
        )
        stored = await engine.messages(result.session_id)
    assert result.format == "claude-code"
    assert result.messages == len(stored) == 175
    assert result.violations == 0 and result.over_budget_turns == 0 and result.errors == ()
    assert result.max_assembled_tokens <= 32_000
    assert result.compactions >= 1 and result.summaries_by_depth.get(0, 0) >= 1
    assert result.reduction > 0.3
    assert result.raw_tokens == sum(m.token_count for m in stored)
    assert seen == list(range(1, result.turns + 1))
    assert len(result.checkpoints) == 4 and result.checkpoints[-1].turn == result.turns
    assert result.checkpoints[-1].assembled_tokens == result.assembled_tokens
    assert result.to_dict()["checkpoints"][-1]["turn"] == result.turns  # type: ignore[index]


async def test_replaying_into_an_existing_session_is_refused(tmp_path: Path) -> None:
    async with await open_engine(tmp_path, memory_embedder="hash") as engine:
        await replay(engine, SAMPLE, budget=100_000, session_id="once")
        with pytest.raises(InputError, match="already exists"):
            await replay(engine, SAMPLE, budget=100_000, session_id="once")
        assert len(await engine.messages("once")) == 175


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"budget": 0}, "budget"), ({"budget": "1k"}, "budget"), ({"checkpoints": 0}, "checkpoints")],
)
async def test_bad_arguments_are_refused(tmp_path: Path, kwargs: dict[str, object], match: str) -> None:
    async with await open_engine(tmp_path) as engine:
        with pytest.raises(InputError, match=match):
            await replay(engine, SAMPLE, **kwargs)  # type: ignore[arg-type]


async def test_a_file_that_is_not_a_transcript_is_refused(tmp_path: Path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_text("just some notes\n")
    async with await open_engine(tmp_path) as engine:
        with pytest.raises(InputError):
            await replay(engine, junk)
        with pytest.raises(InputError, match="no transcript"):
            await replay(engine, tmp_path / "missing.jsonl")


@pytest.mark.parametrize("path", corpus_transcripts(), ids=lambda p: p.name)
async def test_every_corpus_session_fits_a_32k_budget(corpus: Path, tmp_path: Path, path: Path) -> None:
    """With the default settings no context of any turn is over 32k (the budget is a hard limit); with
    the tail capped at 16k, the same, and every session whose history outgrew the budget ends at least
    30% smaller than its raw history.  (The second replay embeds the memories it mines with the hash
    embedder: the first already mined the same turns with the default one, and nothing here reads them.)"""
    async with await open_engine(tmp_path, "default") as engine:
        default = await replay(engine, path, budget=32_000)
    assert default.violations == 0 and default.over_budget_turns == 0 and default.errors == ()
    assert default.max_assembled_tokens <= 32_000
    async with await open_engine(tmp_path, fresh_tail_max_tokens=16_000, memory_embedder="hash") as engine:
        result = await replay(engine, path, budget=32_000)
        stored = await engine.messages(result.session_id)
    assert result.errors == ()
    assert result.violations == 0 and result.over_budget_turns == 0
    assert result.max_assembled_tokens <= 32_000
    assert result.messages == len(stored)
    if result.raw_tokens > 32_000:
        assert result.reduction >= 0.3, f"{result.assembled_tokens} of {result.raw_tokens} raw tokens"
