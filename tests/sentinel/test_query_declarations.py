"""Adding a read query is one declaration: a query written only in this test, registered, is offered to the model,
checked by Microsoft's Kusto parser, answered by the demo workspace (equal to an independent evaluation of the
generated rows) and by Log Analytics (the fake service), and rendered as compact text and as a valid card, with
no other file touched. Also: every declared query's parameters are its tool's schema, and its columns its KQL's.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest

from bot import cards
from bot.cards.common import Element, card, header, table, text
from bot.demo import generator
from bot.demo.backend import DemoBackend
from bot.sentinel import demo_sql as sql
from bot.sentinel import kql, queries
from bot.sentinel.client import SentinelClient
from bot.sentinel.demo_sql import iso
from bot.sentinel.models import QueryResult
from bot.sentinel.params import TimeWindow
from bot.sentinel.rows import as_int, as_text
from bot.sentinel.spec import DemoWorkspace, QuerySpec, Row, limit_param, window_param
from bot.tools.compact import RefFor, cell, table_text
from bot.tools.registry import TOOLS
from bot.tools.tool import Tool, read_tool
from bot.tools.toolbox import ToolBox
from tests.cards.test_cards import assert_valid
from tests.conftest import NOW, SEED
from tests.support import kusto
from tests.support.loganalytics_fake import FakeLogAnalytics, table_body
from tests.support.workspaces import make_la_client

# --- the new query, as one module would declare it ------------------------------------------------------------------


@dataclass(frozen=True)
class ProductCount:
    product: str
    alerts: int


@dataclass(frozen=True)
class AlertProductsQuery:
    window: TimeWindow
    limit: int

    tool = "get_alert_products"

    @property
    def timespan(self) -> timedelta:
        return self.window.duration

    def parameters(self) -> dict[str, Any]:
        return {"time_window": self.window.value, "limit": self.limit}


def _kql(query: AlertProductsQuery) -> str:
    return f"""// get_alert_products: alerts per product over the {query.window.label}
let products = materialize(SecurityAlert
    | where TimeGenerated > {kql.ago(query.window)}
    | summarize arg_max(TimeGenerated, ProductName, ProviderName) by SystemAlertId
    | summarize AlertCount = count() by ProductName = coalesce(ProductName, ProviderName));
products
| sort by AlertCount desc, ProductName asc
| take {query.limit}
| extend TotalMatched = toscalar(products | count)
| project ProductName, AlertCount, TotalMatched"""


def _decode(row: Row) -> ProductCount:
    return ProductCount(as_text(row.get("ProductName")), as_int(row.get("AlertCount")))


def _demo(query: AlertProductsQuery, conn: sqlite3.Connection, now: datetime,
          workspace: DemoWorkspace) -> list[dict[str, Any]]:
    text = f"""
        WITH products AS MATERIALIZED (
            SELECT COALESCE(NULLIF(a.ProductName, ''), a.ProviderName) AS ProductName, COUNT(*) AS AlertCount
            FROM LatestAlert AS l JOIN SecurityAlert AS a ON a.rowid = l.AlertRowId WHERE {sql.CURRENT} GROUP BY 1)
        SELECT *, (SELECT COUNT(*) FROM products) AS TotalMatched FROM products
        ORDER BY AlertCount DESC, ProductName LIMIT :limit"""
    return sql.fetch(conn, text, {"start": iso(now - query.window.duration), "now": iso(now), "limit": query.limit})


SPEC = QuerySpec(
    name=AlertProductsQuery.tool,
    params=(window_param(TimeWindow.LAST_24H), limit_param(5, 20)),
    make=lambda time_window, limit: AlertProductsQuery(time_window, limit),
    kql=_kql,
    result=(("ProductName", "string"), ("AlertCount", "long"), ("TotalMatched", "long")),
    keys=("ProductName",),
    decode=_decode,
    demo=_demo,
)


def _row(p: ProductCount, ref_for: RefFor) -> str:
    return f"{cell(p.product, 80)}|{p.alerts}"


def _card(result: QueryResult, ref_for: RefFor, now: datetime, changes: bool = False) -> Element:
    rows = [[{"type": "TableCell", "items": [text(p.product)]}, {"type": "TableCell", "items": [text(str(p.alerts))]}]
            for p in result.records]
    return card([*header("Alerts per product", demo=result.metadata.is_demo),
                 table(["Product", "Alerts"], [3, 1], rows)])


TOOL: Tool = read_tool(SPEC, "Alert counts per product in a window.", "Counting alerts per product...",
                       text=table_text("products", ["product (untrusted text)", "alerts"], _row), card=_card)


# --- the test -------------------------------------------------------------------------------------------------------

@pytest.fixture
def registered() -> Iterator[None]:
    queries.register(SPEC)
    TOOLS.add(TOOL)
    try:
        yield
    finally:
        TOOLS.remove(TOOL.name)
        queries.unregister(SPEC.name)


def expected_products(window: timedelta, limit: int) -> tuple[list[tuple[str, int]], int]:
    """From the generated rows: the latest row of each alert in (NOW - window, NOW], counted by product."""
    latest: dict[str, dict] = {}
    for row in generator.generate(SEED, NOW).alert_rows:  # sorted by time: later rows replace earlier ones
        if iso(NOW - window) < row["TimeGenerated"] <= iso(NOW):
            latest[row["SystemAlertId"]] = row
    counts = Counter(row["ProductName"] or row["ProviderName"] for row in latest.values())
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ranked[:limit], len(ranked)


@pytest.mark.slow
async def test_a_query_declared_in_one_module_is_offered_run_and_rendered(registered: None,
                                                                          demo_backend: DemoBackend) -> None:
    assert TOOL.name in {t.name for t in TOOLS.offered(writes=False)}
    schema = TOOL.parameters_schema()
    assert schema["properties"]["limit"] == {"type": "integer", "minimum": 1, "maximum": 20}
    [checked] = kusto.check([queries.kql_of(queries.make_query(SPEC.name, {"time_window": "last_7d"}))])
    assert checked["ok"], checked["errors"]
    assert tuple(c["name"] for c in checked["result_columns"]) == SPEC.columns
    assert tuple((c["name"], c["type"]) for c in checked["result_columns"]) == SPEC.result, \
        "declared types are the KQL's"

    box = ToolBox(SentinelClient(demo_backend))
    run = await box.run(SPEC.name, json.dumps({"time_window": "last_7d", "limit": 3}))
    assert run.ok and TOOLS.status_text(SPEC.name) == "Counting alerts per product..."
    ranked, total = expected_products(timedelta(days=7), 3)
    assert [(p.product, p.alerts) for p in run.artifact.records] == ranked and len(ranked) == 3
    assert run.artifact.metadata.total == total and run.artifact.metadata.truncated == (total > 3)
    lines = TOOLS.text(run.artifact, lambda kind, key: None, run.arguments).splitlines()
    assert lines[0].startswith(f"get_alert_products(time_window=last_7d limit=3) -> 3 of {total} products")
    assert lines[2:] == [f"{product}|{count}" for product, count in ranked]
    assert_valid(TOOLS.card(run.artifact, lambda kind, key: None, NOW))
    refused = await box.run(SPEC.name, json.dumps({"limit": 500}))
    assert not refused.ok and refused.artifact.code == "invalid_argument" and "limit" in refused.artifact.message


async def test_the_new_query_reads_the_same_from_log_analytics(registered: None, demo_backend: DemoBackend,
                                                                fake_logs: FakeLogAnalytics) -> None:
    query = queries.make_query(SPEC.name, {"time_window": "last_3d"})
    raw = await demo_backend.execute(query, queries.kql_of(query))
    fake_logs.known[queries.kql_of(query)] = table_body_for(raw.rows)
    client = make_la_client(fake_logs)
    try:
        remote = await client.run(SPEC.name, time_window="last_3d")
    finally:
        await client.close()
    local = await SentinelClient(demo_backend).run(SPEC.name, time_window="last_3d")
    assert isinstance(remote, QueryResult) and isinstance(local, QueryResult)
    assert remote.records == local.records and remote.metadata.source == "log_analytics"


def table_body_for(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The service's table for this query's rows: the fake serves any declared query's typed columns."""
    return table_body(SPEC.name, rows)


def test_every_declared_query_is_its_tools_schema() -> None:
    """The schema the model sees is generated from the declaration, so the two cannot drift apart."""
    for spec in queries.QUERIES:
        tool = TOOLS.get(spec.name)
        if spec.internal:
            assert tool is None or (tool.command_only and tool not in TOOLS.offered(writes=True)), \
                f"{spec.name} is internal: no tool may offer it"
            continue
        assert tool is not None and tool.text is not None and tool.card is not None, spec.name
        # Extended parameters (a hunt's series, sessions, proximity) are offered only where a hunt is likely: the
        # base schema is the declaration without them, in its order; the widened one holds every declared parameter.
        # (an extended parameter may also widen a base one's description: a join's proximity).
        base = tuple(tool.parameters_schema()["properties"])
        assert base == tuple(p.name for p in spec.params if p.name in base)
        assert not {p.name for p in spec.params} - set(base) - {p.name for p in tool.extended}
        assert set(tool.widened().parameters_schema()["properties"]) == {p.name for p in spec.params}
        assert {p.name for p in spec.params if p.required} == set(tool.parameters_schema().get("required", ()))
    assert cards.result_card  # the card entry point every tool's card goes through
