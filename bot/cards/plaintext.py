"""Query results as plain-text tables, with [n] references: the terminal's form of each result, as pure as a card.

Each read tool names its plain builder here beside its card (``Tool.terminal``); a tool without one prints its
compact text. Incident and alert text is attacker-controlled, so every value is cleaned of control characters (a
crafted title could otherwise carry terminal escape sequences) and cut to the column width.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from bot.cards.alerts import MAX_ALERT_DETAILS
from bot.cards.common import RefFor, activity_span, nothing_matched_text, portal_url
from bot.cards.filters import filter_label
from bot.cards.investigation import section_rows
from bot.investigation.models import Investigation
from bot.sentinel.models import (
    AlertSummary,
    EntityCount,
    Incident,
    IncidentDetail,
    OnCallEntry,
    QueryResult,
    TrendBin,
    bounded_text,
    on_call_order,
    one_line,
)

# (result with at least one record, [n] lookup, now or None for the clock's) -> the terminal's text
PlainBuilder = Callable[[QueryResult, RefFor, "datetime | None"], str]
INVESTIGATION_ROWS = 10  # per section, beside every row a signal cites
SEVERITY_SHORT = {"High": "HIGH", "Medium": "MED", "Low": "LOW", "Informational": "INFO"}
NO_INCIDENT = "No incident matches that reference in the last 90 days. Check the number, or try words from its title."


def _ref(ref_for: RefFor, kind: str, key: str) -> str:
    n = ref_for(kind, key)
    return f"[{n}]" if n is not None else ""


def clean(value: object, width: int | None = None) -> str:
    """One line of printable text, at most ``width`` characters."""
    return one_line(value, width)


def age(moment: datetime | None, now: datetime | None = None) -> str:
    if moment is None:
        return "-"
    seconds = ((now or datetime.now(UTC)) - moment).total_seconds()
    if seconds < 3600:
        return f"{max(int(seconds // 60), 0)}m ago"
    if seconds < 86400 * 2:
        return f"{int(seconds // 3600)}h ago"
    return f"{int(seconds // 86400)}d ago"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip() for row in rows]
    return "\n".join(lines)


def nothing_matched(result: QueryResult) -> str:
    """An empty list: what was searched, in words, and what is left to try (the card's words)."""
    what, hint = nothing_matched_text(result.metadata.parameters, filter_label(result.metadata.parameters))
    return f"{what} {hint}"


def no_incident(result: QueryResult) -> str:
    return NO_INCIDENT


def investigation_text(result: QueryResult, ref_for: RefFor, now: datetime | None = None) -> str:
    """The bot's assessment (level, each signal and the rows it rests on), then each section's rows as a table."""
    found: Investigation = result.records[0]
    assessment = found.assessment
    lines = [f"Investigation of {found.entity_kind} {clean(found.entity, 120)}, {found.window.replace('_', ' ')}"]
    if found.read_as:
        lines.append(clean(found.read_as, 300))
    if found.also:
        lines.append("Also searched as: " + ", ".join(clean(v, 120) for v in found.also))
    lines += [f"Assessment: {assessment.level.value.upper()} (score {assessment.score}), computed by the bot from the "
             "rows below by fixed rules"]
    lines += [f"  +{s.weight} {s.title}: {clean(s.detail, 160)} ({s.evidence_text()})"
              for s in assessment.signals] or ["  no signal in the evidence read"]
    for section in found.sections:
        shown = section.shown(assessment.cited, INVESTIGATION_ROWS)
        lines += ["", f"{section.title} ({clean(section.status(len(shown)), 168)})"]
        if shown:
            headers, rows = section_rows(found, section, shown, ref_for)
            lines.append(table(["", *headers], [[clean(v, 80) for v in row] for row in rows]))  # a hash whole
    return "\n".join(lines)


def on_call_text(result: QueryResult, ref_for: RefFor, now: datetime | None = None) -> str:
    """Who is on shift now first, then by the start of their next shift."""
    records: Sequence[OnCallEntry] = result.records
    rows = [["now" if e.on_shift else "ended" if e.ended else f"from {e.shift_start:%d %b %H:%M}", clean(e.name, 24),
             clean(e.upn, 36), clean(e.team, 18), e.hours, clean(e.phone, 18)]
            for e in on_call_order(records)]
    return table(["On shift", "Name", "UPN", "Team", "Shift", "Phone"], rows)


def incidents_text(result: QueryResult, ref_for: RefFor, now: datetime | None = None) -> str:
    records: Sequence[Incident] = result.records
    rows = [
        [_ref(ref_for, "incident", str(i.number)), f"#{i.number}", SEVERITY_SHORT.get(i.severity, clean(i.severity, 6)),
         clean(i.status, 8), clean(i.owner or "Unassigned", 18), age(i.created, now), clean(i.title, 60)]
        for i in records
    ]
    return table(["", "Incident", "Sev", "Status", "Owner", "Created", "Title"], rows)


def incident_detail_text(result: QueryResult, ref_for: RefFor, now: datetime | None = None) -> str:
    detail: IncidentDetail = result.records[0]
    i = detail.incident
    lines = [
        f"{_ref(ref_for, 'incident', str(i.number))} Incident #{i.number}: {clean(i.title, 120)}".strip(),
        f"  Severity {i.severity} | Status {i.status} | Owner {clean(i.owner or 'Unassigned', 40)}",
        f"  Created {age(i.created, now)} | Last update {age(i.last_modified, now)}"
        + (f" | Closed as {i.classification}"
           + (f" ({detail.classification_reason})" if detail.classification_reason else "")
           if i.classification else ""),
    ]
    if i.tactics:
        lines.append(f"  Tactics: {clean(', '.join(i.tactics), 120)}")
    if i.products:
        lines.append(f"  Products: {clean(', '.join(i.products), 120)}")
    if detail.description:
        lines.append(f"  Description: {clean(detail.description, 300)}")
    if detail.alerts:
        lines.append(f"\nAlerts ({len(detail.alerts)} of {i.alert_count}):")
        lines.append(_alerts(detail.alerts, ref_for, now))
    lines += _alert_details(detail, ref_for, now or datetime.now(UTC))
    if detail.entities:
        lines.append("\nEntities:")
        lines += [f"  {_ref(ref_for, 'entity', f'{e.type}:{e.value}'):>5} {clean(e.type, 18)}: {clean(e.value, 80)}"
                  for e in detail.entities[:20]]
        if len(detail.entities) > 20:
            lines.append(f"  ... and {len(detail.entities) - 20} more")
    if detail.other_matches:
        others = ", ".join(f"#{m.number} {clean(m.title, 40)}" for m in detail.other_matches)
        lines.append(f"\nThe title search also matched: {others}")
    if i.url:
        lines.append(f"\nOpen in Sentinel: {clean(i.url)}")
    return "\n".join(lines)


def _alert_details(detail: IncidentDetail, ref_for: RefFor, now: datetime) -> list[str]:
    """Each detection's own fields once (the card's ``alert_details``): activity, techniques, description,
    remediation steps and its link (a terminal link is never opened for you; one not on a Microsoft portal says so)."""
    lines: list[str] = []
    seen: set[tuple[object, ...]] = set()
    for a in detail.alerts:
        key = (a.name, a.description, a.techniques, a.remediation)
        if key in seen or not (a.description or a.techniques or a.remediation or a.link or a.start):
            continue
        seen.add(key)
        if len(seen) > MAX_ALERT_DETAILS:
            break
        number = _ref(ref_for, "alert", a.alert_id)
        lines.append(f"\n  {number + ' ' if number else ''}Alert: {clean(a.name, 120)}")
        span = activity_span(a.start, a.end, now)
        if span:
            lines.append(f"    Activity: {span}")
        if a.techniques:
            lines.append(f"    Techniques: {', '.join(a.techniques)}")
        if a.description and a.description != detail.description:
            lines.append(f"    Description: {clean(bounded_text(clean(a.description), 600))}")
        lines += [f"    {n}. {clean(step, 300)}" for n, step in enumerate(a.remediation, 1)]
        if a.link:
            link = portal_url(a.link)
            lines.append(f"    Alert link: {clean(link, 400)}" if link else
                         f"    Alert link (not a Microsoft portal): {clean(a.link, 200)}")
    return lines


def alerts_text(result: QueryResult, ref_for: RefFor, now: datetime | None = None) -> str:
    return _alerts(result.records, ref_for, now)


def _alerts(records: Sequence[AlertSummary], ref_for: RefFor, now: datetime | None = None) -> str:
    rows = [
        [_ref(ref_for, "alert", a.alert_id), SEVERITY_SHORT.get(a.severity, clean(a.severity, 6)), age(a.time, now),
         clean(a.status, 10), clean(a.name, 48), clean(a.product, 30), clean(", ".join(a.entities[:2]), 40),
         clean(", ".join(a.techniques), 30)]
        for a in records
    ]
    return table(["", "Sev", "Time", "Status", "Alert", "Product", "Entities", "Techniques"], rows)


def trend_text(result: QueryResult, ref_for: RefFor, now: datetime | None = None) -> str:
    records: Sequence[TrendBin] = result.records
    severities = [s for s in SEVERITY_SHORT if any(b.severity == s for b in records)]
    by_bin: dict[datetime, dict[str, int]] = {}
    for b in records:
        by_bin.setdefault(b.start, {})[b.severity] = b.count
    daily = len(by_bin) > 1 and all(t.hour == 0 for t in by_bin)
    peak = max((sum(c.values()) for c in by_bin.values()), default=0) or 1
    rows = []
    for start, counts in sorted(by_bin.items()):
        total = sum(counts.values())
        label = start.strftime("%a %d %b" if daily else "%d %b %H:00")
        bar = "#" * round(20 * total / peak)
        rows.append([label, *(str(counts.get(s, 0)) for s in severities), str(total), bar])
    return table(["Bin (UTC)", *(SEVERITY_SHORT[s] for s in severities), "Total", ""], rows)


def entities_text(result: QueryResult, ref_for: RefFor, now: datetime | None = None) -> str:
    records: Sequence[EntityCount] = result.records
    rows = [
        [_ref(ref_for, "entity", f"{e.type}:{e.value}"), clean(e.type, 18), clean(e.value, 50), str(e.alert_count),
         str(e.high_severity_count), age(e.first_seen, now), age(e.last_seen, now)]
        for e in records
    ]
    return table(["", "Type", "Entity", "Alerts", "High", "First seen", "Last seen"], rows)
