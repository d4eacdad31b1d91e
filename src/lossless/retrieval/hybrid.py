"""``hybrid`` search: keyword (BM25) and meaning (cosine) rankings fused by normalised score, with context.

:func:`hybrid_hits` ranks the messages or the summaries of some conversations for a question:

1. **Keywords.**  The question's keywords (:func:`~lossless.questions.keywords`: stopwords and
   time words dropped), any of them, ranked by the store's full-text relevance (BM25 on both
   backends: FTS5's on SQLite, :mod:`lossless.stores.postgres.relevance` on PostgreSQL), up to
   :data:`DEPTH` items.
2. **Meaning.**  The :class:`~lossless.retrieval.semantic.SemanticSearch` port's ``semantic`` ranking,
   through its existing interface, up to :data:`DEPTH` items.  A question that names a speaker of the
   conversation (messages only) is asked a second time without the name, and each message's meaning
   score blends the two cosines (:data:`NAME_BLIND_SHARE`): every turn carries its speaker's name, which
   pulls the question to that person's turns, so a question that names the wrong person ("Which breed
   is the dog Jonas adopted?" when Maya adopted it) would otherwise miss the turn that tells the fact.
   A name the chat keeps mentioning ("Grandma Iris", named in :data:`HUB_SHARE` of the best matches)
   is left out of that second question too: it pulls the question to every turn that names her.
   Where the embedder ranks by the question as written, a message's meaning score is also blended with
   its cosine to the question's keywords (:data:`KEYWORD_QUERY_SHARE`).
3. **Fusion** of the two by normalised score (:func:`~lossless.retrieval.ranking.fuse`).
4. **Memory leads** (``hybrid`` messages only): the long-term memories that match the question
   (the memory search, run as the caller's agent, restricted to memories mined from the
   conversations searched) lift the messages they were mined from: the best memory's sources gain
   :data:`MEMORY_SHARE` of the best message's score, the others in proportion to their memory's
   score.  Memories restate facts in the third person with dates resolved, so they match a
   paraphrased question where the turn itself does not (a memory that only quotes its message
   leads nowhere).  No memory in reach: nothing changes.
5. **Summary-first** (messages only): the best summaries (fused the same way) lend a share of their
   score to the messages under them (leaf summaries' sources), so a stretch of turns whose summary
   matches lifts its messages even when no single turn does.
6. **Neighbours** (messages only): a message adds a share of the score of the turn before it and
   a share of the score of the turn after it in the same conversation (an answer is found by the
   question it answers); ``full_text`` questions add the better of the two only.
7. **Time**: a time expression in the question ("in May 2024", "last month") boosts the items in
   its window, relative to the newest candidate's date; "two weeks before the trip" boosts those two
   weeks before any of the :data:`EVENT_MENTIONS` best keyword matches of the event.
8. **What the question asks for** (messages only): a question about an agent's work that asks which
   file a change went to, or what failed, adds :data:`INTENT_BOOST` to the messages that are such
   records (a file-changing tool call; a failed tool result).
9. **Sources** (``hybrid`` summaries only): a leaf summary is found by what it condenses as well as by
   its own words: it adds :data:`SOURCE_SHARE` of the fused score of its best-matching message (the
   sum scaled back to the messages' range), so the stretch that holds a detail its summary left out
   is still found.

``semantic`` mode ranks here too, by meaning alone (``keyword=False``): steps 2, 3 (the meaning side scaled to
0–1), 5–8, without the keyword search of step 1, the memory leads of step 4 or the sources of step 9 (on the
hand-written dev chats and agent sessions they took its R@10 from 58.3, the raw cosine, to 76.2; docs/retrieval.md).

:func:`keyword_hits` runs steps 1, 6, 7 and 8 and the substance prior (:func:`~lossless.retrieval.ranking.substance`)
without steps 2–5 (no vectors): the any-word ranking of a ``full_text`` question, keyword scores taken as a share
of the best one's, function words only dropped.

Invariants: only the conversations passed in are searched (ids from elsewhere are dropped);
``since`` / ``before`` filter exactly as the other modes do; nothing here raises for bad user text
(a query the keyword side cannot run ranks by meaning alone, with a note); no I/O beyond the
store port and the semantic port; another agent's memories, or those of a conversation not
searched, never lead (the port runs the memory search as ``agent`` and drops the rest).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

from lossless.ports import SearchRequest, SearchRow, Store
from lossless.questions import (
    FUNCTION_WORDS,
    PROBE_AT,
    STOPWORDS,
    EventOffset,
    TimeWindow,
    event_offset,
    keywords,
    time_named,
    time_window,
)
from lossless.records import MessageRecord, Summary
from lossless.retrieval import ranking
from lossless.retrieval.grep import GrepHit, GrepOptions, first_page_requests, grep, snippet
from lossless.retrieval.query import QuerySyntax, parse_full_text
from lossless.retrieval.ranking import best_first, fuse, with_neighbours
from lossless.speakers import capitalised, named_in, speaker_label, spoken, without_names

if TYPE_CHECKING:
    from lossless.retrieval.semantic import SemanticHit, SemanticSearch

__all__ = ["DEPTH", "SUMMARY_SHARE", "hybrid_hits", "keyword_hits", "keyword_requests"]

_WORDY = re.compile(r"\w")

#: How many candidates each ranker contributes.
DEPTH = 100
#: How many the meaning side asks for when ``since`` / ``before`` filter them (the port ranks by meaning only):
#: those outside the window are dropped before the fusion (the keyword side is filtered by the store itself).
FILTERED_DEPTH = 1000
#: How many summaries lend their score to the messages under them, and what share.
SUMMARY_FANOUT = 5
SUMMARY_SHARE = 0.0
#: ``hybrid`` summaries are found by what they condense too: a leaf summary adds this share of the score of the
#: best-matching message it condenses (:func:`_found_by_sources`; its own text keeps a third).  Chosen on the dev
#: split's summary-first method (docs/retrieval.md, step 10).
SOURCE_SHARE = 2.0
#: What the meaning side embeds: the question as written ("question") or its keywords ("keywords"), unless the
#: embedder says which it ranks best by (``query_form``: e5, trained on questions, says "question"; with the
#: int8 MiniLM the keywords measured better on the dev split).
SEMANTIC_QUERY = "keywords"
#: The weights of the ``hybrid`` message ranking (steps 3, 4, 6, 7 and the substance prior), fitted on the dev
#: split of the recall benchmark, never on its test split (docs/retrieval.md, "fitted weights"):
#: ``python scripts/hybrid_signals.py --pad-with test --out signals.json`` dumps each dev question's
#: candidates with their signals, and ``python scripts/fit_hybrid.py signals.json --fix substance=8``
#: refits them (deterministic coordinate ascent on R@5 and R@10; ``--loco`` leaves one conversation out).
#: ``full_text`` questions and summaries keep :mod:`~lossless.retrieval.ranking`'s hand-set constants.
#:
#: Keyword side's weight in the fusion (the meaning side gets ``1 - KEYWORD_WEIGHT``).
KEYWORD_WEIGHT = 0.15
#: The keyword side's weight in an agent's session (a tool's output among the keyword matches): code, paths,
#: commands and error text are found by their words more than a chat is.
AGENT_KEYWORD_WEIGHT = 0.25
#: An embedder that ranks best by the question as written (e5): the share of a message's meaning score that is its
#: cosine to the question's keywords (the rest: to the question as written), messages only.  The two wordings
#: each find what the other misses ("What does Maya do for fun?" against "Maya fun"); a blend, not the better
#: of the two, which lifted every turn that matches either (docs/retrieval.md, step 2).  Chosen on the dev split.
KEYWORD_QUERY_SHARE = 0.5
#: A question that names a speaker of the conversation: the share of a message's meaning score that is its
#: cosine to the question without the speakers' names (the rest: to the question as asked).  Chosen on the dev
#: split with its adversarial questions (docs/retrieval.md, "questions that name the wrong person").
NAME_BLIND_SHARE = 0.5
#: How many of the best meaning matches are read for the speakers' names.
SPEAKER_PROBE = 50
#: A capitalised word of the question that at least this share of SPEAKER_PROBE best meaning matches hold
#: (5 of 50) is a name the chat keeps talking about ("Grandma Iris" in a chat about caring for her): it pulls
#: the question to every turn that names it, as a speaker's name does, so it is left out of the name-blind
#: question too.
HUB_SHARE = 0.1
#: Memory leads: the source messages of the best-matching long-term memory gain this share of the best
#: message's score (others in proportion to their memory's score), from the :data:`MEMORY_LIMIT` best
#: memories of the conversations searched.
MEMORY_SHARE = 0.4
MEMORY_LIMIT = 40
#: Shares of the scores of the turn before and of the turn after a message that it inherits, and whether
#: it inherits the larger of the two only (True) or both added (False).  In a chat a turn inherits nothing
#: from the turn before it (a reply that picks a subject up is not the answer; what it refers to is in its
#: context chunk already) and a share of the turn after it (a turn that the next one goes on about).
NEIGHBOUR_BEFORE = 0.0
NEIGHBOUR_AFTER = 0.45
NEIGHBOUR_BEST_ONLY = False
#: The same shares for a pair of turns of which either is a tool's call or its output
#: (:func:`~lossless.retrieval.ranking.is_tool_record`): a tool's output is found by its call.
TOOL_NEIGHBOUR_BEFORE = 0.3
TOOL_NEIGHBOUR_AFTER = 0.15
#: Topic words from which a message counts as saying something (:func:`~lossless.retrieval.ranking.substance`).
SUBSTANCE_WORDS = 6
#: The share of its score a chat turn that ends by asking keeps (:func:`~lossless.retrieval.ranking.asks`): it
#: names the topic, and the turn after it, which the neighbour share lifts, holds the answer.
ASKING = 0.8
#: Added to the score of a message inside the question's time window.
TIME_BOOST = 0.5
#: "Two weeks before the trip": the window is placed from each of this many best keyword matches of the event.
EVENT_MENTIONS = 3
#: Added to the score of a message that is the kind of record the question asks for
#: (:func:`~lossless.retrieval.ranking.question_intent`: a file-changing tool call for "which file did we
#: change …", a failed tool result for "why did … fail"); chosen on the dev split's agent sessions.
INTENT_BOOST = 0.3

Scope = Literal["messages", "summaries"]


def _keyword_options(options: GrepOptions, words: Sequence[str], scope: Scope) -> GrepOptions:
    """The any-word ``full_text`` grep of the keyword side (step 1) for ``words``."""
    query = " OR ".join(f'"{w}"' for w in dict.fromkeys(words))  # quoted: no word is an operator
    return GrepOptions(
        query, mode="full_text", scope=scope, since=options.since, before=options.before, limit=DEPTH, sort="relevance"
    )


async def _keyword_side(
    store: Store,
    options: GrepOptions,
    conversation_ids: tuple[int, ...],
    words: Sequence[str],
    scope: Scope,
    ahead: Mapping[SearchRequest, list[SearchRow]] | None = None,
) -> tuple[dict[int | str, float], bool]:
    """Item id → relevance (higher is better) for any of ``words``, and whether a tool's output is among the matches
    (an agent's session); ``ahead``: store pages read ahead, by request (:func:`keyword_requests`), used where this
    search's first page is among them."""
    if not words:
        return {}, False
    keyword = _keyword_options(options, words, scope)
    first = first_page_requests(keyword, conversation_ids) if ahead else None
    pages = [ahead[r] for r in first] if ahead and first and all(r in ahead for r in first) else None
    found = await grep(store, keyword, conversation_ids, first_pages=pages)
    return {h.ref: -(h.rank or 0.0) for h in found.hits}, any(h.role == "tool" for h in found.hits)


def _question_words(options: GrepOptions, stopwords: frozenset[str]) -> tuple[list[str], EventOffset | None]:
    """The question's keywords (its time expression's words dropped) and its event offset ("two weeks before …")."""
    probe = time_named(options.pattern)  # only its words matter here (the same whenever it is asked)
    offset = event_offset(options.pattern) if probe is None else None
    if offset is not None:  # "two weeks before the trip": the offset's words carry no topic
        probe = TimeWindow(PROBE_AT, PROBE_AT, offset.words)
    return keywords(options.pattern, probe, stopwords=stopwords), offset


def keyword_requests(options: GrepOptions, conversation_ids: tuple[int, ...]) -> list[SearchRequest]:
    """The store requests of the first page of each keyword search a ``hybrid`` grep with an embedder sends (step
    1, one per scope searched), for a caller that reads them ahead (with the caller's reach, in one round trip) and
    hands the rows to :func:`hybrid_hits` as ``ahead``; none where the question has no usable keyword side."""
    if options.mode != "hybrid" or options.scope not in ("messages", "summaries", "both"):
        return []
    if isinstance(parse_full_text(options.pattern), QuerySyntax):  # grep_semantic ranks it by meaning alone
        return []
    words, _ = _question_words(options, STOPWORDS)
    if not words:
        return []
    scopes: list[Scope] = ["messages", "summaries"] if options.scope == "both" else [options.scope]
    return [
        r
        for scope in scopes
        for r in first_page_requests(_keyword_options(options, words, scope), conversation_ids) or []
    ]


async def _semantic_scores(
    search: SemanticSearch,
    options: GrepOptions,
    conversation_ids: tuple[int, ...],
    scope: Scope,
    words: Sequence[str] = (),
    *,
    recheck: bool = True,
) -> dict[int | str, tuple[float, int]]:
    """Item id → (cosine, conversation id); ``recheck=False``: the question's second search of messages (the port
    need not read again whether the vectors changed since the first)."""
    allowed = set(conversation_ids)
    texts = [options.pattern]
    form = getattr(search, "query_form", None) or SEMANTIC_QUERY  # the embedder's own preference first
    if words and " ".join(words) != options.pattern:
        texts = {"keywords": [" ".join(words)], "both": [options.pattern, " ".join(words)]}.get(form, texts)
    # A time filter drops candidates after the port ranked them: ask deeper, so the filtered ones are not all gone.
    depth = DEPTH if options.since is None and options.before is None else FILTERED_DEPTH
    out: dict[int | str, tuple[float, int]] = {}
    for text in texts:
        found: list[tuple[int | str, float, int]]
        if scope == "messages":
            again = None if recheck else getattr(search, "search_again", None)  # the port's optional part
            if again is not None:
                hits = await again(text, list(conversation_ids), limit=depth)
            else:
                hits = await search.search(text, list(conversation_ids), limit=depth, mode="semantic")
            found = [(h.message_id, h.score, h.conversation_id) for h in hits]
        else:
            summaries = await search.search_summaries(text, list(conversation_ids), limit=depth, mode="semantic")
            found = [(h.summary_id, h.score, h.conversation_id) for h in summaries]
        for key, score, conversation_id in found:
            if conversation_id in allowed and score > out.get(key, (float("-inf"), 0))[0]:
                out[key] = (score, conversation_id)
    return out


async def _name_blind(
    store: Store,
    search: SemanticSearch,
    options: GrepOptions,
    conversation_ids: tuple[int, ...],
    words: Sequence[str],
    semantic: dict[int | str, tuple[float, int]],
    read: dict[int, MessageRecord] | None = None,
) -> dict[int | str, tuple[float, int]]:
    """The meaning scores blended with those of the question without the speakers' names it mentions (step 2).

    ``read``: the messages read for their speakers are added to it (the later steps need not read them again)."""
    if not any(c.isupper() or not c.isascii() for c in options.pattern):  # no name can be in it: nothing to read
        return semantic
    probe = sorted(semantic, key=lambda key: semantic[key][0], reverse=True)[:SPEAKER_PROBE]
    probed = await store.get_messages_by_id([int(key) for key in probe])
    if read is not None:
        read.update((record.id, record) for record in probed)
    labels = {label[0] for record in probed if (label := speaker_label(record.content, record.metadata)) is not None}
    names = named_in(options.pattern, labels)
    if HUB_SHARE < 1.0 and probed:
        for word in capitalised(options.pattern):
            if word in names or word in labels:
                continue
            holding = sum(1 for record in probed if named_in(record.content, [word]))
            if holding >= HUB_SHARE * SPEAKER_PROBE:
                names.append(word)
    blind_text = without_names(options.pattern, names) if names else ""
    if not _WORDY.search(blind_text):
        return semantic
    parts = {part for name in names for part in name.split()}  # "Mary Ann" is two keywords
    blind_words = [w for w in words if w not in parts]
    blind = await _semantic_scores(
        search, replace(options, pattern=blind_text), conversation_ids, "messages", blind_words, recheck=False
    )
    return _blend(semantic, blind, NAME_BLIND_SHARE)


async def _with_keywords(
    search: SemanticSearch,
    options: GrepOptions,
    conversation_ids: tuple[int, ...],
    words: Sequence[str],
    semantic: dict[int | str, tuple[float, int]],
) -> dict[int | str, tuple[float, int]]:
    """The messages' meaning scores blended with their cosines to the question's keywords (:data:`KEYWORD_QUERY_SHARE`),
    where the meaning side embedded the question as written; unchanged otherwise (it embedded the keywords already)."""
    text = " ".join(words)
    form = getattr(search, "query_form", None) or SEMANTIC_QUERY
    if KEYWORD_QUERY_SHARE <= 0 or form != "question" or not text or text == options.pattern:
        return semantic
    keyworded = await _semantic_scores(
        search, replace(options, pattern=text), conversation_ids, "messages", words, recheck=False
    )
    return _blend(semantic, keyworded, KEYWORD_QUERY_SHARE)


async def _in_time(
    store: Store,
    options: GrepOptions,
    scope: Scope,
    semantic: dict[int | str, tuple[float, int]],
    read: dict[int, MessageRecord] | None,
) -> dict[int | str, tuple[float, int]]:
    """The meaning side's candidates inside ``since`` / ``before`` (a message by when it was stored, a summary when
    the span it covers overlaps), read once; ``read``: the messages read are added to it."""
    if scope == "messages":
        records = await store.get_messages_by_id([int(key) for key in semantic])
        if read is not None:
            read.update((record.id, record) for record in records)
        inside: set[int | str] = {m.id for m in records if _in_window(options, m.created_at)}
    else:
        summaries = await store.get_summaries([str(key) for key in semantic])
        inside = {
            s.id for s in summaries if _overlaps(options, s.earliest_at or s.created_at, s.latest_at or s.created_at)
        }
    return {key: value for key, value in semantic.items() if key in inside}


def _blend(
    asked: dict[int | str, tuple[float, int]], blind: dict[int | str, tuple[float, int]], share: float
) -> dict[int | str, tuple[float, int]]:
    """``share`` of each item's ``blind`` score plus the rest of its ``asked`` one; an item one ranking did not
    return counts that ranking's lowest score."""
    floor_asked = min((score for score, _ in asked.values()), default=0.0)
    floor_blind = min((score for score, _ in blind.values()), default=0.0)
    out: dict[int | str, tuple[float, int]] = {}
    for key in dict.fromkeys([*asked, *blind]):
        conversation_id = (asked.get(key) or blind[key])[1]
        score = (1 - share) * asked.get(key, (floor_asked, 0))[0] + share * blind.get(key, (floor_blind, 0))[0]
        out[key] = (score, conversation_id)
    return out


def _boost(
    scores: dict[int | str, float], when: dict[int | str, datetime], windows: Sequence[TimeWindow], boost: float
) -> None:
    """Add ``boost`` once to each item inside any of ``windows``."""
    for key in scores:
        moment = when.get(key)
        if moment is not None and any(window.contains(moment) for window in windows):
            scores[key] += boost


async def _fused(
    store: Store,
    options: GrepOptions,
    conversation_ids: tuple[int, ...],
    search: SemanticSearch | None,
    scope: Scope,
    words: Sequence[str],
    keyword_weight: float = ranking.KEYWORD_WEIGHT,
    read: dict[int, MessageRecord] | None = None,
    ahead: Mapping[SearchRequest, list[SearchRow]] | None = None,
    agent_weight: float | None = None,
    by_words: bool = True,
) -> dict[int | str, float]:
    """The keyword and meaning sides fused (``keyword_weight``; ``agent_weight`` instead, where given, when a tool's
    output is among the keyword matches).  ``by_words=False``: the meaning side alone, scaled to 0–1 (no keyword
    search; ``words`` still make the meaning side's keyword wording); items with no positive similarity are left
    out, as nothing matched them."""
    keyword, tools = (
        await _keyword_side(store, options, conversation_ids, words, scope, ahead) if by_words else ({}, False)
    )
    if search is None:  # words alone: each score as a share of the best (a weak match keeps its weight)
        best = max(keyword.values(), default=0.0)
        return {key: value / best if best > 0 else 1.0 for key, value in keyword.items()}
    semantic = await _semantic_scores(search, options, conversation_ids, scope, words)
    if scope == "messages":
        semantic = await _with_keywords(search, options, conversation_ids, words, semantic)
    if scope == "messages" and NAME_BLIND_SHARE > 0:
        semantic = await _name_blind(store, search, options, conversation_ids, words, semantic, read)
    if options.since is not None or options.before is not None:
        semantic = await _in_time(store, options, scope, semantic, read)
    if not by_words:
        return fuse({}, {key: score for key, (score, _) in semantic.items() if score > 0}, keyword_weight=0.0)
    if tools and agent_weight is not None:
        keyword_weight = agent_weight
    return fuse(keyword, {key: score for key, (score, _) in semantic.items()}, keyword_weight=keyword_weight)


async def _message_fusion(
    store: Store,
    options: GrepOptions,
    conversation_ids: tuple[int, ...],
    search: SemanticSearch | None,
    words: Sequence[str],
    shared: dict[str, dict[int | str, float]] | None,
    read: dict[int, MessageRecord] | None = None,
    ahead: Mapping[SearchRequest, list[SearchRow]] | None = None,
    by_words: bool = True,
) -> dict[int | str, float]:
    """The messages' fused ranking (step 3, with the hybrid message weights), from ``shared`` when made before;
    ``read``: the messages it read on the way are added to it; ``by_words=False``: the meaning side alone."""
    if shared is not None and "messages" in shared:
        return shared["messages"]
    weight = KEYWORD_WEIGHT if search is not None else ranking.KEYWORD_WEIGHT
    fused = await _fused(
        store, options, conversation_ids, search, "messages", words, weight, read, ahead, AGENT_KEYWORD_WEIGHT, by_words
    )
    if shared is not None:
        shared["messages"] = fused
    return fused


async def hybrid_hits(
    store: Store,
    options: GrepOptions,
    conversation_ids: tuple[int, ...],
    search: SemanticSearch | None,
    scope: Scope,
    *,
    keyword: bool = True,
    stopwords: frozenset[str] = STOPWORDS,
    agent: str | None = None,
    shared: dict[str, dict[int | str, float]] | None = None,
    ahead: Mapping[SearchRequest, list[SearchRow]] | None = None,
) -> tuple[list[GrepHit], bool]:
    """Up to ``limit`` hits of ``scope``, best first, and whether more passed the filters.

    ``keyword=False`` ranks by meaning alone: no keyword search, the question's words only make the meaning side's
    keyword wording (``semantic`` mode, or a text the caller found unusable as a word query); every other step
    runs as for ``hybrid`` but the memory leads and summaries' sources, which only ``hybrid`` uses.
    ``search=None`` ranks by words alone (:func:`keyword_hits`).  ``stopwords``: the words the keyword
    side drops from the question.  ``agent``: whose long-term memories lead to messages (``hybrid``
    messages only; ``None``: the port's own agent).  ``shared``: kept by the caller across the calls for
    each scope of one search, so the messages' fused ranking (step 3, which step 9 reads too) is made once.
    ``ahead``: the pages of :func:`keyword_requests` read ahead (by request; a page is used only for the
    request it answers, so pages read for other conversations or words are never used).
    """
    words, offset = _question_words(options, stopwords)
    fitted = scope == "messages" and search is not None  # the hybrid message ranking's own weights
    read: dict[int, MessageRecord] = {}  # every message read so far by this search (none is read twice)
    if scope == "messages":  # a copy: the steps below change it
        scores = dict(
            await _message_fusion(store, options, conversation_ids, search, words, shared, read, ahead, keyword)
        )
    else:  # summaries keep the hand-set fusion weight
        scores = await _fused(store, options, conversation_ids, search, scope, words, ahead=ahead, by_words=keyword)
    if scope == "messages":
        if search is not None:
            await _lifted(store, options, conversation_ids, search, words, agent, scores)
        ranked = best_first(scores)[: DEPTH * 2]
        # The ranked messages and the turns around them (ids next to theirs), in one read.
        keys = [int(k) for k, _ in ranked]
        have = await _completed(store, read, [*keys, *(k + d for k in keys for d in (-1, 1))])
        records = {k: have[k] for k in keys if k in have}  # in rank order, as read before
        neighbours, tools, around = _neighbours(list(records.values()), have)
        kept = {k: s for k, s in ranked if int(k) in records}
        if fitted:
            scores = with_neighbours(
                kept,
                neighbours,
                before=NEIGHBOUR_BEFORE,
                after=NEIGHBOUR_AFTER,
                best_only=NEIGHBOUR_BEST_ONLY,
                tools=tools,
                tool_before=TOOL_NEIGHBOUR_BEFORE,
                tool_after=TOOL_NEIGHBOUR_AFTER,
            )
        else:  # the any-word ranking of a full_text question: its own hand-set share, the better side only
            scores = with_neighbours(kept, neighbours, best_only=True)
        records = await _completed(store, have | around, scores)
        when: dict[int | str, datetime] = {key: records[int(key)].created_at for key in scores if int(key) in records}
        enough, asking = (SUBSTANCE_WORDS, ASKING) if fitted else (ranking.SUBSTANCE_WORDS, 1.0)
        _priors(scores, records, options.pattern, enough, asking)
    else:
        found = await store.get_summaries([str(k) for k in scores])
        summaries = {s.id: s for s in found}
        sources: dict[str, int] = {}
        if options.mode == "hybrid" and SOURCE_SHARE > 0:
            sources = await _found_by_sources(
                store, options, conversation_ids, search, words, summaries, scores, shared, keyword
            )
        when = {key: s.latest_at or s.created_at for key, s in summaries.items()}
    allowed = set(conversation_ids)
    if when:
        window = time_window(options.pattern, max(when.values()))
        windows = [] if window is None else [window]
        if window is None and offset is not None and scope == "messages":
            windows = await _event_windows(store, options, conversation_ids, offset)
        _boost(scores, when, windows, TIME_BOOST if fitted else ranking.TIME_BOOST)
    hits: list[GrepHit] = []
    for key, score in best_first(scores):
        if scope == "messages":
            record = records.get(int(key))
            if record is None or record.conversation_id not in allowed or not _in_window(options, record.created_at):
                continue
            hit = GrepHit(
                scope="messages",
                ref=record.id,
                conversation_id=record.conversation_id,
                created_at=record.created_at,
                snippet=snippet(record.content, *_locate(record.content, words)),
                role=record.role,
                score=score,
            )
        else:
            summary = summaries.get(str(key))
            if summary is None or summary.conversation_id not in allowed:
                continue
            earliest, latest = summary.earliest_at or summary.created_at, summary.latest_at or summary.created_at
            if not _overlaps(options, earliest, latest):
                continue
            hit = GrepHit(
                scope="summaries",
                ref=summary.id,
                conversation_id=summary.conversation_id,
                created_at=latest,
                snippet=snippet(summary.content, *_locate(summary.content, words)),
                kind=summary.kind,
                depth=summary.depth,
                score=score,
                source=sources.get(summary.id),
            )
        if len(hits) == options.limit:
            return hits, True
        hits.append(hit)
    return hits, False


def _priors(
    scores: dict[int | str, float],
    records: dict[int, MessageRecord],
    question: str,
    enough: int,
    asking: float = 1.0,
) -> None:
    """The substance prior (a turn that says little keeps that share of its score; a tool's output, understood by
    its call, is spared it: "No matches found" answers what a search returned), the asking prior (a chat turn
    that ends by asking keeps ``asking`` of it) and the intent boost, in place."""
    intent = ranking.question_intent(question)
    for key in scores:
        record = records.get(int(key))
        if record is None:
            continue
        if enough > 0 and not ranking.is_tool_output(record.role, record.content):
            # a speaker named in metadata counts as one named in the text ("Maya: …")
            if record.metadata is None and len(record.content) <= _KEPT_TEXT:
                scores[key] *= _plain_substance(record.content, enough)
            else:
                scores[key] *= ranking.substance(spoken(record.content, record.metadata), enough)
        if asking < 1.0 and ranking.asks(record.role, record.content):
            scores[key] *= asking
        if intent is not None and ranking.shows(intent, record.role, record.content):
            scores[key] += INTENT_BOOST


#: The longest text whose substance prior :func:`_plain_substance` keeps (a typical turn; longer: scored each time).
_KEPT_TEXT = 2_000


@lru_cache(maxsize=8_192)
def _plain_substance(content: str, enough: int) -> float:
    """The substance prior of a turn without metadata (kept per text: each question reads some 650 turns, mostly
    the same ones again): exactly ``ranking.substance(spoken(content, None), enough)``."""
    return ranking.substance(spoken(content, None), enough)


async def keyword_hits(
    store: Store,
    options: GrepOptions,
    scopes: list[Scope],
    conversation_ids: tuple[int, ...],
) -> tuple[list[GrepHit], bool]:
    """The any-word matches of a ``full_text`` query ranked for a question, best first, and whether there are more.

    The ranking is :func:`hybrid_hits` on its keyword side alone: BM25
    of the question's words, function words dropped
    (:data:`~lossless.questions.FUNCTION_WORDS`), then neighbours, the substance prior and
    time; scopes merge by score.  :func:`~lossless.retrieval.grep.grep` calls it as ``rank_any_word``.
    """
    found: list[GrepHit] = []
    more = False
    for scope in scopes:
        hits, extra = await hybrid_hits(store, options, conversation_ids, None, scope, stopwords=FUNCTION_WORDS)
        found += hits
        more = more or extra
    if len(scopes) > 1:
        found.sort(key=lambda h: -(h.score or 0.0))
        more = more or len(found) > options.limit
        found = found[: options.limit]
    return found, more


async def _event_windows(
    store: Store, options: GrepOptions, conversation_ids: tuple[int, ...], offset: EventOffset
) -> list[TimeWindow]:
    """The windows of "N weeks before EVENT", one from each of the :data:`EVENT_MENTIONS` messages that best match
    the event's words (a trip is planned, taken and told about: which mention dates it is not known)."""
    found = best_first((await _keyword_side(store, options, conversation_ids, offset.event, "messages"))[0])
    events = await store.get_messages_by_id([int(key) for key, _ in found[:EVENT_MENTIONS]])
    return [offset.window(event.created_at) for event in events]


async def _summary_first(
    store: Store,
    options: GrepOptions,
    conversation_ids: tuple[int, ...],
    search: SemanticSearch,
    words: Sequence[str],
    scores: dict[int | str, float],
) -> None:
    """Let the best-matching leaf summaries lift the messages they cover (adds to ``scores`` in place)."""
    summary_scores = await _fused(store, options, conversation_ids, search, "summaries", words)
    top = [str(k) for k, _ in best_first(summary_scores)[:SUMMARY_FANOUT]]
    if not top:
        return
    covered = await store.get_summary_messages(top)
    for summary_id, message_ids in covered.items():
        lift = SUMMARY_SHARE * summary_scores[summary_id]
        for message_id in message_ids:
            scores[message_id] = scores.get(message_id, 0.0) + lift


async def _found_by_sources(
    store: Store,
    options: GrepOptions,
    conversation_ids: tuple[int, ...],
    search: SemanticSearch | None,
    words: Sequence[str],
    summaries: dict[str, Summary],
    scores: dict[int | str, float],
    shared: dict[str, dict[int | str, float]] | None = None,
    by_words: bool = True,
) -> dict[str, int]:
    """A leaf summary is found by what it condenses too (``scores`` in place); returns each lifted leaf's best message.

    Each summary's score becomes ``(own + SOURCE_SHARE * best) / (1 + SOURCE_SHARE)``, ``best`` being the
    fused score of the best-matching message a leaf condenses (0 for condensed summaries), so scores stay
    within the messages' range (a ``scope="both"`` merge by score stays fair).
    """
    leaves = [summary.id for summary in summaries.values() if summary.depth == 0]
    messages = (
        await _message_fusion(store, options, conversation_ids, search, words, shared, by_words=by_words)
        if leaves
        else {}
    )
    sources = await store.get_summary_messages(leaves) if messages else {}
    best_of: dict[str, int] = {}
    for key in scores:
        matched = [(messages[m], m) for m in sources.get(str(key), ()) if messages.get(m, 0.0) > 0]
        best, best_of[str(key)] = max(matched) if matched else (0.0, 0)
        scores[key] = (scores[key] + SOURCE_SHARE * best) / (1 + SOURCE_SHARE)
    return {key: message_id for key, message_id in best_of.items() if message_id}


async def _lifted(
    store: Store,
    options: GrepOptions,
    conversation_ids: tuple[int, ...],
    search: SemanticSearch,
    words: Sequence[str],
    agent: str | None,
    scores: dict[int | str, float],
) -> None:
    """Steps 4 and 5: memory leads (``hybrid`` only), then summary-first (adds to ``scores`` in place)."""
    if MEMORY_SHARE > 0 and options.mode == "hybrid":
        await _memory_first(options, conversation_ids, search, agent, scores)
    if SUMMARY_SHARE > 0:
        await _summary_first(store, options, conversation_ids, search, words, scores)


async def _memory_first(
    options: GrepOptions,
    conversation_ids: tuple[int, ...],
    search: SemanticSearch,
    agent: str | None,
    scores: dict[int | str, float],
) -> None:
    """Let the long-term memories that match the question lift the messages they were mined from (in place).

    The best memory's sources gain :data:`MEMORY_SHARE` of the best message's score, the others in
    proportion to their memory's score.  A port without memories (or none in reach) changes nothing.
    """
    leads_of = getattr(search, "memory_leads", None)  # the port's optional part (``MessageSearch.memory_leads``)
    if leads_of is None:
        return
    leads: Sequence[SemanticHit] = await leads_of(
        options.pattern, list(conversation_ids), agent=agent, limit=MEMORY_LIMIT
    )
    top = max((lead.score for lead in leads), default=0.0)
    if top <= 0:
        return
    best = max(scores.values(), default=0.0) or 1.0
    for lead in leads:
        if lead.score > 0:
            scores[lead.message_id] = scores.get(lead.message_id, 0.0) + MEMORY_SHARE * best * lead.score / top


async def _completed(
    store: Store, records: dict[int, MessageRecord], keys: Iterable[int | str]
) -> dict[int, MessageRecord]:
    """``records`` with those of ``keys`` it lacks read from the store (no read when it lacks none)."""
    missing = list(dict.fromkeys(int(key) for key in keys if int(key) not in records))
    return records | {m.id: m for m in await store.get_messages_by_id(missing)} if missing else records


def _neighbours(
    records: Sequence[MessageRecord], read: dict[int, MessageRecord]
) -> tuple[dict[int | str, tuple[int | str | None, int | str | None]], set[int | str], dict[int, MessageRecord]]:
    """For each message, the ids of the turns right before and right after it in its conversation (or None);
    which of them all are a tool's call or output (:func:`~lossless.retrieval.ranking.is_tool_record`); and
    every message of them, by id (those given and their neighbours).  ``read``: the messages read, among them
    every one with an id next to a given one's that exists (the caller reads them first)."""
    given = {m.id: m for m in records}
    around = {m.id + d for m in records for d in (-1, 1)} - given.keys()
    found = {key: read[key] for key in around if key in read} | given
    tools: set[int | str] = {key for key, m in found.items() if ranking.is_tool_record(m.role, m.content)}
    out: dict[int | str, tuple[int | str | None, int | str | None]] = {}
    for m in records:
        near: list[int | str | None] = []
        for other_id in (m.id - 1, m.id + 1):
            other = found.get(other_id)
            same = other is not None and other.conversation_id == m.conversation_id and abs(other.seq - m.seq) == 1
            near.append(other_id if same else None)
        out[m.id] = (near[0], near[1])
    return out, tools, found


def _locate(text: str, words: Sequence[str]) -> tuple[int, int]:
    import re

    if words:
        pattern = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
        found = re.search(pattern, text, re.IGNORECASE)
        if found is not None:
            return found.start(), found.end()
    return 0, 0


def _in_window(options: GrepOptions, moment: datetime) -> bool:
    return _overlaps(options, moment, moment)


def _overlaps(options: GrepOptions, earliest: datetime, latest: datetime) -> bool:
    return (options.since is None or latest >= options.since) and (options.before is None or earliest < options.before)
