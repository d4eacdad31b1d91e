"""Failed commands as memory statements (lossless.memory.failures) and their place in extraction."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from lossless.memory.extraction import extract
from lossless.memory.failures import COMMAND_CHARS, REASON_CHARS, commands, failure_statement
from lossless.records import MessageRecord


def call(tool: str, **args: object) -> str:
    return f"[tool call: {tool}] {json.dumps(args)}"


def test_commands_are_read_one_per_call_in_order() -> None:
    text = "\n".join(
        [
            "Let me run the tests.",
            call("Bash", command="cd app && go test ./... 2>&1\necho done", description="run tests"),
            call("Read", file_path="a.go"),
            call("bash", command="  make   lint  "),
            '[tool call: Bash] {"command": "pytest -k login',  # cut short: its command as far as it goes
            "[tool call: Bash] not json",
        ]
    )
    assert commands(text) == ["cd app && go test ./...", None, "make lint", "pytest -k login", None]
    assert commands("no calls here") == []
    assert commands(call("exec", cmd=["bash", "-lc", "ls"])) == ["bash -lc ls"]


def test_a_failed_command_says_what_went_wrong() -> None:
    out = "[tool error] Exit code 1\nmise ERROR no task lint:full found\nmise ERROR Run with --verbose"
    assert failure_statement("mise run lint:full", out) == (
        "The assistant ran `mise run lint:full`, which failed (exit code 1): mise ERROR no task lint:full found."
    )
    traceback = "Traceback (most recent call last):\n  File \"m.py\", line 3\nKeyError: 'user_id'"
    assert failure_statement("python m.py", traceback) == (
        "The assistant ran `python m.py`, which failed: KeyError: 'user_id'."
    )
    assert failure_statement("go test ./...", "--- FAIL: TestLogin (0.01s)\nFAIL") == (
        "The assistant ran `go test ./...`, which failed: --- FAIL: TestLogin (0.01s)."
    )


def test_output_that_reports_no_failure_gives_nothing() -> None:
    for out in ("ok  \tentire.io/cli\t2.199s", "3 files changed", "func handleError(err error) {", ""):
        assert failure_statement("go test ./...", out) is None, out
    assert failure_statement("", "[tool error] Exit code 1") is None


FAILING = ["[tool error] Exit code 1", "Exit code 2", "--- FAIL: TestX", "error: bad", "panic: nil map"]
FAILING += ["Traceback (most recent call last):", "fatal: not a git repository"]
LINES = st.one_of(st.text(max_size=300), st.sampled_from([*FAILING, "ValueError: x"]))


@given(st.text(max_size=60), st.lists(LINES, max_size=8))
def test_a_statement_quotes_the_command_and_one_line_of_the_output(command: str, lines: list[str]) -> None:
    output = "\n".join(lines)
    said = failure_statement(command, output)
    if said is None:
        assert not command or not any(line in FAILING for line in lines)
        return
    assert said.startswith(f"The assistant ran `{command}`, which failed")
    reason = said.partition("failed")[2].partition(": ")[2].removesuffix(".")
    if reason:
        assert "\n" not in reason and len(reason) <= REASON_CHARS
        folded = [" ".join(line.replace("[tool error]", "").split()) for line in output.splitlines()]
        assert any(reason.removesuffix("…").rstrip() in line for line in folded)


@given(st.lists(st.sampled_from(["Bash", "Read", "Edit", "bash"]), max_size=5), st.text(max_size=40))
def test_there_is_one_command_entry_per_call(tools: list[str], command: str) -> None:
    text = "\n".join(call(tool, command=command) if tool.lower() == "bash" else call(tool, path="a") for tool in tools)
    found = commands(text)
    assert len(found) == len(tools)
    for tool, entry in zip(tools, found, strict=True):
        assert (entry is None) == (tool.lower() != "bash" or not command.strip() or command.strip() == "2>&1")
        assert entry is None or len(entry) <= COMMAND_CHARS


def record(i: int, role: str, content: str) -> MessageRecord:
    return MessageRecord(i, 1, i, role, content, (), 1, datetime(2026, 2, 8, 10, i, tzinfo=UTC))  # type: ignore[arg-type]


def test_extraction_keeps_each_failed_command_as_an_event_of_its_output() -> None:
    messages = [
        record(1, "user", "Please merge the parent branch and run the linter."),
        record(2, "assistant", call("Bash", command="git merge origin/main 2>&1") + "\n" + call("Read", file_path="x")),
        record(3, "tool", "[tool error] Exit code 1\nCONFLICT (content): Merge conflict in app/login.go"),
        record(4, "tool", "package app"),
        record(5, "assistant", call("Bash", command="mise run lint")),
        record(6, "tool", "All checks passed"),
        record(7, "tool", "[tool error] Exit code 2\nan output no call asked for"),
    ]
    failures = [d for d in extract(1, messages) if d.content.startswith("The assistant ran")]
    assert [d.content for d in failures] == [
        "The assistant ran `git merge origin/main`, which failed (exit code 1): "
        "CONFLICT (content): Merge conflict in app/login.go (said on 8 February 2026)."
    ]
    (draft,) = failures
    assert draft.source_message_ids == (3,) and draft.category == "events"
    assert draft.metadata == {"speaker": "the assistant"}
