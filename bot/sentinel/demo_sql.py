"""SQL the demo workspace's query evaluations share: the stored form of a datetime (``iso``), the latest-row tables
read as KQL's arg_max, the owner and alert-count expressions, the list filters as conditions, the precounted totals'
buckets, and fetching.

This is the data layer's side of the demo: each query's demo SQL stays beside its KQL (``queries/<name>.py``) and
uses these; the database they read (tables, indexes, latest rows, totals) is built by the demo backend
(``bot.demo.store``), which imports this module, never the other way round. Values are bound as parameters
(``:name``); only enum values and ints are written into the text.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.sentinel.params import DETAIL_LOOKBACK, BinSize, Filters, Severity, TimeWindow
from bot.sentinel.spec import MAX_ALERT_ENTITY_LABELS, FilteredQuery


def iso(moment: datetime) -> str:
    """The storage form of a datetime: UTC, microseconds, 'Z' (fixed width, sorts as text)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# The owner a list shows (the KQL's coalesce of assignedTo, email and userPrincipalName) as SQL on a SecurityIncident
# row (the store precomputes "unassigned" from it).
OWNER = (
    "COALESCE(NULLIF(json_extract(Owner, '$.assignedTo'), ''), NULLIF(json_extract(Owner, '$.email'), ''), "
    "NULLIF(json_extract(Owner, '$.userPrincipalName'), ''))"
)
RANK = "CASE {column} WHEN 'High' THEN 0 WHEN 'Medium' THEN 1 WHEN 'Low' THEN 2 ELSE 3 END"
ALERT_COUNT = "COALESCE(json_extract(AdditionalData, '$.alertsCount'), json_array_length(AlertIds))"
# A row of a latest-row table is the latest of its incident (alert) at :now, inside (:start, :now].
CURRENT = "l.TimeGenerated > :start AND l.TimeGenerated <= :now AND (l.NextTime IS NULL OR l.NextTime > :now)"


def latest(name: str, latest: str, row_id: str, columns: str, where: str = "") -> str:
    """CTE ``<name>``: the latest row per key inside the window, as KQL's ``summarize arg_max(TimeGenerated,
    ...) by key``, with only the narrow columns of the latest-row table ``l`` (join the full row by row id
    once the result is cut to its limit)."""
    return f"""{name} AS MATERIALIZED (
        SELECT l.{row_id}, {columns} FROM {latest} AS l WHERE {CURRENT} {where})"""


def alert_text_id(row: str) -> str:
    """SQL: the ``AlertText`` id of a SecurityAlert row's name and description (``row``: its alias)."""
    return (f"(SELECT x.TextId FROM AlertText AS x WHERE x.AlertName IS {row}.AlertName "
            f"AND x.Description IS {row}.Description)")


def with_entity_labels(conn: sqlite3.Connection, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each alert row's "type: value" entity labels (as the KQL's mv-apply makes them), by its AlertRowId."""
    labels: dict[int, list[str]] = {}
    if rows:
        ids = ", ".join(str(int(r["AlertRowId"])) for r in rows)
        for entity in fetch(
            conn,
            f"""SELECT DISTINCT AlertRowId, EntityType || ': ' || EntityValue AS Label FROM AlertEntity
                WHERE AlertRowId IN ({ids}) ORDER BY AlertRowId, Label""",
            {},
        ):
            labels.setdefault(entity["AlertRowId"], []).append(entity["Label"])
    for row in rows:
        row["EntityLabels"] = labels.get(row.pop("AlertRowId"), [])[:MAX_ALERT_ENTITY_LABELS]
    return rows


# Filtered lists (issue 12). The latest row per incident (alert) in the range, then the filters on its full row.
def sort_keys(keys: tuple[tuple[str, bool], ...], severity: str, table: str = "") -> str:
    """A query's sort keys (``queries.INCIDENT_SORT``/``ALERT_SORT``) as SQL on ``table``'s columns."""
    rank = RANK.format(column=f"{table}{severity}")
    return ", ".join(f"{rank if column == 'SeverityRank' else table + column}{' DESC' if descending else ''}"
                     for column, descending in keys)


# An owner's fields as the KQL compares them (``kql._OWNER_FIELDS``), casefolded.
OWNER_FIELDS = tuple(f"casefold(json_extract(t.Owner, '$.{key}'))" for key in
                      ("objectId", "userPrincipalName", "email", "assignedTo")) + (
    "casefold(CASE WHEN instr(json_extract(t.Owner, '$.userPrincipalName'), '@') "
    "THEN substr(json_extract(t.Owner, '$.userPrincipalName'), 1, "
    "instr(json_extract(t.Owner, '$.userPrincipalName'), '@') - 1) "
    "ELSE json_extract(t.Owner, '$.userPrincipalName') END)",)


def date_range(query: FilteredQuery, now: datetime) -> tuple[dict[str, Any], str]:
    """Bind values :start, :end, :now and the comparison with :start ('>' for a window, '>=' from a "from")."""
    f = query.filters
    lookback = iso(now - DETAIL_LOOKBACK)  # where an incident's alerts are looked for (the KQL's involved_alerts)
    if not f.ranged:
        return {"start": iso(now - query.window.duration), "end": None, "now": iso(now), "lookback": lookback}, ">"
    start = f.start or (f.end or now) - query.window.duration
    return {"start": iso(start), "end": iso(f.end) if f.end else None, "now": iso(now), "lookback": lookback}, ">="


def conditions(query: FilteredQuery, params: dict[str, Any]) -> str:
    """SQL for the severity, status, owner, keyword, entity, product, tactic and classification filters (values
    bound in ``params``): on the latest-row table's narrow row ``l`` where it holds the value (severity, status,
    "unassigned", the casefolded texts), else on the full incident row ``t``."""
    f = query.filters
    alerts = query.of_alerts
    parts = [f"l.{'AlertSeverity' if alerts else 'Severity'} IN {bound(params, 'sev', query.severities)}"]
    if f.status:
        parts.append(f"l.Status IN {bound(params, 'status', f.status.statuses)}")
    if f.owner and f.owner.person is None:
        parts.append("l.Unassigned = 1")
    elif f.owner:
        params["owner"] = f.owner.person.casefold()  # type: ignore[union-attr]
        parts.append("(" + " OR ".join(f"{field} = :owner" for field in OWNER_FIELDS) + ")")
    if f.search:  # casefolded once, at load: contains_ci's semantics without a Python call per row
        params["folded"] = f.search.casefold()
        if alerts:  # each distinct text once
            parts.append("l.TextId IN (SELECT TextId FROM AlertText WHERE instr(NameFolded, :folded) > 0 "
                         "OR instr(DescriptionFolded, :folded) > 0)")
        else:
            parts.append("(instr(l.TitleFolded, :folded) > 0 OR instr(l.DescriptionFolded, :folded) > 0)")
    if f.entity:
        parts.append(_entity_condition(alerts, params, f.entity))
    parts += _product_tactic_classification(f, alerts, params)
    return " AND ".join(parts)


# The identities an entity filter's value names (bound as :entity, lower case): its own, and the identity of every
# account or host that carries it as a key (``kql.wanted_identities``).
WANTED_IDENTITIES = "SELECT :entity UNION SELECT IdentityKey FROM IdentityAlias WHERE Key = :entity"


def _entity_condition(alerts: bool, params: dict[str, Any], entity: str) -> str:
    params["entity"] = entity.lower()  # Kusto's tolower()
    involved = f"SELECT AlertRowId FROM AlertIdentity WHERE IdentityKey IN ({WANTED_IDENTITIES})"
    if alerts:
        return f"l.AlertRowId IN ({involved})"
    # An incident with an alert (any of its rows in the lookback: an alert's entities never change). The incidents
    # naming those alerts in any row (IncidentAlert) come first, computed once: only they read their full row.
    alert_ids = f"""SELECT a.SystemAlertId FROM ({involved}) AS e JOIN SecurityAlert AS a ON a.rowid = e.AlertRowId
                WHERE a.TimeGenerated > :lookback AND a.TimeGenerated <= :now"""
    return f"""l.IncidentNumber IN (SELECT IncidentNumber FROM IncidentAlert WHERE SystemAlertId IN ({alert_ids}))
        AND EXISTS (SELECT 1 FROM json_each(t.AlertIds) AS j WHERE j.value IN ({alert_ids}))"""


def _product_tactic_classification(f: Filters, alerts: bool, params: dict[str, Any]) -> list[str]:
    """An incident's product names and tactics are JSON lists in AdditionalData; an alert's (read from its full row
    by ``l.AlertRowId``) are its product (else provider) name and a comma-separated tactics text."""
    parts = []
    alert_row = "EXISTS (SELECT 1 FROM SecurityAlert AS a WHERE a.rowid = l.AlertRowId AND {})"
    if f.product:
        params["product"] = f.product
        parts.append(alert_row.format("contains_ci(COALESCE(NULLIF(a.ProductName, ''), a.ProviderName), :product)")
                     if alerts else "EXISTS (SELECT 1 FROM json_each(t.AdditionalData, '$.alertProductNames') "
                                    "WHERE contains_ci(value, :product))")
    if f.tactic and alerts:  # a whole item of the list, as KQL's `has` matches one word
        params["tactic"] = f",{f.tactic.lower()},"
        parts.append(alert_row.format("instr(',' || replace(lower(a.Tactics), ' ', '') || ',', :tactic) > 0"))
    elif f.tactic:
        params["tactic"] = f.tactic.lower()
        parts.append("EXISTS (SELECT 1 FROM json_each(t.AdditionalData, '$.tactics') WHERE lower(value) = :tactic)")
    if f.classification:
        params["classification"] = f.classification
        parts.append("t.Classification = :classification")
    return parts


def bound(params: dict[str, Any], name: str, values: Any) -> str:
    """``(:name0, :name1)`` with the values bound in ``params``."""
    for i, value in enumerate(values):
        params[f"{name}{i}"] = value.value if isinstance(value, Severity) else value
    return "(" + ", ".join(f":{name}{i}" for i in range(len(values))) + ")"


def uncounted(severities: str) -> str:
    """CTE ``uncounted``: the latest alert rows of the window that the precomputed totals (``AlertHour``,
    ``EntityDay``, buckets after ``:start_bucket``) do not hold: rows that may still change, and settled
    rows in the window's first, partial bucket (before ``:next_bucket``)."""
    columns = "l.AlertRowId, l.AlertSeverity, l.TimeGenerated"
    return f"""uncounted AS MATERIALIZED (
        SELECT {columns} FROM LatestAlert AS l INDEXED BY latest_alert_unsettled
            WHERE l.Settled = 0 AND {CURRENT} AND l.AlertSeverity IN {severities}
        UNION ALL
        SELECT {columns} FROM LatestAlert AS l WHERE l.Settled = 1 AND l.TimeGenerated > :start
            AND l.TimeGenerated < :next_bucket AND l.TimeGenerated <= :now AND l.AlertSeverity IN {severities})"""


def window_bounds(window: TimeWindow, now: datetime, bucket: BinSize | None = None) -> dict[str, Any]:
    """The window's bounds; with ``bucket``, also the first precomputed bucket it holds whole (hour or day)."""
    start = now - window.duration
    params = {"start": iso(start), "now": iso(now)}
    if bucket is not None:
        prefix = 13 if bucket is BinSize.HOUR else 10
        params |= {"start_bucket": iso(start)[:prefix],
                   "next_bucket": iso(floor(start, bucket.duration) + bucket.duration)}
    return params


def severities_in(min_severity: Severity) -> str:
    # Enum values only, never user text.
    return "(" + ", ".join(f"'{s.value}'" for s in min_severity.at_least()) + ")"


def floor(moment: datetime, step: timedelta) -> datetime:
    if step >= timedelta(days=1):
        return moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return moment.replace(minute=0, second=0, microsecond=0)


def fetch(conn: sqlite3.Connection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(row) for row in conn.execute(sql, params).fetchall()]


def json_value(text: Any) -> Any:
    if not isinstance(text, str) or not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def bounded_text(column: str, width: int) -> str:
    """SQL: ``column`` cut as ``kql.bounded_text`` cuts it (the same "…(n more characters)")."""
    return (f"CASE WHEN length({column}) > {width} THEN substr({column}, 1, {width}) || '…(' || "
            f"(length({column}) - {width}) || ' more characters)' ELSE {column} END")


def alert_fields(alias: str, width: int) -> str:
    """SQL: SecurityAlert's own fields (rows.alert_fields) of the row ``alias``, the description cut to ``width``."""
    return (f"{bounded_text(f'{alias}.Description', width)} AS Description, {alias}.StartTime, {alias}.EndTime, "
            f"{alias}.Techniques, {alias}.SubTechniques, {alias}.AlertLink, {alias}.RemediationSteps")
