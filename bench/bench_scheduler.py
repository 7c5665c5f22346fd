"""Log Analytics' limits under load (issue 36): 10 analysts investigating at once plus a watch burst, against a fake
service that enforces the limits, with the bot's query scheduler and without it (nothing counting or ordering).

Run: .venv/bin/python bench/bench_scheduler.py [--analysts 10] [--triages 3] [--bulk 20] [--smoke]

Everything is the bot's own code against the process boundary: the real ``LogsQueryClient`` through
``LogAnalyticsBackend`` (``bot/sentinel/loganalytics.py``, scheduled by ``bot/sentinel/scheduler.py``) talking HTTPS
to the fake Log Analytics endpoint of tests/support/loganalytics_fake.py, which enforces the service's throttling
per identity: 5 queries at once (more wait in its queue), ``--per-window`` queries per ``--window`` seconds (429 past
it, with a Retry-After or without one). The service's 200 per 30 s is scaled down (by default 60 per 1.5 s, queries
taking ``--latency`` s) so the load is over the rate budget several times and a run takes seconds; every query of
the background load starts first and the analysts as soon as its first queries reached the fake (it then holds the
budget), all as the bot's identity (QUERY_IDENTITY=bot):

  interactive  ``--analysts`` investigations of an account (investigation/run.py: 11 queries each, at once)
  watch        the poll's incident_changes query, then ``--triages`` triages on arrival (investigation/triage.py:
               the incident's detail, then its account, host and IP investigated: 1 + 11 + 7 + 10 queries each)
  bulk         ``--bulk`` lone queries at bulk priority (what a benchmark run sends)

"No budget" is the bot without limits of its own (nothing counts or orders; a 429 still holds the identity for its
Retry-After or backoff, and a Retry-After longer than the bounded backoff is reported, not waited). For each
setting: the requests sent, the 429s the fake answered, the queries that failed from throttling (the analyst would
be told: each query, inside investigations and triages too), the most queries the fake held at once ("running":
at most 5, it queues the rest; "sent at once": running or in its queue), and each kind's p50 and slowest latency
(from its kind's start to the investigation's, the burst's or the query's answer), so interactive latency stands
beside the background work's. Goals with the scheduler: 0 failures from throttling, at most 5 sent at once,
interactive p50 below the watch's and the bulk work's.

Then a 429 storm: every query answered 429 without Retry-After; the bot's default backoff (1 s, then 2 s, with
jitter): the requests each query sent and how long until the analyst was told.

``--smoke`` runs every part at tiny sizes (3 analysts, 1 triage, 12 bulk queries), bounded by that work, so CI can
tell the benchmark still runs (tests/house/test_benchmarks.py); its figures say nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.investigation.run import investigate, planned_queries  # noqa: E402
from bot.investigation.triage import main_entities, triage  # noqa: E402
from bot.sentinel.client import SentinelClient  # noqa: E402
from bot.sentinel.loganalytics import LogAnalyticsBackend, create_logs_client  # noqa: E402
from bot.sentinel.models import QueryError, QueryResult  # noqa: E402
from bot.sentinel.queries import kql_of, make_query  # noqa: E402
from bot.sentinel.scheduler import Priority, QueryLimits, QueryScheduler, query_priority  # noqa: E402
from tests.support.loganalytics_fake import (  # noqa: E402
    FakeCredential,
    FakeLogAnalytics,
    ServiceLimits,
    error_body,
    table_body,
)
from tests.support.workspaces import WORKSPACE, make_la_client  # noqa: E402

WINDOW = "last_7d"
FIRST_INCIDENT = 5000
LOOSE = QueryLimits(concurrent=100_000, per_window=10**9, queue_wait_s=600)  # nothing counts or orders


@dataclass
class Load:
    analysts: int
    triages: int
    bulk: int


@dataclass
class Outcome:
    """One setting's run: latencies by kind, and the failures from throttling."""

    latency: dict[str, list[float]] = field(default_factory=lambda: {"interactive": [], "watch": [], "bulk": []})
    throttled_failures: int = 0  # queries whose error was throttling (inside investigations and triages too)
    other_failures: int = 0
    sent: int = 0
    throttled_responses: int = 0
    peak: int = 0  # running at the fake (it runs at most 5 and queues the rest)
    in_flight: int = 0  # running and queued at the fake: what the bot sent at once


def detail_row(number: int) -> dict[str, Any]:
    at = datetime.now(UTC) - timedelta(minutes=5)
    return {"IncidentNumber": number, "IncidentName": f"incident-{number}", "Title": f"Suspicious sign-in {number}",
            "Description": "", "Severity": "High", "Status": "New", "Owner": "", "CreatedTime": at,
            "LastModifiedTime": at, "AlertCount": 1, "Tactics": ["InitialAccess"], "Products": ["Entra ID"],
            "Labels": [], "IncidentUrl": f"https://portal.azure.com/#incident/{number}", "Alerts": [],
            "Entities": [{"type": "account", "value": f"svc{number}@contoso.com"},
                         {"type": "host", "value": f"WS-FIN-{number}"},
                         {"type": "ip", "value": f"10.9.{number % 250}.7"}],
            "OtherMatches": [], "CommentCount": 0, "TotalMatched": 1}


def teach(fake: FakeLogAnalytics, load: Load, since: datetime) -> None:
    """Every query of the load answered (empty tables; the incidents' details with their entities)."""
    investigations = [{"entity": f"analyst{n}-target@contoso.com", "time_window": WINDOW} for n in range(load.analysts)]
    for number in range(FIRST_INCIDENT, FIRST_INCIDENT + load.triages):
        row = detail_row(number)
        fake.known[kql_of(make_query("get_incident_detail", {"incident_ref": number}))] = table_body(
            "get_incident_detail", [row])
        investigations += [{"entity": value, "entity_type": kind, "time_window": WINDOW}
                           for kind, value in _entities(row)]  # the entities triage picks, as it picks them
    for arguments in investigations:
        for query in planned_queries(arguments):
            fake.known[kql_of(query)] = table_body(query.tool, [])
    fake.known[kql_of(make_query("incident_changes", {"since": since}))] = table_body("incident_changes", [])
    for tool in ("query_incidents", "query_alerts", "get_alert_trend", "get_top_entities"):
        fake.known[kql_of(make_query(tool, {}))] = table_body(tool, [])


def _entities(row: dict[str, Any]) -> list[tuple[str, str]]:
    from bot.sentinel.queries.incident_detail import decode

    return main_entities(decode(row))


async def timed(kind: str, started: float, outcome: Outcome, work: Any) -> Any:
    result = await work
    outcome.latency[kind].append(time.perf_counter() - started)
    return result


class Counted:
    """The Log Analytics backend, with each query's outcome counted by error code (every query, inside
    investigations and triages too)."""

    def __init__(self, inner: LogAnalyticsBackend) -> None:
        self.inner, self.source = inner, inner.source
        self.errors: Counter[str] = Counter()

    async def execute(self, query: Any, kql_text: str) -> Any:
        result = await self.inner.execute(query, kql_text)
        if isinstance(result, QueryError):
            self.errors[result.code] += 1
        return result

    async def prepare(self) -> None:
        await self.inner.prepare()

    async def close(self) -> None:
        await self.inner.close()


async def run_load(client: SentinelClient, fake: FakeLogAnalytics, load: Load, since: datetime) -> Outcome:
    """The background work first; the analysts once it holds the identity's budget (its first queries at the fake)."""
    outcome = Outcome()

    async def watch() -> list[Any]:
        with query_priority(Priority.WATCH):
            changes = await client.incident_changes(since)
        triages = await asyncio.gather(*(triage(client, FIRST_INCIDENT + n) for n in range(load.triages)))
        return [changes, *triages]

    async def bulk(n: int) -> QueryResult | QueryError:
        tools = ("query_incidents", "query_alerts", "get_alert_trend", "get_top_entities")
        with query_priority(Priority.BULK):
            return await client.run(tools[n % len(tools)])

    started = time.perf_counter()
    background = [asyncio.ensure_future(timed("watch", started, outcome, watch()))] + \
        [asyncio.ensure_future(timed("bulk", started, outcome, bulk(n))) for n in range(load.bulk)]
    while len(fake.requests) < min(5, load.bulk + 1) and not all(task.done() for task in background):  # noqa: ASYNC110
        await asyncio.sleep(0.001)  # the fake's count is the event: it has no callback
    started = time.perf_counter()
    interactive = [timed("interactive", started, outcome,
                         investigate(client, {"entity": f"analyst{n}-target@contoso.com", "time_window": WINDOW}))
                   for n in range(load.analysts)]
    await asyncio.gather(*interactive, *background)
    return outcome


async def measure(tmp: Path, load: Load, limits: ServiceLimits, bot_limits: QueryLimits, latency: float) -> Outcome:
    fake = await FakeLogAnalytics(tmp).start()
    fake.limits, fake.latency_s = limits, latency
    since = datetime.now(UTC) - timedelta(minutes=1)
    teach(fake, load, since)
    # The bot's backoff scaled as the window is: from 1 s, at most 10 s, against the service's 30 s.
    logs = create_logs_client(FakeCredential(), endpoint=fake.endpoint, transport=fake.transport())
    backend = Counted(LogAnalyticsBackend(logs, WORKSPACE, scheduler=QueryScheduler(bot_limits),
                                          backoff_s=limits.window_s / 30, max_backoff_s=limits.window_s / 3))
    client = SentinelClient(backend)
    try:
        outcome = await run_load(client, fake, load, since)
    finally:
        await client.close()
        await fake.stop()
    outcome.throttled_failures = backend.errors.pop("throttled", 0)
    outcome.other_failures = sum(backend.errors.values())
    outcome.sent, outcome.throttled_responses = len(fake.requests), sum(fake.throttled.values())
    outcome.peak, outcome.in_flight = fake.peak, fake.peak_in_flight
    return outcome


async def storm(tmp: Path, queries: int) -> tuple[float, float, str]:
    """Every query answered 429 without Retry-After: requests per query, seconds until told, the text told."""
    fake = await FakeLogAnalytics(tmp).start()
    for _ in range(queries * 10):
        fake.respond(429, error_body("ThrottledError", "Too many requests"))
    client = make_la_client(fake)  # the bot's defaults: 2 retries, backoff from 1 s, at most 10 s
    started = time.perf_counter()
    results = await asyncio.gather(*(client.run("query_incidents") for _ in range(queries)))
    took = time.perf_counter() - started
    await client.close()
    await fake.stop()
    errors = [r for r in results if isinstance(r, QueryError) and r.code == "throttled"]
    assert len(errors) == queries, "a stormed query did not end in a throttling error"
    return len(fake.requests) / queries, took, errors[0].message


def p50(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


async def main(args: argparse.Namespace) -> int:
    began = time.perf_counter()
    logging.basicConfig(level=logging.ERROR)
    if args.smoke:
        print("SMOKE RUN: tiny sizes; the figures say nothing about performance.")
        load, per_window, window = Load(3, 1, 12), 20, 0.5
    else:
        load, per_window, window = Load(args.analysts, args.triages, args.bulk), args.per_window, args.window
    queries = load.analysts * 11 + 1 + load.triages * 29 + load.bulk
    print(f"== Log Analytics limits under load: {load.analysts} analysts investigating at once, a watch burst "
          f"(the poll, {load.triages} triage(s)), {load.bulk} bulk queries: about {queries} queries; the fake allows "
          f"5 at once, {per_window} per {window} s per identity, {args.latency * 1000:.0f} ms a query")
    header = (f"{'setting':<34} {'sent':>5} {'429s':>5} {'failed':>6} {'running':>7} {'sent at once':>12} | "
              f"{'interactive p50':>15} {'max':>6} | {'watch p50':>9} {'max':>6} | {'bulk p50':>8} {'max':>6}")
    print(header)
    scheduled = QueryLimits(concurrent=5, per_window=per_window, window_s=window)
    settings = [("no budget, 429 with Retry-After", True, LOOSE),
                ("no budget, 429 without one", False, LOOSE),
                ("scheduler (5 at once, the window)", False, scheduled)]
    results: dict[str, Outcome] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, retry_after, bot_limits in settings:
            limits = ServiceLimits(concurrent=5, per_window=per_window, window_s=window, retry_after=retry_after)
            out = results[name] = await measure(Path(tmp), load, limits, bot_limits, args.latency)
            lat = out.latency
            print(f"{name:<34} {out.sent:>5} {out.throttled_responses:>5} {out.throttled_failures:>6} {out.peak:>7} "
                  f"{out.in_flight:>12} | {p50(lat['interactive']):>13.2f} s {max(lat['interactive']):>6.2f} | "
                  f"{p50(lat['watch']):>7.2f} s {max(lat['watch']):>6.2f} | {p50(lat['bulk']):>6.2f} s "
                  f"{max(lat['bulk']):>6.2f}")
            assert out.other_failures == 0, f"{name}: {out.other_failures} failures not from throttling"
        mine = results[settings[-1][0]]
        goals = {"0 failures from throttling": mine.throttled_failures == 0,
                 "at most 5 at once at the fake": mine.in_flight <= 5,
                 "interactive p50 below the watch's and the bulk work's":
                     p50(mine.latency["interactive"]) < min(p50(mine.latency["watch"]), p50(mine.latency["bulk"]))}
        lat = mine.latency
        print(f"With the scheduler: {mine.throttled_failures} failures from throttling, {mine.throttled_responses} "
              f"429s, at most {mine.in_flight} at once at the fake (running or queued); interactive p50 "
              f"{p50(lat['interactive']):.2f} s, watch p50 {p50(lat['watch']):.2f} s, "
              f"bulk p50 {p50(lat['bulk']):.2f} s; goals "
              + "; ".join(f"{goal}: {'met' if ok else 'NOT met'}" for goal, ok in goals.items()))
        print("== 429 storm: every query answered 429 without Retry-After (the bot's default backoff)")
        per_query, took, told = await storm(Path(tmp), 3 if args.smoke else 10)
        print(f"requests per query {per_query:.1f} (1 try + 2 retries); the analyst told after {took:.1f} s: {told}")
    print(f"Benchmark took {time.perf_counter() - began:.1f} s")
    return 0 if all(goals.values()) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--analysts", type=int, default=10)
    parser.add_argument("--triages", type=int, default=3)
    parser.add_argument("--bulk", type=int, default=20)
    parser.add_argument("--per-window", type=int, default=60, help="queries the fake accepts per window")
    parser.add_argument("--window", type=float, default=1.5, help="the fake's window, seconds (the service's: 30)")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds each query takes at the fake")
    parser.add_argument("--smoke", action="store_true")
    sys.exit(asyncio.run(main(parser.parse_args())))
