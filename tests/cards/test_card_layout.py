"""Every card the bot can send, laid out where it is seen: rendered by Microsoft's Adaptive Cards renderer for
JavaScript (npm ``adaptivecards``, tests/cards) in chromium at the widths Teams gives cards (320 px on a phone,
400 to 540 px on the desktop), in light and dark Teams-like host configs, and checked in the DOM: no word broken
inside itself, no text cut or overflowing, no element wider than the card, every button label whole
(tests/cards/layout.js says how each is measured).

A card is added to the check with one line in ``CARDS``: a name and a function of the shared ``Samples``. One
browser renders them all, on one page. Screenshots of the main cards go to the test's temporary directory
(``CARD_SCREENSHOTS=DIR`` keeps them somewhere else). Skipped without node, the npm packages or chromium, a
failure when ``CI`` is set.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from bot import cards
from bot.cards.extension import incident_card
from bot.cards.reach import escalated_to_you
from bot.cards.watches import watched_digest, watched_incident
from bot.investigation.models import Level
from bot.investigation.triage import EntityVerdict, RelatedIncident, Triage
from bot.orchestrator.references import References
from bot.sentinel.changes import ChangeKind, OnCallContact, Owner, make_change
from bot.sentinel.client import SentinelClient
from bot.sentinel.entities import LINK_FIELDS, defined_entities, entity_value
from bot.sentinel.models import AlertSummary, EntityRef, QueryResult
from bot.sentinel.queries import alerts as alerts_query
from bot.sentinel.queries import incident_detail as incident_detail_query
from bot.tools.queries.on_call import empty_card as on_call_empty
from bot.tools.registry import TOOLS
from tests.cards.test_action_cards import ACTION_ID, CHANGES, EXPIRES, closed_snapshot, sent_for, snapshot
from tests.cards.test_cards import alert, detail, incident, meta
from tests.conftest import NOW, SEED
from tests.support.demo import copied_demo
from tests.support.tooling import missing

pytestmark = pytest.mark.slow  # one chromium renders every card: tens of seconds

ROOT = Path(__file__).resolve().parents[2]
CARDS_DIR = ROOT / "tests" / "cards"
SAMPLE_ROWS = ROOT / "tests" / "data" / "sample-rows"
SCRIPT = CARDS_DIR / "layout.js"
WIDTHS = (320, 400, 480, 540)  # a phone; Teams desktop's narrow and wide chat columns
THEMES = ("light", "dark")
SHOOT = ("incidents", "incident detail", "incident detail, real alerts", "alerts", "trend 7d", "entities", "on call",
         "confirm close", "outcome executed", "welcome", "summary with changes")
SHA256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
LONG_URL = "https://login.contoso-secure.example.com/oauth2/v2.0/authorize?client_id=4f1c8e2a&redirect_uri=x"
EMAIL = "margarethe.vandenberghe-oyelaran@fabrikam-security-operations.onmicrosoft.com"


@dataclass(frozen=True)
class Samples:
    """What the builders draw on: demo workspace results by name, and the time the cards are built at."""

    results: dict[str, QueryResult]
    now: datetime

    def tool_card(self, name: str, changes: bool = False) -> dict:
        result = self.results[name]
        refs = References()
        refs.register(result)
        return TOOLS.card(result, refs.ref_for, self.now, changes=changes)


DEMO_QUERIES: dict[str, tuple[str, dict[str, Any]]] = {
    "incidents": ("query_incidents", {"time_window": "last_7d", "min_severity": "informational", "limit": 25}),
    "incident detail": ("get_incident_detail", {"incident_ref": 14440}),
    "alerts": ("query_alerts", {"time_window": "last_24h", "limit": 25}),
    "trend 24h": ("get_alert_trend", {"time_window": "last_24h"}),
    "trend 7d": ("get_alert_trend", {"time_window": "last_7d"}),
    "entities": ("get_top_entities", {"time_window": "last_30d", "limit": 25}),
    "on call": ("get_on_call", {}),
    "no incidents": ("query_incidents", {"time_window": "last_1h", "min_severity": "high", "owner": "nobody"}),
    "no such incident": ("get_incident_detail", {"incident_ref": 999999}),
    "investigation, host": ("investigate_entity", {"entity": "ws-fin-023", "time_window": "last_7d"}),
    "investigation, account": ("investigate_entity", {"entity": "lena.fischer@contoso.com", "time_window": "last_30d"}),
    "hunt": ("hunt", {"table": "SigninLogs", "time_window": "7d", "summarize": ["count()"],
                      "by": ["Country", "AppDisplayName"]}),
    "hunt, wide rows": ("hunt", {"table": "DeviceProcessEvents", "time_window": "7d", "take": 20}),
    # The time forms' own columns (SessionStart/SessionEnd; a series point's Baseline, Score and Anomaly; a joined
    # row's time beside the left's), as a phone shows them.
    "hunt, series": ("hunt", {"table": "SigninLogs", "time_window": "30d", "by": ["UserPrincipalName"],
                              "series": {"step": "1h"}}),
    "hunt, sessions": ("hunt", {"table": "SigninLogs", "time_window": "7d", "by": ["UserPrincipalName"],
                                "session": {"gap": "30m"}, "summarize": ["count()", "dcount(IPAddress)"]}),
    "hunt, proximity": ("hunt", {"table": "EmailEvents", "time_window": "30d",
                                 "join": {"table": "UrlClickEvents", "on": ["NetworkMessageId", "NetworkMessageId"],
                                          "within": "10m", "columns": ["Url", "TimeGenerated"]}}),
    "summary": ("summarize_incident", {"incident_ref": 14440}),  # the MFA-fatigue story
    "summary, malware": ("summarize_incident", {"incident_ref": 14404}),  # Qakbot: eleven entities, five investigated
}


def _long_detail(s: Samples) -> dict:
    """A detail card with the long values analysts copy: a hash, a URL, an email, a long owner and title."""
    entities = (EntityRef("filehash", SHA256), EntityRef("url", LONG_URL), EntityRef("account", EMAIL),
                EntityRef("host", "ws-fin-160.corp.fabrikam-security-operations.example"),
                EntityRef("ip", "2001:0db8:85a3:0000:0000:8a2e:0370:7334"))
    d = replace(detail(n_alerts=4, title="Suspicious PowerShell download cradle executed by "
                                          "svc-backup-automation on ws-fin-160",
                       description=f"Process downloaded {LONG_URL} and wrote a file with SHA-256 {SHA256}."),
                entities=entities, incident=incident(14431, "Suspicious PowerShell download cradle", "Medium",
                                                     owner=EMAIL))
    return cards.incident_detail(d, lambda kind, key: None, s.now, demo=True, changes=True)


def _real_alerts() -> tuple[AlertSummary, ...]:
    """Real SecurityAlert rows (tests/data/sample-rows: msticpy's recorded response, stix-shifter's Defender for
    Cloud sample alert with its plain-text remediation and portal link), decoded as the query decodes them."""
    recorded = json.loads((SAMPLE_ROWS / "msticpy_az_mon_raw_query_SecurityAlert.json").read_text())["tables"][0]
    names = [c["name"] for c in recorded["columns"]]
    rows = [dict(zip(names, row, strict=True)) for row in recorded["rows"]]
    rows.append(json.loads((SAMPLE_ROWS / "stixshifter_test_rows.json").read_text())[
        "test_azure_log_analytics_json_to_stix.py::DATA1"])
    return tuple(alerts_query.decode(row) for row in rows)


def _real_detail(s: Samples) -> dict:
    """The detail card of an incident holding the real alerts (the layout check's measure for issue 33)."""
    real = _real_alerts()
    d = replace(detail(n_alerts=0, description=real[-1].description), alerts=real,
                incident=incident(14431, real[-1].name, "High", alert_count=len(real)))
    refs = References()
    refs.register(QueryResult((d,), meta("get_incident_detail", 1)))
    return cards.incident_detail(d, refs.ref_for, s.now, demo=False)


def _real_xdr_detail(s: Samples) -> dict:
    """The detail card of an incident holding three real Defender XDR alerts' entities (tests/data/sample-rows:
    a blocked PowerShell process with its parent, image files, hashes, account and host; a phish with its URLs; a
    mail cluster), listed as the incident detail query lists them (one per type and value, the entity object
    without its links) and decoded by the query's own decoder."""
    rows = json.loads((SAMPLE_ROWS / "sekoia_m365d_alert_evidence.json").read_text())["rows"]
    chosen = [row for row in rows if row["EntityType"] in ("MailCluster", "User")
              or row["Title"].startswith(("A potentially malicious URL", "Suspicious 'SuspClickFix'"))]
    listed: dict[tuple[str, str], dict[str, Any]] = {}
    for item in defined_entities([row["AdditionalFields"] for row in chosen]):
        value = entity_value(item)
        if value:
            listed.setdefault((item["Type"], value.lower()), {
                "type": item["Type"], "value": value,
                "entity": {k: v for k, v in item.items() if k not in LINK_FIELDS}})
    decoded = incident_detail_query.decode({"IncidentNumber": 14431, "Title": chosen[-1]["Title"],
                                            "Severity": "Low", "Entities": list(listed.values()), "Alerts": []})
    d = replace(detail(n_alerts=0), entities=decoded.entities,
                incident=incident(14431, chosen[-1]["Title"], "Low", alert_count=3))
    return cards.incident_detail(d, lambda kind, key: None, s.now, demo=False)


def _hostile_alert_detail(s: Samples) -> dict:
    """Alert fields as an attacker may write them: markup, a 100 KB description, steps and techniques that are not
    JSON, a link to a host that is not Microsoft's, a very long technique list."""
    text = "[runbook](https://evil.example/run) <at>SOC</at> **now** " + f"{LONG_URL} {SHA256} " * 3 + "x" * 100_000
    row = {"SystemAlertId": "h1", "AlertName": f"Malware {SHA256} on {EMAIL}", "AlertSeverity": "High",
           "Status": "New", "ProductName": "Microsoft Defender for Endpoint", "TimeGenerated": "2026-11-20T10:00:00Z",
           "Description": text, "StartTime": "2026-11-19T23:58:00Z", "EndTime": "2026-11-20T09:59:00Z",
           "Techniques": ", ".join(f"T1{n:03d}" for n in range(30)), "AlertLink": LONG_URL,
           "RemediationSteps": "[not json\n" + "\n".join(f"Run {LONG_URL} on {EMAIL}" for _ in range(20))}
    d = detail(n_alerts=0, alerts=(alerts_query.decode(row),))
    return cards.incident_detail(d, lambda kind, key: None, s.now, demo=True)


def _escalation(s: Samples) -> dict:
    bruno = OnCallContact(Owner(user_principal_name="bruno.costa@contoso.com", name="Bruno Costa",
                                email="bruno.costa@contoso.com"), phone="+1 425 555 0847", team="SOC Tier 1",
                          location="Singapore", shift_end="2026-11-20T16:00:00+00:00")
    change = make_change(ChangeKind.ESCALATE, 42, on_call=bruno, assign=True, comment="isolate WS-FIN-160")
    return cards.change_confirmation(change, snapshot(), action_id=ACTION_ID, requester="Alex Wilber",
                                     expires_at=EXPIRES, now=s.now, demo=True)


def _outcome(s: Samples) -> dict:
    before = snapshot()
    after = before.with_changes(status="Closed", classification="FalsePositive",
                                classification_reason="IncorrectAlertLogic", classification_comment="pen test")
    return cards.change_outcome(CHANGES["close"], before, outcome="executed", after=after,
                                sent=sent_for(before, CHANGES["close"]), headline="Done: status of #42 set to Closed",
                                requester="Alex Wilber", confirmed_by="Alex Wilber", demo=False, action_id=ACTION_ID,
                                audit_comment="Closed from Teams by Alex Wilber (confirmed): pen test")


def _footer(s: Samples) -> dict:
    result = s.results["incident detail"]
    source = cards.SourceLine("get_incident_detail(incident_ref=14440) on the demo workspace, 1 row, 12 ms",
                              result.metadata.kql)
    footnote = cards.footer([source], demo=True, disclaimer=True, notices=["Unverified: incident #999"])
    assert footnote is not None
    return footnote


def _confirm(kind: str) -> Callable[[Samples], dict]:
    def build(s: Samples) -> dict:
        before = closed_snapshot() if kind == "reopen" else snapshot()
        return cards.change_confirmation(CHANGES[kind], before, action_id=ACTION_ID, requester="Alex Wilber",
                                         expires_at=EXPIRES, now=s.now, demo=True)
    return build


def _hostile_list(s: Samples) -> dict:
    rows = tuple(incident(14400 + n, title, severity, owner=EMAIL) for n, (title, severity) in enumerate([
        ("Mass download by " + EMAIL, "High"), (f"Malware {SHA256} on ws-fin-160", "Medium"),
        ("Click on " + LONG_URL, "Low"), ("Informational", "Informational")]))
    result = QueryResult(rows, meta("query_incidents", len(rows), time_window="last_7d",
                                    min_severity="informational"))
    refs = References()
    refs.register(result)
    return cards.incident_table(result, refs.ref_for, s.now)


# name -> builder: add a card here and it is checked at every width, in every theme.
CARDS: list[tuple[str, Callable[[Samples], dict]]] = [
    *((name, lambda s, name=name: s.tool_card(name)) for name in DEMO_QUERIES),
    ("incident detail with changes", lambda s: s.tool_card("incident detail", changes=True)),
    ("summary with changes", lambda s: s.tool_card("summary", changes=True)),
    ("incident detail, long values", _long_detail),
    ("incident detail, real alerts", _real_detail),
    ("incident detail, hostile alert fields", _hostile_alert_detail),
    ("incident detail, real Defender XDR entities", _real_xdr_detail),
    ("incidents, long values", _hostile_list),
    ("incidents, references in the hundreds", lambda s: cards.incident_table(
        s.results["incidents"], lambda kind, key: 900 + int(key) % 100, s.now)),
    ("entities, references in the hundreds", lambda s: cards.top_entities(
        s.results["entities"], lambda kind, key: 900 + len(key), s.now)),
    ("alerts, long values", lambda s: cards.alert_list(
        QueryResult(tuple(replace(alert(i), name=f"File {SHA256} seen", entities=(f"account: {EMAIL}",))
                          for i in range(3)), meta("query_alerts", 3)), lambda kind, key: None, s.now)),
    ("confirm assign", _confirm("assign")),
    ("confirm close", _confirm("close")),
    ("confirm reopen", _confirm("reopen")),
    ("confirm severity", _confirm("severity")),
    ("confirm comment", _confirm("comment")),
    ("confirm escalation", _escalation),
    ("outcome executed", _outcome),
    ("watch: one incident", lambda s: watched_incident(incident(14431, owner=EMAIL), watch="High and above",
                                                       now=s.now, demo=True, changes=True)),
    ("watch: digest", lambda s: watched_digest([incident(14430 + n, severity=sev) for n, sev in enumerate(
        ("High", "Medium", "Low", "Informational"))], watch="all new incidents", now=s.now, demo=True)),
    ("error", lambda s: cards.error("The query did not run", "Log Analytics answered 403 Forbidden: the bot's "
                                    "identity may not read workspace 6a7f098b-0000-0000-0000-000000000000.",
                                    "This kind of failure is often temporary: try again in a minute.")),
    ("welcome", lambda s: cards.welcome(demo=True, model_enabled=True)),
    ("help", lambda s: cards.help_card()),
    ("footer with query", _footer),
    ("answer with footer", lambda s: cards.attach(s.tool_card("incident detail"), _footer(s)) or {}),
    ("confirm with notice", lambda s: cards.change_confirmation(
        CHANGES["severity"], snapshot(), action_id=ACTION_ID, requester="Alex Wilber", expires_at=EXPIRES, now=s.now,
        demo=True, notice="This incident changed since you asked. Check its current state and confirm again.")),
    *((f"outcome {outcome}", lambda s, outcome=outcome: cards.change_outcome(
        CHANGES["close"], snapshot(), outcome=outcome, headline=f"Not done: {outcome}", detail="Sentinel answered 412.",
        requester="Alex Wilber", demo=True, action_id=ACTION_ID)) for outcome in ("noop", "cancelled", "failed")),
    ("no on-call roster", lambda s: on_call_empty(QueryResult((), meta("get_on_call", 0)))),
    ("inserted incident", lambda s: incident_card(incident(14431, "Suspicious PowerShell download cradle executed by "
                                                           "svc-backup-automation on ws-fin-160", owner=EMAIL),
                                                  s.now, demo=True)),
    ("escalated to you", lambda s: escalated_to_you(snapshot(), requester="Alex Wilber", reason="isolate WS-FIN-160",
                                                    thread_url="https://teams.microsoft.com/l/message/19:x/1",
                                                    owner=EMAIL, demo=True)),
    ("watch: one incident, triaged", lambda s: watched_incident(
        incident(14431, owner=EMAIL), watch="High and above", now=s.now, demo=True, changes=True,
        triage=Triage(14431, (EntityVerdict("account", EMAIL, Level.HIGH, 70, ("Risky user", "MFA-fatigue pattern")),
                              EntityVerdict("ip", "2001:0db8:85a3:0000:0000:8a2e:0370:7334", Level.NONE, 0, (),
                                            failed=True)),
                      (RelatedIncident(14430, "Impossible travel activity", "Medium"),)))),
    ("watch: one incident, triage pending", lambda s: watched_incident(
        incident(14431), watch="High and above", now=s.now, demo=True, changes=True, triage_pending=True)),
]


def _samples() -> Samples:
    import asyncio

    client = SentinelClient(copied_demo(SEED, lambda: NOW))

    async def run_all() -> dict[str, QueryResult]:
        out = {}
        for name, (tool, arguments) in DEMO_QUERIES.items():
            declared = TOOLS.get(tool)  # a tool with its own runner (an investigation) reads through it
            assert declared is not None, tool
            result = await declared.read(client, arguments)
            assert isinstance(result, QueryResult), (name, result)
            out[name] = result
        return out

    return Samples(asyncio.run(run_all()), NOW)


def render(built: list[dict[str, Any]], folder: Path, shoot: tuple[str, ...] = SHOOT) -> dict[str, Any]:
    """Runs layout.js over ``built`` ({"name", "card"}); its report: rendered count, defects, screenshots."""
    for name, path in (("the Adaptive Cards renderer", CARDS_DIR / "node_modules" / "adaptivecards"),
                       ("playwright-core", CARDS_DIR / "node_modules" / "playwright-core")):
        reason = missing(path, "npm ci --prefix tests/cards")
        if reason:
            pytest.fail(reason) if os.environ.get("CI") else pytest.skip(f"{name}: {reason}")
    chromium = os.environ.get("CHROMIUM") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        reason = "chromium is not installed (apt-get install chromium)"
        pytest.fail(reason) if os.environ.get("CI") else pytest.skip(reason)
    request = folder / "cards.json"
    request.write_text(json.dumps({"cards": built, "widths": WIDTHS, "themes": THEMES,
                                   "screenshots": str(folder), "shoot": list(shoot)}), encoding="utf-8")
    done = subprocess.run(["node", str(SCRIPT), str(request)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CHROMIUM": chromium})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


_BUILT: list[dict[str, Any]] = []


def _built_once() -> list[dict[str, Any]]:
    if not _BUILT:
        samples = _samples()
        _BUILT.extend({"name": name, "card": build(samples)} for name, build in CARDS)
    return _BUILT


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    built = _built_once()
    folder = Path(os.environ["CARD_SCREENSHOTS"]) if os.environ.get("CARD_SCREENSHOTS") else \
        tmp_path_factory.mktemp("card-layout")
    folder.mkdir(parents=True, exist_ok=True)
    return render(built, folder)


def test_every_card_renders_at_every_width_and_theme(report: dict[str, Any]) -> None:
    assert all(card["card"].get("type") == "AdaptiveCard" for card in _built_once()), "every builder made a card"
    assert report["rendered"] == len(CARDS) * len(WIDTHS) * len(THEMES)
    assert len(report["shots"]) == len(SHOOT) * len(WIDTHS) * len(THEMES)


# The one defect cards cannot avoid: a URL entity is shown exact and inert in a TextRun (no zero-width spaces to
# copy, no link to click), and the reference renderer does not wrap a TextRun's unbroken token, so a URL longer
# than the column spills out of it at phone and narrow widths.
KNOWN = ("span.ac-textRun \"https://", "div.ac-richTextBlock \"https://", "div.ac-container \"https://",
         "div \"URL https://", "div \"Type Value ")  # the last: the entities table holding it


def known(defect: dict[str, Any]) -> bool:
    return defect["kind"] in ("overflow", "too-wide") and defect["detail"].startswith(KNOWN)


def test_no_card_has_a_layout_defect(report: dict[str, Any]) -> None:
    defects = [f"{d['card']} @ {d['width']}px {d['theme']}: {d['kind']}: {d['detail']}" for d in report["defects"]
               if not known(d)]
    assert not defects, f"{len(defects)} layout defects:\n" + "\n".join(defects[:60])


BROKEN = {"type": "AdaptiveCard", "version": "1.5", "body": [{"type": "Table", "columns": [
    {"width": 2}, {"width": 9}, {"width": 2}, {"width": 4}], "rows": [{"type": "TableRow", "cells": [
        {"type": "TableCell", "items": [{"type": "TextBlock", "text": text, "wrap": True}]}
        for text in ("[1]", "Suspicious sign-in", "Medium", "x")]}]}],
    "actions": [{"type": "Action.Submit", "title": "Propose closing this incident with a long label"},
                {"type": "Action.Submit", "title": "Another long button label"},
                {"type": "Action.Submit", "title": "And a third one"}]}
CUT = {"type": "AdaptiveCard", "version": "1.5", "body": [
    {"type": "TextBlock", "text": "word " * 200, "wrap": True, "maxLines": 2},
    {"type": "TextBlock", "text": SHA256 + SHA256, "wrap": False}]}


def test_the_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The defects the check exists for, on cards made to have them: it is not blind."""
    found = render([{"name": "broken", "card": BROKEN}, {"name": "cut", "card": CUT}], tmp_path, ())
    kinds = {(d["card"], d["kind"]) for d in found["defects"] if d["width"] == 320}
    assert {("broken", "word-broken"), ("broken", "button-cut"), ("cut", "cut")} <= kinds, found["defects"][:10]


def test_every_card_builder_module_is_in_the_list() -> None:
    """A new module of cards under bot/cards is named by at least one entry (by the function it builds with)."""
    names = " ".join(name for name, _ in CARDS)
    for words in ("incident", "alert", "trend", "entities", "confirm", "outcome", "watch", "welcome", "help",
                  "error", "footer", "on call"):
        assert words in names, words
