"""evidence_processes: processes started on a host, by an account, or from a file with the hash (DeviceProcessEvents),
newest first, with their command line and parent."""

from __future__ import annotations

from bot.sentinel.evidence import ProcessEvent
from bot.sentinel.queries.evidence.common import Column, EvidenceQuery, RowList, spec
from bot.sentinel.queries.evidence.entity import EntityKind
from bot.sentinel.rows import as_datetime, as_text
from bot.sentinel.spec import Row


class ProcessesQuery(EvidenceQuery):
    tool = "evidence_processes"
    title = "Processes"
    kinds = frozenset({EntityKind.HOST, EntityKind.ACCOUNT, EntityKind.HASH})


ROWS = RowList(
    table="DeviceProcessEvents",
    columns=(Column("TimeGenerated", "datetime"), Column("DeviceName", "string"), Column("AccountName", "string"),
             Column("FileName", "string"), Column("ProcessCommandLine", "string"),
             Column("InitiatingProcessFileName", "string"), Column("SHA256", "string")),
    order=(("TimeGenerated", True), ("FileName", False), ("ProcessCommandLine", False)),
    what="processes",
)


def decode(row: Row) -> ProcessEvent:
    return ProcessEvent(as_datetime(row.get("TimeGenerated")), as_text(row.get("DeviceName")),
                        as_text(row.get("AccountName")), as_text(row.get("FileName")),
                        as_text(row.get("ProcessCommandLine")), as_text(row.get("InitiatingProcessFileName")),
                        as_text(row.get("SHA256")))


SPEC = spec(ProcessesQuery, ROWS, decode, keys=("FileName",))
