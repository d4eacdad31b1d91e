"""lossless.text: one definition of words and CJK text for every keyword search, ranking and the hash embedder."""

from __future__ import annotations

from lossless.assembly import terms
from lossless.memory.admission import _words as admission_words
from lossless.stores.sqlite.memory import fts_terms
from lossless.text import CJK_RUN, STOP_WORDS, cjk_bigrams, keyword_terms, search_terms


def test_cjk_covers_kana_ideographs_compatibility_and_hangul() -> None:
    for text in ("ひらがな", "カタカナ", "漢字", "㐀㐁", "豈更", "한국어"):
        assert CJK_RUN.fullmatch(text), text
    for text in ("abc", "Ünïcödé", "Ελληνικά", "123"):
        assert CJK_RUN.search(text) is None, text


def test_bigrams_overlap_and_a_single_character_is_itself() -> None:
    assert cjk_bigrams("数据库") == ["数据", "据库"]
    assert cjk_bigrams("库") == ["库"]
    assert cjk_bigrams("") == []


def test_search_terms_split_cjk_inside_words() -> None:
    assert search_terms("Deploy 数据库备份 now") == ["deploy", "数据", "据库", "库备", "备份", "now"]
    assert terms is search_terms  # assembly's BM25 ranks with the same terms


def test_keyword_terms_keep_cjk_runs_whole_and_cap_both() -> None:
    words, cjk = keyword_terms("The backup 备份 of the DB 数据库 the backup")
    assert words == ["the", "backup", "of", "db"] and cjk == ["备份", "数据库"]
    many = " ".join(f"w{i}" for i in range(50))
    assert len(keyword_terms(many)[0]) == 32
    assert fts_terms("备份 ok") == keyword_terms("备份 ok")  # the SQLite and PostgreSQL stores share it


def test_stop_words_are_english_function_words() -> None:
    assert {"the", "and", "of"} <= STOP_WORDS and "backup" not in STOP_WORDS


def test_admission_counts_cjk_characters_as_words() -> None:
    assert admission_words("我们 ok") == ["我", "们", "ok"]


def test_every_cjk_check_is_the_shared_one() -> None:
    from lossless.memory import extraction, fragments
    from lossless.retrieval import query, ranking
    from lossless.text import CJK_CHAR

    assert extraction._CJK is fragments._CJK is ranking._CJK is CJK_CHAR
    cases = [("备份", True), ("ｶﾀｶﾅ", True), ("한국어", True), ("𠀋", True), ("。、", False), ("plain", False)]
    for text, cjk in cases:
        assert query.has_cjk(text) is cjk, text
