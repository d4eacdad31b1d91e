"""The model-backed extractor: a prompt, a renderer and a strict parser around any chat call.

The prompt (written for this project) asks for at most five durable memories in
the six categories, each with three levels (one-line abstract, short overview,
full content), in the conversation's dominant language, citing the ids of the
messages it came from; each a self-contained statement naming who it is about,
relative times turned into dates from the messages' dates (sent with each
message), changes of mind written as such and flagged ``"revises": true`` (the memory service then
links them to the earlier statement they take back, as it does the offline extractor's); and lists
what never to extract (system or tool text,
recall questions such as "do you remember…", greetings, small talk, anything
the assistant merely suggested).

Invariants:

* This module does no I/O: the chat call is injected (``chat(system, user) -> text``).
* The model's answer is untrusted.  Code fences and text around the JSON are
  tolerated, and an answer cut off inside the list keeps its complete items;
  anything else raises :class:`~lossless.errors.ProviderError`; items with an
  unknown category, empty text, or content that is a heading, a list stub,
  code or tool noise (:func:`~lossless.memory.fragments.fragment_reason`) are dropped; cited message ids
  not in the segment are dropped, and an item citing none is attributed to the
  segment's user messages.  Never more than five drafts.
* Only the newest ``max_chars`` of the segment are sent (8,000 by default).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from lossless.errors import InputError, ProviderError
from lossless.memory.extraction import MAX_PER_EXTRACTION, fact_key_for
from lossless.memory.fragments import fragment_reason
from lossless.memory.records import CATEGORIES, MemoryDraft
from lossless.records import MessageRecord

__all__ = ["SYSTEM_PROMPT", "LlmExtractor", "parse_memories", "render_segment"]

Chat = Callable[[str, str], Awaitable[str]]

SYSTEM_PROMPT = f"""You maintain the long-term memory of an assistant. Read the conversation segment and
write down what is worth knowing weeks from now.

Return JSON only, in this shape:
{{"memories": [{{"category": "...", "abstract": "...", "overview": "...", "content": "...", "sources": [id, ...],
"revises": true}}]}}

Rules:
- At most {MAX_PER_EXTRACTION} memories; fewer is better than padding. Return {{"memories": []}} when nothing qualifies.
- category is one of: profile (who someone is), preferences (likes, dislikes, how they want things done;
  group preferences on one topic together), entities (named people, places, systems, projects and their facts),
  events (decisions, plans and things that happened, with their dates), cases (a problem and how it was solved),
  patterns (habits and recurring routines).
- Every memory stands on its own: name who it is about instead of "I", "you" or "we" (use the speaker's
  name when the message gives one, else "the user" or "the assistant"), and write complete sentences.
- Dates: turn relative times ("yesterday", "last week", "two months ago") into dates, counted from the date
  of the message that says them (the date attribute), written out like 7 May 2023.
- When someone changes their mind, write the new state and say what it replaces ("… now prefers tea,
  no longer coffee"), and add "revises": true (leave it out otherwise): stopping, quitting, cancelling
  or going back on something said before counts.
- abstract: one line that could serve as an index entry. overview: two or three sentences.
  content: the full statement with the details needed to act on it.
- Write in the language the conversation mostly uses.
- sources: the ids of the messages the memory comes from, as written in <message id="...">.
- Never extract: system or tool output, logs, code, markdown headings or half sentences, questions asking you
  to recall something ("do you remember...", "what did I say..."), greetings, thanks, small talk, or anything
  the assistant only suggested and the user did not confirm."""


#: What a model's memory may never be (the grammar checks are English-only, and models write many languages).
_STRUCTURAL = frozenset({"empty", "heading", "list stub", "code", "tool noise"})


def render_segment(messages: Sequence[MessageRecord], max_chars: int = 8000) -> str:
    """The messages as ``<message id role date>`` blocks, newest kept when over ``max_chars``."""
    blocks: list[str] = []
    used = 0
    for message in reversed(messages):
        if message.role not in ("user", "assistant"):
            continue
        text = message.content.replace("</message>", "</ message>")
        when = message.created_at.strftime("%Y-%m-%d")
        block = f'<message id="{message.id}" role="{message.role}" date="{when}">\n{text}\n</message>'
        if used + len(block) > max_chars and blocks:
            break
        blocks.append(block[:max_chars])
        used += len(block)
    return "\n".join(reversed(blocks))


def _payload(text: str) -> Any:
    """The answer's JSON; a truncated or chatty answer gives up the complete memory items it holds."""
    stripped = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)\s*(?:```|$)", stripped, re.S)
    if fenced:
        stripped = fenced.group(1)
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    start = stripped.find("{")
    if start >= 0:
        try:
            return json.JSONDecoder().raw_decode(stripped[start:])[0]
        except ValueError:
            pass
    salvaged = _salvage(stripped)
    if salvaged:
        return {"memories": salvaged}
    raise ProviderError("memory extractor", "the model's answer is not JSON")


def _salvage(text: str) -> list[Any]:
    """The whole objects of a ``"memories": [...]`` list that was cut off (a partial answer)."""
    opening = re.search(r'"memories"\s*:\s*\[', text)
    if opening is None:
        return []
    decoder = json.JSONDecoder()
    items: list[Any] = []
    position = opening.end()
    while True:
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        if position >= len(text) or text[position] != "{":
            return items
        try:
            item, position = decoder.raw_decode(text, position)
        except ValueError:
            return items
        items.append(item)


def parse_memories(text: str, conversation_id: int, messages: Sequence[MessageRecord]) -> list[MemoryDraft]:
    """Drafts from the model's answer (see the module invariants for what is dropped)."""
    payload = _payload(text)
    items = payload.get("memories") if isinstance(payload, dict) else None
    if not isinstance(items, list):
        raise ProviderError("memory extractor", 'the model\'s answer has no "memories" list')
    by_id = {m.id: m for m in messages}
    users = tuple(m.id for m in messages if m.role == "user")
    drafts: list[MemoryDraft] = []
    for item in items:
        if len(drafts) == MAX_PER_EXTRACTION:
            break
        if not isinstance(item, dict) or item.get("category") not in CATEGORIES:
            continue
        content = item.get("content")
        if not isinstance(content, str) or not content.strip() or fragment_reason(content) in _STRUCTURAL:
            continue
        cited = item.get("sources")
        ids = tuple(
            dict.fromkeys(i for i in (cited if isinstance(cited, list) else []) if isinstance(i, int) and i in by_id)
        )
        sources = ids or users
        category = item["category"]
        try:
            drafts.append(
                MemoryDraft(
                    content=content.strip(),
                    category=category,
                    abstract=str(item.get("abstract") or "").strip(),
                    overview=str(item.get("overview") or "").strip(),
                    fact_key=fact_key_for(category, content),
                    temporal_type="dynamic" if category == "events" else "static",
                    conversation_id=conversation_id if sources else None,
                    source_message_ids=sources,
                    source="extraction",
                    valid_from=max((by_id[i].created_at for i in sources), default=None),
                    metadata={"revises": True} if item.get("revises") is True else None,
                )
            )
        except InputError:
            continue  # an item that cannot be a memory (too long, NUL bytes, …) is dropped, not fatal
    return drafts


class LlmExtractor:
    """Extraction by a chat model; ``chat(system, user)`` returns the model's text."""

    def __init__(self, chat: Chat, *, max_chars: int = 8000, name: str = "llm") -> None:
        self._chat = chat
        self._max_chars = max_chars
        self.name = name

    async def extract(self, conversation_id: int, messages: Sequence[MessageRecord]) -> list[MemoryDraft]:
        segment = render_segment(messages, self._max_chars)
        if not segment:
            return []
        answer = await self._chat(SYSTEM_PROMPT, f"Conversation segment:\n{segment}")
        return parse_memories(answer, conversation_id, messages)
