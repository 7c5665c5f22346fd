"""query_alerts: alerts in a window (or a from/to range), latest state of each, with their product, entities
and own fields (description, activity start and end, techniques, link, remediation), including alerts in no
incident; the list filters (severity set, status, keyword, entity, product, tactic) and a
sort order."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from bot.sentinel import demo_sql, kql
from bot.sentinel.models import AlertSummary
from bot.sentinel.params import DEFAULT_LIMIT, MAX_LIMIT, BinSize, Filters, InvalidParameter, SortOrder, TimeWindow
from bot.sentinel.rows import (
    MAX_ALERT_DESCRIPTION_CHARS,
    MAX_ENTITIES_PER_ALERT_SHOWN,
    alert_fields,
    as_datetime,
    as_text,
    as_text_tuple,
    tactics,
    type_order,
)
from bot.sentinel.spec import (
    ALERT_FIELD_COLUMNS,
    ALERT_SORT,
    MAX_ALERT_ENTITY_LABELS,
    SEVERITY_PARAM,
    DemoWorkspace,
    FilteredQuery,
    QuerySpec,
    Row,
    filter_params,
    limit_param,
    window_param,
)


class AlertsQuery(FilteredQuery):
    tool = "query_alerts"
    of_alerts = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.filters.owner is not None:
            raise InvalidParameter("owner", "alerts have no owner; ask for incidents by owner")
        if self.filters.classification is not None:
            raise InvalidParameter("classification", "alerts have no classification; ask for incidents by it")


def _kql(query: AlertsQuery) -> str:
    f = query.filters
    return f"""// query_alerts: alerts {kql.scope(query)}, latest state of each
{kql.filter_declarations(query)}let matched = materialize(SecurityAlert
    | where {kql.bounds(query, "TimeGenerated")}
    | summarize arg_max(TimeGenerated, AlertName, AlertSeverity, Status, ProductName, ProviderName,
        Tactics, Entities, {kql.ALERT_FIELDS}) by SystemAlertId
    | where AlertSeverity in {kql.in_list(query.severities)}{kql.filters(query, "AlertName")});
matched
| extend SeverityRank = {kql.SEVERITY_RANK.replace("Severity", "AlertSeverity")}
| sort by {kql.order_by(ALERT_SORT[f.sort])}
| take {query.limit}
| extend TotalMatched = toscalar(matched | count)
| mv-apply Top = parse_json(Entities) on (
    mv-expand Entity = {kql.nested_entities()}
    | extend EntityType = tostring(Entity.Type)
    | where isnotempty(EntityType)
    | extend EntityValue = {kql.entity_value_expression()}
    | where isnotempty(EntityValue)
    | summarize EntityLabels = make_set(strcat(EntityType, ": ", EntityValue), {MAX_ALERT_ENTITY_LABELS})
    )
| project SystemAlertId, AlertName, AlertSeverity, Status, ProductName = coalesce(ProductName, ProviderName),
    TimeGenerated, Tactics, EntityLabels, TotalMatched,
    Description = {kql.bounded_text("Description", MAX_ALERT_DESCRIPTION_CHARS)}, StartTime, EndTime, Techniques,
    SubTechniques, AlertLink, RemediationSteps"""


def decode(row: Row) -> AlertSummary:
    labels = as_text_tuple(row.get("EntityLabels"))
    ordered = sorted(labels, key=lambda label: (type_order(label.split(":", 1)[0]), label))
    return AlertSummary(
        alert_id=as_text(row.get("SystemAlertId")),
        name=as_text(row.get("AlertName")),
        severity=as_text(row.get("AlertSeverity")),
        status=as_text(row.get("Status")),
        product=as_text(row.get("ProductName")),
        time=as_datetime(row.get("TimeGenerated")),
        tactics=tactics(row.get("Tactics")),
        entities=tuple(ordered[:MAX_ENTITIES_PER_ALERT_SHOWN]),
        entity_count=len(labels),
        **alert_fields(row),
    )


def _demo(query: AlertsQuery, conn: sqlite3.Connection, now: datetime,
          workspace: DemoWorkspace) -> list[dict[str, Any]]:
    if query.filters != Filters():
        return demo_sql.with_entity_labels(conn, _filtered(query, conn, now))
    params = demo_sql.window_bounds(query.window, now, BinSize.HOUR) | {"limit": query.limit}
    order = f"{demo_sql.RANK.format(column='m.AlertSeverity')}, m.TimeGenerated DESC, m.SystemAlertId"
    firsts = " UNION ALL ".join(
        f"SELECT * FROM (SELECT l.AlertRowId, l.SystemAlertId, l.AlertSeverity, l.TimeGenerated "
        f"FROM LatestAlert AS l INDEXED BY latest_alert_severity WHERE {demo_sql.CURRENT} "
        f"AND l.AlertSeverity = '{severity.value}' "
        f"ORDER BY l.TimeGenerated DESC, l.SystemAlertId LIMIT :limit)"
        for severity in query.min_severity.at_least())
    severities = demo_sql.severities_in(query.min_severity)
    rows = demo_sql.fetch(
        conn,
        f"""WITH {demo_sql.uncounted(severities)},
            top AS MATERIALIZED (SELECT * FROM ({firsts}) AS m ORDER BY {order} LIMIT :limit)
            SELECT m.AlertRowId, a.SystemAlertId, a.AlertName, a.AlertSeverity, a.Status,
                   COALESCE(NULLIF(a.ProductName, ''), a.ProviderName) AS ProductName, a.TimeGenerated, a.Tactics,
                   {demo_sql.alert_fields("a", MAX_ALERT_DESCRIPTION_CHARS)},
                   (SELECT COUNT(*) FROM uncounted) + (SELECT COALESCE(SUM(Alerts), 0) FROM AlertHour
                    WHERE Hour > :start_bucket AND AlertSeverity IN {severities}) AS TotalMatched
            FROM top AS m JOIN SecurityAlert AS a ON a.rowid = m.AlertRowId
            ORDER BY {order}""",
        params,
    )
    return demo_sql.with_entity_labels(conn, rows)


def _filtered(query: AlertsQuery, conn: sqlite3.Connection, now: datetime) -> list[dict[str, Any]]:
    """Filtered on the narrow latest rows; only the rows shown are joined to their full SecurityAlert row."""
    params, after = demo_sql.date_range(query, now)
    params["limit"] = query.limit
    columns = "AlertRowId, SystemAlertId, TimeGenerated, AlertSeverity, Status, TextId"
    if params["end"] is None:  # ending now: the latest-row table knows each alert's latest row
        current = demo_sql.CURRENT.replace("> :start", after + " :start")
        latest = f"SELECT {columns} FROM LatestAlert AS l WHERE {current}"
    else:  # ending earlier: the latest row before the end may have been superseded since, so read every row
        folded = f"{demo_sql.alert_text_id('s')} AS TextId" if query.filters.search else "NULL AS TextId"
        # A row of the window with no later row of its alert before the end (index alert_id finds that at once):
        # four times faster at 100x the demo's volume than numbering every row of the window per alert.
        latest = f"""SELECT s.rowid AS AlertRowId, s.SystemAlertId, s.TimeGenerated, s.AlertSeverity, s.Status, {folded}
                FROM SecurityAlert AS s
                WHERE s.TimeGenerated {after} :start AND s.TimeGenerated < :end AND s.TimeGenerated <= :now
                  AND NOT EXISTS (SELECT 1 FROM SecurityAlert AS n WHERE n.SystemAlertId = s.SystemAlertId
                      AND n.TimeGenerated < :end AND n.TimeGenerated <= :now AND (n.TimeGenerated > s.TimeGenerated
                      OR (n.TimeGenerated = s.TimeGenerated AND n.rowid > s.rowid)))"""
    order = demo_sql.sort_keys(ALERT_SORT[query.filters.sort], "AlertSeverity")
    text = f"""
        WITH matched AS MATERIALIZED (
            SELECT l.AlertRowId, l.SystemAlertId, l.TimeGenerated, l.AlertSeverity FROM ({latest}) AS l
            WHERE {demo_sql.conditions(query, params)}),
        top AS MATERIALIZED (SELECT * FROM matched ORDER BY {order} LIMIT :limit)
        SELECT m.AlertRowId, t.SystemAlertId, t.AlertName, t.AlertSeverity, t.Status,
               COALESCE(NULLIF(t.ProductName, ''), t.ProviderName) AS ProductName, t.TimeGenerated, t.Tactics,
               {demo_sql.alert_fields("t", MAX_ALERT_DESCRIPTION_CHARS)}, (SELECT COUNT(*) FROM matched) AS TotalMatched
        FROM top AS m JOIN SecurityAlert AS t ON t.rowid = m.AlertRowId
        ORDER BY {demo_sql.sort_keys(ALERT_SORT[query.filters.sort], "AlertSeverity", "m.")}"""
    return demo_sql.fetch(conn, text, params)


SPEC = QuerySpec(
    name=AlertsQuery.tool,
    params=(window_param(TimeWindow.LAST_24H), SEVERITY_PARAM, limit_param(DEFAULT_LIMIT, MAX_LIMIT),
            *filter_params("alert", (SortOrder.SEVERITY, SortOrder.NEWEST))),
    make=lambda time_window, min_severity, limit, **filters: AlertsQuery(time_window, min_severity, limit,
                                                                         Filters(**filters)),
    kql=_kql,
    result=(("SystemAlertId", "string"), ("AlertName", "string"), ("AlertSeverity", "string"), ("Status", "string"),
            ("ProductName", "string"), ("TimeGenerated", "datetime"), ("Tactics", "string"),
            ("EntityLabels", "dynamic"), ("TotalMatched", "long"), *ALERT_FIELD_COLUMNS),
    keys=("SystemAlertId",),
    decode=decode,
    demo=_demo,
)
