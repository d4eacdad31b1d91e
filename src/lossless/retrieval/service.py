"""The retrieval service: grep, describe and expand, each run as a caller within its reach.

Invariants:

* Every call resolves the caller's reach first (:mod:`lossless.retrieval.access`)
  and reads nothing outside it; summary and file ids out of reach are
  :class:`~lossless.errors.NotFoundError`, exactly as ids that do not exist.
* Under a grant, what ``expand`` returns is charged to the grant, and a call
  never returns more than the grant has left; a revoked or expired grant
  stops every tool at its next call.
* No I/O beyond the :class:`~lossless.ports.Store` port, the ``read_file``
  callable it is given (the engine supplies one that reads the blob store) and
  the ``semantic`` search port (the engine supplies the memory layer's
  :class:`~lossless.memory.messages.MessageSearch`, built on first use, which searches
  messages and summaries).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from lossless.errors import InputError, NotFoundError, check_integer, check_unicode
from lossless.large_files import DEFAULT_PAGE_BYTES, Page, page_lines
from lossless.ports import Store
from lossless.records import JSONValue, LargeFile, MessageRecord, Summary, format_timestamp, utcnow
from lossless.retrieval.access import AccessDenied, Caller, Reach, resolve_reach
from lossless.retrieval.dag import (
    DEFAULT_MAX_DEPTH,
    ExpandResult,
    SummaryDescription,
    describe_summary,
    expand,
    validate_expand_options,
)
from lossless.retrieval.files import grep_files
from lossless.retrieval.grep import SEMANTIC_MODES, GrepOptions, GrepResult, grep
from lossless.retrieval.semantic import SemanticSearch, grep_semantic

__all__ = ["FileView", "MessageView", "Retriever", "message_id_of"]

_QUERY_HITS = 5


@dataclass(frozen=True, slots=True)
class FileView:
    """A stored large file as describe shows it: metadata, exploration summary, one page of lines."""

    file: LargeFile
    page: Page

    def to_dict(self) -> dict[str, JSONValue]:
        return {"type": "file", **self.file.to_dict(), "content": self.page.to_dict()}

    def render(self) -> str:
        f = self.file
        head = [
            f"[{f.id}] {f.name or '(unnamed)'} · {f.mime or 'unknown type'} · {f.byte_size or 0:,} bytes · "
            f"conversation {f.conversation_id}",
        ]
        if f.exploration_summary:
            head += ["", f.exploration_summary]
        page = self.page
        if page.text is None:
            head += ["", "(binary content: read its bytes with `lcm file`)"]
        else:
            head += ["", f"lines {page.start_line}…{page.end_line} of {page.total_lines}:", page.text]
            if page.next_start_line is not None:
                head.append(f"(more from start_line={page.next_start_line})")
        return "\n".join(head)


#: A message citation as the tools print it: ``msg#42`` (the global message id).
_MESSAGE_ID = re.compile(r"msg#([0-9]{1,18})")


def message_id_of(item_id: str) -> int | None:
    """The global message id a ``msg#N`` citation names, else ``None``."""
    match = _MESSAGE_ID.fullmatch(item_id)
    return None if match is None else int(match.group(1))


@dataclass(frozen=True, slots=True)
class MessageView:
    """One stored message as describe shows it: where it sits (conversation, seq, time) and its content, whole."""

    message: MessageRecord

    def to_dict(self) -> dict[str, JSONValue]:
        return {"type": "message", "message_id": f"msg#{self.message.id}", **self.message.to_dict()}

    def render(self) -> str:
        m = self.message
        kinds = sorted({part.type for part in m.parts})
        return "\n".join(
            [
                f"[msg#{m.id}] {m.role} message, conversation {m.conversation_id}, seq {m.seq}",
                f"time: {format_timestamp(m.created_at)}; tokens: {m.token_count:,}; parts: {', '.join(kinds) or '-'}",
                "",
                m.content,
            ]
        )


class Retriever:
    """grep / describe / expand over one store, for callers of one deployment."""

    def __init__(
        self,
        store: Store,
        *,
        read_file: Callable[[LargeFile], Awaitable[bytes]] | None = None,
        clock: Callable[[], datetime] = utcnow,
        semantic: Callable[[], SemanticSearch] | None = None,
    ) -> None:
        self.store = store
        self._read_file = read_file
        self._clock = clock
        self._make_semantic = semantic
        self._semantic: SemanticSearch | None = None

    def semantic_search(self) -> SemanticSearch:
        """The semantic search port, made by the ``semantic`` factory on first use (then kept: it caches)."""
        if self._semantic is None:
            if self._make_semantic is None:
                raise InputError(
                    "semantic and hybrid search need an embedder, and this retriever has none; "
                    "use mode='full_text' or 'regex'"
                )
            self._semantic = self._make_semantic()
        return self._semantic

    async def reach(
        self, caller: Caller, *, conversation_id: int | None = None, all_conversations: bool = False
    ) -> Reach:
        return await resolve_reach(
            self.store, caller, now=self._clock(), conversation_id=conversation_id, all_conversations=all_conversations
        )

    async def conversation_id_for(self, caller: Caller, conversation: int | str | None) -> int | None:
        """A conversation named by id (an int or digits) or by one of the caller's agent's session ids."""
        if conversation is None:
            return None
        if isinstance(conversation, int) and not isinstance(conversation, bool):
            return check_integer(conversation, "conversation id")
        if not isinstance(conversation, str) or not conversation:
            raise InputError(f"conversation must be an id or a session id, got {conversation!r}")
        check_unicode(conversation, "conversation")
        if conversation.isascii() and conversation.isdigit():
            if len(conversation) > 19:
                raise InputError(f"conversation id {conversation[:40]}… is out of range: ids are 64-bit integers")
            return check_integer(int(conversation), "conversation id")
        found = await self.store.find_conversation(agent_id=caller.agent_id, session_id=conversation)
        if found is None:
            raise NotFoundError("conversation", conversation, "give a conversation id or a session id")
        return found.id

    # -- grep

    async def grep(
        self,
        caller: Caller,
        options: GrepOptions,
        *,
        conversation_id: int | None = None,
        all_conversations: bool = False,
    ) -> GrepResult:
        reach = await self.reach(caller, conversation_id=conversation_id, all_conversations=all_conversations)
        if options.scope == "files":
            return await grep_files(self.store, options, reach.conversation_ids, self._read_file)
        if options.mode in SEMANTIC_MODES:
            return await grep_semantic(self.store, options, reach.conversation_ids, self.semantic_search())
        return await grep(self.store, options, reach.conversation_ids)

    # -- describe

    async def find_summary(self, summary_id: str, reach: Reach) -> Summary:
        found = await self.store.get_summaries([summary_id])
        if not found or not reach.allows(found[0].conversation_id):
            raise NotFoundError("summary", summary_id, "find summary ids with lcm_grep (scope='summaries')")
        return found[0]

    async def describe(
        self,
        caller: Caller,
        item_id: str,
        *,
        conversation_id: int | None = None,
        all_conversations: bool = False,
        token_cap: int | None = None,
        start_line: int | None = None,
        end_line: int | None = None,
        max_bytes: int = DEFAULT_PAGE_BYTES,
    ) -> SummaryDescription | FileView | MessageView:
        """A summary (``sum_…``), a stored file (``file_…``) or a message (``msg#N``) within the caller's reach."""
        given: object = item_id
        message_id = message_id_of(given) if isinstance(given, str) else None
        if not isinstance(given, str) or (message_id is None and not given.startswith(("sum_", "file_"))):
            raise InputError(
                f"describe takes a summary id (sum_…), a file id (file_…) or a message id (msg#N), got {item_id!r}"
            )
        check_unicode(item_id, "id")
        reach = await self.reach(caller, conversation_id=conversation_id, all_conversations=all_conversations)
        if message_id is not None:
            messages = await self.store.get_messages_by_id([message_id])
            if not messages or not reach.allows(messages[0].conversation_id):
                raise NotFoundError("message", item_id, "message ids appear in search results as msg#N")
            return MessageView(messages[0])
        if item_id.startswith("sum_"):
            return await describe_summary(self.store, await self.find_summary(item_id, reach), token_cap=token_cap)
        found = await self.store.get_large_file(item_id)
        if found is None or not reach.allows(found.conversation_id):
            raise NotFoundError("file", item_id, "file ids appear in messages as file_… references")
        if self._read_file is None:
            raise InputError("this retriever was set up without access to file contents")
        data = await self._read_file(found)
        return FileView(found, page_lines(data, start_line=start_line, end_line=end_line, max_bytes=max_bytes))

    # -- expand

    async def expand(
        self,
        caller: Caller,
        *,
        summary_ids: Sequence[str] | None = None,
        query: str | None = None,
        max_depth: int = DEFAULT_MAX_DEPTH,
        token_cap: int | None = None,
        include_messages: bool = False,
        conversation_id: int | None = None,
        all_conversations: bool = False,
    ) -> ExpandResult:
        """Expand summaries by id, or the top summary matches of a full-text ``query``."""
        validate_expand_options(max_depth, token_cap, include_messages)
        if (summary_ids is None) == (query is None):
            raise InputError("expand needs either summary_ids or a query (not both)")
        if summary_ids is not None and (
            isinstance(summary_ids, str)
            or not summary_ids
            or not all(isinstance(s, str) and s.startswith("sum_") for s in list[object](summary_ids))
        ):
            raise InputError(f"summary_ids must be a non-empty list of summary ids (sum_…), got {summary_ids!r}")
        reach = await self.reach(caller, conversation_id=conversation_id, all_conversations=all_conversations)
        cap = token_cap
        if reach.grant is not None:
            left = reach.grant.tokens_left
            if left <= 0:
                raise AccessDenied(
                    f"grant {reach.grant.id!r} has used its whole token cap ({reach.grant.token_cap:,}); "
                    "answer with what was read"
                )
            cap = left if cap is None else min(cap, left)
        if query is not None:
            found = await grep(
                self.store,
                GrepOptions(query, mode="full_text", scope="summaries", limit=_QUERY_HITS, sort="relevance"),
                reach.conversation_ids,
            )
            ids = [str(h.ref) for h in found.hits]
            if not ids:
                return ExpandResult((), token_cap=cap, note=found.message)
            roots = await self.store.get_summaries(ids)
        else:
            assert summary_ids is not None
            roots = [await self.find_summary(s, reach) for s in dict.fromkeys(summary_ids)]
        result = await expand(self.store, roots, max_depth=max_depth, token_cap=cap, include_messages=include_messages)
        if reach.grant is not None:
            charged = await self.store.charge_grant(reach.grant.id, result.estimated_tokens, self._clock())
            if charged is None:
                raise AccessDenied(f"grant {reach.grant.id!r} ended during the expansion; answer with what was read")
        return result
