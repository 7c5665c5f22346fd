"""Observability: a correlation id per turn in every log line, and the OpenTelemetry tracer and instruments.

Only the vendor-neutral OpenTelemetry API is used here and in the layers that make spans. The composition
root installs an SDK (Azure Monitor) when APPLICATIONINSIGHTS_CONNECTION_STRING is set; otherwise the
API's no-op tracer and meter take everything, at next to no cost. The tracer and instruments are looked
up from the global providers when used, never captured at import, so whichever provider is installed
(Azure Monitor in production, an in-memory one in tests) is the one that records.

Content rule: spans, metrics and log lines carry kinds, names, counts, sizes and timings. Never the
analyst's question, the model's answer, tool results, row values, KQL text or secrets (the one opt-in
exception, TELEMETRY_CAPTURE_CONTENT, is handled by the Teams handler and documented in docs/telemetry.md).
"""

from __future__ import annotations

import json
import logging
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import TextIO

from opentelemetry import metrics, trace

SCOPE = "sentinel_assistant"
NO_CORRELATION = "-"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(correlation_id)s]: %(message)s"

# The turn being handled in this task (asyncio copies context into the tasks a turn starts).
correlation_id: ContextVar[str | None] = ContextVar("correlation_id", default=None)


def new_correlation_id() -> str:
    return uuid.uuid4().hex[:12]


@contextmanager
def correlated(value: str) -> Iterator[str]:
    """Every log line written inside this block (and in tasks it starts) carries ``value``."""
    token = correlation_id.set(value)
    try:
        yield value
    finally:
        correlation_id.reset(token)


# ---- logs ---------------------------------------------------------------------------------------------------


class CorrelationFilter(logging.Filter):
    """Adds ``correlation_id`` to every record a handler sees (``-`` outside a turn)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "correlation_id"):
            record.correlation_id = correlation_id.get() or NO_CORRELATION
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, correlation id, trace and span ids."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        audit = getattr(record, "audit", None)
        if isinstance(audit, dict):
            # An audit record (orchestrator.changes) is structured data: a field, not JSON inside the message.
            entry["message"] = f"audit {audit.get('event', '')}"
            entry["audit"] = audit
        correlation = getattr(record, "correlation_id", None) or correlation_id.get()
        if correlation and correlation != NO_CORRELATION:
            entry["correlation_id"] = correlation
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            entry["trace_id"] = format(span.trace_id, "032x")
            entry["span_id"] = format(span.span_id, "016x")
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def log_handler(log_format: str, stream: TextIO | None = None) -> logging.Handler:
    """A stream handler (stderr by default) with correlation ids, as JSON lines or as text."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(CorrelationFilter())
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    return handler


def file_log_handler(path: str, log_format: str) -> logging.Handler:
    """Like ``log_handler``, appending to the file ``path`` (its folder made if missing)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.addFilter(CorrelationFilter())
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    return handler


def audit_to_file(path: str) -> None:
    """Audit records (the ``bot.audit`` logger) go to the file ``path``, one JSON object per line, and no longer
    to the other log handlers (the console)."""
    audit = logging.getLogger("bot.audit")
    audit.addHandler(file_log_handler(path, "json"))
    audit.propagate = False


def add_correlation(logger: logging.Logger) -> None:
    """Give every handler of ``logger`` correlation ids (e.g. the one an exporter installed)."""
    for handler in logger.handlers:
        if not any(isinstance(f, CorrelationFilter) for f in handler.filters):
            handler.addFilter(CorrelationFilter())


# ---- traces and metrics -------------------------------------------------------------------------------------


def tracer() -> trace.Tracer:
    return _tracer_for(trace.get_tracer_provider())


@dataclass(frozen=True)
class Instruments:
    turns: metrics.Counter  # by outcome and kind
    turn_duration: metrics.Histogram  # seconds
    llm_tokens: metrics.Counter  # by gen_ai.token.type (input, output) and model
    llm_duration: metrics.Histogram  # seconds per model call
    query_duration: metrics.Histogram  # seconds per Sentinel query, by tool
    query_wait: metrics.Histogram  # seconds a Log Analytics query waited for its identity's budget, by priority
    feedback: metrics.Counter  # thumbs up/down on answers, by reaction


def instruments() -> Instruments:
    return _instruments_for(metrics.get_meter_provider())


# Keyed by provider: one lookup per provider, not per call (the API's proxy meter keeps every instrument
# it ever hands out until a real provider arrives, so per-call creation would grow without bound).
@lru_cache(maxsize=4)
def _tracer_for(provider: trace.TracerProvider) -> trace.Tracer:
    return provider.get_tracer(SCOPE)


@lru_cache(maxsize=4)
def _instruments_for(provider: metrics.MeterProvider) -> Instruments:
    meter = provider.get_meter(SCOPE)
    return Instruments(
        turns=meter.create_counter("bot.turns", unit="{turn}", description="Teams turns handled, by outcome"),
        turn_duration=meter.create_histogram("bot.turn.duration", unit="s",
                                              description="Time from a turn's start to its saved state"),
        llm_tokens=meter.create_counter("bot.llm.tokens", unit="{token}",
                                        description="Language model tokens, by gen_ai.token.type"),
        llm_duration=meter.create_histogram("gen_ai.client.operation.duration", unit="s",
                                            description="Duration of one language model call"),
        query_duration=meter.create_histogram("sentinel.query.duration", unit="s",
                                              description="Duration of one Sentinel query, by tool"),
        query_wait=meter.create_histogram("sentinel.query.wait", unit="s",
                                          description="Time a Log Analytics query waited for its identity's budget, "
                                                      "by priority and whether it was then sent"),
        feedback=meter.create_counter("bot.feedback", unit="{reaction}",
                                      description="Feedback on answers, by reaction (like, dislike)"),
    )
