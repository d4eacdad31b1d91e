"""Token counting: the estimator's calibration is re-measured against tiktoken on real text."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless.budget import usable_budget
from lossless.config import Config
from lossless.errors import ConfigError
from lossless.tokens import (
    ESTIMATE_MARGINS,
    EstimatingCounter,
    RecentCounter,
    TiktokenCounter,
    TokenCounter,
    exact_available,
    tail_to_tokens,
    token_counter_for,
    truncate_to_tokens,
)
from lossless.transcripts import Entry, ReadContext, detect_format, reader_for

from .conftest import CORPUS, ROOT

CJK = [
    "我们今天讨论了数据库迁移的问题，决定使用PostgreSQL作为主要存储。",
    "静默模式下，系统不会发送任何通知。请检查配置文件中的设置。",
    "このプロジェクトでは、会話の履歴をすべて保存し、古い部分を要約します。",
    "데이터베이스 연결이 실패했습니다. 설정을 확인하세요.",
]


def sample_texts() -> list[str]:
    """Message contents from the corpus (or, where it is absent, the bundled sample session)."""
    files = sorted(CORPUS.rglob("*.jsonl"))[:6] if CORPUS.is_dir() else [ROOT / "examples" / "sample-session.jsonl"]
    texts: list[str] = []
    for path in files:
        fmt = detect_format(path)
        assert fmt is not None
        with path.open("rb") as stream:
            texts += [
                e.message.content
                for e in reader_for(fmt).read(stream, ReadContext(str(path)))
                if isinstance(e, Entry) and len(e.message.content) >= 200
            ]
    return texts + CJK * 5


def test_protocol_and_basics() -> None:
    counter = EstimatingCounter()
    assert isinstance(counter, TokenCounter)
    assert counter.count("") == 0
    assert counter.count("a") == 1
    assert counter.count("hello world") == counter.count("hello world")
    assert counter.count("x" * 4000) > counter.count("x" * 400)


def test_cjk_counts_far_more_than_chars_over_four() -> None:
    counter = EstimatingCounter()
    text = CJK[0]
    assert counter.count(text) > math.ceil(len(text) / 4) * 1.5


def test_estimator_tracks_tiktoken_on_real_text() -> None:
    exact = TiktokenCounter("o200k_base")
    estimate = EstimatingCounter()
    texts = sample_texts()
    assert len(texts) >= 50
    truth = [exact.count(t) for t in texts]
    ours = [estimate.count(t) for t in texts]
    naive = [math.ceil(len(t) / 4) for t in texts]
    total_error = (sum(ours) - sum(truth)) / sum(truth)
    ours_abs = [abs(o - t) / t for o, t in zip(ours, truth, strict=True)]
    naive_abs = [abs(n - t) / t for n, t in zip(naive, truth, strict=True)]
    assert abs(total_error) < 0.06, f"total error {total_error:+.1%}"
    assert statistics.median(ours_abs) < 0.10
    assert statistics.mean(ours_abs) < statistics.mean(naive_abs), "must beat chars/4"


def test_tiktoken_counter_is_exact_and_offline() -> None:
    counter = TiktokenCounter("cl100k_base")
    assert counter.count("hello world") == 2
    assert TiktokenCounter("o200k_base").count("") == 0


def test_counter_selection() -> None:
    assert isinstance(token_counter_for("estimate"), EstimatingCounter)
    assert isinstance(token_counter_for("o200k_base"), TiktokenCounter)
    with pytest.raises(ConfigError, match="tokenizer 'gpt2'"):
        token_counter_for("gpt2")
    with pytest.raises(ConfigError, match="not available offline"):
        TiktokenCounter("p50k_base")


def test_auto_counts_exactly_when_the_tokenizer_extra_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Config().tokenizer == "auto"
    assert exact_available()  # the dev install has the extra
    chosen = token_counter_for("auto")
    assert isinstance(chosen, TiktokenCounter) and chosen.name == "o200k_base"
    monkeypatch.setattr("lossless.tokens.exact_available", lambda: False)
    assert isinstance(token_counter_for("auto"), EstimatingCounter)


def test_the_estimate_keeps_a_measured_margin_and_exact_counters_none() -> None:
    estimate = EstimatingCounter()
    assert [estimate.margin(b) for b in (1_000, 8_000, 32_000, 1_000_000)] == [0.25, 0.12, 0.07, 0.07]
    assert RecentCounter(estimate).margin(8_000) == 0.12
    assert RecentCounter(TiktokenCounter("o200k_base")).margin(8_000) == 0.0
    assert usable_budget(8_000, estimate) == 7_040
    assert usable_budget(8_000, TiktokenCounter("o200k_base")) == 8_000
    # Every bound covers the worst excess measured for contexts of its size (see ESTIMATE_MARGINS).
    for (bound, margin), worst in zip(ESTIMATE_MARGINS, (1.308, 1.124, 1.059), strict=True):
        assert 1 / (1 - margin) >= worst, bound


def test_estimator_handles_large_and_odd_input() -> None:
    counter = EstimatingCounter()
    assert counter.count("word " * 200_000) > 100_000
    assert counter.count("\udcff lone surrogate") > 0  # surrogates must not crash the UTF-8 path
    assert counter.count("🚀" * 10) >= 10


def test_recent_counter_reuses_the_count_of_the_same_text_object_only() -> None:
    calls: list[str] = []

    class Counting:
        name = "counting"

        def count(self, text: str) -> int:
            calls.append(text)
            return len(text)

    counter = RecentCounter(Counting())
    big = "x" * 10_000
    assert counter.count(big) == counter.count(big) == 10_000
    assert len(calls) == 1
    equal_but_other = "".join(["x" * 5_000, "x" * 5_000])
    assert counter.count(equal_but_other) == 10_000 and len(calls) == 2  # identity, not equality
    counter.count("short")
    counter.count("short")
    assert len(calls) == 4  # short texts are not remembered
    assert counter.name == "counting" and "RecentCounter" in repr(counter)


def test_cutting_text_to_a_token_count() -> None:
    counter = EstimatingCounter()
    text = "word " * 1000
    head = truncate_to_tokens(text, 50, counter)
    assert counter.count(head) <= 50 and text.startswith(head) and len(head) > 100
    tail = tail_to_tokens(text, 50, counter)
    assert counter.count(tail) <= 50 and text.endswith(tail) and len(tail) > 100
    assert truncate_to_tokens("short", 50, counter) == "short" == tail_to_tokens("short", 50, counter)
    lines = "\n".join(f"line number {i} of the log" for i in range(200))
    assert lines.startswith(truncate_to_tokens(lines, 40, counter) + "\n"), "cut at a line boundary"
    assert lines.endswith("\n" + tail_to_tokens(lines, 40, counter)), "started at a line boundary"


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=400), st.integers(min_value=0, max_value=120))
def test_cuts_fit_the_limit_and_keep_an_end_of_the_text(text: str, limit: int) -> None:
    counter = EstimatingCounter()
    head, tail = truncate_to_tokens(text, limit, counter), tail_to_tokens(text, limit, counter)
    assert text.startswith(head) and text.endswith(tail)
    assert counter.count(head) <= limit and counter.count(tail) <= limit
    if counter.count(text) <= limit:
        assert head == text == tail
