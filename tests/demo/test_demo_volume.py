"""The demo workspace at volume: precomputed latest rows and totals give the same answers as counting from the raw
rows, and the next day's data is built beside the live data and swapped in without making queries wait."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest

from bot.demo import generator
from bot.demo.backend import DemoBackend
from bot.demo.writer import DemoIncidentWriter
from bot.sentinel.changes import ChangeKind, Owner, make_change
from bot.sentinel.client import SentinelClient
from bot.sentinel.demo_sql import iso
from bot.sentinel.entities import IdentityMap, alert_identities, alert_sightings
from bot.sentinel.models import QueryResult
from bot.sentinel.params import Severity
from tests.conftest import NOW, SEED

LATER = NOW + timedelta(hours=6)  # the database was built for NOW: rows of the hours since are not precounted


def latest_rows(conn: Any, table: str, key: str, start: str, now: str) -> list[dict[str, Any]]:
    """The latest row per key inside (start, now], straight from the raw table (KQL's arg_max)."""
    best: dict[Any, dict[str, Any]] = {}
    for row in conn.execute(f"SELECT rowid AS RowId, * FROM {table} WHERE TimeGenerated > ? AND TimeGenerated <= ?",
                            (start, now)):
        row = dict(row)
        held = best.get(row[key])
        if held is None or (row["TimeGenerated"], row["RowId"]) > (held["TimeGenerated"], held["RowId"]):
            best[row[key]] = row
    return list(best.values())


@pytest.fixture(scope="module")
def later_client() -> SentinelClient:
    clock = [NOW]
    backend = DemoBackend(seed=SEED, clock=lambda: clock[0], volume=2)
    backend.prepare_sync()
    clock[0] = LATER
    return SentinelClient(backend)


@pytest.mark.parametrize("window", ["last_1h", "last_24h", "last_7d", "last_30d"])
@pytest.mark.parametrize("severity", ["Informational", "Medium"])
async def test_precomputed_answers_match_the_raw_rows(later_client: SentinelClient, window: str,
                                                      severity: str) -> None:
    backend = later_client._backend
    assert isinstance(backend, DemoBackend) and backend._conn is not None
    conn, now = backend._conn, LATER
    incidents = await later_client.query_incidents(time_window=window, min_severity=severity, limit=100)
    alerts = await later_client.query_alerts(time_window=window, min_severity=severity, limit=100)
    trend = await later_client.get_alert_trend(time_window=window, min_severity=severity)
    entities = await later_client.get_top_entities(time_window=window, min_severity=severity, limit=50)
    assert all(isinstance(r, QueryResult) for r in (incidents, alerts, trend, entities))
    start = iso(now - _duration(window))
    wanted = {s.value for s in Severity(severity).at_least()}

    raw_incidents = [r for r in latest_rows(conn, "SecurityIncident", "IncidentNumber", start, iso(now))
                     if r["Severity"] in wanted and r["CreatedTime"] > start]
    rank = {"High": 0, "Medium": 1, "Low": 2, "Informational": 3}
    raw_incidents.sort(key=lambda r: (rank[r["Severity"]], _desc(r["CreatedTime"]), -r["IncidentNumber"]))
    assert incidents.metadata.total == len(raw_incidents)
    assert [i.number for i in incidents.records] == [r["IncidentNumber"] for r in raw_incidents[:100]]

    raw_alerts = [r for r in latest_rows(conn, "SecurityAlert", "SystemAlertId", start, iso(now))
                  if r["AlertSeverity"] in wanted]
    raw_alerts.sort(key=lambda r: (rank[r["AlertSeverity"]], _desc(r["TimeGenerated"]), r["SystemAlertId"]))
    assert alerts.metadata.total == len(raw_alerts)
    assert [a.alert_id for a in alerts.records] == [r["SystemAlertId"] for r in raw_alerts[:100]]

    prefix = 13 if trend.metadata.parameters["bin_size"] == "1h" else 10
    counted = Counter((r["TimeGenerated"][:prefix], r["AlertSeverity"]) for r in raw_alerts)
    shown = {(iso(b.start)[:prefix], b.severity): b.count for b in trend.records if b.count}
    assert shown == dict(counted)

    # One entity per identity, learned from every alert's raw Entities (the Python reference, not the derived
    # tables): an account or host by any spelling tied to it, shown by the identity's least spelling; any other
    # type by its lower-case value, shown by its least spelling in the window.
    identities = IdentityMap()
    for (raw,) in conn.execute("SELECT Entities FROM SecurityAlert"):
        identities.learn(alert_sightings(raw))
    per_entity: dict[tuple[str, str], list[Any]] = {}
    for alert in raw_alerts:
        resolved = alert_identities(alert_sightings(alert["Entities"]), identities)
        for (kind, key), value in resolved.shown.items():
            entry = per_entity.setdefault((kind, key), [0, 0, "", value])
            entry[0] += 1
            entry[1] += alert["AlertSeverity"] == "High"
            entry[2] = max(entry[2], alert["TimeGenerated"])
            entry[3] = min(entry[3], value)
    ranked = sorted(per_entity.items(), key=lambda e: (-e[1][0], -e[1][1], _desc(e[1][2]), e[0][0], e[1][3]))
    assert entities.metadata.total == len(ranked)
    assert [(e.type, e.value, e.alert_count, e.high_severity_count) for e in entities.records] == [
        (kind, shown, count, high) for (kind, _), (count, high, _, shown) in ranked[:50]]


def _duration(window: str) -> timedelta:
    amount, unit = int(window[5:-1]), window[-1]
    return timedelta(hours=amount) if unit == "h" else timedelta(days=amount)


def _desc(text: str) -> tuple[int, ...]:
    return tuple(-ord(ch) for ch in text)


def test_volume_multiplies_the_incidents_per_day() -> None:
    day = NOW.date()
    assert generator.daily_incident_count(SEED, day, 10) == 10 * generator.daily_incident_count(SEED, day)
    small, big = generator.generate(SEED, NOW, days=2), generator.generate(SEED, NOW, days=2, volume=3)
    assert len({r["IncidentNumber"] for r in big.incident_rows}) == 3 * len({r["IncidentNumber"]
                                                                             for r in small.incident_rows})
    with pytest.raises(ValueError):
        generator.generate(SEED, NOW, volume=0)


@pytest.mark.slow
async def test_the_next_day_is_built_beside_the_live_data_and_swapped_in() -> None:
    before_midnight = datetime(2026, 11, 20, 23, 30, tzinfo=NOW.tzinfo)
    clock = [before_midnight]
    backend = DemoBackend(seed=SEED, clock=lambda: clock[0])
    client = SentinelClient(backend)
    backend.prepare_sync()
    first = backend._conn
    latest = await client.query_incidents(time_window="last_24h", limit=1)
    assert isinstance(latest, QueryResult)
    number = latest.records[0].number
    name = backend._conn.execute("SELECT IncidentName FROM SecurityIncident WHERE IncidentNumber = ?",  # type: ignore[union-attr]
                                 (number,)).fetchone()[0]
    writer = DemoIncidentWriter(backend)
    await writer.update(await writer.read(name), make_change(ChangeKind.ASSIGN, number,
                                                             owner=Owner(user_principal_name="emeka.obi@contoso.com")))
    started, slowest, waited = time.perf_counter(), 0.0, 0.0
    while backend.regenerations == 0 and time.perf_counter() - started < 120:  # queries while it is built
        asked = time.perf_counter()
        result = await client.query_alerts(time_window="last_24h")
        assert isinstance(result, QueryResult) and result.records
        slowest, waited = max(slowest, time.perf_counter() - asked), max(waited, backend.last_wait_s)
        await asyncio.sleep(0.01)
    assert backend.regenerations == 1 and backend._conn is not first
    assert slowest < 1.0 and waited < 0.2  # no query waited for the generation (it takes seconds)
    clock[0] = before_midnight + timedelta(hours=1)  # past midnight: the swapped-in data answers, no rebuild
    swapped = backend._conn
    detail = await client.get_incident_detail(incident_ref=number)
    assert isinstance(detail, QueryResult) and detail.records[0].incident.owner == "Emeka Obi"  # the change kept
    today = await client.query_incidents(time_window="last_1h")
    assert isinstance(today, QueryResult) and backend._conn is swapped and backend.regenerations == 1
    await client.close()


def test_worker_processes_open_the_demo_workspace_serve_generated_instead_of_generating_their_own(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28: each worker process generated its own demo workspace. The first process writes a copy beside the
    queue; the next opens it (no generation) and answers alike; another seed's copy is not taken."""
    from pathlib import Path

    shared = Path(tmp_path) / "demo-workspace.sqlite"
    clock = lambda: NOW  # noqa: E731
    first = DemoBackend(SEED, clock, shared=shared)
    first.prepare_sync()
    assert shared.is_file()

    def no_generation(*_: Any, **__: Any) -> Any:
        raise AssertionError("generated again")

    monkeypatch.setattr(generator, "generate", no_generation)
    second = DemoBackend(SEED, clock, shared=shared)
    second.prepare_sync()
    count = "SELECT (SELECT COUNT(*) FROM SecurityIncident), (SELECT COUNT(*) FROM LatestAlert), " \
            "(SELECT COUNT(*) FROM AlertEntity)"
    assert second.with_database(lambda db, _: tuple(db.execute(count).fetchone())) == \
        first.with_database(lambda db, _: tuple(db.execute(count).fetchone()))
    assert second.with_database(lambda db, _: db.execute(
        "SELECT COUNT(*) FROM sqlite_master WHERE name = 'DemoShared'").fetchone()[0]) == 0
    with pytest.raises(AssertionError, match="generated again"):
        DemoBackend(SEED + 1, clock, shared=shared).prepare_sync()
    asyncio.run(first.close())
    asyncio.run(second.close())
