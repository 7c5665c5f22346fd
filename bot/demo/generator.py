"""Deterministic generator of the demo workspace: SecurityIncident and SecurityAlert rows.

The rows look like a mid-sized SOC's Microsoft Sentinel workspace: incidents from Sentinel analytics
rules and the Defender products, one SecurityIncident row per incident update (created, assigned,
commented, escalated, closed with a classification), their alerts with Sentinel-shaped Entities
(``$id``/``$ref``), standalone low-severity noise, a few noisy entities, bursts, and the occasional
attacker-controlled string (to exercise the bot's handling of untrusted text).

Determinism. Everything created on UTC day D comes from one ``random.Random`` seeded with a SHA-256
of (seed, D.toordinal()), so a day's incidents, alerts and update histories are a pure function of
(seed, D), whatever ``now`` is. Incident numbers are contiguous and stable: day D's incidents are
numbered from ``FIRST_INCIDENT_NUMBER + sum(daily_incident_count(seed, d) for EPOCH <= d < D)``.
``now`` only chooses which days are generated and where update rows are cut off (rows after ``now``
are kept; the query layer hides rows with TimeGenerated > now).

Storage form (what ``store.create_database`` inserts): datetimes as fixed-width ISO-8601 UTC text
(``2026-11-21T14:03:07.123456Z``) or None, dynamic columns as compact JSON text, bool as 0/1,
real as float (or None where Sentinel leaves it empty), int as int.

Duplicate alert rows: an alert whose status changes later (Defender products sync status back) is
emitted again with the same SystemAlertId, a later TimeGenerated and the new Status, every other
column unchanged; consumers take the latest row per SystemAlertId.

Standard library only; ``generate(seed, now)`` for 35 days takes well under a second.

Parts: ``catalog`` (the estate, its people and texts) and ``templates`` (the detections) are data;
``values`` holds the stable draws and storage forms; ``world`` the people, machines and casts of one
seed; ``entities`` and ``alerts`` build SecurityAlert rows; ``incidents`` draws, plans and renders
incidents; ``activity`` (with ``identity``, ``endpoint``, ``mail`` and ``intel``) writes the activity tables:
background and each incident's evidence. This module is the public API and the day: how many incidents, when,
bursts, numbering.
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from bot.demo import activity
from bot.demo.alerts import burst_alert, noise_alerts
from bot.demo.catalog import (
    DEMO_SUFFIX,
    HOURLY_CUMULATIVE,
    HOURLY_WEIGHTS,
    RESOURCE_GROUP,
    SEVERITIES,
    SUBSCRIPTION_ID,
    TENANT_ID,
    WORKSPACE_NAME,
)
from bot.demo.incidents import (
    Incident,
    alert_status_updates,
    draw_burst_incident,
    draw_incident,
    plan_lifecycle,
    render_incident,
)
from bot.demo.values import choice, randrange, stable_int, timestamp
from bot.demo.world import World, build_world
from bot.sentinel.catalog import ACTIVITY_TABLES

__all__ = [  # the public API; the workspace constants are defined in the catalog
    "DEMO_SUFFIX", "EPOCH", "FIRST_INCIDENT_NUMBER", "RESOURCE_GROUP", "SEVERITIES", "SUBSCRIPTION_ID",
    "TENANT_ID", "UPDATE_HORIZON", "WORKSPACE_NAME", "DemoData", "daily_incident_count",
    "first_incident_number", "generate", "is_burst_day",
]

EPOCH = date(2024, 1, 1)
FIRST_INCIDENT_NUMBER = 1000
# Update rows later than this after the generated span are not emitted.
UPDATE_HORIZON = timedelta(days=3)


@dataclass(frozen=True)
class DemoData:
    incident_rows: list[dict]  # SecurityIncident rows, one per incident update
    alert_rows: list[dict]  # SecurityAlert rows (an alert re-emitted on a status change shares its SystemAlertId)
    generated_until: datetime  # end (exclusive) of the generated days: the start of the day after today
    # The activity tables (SigninLogs, DeviceProcessEvents, ...): table -> sparse rows (columns.stored_row fills
    # in the columns a row does not set), in no particular order.
    tables: dict[str, list[dict]] = field(default_factory=dict)


def daily_incident_count(seed: int, day: date, volume: int = 1) -> int:
    """How many incidents are created on ``day``: 10-18 on weekdays, 8-11 at weekends (times ``volume``)."""
    value = stable_int("sentinel-demo", seed, "count", day.toordinal())
    return (8 + value % 4 if day.weekday() >= 5 else 10 + value % 9) * volume


def first_incident_number(seed: int, day: date, volume: int = 1) -> int:
    """The IncidentNumber of the first incident created on ``day`` (numbering starts at EPOCH)."""
    if day >= EPOCH:
        total = sum(daily_incident_count(seed, EPOCH + timedelta(days=i)) for i in range((day - EPOCH).days))
        return FIRST_INCIDENT_NUMBER + total * volume
    total = sum(daily_incident_count(seed, day + timedelta(days=i)) for i in range((EPOCH - day).days))
    return FIRST_INCIDENT_NUMBER - total * volume


def is_burst_day(seed: int, day: date) -> bool:
    """Days with a 1-3 hour burst of 30-60 alerts (one in every 5 consecutive days)."""
    return (day.toordinal() + seed) % 5 == 0


# --------------------------------------------------------------------------------------------------
# One day.


def _creation_times(rng: random.Random, day_start: datetime, count: int) -> list[datetime]:
    """Creation times spread over the day, following the hourly weights (more in working hours).

    Incident k is drawn from the k-th of ``count`` equal slices of the day's weighted time distribution,
    so the day never has long stretches without new incidents (any 24 hours hold at least count - 1).
    """
    total = HOURLY_CUMULATIVE[-1]
    times = []
    for k in range(count):
        point = (k + rng.random()) / count * total
        hour = bisect.bisect_right(HOURLY_CUMULATIVE, point)
        before = HOURLY_CUMULATIVE[hour - 1] if hour else 0.0
        fraction = (point - before) / HOURLY_WEIGHTS[hour]
        times.append(day_start + timedelta(hours=hour + fraction))
    return sorted(times)


def _generate_day(world: World, day: date, first_number: int,
                  volume: int) -> tuple[list[dict], list[dict], list[Incident]]:
    seed = world.seed
    rng = random.Random(stable_int("sentinel-demo", seed, "day", day.toordinal()))
    day_start = datetime(day.year, day.month, day.day)
    count = daily_incident_count(seed, day, volume)
    created = _creation_times(rng, day_start, count)

    burst = None
    if is_burst_day(seed, day):
        kind = choice(rng, ("password_spray", "malware_outbreak"))
        start = day_start + timedelta(hours=rng.uniform(1, 20))
        duration = timedelta(hours=rng.uniform(1, 3))
        times = sorted(start + duration * rng.random() for _ in range(randrange(rng, 30, 61)))
        # The burst's incident takes the slot of the creation time closest to the burst.
        slot = min(range(count), key=lambda i: abs(created[i] - times[4]))
        created[slot] = times[4] + timedelta(seconds=rng.uniform(40, 180))
        order = sorted(range(count), key=lambda i: created[i])
        burst_index = order.index(slot)
        created = [created[i] for i in order]
        burst = (kind, times, burst_index)

    incidents: list[Incident] = []
    alert_rows: list[dict] = []
    burst_incident = None
    for index, moment in enumerate(created):
        if burst is not None and index == burst[2]:
            incident = burst_incident = draw_burst_incident(
                world, rng, burst[0], burst[1], first_number + index, moment)
        else:
            incident = draw_incident(world, rng, first_number + index, moment)
        plan_lifecycle(rng, incident)
        incidents.append(incident)

    incident_rows: list[dict] = []
    for incident in incidents:
        incident_rows.extend(render_incident(world, rng, incident))
        alert_rows.extend(incident.alerts)
        alert_rows.extend(alert_status_updates(rng, incident))
    for _ in range(volume):  # a bigger SOC has more of everything, standalone alerts too
        alert_rows.extend(noise_alerts(world, rng, day_start))
    if burst is not None and burst_incident is not None:
        # The rest of the burst: same source address or the same malware on more devices.
        alert_rows.extend(burst_alert(world, rng, burst_incident.template, burst_incident.cast, moment)
                          for moment in burst[1][5:])
    return incident_rows, alert_rows, incidents


# --------------------------------------------------------------------------------------------------
# Public entry point.


def drawn_incidents(seed: int, now: datetime, days: int = 35) -> list[Incident]:
    """The incidents of the demo's days as drawn (template, cast, creation and closing): the world's own stories, which
    tests and benchmarks derive their expectations from (the same draws ``generate`` renders)."""
    world = build_world(seed)
    first_day = now.astimezone(UTC).date() - timedelta(days=days - 1)
    number = first_incident_number(seed, first_day)
    drawn: list[Incident] = []
    for offset in range(days):
        day = first_day + timedelta(days=offset)
        drawn += _generate_day(world, day, number, 1)[2]
        number += daily_incident_count(seed, day)
    return drawn


def generate(seed: int, now: datetime, days: int = 35, volume: int = 1) -> DemoData:
    """The demo workspace's rows for the ``days`` whole UTC days ending with ``now``'s day.

    Pure function of (seed, day) per day: moving ``now`` within a day changes nothing, and the days
    two calls share hold identical incidents (numbers, titles, alerts, histories up to the cut-off).
    Rows later than ``now`` are included (whole days, and update rows up to UPDATE_HORIZON after the
    generated span); the query layer hides rows with TimeGenerated > now. ``volume`` multiplies the
    incidents (and standalone alerts) per day, for load tests; 1 is the demo as analysts see it.
    """
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be timezone-aware")
    if days < 1:
        raise ValueError("days must be at least 1")
    if volume < 1:
        raise ValueError("volume must be at least 1")
    today = now.astimezone(UTC).date()
    first_day = today - timedelta(days=days - 1)
    generated_until = datetime(today.year, today.month, today.day, tzinfo=UTC) + timedelta(days=1)
    horizon = timestamp(generated_until.replace(tzinfo=None) + UPDATE_HORIZON)
    world = build_world(seed)
    number = first_incident_number(seed, first_day, volume)
    incident_rows: list[dict] = []
    alert_rows: list[dict] = []
    tables: dict[str, list[dict]] = {table: [] for table in ACTIVITY_TABLES}
    for offset in range(days):
        day = first_day + timedelta(days=offset)
        incidents, alerts, drawn = _generate_day(world, day, number, volume)
        number += daily_incident_count(seed, day, volume)
        incident_rows.extend(row for row in incidents if row["TimeGenerated"] < horizon)
        alert_rows.extend(row for row in alerts if row["TimeGenerated"] < horizon)
        activity.day_rows(world, datetime(day.year, day.month, day.day), drawn, alerts, volume, tables)
    for table, rows in tables.items():
        tables[table] = [row for row in rows if row["TimeGenerated"] < horizon]
    incident_rows.sort(key=lambda r: (r["TimeGenerated"], r["IncidentNumber"]))
    alert_rows.sort(key=lambda r: (r["TimeGenerated"], r["SystemAlertId"]))
    return DemoData(incident_rows, alert_rows, generated_until, tables)
