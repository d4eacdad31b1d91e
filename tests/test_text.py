"""lossless.text: one definition of words and CJK text for every keyword search, ranking and the hash embedder."""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from lossless.assembly import terms
from lossless.memory.admission import _words as admission_words
from lossless.stores.sqlite.memory import fts_terms
from lossless.text import (
    CJK_RUN,
    IDENTIFIER_ACRONYM,
    IDENTIFIER_CAMEL,
    IDENTIFIER_PATTERN,
    IDENTIFIER_SEPARATORS,
    IDENTIFIER_SPLIT,
    STOP_WORDS,
    WORD,
    cjk_bigrams,
    escaped_words,
    identifier_words,
    indexed_message_text,
    indexed_text,
    keyword_terms,
    search_terms,
)


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
    from lossless.retrieval import query
    from lossless.text import CJK_CHAR

    assert extraction._CJK is fragments._CJK is CJK_CHAR  # ranking counts topic words with text.topic_words
    cases = [("备份", True), ("ｶﾀｶﾅ", True), ("한국어", True), ("𠀋", True), ("。、", False), ("plain", False)]
    for text, cjk in cases:
        assert query.has_cjk(text) is cjk, text


def test_identifiers_are_split_into_their_words() -> None:
    cases = {
        "outputHookMessage": "output Hook Message",
        "HTTPServerError": "HTTP Server Error",
        "getHTTPResponse": "get HTTP Response",
        "TestGetOrCreateEntireSessionID": "Test Get Or Create Entire Session ID",
        "session_state.go": "session state go",
        "golangci-lint": "golangci lint",
        "utf8Encode": "utf8 Encode",
        "std::vector": "std  vector",
        "C:\\Users\\me": "C  Users me",
        "/Users/x/cli/cmd/manual_commit_attribution.go": "Users x cli cmd manual commit attribution go",
    }
    for identifier, words in cases.items():
        assert identifier_words(identifier) == words, identifier
        assert indexed_text(f"see {identifier}.") == f"see {identifier}.\n{words}"
    # One identifier a line, in order; prose, plain numbers, dates and versions without letters add nothing.
    assert identifier_words("run golangci-lint on session_state.go") == "golangci lint\nsession state go"
    for plain in ("the tests pass now", "at 12:30 on 2026-11-26, 3.14", "Hello World", "don't", "ünïcødé"):
        assert identifier_words(plain) == "" and indexed_text(plain) == plain, plain
    assert identifier_words("v1.2.3 x-9") == "v1 2 3\nx 9"  # a letter makes it an identifier


def test_the_words_of_an_identifier_are_what_the_word_search_reads() -> None:
    """Each added word is in the text (case aside): the index learns no word the text lacks."""
    text = "Fixed `parseHTTPHeaders` in src/net/http_util.py (see HTTPServerError)."
    added = WORD.findall(identifier_words(text))
    assert added == ["parse", "HTTP", "Headers", "src", "net", "http", "util", "py", "HTTP", "Server", "Error"]
    assert all(word.lower() in text.lower() for word in added)


_IDENTIFIER_TEXT = st.text(alphabet=st.sampled_from([*"abcXYZ019_./\\:- \n", "é", "数", "Ω"]), max_size=60)


@settings(max_examples=300, deadline=None)
@given(text=_IDENTIFIER_TEXT)
def test_indexed_text_never_drops_a_word_and_adds_only_words_of_the_text(text: str) -> None:
    indexed = indexed_text(text)
    assert indexed.startswith(text)  # the text itself, unchanged, comes first
    assert set(WORD.findall(text)) <= set(WORD.findall(indexed))
    lowered = text.lower()
    assert all(word.lower() in lowered for word in WORD.findall(identifier_words(text)))
    # The words are plain: splitting them again adds nothing.
    assert identifier_words(identifier_words(text)) == ""


@settings(max_examples=100, deadline=None)
@given(words=st.lists(st.from_regex(r"[a-z]{1,8}|[A-Z][a-z]{0,7}|[0-9]{1,4}", fullmatch=True), max_size=12))
def test_plain_words_are_indexed_as_they_are(words: list[str]) -> None:
    text = " ".join(words)
    assert indexed_text(text) == text
    assert indexed_text(indexed_text(text)) == indexed_text(text)


def _identifier_words_as_defined(text: str) -> str:
    """identifier_words written as its docstring says: every compound, tested, split one at a time."""
    spaces = str.maketrans(IDENTIFIER_SEPARATORS, " " * len(IDENTIFIER_SEPARATORS))
    lines = []
    for compound in re.findall(IDENTIFIER_PATTERN, text):
        if re.search(IDENTIFIER_SPLIT, compound) and re.search("[A-Za-z]", compound):
            words = re.sub(IDENTIFIER_ACRONYM, r"\1 \2", re.sub(IDENTIFIER_CAMEL, r"\1 \2", compound))
            lines.append(words.translate(spaces))
    return "\n".join(lines)


@settings(max_examples=500, deadline=None)
@given(
    text=st.lists(
        st.sampled_from(["a", "b", "X", "YZ", "Http", "0", "9", "_", ".", "/", "\\", ":", "-", " ", "é"]), max_size=24
    ).map("".join)
)
def test_identifier_words_are_what_the_definition_says(text: str) -> None:
    assert identifier_words(text) == _identifier_words_as_defined(text)


def test_the_words_json_escapes_hide_are_indexed_for_messages() -> None:
    r"""``json.dumps`` of code puts an escape before each line: ``\tif`` is the word ``tif`` to a tokenizer."""
    arguments = json.dumps({"old_string": "func a() {\n\tif x {\n\t\tGetOrCreateID(id)\n\t}\r\n}"})
    assert escaped_words(arguments) == "if\nGetOrCreateID"
    assert indexed_message_text(arguments) == f"{indexed_text(arguments)}\nif\nGetOrCreateID"
    assert escaped_words(r"a quote \"q\" and \u00e9, a backslash \\nothing") == "othing"  # read as an escape
    assert escaped_words(r"C:\new\table") == "ew\nable"  # no escape: stray words, nothing hidden
    for plain in ("no backslash here", "a lone \\ and \\\\", "tab\tand newline\n (real ones)"):
        assert escaped_words(plain) == "" and indexed_message_text(plain) == indexed_text(plain), plain


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(st.sampled_from(["\\", "n", "t", "r", "x", "Ab", "9", " ", '"', "_", "é"]), max_size=30).map("".join)
)
def test_escaped_words_are_words_of_the_text_after_an_escape(text: str) -> None:
    indexed = indexed_message_text(text)
    assert indexed.startswith(indexed_text(text))  # what every other index reads comes first, unchanged
    for word in filter(None, escaped_words(text).split("\n")):
        assert re.search(r"\\[nrtbf]" + re.escape(word) + "(?![A-Za-z0-9])", text), word
