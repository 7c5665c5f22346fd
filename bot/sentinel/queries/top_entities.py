"""get_top_entities: the entities (accounts, hosts, IPs, ...) in the most alerts of a window, or one entity's
counts and first/last sighting. One entity per identity: an account or host by every spelling its entity objects
tie together (a UPN, DOMAIN\\name, SID or object id; a host name, FQDN or device id: ``entities.IdentityMap``),
shown by its identity's least spelling; any other type by its lower-case value ("WS1" and "ws1" are one host)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.sentinel import demo_sql, kql
from bot.sentinel.models import EntityCount
from bot.sentinel.params import DEFAULT_ENTITY_LIMIT, MAX_ENTITY_LIMIT, BinSize, TimeWindow
from bot.sentinel.rows import as_datetime, as_int, as_text
from bot.sentinel.spec import (
    ENTITY_PARAM,
    SEVERITY_PARAM,
    DemoWorkspace,
    ListQuery,
    QuerySpec,
    Row,
    limit_param,
    window_param,
)


@dataclass(frozen=True)
class TopEntitiesQuery(ListQuery):
    entity: str | None = None  # only this entity (its value, any letter case): its counts and first/last seen

    tool = "get_top_entities"

    def parameters(self) -> dict[str, Any]:
        return super().parameters() | ({"entity": self.entity} if self.entity else {})


def _kql(query: TopEntitiesQuery) -> str:
    # One entity per identity: an account or host by any spelling its entity objects tie together
    # (``kql.identity_tables``), any other type by its lower-case value ("WS1" and "ws1" are one host).
    wanted = "\n    | where set_has_element(wanted_identities, IdentityKey)" if query.entity is not None else ""
    lets = kql.identity_tables() + (kql.wanted_identities() if query.entity is not None else "")
    resolve = kql.resolve_identities(f"""sightings
    | where TimeGenerated > {kql.ago(query.window)}
    | where AlertSeverity in {kql.severity_list(query.min_severity)}""")
    return f"""// get_top_entities: entities seen in the most alerts over the {query.window.label}
{kql.declarations(entity=query.entity)}{lets}let entities = materialize({resolve}{wanted}
    | summarize EntityValue = min(IdentityValue) by SystemAlertId, AlertSeverity, TimeGenerated, EntityType, IdentityKey
    | summarize AlertCount = count(), HighSeverityCount = countif(AlertSeverity == "High"),
        FirstSeen = min(TimeGenerated), LastSeen = max(TimeGenerated), EntityValue = min(EntityValue)
        by EntityType, EntityKey = IdentityKey);
entities
| sort by AlertCount desc, HighSeverityCount desc, LastSeen desc, EntityType asc, EntityValue asc
| take {query.limit}
| extend TotalMatched = toscalar(entities | count)
| project EntityType, EntityValue, AlertCount, HighSeverityCount, FirstSeen, LastSeen, TotalMatched"""


def decode(row: Row) -> EntityCount:
    return EntityCount(
        type=as_text(row.get("EntityType")),
        value=as_text(row.get("EntityValue")),
        alert_count=as_int(row.get("AlertCount")),
        high_severity_count=as_int(row.get("HighSeverityCount")),
        last_seen=as_datetime(row.get("LastSeen")),
        first_seen=as_datetime(row.get("FirstSeen")),
    )


def _demo(query: TopEntitiesQuery, conn: sqlite3.Connection, now: datetime,
          workspace: DemoWorkspace) -> list[dict[str, Any]]:
    params = demo_sql.window_bounds(query.window, now, BinSize.DAY) | {"limit": query.limit,
                                                                  "entity": (query.entity or "").lower()}
    severities = demo_sql.severities_in(query.min_severity)
    # One entity, or all: an EntityId is one identity (``Entity.EntityKey``: an account's or host's identity key,
    # else the lower-case value), and the wanted ones are the value's own and those it is a key of.
    identities = f"({demo_sql.WANTED_IDENTITIES})"
    wanted = f"AND n.EntityKey IN {identities}" if query.entity is not None else ""
    of_wanted = (f"AND EntityId IN (SELECT EntityId FROM Entity WHERE EntityKey IN {identities})"
                 if query.entity is not None else "")
    return demo_sql.fetch(
        conn,
        f"""WITH {demo_sql.uncounted(severities)},
            live AS MATERIALIZED (  -- AlertIdentity is already distinct per alert row
                SELECT n.EntityId, COUNT(*) AS Alerts, SUM(u.AlertSeverity = 'High') AS High,
                       MAX(u.TimeGenerated) AS LastSeen, MIN(u.TimeGenerated) AS FirstSeen,
                       MIN(e.IdentityValue) AS Shown
                FROM uncounted AS u JOIN AlertIdentity AS e ON e.AlertRowId = u.AlertRowId
                JOIN Entity AS n ON n.EntityType = e.EntityType AND n.EntityKey = e.IdentityKey {wanted}
                GROUP BY 1),
            settled AS MATERIALIZED (
                SELECT EntityId, SUM(Alerts) AS Alerts,
                       COALESCE(SUM(CASE AlertSeverity WHEN 'High' THEN Alerts END), 0) AS High,
                       MAX(LastSeen) AS LastSeen, MIN(FirstSeen) AS FirstSeen, MIN(Shown) AS Shown
                FROM EntityDay WHERE Day > :start_bucket AND AlertSeverity IN {severities} {of_wanted}
                GROUP BY EntityId),
            counted AS MATERIALIZED (
                SELECT s.EntityId, s.Alerts + COALESCE(l.Alerts, 0) AS AlertCount,
                       s.High + COALESCE(l.High, 0) AS High,
                       max(s.LastSeen, COALESCE(l.LastSeen, '')) AS LastSeen,
                       min(s.FirstSeen, COALESCE(l.FirstSeen, s.FirstSeen)) AS FirstSeen,
                       min(s.Shown, COALESCE(l.Shown, s.Shown)) AS Shown
                FROM settled AS s LEFT JOIN live AS l ON l.EntityId = s.EntityId
                UNION ALL
                SELECT * FROM live WHERE EntityId NOT IN (SELECT EntityId FROM settled)),
            -- The limit-th entity's counts: only entities at or above them need a name (type and value
            -- break the remaining ties), so thousands of one-off entities are never joined or sorted by text.
            cutoff AS (SELECT AlertCount, High, LastSeen FROM counted
                       ORDER BY AlertCount DESC, High DESC, LastSeen DESC LIMIT 1 OFFSET :limit - 1)
            -- Shown by its least spelling among this window's alerts, as the KQL's min(EntityValue).
            SELECT n.EntityType, c.Shown AS EntityValue, c.AlertCount, c.High AS HighSeverityCount, c.FirstSeen,
                   c.LastSeen,
                   (SELECT COUNT(*) FROM counted) AS TotalMatched
            FROM counted AS c JOIN Entity AS n ON n.EntityId = c.EntityId
            WHERE NOT EXISTS (SELECT 1 FROM cutoff)
               OR (c.AlertCount, c.High, c.LastSeen) >= (SELECT AlertCount, High, LastSeen FROM cutoff)
            ORDER BY c.AlertCount DESC, c.High DESC, c.LastSeen DESC, n.EntityType, c.Shown
            LIMIT :limit""",
        params,
    )


SPEC = QuerySpec(
    name=TopEntitiesQuery.tool,
    params=(window_param(TimeWindow.LAST_7D), SEVERITY_PARAM,
            limit_param(DEFAULT_ENTITY_LIMIT, MAX_ENTITY_LIMIT), ENTITY_PARAM),
    make=lambda time_window, min_severity, limit, entity: TopEntitiesQuery(time_window, min_severity, limit, entity),
    kql=_kql,
    result=(("EntityType", "string"), ("EntityValue", "string"), ("AlertCount", "long"),
            ("HighSeverityCount", "long"), ("FirstSeen", "datetime"), ("LastSeen", "datetime"),
            ("TotalMatched", "long")),
    keys=("EntityValue",),
    decode=decode,
    demo=_demo,
)
