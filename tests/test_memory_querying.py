"""Memory queries: tag-scoped recall, synonym expansion, and the retrieval settings reaching the service."""

from __future__ import annotations

from dataclasses import replace

import pytest
from click.testing import CliRunner

from lossless.cli import cli
from lossless.config import Config, load_config
from lossless.engine import open_memory
from lossless.errors import ConfigError, InputError
from lossless.memory.querying import MAX_ADDED, MAX_QUERY_CHARS, check_query, expand, holds_tags, names, split_tags
from lossless.memory.ranking import Candidate, RetrievalConfig, fuse
from lossless.memory.records import Memory, MemoryDraft

pytestmark = pytest.mark.anyio


def test_tag_words_are_taken_out_of_the_query() -> None:
    asked = split_tags("deploy steps PROJ:Atlas env:prod", ("proj", "env"))
    assert asked.text == "deploy steps" and asked.tags == ("proj:atlas", "env:prod")
    assert split_tags("proj:atlas", ("proj",)).text == "proj atlas"  # tags alone: search their words
    assert split_tags("proj:atlas", ()).tags == ()  # no prefixes: a plain word
    assert split_tags("http://x.y/z", ("proj",)).tags == ()


def test_expansion_only_adds_a_few_synonyms() -> None:
    assert expand("the db is slow").startswith("the db is slow ")
    assert "database" in expand("the db is slow")
    assert len(expand("db bug config deploy test docs").split()) <= 6 + MAX_ADDED
    assert expand("nothing to see here") == "nothing to see here"
    assert "database" in expand("数据库很慢")


def test_names_are_the_capitalised_words_that_are_not_question_words() -> None:
    assert names("Which day of the week are Jonas's music classes?") == ("jonas",)
    assert names("How do I deploy Kubernetes on AWS?") == ("kubernetes", "aws")
    assert names("what does the user drink") == ()
    assert names("Where are Maya and Robin going? Maya said Friday") == ("maya", "robin", "friday")


def test_the_settings_are_validated_and_shown(tmp_path: object) -> None:
    config = load_config(
        {"hardMinScore": 0.5, "tagPrefixes": ["area"]},
        env={
            "LCM_MEMORY_RECENCY_WEIGHT": "0",
            "LCM_MEMORY_QUERY_EXPANSION": "false",
            "LCM_MEMORY_STALE_THRESHOLD": "0.2",
        },
    )
    assert (config.memory_hard_min_score, config.memory_tag_prefixes) == (0.5, ("area",))
    assert (config.memory_recency_weight, config.memory_query_expansion, config.memory_stale_threshold) == (
        0,
        False,
        0.2,
    )
    for bad in ({"memory_min_score": 1.5}, {"memory_time_decay": "linear"}, {"memory_tag_prefixes": ["has space"]}):
        with pytest.raises(ConfigError):
            load_config(bad, env={})
    shown = CliRunner().invoke(cli, ["config", "show"], env={"LCM_MEMORY_MIN_SCORE": "0.4"})
    assert shown.exit_code == 0, shown.output
    for name in ("memory_min_score", "memory_stale_threshold", "memory_tag_prefixes", "memory_query_expansion"):
        assert name in shown.output


async def test_tags_scope_recall_and_settings_reach_the_search(config: Config) -> None:
    config = config.replace(memory_embedder="hash")
    async with await open_memory(config) as session:
        service = session.service
        atlas = await service.add(
            MemoryDraft("Deploys of proj:atlas go out on Fridays after the freeze.", category="events")
        )
        zeus = await service.add(MemoryDraft("Deploys of proj:zeus go out on Mondays at noon.", category="events"))
        tagged = replace(zeus, metadata={"tags": ["Team:Infra"]})  # a tag in metadata counts as well as one in the text
        assert holds_tags(tagged, ["team:infra", "proj:zeus"]) and not holds_tags(tagged, ["proj:atlas"])
        both = await service.search("deploys go out", record_access=False)
        assert {h.memory.memory_id for h in both.hits} == {atlas.memory_id, zeus.memory_id}
        scoped = await service.search("deploys go out proj:atlas", record_access=False)
        assert [h.memory.memory_id for h in scoped.hits] == [atlas.memory_id]
        assert not (await service.search("deploys proj:hermes", record_access=False)).hits
        stats = await service.stats()
        assert stats.stale == 0 and stats.to_dict()["stale"] == 0  # fresh memories are not stale
    # Every memory is below a threshold of 1; a hard floor above every score leaves nothing.
    async with await open_memory(config.replace(memory_stale_threshold=1.0, memory_hard_min_score=1.5)) as session:
        assert (await session.service.stats()).stale == 2
        assert not (await session.service.search("deploys go out", record_access=False)).hits
    async with await open_memory(config.replace(memory_tag_prefixes=())) as session:  # no tags: plain words
        plain = await session.service.search("deploys go out proj:atlas", record_access=False)
        assert len(plain.hits) == 2


async def test_expansion_finds_a_memory_by_a_synonym(config: Config) -> None:
    async with await open_memory(config.replace(memory_embedder="hash")) as session:
        service = session.service
        memory = await service.add(MemoryDraft("The staging database runs on host seven.", category="entities"))
        expanded = await service.search("db", record_access=False, expand=True)
        assert [h.memory.memory_id for h in expanded.hits] == [memory.memory_id]
        assert not (await service.search("db", record_access=False)).hits


def test_fusion_weights_are_settings_that_reach_the_fusion() -> None:
    config = load_config({"vectorWeight": 0.2}, env={"LCM_MEMORY_BM25_WEIGHT": "0.8"})
    assert (config.memory_vector_weight, config.memory_bm25_weight) == (0.2, 0.8)
    with pytest.raises(ConfigError):
        load_config({"memory_bm25_weight": -0.1}, env={})

    def memory(memory_id: str) -> Memory:
        from .test_memory import _memory

        return _memory(memory_id=memory_id)

    semantic = Candidate(memory("mem_semantic"), cosine=0.95, bm25_raw=0.0, vector_rank=1, keyword_rank=2)
    keyword = Candidate(memory("mem_keyword"), cosine=0.3, bm25_raw=6.0, vector_rank=2, keyword_rank=1)

    def order(settings: Config) -> list[str]:
        pool, _ = fuse([semantic, keyword], RetrievalConfig.from_config(settings))
        return [s.candidate.memory.memory_id for s in pool]

    assert order(Config()) == ["mem_semantic", "mem_keyword"]  # the reference's 0.7 / 0.3
    assert order(config) == ["mem_keyword", "mem_semantic"]


@pytest.mark.parametrize("bad", ["", "   ", None, 42, "x" * (MAX_QUERY_CHARS + 1), "bad \ud800 surrogate"])
def test_a_query_must_be_short_valid_text(bad: object) -> None:
    with pytest.raises(InputError):
        check_query(bad)


def test_a_query_of_the_longest_length_is_accepted() -> None:
    check_query("x" * MAX_QUERY_CHARS)
    check_query("What did Maya buy?")
