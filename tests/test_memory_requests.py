"""An agent's session quoted as memories (lossless.memory.requests) and their place in extraction."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from lossless.memory.extraction import extract
from lossless.memory.requests import MIN_WORDS, QUOTE_CHARS, refusal_statement, reply_statement, request_statement
from lossless.records import MessageRecord

REFUSED = (
    "[tool error] The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a "
    "file edit, the new_string was NOT written to the file). To tell you how to proceed, the user said:\n"
    "use a descriptive path instead of a blank string"
)


def call(tool: str, **args: object) -> str:
    return f"[tool call: {tool}] {json.dumps(args)}"


def record(i: int, role: str, content: str) -> MessageRecord:
    return MessageRecord(i, 1, i, role, content, (), 1, datetime(2026, 2, 8, 10, i, tzinfo=UTC))  # type: ignore[arg-type]


def test_a_users_turn_is_quoted_in_their_words() -> None:
    said = request_statement("Update the docs, add a table for messaging and when they happen. Commit and push.")
    assert said == 'The user said: "Update the docs, add a table for messaging and when they happen. Commit and push.".'
    asked = request_statement("can we fix it so that it keeps using the old state file?")
    assert asked == 'The user asked: "Can we fix it so that it keeps using the old state file?".'


def test_only_the_prose_is_quoted() -> None:
    pasted = "the lint job fails on main:\n```\nError: cmd/app.go:87:1: returns interface (ireturn)\n```\nplease fix it"
    assert request_statement(pasted) == 'The user said: "The lint job fails on main: Please fix it".'
    console = "the failing console output:\n❯ commit this please\n⏺ Skill(commit)\n  ⎿  Error: Unknown skill: commit"
    assert request_statement(console) == 'The user said: "The failing console output:".'
    assert request_statement('the "Stop" hook says nothing in the logs') == (
        "The user said: \"The 'Stop' hook says nothing in the logs\"."
    )


def test_what_a_harness_wrote_or_a_word_or_two_is_not_remembered() -> None:
    for text in (
        "<command-name>/exit</command-name>\n<command-message>exit</command-message>",
        "<local-command-stdout>See ya!</local-command-stdout>",
        "[Request interrupted by user for tool use]",
        "Base directory for this skill: /Users/alex/.claude/skills/review\n\nUse a fine-grained token always.",
        "This session is being continued from a previous conversation that ran out of context.",
        "push it",
        "yes do option 1",
        "Commit and push",
        "",
    ):
        assert request_statement(text) is None, text
    pasted = "<div>…</div>\nThe card overflows on mobile, please fix its layout."
    assert request_statement(pasted) == 'The user said: "The card overflows on mobile, please fix its layout.".'


def test_a_long_turn_is_quoted_in_whole_sentences_up_to_the_limit() -> None:
    sentence = "The wingman status messages go to stderr which the agent terminal never shows to anyone. "
    said = request_statement(sentence * 8)
    assert said is not None
    quote = said.removeprefix('The user said: "').removesuffix('".')
    assert len(quote) <= QUOTE_CHARS and quote.endswith("anyone.") and quote.count("stderr") == 3
    one = request_statement("word " * 10 + "plan " * 200)
    assert one is not None and one.endswith('…".') and len(one) <= QUOTE_CHARS + len('The user said: "".')


def test_the_agents_reply_and_a_refusal_are_quoted() -> None:
    assert reply_statement("Pushed. All checks pass: fmt, lint and the full test suite.") == (
        'The assistant replied: "Pushed. All checks pass: fmt, lint and the full test suite.".'
    )
    assert reply_statement("Running the tests now.\n" + call("Bash", command="go test ./...")) is None
    assert refusal_statement(REFUSED) == (
        'The user refused a tool call and said: "Use a descriptive path instead of a blank string".'
    )
    assert refusal_statement("[tool error] Exit code 1\nFAIL app/login_test.go") is None


@given(st.text(max_size=2000))
def test_a_quote_is_bounded_and_holds_no_double_quote(text: str) -> None:
    for said in (request_statement(text), reply_statement(text)):
        if said is not None:
            quote = said.split(': "', 1)[1].removesuffix('".')
            assert '"' not in quote and 0 < len(quote) <= QUOTE_CHARS
            assert len([w for w in quote.split() if len(w) > 2]) >= 1


def test_extraction_quotes_the_user_and_the_reply_that_ends_a_turn_in_an_agents_session() -> None:
    messages = [
        record(1, "user", "Add a retry to the upload client and make the delay configurable."),
        record(2, "assistant", "I'll look at the upload client first.\n" + call("Read", file_path="upload.go")),
        record(3, "tool", "package upload"),
        record(4, "assistant", call("Edit", file_path="upload.go", old_string="x", new_string="y")),
        record(5, "tool", REFUSED),
        record(6, "assistant", "Added a retry with a configurable delay: upload.go now reads RETRY_DELAY."),
        record(7, "user", "Great, I prefer tabs over spaces in Go files. Commit it."),
    ]
    drafts = extract(1, messages)
    quotes = [(d.content, d.source_message_ids, d.metadata) for d in drafts if '"' in d.content]
    assert quotes == [
        (
            'The user said: "Add a retry to the upload client and make the delay configurable." '
            "(said on 8 February 2026).",
            (1,),
            {"speaker": "the user", "quoted_sources": [1]},
        ),
        (
            'The user refused a tool call and said: "Use a descriptive path instead of a blank string" '
            "(said on 8 February 2026).",
            (5,),
            {"speaker": "the user", "quoted_sources": [5]},
        ),
        (
            'The assistant replied: "Added a retry with a configurable delay: upload.go now reads RETRY_DELAY." '
            "(said on 8 February 2026).",
            (6,),
            {"speaker": "the assistant", "quoted_sources": [6]},
        ),
        (
            'The user said: "I prefer tabs over spaces in Go files. Commit it." (said on 8 February 2026).',
            (7,),
            {"speaker": "the user", "quoted_sources": [7]},
        ),
    ]
    assert not any(d.content.startswith("The assistant ran") for d in drafts), "a refusal is no failed command"
    # a quoted turn's versioned fact still stands apart (a preference the user states keeps its fact key)
    assert any(d.fact_key and d.source_message_ids == (7,) for d in drafts)
    # the narration "I'll look at the upload client first." ends no turn: a tool's call follows in its own message
    assert not any(d.source_message_ids == (2,) for d in drafts)


def test_a_turn_the_harness_wrote_in_the_users_name_gives_no_memory() -> None:
    """Claude Code's summary of a conversation continued is a user's turn that tells what the agent did."""
    summary = (
        "This session is being continued from a previous conversation that ran out of context. "
        "Analysis: I examined manual_commit_attribution.go to understand the attribution system."
    )
    messages = [
        record(1, "user", summary),
        record(2, "user", "<command-name>/exit</command-name>\n<command-message>exit</command-message>"),
        record(3, "assistant", call("Read", file_path="attribution.go")),
        record(4, "tool", "package strategy"),
    ]
    assert extract(1, messages) == []


def test_a_chat_without_tools_is_not_quoted() -> None:
    messages = [
        record(1, "user", "Can you suggest a name for a grey kitten with white paws?"),
        record(2, "assistant", "How about Socks, Ash or Pebble? Socks suits the white paws best."),
        record(3, "user", "We went with Pebble in the end, she loves the balcony."),
    ]
    assert not any('"' in d.content for d in extract(1, messages))


def test_a_turn_in_any_script_is_quoted() -> None:
    for text in (
        "请把文档更新一下，添加一个消息表格，然后提交。",
        "Обнови документацию и добавь таблицу сообщений.",
        "ドキュメントを更新して、メッセージの表を追加してください。",
    ):
        assert request_statement(text) == f'The user said: "{text}".'
    assert request_statement("好的") is None  # "fine": a word, not three


def test_min_words_counts_words_that_carry_something() -> None:
    assert MIN_WORDS == 3
    assert request_statement("rename the helper") is None  # rename, helper
    assert request_statement("rename the upload helper") is not None
