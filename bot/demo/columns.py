"""A generated activity row's stored form: the values of the columns its generator leaves out.

Generated rows are sparse: a row holds the columns its generator sets. The rest are the table's defaults
(``defaults``; the store declares them as the columns' DEFAULT, ``full_row`` applies them to a generated row): as
Log Analytics shows an absent value, empty text for a string and null for anything else, and the values every
row of a table shares (``Type``, ``TenantId``, ``SourceSystem``, ``CONSTANTS``). The tables, their columns and where
an entity appears in each are the data layer's (``bot.sentinel.catalog``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from bot.demo.catalog import TENANT_ID
from bot.sentinel.catalog import schema

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
