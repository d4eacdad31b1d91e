"""Properties of bootstrap reconciliation: live ingest, crashes and repeated bootstraps never duplicate or lose.

A simulated host keeps its transcript file (the ground truth) and stores each turn live, without the
file's entry ids.  A crash falls between the file write and the store write of some message of a
turn, in either order; the host then restarts and calls ``bootstrap()``, as the README says.  It may
also call ``bootstrap()`` at any other time.  At the end the store holds every message that reached
the file or the store, each exactly once.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path
from typing import Literal

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless import Config, ContextEngine, Message

Order = Literal["file_first", "store_first"]
Turn = tuple[int, Order, int | None]  # messages in the turn, which side is written first, crash after k messages

turns: st.SearchStrategy[list[Turn | None]] = st.lists(
    st.none()  # a bootstrap in the middle of the session
    | st.tuples(
        st.integers(1, 4),
        st.sampled_from(["file_first", "store_first"]),
        st.none() | st.integers(0, 3),
    ),
    min_size=1,
    max_size=12,
)


def _line(role: str, text: str, second: int | None = None) -> str:
    stamp = (
        {}
        if second is None
        else {"timestamp": f"2026-01-01T{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z"}
    )
    return json.dumps({"type": "message", **stamp, "message": {"role": role, "content": text}})


@settings(max_examples=40, deadline=None)
@given(plan=turns, repeat=st.booleans())
def test_live_ingest_crashes_and_bootstraps_never_duplicate_or_lose(plan: list[Turn | None], repeat: bool) -> None:
    async def scenario(folder: Path) -> None:
        engine = await ContextEngine.open(config=Config(database_url=f"sqlite:///{folder / 'p.db'}", data_dir=folder))
        path = folder / "session.jsonl"
        header = json.dumps({"type": "session", "id": "host", "timestamp": "2026-01-01T00:00:00Z"})
        path.write_text(header + "\n")
        numbers = itertools.count()
        in_file: list[str] = []
        in_store: list[str] = []
        try:
            await engine.bootstrap(path)
            for step in plan:
                if step is None:
                    await engine.bootstrap(path)
                    if repeat:
                        await engine.bootstrap(path)
                    continue
                size, order, crash_after = step
                texts = [f"message {next(numbers)}" for _ in range(size)]
                messages = [Message("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)]
                second = len(texts) if crash_after is None else min(crash_after, len(texts))

                async def write_file(upto: int, texts: list[str] = texts, messages: list[Message] = messages) -> None:
                    with path.open("a") as out:
                        out.write("".join(_line(m.role, m.content) + "\n" for m in messages[:upto]))
                    in_file.extend(texts[:upto])

                async def write_store(upto: int, texts: list[str] = texts, messages: list[Message] = messages) -> None:
                    result = await engine.after_turn("host", messages[:upto], token_budget=100_000)
                    assert result.error is None
                    in_store.extend(texts[:upto])

                sides = (write_file, write_store) if order == "file_first" else (write_store, write_file)
                first_side, second_side = sides
                await first_side(len(texts))
                await second_side(second)  # a crash cuts the second write short …
                if crash_after is not None:
                    await engine.bootstrap(path)  # … and the restarted host reconciles at session start
            await engine.bootstrap(path)
            stored = [m.content for m in await engine.messages("host")]
            assert len(stored) == len(set(stored)), "a message was stored twice"
            assert set(stored) == set(in_file) | set(in_store), "a message was lost (or invented)"
        finally:
            await engine.dispose()

    with tempfile.TemporaryDirectory() as folder:
        anyio.run(scenario, Path(folder))


@settings(max_examples=40, deadline=None)
@given(
    turns=st.lists(
        st.tuples(
            st.lists(st.sampled_from(["ok", "yes", "go on", "ok"]), min_size=1, max_size=4),
            st.none() | st.integers(0, 3),
        ),
        min_size=1,
        max_size=10,
    ),
    bootstrap_every=st.integers(1, 4),
)
def test_repeated_texts_with_file_first_crashes_store_the_file_exactly(
    turns: list[tuple[list[str], int | None]], bootstrap_every: int
) -> None:
    """Texts repeat ("ok" again and again); the file is written first and a crash may cut the store write
    short.  The n-th "ok" of the file is the n-th in the store, so the store ends up as the file, in order."""

    async def scenario(folder: Path) -> None:
        engine = await ContextEngine.open(config=Config(database_url=f"sqlite:///{folder / 'p.db'}", data_dir=folder))
        path = folder / "session.jsonl"
        path.write_text(json.dumps({"type": "session", "id": "host", "timestamp": "2026-01-01T00:00:00Z"}) + "\n")
        written: list[str] = []
        try:
            for number, (texts, crash_after) in enumerate(turns):
                with path.open(
                    "a"
                ) as out:  # each line has its own time, as in a real pi file (its key hashes the line)
                    out.write("".join(_line("user", t, len(written) + i) + "\n" for i, t in enumerate(texts)))
                written += texts
                stored = texts if crash_after is None else texts[:crash_after]
                if stored:
                    await engine.ingest_batch("host", [Message.user(t) for t in stored])
                if crash_after is not None or number % bootstrap_every == 0:
                    await engine.bootstrap(path)
            await engine.bootstrap(path)
            assert [m.content for m in await engine.messages("host")] == written
        finally:
            await engine.dispose()

    with tempfile.TemporaryDirectory() as folder:
        anyio.run(scenario, Path(folder))
