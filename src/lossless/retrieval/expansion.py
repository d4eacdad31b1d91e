"""expand_query: answer a question from compacted history through a sub-agent that holds a temporary grant.

Flow: resolve the asking caller's reach; find the target summaries (given, or
by a full-text query); create a durable grant over just the conversations that
hold them (token cap, expiry); run a sub-agent as a caller holding that grant,
with only ``lcm_grep``, ``lcm_describe`` and ``lcm_expand``; return its answer
(at most ``max_tokens``) with the ids it cites; revoke the grant.

Invariants:

* **The grant always ends.**  It is revoked when the sub-agent completes,
  fails or times out (``completed`` / ``error`` / ``timeout``), in a shielded
  step that cancellation cannot skip; if the process dies first, its expiry
  ends it, and every expand_query sweeps expired grants.
* **No recursion.**  A caller holding a grant, or any code running inside a
  sub-agent (a context variable marks it), cannot start another expansion.
* **Bounded answer.**  The answer is cut to ``max_tokens`` (by the engine's
  token counter) whatever the runner returns.
* The runner is a port (:class:`~lossless.subagent.ExpansionRunner`, re-exported here): the
  offline default here is deterministic; LLM runners live with the providers.
"""

from __future__ import annotations

import contextvars
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import anyio

from lossless.errors import InputError, LcmError
from lossless.records import Grant, JSONValue, parse_timestamp, utcnow
from lossless.retrieval.access import AccessDenied, Caller
from lossless.retrieval.answers import Passage, extractive_answer
from lossless.retrieval.grep import GrepOptions, grep
from lossless.retrieval.service import Retriever
from lossless.retrieval.toolcalls import ToolOutcome, call_tool
from lossless.subagent import DEFAULT_MAX_TOKENS, ExpansionAnswer, ExpansionRunner, ExpansionTask, SubagentTools
from lossless.tokens import TokenCounter

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "LEAD_MESSAGES",
    "ExpandQueryResult",
    "ExpansionAnswer",
    "ExpansionRunner",
    "ExpansionTask",
    "ExpansionTools",
    "Leads",
    "OfflineExpansionRunner",
    "expand_query",
    "new_grant_id",
]

#: How many matches the offline runner asks for (the grant's token cap may return fewer).
SEARCH_LIMIT = 60
#: How many messages the memory leads add at most (the provenance of the best memories, in their order).
LEAD_MESSAGES = 10
#: Where the offline runner can ask long-term memory for leads: (question, conversation ids) → the
#: source message ids of the memories that answer it best, best first.
Leads = Callable[[str, tuple[int, ...]], Awaitable[Sequence[int]]]
log = logging.getLogger("lossless.retrieval")
_IN_SUBAGENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("lossless_expansion", default=None)


class ExpansionTools:
    """The sub-agent's tools, bound to its grant-holding caller; every call goes through the grant checks."""

    def __init__(self, retriever: Retriever, caller: Caller) -> None:
        self.retriever = retriever
        self.caller = caller
        self.calls = 0

    async def call(self, name: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Run ``lcm_grep`` / ``lcm_describe`` / ``lcm_expand``; a refusal (grant ended) raises AccessDenied."""
        self.calls += 1
        outcome = await call_tool(self.retriever, self.caller, name, arguments)
        if outcome.denied:
            raise AccessDenied(outcome.text.removeprefix("denied: "))
        return outcome


@dataclass(frozen=True, slots=True)
class ExpandQueryResult:
    answer: str
    cited: tuple[str, ...]
    grant_id: str | None
    runner: str
    status: str
    tool_calls: int = 0
    targets: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "answer": self.answer,
            "cited": list(self.cited),
            "grant_id": self.grant_id,
            "runner": self.runner,
            "status": self.status,
            "tool_calls": self.tool_calls,
            "targets": list(self.targets),
        }


# ---------------------------------------------------------------------- the offline runner


class OfflineExpansionRunner:
    """Deterministic sub-agent: grep → expand → a short extractive answer, each sentence cited.

    It reads like a careful human would without a model: expand the target
    summaries down to their messages (within the grant), or take the best
    full-text matches of the query, and answer with the few sentences that
    answer the question (:func:`lossless.retrieval.answers.extractive_answer`:
    a *when* question gets the date written out), each with its ``[msg#id]``,
    within ``max_tokens``.

    With ``leads`` (the engine passes its long-term memory's search), the source
    messages of the memories that best match the question join the search's
    matches, at the memory's rank: a memory is written in words a search finds
    more easily than the chat turn it came from ("Maya's cousin Oskar is getting
    married" for "My cousin is getting married").  Each is read through
    ``lcm_describe``, so the grant decides what may be read; a lead that fails
    (no memory, no embedder) is skipped and the search's matches answer alone.
    """

    name = "offline"

    def __init__(self, counter: TokenCounter, leads: Leads | None = None) -> None:
        self.counter = counter
        self.leads = leads

    async def run(self, task: ExpansionTask, tools: SubagentTools) -> ExpansionAnswer:
        summary_ids = list(task.summary_ids)
        passages: list[Passage] = []
        if not summary_ids and task.query:
            passages, summary_ids = await self._search(task, tools)
        if summary_ids:
            expanded = await tools.call(
                "lcm_expand",
                {
                    "summary_ids": list(dict.fromkeys(summary_ids))[:50],
                    "include_messages": True,
                    "max_depth": 64,
                    "all_conversations": True,
                },
            )
            for message in expanded.data.get("messages", []) or []:  # type: ignore[union-attr]
                assert isinstance(message, dict)
                cite = f"msg#{message['message_id']}"
                passages.append(_passage(cite, message.get("content"), message.get("created_at")))
            if not expanded.data.get("messages"):
                for summary in expanded.data.get("summaries", []) or []:  # type: ignore[union-attr]
                    assert isinstance(summary, dict)
                    passages.append(_passage(str(summary["summary_id"]), summary.get("content"), None))
        return self._answer(task, passages, summary_ids)

    async def _search(self, task: ExpansionTask, tools: SubagentTools) -> tuple[list[Passage], list[str]]:
        """The best matches of the question (by meaning and words), each with the turns around it.

        The grant's token cap bounds what is read: the search returns as many matches as fit, the best
        first.  Only when no message matches are the best few matching summaries expanded instead.
        """
        assert task.query is not None
        # By meaning first (the question's own words, so paraphrases are found), else by the query's words.
        base = {"limit": SEARCH_LIMIT, "context": 1, "scope": "messages", "all_conversations": True}
        found = await tools.call("lcm_grep", {"pattern": task.prompt[:1000], "mode": "hybrid", **base})
        if found.error or not found.data.get("matches"):
            found = await tools.call(
                "lcm_grep", {"pattern": task.query, "mode": "full_text", "sort": "relevance", **base}
            )
        passages: list[Passage] = []
        seen: set[str] = set()
        for rank, match in enumerate(found.data.get("matches", []) or []):  # type: ignore[arg-type]
            assert isinstance(match, dict)
            cite = f"msg#{match['id']}"
            conversation = match.get("conversation_id")
            where = conversation if isinstance(conversation, int) else None
            if cite not in seen:
                seen.add(cite)
                passages.append(_passage(cite, match.get("snippet"), match.get("created_at"), rank, where))
            for turn in match.get("context", []) or []:  # type: ignore[union-attr]
                assert isinstance(turn, dict)
                near = f"msg#{turn['id']}"
                if near not in seen:
                    seen.add(near)
                    passages.append(_passage(near, turn.get("text"), turn.get("created_at"), rank, where, True))
        if self.leads is not None:
            passages = await self._with_leads(task, tools, passages)
        summaries: list[str] = []
        if not passages:
            matched = await tools.call(
                "lcm_grep",
                {"pattern": task.query, "mode": "full_text", "sort": "relevance", "scope": "summaries",
                 "limit": 5, "all_conversations": True},
            )  # fmt: skip
            for match in matched.data.get("matches", []) or []:  # type: ignore[union-attr]
                assert isinstance(match, dict)
                summaries.append(str(match["id"]))
        return passages, summaries

    async def _with_leads(self, task: ExpansionTask, tools: SubagentTools, passages: list[Passage]) -> list[Passage]:
        """``passages`` with the memory leads' messages: one already read moves up to the lead's rank."""
        assert self.leads is not None
        try:
            lead_ids = list(dict.fromkeys(await self.leads(task.prompt, task.conversation_ids)))[:LEAD_MESSAGES]
        except LcmError as exc:
            log.info("expand_query: no memory leads (%s)", exc)
            return passages
        out = list(passages)
        where = {p.cite: index for index, p in enumerate(out)}
        for rank, message_id in enumerate(lead_ids):
            cite = f"msg#{message_id}"
            if cite in where:
                p = out[where[cite]]
                better = rank if p.rank is None else min(p.rank, rank)
                out[where[cite]] = Passage(p.cite, p.text, p.created_at, better, False, p.conversation_id)
                continue
            read = await tools.call("lcm_describe", {"id": cite, "all_conversations": True})
            if read.error:
                continue
            conversation = read.data.get("conversation_id")
            where[cite] = len(out)
            out.append(
                _passage(
                    cite,
                    read.data.get("content"),
                    read.data.get("created_at"),
                    rank,
                    conversation if isinstance(conversation, int) else None,
                )
            )
        return out

    def _answer(self, task: ExpansionTask, passages: Sequence[Passage], summary_ids: Sequence[str]) -> ExpansionAnswer:
        question = task.prompt.strip()
        ranked = not task.summary_ids  # found by a search (best first), not expanded targets in order
        words = f"{question} {task.query or ''}"
        found = extractive_answer(words, passages, self.counter, task.max_tokens, ranked=ranked)
        if found is None:
            where = ", ".join(summary_ids[:5]) or "the history in reach"
            return ExpansionAnswer(f"No stored passage answers {question!r} (searched {where}).", tuple(summary_ids))
        text, cited = found
        return ExpansionAnswer(text, tuple(dict.fromkeys([*cited, *summary_ids])))


def _passage(
    cite: str,
    text: object,
    created_at: object,
    rank: int | None = None,
    conversation_id: int | None = None,
    context: bool = False,
) -> Passage:
    when = None
    if isinstance(created_at, str) and created_at:
        try:
            when = parse_timestamp(created_at)
        except ValueError:
            when = None
    return Passage(cite, str(text or ""), when, rank, context, conversation_id)


# ---------------------------------------------------------------------- orchestration


def new_grant_id() -> str:
    """A fresh, unguessable grant id (``grant_`` and 16 hex digits)."""
    return "grant_" + secrets.token_hex(8)


def _cut(text: str, max_tokens: int, counter: TokenCounter) -> str:
    if counter.count(text) <= max_tokens:
        return text
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if counter.count(text[:mid] + " …") <= max_tokens:
            low = mid
        else:
            high = mid - 1
    return text[:low] + " …"


async def expand_query(
    retriever: Retriever,
    caller: Caller,
    runner: ExpansionRunner,
    counter: TokenCounter,
    *,
    prompt: str,
    query: str | None = None,
    summary_ids: Sequence[str] | None = None,
    conversation_id: int | None = None,
    all_conversations: bool = False,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    token_cap: int = 20_000,
    ttl: timedelta = timedelta(minutes=5),
    timeout_s: float = 120.0,
    clock: Callable[[], datetime] = utcnow,
) -> ExpandQueryResult:
    """Answer ``prompt`` from the history in ``caller``'s reach through a sub-agent (see the module docstring)."""
    if caller.grant_id is not None or _IN_SUBAGENT.get() is not None:
        raise AccessDenied(
            "an expansion sub-agent cannot start another expansion: use lcm_grep, lcm_describe and lcm_expand"
        )
    given: object = prompt
    if not isinstance(given, str) or not given.strip():
        raise InputError(f"prompt must be a non-empty question, got {prompt!r}")
    if type(max_tokens) is not int or not 50 <= max_tokens <= 20_000:
        raise InputError(f"max_tokens must be an integer from 50 to 20,000, got {max_tokens!r}")
    if type(token_cap) is not int or token_cap < 1:
        raise InputError(f"token_cap must be a positive integer, got {token_cap!r}")
    if summary_ids is None and query is None:
        raise InputError("expand_query needs a query or summary_ids to start from")
    store = retriever.store
    await store.sweep_grants(clock())
    reach = await retriever.reach(caller, conversation_id=conversation_id, all_conversations=all_conversations)
    targets: list[str] = []
    conversations: set[int] = set()
    if summary_ids is not None:
        if isinstance(summary_ids, str) or not summary_ids:
            raise InputError(f"summary_ids must be a non-empty list of sum_… ids, got {summary_ids!r}")
        for sid in dict.fromkeys(summary_ids):
            found = await retriever.find_summary(sid, reach)
            targets.append(found.id)
            conversations.add(found.conversation_id)
    else:
        assert query is not None
        hits = await grep(store, GrepOptions(query, mode="full_text", limit=20), reach.conversation_ids)
        if not hits.hits:
            note = hits.message or f"no matches for {query!r}"
            return ExpandQueryResult(f"Nothing in the stored history matches: {note}", (), None, runner.name, "empty")
        targets = [str(h.ref) for h in hits.hits if h.scope == "summaries"]
        conversations = {h.conversation_id for h in hits.hits}
    now = clock()
    grant = Grant(
        id=new_grant_id(),
        agent_id=caller.agent_id,
        grantee=f"lcm-expansion:{secrets.token_hex(4)}",
        conversation_ids=tuple(sorted(conversations)),
        token_cap=token_cap,
        created_at=now,
        expires_at=now + ttl,
    )
    await store.create_grant(grant)
    tools = ExpansionTools(retriever, Caller(caller.agent_id, session_key=grant.grantee, grant_id=grant.id))
    task = ExpansionTask(prompt, tuple(targets), query, max_tokens, grant.conversation_ids)
    token = _IN_SUBAGENT.set(grant.id)
    status = "error"
    try:
        with anyio.fail_after(timeout_s):
            answer = await runner.run(task, tools)
        status = "completed"
    except TimeoutError:
        status = "timeout"
        answer = ExpansionAnswer(
            f"The expansion stopped after {timeout_s:g} s without an answer; ask a narrower question."
        )
    except AccessDenied as exc:
        status = "denied"
        answer = ExpansionAnswer(f"The expansion was stopped: {exc}")
    finally:
        _IN_SUBAGENT.reset(token)
        with anyio.CancelScope(shield=True):
            await store.revoke_grant(grant.id, "completed" if status == "completed" else status, clock())
    text = _cut(answer.text, max_tokens, counter)
    return ExpandQueryResult(text, answer.cited, grant.id, runner.name, status, tools.calls, tuple(targets))
