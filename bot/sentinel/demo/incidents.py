"""Incidents: draw one (template, cast, alerts), plan its lifecycle, render one SecurityIncident row per update.

The lifecycle is planned as timed events (assign, activate, comment, escalate, reassign, close) before
any row is written, so rendering replays them in order and the Defender alerts' status updates can
follow the same events.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.sentinel.demo.alerts import alert_row, burst_alert, status_update
from bot.sentinel.demo.catalog import (
    ANALYSTS,
    AUTO_ASSIGN_RULE,
    AUTO_CLOSE_RULE,
    AUTOMATION_AUTHOR,
    CLASSIFICATIONS,
    CLOSING,
    COMMENTS,
    DEMO_SUFFIX,
    ENRICH_RULE,
    ENRICHMENT_COMMENTS,
    ESCALATION_COMMENTS,
    RESOURCE_GROUP,
    SEVERITIES,
    SEVERITY_MIX,
    SEVERITY_RANK,
    SUBSCRIPTION_ID,
    TENANT_ID,
    VIP_USERS,
    WORKSPACE_NAME,
)
from bot.sentinel.demo.templates import TEMPLATE_BY_KEY, TEMPLATES, Template
from bot.sentinel.demo.values import (
    choice,
    compact_json,
    describe,
    fill,
    guid,
    log_uniform,
    randrange,
    timestamp,
    weighted_index,
)
from bot.sentinel.demo.world import World, draw_cast, ip_location


@dataclass
class Incident:
    number: int
    name: str
    created: datetime
    template: Template
    severity: str
    cast: dict
    alerts: list[dict]
    events: list[tuple[datetime, str, dict]]
    title: str
    description: str
    vip: bool = False
    kinds: frozenset = frozenset()  # entity kinds of its alerts (which notes make sense)
    closed_at: datetime | None = None
    outcome: str = ""


def draw_incident(world: World, rng: random.Random, number: int, created: datetime) -> Incident:
    severity, template = _severity_and_template(rng)
    hostile = rng.random() < 1 / 40
    cast = draw_cast(world, rng, template.host, template.user, severity, template.commands, template.files, hostile)
    if template.app is not None:
        cast["app"], cast["app_id"] = template.app
    n_alerts = rng.choices((1, 2, 3, 4, 5), (45, 25, 15, 10, 5))[0]
    specs = [template.alerts[0]] + [choice(rng, template.alerts) for _ in range(n_alerts - 1)]
    times = [created - timedelta(seconds=rng.uniform(3, 120))]
    times += [created - timedelta(minutes=rng.uniform(2, 90)) for _ in range(n_alerts - 1)]
    times.sort()
    alerts = []
    for i, (spec, moment) in enumerate(zip(specs, times, strict=True)):
        alert_severity = severity if i == 0 else _lower_or_equal(rng, severity, spec.severity)
        alerts.append(alert_row(world, rng, spec, cast, moment, alert_severity, template))
    title = template.title
    if hostile and template.key == "inbox_forwarding":
        title = f"Suspicious inbox forwarding rule '{cast['rule']}'"
    description = describe(template.description, cast)
    vip = cast["sam"] in VIP_USERS
    kinds = frozenset(k for spec in specs for k in spec.entities)
    return Incident(number, guid(rng), created, template, severity, cast, alerts, [], title,
                    description, vip, kinds)


def draw_burst_incident(world: World, rng: random.Random, kind: str, times: list[datetime], number: int,
                        created: datetime) -> Incident:
    template = TEMPLATE_BY_KEY[kind]
    cast = draw_cast(world, rng, template.host, template.user, "High", template.commands, template.files)
    cast["n"] = len(times)
    cast["ip"] = world.attacker_ips[(world.seed + times[0].toordinal()) % len(world.attacker_ips)]
    cast["country_code"], cast["country"], cast["city"] = ip_location(cast["ip"])
    alerts = []
    for moment in times[:5]:
        alerts.append(burst_alert(world, rng, template, cast, moment))
    description = fill(template.description, cast) + DEMO_SUFFIX
    kinds = frozenset(k for spec in template.alerts for k in spec.entities)
    return Incident(number, guid(rng), created, template, "High", cast, alerts, [], template.title,
                    description, False, kinds)


def _severity_and_template(rng: random.Random) -> tuple[str, Template]:
    severity = SEVERITIES[weighted_index(rng, SEVERITY_MIX)]
    rank = SEVERITY_RANK[severity]
    candidates = [t for t in TEMPLATES if t.weight > 0 and t.severity[rank] > 0]
    template = candidates[weighted_index(rng, tuple(t.weight * t.severity[rank] for t in candidates))]
    return severity, template


def _lower_or_equal(rng: random.Random, severity: str, fixed: str | None) -> str:
    if fixed is not None and SEVERITY_RANK[fixed] >= SEVERITY_RANK[severity]:
        return fixed
    rank = SEVERITY_RANK[severity]
    if rng.random() < 0.6:
        return severity
    return SEVERITIES[min(3, rank + choice(rng, (1, 1, 2)))]


def plan_lifecycle(rng: random.Random, incident: Incident) -> None:
    """Analyst and automation activity after creation: events (time, kind, data), times relative to creation."""
    created, severity = incident.created, incident.severity
    events = incident.events
    if severity == "Informational" and rng.random() < 0.35:
        when = created + timedelta(seconds=rng.uniform(90, 900))
        events.append((when, "close", {"classification": "BenignPositive", "auto": True}))
        incident.closed_at, incident.outcome = when, "BenignPositive"
        return
    if rng.random() < 0.08:
        events.append((created + timedelta(seconds=rng.uniform(40, 240)), "enrich", {}))
    if rng.random() < 0.04:
        return  # never triaged: stays New (a realistic stale backlog)
    low, high = {"High": (3, 45), "Medium": (8, 180), "Low": (15, 480), "Informational": (20, 720)}[severity]
    activated = created + timedelta(minutes=log_uniform(rng, low, high))
    analyst = randrange(rng, 0, len(ANALYSTS))
    if rng.random() < 0.15:
        assigned = created + timedelta(seconds=rng.uniform(20, 180))
        events.append((assigned, "assign", {"analyst": analyst}))
        activated = max(activated, assigned + timedelta(minutes=5))
    labels = []
    if incident.vip:
        labels.append("VIP")
    if incident.template.key in ("phish_click", "malware_attachment") and rng.random() < 0.5:
        labels.append("Phishing")
    events.append((activated, "activate", {"analyst": analyst, "labels": labels,
                                           "bookmark": rng.random() < 0.04}))
    weights = list(incident.template.outcome)
    if severity == "High":
        weights[0] *= 1.6
    outcome = CLASSIFICATIONS[weighted_index(rng, tuple(weights))]
    roll = rng.random()
    closed: datetime | None
    if roll < 0.08:
        closed = None  # backlog: stays Active for weeks
        end = activated + timedelta(days=rng.uniform(10, 30))
    else:
        if roll < 0.25:  # quick triage: closed the same shift
            closed = activated + timedelta(minutes=log_uniform(rng, 20, 360))
        elif roll < 0.75:
            closed = activated + timedelta(hours=log_uniform(rng, 8, 96))
        else:
            closed = activated + timedelta(hours=log_uniform(rng, 96, 216))
        end = closed
    span = (end - activated).total_seconds()
    note_outcome = outcome if closed is not None else "Undetermined"
    for _ in range(rng.choices((0, 1, 2), (62, 30, 8))[0]):
        events.append((activated + timedelta(seconds=rng.uniform(0.05, 0.95) * span), "comment",
                       {"outcome": note_outcome}))
    if severity != "High" and rng.random() < 0.06:
        events.append((activated + timedelta(seconds=rng.uniform(0.1, 0.6) * span), "severity",
                       {"severity": SEVERITIES[SEVERITY_RANK[severity] - 1]}))
    if rng.random() < 0.07:
        other = choice(rng, [i for i in range(len(ANALYSTS)) if i != analyst])
        events.append((activated + timedelta(seconds=rng.uniform(0.2, 0.7) * span), "reassign", {"analyst": other}))
    if closed is not None:
        events.append((closed, "close", {"classification": outcome, "auto": False, "comment": rng.random() < 0.3}))
        incident.closed_at, incident.outcome = closed, outcome


def _comment_text(rng: random.Random, incident: Incident, outcome: str) -> str:
    options = [text for kind, fits, text in COMMENTS
               if (kind is None or kind in incident.kinds) and fits in (None, outcome)]
    return fill(choice(rng, options), incident.cast)


def render_incident(world: World, rng: random.Random, incident: Incident) -> list[dict]:
    template, cast = incident.template, incident.cast
    alert_ids = compact_json([a["SystemAlertId"] for a in incident.alerts])
    products: list[str] = []
    tactics: list[str] = []
    techniques: list[str] = []
    for alert in incident.alerts:
        if alert["ProductName"] not in products:
            products.append(alert["ProductName"])
        for tactic in alert["Tactics"].split(","):
            if tactic not in tactics:
                tactics.append(tactic)
        for technique in json.loads(alert["Techniques"]):
            if technique not in techniques:
                techniques.append(technique)
    first_activity = min(a["StartTime"] for a in incident.alerts)
    last_activity = max(a["EndTime"] for a in incident.alerts)
    url = (f"https://portal.azure.com/#asset/Microsoft_Azure_Security_Insights/Incident/subscriptions/"
           f"{SUBSCRIPTION_ID}/resourceGroups/{RESOURCE_GROUP}/providers/Microsoft.OperationalInsights/workspaces/"
           f"{WORKSPACE_NAME}/providers/Microsoft.SecurityInsights/Incidents/{incident.name}")
    rule_ids = compact_json([world.rule_id("template:" + template.key)])
    unassigned = {"objectId": None, "email": None, "assignedTo": None, "userPrincipalName": None}
    state: dict[str, Any] = {"status": "New", "owner": unassigned, "severity": incident.severity, "comments": [],
                             "labels": [], "bookmarks": [], "classification": "", "reason": "", "closing_comment": "",
                             "closed": None}
    first_modified: list[str | None] = [None]
    rows = []
    created = timestamp(incident.created)
    additional_tail = compact_json({"alertProductNames": products, "tactics": tactics, "techniques": techniques})[1:]
    # JSON text of the lists, re-encoded only when they grow (they are append-only).
    encoded: dict[str, tuple[int, str]] = {}

    def cached(key: str, value: list) -> str:
        hit = encoded.get(key)
        if hit is None or hit[0] != len(value):
            hit = encoded[key] = (len(value), compact_json(value))
        return hit[1]

    def emit(moment: datetime, modified_by: str) -> None:
        stamp = timestamp(moment)
        additional = (f'{{"alertsCount":{len(incident.alerts)},"bookmarksCount":{len(state["bookmarks"])},'
                      f'"commentsCount":{len(state["comments"])},{additional_tail}')
        rows.append({
            "AdditionalData": additional, "AlertIds": alert_ids, "BookmarkIds": cached("bookmarks", state["bookmarks"]),
            "Classification": state["classification"], "ClassificationComment": state["closing_comment"],
            "ClassificationReason": state["reason"], "ClosedTime": state["closed"],
            "Comments": cached("comments", state["comments"]), "CreatedTime": created,
            "Description": incident.description, "FirstActivityTime": first_activity,
            "FirstModifiedTime": first_modified[0], "IncidentName": incident.name,
            "IncidentNumber": incident.number, "IncidentUrl": url,
            "Labels": cached("labels", [{"labelName": n, "labelType": "User"} for n in state["labels"]]),
            "LastActivityTime": last_activity, "LastModifiedTime": stamp, "ModifiedBy": modified_by,
            "Owner": world.owner_json(state["owner"]), "ProviderIncidentId": str(incident.number),
            "ProviderName": "Azure Sentinel", "RelatedAnalyticRuleIds": rule_ids, "Severity": state["severity"],
            "SourceSystem": "Azure", "Status": state["status"], "Tasks": "[]", "TenantId": TENANT_ID,
            "TimeGenerated": stamp, "Title": incident.title, "Type": "SecurityIncident",
        })

    def add_comment(moment: datetime, author: str, email: str, text: str) -> None:
        state["comments"].append({"message": text, "createdTimeUtc": timestamp(moment)[:-4] + "Z",
                                  "author": {"name": author, "email": email}})

    emit(incident.created, "Incident created from alert")
    previous = incident.created
    for moment, kind, data in sorted(incident.events, key=lambda e: e[0]):
        if moment <= previous:
            moment = previous + timedelta(seconds=1)
        previous = moment
        if first_modified[0] is None:
            first_modified[0] = timestamp(moment)
        owner = state["owner"]
        actor = owner["assignedTo"] or choice(rng, ANALYSTS)
        if kind == "assign":
            state["owner"] = world.analysts[data["analyst"]]
            modified_by = f"Automation rule - {AUTO_ASSIGN_RULE}"
        elif kind == "activate":
            state["owner"] = world.analysts[data["analyst"]]
            state["status"] = "Active"
            for label in data["labels"]:
                if label not in state["labels"]:
                    state["labels"].append(label)
            if data["bookmark"]:
                state["bookmarks"].append(guid(rng))
            modified_by = ANALYSTS[data["analyst"]]
        elif kind == "reassign":
            state["owner"] = world.analysts[data["analyst"]]
            add_comment(moment, actor, _email(actor), f"Reassigning to {ANALYSTS[data['analyst']]} (shift handover).")
            modified_by = actor
        elif kind == "severity":
            state["severity"] = data["severity"]
            add_comment(moment, actor, _email(actor), choice(rng, ESCALATION_COMMENTS))
            modified_by = actor
        elif kind == "comment":
            add_comment(moment, actor, _email(actor), _comment_text(rng, incident, data["outcome"]))
            modified_by = actor
        elif kind == "enrich":
            options = [text for need, text in ENRICHMENT_COMMENTS if need is None or need in incident.kinds]
            add_comment(moment, AUTOMATION_AUTHOR, "soc-automation@contoso.com",
                        fill(choice(rng, options), cast))
            modified_by = f"Automation rule - {ENRICH_RULE}"
        else:  # close
            classification = data["classification"]
            state["status"] = "Closed"
            state["classification"] = classification
            state["closed"] = timestamp(moment)
            if data["auto"]:
                state["reason"] = "SuspiciousButExpected"
                state["closing_comment"] = f"Closed automatically by the automation rule '{AUTO_CLOSE_RULE}'."
                modified_by = f"Automation rule - {AUTO_CLOSE_RULE}"
            else:
                closings = [(reason, text) for need, reason, text in CLOSING[classification]
                            if need is None or need in incident.kinds]
                reason, text = choice(rng, closings)
                state["reason"] = reason
                state["closing_comment"] = fill(text, cast)
                if data.get("comment"):
                    add_comment(moment, actor, _email(actor), state["closing_comment"])
                if classification == "TruePositive" and rng.random() < 0.4:
                    state["labels"].append("Confirmed-compromise")
                modified_by = actor
        emit(moment, modified_by)
    return rows


def _email(name: str) -> str:
    return name.lower().replace(" ", ".") + "@contoso.com"


def alert_status_updates(rng: random.Random, incident: Incident) -> list[dict]:
    """Defender alerts re-emitted when their status follows the incident (InProgress, Resolved, Dismissed)."""
    updates = []
    activated = next((e[0] for e in incident.events if e[1] == "activate"), None)
    for alert in incident.alerts:
        if alert["ProviderName"] == "ASI Scheduled Alerts":
            continue
        if incident.closed_at is not None and rng.random() < 0.3:
            status = "Dismissed" if incident.outcome == "FalsePositive" else "Resolved"
            updates.append(status_update(alert, incident.closed_at + timedelta(seconds=rng.uniform(30, 300)), status))
        elif activated is not None and rng.random() < 0.08:
            updates.append(status_update(alert, activated + timedelta(seconds=rng.uniform(30, 300)), "InProgress"))
    return updates
