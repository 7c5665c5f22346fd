"""Every shape a 200 (or 204) from the query API can take, through the real LogsQueryClient, and what the analyst sees.

The rule: a response the bot cannot read is an error that says so, never an empty result ("No incidents");
rows that are only partly there are kept with what they have; rows with nothing are counted and skipped.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.cards.results import incidents_card, result_card
from bot.sentinel.models import QueryError, QueryResult
from bot.terminal.render import render
from tests.sentinel.test_loganalytics_backend import INCIDENT_ROW, client_for
from tests.support.loganalytics_fake import RESULT_TYPES, FakeLogAnalytics, table_body

NOW = datetime(2026, 11, 20, 15, 30, tzinfo=UTC)
INCIDENT_COLUMNS = [{"name": n, "type": t} for n, t in RESULT_TYPES["query_incidents"]]


def one_table(columns: Any, rows: Any, name: str = "PrimaryResult") -> dict[str, Any]:
    return {"tables": [{"name": name, "columns": columns, "rows": rows}]}


def wire_row(**changes: Any) -> list[Any]:
    return table_body("query_incidents", [INCIDENT_ROW | changes])["tables"][0]["rows"][0]


async def ask(fake: FakeLogAnalytics, status: int, body: Any) -> QueryResult | QueryError:
    fake.respond(status, body)
    client = client_for(fake)
    try:
        return await client.query_incidents()
    finally:
        await client.close()


def shown(result: QueryResult | QueryError) -> str:
    """What the terminal prints and the Teams card says, which must agree."""
    text = render(result, lambda *_: None, NOW)
    card = json.dumps(result_card(result, incidents_card, lambda *_: None, NOW))
    if isinstance(result, QueryError):
        assert result.message in text and json.dumps(result.message)[1:-1] in card
    return text + "\n" + card


UNREADABLE = [
    pytest.param(200, {}, "without a result table", id="empty-object"),
    pytest.param(200, {"tables": []}, "without a result table", id="no-tables"),
    pytest.param(200, {"tables": None}, "without a result table", id="tables-null"),
    pytest.param(200, one_table([], []), "without the IncidentNumber column", id="no-columns"),
    pytest.param(200, one_table([{"name": "Computer", "type": "string"}, {"name": "TimeGenerated", "type": "datetime"}],
                                [["web-01", "2026-11-20T10:00:00Z"]]),
                 "columns: Computer, TimeGenerated", id="another-table"),
    pytest.param(200, one_table(INCIDENT_COLUMNS, None), "unknown shape", id="rows-null"),
    pytest.param(200, one_table(INCIDENT_COLUMNS[:2], [[1, "a", "extra"]]), "unknown shape",
                 id="row-longer-than-columns"),
    pytest.param(200, {"tables": [{"name": "PrimaryResult", "rows": [[1]]}]}, "unknown shape", id="columns-missing"),
    pytest.param(200, [1, 2], "unknown shape", id="body-is-a-list"),
    pytest.param(200, b"<html><body>Bad gateway</body></html>", "not JSON", id="html-page"),
    pytest.param(200, b"", "not JSON", id="empty-200"),
]


@pytest.mark.parametrize("status, body, says", UNREADABLE)
async def test_unreadable_responses_are_errors_not_empty_results(fake_logs, status, body, says) -> None:
    result = await ask(fake_logs, status, body)
    assert isinstance(result, QueryError), result
    assert result.code == "unreadable_response" and result.retry_possible
    assert says in result.message and "not an empty result" in result.message
    assert result.query_id and result.query_id in result.message  # the analyst can report it
    assert fake_logs.requests[-1].headers["x-ms-client-request-id"] == result.query_id  # and support can find it
    text = shown(result)
    assert "No incidents" not in text and "Traceback" not in text


async def test_an_unreadable_response_is_logged_with_its_query_id(fake_logs, caplog) -> None:
    with caplog.at_level("WARNING", logger="bot.sentinel.loganalytics"):
        result = await ask(fake_logs, 200, {})
    assert isinstance(result, QueryError)
    assert any(result.query_id in r.getMessage() and "query_incidents" in r.getMessage() for r in caplog.records)


async def test_a_real_empty_table_is_no_incidents(fake_logs) -> None:
    result = await ask(fake_logs, 200, one_table(INCIDENT_COLUMNS, []))
    assert isinstance(result, QueryResult) and result.records == () and not result.metadata.warnings


async def test_204_says_the_workspace_has_no_data(fake_logs) -> None:
    result = await ask(fake_logs, 204, b"")
    assert isinstance(result, QueryError) and result.code == "workspace_empty" and not result.retry_possible
    assert "holds no data at all (HTTP 204)" in result.message and "SENTINEL_WORKSPACE_ID" in shown(result)


async def test_rows_that_are_all_unreadable_are_an_error(fake_logs) -> None:
    rows = [wire_row(IncidentNumber=None), wire_row(IncidentNumber="")]
    result = await ask(fake_logs, 200, one_table(INCIDENT_COLUMNS, rows))
    assert isinstance(result, QueryError) and "returned 2 row(s) but none" in result.message
    assert result.query_id and result.query_id in result.message


async def test_rows_without_any_identifying_column_are_counted_and_skipped(fake_logs) -> None:
    rows = [wire_row(), wire_row(IncidentNumber=None, Title=None), [], wire_row(IncidentNumber=43)]
    result = await ask(fake_logs, 200, one_table(INCIDENT_COLUMNS, rows))
    assert isinstance(result, QueryResult) and [r.number for r in result.records] == [42, 43]
    assert "2 result row(s) could not be read and were left out." in result.metadata.warnings
    assert shown(result).count("2 result row(s) could not be read") == 2  # terminal and card


async def test_a_short_row_keeps_what_it_has(fake_logs) -> None:
    result = await ask(fake_logs, 200, one_table(INCIDENT_COLUMNS, [[7, "Short row"]]))
    assert isinstance(result, QueryResult)
    [incident] = result.records
    assert (incident.number, incident.title, incident.severity, incident.created) == (7, "Short row", "", None)


async def test_a_missing_column_is_named(fake_logs) -> None:
    columns = [c for c in INCIDENT_COLUMNS if c["name"] != "Severity"]
    row = [value for c, value in zip(INCIDENT_COLUMNS, wire_row(), strict=True) if c["name"] != "Severity"]
    result = await ask(fake_logs, 200, one_table(columns, [row]))
    assert isinstance(result, QueryResult) and result.records[0].number == 42 and result.records[0].severity == ""
    assert "The result had no Severity column; those fields are blank." in result.metadata.warnings


async def test_the_primary_table_is_read_whichever_comes_first(fake_logs) -> None:
    body = table_body("query_incidents", [INCIDENT_ROW])
    body["tables"].insert(0, {"name": "QueryStatistics", "columns": [{"name": "x", "type": "long"}], "rows": [[1]]})
    result = await ask(fake_logs, 200, body)
    assert isinstance(result, QueryResult) and result.records[0].number == 42


def partial(code: str, inner: str, rows: list[dict[str, Any]] | None) -> dict[str, Any]:
    body: dict[str, Any] = table_body("query_incidents", rows) if rows is not None else {}
    body["error"] = {"code": "PartialError", "message": "There were some errors when processing your query.",
                     "details": [{"code": "EngineError", "message": "Something went wrong processing your query.",
                                  "innererror": {"code": code, "message": inner, "severity": 2}}]}
    return body


SIZE_LIMIT = ("Query result set has exceeded the internal data size limit 67108864 bytes "
              "(E_QUERY_RESULT_SET_TOO_LARGE; see https://aka.ms/kustoquerylimits)")


async def test_a_result_cut_by_the_service_says_so(fake_logs) -> None:
    result = await ask(fake_logs, 200, partial("-2133196797", SIZE_LIMIT, [INCIDENT_ROW]))
    assert isinstance(result, QueryResult) and len(result.records) == 1
    meta = result.metadata
    assert meta.truncated and meta.service_truncated  # cut by the service, not by the bot's own limit
    [warning] = meta.warnings
    assert "result limit (500,000 rows or 64 MB)" in warning and "1 row came back" in warning
    assert "There were some errors" not in warning and len(warning) <= 200  # cards show 200 characters
    assert shown(result).count("Narrow the time window") == 2


async def test_a_partial_error_quotes_its_inner_detail(fake_logs) -> None:
    inner = "Something specific happened in shard 3 (E_SOMETHING_NEW)."
    result = await ask(fake_logs, 200, partial("-1", inner, [INCIDENT_ROW, INCIDENT_ROW | {"IncidentNumber": 41}]))
    assert isinstance(result, QueryResult) and not result.metadata.service_truncated
    assert "Something specific happened in shard 3" in result.metadata.warnings[0]
    assert "2 rows came back" in result.metadata.warnings[0]


async def test_a_partial_error_without_rows_is_an_error(fake_logs) -> None:
    result = await ask(fake_logs, 200, partial("-2133196797", SIZE_LIMIT, None))
    assert isinstance(result, QueryError) and result.code == "partial_failure"
    assert "sent no rows" in result.message and "result limit" in result.message
    assert "No incidents" not in shown(result)
