"""evidence_url_clicks: Safe Links clicks by an account, on a URL, or from an IP (UrlClickEvents), newest first."""

from __future__ import annotations

from bot.sentinel.evidence import UrlClick
from bot.sentinel.queries.evidence.common import Column, EvidenceQuery, RowList, spec
from bot.sentinel.queries.evidence.entity import EntityKind
from bot.sentinel.queries.evidence.rows import as_bool
from bot.sentinel.rows import as_datetime, as_text
from bot.sentinel.spec import Row


class UrlClicksQuery(EvidenceQuery):
    tool = "evidence_url_clicks"
    title = "URL clicks"
    kinds = frozenset({EntityKind.ACCOUNT, EntityKind.URL, EntityKind.IP})


ROWS = RowList(
    table="UrlClickEvents",
    columns=(Column("TimeGenerated", "datetime"), Column("AccountUpn", "string"), Column("Url", "string"),
             Column("ActionType", "string"), Column("IsClickedThrough", "bool"), Column("ThreatTypes", "string"),
             Column("NetworkMessageId", "string")),
    order=(("TimeGenerated", True), ("AccountUpn", False), ("Url", False)),
    what="URL clicks",
)


def decode(row: Row) -> UrlClick:
    return UrlClick(as_datetime(row.get("TimeGenerated")), as_text(row.get("AccountUpn")), as_text(row.get("Url")),
                    as_text(row.get("ActionType")), as_bool(row.get("IsClickedThrough")),
                    as_text(row.get("ThreatTypes")), as_text(row.get("NetworkMessageId")))


SPEC = spec(UrlClicksQuery, ROWS, decode, keys=("Url",))
