"""The budget's pieces: what a rendered request costs, the tail cap, and head-and-tail excerpts."""

from __future__ import annotations

from datetime import UTC, datetime

from lossless.budget import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    CountCache,
    chat_tokens,
    excerpt,
    tail_token_cap,
    usable_budget,
)
from lossless.formats import render_anthropic, render_openai
from lossless.records import MessageRecord, ToolPart
from lossless.tokens import EstimatingCounter, TiktokenCounter

COUNTER = EstimatingCounter()
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def record(role: str, parts: tuple[object, ...], content: str = "") -> MessageRecord:
    return MessageRecord(7, 1, 7, role, content, parts, 0, T0)  # type: ignore[arg-type]


def test_chat_tokens_counts_every_string_the_provider_gets() -> None:
    text = [{"role": "user", "content": "hello there"}]
    assert chat_tokens(text, COUNTER) == COUNTER.count("hello there") + MESSAGE_OVERHEAD
    call = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": '{"pattern": "x"}'}}]}]  # fmt: skip
    expected = sum(COUNTER.count(s) for s in ("c1", "grep", '{"pattern": "x"}')) + MESSAGE_OVERHEAD
    assert chat_tokens(call, COUNTER) == expected
    url = "data:image/png;base64," + "A" * 90_000
    image = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]
    assert chat_tokens(image, COUNTER) == IMAGE_TOKENS + MESSAGE_OVERHEAD


def test_usable_budget_and_the_tail_cap() -> None:
    exact = TiktokenCounter("o200k_base")
    assert usable_budget(16_000, exact) == 16_000
    assert usable_budget(16_000, COUNTER) == 16_000 - 1_920
    assert tail_token_cap(8_000, None) == 4_000 and tail_token_cap(128_000, None) == 64_000
    assert tail_token_cap(8_000, 1_234) == 1_234


def test_an_excerpt_keeps_head_tail_structure_and_the_pointer() -> None:
    output = "".join(f"line {i}: result data\n" for i in range(20_000))
    result = record("tool", (ToolPart(call_id="call_9", name="bash", output=output),))
    for render in (render_openai, render_anthropic):
        full = render(result)
        cut = excerpt(full, 500, COUNTER, "msg#7")
        assert cut is not None and chat_tokens(cut, COUNTER) <= 500
        text = str(cut)
        assert "line 0: result" in text and "line 19999: result data" in text and "msg#7" in text
        assert "call_9" in text  # the tool call id survives, so the pair stays a pair
        assert [m["role"] for m in cut] == [m["role"] for m in full]


def test_an_excerpt_of_a_large_tool_input_and_what_cannot_be_cut() -> None:
    call = record(
        "assistant", (ToolPart(call_id="c2", name="write", input={"path": "a.py", "text": "x = 1\n" * 30_000}),)
    )
    cut = excerpt(render_anthropic(call), 300, COUNTER, "msg#7")
    assert cut is not None and chat_tokens(cut, COUNTER) <= 300
    block = cut[0]["content"][0]
    assert block["type"] == "tool_use" and block["id"] == "c2" and block["input"]["path"] == "a.py"
    small = [{"role": "user", "content": "short"}]
    assert excerpt(small, 100, COUNTER, "msg#1") == small  # what fits is returned as it is
    assert excerpt(render_openai(call), 5, COUNTER, "msg#7") is None  # not even the pointer fits


def test_the_count_cache_answers_as_its_counter_and_counts_a_text_once() -> None:
    seen: list[str] = []

    class Counting(EstimatingCounter):
        def count(self, text: str) -> int:
            seen.append(text)
            return super().count(text)

    cache = CountCache(Counting(), max_chars=6_000, min_chars=10)
    long = "a long text " * 100
    assert cache.count(long) == COUNTER.count(long) == cache.count("".join(["a long text "] * 100))
    assert len(seen) == 1  # the second, equal text (another object) was not counted again
    assert cache.count("short") == COUNTER.count("short") and len(seen) == 2  # short texts are not kept
    for i in range(5):
        cache.count(f"{i} " + long)  # beyond max_chars the least recently used are dropped
    cache.count(long)
    assert len(seen) == 8
    assert cache.margin(8_000) == COUNTER.margin(8_000) and cache.name == "estimate"
