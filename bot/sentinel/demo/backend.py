"""The demo workspace backend: the five queries in SQLite, with the semantics of the KQL in ``kql.py``.

Same windows (rows with TimeGenerated in (now - window, now]), same dedupe (latest row per incident
and per alert), same filters, caps, tie-breaking sort orders and result columns, so an answer from
the demo reads exactly like one from a real workspace. Rows later than "now" exist (the generator
writes whole days) and stay invisible until their time comes.

The data is regenerated when the clock passes the generated span, so a long-running demo keeps
having fresh incidents. SQLite work runs in a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import singledispatchmethod
from typing import Any, TypeVar

from bot.sentinel.client import RawTable
from bot.sentinel.demo import generator
from bot.sentinel.demo.store import create_database, iso
from bot.sentinel.models import QueryError
from bot.sentinel.params import BinSize, Severity, TimeWindow
from bot.sentinel.queries import (
    MAX_ALERT_ENTITY_LABELS,
    MAX_DESCRIPTION_CHARS,
    MAX_DETAIL_ALERTS,
    MAX_DETAIL_ENTITIES,
    MAX_OTHER_MATCHES,
    AlertsQuery,
    AlertTrendQuery,
    IncidentDetailQuery,
    IncidentsQuery,
    Query,
    TopEntitiesQuery,
)

Clock = Callable[[], datetime]
T = TypeVar("T")

_RANK = "CASE {column} WHEN 'High' THEN 0 WHEN 'Medium' THEN 1 WHEN 'Low' THEN 2 ELSE 3 END"
_OWNER = (
    "COALESCE(NULLIF(json_extract(Owner, '$.assignedTo'), ''), NULLIF(json_extract(Owner, '$.email'), ''), "
    "NULLIF(json_extract(Owner, '$.userPrincipalName'), ''))"
)
_ALERT_COUNT = "COALESCE(json_extract(AdditionalData, '$.alertsCount'), json_array_length(AlertIds))"


def _latest(name: str, table: str, key: str, row_id: str, columns: str) -> str:
    """CTEs ``<name>_rows`` and ``<name>``: the latest row per ``key`` inside (:start, :now], as KQL's
    ``summarize arg_max(TimeGenerated, ...) by key``. SQLite documents that with a single MAX() the bare
    columns (here rowid) come from the row holding the maximum: the cheapest arg_max, over narrow
    columns, joined back to the full row by rowid. ``{extra}`` is left for further WHERE conditions."""
    return f"""
    {name}_rows AS MATERIALIZED (
        SELECT rowid AS {row_id}, MAX(TimeGenerated) FROM {table}
        WHERE TimeGenerated > :start AND TimeGenerated <= :now {{extra}}
        GROUP BY {key}),
    {name} AS MATERIALIZED (
        SELECT r.{row_id}, {columns} FROM {name}_rows AS r JOIN {table} AS t ON t.rowid = r.{row_id})"""


_LATEST_ALERTS = _latest(
    "latest_alerts", "SecurityAlert", "SystemAlertId", "AlertRowId",
    "t.SystemAlertId, t.AlertName, t.AlertSeverity, t.Status, t.ProductName, t.ProviderName, t.TimeGenerated, "
    "t.Tactics")
_LATEST_INCIDENTS = _latest("latest_incidents", "SecurityIncident", "IncidentNumber", "IncidentRowId", "t.*")


class DemoBackend:
    source = "demo"

    def __init__(self, seed: int, clock: Clock = lambda: datetime.now(UTC)) -> None:
        self._seed = seed
        self._clock = clock
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._generated_until: datetime | None = None
        self._on_generated: list[Callable[[sqlite3.Connection], None]] = []

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def clock(self) -> Clock:
        return self._clock

    def on_generated(self, hook: Callable[[sqlite3.Connection], None]) -> None:
        """Call ``hook`` with each newly generated database, under the lock (the demo writer re-applies the
        changes analysts made, which a regeneration at the turn of the day would otherwise lose)."""
        self._on_generated.append(hook)

    def with_database(self, work: Callable[[sqlite3.Connection, datetime], T]) -> T:
        """Run ``work(database, now)`` under the backend's lock; blocking, so call it from a worker thread."""
        now = self._clock()
        with self._lock:
            return work(self._database(now), now)

    async def execute(self, query: Query, kql_text: str) -> RawTable | QueryError:
        now = self._clock()
        return await asyncio.to_thread(self._execute_sync, query, now)

    def _execute_sync(self, query: Query, now: datetime) -> RawTable:
        with self._lock:
            conn = self._database(now)
            return RawTable(rows=self._run(query, conn, now))

    def _database(self, now: datetime) -> sqlite3.Connection:
        if self._conn is None or self._generated_until is None or now >= self._generated_until:
            data = generator.generate(self._seed, now)
            if self._conn is not None:
                self._conn.close()
            self._conn = create_database(data.incident_rows, data.alert_rows)
            self._generated_until = data.generated_until
            for hook in self._on_generated:
                hook(self._conn)
        return self._conn

    async def prepare(self) -> None:
        """Generate the data now rather than on the first question."""
        await asyncio.to_thread(self.prepare_sync)

    def prepare_sync(self) -> None:
        with self._lock:
            self._database(self._clock())

    async def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @singledispatchmethod
    def _run(self, query: Query, conn: sqlite3.Connection, now: datetime) -> list[dict[str, Any]]:
        raise TypeError(f"the demo workspace cannot run {type(query).__name__}")

    @_run.register
    def _incidents(self, query: IncidentsQuery, conn: sqlite3.Connection, now: datetime) -> list[dict[str, Any]]:
        params = _window(query.window, now) | {"limit": query.limit}
        sql = f"""
        WITH {_LATEST_INCIDENTS.format(extra="AND CreatedTime > :start")},
        matched AS MATERIALIZED (SELECT * FROM latest_incidents WHERE Severity IN {_severities(query.min_severity)})
        SELECT IncidentNumber, Title, Severity, Status, {_OWNER} AS Owner, CreatedTime, LastModifiedTime,
               {_ALERT_COUNT} AS AlertCount, json_extract(AdditionalData, '$.tactics') AS Tactics,
               json_extract(AdditionalData, '$.alertProductNames') AS Products, IncidentUrl, Classification,
               (SELECT COUNT(*) FROM matched) AS TotalMatched
        FROM matched
        ORDER BY {_RANK.format(column="Severity")}, CreatedTime DESC, IncidentNumber DESC
        LIMIT :limit"""
        return _fetch(conn, sql, params)

    @_run.register
    def _incident_detail(
        self, query: IncidentDetailQuery, conn: sqlite3.Connection, now: datetime
    ) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"start": iso(now - query.timespan), "now": iso(now)}
        if query.ref.number is not None:
            latest = _LATEST_INCIDENTS.format(extra="AND IncidentNumber = :number")
            params["number"] = query.ref.number
            title_filter = ""
        else:
            # Only incidents that ever had a matching title can match; the latest title is checked below.
            latest = _LATEST_INCIDENTS.format(
                extra="AND IncidentNumber IN (SELECT IncidentNumber FROM SecurityIncident "
                "WHERE TimeGenerated > :start AND TimeGenerated <= :now AND contains_ci(Title, :search))"
            )
            params["search"] = query.ref.title_search
            title_filter = "WHERE contains_ci(Title, :search)"
        matches = _fetch(
            conn,
            f"""WITH {latest} SELECT * FROM latest_incidents {title_filter}
                ORDER BY CreatedTime DESC, IncidentNumber DESC""",
            params,
        )
        if not matches:
            return []
        incident = matches[0]
        alerts = _fetch(
            conn,
            f"""WITH {_LATEST_ALERTS.format(extra="AND SystemAlertId IN (SELECT value FROM json_each(:alert_ids))")}
                SELECT a.AlertRowId, a.SystemAlertId, a.AlertName, a.AlertSeverity, a.Status,
                       COALESCE(NULLIF(a.ProductName, ''), a.ProviderName) AS Product, a.TimeGenerated, a.Tactics
                FROM json_each(:alert_ids) AS ids JOIN latest_alerts AS a ON a.SystemAlertId = ids.value""",
            params | {"alert_ids": incident["AlertIds"] or "[]"},
        )
        entities = _fetch(
            conn,
            f"""SELECT DISTINCT EntityType, EntityValue FROM AlertEntity
                WHERE AlertRowId IN ({", ".join(str(int(a["AlertRowId"])) for a in alerts) or "NULL"})
                ORDER BY EntityType, EntityValue LIMIT {MAX_DETAIL_ENTITIES}""",
            {},
        )
        alerts.sort(key=lambda a: a["SystemAlertId"])
        alerts.sort(key=lambda a: a["TimeGenerated"], reverse=True)
        additional = _json(incident["AdditionalData"]) or {}
        owner = _json(incident["Owner"]) or {}
        return [
            {
                "IncidentNumber": incident["IncidentNumber"],
                "IncidentName": incident["IncidentName"],
                "Title": incident["Title"],
                "Description": (incident["Description"] or "")[:MAX_DESCRIPTION_CHARS],
                "Severity": incident["Severity"],
                "Status": incident["Status"],
                "Owner": next((owner[k] for k in ("assignedTo", "email", "userPrincipalName") if owner.get(k)), None),
                **{k: incident[k] for k in ("CreatedTime", "LastModifiedTime", "ClosedTime", "FirstActivityTime",
                                            "LastActivityTime", "Classification", "ClassificationReason",
                                            "ClassificationComment", "Labels", "IncidentUrl")},
                "AlertCount": additional.get("alertsCount", len(_json(incident["AlertIds"]) or [])),
                "Tactics": additional.get("tactics"),
                "Products": additional.get("alertProductNames"),
                "CommentCount": additional.get("commentsCount"),
                "Alerts": [
                    {"id": a["SystemAlertId"], "name": a["AlertName"], "severity": a["AlertSeverity"],
                     "status": a["Status"], "product": a["Product"], "time": a["TimeGenerated"],
                     "tactics": a["Tactics"]}
                    for a in alerts[:MAX_DETAIL_ALERTS]
                ],
                "Entities": [{"type": e["EntityType"], "value": e["EntityValue"]} for e in entities],
                "OtherMatches": [
                    {"number": m["IncidentNumber"], "title": m["Title"]} for m in matches[1 : 1 + MAX_OTHER_MATCHES]
                ],
            }
        ]

    @_run.register
    def _alerts(self, query: AlertsQuery, conn: sqlite3.Connection, now: datetime) -> list[dict[str, Any]]:
        params = _window(query.window, now) | {"limit": query.limit}
        rows = _fetch(
            conn,
            f"""WITH {_LATEST_ALERTS.format(extra='')},
                matched AS MATERIALIZED (SELECT * FROM latest_alerts
                                         WHERE AlertSeverity IN {_severities(query.min_severity)})
                SELECT AlertRowId, SystemAlertId, AlertName, AlertSeverity, Status,
                       COALESCE(NULLIF(ProductName, ''), ProviderName) AS ProductName, TimeGenerated, Tactics,
                       (SELECT COUNT(*) FROM matched) AS TotalMatched
                FROM matched
                ORDER BY {_RANK.format(column="AlertSeverity")}, TimeGenerated DESC, SystemAlertId
                LIMIT :limit""",
            params,
        )
        labels: dict[int, list[str]] = {}
        if rows:
            ids = ", ".join(str(int(r["AlertRowId"])) for r in rows)
            for entity in _fetch(
                conn,
                f"""SELECT DISTINCT AlertRowId, EntityType || ': ' || EntityValue AS Label FROM AlertEntity
                    WHERE AlertRowId IN ({ids}) ORDER BY AlertRowId, Label""",
                {},
            ):
                labels.setdefault(entity["AlertRowId"], []).append(entity["Label"])
        for row in rows:
            row["EntityLabels"] = labels.get(row.pop("AlertRowId"), [])[:MAX_ALERT_ENTITY_LABELS]
        return rows

    @_run.register
    def _alert_trend(self, query: AlertTrendQuery, conn: sqlite3.Connection, now: datetime) -> list[dict[str, Any]]:
        params = _window(query.window, now)
        hourly = query.bin_size is BinSize.HOUR
        # ISO text truncated to the hour or the day is the bin's start.
        prefix = 13 if hourly else 10
        counts = _fetch(
            conn,
            f"""WITH {_LATEST_ALERTS.format(extra='')}
                SELECT substr(TimeGenerated, 1, {prefix}) AS Bin, AlertSeverity, COUNT(*) AS AlertCount
                FROM latest_alerts WHERE AlertSeverity IN {_severities(query.min_severity)}
                GROUP BY Bin, AlertSeverity""",
            params,
        )
        # make-series: one series per severity present, zero-filled over [bin(start), now).
        step = query.bin_size.duration
        first = _floor(now - query.window.duration, step)
        bins = []
        moment = first
        while moment < now:
            bins.append(moment)
            moment += step
        found = {(c["Bin"], c["AlertSeverity"]): c["AlertCount"] for c in counts}
        severities = sorted({c["AlertSeverity"] for c in counts})
        rows = []
        for start in bins:
            key = iso(start)[:prefix]
            for severity in severities:
                count = found.get((key, severity), 0)
                rows.append({"BinStart": iso(start), "AlertSeverity": severity, "AlertCount": count})
        return rows

    @_run.register
    def _top_entities(self, query: TopEntitiesQuery, conn: sqlite3.Connection, now: datetime) -> list[dict[str, Any]]:
        params = _window(query.window, now) | {"limit": query.limit}
        return _fetch(
            conn,
            f"""WITH {_LATEST_ALERTS.format(extra='')},
                matched AS MATERIALIZED (SELECT * FROM latest_alerts
                                         WHERE AlertSeverity IN {_severities(query.min_severity)}),
                entities AS (  -- AlertEntity is already distinct per alert row
                    SELECT m.AlertSeverity, m.TimeGenerated, e.EntityType, e.EntityValue
                    FROM matched AS m JOIN AlertEntity AS e ON e.AlertRowId = m.AlertRowId),
                counted AS MATERIALIZED (
                    SELECT EntityType, EntityValue, COUNT(*) AS AlertCount,
                           SUM(AlertSeverity = 'High') AS HighSeverityCount, MAX(TimeGenerated) AS LastSeen
                    FROM entities GROUP BY EntityType, EntityValue)
                SELECT *, (SELECT COUNT(*) FROM counted) AS TotalMatched FROM counted
                ORDER BY AlertCount DESC, HighSeverityCount DESC, LastSeen DESC, EntityType, EntityValue
                LIMIT :limit""",
            params,
        )


def _window(window: TimeWindow, now: datetime) -> dict[str, Any]:
    return {"start": iso(now - window.duration), "now": iso(now)}


def _severities(min_severity: Severity) -> str:
    # Enum values only, never user text.
    return "(" + ", ".join(f"'{s.value}'" for s in min_severity.at_least()) + ")"


def _floor(moment: datetime, step: timedelta) -> datetime:
    if step >= timedelta(days=1):
        return moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return moment.replace(minute=0, second=0, microsecond=0)


def _fetch(conn: sqlite3.Connection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(row) for row in conn.execute(sql, params).fetchall()]


def _json(text: Any) -> Any:
    if not isinstance(text, str) or not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
