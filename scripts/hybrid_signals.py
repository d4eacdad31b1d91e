"""Dump the signals hybrid search computes for each candidate message of each recall question (to fit its weights).

``python scripts/hybrid_signals.py --split dev|written-dev [--pad-with test] [--embedder e5] [--wording literal]
--embed-cache FILE --out signals.json``

Runs the recall benchmark's setup (:func:`recall.evaluate`, ``hybrid`` only) and, for every question asked
through ``engine.grep(…, mode="hybrid")``, records what the hybrid ranker sees before it combines anything:
each candidate's raw keyword score (BM25), cosine of what hybrid embeds (``sem``: the embedder's query form) and
of the question as written, memory-lead score, its neighbouring turns, its substance word count, whether it asks
(:func:`~lossless.retrieval.ranking.asks`), whether it lies in the question's time window, whether it is a tool's
call or output, whether it is the record the question asks for (intent), its day, and whether it is evidence.
``scripts/fit_hybrid.py`` fits the combination on that file.  Only the dev splits (generated and hand-written) are
ever dumped for fitting; the test splits are reported by ``recall.py`` alone.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import recall  # type: ignore[import-not-found]  # benchmarks/recall.py, on the path above
from lossless.questions import STOPWORDS, time_window
from lossless.retrieval import hybrid, ranking, semantic
from lossless.text import WORD, topic_words


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", choices=("dev", "written-dev"), default="dev")
    parser.add_argument("--dataset", type=Path, help="any file of the same shape (overrides --split; to test this)")
    parser.add_argument("--pad-with", choices=tuple(recall.SPLITS))
    parser.add_argument("--embed-cache", type=Path)
    parser.add_argument("--embedder", choices=("local", "e5", "hash"), help="default: recall.py's default")
    parser.add_argument("--wording", choices=recall.WORDINGS, default="paraphrase", help="as recall.py's")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    source = args.dataset or recall.SPLITS[args.split]
    dataset = recall.worded(json.loads(source.read_text(encoding="utf-8")), args.wording)
    padding = (
        json.loads(recall.SPLITS[args.pad_with].read_text(encoding="utf-8"))["conversations"] if args.pad_with else []
    )
    evidence = {(q["conversation_id"], q["question"]): q for q in dataset["questions"]}
    dumped: dict[str, Any] = {}
    original = hybrid.hybrid_hits  # what semantic.grep_semantic calls

    async def traced(store: Any, options: Any, conversation_ids: Any, search: Any, scope: Any, **kw: Any) -> Any:
        if scope == "messages" and search is not None and options.since is None and options.before is None:
            await _dump(store, options, conversation_ids, search, kw.get("agent"))
        return await original(store, options, conversation_ids, search, scope, **kw)

    async def _dump(store: Any, options: Any, conversation_ids: Any, search: Any, agent: Any) -> None:
        words, offset = hybrid._question_words(options, STOPWORDS)  # as hybrid_hits reads them
        kw, agent_session = await hybrid._keyword_side(store, options, conversation_ids, words, "messages")
        # The meaning side as the product computes it: both wordings, then the question without its names (step 2).
        sem = await hybrid._semantic_scores(search, options, conversation_ids, "messages", words)
        sem = await hybrid._with_keywords(search, options, conversation_ids, words, sem)
        if hybrid.NAME_BLIND_SHARE > 0:
            sem = await hybrid._name_blind(store, search, options, conversation_ids, words, sem)
        hits = await search.search(options.pattern, list(conversation_ids), limit=hybrid.DEPTH, mode="semantic")
        semq = {h.message_id: h.score for h in hits}
        conversations = list(conversation_ids)
        leads = await search.memory_leads(options.pattern, conversations, agent=agent, limit=hybrid.MEMORY_LIMIT)
        mem = {lead.message_id: lead.score for lead in leads}
        core = set(kw) | set(sem) | set(mem)
        records = {m.id: m for m in await store.get_messages_by_id(sorted(int(k) for k in core))}
        have = await hybrid._completed(store, records, [k + d for k in records for d in (-1, 1)])
        near, _, records = hybrid._neighbours(list(records.values()), have)
        intent = ranking.question_intent(options.pattern)
        when = {k: m.created_at for k, m in records.items()}
        window = time_window(options.pattern, max(when.values())) if when else None
        windows = [] if window is None else [window]
        if window is None and offset is not None:
            windows = await hybrid._event_windows(store, options, conversation_ids, offset)
        items = {}
        for key, m in records.items():
            prev, nxt = near.get(key, (None, None))
            items[str(key)] = {
                "event": m.event_key,
                "day": m.created_at.date().isoformat(),
                "kw": kw.get(key),
                "sem": sem[key][0] if key in sem else None,
                "semq": semq.get(key),
                "mem": mem.get(key),
                "prev": None if prev is None else int(prev),
                "next": None if nxt is None else int(nxt),
                "core": key in core,
                "words": topic_words(m.content[:2000], STOPWORDS),
                "chars": len(m.content),
                "role": m.role,
                "window": any(w.contains(m.created_at) for w in windows),
                "cover": _cover(words, m.content),
                "tool": ranking.is_tool_record(m.role, m.content),
                "asks": ranking.asks(m.role, m.content),
                "output": ranking.is_tool_output(m.role, m.content),
                "intent": intent is not None and ranking.shows(intent, m.role, m.content),
            }
        for (conversation, text), q in evidence.items():
            if text == options.pattern and q["id"] not in dumped:
                dumped[q["id"]] = {
                    "question": text,
                    "conversation": conversation,
                    "type": q.get("type"),
                    "evidence": q["evidence"],
                    "words": words,
                    "has_window": bool(windows),
                    "agent_session": agent_session,
                    "items": items,
                }
                break

    setattr(semantic, "hybrid_hits", traced)  # noqa: B010 - patched for this run only
    with tempfile.TemporaryDirectory() as tmp, recall.store_url("sqlite", Path(tmp)) as url:
        results = anyio.run(
            recall.evaluate,
            dataset,
            ["baseline", "hybrid"],
            url,
            padding,
            args.embedder or recall.default_embedder(),
            args.embed_cache,
        )
    print({k: round(v * 100, 1) for k, v in results["overall"]["hybrid"].items() if k.startswith("R@")})
    for qid, dump in dumped.items():  # what the benchmark measured, for fit_hybrid.py to check its replay against
        dump["measured"] = results["ranks"][qid]["hybrid"]
    args.out.write_text(json.dumps({"questions": dumped}))
    print(f"{len(dumped)} questions dumped to {args.out}")
    return 0


def _cover(words: list[str], text: str) -> float:
    """Share of the question's keywords that occur in ``text`` (case-insensitive word prefix match)."""
    if not words:
        return 0.0
    lowered = {w.lower() for w in WORD.findall(text)}
    found = 0
    for word in words:
        stem = word.lower()[: max(4, len(word) - 2)]
        if any(t.startswith(stem) for t in lowered):
            found += 1
    return found / len(words)


if __name__ == "__main__":
    raise SystemExit(main())
