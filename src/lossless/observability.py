"""Metrics (Prometheus) and structured JSON logs.

Metrics, all in one process-wide registry of this module's own (never the ``prometheus_client``
default registry, so embedding lossless cannot clash with a host's metrics):

=====================================  =========  ==============================================
``lcm_context_tokens_total``           counter    tokens of the contexts assembled (sum over calls)
``lcm_compaction_runs_total``          counter    compactions run, by ``trigger`` and ``stop_reason``
``lcm_summaries_created_total``        counter    summaries written, by ``kind`` (leaf, condensed)
``lcm_integrity_failures_total``       counter    problems found by integrity checks, by ``kind``
``lcm_ingest_latency_ms``              histogram  one ingest call
``lcm_assemble_latency_ms``            histogram  one assemble call
``lcm_expand_latency_ms``              histogram  one expansion (recorded by whatever expands)
``lcm_search_latency_ms``              histogram  one search (recorded by whatever searches)
``lcm_jobs_total``                     counter    background jobs finished, by ``kind`` and ``outcome``
=====================================  =========  ==============================================

Invariants:

* ``prometheus-client`` is optional (the ``metrics`` extra; ``server`` includes it).  Without it
  every recording call is a no-op and costs a function call; only :func:`render_metrics` (the
  exposition) needs it and raises :class:`~lossless.errors.MissingDependencyError` naming the
  install command.  Recording never raises.
* A process that exposes no metrics may turn recording off first (:func:`disable_metrics`; a
  one-shot ``lcm`` command does): every recording call is then a no-op and prometheus-client is
  never imported.
* Labels have small fixed value sets (never a conversation or session id), so series stay few.
* :class:`JsonFormatter` writes one JSON object per line with ``time``, ``level``, ``logger`` and
  ``message``, then the fields of ``spec/002`` (:data:`LOG_FIELDS`) and any other ``extra`` a call
  passes; values that are not JSON become strings.  It does no I/O of its own (a handler does).
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

from lossless.errors import MissingDependencyError

__all__ = [
    "LOG_FIELDS",
    "JsonFormatter",
    "configure_logging",
    "metrics_available",
    "observe_ms",
    "record",
    "registry",
    "render_metrics",
    "timed",
]

P = ParamSpec("P")
T = TypeVar("T")

#: The structured log fields of spec/002, always written when a record carries them.
LOG_FIELDS = (
    "conversation_id",
    "session_id",
    "compaction_id",
    "summary_id",
    "trigger_reason",
    "token_before",
    "token_after",
)

_BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000)

_COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "lcm_context_tokens": ("Tokens of the contexts assembled, summed over assemble calls.", ()),
    "lcm_compaction_runs": ("Compactions run, by trigger (threshold, manual, maintenance) and stop reason.",
                            ("trigger", "stop_reason")),
    "lcm_summaries_created": ("Summaries written, by kind.", ("kind",)),
    "lcm_integrity_failures": ("Problems found by integrity checks, by kind.", ("kind",)),
    "lcm_jobs": ("Background jobs finished, by kind and outcome.", ("kind", "outcome")),
}  # fmt: skip
_HISTOGRAMS: dict[str, str] = {
    "lcm_ingest_latency_ms": "Latency of one ingest call, in milliseconds.",
    "lcm_assemble_latency_ms": "Latency of one assemble call, in milliseconds.",
    "lcm_expand_latency_ms": "Latency of one expansion, in milliseconds.",
    "lcm_search_latency_ms": "Latency of one search, in milliseconds.",
}


class _Registry:
    """The prometheus objects, made on first use (or nothing, without prometheus-client)."""

    def __init__(self) -> None:
        self.ready = False
        self.registry: Any = None
        self.metrics: dict[str, Any] = {}

    def get(self) -> dict[str, Any]:
        if not self.ready:
            self.ready = True
            try:
                import prometheus_client
            except ImportError:
                return self.metrics
            self.registry = prometheus_client.CollectorRegistry(auto_describe=True)
            for name, (doc, labels) in _COUNTERS.items():
                self.metrics[name] = prometheus_client.Counter(name, doc, labels, registry=self.registry)
            for name, doc in _HISTOGRAMS.items():
                self.metrics[name] = prometheus_client.Histogram(name, doc, buckets=_BUCKETS_MS, registry=self.registry)
        return self.metrics


_REGISTRY = _Registry()


def disable_metrics() -> None:
    """Record nothing in this process from now on (a no-op where metrics were recorded already).

    For a process that exposes no metrics, such as a one-shot ``lcm`` command: it then never
    imports prometheus-client, which would cost it more than its recordings are worth.
    """
    _REGISTRY.ready = True


def metrics_available() -> bool:
    """Whether ``prometheus-client`` is installed (else metrics are not recorded)."""
    return bool(_REGISTRY.get())


def record(name: str, amount: float = 1, **labels: str) -> None:
    """Add ``amount`` to counter ``name`` (without its ``_total`` suffix) with ``labels``.  Never raises."""
    metric = _REGISTRY.get().get(name)
    if metric is None:
        return
    try:
        (metric.labels(**labels) if labels else metric).inc(amount)
    except (ValueError, TypeError):  # pragma: no cover - a wrong label set is a programming error
        logging.getLogger("lossless.metrics").warning("cannot record metric %s with %s", name, labels)


def observe_ms(name: str, milliseconds: float) -> None:
    """Record one observation of histogram ``name``.  Never raises."""
    metric = _REGISTRY.get().get(name)
    if metric is not None:
        metric.observe(milliseconds)


def timed(name: str) -> Callable[[Callable[P, Awaitable[T]]], Callable[P, Awaitable[T]]]:
    """Decorate a coroutine function to record its latency in histogram ``name`` (also when it raises)."""

    def decorate(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
        @functools.wraps(fn)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
            started = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                observe_ms(name, (time.perf_counter() - started) * 1000)

        return wrapper

    return decorate


def render_metrics() -> tuple[bytes, str]:
    """The metrics in the Prometheus text format, and its content type (for an HTTP endpoint)."""
    if not _REGISTRY.get():
        raise MissingDependencyError("Prometheus metrics", "metrics", "prometheus_client")
    import prometheus_client

    return prometheus_client.generate_latest(_REGISTRY.registry), prometheus_client.CONTENT_TYPE_LATEST


def registry() -> Any:
    """The ``CollectorRegistry`` (for ``prometheus_client.start_http_server``); ``None`` without the extra."""
    _REGISTRY.get()
    return _REGISTRY.registry


_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in LOG_FIELDS:
            if name in record.__dict__:
                out[name] = _plain(record.__dict__[name])
        for name, value in record.__dict__.items():
            if name not in _STANDARD and name not in out:
                out[name] = _plain(value)
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def configure_logging(log_format: str = "text", level: int | str = logging.INFO) -> logging.Handler:
    """Send the ``lossless`` loggers to stderr as text or JSON lines; returns the handler it installed.

    Meant for processes lossless owns (``lcm worker``); an embedding host configures logging itself.
    """
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("lossless")
    for old in [h for h in logger.handlers if getattr(h, "_lossless", False)]:
        logger.removeHandler(old)
    handler._lossless = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level)
    return handler
