"""Demo workspace benchmark: dataset size and the median latency of each query.

Run: ./run bench   (or .venv/bin/python bench/bench_demo_queries.py [--runs N] [--seed S] [--smoke])
Goal (issue 2): every query under 50 ms median on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.sentinel.client import SentinelClient  # noqa: E402
from bot.sentinel.demo.backend import DemoBackend  # noqa: E402
from bot.sentinel.models import QueryResult  # noqa: E402

GOAL_MS = 50.0
SMOKE_RUNS = 3  # --smoke (CI, tests/test_benchmarks.py): every query, a few runs each; the figures are not meaningful
CALLS = [
    ("query_incidents", {"time_window": "last_24h"}),
    ("query_incidents", {"time_window": "last_30d", "limit": 100}),
    ("get_incident_detail", {"incident_ref": "NUMBER"}),
    ("get_incident_detail", {"incident_ref": "powershell"}),
    ("query_alerts", {"time_window": "last_24h"}),
    ("query_alerts", {"time_window": "last_30d", "limit": 100}),
    ("get_alert_trend", {"time_window": "last_3d"}),
    ("get_alert_trend", {"time_window": "last_30d"}),
    ("get_top_entities", {"time_window": "last_7d"}),
    ("get_top_entities", {"time_window": "last_30d", "limit": 50}),
]


async def main(runs: int, seed: int) -> int:
    now = datetime.now(timezone.utc)
    backend = DemoBackend(seed=seed, clock=lambda: now)
    started = time.perf_counter()
    backend.prepare_sync()
    prepare_ms = (time.perf_counter() - started) * 1000
    conn = backend._conn  # the benchmark reads the dataset's size straight from the database
    assert conn is not None
    incidents = conn.execute("SELECT COUNT(DISTINCT IncidentNumber) FROM SecurityIncident").fetchone()[0]
    incident_rows = conn.execute("SELECT COUNT(*) FROM SecurityIncident").fetchone()[0]
    alert_rows = conn.execute("SELECT COUNT(*) FROM SecurityAlert").fetchone()[0]
    alerts = conn.execute("SELECT COUNT(DISTINCT SystemAlertId) FROM SecurityAlert").fetchone()[0]
    print(f"Demo workspace (seed {seed}): {incidents} incidents in {incident_rows} incident rows, "
          f"{alerts} alerts in {alert_rows} alert rows; generated and loaded in {prepare_ms:.0f} ms")

    client = SentinelClient(backend)
    latest = await client.query_incidents(time_window="last_7d", limit=1)
    assert isinstance(latest, QueryResult) and latest.records
    number = latest.records[0].number
    print(f"{'query':<22} {'arguments':<44} {'rows':>5} {'median ms':>10} {'p90 ms':>8}")
    worst = 0.0
    for tool, arguments in CALLS:
        arguments = {k: (number if v == "NUMBER" else v) for k, v in arguments.items()}
        timings, rows = [], 0
        for _ in range(runs):
            t0 = time.perf_counter()
            result = await client.run(tool, **arguments)
            timings.append((time.perf_counter() - t0) * 1000)
            assert isinstance(result, QueryResult), result
            rows = result.metadata.returned
        median = statistics.median(timings)
        p90 = statistics.quantiles(timings, n=10)[-1]
        worst = max(worst, median)
        shown = ", ".join(f"{k}={v}" for k, v in arguments.items())
        print(f"{tool:<22} {shown:<44} {rows:>5} {median:>10.1f} {p90:>8.1f}")
    verdict = "met" if worst < GOAL_MS else "NOT met"
    print(f"Slowest median {worst:.1f} ms; goal every query under {GOAL_MS:.0f} ms median: {verdict}")
    await client.close()
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="timed runs per query")
    parser.add_argument("--seed", type=int, default=42, help="demo workspace seed")
    parser.add_argument("--smoke", action="store_true", help="a quick run of every query (CI)")
    options, _ = parser.parse_known_args()  # ./run bench passes its arguments to every benchmark
    runs = SMOKE_RUNS if options.smoke and options.runs == parser.get_default("runs") else options.runs
    if options.smoke:
        print(f"SMOKE RUN (--smoke): {runs} runs per query; the figures only show that the benchmark runs")
    sys.exit(asyncio.run(main(max(2, runs), options.seed)))
