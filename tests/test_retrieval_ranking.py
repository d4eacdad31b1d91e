"""Ranking helpers: score fusion, neighbour context, substance, intent (pure functions)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.questions import STOPWORDS, keywords
from lossless.retrieval import ranking
from lossless.retrieval.query import FullTextQuery, parse_full_text
from lossless.retrieval.ranking import (
    any_word_expression,
    best_first,
    fuse,
    question_intent,
    shows,
    with_neighbours,
)
from lossless.text import CJK_CHAR


def test_any_word_expression_quotes_every_word() -> None:
    assert any_word_expression(["deploy", 'say "hi"', "deploy"]) == '"deploy" OR "say ""hi"""'
    assert any_word_expression([]) is None


def test_fusion_normalises_each_side() -> None:
    keyword = {1: 12.0, 2: 6.0, 3: 0.0}  # BM25: scale-free
    semantic = {2: 0.61, 4: 0.60, 3: 0.2}  # cosines in a narrow band
    fused = fuse(keyword, semantic, keyword_weight=0.5)
    # 2 is good on both sides and wins; an id one side did not return counts 0 there.
    assert best_first(fused)[0][0] == 2
    assert fused[1] == 0.5 and fused[3] == 0.0
    assert fuse({}, {}) == {}
    # Weight 1 is the keyword ranking alone, weight 0 the semantic one.
    assert [k for k, _ in best_first(fuse(keyword, semantic, keyword_weight=1.0))][:2] == [1, 2]
    assert [k for k, _ in best_first(fuse(keyword, semantic, keyword_weight=0.0))][:2] == [2, 4]


def test_a_reply_inherits_from_the_turn_it_answers() -> None:
    scores = {10: 1.0, 20: 0.2}
    neighbours = {10: (9, 11), 20: (19, 21)}
    out = with_neighbours(scores, neighbours, before=0.3, after=0.5)
    # unscored neighbours are added with what they inherit: 11 has 10 before it, 9 has 10 after it
    assert out[11] == 0.3 and out[9] == 0.5
    assert out[10] == 1.0 and out[20] == 0.2  # its own neighbours had no score
    # The relation is read both ways, and both neighbours add up: 2 sits between 1 and 3.
    chain = with_neighbours({1: 1.0, 2: 0.5, 3: 0.2}, {1: (None, 2), 3: (2, None)}, before=0.5, after=0.25)
    assert chain == {1: 1.125, 2: 0.5 + 0.5 * 1.0 + 0.25 * 0.2, 3: 0.2 + 0.5 * 0.5}
    # best_only: the larger of the two shares only (the any-word ranking of a full_text question)
    best = with_neighbours({1: 1.0, 2: 0.5, 3: 0.2}, {2: (1, 3)}, before=0.3, after=0.3, best_only=True)
    assert best == {1: 1.0 + 0.3 * 0.5, 2: 0.5 + 0.3 * 1.0, 3: 0.2 + 0.3 * 0.5}
    assert with_neighbours({}, {}) == {}


@given(
    st.dictionaries(st.integers(0, 20), st.floats(0, 10), max_size=15),
    st.floats(0, 1),
    st.floats(0, 1),
    st.booleans(),
)
def test_neighbours_only_add(scores: dict[int, float], before: float, after: float, best_only: bool) -> None:
    chain = {k: (k - 1 if k > 0 else None, k + 1) for k in range(21)}
    out = with_neighbours(scores, chain, before=before, after=after, best_only=best_only)
    assert all(out[k] >= v for k, v in scores.items())
    # only the items scored and their neighbours come back
    assert set(out) <= {n for k in scores for n in (k - 1, k, k + 1)} and set(scores) <= set(out)


@given(st.text(max_size=200))
def test_keywords_always_make_a_safe_word_query(text: str) -> None:
    words = keywords(text)
    assert len(words) == len(set(words))
    if any(w.lower() in STOPWORDS for w in words):
        # Stopwords survive only when nothing else would be left: then the text's words come back as they are.
        assert set(words) == set(re.findall(r"\w+", re.sub(r"['’]s\b", "", text)))
    if words:
        # Quoted, the OR of them always parses in the full-text language (even "OR" or "NEAR" as words).
        assert isinstance(parse_full_text(" OR ".join(f'"{w}"' for w in words)), FullTextQuery)
        assert any_word_expression(words) is not None


@given(
    st.dictionaries(st.integers(0, 50), st.floats(0, 100), max_size=20),
    st.dictionaries(st.integers(0, 50), st.floats(-1, 1), max_size=20),
    st.floats(0, 1),
)
def test_fused_scores_are_bounded_and_cover_both_sides(
    keyword: dict[int, float], semantic: dict[int, float], weight: float
) -> None:
    fused = fuse(keyword, semantic, keyword_weight=weight)
    assert set(fused) == set(keyword) | set(semantic)
    assert all(-1e-9 <= v <= 1 + 1e-9 for v in fused.values())


def test_turns_that_say_little_weigh_less() -> None:
    assert ranking.substance("Kwame: No way!", enough=6) == 1 / 6
    assert ranking.substance("Please never put olives near me, I can't stand the taste.", enough=6) == 1.0
    assert ranking.substance("anything", enough=0) == 1.0
    short, long = ranking.substance("Yes, Thursday.", enough=6), ranking.substance("Thursday piano lessons", enough=6)
    assert 0 < short < long <= 1


def test_a_turn_asks_when_its_last_sentence_is_a_question() -> None:
    assert ranking.asks("user", "How's the knee?")
    assert ranking.asks("assistant", 'Great news. Did you tell "the boss?" ')  # closing quotes and spaces after it
    assert ranking.asks("user", "Is the podcast out??")
    assert not ranking.asks("user", "How's the knee? Mine is fine now.")  # asked, then told
    assert not ranking.asks("user", "Really?!") and not ranking.asks("user", "")
    assert not ranking.asks("tool", "exit 1, what now?")  # a tool's output never asks
    assert not ranking.asks("assistant", "[tool call: Bash] ls?")
    assert not ranking.asks("system", "Anything else?")


def test_text_without_spaces_is_not_taken_for_one_word() -> None:
    assert ranking.substance("バックアップが失敗しました", enough=6) == 1.0


@given(st.text(max_size=60), st.integers(0, 8))
def test_substance_counts_as_word_by_word(text: str, enough: int) -> None:
    """The counted words (one pass for plain ASCII, kept per text) are those of the rule as written:
    a word without spaces' script counts about two characters a word, others from three letters, stopwords not."""
    count = 0
    for word in re.findall(r"\w+", text[:2000]):
        if CJK_CHAR.search(word):
            count += max(1, len(word) // 2)
        elif len(word) > 2 and word.lower() not in STOPWORDS:
            count += 1
    expected = 1.0 if enough <= 0 else (max(1, min(count, enough)) / enough) ** ranking.SUBSTANCE_POWER
    assert ranking.substance(text, enough) == pytest.approx(expected)
    assert ranking.substance(text, enough) == ranking.substance(text, enough)  # the kept count is the same


def test_what_an_agents_question_asks_for() -> None:
    asks_file = [
        "Which file did we change to fix the flaky login test?",
        "where did we put the retry limit code?",
        "In which file is the new parse_config defined?",
        "What files did you edit for the migration?",
        "Where was it implemented, the rate limiter?",
        "files changed for the login fix",  # as typed into a grep
        "file change add retry limit",
        "edited files migration",
    ]
    asks_failure = [
        "Why did the migration fail?",
        "What was the error from go test?",
        "What went wrong when we ran mise run lint?",
        "did the build crash again?",
    ]
    neither = [
        "Is Maya still avoiding meat?",
        "Where did Maya go on holiday?",
        "What did Tom cook on Friday?",
        "the file was too large to attach",
    ]
    asks_change = [  # a change made, asked in any other shape: its record is the edit that made it
        "Which Gemini helper did I delete after folding it into its only caller?",
        "How were the live-session tests changed so they stop hardcoding five hours?",
        "What constant replaced the old lock-age check?",
        "profile changed",  # typed into a grep
    ]
    assert [question_intent(q) for q in asks_file + asks_change] == ["file_change"] * len(asks_file + asks_change)
    assert [question_intent(q) for q in asks_failure] == ["failure"] * len(asks_failure)
    assert [question_intent(q) for q in neither] == [None] * len(neither)
    assert question_intent("which file failed to compile?") == "file_change"  # the file is what it asks for
    assert question_intent("Why did lint fail right after adding the helper?") == "failure"  # what failed, first
    asks_request = ["What did the user want changed in the design doc?", "What was the user's objection to the tests?"]
    assert [question_intent(q) for q in asks_request] == ["request"] * len(asks_request)
    assert question_intent("Which file did the user ask us to change?") == "file_change"  # a file, first
    asks_command = [
        "Which command ran the integration test suite after the fix?",  # a command, before the change it names
        "What git command did I use to settle the conflicted test?",
        "How were the inline review comments on the pull request fetched?",
        "How did the agent run the Go linter without its auto-fix?",
        "What was run to format the code before the lint pass?",
        "how did we get the list of open pull requests",
    ]
    assert [question_intent(q) for q in asks_command] == ["command"] * len(asks_command)
    assert question_intent("What went wrong when we ran mise run lint?") == "failure"  # what failed, first
    assert question_intent("Which file did the command write?") == "file_change"  # a file, first


def test_the_users_own_turns_are_what_a_question_about_the_user_asks_for() -> None:
    assert shows("request", "user", "Please keep the summary in the PR description.")
    assert not shows("request", "assistant", "The user wants the summary in the PR description.")
    assert not shows("request", "user", "[tool call: Bash] {}") and not shows("request", "tool", "ok")


def test_a_shell_tools_call_is_what_a_question_about_a_command_asks_for() -> None:
    assert shows("command", "assistant", '[tool call: Bash] {"command": "mise run test"}')
    assert shows("command", "assistant", '[reasoning] run it\n[tool call: functions.exec_command] {"cmd": "ls"}')
    assert shows("command", "assistant", '[tool call: run_terminal_cmd] {"command": "go test ./..."}')
    assert not shows("command", "assistant", '[tool call: Edit] {"file_path": "a.go"}')
    assert not shows("command", "tool", "ok  \tentire.io/cli\t2.1s")  # its output is no command
    assert not shows("command", "assistant", "I ran mise run test and it passed")  # said, not run


def test_which_messages_are_records_of_a_file_change_or_a_failure() -> None:
    edit = '[tool call: Edit] {"file_path": "src/app.py", "old_string": "a", "new_string": "b"}'
    assert shows("file_change", "assistant", edit)
    assert shows("file_change", "assistant", '[tool call: mcp__fs__write_file] {"path": "a.txt"}')
    assert shows("file_change", "assistant", "[reasoning] let me look\n[tool call: apply_patch] *** Begin Patch")
    assert shows("file_change", "assistant", "[patch] src/app.py, src/db.py")
    assert not shows("file_change", "assistant", '[tool call: Read] {"file_path": "src/app.py"}')
    assert not shows("file_change", "assistant", "I will edit src/app.py next")
    assert shows("failure", "tool", "[tool error] Exit code 1\nmodule not found")
    assert shows("failure", "tool", "=== RUN TestLogin\n--- FAIL: TestLogin (0.01s)\nFAIL")
    assert shows("failure", "tool", "Traceback (most recent call last):\n  File 'x.py'\nValueError: bad")
    assert shows("failure", "assistant", '[tool call: Bash] {"command": "make"}\n[tool error] make: *** Error 2')
    assert not shows("failure", "tool", "ok  \tentire.io/cli\t2.1s\nPASS")
    assert not shows("failure", "assistant", "error: the build is broken, I think")  # said, not a tool's output
    assert not shows("failure", "user", "Exit code 1 again?")


def test_a_tools_output_inherits_from_its_call_with_the_tool_shares() -> None:
    # 1 a chat turn, 2 a tool call, 3 its output, 4 the assistant's next words.
    scores = {1: 1.0, 2: 1.0, 3: 0.0, 4: 0.0}
    neighbours = {1: (None, 2), 2: (1, 3), 3: (2, 4), 4: (3, None)}
    out = ranking.with_neighbours(
        scores, neighbours, before=0.0, after=0.5, tools={2, 3}, tool_before=0.3, tool_after=0.1
    )
    assert out[3] == pytest.approx(0.3)  # the output, from its call (a tool pair: tool_before)
    assert out[2] == pytest.approx(1.0 + 0.3 * 1.0)  # the call, from the chat turn before it (a pair with a tool)
    assert out[1] == pytest.approx(1.0 + 0.1 * 1.0)  # the chat turn, from the call after it (tool_after)
    assert out[4] == pytest.approx(0.3 * 0.0)  # after a tool's output: tool shares; the output scored 0
    plain = ranking.with_neighbours(scores, neighbours, before=0.0, after=0.5)  # no tools: chat shares only
    assert plain[3] == 0.0 and plain[1] == pytest.approx(1.5)
    assert ranking.is_tool_record("tool", "ok")
    assert ranking.is_tool_record("assistant", '[reasoning] check\n[tool call: Bash] {"command": "ls"}')
    assert not ranking.is_tool_record("assistant", "I will call the tool next")
