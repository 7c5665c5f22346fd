"""The investigation card: the bot's assessment on top (level, score, each signal with its weight and the evidence
rows "E<n>" it rests on), then one section per evidence query with its rows numbered E1, E2, ... across the card
(each ending with the conversation's [n]: an alert's, an incident's, or the entity the row names, such as a
sign-in's IP or a process's hash, kept apart from the "E" number), how many matched, and its query behind "Show
query"."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.cards.common import (
    MAX_CARD_BYTES,
    Element,
    RefFor,
    actions,
    card,
    card_size,
    exact,
    header,
    plain,
    ref,
    subtle,
    text,
    warnings,
)
from bot.cards.footer import kql_lines
from bot.investigation.models import Investigation, Level, Section
from bot.sentinel.models import AlertSummary, Incident, QueryResult, one_line

MAX_SECTION_ROWS = 10  # per section on the card; the model's text and the facts hold them all
MAX_CELL_CHARS = 1000  # one evidence cell shown whole up to this (the entity model keeps identifiers to 1,000)
_LEVEL_STYLE = {Level.HIGH: "attention", Level.MEDIUM: "warning", Level.LOW: "accent", Level.NONE: "default"}


def investigation_card(result: QueryResult, ref_for: RefFor, now: datetime, changes: bool = False) -> Element:
    """The card of one investigation (the result's one record): every row a signal cites, up to
    ``MAX_SECTION_ROWS`` more per section, and each section's query; while the card is over its size limit, first
    fewer rows, then shorter queries (whole lines, with a note saying how to get the rest), then fewer rows again."""
    investigation: Investigation = result.records[0]
    demo = result.metadata.is_demo
    built: Element = {}
    for rows, kql_chars in _SHRINK:
        built = _card(investigation, ref_for, demo, result.metadata.warnings, rows, kql_chars)
        if card_size(built) <= MAX_CARD_BYTES:
            break
    return built


# (rows per section, KQL characters per section), tried in order: a dozen queries share the card's 28 KB, and each
# line of a query costs about 100 bytes of card beside its text.
_SHRINK = ((MAX_SECTION_ROWS, 1_500), (6, 1_500), (4, 1_500), (4, 800), (4, 400), (2, 400), (2, 200), (1, 200),
           (1, 0))


def _card(investigation: Investigation, ref_for: RefFor, demo: bool, notes: tuple[str, ...], rows: int,
          kql_chars: int) -> Element:
    body: list[Element] = header(f"Investigation: {plain(investigation.entity, 80)}", demo=demo,
                                 subtitle=f"{investigation.entity_kind}, {investigation.window.replace('_', ' ')}")
    if investigation.read_as:  # "victor.alvarez is the sign-in name of ...": which reading of the value was taken
        body.append(text(plain(investigation.read_as, 300), size="small", spacing="small"))
    if investigation.also:  # the other keys the alerts know it by, each to copy as the records hold it
        body.append(subtle("Also searched as (the same " + investigation.entity_kind + " in the alerts):"))
        body += [exact(value, size="small", spacing="none") for value in investigation.also]
    body.append(_assessment(investigation))
    body += warnings(list(notes))
    for index, section in enumerate(investigation.sections, start=1):
        body += _section(investigation, section, index, ref_for, rows, kql_chars)
    return card(body)


def _assessment(investigation: Investigation) -> Element:
    assessment = investigation.assessment
    items: list[Element] = [
        text(f"Assessment: {assessment.level.value.upper()} (score {assessment.score})", weight="bolder"),
        subtle("Computed by the bot from the evidence below, by fixed rules: not by the AI model."),
    ]
    if not assessment.signals:
        items.append(text("No signal in the evidence read.", size="small"))
    for signal in assessment.signals:
        items.append(text(f"+{signal.weight} {signal.title}: {plain(signal.detail, 160)} ({signal.evidence_text()})",
                          size="small", spacing="small"))
    return {"type": "Container", "style": _LEVEL_STYLE[assessment.level], "items": items}


def _section(investigation: Investigation, section: Section, index: int, ref_for: RefFor, rows: int,
             kql_chars: int) -> list[Element]:
    # Cited rows first among the rest, but the card must fit.
    shown = section.shown(investigation.assessment.cited, rows)[:rows * 2]
    out: list[Element] = [text(f"{section.title} ({plain(section.status(len(shown)), 168)})", weight="bolder",
                               separator=True, spacing="medium")]
    if shown:
        # One line per row (a Table costs several times the bytes, and thirteen sections share the card's 28 KB).
        headers, cells = section_rows(investigation, section, shown, ref_for)
        out.append(subtle(" · ".join(("row", *headers)), weight="bolder"))
        # Made inert as one line, not cell by cell: a cell "#14404" alone would lose its "#" (a markdown heading).
        # Each cell whole up to MAX_CELL_CHARS (a SHA-256, a command line, a URL: what an analyst copies), wrapped by
        # the card; the card sheds rows, not the ends of values, when it is over its size.
        out += [subtle(plain(" · ".join((r[0], *(one_line(v, MAX_CELL_CHARS) or "-" for v in r[1:]))),
                             MAX_CELL_CHARS * 8)) for r in cells]
    if section.kql:
        target = f"evidence-kql-{index}"
        out.append(actions({"type": "Action.ToggleVisibility", "title": "Show query", "targetElements": [target]},
                           spacing="small"))
        out.append({"type": "Container", "id": target, "isVisible": False, "items": kql_lines(section.kql, kql_chars)})
    return out


def section_rows(investigation: Investigation, section: Section, shown: tuple[tuple[int, Any], ...],
                 ref_for: RefFor) -> tuple[tuple[str, ...], list[list[str]]]:
    """The headers and each row's cells: its evidence number first ("E9", what the signals cite), its cells, and
    last the conversation's [n] of what it names (the alert, the incident, or the entity the row names: "tell me
    more about [39]"), apart from the "E" number so that "E9" and "[39]" are never read as one."""
    headers, cells = _section_rows(investigation, section, shown, ref_for)
    return (*("time UTC" if h == "time" else h for h in headers), "[n]"), cells  # the zone said once, in the header


def _section_rows(investigation: Investigation, section: Section, shown: tuple[tuple[int, Any], ...],
                  ref_for: RefFor) -> tuple[tuple[str, ...], list[list[str]]]:
    first = shown[0][1]
    if isinstance(first, AlertSummary):
        return ("time", "severity", "alert"), [
            [section.ref(i), _time(a.time), a.severity, a.name, ref(ref_for, "alert", a.alert_id) or "-"]
            for i, a in shown]
    if isinstance(first, Incident):
        return ("incident", "severity", "status", "title"), [
            [section.ref(i), f"#{n.number}", n.severity, n.status, n.title,
             ref(ref_for, "incident", str(n.number)) or "-"] for i, n in shown]
    return tuple(first.HEADERS), [[section.ref(i), *r.cells(), row_ref(investigation, r, ref_for) or "-"]
                                  for i, r in shown]


def row_ref(investigation: Investigation, record: Any, ref_for: RefFor) -> str:
    """The conversation's [n] of the entity an evidence row names (References.register gave it one)."""
    kind, value = investigation.row_entity(record)
    return ref(ref_for, "entity", f"{kind}:{value}")


def _time(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M}" if moment else "-"
