"""Memory quality: do the mined memories hold the answers, read as whole sentences, and get found first?

``python benchmarks/memory_quality.py [--dataset FILE] [--quick] [--json OUT] [--embedder local|hash] [--labels FILE]
[--embed-cache FILE]``

The default dataset is the recall test split (``data/recall-test.json``; report on it, never tune on it),
else the small shipped set.

The dataset has the shape of ``benchmarks/recall.py``'s (conversations of messages with ``id``, ``role``,
``content``, ``created_at``; questions with ``conversation_id``, ``question``, ``answer``, ``evidence``).  Each
conversation is ingested through the engine (message ids become event keys) and mined for memories the way
the compactor's leaf hook does (``MemoryService.mine`` over its messages, with the configured extractor —
the offline one by default).  Then, through the public API only:

* **answer in a memory** — the share of questions whose gold answer is contained in at least one current
  memory of its conversation.  *Contained* is judged on normalised text (lower case, punctuation and
  spaces folded): the whole answer as a substring, or — for an answer of four or more content words, which
  in generated datasets is often the evidence sentence in the first person while a memory is written in
  the third — at least 70% of its content words (stop words and pronouns left out).  Both shares are printed.
* **fragments** — the share of memories :func:`lossless.memory.fragments.fragment_reason` flags, and the
  reasons; with ``--labels FILE`` (JSON list of ``{"text", "fragment": bool}``) the checker's precision and
  recall on that hand-labelled sample.
* **memory search** — ``service.search(question)`` over every conversation's memories: the rank of the first
  memory that contains the answer (share at rank 1, MRR@10), and Recall@10 of the evidence messages when
  each memory is mapped to its source messages (provenance).
* **expand_query** — ``engine.expand_query(question, query=…)`` with the configured runner (offline by
  default), the query being the question's content words OR-ed: the share of answers that contain the
  gold answer, and their mean length in tokens.  Each miss of the offline runner is put down to
  **retrieval** (neither the gold answer nor an evidence message was among the passages it read) or
  **selection** (it read them and quoted other sentences), per question type.

``--embedder local`` (the product's default embedder; needs the ``embeddings`` extra) builds the search
vectors first (``engine.index_step`` to the end, as the background worker would), so searches find by
meaning; ``--embedder hash`` (the default here, fast) builds none, which is what an install without the
extra gets: keyword search only.

Run it against another checkout's code (``PYTHONPATH=/path/src python benchmarks/memory_quality.py …``) to
compare before and after in the same conditions.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _embed_cache import CachingEmbedder
from _harness import Figure, report
from lossless import ContextEngine, Message
from lossless.records import parse_timestamp
from lossless.retrieval.expansion import OfflineExpansionRunner

try:
    from lossless.memory.fragments import fragment_reason
except ImportError:  # an older checkout: no checker there; this one's judges its memories
    fragment_reason = None

HERE = Path(__file__).resolve().parent
DATASET = next(p for p in (HERE / "data" / "recall-test.json", HERE / "data" / "recall-small.json") if p.exists())
_STOP = frozenset(
    """a an the and or of to in on at for with is are was were be been it its this that what which who how why
    when where did does do i i'm i've i'll me my mine we our us you your he she his her they them their there
    here from by as about into than then so but not no just really very too also can could would should will
    have has had am get got""".split()  # noqa: SIM905
)


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold().replace("’", "'")
    text = re.sub(r"\[tool (?:error|result)\]", " ", text)
    return " ".join(re.sub(r"[^\w']+", " ", text).split())


def content_words(text: str) -> list[str]:
    return [w.strip("'") for w in normalise(text).split() if w.strip("'") not in _STOP]


def contains(text: str, answer: str) -> tuple[bool, bool]:
    """(strict: the normalised answer is a substring, loose: strict or ≥ 70% of its content words)."""
    body, gold = normalise(text), normalise(answer)
    if not gold:
        return False, False
    strict = f" {gold} " in f" {body} "
    if strict:
        return True, True
    words = content_words(answer)
    if len(words) < 4:
        return False, False
    have = set(body.split())
    return False, sum(1 for w in words if w in have) >= 0.7 * len(words)


class _Recording(OfflineExpansionRunner):
    """The offline runner, remembering the passages it read for the last question (to tell retrieval from selection)."""

    def __init__(self, counter: Any, leads: Any = None) -> None:
        try:
            super().__init__(counter, leads)  # type: ignore[call-arg]  # the engine's own memory leads
        except TypeError:  # an older checkout: no leads
            super().__init__(counter)
        self.read: list[Any] = []

    def _answer(self, task: Any, passages: Any, summary_ids: Any) -> Any:
        self.read = list(passages)
        return super()._answer(task, passages, summary_ids)


async def evaluate(
    dataset: dict[str, Any], embedder: str, workdir: Path, quick: bool, embed_cache: Path | None = None
) -> dict[str, Any]:
    engine = await ContextEngine.open(f"sqlite:///{workdir / 'quality.db'}", memory_embedder=embedder)
    service = engine.memory()  # the engine's own memory, as the leaf hook mines it and expand_query reads it
    if embed_cache is not None:  # same vectors, embedded once across runs (set before anything is embedded)
        service.embedder = CachingEmbedder(service.embedder, embed_cache)
    key_of: dict[int, str] = {}
    conversation_of: dict[str, int] = {}
    questions = dataset["questions"]
    if quick:
        keep = {c["id"] for c in dataset["conversations"][:2]}
        dataset = {**dataset, "conversations": dataset["conversations"][:2]}
        questions = [q for q in questions if q["conversation_id"] in keep]
    started = time.perf_counter()
    try:
        for conversation in dataset["conversations"]:
            messages = [
                Message(m["role"], m["content"], event_key=m["id"], created_at=parse_timestamp(m["created_at"]))
                for m in conversation["messages"]
            ]
            await engine.ingest_batch(conversation["id"], messages)
            records = await engine.messages(conversation["id"])
            key_of.update((r.id, r.event_key or "") for r in records)
            conversation_of[conversation["id"]] = records[0].conversation_id
            await service.mine(records)
        mined_s = time.perf_counter() - started
        started = time.perf_counter()
        if embedder != "hash":  # the background worker's job: vectors for search by meaning
            while await engine.index_step():
                pass
        vectors_s = time.perf_counter() - started
        leads = getattr(engine.parts.get("memory"), "leads", None)
        runner = _Recording(engine.tokens, leads) if engine.config.expansion_provider in ("", "offline") else None
        memories = [m async for m in service.export() if m.current]
        by_conversation: dict[int | None, list[str]] = {}
        for m in memories:
            by_conversation.setdefault(m.conversation_id, []).append(m.content)
        reasons = Counter(r for r in (fragment_reason(m.content) for m in memories) if r) if fragment_reason else None
        strict = loose = 0
        first_rank: list[int | None] = []
        evidence_recall: list[float] = []
        expand_strict = expand_loose = 0
        expand_tokens: list[int] = []
        misses: dict[str, Counter[str]] = {}
        for question in questions:
            cid = conversation_of[question["conversation_id"]]
            found = [contains(text, question["answer"]) for text in by_conversation.get(cid, [])]
            strict += any(s for s, _ in found)
            loose += any(lo for _, lo in found)
            result = await service.search(question["question"], limit=10, record_access=False)
            rank = next(
                (i for i, hit in enumerate(result.hits, 1) if contains(hit.memory.content, question["answer"])[1]),
                None,
            )
            first_rank.append(rank)
            sources = {key_of.get(i) for hit in result.hits for i in hit.memory.source_message_ids}
            evidence_recall.append(len(sources & set(question["evidence"])) / len(question["evidence"]))
            words = list(dict.fromkeys(content_words(question["question"])))
            query = " OR ".join(words) or question["question"]
            answered = await engine.expand_query(
                question["question"], query=query, conversation=question["conversation_id"], runner=runner
            )
            s, lo = contains(answered.answer, question["answer"])
            expand_strict += s
            expand_loose += lo
            if runner is not None:
                read = {key_of.get(_message_id(p.cite)) for p in runner.read}
                found_it = bool(read & set(question["evidence"])) or any(
                    contains(p.text, question["answer"])[1] for p in runner.read
                )
                outcome = "answered" if lo else "selection" if found_it else "retrieval"
                misses.setdefault(question.get("type", "all"), Counter())[outcome] += 1
            expand_tokens.append(engine.tokens.count(answered.answer))
        n = max(1, len(questions))
        return {
            "questions": len(questions),
            "messages": len(key_of),
            "memories": len(memories),
            "mine_s": mined_s,
            "answer_in_memory_strict": strict / n,
            "answer_in_memory": loose / n,
            "fragments": (sum(reasons.values()) / max(1, len(memories))) if reasons is not None else None,
            "fragment_reasons": dict(reasons or {}),
            "search_answer_at_1": sum(1 for r in first_rank if r == 1) / n,
            "search_answer_mrr10": sum(1 / r for r in first_rank if r) / n,
            "search_evidence_r10": statistics.fmean(evidence_recall) if evidence_recall else 0.0,
            "expand_answer_strict": expand_strict / n,
            "expand_answer": expand_loose / n,
            "expand_tokens_mean": statistics.fmean(expand_tokens) if expand_tokens else 0.0,
            "expand_outcomes": {kind: dict(counts) for kind, counts in sorted(misses.items())},
            "vectors_s": vectors_s,
            "examples": [m.content for m in memories[:: max(1, len(memories) // 25)]][:25],
        }
    finally:
        await engine.dispose()


def _message_id(cite: str) -> int:
    return int(cite[4:]) if cite.startswith("msg#") and cite[4:].isdigit() else -1


def label_precision(path: Path) -> dict[str, float]:
    """The fragment checker against a hand-labelled sample: precision and recall of "fragment"."""
    assert fragment_reason is not None
    rows = json.loads(path.read_text(encoding="utf-8"))
    tp = sum(1 for r in rows if r["fragment"] and fragment_reason(r["text"]))
    fp = sum(1 for r in rows if not r["fragment"] and fragment_reason(r["text"]))
    fn = sum(1 for r in rows if r["fragment"] and not fragment_reason(r["text"]))
    return {
        "labelled": len(rows),
        "precision": tp / max(1, tp + fp),
        "recall": tp / max(1, tp + fn),
        "accuracy": (len(rows) - fp - fn) / max(1, len(rows)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--dataset", type=Path, default=DATASET, help="default: data/recall-test.json, else data/recall-small.json"
    )
    parser.add_argument("--quick", action="store_true", help="only the first two conversations")
    parser.add_argument("--json", metavar="OUT")
    parser.add_argument(
        "--embedder", choices=("local", "hash"), default="hash", help="local: search vectors built (by meaning)"
    )
    parser.add_argument("--labels", type=Path, help="hand-labelled fragments (JSON) to measure the checker on")
    parser.add_argument(
        "--embed-cache", type=Path, metavar="FILE", help="keep embeddings in FILE across runs (same results, faster)"
    )
    args = parser.parse_args()
    dataset = json.loads(args.dataset.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        results = anyio.run(evaluate, dataset, args.embedder, Path(tmp), args.quick, args.embed_cache)
    print(
        f"\nmemory quality — {args.dataset.name}: {results['questions']} questions, {results['messages']} messages, "
        f"{results['memories']} memories (mined in {results['mine_s']:.1f} s); embedder {args.embedder}"
        f" (search vectors built in {results['vectors_s']:.1f} s)"
    )
    for key in (
        "answer_in_memory",
        "answer_in_memory_strict",
        "fragments",
        "search_answer_at_1",
        "search_answer_mrr10",
        "search_evidence_r10",
        "expand_answer",
        "expand_answer_strict",
        "expand_tokens_mean",
    ):
        value = results[key]
        print(f"  {key:<24} {'n/a' if value is None else f'{value:.3f}'}")
    print(f"  fragment reasons         {results['fragment_reasons']}")
    outcomes = results["expand_outcomes"]
    if outcomes:
        total: Counter[str] = Counter()
        for counts in outcomes.values():
            total.update(counts)
        print("  expand_query outcomes    (answered / read but not quoted: selection / never read: retrieval)")
        for kind, counts in [*outcomes.items(), ("all", dict(total))]:
            row = "  ".join(f"{k} {counts.get(k, 0):>3}" for k in ("answered", "selection", "retrieval"))
            print(f"    {kind:<14} {row}")
    figures = [
        Figure("answer in a memory", results["answer_in_memory"], "", goal=0.7, goal_op=">=", goal_on="value"),
        Figure("expand_query answer", results["expand_answer"], "", goal=0.5, goal_op=">=", goal_on="value"),
        Figure("memory search answer@1", results["search_answer_at_1"], ""),
    ]
    if results["fragments"] is not None:
        figures.append(Figure("fragments", results["fragments"], "", goal=0.02, goal_op="<=", goal_on="value"))
    if args.labels:
        checker = label_precision(args.labels)
        results["checker"] = checker
        print(f"  checker on {checker['labelled']} labelled texts: precision {checker['precision']:.3f}, "
              f"recall {checker['recall']:.3f}, accuracy {checker['accuracy']:.3f}")  # fmt: skip
    report("memory_quality", figures, args.json)
    if args.json:
        payload = json.loads(Path(args.json).read_text())
        payload["results"] = results
        Path(args.json).write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
