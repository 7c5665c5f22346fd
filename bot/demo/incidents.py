"""Incidents: draw one (template, cast, alerts), plan its lifecycle, render one SecurityIncident row per update.

The lifecycle is planned as timed events (assign, activate, comment, escalate, reassign, close) before
any row is written, so rendering replays them in order and the Defender alerts' status updates can
follow the same events.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.demo.alerts import alert_row, burst_alert, status_update
from bot.demo.catalog import (
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
    PLAYGROUND_ANALYSTS,
    RESOURCE_GROUP,
    SEVERITIES,
    SEVERITY_MIX,
    SEVERITY_RANK,
    SUBSCRIPTION_ID,
    TENANT_ID,
    VIP_USERS,
    WORKSPACE_NAME,
)
from bot.demo.templates import TEMPLATE_BY_KEY, TEMPLATES, Template
from bot.demo.values import (
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
from bot.demo.world import World, draw_cast, ip_location


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


# Minutes from creation to an analyst's first look, by severity (log-uniform between the two).
_TRIAGE_MINUTES = {"High": (3, 45), "Medium": (8, 180), "Low": (15, 480), "Informational": (20, 720)}


def plan_lifecycle(rng: random.Random, incident: Incident) -> None:
    """Analyst and automation activity after creation: events (time, kind, data), times relative to creation."""
    if incident.severity == "Informational" and rng.random() < 0.35:
        _plan_auto_close(rng, incident)
        return
    if rng.random() < 0.08:
        incident.events.append((incident.created + timedelta(seconds=rng.uniform(40, 240)), "enrich", {}))
    if rng.random() < 0.04:
        return  # never triaged: stays New (a realistic stale backlog)
    activated, analyst = _plan_activation(rng, incident)
    outcome = _outcome(rng, incident)
    closed, end = _closing_time(rng, activated)
    _plan_work(rng, incident, analyst, activated, end, outcome if closed is not None else "Undetermined")
    if closed is not None:
        incident.events.append((closed, "close", {"classification": outcome, "auto": False,
                                                  "comment": rng.random() < 0.3}))
        incident.closed_at, incident.outcome = closed, outcome


def _plan_auto_close(rng: random.Random, incident: Incident) -> None:
    when = incident.created + timedelta(seconds=rng.uniform(90, 900))
    incident.events.append((when, "close", {"classification": "BenignPositive", "auto": True}))
    incident.closed_at, incident.outcome = when, "BenignPositive"


def _plan_activation(rng: random.Random, incident: Incident) -> tuple[datetime, int]:
    """An analyst takes the incident (perhaps assigned by automation first): when, and which analyst."""
    low, high = _TRIAGE_MINUTES[incident.severity]
    activated = incident.created + timedelta(minutes=log_uniform(rng, low, high))
    analyst = randrange(rng, 0, len(ANALYSTS))
    if rng.random() < 0.15:
        assigned = incident.created + timedelta(seconds=rng.uniform(20, 180))
        incident.events.append((assigned, "assign", {"analyst": analyst}))
        activated = max(activated, assigned + timedelta(minutes=5))
    labels = _labels(rng, incident)
    incident.events.append((activated, "activate", {"analyst": analyst, "labels": labels,
                                                    "bookmark": rng.random() < 0.04}))
    return activated, analyst


def _labels(rng: random.Random, incident: Incident) -> list[str]:
    labels = []
    if incident.vip:
        labels.append("VIP")
    if incident.template.key in ("phish_click", "malware_attachment") and rng.random() < 0.5:
        labels.append("Phishing")
    return labels


def _outcome(rng: random.Random, incident: Incident) -> str:
    """The classification it will have when closed (true positives likelier for High)."""
    weights = list(incident.template.outcome)
    if incident.severity == "High":
        weights[0] *= 1.6
    return CLASSIFICATIONS[weighted_index(rng, tuple(weights))]


def _closing_time(rng: random.Random, activated: datetime) -> tuple[datetime | None, datetime]:
    """When it is closed (None: never) and when the work on it ends."""
    roll = rng.random()
    if roll < 0.08:  # backlog: stays Active for weeks
        return None, activated + timedelta(days=rng.uniform(10, 30))
    if roll < 0.25:  # quick triage: closed the same shift
        closed = activated + timedelta(minutes=log_uniform(rng, 20, 360))
    elif roll < 0.75:
        closed = activated + timedelta(hours=log_uniform(rng, 8, 96))
    else:
        closed = activated + timedelta(hours=log_uniform(rng, 96, 216))
    return closed, closed


def _plan_work(rng: random.Random, incident: Incident, analyst: int, activated: datetime, end: datetime,
               note_outcome: str) -> None:
    """Comments, a severity change and a reassignment, each at a fraction of the time between activation and end."""
    span = (end - activated).total_seconds()
    events = incident.events
    for _ in range(rng.choices((0, 1, 2), (62, 30, 8))[0]):
        events.append((activated + timedelta(seconds=rng.uniform(0.05, 0.95) * span), "comment",
                       {"outcome": note_outcome}))
    if incident.severity != "High" and rng.random() < 0.06:
        events.append((activated + timedelta(seconds=rng.uniform(0.1, 0.6) * span), "severity",
                       {"severity": SEVERITIES[SEVERITY_RANK[incident.severity] - 1]}))
    if rng.random() < 0.07:
        other = choice(rng, [i for i in range(len(ANALYSTS)) if i != analyst])
        events.append((activated + timedelta(seconds=rng.uniform(0.2, 0.7) * span), "reassign", {"analyst": other}))


def _comment_text(rng: random.Random, incident: Incident, outcome: str) -> str:
    options = [text for kind, fits, text in COMMENTS
               if (kind is None or kind in incident.kinds) and fits in (None, outcome)]
    return fill(choice(rng, options), incident.cast)


def render_incident(world: World, rng: random.Random, incident: Incident) -> list[dict]:
    """One SecurityIncident row at creation, then one per lifecycle event, replayed in time order."""
    replay = _Replay(world, rng, incident)
    replay.emit(incident.created, "Incident created from alert")
    for moment, kind, data in _in_order(incident):
        if replay.first_modified is None:
            replay.first_modified = timestamp(moment)
        actor = replay.owner["assignedTo"] or choice(rng, ANALYSTS)
        replay.emit(moment, _EVENTS[kind](replay, moment, actor, data))
    return replay.rows


def _in_order(incident: Incident) -> Iterator[tuple[datetime, str, dict]]:
    """The incident's events by time, each at least a second after the one before (and after creation)."""
    previous = incident.created
    for moment, kind, data in sorted(incident.events, key=lambda e: e[0]):
        if moment <= previous:
            moment = previous + timedelta(seconds=1)
        previous = moment
        yield moment, kind, data


def _unique(values: Iterable[str]) -> list[str]:
    """The values in order of first appearance, each once."""
    return list(dict.fromkeys(values))


def _incident_url(name: str) -> str:
    return (f"https://portal.azure.com/#asset/Microsoft_Azure_Security_Insights/Incident/subscriptions/"
            f"{SUBSCRIPTION_ID}/resourceGroups/{RESOURCE_GROUP}/providers/Microsoft.OperationalInsights/workspaces/"
            f"{WORKSPACE_NAME}/providers/Microsoft.SecurityInsights/Incidents/{name}")


class _Replay:
    """An incident's state as its events change it, and the rows that record it after each one."""

    def __init__(self, world: World, rng: random.Random, incident: Incident) -> None:
        self.world, self.rng, self.incident = world, rng, incident
        self.status, self.severity = "New", incident.severity
        self.owner: dict = {"objectId": None, "email": None, "assignedTo": None, "userPrincipalName": None}
        self.comments: list[dict] = []
        self.labels: list[str] = []
        self.bookmarks: list[str] = []
        self.classification = self.reason = self.closing_comment = ""
        self.closed: str | None = None
        self.first_modified: str | None = None
        self.rows: list[dict] = []
        self._encoded: dict[str, tuple[int, str]] = {}  # JSON text of the append-only lists, by length
        self._fixed = _fixed_parts(world, incident)

    def _json(self, key: str, value: list) -> str:
        """``compact_json(value)``, re-encoded only when the list has grown."""
        hit = self._encoded.get(key)
        if hit is None or hit[0] != len(value):
            hit = self._encoded[key] = (len(value), compact_json(value))
        return hit[1]

    def comment(self, moment: datetime, author: str, email: str, text: str) -> None:
        self.comments.append({"message": text, "createdTimeUtc": timestamp(moment)[:-4] + "Z",
                              "author": {"name": author, "email": email}})

    def emit(self, moment: datetime, modified_by: str) -> None:
        stamp, incident, fixed = timestamp(moment), self.incident, self._fixed
        additional = (f'{{"alertsCount":{len(incident.alerts)},"bookmarksCount":{len(self.bookmarks)},'
                      f'"commentsCount":{len(self.comments)},{fixed["additional_tail"]}')
        self.rows.append({
            "AdditionalData": additional, "AlertIds": fixed["alert_ids"],
            "BookmarkIds": self._json("bookmarks", self.bookmarks),
            "Classification": self.classification, "ClassificationComment": self.closing_comment,
            "ClassificationReason": self.reason, "ClosedTime": self.closed,
            "Comments": self._json("comments", self.comments), "CreatedTime": fixed["created"],
            "Description": incident.description, "FirstActivityTime": fixed["first_activity"],
            "FirstModifiedTime": self.first_modified, "IncidentName": incident.name,
            "IncidentNumber": incident.number, "IncidentUrl": fixed["url"],
            "Labels": self._json("labels", [{"labelName": n, "labelType": "User"} for n in self.labels]),
            "LastActivityTime": fixed["last_activity"], "LastModifiedTime": stamp, "ModifiedBy": modified_by,
            "Owner": self.world.owner_json(self.owner), "ProviderIncidentId": str(incident.number),
            "ProviderName": "Azure Sentinel", "RelatedAnalyticRuleIds": fixed["rule_ids"], "Severity": self.severity,
            "SourceSystem": "Azure", "Status": self.status, "Tasks": "[]", "TenantId": TENANT_ID,
            "TimeGenerated": stamp, "Title": incident.title, "Type": "SecurityIncident",
        })


def _fixed_parts(world: World, incident: Incident) -> dict[str, str]:
    """The parts of an incident's rows that no event changes."""
    alerts = incident.alerts
    products = _unique(a["ProductName"] for a in alerts)
    tactics = _unique(t for a in alerts for t in a["Tactics"].split(","))
    techniques = _unique(t for a in alerts for t in json.loads(a["Techniques"]))
    return {
        "alert_ids": compact_json([a["SystemAlertId"] for a in alerts]),
        "first_activity": min(a["StartTime"] for a in alerts),
        "last_activity": max(a["EndTime"] for a in alerts),
        "url": _incident_url(incident.name),
        "rule_ids": compact_json([world.rule_id("template:" + incident.template.key)]),
        "created": timestamp(incident.created),
        "additional_tail": compact_json({"alertProductNames": products, "tactics": tactics,
                                         "techniques": techniques})[1:],
    }


# Each event changes the replayed state and says who made the change (the row's ModifiedBy).
def _on_assign(replay: _Replay, moment: datetime, actor: str, data: dict) -> str:
    replay.owner = replay.world.analysts[data["analyst"]]
    return f"Automation rule - {AUTO_ASSIGN_RULE}"


def _on_activate(replay: _Replay, moment: datetime, actor: str, data: dict) -> str:
    replay.owner = replay.world.analysts[data["analyst"]]
    replay.status = "Active"
    for label in data["labels"]:
        if label not in replay.labels:
            replay.labels.append(label)
    if data["bookmark"]:
        replay.bookmarks.append(guid(replay.rng))
    return ANALYSTS[data["analyst"]]


def _on_reassign(replay: _Replay, moment: datetime, actor: str, data: dict) -> str:
    replay.owner = replay.world.analysts[data["analyst"]]
    replay.comment(moment, actor, _email(actor), f"Reassigning to {ANALYSTS[data['analyst']]} (shift handover).")
    return actor


def _on_severity(replay: _Replay, moment: datetime, actor: str, data: dict) -> str:
    replay.severity = data["severity"]
    replay.comment(moment, actor, _email(actor), choice(replay.rng, ESCALATION_COMMENTS))
    return actor


def _on_comment(replay: _Replay, moment: datetime, actor: str, data: dict) -> str:
    replay.comment(moment, actor, _email(actor), _comment_text(replay.rng, replay.incident, data["outcome"]))
    return actor


def _on_enrich(replay: _Replay, moment: datetime, actor: str, data: dict) -> str:
    incident = replay.incident
    options = [text for need, text in ENRICHMENT_COMMENTS if need is None or need in incident.kinds]
    text = fill(choice(replay.rng, options), incident.cast)
    replay.comment(moment, AUTOMATION_AUTHOR, "soc-automation@contoso.com", text)
    return f"Automation rule - {ENRICH_RULE}"


def _on_close(replay: _Replay, moment: datetime, actor: str, data: dict) -> str:
    replay.status = "Closed"
    replay.classification = data["classification"]
    replay.closed = timestamp(moment)
    if data["auto"]:
        replay.reason = "SuspiciousButExpected"
        replay.closing_comment = f"Closed automatically by the automation rule '{AUTO_CLOSE_RULE}'."
        return f"Automation rule - {AUTO_CLOSE_RULE}"
    return _on_close_by_analyst(replay, moment, actor, data)


def _on_close_by_analyst(replay: _Replay, moment: datetime, actor: str, data: dict) -> str:
    incident, classification = replay.incident, data["classification"]
    closings = [(reason, text) for need, reason, text in CLOSING[classification]
                if need is None or need in incident.kinds]
    reason, text = choice(replay.rng, closings)
    replay.reason, replay.closing_comment = reason, fill(text, incident.cast)
    if data.get("comment"):
        replay.comment(moment, actor, _email(actor), replay.closing_comment)
    if classification == "TruePositive" and replay.rng.random() < 0.4:
        replay.labels.append("Confirmed-compromise")
    return actor


_EVENTS: dict[str, Callable[[_Replay, datetime, str, dict], str]] = {
    "assign": _on_assign, "activate": _on_activate, "reassign": _on_reassign, "severity": _on_severity,
    "comment": _on_comment, "enrich": _on_enrich, "close": _on_close,
}


def _email(name: str) -> str:
    if name in PLAYGROUND_ANALYSTS:
        return PLAYGROUND_ANALYSTS[name][0]
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
