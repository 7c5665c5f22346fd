"""Every card the bot sends: valid Adaptive Cards 1.5, under the size limit, and safe with hostile text.

Cards are validated against the official 1.5 schema the way a client without Teams charts sees them
(each ``Chart.*`` element replaced by its fallback); the chart element itself is checked against a
small schema written from the Teams "Charts in Adaptive Cards" page.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from bot import cards
from bot.cards.common import plain
from bot.cards.inert import ZERO_WIDTH_SPACE
from bot.orchestrator.references import References
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import (
    AlertSummary,
    EntityCount,
    EntityRef,
    Incident,
    IncidentDetail,
    IncidentMatch,
    QueryMetadata,
    QueryResult,
    TrendBin,
)
from bot.tools.registry import TOOLS

NOW = datetime(2026, 11, 20, 15, 30, tzinfo=UTC)
# The official Adaptive Cards 1.5 schema, kept in the repository (source: tests/schemas/README.md).
SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "adaptive-card-1.5.schema.json"
HOSTILE = "**URGENT** [click here](https://evil.example/x) <at>Dana</at> &lt;at&gt; _hi_ \x1b[31m\u202e\r\n# Heading"

# The Teams chart element, from learn.microsoft.com/microsoftteams/platform/task-modules-and-cards/cards/
# charts-in-adaptive-cards (Chart.Line / Chart.VerticalBar.Grouped: data = [{legend, color, values: [{x, y}]}]).
CHART_COLORS = ["good", "warning", "attention", "neutral", "categoricalRed", "categoricalPurple",
                "categoricalLavender", "categoricalBlue", "categoricalLightBlue", "categoricalTeal",
                "categoricalGreen", "categoricalLime", "categoricalMarigold"]
CHART_SCHEMA = {
    "type": "object",
    "required": ["type", "data"],
    "properties": {
        "type": {"enum": ["Chart.Line", "Chart.VerticalBar.Grouped"]},
        "title": {"type": "string"},
        "xAxisTitle": {"type": "string"},
        "yAxisTitle": {"type": "string"},
        "yMin": {"type": "number"},  # the axis range (the Teams chart element as the Agents Playground renders it)
        "yMax": {"type": "number"},
        "colorSet": {"type": "string"},
        "stacked": {"type": "boolean"},
        "fallback": {"type": "object"},
        "data": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["legend", "values"],
                "additionalProperties": False,
                "properties": {
                    "legend": {"type": "string"},
                    "color": {"enum": CHART_COLORS},
                    "values": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["x", "y"],
                            "additionalProperties": False,
                            "properties": {"x": {"type": ["string", "number"]}, "y": {"type": "number"}},
                        },
                    },
                },
            },
        },
    },
    "additionalProperties": False,
}


# ---- helpers ----------------------------------------------------------------------------------------


@cache
def _validator() -> jsonschema.Draft6Validator:
    assert SCHEMA.is_file(), f"the official Adaptive Card schema is missing: {SCHEMA}"
    return jsonschema.Draft6Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))


def _causes(error: jsonschema.ValidationError, depth: int = 0) -> Iterator[str]:
    """The error and, for "not valid under any of the given schemas", the deepest reasons inside."""
    yield f"{'  ' * depth}{list(error.absolute_path)}: {error.message[:300]}"
    for sub in sorted(error.context or [], key=lambda e: -len(e.absolute_path))[:4]:
        yield from _causes(sub, depth + 1)


def without_charts(node: Any) -> Any:
    """The card as a client without Teams charts sees it: each Chart.* element replaced by its fallback."""
    if isinstance(node, list):
        return [without_charts(item) for item in node]
    if isinstance(node, dict):
        if str(node.get("type", "")).startswith("Chart."):
            return without_charts(node["fallback"])
        return {key: without_charts(value) for key, value in node.items()}
    return node


def charts(node: Any) -> Iterator[dict]:
    if isinstance(node, list):
        for item in node:
            yield from charts(item)
    elif isinstance(node, dict):
        if str(node.get("type", "")).startswith("Chart."):
            yield node
        for value in node.values():
            yield from charts(value)


def schema_errors(card: dict) -> list[str]:
    errors = sorted(_validator().iter_errors(without_charts(card)), key=lambda e: list(e.absolute_path))
    problems = [line for error in errors for line in _causes(error)]
    for chart in charts(card):
        problems += [f"chart: {e.message}" for e in jsonschema.Draft6Validator(CHART_SCHEMA).iter_errors(chart)]
    return problems


def assert_valid(card: dict) -> None:
    problems = schema_errors(card)
    assert not problems, "invalid card:\n" + "\n".join(problems)
    assert card["type"] == "AdaptiveCard" and card["version"] == "1.5"
    assert cards.card_size(card) <= cards.MAX_CARD_BYTES, cards.card_size(card)


def walk(node: Any) -> Iterator[dict]:
    if isinstance(node, list):
        for item in node:
            yield from walk(item)
    elif isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)


def texts(card: dict) -> list[str]:
    """Every string a user reads: TextBlocks, TextRuns, facts and button titles."""
    out = []
    for node in walk(card):
        kind = node.get("type")
        if kind in ("TextBlock", "TextRun"):
            out.append(node["text"])
        elif kind is None and "title" in node and "value" in node:
            out += [node["title"], node["value"]]
        elif str(kind).startswith("Action.") and "title" in node:
            out.append(node["title"])
    return out


def shape(card: dict) -> list[str]:
    return [str(node.get("type")) for node in walk(card) if "type" in node]


def table_rows(card: dict) -> list[list[dict]]:
    table = next(node for node in walk(card) if node.get("type") == "Table")
    return [row["cells"] for row in table["rows"][1:]]


def cell_text(cell: dict) -> str:
    """The first text in a cell (a severity's text sits in its chip)."""
    return next(node["text"] for node in walk(cell) if node.get("type") == "TextBlock")


def chip_style(cell: dict) -> str | None:
    """The container style a cell's text is drawn on (None: the card's own background)."""
    return next((node["style"] for node in walk(cell) if node.get("type") in ("Column", "Container")), None)


def meta(tool: str, n: int, total: int | None = None, **parameters: Any) -> QueryMetadata:
    total = n if total is None else total
    return QueryMetadata(tool=tool, parameters=parameters or {"time_window": "last_7d", "min_severity": "Low"},
                         total=total, returned=n, truncated=total > n, elapsed_ms=12.5, kql="SecurityIncident | take 1",
                         timespan="PT604800S", source="demo")


def incident(number: int, title: str = "Suspicious sign-in", severity: str = "High", **more: Any) -> Incident:
    fields = {"number": number, "title": title, "severity": severity, "status": "Active", "owner": "Dana Whitfield",
              "created": NOW - timedelta(hours=14), "last_modified": NOW - timedelta(hours=2), "alert_count": 3,
              "tactics": ("InitialAccess",), "products": ("Microsoft Sentinel",),
              "url": f"https://portal.azure.com/#asset/Incident/{number}", "classification": None}
    return Incident(**{**fields, **more})


def alert(i: int, name: str = "Unfamiliar sign-in properties", severity: str = "Medium") -> AlertSummary:
    return AlertSummary(f"alert-{i}", name, severity, "New", "Microsoft Entra ID Protection",
                        NOW - timedelta(hours=3 + i), ("InitialAccess",),
                        (f"account: user{i}@contoso.com", f"ip: 10.0.0.{i % 250}"), 4)


def detail(n_alerts: int = 3, n_entities: int = 4, description: str = "A user denied MFA prompts.",
           title: str = "Multiple MFA push notifications denied", **more: Any) -> IncidentDetail:
    kinds = ("account", "host", "ip", "url", "file")
    fields = {
        "incident": incident(14431, title, alert_count=n_alerts), "incident_id": "6a7f098b",
        "description": description, "classification_reason": None, "classification_comment": None, "closed": None,
        "first_activity": NOW - timedelta(days=1), "last_activity": NOW - timedelta(hours=1), "comment_count": 2,
        "labels": ("VIP",),
        "alerts": tuple(alert(i) for i in range(n_alerts)),
        "entities": tuple(EntityRef(kinds[i % 5], f"value-{i}.contoso.com") for i in range(n_entities)),
    }
    return IncidentDetail(**{**fields, **more})


def registry(result: QueryResult) -> References:
    refs = References()
    refs.register(result)
    return refs


# ---- the validator itself ---------------------------------------------------------------------------


def test_the_validator_rejects_broken_cards() -> None:
    good = cards.help_card()
    assert not schema_errors(good)
    broken = copy.deepcopy(good)
    broken["body"].append({"type": "TextBlock", "txt": "missing text"})
    assert any("text" in line for line in schema_errors(broken)), schema_errors(broken)
    wrong_colour = copy.deepcopy(good)
    wrong_colour["body"][0]["color"] = "red"
    assert schema_errors(wrong_colour)
    bad_table = {"type": "AdaptiveCard", "version": "1.5", "body": [
        {"type": "Table", "columns": [{"width": 1}], "rows": [{"type": "TableRow", "cells": [{"type": "TableCell"}]}]}]}
    assert schema_errors(bad_table)  # a TableCell needs items
    with pytest.raises(AssertionError):
        assert_valid(broken)


def test_the_chart_schema_rejects_a_malformed_chart() -> None:
    chart = {"type": "Chart.Line", "data": [{"legend": "High", "values": [{"x": "Mon", "y": "three"}]}],
             "fallback": {"type": "TextBlock", "text": "x"}}
    card = {"type": "AdaptiveCard", "version": "1.5", "body": [chart]}
    assert any("chart" in line for line in schema_errors(card))
    chart["data"][0]["values"][0]["y"] = 3
    assert not schema_errors(card)


def test_msteams_full_width_is_not_in_the_1_5_schema() -> None:
    """Why cards do not set "msteams": {"width": "Full"}: the official schema rejects unknown card properties."""
    card = {**cards.help_card(), "msteams": {"width": "Full"}}
    assert schema_errors(card)


# ---- cards from the demo workspace ------------------------------------------------------------------


DEMO_QUERIES = [
    ("query_incidents", {"time_window": "last_30d", "min_severity": "informational", "limit": 100}),
    ("query_incidents", {"time_window": "last_24h", "min_severity": "high"}),
    ("query_incidents", {"time_window": "last_1h", "min_severity": "high"}),
    ("get_incident_detail", {"incident_ref": 14440}),
    ("get_incident_detail", {"incident_ref": "phishing"}),
    ("get_incident_detail", {"incident_ref": 999999}),
    ("query_alerts", {"time_window": "last_24h", "limit": 100}),
    ("query_alerts", {"time_window": "last_1h", "min_severity": "high"}),
    ("get_alert_trend", {"time_window": "last_24h"}),
    ("get_alert_trend", {"time_window": "last_3d", "bin_size": "1h"}),
    ("get_alert_trend", {"time_window": "last_30d"}),
    ("get_alert_trend", {"time_window": "last_14d", "bin_size": "1h"}),
    ("get_top_entities", {"time_window": "last_30d", "limit": 50}),
    ("get_top_entities", {"time_window": "last_1h", "min_severity": "high"}),
]


@pytest.mark.parametrize(("tool", "arguments"), DEMO_QUERIES)
async def test_demo_results_make_valid_small_cards(demo_client: SentinelClient, now: datetime, tool: str,
                                                   arguments: dict) -> None:
    result = await demo_client.run(tool, arguments)
    assert isinstance(result, QueryResult), result
    card = TOOLS.card(result, registry(result).ref_for, now)
    assert_valid(card)
    assert "DEMO DATA" in texts(card)
    assert coloured_text(card) == [], "no yellow (or green) text on the card's own background"


async def test_closed_incident_detail_shows_classification(demo_client: SentinelClient, now: datetime) -> None:
    listing = await demo_client.query_incidents("last_30d", "informational", 100)
    closed = next(i for i in listing.records if i.status == "Closed" and i.classification)
    result = await demo_client.get_incident_detail(closed.number)
    card = TOOLS.card(result, registry(result).ref_for, now)
    assert_valid(card)
    facts = {f["title"]: f["value"] for node in walk(card) if node.get("type") == "FactSet" for f in node["facts"]}
    assert facts["Status"] == "Closed" and "ago" in facts["Closed"] and "UTC" in facts["Closed"]
    assert facts["Classification"].startswith(closed.classification)


async def test_query_error_gives_an_error_card(demo_client: SentinelClient, now: datetime) -> None:
    failure = await demo_client.run("query_incidents", {"time_window": "last_400d"})
    card = TOOLS.card(failure, lambda kind, key: None, now)
    assert_valid(card)
    assert "time_window" in " ".join(texts(card))


# ---- incident table ---------------------------------------------------------------------------------


def test_incident_rows_carry_their_reference_and_details_button() -> None:
    result = QueryResult(tuple(incident(14400 + i, severity=("High", "Medium", "Low", "Informational")[i % 4])
                               for i in range(6)), meta("query_incidents", 6))
    refs = registry(result)
    refs.assign("incident", "99", "pushes the numbering so [n] differs from the row index")
    refs.register(result)
    card = cards.incident_table(result, refs.ref_for, NOW)
    assert_valid(card)
    for record, row in zip(result.records, table_rows(card), strict=True):
        assert cell_text(row[0]) == f"[{refs.ref_for('incident', str(record.number))}]"
        assert cell_text(row[1]) == record.title
        assert row[1]["items"][1]["text"] == f"#{record.number} · Active · Dana Whitfield · 14h ago"
        button = row[2]["items"][1]["actions"][0]  # under the severity chip
        assert button["type"] == "Action.Submit" and button["title"] == "Details"
        assert button["data"] == {"action": "incident_detail", "incident": record.number}  # a plain submit
    severities = [(cell_text(row[2]), chip_style(row[2])) for row in table_rows(card)]
    assert severities[:4] == [("High", "attention"), ("Medium", "warning"), ("Low", "accent"), ("Info", None)]
    assert "6 incidents (last 7 days, Low and above)" in texts(card)


def test_a_row_without_reference_shows_no_number() -> None:
    result = QueryResult((incident(1),), meta("query_incidents", 1))
    card = cards.incident_table(result, lambda kind, key: None, NOW)
    assert cell_text(table_rows(card)[0][0]) == ""
    assert "1 incident (last 7 days, Low and above)" in texts(card)


def test_hundred_hostile_incidents_are_capped_and_say_so() -> None:
    records = tuple(incident(20000 + i, (HOSTILE * 4)[:250], owner=HOSTILE) for i in range(100))
    result = QueryResult(records, meta("query_incidents", 100, total=340, time_window="last_30d",
                                       min_severity="Informational"))
    card = cards.incident_table(result, registry(result).ref_for, NOW)
    assert_valid(card)
    rows = table_rows(card)
    assert len(rows) == 25
    assert [r["items"][1]["actions"][0]["data"]["incident"] for r in (row[2] for row in rows)] == \
        [20000 + i for i in range(25)]
    joined = " ".join(texts(card))
    assert "340 incidents (last 30 days, all severities)" in joined
    assert 'Showing 1–25 of 340 incidents. Type "more" (or press Next) for the next page.' in joined
    assert_inert(card)


def test_incident_table_shrinks_rows_rather_than_exceed_the_size_limit() -> None:
    emoji_title = "🚨" * 250  # 4 bytes per character
    records = tuple(incident(i, emoji_title, owner="👤" * 30) for i in range(100))
    result = QueryResult(records, meta("query_incidents", 100))
    card = cards.incident_table(result, registry(result).ref_for, NOW)
    assert_valid(card)
    shown = len(table_rows(card))
    assert 5 < shown < 25
    assert f"Showing 1–{shown} of 100 incidents." in " ".join(texts(card))
    [button] = [a for a in card["actions"] if a["title"] == "Next"]
    assert button["data"]["listing"]["offset"] == shown, "Next starts after the rows this card could hold"


# ---- hostile text -----------------------------------------------------------------------------------


def read(value: str) -> str:
    """What the reader sees: the zero-width break opportunities (common.breakable) are invisible."""
    return value.replace(ZERO_WIDTH_SPACE, "")


def assert_inert(card: dict) -> None:
    for value in map(read, texts(card)):
        assert value.isprintable() or "\u00a0" in value, repr(value)
        assert "](" not in value and "**" not in value and "<at" not in value.lower(), value
        assert not re.search(r"<[A-Za-z/]", value), value
        assert not re.match(r"#+ ", value) and "&lt;" not in value, value


@pytest.mark.parametrize("hostile", [
    HOSTILE,
    "[Reset your password](https://evil.example/login)",
    "<at>Security Team</at> please approve",
    "# Fake heading\n\n- fake list",
    "1. first step",
    "**bold** and __also__ and _it_",
    "tab\there\x00nul\x07bell\u200bzero-width\u202eRTL",
    "x" * 10_000,
    "&lt;at&gt;admin&lt;/at&gt;",
])
def test_plain_makes_text_inert(hostile: str) -> None:
    shown = plain(hostile, 120)
    assert len(shown) <= 120
    assert shown.replace(ZERO_WIDTH_SPACE, "").isprintable() or "\u00a0" in shown  # URLs carry zero-width breaks
    assert "](" not in shown and "**" not in shown and "<at" not in shown.lower() and "&lt;" not in shown
    assert not re.match(r"(#+|[-+>]|\d+[.)]) ", shown)
    assert not re.search(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])", shown)


def test_plain_keeps_ordinary_values_readable() -> None:
    assert plain("svc_backup@contoso.com") == "svc_backup@contoso.com"
    assert plain("C:\\Windows\\System32\\cmd.exe /c whoami") == "C:\\Windows\\System32\\cmd.exe /c whoami"
    assert plain("  two\n lines ") == "two lines"
    assert plain("a" * 50, 10) == "a" * 9 + "…"
    assert plain(None) == ""


def test_hostile_incident_detail_is_plain_and_has_no_extra_elements() -> None:
    benign = cards.incident_detail(detail(), lambda kind, key: 7, NOW)
    hostile_detail = detail(title=HOSTILE * 50, description=HOSTILE * 100,
                            incident=replace(detail().incident, title=HOSTILE * 50, owner=HOSTILE),
                            alerts=tuple(replace(a, name=HOSTILE, product=HOSTILE) for a in detail().alerts),
                            entities=tuple(replace(e, value=HOSTILE) for e in detail().entities))
    hostile = cards.incident_detail(hostile_detail, lambda kind, key: 7, NOW)
    assert_valid(hostile)
    assert_inert(hostile)
    assert shape(hostile) == shape(benign)
    title = next(t for t in texts(hostile) if t.startswith("∗∗URGENT"))
    assert len(read(title)) <= 200 and title.endswith("…")


def test_entity_identifiers_are_shown_inert() -> None:
    ids = (("Sid", "S-1-5-21-1004336348-1177238915-682003330-4443"), ("AadUserId", "c30a27ea-f73c-409f-b286-2048"))
    entities = (EntityRef("account", "nina.park@contoso.com", ids),)
    shown = texts(cards.incident_detail(detail(entities=entities), lambda kind, key: 7, NOW))
    assert any("Sid S-1-5-21-1004336348-1177238915-682003330-4443 · AadUserId c30a27ea" in t for t in shown), shown
    hostile = tuple(EntityRef("account", HOSTILE, (("Sid", HOSTILE), (HOSTILE, "[x](https://evil.example/a)")))
                    for _ in range(3))
    card = cards.incident_detail(detail(entities=hostile), lambda kind, key: 7, NOW)
    assert_valid(card)
    assert_inert(card)


def test_hostile_alert_and_entity_lists_keep_their_shape() -> None:
    alerts = QueryResult(tuple(alert(i) for i in range(3)), meta("query_alerts", 3))
    bad_alerts = QueryResult(tuple(replace(a, name=HOSTILE, product=HOSTILE, entities=(f"account: {HOSTILE}",))
                                   for a in alerts.records), alerts.metadata)
    entities = QueryResult(tuple(EntityCount("account", f"user{i}", 5, 1, NOW) for i in range(3)),
                           meta("get_top_entities", 3))
    bad_entities = QueryResult(tuple(replace(e, value=HOSTILE * 100, type=HOSTILE) for e in entities.records),
                               entities.metadata)
    for good, bad, build in ((alerts, bad_alerts, cards.alert_list), (entities, bad_entities, cards.top_entities)):
        clean_card, hostile_card = build(good, registry(good).ref_for, NOW), build(bad, registry(bad).ref_for, NOW)
        assert_valid(hostile_card)
        assert_inert(hostile_card)
        assert shape(hostile_card) == shape(clean_card)


# ---- incident detail --------------------------------------------------------------------------------


def test_maximal_incident_detail_fits() -> None:
    big = detail(n_alerts=50, n_entities=50, description="d" * 4000,
                 other_matches=tuple(IncidentMatch(100 + i, f"Other {HOSTILE}") for i in range(8)))
    result = QueryResult((big,), meta("get_incident_detail", 1, incident_ref="MFA"))
    refs = registry(result)
    card = TOOLS.card(result, refs.ref_for, NOW)
    assert_valid(card)
    joined = texts(card)
    description = next(t for t in joined if t.startswith("ddd"))
    assert len(description) == 600
    assert "Alerts (15 of 50)" in joined and "Entities (20 of 50)" in joined
    alert_rows = table_rows(card)
    assert [cell_text(r[0]) for r in alert_rows] == [f"[{refs.ref_for('alert', f'alert-{i}')}]" for i in range(15)]
    other = [a for node in walk(card) if node.get("type") == "ActionSet" for a in node["actions"]]
    assert [a["data"]["incident"] for a in other] == [100, 101, 102, 103, 104]
    assert any("and 3 more" in t for t in joined)
    assert card["actions"] == [{"type": "Action.OpenUrl", "title": "Open in Sentinel",
                                "url": "https://portal.azure.com/#asset/Incident/14431"}]


def test_detail_entities_are_grouped_by_type_with_references() -> None:
    d = detail(n_entities=6)
    refs = registry(QueryResult((d,), meta("get_incident_detail", 1)))
    card = cards.incident_detail(d, refs.ref_for, NOW)
    rows = table_rows({"body": [node for node in walk(card) if node.get("type") == "Table"][-1:]})
    assert [cell_text(row[0]) for row in rows] == ["Account", "", "Host", "IP", "URL", "File"]
    assert cell_text(rows[0][1]) == f"[{refs.ref_for('entity', 'account:value-0.contoso.com')}]"
    assert cell_text(rows[0][2]) == "value-0.contoso.com"  # the value exactly, in a block of its own


@pytest.mark.parametrize("url", ["http://portal.azure.com/x", "javascript:alert(1)", "", "https://a b", "ftp://x"])
def test_open_in_sentinel_only_for_https(url: str) -> None:
    d = detail(incident=replace(detail().incident, url=url))
    card = cards.incident_detail(d, lambda kind, key: None, NOW)
    assert_valid(card)
    assert "actions" not in card


def test_detail_card_shows_demo_marker_and_notes() -> None:
    card = cards.incident_detail(detail(), lambda kind, key: 3, NOW, demo=True, notes=("Showing 50 of 80 alerts.",))
    assert_valid(card)
    assert "DEMO DATA" in texts(card) and "Note: Showing 50 of 80 alerts." in texts(card)
    assert "[3] Incident #14431" in texts(card)
    assert "High severity" in texts(card)


# ---- alerts and entities ----------------------------------------------------------------------------


def test_alert_rows() -> None:
    result = QueryResult(tuple(alert(i, severity="High") for i in range(30)), meta("query_alerts", 30, total=120))
    refs = registry(result)
    card = cards.alert_list(result, refs.ref_for, NOW)
    assert_valid(card)
    rows = table_rows(card)
    assert len(rows) == 25
    assert cell_text(rows[0][0]) == f"[{refs.ref_for('alert', 'alert-0')}]"
    chip = rows[0][1]["items"][1]  # under the name
    assert (cell_text(chip), chip_style(chip)) == ("High", "attention")
    assert rows[0][1]["items"][2]["text"] == "Microsoft Entra ID Protection · 3h ago"
    assert rows[0][1]["items"][3]["text"] == "Entities: user0@contoso.com, 10.0.0.0 +2"
    assert "Showing 1–25 of 120 alerts." in " ".join(texts(card))


def test_entity_rows() -> None:
    result = QueryResult((EntityCount("host", "web-01", 40, 3, NOW - timedelta(days=3)),
                          EntityCount("ip", "10.0.0.9", 12, 0, None)), meta("get_top_entities", 2))
    refs = registry(result)
    card = cards.top_entities(result, refs.ref_for, NOW)
    assert_valid(card)
    first, second = table_rows(card)
    assert cell_text(first[0]) == f"[{refs.ref_for('entity', 'host:web-01')}]"
    assert [cell_text(c) for c in first[1:]] == ["web-01", "40", "3"]
    assert first[1]["items"][1]["text"] == "host · last seen 3d ago"
    assert first[3]["items"][0]["color"] == "attention" and second[3]["items"][0]["color"] == "default"


# ---- trend ------------------------------------------------------------------------------------------


def trend_result(hours: int, bin_size: str = "1h") -> QueryResult:
    step = timedelta(hours=1) if bin_size == "1h" else timedelta(days=1)
    start = datetime(2026, 10, 21, tzinfo=UTC)
    bins = tuple(TrendBin(start + step * i, severity, (i * 7 + rank) % 13)
                 for i in range(hours) for rank, severity in enumerate(("High", "Medium", "Low", "Informational")))
    return QueryResult(bins, meta("get_alert_trend", len(bins), time_window="last_30d",
                                  min_severity="Informational", bin_size=bin_size))


def test_maximal_trend_has_chart_and_small_fallback() -> None:
    result = trend_result(720)
    card = cards.alert_trend(result)
    assert_valid(card)
    chart, = charts(card)
    assert chart["type"] == "Chart.Line"
    assert [series["legend"] for series in chart["data"]] == ["High", "Medium", "Low", "Info"]
    assert [series["color"] for series in chart["data"]] == ["attention", "warning", "categoricalBlue", "neutral"]
    assert all(len(series["values"]) <= 48 for series in chart["data"])
    total = sum(b.count for b in result.records)
    assert sum(v["y"] for series in chart["data"] for v in series["values"]) == total
    fallback_rows = table_rows(chart["fallback"])
    assert len(fallback_rows) <= 14
    assert sum(int(cell_text(row[1])) for row in fallback_rows) == total
    summary = next(t for t in texts(card) if t.startswith(f"{total} alerts"))
    assert "High " in summary and "Peak:" in summary
    seen = without_charts(card)
    assert not list(charts(seen)) and any(node.get("type") == "Table" for node in walk(seen))


def teams_y_labels(chart: dict) -> list[str]:
    """The y-axis labels Teams draws for a Chart.Line (as the Agents Playground's Teams chart code does): five lines
    from yMin to yMax (else 0 to the largest value), each labelled with up to two decimals, thousands as "k"."""
    top = chart.get("yMax", max(v["y"] for series in chart["data"] for v in series["values"]))
    labels = []
    for line in range(5):
        value = top * line / 4
        if value >= 1000:
            thousands = value / 1000
            labels.append(f"{thousands:.{0 if thousands >= 10 else 1}f}".rstrip("0").rstrip(".") + "k")
        else:
            labels.append(f"{value:.{1 if value >= 10 else 2}f}".rstrip("0").rstrip(".") if value else "0")
    return labels


PHONE_LABEL_CHARACTERS = 2  # what the 20 px margin of a chart at most 300 px wide shows whole


@pytest.mark.parametrize("largest", [0, 1, 3, 7, 13, 21, 34, 46, 61, 80, 96, 97, 150, 480, 999, 1000, 1001, 4321,
                                     38_000])
def test_the_trend_charts_y_labels_are_whole_and_fit_a_phone(largest: int) -> None:
    """46 alerts in the busiest hour drew lines at 11.5, 23, 34.5 and 46, and a phone showed "34.5" as "4.5": the
    card sets the axis so every label is a whole number, of at most two digits up to 96 alerts."""
    start = datetime(2026, 11, 19, tzinfo=UTC)
    bins = (TrendBin(start, "High", largest), TrendBin(start + timedelta(hours=1), "High", largest // 3),
            TrendBin(start + timedelta(hours=2), "Medium", 1))
    chart, = charts(cards.alert_trend(QueryResult(bins, meta("get_alert_trend", 3, time_window="last_24h",
                                                                  bin_size="1h"))))
    labels = teams_y_labels(chart)
    assert chart["yMin"] == 0 and chart["yMax"] >= max(largest, 1) and chart["yMax"] % 4 == 0, chart["yMax"]
    assert chart["yMax"] <= max(largest * 2, 4), "the line keeps at least half the chart's height"
    assert not [label for label in labels if "." in label and not label.endswith("k")], labels  # whole numbers
    if largest <= 96:
        assert max(map(len, labels)) <= PHONE_LABEL_CHARACTERS, labels
    else:
        assert max(map(len, labels)) <= 4, labels
    before = {**chart, "yMax": 46, "yMin": 0}
    assert teams_y_labels(before) == ["0", "11.5", "23", "34.5", "46"]  # the labels the issue saw


def test_daily_trend_keeps_daily_points_and_fills_gaps() -> None:
    result = trend_result(7, "1d")
    gap = QueryResult(tuple(b for b in result.records if b.start.day != 23), result.metadata)
    card = cards.alert_trend(gap)
    assert_valid(card)
    chart, = charts(card)
    assert [v["x"] for v in chart["data"][0]["values"]][:3] == ["21", "22", "23"]  # short: axis labels are cut
    assert chart["data"][0]["values"][2]["y"] == 0
    assert len(table_rows(chart["fallback"])) == 7


def test_partial_first_and_last_days_are_marked_and_never_the_peak() -> None:
    start = datetime(2026, 11, 13, tzinfo=UTC)
    now = datetime(2026, 11, 20, 15, 30, tzinfo=UTC)  # the window began at 15:30 on the 13th
    counts = [90, 10, 12, 11, 14, 13, 9, 95]  # the partial ends are the biggest
    bins = tuple(TrendBin(start + timedelta(days=i), "High", n) for i, n in enumerate(counts))
    result = QueryResult(bins, meta("get_alert_trend", len(bins), time_window="last_7d", min_severity="Informational",
                                    bin_size="1d"))
    card = cards.alert_trend(result, now)
    assert_valid(card)
    chart, = charts(card)
    labels = [v["x"] for v in chart["data"][0]["values"]]
    # The partial first day is not drawn (a few hours' alerts read as a quiet day); today so far is, marked.
    assert labels[-1] == "20*" and labels[:-1] == [str(d) for d in range(14, 20)]
    assert "partly outside the window" in chart["xAxisTitle"] and "14 Nov–20 Nov" in chart["xAxisTitle"]
    summary = next(t for t in texts(card) if t.startswith("254 alerts"))
    assert "Peak: 14 in the day Tue 17 Nov UTC." in summary and "partial" in summary
    rows = table_rows(chart["fallback"])
    assert cell_text(rows[0][0]).endswith("(partial)") and cell_text(rows[-1][0]).endswith("(partial)")
    assert cards.alert_trend(QueryResult(bins[:1], result.metadata), now) is not None  # one partial bin: still a peak


def test_more_points_than_a_phone_labels_are_numbered_back_from_the_last() -> None:
    """24 hourly labels ("22h", "23h", "00h"...) were each cut to their first character at a phone's width; past 12
    points x is a number (periods before the last bucket), which Teams labels every few points by itself."""
    now = datetime(2026, 10, 21, 23, 30, tzinfo=UTC)
    card = cards.alert_trend(trend_result(24), now)
    chart, = charts(card)
    xs = [v["x"] for v in chart["data"][0]["values"]]
    assert xs == list(range(-len(xs) + 1, 1)) and len(xs) >= 23
    assert chart["xAxisTitle"] == "Hours before 21 Oct 23:00 UTC (0, partial)"
    few = cards.alert_trend(trend_result(7, "1d"))
    week, = charts(few)
    assert all(isinstance(v["x"], str) for v in week["data"][0]["values"])  # a week: named days


def test_hourly_day_groups_into_readable_rows() -> None:
    card = cards.alert_trend(trend_result(24))
    assert_valid(card)
    chart, = charts(card)
    assert len(chart["data"][0]["values"]) == 24
    rows = table_rows(chart["fallback"])
    assert len(rows) == 12 and cell_text(rows[0][0]) == "21 Oct 00:00"


# ---- empty results ----------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["query_incidents", "query_alerts", "get_alert_trend", "get_top_entities"])
def test_empty_list_suggests_widening(tool: str) -> None:
    card = TOOLS.card(QueryResult((), meta(tool, 0, time_window="last_1h", min_severity="High")),
                             lambda kind, key: None, NOW)
    assert_valid(card)
    joined = " ".join(texts(card))
    assert "Nothing matched in the last hour, High only." in joined and "wider time window" in joined
    assert "DEMO DATA" in joined


def test_an_empty_search_names_what_was_searched_and_only_hints_at_what_is_left() -> None:
    """"incidents open mine" over every severity in 30 days: no "lower the severity" (it searched all of them);
    the filters are named, and fewer filters is what is left to try."""
    empty = QueryResult((), meta("query_incidents", 0, time_window="last_30d", min_severity="Informational",
                                 status="open", owner="alex@contoso.com", search="qakbot"))
    joined = " ".join(texts(TOOLS.card(empty, lambda kind, key: None, NOW)))
    assert "Nothing matched in the last 30 days, all severities, open · owner alex@contoso.com · “qakbot”." in joined
    assert "Try fewer filters." in joined and "severity" not in joined.split("Try")[1]
    widest = QueryResult((), meta("query_alerts", 0, time_window="last_30d", min_severity="Informational"))
    assert "Nothing is left to widen" in " ".join(texts(TOOLS.card(widest, lambda kind, key: None, NOW)))


def test_empty_detail_says_no_incident() -> None:
    for ref, expected in ((4242, "No incident #4242"), ("[evil](http://x)", 'No incident title matched "[evil] (')):
        card = TOOLS.card(QueryResult((), meta("get_incident_detail", 0, incident_ref=ref)),
                                 lambda kind, key: None, NOW)
        assert_valid(card)
        assert any(t.startswith(expected) for t in texts(card)), texts(card)


# ---- footer -----------------------------------------------------------------------------------------


def test_footer_is_none_when_empty() -> None:
    assert cards.footer([], demo=False, disclaimer=False, notices=[]) is None
    # An answer that ran no query on the demo workspace: the banner alone would be a card that says nothing.
    assert cards.footer([], demo=True, disclaimer=False, notices=[]) is None
    with_notice = cards.footer([], demo=True, disclaimer=False, notices=["Unverified: incident #999"])
    assert with_notice is not None and texts(with_notice)[0].startswith("Demo workspace")


def test_footer_with_everything() -> None:
    kql = "SecurityIncident\n    | where Title has \"**x** [a](http://e)\"\n    | project-away *\n" * 200
    sources = [cards.SourceLine(f"query_incidents(time_window=last_24h) on demo workspace, 12 rows, {i} ms", kql)
               for i in range(5)] + [cards.SourceLine("no query text", "")]
    card = cards.footer(sources, demo=True, disclaimer=True,
                        notices=["Unverified: incident #999 is not in any tool result", HOSTILE])
    assert card is not None
    assert_valid(card)
    joined = texts(card)
    assert joined[0].startswith("Demo workspace: generated sample data")
    assert "AI-generated analysis: verify it against the source data before you act on it." in joined
    notice = next(node for node in walk(card) if node.get("text", "").startswith("Unverified"))
    box = next(node for node in walk(card) if node.get("style") == "warning" and notice in node.get("items", []))
    assert "color" not in notice and box["type"] == "Container", "default text on the warning background: readable"
    hidden = [node for node in walk(card) if node.get("isVisible") is False]
    assert [node["id"] for node in hidden] == [f"kql-{i}" for i in range(1, 6)]
    toggle = next(node for node in walk(card) if node.get("type") == "Action.ToggleVisibility")
    assert toggle["targetElements"] == [node["id"] for node in hidden] and toggle["title"] == "Show queries"
    runs = [node for node in walk(hidden) if node.get("type") == "TextRun"]
    assert all(run["fontType"] == "monospace" for run in runs)
    assert runs[1]["text"].startswith("\u00a0" * 4 + "| where")
    assert "project-away *" in runs[2]["text"]  # a TextRun is not markdown: the query stays copyable
    assert all("](" not in run["text"] for run in runs)
    for container in hidden:  # five 7,600-character queries cannot all fit 28 KB: each says how much it shows
        shown = [run["text"] for run in walk(container) if run.get("type") == "TextRun"]
        assert shown and all(not line.endswith("…") for line in shown), "whole lines, never cut mid-token"
        assert container["items"][-1]["text"].startswith(f"Shortened to fit the card: {len(shown)} of 600 lines")


def test_show_query_shows_the_whole_query_when_it_fits() -> None:
    kql = "\n".join(f"SecurityIncident | where IncidentNumber == {n} | extend Note = 'line {n}'" for n in range(80))
    card = cards.footer([cards.SourceLine("get_incident_detail(incident_ref=1), 1 row, 5 ms", kql)], demo=False,
                        disclaimer=False, notices=[])
    assert card is not None and len(kql) > 3_000
    hidden = next(node for node in walk(card) if node.get("isVisible") is False)
    shown = [run["text"] for run in walk(hidden) if run.get("type") == "TextRun"]
    assert "\n".join(shown) == kql and "Shortened" not in " ".join(texts(card))


def test_footer_single_query_and_plain_notice() -> None:
    card = cards.footer([cards.SourceLine("get_alert_trend(time_window=last_7d), 42 rows, 80 ms", "SecurityAlert")],
                        demo=False, disclaimer=False, notices=[])
    assert card is not None
    assert_valid(card)
    toggle = next(node for node in walk(card) if node.get("type") == "Action.ToggleVisibility")
    assert toggle["title"] == "Show query"
    assert not any("Demo workspace" in t for t in texts(card))
    only_notice = cards.footer([], demo=False, disclaimer=False, notices=["Unverified: incident #999"])
    assert only_notice is not None and texts(only_notice) == ["Unverified: incident #999"]


# ---- messages ---------------------------------------------------------------------------------------


def test_error_card() -> None:
    card = cards.error("Sentinel is throttling requests", "Too many queries.\nThe workspace said 429.",
                       "Wait a minute and ask again.")
    assert_valid(card)
    assert texts(card) == ["Sentinel is throttling requests", "Too many queries.", "The workspace said 429.",
                           "What to do next: Wait a minute and ask again."]
    assert_valid(cards.error(HOSTILE, HOSTILE * 100, None))
    assert_inert(cards.error(HOSTILE, HOSTILE * 100, HOSTILE))


@pytest.mark.parametrize(("demo", "model_enabled"), [(True, True), (False, False), (True, False), (False, True)])
def test_welcome(demo: bool, model_enabled: bool) -> None:
    card = cards.welcome(demo, model_enabled)
    assert_valid(card)
    joined = " ".join(texts(card))
    assert ("Demo workspace" in joined) == demo
    assert ("need a language model" in joined) == (not model_enabled)
    buttons = [a for node in walk(card) if node.get("type") == "ActionSet" for a in node["actions"]]
    assert 4 <= len(buttons) <= 5
    for button in buttons:
        assert button["type"] == "Action.Submit" and "msteams" not in button["data"]
        assert button["data"]["action"] in ("ask", "command")
    sent = [b["data"].get("question") or b["data"].get("command") for b in buttons]
    if model_enabled:
        assert "Which hosts were hit most this week?" in sent
    else:
        assert "incidents 7d high" in sent


def test_help_card_lists_the_commands() -> None:
    card = cards.help_card()
    assert_valid(card)
    joined = " ".join(texts(card))
    for command in ("incidents [window] [severity]", "incident N", "alerts", "trend", "entities", "prefer", "help",
                    "clear"):
        assert command in joined


def test_card_size_counts_utf8_bytes() -> None:
    assert cards.card_size({"a": "é"}) == len('{"a":"é"}'.encode())
    assert cards.MAX_CARD_BYTES == 28_000


# ---- phones and dark mode ---------------------------------------------------------------------------

UPN = "firstname.lastname@contoso.onmicrosoft.com"
LONG_URL = "https://login.contoso-secure.example.com/oauth2/authorize?client_id=abc&redirect=x"
SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def texts_with(card: dict, value: str) -> list[dict]:
    return [node for node in walk(card) if node.get("type") == "TextBlock" and value in read(node["text"])] + \
        [fact for node in walk(card) if node.get("type") == "FactSet" for fact in node["facts"]
         if value in read(fact["value"])]


def test_long_values_are_shown_exactly_and_never_cut() -> None:
    """Emails, UPNs, hosts and hashes are shown as the records hold them, character for character (no zero-width
    spaces: copied into a query or a block list they would silently fail to match); they wrap by layout (the layout
    test, tests/cards/test_card_layout.py, checks that). A URL entity is exact too, in a TextRun (not markdown, so no
    link); a URL inside free text (a title, a description) stays broken so Teams makes no link of it."""
    entities = (EntityRef("account", UPN), EntityRef("url", LONG_URL), EntityRef("filehash", SHA256),
                EntityRef("host", "ws-fin-160.corp.contoso.local"))
    d = detail(entities=entities, incident=incident(14431, owner=UPN), description=f"Clicked {LONG_URL} today")
    listing = QueryResult((AlertSummary("a-1", "Sign-in", "High", "New", "Entra ID", NOW, (),
                                        (f"account: {UPN}", "ip: 10.0.0.4"), 2),), meta("query_alerts", 1))
    built = [cards.incident_detail(d, lambda kind, key: None, NOW),
             cards.incident_table(QueryResult((incident(1, owner=UPN),), meta("query_incidents", 1)),
                                  lambda kind, key: None, NOW),
             cards.alert_list(listing, lambda kind, key: None, NOW)]
    for card in built:
        assert_valid(card)
        assert_inert(card)
    detail_card, table_card, alert_card = built
    shown = [n.get("text") for n in walk(detail_card) if n.get("type") in ("TextBlock", "TextRun")]
    for value in (UPN, SHA256, "ws-fin-160.corp.contoso.local", LONG_URL):
        assert value in shown, f"{value} shown exactly, in a block of its own, on the detail card"
    run = next(n for n in walk(detail_card) if n.get("type") == "TextRun" and n.get("text") == LONG_URL)
    assert run.get("selectAction") is None
    description = next(t for t in texts(detail_card) if t.startswith("Clicked"))
    assert LONG_URL not in description and read(description) == f"Clicked {LONG_URL} today"
    for card in built:
        assert not [t for t in texts(card) if UPN in read(t) and ZERO_WIDTH_SPACE in t], "emails copy exactly"
    assert any(UPN in t for t in texts(table_card)) and any(UPN in t for t in texts(alert_card))
    assert "…" not in " ".join(t for t in texts(detail_card) if SHA256[:20] in t)


def test_a_phone_number_keeps_its_plus() -> None:
    """A leading "+" starts a markdown list only before a space: "+1 425 555 0847" stays as typed (no "＋")."""
    assert plain("+1 425 555 0847") == "+1 425 555 0847"
    assert plain("+ item").startswith("＋") and plain("- item").startswith("‐") and plain("# h").startswith("＃")


def coloured_text(card: dict) -> list[str]:
    """Text drawn in the yellow "warning" colour (or "good"/"light"): unreadable on a white card."""
    return [node["text"] for node in walk(card) if node.get("type") in ("TextBlock", "TextRun")
            and node.get("color") in ("warning", "good", "light")]


def test_no_yellow_text_severity_and_demo_label_on_theme_backgrounds() -> None:
    """Teams draws container styles from its light, dark and high-contrast themes; text colours it does not
    adapt as well, and yellow on white is hard to read. Severities and the DEMO DATA label sit on styles."""
    rows = tuple(incident(i, severity=s) for i, s in enumerate(("High", "Medium", "Low", "Informational")))
    table_card = cards.incident_table(QueryResult(rows, replace(meta("query_incidents", 4), source="demo")),
                                      lambda kind, key: None, NOW)
    built = [table_card, cards.incident_detail(detail(), lambda kind, key: None, NOW, demo=True),
             cards.alert_list(QueryResult(tuple(alert(i) for i in range(3)), meta("query_alerts", 3)),
                              lambda kind, key: None, NOW),
             cards.welcome(True, False), cards.welcome(False, True), cards.help_card(),
             cards.footer([cards.SourceLine("q", "SecurityAlert")], demo=True, disclaimer=True, notices=["n"])]
    for card in built:
        assert card is not None
        assert_valid(card)
        assert coloured_text(card) == [], coloured_text(card)
    for card in built[:2]:
        label = next(node for node in walk(card) if node.get("type") == "Column"
                     and any(item.get("text") == "DEMO DATA" for item in node["items"]))
        assert label["style"] == "warning"
    chips = [chip_style(row[2]) for row in table_rows(table_card)]
    assert chips == ["attention", "warning", "accent", None]
    medium = next(node for node in walk(table_card) if node.get("style") == "warning")
    assert medium["type"] == "Column" and medium["width"] == "auto", "a chip as wide as the word, not the cell"


def test_one_of_a_kind_is_singular() -> None:
    one_incident = cards.incident_table(QueryResult((incident(1),), meta("query_incidents", 1)),
                                        lambda kind, key: None, NOW)
    one_alert = cards.alert_list(QueryResult((alert(1),), meta("query_alerts", 1)), lambda kind, key: None, NOW)
    assert any(t.startswith("1 incident (") for t in texts(one_incident)), texts(one_incident)
    assert any(t.startswith("1 alert (") for t in texts(one_alert)), texts(one_alert)
    six = cards.footer([], demo=False, disclaimer=False, notices=[f"notice {i}" for i in range(6)])
    assert six is not None and "1 more notice not shown." in texts(six)
