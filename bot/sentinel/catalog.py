"""The tables the queries read: each table's columns and Kusto types (``tables.json``), where an entity appears in
each activity table, and the columns hunts filter most by.

``ENTITY_COLUMNS`` is the one list of the columns an entity is looked up by in each activity table (by entity
kind: account, host, ip, hash, url, domain, and ``indicator`` for any threat-intelligence observable); each is a
column name, or for AuditLogs an SQL expression into its dynamic columns. The demo store indexes exactly these
(``kql_lower(column)``, the form case-insensitive entity matching is written in), so a query that matches an entity
with ``kql_lower(Column) = kql_lower(?)`` on one of them reads an index, not the table.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

TABLES_FILE = Path(__file__).resolve().parent / "tables.json"

# AuditLogs is searched by who did it and to whom, which sit inside its dynamic columns: SQL expressions, indexed
# the same way (write them exactly so, inside kql_lower(...), for the index to serve).
AUDIT_INITIATOR = "json_extract(InitiatedBy, '$.user.userPrincipalName')"
AUDIT_TARGET = "json_extract(TargetResources, '$[0].userPrincipalName')"

# Entity kind -> columns holding it, per activity table (account columns hold UPNs, e-mail addresses or names).
ENTITY_COLUMNS: dict[str, dict[str, tuple[str, ...]]] = {
    "SigninLogs": {"account": ("UserPrincipalName",), "ip": ("IPAddress",)},
    "AADNonInteractiveUserSignInLogs": {"account": ("UserPrincipalName",), "ip": ("IPAddress",)},
    "AuditLogs": {"account": (AUDIT_INITIATOR, AUDIT_TARGET)},
    "IdentityInfo": {"account": ("AccountUPN", "AccountName")},
    "AADRiskyUsers": {"account": ("UserPrincipalName",)},
    "AADUserRiskEvents": {"account": ("UserPrincipalName",), "ip": ("IpAddress",)},
    "BehaviorAnalytics": {"account": ("UserPrincipalName",), "ip": ("SourceIPAddress",),
                          "host": ("SourceDevice", "DestinationDevice")},
    "DeviceInfo": {"host": ("DeviceName",), "ip": ("PublicIP",)},
    "DeviceProcessEvents": {"host": ("DeviceName",), "account": ("AccountName", "AccountUpn"),
                            "hash": ("SHA256", "InitiatingProcessSHA256")},
    "DeviceNetworkEvents": {"host": ("DeviceName",), "ip": ("RemoteIP",), "url": ("RemoteUrl",),
                            "account": ("InitiatingProcessAccountName",)},
    "DeviceLogonEvents": {"host": ("DeviceName",), "account": ("AccountName",), "ip": ("RemoteIP",)},
    "DeviceFileEvents": {"host": ("DeviceName",), "hash": ("SHA256",), "url": ("FileOriginUrl",),
                         "account": ("InitiatingProcessAccountName",)},
    "EmailEvents": {"account": ("RecipientEmailAddress", "SenderFromAddress"), "domain": ("SenderFromDomain",),
                    "ip": ("SenderIPv4",)},
    "EmailUrlInfo": {"url": ("Url",), "domain": ("UrlDomain",)},
    "UrlClickEvents": {"account": ("AccountUpn",), "url": ("Url",), "ip": ("IPAddress",)},
    "OfficeActivity": {"account": ("UserId",), "ip": ("ClientIP",)},
    "ThreatIntelIndicators": {"indicator": ("ObservableValue",)},
    "ThreatIntelligenceIndicator": {"ip": ("NetworkIP",), "domain": ("DomainName",), "url": ("Url",),
                                    "hash": ("FileHashValue",)},
}
ACTIVITY_TABLES = tuple(ENTITY_COLUMNS)

# The columns hunts filter most by equality or range, beyond the entity columns above (column names as a hunt names
# them: a table's own or a virtual one of ``hunt/catalog.py``). The demo store indexes each, with TimeGenerated, in
# the form the hunt's SQL compares it (``hunt.sql.compared``), so such a hunt reads its matches, not its whole window.
HUNT_INDEXED: dict[str, tuple[str, ...]] = {
    "SigninLogs": ("ResultType", "ErrorCode", "Country", "AppDisplayName"),
    "AADNonInteractiveUserSignInLogs": ("ResultType", "ErrorCode", "Country", "AppDisplayName"),
    "AuditLogs": ("OperationName",),
    "DeviceProcessEvents": ("FileName", "ParentProcess"),
    "DeviceNetworkEvents": ("RemotePort", "ActionType"),
    "DeviceLogonEvents": ("ActionType",),
    "EmailEvents": ("DeliveryAction",),
    "OfficeActivity": ("Operation",),
}


@cache
def schema() -> dict[str, tuple[tuple[str, str], ...]]:
    """{table: ((column, kusto type), ...)} as tables.json lists them."""
    raw = json.loads(TABLES_FILE.read_text(encoding="utf-8"))
    return {table: tuple((c["name"], c["type"]) for c in columns) for table, columns in raw.items()}
