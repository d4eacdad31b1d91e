"""The model-backed dedup step: the seven decisions, model-written merges, and utility ratings.

Three prompts (written for this project), each answered in JSON:

* **decide** — a candidate memory and its most similar existing memories of the
  same category (numbered from 1) → ``{"decision", "match_index", "reason",
  "context_label"}``, the decision one of ``create``, ``merge``, ``skip``,
  ``support``, ``contextualize``, ``contradict``, ``supersede``;
* **merge** — an existing memory and a new statement (with a context label for
  ``contextualize``) → ``{"abstract", "overview", "content"}``;
* **rate** — candidates and the conversation → ``{"utility": [0–1, …]}``, the
  utility feature of admission control.

Invariants:

* This module does no I/O: the chat call is injected (``chat(system, user) -> text``)
  and every call runs under a deadline (:class:`TimeoutError` past it).
* The model's answer is untrusted.  Anything that is not the documented JSON
  (code fences are tolerated), a decision outside the seven, a ``match_index``
  that names no listed memory, an empty merged text, or ratings that are not one
  number in [0, 1] per candidate raise :class:`~lossless.errors.ProviderError`;
  the caller then applies the deterministic rules.  An unknown context label
  becomes ``general``.
* The category rules hold whatever the model says (:func:`enforce`): ``profile``
  always merges (the model is not even asked to decide, only to write the merged
  text); ``preferences`` and ``entities`` are temporally versioned (any decision);
  ``events`` and ``cases`` are append-only (``create`` or ``skip``: a duplicate is
  skipped, anything else is a new memory); ``patterns`` merge but are not
  versioned (``supersede`` / ``contradict`` become a model-written ``merge``).  A
  ``create`` of a candidate nearly identical (≥ 0.95) to a memory becomes
  ``support`` (``skip`` for append-only categories), and a ``create`` beside a
  current memory with the same fact key drops the candidate's fact key, so a key
  never has two current values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, get_args

import anyio

from lossless.errors import ProviderError
from lossless.memory.records import Decision, DecisionKind, Memory, MemoryDraft
from lossless.records import format_timestamp

__all__ = [
    "CONTEXT_LABELS",
    "DECIDE_PROMPT",
    "MERGE_PROMPT",
    "RATE_PROMPT",
    "LlmJudge",
    "Verdict",
    "enforce",
    "keyless",
    "parse_levels",
    "parse_utilities",
    "parse_verdict",
]

Chat = Callable[[str, str], Awaitable[str]]

CONTEXT_LABELS = (
    "general", "morning", "evening", "night", "weekday", "weekend", "work", "leisure", "summer", "winter", "travel",
)  # fmt: skip
_MODEL_DECISIONS: tuple[str, ...] = tuple(k for k in get_args(DecisionKind) if k != "reject")
_DUPLICATE = 0.95
_MAX_TEXT = 4000

DECIDE_PROMPT = f"""You keep an assistant's long-term memory free of duplicates and stale facts. A new candidate
memory was just extracted from a conversation; below it are the existing memories most similar to it, numbered
from 1. Decide what to do with the candidate.

Return JSON only, in this shape:
{{"decision": "...", "match_index": 1, "reason": "...", "context_label": "general"}}

decision is exactly one of:
- skip: the candidate says nothing that memory N does not already say.
- support: the candidate restates memory N; it confirms it and adds nothing.
- merge: the candidate adds details to the same fact as memory N; the two belong in one memory.
- contextualize: the candidate holds in a particular situation (a time of day, weekdays, work, travel...) while
  memory N holds in general or in another situation; both stay true.
- supersede: the candidate is a newer value of the same fact as memory N (a changed preference, a new address,
  a new version); memory N becomes history.
- contradict: the candidate says memory N is wrong or no longer true; memory N is invalidated and kept as history.
- create: the candidate is a different fact from every listed memory; it is stored as a new memory.

match_index: the number of the memory the decision is about; required for every decision except create.
context_label: for contextualize, the situation the candidate holds in, one of: {", ".join(CONTEXT_LABELS)}.
reason: one short sentence.

Category rules: events and cases are append-only (create, or skip a duplicate); profile facts merge;
preferences and entities change over time (supersede or contradict keep the old value as history).
Judge by meaning, not wording: the same fact in other words is support or skip, not create."""

MERGE_PROMPT = """You maintain an assistant's long-term memory. Combine an existing memory and a new statement
about the same subject into one memory.

Return JSON only, in this shape:
{"abstract": "...", "overview": "...", "content": "..."}

- abstract: one line that could serve as an index entry.
- overview: two or three sentences or a short list.
- content: the full combined statement with every detail of both that is still true. Where they disagree, the new
  statement wins.
- When a context is given, the new statement holds only in that context: keep the existing statement as it is and
  add the new one, qualified by its context (for example "Prefers coffee; in the evening, tea").
- Write in the language of the existing memory. Add nothing that neither of them says."""

RATE_PROMPT = """You decide what is worth keeping in an assistant's long-term memory. Rate how useful each
candidate memory would be to the assistant weeks from now.

Return JSON only, in this shape:
{"utility": [0.8, 0.1]}

One number between 0 and 1 per candidate, in the order given: 1 for durable, actionable knowledge (who the user
is, lasting preferences, decisions, how a problem was solved, habits); 0 for trivia, small talk, or details that
only mattered in the moment."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The model's answer to the decide prompt, parsed (``index`` counts from 0; ``None`` for create)."""

    kind: DecisionKind
    index: int | None
    reason: str
    context_label: str | None


def _payload(text: str, what: str) -> dict[str, Any]:
    stripped = text.strip()
    fenced = re.match(r"^```(?:json)?\s*(.*?)\s*```$", stripped, re.S)
    if fenced:
        stripped = fenced.group(1)
    try:
        payload = json.loads(stripped)
    except ValueError as exc:
        raise ProviderError("memory dedup", f"the model's {what} is not JSON") from exc
    if not isinstance(payload, dict):
        raise ProviderError("memory dedup", f"the model's {what} is not a JSON object")
    return payload


def parse_verdict(text: str, matches: int) -> Verdict:
    """The decision in ``text`` about a candidate with ``matches`` listed memories (strict; see the module)."""
    payload = _payload(text, "decision")
    kind = payload.get("decision")
    if kind not in _MODEL_DECISIONS:
        raise ProviderError("memory dedup", f"the model's decision {kind!r} is not one of the seven")
    raw = payload.get("match_index")
    index: int | None = None
    if kind != "create":
        if raw is None and matches == 1:
            raw = 1
        if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= matches:
            raise ProviderError("memory dedup", f"match_index {raw!r} names none of the {matches} listed memories")
        index = raw - 1
    reason = payload.get("reason")
    label = payload.get("context_label")
    context = None
    if kind == "contextualize":
        context = label if label in CONTEXT_LABELS else "general"
    return Verdict(kind, index, reason.strip()[:300] if isinstance(reason, str) else "", context)


def parse_levels(text: str) -> tuple[str, str, str]:
    """``(abstract, overview, content)`` of a merge answer; abstract and overview may be empty."""
    payload = _payload(text, "merge")
    content = payload.get("content")
    if not isinstance(content, str) or not content.strip():
        raise ProviderError("memory dedup", "the model's merge has no content")
    levels = [payload.get(name) for name in ("abstract", "overview")]
    abstract, overview = (v.strip() if isinstance(v, str) else "" for v in levels)
    return abstract, overview, content.strip()


def parse_utilities(text: str, count: int) -> list[float]:
    """One utility in [0, 1] per candidate, in order."""
    values = _payload(text, "rating").get("utility")
    if not isinstance(values, list) or len(values) != count:
        raise ProviderError("memory dedup", f"the model rated {values!r}, not {count} candidates")
    out: list[float] = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
            raise ProviderError("memory dedup", f"utility {value!r} is not a number between 0 and 1")
        out.append(float(value))
    return out


def enforce(draft: MemoryDraft, same: Sequence[tuple[Memory, float]], verdict: Verdict) -> Decision:
    """The decision actually taken on the model's ``verdict``, under the category rules (see the module)."""
    why = f"model: {verdict.reason}" if verdict.reason else "model"
    target, similarity = same[verdict.index if verdict.index is not None else 0]
    kind: DecisionKind = verdict.kind
    category = draft.category
    if category == "profile":
        kind = "merge" if kind not in ("skip", "support") else kind
    elif category in ("events", "cases"):
        kind = "skip" if kind in ("skip", "support") else "create"
    elif category == "patterns" and kind in ("supersede", "contradict"):
        kind = "merge"
    if kind != verdict.kind:
        why = f"{why} (asked {verdict.kind}; {category} rule: {kind})"
    if kind == "create":
        best, best_similarity = same[0]
        if best_similarity >= _DUPLICATE:
            kind = "skip" if category in ("events", "cases") else "support"
            return Decision(kind, best.memory_id, f"{why}; near-identical to {best.memory_id}", by="model")
        return Decision("create", reason=why, by="model")
    return Decision(kind, target.memory_id, f"{why} (similarity {similarity:.2f})", verdict.context_label, "model")


def keyless(draft: MemoryDraft, neighbours: Sequence[tuple[Memory, float]]) -> MemoryDraft:
    """``draft`` without its fact key when a current memory already holds that key (a distinct fact beside it)."""
    if draft.fact_key and any(m.fact_key == draft.fact_key and m.current for m, _ in neighbours):
        return replace(draft, fact_key=None)
    return draft


def _text(value: str) -> str:
    return value.replace("</", "< /")[:_MAX_TEXT]


def _memory_block(tag: str, memory: Memory | MemoryDraft, extra: str = "") -> str:
    since = f' since="{format_timestamp(memory.valid_from)}"' if memory.valid_from else ""
    return f'<{tag}{extra} category="{memory.category}"{since}>\n{_text(memory.content)}\n</{tag}>'


class LlmJudge:
    """Dedup decisions, merges and utility ratings by a chat model; ``chat(system, user)`` returns its text."""

    def __init__(self, chat: Chat, *, timeout_s: float = 20.0, name: str = "llm") -> None:
        self._chat = chat
        self._timeout_s = timeout_s
        self.name = name

    async def _ask(self, system: str, user: str) -> str:
        with anyio.fail_after(self._timeout_s):
            return await self._chat(system, user)

    async def decide(self, draft: MemoryDraft, neighbours: Sequence[tuple[Memory, float]]) -> Decision | None:
        """The enforced decision for ``draft``; ``None`` where the rules decide alone (nothing to compare, profile)."""
        same = [(m, s) for m, s in neighbours if m.category == draft.category]
        if not same or draft.category == "profile":
            return None
        listed = "\n".join(_memory_block("memory", m, f' index="{i}"') for i, (m, _) in enumerate(same, 1))
        answer = await self._ask(
            DECIDE_PROMPT, f"Candidate:\n{_memory_block('candidate', draft)}\n\nExisting memories:\n{listed}"
        )
        return enforce(draft, same, parse_verdict(answer, len(same)))

    async def merge(self, existing: Memory, draft: MemoryDraft, *, context_label: str | None) -> tuple[str, str, str]:
        """``(abstract, overview, content)`` of ``existing`` combined with ``draft`` (qualified by the context)."""
        context = f"\n\nContext of the new statement: {context_label}" if context_label else ""
        answer = await self._ask(
            MERGE_PROMPT,
            f"{_memory_block('existing', existing)}\n\n{_memory_block('new', draft)}{context}",
        )
        return parse_levels(answer)

    async def rate(self, drafts: Sequence[MemoryDraft], sources: Sequence[str]) -> list[float]:
        """The utility of each draft (for admission control), in order."""
        conversation = _text("\n".join(sources)[-_MAX_TEXT:])
        listed = "\n".join(_memory_block("candidate", d, f' index="{i}"') for i, d in enumerate(drafts, 1))
        answer = await self._ask(RATE_PROMPT, f"Conversation:\n{conversation}\n\nCandidates:\n{listed}")
        return parse_utilities(answer, len(drafts))
