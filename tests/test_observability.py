"""Metrics and structured logs: what the engine records, the JSON log shape, and life without the extra."""

from __future__ import annotations

import io
import json
import logging
import re
import sqlite3
import sys
from pathlib import Path

import pytest

from lossless import ContextEngine, Message
from lossless import observability as obs
from lossless.errors import MissingDependencyError, NotFoundError

from .test_integrity import SETTINGS, chat, populated

pytestmark = pytest.mark.anyio


def sample(name: str, **labels: str) -> float:
    text = obs.render_metrics()[0].decode()
    selector = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = rf"^{re.escape(name)}{re.escape('{' + selector + '}') if labels else ''} (\S+)$"
    found = re.search(pattern, text, flags=re.M)
    return float(found.group(1)) if found else 0.0


async def test_the_engine_records_the_spec_metrics(engine: ContextEngine) -> None:
    ingests = sample("lcm_ingest_latency_ms_count")
    runs = sample("lcm_compaction_runs_total", trigger="manual", stop_reason="nothing_to_do")
    await engine.ingest_batch("s", chat(12))
    assert sample("lcm_ingest_latency_ms_count") == ingests + 1
    tokens = sample("lcm_context_tokens_total")
    assembled = await engine.assemble("s", token_budget=100_000)
    assert sample("lcm_context_tokens_total") == tokens + assembled.estimated_tokens
    assert sample("lcm_assemble_latency_ms_count") >= 1
    result = await engine.compact("s")
    assert sample("lcm_compaction_runs_total", trigger="manual", stop_reason=result.stop_reason) >= 1
    assert (
        result.stop_reason != "nothing_to_do"
        or sample("lcm_compaction_runs_total", trigger="manual", stop_reason="nothing_to_do") == runs + 1
    )
    body, content_type = obs.render_metrics()
    assert content_type.startswith("text/plain") and b"lcm_expand_latency_ms_bucket" in body
    assert b"lcm_search_latency_ms_bucket" in body


async def test_summaries_and_integrity_failures_are_counted(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/o.db"
    async with await ContextEngine.open(url, **SETTINGS) as engine:  # type: ignore[arg-type]
        leaves = sample("lcm_summaries_created_total", kind="leaf")
        cid = await populated(engine)
        assert sample("lcm_summaries_created_total", kind="leaf") > leaves
        conn = sqlite3.connect(engine.store.path)  # type: ignore[attr-defined]
        conn.execute(f"DELETE FROM context_items WHERE conversation_id = {cid} AND ordinal = 1")
        conn.commit()
        conn.close()
        failures = sample("lcm_integrity_failures_total", kind="unreachable_summary")
        await engine.check_integrity()
        assert sample("lcm_integrity_failures_total", kind="unreachable_summary") > failures


async def test_compaction_logs_the_spec_fields_as_json(tmp_path: Path) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(obs.JsonFormatter())
    logger = logging.getLogger("lossless")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        async with await ContextEngine.open(f"sqlite:///{tmp_path / 'l.db'}", **SETTINGS) as engine:  # type: ignore[arg-type]
            await engine.ingest_batch("s", chat(40))
            result = await engine.compact("s", force=True)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert result.summaries
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    [done] = [line for line in lines if line["message"].startswith("compacted conversation")]
    assert done["level"] == "info" and done["logger"] == "lossless.engine"
    assert done["conversation_id"] == result.conversation_id and done["session_id"] == "s"
    assert done["trigger_reason"] == "manual" and len(done["compaction_id"]) == 16
    assert done["token_before"] == result.tokens_before and done["token_after"] == result.tokens_after
    made = [line for line in lines if "summary_id" in line]
    assert {line["summary_id"] for line in made} == {s.id for s in result.summaries}
    assert all(line["compaction_id"] == done["compaction_id"] for line in made)


async def test_compaction_logs_from_after_turn_name_the_session(tmp_path: Path) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(obs.JsonFormatter())
    logger = logging.getLogger("lossless")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        async with await ContextEngine.open(f"sqlite:///{tmp_path / 'l.db'}", **SETTINGS) as engine:  # type: ignore[arg-type]
            turns = chat(40)
            results = [
                await engine.after_turn("turns", turns[i : i + 2], token_budget=100_000) for i in range(0, 40, 2)
            ]
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert any(r.compaction and r.compaction.summaries for r in results)
    done = [
        line for line in map(json.loads, stream.getvalue().splitlines()) if "compacted conversation" in line["message"]
    ]
    assert done and all(line["session_id"] == "turns" and line["trigger_reason"] == "threshold" for line in done)


def test_json_formatter_handles_odd_values_and_errors() -> None:
    record = logging.makeLogRecord(
        {"name": "lossless.x", "levelname": "ERROR", "msg": "boom %s", "args": (1,), "token_after": 5, "obj": object()}
    )
    try:
        raise ValueError("inner")
    except ValueError:
        record.exc_info = sys.exc_info()
    line = json.loads(obs.JsonFormatter().format(record))
    assert line["message"] == "boom 1" and line["token_after"] == 5 and line["obj"].startswith("<object")
    assert "ValueError: inner" in line["error"]


def test_without_prometheus_client_recording_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    monkeypatch.setattr(obs, "_REGISTRY", obs._Registry())
    assert not obs.metrics_available()
    obs.record("lcm_compaction_runs", trigger="manual", stop_reason="x")
    obs.observe_ms("lcm_ingest_latency_ms", 1.0)
    with pytest.raises(MissingDependencyError, match=r"lossless-context\[metrics\]"):
        obs.render_metrics()


def test_disabled_metrics_record_nothing_and_never_import_prometheus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "prometheus_client", raising=False)
    monkeypatch.setattr(obs, "_REGISTRY", obs._Registry())
    obs.disable_metrics()
    obs.record("lcm_compaction_runs", trigger="manual", stop_reason="x")
    obs.observe_ms("lcm_ingest_latency_ms", 1.0)
    assert not obs.metrics_available() and obs.registry() is None
    assert "prometheus_client" not in sys.modules


def test_disabling_after_a_recording_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(obs, "_REGISTRY", obs._Registry())
    obs.record("lcm_compaction_runs", trigger="manual", stop_reason="x")
    obs.disable_metrics()
    obs.record("lcm_compaction_runs", trigger="manual", stop_reason="x")
    assert sample("lcm_compaction_runs_total", trigger="manual", stop_reason="x") == 2


def test_configure_logging_installs_one_handler() -> None:
    logger = logging.getLogger("lossless")
    before = list(logger.handlers)
    try:
        obs.configure_logging("json")
        handler = obs.configure_logging("json", logging.WARNING)
        ours = [h for h in logger.handlers if h not in before]
        assert ours == [handler] and isinstance(handler.formatter, obs.JsonFormatter)
    finally:
        for h in [h for h in logger.handlers if h not in before]:
            logger.removeHandler(h)
        logger.setLevel(logging.NOTSET)


async def test_ingest_latency_is_recorded_when_ingest_fails(engine: ContextEngine) -> None:
    count = sample("lcm_ingest_latency_ms_count")
    with pytest.raises(Exception, match="session_id"):
        await engine.ingest_batch("", [Message.user("x")])
    assert sample("lcm_ingest_latency_ms_count") == count + 1


async def test_grep_and_expansion_record_their_latency(tmp_path: Path) -> None:
    async with await ContextEngine.open(f"sqlite:///{tmp_path / 'm.db'}", **SETTINGS) as engine:  # type: ignore[arg-type]
        cid = await populated(engine)
        summaries, _ = await engine.summaries(cid)
        searches = sample("lcm_search_latency_ms_count")
        expansions = sample("lcm_expand_latency_ms_count")
        spent = sample("lcm_search_latency_ms_sum")
        await engine.grep("word1_", scope="messages")
        await engine.grep("word", mode="full_text", scope="files")
        assert sample("lcm_search_latency_ms_count") == searches + 2
        assert sample("lcm_search_latency_ms_sum") > spent
        await engine.expand([summaries[-1].id], include_messages=True)
        assert sample("lcm_expand_latency_ms_count") == expansions + 1
        await engine.expand_query("What was said about word1_3?", query="word1_3")
        assert sample("lcm_expand_latency_ms_count") == expansions + 2
        with pytest.raises(NotFoundError):  # a failed call is timed too
            await engine.expand(["sum_0000000000000000"])
        assert sample("lcm_expand_latency_ms_count") == expansions + 3
