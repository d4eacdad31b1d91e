"""The integrity checker: what must hold of a store, checked; and the non-destructive repairs.

:meth:`IntegrityChecker.run` reads a store through its ports and reports every broken rule as
a :class:`Problem`.  The rules (``spec/002`` invariants 1–4 and more):

* every context item points at an existing message or summary (``dangling_context_item``);
* the active context is in order: each item covers only messages later than those of the items
  before it (``context_order``);
* every summary has at least one source (``summary_without_sources``), every source exists
  (``missing_source``), a leaf (depth 0) is made of messages and a condensed summary of depth
  *d* of summaries of depth *d − 1* (``depth_mismatch``), and the DAG has no cycle
  (``dag_cycle``);
* every message of a conversation is covered exactly once by its active context — a context item
  itself, or a summary reachable from one (``uncovered_message``, ``duplicate_coverage``); every
  summary is reachable from the context (``unreachable_summary``);
* a summary's counts agree with its lineage (``token_count``);
* large-file blobs exist and match their recorded size and SHA-256 (``missing_blob``,
  ``blob_mismatch``, ``bad_storage_uri``);
* the full-text index holds exactly the rows it claims to cover (``search_index``; whole-store
  runs only, on stores that implement :class:`~lossless.ports.MaintainableStore`).

Not a broken rule but reported beside the problems: summaries made by truncation (re-makable), and,
given the compaction settings (:class:`StallCheck`), conversations whose compaction has *stalled* —
at least twice ``leaf_chunk_tokens`` of raw history outside the fresh tail, which compaction after
every turn never leaves behind (``lcm compact --full`` catches up).

Invariants of this module:

* **Checking writes nothing, and reads one consistent state.**  :meth:`IntegrityChecker.run`
  only reads, inside the store's read snapshot
  (:meth:`~lossless.ports.MaintainableStore.read_snapshot`: one read transaction on SQLite,
  ``REPEATABLE READ`` on PostgreSQL), so a writer ingesting or compacting meanwhile can never make
  it see half of a change and report a problem that is not there.  (The full-text index check,
  whose index lags the rows on SQLite, runs after it, in a read of its own.)
* **A repair never races a writer.**  The repairs that change a conversation's context run under
  the lock compaction holds for that conversation (``lock``, given by the engine) and inside the
  store's :meth:`~lossless.ports.MaintainableStore.repair_transaction` for it, where nothing else
  can change the conversation; there the conversation is checked again, and only a repair whose
  problem is still there is applied.  A problem that a writer fixed or changed since the report
  is skipped, never "repaired" into a new one.
* **Repairs are non-destructive and explicit.**  :func:`plan_repairs` only proposes; nothing is
  written until :meth:`IntegrityChecker.apply` is called with the plan.  A repair rebuilds derived
  data (the search index), removes a context item that points at nothing, puts an uncovered
  message back into the context at its place, or re-makes a summary that compaction had to make
  by truncation (level ``fallback``) with the current summarizer.  No message, part or lineage
  row is ever changed or deleted, and a summary only by that last repair: its text (and level,
  provider, model, reason) is replaced only when the summarizer gives a proper (normal or
  aggressive) summary of the same sources, and only while the text is still the one the plan
  saw; its id, lineage and times stay.  Problems with no safe repair (a lost message, a missing
  blob) are listed in the plan as such.
* No I/O of its own: everything goes through the :class:`~lossless.ports.Store` and
  :class:`~lossless.ports.BlobStore` ports.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Literal

from lossless.context import tail_start
from lossless.errors import LIST_CONVERSATIONS, InputError, NotFoundError, StoreError
from lossless.ports import BlobStore, MaintainableStore, Store
from lossless.records import ContextRow, Conversation, JSONValue, MessageRecord, Summary

__all__ = [
    "IntegrityChecker",
    "IntegrityReport",
    "Problem",
    "ProblemKind",
    "Repair",
    "RepairOutcome",
    "RepairPlan",
    "StallCheck",
    "plan_repairs",
    "why_unrepairable",
]

ProblemKind = Literal[
    "dangling_context_item",
    "context_order",
    "summary_without_sources",
    "missing_source",
    "depth_mismatch",
    "dag_cycle",
    "uncovered_message",
    "duplicate_coverage",
    "unreachable_summary",
    "token_count",
    "missing_blob",
    "blob_mismatch",
    "bad_storage_uri",
    "search_index",
]
RepairAction = Literal["rebuild_search_index", "drop_context_item", "restore_context_item", "remake_summary"]
#: Re-makes a summary with the current summarizer: the new version, or None when no proper one came.
Remaker = Callable[[Summary], Awaitable[Summary | None]]
#: Holds the per-conversation lock that compaction holds (``Compactor.holding``).
ConversationLock = Callable[[int], AbstractAsyncContextManager[None]]

_PAGE = 500


@dataclass(frozen=True, slots=True)
class Problem:
    """One broken rule: what kind, where (``subject``: e.g. ``summary sum_…``), and what exactly is wrong."""

    kind: ProblemKind
    conversation_id: int | None
    subject: str
    detail: str
    #: For repairable problems, what the repair needs: an ordinal, a message id or a summary id.
    target: int | str | None = None

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "kind": self.kind,
            "conversation_id": self.conversation_id,
            "subject": self.subject,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class IntegrityReport:
    """The result of a check: what was looked at, and every problem found (empty when all is well)."""

    conversation_id: int | None
    conversations: int = 0
    messages: int = 0
    summaries: int = 0
    context_items: int = 0
    files: int = 0
    fallback_summaries: int = 0
    search_index_checked: bool = False
    problems: tuple[Problem, ...] = ()
    #: ``(conversation id, summary id)`` of each summary made by truncation (not a problem; re-makable).
    fallbacks: tuple[tuple[int, str], ...] = ()
    #: ``(conversation id, raw tokens outside the fresh tail)`` of each conversation whose compaction stalled.
    stalled: tuple[tuple[int, int], ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def counts(self) -> dict[str, int]:
        return dict(Counter(p.kind for p in self.problems))

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "ok": self.ok,
            "conversation_id": self.conversation_id,
            "checked": {
                "conversations": self.conversations,
                "messages": self.messages,
                "summaries": self.summaries,
                "context_items": self.context_items,
                "files": self.files,
                "search_index": self.search_index_checked,
            },
            "fallback_summaries": self.fallback_summaries,
            "fallback_summary_ids": [summary_id for _, summary_id in self.fallbacks],
            "stalled_compaction": [
                {"conversation_id": cid, "raw_tokens_outside_fresh_tail": tokens} for cid, tokens in self.stalled
            ],
            "problem_counts": dict(self.counts()),
            "problems": [p.to_dict() for p in self.problems],
        }


@dataclass(frozen=True, slots=True)
class Repair:
    """One non-destructive fix: ``action`` on ``conversation_id`` / ``target`` (an ordinal, a message or summary id)."""

    action: RepairAction
    description: str
    conversation_id: int | None = None
    target: int | str | None = None

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "action": self.action,
            "conversation_id": self.conversation_id,
            "target": self.target,
            "description": self.description,
        }


@dataclass(frozen=True, slots=True)
class RepairPlan:
    """The repairs :func:`plan_repairs` proposes, in the order they must run, and the problems none can fix."""

    repairs: tuple[Repair, ...] = ()
    unrepairable: tuple[Problem, ...] = ()

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "repairs": [r.to_dict() for r in self.repairs],
            "unrepairable": [{**p.to_dict(), "why": why_unrepairable(p)} for p in self.unrepairable],
        }


@dataclass(frozen=True, slots=True)
class RepairOutcome:
    """What :meth:`IntegrityChecker.apply` did: repairs applied, and those that found nothing to do."""

    applied: tuple[Repair, ...] = ()
    skipped: tuple[Repair, ...] = ()


_WHY_NOT: dict[str, str] = {
    "context_order": "reordering the context would rewrite it; compact or inspect the conversation by hand",
    "summary_without_sources": "a summary's lost lineage cannot be recomputed",
    "missing_source": "the source row is gone; restore the database from a backup to get it back",
    "depth_mismatch": "the summary's lineage contradicts its depth; inspect it with `lcm summaries`",
    "dag_cycle": "a cycle cannot come from compaction; inspect the lineage by hand",
    "duplicate_coverage": "removing coverage from the context could hide a message; inspect it by hand",
    "unreachable_summary": "harmless for the context (its messages are checked separately); kept as it is",
    "token_count": "the counts are informational; the summary and its sources are intact",
    "missing_blob": "the file's bytes are gone; restore the files folder from a backup",
    "blob_mismatch": "the stored bytes differ from what was recorded; restore the files folder from a backup",
    "bad_storage_uri": "the large_files row was edited; restore the database from a backup",
}


def why_unrepairable(problem: Problem) -> str:
    """Why no repair is proposed for ``problem``."""
    return _WHY_NOT.get(problem.kind, "no safe repair is known")


def plan_repairs(report: IntegrityReport) -> RepairPlan:
    """The safe repairs for ``report``'s problems (index first, then dangling items, then uncovered messages),
    then a ``remake_summary`` for each summary made by truncation."""
    index: list[Repair] = []
    drops: list[Repair] = []
    restores: list[Repair] = []
    unrepairable: list[Problem] = []
    for problem in report.problems:
        if problem.kind == "search_index":
            if not index:
                index.append(Repair("rebuild_search_index", "rebuild the full-text index from the canonical rows"))
        elif problem.kind == "dangling_context_item" and isinstance(problem.target, int):
            drops.append(
                Repair(
                    "drop_context_item",
                    f"remove context item {problem.target} of conversation {problem.conversation_id}, "
                    "which points at nothing",
                    problem.conversation_id,
                    problem.target,
                )
            )
        elif problem.kind in ("uncovered_message", "unreachable_summary") and problem.target is not None:
            what = "message" if isinstance(problem.target, int) else "summary"
            restores.append(
                Repair(
                    "restore_context_item",
                    f"put {what} {problem.target} back into the context of conversation {problem.conversation_id}",
                    problem.conversation_id,
                    problem.target,
                )
            )
        elif problem.kind in ("uncovered_message", "unreachable_summary"):
            pass  # under an unreachable summary whose own restore covers it again
        else:
            unrepairable.append(problem)
    remakes = [
        Repair(
            "remake_summary",
            f"re-make summary {summary_id} of conversation {conversation_id} (made by truncation) with the current "
            "summarizer; it stays as it is unless a proper summary comes back",
            conversation_id,
            summary_id,
        )
        for conversation_id, summary_id in report.fallbacks
    ]
    return RepairPlan(tuple(index + drops + restores + remakes), tuple(unrepairable))


@dataclass(frozen=True, slots=True)
class StallCheck:
    """The compaction settings a stall is judged by (from :class:`~lossless.config.Config`)."""

    fresh_tail_count: int
    fresh_tail_max_tokens: int | None
    leaf_chunk_tokens: int


@dataclass(slots=True)
class _Scan:
    """Mutable state of one run (never escapes :meth:`IntegrityChecker.run`)."""

    problems: list[Problem] = field(default_factory=list)
    conversations: int = 0
    messages: int = 0
    summaries: int = 0
    context_items: int = 0
    files: int = 0
    fallback: list[tuple[int, str]] = field(default_factory=list)
    stalled: list[tuple[int, int]] = field(default_factory=list)

    def add(
        self,
        kind: ProblemKind,
        conversation_id: int | None,
        subject: str,
        detail: str,
        target: int | str | None = None,
    ) -> None:
        self.problems.append(Problem(kind, conversation_id, subject, detail, target))


class IntegrityChecker:
    """Checks a store (and its blob store) against the rules in the module docstring."""

    def __init__(
        self,
        store: Store,
        blobs: BlobStore | None = None,
        *,
        remake: Remaker | None = None,
        lock: ConversationLock | None = None,
        stalls: StallCheck | None = None,
    ) -> None:
        self.store = store
        self.blobs = blobs
        self.remake = remake
        self.lock = lock
        self.stalls = stalls

    async def run(self, conversation_id: int | None = None) -> IntegrityReport:
        """Check one conversation, or (``None``) every conversation and the store-wide search index."""
        if conversation_id is not None and (type(conversation_id) is not int or conversation_id < 1):
            raise InputError(f"conversation_id must be a positive integer, got {conversation_id!r}")
        scan = _Scan()
        store = self.store
        snapshot = store.read_snapshot() if isinstance(store, MaintainableStore) else nullcontext()
        async with snapshot:
            if conversation_id is not None:
                conversation = await store.get_conversation(conversation_id)
                if conversation is None:
                    raise NotFoundError(
                        "conversation", conversation_id, f"list the conversations to find it ({LIST_CONVERSATIONS})"
                    )
                await self._conversation(conversation, scan)
            else:
                offset = 0
                while page := await store.list_conversations(limit=_PAGE, offset=offset):
                    for conversation in page:
                        await self._conversation(conversation, scan)
                    offset += len(page)
        index_checked = conversation_id is None and isinstance(self.store, MaintainableStore)
        if index_checked:
            await self._search_index(scan)
        return IntegrityReport(
            conversation_id=conversation_id,
            conversations=scan.conversations,
            messages=scan.messages,
            summaries=scan.summaries,
            context_items=scan.context_items,
            files=scan.files,
            fallback_summaries=len(scan.fallback),
            search_index_checked=index_checked,
            problems=tuple(scan.problems),
            fallbacks=tuple(scan.fallback),
            stalled=tuple(scan.stalled),
        )

    def plan_repairs(self, report: IntegrityReport) -> RepairPlan:
        return plan_repairs(report)

    async def apply(self, plan: RepairPlan) -> RepairOutcome:
        """Carry out ``plan``'s repairs in order.  Each is re-checked by the store before it writes."""
        if not plan.repairs:
            return RepairOutcome()
        store = self.store
        if not isinstance(store, MaintainableStore):
            raise StoreError(f"the {store.backend} store cannot apply repairs; nothing was changed")
        applied: list[Repair] = []
        skipped: list[Repair] = []
        # Context repairs, grouped by conversation (in plan order: drops before restores).
        context: dict[int, list[Repair]] = {}
        for repair in plan.repairs:
            if repair.action in ("drop_context_item", "restore_context_item"):
                assert repair.conversation_id is not None
                assert repair.target is not None
                context.setdefault(repair.conversation_id, []).append(repair)
        for repair in plan.repairs:
            if repair.action == "rebuild_search_index":
                await store.rebuild_search_index()
                applied.append(repair)
        for conversation_id, repairs in context.items():
            done = await self._repair_context(store, conversation_id, repairs)
            applied += [r for r in repairs if r in done]
            skipped += [r for r in repairs if r not in done]
        for repair in plan.repairs:
            if repair.action == "remake_summary":
                (applied if await self._remake(str(repair.target)) else skipped).append(repair)
        return RepairOutcome(tuple(applied), tuple(skipped))

    async def _repair_context(
        self, store: MaintainableStore, conversation_id: int, repairs: Sequence[Repair]
    ) -> list[Repair]:
        """Apply one conversation's context repairs whose problem is still there; the ones applied."""
        done: list[Repair] = []
        lock = self.lock(conversation_id) if self.lock is not None else nullcontext()
        async with lock, store.repair_transaction(conversation_id):
            conversation = await self.store.get_conversation(conversation_id)
            if conversation is None:
                return done
            scan = _Scan()
            await self._conversation(conversation, scan, files=False)
            fresh = plan_repairs(IntegrityReport(conversation_id, problems=tuple(scan.problems)))
            still = {(r.action, r.target) for r in fresh.repairs}
            for repair in repairs:
                if (repair.action, repair.target) not in still:
                    continue  # a writer changed it since the report: nothing to do, or not safe to do
                assert repair.target is not None
                if repair.action == "drop_context_item":
                    assert isinstance(repair.target, int)
                    ok = await store.drop_context_item(conversation_id, repair.target)
                else:
                    ok = await store.restore_context_item(conversation_id, repair.target)
                if ok:
                    done.append(repair)
        return done

    async def _remake(self, summary_id: str) -> bool:
        """Re-make a fallback summary: False (nothing written) without a remaker, or when no proper one came."""
        found = await self.store.get_summaries([summary_id])
        if self.remake is None or not found or found[0].level != "fallback":
            return False
        remade = await self.remake(found[0])
        if remade is None or remade.id != summary_id or remade.level == "fallback":
            return False
        return await self.store.rewrite_summary(remade, replaces=found[0].content)

    # ---------------------------------------------------------------- per conversation

    async def _conversation(self, conversation: Conversation, scan: _Scan, *, files: bool = True) -> None:
        cid = conversation.id
        store = self.store
        messages = {m.id: m for m in await store.get_messages(cid)}
        items = await store.get_context_items(cid)
        summaries = {s.id: s for s in await store.list_summaries(cid)}
        lineage = await store.get_lineage(cid)
        scan.conversations += 1
        scan.messages += len(messages)
        scan.summaries += len(summaries)
        scan.context_items += len(items)
        scan.fallback += [(cid, s.id) for s in summaries.values() if s.level == "fallback"]

        # Rows of other conversations that this one points at (a forked sub-agent shares its parent's).
        wanted_messages = {i.message_id for i in items if i.message_id is not None} | {
            src for sources in lineage.values() for src in sources if isinstance(src, int)
        }
        wanted_summaries = {i.summary_id for i in items if i.summary_id is not None} | {
            src for sources in lineage.values() for src in sources if isinstance(src, str)
        }
        foreign_messages = {
            m.id: m.token_count
            for m in await store.get_messages_by_id(sorted(i for i in wanted_messages if i not in messages))
        }
        foreign_summaries = {
            s.id: s for s in await store.get_summaries(sorted(i for i in wanted_summaries if i not in summaries))
        }
        message_tokens = {m.id: m.token_count for m in messages.values()} | foreign_messages
        known_summaries = summaries | foreign_summaries

        self._context_items(cid, items, message_tokens, known_summaries, scan)
        self._lineage(cid, summaries, lineage, message_tokens, known_summaries, scan)
        self._coverage(cid, items, messages, summaries, lineage, scan)
        if files:  # the report's extras; a repair's re-check needs only the rules above
            await self._files(cid, scan)
            # A stall is judged on a sound context only (a dangling item cannot even be read as an entry).
            if self.stalls is not None and not any(p.conversation_id == cid for p in scan.problems):
                entries = await store.get_context(cid)
                start = tail_start(entries, self.stalls.fresh_tail_count, self.stalls.fresh_tail_max_tokens)
                raw = sum(e.token_count for e in entries[:start] if e.kind == "message")
                if raw >= 2 * self.stalls.leaf_chunk_tokens:
                    scan.stalled.append((cid, raw))

    def _context_items(
        self,
        cid: int,
        items: Sequence[ContextRow],
        message_tokens: dict[int, int],
        summaries: dict[str, Summary],
        scan: _Scan,
    ) -> None:
        for item in items:
            if item.kind == "message" and item.message_id not in message_tokens:
                scan.add(
                    "dangling_context_item",
                    cid,
                    f"context item {item.ordinal}",
                    f"points at message {item.message_id}, which does not exist",
                    item.ordinal,
                )
            elif item.kind == "summary" and item.summary_id not in summaries:
                scan.add(
                    "dangling_context_item",
                    cid,
                    f"context item {item.ordinal}",
                    f"points at summary {item.summary_id}, which does not exist",
                    item.ordinal,
                )

    def _lineage(
        self,
        cid: int,
        summaries: dict[str, Summary],
        lineage: dict[str, tuple[int | str, ...]],
        message_tokens: dict[int, int],
        known: dict[str, Summary],
        scan: _Scan,
    ) -> None:
        for summary in summaries.values():
            subject = f"summary {summary.id}"
            sources = lineage.get(summary.id, ())
            if not sources:
                scan.add("summary_without_sources", cid, subject, f"the {summary.kind} summary has no sources")
                continue
            message_sources = [s for s in sources if isinstance(s, int)]
            summary_sources = [s for s in sources if isinstance(s, str)]
            if summary.kind == "leaf":
                if summary.depth != 0 or summary_sources:
                    scan.add(
                        "depth_mismatch",
                        cid,
                        subject,
                        f"a leaf summary must have depth 0 and messages as sources; it has depth {summary.depth} "
                        f"and {len(summary_sources)} summary source(s)",
                    )
                lost = [m for m in message_sources if m not in message_tokens]
                for m in lost:
                    scan.add("missing_source", cid, subject, f"lists message {m} as a source, which does not exist")
                if not lost and summary.source_token_count != sum(message_tokens[m] for m in message_sources):
                    scan.add(
                        "token_count",
                        cid,
                        subject,
                        f"records {summary.source_token_count} source tokens but its messages hold "
                        f"{sum(message_tokens[m] for m in message_sources)}",
                    )
                continue
            if message_sources:
                scan.add(
                    "depth_mismatch",
                    cid,
                    subject,
                    f"a condensed summary lists {len(message_sources)} message source(s)",
                )
            lost_summaries = [s for s in summary_sources if s not in known]
            for s in lost_summaries:
                scan.add("missing_source", cid, subject, f"lists summary {s} as a source, which does not exist")
            children = [known[s] for s in summary_sources if s in known]
            shallow = [c.id for c in children if c.depth != summary.depth - 1]
            if summary.depth < 1 or shallow:
                scan.add(
                    "depth_mismatch",
                    cid,
                    subject,
                    f"a condensed summary of depth {summary.depth} must be made of summaries of depth "
                    f"{summary.depth - 1}; these are not: {', '.join(shallow) or '-'}",
                )
            if not lost_summaries:
                self._condensed_counts(cid, summary, children, scan)
        self._cycles(cid, summaries, lineage, scan)

    def _condensed_counts(self, cid: int, summary: Summary, children: Sequence[Summary], scan: _Scan) -> None:
        expected = (
            sum(c.descendant_count + 1 for c in children),
            sum(c.descendant_token_count + c.token_count for c in children),
            sum(c.source_token_count for c in children),
        )
        actual = (summary.descendant_count, summary.descendant_token_count, summary.source_token_count)
        if actual != expected:
            scan.add(
                "token_count",
                cid,
                f"summary {summary.id}",
                "records (descendants, descendant tokens, source tokens) = "
                f"{actual} but its sources add up to {expected}",
            )

    def _cycles(
        self, cid: int, summaries: dict[str, Summary], lineage: dict[str, tuple[int | str, ...]], scan: _Scan
    ) -> None:
        state: dict[str, int] = {}  # 1: on the current path, 2: done
        for root in summaries:
            if root in state:
                continue
            stack: list[tuple[str, int]] = [(root, 0)]
            state[root] = 1
            while stack:
                node, position = stack[-1]
                children = [s for s in lineage.get(node, ()) if isinstance(s, str) and s in summaries]
                if position < len(children):
                    stack[-1] = (node, position + 1)
                    child = children[position]
                    if state.get(child) == 1:
                        scan.add("dag_cycle", cid, f"summary {node}", f"is its own ancestor through summary {child}")
                    elif child not in state:
                        state[child] = 1
                        stack.append((child, 0))
                else:
                    state[node] = 2
                    stack.pop()

    def _coverage(
        self,
        cid: int,
        items: Sequence[ContextRow],
        messages: dict[int, MessageRecord],
        summaries: dict[str, Summary],
        lineage: dict[str, tuple[int | str, ...]],
        scan: _Scan,
    ) -> None:
        seq_of = {m.id: m.seq for m in messages.values()}
        covered: Counter[int] = Counter()
        walker = _Expander(summaries, lineage, seq_of)
        expand, reached = walker.expand, walker.reached

        last_seq: int | None = None
        last_ordinal = 0
        for item in items:
            if item.message_id is not None:
                ids: tuple[int, ...] = (item.message_id,) if item.message_id in seq_of else ()
            elif item.summary_id is not None and item.summary_id in summaries:
                ids = expand(item.summary_id)
                reached.add(item.summary_id)
            else:
                ids = ()
            covered.update(ids)
            seqs = [seq_of[i] for i in ids]
            if seqs:
                if last_seq is not None and min(seqs) <= last_seq:
                    scan.add(
                        "context_order",
                        cid,
                        f"context item {item.ordinal}",
                        f"covers message seq {min(seqs)}, not after seq {last_seq} of context item {last_ordinal}",
                    )
                last_seq, last_ordinal = max(seqs), item.ordinal
        # Summaries the context does not reach; the topmost of them (no existing summary lists them
        # as a source) can be put back into the context, which covers their messages again.
        unreachable = [s for s in summaries if s not in reached]
        used = {src for sid in summaries for src in lineage.get(sid, ()) if isinstance(src, str)}
        roots = [s for s in unreachable if s not in used]
        under_root: dict[int, str] = {}
        for root in roots:
            for message_id in expand(root):
                under_root.setdefault(message_id, root)
        self._report_coverage(cid, seq_of, covered, under_root, scan)
        for summary_id in unreachable:
            is_root = summary_id in roots
            scan.add(
                "unreachable_summary",
                cid,
                f"summary {summary_id}",
                "is not reachable from the active context" + ("" if is_root else " (a summary above it is not either)"),
                summary_id if is_root else None,
            )

    def _report_coverage(
        self, cid: int, seq_of: dict[int, int], covered: Counter[int], under_root: dict[int, str], scan: _Scan
    ) -> None:
        for message_id, seq in sorted(seq_of.items(), key=lambda kv: kv[1]):
            count = covered[message_id]
            if count == 0:
                root_of = under_root.get(message_id)
                scan.add(
                    "uncovered_message",
                    cid,
                    f"message {message_id}",
                    f"(seq {seq}) is neither in the active context nor covered by a summary in it"
                    + (f"; unreachable summary {root_of} covers it" if root_of else ""),
                    None if root_of else message_id,
                )
            elif count > 1:
                scan.add(
                    "duplicate_coverage",
                    cid,
                    f"message {message_id}",
                    f"(seq {seq}) is reached {count} times from the active context",
                )

    async def _files(self, cid: int, scan: _Scan) -> None:
        if self.blobs is None:
            return
        checked: dict[str, bytes | Problem] = {}
        offset = 0
        while page := await self.store.list_large_files(cid, limit=_PAGE, offset=offset):
            offset += len(page)
            for file in page:
                scan.files += 1
                subject = f"file {file.id}"
                uri = file.storage_uri
                if uri not in checked:
                    try:
                        checked[uri] = await self.blobs.get(uri)
                    except InputError as exc:
                        checked[uri] = Problem("bad_storage_uri", cid, subject, str(exc))
                    except StoreError as exc:
                        checked[uri] = Problem("missing_blob", cid, subject, f"its bytes at {uri} are missing: {exc}")
                data = checked[uri]
                if isinstance(data, Problem):
                    scan.add(data.kind, cid, subject, data.detail)
                    continue
                if file.byte_size is not None and len(data) != file.byte_size:
                    scan.add(
                        "blob_mismatch", cid, subject, f"records {file.byte_size} bytes but {uri} holds {len(data)}"
                    )
                elif file.content_hash is not None and hashlib.sha256(data).hexdigest() != file.content_hash:
                    scan.add("blob_mismatch", cid, subject, f"the bytes at {uri} do not match its SHA-256")

    async def _search_index(self, scan: _Scan) -> None:
        store = self.store
        assert isinstance(store, MaintainableStore)
        for found in await store.search_index_problems():
            what = "message" if found.source == "messages" else "summary row"
            if found.issue == "stale":
                detail = f"the search index holds {what} {found.row_id}, which does not exist"
            else:
                detail = f"the search index lacks {what} {found.row_id}, which it claims to cover"
            scan.add("search_index", None, f"{found.source} index row {found.row_id}", detail)


class _Expander:
    """The messages of this conversation under each summary, memoised; a cycle contributes nothing."""

    def __init__(
        self, summaries: dict[str, Summary], lineage: dict[str, tuple[int | str, ...]], seq_of: dict[int, int]
    ) -> None:
        self.summaries = summaries
        self.lineage = lineage
        self.seq_of = seq_of
        self.memo: dict[str, tuple[int, ...]] = {}
        self.reached: set[str] = set()

    def expand(self, root: str) -> tuple[int, ...]:
        memo, lineage = self.memo, self.lineage
        stack: list[tuple[str, bool]] = [(root, False)]
        on_path: set[str] = set()
        while stack:
            node, ready = stack.pop()
            if node in memo:
                continue
            sources = lineage.get(node, ())
            kids = [s for s in sources if isinstance(s, str) and s in self.summaries]
            if ready:
                on_path.discard(node)
                out: list[int] = [s for s in sources if isinstance(s, int) and s in self.seq_of]
                for kid in kids:
                    out += memo.get(kid, ())
                memo[node] = tuple(out)
                continue
            if node in on_path:
                memo[node] = ()
                continue
            on_path.add(node)
            self.reached.add(node)
            stack.append((node, True))
            stack.extend((kid, False) for kid in kids if kid not in memo and kid not in on_path)
        return memo.get(root, ())
