"""Build ``benchmarks/data/recall-written-{dev,test}.json`` from the hand-written chats in ``benchmarks/data/written/``.

``python scripts/make_written_recall.py [--check]``

Each ``written/<split>/*.txt`` is one conversation between two people, written by hand, turn by turn (not
generated from templates), by authors told not to read the ranking code, with its questions at the end.
``test`` (w01–w03, then w09–w10) is report only: w01–w03 were written first and measured once, before any
rule was tuned on written chats; w09–w10 were added later, by authors who had not seen the ranking either,
and measured before anything was tuned on them.  ``dev`` (w04–w08, w11–w12) is the one to tune on.  A file's shape::

    # w01: Maya, Jonas
    ## 2023-05-07 14:02
    [1] Maya: Hey! How was the trip?
    [2] Jonas: Long story. ...
    ## 2023-05-21 19:30
    [3] Maya: ...
    ## questions
    Q single | 12 | Which city did Jonas fly to in May? | Lisbon
    Q multi | 12, 40 | ... | ...

``# id: first speaker, second speaker`` opens the file (the first speaker's turns are stored as ``user``, the
other's as ``assistant``); ``## date time`` opens a session, whose turns are two minutes apart; ``[N]`` numbers
the turns through the whole file (1, 2, 3, …); a question line gives its type, its evidence turns, the
question and a short answer, separated by ``|``.  The output has the shape ``benchmarks/recall.py`` reads
(``--dataset benchmarks/data/recall-written.json``).  ``--check`` fails when the JSON is not what the texts
make.

``written/agent/<split>/aNN.txt`` hold questions written by hand, by authors who did not read the ranking
code either, over the slices of real coding-agent sessions that the generated split of the same name ships
(``recall-<split>.json``'s ``aNN``, copied whole into the written split)::

    # a01
    Q edit | a01-m0148 | Which file got the new helper that computes the review diff? | wingman_review.go

A question's type is one of :data:`AGENT_TYPES` (stored as ``agent-<type>``) and its evidence names
messages of that slice by id.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "benchmarks" / "data" / "written"
SPLITS = ("dev", "test")


def output(split: str) -> Path:
    return ROOT / "benchmarks" / "data" / f"recall-written-{split}.json"


TYPES = {"single", "multi", "temporal", "preference", "change", "aggregate", "adversarial", "inference", "indirect"}
DESCRIPTION = (
    "Written by hand, turn by turn, by authors who did not read the ranking code: long chats between two "
    "people over months, in their own words (small talk, photos described, times said relative to the day: "
    "'last Sunday', 'yesterday'), with questions that paraphrase. Sources: benchmarks/data/written/{split}/*.txt, "
    "built by scripts/make_written_recall.py. "
)
AGENT_DESCRIPTION = (
    "Then slices of real coding-agent sessions (a*, copied from recall-{split}.json) with questions an agent or "
    "its user would ask after compaction, written by hand by authors who did not read the ranking code "
    "(benchmarks/data/written/agent/{split}/*.txt). "
)
AGENT_TYPES = {"edit", "error", "decision", "request", "command", "detail"}
USE = {"dev": "DEV split: tune on this one.", "test": "TEST split: report only, never tune on it."}

_HEAD = re.compile(r"^# (\w+):\s*([^,]+?)\s*,\s*(.+?)\s*$")
_SESSION = re.compile(r"^## (\d{4}-\d{2}-\d{2}) (\d{2}:\d{2})\s*$")
_TURN = re.compile(r"^\[(\d+)\]\s*([^:]+?):\s*(.+)$")
_AGENT_HEAD = re.compile(r"^# (a\d+)\s*$")


class SourceError(ValueError):
    """A written source that does not have the shape the module docstring gives."""


def parse(path: Path) -> tuple[dict[str, object], list[dict[str, object]]]:
    """One source file: its conversation and its questions."""
    lines = [line.rstrip() for line in path.read_text(encoding="utf-8").splitlines()]
    head = _HEAD.match(lines[0]) if lines else None
    if head is None:
        raise SourceError(f"{path.name}: the first line must be '# id: First, Second'")
    cid, first, second = head.group(1), head.group(2), head.group(3)
    roles = {first: "user", second: "assistant"}
    messages: list[dict[str, object]] = []
    questions: list[dict[str, object]] = []
    session: datetime | None = None
    offset = 0
    in_questions = False
    for number, line in enumerate(lines[1:], start=2):
        where = f"{path.name}:{number}"
        if not line.strip():
            continue
        if line.strip() == "## questions":
            in_questions = True
            continue
        if in_questions:
            if not line.startswith("Q "):
                raise SourceError(f"{where}: a question line starts with 'Q type | turns | question | answer'")
            parts = [p.strip() for p in line[2:].split("|")]
            if len(parts) != 4 or parts[0] not in TYPES:
                raise SourceError(f"{where}: want 'Q type | turns | question | answer', type one of {sorted(TYPES)}")
            try:
                turns = [int(t) for t in parts[1].split(",")]
            except ValueError:
                raise SourceError(f"{where}: evidence must be turn numbers separated by commas") from None
            if any(t < 1 or t > len(messages) for t in turns):
                raise SourceError(f"{where}: evidence {turns} names a turn that does not exist")
            questions.append(
                {
                    "id": f"{cid}-q{len(questions) + 1:03d}",
                    "conversation_id": cid,
                    "question": parts[2],
                    "answer": parts[3],
                    "evidence": [f"{cid}-m{t:04d}" for t in turns],
                    "type": parts[0],
                }
            )
            continue
        found = _SESSION.match(line)
        if found:
            session = datetime.fromisoformat(f"{found.group(1)}T{found.group(2)}:00")
            offset = 0
            continue
        turn = _TURN.match(line)
        if turn is None or session is None:
            raise SourceError(f"{where}: want '## YYYY-MM-DD HH:MM' or '[N] Speaker: text' after a session line")
        if int(turn.group(1)) != len(messages) + 1:
            raise SourceError(f"{where}: turn [{turn.group(1)}] should be [{len(messages) + 1}]")
        speaker = turn.group(2).strip()
        if speaker not in roles:
            raise SourceError(f"{where}: speaker {speaker!r} is not {first} or {second}")
        stamp = session + timedelta(minutes=2 * offset)
        offset += 1
        messages.append(
            {
                "id": f"{cid}-m{len(messages) + 1:04d}",
                "role": roles[speaker],
                "content": f"{speaker}: {turn.group(3).strip()}",
                "created_at": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        )
    return {"id": cid, "kind": "conversational", "messages": messages}, questions


def parse_agent(
    path: Path, sessions: dict[str, dict[str, object]]
) -> tuple[dict[str, object], list[dict[str, object]]]:
    """One file of questions over an agent session's slice (one of ``sessions``, by id): the slice and its questions."""
    lines = [line.rstrip() for line in path.read_text(encoding="utf-8").splitlines()]
    head = _AGENT_HEAD.match(lines[0]) if lines else None
    if head is None:
        raise SourceError(f"{path.name}: the first line must be '# aNN', the id of an agent session's slice")
    cid = head.group(1)
    if cid not in sessions:
        raise SourceError(f"{path.name}: no agent session {cid!r} in the generated split ({sorted(sessions)})")
    conversation = sessions[cid]
    messages: list[dict[str, object]] = conversation["messages"]  # type: ignore[assignment]
    known = {str(m["id"]) for m in messages}
    questions: list[dict[str, object]] = []
    for number, line in enumerate(lines[1:], start=2):
        where = f"{path.name}:{number}"
        if not line.strip():
            continue
        parts = [p.strip() for p in line[2:].split("|")] if line.startswith("Q ") else []
        if len(parts) != 4 or parts[0] not in AGENT_TYPES:
            raise SourceError(
                f"{where}: want 'Q type | message ids | question | answer', type one of {sorted(AGENT_TYPES)}"
            )
        evidence = [e.strip() for e in parts[1].split(",")]
        unknown = [e for e in evidence if e not in known]
        if unknown:
            raise SourceError(f"{where}: evidence {unknown} names no message of {cid}")
        questions.append(
            {
                "id": f"{cid}-q{len(questions) + 1:03d}",
                "conversation_id": cid,
                "question": parts[2],
                "answer": parts[3],
                "evidence": evidence,
                "type": f"agent-{parts[0]}",
            }
        )
    return conversation, questions


def build(split: str) -> dict[str, object]:
    conversations: list[dict[str, object]] = []
    questions: list[dict[str, object]] = []
    for path in sorted((SOURCES / split).glob("*.txt")):
        conversation, asked = parse(path)
        conversations.append(conversation)
        questions.extend(asked)
    agent_sources = sorted((SOURCES / "agent" / split).glob("*.txt"))
    if agent_sources:
        generated = json.loads((ROOT / "benchmarks" / "data" / f"recall-{split}.json").read_text(encoding="utf-8"))
        sessions = {str(c["id"]): c for c in generated["conversations"] if c.get("kind") == "agent"}
        for path in agent_sources:
            conversation, asked = parse_agent(path, sessions)
            conversations.append(conversation)
            questions.extend(asked)
    description = DESCRIPTION + (AGENT_DESCRIPTION if agent_sources else "")
    return {
        "name": f"recall-written-{split}",
        "split": split,
        "description": description.format(split=split) + USE[split],
        "conversations": conversations,
        "questions": questions,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when the JSON is not what the sources make")
    args = parser.parse_args()
    for split in SPLITS:
        try:
            data = build(split)
        except SourceError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
        target = output(split)
        if args.check:
            if not target.exists() or target.read_text(encoding="utf-8") != text:
                print(f"{target} is not what {SOURCES / split} makes: run python scripts/make_written_recall.py")
                return 1
            continue
        target.write_text(text, encoding="utf-8")
        chats: list[dict[str, list[object]]] = data["conversations"]  # type: ignore[assignment]
        asked: list[object] = data["questions"]  # type: ignore[assignment]
        turns = sum(len(c["messages"]) for c in chats)
        print(f"{split}: {len(chats)} conversations, {turns} messages, {len(asked)} questions → {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
