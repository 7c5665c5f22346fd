"""An alert's own fields (issue 33, item 3): description, activity start and end, MITRE techniques, the portal link
and remediation steps, read from real rows and from the demo, shown on the detail card, in the model's and the
terminal's text, held by the fact check; hostile values shown inert and bounded, never a crash, never a live link.

Real rows: ``tests/data/sample-rows`` (msticpy's recorded Log Analytics response; stix-shifter's Defender for Cloud
sample alert, whose RemediationSteps is plain text rather than a JSON array).
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot import cards
from bot.cards import plaintext
from bot.cards.common import MAX_CARD_BYTES, card_size, portal_url
from bot.orchestrator.factcheck import grounding
from bot.orchestrator.factcheck.facts import Facts
from bot.orchestrator.references import References
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import AlertSummary, IncidentDetail, QueryMetadata, QueryResult
from bot.sentinel.params import parse_incident_ref
from bot.sentinel.queries import alerts as alerts_query
from bot.sentinel.queries import incident_detail as detail_query
from bot.sentinel.rows import MAX_ALERT_DESCRIPTION_CHARS, remediation_steps, techniques
from bot.tools.registry import TOOLS
from tests.cards.test_cards import detail
from tests.conftest import NOW
from tests.sentinel.test_loganalytics_backend import client_for
from tests.support.loganalytics_fake import FakeLogAnalytics

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "sample-rows"
STIX = "test_azure_log_analytics_json_to_stix.py::DATA1"  # Defender for Cloud's "[SAMPLE ALERT]" row


def stix_alert() -> AlertSummary:
    row = json.loads((SAMPLES / "stixshifter_test_rows.json").read_text())[STIX]
    return alerts_query.decode(row)


def walk(value: Any) -> list[Any]:
    """Every dict and string inside a card."""
    out = [value]
    if isinstance(value, dict):
        out += [x for v in value.values() for x in walk(v)]
    elif isinstance(value, list):
        out += [x for v in value for x in walk(v)]
    return out


def card_texts(card: dict) -> str:
    return "\n".join(str(e["text"]) for e in walk(card) if isinstance(e, dict) and "text" in e)


def open_urls(card: dict) -> list[str]:
    return [e["url"] for e in walk(card) if isinstance(e, dict) and e.get("type") == "Action.OpenUrl"]


def detail_result(d: IncidentDetail) -> QueryResult:
    return QueryResult((d,), QueryMetadata("get_incident_detail", {"incident_ref": d.incident.number}, 1, 1, False,
                                           1.0, "", "P90D", "log_analytics"))


async def test_real_rows_read_through_log_analytics_keep_description_and_times(fake_logs: FakeLogAnalytics) -> None:
    fake_logs.respond(200, json.loads((SAMPLES / "msticpy_az_mon_raw_query_SecurityAlert.json").read_text()))
    client = client_for(fake_logs)
    result = await client.query_alerts()
    await client.close()
    assert isinstance(result, QueryResult) and len(result.records) == 3
    first = result.records[0]
    assert first.description.startswith("This query will alert on any attempts to terminate processes")
    assert first.start == datetime(2022, 1, 6, 13, 1, 34, tzinfo=UTC)
    assert first.end == datetime(2022, 1, 6, 13, 4, 53, tzinfo=UTC)
    assert first.techniques == () and first.link == "" and first.remediation == ()  # blank in these rows
    assert not any("SubTechniques" in w for w in result.metadata.warnings), "rows older than the column are whole"


def test_a_defender_for_cloud_row_keeps_its_plain_text_remediation_and_portal_link() -> None:
    alert = stix_alert()
    assert alert.remediation == ("Review with Sample-account the suspicious command process and command line to "
                                 "confirm that this is legitimate activity that you expect to see on Sample-VM. If "
                                 "not, escalate the alert to the information security team.",)
    assert alert.link.startswith("https://portal.azure.com/#blade/Microsoft_Azure_Security_AzureDefenderForData/")
    assert alert.start is not None and alert.end is not None and alert.start.tzinfo
    card = cards.incident_detail(detail(n_alerts=0, alerts=(alert,)), lambda kind, key: None, NOW)
    assert open_urls(card).count(alert.link) == 1, "a Microsoft portal link is a real button"
    texts = card_texts(card)
    assert "Remediation" in texts and "1. Review with Sample" in texts
    assert "22 Mar 2023 07:27 UTC" in texts, "the activity with its zone and, in another year, its year"


@pytest.mark.parametrize(("value", "expected"), [
    ('["T1003"]', ("T1003",)), (["T1110", "T1078"], ("T1110", "T1078")), ("T1059, t1566.001", ("T1059", "T1566.001")),
    ('["T1110"', ("T1110",)), ("not json at all", ()), ('{"x": [1, 2]}', ()), (None, ()), ("", ()),
    ("T10034 XT1003 T1003.1234", ()), ("[" + '"T1003",' * 5000 + "]", ("T1003",)),
])
def test_techniques_are_ids_only(value: Any, expected: tuple[str, ...]) -> None:
    assert techniques(value) == expected


def test_a_sub_technique_stands_for_its_technique() -> None:
    assert techniques('["T1110","T1078"]', '["T1110.003"]') == ("T1078", "T1110.003")


@pytest.mark.parametrize(("value", "expected"), [
    ('["Isolate the device.", "Reset the password."]', ("Isolate the device.", "Reset the password.")),
    ("Isolate the device.\nReset the password.", ("Isolate the device.", "Reset the password.")),
    ('["one", ', ('["one",',)), ("", ()), (None, ()), ('[{"step": 1}, 7]', ('{"step": 1}', "7")),
])
def test_remediation_steps_from_json_or_text(value: Any, expected: tuple[str, ...]) -> None:
    assert remediation_steps(value) == expected


def test_many_or_huge_steps_are_bounded_and_say_so() -> None:
    steps = remediation_steps(json.dumps([f"step {n}" for n in range(40)]))
    assert len(steps) == 12 and steps[-1] == "step 11 …(28 more steps)"
    [huge] = remediation_steps(json.dumps(["x" * 100_000]))
    assert huge.endswith("…(99000 more characters)") and len(huge) < 1100


@pytest.mark.parametrize("url", [
    "https://security.microsoft.com/alerts/da638", "https://portal.azure.com/#blade/x/alertId/1",
    "https://contoso.portal.cloudappsecurity.com/#/alerts/65", "https://security.microsoft.us/alerts/1",
])
def test_microsoft_portal_links_open(url: str) -> None:
    assert portal_url(url) == url


@pytest.mark.parametrize("url", [
    "http://security.microsoft.com/alerts/1", "https://security.microsoft.com.evil.example/alerts/1",
    "https://evil@security.microsoft.com/", "https://security.microsoft.com:8443/x", "javascript:alert(1)",
    "https://evil.example/?u=https://security.microsoft.com", "https://security.microsoft.com/a b",
    "https://xsecurity.microsoft.com/", "",
])
def test_other_links_do_not(url: str) -> None:
    assert portal_url(url) is None


HOSTILE = ("[Open the runbook](https://evil.example/run) <at>SOC Team</at> <b>urgent</b> <img src=x onerror=1> "
           "**bold** # heading\n1. step\u202e " + "A" * 100_000)


def hostile_row() -> dict[str, Any]:
    return {"SystemAlertId": "a1", "AlertName": "<at>Everyone</at> [click](https://evil.example)",
            "AlertSeverity": "High", "Status": "New", "ProductName": "x", "TimeGenerated": "2026-11-20T10:00:00Z",
            "Tactics": "Execution", "EntityLabels": "[]", "Description": HOSTILE, "StartTime": "garbage",
            "EndTime": "2026-11-20T09:59:00Z", "Techniques": "T1059); drop table", "SubTechniques": {"a": "T1059.001"},
            "AlertLink": "https://evil.example/alerts/1\u0000", "RemediationSteps": "[not json " + HOSTILE}


def test_hostile_fields_decode_bounded_and_show_inert() -> None:
    alert = alerts_query.decode(hostile_row())
    assert alert.techniques == ("T1059.001",) and alert.start is None and alert.end is not None
    assert len(alert.description) < MAX_ALERT_DESCRIPTION_CHARS + 40
    assert alert.description.endswith(f"…({len(HOSTILE) - MAX_ALERT_DESCRIPTION_CHARS} more characters)")
    d = detail(n_alerts=0, alerts=(alert,) * 3)
    card = cards.incident_detail(d, lambda kind, key: None, NOW)
    assert card_size(card) <= MAX_CARD_BYTES
    texts = card_texts(card)
    assert "](" not in texts and "<at>" not in texts and "<b>" not in texts and "<img" not in texts
    assert "**" not in texts and "\u202e" not in texts and "more characters)" in texts
    assert "https://evil.example" not in texts, "URLs in the text are broken up, never linked"
    assert open_urls(card) == [d.incident.url], "the only button is the incident's own Sentinel link"
    assert "Alert link (not a Microsoft portal" in texts
    model = TOOLS.text(detail_result(d), lambda kind, key: None, {})
    assert "more characters)" in model and len(model) < 6000 and "evil.example/alerts" not in model
    terminal = plaintext.incident_detail_text(detail_result(d), lambda kind, key: None, NOW)
    assert "\u0000" not in terminal and "\u202e" not in terminal and len(terminal) < 8000


async def test_demo_alerts_carry_every_field(demo_client: SentinelClient) -> None:
    result = await demo_client.get_incident_detail(14431)
    assert isinstance(result, QueryResult)
    [alert] = result.records[0].alerts
    assert alert.description and alert.techniques and alert.remediation and portal_url(alert.link)
    assert alert.start is not None and alert.end is not None and alert.time is not None
    assert alert.start <= alert.end <= alert.time
    card = TOOLS.card(result, lambda kind, key: None, NOW)
    assert alert.link in open_urls(card) and "Alert details" in card_texts(card)
    for t in alert.techniques:
        assert t in card_texts(card)
    model = TOOLS.text(result, lambda kind, key: None, {})
    assert all(t in model for t in alert.techniques) and alert.link in model and "remediation" in model


async def test_demo_rows_write_the_columns_as_the_products_do(demo_client: SentinelClient) -> None:
    listed = await demo_client.query_alerts("last_7d", "informational", 100)
    assert isinstance(listed, QueryResult) and len(listed.records) > 50
    for a in listed.records:
        assert a.start is not None and a.end is not None and a.time is not None and a.start <= a.end <= a.time
        assert a.techniques, a.name
        assert not a.link or portal_url(a.link), a.link
        if a.product == "Microsoft Sentinel":
            assert a.remediation == () and a.link == "", "scheduled rules write neither"
    assert sum(bool(a.remediation) for a in listed.records) > len(listed.records) // 4


def facts_of(d: IncidentDetail) -> tuple[Facts, References]:
    facts, references = Facts(), References()
    result = detail_result(d)
    facts.observe(result, NOW)
    references.register(result)
    return facts, references


def test_the_fact_check_holds_techniques_and_activity_times() -> None:
    start = NOW - timedelta(hours=5, minutes=12)
    alert = replace(detail(n_alerts=1).alerts[0], techniques=("T1110.003", "T1078"), start=start,
                    end=start + timedelta(minutes=20))
    facts, references = facts_of(detail(n_alerts=0, alerts=(alert,)))
    assert facts.incidents[14431].techniques == ("T1110.003", "T1078")
    said = lambda text: grounding.check(text, facts, references, NOW)  # noqa: E731
    assert not said("#14431 shows T1110 password spraying and T1078.")
    wrong = said("#14431 shows T1003 credential dumping.")
    # Held to what the detail declares (its alerts' techniques), by the declared rows' check.
    assert [f.category for f in wrong] == ["row"] and "t1110.003" in wrong[0].record.lower()
    assert not said(f"The activity on #14431 started at {start:%H:%M} UTC.")
    back = Facts.from_dict(json.loads(json.dumps(facts.to_dict())))
    assert back.incidents[14431].techniques == ("T1110.003", "T1078")
    assert back.alerts[alert.alert_id].techniques == ("T1110.003", "T1078")
    assert back.alerts[alert.alert_id].activity == (start.replace(microsecond=0),
                                                    (start + timedelta(minutes=20)).replace(microsecond=0))


def test_the_detail_query_reads_the_fields_from_its_alert_list() -> None:
    row = {"IncidentNumber": 7, "Alerts": json.dumps([{
        "id": "x", "name": "n", "severity": "High", "time": "2026-11-20T10:00:00Z", "description": "d",
        "start": "2026-11-20T09:00:00.1234567Z", "end": "2026-11-20T09:30:00Z", "techniques": '["T1566"]',
        "sub_techniques": '["T1566.002"]', "link": "https://security.microsoft.com/alerts/x",
        "remediation": '["Block the sender."]'}])}
    [alert] = detail_query.decode(row).alerts
    assert (alert.description, alert.techniques, alert.remediation) == ("d", ("T1566.002",), ("Block the sender.",))
    assert alert.start == datetime(2026, 11, 20, 9, 0, 0, 123456, tzinfo=UTC)
    kql = detail_query.SPEC.kql(detail_query.IncidentDetailQuery(parse_incident_ref("7")))
    assert '"description", iff(strlen(Description) > 2000' in kql and "RemediationSteps" in kql
