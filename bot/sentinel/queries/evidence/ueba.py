"""evidence_ueba: UEBA's scored activities (BehaviorAnalytics) of an account or from an IP, highest investigation
priority first."""

from __future__ import annotations

from bot.sentinel.evidence import BehaviorEvent
from bot.sentinel.queries.evidence.common import Column, EvidenceQuery, RowList, spec
from bot.sentinel.queries.evidence.entity import EntityKind
from bot.sentinel.rows import as_datetime, as_int, as_text
from bot.sentinel.spec import Row


class UebaQuery(EvidenceQuery):
    tool = "evidence_ueba"
    title = "UEBA"
    kinds = frozenset({EntityKind.ACCOUNT, EntityKind.IP})


ROWS = RowList(
    table="BehaviorAnalytics",
    columns=(Column("TimeGenerated", "datetime"), Column("UserPrincipalName", "string"),
             Column("ActivityType", "string"), Column("ActionType", "string"), Column("InvestigationPriority", "int"),
             Column("SourceIPAddress", "string"), Column("SourceIPLocation", "string")),
    order=(("InvestigationPriority", True), ("TimeGenerated", True), ("ActionType", False)),
    what="UEBA activities",
)


def decode(row: Row) -> BehaviorEvent:
    return BehaviorEvent(as_datetime(row.get("TimeGenerated")), as_text(row.get("UserPrincipalName")),
                         as_text(row.get("ActivityType")), as_text(row.get("ActionType")),
                         as_int(row.get("InvestigationPriority")), as_text(row.get("SourceIPAddress")),
                         as_text(row.get("SourceIPLocation")))


SPEC = spec(UebaQuery, ROWS, decode, keys=("TimeGenerated",))
