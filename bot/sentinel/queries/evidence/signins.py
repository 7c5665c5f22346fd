"""evidence_signins: an account's interactive sign-ins, or the sign-ins from an IP (SigninLogs), grouped by account,
result code, IP, country, app and risk level during sign-in, with their count and first/last time: successes,
failures by result code (500121: MFA denied), the distinct IPs, countries and apps, the risky ones. The groups with
the latest sign-in come first.

Each group also says whether its account signed in successfully from its country during the baseline (the BASELINE
before the window: ``KnownCountry``), so "a new country" means new for that account, not merely new in the window;
the query's timespan covers the baseline too."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from typing import Any

from bot.sentinel import catalog, demo_sql, kql
from bot.sentinel.demo_sql import iso
from bot.sentinel.evidence import SigninGroup
from bot.sentinel.queries.evidence.common import (
    MAX_EVIDENCE_ROWS,
    EvidenceQuery,
    declaration,
    demo_params,
    make,
    matches_kql,
    matches_sql,
    params,
)
from bot.sentinel.queries.evidence.entity import EntityKind
from bot.sentinel.queries.evidence.rows import as_bool
from bot.sentinel.rows import as_datetime, as_int, as_text
from bot.sentinel.spec import DemoWorkspace, QuerySpec, Row

_KEYS = ("UserPrincipalName", "ResultType", "IPAddress", "Location", "AppDisplayName", "RiskLevelDuringSignIn")
BASELINE = timedelta(days=14)  # the period before the window whose countries are an account's known ones
_ORDER = (("LastSeen", True), ("SignIns", True), *((k, False) for k in _KEYS))


class SigninsQuery(EvidenceQuery):
    tool = "evidence_signins"
    title = "Sign-ins"
    kinds = frozenset({EntityKind.ACCOUNT, EntityKind.IP})

    @property
    def timespan(self) -> timedelta:
        return self.span + BASELINE

    @property
    def baseline_ago(self) -> str:
        """The KQL start of the baseline (whole hours: every window is)."""
        return f"ago({int(self.timespan.total_seconds()) // 3600}h)"


def _columns(query: SigninsQuery) -> tuple[str, ...]:
    """The SigninLogs columns naming the entity (the catalog's for its kind: an account's UPN and object id)."""
    return catalog.table("SigninLogs").entity_columns(query.entity.kind.value)


def _kql_match(query: SigninsQuery) -> str:
    return "(" + " or ".join(matches_kql(c) for c in _columns(query)) + ")"


def _sql_match(query: SigninsQuery, alias: str = "") -> str:
    return "(" + " OR ".join(matches_sql(f"{alias}{c}") for c in _columns(query)) + ")"


def _kql(query: SigninsQuery) -> str:
    return f"""// {query.tool}: sign-ins of the {query.entity.kind.value}, by result, IP, country and app
{declaration(query)}let known = toscalar(SigninLogs
    | where TimeGenerated > {query.baseline_ago} and TimeGenerated <= {query.ago}
    | where {_kql_match(query)} and ResultType == "0"
    | summarize make_set(strcat(tolower(UserPrincipalName), " ", Location)));
let groups = materialize(SigninLogs
    | where TimeGenerated > {query.ago}
    | where {_kql_match(query)}
    | summarize SignIns = count(), FirstSeen = min(TimeGenerated), LastSeen = max(TimeGenerated),
        ResultDescription = min(ResultDescription) by {', '.join(_KEYS)});
groups
| sort by {kql.order_by(_ORDER)}
| take {MAX_EVIDENCE_ROWS}
| extend TotalMatched = toscalar(groups | count),
    KnownCountry = set_has_element(known, strcat(tolower(UserPrincipalName), " ", Location))
| project {', '.join(_KEYS)}, ResultDescription, SignIns, FirstSeen, LastSeen, KnownCountry, TotalMatched"""


def _demo(query: SigninsQuery, conn: sqlite3.Connection, now: datetime,
          workspace: DemoWorkspace) -> list[dict[str, Any]]:
    keys = ", ".join(_KEYS)
    order = ", ".join(f"{name} {'DESC' if descending else 'ASC'}" for name, descending in _ORDER)
    return demo_sql.fetch(conn, f"""SELECT {keys}, MIN(ResultDescription) AS ResultDescription, COUNT(*) AS SignIns,
            MIN(TimeGenerated) AS FirstSeen, MAX(TimeGenerated) AS LastSeen, EXISTS (
                SELECT 1 FROM SigninLogs AS b
                WHERE b.TimeGenerated > :baseline AND b.TimeGenerated <= :start AND b.ResultType = '0'
                  AND {_sql_match(query, "b.")}
                  AND kql_lower(b.UserPrincipalName) = kql_lower(SigninLogs.UserPrincipalName)
                  AND b.Location = SigninLogs.Location) AS KnownCountry, COUNT(*) OVER () AS TotalMatched
        FROM SigninLogs
        WHERE TimeGenerated > :start AND TimeGenerated <= :now
          AND {_sql_match(query)}
        GROUP BY {keys} ORDER BY {order} LIMIT {MAX_EVIDENCE_ROWS}""",
                     demo_params(query, now) | {"baseline": iso(now - query.span - BASELINE)})


def decode(row: Row) -> SigninGroup:
    return SigninGroup(
        upn=as_text(row.get("UserPrincipalName")), result_type=as_text(row.get("ResultType")),
        result_description=as_text(row.get("ResultDescription")), ip=as_text(row.get("IPAddress")),
        country=as_text(row.get("Location")), app=as_text(row.get("AppDisplayName")),
        risk_level=as_text(row.get("RiskLevelDuringSignIn")), count=as_int(row.get("SignIns")),
        first=as_datetime(row.get("FirstSeen")), last=as_datetime(row.get("LastSeen")),
        known_country=as_bool(row.get("KnownCountry")))


SPEC = QuerySpec(
    name=SigninsQuery.tool, params=params(), make=make(SigninsQuery), kql=_kql,
    result=(*((k, "string") for k in _KEYS), ("ResultDescription", "string"), ("SignIns", "long"),
            ("FirstSeen", "datetime"), ("LastSeen", "datetime"), ("KnownCountry", "bool"), ("TotalMatched", "long")),
    keys=("ResultType",), decode=decode, demo=_demo, internal=True,
)
