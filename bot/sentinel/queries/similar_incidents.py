"""similar_incidents: the incidents of the last 30 days that share an alert name or an entity with one incident (its
number left out), with their classification and owner, most matches first: what an incident summary calls "similar
incidents" (``bot.investigation.summary``).

Internal: the summary asks it with the incident's own alert names and main entities' values, so every value comes
from alert data (attacker-reachable): at most ``MAX_NAMES`` names and ``MAX_ENTITIES`` entity values, each at most
``MAX_VALUE_CHARS``, each reaching KQL only as one escaped literal (``kql.string_literal``) and the demo's SQL only as
a bound parameter. An entity value matches an alert's entity by its lower-case value (Kusto's ``tolower``)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.sentinel import demo_sql, kql
from bot.sentinel.demo_sql import iso
from bot.sentinel.models import Incident, SimilarIncident
from bot.sentinel.params import InvalidParameter
from bot.sentinel.rows import as_datetime, as_int, as_optional_text, as_text, as_text_tuple, owner_name
from bot.sentinel.spec import DemoWorkspace, Param, QuerySpec, Row

LOOKBACK = timedelta(days=30)
MAX_NAMES = 20
MAX_ENTITIES = 10
MAX_VALUE_CHARS = 256
MAX_SIMILAR = 10
MAX_MATCHES_LISTED = 5  # shared names (entities) listed per incident


@dataclass(frozen=True)
class SimilarIncidentsQuery:
    incident: int
    alert_names: tuple[str, ...]
    entities: tuple[str, ...]  # lower case

    tool = "similar_incidents"

    @property
    def timespan(self) -> timedelta:
        return LOOKBACK

    def parameters(self) -> dict[str, Any]:
        return {"incident": self.incident, "alert_names": list(self.alert_names), "entities": list(self.entities)}


def _number(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).isdigit() \
            or not 0 < int(value) < 10**10:
        raise InvalidParameter("incident", "an incident number, e.g. 42")
    return int(value)


def _texts(name: str, most: int, lower: bool = False) -> Any:
    def parse(value: object) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, (list, tuple)) or len(value) > most:
            raise InvalidParameter(name, f"a list of at most {most} values")
        if not all(isinstance(v, str) and v.strip() and len(v) <= MAX_VALUE_CHARS for v in value):
            raise InvalidParameter(name, f"each value is text of 1 to {MAX_VALUE_CHARS} characters")
        return tuple(dict.fromkeys(v.strip().lower() if lower else v.strip() for v in value))
    return parse


def _make(incident: int, alert_names: tuple[str, ...], entities: tuple[str, ...]) -> SimilarIncidentsQuery:
    if not alert_names and not entities:
        raise InvalidParameter("alert_names", "give alert names or entities to match")
    return SimilarIncidentsQuery(incident, alert_names, entities)


def _array(values: tuple[str, ...]) -> str:
    return f"pack_array({', '.join(kql.string_literal(v) for v in values)})" if values else "dynamic([])"


def _kql(query: SimilarIncidentsQuery) -> str:
    recent = f"SecurityAlert\n    | where TimeGenerated > ago({LOOKBACK.days}d)"
    return f"""// {query.tool}: incidents of the last {LOOKBACK.days} days sharing an alert name or an entity with one
let names = {_array(query.alert_names)};
let keys = {_array(query.entities)};
let by_name = {recent}
    | where AlertName in (names)
    | distinct SystemAlertId, Kind = "name", Match = AlertName;
let by_entity = {kql.expand_entities(recent)}
    | where tolower(EntityValue) in (keys)
    | distinct SystemAlertId, Kind = "entity", Match = strcat(EntityType, ":", EntityValue);
let matched = union by_name, by_entity;
let found = materialize(SecurityIncident
    | where TimeGenerated > ago({LOOKBACK.days}d)
    | summarize arg_max(TimeGenerated, Title, Severity, Status, Owner, Classification, CreatedTime, AdditionalData,
        AlertIds) by IncidentNumber
    | where IncidentNumber != {kql.long_literal(query.incident)}
    | extend OwnerName = {kql.OWNER}, AlertCount = {kql.ALERT_COUNT}
    | mv-expand AlertId = AlertIds to typeof(string)
    | join kind=inner matched on $left.AlertId == $right.SystemAlertId
    | summarize MatchedNames = make_set_if(Match, Kind == "name", {MAX_MATCHES_LISTED}),
        MatchedEntities = make_set_if(Match, Kind == "entity", {MAX_MATCHES_LISTED}), Matches = dcount(Match)
        by IncidentNumber, Title, Severity, Status, OwnerName, Classification, CreatedTime, AlertCount);
found
| sort by Matches desc, CreatedTime desc, IncidentNumber desc
| take {MAX_SIMILAR}
| extend TotalMatched = toscalar(found | count)
| project IncidentNumber, Title, Severity, Status, Owner = OwnerName, Classification, CreatedTime, AlertCount,
    MatchedNames, MatchedEntities, TotalMatched"""


def _demo(query: SimilarIncidentsQuery, conn: sqlite3.Connection, now: datetime,
          workspace: DemoWorkspace) -> list[dict[str, Any]]:
    params = {"names": json.dumps(query.alert_names), "keys": json.dumps(query.entities), "number": query.incident,
              "start": iso(now - LOOKBACK), "now": iso(now)}
    hits = demo_sql.fetch(conn, f"""
        WITH matched AS MATERIALIZED (
            SELECT a.SystemAlertId AS AlertId, 'name' AS Kind, a.AlertName AS Match FROM SecurityAlert AS a
            WHERE a.TimeGenerated > :start AND a.TimeGenerated <= :now
              AND a.AlertName IN (SELECT value FROM json_each(:names))
            UNION
            SELECT a.SystemAlertId, 'entity', e.EntityType || ':' || e.EntityValue
            FROM AlertEntity AS e JOIN SecurityAlert AS a ON a.rowid = e.AlertRowId
            WHERE e.EntityKey IN (SELECT value FROM json_each(:keys))
              AND a.TimeGenerated > :start AND a.TimeGenerated <= :now)
        SELECT l.IncidentNumber, m.Kind, m.Match
        FROM matched AS m
        JOIN IncidentAlert AS i ON i.SystemAlertId = m.AlertId
        JOIN LatestIncident AS l ON l.IncidentNumber = i.IncidentNumber
        JOIN SecurityIncident AS t ON t.rowid = l.IncidentRowId
        WHERE {demo_sql.CURRENT} AND l.IncidentNumber != :number
          AND EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid(t.AlertIds) THEN t.AlertIds ELSE '[]' END) AS j
                      WHERE j.value = m.AlertId)""", params)
    grouped: dict[int, dict[str, set[str]]] = {}
    for hit in hits:
        grouped.setdefault(hit["IncidentNumber"], {"name": set(), "entity": set()})[hit["Kind"]].add(hit["Match"])
    if not grouped:
        return []
    rows = demo_sql.fetch(conn, f"""
        SELECT t.IncidentNumber, t.Title, t.Severity, t.Status, {demo_sql.OWNER} AS Owner, t.Classification,
               t.CreatedTime, {demo_sql.ALERT_COUNT} AS AlertCount
        FROM LatestIncident AS l JOIN SecurityIncident AS t ON t.rowid = l.IncidentRowId
        WHERE {demo_sql.CURRENT} AND l.IncidentNumber IN (SELECT value FROM json_each(:numbers))""",
        params | {"numbers": json.dumps(sorted(grouped))})
    for row in rows:
        found = grouped[row["IncidentNumber"]]
        row["MatchedNames"] = sorted(found["name"])[:MAX_MATCHES_LISTED]
        row["MatchedEntities"] = sorted(found["entity"])[:MAX_MATCHES_LISTED]
        row["Matches"] = len(found["name"]) + len(found["entity"])
    rows.sort(key=lambda r: (r["Matches"], r["CreatedTime"] or "", r["IncidentNumber"]), reverse=True)
    total = len(rows)
    return [{k: v for k, v in row.items() if k != "Matches"} | {"TotalMatched": total} for row in rows[:MAX_SIMILAR]]


def decode(row: Row) -> SimilarIncident:
    incident = Incident(number=as_int(row.get("IncidentNumber")), title=as_text(row.get("Title")),
                        severity=as_text(row.get("Severity")), status=as_text(row.get("Status")),
                        owner=owner_name(row.get("Owner")), created=as_datetime(row.get("CreatedTime")),
                        last_modified=None, alert_count=as_int(row.get("AlertCount")), tactics=(), products=(),
                        url="", classification=as_optional_text(row.get("Classification")))
    entities = {e.lower(): e for e in sorted(as_text_tuple(row.get("MatchedEntities")), reverse=True)}
    return SimilarIncident(incident, tuple(sorted(as_text_tuple(row.get("MatchedNames")))),
                           tuple(sorted(entities.values())))  # one per value whatever its case (WS-1, ws-1)


SPEC = QuerySpec(
    name=SimilarIncidentsQuery.tool,
    params=(Param("incident", _number, "The incident left out.", kind="integer", required="the incident's number"),
            Param("alert_names", _texts("alert_names", MAX_NAMES), kind="array", items={"type": "string"}),
            Param("entities", _texts("entities", MAX_ENTITIES, lower=True), kind="array", items={"type": "string"})),
    make=_make, kql=_kql,
    result=(("IncidentNumber", "int"), ("Title", "string"), ("Severity", "string"), ("Status", "string"),
            ("Owner", "string"), ("Classification", "string"), ("CreatedTime", "datetime"), ("AlertCount", "int"),
            ("MatchedNames", "dynamic"), ("MatchedEntities", "dynamic"), ("TotalMatched", "long")),
    keys=("IncidentNumber",), decode=decode, demo=_demo, internal=True,
)
