"""evidence_email: messages to or from an account, from a sender IP, or carrying a URL or a link to a domain
(EmailEvents; a URL through EmailUrlInfo), newest first, with their delivery and threats."""

from __future__ import annotations

from bot.sentinel.evidence import EmailMessage
from bot.sentinel.queries.evidence.common import Column, EvidenceQuery, RowList, matches_kql, matches_sql, spec
from bot.sentinel.queries.evidence.entity import EntityKind
from bot.sentinel.rows import as_datetime, as_text
from bot.sentinel.spec import Row


class EmailQuery(EvidenceQuery):
    tool = "evidence_email"
    title = "Email"
    kinds = frozenset({EntityKind.ACCOUNT, EntityKind.IP, EntityKind.URL, EntityKind.DOMAIN})


def _carrying(column: str) -> tuple[str, str]:
    """Messages with a URL whose ``column`` (Url or UrlDomain) is the entity."""
    return (f"NetworkMessageId in ((EmailUrlInfo | where TimeGenerated > {{ago}} "
            f"| where {matches_kql(column)} "
            "| distinct NetworkMessageId))",
            f"NetworkMessageId IN (SELECT NetworkMessageId FROM EmailUrlInfo WHERE TimeGenerated > :start "
            f"AND TimeGenerated <= :now AND {matches_sql(column)})")


ROWS = RowList(
    table="EmailEvents",
    custom={EntityKind.URL: _carrying("Url"), EntityKind.DOMAIN: _carrying("UrlDomain")},
    columns=(Column("TimeGenerated", "datetime"), Column("NetworkMessageId", "string"),
             Column("SenderFromAddress", "string"), Column("RecipientEmailAddress", "string"),
             Column("Subject", "string"), Column("DeliveryAction", "string"),
             Column("LatestDeliveryLocation", "string"), Column("ThreatTypes", "string")),
    order=(("TimeGenerated", True), ("NetworkMessageId", False), ("RecipientEmailAddress", False)),
    what="email messages",
)


def decode(row: Row) -> EmailMessage:
    return EmailMessage(as_datetime(row.get("TimeGenerated")), as_text(row.get("NetworkMessageId")),
                        as_text(row.get("SenderFromAddress")), as_text(row.get("RecipientEmailAddress")),
                        as_text(row.get("Subject")), as_text(row.get("DeliveryAction")),
                        as_text(row.get("LatestDeliveryLocation")), as_text(row.get("ThreatTypes")))


SPEC = spec(EmailQuery, ROWS, decode, keys=("NetworkMessageId",))
