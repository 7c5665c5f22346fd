"""evidence_threat_intel: threat-intelligence indicators whose observable is the entity (ThreatIntelIndicators, the
latest row of each indicator over the last 30 days, deleted ones left out), most confident first, with whether each
is valid now (active, not revoked, inside its validity)."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from typing import Any

from bot.sentinel import demo_sql, kql
from bot.sentinel.evidence import Indicator
from bot.sentinel.queries.evidence.common import (
    MAX_EVIDENCE_ROWS,
    EvidenceQuery,
    declaration,
    demo_params,
    make,
    matches_sql,
    params,
)
from bot.sentinel.queries.evidence.entity import EntityKind
from bot.sentinel.queries.evidence.rows import as_bool
from bot.sentinel.rows import as_datetime, as_int, as_text
from bot.sentinel.spec import DemoWorkspace, QuerySpec, Row

_ORDER = (("Confidence", True), ("ValidUntil", True), ("Id", False))


class ThreatIntelQuery(EvidenceQuery):
    tool = "evidence_threat_intel"
    title = "Threat intelligence"
    kinds = frozenset(EntityKind)
    lookback = timedelta(days=30)


def _kql(query: ThreatIntelQuery) -> str:
    return indicators_kql(f"// {query.tool}: threat-intelligence indicators of the {query.entity.kind.value}\n"
                          f"{declaration(query)}", "entity_spellings", query.ago)


def indicators_kql(head: str, values: str, ago: str) -> str:
    """The latest row of each indicator whose observable is one of the values the KQL ``values`` holds (declared in
    ``head``), most confident first, with whether it is valid now (shared with ``evidence_counterparty_intel``)."""
    return f"""{head}let indicators = materialize(ThreatIntelIndicators
    | where TimeGenerated > {ago}
    | where ObservableValue in~ ({values})
    | summarize arg_max(TimeGenerated, ObservableKey, ObservableValue, Confidence, ValidFrom, ValidUntil, IsActive,
        Revoked, IsDeleted, Tags) by Id
    | where not(coalesce(IsDeleted, false))
    // Valid now: active, not revoked, inside its validity (by the service's clock); an absent flag is false.
    | extend Valid = coalesce(IsActive, false) and not(coalesce(Revoked, false))
        and (isnull(ValidFrom) or ValidFrom <= now()) and (isnull(ValidUntil) or ValidUntil > now()));
indicators
| sort by {kql.order_by(_ORDER)}
| take {MAX_EVIDENCE_ROWS}
| extend TotalMatched = toscalar(indicators | count)
| project Id, ObservableKey, ObservableValue, Confidence, ValidFrom, ValidUntil, Valid, Tags, TotalMatched"""


def _demo(query: ThreatIntelQuery, conn: sqlite3.Connection, now: datetime,
          workspace: DemoWorkspace) -> list[dict[str, Any]]:
    return indicators_demo(conn, demo_params(query, now))


def indicators_demo(conn: sqlite3.Connection, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The demo's ``indicators_kql``: ``params`` holds ``start``, ``now`` and ``spellings`` (a JSON array of the
    values, lower case)."""
    order = ", ".join(f"{name} {'DESC' if descending else 'ASC'}" for name, descending in _ORDER)
    # SQLite's bare-column rule: with MAX(), the other columns come from the row holding the maximum (arg_max).
    return demo_sql.fetch(conn, f"""WITH latest AS (
            SELECT Id, ObservableKey, ObservableValue, Confidence, ValidFrom, ValidUntil, IsActive, Revoked,
                IsDeleted, Tags, MAX(TimeGenerated) AS TimeGenerated
            FROM ThreatIntelIndicators
            WHERE TimeGenerated > :start AND TimeGenerated <= :now
              AND {matches_sql("ObservableValue")}
            GROUP BY Id)
        SELECT Id, ObservableKey, ObservableValue, Confidence, ValidFrom, ValidUntil,
            (COALESCE(IsActive, 0) AND NOT COALESCE(Revoked, 0) AND (COALESCE(ValidFrom, '') = '' OR ValidFrom <= :now)
             AND (COALESCE(ValidUntil, '') = '' OR ValidUntil > :now)) AS Valid, Tags, COUNT(*) OVER () AS TotalMatched
        FROM latest WHERE NOT COALESCE(IsDeleted, 0)
        ORDER BY {order} LIMIT {MAX_EVIDENCE_ROWS}""", params)


def decode(row: Row) -> Indicator:
    return Indicator(as_text(row.get("Id")), as_text(row.get("ObservableKey")), as_text(row.get("ObservableValue")),
                     as_int(row.get("Confidence")), as_datetime(row.get("ValidFrom")),
                     as_datetime(row.get("ValidUntil")), as_bool(row.get("Valid")), as_text(row.get("Tags")))


RESULT = (("Id", "string"), ("ObservableKey", "string"), ("ObservableValue", "string"), ("Confidence", "int"),
          ("ValidFrom", "datetime"), ("ValidUntil", "datetime"), ("Valid", "bool"), ("Tags", "string"),
          ("TotalMatched", "long"))
SPEC = QuerySpec(
    name=ThreatIntelQuery.tool, params=params(), make=make(ThreatIntelQuery), kql=_kql, result=RESULT,
    keys=("ObservableValue",), decode=decode, demo=_demo, internal=True,
)
