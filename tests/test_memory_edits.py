"""What an agent's file edits changed: the statements its memories hold (lossless.memory.edits)."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from lossless.memory.edits import EDIT_NAMES, code_refs, edit_statements


def _call(tool: str, **args: object) -> str:
    return f"[tool call: {tool}] {json.dumps(args)}"


def test_an_edit_says_what_it_rewrote_and_what_it_added() -> None:
    old = "func CalculatePromptAttribution(\n\tbaseTree *object.Tree,\n) PromptAttribution {"
    new = old + "\n\tuserAddedPerFile := map[string]int{}\n\tresult.UserAddedPerFile = userAddedPerFile"
    text = _call("Edit", file_path="cli/attribution.go", old_string=old, new_string=new)
    assert edit_statements(text) == [
        (
            "The assistant edited cli/attribution.go (in CalculatePromptAttribution; adding userAddedPerFile).",
            "cli/attribution.go",
        )
    ]


def test_a_new_file_adds_its_definitions_first() -> None:
    content = "import os\n\ndef retry_delay(n):\n    return 2 ** n\n\nclass RetryPolicy:\n    max_tries = 3\n"
    text = "Writing it now.\n" + _call("Write", file_path="src/retry.py", content=content)
    assert edit_statements(text) == [
        ("The assistant wrote src/retry.py (adding retry_delay, RetryPolicy, max_tries).", "src/retry.py")
    ]


def test_a_multi_edit_reads_every_edit() -> None:
    edits = [
        {"old_string": "def load():", "new_string": "def load(cache_dir):"},
        {"old_string": "x = 1", "new_string": "maxRetries = 1"},
    ]
    text = _call("MultiEdit", file_path="app.py", edits=edits)
    assert edit_statements(text) == [("The assistant edited app.py (in load; adding cache_dir, maxRetries).", "app.py")]


def test_plain_words_or_bad_calls_give_the_plain_statement_or_nothing() -> None:
    plain = _call("Edit", file_path="README.md", old_string="Hello", new_string="Hello world")
    assert edit_statements(plain) == [("The assistant edited README.md.", "README.md")]
    assert edit_statements('[tool call: Edit] ["a.py"]') == []
    assert edit_statements(_call("Edit", file_path="a\nb.py", new_string="x")) == []
    assert edit_statements(_call("Bash", command="rm a.py")) == []


def test_a_call_cut_short_is_read_for_what_it_holds_whole() -> None:
    whole = _call("Edit", file_path="cli/hooks.go", old_string="return nil", new_string="func outputHookMessage() {}")
    cut = whole[:-5] + " …[truncated]"  # cut inside new_string, after the name
    assert edit_statements(cut) == [("The assistant edited cli/hooks.go (adding outputHookMessage).", "cli/hooks.go")]
    cut_in_the_name = whole[:-8] + " …[truncated]"  # "outputHookMessag": no name
    assert edit_statements(cut_in_the_name) == [("The assistant edited cli/hooks.go.", "cli/hooks.go")]
    cut_without_a_mark = _call("Edit", file_path="a.go", new_string="x := retryDelayMillis")[:-6]
    assert edit_statements(cut_without_a_mark) == [("The assistant edited a.go.", "a.go")]
    cut_in_the_path = '[tool call: Edit] {"file_path": "src/app/log'
    assert edit_statements(cut_in_the_path) == []


def test_a_call_cut_short_before_its_new_text_edited_the_old_texts_definitions() -> None:
    old = "// getFileContent reads a file from a tree.\nfunc getFileContent(tree *object.Tree, path string) string {\n"
    whole = _call("Edit", file_path="cli/attribution.go", old_string=old * 40, new_string="x")
    cut = whole[:300] + " …[truncated]"  # inside old_string: no new text kept
    assert edit_statements(cut) == [
        ("The assistant edited cli/attribution.go (in getFileContent).", "cli/attribution.go")
    ]
    # a whole call that puts nothing in names nothing it rewrote: the definitions went
    gone = _call("Edit", file_path="cli/attribution.go", old_string=old, new_string="")
    assert edit_statements(gone) == [("The assistant edited cli/attribution.go.", "cli/attribution.go")]


_NAME = st.from_regex(r"[a-z]{2,6}(?:[A-Z][a-z]{1,5}|_[a-z]{2,5})", fullmatch=True)


@given(st.lists(_NAME, max_size=8), st.lists(_NAME, max_size=8))
def test_only_names_the_call_holds_are_listed(old_names: list[str], new_names: list[str]) -> None:
    old = "\n".join(f"def {n}(): pass" for n in old_names)
    new = "\n".join(f"def {n}(): pass" for n in new_names)
    ((statement, path),) = edit_statements(_call("Edit", file_path="m.py", old_string=old, new_string=new))
    assert path == "m.py" and statement.startswith("The assistant edited m.py")
    listed = re.search(r"\((?:in ([^;)]*))?(?:; )?(?:adding ([^)]*))?\)\.$", statement)
    changed = listed.group(1).split(", ") if listed and listed.group(1) else []
    added = listed.group(2).split(", ") if listed and listed.group(2) else []
    assert len(changed) <= EDIT_NAMES and len(added) <= EDIT_NAMES
    assert all(n in new_names and n in old_names for n in changed)
    assert all(n in new_names and n not in old_names for n in added)
    assert len({n.lower() for n in added}) == len(added)
    if not new_names:
        assert statement == "The assistant edited m.py."


def test_code_refs_are_the_paths_and_code_names_a_text_holds() -> None:
    text = "The assistant fixed tests/test_login.py and README.md by adding retryDelay, e.g. 3.5 s."
    assert code_refs(text) == {"tests/test_login.py", "test_login", "README.md", "retryDelay"}
    assert code_refs("Maya said the train was late again (said on 3 May 2024).") == frozenset()
