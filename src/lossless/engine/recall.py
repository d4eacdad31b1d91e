"""The engine's recall side: the agent tools ``grep``, ``describe``, ``expand`` and ``expand_query``.

It also mints, shows and revokes expansion grants for sub-agents that a host runs itself
(``grant_expansion``, ``expansion_grant``, ``revoke_expansion_grant``; ``lcm grants``).

Composed into :class:`~lossless.engine.ContextEngine` (which forwards its public methods here).
Everything here goes through one :class:`~lossless.retrieval.Retriever`
over the engine's store; see :mod:`lossless.retrieval` for the invariants (complete search,
linear-time regexes, exact token caps, caller isolation, durable grants).  Without a ``caller`` a
call runs as the engine's own agent, as an operator reaching all its conversations; an agent's own
calls pass its :class:`~lossless.retrieval.Caller` so its reach applies.
"""

from __future__ import annotations

import logging
import secrets
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

import anyio

from lossless.config import Config
from lossless.constants import DEFAULT_GRANT_TTL, MAX_GRANT_TOKEN_CAP, MAX_GRANT_TTL, MIN_GRANT_TTL
from lossless.errors import (
    AccessDeniedError,
    InputError,
    MissingDependencyError,
    NotFoundError,
    PartialIndexWarning,
    StoreError,
)
from lossless.large_files import DEFAULT_PAGE_BYTES
from lossless.observability import timed
from lossless.ports import SearchVectorStore, Store
from lossless.records import Grant, LargeFile, parse_timestamp
from lossless.retrieval import (
    Caller,
    ExpandResult,
    FileView,
    GrepOptions,
    GrepResult,
    MessageView,
    Retriever,
    SummaryDescription,
)
from lossless.retrieval.access import check_grant
from lossless.retrieval.dag import DEFAULT_MAX_DEPTH
from lossless.retrieval.expansion import ExpandQueryResult, new_grant_id
from lossless.retrieval.expansion import expand_query as run_expand_query
from lossless.retrieval.semantic import INDEX_BUILDING_NOTE
from lossless.retrieval.service import conversation_named
from lossless.subagent import DEFAULT_MAX_TOKENS as DEFAULT_EXPANSION_ANSWER_TOKENS
from lossless.subagent import ExpansionRunner
from lossless.tokens import TokenCounter

if TYPE_CHECKING:
    from lossless.memory.message_index import BuildProgress, VectorBuilder
    from lossless.memory.messages import MessageSearch
    from lossless.memory.service import MemoryService

__all__ = ["DEFAULT_GRANT_TTL", "MAX_GRANT_TOKEN_CAP", "MAX_GRANT_TTL", "MIN_GRANT_TTL", "Recall"]

_MAX_LABEL = 200

log = logging.getLogger("lossless.index")

#: A background build step of this process within this many seconds means something here builds the index.
_BUILDER_SEEN_S = 60.0


def _time_bound(name: str, value: datetime | str | None) -> datetime | None:
    """A grep's ``since`` / ``before``: a ``datetime``, or ISO-8601 text; bad text says what to write."""
    if not isinstance(value, str):
        return value
    try:
        return parse_timestamp(value)
    except InputError as exc:
        raise InputError(
            f"{name} {value!r} is not a time: write an ISO-8601 date or time, like 2026-01-31 or "
            "2026-01-31T12:00Z (UTC when no zone is given)"
        ) from exc


@dataclass(frozen=True, slots=True)
class IndexBuild:
    """What :meth:`Recall.build_index` did: items embedded for search, memories given vectors of the
    current embedder, and messages mined for long-term memories."""

    embedded: int = 0
    memories_embedded: int = 0
    mined: int = 0


class Recall:
    """``grep``, ``describe``, ``expand``, ``expand_query``, expansion grants and search-vector building."""

    def __init__(
        self,
        store: Store,
        config: Config,
        *,
        tokens: TokenCounter,
        clock: Callable[[], datetime],
        read_file: Callable[[LargeFile], Awaitable[bytes]],
        memory: Callable[..., MemoryService],
        runner: Callable[[], ExpansionRunner],
        mine_step: Callable[[], Awaitable[int]] | None = None,
        memory_vectors_step: Callable[[], Awaitable[int]] | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.tokens = tokens
        self._clock = clock
        self._memory = memory
        self._runner = runner
        self._mine_step = mine_step
        self._memory_vectors_step = memory_vectors_step
        self.retriever = Retriever(
            store, read_file=read_file, clock=clock, semantic=self._message_search, counter=tokens
        )
        self._vector_builder: VectorBuilder | None = None
        #: Why this engine builds no vectors in the background (e.g. the embeddings extra is missing).
        self.vector_build_off: str | None = None
        #: When this process last ran a background build step (a worker's idle work, ``index_in_background``).
        self._built_at: float | None = None
        self._warned_partial = False

    def _message_search(self) -> MessageSearch:
        from lossless.memory.messages import MessageSearch

        return MessageSearch(self.store, self._memory(), memory_for=self._memory)

    # -- search vectors, built in the background (never by a search)

    def vector_builder(self) -> VectorBuilder:
        """The builder of this store's search vectors, with the memory embedder (made on first use)."""
        if self._vector_builder is None:
            from lossless.memory.message_index import VectorBuilder

            if not isinstance(self.store, SearchVectorStore):
                raise StoreError(f"the {self.store.backend} store keeps no search vectors")
            self._vector_builder = VectorBuilder(self.store, self._memory().embedder)
        return self._vector_builder

    async def index_step(self) -> int:
        """Embed and store one batch of messages or summaries that have no search vectors yet (0: none left)."""
        return await self.vector_builder().step()

    async def index_progress(self, conversation: int | str | None = None) -> BuildProgress:
        """How much of the store (or of one conversation) has search vectors, and the build's measured rate."""
        ids = None
        if conversation is not None:
            found = await self.retriever.conversation_id_for(Caller(self.config.agent_id), conversation)
            ids = [found] if found is not None else None
        return await self.vector_builder().progress(ids)

    async def build_index(self) -> IndexBuild:
        """Run the background build to its end now (what ``lcm index`` does): the search vectors of every
        message and summary, vectors of the current embedder for every memory, and (with
        ``memory_auto_extract``) the mining of every message nothing mined yet.

        A host with no background worker (no ``engine.background()``, ``lcm worker``, ``lcm mcp``) calls
        this after storing history, before asking ``grep(mode="hybrid")`` questions of it: until the
        build has run, messages are found by their words alone (the result's note says how much is
        embedded).  Raises :class:`~lossless.errors.MissingDependencyError` without an embedder.
        """
        embedded = revectored = mined = 0
        while done := await self.index_step():
            embedded += done
        while self._memory_vectors_step is not None and (done := await self._memory_vectors_step()):
            revectored += done
        while self._mine_step is not None and (done := await self._mine_step()):
            mined += done
        return IndexBuild(embedded, revectored, mined)

    async def index_in_background(self, poll_s: float = 2.0) -> None:
        """Build search vectors as they are needed, until cancelled (the MCP server runs this beside its session).

        Each step is one batch; with nothing to build it looks again every ``poll_s`` seconds.  A
        failing step is logged and retried later: a server never stops for it.
        """
        while True:
            try:
                busy = await self.run_idle_step()
            except Exception as exc:  # e.g. a locked store: try again later
                log.warning("background build of search vectors: %s", exc)
                busy = False
            if self.vector_build_off is not None:
                return
            await anyio.sleep(0 if busy else poll_s)

    async def run_idle_step(self) -> bool:
        """A background worker's idle work: one build step of search vectors, one batch of memories without
        vectors of the current embedder, then (with ``memory_auto_extract``) one batch of the messages nothing
        mined for memories yet; False when there is nothing (or no way) to build.
        """
        if self.vector_build_off is not None:
            return False
        self._built_at = time.monotonic()
        try:
            builder = self.vector_builder()
            built = await builder.step() > 0
            revectored = self._memory_vectors_step is not None and await self._memory_vectors_step() > 0
            mined = self._mine_step is not None and await self._mine_step() > 0
            return built or revectored or mined
        except MissingDependencyError as exc:  # e.g. no embeddings extra: nothing to build with
            reason: str | None = str(exc)
        except StoreError as exc:  # a store without search vectors; a passing error (a lock) is retried
            if self._vector_builder is not None:
                raise
            reason = str(exc)
        self.vector_build_off = reason
        log.info("no background build of search vectors: %s", reason)
        return False

    async def _retrieval_target(
        self, caller: Caller | None, conversation: int | str | None, all_conversations: bool
    ) -> tuple[Caller, int | None, bool]:
        """The caller (default: this engine's agent as an operator, reaching all its conversations) and target."""
        who = caller or Caller(self.config.agent_id)
        conversation_id = await self.retriever.conversation_id_for(who, conversation)
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
        context: int = 0,
        caller: Caller | None = None,
    ) -> GrepResult:
        """Search stored messages and summaries, or stored files (``scope="files"``); see :mod:`lossless.retrieval`.

        ``mode`` is ``regex``, ``full_text``, or ``semantic`` / ``hybrid`` (messages and summaries by
        meaning, with the long-term memory's embedder; not ``scope="files"``).  To answer a question,
        ``mode="hybrid"`` (or ``"full_text"`` with ``sort="relevance"``) ranks best; ``context=N`` returns
        each message hit with the N turns before and after it.

        Without ``caller`` the search runs as this engine's agent over all its
        conversations (or ``conversation``); an agent's own calls pass its
        :class:`Caller` so its reach applies.
        """
        who, wide = caller or Caller(self.config.agent_id), True if caller is None else all_conversations
        named = conversation_named(conversation)  # a session id is looked up with the reach (one round trip)
        options = GrepOptions(
            pattern,
            mode=mode,
            scope=scope,
            since=_time_bound("since", since),
            before=_time_bound("before", before),
            limit=limit,
            sort=sort,
            context=context,
        )
        if isinstance(named, str):
            result = await self.retriever.grep(who, options, session=named, all_conversations=wide)
        else:
            result = await self.retriever.grep(who, options, conversation_id=named, all_conversations=wide)
        if mode in ("semantic", "hybrid"):
            self._warn_if_unbuilt(result)
        return result

    def _warn_if_unbuilt(self, result: GrepResult) -> None:
        """Warn once when a search by meaning answered from a partial index that nothing here is building.

        A host that stores history and then asks questions, with no worker, would otherwise rank by words
        alone for good and never know it but by the result's note.
        """
        if self._warned_partial or not any(note.startswith(INDEX_BUILDING_NOTE) for note in result.notes):
            return
        if self._built_at is not None and time.monotonic() - self._built_at < _BUILDER_SEEN_S:
            return  # a worker or index_in_background of this process is building it
        self._warned_partial = True
        warnings.warn(
            f"grep(mode={result.options.mode!r}) answered from a partial semantic index (the rest by its words "
            "alone), and nothing in this process is building it. Call `await engine.build_index()` after storing "
            "history, or run a background worker (`async with engine.background():`, `lcm worker`); "
            "`lcm index` builds it from a shell. Ignore this where a worker in another process builds it.",
            PartialIndexWarning,
            stacklevel=4,  # the caller of engine.grep (through the metrics wrapper)
        )

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
    ) -> SummaryDescription | FileView | MessageView:
        """A summary (``sum_…``: content, lineage, sizes), stored file (``file_…``: metadata, a page of lines)
        or message (``msg#N``: where it sits and its whole content)."""
        who, conversation_id, wide = await self._retrieval_target(caller, conversation, all_conversations)
        return await self.retriever.describe(
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
        return await self.retriever.expand(
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
        who, conversation_id, wide = await self._retrieval_target(caller, conversation, all_conversations)
        timeout_s = self.config.delegation_timeout_ms / 1000
        return await run_expand_query(
            self.retriever,
            who,
            runner or self._runner(),
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

    # -- expansion grants for sub-agents the host runs itself (``lcm mcp --grant``)

    async def grant_expansion(
        self,
        conversations: Sequence[int | str],
        *,
        token_cap: int | None = None,
        ttl: timedelta = DEFAULT_GRANT_TTL,
        grantee: str | None = None,
    ) -> Grant:
        """Mint a durable expansion grant over ``conversations`` (ids or session ids) of this engine's agent.

        The grant lets a sub-agent read exactly those conversations (``lcm mcp --grant ID``: only
        ``lcm_grep``, ``lcm_describe`` and ``lcm_expand``), at most ``token_cap`` tokens of expansion
        (default ``max_expand_tokens``), until ``ttl`` (1 s to 24 h, default 10 minutes) has passed
        or :meth:`revoke_expansion_grant` ends it.  ``grantee`` names the sub-agent (its session key).
        A conversation of another agent is refused (:class:`AccessDeniedError`), an unknown session
        id is :class:`NotFoundError`, and the grant is not created.
        """
        given: object = conversations
        if isinstance(given, (str, bytes)) or not isinstance(given, Sequence) or not given:
            raise InputError(
                f"conversations must be a non-empty list of conversation ids or session ids, got {conversations!r}"
            )
        cap: object = self.config.max_expand_tokens if token_cap is None else token_cap
        if type(cap) is not int or not 1 <= cap <= MAX_GRANT_TOKEN_CAP:
            raise InputError(f"token_cap must be an integer from 1 to {MAX_GRANT_TOKEN_CAP:,}, got {token_cap!r}")
        span: object = ttl
        if not isinstance(span, timedelta) or not MIN_GRANT_TTL <= span <= MAX_GRANT_TTL:
            shown = str(span) if isinstance(span, timedelta) else repr(ttl)
            raise InputError(f"ttl must be a duration from 1 second to 24 hours, got {shown}")
        label: object = grantee
        if label is not None and (
            not isinstance(label, str) or not label.strip() or len(label) > _MAX_LABEL or not label.isprintable()
        ):
            raise InputError(
                f"grantee must be a non-empty printable name of at most {_MAX_LABEL} characters, got {grantee!r}"
            )
        agent = self.config.agent_id
        retriever = self.retriever
        operator = Caller(agent)
        own = {cid for cid, _, _ in await self.store.list_conversation_links(agent)}
        chosen: list[int] = []
        for conversation in conversations:
            if isinstance(conversation, int) and not isinstance(conversation, bool) and conversation < 1:
                raise InputError(f"a conversation id must be a positive integer, got {conversation!r}")
            cid = await retriever.conversation_id_for(operator, conversation)
            assert cid is not None
            if cid not in own:
                raise AccessDeniedError(
                    f"conversation {cid} is not a conversation of agent {agent!r}: a grant covers only "
                    "conversations of the agent that grants it (run as that agent with --agent)"
                )
            chosen.append(cid)
        now = self._clock()
        await self.store.sweep_grants(now)
        grant = Grant(
            id=new_grant_id(),
            agent_id=agent,
            grantee=f"lcm-subagent:{secrets.token_hex(4)}" if grantee is None else grantee,
            conversation_ids=tuple(sorted(set(chosen))),
            token_cap=cap,
            created_at=now,
            expires_at=now + span,
        )
        await self.store.create_grant(grant)
        return grant

    async def expansion_grant(self, grant_id: str) -> Grant:
        """The stored grant ``grant_id`` of this engine's agent (:class:`NotFoundError` if none or another's)."""
        given: object = grant_id
        if not isinstance(given, str) or not given:
            raise InputError(f"grant_id must be a grant id like grant_…, got {grant_id!r}")
        grant = await self.store.get_grant(grant_id)
        if grant is None or grant.agent_id != self.config.agent_id:
            raise NotFoundError(
                "grant", grant_id, f"grants are per agent; this is agent {self.config.agent_id!r} (see --agent)"
            )
        return grant

    async def usable_grant(self, grant_id: str) -> Grant:
        """Grant ``grant_id`` of this engine's agent if a sub-agent may use it now (``lcm mcp --grant``).

        Refused with :class:`~lossless.retrieval.AccessDenied` when it is another agent's, unknown,
        revoked or expired.
        """
        return await check_grant(self.store, Caller(self.config.agent_id, grant_id=grant_id), self._clock())

    async def revoke_expansion_grant(self, grant_id: str, reason: str = "revoked") -> bool:
        """End grant ``grant_id`` now: a sub-agent holding it is refused at its next call.

        True if this call revoked it; False if it had already ended (revoked, or expired).
        """
        why: object = reason
        if not isinstance(why, str) or not why.strip() or len(why) > _MAX_LABEL or not why.isprintable():
            raise InputError(
                f"reason must be a non-empty printable text of at most {_MAX_LABEL} characters, got {reason!r}"
            )
        grant = await self.expansion_grant(grant_id)
        now = self._clock()
        if not grant.usable(now):
            if grant.revoked_at is None:
                await self.store.revoke_grant(grant.id, "expired", now)
            return False
        return await self.store.revoke_grant(grant.id, reason, now)
