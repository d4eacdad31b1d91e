"""Replay: play a recorded agent session through the engine turn by turn, as a live agent would.

The main job of the project in one call: each turn's messages go through
``after_turn`` (store, then compact when a trigger fires) and the next model
call's context comes from ``assemble`` — and the replay records what that cost
and whether every promise held.

Invariants:

* Turns are split where the user speaks: a user message that is not only tool
  results starts a new turn; everything up to the next one (assistant replies,
  tool calls, tool results) belongs to it.
* Every assembled context is checked: ``violations`` (and
  ``over_budget_turns``, the same count) are the turns whose context exceeded
  the budget — an engine fault, zero in a correct engine, whatever the
  settings.  ``left_out_turns`` counts the turns that had to leave items out
  (or send them as excerpts) to fit, and each checkpoint says how many.
* Checkpoints are spread evenly over the turns (the last turn is always one),
  so a long session costs a bounded number of summary listings.
* Messages keep their transcript keys as ``event_key``: replaying the same
  session twice into one database stores nothing twice.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from lossless.engine import ContextEngine
from lossless.errors import InputError
from lossless.records import JSONValue, Message, ToolPart
from lossless.transcripts import Entry, ReadContext, detect_format, reader_for, why_unrecognised

__all__ = ["Checkpoint", "ReplayResult", "read_entries", "replay", "split_turns"]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The state after one turn: what is stored, what the context holds, what the model was sent."""

    turn: int
    messages: int
    raw_tokens: int
    context_tokens: int
    assembled_tokens: int
    assembled_messages: int
    compactions: int
    summaries_by_depth: dict[int, int]
    over_budget: bool
    left_out: int = 0
    excerpted: int = 0

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "turn": self.turn,
            "messages": self.messages,
            "raw_tokens": self.raw_tokens,
            "context_tokens": self.context_tokens,
            "assembled_tokens": self.assembled_tokens,
            "assembled_messages": self.assembled_messages,
            "compactions": self.compactions,
            "summaries_by_depth": {str(k): v for k, v in sorted(self.summaries_by_depth.items())},
            "over_budget": self.over_budget,
            "left_out": self.left_out,
            "excerpted": self.excerpted,
        }


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """What a replay did and measured (see the module invariants for the checks)."""

    transcript: str
    format: str
    session_id: str
    conversation_id: int
    budget: int
    turns: int
    messages: int
    duplicates: int
    raw_tokens: int
    assembled_tokens: int
    max_assembled_tokens: int
    violations: int
    over_budget_turns: int
    compactions: int
    stop_reasons: dict[str, int]
    summaries_by_depth: dict[int, int]
    errors: tuple[str, ...]
    seconds: float
    checkpoints: tuple[Checkpoint, ...] = field(default=())
    left_out_turns: int = 0
    max_left_out: int = 0

    @property
    def reduction(self) -> float:
        """How much smaller the final context is than the raw history (0.0 when nothing was stored)."""
        return 1 - self.assembled_tokens / self.raw_tokens if self.raw_tokens else 0.0

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "transcript": self.transcript,
            "format": self.format,
            "session_id": self.session_id,
            "conversation_id": self.conversation_id,
            "budget": self.budget,
            "turns": self.turns,
            "messages": self.messages,
            "duplicates": self.duplicates,
            "raw_tokens": self.raw_tokens,
            "assembled_tokens": self.assembled_tokens,
            "max_assembled_tokens": self.max_assembled_tokens,
            "reduction": round(self.reduction, 4),
            "violations": self.violations,
            "over_budget_turns": self.over_budget_turns,
            "left_out_turns": self.left_out_turns,
            "max_left_out": self.max_left_out,
            "compactions": self.compactions,
            "stop_reasons": dict(self.stop_reasons),
            "summaries_by_depth": {str(k): v for k, v in sorted(self.summaries_by_depth.items())},
            "errors": list(self.errors),
            "seconds": round(self.seconds, 3),
            "checkpoints": [c.to_dict() for c in self.checkpoints],
        }


#: Called after each turn with (turns done, turns in all, the checkpoint when that turn is one).
ReplayProgress = Callable[[int, int, Checkpoint | None], Awaitable[None] | None]


def read_entries(path: str | Path) -> tuple[str, list[Entry]]:
    """The transcript's format and its session's messages in order (blocking: run it in a worker thread).

    Messages of sub-agents recorded inline (an entry's ``thread``) belong to other conversations: a
    replay plays the session itself, as its own model saw it."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise InputError(f"no transcript at {str(file)!r}: give the path of a transcript file")
    format_name = detect_format(file)
    if format_name is None:
        raise InputError(why_unrecognised(file))
    reader = reader_for(format_name)
    with file.open("rb") as stream:
        events = reader.read(stream, ReadContext(str(file)))
        entries = [e for e in events if isinstance(e, Entry) and e.thread is None]
    return format_name, entries


def _starts_turn(message: Message) -> bool:
    if message.role != "user":
        return False
    return not message.parts or not all(isinstance(p, ToolPart) and p.is_result for p in message.parts)


def split_turns(messages: list[Message]) -> Iterator[list[Message]]:
    """Group messages into turns (see the module invariants)."""
    turn: list[Message] = []
    for message in messages:
        if turn and _starts_turn(message):
            yield turn
            turn = []
        turn.append(message)
    if turn:
        yield turn


async def replay(
    engine: ContextEngine,
    path: str | Path,
    *,
    budget: int = 32_000,
    checkpoints: int = 10,
    session_id: str | None = None,
    progress: ReplayProgress | None = None,
) -> ReplayResult:
    """Replay the transcript at ``path`` into ``engine`` under ``budget`` tokens (see the module doc)."""
    if type(budget) is not int or budget < 1:
        raise InputError(f"budget must be a positive number of tokens, got {budget!r}")
    if type(checkpoints) is not int or checkpoints < 1:
        raise InputError(f"checkpoints must be a positive integer, got {checkpoints!r}")
    format_name, entries = await anyio.to_thread.run_sync(read_entries, path)
    if not entries:
        raise InputError(f"{str(path)!r} holds no conversation messages to replay")
    session = session_id or f"replay/{Path(path).name}"
    if await engine.store.find_conversation(agent_id=engine.config.agent_id, session_id=session):
        raise InputError(
            f"session {session!r} already exists in this database: replay into a fresh database, "
            "or give another session id"
        )
    turns = list(split_turns([e.message for e in entries]))
    marks = {max(1, round(len(turns) * k / checkpoints)) for k in range(1, checkpoints + 1)}
    started = time.perf_counter()
    stored = duplicates = raw_tokens = violations = compactions = largest = left_out_turns = max_left_out = 0
    stops: Counter[str] = Counter()
    errors: list[str] = []
    taken: list[Checkpoint] = []
    conversation_id = 0
    assembled_tokens = 0
    for number, turn in enumerate(turns, 1):
        result = await engine.after_turn(session, turn, token_budget=budget)
        if result.error:
            errors.append(f"turn {number}: {result.error}")
        conversation_id = result.ingest.conversation_id or conversation_id
        stored += len(result.ingest.stored)
        duplicates += result.ingest.duplicates
        raw_tokens += sum(m.token_count for m in result.ingest.stored)
        if result.compaction is not None and result.compaction.compacted:
            compactions += 1
            stops[result.compaction.stop_reason] += 1
        context = await engine.assemble(session, token_budget=budget)
        assembled_tokens = context.estimated_tokens
        largest = max(largest, assembled_tokens)
        violations += assembled_tokens > budget
        left_out = len(context.left_out)
        left_out_turns += left_out > 0
        max_left_out = max(max_left_out, left_out)
        checkpoint = None
        if number in marks and conversation_id:
            entries_now = await engine.store.get_context(conversation_id)
            depths = Counter(s.depth for s in await engine.store.list_summaries(conversation_id))
            checkpoint = Checkpoint(
                number,
                stored,
                raw_tokens,
                sum(e.token_count for e in entries_now),
                assembled_tokens,
                len(context.messages),
                compactions,
                dict(sorted(depths.items())),
                assembled_tokens > budget,
                left_out,
                len(context.excerpted),
            )
            taken.append(checkpoint)
        if progress is not None:
            waiting = progress(number, len(turns), checkpoint)
            if waiting is not None:
                await waiting
    return ReplayResult(
        transcript=str(path),
        format=format_name,
        session_id=session,
        conversation_id=conversation_id,
        budget=budget,
        turns=len(turns),
        messages=stored,
        duplicates=duplicates,
        raw_tokens=raw_tokens,
        assembled_tokens=assembled_tokens,
        max_assembled_tokens=largest,
        violations=violations,
        over_budget_turns=violations,
        compactions=compactions,
        stop_reasons=dict(stops),
        summaries_by_depth=taken[-1].summaries_by_depth if taken else {},
        errors=tuple(errors),
        seconds=time.perf_counter() - started,
        checkpoints=tuple(taken),
        left_out_turns=left_out_turns,
        max_left_out=max_left_out,
    )
