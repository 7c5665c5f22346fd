"""evidence_network: network connections of a host, to an IP, or to a URL or domain (DeviceNetworkEvents), newest
first, with the process that made them."""

from __future__ import annotations

from bot.sentinel.evidence import NetworkEvent
from bot.sentinel.queries.evidence.common import Column, EvidenceQuery, RowList, spec
from bot.sentinel.queries.evidence.entity import EntityKind
from bot.sentinel.rows import as_datetime, as_int, as_text
from bot.sentinel.spec import Row


class NetworkQuery(EvidenceQuery):
    tool = "evidence_network"
    title = "Network connections"
    kinds = frozenset({EntityKind.HOST, EntityKind.IP, EntityKind.URL, EntityKind.DOMAIN})


ROWS = RowList(
    table="DeviceNetworkEvents",
    columns=(Column("TimeGenerated", "datetime"), Column("DeviceName", "string"), Column("ActionType", "string"),
             Column("RemoteIP", "string"), Column("RemotePort", "int"), Column("RemoteUrl", "string"),
             Column("InitiatingProcessFileName", "string")),
    order=(("TimeGenerated", True), ("RemoteIP", False), ("RemotePort", False)),
    what="network connections",
)


def decode(row: Row) -> NetworkEvent:
    return NetworkEvent(as_datetime(row.get("TimeGenerated")), as_text(row.get("DeviceName")),
                        as_text(row.get("ActionType")), as_text(row.get("RemoteIP")), as_int(row.get("RemotePort")),
                        as_text(row.get("RemoteUrl")), as_text(row.get("InitiatingProcessFileName")))


SPEC = spec(NetworkQuery, ROWS, decode, keys=("DeviceName",))
