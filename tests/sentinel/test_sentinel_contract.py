"""One set of expectations, run against both backends.

The Log Analytics backend runs through the real LogsQueryClient against a fake Log Analytics HTTPS
endpoint. For each call, the fake is primed with the rows the demo workspace computes for that exact
query, encoded the way the service sends them (dynamic columns as JSON strings, 7-digit datetimes).
So both backends must decode the same data into the same records, and the expectations below hold
for the real service's response shapes as well as for the demo.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta

import pytest

from bot.demo.backend import DemoBackend
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import QueryError, QueryResult
from bot.sentinel.params import InvalidParameter, Severity
from tests.support.loganalytics_fake import FakeLogAnalytics
from tests.support.workspaces import make_la_client, prime

Run = Callable[..., Awaitable[QueryResult | QueryError]]
RANK = {s.value: s.rank for s in Severity}


@pytest.fixture(params=["demo", "log_analytics"])
async def run(request, demo_backend: DemoBackend, fake_logs: FakeLogAnalytics) -> AsyncIterator[Run]:
    if request.param == "demo":
        client = SentinelClient(demo_backend)

        async def call(tool: str, **arguments):
            return await client.run(tool, **arguments)
    else:
        client = make_la_client(fake_logs)

        async def call(tool: str, **arguments):
            with contextlib.suppress(InvalidParameter):  # nothing to prime: the client must refuse before calling
                await prime(fake_logs, demo_backend, tool, arguments)
            return await client.run(tool, **arguments)
    call.source = request.param  # type: ignore[attr-defined]
    yield call
    await client.close()


def ok(result: QueryResult | QueryError) -> QueryResult:
    assert isinstance(result, QueryResult), result
    return result


async def test_incidents_latest_state_sorted_by_severity_then_newest(run: Run, now) -> None:
    result = ok(await run("query_incidents", time_window="last_7d", limit=100))
    records = result.records
    assert records, "the demo must have incidents in every window"
    assert result.metadata.source == run.source and result.metadata.tool == "query_incidents"
    keys = [(RANK[i.severity], -i.created.timestamp(), -i.number) for i in records]
    assert keys == sorted(keys)
    assert len({i.number for i in records}) == len(records), "one row per incident (latest update)"
    for incident in records:
        assert now - timedelta(days=7) < incident.created <= now
        assert incident.last_modified >= incident.created
        assert incident.title and incident.url.startswith("https://") and incident.alert_count >= 1
        assert incident.status in ("New", "Active", "Closed")
        assert (incident.classification is not None) == (incident.status == "Closed")
    assert result.metadata.total >= result.metadata.returned == len(records)


async def test_severity_threshold_and_limit(run: Run) -> None:
    high = ok(await run("query_incidents", time_window="last_30d", min_severity="High", limit=100))
    assert high.records and {i.severity for i in high.records} == {"High"}
    medium = ok(await run("query_incidents", time_window="last_30d", min_severity="Medium", limit=100))
    assert {i.severity for i in medium.records} == {"High", "Medium"}
    three = ok(await run("query_incidents", time_window="last_30d", limit=3))
    assert three.metadata.returned == 3 and three.metadata.truncated and three.metadata.total > 3
    assert three.to_dict()["metadata"]["total"] == three.metadata.total


async def test_incident_detail_by_number_has_alerts_and_entities(run: Run) -> None:
    listed = ok(await run("query_incidents", time_window="last_7d", min_severity="High", limit=1)).records[0]
    detail = ok(await run("get_incident_detail", incident_ref=str(listed.number))).records[0]
    assert detail.incident.number == listed.number and detail.incident.title == listed.title
    assert detail.incident_id and detail.alerts and detail.entities
    assert len(detail.alerts) <= detail.incident.alert_count
    assert all(a.alert_id and a.name and a.severity for a in detail.alerts)
    assert all(e.type and e.value and "$ref" not in e.value for e in detail.entities)
    times = [a.time for a in detail.alerts]
    assert times == sorted(times, reverse=True)


async def test_incident_detail_by_title_search(run: Run) -> None:
    listed = ok(await run("query_incidents", time_window="last_30d", limit=1)).records[0]
    words = listed.title.split()[1:3]
    search = " ".join(words).upper()  # contains is case-insensitive
    detail = ok(await run("get_incident_detail", incident_ref=search)).records[0]
    assert search.casefold() in detail.incident.title.casefold()
    for other in detail.other_matches:
        assert search.casefold() in other.title.casefold() and other.number != detail.incident.number


async def test_unknown_incident_is_an_empty_result_not_an_error(run: Run) -> None:
    result = ok(await run("get_incident_detail", incident_ref=999_999_999))
    assert result.records == () and result.metadata.total == 0


async def test_alerts_deduplicated_filtered_and_sorted(run: Run, now) -> None:
    result = ok(await run("query_alerts", time_window="last_24h", min_severity="Medium", limit=100))
    assert result.records
    assert {a.severity for a in result.records} <= {"High", "Medium"}
    assert len({a.alert_id for a in result.records}) == len(result.records)
    keys = [(RANK[a.severity], -a.time.timestamp(), a.alert_id) for a in result.records]
    assert keys == sorted(keys)
    assert all(now - timedelta(hours=24) < a.time <= now for a in result.records)
    labelled = [a for a in result.records if a.entities]
    assert labelled and all(": " in label for a in labelled for label in a.entities)


async def test_trend_is_zero_filled_and_counts_every_alert(run: Run) -> None:
    trend = ok(await run("get_alert_trend", time_window="last_3d"))
    bins = sorted({b.start for b in trend.records})
    steps = {later - earlier for earlier, later in itertools.pairwise(bins)}
    assert steps == {timedelta(hours=1)} and 72 <= len(bins) <= 74
    per_severity = {}
    for b in trend.records:
        per_severity.setdefault(b.severity, []).append(b.start)
    assert all(sorted(starts) == bins for starts in per_severity.values()), "every series covers every bin"
    assert any(b.count == 0 for b in trend.records)
    alerts = ok(await run("query_alerts", time_window="last_3d", limit=1))
    assert sum(b.count for b in trend.records) == alerts.metadata.total
    daily = ok(await run("get_alert_trend", time_window="last_14d", min_severity="High"))
    assert {b.severity for b in daily.records} == {"High"}
    assert {b.start.hour for b in daily.records} == {0}


async def test_top_entities_ranked(run: Run) -> None:
    result = ok(await run("get_top_entities", time_window="last_7d", limit=10))
    records = result.records
    assert len(records) == 10 and result.metadata.truncated
    counts = [(-e.alert_count, -e.high_severity_count) for e in records]
    assert counts == sorted(counts)
    assert all(e.alert_count >= e.high_severity_count >= 0 for e in records)
    assert records[0].alert_count >= 3 * records[-1].alert_count / 2, "noisy entities lead clearly"


async def test_bad_arguments_never_reach_the_service(run: Run, fake_logs: FakeLogAnalytics) -> None:
    result = await run("query_alerts", time_window="last_year")
    assert isinstance(result, QueryError) and result.code == "invalid_argument" and not result.retry_possible
    assert "last_24h" in result.message
    assert fake_logs.requests == []


async def test_backends_return_identical_records(demo_backend: DemoBackend, fake_logs: FakeLogAnalytics) -> None:
    demo = SentinelClient(demo_backend)
    logs = make_la_client(fake_logs)
    calls = [
        ("query_incidents", {"time_window": "last_14d", "limit": 100}),
        ("query_alerts", {"time_window": "last_3d", "limit": 100}),
        ("get_alert_trend", {"time_window": "last_7d"}),
        ("get_top_entities", {"time_window": "last_30d", "limit": 50}),
    ]
    first = ok(await demo.run("query_incidents", time_window="last_30d", limit=5))
    calls += [("get_incident_detail", {"incident_ref": i.number}) for i in first.records]
    for dynamic_as_text in (True, False):  # the service may hand dynamic columns out as text or as values
        for tool, arguments in calls:
            await prime(fake_logs, demo_backend, tool, arguments, dynamic_as_text)
            expected = ok(await demo.run(tool, **arguments))
            actual = ok(await logs.run(tool, **arguments))
            assert actual.records == expected.records, tool
            assert (actual.metadata.total, actual.metadata.truncated) == (expected.metadata.total,
                                                                          expected.metadata.truncated)
            assert actual.metadata.kql == expected.metadata.kql
    await logs.close()
