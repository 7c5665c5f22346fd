"""evidence_alert_incidents: the incident of each of an investigation's alerts, and how it stands (SecurityIncident's
latest row of each incident over the last 30 days whose AlertIds hold the alert), so the assessment can discount the
alerts an analyst closed as false or benign positive.

Internal, and part of an investigation's second round: asked only when the incidents naming the entity hold one
closed as FalsePositive or BenignPositive (otherwise no alert can be discounted). Its values are the alerts' ids from
the first round's rows; each must look like an alert id (letters, digits, ``-``, ``_``, ``.``, ``:``; at most 128),
at most ``MAX_ALERT_IDS``, and reaches KQL only as an escaped literal and the demo's SQL only as a bound parameter."""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.sentinel import demo_sql, kql
from bot.sentinel.demo_sql import iso
from bot.sentinel.evidence import AlertIncident
from bot.sentinel.params import InvalidParameter
from bot.sentinel.rows import as_int, as_text
from bot.sentinel.spec import DemoWorkspace, Param, QuerySpec, Row

MAX_ALERT_IDS = 50  # an investigation's alerts (query_alerts' limit there)
LOOKBACK = timedelta(days=30)
_ALERT_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


@dataclass(frozen=True)
class AlertIncidentsQuery:
    alert_ids: tuple[str, ...]

    tool = "evidence_alert_incidents"
    title = "Incidents of the alerts"

    @property
    def timespan(self) -> timedelta:
        return LOOKBACK

    def parameters(self) -> dict[str, Any]:
        return {"alert_ids": list(self.alert_ids)}


def alert_id(value: object) -> str | None:
    """``value`` when it looks like an alert id; None otherwise (log data may hold anything)."""
    return value if isinstance(value, str) and _ALERT_ID.fullmatch(value) else None


def _ids(value: object) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not value:
        raise InvalidParameter("alert_ids", "give the alerts' ids (SystemAlertId)")
    if len(value) > MAX_ALERT_IDS:
        raise InvalidParameter("alert_ids", f"at most {MAX_ALERT_IDS} alerts")
    if not all(alert_id(v) for v in value):
        raise InvalidParameter("alert_ids", "an alert id is letters, digits, '-', '_', '.' or ':' (at most 128)")
    return tuple(dict.fromkeys(value))


def _kql(query: AlertIncidentsQuery) -> str:
    ids = ", ".join(kql.string_literal(v) for v in query.alert_ids)
    return f"""// {query.tool}: the incident of each alert, and how it stands
let alert_ids = pack_array({ids});
let found = materialize(SecurityIncident
    | where TimeGenerated > ago({LOOKBACK.days}d)
    | summarize arg_max(TimeGenerated, Status, Classification, AlertIds) by IncidentNumber
    | mv-expand AlertId = AlertIds to typeof(string)
    | where AlertId in (alert_ids)
    | project AlertId, IncidentNumber, Status, Classification);
found
| sort by AlertId asc, IncidentNumber asc
| take {MAX_ALERT_IDS * 2}
| extend TotalMatched = toscalar(found | count)"""


def _demo(query: AlertIncidentsQuery, conn: sqlite3.Connection, now: datetime,
          workspace: DemoWorkspace) -> list[dict[str, Any]]:
    return demo_sql.fetch(conn, f"""WITH found AS MATERIALIZED (
            SELECT a.SystemAlertId AS AlertId, l.IncidentNumber, s.Status, s.Classification
            FROM IncidentAlert AS a
            JOIN LatestIncident AS l ON l.IncidentNumber = a.IncidentNumber
            JOIN SecurityIncident AS s ON s.rowid = l.IncidentRowId
            WHERE a.SystemAlertId IN (SELECT value FROM json_each(:ids)) AND {demo_sql.CURRENT}
              AND EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid(s.AlertIds) THEN s.AlertIds ELSE '[]' END) AS j
                          WHERE j.value = a.SystemAlertId))
        SELECT *, (SELECT COUNT(*) FROM found) AS TotalMatched FROM found
        ORDER BY AlertId, IncidentNumber LIMIT {MAX_ALERT_IDS * 2}""",
        {"ids": json.dumps(query.alert_ids), "start": iso(now - LOOKBACK), "now": iso(now)})


def decode(row: Row) -> AlertIncident:
    return AlertIncident(as_text(row.get("AlertId")), as_int(row.get("IncidentNumber")), as_text(row.get("Status")),
                         as_text(row.get("Classification")))


SPEC = QuerySpec(
    name=AlertIncidentsQuery.tool,
    params=(Param("alert_ids", _ids, "The alerts' SystemAlertId values.", kind="array", items={"type": "string"},
                  required="the alerts' ids"),),
    make=AlertIncidentsQuery, kql=_kql,
    result=(("AlertId", "string"), ("IncidentNumber", "int"), ("Status", "string"), ("Classification", "string"),
            ("TotalMatched", "long")),
    keys=("AlertId",), decode=decode, demo=_demo, internal=True,
)
