"""evidence_risk_detections: Entra ID Protection's risk detections of an account or from an IP (AADUserRiskEvents),
newest first."""

from __future__ import annotations

from bot.sentinel.evidence import RiskDetection
from bot.sentinel.queries.evidence.common import Column, EvidenceQuery, RowList, spec
from bot.sentinel.queries.evidence.entity import EntityKind
from bot.sentinel.rows import as_datetime, as_text
from bot.sentinel.spec import Row


class RiskDetectionsQuery(EvidenceQuery):
    tool = "evidence_risk_detections"
    title = "Risk detections"
    kinds = frozenset({EntityKind.ACCOUNT, EntityKind.IP})


ROWS = RowList(
    table="AADUserRiskEvents",
    columns=(Column("TimeGenerated", "datetime"), Column("UserPrincipalName", "string"),
             Column("RiskEventType", "string"), Column("RiskLevel", "string"), Column("RiskState", "string"),
             Column("IpAddress", "string"),
             Column("Country", "string", "tostring(Location.countryOrRegion)",
                    "CASE WHEN json_valid(Location) THEN COALESCE(json_extract(Location, '$.countryOrRegion'), '') "
                    "ELSE '' END")),
    order=(("TimeGenerated", True), ("RiskEventType", False), ("IpAddress", False)),
    what="risk detections",
)


def decode(row: Row) -> RiskDetection:
    return RiskDetection(as_datetime(row.get("TimeGenerated")), as_text(row.get("UserPrincipalName")),
                         as_text(row.get("RiskEventType")), as_text(row.get("RiskLevel")),
                         as_text(row.get("RiskState")), as_text(row.get("IpAddress")), as_text(row.get("Country")))


SPEC = spec(RiskDetectionsQuery, ROWS, decode, keys=("RiskEventType",))
