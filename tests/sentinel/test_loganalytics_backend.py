"""The Log Analytics backend against a fake service: request shape, errors, retries, partial data, real rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.sentinel.client import SentinelClient
from bot.sentinel.loganalytics import LogAnalyticsBackend, create_logs_client
from bot.sentinel.models import QueryError, QueryResult
from bot.sentinel.queries import kql_of, make_query
from tests.support.loganalytics_fake import FakeCredential, FakeLogAnalytics, error_body, table_body
from tests.support.virtual_clock import VirtualClock

WORKSPACE = "11111111-2222-3333-4444-555555555555"
# Rows from public projects' test data, as Log Analytics returned them (sources: tests/data/README.md).
SAMPLES = Path(__file__).resolve().parents[1] / "data" / "sample-rows"
INCIDENT_ROW = {
    "IncidentNumber": 42, "Title": "Brute force attack against Azure Portal", "Severity": "High", "Status": "Active",
    "Owner": "Alice Ng", "CreatedTime": "2026-11-20T10:00:00.000000Z",
    "LastModifiedTime": "2026-11-20T11:00:00.000000Z",
    "AlertCount": 2, "Tactics": ["CredentialAccess"], "Products": ["Microsoft Entra ID Protection"],
    "IncidentUrl": "https://portal.azure.com/#asset/x", "Classification": "", "TotalMatched": 1,
}


def client_for(fake: FakeLogAnalytics, credential=None, sleeps: list[float] | None = None, **options) -> SentinelClient:
    """The backend over the fake; its waits (the scheduler's) pass in virtual time, recorded in ``sleeps``."""
    logs = create_logs_client(credential or FakeCredential(), endpoint=fake.endpoint, transport=fake.transport(),
                              retry_backoff_factor=0.01)
    clock = VirtualClock(sleeps if sleeps is not None else [])
    return SentinelClient(LogAnalyticsBackend(logs, WORKSPACE, sleep=clock.sleep, clock=clock.now, **options))


async def test_request_shape(fake_logs: FakeLogAnalytics) -> None:
    credential = FakeCredential()
    client = client_for(fake_logs, credential)
    query = make_query("query_incidents", {"time_window": "last_24h"})
    fake_logs.known[kql_of(query)] = table_body("query_incidents", [INCIDENT_ROW])
    result = await client.query_incidents(time_window="last_24h")
    assert isinstance(result, QueryResult) and result.records[0].number == 42
    [request] = fake_logs.requests
    assert request.path == f"/v1/workspaces/{WORKSPACE}/query"
    assert request.body["query"] == kql_of(query)
    assert request.body["timespan"].startswith("PT86400")  # the window also goes through the API's timespan
    assert "wait=30" in request.headers["Prefer"]  # a one-day window gets half the 60 s ceiling
    assert request.headers["x-ms-client-request-id"]  # the query id, logged with any problem
    assert credential.scopes == [(f"{fake_logs.endpoint}/.default",)]
    assert result.metadata.source == "log_analytics" and result.metadata.timespan == "PT86400S"
    await client.close()


async def test_partial_result_keeps_data_and_warns(fake_logs: FakeLogAnalytics) -> None:
    body = table_body("query_incidents", [INCIDENT_ROW])
    body["error"] = {"code": "PartialError", "message": "There were some errors when processing your query.",
                     "details": [{"code": "EngineError", "message": "Query exceeded memory limits"}]}
    fake_logs.respond(200, body)
    client = client_for(fake_logs)
    result = await client.query_incidents()
    assert isinstance(result, QueryResult) and len(result.records) == 1 and result.partial
    assert "Partial result" in result.metadata.warnings[0] and "memory limits" in result.metadata.warnings[0]
    assert "1 row came back" in result.metadata.warnings[0]
    fake_logs.respond(200, {"error": body["error"]})  # partial error without any table: not "no incidents"
    empty = await client.query_incidents()
    assert isinstance(empty, QueryError) and empty.code == "partial_failure" and "no rows" in empty.message
    await client.close()


async def test_429_with_a_short_retry_after_waits_that_long(fake_logs: FakeLogAnalytics) -> None:
    fake_logs.respond(429, error_body("ThrottledError", "Too many requests"), {"Retry-After": "3"})
    fake_logs.respond(200, table_body("query_incidents", [INCIDENT_ROW]))
    sleeps: list[float] = []
    client = client_for(fake_logs, sleeps=sleeps)
    result = await client.query_incidents()
    assert isinstance(result, QueryResult) and len(fake_logs.requests) == 2 and sleeps == [3.0]
    await client.close()


async def test_429_with_a_long_retry_after_is_reported_with_the_wait(fake_logs: FakeLogAnalytics) -> None:
    fake_logs.respond(429, error_body("ThrottledError", "Too many requests"), {"Retry-After": "45"})
    sleeps: list[float] = []
    client = client_for(fake_logs, sleeps=sleeps)
    result = await client.query_incidents()
    assert isinstance(result, QueryError) and result.code == "throttled" and not result.retry_possible
    assert "wait 45 seconds" in result.message and len(fake_logs.requests) == 1 and sleeps == []
    await client.close()


async def test_429_without_retry_after_backs_off_here(fake_logs: FakeLogAnalytics) -> None:
    fake_logs.respond(429, error_body("ThrottledError", "Too many requests"))
    fake_logs.respond(200, table_body("query_incidents", [INCIDENT_ROW]))
    sleeps: list[float] = []
    client = client_for(fake_logs, sleeps=sleeps)
    result = await client.query_incidents()
    assert isinstance(result, QueryResult)
    assert len(fake_logs.requests) == 2 and len(sleeps) == 1 and 1.0 <= sleeps[0] <= 1.25
    await client.close()


async def test_persistent_throttling_is_a_retryable_error(fake_logs: FakeLogAnalytics) -> None:
    for _ in range(3):
        fake_logs.respond(429, error_body("ThrottledError", "Too many requests"))
    sleeps: list[float] = []
    client = client_for(fake_logs, sleeps=sleeps)
    result = await client.query_alerts()
    assert isinstance(result, QueryError) and result.code == "throttled" and result.retry_possible
    assert len(fake_logs.requests) == 3 and sleeps[1] > sleeps[0]  # bounded, exponential
    assert result.tool == "query_alerts" and result.kql
    await client.close()


@pytest.mark.parametrize(
    "status, body, code, retryable, says",
    [
        (504, error_body("GatewayTimeout", "Gateway timeout"), "gateway_timeout", True, "before the query's own"),
        (500, error_body("InternalServerError", "oops"), "server_error", True, "Try again"),
        (400, error_body("BadArgumentError", "The request had some invalid properties", "SyntaxError",
                         "A recognition error occurred in the query."), "bad_query", False, "report it"),
        (403, error_body("InsufficientAccessError", "The provided credentials have insufficient access"),
         "forbidden", False, "missing the Log Analytics Reader (or Microsoft Sentinel Reader) role"),
        (403, error_body("InvalidAuthenticationTokenAudience", "The access token is from the wrong audience"),
         "forbidden", False, "LOGS_ENDPOINT"),
        (404, error_body("PathNotFoundError", "Workspace not found"), "workspace_not_found", False,
         "SENTINEL_WORKSPACE_ID"),
    ],
)
async def test_errors_map_to_clear_query_errors(fake_logs: FakeLogAnalytics, status, body, code, retryable,
                                                says) -> None:
    for _ in range(3):  # the SDK itself retries 5xx a bounded number of times
        fake_logs.respond(status, body)
    client = client_for(fake_logs)
    result = await client.query_incidents()
    assert isinstance(result, QueryError), result
    assert (result.code, result.retry_possible, result.status) == (code, retryable, status)
    assert says in result.message
    assert "Traceback" not in result.message and "HttpResponseError" not in result.message
    if status == 400:
        assert "recognition error" in result.detail  # the service's words stay in the log detail
    if code == "forbidden" and "Reader" in says:
        assert WORKSPACE in result.message
    await client.close()


async def test_rejected_token_is_unauthorized(fake_logs: FakeLogAnalytics) -> None:
    class WrongToken(FakeCredential):
        async def get_token(self, *scopes, **kwargs):
            token = await super().get_token(*scopes, **kwargs)
            return type(token)("not-the-right-token", token.expires_on)

    client = client_for(fake_logs, WrongToken())
    result = await client.query_incidents()
    assert isinstance(result, QueryError) and result.code == "unauthorized" and not result.retry_possible
    await client.close()


async def test_slow_service_hits_the_client_deadline(fake_logs: FakeLogAnalytics) -> None:
    fake_logs.respond(200, table_body("query_incidents", [INCIDENT_ROW]), delay_s=60)
    client = client_for(fake_logs, server_timeout_s=1, deadline_grace_s=0.3)
    result = await client.query_incidents()
    assert isinstance(result, QueryError) and result.code == "timeout" and result.retry_possible
    assert "within the 1 s the bot gives it (server_timeout)" in result.message  # the query's own limit, said
    assert fake_logs.delays_done == 0, "the client's deadline ended the wait, not the service's answer"
    await client.close()


async def test_unreachable_service(tmp_path: Path) -> None:
    fake = FakeLogAnalytics(tmp_path)  # never started: nothing listens on this port
    fake.endpoint = "https://127.0.0.1:9"
    client = client_for(fake)
    result = await client.query_incidents()
    assert isinstance(result, QueryError) and result.code == "unreachable" and result.retry_possible
    await client.close()


async def test_real_sample_rows_decode(fake_logs: FakeLogAnalytics) -> None:
    """Rows as real Log Analytics responses carry them: numbers as text, dynamic as JSON strings, 7-digit times."""
    samples = json.loads((SAMPLES / "stixshifter_test_rows.json").read_text())
    incident_row = samples["test_azure_sentinel_log_analytics_json_to_stix.py(3005df5^)::DATA3"]
    columns = [{"name": k, "type": "string"} for k in incident_row]
    fake_logs.respond(200, {"tables": [{"name": "PrimaryResult", "columns": columns,
                                        "rows": [list(incident_row.values())]}]})
    raw_alerts = json.loads((SAMPLES / "msticpy_az_mon_raw_query_SecurityAlert.json").read_text())
    fake_logs.respond(200, raw_alerts)
    client = client_for(fake_logs)
    incidents = await client.query_incidents()
    assert isinstance(incidents, QueryResult)
    [incident] = incidents.records
    assert incident.number == 1186 and incident.severity == "Medium" and incident.owner is None
    assert incident.created is not None and incident.created.year == 2022
    alerts = await client.query_alerts()
    assert isinstance(alerts, QueryResult) and len(alerts.records) == 3
    assert all(a.alert_id and a.time is not None and a.time.tzinfo for a in alerts.records)
    assert all(a.entities == () for a in alerts.records)  # Entities is "" in these rows
    await client.close()
