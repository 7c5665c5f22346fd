"""The demo's activity tables: schema and stored types, the incidents' evidence, determinism, volume, indexes.

Each story test finds the incidents of one kind by their title, reads the entities their alerts name, and looks
for the rows the alerts describe through the entity indexes (``kql_lower(column) = kql_lower(?)``), so it checks
the generator's links and the columns others search by at once.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import pytest

from bot.demo import columns, generator, store
from bot.demo.generator import DemoData
from bot.demo.templates import TEMPLATE_BY_KEY
from bot.sentinel import catalog
from bot.sentinel.catalog import ACTIVITY_TABLES, ENTITY_COLUMNS
from bot.sentinel.demo_sql import iso

NOW = datetime(2026, 11, 21, 14, 3, 7, 123456, tzinfo=UTC)
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
REQUIRED = ("SigninLogs", "AADNonInteractiveUserSignInLogs", "AuditLogs", "IdentityInfo", "AADRiskyUsers",
            "AADUserRiskEvents", "BehaviorAnalytics", "DeviceInfo", "DeviceProcessEvents", "DeviceNetworkEvents",
            "DeviceLogonEvents", "DeviceFileEvents", "EmailEvents", "EmailUrlInfo", "UrlClickEvents",
            "OfficeActivity", "ThreatIntelIndicators", "ThreatIntelligenceIndicator")
SQLITE_TYPES = {"string": {"text"}, "dynamic": {"text"}, "datetime": {"text", "null"}, "int": {"integer", "null"},
                "long": {"integer", "null"}, "bool": {"integer", "null"}, "real": {"real", "null"}}


@cache
def data(seed: int = 7, now: datetime = NOW, days: int = 35, volume: int = 1) -> DemoData:
    return generator.generate(seed, now, days, volume)


@cache
def database() -> sqlite3.Connection:
    rows = data()
    return store.create_database(rows.incident_rows, rows.alert_rows, tables=rows.tables,
                                 valid_from=iso(NOW))


def check_value(kind: str, value: Any, where: str) -> None:
    if kind == "string":
        assert isinstance(value, str), where
    elif kind == "dynamic":
        assert isinstance(value, str), where
        if value:
            json.loads(value)
    elif kind == "datetime":
        assert value is None or (isinstance(value, str) and TIMESTAMP.match(value)), where
    elif kind == "bool":
        assert value in (None, 0, 1) and type(value) in (int, type(None)), where
    elif kind in ("int", "long"):
        assert value is None or type(value) is int, where
    elif kind == "real":
        assert value is None or type(value) is float, where
    else:  # pragma: no cover - a new type in tables.json needs a rule here
        pytest.fail(f"unknown column type {kind} at {where}")


# --- schema and stored types ---------------------------------------------------------------------------------------


def test_every_required_table_is_generated() -> None:
    assert set(REQUIRED) <= set(ACTIVITY_TABLES)
    for table in REQUIRED:
        assert len(data().tables[table]) >= 20, table


@pytest.mark.parametrize("table", ACTIVITY_TABLES)
def test_generated_rows_hold_only_schema_columns_with_their_storage_types(table: str) -> None:
    kinds = dict(catalog.schema()[table])
    for row in data().tables[table]:
        assert set(row) <= set(kinds), (table, set(row) - set(kinds))
        for column, value in columns.full_row(table, row).items():
            check_value(kinds[column], value, f"{table}.{column}")


@pytest.mark.parametrize("table", ACTIVITY_TABLES)
def test_stored_tables_have_the_schema_columns_and_types(table: str) -> None:
    conn = database()
    stored = [(r[1], r[2]) for r in conn.execute(f"PRAGMA table_info({table})")]
    assert [name for name, _ in stored] == [name for name, _ in catalog.schema()[table]]
    kinds = dict(catalog.schema()[table])
    found: dict[str, set[str]] = {name: set() for name in kinds}
    for name in kinds:
        found[name] = {t for (t,) in conn.execute(f'SELECT DISTINCT typeof("{name}") FROM {table}')}
    for name, types in found.items():
        assert types <= SQLITE_TYPES[kinds[name]], (table, name, types)
    count = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    assert count == len(data().tables[table])
    assert conn.execute(f"SELECT COUNT(*) FROM {table} WHERE Type = ?", (table,)).fetchone()[0] == count


def test_a_stored_row_equals_the_generated_row_completed() -> None:
    conn = database()
    for table in ACTIVITY_TABLES:
        row = data().tables[table][0]
        names = list(row)
        where = " AND ".join(f'"{n}" IS ?' for n in names)
        stored = conn.execute(f"SELECT * FROM {table} WHERE {where}", list(row.values())).fetchone()
        assert stored is not None, table
        assert dict(stored) == columns.full_row(table, row)


# --- the incidents' evidence ---------------------------------------------------------------------------------------


def entities_of(alert_ids: list[str]) -> dict[str, set[str]]:
    """Entity kind -> values named by these alerts (accounts as UPNs, hosts as names, files as hashes too)."""
    conn = database()
    named: dict[str, set[str]] = {}
    marks = ", ".join("?" for _ in alert_ids)
    for (text,) in conn.execute(f"SELECT Entities FROM SecurityAlert WHERE SystemAlertId IN ({marks})", alert_ids):
        for item in _walk(json.loads(text)):
            kind = item.get("Type")
            if kind == "account" and "UserPrincipalName" in item:  # never Name@UPNSuffix: Name may be a display name
                named.setdefault("account", set()).add(item["UserPrincipalName"])
            elif kind == "host":
                named.setdefault("host", set()).add(item["HostName"])
            elif kind == "ip":
                named.setdefault("ip", set()).add(item["Address"])
            elif kind in ("url", "dns", "filehash", "mailbox"):
                key = {"url": "Url", "dns": "DomainName", "filehash": "Value", "mailbox": "MailboxPrimaryAddress"}
                named.setdefault(kind, set()).add(item[key[kind]])
            elif kind == "process" and "ParentProcess" in item:  # the alert's process, not its (inline) parent
                named.setdefault("command", set()).add(item["CommandLine"])
    return named


def _walk(value: Any):
    if isinstance(value, dict):
        yield value
        for inner in value.values():
            yield from _walk(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _walk(inner)


def incidents_of(key: str) -> list[tuple[str, dict[str, set[str]]]]:
    """(description, entities) of each incident of one template, as of its first row."""
    title = TEMPLATE_BY_KEY[key].title
    seen: dict[int, dict] = {}
    for row in data().incident_rows:
        if row["Title"] == title and row["IncidentNumber"] not in seen:
            seen[row["IncidentNumber"]] = row
    found = [(row["Description"], entities_of(json.loads(row["AlertIds"]))) for row in seen.values()]
    assert found, key
    return found


def rows_for(table: str, kind: str, value: str, where: str = "", *args: Any) -> list[sqlite3.Row]:
    """Rows of ``table`` naming ``value`` in any of its ``kind`` columns, through the entity indexes."""
    conn = database()
    out: list[sqlite3.Row] = []
    for expression in ENTITY_COLUMNS[table][kind]:
        sql = f"SELECT * FROM {table} WHERE kql_lower({expression}) = kql_lower(?) {where}"
        out.extend(conn.execute(sql, (value, *args)).fetchall())
    return out


def test_mfa_fatigue_incidents_show_the_denied_pushes_they_count() -> None:
    for description, named in incidents_of("mfa_fatigue"):
        (account,), (ip,) = named["account"], named["ip"]
        stated = int(re.search(r"denied (\d+) MFA push", description).group(1))
        denials = rows_for("SigninLogs", "account", account, "AND ResultType = '500121' AND IPAddress = ?", ip)
        assert len(denials) == stated, description
        for row in denials:
            status = json.loads(row["Status"])
            assert status["errorCode"] == 500121
            assert status["additionalDetails"] == "MFA denied; user declined the authentication"
            assert json.loads(row["MfaDetail"])["authMethod"] == "Mobile app notification"
        assert rows_for("AADUserRiskEvents", "account", account, "AND IpAddress = ?", ip)


def test_phishing_incidents_show_the_delivery_the_link_and_the_click() -> None:
    for _, named in incidents_of("phish_click"):
        (mailbox,), urls = named["mailbox"], named["url"]
        delivered = rows_for("EmailEvents", "account", mailbox, "AND ThreatTypes = 'Phish'")
        assert delivered
        message_ids = {row["NetworkMessageId"] for row in delivered}
        linked = [r for url in urls for r in rows_for("EmailUrlInfo", "url", url)
                  if r["NetworkMessageId"] in message_ids]
        assert linked
        clicks = [r for url in urls for r in rows_for("UrlClickEvents", "url", url)
                  if r["NetworkMessageId"] in message_ids and r["AccountUpn"] == mailbox]
        assert clicks and all(c["IsClickedThrough"] == 1 for c in clicks)


@pytest.mark.parametrize("key", ["powershell", "ransomware", "scheduled_task", "exploration"])
def test_endpoint_incidents_show_the_process_tree_file_and_connection(key: str) -> None:
    for _, named in incidents_of(key):
        (host,) = {h.lower() for h in named["host"]}
        processes = rows_for("DeviceProcessEvents", "host", host)
        if "command" in named:  # the alerts name the process: it ran there, under its parent, with its hash
            tree = [row for row in processes if row["ProcessCommandLine"] in named["command"]]
            assert tree, (key, host)
            assert all(row["InitiatingProcessFileName"] for row in tree)
            assert {row["SHA256"] for row in tree} & named["filehash"]
        else:  # they name a file: the event that wrote it is there, by its hash
            assert any(rows_for("DeviceFileEvents", "hash", sha) for sha in named["filehash"]), (key, host)
        assert rows_for("DeviceNetworkEvents", "host", host)


def test_threat_intelligence_incidents_find_their_indicator_in_both_tables() -> None:
    for _, named in incidents_of("ti_domain"):
        (domain,) = named["dns"]
        assert rows_for("ThreatIntelIndicators", "indicator", domain, "AND ObservableKey = 'domain-name:value'")
        legacy = rows_for("ThreatIntelligenceIndicator", "domain", domain)
        assert legacy and all(row["Active"] == 1 and row["ConfidenceScore"] > 0 for row in legacy)


def test_risky_user_incidents_show_the_risk_state_and_detection() -> None:
    for _, named in incidents_of("leaked_credentials"):
        (account,) = named["account"]
        assert rows_for("AADRiskyUsers", "account", account, "AND RiskLevel = 'high'")
        assert rows_for("AADUserRiskEvents", "account", account, "AND RiskEventType = 'leakedCredentials'")


def test_privileged_role_incidents_show_the_audit_record_by_the_admin_for_the_user() -> None:
    for description, named in incidents_of("privileged_role"):
        users = named["account"]
        added = [row for account in users
                 for row in rows_for("AuditLogs", "account", account, "AND OperationName = 'Add member to role'")]
        assert added, description
        described = []  # the record of this incident (the same admin may add the same user again elsewhere)
        for row in added:
            initiator = json.loads(row["InitiatedBy"])["user"]["userPrincipalName"]
            target = json.loads(row["TargetResources"])[0]
            role = target["modifiedProperties"][0]["newValue"].strip('"')
            if {initiator, target["userPrincipalName"]} == users and f"'{role}'" in description:
                described.append(row)
        assert described, description


def test_sign_in_alerts_show_the_sign_in_they_describe() -> None:
    names = {"Unfamiliar sign-in properties": "0",
             "Sign-ins from IPs that attempt sign-ins to disabled accounts": "50057"}
    checked = 0
    for alert in data().alert_rows:
        if alert["AlertName"] in names:
            named = entities_of([alert["SystemAlertId"]])
            (account,), ip = named["account"], sorted(named["ip"])[0]
            rows = rows_for("SigninLogs", "account", account, "AND IPAddress = ? AND ResultType = ?", ip,
                            names[alert["AlertName"]])
            assert rows, alert["AlertName"]
            checked += 1
    assert checked > 50


def test_every_person_signs_in_from_home_every_day() -> None:
    days = Counter()
    for row in data().tables["SigninLogs"]:
        if row["ResultType"] == "0" and row["IPAddress"].startswith("192.0.2."):
            days[row["UserPrincipalName"]] += 1
    assert len(days) == 35  # 31 users, 3 admins, the service account
    assert min(days.values()) >= 35


# --- determinism, time, volume -------------------------------------------------------------------------------------


def test_the_next_day_keeps_the_shared_days_activity() -> None:
    today, tomorrow = data(), data(now=NOW + timedelta(days=1))
    # Evidence precedes its incident (a TI indicator by up to two days): the new day adds rows to the two before it.
    low, high = iso(NOW - timedelta(days=30)), iso(NOW - timedelta(days=3))
    for table in ACTIVITY_TABLES:
        def shared(rows: list[dict]) -> list[str]:
            return sorted(json.dumps(r, sort_keys=True) for r in rows if low <= r["TimeGenerated"] < high)
        assert shared(today.tables[table]) == shared(tomorrow.tables[table]), table


def test_another_seed_gives_other_activity() -> None:
    assert data(seed=8, days=2).tables["SigninLogs"] != data(days=2).tables["SigninLogs"]


def test_volume_multiplies_the_activity_not_the_estate() -> None:
    small, big = data(days=2), data(days=2, volume=3)
    background = {"AADNonInteractiveUserSignInLogs": lambda r: True,
                  "DeviceLogonEvents": lambda r: r["LogonType"] in ("Interactive", "Service"),
                  "EmailEvents": lambda r: r["ThreatTypes"] == "",
                  "OfficeActivity": lambda r: r["Operation"] == "FileAccessed"}
    for table, ordinary in background.items():
        counts = [sum(1 for row in rows.tables[table] if ordinary(row)) for rows in (small, big)]
        assert counts[0] > 0 and counts[1] == 3 * counts[0], (table, counts)
    for table in ("IdentityInfo", "DeviceInfo"):
        assert len(big.tables[table]) == len(small.tables[table])


# --- indexes -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("table", ACTIVITY_TABLES)
def test_entity_lookups_and_windows_use_an_index(table: str) -> None:
    conn = database()
    for expressions in ENTITY_COLUMNS[table].values():
        for expression in expressions:
            plan = conn.execute(f"EXPLAIN QUERY PLAN SELECT * FROM {table} WHERE kql_lower({expression}) = "
                                "kql_lower(?) AND TimeGenerated > ?", ("x", "2026")).fetchall()
            assert any("USING INDEX" in row[3] for row in plan), (table, expression, plan)
    plan = conn.execute(f"EXPLAIN QUERY PLAN SELECT * FROM {table} WHERE TimeGenerated > ?", ("9999",)).fetchall()
    assert any("USING INDEX" in row[3] for row in plan), (table, plan)


# --- the latest incident rows the filtered lists read ----------------------------------------------------------------


def test_latest_incident_rows_follow_appended_and_updated_incident_rows() -> None:
    """Status, "unassigned" and the casefolded texts the filters read stay those of the incident's latest row."""
    conn = store.connect()
    database().backup(conn)
    number, row_id = conn.execute("SELECT IncidentNumber, IncidentRowId FROM LatestIncident WHERE NextTime IS NULL "
                                  "AND Unassigned = 1 LIMIT 1").fetchone()
    row = dict(conn.execute("SELECT * FROM SecurityIncident WHERE rowid = ?", (row_id,)).fetchone())
    owner = json.dumps({"objectId": "x", "email": "Ana@Contoso.com", "assignedTo": "Ana", "userPrincipalName": ""})
    later = row | {"TimeGenerated": "9999-01-01T00:00:00.000000Z", "Status": "Active", "Owner": owner,
                   "Description": "Straße TÜR"}
    names = ", ".join(f'"{k}"' for k in later)
    conn.execute(f"INSERT INTO SecurityIncident ({names}) VALUES ({', '.join('?' * len(later))})", list(later.values()))
    latest = conn.execute("SELECT Status, Unassigned, DescriptionFolded FROM LatestIncident WHERE IncidentNumber = ? "
                          "AND NextTime IS NULL", (number,)).fetchone()
    assert tuple(latest) == ("Active", 0, "strasse tür")
    conn.execute("UPDATE SecurityIncident SET Status = 'Closed', Owner = ?, Title = 'ÉTÉ' WHERE IncidentNumber = ? "
                 "AND TimeGenerated = ?", ("{}", number, later["TimeGenerated"]))
    latest = conn.execute("SELECT Status, Unassigned, TitleFolded FROM LatestIncident WHERE IncidentNumber = ? "
                          "AND NextTime IS NULL", (number,)).fetchone()
    assert tuple(latest) == ("Closed", 1, "été")
    # the alerts it names lead to it, for the entity pivot
    alert_ids = json.loads(row["AlertIds"])
    assert alert_ids and all(conn.execute("SELECT 1 FROM IncidentAlert WHERE SystemAlertId = ? AND IncidentNumber = ?",
                                          (a, number)).fetchone() for a in alert_ids)


def test_the_background_grows_with_the_volume_up_to_10x_then_more_slowly() -> None:
    """1x and 10x keep the background they always had (their tests and figures); past 10x it keeps growing, never
    shrinking, but as the square root, so the 100x workspace fits in memory."""
    from bot.demo.activity import background_rounds

    assert [background_rounds(v) for v in range(1, 11)] == list(range(1, 11))
    rounds = [background_rounds(v) for v in range(10, 1001)]
    assert rounds == sorted(rounds) and background_rounds(15) > 10
    assert background_rounds(100) == 32 and background_rounds(1000) == 100
