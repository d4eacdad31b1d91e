"""The model-backed extractor: a prompt, a renderer and a strict parser around any chat call.

The prompt (written for this project) asks for at most five durable memories in
the six categories, each with three levels (one-line abstract, short overview,
full content), in the conversation's dominant language, citing the ids of the
messages it came from, and lists what never to extract (system or tool text,
recall questions such as "do you remember…", greetings, small talk, anything
the assistant merely suggested).

Invariants:

* This module does no I/O: the chat call is injected (``chat(system, user) -> text``).
* The model's answer is untrusted.  Anything that is not the documented JSON
  (code fences are tolerated) raises :class:`~lossless.errors.ProviderError`;
  items with an unknown category or empty text are dropped; cited message ids
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
from lossless.memory.records import CATEGORIES, MemoryDraft
from lossless.records import MessageRecord

__all__ = ["SYSTEM_PROMPT", "LlmExtractor", "parse_memories", "render_segment"]

Chat = Callable[[str, str], Awaitable[str]]

SYSTEM_PROMPT = f"""You maintain the long-term memory of an assistant. Read the conversation segment and
write down what is worth knowing weeks from now.

Return JSON only, in this shape:
{{"memories": [{{"category": "...", "abstract": "...", "overview": "...", "content": "...", "sources": [id, ...]}}]}}

Rules:
- At most {MAX_PER_EXTRACTION} memories; fewer is better than padding. Return {{"memories": []}} when nothing qualifies.
- category is one of: profile (who the user is), preferences (likes, dislikes, how they want things done;
  group preferences on one topic together), entities (named people, systems, projects and their facts),
  events (decisions and things that happened, with their dates), cases (a problem and how it was solved),
  patterns (habits and recurring routines).
- abstract: one line that could serve as an index entry. overview: two or three sentences or a short list.
  content: the full statement with the details needed to act on it.
- Write in the language the conversation mostly uses.
- sources: the ids of the messages the memory comes from, as written in <message id="...">.
- Never extract: system or tool output, logs, code listings, questions asking you to recall something
  ("do you remember...", "what did I say..."), greetings, thanks, small talk, or anything the assistant
  only suggested and the user did not confirm."""


def render_segment(messages: Sequence[MessageRecord], max_chars: int = 8000) -> str:
    """The messages as ``<message id role>`` blocks, newest kept when over ``max_chars``."""
    blocks: list[str] = []
    used = 0
    for message in reversed(messages):
        if message.role not in ("user", "assistant"):
            continue
        text = message.content.replace("</message>", "</ message>")
        block = f'<message id="{message.id}" role="{message.role}">\n{text}\n</message>'
        if used + len(block) > max_chars and blocks:
            break
        blocks.append(block[:max_chars])
        used += len(block)
    return "\n".join(reversed(blocks))


def _payload(text: str) -> Any:
    stripped = text.strip()
    fenced = re.match(r"^```(?:json)?\s*(.*?)\s*```$", stripped, re.S)
    if fenced:
        stripped = fenced.group(1)
    try:
        return json.loads(stripped)
    except ValueError as exc:
        raise ProviderError("memory extractor", "the model's answer is not JSON") from exc


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
        if not isinstance(content, str) or not content.strip():
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
