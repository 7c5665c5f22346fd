"""get_incident_detail as a tool: the incident, its alerts (with each detection's description, remediation and
portal link) and entities as compact text, the detail card, the
terminal's text (and its words when no incident matches), and the questions asked next."""

from __future__ import annotations

from bot import cards
from bot.cards import plaintext
from bot.cards.common import portal_url
from bot.sentinel.models import AlertSummary, IncidentDetail, QueryResult
from bot.sentinel.queries import incident_detail
from bot.tools.compact import RefFor, bounded, cell, head, long_cell, ref, span
from bot.tools.tool import Tool, read_tool

MAX_DESCRIPTION_CHARS = 400  # an alert's description as the model reads it ("…(n more characters)" past it)
MAX_REMEDIATION_CHARS = 300


def incident_detail_text(result: QueryResult, ref_for: RefFor) -> str:
    first = head(result, "incident", shown="1")
    if not result.records:
        return first
    return f"{first}\n" + _detail(result.records[0], ref_for)


def _detail(d: IncidentDetail, ref_for: RefFor) -> str:
    i = d.incident
    classification = i.classification or "-"
    if d.classification_reason:
        classification += f" ({d.classification_reason})"
    lines = [
        f"ref {ref(ref_for, 'incident', str(i.number))} | number {i.number} | "
        f"title (untrusted text): {cell(i.title, 160)}",
        f"severity {i.severity} | status {i.status} | owner {cell(i.owner or 'Unassigned', 60)} | "
        f"classification {cell(classification, 80)}",
        f"created_utc {cell(i.created)} | last_modified_utc {cell(i.last_modified)} | closed_utc {cell(d.closed)} | "
        f"first_activity_utc {cell(d.first_activity)} | last_activity_utc {cell(d.last_activity)}",
        f"tactics {cell(i.tactics, 160)} | products {cell(i.products, 160)} | comments {d.comment_count} | "
        f"labels {cell(d.labels, 80)}",
        f"description (untrusted text): {cell(d.description, 600)}",
        f"portal_url {i.url or '-'}",
        f"alerts ({len(d.alerts)} of {i.alert_count}):",
        "ref|severity|time_utc|status|product|techniques|activity_utc|name (untrusted text)",
    ]
    lines += ["|".join([ref(ref_for, "alert", a.alert_id), a.severity, cell(a.time), cell(a.status, 20),
                        cell(a.product, 50), cell(a.techniques, 80), span(a.start, a.end), cell(a.name, 120)])
              for a in d.alerts]
    lines.append(f"entities ({len(d.entities)}):")
    lines.append("ref|type|value (untrusted text)")
    entity_rows = [f"{ref(ref_for, 'entity', f'{e.type}:{e.value}')}|{e.type}|{cell(e.value, 120)}"
                   for e in d.entities]
    entity_rows += alert_detail_rows(d.alerts, ref_for, d.description)
    if d.other_matches:
        entity_rows.append("other incidents matching the title search: "
                           + "; ".join(f"#{m.number} {cell(m.title, 60)}" for m in d.other_matches))
    return bounded(lines, entity_rows, len(entity_rows))


def alert_detail_rows(alerts: tuple[AlertSummary, ...], ref_for: RefFor, incident_description: str = "") -> list[str]:
    """What each detection says (description, remediation, link), once per detection: an alert repeating an
    earlier one's name, description, techniques and steps is named beside it; a description the incident's own
    repeats, or steps an earlier row gave, are not written again. A link is given only when it opens a Microsoft
    portal."""
    groups: dict[tuple[object, ...], list[AlertSummary]] = {}
    for a in alerts:
        if a.description or a.remediation or a.link:
            groups.setdefault((a.name, a.description, a.techniques, a.remediation), []).append(a)
    rows = []
    steps_of: dict[tuple[str, ...], str] = {}  # steps already written -> the [n] they were written under
    for first, *repeats in groups.values():
        also = f" (also {' '.join(ref(ref_for, 'alert', a.alert_id) for a in repeats)})" if repeats else ""
        parts = []
        if first.description:
            parts.append("description: the incident's" if first.description == incident_description else
                         f"description (untrusted text): {long_cell(first.description, MAX_DESCRIPTION_CHARS)}")
        if first.remediation in steps_of:
            parts.append(f"remediation: as {steps_of[first.remediation]}")
        elif first.remediation:
            if ref(ref_for, "alert", first.alert_id) != "-":
                steps_of[first.remediation] = ref(ref_for, "alert", first.alert_id)
            steps = "; ".join(f"{n}) {step}" for n, step in enumerate(first.remediation, 1))
            parts.append(f"remediation (untrusted text): {long_cell(steps, MAX_REMEDIATION_CHARS)}")
        if first.link:
            parts.append(f"link {portal_url(first.link) or 'not a Microsoft portal, not given'}")
        rows.append(f"{ref(ref_for, 'alert', first.alert_id)}{also} " + " | ".join(parts))
    return (["alert details (one row per detection):", *rows]) if rows else []


def follow_ups(result: QueryResult, ref_for: RefFor) -> list[str]:
    if not isinstance(result.records[0], IncidentDetail):
        return []
    return ["Is this alert volume unusual this week?", "Show the other incidents from the last 24 hours"]


TOOL: Tool = read_tool(
    incident_detail.SPEC,
    "One incident in depth: description, alerts, entities, owner, classification, portal link.",
    "Looking up incident details...",
    text=incident_detail_text,
    card=cards.incident_detail_card,
    terminal=plaintext.incident_detail_text,
    terminal_empty=plaintext.no_incident,
    follow_ups=follow_ups,
    example='{"incident_ref": "42"}',
)
