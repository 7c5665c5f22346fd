"""query_incidents: incidents created in a window (or a from/to range), latest state of each, with the list
filters (severity set, status, owner, keyword, entity, product, tactic, classification) and a sort order."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from bot.sentinel import demo_sql, kql
from bot.sentinel.params import DEFAULT_LIMIT, MAX_LIMIT, Filters, SortOrder, TimeWindow
from bot.sentinel.rows import incident
from bot.sentinel.spec import (
    INCIDENT_SORT,
    SEVERITY_PARAM,
    DemoWorkspace,
    FilteredQuery,
    QuerySpec,
    filter_params,
    limit_param,
    window_param,
)


class IncidentsQuery(FilteredQuery):
    tool = "query_incidents"


def _kql(query: IncidentsQuery) -> str:
    f = query.filters
    since, created = kql.bounds(query, "TimeGenerated", upper=False), kql.bounds(query, "CreatedTime")
    description = " Description," if f.search else ""
    return f"""// query_incidents: incidents created {kql.scope(query)}, latest state of each
{kql.filter_declarations(query)}let matched = materialize(SecurityIncident
    | where {since}
    | where {created}
    | summarize arg_max(TimeGenerated, Title,{description} Severity, Status, Owner, CreatedTime, LastModifiedTime,
        AdditionalData, AlertIds, IncidentUrl, Classification) by IncidentNumber
    | where Severity in {kql.in_list(query.severities)}{kql.filters(query, "Title")});
matched
| extend SeverityRank = {kql.SEVERITY_RANK}, AlertCount = {kql.ALERT_COUNT}
| sort by {kql.order_by(INCIDENT_SORT[f.sort])}
| take {query.limit}
| extend TotalMatched = toscalar(matched | count)
| project IncidentNumber, Title, Severity, Status, Owner = {kql.OWNER},
    CreatedTime, LastModifiedTime, AlertCount,
    Tactics = AdditionalData.tactics, Products = AdditionalData.alertProductNames,
    IncidentUrl, Classification, TotalMatched"""


def _demo(query: IncidentsQuery, conn: sqlite3.Connection, now: datetime,
          workspace: DemoWorkspace) -> list[dict[str, Any]]:
    if query.filters != Filters():
        return _filtered(query, conn, now)
    params = demo_sql.window_bounds(query.window, now) | {"limit": query.limit}
    order = f"{demo_sql.RANK.format(column='m.Severity')}, m.CreatedTime DESC, m.IncidentNumber DESC"
    matched = f"FROM LatestIncident AS l WHERE {demo_sql.CURRENT} AND l.CreatedTime > :start"
    # Each severity's newest from its own index, then the best of those: no sort of the whole window.
    firsts = " UNION ALL ".join(
        f"SELECT * FROM (SELECT l.IncidentRowId, l.IncidentNumber, l.CreatedTime, l.Severity "
        f"{matched.replace('AS l', 'AS l INDEXED BY latest_incident_severity')} "
        f"AND l.Severity = '{severity.value}' ORDER BY l.CreatedTime DESC, l.IncidentNumber DESC LIMIT :limit)"
        for severity in query.min_severity.at_least())
    text = f"""
    WITH top AS MATERIALIZED (SELECT * FROM ({firsts}) AS m ORDER BY {order} LIMIT :limit)
    SELECT t.IncidentNumber, t.Title, t.Severity, t.Status, {demo_sql.OWNER} AS Owner, t.CreatedTime,
           t.LastModifiedTime, {demo_sql.ALERT_COUNT} AS AlertCount,
           json_extract(AdditionalData, '$.tactics') AS Tactics,
           json_extract(AdditionalData, '$.alertProductNames') AS Products, IncidentUrl, Classification,
           (SELECT COUNT(*) {matched} AND l.Severity IN {demo_sql.severities_in(query.min_severity)}) AS TotalMatched
    FROM top AS m JOIN SecurityIncident AS t ON t.rowid = m.IncidentRowId
    ORDER BY {order}"""
    return demo_sql.fetch(conn, text, params)


def _filtered(query: IncidentsQuery, conn: sqlite3.Connection, now: datetime) -> list[dict[str, Any]]:
    """Filtered on the narrow latest rows (joined to their full row only for a filter that needs it); only the
    rows shown read their full row's columns."""
    params, after = demo_sql.date_range(query, now)
    params["limit"] = query.limit
    created = f"l.CreatedTime {after} :start" + (" AND l.CreatedTime < :end" if params["end"] else "")
    sort = INCIDENT_SORT[query.filters.sort]
    where = demo_sql.conditions(query, params)
    most_alerts = any(column == "AlertCount" for column, _ in sort)
    full_row = "JOIN SecurityIncident AS t ON t.rowid = l.IncidentRowId" if "t." in where or most_alerts else ""
    text = f"""
        WITH matched AS MATERIALIZED (
            SELECT l.IncidentRowId, l.IncidentNumber, l.Severity, l.CreatedTime
                   {f", {demo_sql.ALERT_COUNT} AS AlertCount" if most_alerts else ""}
            FROM LatestIncident AS l {full_row}
            WHERE l.TimeGenerated {after} :start AND l.TimeGenerated <= :now
              AND (l.NextTime IS NULL OR l.NextTime > :now) AND {created} AND {where}),
        top AS MATERIALIZED (SELECT * FROM matched ORDER BY {demo_sql.sort_keys(sort, "Severity")} LIMIT :limit)
        SELECT t.IncidentNumber, t.Title, t.Severity, t.Status, {demo_sql.OWNER} AS Owner, t.CreatedTime,
               t.LastModifiedTime, {demo_sql.ALERT_COUNT} AS AlertCount,
               json_extract(AdditionalData, '$.tactics') AS Tactics,
               json_extract(AdditionalData, '$.alertProductNames') AS Products, t.IncidentUrl, t.Classification,
               (SELECT COUNT(*) FROM matched) AS TotalMatched
        FROM top AS m JOIN SecurityIncident AS t ON t.rowid = m.IncidentRowId
        ORDER BY {demo_sql.sort_keys(sort, "Severity", "m.")}"""
    return demo_sql.fetch(conn, text, params)


SPEC = QuerySpec(
    name=IncidentsQuery.tool,
    params=(window_param(TimeWindow.LAST_24H, hint=True), SEVERITY_PARAM,
            limit_param(DEFAULT_LIMIT, MAX_LIMIT), *filter_params("incident", tuple(SortOrder))),
    make=lambda time_window, min_severity, limit, **filters: IncidentsQuery(time_window, min_severity, limit,
                                                                            Filters(**filters)),
    kql=_kql,
    result=(("IncidentNumber", "int"), ("Title", "string"), ("Severity", "string"), ("Status", "string"),
            ("Owner", "string"), ("CreatedTime", "datetime"), ("LastModifiedTime", "datetime"),
            ("AlertCount", "int"), ("Tactics", "dynamic"), ("Products", "dynamic"), ("IncidentUrl", "string"),
            ("Classification", "string"), ("TotalMatched", "long")),
    keys=("IncidentNumber",),
    decode=incident,
    demo=_demo,
)
