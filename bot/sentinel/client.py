"""SentinelClient: the read methods, the same over every backend.

Each method validates its parameters, builds the query (as data and as KQL), lets the backend run
it, times it, and turns the rows into typed records with their metadata (total before the limit,
truncation, warnings for partial results). It returns ``QueryResult`` or ``QueryError`` and never
raises for bad input or a failing service.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from bot import telemetry
from bot.sentinel import rows
from bot.sentinel.models import QueryError, QueryMetadata, QueryResult
from bot.sentinel.params import InvalidParameter
from bot.sentinel.queries import MAX_DETAIL_ALERTS, Query, is_query, make_query, spec_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RawTable:
    """What a backend returns: rows keyed by the query's COLUMNS, plus any partial-result warnings."""

    rows: list[dict[str, Any]]
    warnings: tuple[str, ...] = field(default=())
    skipped: int = 0  # rows the backend could not use (none of the query's identifying columns)
    service_truncated: bool = False  # the service cut the result at one of its limits
    query_id: str = ""  # the request id the service saw, for logs and support


class SentinelBackend(Protocol):
    source: str  # "demo" or "log_analytics"

    async def execute(self, query: Query, kql_text: str) -> RawTable | QueryError: ...

    async def prepare(self) -> None:
        """Get ready to answer quickly (the demo generates its data here)."""
        ...

    async def close(self) -> None: ...


class SentinelClient:
    def __init__(self, backend: SentinelBackend) -> None:
        self._backend = backend

    @property
    def source(self) -> str:
        return self._backend.source

    @property
    def is_demo(self) -> bool:
        return self._backend.source == "demo"

    async def query_incidents(
        self, time_window: object = None, min_severity: object = None, limit: object = None
    ) -> QueryResult | QueryError:
        return await self.run("query_incidents", time_window=time_window, min_severity=min_severity, limit=limit)

    async def get_incident_detail(self, incident_ref: object) -> QueryResult | QueryError:
        return await self.run("get_incident_detail", incident_ref=incident_ref)

    async def query_alerts(
        self, time_window: object = None, min_severity: object = None, limit: object = None
    ) -> QueryResult | QueryError:
        return await self.run("query_alerts", time_window=time_window, min_severity=min_severity, limit=limit)

    async def get_alert_trend(
        self, time_window: object = None, min_severity: object = None, bin_size: object = None
    ) -> QueryResult | QueryError:
        return await self.run("get_alert_trend", time_window=time_window, min_severity=min_severity, bin_size=bin_size)

    async def get_top_entities(
        self, time_window: object = None, min_severity: object = None, limit: object = None
    ) -> QueryResult | QueryError:
        return await self.run("get_top_entities", time_window=time_window, min_severity=min_severity, limit=limit)

    async def incident_changes(self, since: datetime, limit: int | None = None) -> QueryResult | QueryError:
        """Incidents with a SecurityIncident row ingested after ``since`` (aware), latest state of each, as
        ``ChangedIncident`` records ascending by that row's TimeGenerated; at most ``limit`` (default and cap
        ``MAX_CHANGES``), ``metadata.truncated`` when more changed (ask again from the last one's time)."""
        return await self.run("incident_changes", since=since, limit=limit)

    async def get_on_call(self) -> QueryResult | QueryError:
        """The on-call roster (``OnCallEntry`` records); rows without a UPN or with a bad shift are left out and
        counted in ``metadata.warnings``."""
        return await self.run("get_on_call")

    async def run(
        self, tool: str, arguments: Mapping[str, object] | None = None, /, **more: object
    ) -> QueryResult | QueryError:
        """Run a read query by its tool name; missing (None) arguments take their defaults.

        Arguments may be given as a mapping (model output: any key is safe) or as keywords.
        """
        merged = {**(arguments or {}), **more}
        kind = SpanKind.INTERNAL if self.is_demo else SpanKind.CLIENT
        with telemetry.tracer().start_as_current_span(
                "sentinel.query", kind=kind, record_exception=False, set_status_on_exception=False,
                attributes={"sentinel.tool": tool if is_query(tool) else "unknown",
                            "sentinel.source": self.source}) as span:
            try:
                query = make_query(tool, {k: v for k, v in merged.items() if v is not None})
            except InvalidParameter as exc:
                result: QueryResult | QueryError = QueryError("invalid_argument", str(exc), retry_possible=False,
                                                              tool=tool)
            else:
                result = await self._timed(query, span)
            _describe(span, result)
            return result

    async def prepare(self) -> None:
        await self._backend.prepare()

    async def close(self) -> None:
        await self._backend.close()

    async def _timed(self, query: Query, span: Span) -> QueryResult | QueryError:
        """Run the query, recording its duration by tool whether or not the span is sampled."""
        started = time.perf_counter()
        error_type: str | None = None
        try:
            result = await self._execute(query)
            error_type = result.code if isinstance(result, QueryError) else None
            return result
        except Exception as error:  # a backend bug, not a service error: recorded by type, never by message
            error_type = type(error).__name__
            span.set_attribute("error.type", error_type)
            span.set_status(Status(StatusCode.ERROR, error_type))
            raise
        finally:
            labels = {"sentinel.tool": query.tool, "sentinel.source": self.source}
            telemetry.instruments().query_duration.record(
                time.perf_counter() - started, labels | ({"error.type": error_type} if error_type else {}))

    async def _execute(self, query: Query) -> QueryResult | QueryError:
        tool = query.tool
        spec = spec_of(tool)
        text = spec.kql(query)
        started = time.perf_counter()
        raw = await self._backend.execute(query, text)
        elapsed_ms = (time.perf_counter() - started) * 1000
        if isinstance(raw, QueryError):
            log.info("query %s failed: %s (status %s)", tool, raw.code, raw.status)
            return dataclasses.replace(raw, tool=tool, kql=text)
        records, skipped = rows.decode_rows(raw.rows, spec.decode)
        skipped += raw.skipped
        # Rows came back and none could be read: that is not "nothing matched" (unless leaving them out is the rule).
        if skipped and not records and not spec.left_out:
            log.warning("query %s (query id %s): all %d result rows unreadable", tool, raw.query_id, skipped)
            return QueryError(
                "unreadable_response",
                f"Log Analytics returned {skipped} row(s) but none had the data the bot needs, so the bot cannot tell "
                "what matched: this is not an empty result. Try again; if it keeps happening, report query id "
                f"{raw.query_id or 'unknown'}.",
                retry_possible=True, tool=tool, kql=text, query_id=raw.query_id,
            )
        # What the query object itself has to tell (an analyst's query: a chart left out, its time range widened).
        warnings = [*getattr(query, "notes", ()), *raw.warnings]
        if skipped:
            why = spec.left_out or "result row(s) could not be read and were left out"
            warnings.append(f"{skipped} {why}.")
        total = max((rows.as_int(r.get("TotalMatched"), -1) for r in raw.rows), default=0)
        if spec.left_out:  # rows left out on purpose are not rows beyond the limit
            total -= skipped
        total = max(total, len(records))
        truncated = total > len(records) or raw.service_truncated
        if spec.row_cap is not None and len(records) > spec.row_cap:
            records, truncated = records[:spec.row_cap], True
            warnings.append(f"Cut at {spec.row_cap} rows: more matched. Add | take, | summarize or narrower filters "
                            "to see what you need.")
        if tool == "get_incident_detail" and records:
            detail = records[0]
            if detail.incident.alert_count > len(detail.alerts) and len(detail.alerts) >= MAX_DETAIL_ALERTS:
                truncated = True
                warnings.append(f"Showing {len(detail.alerts)} of {detail.incident.alert_count} alerts.")
        metadata = QueryMetadata(
            tool=tool,
            parameters=query.parameters(),
            total=total,
            returned=len(records),
            truncated=truncated,
            elapsed_ms=round(elapsed_ms, 1),
            kql=text,
            timespan=iso_duration(query.timespan.total_seconds()),
            source=self._backend.source,
            warnings=tuple(warnings),
            service_truncated=raw.service_truncated,
        )
        return QueryResult(records=tuple(records), metadata=metadata)


def _describe(span: Span, result: QueryResult | QueryError) -> None:
    """Counts, flags and codes on the ``sentinel.query`` span; never the KQL, its literals or row values."""
    if isinstance(result, QueryError):
        span.set_attribute("error.type", result.code)
        if result.status is not None:
            span.set_attribute("sentinel.status", result.status)
        span.set_status(Status(StatusCode.ERROR, result.code))
        return
    meta = result.metadata
    span.set_attributes({"sentinel.rows": meta.returned, "sentinel.total": meta.total,
                         "sentinel.truncated": meta.truncated, "sentinel.latency_ms": meta.elapsed_ms,
                         "sentinel.warnings": len(meta.warnings)})


def iso_duration(seconds: float) -> str:
    """ISO-8601 duration as the Log Analytics API expects it, e.g. PT86400S."""
    return f"PT{int(seconds)}S"
