"""The demo's activity tables: which ones it generates, the columns each is searched by, and a row's stored form.

``ENTITY_COLUMNS`` is the one list of the columns an entity is looked up by in each activity table (by entity
kind: account, host, ip, hash, url, domain, and ``indicator`` for any threat-intelligence observable); each is a
column name, or for AuditLogs an SQL expression into its dynamic columns. The store indexes exactly these
(``kql_lower(column)``, the form case-insensitive entity matching is written in), so a query that matches an entity with
``kql_lower(Column) = kql_lower(?)`` on one of them reads an index, not the table. Queries built elsewhere
(investigation evidence, hunts) import it to know where an entity can appear.

Generated rows are sparse: a row holds the columns its generator sets. The rest are the table's defaults
(``defaults``; the store declares them as the columns' DEFAULT, ``full_row`` applies them to a generated row): as
Log Analytics shows an absent value, empty text for a string and null for anything else, and the values every
row of a table shares (``Type``, ``TenantId``, ``SourceSystem``, ``CONSTANTS``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from bot.sentinel.demo.catalog import TENANT_ID

TABLES_FILE = Path(__file__).resolve().parent.parent / "tables.json"

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
# them: a table's own or a virtual one of ``hunt/catalog.py``). The store indexes each, with TimeGenerated, in the
# form the hunt's SQL compares it (``hunt.sql.compared``), so such a hunt reads its matches, not its whole window.
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


_SOURCE_SYSTEM = {"SigninLogs": "Azure AD", "AADNonInteractiveUserSignInLogs": "Azure AD", "AuditLogs": "Azure AD",
                  "AADRiskyUsers": "Azure AD", "AADUserRiskEvents": "Azure AD", "IdentityInfo": "",
                  "BehaviorAnalytics": "", "OfficeActivity": "", "ThreatIntelIndicators": "",
                  "ThreatIntelligenceIndicator": "SecurityGraph"}
_ENTRA = {"AADTenantId": TENANT_ID, "HomeTenantId": TENANT_ID, "ResourceTenantId": TENANT_ID, "Level": "4",
          "ResourceGroup": "Microsoft.aadiam", "ResourceId": f"/tenants/{TENANT_ID}/providers/Microsoft.aadiam",
          "OperationName": "Sign-in activity", "OperationVersion": "1.0", "DurationMs": 0, "UserType": "Member",
          "TokenIssuerType": "AzureAD", "IsTenantRestricted": False, "IsThroughGlobalSecureAccess": False,
          "IsRisky": False, "RiskDetail": "none", "RiskEventTypes": "[]", "RiskEventTypes_V2": "[]",
          "ClientAppUsed": "Browser"}
# Values every row of a table has (beyond Type, TenantId and SourceSystem): the generators leave them out.
CONSTANTS: dict[str, dict[str, Any]] = {
    "SigninLogs": _ENTRA, "AADNonInteractiveUserSignInLogs": _ENTRA,
    "AuditLogs": {"AADTenantId": TENANT_ID, "Level": "4", "Resource": "Microsoft.aadiam", "DurationMs": 0,
                  "ResourceGroup": "Microsoft.aadiam", "LoggedByService": "Core Directory", "OperationVersion": "1.0",
                  "Result": "success", "ResultSignature": "None"},
}


@cache
def schema() -> dict[str, tuple[tuple[str, str], ...]]:
    """{table: ((column, kusto type), ...)} as tables.json lists them."""
    raw = json.loads(TABLES_FILE.read_text(encoding="utf-8"))
    return {table: tuple((c["name"], c["type"]) for c in columns) for table, columns in raw.items()}


def _stored(value: Any) -> Any:
    return int(value) if isinstance(value, bool) else value


@cache
def defaults(table: str) -> tuple[tuple[str, Any], ...]:
    """(column, value of a row that does not set it) in schema order."""
    shared = {"Type": table, "TenantId": TENANT_ID, "SourceSystem": _SOURCE_SYSTEM.get(table, "Microsoft Defender"),
              **CONSTANTS.get(table, {})}
    return tuple((name, _stored(shared.get(name, "" if kind in ("string", "dynamic") else None)))
                 for name, kind in schema()[table])


def stored_row(table: str, row: Mapping[str, Any]) -> tuple[Any, ...]:
    """The row's values in schema order, with the absent ones filled in."""
    get = row.get
    return tuple(get(name, value) for name, value in defaults(table))


def full_row(table: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """The row as the store holds it, as a dict (for tests and tools that read generated rows)."""
    return dict(zip((name for name, _ in defaults(table)), stored_row(table, row), strict=True))
