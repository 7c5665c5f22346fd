"""The alert list card, the alert table the incident detail card shares, and the alerts' own fields on it
(description, activity start and end, techniques, the portal link, remediation steps)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from bot.cards.common import (
    REF_COLUMN,
    Element,
    RefFor,
    actions,
    activity_span,
    age,
    breakable,
    cell,
    list_card,
    plain,
    portal_url,
    ref,
    severity_text,
    subtle,
    table,
    text,
)
from bot.cards.filters import titled
from bot.sentinel.models import AlertSummary, QueryResult, count_label
from bot.sentinel.params import MAX_LIMIT

MAX_ALERT_DETAILS = 5  # alerts whose own fields the detail card shows, newest first (the same detection once)


def alert_list(result: QueryResult, ref_for: RefFor, now: datetime) -> Element:
    """[n] | Alert (name, severity, product and age, entities)."""
    parameters = result.metadata.parameters
    return list_card(result, lambda total: titled(count_label(total, "alert"), parameters), "alerts",
                     lambda shown: alert_table(shown, ref_for, now, with_entities=True), MAX_LIMIT)


def alert_table(alerts: Sequence[AlertSummary], ref_for: RefFor, now: datetime, *, with_entities: bool) -> Element:
    """[n] | Alert: its name, its severity, product and age, with ``with_entities`` its first entities. The severity
    chip sits under the name: a column of its own left a phone too little room for names ("'BrowserModifier'")."""
    rows = []
    for alert in alerts:
        main = [text(breakable(plain(alert.name, 90))), severity_text(alert.severity, size="small", spacing="small"),
                subtle(f"{breakable(plain(alert.product, 40))} · {age(alert.time, now)}")]
        seen = summary_line(alert, now)
        if seen:
            main.append(subtle(seen))
        if with_entities:
            main.append(subtle(f"Entities: {_entities(alert)}"))
        rows.append([cell(text(ref(ref_for, "alert", alert.alert_id), weight="bolder")), cell(*main)])
    return table(["", "Alert"], [REF_COLUMN, 1], rows)


def _entities(alert: AlertSummary) -> str:
    """The first two entity values, whole up to 130 characters (a SHA-256, a URL): "alice@contoso.com, 10.0.0.4 +3"."""
    values = [breakable(plain(entity.partition(": ")[2] or entity, 130)) for entity in alert.entities[:2]]
    more = max(alert.entity_count, len(alert.entities)) - len(values)
    return (", ".join(values) or "-") + (f" +{more}" if more > 0 else "")


def summary_line(alert: AlertSummary, now: datetime) -> str:
    """ "T1078, T1110.001 · active 20 Nov 13:02 – 13:23 UTC", or "" when the alert has neither."""
    parts = [", ".join(alert.techniques)] if alert.techniques else []
    span = activity_span(alert.start, alert.end, now)
    if span:
        parts.append(f"active {span}")
    return " · ".join(parts)


def alert_details(alerts: Sequence[AlertSummary], ref_for: RefFor, now: datetime, limit: int,
                  incident_description: str = "") -> list[Element]:
    """Each alert's own fields, for up to ``limit`` alerts: its name, activity, techniques, its description (inert
    text, whole as the query returned it), its remediation steps as a numbered list, and its link: an "Open alert"
    button on a Microsoft portal (``portal_url``), inert text anywhere else. An alert repeating an earlier one's
    detection (same name, description, techniques and steps) is named under it, not shown again, and a
    description the incident's own repeats is not written twice."""
    blocks: list[tuple[AlertSummary, list[AlertSummary]]] = []
    for alert in alerts:
        if not (alert.description or alert.techniques or alert.remediation or alert.link or alert.start):
            continue
        same = next((b for b in blocks if _detection(b[0]) == _detection(alert)), None)
        if same is not None:
            same[1].append(alert)
        elif len(blocks) < limit:
            blocks.append((alert, []))
    if not blocks:
        return []
    out: list[Element] = [text("Alert details", weight="bolder", separator=True, spacing="medium")]
    for alert, repeats in blocks:
        shown = replace(alert, description="") if alert.description == incident_description else alert
        out.append({"type": "Container", "spacing": "medium", "items": _alert_block(shown, repeats, ref_for, now)})
    return out


def _detection(alert: AlertSummary) -> tuple[object, ...]:
    return alert.name, alert.description, alert.techniques, alert.remediation


def _alert_block(alert: AlertSummary, repeats: Sequence[AlertSummary], ref_for: RefFor,
                 now: datetime) -> list[Element]:
    heading = f"{ref(ref_for, 'alert', alert.alert_id)} {breakable(plain(alert.name, 200))}".strip()
    items: list[Element] = [text(heading, weight="bolder", size="small")]
    facts = []
    span = activity_span(alert.start, alert.end, now)
    if span:
        facts.append({"title": "Activity", "value": span})
    if alert.techniques:
        facts.append({"title": "Techniques", "value": ", ".join(alert.techniques)})
    if facts:
        items.append({"type": "FactSet", "spacing": "small", "facts": facts})
    if repeats:
        refs = " ".join(r for r in (ref(ref_for, "alert", a.alert_id) for a in repeats) if r)
        items.append(subtle(f"Also {refs}: the same detection." if refs else
                            f"And {count_label(len(repeats), 'more alert')} of the same detection.", spacing="small"))
    if alert.description:
        items.append(text(whole(alert.description), size="small", spacing="small"))
    if alert.remediation:
        items.append(text("Remediation", weight="bolder", size="small", spacing="small"))
        items += [text(f"{n}. {whole(step)}", size="small", spacing="none")
                  for n, step in enumerate(alert.remediation, 1)]
    link = portal_url(alert.link) if alert.link else None
    if link:
        items.append(actions({"type": "Action.OpenUrl", "title": "Open alert", "url": link}, spacing="small"))
    elif alert.link:
        items.append(subtle(f"Alert link (not a Microsoft portal, so not opened here): {whole(alert.link)}",
                            spacing="small"))
    return items


def whole(value: str) -> str:
    """Free text as inert text, not cut: the records bound it already (rows.alert_description, remediation)."""
    return breakable(plain(value, len(value) + 64))
