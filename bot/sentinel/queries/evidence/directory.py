"""evidence_directory: directory changes an account made or was the target of (AuditLogs), newest first: role and
group membership, password and MFA method changes, app consents. The targets and a role operation's role are read
from TargetResources by the decoder (both backends return it as is)."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from bot.sentinel import demo_sql, kql
from bot.sentinel.evidence import DirectoryChange
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
from bot.sentinel.rows import as_datetime, as_json, as_text
from bot.sentinel.spec import DemoWorkspace, QuerySpec, Row

_ROLE_PROPERTIES = ("Role.DisplayName", "Role.displayName", "RoleDefinition.DisplayName")


class DirectoryQuery(EvidenceQuery):
    tool = "evidence_directory"
    title = "Directory changes"
    kinds = frozenset({EntityKind.ACCOUNT})


def _kql(query: DirectoryQuery) -> str:
    # A value JSON writes as it is first skips, by a text match, the records that cannot name it.
    plain = not query.also and kql.JSON_VERBATIM.fullmatch(query.entity.value) is not None
    skip = "\n    | where InitiatedBy contains entity_wanted or TargetResources contains entity_wanted" if plain else ""
    return f"""// {query.tool}: directory changes made by or for the account
{declaration(query)}let rows = materialize(AuditLogs
    | where TimeGenerated > {query.ago}{skip}
    | extend ByEntity = {matches_kql("tostring(InitiatedBy.user.userPrincipalName)")}
    | mv-apply Target = TargetResources on (
        summarize Targeted = countif({matches_kql("tostring(Target.userPrincipalName)")}))
    | where ByEntity or Targeted > 0
    | project TimeGenerated, OperationName, Result,
        Initiator = coalesce(tostring(InitiatedBy.user.userPrincipalName), tostring(InitiatedBy.app.displayName)),
        TargetResources, ByEntity);
rows
| sort by TimeGenerated desc, OperationName asc
| take {MAX_EVIDENCE_ROWS}
| extend TotalMatched = toscalar(rows | count)"""


def _json(column: str, default: str) -> str:
    return f"(CASE WHEN json_valid({column}) THEN {column} ELSE '{default}' END)"


def _demo(query: DirectoryQuery, conn: sqlite3.Connection, now: datetime,
          workspace: DemoWorkspace) -> list[dict[str, Any]]:
    initiated = _json("InitiatedBy", "{}")
    by_entity = matches_sql(f"COALESCE(json_extract({initiated}, '$.user.userPrincipalName'), '')")
    return demo_sql.fetch(conn, f"""SELECT TimeGenerated, OperationName, Result,
            COALESCE(NULLIF(json_extract({initiated}, '$.user.userPrincipalName'), ''),
                     NULLIF(json_extract({initiated}, '$.app.displayName'), ''), '') AS Initiator,
            TargetResources, ({by_entity}) AS ByEntity, COUNT(*) OVER () AS TotalMatched
        FROM AuditLogs
        WHERE TimeGenerated > :start AND TimeGenerated <= :now
          AND ({by_entity} OR EXISTS (SELECT 1 FROM json_each({_json("TargetResources", "[]")}) AS t
                  WHERE {matches_sql("COALESCE(json_extract(t.value, '$.userPrincipalName'), '')")}))
        ORDER BY TimeGenerated DESC, OperationName ASC LIMIT {MAX_EVIDENCE_ROWS}""", demo_params(query, now))


def decode(row: Row) -> DirectoryChange:
    targets = [t for t in as_json(row.get("TargetResources")) or [] if isinstance(t, dict)] \
        if isinstance(as_json(row.get("TargetResources")), list) else []
    return DirectoryChange(
        time=as_datetime(row.get("TimeGenerated")), operation=as_text(row.get("OperationName")),
        result=as_text(row.get("Result")), initiator=as_text(row.get("Initiator")),
        targets=tuple(as_text(t.get("userPrincipalName") or t.get("displayName")) for t in targets
                      if t.get("userPrincipalName") or t.get("displayName"))[:10],
        role=_role(targets), by_entity=as_bool(row.get("ByEntity")))


def _role(targets: list[dict[str, Any]]) -> str:
    """The role a role operation names: a Role target's name, or a target's modified Role.DisplayName."""
    for target in targets:
        if as_text(target.get("type")).lower() == "role" and target.get("displayName"):
            return as_text(target.get("displayName"))
        for change in target.get("modifiedProperties") or []:
            if isinstance(change, dict) and change.get("displayName") in _ROLE_PROPERTIES:
                return as_text(change.get("newValue")).strip('"')
    return ""


SPEC = QuerySpec(
    name=DirectoryQuery.tool, params=params(), make=make(DirectoryQuery), kql=_kql,
    result=(("TimeGenerated", "datetime"), ("OperationName", "string"), ("Result", "string"), ("Initiator", "string"),
            ("TargetResources", "dynamic"), ("ByEntity", "bool"), ("TotalMatched", "long")),
    keys=("OperationName",), decode=decode, demo=_demo, internal=True,
)
