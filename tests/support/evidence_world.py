"""A small evidence world for the investigation tests, written into a demo database in the contract's stored forms
(datetimes as ``demo_sql.iso``, dynamic as compact JSON, bools 0/1, "" for absent strings): an MFA-fatigue account with
a role added and a phishing click, a malware host, a known-bad IP, a quiet account, other entities' rows and rows
outside the window, until the demo generates these tables itself."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta
from typing import Any

from bot.demo.store import load_table_columns
from bot.sentinel.demo_sql import iso

ALICE = "alice@contoso.com"  # MFA fatigue, then a success from a new country; a role added; a phishing click
BOB = "bob@contoso.com"  # ordinary sign-ins only
HOST = "WS-FIN-042"  # Office spawning encoded PowerShell, then mimikatz
BAD_IP = "203.0.113.7"  # a threat-intel indicator, the attacker's sign-ins
URL = "https://login-contoso.example/auth"
HASH = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
_DEFAULTS = {"string": "", "dynamic": "", "bool": 0, "int": 0, "long": 0, "real": 0.0, "datetime": None}


def rows(now: datetime) -> dict[str, list[dict[str, Any]]]:
    """Every table's rows, relative to ``now``."""
    def at(**delta: float) -> str:
        return iso(now - timedelta(**delta))

    signins = []
    for day in (6, 5, 4):  # alice's ordinary sign-ins from the US
        signins.append(_signin(at(days=day, hours=1), ALICE, "0", "10.0.0.5", "US", "Outlook"))
    for n in range(8):  # the push storm, from the attacker's IP
        signins.append(_signin(at(hours=3, minutes=50 - n * 5), ALICE, "500121", BAD_IP, "RU", "Azure Portal",
                               "Strong Authentication is required."))
    signins.append(_signin(at(hours=3), ALICE, "0", BAD_IP, "RU", "Azure Portal"))
    signins.append(_signin(at(days=10), ALICE, "0", "10.0.0.5", "US", "Outlook"))  # her baseline (before 7 days)
    signins.append(_signin(at(days=40), ALICE, "0", BAD_IP, "RU", "Azure Portal"))  # before her baseline
    for day in range(5):
        signins.append(_signin(at(days=day, hours=2), BOB, "0", "10.0.0.6", "US", "Teams"))
    signins.append(_signin(at(days=1), BOB, "50126", "10.0.0.6", "US", "Teams", "Invalid password"))
    return {
        "SigninLogs": signins,
        "AuditLogs": [
            {"TimeGenerated": at(hours=2), "OperationName": "Add member to role", "Result": "success",
             "InitiatedBy": _j({"user": {"userPrincipalName": "mallory@contoso.com"}}),
             "TargetResources": _j([{"type": "User", "userPrincipalName": ALICE, "modifiedProperties": [
                 {"displayName": "Role.DisplayName", "oldValue": "", "newValue": "\"Global Administrator\""}]}])},
            {"TimeGenerated": at(hours=1), "OperationName": "Update user", "Result": "success",
             "InitiatedBy": _j({"user": {"userPrincipalName": ALICE}}),
             "TargetResources": _j([{"type": "User", "userPrincipalName": BOB}])},
            {"TimeGenerated": at(hours=5), "OperationName": "Reset password", "Result": "success",
             "InitiatedBy": _j({"app": {"displayName": "Self-service"}}),
             "TargetResources": _j([{"type": "User", "userPrincipalName": "carol@contoso.com"}])},
        ],
        "AADRiskyUsers": [
            {"TimeGenerated": at(days=2), "UserPrincipalName": ALICE, "RiskLevel": "low", "RiskState": "atRisk",
             "RiskDetail": "none", "RiskLastUpdatedDateTime": at(days=2)},
            {"TimeGenerated": at(hours=2), "UserPrincipalName": ALICE, "RiskLevel": "high", "RiskState": "atRisk",
             "RiskDetail": "none", "RiskLastUpdatedDateTime": at(hours=2)},
        ],
        "AADUserRiskEvents": [
            {"TimeGenerated": at(hours=2, minutes=30), "UserPrincipalName": ALICE,
             "RiskEventType": "unfamiliarFeatures", "RiskLevel": "high", "RiskState": "atRisk", "IpAddress": BAD_IP,
             "Location": _j({"countryOrRegion": "RU", "city": "Moscow"})},
        ],
        "BehaviorAnalytics": [
            {"TimeGenerated": at(hours=2), "UserPrincipalName": ALICE, "ActivityType": "LogOn",
             "ActionType": "Sign-in", "InvestigationPriority": 7, "SourceIPAddress": BAD_IP, "SourceIPLocation": "RU"},
            {"TimeGenerated": at(days=1), "UserPrincipalName": BOB, "ActivityType": "LogOn",
             "ActionType": "Sign-in", "InvestigationPriority": 0, "SourceIPAddress": "10.0.0.6"},
        ],
        "DeviceProcessEvents": [
            _process(at(hours=6), HOST, "powershell.exe", "powershell.exe -enc SQBFAFgA", "WINWORD.EXE", HASH),
            _process(at(hours=5), HOST, "mimikatz.exe", "mimikatz.exe sekurlsa::logonpasswords", "powershell.exe",
                     "a" * 64),
            _process(at(hours=7), HOST, "chrome.exe", "chrome.exe", "explorer.exe", "b" * 64),
            _process(at(hours=7), "WS-HR-001", "notepad.exe", "notepad.exe", "explorer.exe", "c" * 64),
        ],
        "DeviceLogonEvents": [
            {"TimeGenerated": at(hours=8), "DeviceName": HOST, "AccountName": "alice", "ActionType": "LogonSuccess",
             "LogonType": "Interactive", "RemoteIP": ""},
            {"TimeGenerated": at(hours=4), "DeviceName": HOST, "AccountName": "admin", "ActionType": "LogonFailed",
             "LogonType": "Network", "RemoteIP": BAD_IP, "FailureReason": "InvalidUserNameOrPassword"},
        ],
        "DeviceNetworkEvents": [
            {"TimeGenerated": at(hours=5, minutes=30), "DeviceName": HOST, "ActionType": "ConnectionSuccess",
             "RemoteIP": BAD_IP, "RemotePort": 443, "RemoteUrl": "login-contoso.example",
             "InitiatingProcessFileName": "powershell.exe"},
        ],
        "DeviceFileEvents": [
            {"TimeGenerated": at(hours=5, minutes=45), "DeviceName": HOST, "ActionType": "FileCreated",
             "FileName": "mimikatz.exe", "FolderPath": "C:\\Users\\alice\\AppData\\Local\\Temp\\mimikatz.exe",
             "SHA256": "a" * 64, "InitiatingProcessFileName": "powershell.exe"},
        ],
        "EmailEvents": [
            {"TimeGenerated": at(hours=4), "NetworkMessageId": "msg-1", "SenderFromAddress": "it@contoso-help.example",
             "RecipientEmailAddress": ALICE, "Subject": "Password expiry", "DeliveryAction": "Delivered",
             "LatestDeliveryLocation": "Inbox", "ThreatTypes": "Phish"},
            {"TimeGenerated": at(hours=4), "NetworkMessageId": "msg-2", "SenderFromAddress": "news@contoso.com",
             "RecipientEmailAddress": BOB, "Subject": "Weekly news", "DeliveryAction": "Delivered",
             "LatestDeliveryLocation": "Inbox"},
        ],
        "EmailUrlInfo": [
            {"TimeGenerated": at(hours=4), "NetworkMessageId": "msg-1", "Url": URL,
             "UrlDomain": "login-contoso.example"},
        ],
        "UrlClickEvents": [
            {"TimeGenerated": at(hours=3, minutes=55), "AccountUpn": ALICE, "Url": URL, "ActionType": "ClickAllowed",
             "IsClickedThrough": 1, "ThreatTypes": "Phish", "NetworkMessageId": "msg-1", "IPAddress": "10.0.0.5"},
        ],
        "ThreatIntelIndicators": [
            {"TimeGenerated": at(days=3), "Id": "ind-1", "ObservableKey": "ipv4-addr:value", "ObservableValue": BAD_IP,
             "Confidence": 60, "ValidFrom": at(days=20), "ValidUntil": iso(now + timedelta(days=30)), "IsActive": 1,
             "Tags": "phishing-kit"},
            {"TimeGenerated": at(days=1), "Id": "ind-1", "ObservableKey": "ipv4-addr:value", "ObservableValue": BAD_IP,
             "Confidence": 90, "ValidFrom": at(days=20), "ValidUntil": iso(now + timedelta(days=30)), "IsActive": 1,
             "Tags": "phishing-kit"},
            {"TimeGenerated": at(days=1), "Id": "ind-2", "ObservableKey": "ipv4-addr:value", "ObservableValue": BAD_IP,
             "Confidence": 40, "ValidFrom": at(days=60), "ValidUntil": at(days=10), "IsActive": 1, "Tags": "old"},
            {"TimeGenerated": at(days=1), "Id": "ind-3", "ObservableKey": "url:value", "ObservableValue": URL,
             "Confidence": 80, "ValidFrom": at(days=2), "ValidUntil": iso(now + timedelta(days=5)), "IsActive": 1},
        ],
    }


def insert(conn: sqlite3.Connection, now: datetime) -> dict[str, list[dict[str, Any]]]:
    """Write the world into ``conn`` (every column of each table filled, absent ones as the contract stores them);
    the full rows as inserted."""
    tables = load_table_columns()
    written: dict[str, list[dict[str, Any]]] = {}
    for table, table_rows in rows(now).items():
        columns = tables[table]
        full = [{name: row.get(name, _DEFAULTS.get(kind, "")) for name, kind in columns} for row in table_rows]
        conn.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' for _ in columns)})",
                         [[r[name] for name, _ in columns] for r in full])
        written[table] = full
    conn.commit()
    return written


def _j(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _signin(time: str, upn: str, result: str, ip: str, country: str, app: str, description: str = "") -> dict:
    return {"TimeGenerated": time, "UserPrincipalName": upn, "ResultType": result, "ResultDescription": description,
            "IPAddress": ip, "Location": country, "AppDisplayName": app, "RiskLevelDuringSignIn": "none",
            "LocationDetails": _j({"countryOrRegion": country})}


def _process(time: str, device: str, name: str, command: str, parent: str, sha256: str) -> dict:
    return {"TimeGenerated": time, "DeviceName": device, "AccountName": "alice", "AccountUpn": ALICE, "FileName": name,
            "ProcessCommandLine": command, "InitiatingProcessFileName": parent, "SHA256": sha256}


def insert_rows_of(conn: sqlite3.Connection) -> dict[str, list[dict[str, Any]]]:
    """The evidence tables' rows as the database holds them (what the independent evaluation reads)."""
    tables = load_table_columns()
    out = {}
    for table in rows(datetime.now()):
        names = [name for name, _ in tables[table]]
        out[table] = [dict(zip(names, row, strict=True)) for row in conn.execute(f"SELECT * FROM {table}")]
    return out
