"""The incident table and the incident detail card."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from bot.cards.alerts import alert_table
from bot.cards.common import (
    Element,
    RefFor,
    actions,
    age,
    card,
    cell,
    count_label,
    details_action,
    fit,
    header,
    list_card,
    plain,
    ref,
    severity_text,
    subtle,
    table,
    text,
    warnings,
    when,
)
from bot.sentinel.models import EntityRef, Incident, IncidentDetail, QueryResult

MAX_DETAIL_ALERTS = 15
MAX_DETAIL_ENTITIES = 20
MAX_OTHER_MATCHES = 5
_TYPE_LABELS = {"ip": "IP", "url": "URL", "dns": "DNS", "filehash": "File hash", "cloud-application": "Cloud app",
                "azure-resource": "Azure resource", "registry-key": "Registry key"}
_SAFE_URL = re.compile(r"https://[^\s\"'<>\\^`{|}]{1,2040}")


def incident_table(result: QueryResult, ref_for: RefFor, now: datetime) -> Element:
    """[n] | Incident (title; number, status, owner, age) | Severity | Details button."""
    return list_card(result, lambda total: count_label(total, "incident"), "incidents",
                     "Ask for a shorter window or a higher severity to see the rest.",
                     lambda shown: _incident_table(shown, ref_for, now))


def _incident_table(incidents: Sequence[Incident], ref_for: RefFor, now: datetime) -> Element:
    rows = [
        [
            cell(text(ref(ref_for, "incident", str(i.number)), weight="bolder")),
            cell(text(plain(i.title, 90), maxLines=2), subtle(_incident_line(i, now))),
            cell(severity_text(i.severity)),
            cell(actions(details_action(i.number))),
        ]
        for i in incidents
    ]
    return table(["", "Incident", "Severity", ""], [2, 9, 3, 4], rows)


def incident_detail(detail: IncidentDetail, ref_for: RefFor, now: datetime, *, demo: bool = False,
                    notes: Sequence[str] = ()) -> Element:
    """Facts, description, alerts, entities, "Open in Sentinel" and the other incidents a title search matched."""
    return fit(lambda limit: _detail(detail, ref_for, now, demo, notes, limit), MAX_DETAIL_ALERTS)


def _detail(d: IncidentDetail, ref_for: RefFor, now: datetime, demo: bool, notes: Sequence[str],
            limit: int) -> Element:
    i = d.incident
    number = f"{ref(ref_for, 'incident', str(i.number))} Incident #{i.number}".strip()
    body = header(number, demo=demo)
    body.append(text(plain(i.title, 200), weight="bolder", spacing="small"))
    body.append(severity_text(i.severity, " severity", spacing="small"))
    body += warnings(notes)
    body.append({"type": "FactSet", "facts": [{"title": t, "value": v} for t, v in _facts(d, now)]})
    if d.description:
        body.append(text(plain(d.description, 600), spacing="medium"))
    if d.alerts:
        shown = d.alerts[:limit]
        body.append(text(f"Alerts ({len(shown)} of {max(i.alert_count, len(d.alerts))})", weight="bolder",
                         separator=True, spacing="medium"))
        body.append(alert_table(shown, ref_for, now, with_entities=False))
    if d.entities:
        body += _entities(d.entities, ref_for, limit * MAX_DETAIL_ENTITIES // MAX_DETAIL_ALERTS)
    if d.other_matches:
        body += _other_matches(d)
    url = i.url.strip()
    buttons = [{"type": "Action.OpenUrl", "title": "Open in Sentinel", "url": url}] if _SAFE_URL.fullmatch(url) else []
    return card(body, buttons)


def _facts(d: IncidentDetail, now: datetime) -> list[tuple[str, str]]:
    i = d.incident
    facts = [("Status", plain(i.status, 30)), ("Owner", plain(i.owner or "Unassigned", 60)),
             ("Created", when(i.created, now)), ("Last update", when(i.last_modified, now))]
    if d.closed:
        facts.append(("Closed", when(d.closed, now)))
    if i.classification:
        reason = f" · {plain(d.classification_reason, 40)}" if d.classification_reason else ""
        facts.append(("Classification", plain(i.classification, 40) + reason))
    if d.classification_comment:
        facts.append(("Closing comment", plain(d.classification_comment, 200)))
    if i.tactics:
        facts.append(("Tactics", plain(", ".join(i.tactics), 160)))
    if i.products:
        facts.append(("Products", plain(", ".join(i.products), 160)))
    facts.append(("Comments", str(d.comment_count)))
    if d.labels:
        facts.append(("Labels", plain(", ".join(d.labels), 120)))
    return facts


def _entities(entities: Sequence[EntityRef], ref_for: RefFor, limit: int) -> list[Element]:
    """Entities grouped by type: the type once, then "[n] value" per entity."""
    groups: dict[str, list[EntityRef]] = {}
    for entity in entities[:limit]:
        groups.setdefault(entity.type, []).append(entity)
    facts = []
    for kind, members in groups.items():
        for index, entity in enumerate(members):
            label = f"{ref(ref_for, 'entity', f'{entity.type}:{entity.value}')} {_unbroken(plain(entity.value, 60))}".strip()
            title = _TYPE_LABELS.get(kind) or plain(kind, 24).capitalize()
            facts.append({"title": title if index == 0 else "", "value": label})
    shown = min(len(entities), limit)
    heading = f"Entities ({shown} of {len(entities)})" if shown < len(entities) else f"Entities ({shown})"
    return [text(heading, weight="bolder", separator=True, spacing="medium"), {"type": "FactSet", "facts": facts}]


def _unbroken(value: str, longest: int = 36) -> str:
    """A long value without spaces (a hash, a token) cannot wrap on a phone: show its ends, as analysts
    compare hashes anyway. The full value is in Sentinel."""
    if len(value) <= longest or any(ch.isspace() for ch in value):
        return value
    return f"{value[:20]}…{value[-8:]}"


def _other_matches(d: IncidentDetail) -> list[Element]:
    matches = d.other_matches[:MAX_OTHER_MATCHES]
    listed = "; ".join(f"#{m.number} {plain(m.title, 60)}" for m in matches)
    if len(d.other_matches) > len(matches):
        listed += f"; and {len(d.other_matches) - len(matches)} more"
    return [
        text(f"The title search also matched: {listed}", size="small", separator=True, spacing="medium"),
        actions(*(details_action(m.number, f"#{m.number}") for m in matches)),
    ]


def _incident_line(i: Incident, now: datetime) -> str:
    """ "#14431 · Active · Dana Whitfield · 14h ago" """
    status = plain(f"{i.status} ({i.classification})" if i.classification else i.status, 40)
    return f"#{i.number} · {status} · {plain(i.owner or 'Unassigned', 30)} · {age(i.created, now)}"
