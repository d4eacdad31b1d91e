"""The offline extractive summarizer: what it keeps, the target, the footer, condensed timelines."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from lossless.ports import SummaryRequest
from lossless.providers.offline import OfflineSummarizer
from lossless.records import Message, MessageRecord, Summary, ToolPart
from lossless.segments import message_items, parse_segment, render_items, summary_items
from lossless.tokens import EstimatingCounter

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 3, 5, 9, 0, tzinfo=UTC)
COUNTER = EstimatingCounter()


def record(i: int, message: Message) -> MessageRecord:
    return MessageRecord(
        id=i + 1,
        conversation_id=1,
        seq=i + 1,
        role=message.role,
        content=message.content,
        parts=message.parts,
        token_count=COUNTER.count(message.content),
        created_at=T0 + timedelta(minutes=i),
    )


def call(call_id: str, name: str, **args: object) -> Message:
    return Message.from_parts("assistant", [ToolPart(call_id=call_id, name=name, input=dict(args))])


def session() -> list[MessageRecord]:
    messages = [
        Message.user(
            "We get 429s after midnight for ticket RL-482, see https://tracker.example.com/browse/RL-482. "
            "Please find out why."
        ),
        call("c1", "Read", file_path="src/ratelimit/window.py"),
        Message.tool_result(
            "c1", "def reset():\n    raise ValueError('this is source code, not an error')", name="Read"
        ),
        call("c2", "Bash", command="pytest -q tests/test_window.py"),
        Message.tool_result(
            "c2",
            "FAILED tests/test_window.py::test_rollover - AssertionError: counted twice\n1 failed, 8 passed in 0.2s",
            name="Bash",
            is_error=True,
        ),
        Message.assistant(
            "We chose a sliding window counter over the fixed window because it never looks at calendar dates."
        ),
        call("c3", "Edit", file_path="src/ratelimit/window.py", old_string="a", new_string="b"),
        Message.tool_result("c3", "The file src/ratelimit/window.py has been updated.", name="Edit"),
        call("c4", "Write", file_path="tests/test_rollover.py", content="def test(): pass"),
        Message.tool_result("c4", "File created successfully", name="Write"),
        call("c5", "Bash", command="git mv src/old.py src/new.py && rm build/stale.txt"),
        Message.tool_result("c5", "", name="Bash"),
        Message.assistant("All tests pass now: 9 passed in 0.19s. TODO: update docs/limits.md with the new algorithm."),
        Message.user("先别删旧的 window.py，发布说明里还要引用它。"),
    ]
    return [record(i, m) for i, m in enumerate(messages)]


def leaf_request(records: list[MessageRecord], target: int = 400, policy: str = "normal") -> SummaryRequest:
    return SummaryRequest(
        kind="leaf",
        depth=0,
        policy=policy,  # type: ignore[arg-type]
        target_tokens=target,
        text=render_items(message_items(records, UTC)),
        items=message_items(records, UTC),
        earliest_at=records[0].created_at,
        latest_at=records[-1].created_at,
    )


async def test_leaf_keeps_what_matters() -> None:
    result = await OfflineSummarizer().summarize(leaf_request(session()))
    text = result.text
    assert (result.provider, result.model) == ("offline", "extractive-1")
    lines = text.splitlines()
    assert lines[0].startswith("Time: 2026-03-05 09:00 UTC – 2026-03-05 09:13 UTC")
    assert lines[-1].startswith("Expand for details about: ")
    assert any(line.startswith("Asked: We get 429s after midnight") for line in lines)
    assert any(line.startswith("Decision: We chose a sliding window counter") for line in lines)
    assert any("AssertionError: counted twice" in line and line.startswith("Error:") for line in lines)
    assert any("9 passed" in line and line.startswith("Done:") for line in lines)
    assert any("TODO: update docs/limits.md" in line and line.startswith("Open:") for line in lines)
    assert any(line.startswith("Ran: pytest -q tests/test_window.py") for line in lines)
    assert "this is source code" not in text  # file contents are data, not errors
    files = next(line for line in lines if line.startswith("Files: "))
    assert "src/ratelimit/window.py (modified)" in files
    assert "tests/test_rollover.py (created)" in files
    assert "src/old.py (renamed to src/new.py)" in files
    assert "build/stale.txt (deleted)" in files
    # the ticket and its URL are named once, by the Asked line that holds them (not again in Refs)
    assert text.count("https://tracker.example.com/browse/RL-482") == 1
    assert not any(line.startswith("Refs: ") and "RL-482" in line for line in lines)
    assert "先别删旧的 window.py" in text  # CJK text survives intact


async def test_deterministic_and_within_target() -> None:
    records = session()
    summarizer = OfflineSummarizer()
    for target in (60, 120, 250, 2000):
        first = summarizer.summarize_text(leaf_request(records, target))
        assert first == summarizer.summarize_text(leaf_request(records, target))
        assert COUNTER.count(first) <= target
        assert first.splitlines()[-1].startswith("Expand for details about:")
        assert any(line.startswith("Files: ") for line in first.splitlines())
    short = summarizer.summarize_text(leaf_request(records, 200))
    assert "more " in short.splitlines()[-1]  # what was dropped is named


async def test_no_file_operations_says_files_none() -> None:
    records = [record(0, Message.user("hello there")), record(1, Message.assistant("hi, how can I help?"))]
    text = OfflineSummarizer().summarize_text(leaf_request(records))
    assert "Files: none" in text.splitlines()


async def test_aggressive_is_not_longer_than_normal() -> None:
    records = session() * 3
    normal = OfflineSummarizer().summarize_text(leaf_request(records, 800))
    aggressive = OfflineSummarizer().summarize_text(leaf_request(records, 800, "aggressive"))
    assert COUNTER.count(aggressive) <= COUNTER.count(normal)


def child(index: int, depth: int, start: datetime, content: str) -> Summary:
    return Summary(
        id=f"sum_{index:016x}",
        conversation_id=1,
        kind="leaf" if depth == 0 else "condensed",
        depth=depth,
        content=content,
        token_count=COUNTER.count(content),
        created_at=start,
        earliest_at=start,
        latest_at=start + timedelta(minutes=40),
    )


@pytest.mark.parametrize(
    ("depth", "stamp"),
    [(1, r"2026-03-05 09:00–09:40"), (2, r"2026-03-05 morning"), (3, r"2026-03-05(?! \d)")],
)
async def test_condensed_timeline_grain_coarsens_with_depth(depth: int, stamp: str) -> None:
    leaf = OfflineSummarizer().summarize_text(leaf_request(session()))
    children = [
        child(1, depth - 1, T0, leaf),
        child(
            2,
            depth - 1,
            T0 + timedelta(hours=6),
            "Asked: ship the fix.\nFiles: none\nExpand for details about: CI logs",
        ),
    ]
    request = SummaryRequest(
        kind="condensed",
        depth=depth,
        policy="normal",
        target_tokens=600,
        text=render_items(summary_items(children, UTC)),
        items=summary_items(children, UTC),
        earliest_at=T0,
        latest_at=T0 + timedelta(hours=7),
    )
    text = OfflineSummarizer().summarize_text(request)
    timeline = [line for line in text.splitlines() if line.startswith("Timeline: ")]
    assert len(timeline) == 2
    assert re.search(stamp, timeline[0])
    files = next(line for line in text.splitlines() if line.startswith("Files: "))
    assert "tests/test_rollover.py (created)" in files  # merged up from the child
    assert "CI logs" in text.splitlines()[-1]  # children's footers are carried up


async def test_free_text_children_are_summarised_too() -> None:
    children = [child(1, 0, T0, "The team decided to use Redis because it was already deployed. Next step: load test.")]
    request = SummaryRequest(
        kind="condensed",
        depth=1,
        policy="normal",
        target_tokens=300,
        text=render_items(summary_items(children, UTC)),
        items=summary_items(children, UTC),
    )
    text = OfflineSummarizer().summarize_text(request)
    assert "Decision: The team decided to use Redis" in text


async def test_big_segments_are_summarised_off_the_event_loop() -> None:
    records = [record(i, Message.assistant(f"filler sentence number {i} about the cache.")) for i in range(3000)]
    result = await OfflineSummarizer().summarize(leaf_request(records, 300))
    assert result.output_tokens is not None and result.output_tokens <= 300
    assert result.input_tokens is not None and result.input_tokens > 10_000


async def test_labels_match_the_content_and_lines_end_whole() -> None:
    long_reason = "because the old cache key ignored the tenant, " + ", ".join(
        f"tenant{i} saw stale rows" for i in range(30)
    )
    messages = [
        Message.user("Please look at the caching bug."),
        Message.assistant("I'm wondering whether the fix is done or the cache is still stale?"),
        Message.assistant("We decided to key the cache by tenant. Because two tenants shared one key."),
        Message.assistant("If the tests pass we are done. " + "The cache was rebuilt " + long_reason + "."),
    ]
    records = [record(i, m) for i, m in enumerate(messages)]
    lines = (await OfflineSummarizer().summarize(leaf_request(records, target=600))).text.splitlines()
    assert not any(line.startswith(("Done:", "Decision:")) and "wondering" in line for line in lines)
    assert any(line.startswith("Open: I'm wondering whether the fix is done") for line in lines)
    assert "Decision: We decided to key the cache by tenant. Because two tenants shared one key." in lines
    assert not any(line.startswith("Done: If the tests pass") for line in lines)
    clipped = [line for line in lines if "tenant0 saw stale rows" in line]
    assert clipped and all(line.endswith(("…", ".")) and "tenant29" not in line for line in clipped)


async def test_a_stored_line_that_looks_like_a_header_is_text_not_a_turn() -> None:
    """Regression: a message quoting a segment header once made a phantom ``msg#99 assistant`` turn."""
    records = [
        record(0, Message.user("Please paste the log line.\n=== msg#99 · 2026-03-05 09:00 UTC · assistant ===")),
        record(1, Message.user("We decided to keep it.")),
    ]
    request = leaf_request(records)
    assert "=== msg#99" in request.text  # the rendered text holds the look-alike header …
    assert [i.ref for i in parse_segment(request.text)] == ["msg#1", "msg#99", "msg#2"]  # what a parse would see
    text = OfflineSummarizer().summarize_text(request)
    assert text.splitlines()[0].endswith("(2 user)")  # two user turns, no phantom assistant turn
    assert "Asked: Please paste the log line. === msg#99" in text  # the look-alike line stays the user's text


async def test_a_request_without_items_is_read_as_prose() -> None:
    request = SummaryRequest(
        kind="leaf",
        depth=0,
        policy="normal",
        target_tokens=200,
        text="=== msg#7 · 2026-03-05 09:00 UTC · assistant ===\nWe chose Redis because it was deployed.",
    )
    text = OfflineSummarizer().summarize_text(request)
    assert "Decision: === msg#7 · 2026-03-05 09:00 UTC · assistant === We chose Redis" in text  # all of it is text


async def test_refs_name_each_identifier_once_before_commands_and_notes() -> None:
    """Identifiers found only in outputs reach the Refs line; one inside a longer one is not repeated."""
    output = "\n".join(
        f'  File "/srv/app/pkg/module_{i}.py", line {i}, in handler (see pkg/module_{i}.py)' for i in range(12)
    )
    messages = [
        Message.user("The importer crashes on start. Please look."),
        call("c1", "Bash", command="python -m app.importer --all --verbose " + "--flag " * 20),
        Message.tool_result("c1", output + "\nModuleNotFoundError: No module named 'yaml'", name="Bash", is_error=True),
        call("c2", "Read", file_path="src/app/settings/loader.py"),
        Message.tool_result("c2", "raise KeyError('source code, not an error of this run')", name="Read"),
        Message.assistant("Looking at the traceback. " * 20),
        Message.assistant("The loader reads the wrong key. " * 20),
    ]
    records = [record(i, m) for i, m in enumerate(messages)]
    text = OfflineSummarizer().summarize_text(leaf_request(records, target=260))
    assert COUNTER.count(text) <= 260
    refs = next(line for line in text.splitlines() if line.startswith("Refs: ")).removeprefix("Refs: ").split(", ")
    assert "ModuleNotFoundError" in text  # an error name of the run is an identifier
    assert "KeyError" not in refs  # a name in file contents is not
    assert "src/app/settings/loader.py" in refs  # a file read is named, not only counted
    assert sum(f"/srv/app/pkg/module_{i}.py" in refs for i in range(12)) >= 8  # before the long command or notes
    assert not any(ref.startswith("pkg/module_") for ref in refs)  # inside /srv/app/pkg/module_N.py already
    assert len(refs) == len(set(refs))


async def test_condensed_refs_keep_identifiers_named_in_child_lines() -> None:
    leaf = "Asked: Fix the crash in src/app/loader.py, see OPS-17.\nFiles: none\nExpand for details about: logs"
    later = "Asked: Ship it.\nAsked: Tag it.\nAsked: Announce it.\nFiles: none"
    children = [child(1, 0, T0, leaf), child(2, 0, T0 + timedelta(hours=1), later)]
    request = SummaryRequest(
        kind="condensed",
        depth=1,
        policy="aggressive",  # keeps the last three requests: the first one's line is dropped
        target_tokens=300,
        text=render_items(summary_items(children, UTC)),
        items=summary_items(children, UTC),
        earliest_at=T0,
        latest_at=T0 + timedelta(hours=2),
    )
    text = OfflineSummarizer().summarize_text(request)
    assert "Asked: Fix the crash" not in text
    refs = next(line for line in text.splitlines() if line.startswith("Refs: "))
    assert "src/app/loader.py" in refs and "OPS-17" in refs


async def test_many_decisions_cannot_crowd_out_every_identifier() -> None:
    decisions = [
        Message.assistant(f"We decided to keep cache layer {i} because tenant {i} needs it.") for i in range(60)
    ]
    output = "\n".join(f"ok services/api/handlers/route_{i}.py" for i in range(10))
    messages = [call("c1", "Bash", command="make check"), Message.tool_result("c1", output, name="Bash"), *decisions]
    records = [record(i, m) for i, m in enumerate(messages)]
    text = OfflineSummarizer().summarize_text(leaf_request(records, target=500))
    assert COUNTER.count(text) <= 500
    assert "more decisions" in text.splitlines()[-1]  # decisions did not all fit …
    refs = next(line for line in text.splitlines() if line.startswith("Refs: "))
    assert sum(f"services/api/handlers/route_{i}.py" in refs for i in range(10)) >= 5  # … yet paths kept room


def test_fitting_drops_commands_and_notes_before_identifiers() -> None:
    summarizer = OfflineSummarizer()
    refs = [f"pkg/mod_{i}.py" for i in range(20)]
    lines = [
        "Time: 2026-03-05 09:00 UTC – 2026-03-05 09:30 UTC (3 user)",
        "Decision: We chose the sliding window because it never reads calendar dates.",
        *(f"Ran: pytest -q tests/test_case_{i}.py --maxfail=1" for i in range(6)),
        "Note: The window is kept per tenant.",
        "Files: none",
        "Refs: " + ", ".join(refs),
        "Expand for details about: full output of 6 tool results",
    ]
    budget = COUNTER.count("\n".join(lines)) - 30
    text = summarizer._fit(list(lines), budget, head_short=lines[0])
    assert COUNTER.count(text) <= budget
    assert "Note: " not in text and "Decision: We chose the sliding window" in text
    assert all(ref in text for ref in refs)  # the commands gave way, not the identifiers
    tight = summarizer._fit(list(lines), COUNTER.count("\n".join(lines[:2] + lines[-3:])) - 10, head_short=lines[0])
    assert "Ran: " not in tight and "Refs: pkg/mod_0.py" in tight  # then identifiers go from the end


async def test_a_longer_ref_takes_the_rank_of_the_short_one_it_holds() -> None:
    """``fields.py`` met often and ``src/marshmallow/fields.py`` once: the full path is named, early."""
    output = "\n".join(f"ok fields.py check {i}" for i in range(9)) + "\nsee src/marshmallow/fields.py"
    others = "\n".join(f"lib/other_{i}.py lib/other_{i}.py" for i in range(80))
    messages = [
        call("c1", "Bash", command="make lint"),
        Message.tool_result("c1", output, name="Bash"),
        call("c2", "Bash", command="make list"),
        Message.tool_result("c2", others, name="Bash"),
    ]
    records = [record(i, m) for i, m in enumerate(messages)]
    text = OfflineSummarizer().summarize_text(leaf_request(records, target=300))
    refs = next(line for line in text.splitlines() if line.startswith("Refs: ")).removeprefix("Refs: ").split(", ")
    assert refs[0] == "src/marshmallow/fields.py"  # ranked by the short name's nine mentions
    assert "fields.py" not in refs
    assert "more identifiers" in text.splitlines()[-1]  # not every lib/other_N.py fitted
