"""evidence_files: file events on a host or of a file with the hash (DeviceFileEvents), newest first."""

from __future__ import annotations

from bot.sentinel.evidence import FileEvent
from bot.sentinel.queries.evidence.common import Column, EvidenceQuery, RowList, spec
from bot.sentinel.queries.evidence.entity import EntityKind
from bot.sentinel.rows import as_datetime, as_text
from bot.sentinel.spec import Row


class FilesQuery(EvidenceQuery):
    tool = "evidence_files"
    title = "File events"
    kinds = frozenset({EntityKind.HOST, EntityKind.HASH})


ROWS = RowList(
    table="DeviceFileEvents",
    columns=(Column("TimeGenerated", "datetime"), Column("DeviceName", "string"), Column("ActionType", "string"),
             Column("FileName", "string"), Column("FolderPath", "string"), Column("SHA256", "string"),
             Column("InitiatingProcessFileName", "string")),
    order=(("TimeGenerated", True), ("FileName", False), ("FolderPath", False)),
    what="file events",
)


def decode(row: Row) -> FileEvent:
    return FileEvent(as_datetime(row.get("TimeGenerated")), as_text(row.get("DeviceName")),
                     as_text(row.get("ActionType")), as_text(row.get("FileName")), as_text(row.get("FolderPath")),
                     as_text(row.get("SHA256")), as_text(row.get("InitiatingProcessFileName")))


SPEC = spec(FilesQuery, ROWS, decode, keys=("FileName",))
