"""incident_changes: the incidents with a SecurityIncident row ingested after a cursor, latest state of each.

Run by the bot itself (a poller asks once per interval for every watch), never offered to the model. All
severities and statuses; ascending by the latest row's TimeGenerated and capped, so a poller that moves its
cursor to the last row shown gets the rest next time (an incident's latest row is later than every row of
the incidents before it). Each row carries what a watch filters on beyond the incident list's columns: the
description and each of the owner's fields.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.sentinel import demo_sql, kql
from bot.sentinel.demo_sql import iso
from bot.sentinel.models import ChangedIncident
from bot.sentinel.params import DETAIL_LOOKBACK, parse_limit, parse_since
from bot.sentinel.rows import SkippedRow, as_datetime, as_optional_text, as_text, incident
from bot.sentinel.spec import MAX_DESCRIPTION_CHARS, DemoWorkspace, Param, QuerySpec, Row

MAX_CHANGES = 500  # incidents per poll: a poller moves its cursor to the last one and asks again


@dataclass(frozen=True)
class IncidentChangesQuery:
    since: datetime  # aware, UTC
    limit: int = MAX_CHANGES

    tool = "incident_changes"

    @property
    def timespan(self) -> timedelta:
        return DETAIL_LOOKBACK  # "now" is the backend's: the longest lookback covers any cursor the bot keeps

    def parameters(self) -> dict[str, Any]:
        return {"since": self.since.isoformat().replace("+00:00", "Z")}


def _kql(query: IncidentChangesQuery) -> str:
    return f"""// incident_changes: incidents with a row ingested after the cursor, latest state of each
let changed = materialize(SecurityIncident
    | where TimeGenerated > {kql.moment(query.since)}
    | summarize arg_max(TimeGenerated, Title, Description, Severity, Status, Owner, CreatedTime, LastModifiedTime,
        AdditionalData, AlertIds, IncidentUrl, Classification) by IncidentNumber);
changed
| sort by TimeGenerated asc, IncidentNumber asc
| take {query.limit}
| extend TotalMatched = toscalar(changed | count)
| project IncidentNumber, Title, Severity, Status, Owner = {kql.OWNER},
    CreatedTime, LastModifiedTime, AlertCount = {kql.ALERT_COUNT},
    Tactics = AdditionalData.tactics, Products = AdditionalData.alertProductNames,
    IncidentUrl, Classification, TimeGenerated,
    Description = substring(Description, 0, {MAX_DESCRIPTION_CHARS}),
    OwnerObjectId = tostring(Owner.objectId), OwnerUPN = tostring(Owner.userPrincipalName),
    OwnerEmail = tostring(Owner.email), OwnerAssignedTo = tostring(Owner.assignedTo), TotalMatched"""


def decode(row: Row) -> ChangedIncident:
    stamp = as_datetime(row.get("TimeGenerated"))
    if stamp is None:  # without it a poller cannot move its cursor past this row
        raise SkippedRow("an incident change without its TimeGenerated")
    return ChangedIncident(incident(row), stamp, description=as_text(row.get("Description")),
                           owner_object_id=as_optional_text(row.get("OwnerObjectId")),
                           owner_upn=as_optional_text(row.get("OwnerUPN")),
                           owner_email=as_optional_text(row.get("OwnerEmail")),
                           owner_assigned_to=as_optional_text(row.get("OwnerAssignedTo")))


def _demo(query: IncidentChangesQuery, conn: sqlite3.Connection, now: datetime,
          workspace: DemoWorkspace) -> list[dict[str, Any]]:
    # The latest row at now of each incident, when it is later than the cursor: KQL's arg_max over (since, now].
    text = f"""
        WITH changed AS MATERIALIZED (
            SELECT l.IncidentRowId, l.IncidentNumber, l.TimeGenerated FROM LatestIncident AS l
            WHERE l.TimeGenerated > :since AND l.TimeGenerated <= :now AND (l.NextTime IS NULL OR l.NextTime > :now)),
        top AS MATERIALIZED (SELECT * FROM changed ORDER BY TimeGenerated, IncidentNumber LIMIT :limit)
        SELECT t.IncidentNumber, t.Title, t.Severity, t.Status, {demo_sql.OWNER} AS Owner, t.CreatedTime,
               t.LastModifiedTime, {demo_sql.ALERT_COUNT} AS AlertCount,
               json_extract(AdditionalData, '$.tactics') AS Tactics,
               json_extract(AdditionalData, '$.alertProductNames') AS Products, IncidentUrl, Classification,
               t.TimeGenerated, substr(t.Description, 1, {MAX_DESCRIPTION_CHARS}) AS Description,
               json_extract(t.Owner, '$.objectId') AS OwnerObjectId,
               json_extract(t.Owner, '$.userPrincipalName') AS OwnerUPN, json_extract(t.Owner, '$.email') AS OwnerEmail,
               json_extract(t.Owner, '$.assignedTo') AS OwnerAssignedTo, (SELECT COUNT(*) FROM changed) AS TotalMatched
        FROM top AS m JOIN SecurityIncident AS t ON t.rowid = m.IncidentRowId
        ORDER BY m.TimeGenerated, m.IncidentNumber"""
    return demo_sql.fetch(conn, text, {"since": iso(query.since), "now": iso(now), "limit": query.limit})


SPEC = QuerySpec(
    name=IncidentChangesQuery.tool,
    params=(
        Param("since", parse_since, required="the time after which changes are wanted (ISO 8601)"),
        Param("limit", lambda v: parse_limit(v, MAX_CHANGES, MAX_CHANGES), kind="integer", minimum=1,
              maximum=MAX_CHANGES),
    ),
    make=IncidentChangesQuery,
    kql=_kql,
    result=(("IncidentNumber", "int"), ("Title", "string"), ("Severity", "string"), ("Status", "string"),
            ("Owner", "string"), ("CreatedTime", "datetime"), ("LastModifiedTime", "datetime"),
            ("AlertCount", "int"), ("Tactics", "dynamic"), ("Products", "dynamic"), ("IncidentUrl", "string"),
            ("Classification", "string"), ("TimeGenerated", "datetime"), ("Description", "string"),
            ("OwnerObjectId", "string"), ("OwnerUPN", "string"), ("OwnerEmail", "string"),
            ("OwnerAssignedTo", "string"), ("TotalMatched", "long")),
    keys=("IncidentNumber",),
    decode=decode,
    demo=_demo,
    internal=True,
)
