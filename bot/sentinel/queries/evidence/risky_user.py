"""evidence_risky_user: an account's current risk in Entra ID Protection (AADRiskyUsers, its latest row over the
last 30 days whatever the window: a risk state stays until it is remediated or dismissed)."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from typing import Any

from bot.sentinel import demo_sql
from bot.sentinel.evidence import RiskyUser
from bot.sentinel.queries.evidence.common import (
    EvidenceQuery,
    declaration,
    demo_params,
    make,
    matches_kql,
    matches_sql,
    params,
)
from bot.sentinel.queries.evidence.entity import EntityKind
from bot.sentinel.rows import as_datetime, as_text
from bot.sentinel.spec import DemoWorkspace, QuerySpec, Row


class RiskyUserQuery(EvidenceQuery):
    tool = "evidence_risky_user"
    title = "Identity risk"
    kinds = frozenset({EntityKind.ACCOUNT})
    lookback = timedelta(days=30)


def _kql(query: RiskyUserQuery) -> str:
    return f"""// {query.tool}: the account's latest risk state
{declaration(query)}AADRiskyUsers
| where TimeGenerated > {query.ago}
| where {matches_kql("UserPrincipalName")}
| summarize arg_max(TimeGenerated, RiskLevel, RiskState, RiskDetail, RiskLastUpdatedDateTime) by UserPrincipalName
| project UserPrincipalName, RiskLevel, RiskState, RiskDetail, RiskLastUpdatedDateTime, TimeGenerated"""


def _demo(query: RiskyUserQuery, conn: sqlite3.Connection, now: datetime,
          workspace: DemoWorkspace) -> list[dict[str, Any]]:
    # SQLite's bare-column rule: with MAX(), the other columns come from the row holding the maximum (arg_max).
    return demo_sql.fetch(conn, f"""SELECT UserPrincipalName, RiskLevel, RiskState, RiskDetail, RiskLastUpdatedDateTime,
            MAX(TimeGenerated) AS TimeGenerated
        FROM AADRiskyUsers
        WHERE TimeGenerated > :start AND TimeGenerated <= :now
          AND {matches_sql("UserPrincipalName")}
        GROUP BY UserPrincipalName""", demo_params(query, now))


def decode(row: Row) -> RiskyUser:
    return RiskyUser(as_text(row.get("UserPrincipalName")), as_text(row.get("RiskLevel")),
                     as_text(row.get("RiskState")), as_text(row.get("RiskDetail")),
                     as_datetime(row.get("RiskLastUpdatedDateTime")) or as_datetime(row.get("TimeGenerated")))


SPEC = QuerySpec(
    name=RiskyUserQuery.tool, params=params(), make=make(RiskyUserQuery), kql=_kql,
    result=(("UserPrincipalName", "string"), ("RiskLevel", "string"), ("RiskState", "string"),
            ("RiskDetail", "string"), ("RiskLastUpdatedDateTime", "datetime"), ("TimeGenerated", "datetime")),
    keys=("UserPrincipalName",), decode=decode, demo=_demo, internal=True,
)
