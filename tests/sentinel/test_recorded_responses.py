"""Real query API responses, replayed through the real LogsQueryClient against the fake endpoint.

The bodies come from public recordings and Microsoft's documentation (each file in
tests/data/recorded_responses names its source); the test checks what the analyst is told for each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.sentinel.models import QueryError, QueryResult
from tests.sentinel.test_loganalytics_backend import INCIDENT_ROW, client_for
from tests.support.loganalytics_fake import FakeLogAnalytics, table_body

DATA = Path(__file__).resolve().parents[1] / "data"
RECORDED = DATA / "recorded_responses"


def recording(name: str) -> dict[str, Any]:
    return json.loads((RECORDED / name).read_text())


def documented(name: str) -> dict[str, Any]:
    [entry] = [e for e in recording("docs_errors.json")["responses"] if e["name"] == name]
    return entry


def replay(fake: FakeLogAnalytics, responses: list[dict[str, Any]]) -> None:
    for response in responses:
        body = response["body"]
        headers = {k: v for k, v in response.get("headers", {}).items() if k != "Content-Type"}  # the fake sets it
        fake.respond(response["status"], b"" if body is None else body, headers)


async def ask(fake: FakeLogAnalytics, tool: str = "query_incidents") -> QueryResult | QueryError:
    client = client_for(fake)
    try:
        return await client.run(tool)
    finally:
        await client.close()


def test_every_recording_names_its_source() -> None:
    for path in RECORDED.glob("*.json"):
        source = json.loads(path.read_text())["source"]
        assert source.startswith("GitHub ") and " at commit " in source, path.name


CASES = [  # (file, documented example or None, error code or None for a result, what the analyst is told)
    ("sdk_partial_success.json", None, "unreadable_response", "without the IncidentNumber column the bot asked for "
                                                              "(columns: percentile_x_50)"),
    ("sdk_response_types.json", None, "unreadable_response", "columns: stringcolumn, boolcolumn, datecolumn, "
                                                             "intcolumn, longcolumn, realcolumn"),
    ("sdk_server_timeout.json", None, "gateway_timeout", "(HTTP 504 Gateway Timeout), before the query's own"),
    ("sdk_semantic_error.json", None, "bad_query", "problem in the bot, not in your question"),
    ("docs_errors.json", "query syntax error", "bad_query", "report it with the query"),
    ("docs_errors.json", "no authentication provided", "unauthorized", "401 AuthenticationFailed"),
    ("docs_errors.json", "invalid authentication token", "forbidden", "token as invalid"),
    ("docs_errors.json", "invalid token audience", "forbidden", "LOGS_ENDPOINT"),
    ("docs_errors.json", "client credentials to direct API", "forbidden",
     "missing the Log Analytics Reader (or Microsoft Sentinel Reader) role"),
    ("docs_errors.json", "insufficient permissions", "forbidden", "Ask a workspace Owner to assign it"),
    ("docs_errors.json", "path not found", "workspace_not_found", "SENTINEL_WORKSPACE_ID"),
    ("docs_errors.json", "missing JSON or Content-Type", "unreadable_response", "not JSON"),
    ("docs_errors.json", "no data in workspace", "workspace_empty", "holds no data at all (HTTP 204)"),
]


@pytest.mark.parametrize("file, example, code, says", CASES, ids=[f"{c[0]}:{c[1] or ''}" for c in CASES])
async def test_recorded_responses_say_what_happened(fake_logs: FakeLogAnalytics, file, example, code, says) -> None:
    responses = [documented(example)] if example else recording(file)["responses"]
    replay(fake_logs, responses * (3 if example and responses[0]["status"] >= 500 else 1))
    result = await ask(fake_logs)
    assert isinstance(result, QueryError), result
    assert result.code == code and says in result.message, result.message
    assert "No incidents" not in result.message and "Traceback" not in result.message


async def test_a_recorded_504_is_a_gateway_timeout_not_the_query_timeout(fake_logs: FakeLogAnalytics) -> None:
    replay(fake_logs, recording("sdk_server_timeout.json")["responses"])
    result = await ask(fake_logs)
    assert isinstance(result, QueryError) and result.code == "gateway_timeout" and result.retry_possible
    assert len(fake_logs.requests) == 3  # the SDK retried twice, as configured; the fourth answer was not needed
    assert "did not finish within" not in result.message


async def test_a_recorded_syntax_error_keeps_the_services_words_for_the_log(fake_logs: FakeLogAnalytics) -> None:
    replay(fake_logs, recording("sdk_semantic_error.json")["responses"])
    result = await ask(fake_logs)
    assert isinstance(result, QueryError) and "Failed to resolve table or column expression" in result.detail


async def test_a_recorded_partial_error_is_quoted_by_its_inner_detail(fake_logs: FakeLogAnalytics) -> None:
    """The recorded error object, beside a table of the query's own columns."""
    [recorded] = recording("sdk_partial_success.json")["responses"]
    body = table_body("query_incidents", [INCIDENT_ROW]) | {"error": recorded["body"]["error"]}
    fake_logs.respond(200, body)
    result = await ask(fake_logs)
    assert isinstance(result, QueryResult) and len(result.records) == 1
    [warning] = result.metadata.warnings
    assert "a calculation overflowed, so some values may be wrong" in warning and "1 row came back" in warning
    assert "There were some errors" not in warning and not result.metadata.service_truncated


async def test_recorded_rows_decode(fake_logs: FakeLogAnalytics) -> None:
    """msticpy's recorded SecurityAlert response: 7-digit times, dynamic columns as JSON text, blank Entities."""
    fake_logs.respond(200, json.loads((DATA / "sample-rows" / "msticpy_az_mon_raw_query_SecurityAlert.json")
                                      .read_text()))
    result = await ask(fake_logs, "query_alerts")
    assert isinstance(result, QueryResult) and len(result.records) == 3
    assert "The result had no EntityLabels column; those fields are blank." in result.metadata.warnings
