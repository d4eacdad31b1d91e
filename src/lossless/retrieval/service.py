"""The retrieval service: grep, describe and expand, each run as a caller within its reach.

Invariants:

* Every call resolves the caller's reach first (:mod:`lossless.retrieval.access`)
  and reads nothing outside it; summary and file ids out of reach are
  :class:`~lossless.errors.NotFoundError`, exactly as ids that do not exist.
* Under a grant, **every read is charged** to the grant's token cap: the
  summaries and messages ``expand`` returns, the text ``describe`` shows (a
  summary, or a page of a file) and the matches ``grep`` lists.  The charge
  is a reservation taken in one atomic step by the store (a conditional
  update), made before anything is returned and cut down to what the grant
  has left: the result is shortened to fit, and what it did not use is given
  back.  So the tokens returned by all reads under one grant, concurrent ones
  included, never add up to more than its cap; once it is spent, each read is
  refused with a message saying so.  A revoked or expired grant stops every
  tool at its next call.
* **A grep needs one request where the store allows it.**  On a store that reads the caller's
  conversation links and runs searches in one request (:class:`~lossless.ports.ReachSearchStore`),
  grep sends its first pages for the reach the same kind of call had last time; they are used
  only when the reach worked out from the links of that same request is that one (so they are
  what a search after the reach would have read), else the search runs again.  A guess never
  widens what a caller reads: every returned row comes from a search of exactly its reach.
* No I/O beyond the :class:`~lossless.ports.Store` port, the ``read_file``
  callable it is given (the engine supplies one that reads the blob store) and
  the ``semantic`` search port (the engine supplies the memory layer's
  :class:`~lossless.memory.messages.MessageSearch`, built on first use, which searches
  messages and summaries).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import anyio

from lossless.errors import InputError, MissingDependencyError, NotFoundError, check_integer, check_unicode
from lossless.large_files import DEFAULT_PAGE_BYTES, Page, page_lines
from lossless.ports import ReachSearchStore, SearchRequest, SearchRow, Store
from lossless.records import JSONValue, LargeFile, MessageRecord, Summary, format_timestamp, utcnow
from lossless.retrieval.access import AccessDenied, Caller, Reach, check_reach_options, reach_from_links, resolve_reach
from lossless.retrieval.dag import (
    DEFAULT_MAX_DEPTH,
    ExpandResult,
    SummaryDescription,
    describe_summary,
    expand,
    validate_expand_options,
)
from lossless.retrieval.files import grep_files
from lossless.retrieval.grep import SEMANTIC_MODES, GrepOptions, GrepResult, first_page_requests, grep, with_context
from lossless.retrieval.hybrid import keyword_hits, keyword_requests
from lossless.retrieval.semantic import SemanticSearch, grep_semantic
from lossless.tokens import EstimatingCounter, TokenCounter

__all__ = ["FileView", "MessageView", "Retriever", "conversation_named", "message_id_of"]

_QUERY_HITS = 5
#: Reaches remembered as guesses for the next grep of the same kind of call: at most this many, holding
#: at most this many conversation ids together (then they are forgotten; a reach larger is not kept).
_REACH_GUESSES = 256
_GUESSED_IDS = 100_000


def conversation_named(conversation: int | str | None) -> int | str | None:
    """A conversation as a caller names it, checked: its id (an int, or digits), a session id to look up, or None."""
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
    return conversation


def _no_session(session: str) -> NotFoundError:
    return NotFoundError("conversation", session, "give a conversation id or a session id")


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
        counter: TokenCounter | None = None,
    ) -> None:
        self.store = store
        self.counter = counter or EstimatingCounter()
        self._read_file = read_file
        self._clock = clock
        self._make_semantic = semantic
        self._semantic: SemanticSearch | None = None
        #: Why no embedder can run here (a package missing), once a search found out: hybrid then ranks by words.
        self._no_embedder: str | None = None
        #: The reach each kind of grep call had last time: a guess, checked before it is used (:meth:`_grep_reach`).
        self._reach_guesses: dict[tuple[str, str | None, str | None, int | str | None, bool], tuple[int, ...]] = {}

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
        named = conversation_named(conversation)
        if not isinstance(named, str):
            return named
        found = await self.store.find_conversation(agent_id=caller.agent_id, session_id=named)
        if found is None:
            raise _no_session(named)
        return found.id

    # -- grep

    async def grep(
        self,
        caller: Caller,
        options: GrepOptions,
        *,
        conversation_id: int | None = None,
        all_conversations: bool = False,
        session: str | None = None,
    ) -> GrepResult:
        """Search within the caller's reach; ``session``: the conversation named by one of the caller's agent's
        session ids instead of ``conversation_id`` (looked up with the reach, in the same round trip where the
        store allows it; :class:`~lossless.errors.NotFoundError` when the agent has no such session)."""
        if session is not None:
            if conversation_id is not None:
                raise InputError("pass conversation_id or session, not both")
            named = conversation_named(session)
            if not isinstance(named, str):  # digits name an id (as conversation_id_for reads them)
                conversation_id, session = named, None
        reach, requests, first_pages = await self._grep_reach(
            caller, options, conversation_id, all_conversations, session
        )
        if options.scope == "files":
            result = await grep_files(self.store, options, reach.conversation_ids, self._read_file)
        else:
            if options.mode in SEMANTIC_MODES:
                ahead = dict(zip(requests, first_pages, strict=True)) if first_pages is not None else None
                found = await self._grep_semantic(caller, options, reach.conversation_ids, ahead)
            else:
                found = await grep(
                    self.store, options, reach.conversation_ids, first_pages=first_pages, rank_any_word=keyword_hits
                )
            result = await with_context(self.store, found)
        if reach.grant is None or not result.hits:
            return result
        costs = [self.counter.count(hit.render()) for hit in result.hits]
        taken = await self._reserve(reach, sum(costs), "these matches")
        kept, used = 0, 0
        while kept < len(costs) and used + costs[kept] <= taken:
            used += costs[kept]
            kept += 1
        await self._release(reach, taken - used)
        if kept == 0:
            raise self._spent(reach, taken, costs[0], "the first match")
        if kept == len(costs):
            return result
        note = (
            f"(showing {kept} of {len(costs)} matches: grant {reach.grant.id!r} has no tokens left for the rest; "
            "answer with what was read)"
        )
        return replace(result, hits=result.hits[:kept], more=True, notes=(*result.notes, note))

    async def _grep_semantic(
        self,
        caller: Caller,
        options: GrepOptions,
        conversation_ids: tuple[int, ...],
        ahead: Mapping[SearchRequest, list[SearchRow]] | None = None,
    ) -> GrepResult:
        """A semantic or hybrid grep; hybrid ranks by words alone, with a note, where no embedder can run.

        ``ahead``: the pages of its keyword searches read with the reach
        (:func:`~lossless.retrieval.hybrid.keyword_requests`).
        """
        if self._no_embedder is None or options.mode != "hybrid":
            try:
                return await grep_semantic(
                    self.store, options, conversation_ids, self.semantic_search(), agent=caller.agent_id, ahead=ahead
                )
            except MissingDependencyError as exc:
                if options.mode != "hybrid":
                    raise
                self._no_embedder = str(exc)  # the package stays missing until the process restarts
        return await grep_semantic(
            self.store, options, conversation_ids, None, agent=caller.agent_id, without_meaning=self._no_embedder
        )

    async def _grep_reach(
        self,
        caller: Caller,
        options: GrepOptions,
        conversation_id: int | None,
        all_conversations: bool,
        session: str | None = None,
    ) -> tuple[Reach, list[SearchRequest], list[list[SearchRow]] | None]:
        """The caller's reach and, where the store can read it in the same request, the search's first pages
        (with the requests they answer: a ``hybrid`` grep's are its keyword searches').

        A store that reads the caller's conversation links and searches in one request
        (:class:`~lossless.ports.ReachSearchStore`) is sent the first page of each scope for the
        reach this kind of call had last time (a guess), together with the links.  The reach is
        then worked out from those links exactly as :meth:`reach` does, and the pages are used
        only when it is the guessed one: both were read from one state of the store, so they are
        the pages a search after the reach would have read.  Otherwise (the first call, or the
        reach changed) the search reads its pages itself.  A caller holding a grant takes the
        usual path (its grant is re-checked on every call).  ``session`` (a session id of the caller's
        agent naming the conversation searched) is looked up in the same request, then treated as
        ``conversation_id``; the guess is kept under the session id.
        """
        store = self.store
        if caller.grant_id is not None or not isinstance(store, ReachSearchStore):
            if session is not None:
                conversation_id = await self.conversation_id_for(caller, session)
            reach = await self.reach(caller, conversation_id=conversation_id, all_conversations=all_conversations)
            return reach, [], None
        check_reach_options(conversation_id, all_conversations)
        target = conversation_id if session is None else session
        key = (caller.agent_id, caller.session_key, caller.session_id, target, all_conversations)
        guess = self._reach_guesses.get(key)
        if guess is None:
            requests = None
        elif options.mode == "hybrid" and self._no_embedder is None:  # its keyword searches' first pages
            requests = keyword_requests(options, guess) or None
        else:
            requests = first_page_requests(options, guess)
        read = await store.search_with_links(
            caller.agent_id,
            requests or [],
            session_id=caller.session_id,
            session_key=caller.session_key,
            named_session=session,
        )
        if session is not None:
            if read.named is None:
                raise _no_session(session)
            conversation_id = read.named
        reach = reach_from_links(
            caller, read.links, read.own, conversation_id=conversation_id, all_conversations=all_conversations
        )
        guesses, ids = self._reach_guesses, reach.conversation_ids
        guesses.pop(key, None)
        if len(guesses) >= _REACH_GUESSES or sum(map(len, guesses.values())) + len(ids) > _GUESSED_IDS:
            guesses.clear()
        if len(ids) <= _GUESSED_IDS:
            guesses[key] = ids
        if requests is None or guess != reach.conversation_ids:
            return reach, [], None
        return reach, requests, read.pages

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
                f"{item_id!r} is not an id that can be opened: give a summary id (sum_…), a file id (file_…) or "
                "a message id (msg#N), as grep's matches cite them"
            )
        check_unicode(item_id, "id")
        reach = await self.reach(caller, conversation_id=conversation_id, all_conversations=all_conversations)
        if message_id is not None:
            messages = await self.store.get_messages_by_id([message_id])
            if not messages or not reach.allows(messages[0].conversation_id):
                raise NotFoundError("message", item_id, "message ids appear in search results as msg#N")
            return MessageView(messages[0])
        if item_id.startswith("sum_"):
            described = await describe_summary(self.store, await self.find_summary(item_id, reach), token_cap=token_cap)
            return described if reach.grant is None else await self._charge_description(reach, described)
        found = await self.store.get_large_file(item_id)
        if found is None or not reach.allows(found.conversation_id):
            raise NotFoundError("file", item_id, "file ids appear in messages as file_… references")
        if self._read_file is None:
            raise InputError("this retriever was set up without access to file contents")
        data = await self._read_file(found)
        view = FileView(found, page_lines(data, start_line=start_line, end_line=end_line, max_bytes=max_bytes))
        if reach.grant is None:
            return view
        return await self._charge_file_page(reach, view, data, start_line, end_line, max_bytes)

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
        if reach.grant is None or result.estimated_tokens == 0:
            return result
        taken = await self._reserve(reach, result.estimated_tokens, "this expansion")
        if taken < result.estimated_tokens:  # concurrent reads spent part of the cap: expand less
            try:
                result = await expand(
                    self.store, roots, max_depth=max_depth, token_cap=taken, include_messages=include_messages
                )
            except BaseException:
                await self._release(reach, taken)
                raise
        await self._release(reach, taken - result.estimated_tokens)
        if result.estimated_tokens == 0 and result.truncated:
            raise self._spent(reach, taken, None, "this expansion")
        return result

    # -- charging reads to a grant

    async def _reserve(self, reach: Reach, tokens: int, what: str) -> int:
        """Take up to ``tokens`` from the grant (atomically); refuse when it is spent or no longer usable."""
        assert reach.grant is not None
        taken = await self.store.reserve_grant(reach.grant.id, tokens, self._clock())
        if taken is None:
            raise AccessDenied(f"grant {reach.grant.id!r} ended (revoked or expired); answer with what was read")
        if taken == 0:
            raise self._spent(reach, 0, tokens, what)
        return taken

    async def _release(self, reach: Reach, tokens: int) -> None:
        assert reach.grant is not None
        if tokens > 0:
            with anyio.CancelScope(shield=True):  # a cancelled read still gives back what it did not use
                await self.store.release_grant(reach.grant.id, tokens)

    @staticmethod
    def _spent(reach: Reach, left: int, needed: int | None, what: str) -> AccessDenied:
        assert reach.grant is not None
        need = f" ({what} needs ~{needed:,})" if needed is not None else ""
        return AccessDenied(
            f"grant {reach.grant.id!r} has {left:,} of its {reach.grant.token_cap:,}-token cap left, not enough for "
            f"{what}{need}: the cap bounds everything read under the grant (grep, describe, expand); "
            "answer with what was read"
        )

    async def _charge_description(self, reach: Reach, described: SummaryDescription) -> SummaryDescription:
        """Charge a summary's description; its text is cut to what the grant has left."""
        needed = self.counter.count(described.render())
        taken = await self._reserve(reach, needed, "this description")
        if taken >= needed:
            await self._release(reach, taken - needed)
            return described
        content = described.summary.content
        marker = "\n… (cut here: the grant's token cap is spent)"
        bare = replace(described, summary=replace(described.summary, content=marker))
        room = taken - self.counter.count(bare.render())
        if room <= 0:
            await self._release(reach, taken)
            raise self._spent(reach, taken, needed, "this description")

        def cut_at(n: int) -> SummaryDescription:
            return replace(described, summary=replace(described.summary, content=content[:n] + marker))

        # The longest prefix whose whole description fits: counted rendered, since a tokenizer's counts
        # of two pieces need not add up to the count of the two together.
        low, high = 0, len(content)
        while low < high:
            middle = (low + high + 1) // 2
            if self.counter.count(cut_at(middle).render()) <= taken:
                low = middle
            else:
                high = middle - 1
        cut = cut_at(low)
        await self._release(reach, taken - min(taken, self.counter.count(cut.render())))
        return cut

    async def _charge_file_page(
        self,
        reach: Reach,
        view: FileView,
        data: bytes,
        start_line: int | None,
        end_line: int | None,
        max_bytes: int,
    ) -> FileView:
        """Charge one page of a file; the page is shortened to what the grant has left."""
        needed = self.counter.count(view.render())
        taken = await self._reserve(reach, needed, "this page of the file")
        cost = needed
        while cost > taken and max_bytes > 1:
            max_bytes = max(1, max_bytes * taken // (cost + 1))
            page = page_lines(data, start_line=start_line, end_line=end_line, max_bytes=max_bytes)
            view = FileView(view.file, page)
            cost = self.counter.count(view.render())
        if cost > taken:
            await self._release(reach, taken)
            raise self._spent(reach, taken, needed, "this page of the file")
        await self._release(reach, taken - cost)
        return view
