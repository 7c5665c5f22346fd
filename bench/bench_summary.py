"""Incident summary benchmark: what one ``summary`` costs on the demo workspace at 1x and 10x the incidents per day:
the queries it sends to the data layer (each one Log Analytics query on a live workspace), how many run at once at
the peak, and its wall time.

Run: .venv/bin/python bench/bench_summary.py [--runs N] [--volumes 1,10] [--smoke]
The generated stories have at most a handful of alerts, so the incident summarized is planted: 20 alerts (four
names, over two hours) naming 8 of the demo's busiest entities (3 accounts, 3 hosts, 2 IPs, each with its evidence
in the tables), added as an injected incident is (``demo/inject.py``'s rows, ``store.add_alert``). The demo's own
closest incident is summarized too. Queries are counted where the client hands them to the backend: what a live
workspace would receive, after the client's own scheduling.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.demo import inject, store  # noqa: E402
from bot.demo.backend import DemoBackend  # noqa: E402
from bot.demo.values import compact_json  # noqa: E402
from bot.investigation.summary import CONCURRENT_INVESTIGATIONS, KINDS, MAX_INVESTIGATED, summarize  # noqa: E402
from bot.sentinel.client import SentinelClient  # noqa: E402
from bot.sentinel.models import IncidentDetail, QueryResult  # noqa: E402

TARGET_ALERTS, TARGET_ENTITIES = 20, 8
CANDIDATES = 40  # incidents with the most alerts, read to find the closest
GOAL_MS = 1000.0  # a summary's median at 1x


class Counting:
    """The demo backend, counting the queries handed to it and how many are in flight at once."""

    def __init__(self, backend: DemoBackend) -> None:
        self.backend = backend
        self.source = backend.source
        self.sent: Counter[str] = Counter()
        self.running = 0
        self.peak = 0

    async def execute(self, query: Any, kql_text: str) -> Any:
        self.sent[query.tool] += 1
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            return await self.backend.execute(query, kql_text)
        finally:
            self.running -= 1

    async def prepare(self) -> None:
        await self.backend.prepare()

    async def close(self) -> None:
        await self.backend.close()

    def reset(self) -> None:
        self.sent.clear()
        self.peak = 0


async def plant(demo: DemoBackend, client: SentinelClient, now: datetime) -> int:
    """A High incident of 20 alerts naming 8 busy entities of the demo world; its number."""
    top = await client.run("get_top_entities", {"time_window": "last_7d", "limit": 50})
    assert isinstance(top, QueryResult)
    picked: dict[str, list[str]] = {"account": [], "host": [], "ip": []}
    for record in top.records:
        wanted = {"account": 3, "host": 3, "ip": 2}.get(record.type, 0)
        if len(picked.get(record.type, [])) < wanted:
            picked[record.type].append(record.value)
    objects = [{"Type": "account", "Name": v.split("@")[0], "UPNSuffix": v.partition("@")[2], "UserPrincipalName": v}
               for v in picked["account"]] + [{"Type": "host", "HostName": v} for v in picked["host"]] + \
        [{"Type": "ip", "Address": v} for v in picked["ip"]]
    number = inject.FIRST_NUMBER + 99
    incident, template = inject.rows(inject.Injection.checked(number, "Planted: 20 alerts, 8 entities", "High"), now,
                                     None)
    names = ("Suspicious PowerShell command line", "Suspicious access to LSASS service",
             "Connection to a known C2 address", "Unfamiliar sign-in properties")
    alerts = []
    for i in range(TARGET_ALERTS):
        stamp = (now - timedelta(minutes=120 - 6 * i)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        turn = (objects[i % len(objects):] + objects[:i % len(objects)])[:3]  # each alert names three, in turn
        entities = [dict(o, **{"$id": str(n + 1)}) for n, o in enumerate(turn)]
        alerts.append(dict(template, SystemAlertId=f"planted-{i:02}", VendorOriginalId=f"planted-{i:02}",
                           AlertName=names[i % 4], DisplayName=names[i % 4], TimeGenerated=stamp, StartTime=stamp,
                           EndTime=stamp, Entities=compact_json(entities)))
    incident |= {"AlertIds": compact_json([a["SystemAlertId"] for a in alerts]),
                 "AdditionalData": compact_json({"alertsCount": TARGET_ALERTS, "alertProductNames": ["MDE"],
                                                 "tactics": ["Execution"], "techniques": []})}
    with demo._lock:  # the benchmark writes the rows as an injection does
        conn = demo._database(now)
        columns = ", ".join(f'"{column}"' for column in incident)
        conn.execute(f"INSERT INTO SecurityIncident ({columns}) VALUES ({', '.join('?' for _ in incident)})",
                     list(incident.values()))
        for alert in alerts:
            store.add_alert(conn, alert)
        conn.commit()
    return number


async def closest(client: SentinelClient) -> tuple[int, int, int]:
    """(number, alerts, investigable entities) of the incident closest to the target."""
    listed = await client.run("query_incidents", {"time_window": "last_30d", "sort": "most_alerts",
                                                  "limit": CANDIDATES})
    assert isinstance(listed, QueryResult) and listed.records, listed
    best: tuple[int, int, int, int] | None = None
    for incident in listed.records:
        if incident.number >= inject.FIRST_NUMBER:  # the planted one
            continue
        read = await client.run("get_incident_detail", {"incident_ref": incident.number})
        assert isinstance(read, QueryResult) and read.records
        detail = read.records[0]
        assert isinstance(detail, IncidentDetail)
        entities = sum(1 for e in detail.entities if e.type in KINDS)
        distance = abs(detail.incident.alert_count - TARGET_ALERTS) + abs(entities - TARGET_ENTITIES)
        if best is None or distance < best[0]:
            best = (distance, incident.number, detail.incident.alert_count, entities)
    assert best is not None
    return best[1], best[2], best[3]


async def measure(volume: int, runs: int, now: datetime) -> dict[str, Any]:
    demo = DemoBackend(seed=7, clock=lambda: now, volume=volume)
    demo.prepare_sync()
    counting = Counting(demo)
    client = SentinelClient(counting)  # type: ignore[arg-type]
    out = {}
    for label, found in (("planted", await plant(demo, client, now)), ("demo's closest", await closest(client))):
        number = found if isinstance(found, int) else found[0]
        timings: list[float] = []
        for _ in range(runs):
            counting.reset()
            started = time.perf_counter()
            result = await summarize(client, {"incident_ref": number})
            timings.append((time.perf_counter() - started) * 1000)
            assert isinstance(result, QueryResult) and result.records, result
        summary = result.records[0]
        out[label] = {"number": number, "alerts": summary.detail.incident.alert_count,
                      "entities": sum(1 for e in summary.detail.entities if e.type in KINDS), "timings": timings,
                      "queries": sum(counting.sent.values()), "peak": counting.peak, "sent": dict(counting.sent),
                      "investigated": len(summary.entities)}
    await client.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--volumes", default="1,10")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    runs, volumes = (1, [1]) if args.smoke else (args.runs, [int(v) for v in args.volumes.split(",")])
    started = time.perf_counter()
    if args.smoke:
        print("SMOKE RUN: tiny sizes; the figures say nothing about performance.")
    now = datetime.now(UTC).replace(microsecond=0)
    print(f"== Incident summary: at most {MAX_INVESTIGATED} entities investigated, {CONCURRENT_INVESTIGATIONS} at once")
    print(f"{'volume':>6} {'incident':<24} {'alerts':>6} {'entities':>8} {'investigated':>12} {'queries':>7} "
          f"{'peak':>5} {'median ms':>10} {'p90 ms':>8}")
    results = {volume: asyncio.run(measure(volume, runs, now)) for volume in volumes}
    for volume, measured in results.items():
        for label, r in measured.items():
            timings = r["timings"]
            p90 = statistics.quantiles(timings, n=10)[-1] if len(timings) > 1 else timings[0]
            name = f"{label} #{r['number']}"
            print(f"{volume:>5}x {name:<24} "
                  f"{r['alerts']:>6} {r['entities']:>8} {r['investigated']:>12} {r['queries']:>7} {r['peak']:>5} "
                  f"{statistics.median(timings):>10.1f} {p90:>8.1f}")
    first = results[volumes[0]]["planted"]
    print(f"\n== Queries one summary of the planted incident sends, by query (at {volumes[0]}x)")
    for tool, count in sorted(first["sent"].items(), key=lambda item: (-item[1], item[0])):
        print(f"{tool:<34} {count:>4}")
    print(f"\nLog Analytics queries per summary: {first['queries']} (peak {first['peak']} at once)")
    median = statistics.median(first["timings"])
    print(f"Summary median at {volumes[0]}x: {median:.1f} ms; goal under {GOAL_MS:.0f} ms: "
          f"{'met' if median < GOAL_MS else 'NOT met'}")
    print(f"Benchmark took {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
