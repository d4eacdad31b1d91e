"""Turning conversation messages into memory drafts, and deciding what to do with each.

:func:`extract` is the deterministic offline extractor (the default; an LLM
extractor can replace it behind the same signature): it reads user messages
and keeps statements that say something durable about the user or their work
— who they are (profile), what they like (preferences), decisions and
happenings (events), fixes (cases), habits (patterns) and named things
(entities).  :func:`decide` applies the dedup decision rules.

Invariants:

* At most five drafts per call (the spec's cap), each with provenance: the
  conversation and the id of the message it came from.
* Skipped: assistant/tool/system text, questions about memory ("do you
  remember…"), greetings and acknowledgements, and text under 10 characters.
* Deterministic: the same messages give the same drafts.
* Decisions follow the category rules: ``profile`` always merges into its
  nearest profile memory; ``preferences`` and ``entities`` are temporally
  versioned (a new value for the same fact key *supersedes* the old one, which
  stays as history); ``events`` and ``cases`` are append-only (create or skip);
  ``patterns`` merge when nearly identical.  A near-duplicate is ``skip`` or
  ``support``.  No candidate ever falls back to creating a duplicate of a
  memory it matched at ≥ 0.95 similarity.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from lossless.memory.records import Category, Memory, MemoryDraft
from lossless.records import MessageRecord

__all__ = ["MAX_PER_EXTRACTION", "Decision", "decide", "extract", "fact_key_for"]

MAX_PER_EXTRACTION = 5
DecisionKind = Literal["create", "merge", "skip", "support", "contextualize", "contradict", "supersede", "reject"]

# (category, pattern, topic group) — the topic names the fact a preference or entity is about.
_RULES: tuple[tuple[Category, re.Pattern[str]], ...] = (
    (
        "profile",
        re.compile(r"\b(?:my name is|i am called|call me|i'm a|i am a|i work (?:at|as|for)|i live in)\b", re.I),
    ),
    ("profile", re.compile(r"(?:我叫|我的名字是|我住在|我在.{1,12}工作|私の名前は|저는 .{1,12}입니다)")),
    (
        "preferences",
        re.compile(r"\b(?:i (?:really )?(?:prefer|like|love|hate|dislike|enjoy|want)|my favou?rite)\b", re.I),
    ),
    ("preferences", re.compile(r"(?:我(?:更)?喜欢|我不喜欢|我偏好|が好き|좋아해|좋아합니다)")),
    (
        "events",
        re.compile(r"\b(?:we decided|i decided|we agreed|we (?:shipped|released|launched|moved)|deadline)\b", re.I),
    ),
    ("cases", re.compile(r"\b(?:the fix (?:was|is)|fixed (?:it|by)|the (?:bug|problem|issue) was|root cause)\b", re.I)),
    ("patterns", re.compile(r"\b(?:i always|i usually|i never|every (?:morning|day|week)|my workflow)\b", re.I)),
    ("entities", re.compile(r"\b(?:remember that|note that|for the record|fyi)\b", re.I)),
    # Broader forms, tried after the explicit ones above.
    (
        "profile",
        re.compile(
            r"\b(?:i'?m|i am) (?:allergic|planning|vegetarian|vegan|based|from)\b"
            r"|\bmy (?:manager|boss|wife|husband|partner|daughter|son|kids?|team|budget|birthday)\b",
            re.I,
        ),
    ),
    ("preferences", re.compile(r"(?:大好き|好きです|喜欢)")),
    (
        "cases",
        re.compile(
            r"\b(?:the (?:cause|problem) (?:was|is)|caused by|the fix for|fails with|failed with|error [a-z]?\d{3,})",
            re.I,
        ),
    ),
    (
        "events",
        re.compile(
            r"\b(?:we (?:booked|scheduled|planned|migrated|upgraded|hired|signed)|last (?:night|week)|yesterday|"
            r"this morning)\b",
            re.I,
        ),
    ),
    ("patterns", re.compile(r"\bevery (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|\d+ days)\b", re.I)),
    (
        "entities",
        re.compile(
            r"^(?:our|the|my) [\w-]+(?: [\w-]+)? (?:runs on|is called|is named|uses)\b|^my [\w-]+ is\b"
            r"|\b(?:ticket|issue|jira) [A-Z]{2,}-\d+\b",
            re.I,
        ),
    ),
)
_SKIP = re.compile(
    r"^\s*(?:do you remember|what did i|can you recall|remind me what|hi\b|hello\b|thanks\b|ok\b|okay\b)", re.I
)
_TOPIC = re.compile(
    r"\b(?:prefer|like|love|hate|dislike|enjoy|want|favou?rite|name is|called|live in|work (?:at|as|for))\s+"
    r"(?:to\s+)?(?:the\s+|a\s+|an\s+|my\s+)?([\w-]+)",
    re.I,
)
_OWNED = re.compile(r"\bmy ([\w-]+) is\b", re.I)
_SENTENCES = re.compile(r"[^.!?。！？\n]+[.!?。！？]?")


def fact_key_for(category: Category, text: str) -> str | None:
    """``category:topic`` for versioned categories (what the fact is about), else ``None``."""
    if category == "profile":
        lowered = text.lower()
        for marker, topic in (("name", "name"), ("live", "home"), ("work", "work"), ("叫", "name"), ("住", "home")):
            if marker in lowered:
                return f"profile:{topic}"
        return None
    if category not in ("preferences", "entities"):
        return None
    match = _TOPIC.search(text)
    if match:
        return f"{category}:{_topic_word(match.group(1))}"
    owned = _OWNED.search(text)
    if owned:
        return f"{category}:{owned.group(1).lower()}"
    return None


def _topic_word(word: str) -> str:
    word = word.lower()
    groups = {
        "drink": ("coffee", "tea", "espresso", "latte", "water", "juice", "beer", "wine"),
        "editor": ("vim", "neovim", "emacs", "vscode", "helix", "nano"),
        "language": ("python", "rust", "go", "typescript", "javascript", "java", "haskell"),
    }
    for topic, members in groups.items():
        if word in members:
            return topic
    return word


def extract(conversation_id: int, messages: Sequence[MessageRecord]) -> list[MemoryDraft]:
    """Up to five memory drafts from the user messages, newest statements last."""
    drafts: list[MemoryDraft] = []
    seen: set[str] = set()
    for message in messages:
        if message.role != "user":
            continue
        for raw in _SENTENCES.findall(message.content):
            sentence = " ".join(raw.split())
            if len(sentence) < 10 or sentence.endswith(("?", "？")) or _SKIP.match(sentence):
                continue
            category = next((cat for cat, rule in _RULES if rule.search(sentence)), None)
            key = sentence.lower()
            if category is None or key in seen:
                continue
            seen.add(key)
            drafts.append(
                MemoryDraft(
                    content=sentence,
                    category=category,
                    fact_key=fact_key_for(category, sentence),
                    temporal_type="dynamic" if category in ("events",) else "static",
                    conversation_id=conversation_id,
                    source_message_ids=(message.id,),
                    source="extraction",
                    valid_from=message.created_at,
                )
            )
    return drafts[-MAX_PER_EXTRACTION:]


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with a candidate: the kind, the memory it is about, why, and who decided."""

    kind: DecisionKind
    target: str | None = None
    reason: str = ""
    #: For ``contextualize``: the situation the candidate holds in (``evening``, ``work``, …).
    context_label: str | None = None
    by: Literal["rules", "model"] = "rules"


def decide(draft: MemoryDraft, neighbours: Sequence[tuple[Memory, float]]) -> Decision:
    """What to do with ``draft`` given its nearest current memories (similarity ≥ 0.7, best first)."""
    same = [(m, s) for m, s in neighbours if m.category == draft.category]
    if draft.fact_key and draft.category in ("preferences", "entities", "profile"):
        keyed = [(m, s) for m, s in same if m.fact_key == draft.fact_key]
        if keyed:
            old, sim = keyed[0]
            if sim >= 0.95 or old.content.strip().lower() == draft.content.strip().lower():
                return Decision("support", old.memory_id, f"restates {old.memory_id} (similarity {sim:.2f})")
            if draft.category == "profile":
                return Decision("merge", old.memory_id, f"profile facts merge ({draft.fact_key})")
            return Decision("supersede", old.memory_id, f"new value for {draft.fact_key}")
    if not same:
        return Decision("create", reason="no similar memory of this category")
    best, sim = same[0]
    if draft.category == "profile":
        return Decision("merge", best.memory_id, "profile facts always merge")
    if draft.category in ("events", "cases"):
        if sim >= 0.95:
            return Decision("skip", best.memory_id, f"duplicate of {best.memory_id} (similarity {sim:.2f})")
        return Decision("create", reason="events and cases are append-only")
    if sim >= 0.95:
        return Decision("support", best.memory_id, f"restates {best.memory_id} (similarity {sim:.2f})")
    if draft.category == "patterns" and sim >= 0.9:
        return Decision("merge", best.memory_id, "near-identical pattern")
    return Decision("create", reason=f"related to {best.memory_id} but distinct (similarity {sim:.2f})")
