"""The demo workspace generator: schema, determinism, numbering, histories, windows and shape of the data."""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from datetime import UTC, date, datetime, timedelta, timezone
from functools import cache
from pathlib import Path

import pytest

from bot.demo import catalog, generator
from bot.demo.generator import DEMO_SUFFIX, DemoData, generate

TABLES = {table: entry["columns"] for table, entry in
          json.loads((Path(__file__).resolve().parents[2] / "bot/sentinel/tables.json").read_text()).items()}
NOW = datetime(2026, 11, 21, 14, 3, 7, 123456, tzinfo=UTC)
SEEDS = (0, 7, 20241)
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
WINDOWS = {"last_1h": timedelta(hours=1), "last_24h": timedelta(hours=24), "last_3d": timedelta(days=3),
           "last_7d": timedelta(days=7), "last_14d": timedelta(days=14), "last_30d": timedelta(days=30)}
CLASSIFICATION_REASONS = {"TruePositive": {"SuspiciousActivity"}, "BenignPositive": {"SuspiciousButExpected"},
                          "FalsePositive": {"IncorrectAlertLogic", "InaccurateData"}, "Undetermined": {""}}


@cache  # generating takes a few tenths of a second; tests only read the rows
def data(seed: int = 7, now: datetime = NOW, days: int = 35) -> DemoData:
    return generate(seed, now, days)


def ts(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def by_incident(rows: list[dict]) -> dict[int, list[dict]]:
    grouped: dict[int, list[dict]] = defaultdict(list)
    for row in rows:
        grouped[row["IncidentNumber"]].append(row)
    for history in grouped.values():
        history.sort(key=lambda r: r["TimeGenerated"])  # times are unique per incident (tested below)
    return grouped


def latest_rows(rows: list[dict], now: datetime) -> dict[int, dict]:
    cutoff = ts(now)
    latest: dict[int, dict] = {}
    for row in rows:
        if row["TimeGenerated"] <= cutoff:
            current = latest.get(row["IncidentNumber"])
            if current is None or row["TimeGenerated"] > current["TimeGenerated"]:
                latest[row["IncidentNumber"]] = row
    return latest


def creation_rows(rows: list[dict]) -> dict[int, dict]:
    return {number: history[0] for number, history in by_incident(rows).items()}


# --- schema and storage types ---------------------------------------------------------------------


def check_storage_type(kind: str, value: object, column: str) -> None:
    if kind == "datetime":
        assert value is None or (isinstance(value, str) and TIMESTAMP.match(value)), (column, value)
    elif kind == "dynamic":
        assert isinstance(value, str), (column, value)
        json.loads(value)
    elif kind == "bool":
        assert value in (0, 1) and type(value) is int, (column, value)
    elif kind == "real":
        assert value is None or type(value) is float, (column, value)
    elif kind in ("int", "long"):
        assert type(value) is int, (column, value)
    elif kind == "string":
        assert isinstance(value, str), (column, value)
    else:  # pragma: no cover - a new type in tables.json needs a rule here
        pytest.fail(f"unknown column type {kind} for {column}")


@pytest.mark.parametrize("table, attribute", [("SecurityIncident", "incident_rows"), ("SecurityAlert", "alert_rows")])
def test_rows_have_exactly_the_schema_columns_with_storage_types(table: str, attribute: str) -> None:
    columns = {c["name"]: c["type"] for c in TABLES[table]}
    rows = getattr(data(), attribute)
    assert rows
    for row in rows:
        assert set(row) == set(columns)
        for column, kind in columns.items():
            check_storage_type(kind, row[column], column)


def test_json_columns_parse_to_the_expected_shapes() -> None:
    for row in data().incident_rows:
        owner = json.loads(row["Owner"])
        assert set(owner) == {"objectId", "email", "assignedTo", "userPrincipalName"}
        additional = json.loads(row["AdditionalData"])
        assert set(additional) == {"alertsCount", "bookmarksCount", "commentsCount", "alertProductNames", "tactics",
                                   "techniques"}
        for column in ("AlertIds", "BookmarkIds", "Comments", "Labels", "Tasks", "RelatedAnalyticRuleIds"):
            assert isinstance(json.loads(row[column]), list), column
        for comment in json.loads(row["Comments"]):
            assert set(comment) == {"message", "createdTimeUtc", "author"}
            assert set(comment["author"]) == {"name", "email"}
        assert row["Type"] == "SecurityIncident" and row["SourceSystem"] == "Azure"
        assert row["ProviderName"] == "Azure Sentinel"
        assert row["ProviderIncidentId"] == str(row["IncidentNumber"])
        assert row["TenantId"] == generator.TENANT_ID
        assert row["Description"].endswith(DEMO_SUFFIX)
        assert row["IncidentUrl"] == (
            "https://portal.azure.com/#asset/Microsoft_Azure_Security_Insights/Incident/subscriptions/"
            f"{generator.SUBSCRIPTION_ID}/resourceGroups/soc-demo-rg/providers/Microsoft.OperationalInsights/"
            f"workspaces/sentinel-demo-ws/providers/Microsoft.SecurityInsights/Incidents/{row['IncidentName']}"
        )
    for row in data().alert_rows:
        assert isinstance(json.loads(row["Entities"]), list)
        assert isinstance(json.loads(row["ExtendedProperties"]), dict)
        assert isinstance(json.loads(row["Techniques"]), list)
        assert row["SubTechniques"] == "" or isinstance(json.loads(row["SubTechniques"]), list)
        assert row["IsIncident"] == 0 and row["Type"] == "SecurityAlert" and row["VendorName"] == "Microsoft"
        assert row["Status"] in ("New", "InProgress", "Resolved", "Dismissed")
        assert row["AlertSeverity"] in generator.SEVERITIES
        assert all(t for t in row["Tactics"].split(","))


def test_json_text_is_compact() -> None:
    row = data().incident_rows[-1]
    for column in ("AdditionalData", "Owner", "AlertIds"):
        assert row[column] == json.dumps(json.loads(row[column]), separators=(",", ":"))
    alert = data().alert_rows[-1]
    assert alert["Entities"] == json.dumps(json.loads(alert["Entities"]), separators=(",", ":"))


def test_rows_load_into_the_demo_store() -> None:
    from bot.demo.store import create_database

    conn = create_database(data().incident_rows, data().alert_rows)
    try:
        assert conn.execute("SELECT COUNT(*) FROM SecurityIncident").fetchone()[0] == len(data().incident_rows)
        assert conn.execute("SELECT COUNT(*) FROM AlertEntity").fetchone()[0] > len(data().alert_rows)
    finally:
        conn.close()


# --- determinism and time ------------------------------------------------------------------------


@pytest.mark.slow
def test_same_seed_and_day_gives_identical_rows() -> None:
    assert generate(7, NOW) == data(7, NOW)


@pytest.mark.parametrize("moved", [timedelta(hours=2), timedelta(hours=-14), timedelta(hours=9, minutes=56)])
def test_moving_now_within_the_day_changes_nothing(moved: timedelta) -> None:
    later = NOW + moved
    assert later.date() == NOW.date()
    assert data(7, later) == data(7, NOW)


def test_next_day_keeps_the_overlapping_incidents_identical() -> None:
    today, tomorrow = data(7, NOW), data(7, NOW + timedelta(days=1))
    assert tomorrow.generated_until == today.generated_until + timedelta(days=1)
    # Rows both runs keep (before the earlier run's horizon) are identical, for the shared days.
    horizon = ts(today.generated_until + generator.UPDATE_HORIZON)
    first_shared_day = ts(datetime.combine(NOW.date() - timedelta(days=33), datetime.min.time(), UTC))
    shared_numbers = {r["IncidentNumber"] for r in today.incident_rows if r["CreatedTime"] >= first_shared_day}
    assert len(shared_numbers) > 300

    def incident_view(rows: list[dict]) -> dict[int, list[dict]]:
        return {n: [r for r in h if r["TimeGenerated"] < horizon]
                for n, h in by_incident(rows).items() if n in shared_numbers}

    assert incident_view(tomorrow.incident_rows) == incident_view(today.incident_rows)
    created_today = creation_rows(today.incident_rows)
    created_tomorrow = creation_rows(tomorrow.incident_rows)
    for number in shared_numbers:
        assert created_tomorrow[number]["Title"] == created_today[number]["Title"]
        assert created_tomorrow[number]["AlertIds"] == created_today[number]["AlertIds"]
    # Alerts first emitted well inside the shared days (incident alerts precede their incident by at
    # most 90 minutes) are the same, with the same rows.
    low = ts(parse(first_shared_day) + timedelta(hours=2))
    high = ts(today.generated_until - timedelta(hours=3))
    first_seen: dict[str, str] = {}
    for alert in today.alert_rows:
        first_seen[alert["SystemAlertId"]] = min(first_seen.get(alert["SystemAlertId"], "~"), alert["TimeGenerated"])
    shared_alerts = {i for i, t in first_seen.items() if low <= t <= high}
    assert len(shared_alerts) > 2000

    def alert_view(rows: list[dict]) -> list[dict]:
        return sorted((a for a in rows if a["SystemAlertId"] in shared_alerts and a["TimeGenerated"] < horizon),
                      key=lambda a: (a["SystemAlertId"], a["TimeGenerated"]))

    assert alert_view(tomorrow.alert_rows) == alert_view(today.alert_rows)


def test_data_does_not_depend_on_the_process_hash_seed() -> None:
    # str hashes are salted per process: a generator using hash() would differ between runs.
    script = (
        "import hashlib, json, sys; from datetime import datetime, timezone; "
        "from bot.demo.generator import generate; "
        "d = generate(3, datetime(2026, 5, 4, 10, tzinfo=timezone.utc), days=3); "
        "print(hashlib.sha256(json.dumps([d.incident_rows, d.alert_rows]).encode()).hexdigest())"
    )
    root = Path(__file__).resolve().parents[2]
    digests = {
        subprocess.run([sys.executable, "-c", script], cwd=root, env={**os.environ, "PYTHONHASHSEED": salt},
                       capture_output=True, text=True, check=True).stdout.strip()
        for salt in ("1", "2")
    }
    local = generate(3, datetime(2026, 5, 4, 10, tzinfo=UTC), days=3)
    assert digests == {hashlib.sha256(json.dumps([local.incident_rows, local.alert_rows]).encode()).hexdigest()}


def test_different_seed_gives_different_data() -> None:
    a, b = data(7, NOW), data(8, NOW)
    assert {r["IncidentName"] for r in a.incident_rows}.isdisjoint({r["IncidentName"] for r in b.incident_rows})
    titles_a = [r["Title"] for r in creation_rows(a.incident_rows).values()]
    titles_b = [r["Title"] for r in creation_rows(b.incident_rows).values()]
    assert titles_a != titles_b


def test_generated_until_and_update_horizon() -> None:
    result = data()
    assert result.generated_until == datetime(2026, 11, 22, tzinfo=UTC)
    horizon = ts(result.generated_until + generator.UPDATE_HORIZON)
    assert max(r["TimeGenerated"] for r in result.incident_rows) < horizon
    assert max(r["TimeGenerated"] for r in result.alert_rows) < horizon
    # Rows after "now" exist (the rest of today, later updates): the query layer hides them.
    assert any(r["TimeGenerated"] > ts(NOW) for r in result.incident_rows)
    first_day = ts(datetime(2026, 10, 18, tzinfo=UTC))
    assert min(r["CreatedTime"] for r in result.incident_rows) >= first_day


def test_now_must_be_timezone_aware() -> None:
    with pytest.raises(ValueError):
        generate(7, datetime(2026, 11, 21, 12, 0))


def test_now_in_another_timezone_means_its_utc_day() -> None:
    local = NOW.astimezone(timezone(timedelta(hours=12)))
    assert local.date() != NOW.date()
    assert generate(7, local) == data(7, NOW)  # (not through the cache: equal datetimes share a key)


# --- numbering ------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_incident_numbers_are_contiguous_and_follow_the_daily_counts(seed: int) -> None:
    result = data(seed)
    created = creation_rows(result.incident_rows)
    numbers = sorted(created)
    first_day = NOW.date() - timedelta(days=34)
    assert numbers[0] == generator.first_incident_number(seed, first_day)
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    per_day = Counter(r["CreatedTime"][:10] for r in created.values())
    for offset in range(35):
        day = first_day + timedelta(days=offset)
        assert per_day[day.isoformat()] == generator.daily_incident_count(seed, day)
    # Numbers increase with creation time.
    by_time = sorted(created.values(), key=lambda r: r["CreatedTime"])
    assert [r["IncidentNumber"] for r in by_time] == numbers


def test_daily_counts_are_in_range_and_lower_at_weekends() -> None:
    weekday, weekend = [], []
    for offset in range(200):
        day = date(2025, 1, 1) + timedelta(days=offset)
        count = generator.daily_incident_count(3, day)
        assert 8 <= count <= 18
        (weekend if day.weekday() >= 5 else weekday).append(count)
    assert sum(weekend) / len(weekend) < sum(weekday) / len(weekday) - 2


def test_first_incident_number_is_a_running_sum_from_the_epoch() -> None:
    seed = 5
    assert generator.first_incident_number(seed, generator.EPOCH) == generator.FIRST_INCIDENT_NUMBER
    day = date(2026, 3, 1)
    assert (generator.first_incident_number(seed, day + timedelta(days=1))
            == generator.first_incident_number(seed, day) + generator.daily_incident_count(seed, day))


# --- incidents and their alerts -------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_alert_ids_resolve_and_additional_data_matches_the_alerts(seed: int) -> None:
    result = data(seed)
    alerts = {}
    for alert in sorted(result.alert_rows, key=lambda a: a["TimeGenerated"]):
        alerts.setdefault(alert["SystemAlertId"], alert)  # first row of each alert
    for row in result.incident_rows:
        ids = json.loads(row["AlertIds"])
        assert 1 <= len(ids) <= 5
        assert all(i in alerts for i in ids)
        own = [alerts[i] for i in ids]
        additional = json.loads(row["AdditionalData"])
        assert additional["alertsCount"] == len(ids)
        assert additional["commentsCount"] == len(json.loads(row["Comments"]))
        assert additional["bookmarksCount"] == len(json.loads(row["BookmarkIds"]))
        assert set(additional["alertProductNames"]) == {a["ProductName"] for a in own}
        assert set(additional["tactics"]) == {t for a in own for t in a["Tactics"].split(",")}
        assert set(additional["techniques"]) == {t for a in own for t in json.loads(a["Techniques"])}
        created = row["CreatedTime"]
        for alert in own:
            assert alert["TimeGenerated"] <= created
            assert parse(created) - parse(alert["TimeGenerated"]) < timedelta(hours=3)
        assert row["FirstActivityTime"] == min(a["StartTime"] for a in own)
        assert row["LastActivityTime"] == max(a["EndTime"] for a in own)


@pytest.mark.parametrize("seed", SEEDS)
def test_update_histories_are_ordered_and_consistent(seed: int) -> None:
    order = {"New": 0, "Active": 1, "Closed": 2}
    for number, history in by_incident(data(seed).incident_rows).items():
        creation = history[0]
        assert creation["Status"] == "New"
        assert creation["FirstModifiedTime"] is None
        assert creation["TimeGenerated"] == creation["CreatedTime"] == creation["LastModifiedTime"]
        assert creation["ModifiedBy"] == "Incident created from alert"
        times = [r["TimeGenerated"] for r in history]
        assert times == sorted(set(times)), number  # strictly increasing
        for row in history:
            for column in ("CreatedTime", "IncidentName", "Title", "AlertIds", "Description", "IncidentUrl"):
                assert row[column] == creation[column]
            assert row["LastModifiedTime"] == row["TimeGenerated"]
        for row in history[1:]:
            assert row["FirstModifiedTime"] == history[1]["TimeGenerated"]
            assert row["ModifiedBy"]
        statuses = [order[r["Status"]] for r in history]
        assert statuses == sorted(statuses), number
        comments = [len(json.loads(r["Comments"])) for r in history]
        assert comments == sorted(comments)
        for row in history:
            owner = json.loads(row["Owner"])
            if row["Status"] == "Closed":
                assert row["Classification"] in CLASSIFICATION_REASONS
                assert row["ClassificationReason"] in CLASSIFICATION_REASONS[row["Classification"]]
                assert row["ClassificationComment"]
                assert row["ClosedTime"] is not None and row["ClosedTime"] <= row["TimeGenerated"]
            else:
                assert row["Classification"] == row["ClassificationReason"] == row["ClassificationComment"] == ""
                assert row["ClosedTime"] is None
            if row["Status"] == "Active":
                assert owner["assignedTo"] and owner["email"].endswith(("@contoso.com", "@example.com"))
            if owner["objectId"] is None:
                assert owner == {"objectId": None, "email": None, "assignedTo": None, "userPrincipalName": None}


def test_histories_have_the_expected_kinds_of_updates() -> None:
    rows = [r for seed in SEEDS for r in data(seed).incident_rows]
    modified_by = Counter(r["ModifiedBy"] for r in rows)
    assert modified_by["Incident created from alert"] > 1000
    assert sum(modified_by[name] for name in catalog.ANALYSTS) > 1500
    assert any(name.startswith("Automation rule - ") for name in modified_by)
    histories = [h for seed in SEEDS for h in by_incident(data(seed).incident_rows).values()]
    escalated = [h for h in histories if len({r["Severity"] for r in h}) > 1]
    assert escalated
    for history in escalated:
        ranks = [generator.SEVERITIES.index(r["Severity"]) for r in history]
        assert ranks == sorted(ranks, reverse=True)  # only ever raised
    assert any(len(json.loads(h[-1]["Comments"])) >= 2 for h in histories)
    assert any(json.loads(h[-1]["Labels"]) for h in histories)


def test_status_depends_on_age() -> None:
    # State as seen at several moments (rows after the moment are invisible, as in the query layer).
    recent, old, backlog, everything = [], [], [], []
    for seed in SEEDS:
        for days_back in range(0, 8, 2):
            now = NOW - timedelta(days=days_back)
            latest = latest_rows(data(seed).incident_rows, now).values()
            recent += [r for r in latest if parse(r["CreatedTime"]) > now - timedelta(hours=24)]
            old += [r for r in latest if parse(r["CreatedTime"]) < now - timedelta(days=5)]
            backlog += [r for r in latest
                        if r["Status"] == "Active" and parse(r["CreatedTime"]) < now - timedelta(days=14)]
            everything += latest
    assert sum(r["Status"] != "Closed" for r in recent) / len(recent) >= 0.6
    assert sum(r["Status"] == "Closed" for r in old) / len(old) >= 0.75
    assert 0.01 * len(everything) <= len(backlog) <= 0.12 * len(everything)


def test_classifications_and_severities_have_a_realistic_mix() -> None:
    created = [r for seed in SEEDS for r in creation_rows(data(seed).incident_rows).values()]
    severity = Counter(r["Severity"] for r in created)
    share = {s: severity[s] / len(created) for s in generator.SEVERITIES}
    assert 0.10 <= share["High"] <= 0.22
    assert 0.28 <= share["Medium"] <= 0.42
    assert 0.22 <= share["Low"] <= 0.38
    assert 0.13 <= share["Informational"] <= 0.27
    closed = [r for seed in SEEDS for r in latest_rows(data(seed).incident_rows, NOW).values()
              if r["Status"] == "Closed"]
    assert set(Counter(r["Classification"] for r in closed)) == set(CLASSIFICATION_REASONS)
    assert len({r["Title"] for r in created}) >= 25


@pytest.mark.parametrize("seed", SEEDS)
def test_volumes(seed: int) -> None:
    result = data(seed)
    incidents = {r["IncidentNumber"] for r in result.incident_rows}
    assert 350 <= len(incidents) <= 500
    assert 1000 <= len(result.incident_rows) <= 1750
    assert 2000 <= len(result.alert_rows) <= 3500


# --- alerts -------------------------------------------------------------------------------------


def test_duplicate_alert_rows_are_status_updates() -> None:
    rows_by_id: dict[str, list[dict]] = defaultdict(list)
    for row in data().alert_rows:
        rows_by_id[row["SystemAlertId"]].append(row)
    duplicated = [sorted(rows, key=lambda r: r["TimeGenerated"]) for rows in rows_by_id.values() if len(rows) > 1]
    assert 20 <= len(duplicated) <= 0.12 * len(rows_by_id)
    for first, second in duplicated:
        assert second["TimeGenerated"] > first["TimeGenerated"]
        assert second["Status"] in ("InProgress", "Resolved", "Dismissed")
        changed = {k for k in first if first[k] != second[k]}
        assert changed <= {"Status", "TimeGenerated", "ProcessingEndTime"}


def test_standalone_alerts_exist_every_day() -> None:
    result = data()
    in_incidents = {i for r in result.incident_rows for i in json.loads(r["AlertIds"])}
    standalone = Counter(r["TimeGenerated"][:10] for r in result.alert_rows
                         if r["SystemAlertId"] not in in_incidents and r["Status"] == "New")
    for offset in range(35):
        day = (NOW.date() - timedelta(days=offset)).isoformat()
        assert 20 <= standalone[day] <= 110, day


@pytest.mark.parametrize("seed", SEEDS)
def test_alerts_never_pause_for_an_hour(seed: int) -> None:
    # A steady trickle: every sliding hour of the generated span (after the first hour) has alerts.
    start = datetime.combine(NOW.date() - timedelta(days=34), datetime.min.time(), UTC)
    times = sorted(parse(r["TimeGenerated"]) for r in data(seed).alert_rows)
    times = [t for t in times if start <= t < data(seed).generated_until]
    assert times[0] - start < timedelta(hours=1)
    assert max(b - a for a, b in itertools.pairwise(times)) < timedelta(hours=1)
    assert data(seed).generated_until - times[-1] < timedelta(hours=1)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("clock", ["01:00:00", "01:42:10", "07:30:00", "12:00:00", "18:45:30", "23:59:59"])
def test_every_window_has_alerts_and_incidents(seed: int, clock: str) -> None:
    now = datetime.fromisoformat(f"2026-11-21T{clock}+00:00")
    result = data(seed)  # the same rows as generate(seed, now): same UTC day (tested above)
    cutoff = ts(now)
    for name, span in WINDOWS.items():
        start = ts(now - span)
        assert any(start < r["TimeGenerated"] <= cutoff for r in result.alert_rows), name
        if span >= timedelta(hours=24):
            # Incidents created in the window, as the incidents query counts them.
            assert sum(start < r["CreatedTime"] <= cutoff for r in creation_rows(result.incident_rows).values()) >= 5


def test_incidents_created_in_the_last_hour_often() -> None:
    # 8-18 incidents a day cannot fill every hour; they are spread so about half the hours have one.
    created = sorted(r["CreatedTime"] for r in creation_rows(data().incident_rows).values())
    hits = total = 0
    for offset in range(1, 30):
        for minute in range(60, 24 * 60, 13):
            now = datetime.combine(NOW.date() - timedelta(days=offset), datetime.min.time(), UTC)
            now += timedelta(minutes=minute)
            start, end = ts(now - timedelta(hours=1)), ts(now)
            total += 1
            hits += any(start < c <= end for c in created)
    assert hits / total >= 0.4


@pytest.mark.parametrize("seed", SEEDS)
def test_bursts_exist_in_every_seven_day_window(seed: int) -> None:
    per_day_peak: dict[date, int] = {}
    times = sorted(r["TimeGenerated"] for r in data(seed).alert_rows)
    for offset in range(35):
        day = NOW.date() - timedelta(days=offset)
        start = datetime.combine(day, datetime.min.time(), UTC)
        peak = 0
        for minutes in range(0, 21 * 60 + 1, 15):  # 3-hour windows inside the day
            low = start + timedelta(minutes=minutes)
            high = low + timedelta(hours=3)
            peak = max(peak, bisect.bisect_left(times, ts(high)) - bisect.bisect_left(times, ts(low)))
        per_day_peak[day] = peak
    for day, peak in per_day_peak.items():
        if generator.is_burst_day(seed, day):
            assert peak >= 30, day
        else:
            assert peak < 30, day
    days = sorted(per_day_peak)
    for i in range(len(days) - 6):
        assert any(generator.is_burst_day(seed, d) for d in days[i:i + 7])


# --- entities -----------------------------------------------------------------------------------


def walk_ids(item: object, ids: list[str], refs: list[str]) -> None:
    if isinstance(item, dict):
        if "$id" in item:
            ids.append(item["$id"])
        if "$ref" in item:
            refs.append(item["$ref"])
        for value in item.values():
            walk_ids(value, ids, refs)
    elif isinstance(item, list):
        for value in item:
            walk_ids(value, ids, refs)


def test_entities_use_ids_and_refs_like_sentinel() -> None:
    ref_only = 0
    nested_refs = 0
    types: Counter = Counter()
    alerts = data().alert_rows
    for alert in alerts:
        entities = json.loads(alert["Entities"])
        assert entities
        ids: list[str] = []
        refs: list[str] = []
        walk_ids(entities, ids, refs)
        assert len(ids) == len(set(ids))
        assert sorted(ids, key=int) == [str(i) for i in range(1, len(ids) + 1)]
        assert set(refs) <= set(ids)
        nested_refs += bool(refs)
        for item in entities:
            if "Type" not in item:
                assert set(item) == {"$ref"}
                ref_only += 1
            else:
                assert "$id" in item
                types[item["Type"]] += 1
    # Every process alert lists its inline parent process by reference, and about one alert in ten another
    # inline entity, as Defender does.
    assert 0.04 <= ref_only / len(alerts) <= 0.4
    assert nested_refs > 0.2 * len(alerts)
    assert set(types) >= {"account", "host", "ip", "url", "file", "filehash", "process", "mailbox", "dns",
                          "cloud-application"}


def test_entity_values_are_documentation_safe() -> None:
    from bot.sentinel.entities import defined_entities

    for alert in data().alert_rows:
        for item in defined_entities(json.loads(alert["Entities"])):
            if item.get("Type") == "ip":
                assert item["Address"].startswith(("203.0.113.", "198.51.100.", "192.0.2.", "10.")), item
            if item.get("Type") == "dns":
                assert item["DomainName"].endswith((".test", ".example")), item
            if item.get("Type") == "filehash":
                assert re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", item["Value"]), item


def entity_counts(result: DemoData, now: datetime, span: timedelta) -> Counter:
    from bot.sentinel.entities import alert_entity_values

    start, end = ts(now - span), ts(now)
    counts: Counter = Counter()
    seen = set()
    for alert in result.alert_rows:
        if start < alert["TimeGenerated"] <= end and alert["SystemAlertId"] not in seen:
            seen.add(alert["SystemAlertId"])
            for (kind, _), value in alert_entity_values(alert["Entities"]).items():
                counts[(kind, value)] += 1
    return counts


@pytest.mark.parametrize("seed", SEEDS)
def test_noisy_entities_lead_the_top_entities(seed: int) -> None:
    counts = entity_counts(data(seed), NOW, timedelta(days=7))
    top = [key for key, _ in counts.most_common(10)]
    assert ("ip", catalog.SCANNER_IP) in top[:3]
    assert ("account", "svc-backup@contoso.com") in top[:3]
    assert ("host", catalog.KIOSK_HOST) in top
    # Clear leaders: the top two stand well above the typical entity.
    typical = sorted(counts.values())[len(counts) // 2]
    assert counts.most_common(2)[1][1] >= 5 * typical


def test_a_user_and_a_host_recur_in_high_incidents() -> None:
    result = data()
    alerts = {a["SystemAlertId"]: a for a in result.alert_rows}
    users: Counter = Counter()
    hosts: Counter = Counter()
    for row in creation_rows(result.incident_rows).values():
        if row["Severity"] != "High":
            continue
        names = {(item.get("Type"), item.get("Name"), item.get("HostName"))
                 for alert_id in json.loads(row["AlertIds"]) for item in json.loads(alerts[alert_id]["Entities"])}
        users.update({name for kind, name, _ in names if kind == "account"})
        hosts.update({host for kind, _, host in names if kind == "host"})
    assert users["lena.fischer"] >= 4
    assert hosts[catalog.HOT_HOST] >= 3


# --- untrusted text -------------------------------------------------------------------------------

HOSTILE = re.compile(r"ignore (all )?(previous|prior) instructions|<script|<img|SYSTEM OVERRIDE|\u202e", re.I)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_few_incidents_and_alerts_carry_attacker_controlled_text(seed: int) -> None:
    result = data(seed)
    created = creation_rows(result.incident_rows).values()
    hostile_incidents = [r for r in created if HOSTILE.search(r["Title"] + r["Description"])]
    hostile_alerts = [a for a in result.alert_rows if HOSTILE.search(a["Description"] + a["Entities"])]
    assert 2 <= len(hostile_incidents) <= 0.07 * len(created)
    assert 10 <= len(hostile_alerts) <= 0.07 * len(result.alert_rows)
    # Attacker text stays inside well-formed JSON and is still labelled demo data.
    for alert in hostile_alerts:
        json.loads(alert["Entities"])
        assert alert["Description"].endswith(DEMO_SUFFIX)
    assert any("CommandLine" in a["Entities"] and HOSTILE.search(a["Entities"]) for a in hostile_alerts)


# --- cost -----------------------------------------------------------------------------------------


def test_generate_is_fast() -> None:
    start = time.process_time()
    generate(11, NOW)
    # About 0.3 s on the development machine; the bound leaves room for slow CI runners.
    assert time.process_time() - start < 3.0


@pytest.mark.slow
def test_the_regeneration_process_ignores_ctrl_c_and_runs_at_a_lower_priority() -> None:
    """Ctrl+C reaches every process of the terminal's group: the regeneration's worker must not answer it with a
    KeyboardInterrupt traceback (the bot stops it as it stops)."""
    import multiprocessing
    import os
    import signal
    from concurrent.futures import ProcessPoolExecutor

    from bot.demo.backend import regeneration_worker

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                             initializer=regeneration_worker) as pool:
        handler, niceness = pool.submit(_sigint_and_nice).result(timeout=60)
    assert handler == signal.SIG_IGN
    assert niceness >= os.nice(0) + 10 or niceness == 19


def _sigint_and_nice() -> tuple[object, int]:
    import os
    import signal

    return signal.getsignal(signal.SIGINT), os.nice(0)
