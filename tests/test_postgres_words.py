"""Word queries on PostgreSQL (``lossless.stores.postgres.words``): parsing, and user text kept out of SQL."""

from __future__ import annotations

import pytest

from lossless.errors import InputError
from lossless.stores.postgres.words import (
    WordTerm,
    _term_sql,
    fragment_regex,
    parse_trigrams,
    parse_words,
    word_condition,
)


def test_postgres_query_translation_is_parameters_only() -> None:
    assert parse_words('("deploy"*) OR ("exact ""phrase""" AND "NEAR")') == (
        (WordTerm("deploy", prefix=True),),
        (WordTerm('exact "phrase"'), WordTerm("NEAR")),
    )
    for bad in ["deploy", '"a" "b"', '("a" OR "b")', '"a" AND', 'OR "a"', '(("a"))', '"a" AND ("b")']:
        with pytest.raises(InputError):
            parse_words(bad)
    assert parse_trigrams('"a.b" AND "x\\y"') == ("a.b", "x\\y")
    assert fragment_regex("σ.*") == "[Σςσ]\\.\\*"
    assert fragment_regex("数据") == "数据"
    assert fragment_regex("a\x00b") is None


def test_user_text_is_only_ever_a_bound_parameter() -> None:
    hostile = "x'); DROP TABLE messages; --"
    sql, params = _term_sql(WordTerm(hostile))
    assert "DROP" not in sql and hostile in params
    prefix_sql, prefix_params = _term_sql(WordTerm(hostile, prefix=True))
    # a prefix: the words before the last as a phrase, the last as one quoted lexeme, both bound
    assert "DROP" not in prefix_sql and prefix_params == ["x'); DROP TABLE ", "'messages':*"]
    # The resolved tsqueries are bound back too; the statement's shape comes from the parse alone.
    expression = f'("{hostile}") OR ("the" AND "deploy")'
    resolved = {WordTerm(hostile): "'drop' & 'tabl'", WordTerm("the"): "", WordTerm("deploy"): "'deploy'"}
    condition = word_condition(expression, resolved)
    assert "DROP" not in condition.where and "'drop'" not in condition.where
    assert condition.where_params[0] == "'drop' & 'tabl'" and "'deploy'" in condition.where_params
    assert "t.content ~ %s" in condition.where  # "the", a stop word, by a regular expression
    assert not condition.any_word  # a group of two terms: not a plain any-word search
    either = word_condition(
        '("deploy") OR ("rollback")', {WordTerm("deploy"): "'deploy'", WordTerm("rollback"): "'rollback'"}
    )
    assert either.any_word and either.where == "t.content_tsv @@ ((%s::tsquery) || (%s::tsquery))"
    # stop words only: a whole-word regular expression in any case; nothing searchable at all: no row
    the = word_condition('("the")', {WordTerm("the"): ""})
    assert the.where == "((t.content ~ %s))" and the.where_params == ["(^|[^[:alnum:]])[Tt][Hh][Ee]([^[:alnum:]]|$)"]
    assert word_condition('("\x00")', {WordTerm("\x00"): ""}).where == "false"
