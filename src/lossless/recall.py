"""The engine's recall side: the agent tools ``grep``, ``describe``, ``expand`` and ``expand_query``.

A mixin of :class:`~lossless.engine.ContextEngine`, kept apart so the engine module stays about the
conversation lifecycle.  Everything here goes through one :class:`~lossless.retrieval.Retriever`
over the engine's store; see :mod:`lossless.retrieval` for the invariants (complete search,
linear-time regexes, exact token caps, caller isolation, durable grants).  Without a ``caller`` a
call runs as the engine's own agent, as an operator reaching all its conversations; an agent's own
calls pass its :class:`~lossless.retrieval.Caller` so its reach applies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from lossless.config import Config
from lossless.large_files import DEFAULT_PAGE_BYTES
from lossless.observability import timed
from lossless.ports import Store
from lossless.records import LargeFile, parse_timestamp
from lossless.retrieval import Caller, ExpandResult, FileView, GrepOptions, GrepResult, Retriever, SummaryDescription
from lossless.retrieval.dag import DEFAULT_MAX_DEPTH
from lossless.retrieval.expansion import DEFAULT_MAX_TOKENS as DEFAULT_EXPANSION_ANSWER_TOKENS
from lossless.retrieval.expansion import ExpandQueryResult, ExpansionRunner
from lossless.retrieval.expansion import expand_query as run_expand_query
from lossless.tokens import TokenCounter

if TYPE_CHECKING:
    from lossless.memory.messages import MessageSearch
    from lossless.memory.service import MemoryService

__all__ = ["RecallMixin"]


class RecallMixin:
    """``grep``, ``describe``, ``expand`` and ``expand_query`` for :class:`~lossless.engine.ContextEngine`."""

    store: Store
    config: Config
    tokens: TokenCounter
    _clock: Callable[[], datetime]

    async def _read(self, found: LargeFile) -> bytes:
        raise NotImplementedError  # the engine's

    def memory(self) -> MemoryService:
        raise NotImplementedError  # the engine's

    def _retrieval(self) -> Retriever:
        retriever: Retriever | None = getattr(self, "_retriever", None)
        if retriever is None:
            retriever = Retriever(self.store, read_file=self._read, clock=self._clock, semantic=self._message_search)
            self._retriever = retriever
        return retriever

    def _message_search(self) -> MessageSearch:
        from lossless.memory.messages import MessageSearch

        return MessageSearch(self.store, self.memory())

    async def _retrieval_target(
        self, caller: Caller | None, conversation: int | str | None, all_conversations: bool
    ) -> tuple[Caller, int | None, bool]:
        """The caller (default: this engine's agent as an operator, reaching all its conversations) and target."""
        who = caller or Caller(self.config.agent_id)
        conversation_id = await self._retrieval().conversation_id_for(who, conversation)
        return who, conversation_id, True if caller is None else all_conversations

    @timed("lcm_search_latency_ms")
    async def grep(
        self,
        pattern: str,
        *,
        mode: Literal["regex", "full_text", "semantic", "hybrid"] = "regex",
        scope: Literal["messages", "summaries", "both", "files"] = "both",
        conversation: int | str | None = None,
        all_conversations: bool = False,
        since: datetime | str | None = None,
        before: datetime | str | None = None,
        limit: int = 50,
        sort: Literal["recency", "relevance"] = "recency",
        caller: Caller | None = None,
    ) -> GrepResult:
        """Search stored messages and summaries, or stored files (``scope="files"``); see :mod:`lossless.retrieval`.

        ``mode`` is ``regex``, ``full_text``, or ``semantic`` / ``hybrid`` (messages by meaning, with
        the long-term memory's embedder).

        Without ``caller`` the search runs as this engine's agent over all its
        conversations (or ``conversation``); an agent's own calls pass its
        :class:`Caller` so its reach applies.
        """
        who, conversation_id, wide = await self._retrieval_target(caller, conversation, all_conversations)
        options = GrepOptions(
            pattern,
            mode=mode,
            scope=scope,
            since=None if since is None else parse_timestamp(since) if isinstance(since, str) else since,
            before=None if before is None else parse_timestamp(before) if isinstance(before, str) else before,
            limit=limit,
            sort=sort,
        )
        return await self._retrieval().grep(who, options, conversation_id=conversation_id, all_conversations=wide)

    async def describe(
        self,
        item_id: str,
        *,
        conversation: int | str | None = None,
        all_conversations: bool = False,
        token_cap: int | None = None,
        start_line: int | None = None,
        end_line: int | None = None,
        max_bytes: int = DEFAULT_PAGE_BYTES,
        caller: Caller | None = None,
    ) -> SummaryDescription | FileView:
        """A summary (``sum_…``: content, lineage, sizes) or stored file (``file_…``: metadata, a page of lines)."""
        who, conversation_id, wide = await self._retrieval_target(caller, conversation, all_conversations)
        return await self._retrieval().describe(
            who,
            item_id,
            conversation_id=conversation_id,
            all_conversations=wide,
            token_cap=token_cap,
            start_line=start_line,
            end_line=end_line,
            max_bytes=max_bytes,
        )

    @timed("lcm_expand_latency_ms")
    async def expand(
        self,
        summary_ids: Sequence[str] | None = None,
        *,
        query: str | None = None,
        max_depth: int = DEFAULT_MAX_DEPTH,
        token_cap: int | None = None,
        include_messages: bool = False,
        conversation: int | str | None = None,
        all_conversations: bool = False,
        caller: Caller | None = None,
    ) -> ExpandResult:
        """Expand summaries into their sources, up to ``token_cap`` (default ``max_expand_tokens``)."""
        who, conversation_id, wide = await self._retrieval_target(caller, conversation, all_conversations)
        return await self._retrieval().expand(
            who,
            summary_ids=summary_ids,
            query=query,
            max_depth=max_depth,
            token_cap=self.config.max_expand_tokens if token_cap is None else token_cap,
            include_messages=include_messages,
            conversation_id=conversation_id,
            all_conversations=wide,
        )

    @timed("lcm_expand_latency_ms")
    async def expand_query(
        self,
        prompt: str,
        *,
        query: str | None = None,
        summary_ids: Sequence[str] | None = None,
        max_tokens: int = DEFAULT_EXPANSION_ANSWER_TOKENS,
        token_cap: int | None = None,
        conversation: int | str | None = None,
        all_conversations: bool = False,
        caller: Caller | None = None,
        runner: ExpansionRunner | None = None,
    ) -> ExpandQueryResult:
        """Answer ``prompt`` through a sub-agent holding a temporary grant (:mod:`lossless.retrieval.expansion`).

        The runner is the configured one (``expansion_provider``; offline by default) unless given.
        """
        from lossless.providers.subagent import expansion_runner_for

        who, conversation_id, wide = await self._retrieval_target(caller, conversation, all_conversations)
        timeout_s = self.config.delegation_timeout_ms / 1000
        return await run_expand_query(
            self._retrieval(),
            who,
            runner or expansion_runner_for(self.config, self.tokens),
            self.tokens,
            prompt=prompt,
            query=query,
            summary_ids=summary_ids,
            conversation_id=conversation_id,
            all_conversations=wide,
            max_tokens=max_tokens,
            token_cap=self.config.max_expand_tokens if token_cap is None else token_cap,
            ttl=timedelta(seconds=2 * timeout_s),
            timeout_s=timeout_s,
            clock=self._clock,
        )
