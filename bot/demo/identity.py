"""Identity rows of the demo workspace: Entra ID sign-ins, directory audit, identity risk, UEBA and IdentityInfo.

Row builders (one per kind of record, in the shapes the real tables have: SigninLogs' LocationDetails,
DeviceDetail, Status, MfaDetail and AuthenticationDetails; AuditLogs' InitiatedBy and TargetResources) and the
ordinary day of every person (interactive sign-ins from home, token refreshes, the directory's own changes).
Rows are sparse dicts (``columns.stored_row`` fills the rest); datetimes in the store's text form.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from functools import cache

from bot.demo.catalog import CLOUD_APPS, TENANT_ID, USERS
from bot.demo.values import choice, compact_json, row_guid, timestamp
from bot.demo.world import Person, World, ip_location

Rows = dict[str, list[dict]]

# Result code -> (failure reason, additional details) as Entra ID writes them in Status.
RESULTS = {
    "0": ("", ""),
    "50126": ("Error validating credentials due to invalid username or password.", ""),
    "50053": ("Account is locked because user tried to sign in too many times with an incorrect user ID or "
              "password.", ""),
    "50074": ("Strong Authentication is required.", "MFA required in Azure AD"),
    "500121": ("Authentication failed during strong authentication request.",
               "MFA denied; user declined the authentication"),
    "50057": ("User account is disabled. The account has been disabled by an administrator.", ""),
}
BROWSERS = ("Edge 120.0.2210", "Chrome 119.0.0", "Edge 119.0.2151")
USER_AGENT = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
              "Chrome/120.0.0.0 Safari/537.36 Edg/120.0.0.0")
ATTACKER_AGENT = "python-requests/2.31.0"


@cache
def app_id(name: str) -> str:
    return row_guid("app", name)


@cache
def location_json(ip: str, home: bool) -> tuple[str, str]:
    """(LocationDetails JSON, country code) of an address."""
    code, _, city = ip_location(ip, home)
    return compact_json({"city": city, "state": city, "countryOrRegion": code,
                         "geoCoordinates": {"latitude": 0.0, "longitude": 0.0}}), code


@cache
def _device_json(host: str, browser: str, managed: bool) -> str:
    if not managed:
        return compact_json({"deviceId": "", "operatingSystem": "Windows 10", "browser": browser})
    return compact_json({"deviceId": row_guid("aad-device", host), "displayName": host,
                         "operatingSystem": "Windows 10", "browser": browser, "isCompliant": True, "isManaged": True,
                         "trustType": "Hybrid Azure AD joined"})


def _auth_steps(when: datetime, result: str, mfa: bool) -> tuple[str, str, str]:
    """(AuthenticationDetails, MfaDetail, AuthenticationRequirement) for a sign-in's result."""
    stamp = timestamp(when)
    first = {"authenticationStepDateTime": stamp, "authenticationMethod": "Password",
             "succeeded": result not in ("50126", "50053", "50057"),
             "authenticationStepResultDetail": "Correct password" if result != "50126" else "Invalid password",
             "authenticationStepRequirement": "Primary authentication"}
    if not mfa:
        return compact_json([first]), "", "singleFactorAuthentication"
    denied = result == "500121"
    second = {"authenticationStepDateTime": stamp, "authenticationMethod": "Mobile app notification",
              "succeeded": not denied,
              "authenticationStepResultDetail": "MFA denied; user declined the authentication" if denied
              else "MFA successfully completed",
              "authenticationStepRequirement": "Primary authentication"}
    detail = compact_json({"authMethod": "Mobile app notification", "authDetail": ""})
    return compact_json([first, second]), detail, "multiFactorAuthentication"


def signin(person: Person, when: datetime, ip: str, *, result: str = "0", app: tuple[str, int] | None = None,
           home: bool = True, mfa: bool = False, browser: str = BROWSERS[0], risk: str = "none",
           interactive: bool = True) -> dict:
    """One sign-in row (SigninLogs, or AADNonInteractiveUserSignInLogs when not ``interactive``)."""
    app_name = (app or CLOUD_APPS[0])[0]
    location, country = location_json(ip, home)
    reason, details = RESULTS[result]
    status: dict[str, int | str] = {"errorCode": int(result)}
    if reason:
        status["failureReason"] = reason
    if details:
        status["additionalDetails"] = details
    steps, mfa_detail, requirement = _auth_steps(when, result, mfa)
    stamp = timestamp(when)
    row_id = row_guid("signin", person.upn, stamp, ip, result)
    return {
        "TimeGenerated": stamp, "CreatedDateTime": stamp, "Id": row_id, "OriginalRequestId": row_id,
        "CorrelationId": row_guid("correlation", row_id),
        "Category": "SignInLogs" if interactive else "NonInteractiveUserSignInLogs",
        "ResultType": result, "ResultSignature": "SUCCESS" if result == "0" else "None", "ResultDescription": reason,
        "Identity": person.display, "Location": country, "AppDisplayName": app_name,
        "AppId": app_id(app_name), "ResourceDisplayName": app_name,
        "AuthenticationDetails": steps, "MfaDetail": mfa_detail, "AuthenticationRequirement": requirement,
        "ConditionalAccessStatus": "success" if result == "0" else "notApplied",
        "DeviceDetail": _device_json(person.host, browser, home), "IsInteractive": int(interactive),
        "IPAddress": ip, "LocationDetails": location, "Status": compact_json(status),
        "RiskLevelAggregated": risk, "RiskLevelDuringSignIn": risk, "RiskState": "atRisk" if risk != "none"
        else "none", "UserAgent": USER_AGENT if home else ATTACKER_AGENT, "UserDisplayName": person.display,
        "UserId": person.aad, "UserPrincipalName": person.upn,
    }


def add_signin(out: Rows, person: Person, when: datetime, ip: str, **options) -> None:
    table = "SigninLogs" if options.get("interactive", True) else "AADNonInteractiveUserSignInLogs"
    out[table].append(signin(person, when, ip, **options))


def audit(when: datetime, operation: str, category: str, initiator: Person, target: Person | None, ip: str,
          modified: list[dict] | None = None, target_name: str = "", target_type: str = "User") -> dict:
    """One AuditLogs row: who did it (InitiatedBy.user) to what (TargetResources[0])."""
    stamp = timestamp(when)
    resource = {"id": target.aad if target else row_guid("target", target_name), "type": target_type,
                "displayName": target.display if target else target_name,
                "userPrincipalName": target.upn if target else "", "modifiedProperties": modified or [],
                "administrativeUnits": []}
    correlation = row_guid("audit", stamp, operation, initiator.upn)
    return {
        "TimeGenerated": stamp, "ActivityDateTime": stamp, "OperationName": operation,
        "ActivityDisplayName": operation, "Category": category, "Id": f"Directory_{correlation}",
        "CorrelationId": correlation, "AADOperationType": operation.split(" ")[0].replace("Consent", "Assign"),
        "InitiatedBy": compact_json({"user": {"id": initiator.aad, "displayName": None,
                                              "userPrincipalName": initiator.upn, "ipAddress": ip, "roles": []}}),
        "TargetResources": compact_json([resource]),
        "AdditionalDetails": compact_json([{"key": "User-Agent", "value": USER_AGENT}]),
    }


def risk_event(person: Person, when: datetime, ip: str, event_type: str, level: str, timing: str = "realtime") -> dict:
    """One AADUserRiskEvents row (an Entra ID Protection detection)."""
    stamp = timestamp(when)
    code, _, city = ip_location(ip)
    return {
        "TimeGenerated": stamp, "ActivityDateTime": stamp, "DetectedDateTime": stamp, "LastUpdatedDateTime": stamp,
        "Activity": "signin", "Id": row_guid("risk", person.upn, stamp, event_type),
        "RequestId": row_guid("request", person.upn, stamp), "CorrelationId": row_guid("c", stamp),
        "DetectionTimingType": timing, "IpAddress": ip, "RiskEventType": event_type, "RiskLevel": level,
        "RiskState": "atRisk", "RiskDetail": "none", "Source": "IdentityProtection", "TokenIssuerType": "AzureAD",
        "Location": compact_json({"city": city, "state": city, "countryOrRegion": code}),
        "AdditionalInfo": compact_json([{"Key": "userAgent", "Value": ATTACKER_AGENT}]),
        "UserDisplayName": person.display, "UserId": person.aad, "UserPrincipalName": person.upn,
        "OperationName": "User Risk Detection",
    }


def risky_user(person: Person, when: datetime, level: str, state: str = "atRisk", detail: str = "none") -> dict:
    stamp = timestamp(when)
    return {"TimeGenerated": stamp, "RiskLastUpdatedDateTime": stamp, "Id": person.aad, "IsDeleted": 0,
            "IsProcessing": 0, "OperationName": "Risky user", "RiskDetail": detail, "RiskLevel": level,
            "RiskState": state, "UserDisplayName": person.display, "UserPrincipalName": person.upn,
            "CorrelationId": row_guid("risky", person.upn, stamp)}


def behavior(person: Person, when: datetime, ip: str, action: str, priority: int, insights: dict,
             home: bool = True, device: str = "") -> dict:
    """One BehaviorAnalytics row (UEBA's view of a sign-in or a logon)."""
    stamp = timestamp(when)
    _, country, _ = ip_location(ip, home)
    return {
        "TimeGenerated": stamp, "TimeProcessed": stamp, "ActionType": action, "ActivityType": "LogOn",
        "ActivityInsights": compact_json(insights), "UserName": person.sam, "UserPrincipalName": person.upn,
        "SourceIPAddress": ip, "SourceIPLocation": country, "SourceDevice": device, "DestinationDevice": "",
        "EventSource": "Azure AD", "EventVendor": "Microsoft", "InvestigationPriority": priority,
        "SourceRecordId": row_guid("ueba", person.upn, stamp), "NativeTableName": "SigninLogs",
        "UsersInsights": compact_json({"AccountDisplayName": person.display, "IsDormantAccount": False}),
        "DevicesInsights": compact_json({"Browser": "Edge", "OSFamily": "Windows"}),
    }


UNUSUAL = {"FirstTimeUserConnectedFromCountry": True, "CountryUncommonlyConnectedFromAmongPeers": True,
           "FirstTimeUserConnectedViaISP": True}
USUAL = {"FirstTimeUserConnectedFromCountry": False, "CountryUncommonlyConnectedFromAmongPeers": False}


def people(world: World) -> list[Person]:
    return [*world.users, *world.admins, world.service]


def identity_info(world: World, day_start: datetime) -> list[dict]:
    """IdentityInfo: one snapshot row per account per day (as UEBA refreshes it)."""
    departments = {f"{first}.{last}".lower(): dept for first, last, dept in USERS}
    stamp = timestamp(day_start + timedelta(hours=2))
    rows = []
    for person in people(world):
        first, _, last = person.display.partition(" ")
        admin = person.sam.startswith("adm-")
        rows.append({
            "TimeGenerated": stamp, "AccountName": person.sam, "AccountUPN": person.upn,
            "AccountObjectId": person.aad, "AccountDisplayName": person.display, "AccountDomain": "contoso.com",
            "AccountTenantId": TENANT_ID, "GivenName": first, "Surname": last, "MailAddress": person.upn,
            "Department": departments.get(person.sam, "IT"), "JobTitle": "Administrator" if admin else "Employee",
            "City": "Seattle", "Country": "US", "CompanyName": "Contoso", "IsAccountEnabled": 1,
            "IsMFARegistered": int(person.sam != "svc-backup"), "IsServiceAccount": int(person.sam == "svc-backup"),
            "AssignedRoles": compact_json(["Global Administrator"] if admin else []),
            "GroupMembership": compact_json(["All Employees"]), "UserType": "Member", "UserState": "Active",
            "RiskLevel": "", "RiskState": "", "InvestigationPriority": 0, "ChangeSource": "AzureActiveDirectory",
            "SAMAccountName": person.sam, "LastSeenDate": stamp,
        })
    return rows


def ordinary_day(world: World, rng: random.Random, day_start: datetime, volume: int, out: Rows) -> None:
    """Every person signs in from home each day; tokens refresh; admins change a few directory objects."""
    for _ in range(volume):
        for person in people(world):
            ip = world.home_ips[person.upn]
            when = day_start + timedelta(hours=7 + rng.random() * 11)
            if rng.random() < 0.05:  # a mistyped password first
                add_signin(out, person, when - timedelta(seconds=40), ip, result="50126")
            add_signin(out, person, when, ip, app=choice(rng, CLOUD_APPS), mfa=rng.random() < 0.3,
                       browser=choice(rng, BROWSERS))
            when = day_start + timedelta(hours=rng.random() * 24)
            add_signin(out, person, when, ip, app=choice(rng, CLOUD_APPS), interactive=False)
            if rng.random() < 0.5:
                out["BehaviorAnalytics"].append(behavior(person, when, ip, "Sign-in", 0, USUAL, device=person.host))
        for _ in range(3):
            admin, target = choice(rng, world.admins), choice(rng, world.users)
            when = day_start + timedelta(hours=8 + rng.random() * 9)
            operation = choice(rng, ("Update user", "Reset user password", "Add member to group"))
            out["AuditLogs"].append(audit(when, operation, "UserManagement", admin, target,
                                          world.home_ips[admin.upn]))

