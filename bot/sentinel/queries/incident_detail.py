"""get_incident_detail: one incident in depth (by number, or the newest whose title has the words), with its
alerts (each with its description, activity start and end, techniques, link and remediation steps), its entities
and the other incidents a title search also matched."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.sentinel import demo_sql, kql
from bot.sentinel.demo_sql import iso
from bot.sentinel.entities import (
    LINK_FIELDS,
    defined_entities,
    entity_value,
    merge_identities,
    other_identifiers,
    parse_entities,
)
from bot.sentinel.models import AlertSummary, EntityRef, IncidentDetail, IncidentMatch
from bot.sentinel.params import DETAIL_LOOKBACK, IncidentRef, parse_incident_ref
from bot.sentinel.rows import (
    MAX_ALERT_DESCRIPTION_CHARS,
    alert_fields,
    as_datetime,
    as_int,
    as_json,
    as_optional_text,
    as_text,
    incident,
    list_of_dicts,
    tactics,
    type_order,
)
from bot.sentinel.spec import (
    MAX_DESCRIPTION_CHARS,
    MAX_DETAIL_ALERTS,
    MAX_DETAIL_ENTITIES,
    MAX_OTHER_MATCHES,
    DemoWorkspace,
    Param,
    QuerySpec,
    Row,
)


@dataclass(frozen=True)
class IncidentDetailQuery:
    ref: IncidentRef
    tool = "get_incident_detail"

    @property
    def timespan(self) -> timedelta:
        return DETAIL_LOOKBACK

    def parameters(self) -> dict[str, Any]:
        ref = self.ref
        value: Any = ref.number if ref.number is not None else ref.name if ref.name is not None else \
            f"defender:{ref.provider_id}" if ref.provider_id is not None else ref.title_search
        return {"incident_ref": value}


def _kql(query: IncidentDetailQuery) -> str:
    lookback = f"ago({DETAIL_LOOKBACK.days}d)"
    if query.ref.number is not None:
        by_number, by_title = f"\n    | where IncidentNumber == {int(query.ref.number)}", ""
        header = f"incident {int(query.ref.number)}"
    elif query.ref.name is not None or query.ref.provider_id is not None:
        # A portal link's id: constant for the incident's life, so it picks rows before the latest is taken.
        column, value = ("IncidentName", query.ref.name) if query.ref.name is not None \
            else ("ProviderIncidentId", query.ref.provider_id)
        by_number, by_title = f"\n    | where {column} == {kql.string_literal(value or '')}", ""
        header = f"the incident whose {column} is the one asked for"
    else:
        by_number = ""
        by_title = f"\n    | where Title contains {kql.string_literal(query.ref.title_search or '')}"
        header = "the most recent incident whose title contains the search text"
    return f"""// get_incident_detail: {header}, with its alerts and entities
let matches = materialize(SecurityIncident
    | where TimeGenerated > {lookback}{by_number}
    | summarize arg_max(TimeGenerated, IncidentName, Title, Description, Severity, Status, Owner,
        CreatedTime, LastModifiedTime, ClosedTime, FirstActivityTime, LastActivityTime, Classification,
        ClassificationReason, ClassificationComment, AdditionalData, AlertIds, Labels, IncidentUrl)
        by IncidentNumber{by_title});
let best = toscalar(matches | sort by CreatedTime desc, IncidentNumber desc | take 1 | project IncidentNumber);
let incident = matches | where IncidentNumber == best;
let alerts = materialize(incident
    | mv-expand AlertId = AlertIds to typeof(string)
    | join kind=inner (SecurityAlert
        | where TimeGenerated > {lookback}
        | summarize arg_max(TimeGenerated, AlertName, AlertSeverity, Status, ProductName, ProviderName,
            Tactics, Entities, {kql.ALERT_FIELDS}) by SystemAlertId
        ) on $left.AlertId == $right.SystemAlertId);
let alert_list = toscalar(alerts
    | sort by TimeGenerated desc, SystemAlertId asc
    | take {MAX_DETAIL_ALERTS}
    | summarize make_list(bag_pack("id", SystemAlertId, "name", AlertName, "severity", AlertSeverity,
        "status", Status, "product", coalesce(ProductName, ProviderName), "time", TimeGenerated,
        "tactics", Tactics, "description", {kql.bounded_text("Description", MAX_ALERT_DESCRIPTION_CHARS)},
        "start", StartTime, "end", EndTime, "techniques", Techniques, "sub_techniques", SubTechniques,
        "link", AlertLink, "remediation", RemediationSteps)));
let entity_list = toscalar({kql.expand_entities("alerts", "    ")}
    | summarize arg_min(EntityValue, Entity) by EntityType, EntityKey = tolower(EntityValue)
    | sort by EntityType asc, EntityValue asc
    | take {MAX_DETAIL_ENTITIES}
    | summarize make_list(bag_pack("type", EntityType, "value", EntityValue,
        "entity", bag_remove_keys(Entity, dynamic({json.dumps(list(LINK_FIELDS))})))));
let other_matches = toscalar(matches
    | where IncidentNumber != best
    | sort by CreatedTime desc, IncidentNumber desc
    | take {MAX_OTHER_MATCHES}
    | summarize make_list(bag_pack("number", IncidentNumber, "title", Title)));
incident
| project IncidentNumber, IncidentName, Title, Description = substring(Description, 0, {MAX_DESCRIPTION_CHARS}),
    Severity, Status, Owner = {kql.OWNER}, CreatedTime, LastModifiedTime, ClosedTime,
    FirstActivityTime, LastActivityTime, Classification, ClassificationReason, ClassificationComment,
    AlertCount = {kql.ALERT_COUNT}, Tactics = AdditionalData.tactics,
    Products = AdditionalData.alertProductNames, CommentCount = toint(AdditionalData.commentsCount),
    Labels, IncidentUrl, Alerts = alert_list, Entities = entity_list, OtherMatches = other_matches"""


# The keys of an alert in the Alerts list for SecurityAlert's own columns (rows.alert_fields).
_ALERT_KEYS = {"Description": "description", "StartTime": "start", "EndTime": "end", "Techniques": "techniques",
               "SubTechniques": "sub_techniques", "AlertLink": "link", "RemediationSteps": "remediation"}


def decode(row: Row) -> IncidentDetail:
    alerts = [
        AlertSummary(
            alert_id=as_text(a.get("id")),
            name=as_text(a.get("name")),
            severity=as_text(a.get("severity")),
            status=as_text(a.get("status")),
            product=as_text(a.get("product")),
            time=as_datetime(a.get("time")),
            tactics=tactics(a.get("tactics")),
            **alert_fields(a, _ALERT_KEYS),
        )
        for a in list_of_dicts(row.get("Alerts"))
    ]
    alerts.sort(key=lambda a: (-(a.time.timestamp() if a.time else 0), a.alert_id))
    listed = sorted(((as_text(e.get("type")), as_text(e.get("value")),
                      other_identifiers(as_json(e.get("entity")), as_text(e.get("value"))))
                     for e in list_of_dicts(row.get("Entities"))), key=lambda e: (e[0], e[1]))
    # One person or device across spellings (its UPN, SID, DOMAIN\name; a host's FQDN and device ids).
    entities = sorted({EntityRef(*e) for e in merge_identities(listed)},
                      key=lambda e: (type_order(e.type), e.type, e.value))
    matches = [
        IncidentMatch(number=as_int(m.get("number")), title=as_text(m.get("title")))
        for m in list_of_dicts(row.get("OtherMatches"))
    ]
    matches.sort(key=lambda m: -m.number)
    raw_labels = as_json(row.get("Labels"))
    labels = tuple(
        as_text(label.get("labelName")) if isinstance(label, dict) else as_text(label)
        for label in (raw_labels if isinstance(raw_labels, list) else ())
        if label
    )
    return IncidentDetail(
        incident=incident(row),
        incident_id=as_text(row.get("IncidentName")),
        description=as_text(row.get("Description")),
        classification_reason=as_optional_text(row.get("ClassificationReason")),
        classification_comment=as_optional_text(row.get("ClassificationComment")),
        closed=as_datetime(row.get("ClosedTime")),
        first_activity=as_datetime(row.get("FirstActivityTime")),
        last_activity=as_datetime(row.get("LastActivityTime")),
        comment_count=as_int(row.get("CommentCount")),
        labels=labels,
        alerts=tuple(alerts),
        entities=tuple(entities),
        other_matches=tuple(matches),
    )


def _demo(query: IncidentDetailQuery, conn: sqlite3.Connection, now: datetime,
          workspace: DemoWorkspace) -> list[dict[str, Any]]:
    where, params = _ref_condition(query.ref)
    params |= {"start": iso(now - query.timespan), "now": iso(now)}
    matches = _matching_incidents(conn, where, params)
    if not matches:
        return []
    alerts = _incident_alerts(conn, matches[0], params)
    return [_detail(matches[0], alerts, _entities(conn, alerts), matches[1 : 1 + MAX_OTHER_MATCHES])]


def _ref_condition(ref: IncidentRef) -> tuple[str, dict[str, Any]]:
    """The condition on the latest incident rows that picks the referenced incident, and its parameter."""
    if ref.number is not None:
        return "AND l.IncidentNumber = :number", {"number": ref.number}
    if ref.name is not None or ref.provider_id is not None:  # a portal link's id, constant for the incident's life
        column, value = ("IncidentName", ref.name) if ref.name is not None else ("ProviderIncidentId", ref.provider_id)
        return (f"AND l.IncidentNumber IN (SELECT IncidentNumber FROM SecurityIncident WHERE {column} = :id)",
                {"id": value})
    # the latest title contains the words, case-insensitively (Kusto's `contains`)
    return "AND instr(l.TitleFolded, :search) > 0", {"search": (ref.title_search or "").casefold()}


def _matching_incidents(conn: sqlite3.Connection, where: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The incidents matching (latest rows), newest first: the one shown and the other matches."""
    return demo_sql.fetch(
        conn,
        f"""WITH {demo_sql.latest("found", "LatestIncident", "IncidentRowId", "l.IncidentNumber, l.CreatedTime", where)}
            SELECT t.* FROM found AS f JOIN SecurityIncident AS t ON t.rowid = f.IncidentRowId
            ORDER BY f.CreatedTime DESC, f.IncidentNumber DESC LIMIT {1 + MAX_OTHER_MATCHES}""",
        params,
    )


def _incident_alerts(conn: sqlite3.Connection, incident: dict[str, Any],
                     params: dict[str, Any]) -> list[dict[str, Any]]:
    """The incident's alerts (latest rows), newest first (by id among equal times)."""
    alerts = demo_sql.fetch(
        conn,
        f"""WITH {demo_sql.latest("found", "LatestAlert", "AlertRowId", "l.SystemAlertId",
                          "AND l.SystemAlertId IN (SELECT value FROM json_each(:alert_ids))")}
            SELECT f.AlertRowId, a.SystemAlertId, a.AlertName, a.AlertSeverity, a.Status,
                   COALESCE(NULLIF(a.ProductName, ''), a.ProviderName) AS Product, a.TimeGenerated, a.Tactics,
                   {demo_sql.alert_fields("a", MAX_ALERT_DESCRIPTION_CHARS)}
            FROM found AS f JOIN SecurityAlert AS a ON a.rowid = f.AlertRowId""",
        params | {"alert_ids": incident["AlertIds"] or "[]"},
    )
    alerts.sort(key=lambda a: a["SystemAlertId"])
    alerts.sort(key=lambda a: a["TimeGenerated"], reverse=True)
    return alerts


def _entities(conn: sqlite3.Connection, alerts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The distinct entities of these alerts, one per type and lower-case value (case variants of a host are one
    host), shown by its least spelling as the KQL, with the entity object of that spelling (its identifiers)."""
    rows = ", ".join(str(int(a["AlertRowId"])) for a in alerts) or "NULL"
    objects: dict[tuple[str, str], dict[str, Any]] = {}
    for (raw,) in conn.execute(f"SELECT Entities FROM SecurityAlert WHERE rowid IN ({rows}) ORDER BY rowid"):
        for item in defined_entities(parse_entities(raw)[0]):
            value = entity_value(item)
            if value:
                objects.setdefault((str(item["Type"]), value), item)
    found = _entity_values(conn, rows)
    for entity in found:
        entity["Entity"] = {k: v for k, v in objects.get((entity["EntityType"], entity["EntityValue"]), {}).items()
                            if k not in LINK_FIELDS}
    return found


def _entity_values(conn: sqlite3.Connection, rows: str) -> list[dict[str, Any]]:
    return demo_sql.fetch(
        conn,
        f"""SELECT EntityType, MIN(EntityValue) AS EntityValue FROM AlertEntity
            WHERE AlertRowId IN ({rows})
            GROUP BY EntityType, EntityKey
            ORDER BY EntityType, EntityValue LIMIT {MAX_DETAIL_ENTITIES}""",
        {},
    )


def _detail(incident: dict[str, Any], alerts: list[dict[str, Any]], entities: list[dict[str, Any]],
            others: list[dict[str, Any]]) -> dict[str, Any]:
    """The result row: the incident's latest row, with its alerts, entities and the other matching incidents."""
    additional = demo_sql.json_value(incident["AdditionalData"]) or {}
    return {
        "IncidentNumber": incident["IncidentNumber"],
        "IncidentName": incident["IncidentName"],
        "Title": incident["Title"],
        "Description": (incident["Description"] or "")[:MAX_DESCRIPTION_CHARS],
        "Severity": incident["Severity"],
        "Status": incident["Status"],
        "Owner": _owner_name(incident["Owner"]),
        **{k: incident[k] for k in ("CreatedTime", "LastModifiedTime", "ClosedTime", "FirstActivityTime",
                                    "LastActivityTime", "Classification", "ClassificationReason",
                                    "ClassificationComment", "Labels", "IncidentUrl")},
        "AlertCount": additional.get("alertsCount", len(demo_sql.json_value(incident["AlertIds"]) or [])),
        "Tactics": additional.get("tactics"),
        "Products": additional.get("alertProductNames"),
        "CommentCount": additional.get("commentsCount"),
        "Alerts": [_alert_summary(a) for a in alerts[:MAX_DETAIL_ALERTS]],
        "Entities": [{"type": e["EntityType"], "value": e["EntityValue"], "entity": e["Entity"]} for e in entities],
        "OtherMatches": [{"number": m["IncidentNumber"], "title": m["Title"]} for m in others],
    }


def _owner_name(owner_json: Any) -> Any:
    """The owner as the KQL names it: assigned name, else email, else UPN (None when unassigned)."""
    owner = demo_sql.json_value(owner_json) or {}
    return next((owner[k] for k in ("assignedTo", "email", "userPrincipalName") if owner.get(k)), None)


def _alert_summary(alert: dict[str, Any]) -> dict[str, Any]:
    return {"id": alert["SystemAlertId"], "name": alert["AlertName"], "severity": alert["AlertSeverity"],
            "status": alert["Status"], "product": alert["Product"], "time": alert["TimeGenerated"],
            "tactics": alert["Tactics"], **{key: alert[column] for column, key in _ALERT_KEYS.items()}}


SPEC = QuerySpec(
    name=IncidentDetailQuery.tool,
    params=(Param("incident_ref", parse_incident_ref, "Number, [2], that incident or title words.",
                  required="an incident number (e.g. 42) or words from its title", field="ref"),),
    make=IncidentDetailQuery,
    kql=_kql,
    result=(("IncidentNumber", "int"), ("IncidentName", "string"), ("Title", "string"), ("Description", "string"),
            ("Severity", "string"), ("Status", "string"), ("Owner", "string"), ("CreatedTime", "datetime"),
            ("LastModifiedTime", "datetime"), ("ClosedTime", "datetime"), ("FirstActivityTime", "datetime"),
            ("LastActivityTime", "datetime"), ("Classification", "string"), ("ClassificationReason", "string"),
            ("ClassificationComment", "string"), ("AlertCount", "int"), ("Tactics", "dynamic"),
            ("Products", "dynamic"), ("CommentCount", "int"), ("Labels", "dynamic"), ("IncidentUrl", "string"),
            ("Alerts", "dynamic"), ("Entities", "dynamic"), ("OtherMatches", "dynamic")),
    keys=("IncidentNumber",),
    decode=decode,
    demo=_demo,
)
