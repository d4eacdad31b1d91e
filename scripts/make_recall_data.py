"""Generate the recall datasets: ``python scripts/make_recall_data.py [--seed 16] [--corpus ../shared/corpus]``.

Writes ``benchmarks/data/recall-dev.json`` and ``benchmarks/data/recall-test.json`` (the format
:mod:`benchmarks.recall` reads).  Everything is derived from the seed, so a run reproduces the
shipped files byte for byte (given the same corpus).

Two kinds of conversations:

* **conversational** (``c01`` … ``c10``): two friends chatting over 4–7 months, one session every
  2–10 days, each turn written ``Name: text``.  Facts (:data:`recall_topics.TOPICS`) are told once,
  some followed up or taken back in a later session; distractor lines that share a fact's words
  (same breed, same city, same band) sit in other sessions; small talk fills the rest.  Questions
  paraphrase the fact (single fact, multi-session, temporal "when", time-anchored "in May 2024",
  relative "two weeks before the trip to Porto", preferences, changes of mind, and indirect answers
  such as "Yes! We went there last week" whose subject is only in the turn before); each also has a
  ``literal`` wording that reuses the statement's words, as public benchmarks' annotators write
  (:data:`recall_topics.LITERAL`; ``recall.py --wording literal`` asks it).  Most facts
  start a short exchange on the same subject (:data:`TALK_SHARE`; "How did the interviews go?" —
  "Four rounds, the last one with the whole team…"), so the turn with the answer sits among turns
  about the same thing, as in people's chats (format 2; format 1, before 2026-11-26, had a one-line
  reaction after every fact, which made the answering turn the only one on its subject).
  Format 3 (2026-11-26) adds, after all the others, ``aggregate`` questions over everything one
  person told on a theme ("How does Maya like to spend free time?": the volunteering, the book and
  the board games, told in three sessions; :data:`recall_topics.AGGREGATES`), each with two to seven
  evidence turns.  Format 4 (2026-11-26) adds, after those, ``adversarial`` questions that ask about
  a fact as if the other person had told it ("Which breed is the dog Jonas adopted?" when Maya
  adopted it; :data:`ADVERSARIAL_SHARE` of the facts one friend told and the other did not), as
  public benchmarks' adversarial questions do; the evidence is the teller's turn.  The conversations
  and the earlier questions are format 2's and 3's, byte for byte.
* **agent work** (``a01`` …): slices of real coding-agent sessions from ``shared/corpus``, read
  with the product's own transcript readers.  Questions are made by rules from what happened: the
  file an edit that added an identifier went to ("which file did we change to add the wingman
  stop notification?", the identifier split into words), and what went wrong when a command failed
  (evidence is the tool result, which rarely repeats the command's words).  Format 5 (2026-11-26)
  corrects the second kind: before, any output holding the word "error" counted as a failure (a
  diff of code that returns errors, a passing test's log, a file listing: 13 of 35 such questions),
  and a command was named by its first five words, paths included ("the git Users dip Repositories
  cli command" named every git call on that checkout).  Now a failure is an output the tool marked
  failed or one whose line opens with an error (``error:``, ``fatal:``, ``FAIL``, ``file(1,2): error``;
  :func:`_failed`), and a command is named by its own words (:func:`_command_words`).  The chats
  and their questions are unchanged; the questions after the agent ones (aggregate, adversarial)
  keep their text but are numbered on from the agent questions, fewer now.

Split: the first half of each kind is ``dev`` (tune on it), the rest ``test`` (report only; never
looked at while tuning).  Hand-checked: see ``docs/benchmarks.md`` (recall datasets).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_topics import (
    AGGREGATES,
    CLOSERS,
    LITERAL,
    OPENERS,
    PEOPLE,
    REACTIONS,
    SIBLING_REL,
    SLOTS,
    SMALL_TALK,
    TALK,
    TOPICS,
)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "data"
CONVERSATIONS = 10
SESSIONS = (22, 27)
#: The share of told facts asked about the wrong person too (format 4; public benchmarks have about a fifth
#: of such questions).
ADVERSARIAL_SHARE = 0.35
#: Agent sessions (path under the corpus, format) and how many messages of each are kept.
AGENT_SESSIONS = [
    ("entireio-cli/0f/c364a22bea/0/full.jsonl", "claude-code"),
    ("entireio-cli/43/2b48f6b6e6/0/full.jsonl", "claude-code"),
    ("entireio-cli/89/7eb280e769/12/full.jsonl", "claude-code"),
    ("entireio-cli/b8/e9234b1b70/0/full.jsonl", "claude-code"),
    ("entireio-cli/cd/95adddad32/0/full.jsonl", "claude-code"),
    ("entireio-cli/d0/161e0df1cb/0/full.jsonl", "claude-code"),
    ("badlogic-pi-mono/large-session.jsonl", "pi"),
    ("marot-spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl", "claude-code"),
]
#: Share of told facts that the two go on talking about (:data:`recall_topics.TALK`: two or four turns on the
#: same subject right after the fact, none restating it), as people do; the rest get a one-line reaction.
TALK_SHARE = 0.85
AGENT_MESSAGES = 360
AGENT_QUESTIONS = 14
MAX_CHARS = 1200


def _fill(template: str, slots: dict[str, str]) -> str:
    return template.format(**slots)


def _month(day: datetime, rng: random.Random) -> str:
    form = rng.choice(["in {M} {Y}", "in {M}", "back in {M}", "around {M} {Y}", "during {M}"])
    return form.format(M=day.strftime("%B"), Y=day.year)


def _gap_phrase(days: int) -> str:
    if days <= 8:
        return "about a week"
    if days <= 11:
        return "ten days or so"
    if days <= 17:
        return "two weeks"
    return "three weeks"


class Conversation:
    def __init__(self, number: int, seed: int) -> None:
        self.rng = random.Random(f"{seed}-c{number}")
        self.id = f"c{number:02d}"
        self.names = PEOPLE[(number - 1) % len(PEOPLE)]
        rng = self.rng
        start = datetime(2023, 1, 1, tzinfo=UTC) + timedelta(days=rng.randrange(0, 540))
        count = rng.randint(*SESSIONS)
        self.days: list[datetime] = []
        day = start
        for _ in range(count):
            self.days.append(day.replace(hour=rng.randint(7, 21), minute=rng.randrange(60)))
            day += timedelta(days=rng.randint(2, 10))
        # session -> list of planned blocks: ("fact", instance, part) or ("distract", text, speaker)
        self.plan: list[list[tuple[str, Any, Any]]] = [[] for _ in range(count)]
        self.questions: list[dict[str, Any]] = []
        self.instances: list[dict[str, Any]] = []

    def slots(self, teller: str, friend: str) -> dict[str, str]:
        chosen = {name: self.rng.choice(values) for name, values in SLOTS.items()}
        chosen["sibling_rel"] = self.rng.choice(SIBLING_REL)
        return chosen | {"A": teller, "B": friend}

    def place(self) -> None:
        rng = self.rng
        count = len(self.days)
        topics = [t for t in TOPICS if t["id"] != "gear"]
        rng.shuffle(topics)
        topics = topics[: rng.randint(27, 30)]
        used_sessions: dict[str, list[int]] = {}
        trips: list[dict[str, Any]] = []
        for topic in topics:
            teller, friend = self.names if rng.random() < 0.5 else self.names[::-1]
            previous: list[str] = []
            for _ in range(topic.get("repeat", 1)):
                slots = self.slots(teller, friend)
                for key in ("city", "band"):  # repeated topics differ in what they are about
                    while key in slots and slots[key] in previous:
                        slots[key] = rng.choice(SLOTS[key])
                previous += [slots.get("city", ""), slots.get("band", "")]
                later = "later" in topic
                taken = set(used_sessions.get(topic["id"], []))
                options = [s for s in range(count - (4 if later else 0)) if all(abs(s - t) > 3 for t in taken)]
                session = rng.choice(options or list(range(count - (4 if later else 0))))
                used_sessions.setdefault(topic["id"], []).append(session)
                instance = {"topic": topic, "slots": slots, "session": session, "ids": {}}
                instance["say_text"] = _fill(rng.choice(topic["say"]), slots)
                if "ask" in topic:
                    instance["ask_text"] = _fill(rng.choice(topic["ask"]), slots)
                self.plan[session].append(("fact", instance, "say"))
                if later:
                    after = rng.randint(session + 2, count - 1)
                    instance["later_session"] = after
                    instance["later_text"] = _fill(rng.choice(topic["later"]), slots)
                    self.plan[after].append(("fact", instance, "later"))
                for text in rng.sample(topic["distract"], min(2, len(topic["distract"]))):
                    where = rng.choice([s for s in range(count) if s != session] or [session])
                    self.plan[where].append(("distract", _fill(text, slots), rng.choice(self.names)))
                self.instances.append(instance)
                if topic["id"] == "trip":
                    trips.append(instance)
        gear_topic = next(t for t in TOPICS if t["id"] == "gear")
        for trip in trips:
            trip_day = self.days[trip["session"]]
            before = [s for s in range(trip["session"]) if 6 <= (trip_day - self.days[s]).days <= 22]
            if not before:
                continue
            session = rng.choice(before)
            slots = trip["slots"] | {"gear": rng.choice(SLOTS["gear"])}
            slots["gap"] = _gap_phrase((trip_day - self.days[session]).days)
            instance = {"topic": gear_topic, "slots": slots, "session": session, "ids": {}}
            instance["say_text"] = _fill(rng.choice(gear_topic["say"]), slots)
            self.plan[session].append(("fact", instance, "say"))
            self.instances.append(instance)

    def write(self) -> list[dict[str, Any]]:
        rng = self.rng
        messages: list[dict[str, Any]] = []
        for number, blocks in enumerate(self.plan):
            rng.shuffle(blocks)
            clock = self.days[number]
            turns: list[tuple[str, str, tuple[Any, str] | None]] = []
            first = rng.choice(self.names)
            other = self.names[1] if first == self.names[0] else self.names[0]
            turns.append((first, rng.choice(OPENERS), None))
            turns.append((other, rng.choice(OPENERS[4:] + REACTIONS[:4]), None))
            for _ in range(rng.randint(1, 3)):
                who = rng.choice(self.names)
                turns.append((who, rng.choice(SMALL_TALK), None))
                turns.append((self._other(who), rng.choice(REACTIONS), None))
            for kind, payload, extra in blocks:
                if kind == "distract":
                    turns.append((extra, payload, None))
                    turns.append((self._other(extra), rng.choice(REACTIONS), None))
                else:
                    teller, friend = payload["slots"]["A"], payload["slots"]["B"]
                    if extra == "say" and "ask_text" in payload:
                        turns.append((friend, payload["ask_text"], (payload, "ask")))
                    turns.append((teller, payload[f"{extra}_text"], (payload, extra)))
                    talk = TALK[payload["topic"]["id"]] if extra == "say" else []
                    if talk and rng.random() < TALK_SHARE:  # the friend picks the topic up, the teller goes on
                        for index, line in enumerate(talk[: rng.choice((2, 4))]):
                            turns.append((friend if index % 2 == 0 else teller, _fill(line, payload["slots"]), None))
                    else:
                        turns.append((friend, rng.choice(REACTIONS), None))
                for _ in range(rng.randint(0, 2)):
                    who = rng.choice(self.names)
                    turns.append((who, rng.choice(SMALL_TALK), None))
                    turns.append((self._other(who), rng.choice(REACTIONS), None))
            closer = rng.choice(self.names)
            turns.append((closer, rng.choice(CLOSERS), None))
            for speaker, text, mark in turns:
                key = f"{self.id}-s{number + 1:02d}-m{len(messages):04d}"
                clock += timedelta(minutes=rng.randint(1, 6))
                role = "user" if speaker == self.names[0] else "assistant"
                messages.append({"id": key, "role": role, "content": f"{speaker}: {text}", "created_at": _stamp(clock)})
                if mark is not None:
                    mark[0]["ids"][mark[1]] = key
                    mark[0].setdefault("dates", {})[mark[1]] = clock
        return messages

    def aggregate(self, seed: int) -> list[dict[str, Any]]:
        """Questions over all a person told on a theme (:data:`recall_topics.AGGREGATES`), two facts or more.

        Drawn from a random stream of their own, so the conversations and the other questions are
        those of format 2, byte for byte."""
        rng = random.Random(f"{seed}-{self.id}-aggregate")
        out: list[dict[str, Any]] = []
        for person in self.names:
            for theme in AGGREGATES:
                told = [
                    i
                    for i in self.instances
                    if i["topic"]["id"] in theme["topics"] and i["slots"]["A"] == person and "say" in i["ids"]
                ]
                if len({i["session"] for i in told}) < 2:
                    continue
                told.sort(key=lambda i: i["ids"]["say"])
                out.append(
                    {
                        "id": "",
                        "conversation_id": self.id,
                        "question": rng.choice(theme["ask"]).format(A=person),
                        "literal": theme["literal"].format(A=person),
                        "answer": " / ".join(i["say_text"] for i in told),
                        "evidence": [i["ids"]["say"] for i in told],
                        "type": "aggregate",
                    }
                )
        return out

    def adversarial(self, seed: int) -> list[dict[str, Any]]:
        """Questions that name the wrong person (format 4): a single-fact question about what one person told,
        asked about the other ("Which breed is the dog Jonas adopted?" when Maya adopted it), as public
        benchmarks' adversarial questions are.  The evidence is the teller's turn: the only turn that can show
        the premise is wrong.  A topic the other person told too is left out (the question would be fair).

        Drawn from a random stream of their own, after everything else, so earlier formats stay byte for byte."""
        rng = random.Random(f"{seed}-{self.id}-adversarial")
        told_by = {(i["topic"]["id"], i["slots"]["A"]) for i in self.instances}
        out: list[dict[str, Any]] = []
        for instance in self.instances:
            topic, slots = instance["topic"], instance["slots"]
            singles = [
                (template, literal, parts)
                for (kind, template, parts), literal in zip(topic["questions"], LITERAL[topic["id"]], strict=True)
                if kind == "single" and all(p in instance["ids"] for p in parts)
            ]
            if not singles or (topic["id"], slots["B"]) in told_by or rng.random() >= ADVERSARIAL_SHARE:
                continue
            template, literal, parts = rng.choice(singles)
            swapped = slots | {"A": slots["B"], "B": slots["A"], "month": _month(instance["dates"]["say"], rng)}
            out.append(
                {
                    "id": "",
                    "conversation_id": self.id,
                    "question": _fill(template, swapped),
                    "literal": _fill(literal, swapped),
                    "answer": instance.get(f"{parts[-1]}_text", ""),
                    "evidence": [instance["ids"][p] for p in parts],
                    "type": "adversarial",
                }
            )
        return out

    def _other(self, name: str) -> str:
        return self.names[1] if name == self.names[0] else self.names[0]

    def ask(self) -> list[dict[str, Any]]:
        rng = self.rng
        out: list[dict[str, Any]] = []
        for instance in self.instances:
            topic, slots = instance["topic"], dict(instance["slots"])
            slots["month"] = _month(instance["dates"]["say"], rng)
            for (kind, template, parts), literal in zip(topic["questions"], LITERAL[topic["id"]], strict=True):
                evidence = [instance["ids"][p] for p in parts]
                when = instance["dates"][parts[-1]]
                answer = {
                    "temporal": when.strftime("%-d %B %Y"),
                }.get(kind, instance.get(f"{parts[-1]}_text", ""))
                if kind == "relative":
                    kind = "temporal"
                out.append(
                    {
                        "id": "",
                        "conversation_id": self.id,
                        "question": _fill(template, slots),
                        "literal": _fill(literal, slots),
                        "answer": answer,
                        "evidence": evidence,
                        "type": kind,
                    }
                )
        return out


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------- agent work


def _words_of(identifier: str) -> str:
    """``outputWingmanStopNotification`` / ``output_wingman_stop`` → ``output wingman stop notification``."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", identifier.replace("_", " "))
    return " ".join(w.lower() for w in spaced.split())


_DEFINES = [
    re.compile(r"\bfunc (?:\([^)]*\) )?([A-Za-z_][A-Za-z0-9_]{6,})\("),
    re.compile(r"\bdef ([A-Za-z_][A-Za-z0-9_]{6,})\("),
    re.compile(r"\b(?:function|const|let|class|interface|type) ([A-Za-z_][A-Za-z0-9_]{6,})\b"),
]
_ERROR = re.compile(r"(error|Error|ERROR|FAIL|panic:|Traceback|exit status [1-9]|failed|No such file)")
#: An output that reports a failure: the tool said so, or a line opens (or a compiler's ``file(1,2):`` /
#: ``file:1:2:`` prefix is followed) with an error word.  A word "error" anywhere (a diff of code that
#: handles errors, a passing test's name, a file listing) is not a failure.
_FAILED = re.compile(
    r"\A\[tool error\]|^(?:[\w./-]+(?:\(\d+,\d+\)|:\d+(?::\d+)?):? ?)?(?:error|fatal|panic)\b[:\[ ]"
    r"|^(?:Traceback \(most recent call last\)|FAIL\b|--- FAIL:|.*\bexit status [1-9])",
    re.M | re.I,
)
#: Outputs that show code or data, whatever words they hold: a diff, JSON, a file's head.
_SHOWS_CODE = re.compile(r"\A(?:diff --git|\{|\[\{|==> )")


def _failed(output: str) -> bool:
    """Whether a tool's output reports that its command failed (see :data:`_FAILED`)."""
    return output.startswith("[tool error]") or (_SHOWS_CODE.match(output) is None and bool(_FAILED.search(output)))


def _command_words(line: str) -> list[str]:
    """The words that name a shell command: of a chain (``cd x && go test …``, ``git fsck | grep …``) its
    first command that is not ``cd``; paths, flags, assignments and hashes left out (every git call on one
    checkout starts ``git -C /Users/…/cli``, which names none of them)."""
    commands = [c.strip() for c in re.split(r"&&|\|\||[;|]", line) if c.strip()]
    command = next((c for c in commands if not re.match(r"cd\b", c)), "")
    kept = [
        t
        for t in command.split()
        if "/" not in t and not t.startswith("-") and "=" not in t and not re.fullmatch(r"[0-9a-f]{12,}", t)
    ]
    return [w for w in re.split(r"[^A-Za-z0-9]+", " ".join(kept)) if len(w) > 1][:5]


def _agent_session(path: Path, fmt: str, number: int, rng: random.Random) -> tuple[dict[str, Any], list[dict]]:
    from lossless.transcripts import Entry, ReadContext, reader_for

    reader = reader_for(fmt)
    with path.open("rb") as stream:
        entries = [e for e in reader.read(stream, ReadContext(str(path))) if isinstance(e, Entry)]
    entries = [e for e in entries if e.message.content.strip()][:AGENT_MESSAGES]
    conv_id = f"a{number:02d}"
    messages = []
    base = datetime(2026, 1, 5, 9, tzinfo=UTC) + timedelta(days=number)
    for index, entry in enumerate(entries):
        content = entry.message.content
        if len(content) > MAX_CHARS:
            content = content[:MAX_CHARS] + " …[truncated]"
        when = entry.message.created_at or base + timedelta(minutes=index)
        messages.append(
            {
                "id": f"{conv_id}-m{index:04d}",
                "role": entry.message.role,
                "content": content,
                "created_at": _stamp(when.astimezone(UTC)),
            }
        )
    candidates: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, message in enumerate(messages):
        text = message["content"]
        call = re.match(r"\[tool call: (\w+)\] (.*)", text, re.S)
        if call is None:
            continue
        tool, args = call.group(1), call.group(2)
        if tool in ("Edit", "Write", "MultiEdit", "edit", "write"):
            path_match = re.search(r'"(?:file_path|path)": "([^"]+)"', args)
            new = args.split('"new_string"', 1)[-1] if '"new_string"' in args else args
            for pattern in _DEFINES:
                found = pattern.search(new.replace("\\n", "\n"))
                if found and path_match and found.group(1) not in seen:
                    name = found.group(1)
                    if "_" not in name and not re.search(r"[a-z][A-Z]", name):
                        continue
                    seen.add(name)
                    phrase = _words_of(name)
                    template = rng.choice(
                        [
                            "Which file did we change to add the {p}?",
                            "Where did we put the {p} code?",
                            "In which file is the new {p} defined?",
                        ]
                    )
                    candidates.append(
                        {
                            "question": template.format(p=phrase),
                            "answer": path_match.group(1).rsplit("/", 1)[-1],
                            "evidence": [message["id"]],
                            "type": "agent-edit",
                        }
                    )
                    break
        elif tool in ("Bash", "bash") and index + 1 < len(messages):
            result = messages[index + 1]
            command = re.search(r'"command": "((?:[^"\\]|\\.)*)"', args)
            if result["role"] != "tool" or command is None or not _failed(result["content"][:MAX_CHARS]):
                continue
            line = command.group(1).split("\\n")[0]
            words = _command_words(line)
            if len(words) < 2 or " ".join(words) in seen:
                continue
            seen.add(" ".join(words))
            template = rng.choice(
                [
                    "What went wrong when we ran {c}?",
                    "What was the error from the {c} command?",
                    "Why did {c} fail?",
                ]
            )
            candidates.append(
                {
                    "question": template.format(c=" ".join(words)),
                    "answer": next((ln.strip() for ln in result["content"].splitlines() if _ERROR.search(ln)), "")[
                        :200
                    ],
                    "evidence": [result["id"]],
                    "type": "agent-error",
                }
            )
    rng.shuffle(candidates)
    questions = [q | {"id": "", "conversation_id": conv_id} for q in candidates[:AGENT_QUESTIONS]]
    return {"id": conv_id, "messages": messages}, questions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    splits: dict[str, dict[str, Any]] = {name: {"conversations": [], "questions": []} for name in ("dev", "test")}
    aggregates: dict[str, list[dict[str, Any]]] = {"dev": [], "test": []}
    adversarial: dict[str, list[dict[str, Any]]] = {"dev": [], "test": []}
    for number in range(1, CONVERSATIONS + 1):
        conversation = Conversation(number, args.seed)
        conversation.place()
        messages = conversation.write()
        questions = conversation.ask()
        name = "dev" if number <= CONVERSATIONS // 2 else "test"
        splits[name]["conversations"].append({"id": conversation.id, "kind": "conversational", "messages": messages})
        splits[name]["questions"] += questions
        aggregates[name] += conversation.aggregate(args.seed)
        adversarial[name] += conversation.adversarial(args.seed)
    for number, (relative, fmt) in enumerate(AGENT_SESSIONS, 1):
        path = args.corpus / relative
        if not path.exists():
            print(f"skipping {relative}: not in {args.corpus}", file=sys.stderr)
            continue
        conversation, questions = _agent_session(path, fmt, number, random.Random(f"{args.seed}-a{number}"))
        conversation["kind"] = "agent"
        conversation["source"] = relative
        split = splits["dev" if number <= len(AGENT_SESSIONS) // 2 else "test"]
        split["conversations"].append(conversation)
        split["questions"] += questions
    for name, split in splits.items():
        split["questions"] += aggregates[name]  # last, so format 2's question ids stay as they were
        split["questions"] += adversarial[name]  # after them, so format 3's stay too
        for index, question in enumerate(split["questions"]):
            question["id"] = f"{name}-q{index:04d}"
        payload = {
            "name": f"lossless-recall-{name}",
            "split": name,
            "format": 5,
            "description": (
                f"Generated by scripts/make_recall_data.py (seed {args.seed}): conversational chats between two people "
                "over months (c*), most facts followed by a short exchange on the same subject (format 2), and slices "
                "of real coding-agent sessions from shared/corpus (a*), with paraphrased questions whose evidence "
                "is the message ids that answer them; the last questions (type aggregate, format 3) ask for "
                "everything one person told on a theme, with every such turn as evidence; the very last "
                "(type adversarial, format 4) ask about a fact as if the other person had told it, the teller's turn "
                "being the evidence. Format 5: an agent question asks why a command failed only where its output "
                "reports a failure (a word 'error' in a diff or a file listing does not), and names the command "
                "by its words, paths and flags left out. "
            )
            + (
                "DEV split: tune retrieval on this one."
                if name == "dev"
                else "TEST split: report only. It is never looked at while tuning retrieval."
            ),
            **split,
        }
        target = args.out / f"recall-{name}.json"
        target.write_text(json.dumps(payload, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
        messages = sum(len(c["messages"]) for c in split["conversations"])
        print(
            f"{target.name}: {len(split['conversations'])} conversations, {messages} messages, "
            f"{len(split['questions'])} questions"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
