"""The dedup judge as a side line: its ratings, decisions and merge texts, or the rules' when it fails.

Extraction (:meth:`lossless.memory.service.MemoryService.remember`) may ask a
:class:`~lossless.memory.ports.DedupJudge` (an LLM) three things: how useful each candidate is
(admission control), what to do with a candidate given its nearest memories, and the text of a
merge.  This module asks it and falls back.

Invariants:

* The judge is a side line: any exception it raises (timeout, garbage, refusal) is logged and the
  rules answer instead — utility ``None`` (admission then counts 0.5), the decision of
  :func:`lossless.memory.extraction.decide`, the candidate's text appended to the target's.  No
  error of the judge reaches the caller, and no candidate is lost to it.
* No judge, or no admission control: no rating is asked (every utility is ``None``).
* Whoever decides, a ``supersede`` or ``contradict`` of a newer memory by an older statement
  (the draft's ``valid_from`` before the target's) becomes a ``skip`` that names the target: mining
  old history never overwrites a newer value.
* A merge that adds nothing (the draft's text already in the target's, no judge) is ``None``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from lossless.memory import extraction
from lossless.memory.admission import AdmissionConfig
from lossless.memory.ports import DedupJudge
from lossless.memory.records import Memory, MemoryDraft, MemoryPatch

__all__ = ["decide", "merged", "utilities"]

log = logging.getLogger("lossless.memory")


async def utilities(
    judge: DedupJudge | None, admission: AdmissionConfig | None, drafts: Sequence[MemoryDraft], sources: Sequence[str]
) -> Sequence[float | None]:
    """The judge's utility rating of each draft when admission control runs (``None``: not rated)."""
    if judge is not None and admission is not None and drafts:
        try:
            return await judge.rate(drafts, sources)
        except Exception as exc:  # the judge is a side line: utility falls back to 0.5
            log.warning("memory judge %s could not rate utility (%s); using 0.5", judge.name, exc)
    return [None] * len(drafts)


async def decide(
    judge: DedupJudge | None, draft: MemoryDraft, neighbours: Sequence[tuple[Memory, float]]
) -> extraction.Decision:
    """What to do with ``draft`` given its nearest memories: the judge's decision, else the rules'."""
    decision = extraction.decide(draft, neighbours)
    if judge is not None:
        try:
            decision = await judge.decide(draft, neighbours) or decision
        except Exception as exc:  # the judge is a side line: the rules decide instead
            log.warning("memory judge %s failed (%s); the dedup rules decide", judge.name, exc)
    if decision.kind in ("supersede", "contradict") and draft.valid_from is not None:
        target = next((m for m, _ in neighbours if m.memory_id == decision.target), None)
        if target is not None and draft.valid_from < target.valid_from:
            why = f"older than {target.memory_id} (valid from {target.valid_from:%Y-%m-%d %H:%M}), which stays"
            return extraction.Decision("skip", target.memory_id, why, by=decision.by)
    return decision


async def merged(judge: DedupJudge | None, target: Memory, draft: MemoryDraft, label: str | None) -> MemoryPatch | None:
    """The patch that folds ``draft`` into ``target``: the judge's text, else appended (None: nothing new)."""
    if judge is not None:
        try:
            abstract, overview, content = await judge.merge(target, draft, context_label=label)
            return MemoryPatch(content=content, abstract=abstract or None, overview=overview or None)
        except Exception as exc:  # the judge is a side line: the candidate is appended instead
            log.warning("memory judge %s could not merge (%s); appending the text", judge.name, exc)
    if draft.content in target.content:
        return None
    addition = f"({label}) {draft.content}" if label else draft.content
    return MemoryPatch(content=f"{target.content}\n{addition}")
