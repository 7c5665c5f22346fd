"""Log Analytics' limits kept by the bot (issue 36): the scheduler alone, then the real LogsQueryClient against a
fake service that enforces the limits (5 at once, the rest queued; so many per window, 429 past it).

Every check compares events and counts (the order queries reached the fake, how many it throttled, its peak of
running queries), never how long something took: the limits are scaled (a window under a second) to be quick.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.app import query_limits
from bot.commands.router import CommandRouter
from bot.config import Settings
from bot.investigation.run import plan
from bot.orchestrator.conversation import Conversation
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import QueryError, QueryResult
from bot.sentinel.params import parse_time_window
from bot.sentinel.queries import kql_of, make_query
from bot.sentinel.queries.evidence.entity import detect
from bot.sentinel.scheduler import Busy, Priority, QueryLimits, QueryScheduler, Slot, current_priority, query_priority
from tests.support.loganalytics_fake import FakeLogAnalytics, ServiceLimits, error_body, table_body
from tests.support.virtual_clock import VirtualClock
from tests.support.workspaces import make_la_client

LOOSE = QueryLimits(concurrent=1000, per_window=1_000_000)  # the bot's own budget out of the way
TOOLS = ("query_incidents", "query_alerts", "get_alert_trend", "get_top_entities")
HARNESS_WAIT_S = 60.0  # a bound on waiting for an event, for a stuck test; never reached when it works


async def _until(condition, what: str) -> None:
    """Wait for an event the test caused (the fake's or the scheduler's counts), bounded."""
    async def poll() -> None:
        while not condition():  # noqa: ASYNC110 - counts, not events: the fake and the scheduler have no callbacks
            await asyncio.sleep(0.005)
    try:
        await asyncio.wait_for(poll(), HARNESS_WAIT_S)
    except TimeoutError:
        pytest.fail(f"never saw: {what}")


def _known(fake: FakeLogAnalytics, tool: str) -> str:
    text = kql_of(make_query(tool, {}))
    fake.known[text] = table_body(tool, [])
    return tool


# --- the scheduler alone ---


async def test_a_freed_slot_goes_to_the_most_urgent_then_the_oldest() -> None:
    scheduler = QueryScheduler(QueryLimits(concurrent=1))
    first = await scheduler.acquire("bot")
    assert isinstance(first, Slot)
    granted: list[str] = []

    async def query(name: str, priority: Priority) -> None:
        with query_priority(priority):
            slot = await scheduler.acquire("bot")
        assert isinstance(slot, Slot)
        granted.append(name)
        slot.release()

    order = [("bulk", Priority.BULK), ("triage", Priority.TRIAGE), ("interactive 1", Priority.INTERACTIVE),
             ("watch", Priority.WATCH), ("interactive 2", Priority.INTERACTIVE)]
    tasks = [asyncio.ensure_future(query(name, priority)) for name, priority in order]
    await _until(lambda: scheduler.state("bot")["waiting"] == len(order), "every query waiting")
    first.release()
    await asyncio.gather(*tasks)
    assert granted == ["interactive 1", "interactive 2", "watch", "triage", "bulk"]
    assert current_priority() is Priority.INTERACTIVE  # the default, and each context manager reset its own


async def test_a_query_that_waited_long_counts_as_more_urgent() -> None:
    clock = VirtualClock()
    limits = QueryLimits(concurrent=1, aging_s=30, queue_wait_s=600)
    scheduler = QueryScheduler(limits, clock=clock.now, sleep=clock.sleep)
    first = await scheduler.acquire("bot")
    assert isinstance(first, Slot)
    bulk = asyncio.ensure_future(scheduler.acquire("bot", Priority.BULK, since=clock.now() - 95))  # 3 levels aged
    fresh = asyncio.ensure_future(scheduler.acquire("bot", Priority.INTERACTIVE))
    await _until(lambda: scheduler.state("bot")["waiting"] == 2, "both waiting")
    first.release()
    await _until(lambda: bulk.done(), "the aged query granted")
    assert not fresh.done()
    (await bulk).release()
    (await fresh).release()


async def test_a_query_is_charged_to_the_window_until_a_window_after_it_ended() -> None:
    clock = VirtualClock()
    scheduler = QueryScheduler(QueryLimits(concurrent=5, per_window=2, window_s=10), clock=clock.now,
                               sleep=clock.sleep)
    one, two = await scheduler.acquire("bot"), await scheduler.acquire("bot")
    assert isinstance(one, Slot) and isinstance(two, Slot)
    clock.sleeps.clear()
    third = asyncio.ensure_future(scheduler.acquire("bot"))
    await asyncio.sleep(0)
    one.release()  # ended at 1000: its charge lasts until 1010, however long ago it started
    await _until(lambda: third.done(), "the third query granted")
    assert clock.sleeps == [10.0]
    two.release()
    (await third).release()
    assert scheduler.state("other")["running"] == 0  # lanes are per identity


async def test_a_hold_pauses_the_identity_and_a_longer_one_than_allowed_refuses() -> None:
    clock = VirtualClock()
    scheduler = QueryScheduler(QueryLimits(queue_wait_s=60), clock=clock.now, sleep=clock.sleep)
    scheduler.hold("bot", 4.0)
    slot = await scheduler.acquire("bot")
    assert isinstance(slot, Slot) and clock.sleeps == [4.0]
    slot.release()
    scheduler.hold("bot", 20.0)
    refused = await scheduler.acquire("bot", patience_s=10.0)
    assert isinstance(refused, Busy) and refused.held_s == 20.0
    assert isinstance(await scheduler.acquire("someone else", patience_s=10.0), Slot)  # only that identity is held
    scheduler.hold("bot", 100.0)
    assert isinstance(await scheduler.acquire("bot"), Busy)  # longer than any query may wait (queue_wait_s)


async def test_a_query_waits_at_most_its_queue_wait_and_a_cancelled_one_gives_its_place_back() -> None:
    scheduler = QueryScheduler(QueryLimits(concurrent=1, queue_wait_s=0.05))
    held = await scheduler.acquire("bot")
    assert isinstance(held, Slot)
    refused = await scheduler.acquire("bot")  # nothing releases: it waits its 50 ms, then is refused
    assert isinstance(refused, Busy) and refused.ahead == 1 and refused.held_s == 0
    patient = QueryScheduler(QueryLimits(concurrent=1))
    running = await patient.acquire("bot")
    assert isinstance(running, Slot)
    gone = asyncio.ensure_future(patient.acquire("bot"))
    await _until(lambda: patient.state("bot")["waiting"] == 1, "one waiting")
    gone.cancel()
    await asyncio.gather(gone, return_exceptions=True)
    running.release()
    after = await patient.acquire("bot")
    assert isinstance(after, Slot) and patient.state("bot") == {"running": 1, "waiting": 0, "peak": 1}
    after.release()
    held.release()
    scheduler.close()


def test_each_process_takes_its_share() -> None:
    assert QueryLimits().share(1) == QueryLimits()
    assert (QueryLimits().share(2).concurrent, QueryLimits().share(2).per_window) == (2, 100)
    assert (QueryLimits().share(8).concurrent, QueryLimits().share(8).per_window) == (1, 25)  # at least one


# --- the fake enforces the service's limits ---


async def test_the_fake_queues_past_five_and_refuses_past_the_rate(fake_logs: FakeLogAnalytics) -> None:
    fake_logs.limits = ServiceLimits(concurrent=5, per_window=1000)
    fake_logs.gate = asyncio.Event()
    tool = _known(fake_logs, "query_incidents")
    client = make_la_client(fake_logs, scheduler=QueryScheduler(LOOSE))
    queries = asyncio.gather(*(client.run(tool) for _ in range(8)))
    await _until(lambda: fake_logs.peak == 5 and fake_logs.peak_queued == 3, "5 running and 3 queued at the fake")
    fake_logs.gate.set()
    assert all(isinstance(r, QueryResult) for r in await queries) and fake_logs.peak == 5
    await client.close()


@pytest.mark.parametrize("retry_after", [True, False])
async def test_the_fake_throttles_past_its_rate_with_and_without_retry_after(tmp_path: Path,
                                                                           retry_after: bool) -> None:
    fake = await FakeLogAnalytics(tmp_path).start()
    fake.limits = ServiceLimits(per_window=4, window_s=600, retry_after=retry_after)
    tool = _known(fake, "query_incidents")
    client = make_la_client(fake, scheduler=QueryScheduler(LOOSE), backoff_s=0.01)
    results = await asyncio.gather(*(client.run(tool) for _ in range(6)))
    errors = [r for r in results if isinstance(r, QueryError)]
    assert len(errors) == 2 and {e.code for e in errors} == {"throttled"}
    if retry_after:  # ten minutes: reported with the service's wait, not slept
        assert fake.throttled["rate"] == 2 and all("wait 600 seconds" in e.message for e in errors)
        later = await client.run(tool)  # not even sent: the identity is held
        assert isinstance(later, QueryError) and "asked for a pause of" in later.message
        assert fake.throttled["rate"] == 2 and len(fake.requests) == 6
    else:  # backed off and tried again, twice each, then told
        assert fake.throttled["rate"] == 6 and all("refused this query 3 times" in e.message for e in errors)
    await client.close()
    await fake.stop()


# --- the bot within the limits ---


async def test_the_bot_stays_within_the_fakes_limits(fake_logs: FakeLogAnalytics) -> None:
    limits = ServiceLimits(concurrent=5, per_window=10, window_s=0.3, retry_after=False)
    fake_logs.limits, fake_logs.latency_s = limits, 0.01
    tools = [_known(fake_logs, tool) for tool in TOOLS]
    scheduler = QueryScheduler(QueryLimits(concurrent=5, per_window=10, window_s=0.3))
    client = make_la_client(fake_logs, scheduler=scheduler)
    results = await asyncio.gather(*(client.run(tools[n % len(tools)]) for n in range(35)))
    assert all(isinstance(r, QueryResult) for r in results)
    assert sum(fake_logs.throttled.values()) == 0 and fake_logs.peak <= 5 and fake_logs.peak_queued == 0
    assert fake_logs.served["bot"] == 35
    await client.close()


async def test_the_callers_priority_reaches_the_backend(fake_logs: FakeLogAnalytics) -> None:
    fake_logs.limits = ServiceLimits()
    fake_logs.gate = asyncio.Event()
    incidents, alerts, trend, top = (_known(fake_logs, tool) for tool in TOOLS)
    scheduler = QueryScheduler(QueryLimits(concurrent=1))
    client = make_la_client(fake_logs, scheduler=scheduler)

    async def run(tool: str, priority: Priority) -> QueryResult | QueryError:
        with query_priority(priority):
            return await client.run(tool)

    first = asyncio.ensure_future(run(incidents, Priority.BULK))
    await _until(lambda: len(fake_logs.requests) == 1, "the first query at the fake")
    later = [asyncio.ensure_future(run(tool, priority)) for tool, priority in
             ((alerts, Priority.BULK), (trend, Priority.TRIAGE), (top, Priority.INTERACTIVE))]
    await _until(lambda: scheduler.state("bot")["waiting"] == 3, "three queries waiting in the bot")
    fake_logs.gate.set()
    await asyncio.gather(first, *later)
    arrived = [r.body["query"] for r in fake_logs.requests]
    assert arrived == [kql_of(make_query(tool, {})) for tool in (incidents, top, trend, alerts)]
    await client.close()


# --- bad input: a 429 storm ---


async def test_a_429_storm_is_bounded_and_the_analyst_is_told(fake_logs: FakeLogAnalytics) -> None:
    entity, window = detect("alice@contoso.com"), parse_time_window("last_7d")
    planned = plan(entity, window)
    for _ in range(len(planned) * 5):  # more 429s (without Retry-After) than the bot will ever ask for
        fake_logs.respond(429, error_body("ThrottledError", "Too many requests"))
    client: SentinelClient = make_la_client(fake_logs, backoff_s=0.01, max_backoff_s=0.05)

    async def status(text: str) -> None:
        return None

    routed = await CommandRouter(client, None).route("investigate alice@contoso.com", Conversation(), status)
    # Each query (the identity look-up first, then the planned ones): one try and two retries, no more. With every
    # evidence query refused there are no rows, so no second round (the counterparties in threat intelligence).
    assert len(fake_logs.requests) == (1 + len(planned)) * 3
    run = routed.run
    assert run is not None and isinstance(run.artifact, QueryError) and not run.retried
    assert run.artifact.code == "throttled"
    assert "Log Analytics is throttling the bot's queries" in run.artifact.message
    assert "refused this query 3 times" in run.artifact.message and "ask again" in run.artifact.message.lower()
    await client.close()


def test_each_process_of_the_deployment_takes_its_share_of_the_configured_budget() -> None:
    workers = Settings.from_env({"TURN_WORKER_PROCESSES": "3"}, dotenv_path=None)  # the web process and 3 workers
    assert (query_limits(workers).concurrent, query_limits(workers).per_window) == (1, 50)
    told = Settings.from_env({"TURN_WORKER_PROCESSES": "3", "LOGS_BUDGET_SHARES": "2", "LOGS_QUEUE_WAIT_SECONDS": "30",
                              "LOGS_QUERIES_PER_WINDOW": "100", "LOGS_QUERY_WINDOW_SECONDS": "10"}, dotenv_path=None)
    assert query_limits(told) == QueryLimits(concurrent=2, per_window=50, window_s=10, queue_wait_s=30)
    assert query_limits(Settings.from_env({}, dotenv_path=None)) == QueryLimits()


async def test_a_long_hold_refuses_the_queries_already_waiting_too() -> None:
    scheduler = QueryScheduler(QueryLimits(concurrent=1))
    running = await scheduler.acquire("bot")
    assert isinstance(running, Slot)
    waiting = [asyncio.ensure_future(scheduler.acquire("bot", patience_s=10.0)) for _ in range(3)]
    await _until(lambda: scheduler.state("bot")["waiting"] == 3, "three waiting")
    scheduler.hold("bot", 45.0)  # the running query's answer: 429, Retry-After 45
    refused = await asyncio.gather(*waiting)
    assert all(isinstance(r, Busy) and r.held_s > 40 for r in refused)
    running.release()
    scheduler.close()

