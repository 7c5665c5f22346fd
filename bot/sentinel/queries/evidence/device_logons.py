"""evidence_logons: logons on a host or from a remote IP (DeviceLogonEvents), newest first, failures with their
reason."""

from __future__ import annotations

from bot.sentinel.evidence import LogonEvent
from bot.sentinel.queries.evidence.common import Column, EvidenceQuery, RowList, spec
from bot.sentinel.queries.evidence.entity import EntityKind
from bot.sentinel.rows import as_datetime, as_text
from bot.sentinel.spec import Row


class LogonsQuery(EvidenceQuery):
    tool = "evidence_logons"
    title = "Logons"
    kinds = frozenset({EntityKind.HOST, EntityKind.IP})


ROWS = RowList(
    table="DeviceLogonEvents",
    columns=(Column("TimeGenerated", "datetime"), Column("DeviceName", "string"), Column("AccountName", "string"),
             Column("ActionType", "string"), Column("LogonType", "string"), Column("RemoteIP", "string"),
             Column("FailureReason", "string")),
    order=(("TimeGenerated", True), ("AccountName", False), ("ActionType", False)),
    what="logons",
)


def decode(row: Row) -> LogonEvent:
    return LogonEvent(as_datetime(row.get("TimeGenerated")), as_text(row.get("DeviceName")),
                      as_text(row.get("AccountName")), as_text(row.get("ActionType")), as_text(row.get("LogonType")),
                      as_text(row.get("RemoteIP")), as_text(row.get("FailureReason")))


SPEC = spec(LogonsQuery, ROWS, decode, keys=("DeviceName",))
