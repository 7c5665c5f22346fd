"""The incident summary (``investigation.models.IncidentSummary``) in the three forms it is read in: the card (one
line per row, each with the conversation's [n] of the rows it rests on, so it reads at a phone's 320 px), the
terminal's text, and the comment "Post to the incident" proposes (plain lines, no [n]: they mean nothing outside the
conversation).

All three are made from one list of sections (``sections``): a heading and its lines, each line the bot's words
around values from the records and the rows it cites. Every value from the records (titles, alert names, evidence
cells, entity values) is made inert for the card and the comment (``common.plain``: no markdown, no live link, no
tag or mention), and identifiers are never cut (a hash, a URL, a command line up to ``MAX_VALUE_CHARS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.cards.common import (
    MAX_CARD_BYTES,
    Element,
    RefFor,
    breakable,
    card,
    card_size,
    details_action,
    header,
    plain,
    ref,
    subtle,
    text,
    warnings,
)
from bot.cards.verbs import Verb
from bot.investigation.models import Cite, EntityFinding, IncidentSummary, TimelineEntry
from bot.sentinel.changes import MAX_COMMENT_CHARS
from bot.sentinel.models import QueryResult, one_line

MAX_VALUE_CHARS = 1000  # an identifier or a command line, whole up to this
MAX_TEXT_CHARS = 300  # an alert name, a title, an evidence row's cells
COMMENT_LINES = 3  # per section in the posted comment (its 2,000 characters hold every section's first lines)
COMMENT_TOOL = "add_incident_comment"  # the change "Post to the incident" proposes (tools.write_tools)
CARD_ROWS = {5: 5}  # the similar incidents (the sixth section): the five sharing the most on a phone's card
_SUGGESTION_STYLE = {"TruePositive": "attention", "Undetermined": "warning"}
_ACTION_WORDS = {"reset_credentials": "Contain", "isolate_device": "Contain", "block_indicator": "Contain",
                 "escalate": "Escalate", "close": "Close", "investigate": "Investigate"}


@dataclass(frozen=True)
class Line:
    """One row: parts of text (``values`` are the records', the rest the bot's words) and the rows it cites."""

    parts: tuple[tuple[str, bool], ...]  # (text, is a value from the records)
    cites: tuple[Cite, ...] = ()
    detail: tuple[tuple[str, bool], ...] = ()  # what backs it (the card's second, subtle line)


@dataclass(frozen=True)
class Section:
    heading: str
    lines: tuple[Line, ...]
    more: int = 0  # rows the summary holds no line for (similar incidents past the ten sharing the most)


def _line(*parts: str | tuple[str]) -> tuple[tuple[str, bool], ...]:
    """Words as given; a one-tuple ``(value,)`` is a value from the records."""
    return tuple((p[0], True) if isinstance(p, tuple) else (p, False) for p in parts)


def stamp(moment: datetime | None) -> str:
    """ "20 Nov 12:10 UTC" (the summary's times are UTC, and say so)."""
    return f"{moment:%d %b %H:%M} UTC" if moment is not None else "time unknown"


def sections(summary: IncidentSummary) -> list[Section]:
    """The summary as headed lines, in reading order: the suggestion, the next actions, the timeline, the entities,
    the tactics and techniques, the similar incidents."""
    s = summary.suggestion
    return [Section(f"Suggested classification: {s.classification}",
                   tuple(Line(_line((r.text,)), r.cites) for r in s.reasons)),
           Section("Recommended next actions", tuple(
               Line(_line(f"{_ACTION_WORDS.get(a.kind, 'Do')}: ", (a.title,)), a.cites, _line((a.why,)))
               for a in summary.actions) or (Line(_line("None: nothing in the rows calls for one.")),)),
           Section("Timeline (UTC)", tuple(_timeline_line(e) for e in summary.timeline)
                   or (Line(_line("No alert or evidence time was read.")),)),
           Section(f"Assets and indicators (investigated over {summary.window.replace('_', ' ')})",
                   tuple(_entity_line(f) for f in summary.entities)
                   or (Line(_line("The incident names no account, host, IP, hash, URL or domain.")),)),
           Section("Tactics and techniques", tuple(
               Line(_line("tactic " if t.tactic else "technique ", (t.name,)), t.cites) for t in summary.techniques)
               or (Line(_line("None declared by the alerts.")),)),
           Section("Similar incidents (same alert names or entities, last 30 days)", _similar_lines(summary),
                   max(summary.similar_total - len(summary.similar), 0))]


def _timeline_line(entry: TimelineEntry) -> Line:
    when = stamp(entry.time)
    if entry.source == "alert":
        more = f" ({entry.count} alerts, the last {stamp(entry.last)})" if entry.count > 1 else ""
        return Line(_line(f"{when} · alert · {entry.severity or '-'} · ", (entry.what,), more), entry.cites)
    return Line(_line(f"{when} · {entry.source} · ", (entry.what,)), entry.cites)


def _entity_line(finding: EntityFinding) -> Line:
    if finding.investigation is None:
        return Line(_line(f"{finding.kind} ", (finding.value,), " — UNKNOWN: its investigation failed (",
                          (finding.error,), ")"), (finding.cite,))
    a = finding.investigation.assessment
    signals = ", ".join(s.title for s in a.signals[:4]) or "no signal"
    return Line(_line(f"{finding.kind} ", (finding.value,), f" — {a.level.value.upper()} ({a.score})"),
                (finding.cite,), _line(signals))


def _similar_lines(summary: IncidentSummary) -> tuple[Line, ...]:
    if summary.similar_error:
        return (Line(_line("Unknown: the query failed (", (summary.similar_error,), ")")),)
    lines = []
    for found in summary.similar:
        i = found.incident
        shares = "; ".join([*found.alert_names, *found.entities])
        lines.append(Line(_line(f"#{i.number} · ", (i.classification or "unclassified",), " · ",
                                (i.owner or "Unassigned",), f" · {i.severity} · {i.status}"),
                          (Cite("incident", str(i.number)),), _line((i.title,), " · shares: ", (shares,))))
    return tuple(lines) or (Line(_line("None in the last 30 days.")),)


def refs(line: Line, ref_for: RefFor) -> str:
    """ "[6][7]": the [n] of the rows a line cites, each once, in order."""
    numbers = {n for c in line.cites if (n := ref_for(c.kind, c.key)) is not None}
    return "".join(f"[{n}]" for n in sorted(numbers))


def _inert(parts: tuple[tuple[str, bool], ...]) -> str:
    return "".join(breakable(plain(t, MAX_VALUE_CHARS)) if value else t for t, value in parts)


def _said(parts: tuple[tuple[str, bool], ...]) -> str:
    return "".join(one_line(t, MAX_VALUE_CHARS) if value else t for t, value in parts)


def _card_text(line: Line, ref_for: RefFor) -> str:
    return f"{refs(line, ref_for)} {_inert(line.parts)}".strip()


def _card_lines(line: Line, ref_for: RefFor) -> list[Element]:
    """A row: its [n] and words, and what backs it below in subtle text."""
    if not line.cites:
        return [subtle(_card_text(line, ref_for), spacing="small")]
    out = [text(_card_text(line, ref_for), size="small", spacing="small")]
    if line.detail:
        out.append(subtle(_inert(line.detail)))
    return out


def summary_card(result: QueryResult, ref_for: RefFor, now: datetime, changes: bool = False) -> Element:
    """The summary's card: the incident, then each section a heading and one wrapped line per row, each row's [n]
    first; "Post to the incident" (when the analyst may change incidents) and Details at its foot. Over the size
    limit, fewer lines per section."""
    summary: IncidentSummary = result.records[0]
    for most in (20, 10, 6, 4, 2, 1):
        built = _card(summary, result, ref_for, changes, most)
        if card_size(built) <= MAX_CARD_BYTES:
            break
    return built


def _card(summary: IncidentSummary, result: QueryResult, ref_for: RefFor, changes: bool, most: int) -> Element:
    i = summary.detail.incident
    owner = breakable(plain(i.owner or "Unassigned", 60))
    body: list[Element] = header(f"Summary of incident #{i.number}", demo=result.metadata.is_demo,
                                 subtitle=f"{plain(i.severity, 13)} · {plain(i.status, 20)} · {owner} · "
                                          f"computed {stamp(summary.as_of)}")
    body.append(text(f"{ref(ref_for, 'incident', str(i.number))} {breakable(plain(i.title, MAX_TEXT_CHARS))}".strip(),
                     weight="bolder", spacing="small"))
    body.append(subtle("Computed by the bot from the incident, its entities' investigations and similar incidents, "
                       "by fixed rules: not by the AI model. [n] are the rows each line rests on."))
    body += warnings(list(result.metadata.warnings) + [f"Left out: {n}" for n in summary.left_out], limit=6)
    for index, section in enumerate(sections(summary)):
        heading = text(plain(section.heading, 120), weight="bolder", separator=True, spacing="medium")
        cited = [line for line in section.lines if line.cites]
        shown = cited[:min(most, CARD_ROWS.get(index, most))]
        lines = [block for line in section.lines if not line.cites or line in shown
                 for block in _card_lines(line, ref_for)]
        hidden = len(cited) - len(shown) + section.more
        if hidden:
            lines.append(subtle(f"{hidden} more not shown on the card (the first by time or by what they share)."))
        if index == 0:  # the suggestion on its level's background
            style = _SUGGESTION_STYLE.get(summary.suggestion.classification, "good")
            body.append({"type": "Container", "style": style, "items": [heading, *lines], "spacing": "medium"})
        else:
            body += [heading, *lines]
    buttons = [details_action(i.number, "Details")]
    if changes:
        buttons.insert(0, {"type": "Action.Submit", "title": "Post to the incident", "data": {
            "action": Verb.CHANGE_PROPOSE, "tool": COMMENT_TOOL,
            "arguments": {"incident_ref": str(i.number), "comment": summary_comment(summary)}}})
    return card(body, buttons)


def summary_comment(summary: IncidentSummary, limit: int = MAX_COMMENT_CHARS) -> str:
    """The summary as the incident comment "Post to the incident" adds: plain lines, values inert, no [n], each
    section's first ``COMMENT_LINES`` lines without what backs them, at most ``limit`` characters (whole lines; the
    last says what was left out)."""
    i = summary.detail.incident
    lines = [f"Incident summary by the SOC bot (fixed rules, not an AI model), computed {stamp(summary.as_of)}."]
    for section in sections(summary):  # each section's first lines, so every section has its place
        lines.append(f"{section.heading}:")
        lines += ["  " + _inert(line.parts) for line in section.lines[:COMMENT_LINES]]
        if len(section.lines) + section.more > COMMENT_LINES:
            lines.append(f"  and {len(section.lines) + section.more - COMMENT_LINES} more")
    lines += [f"Left out: {n}" for n in summary.left_out]
    kept: list[str] = []
    used = 0
    tail = f"(cut to fit a comment: ask the bot for \"summary {i.number}\" for the rest)"
    for line in lines:
        if used + len(line) + 1 > limit - len(tail) - 1:
            kept.append(tail)
            break
        kept.append(line)
        used += len(line) + 1
    return "\n".join(kept)


def summary_text(result: QueryResult, ref_for: RefFor, now: datetime | None = None) -> str:
    """The terminal's summary: the same sections, each line with its [n] (values printable, never cut short of
    ``MAX_VALUE_CHARS``)."""
    summary: IncidentSummary = result.records[0]
    i = summary.detail.incident
    lines = [f"Summary of incident #{i.number} {ref(ref_for, 'incident', str(i.number))}: "
             f"{one_line(i.title, MAX_TEXT_CHARS)}",
             f"{one_line(i.severity, 13)} · {one_line(i.status, 20)} · {one_line(i.owner or 'Unassigned', 60)} · "
             f"computed {stamp(summary.as_of)} by the bot's fixed rules"]
    lines += [f"Note: {one_line(w, 200)}" for w in result.metadata.warnings]
    lines += [f"Left out: {n}" for n in summary.left_out]
    for section in sections(summary):
        lines += ["", section.heading]
        for line in section.lines:
            cited = refs(line, ref_for)
            body = _said(line.parts) + (f" ({_said(line.detail)})" if line.detail else "")
            lines.append(f"  {cited} {body}" if cited else f"  {body}")
        if section.more:
            lines.append(f"  and {section.more} more")
    return "\n".join(lines)



def no_incident(result: QueryResult) -> str:
    """The terminal's words when the incident asked for is not there."""
    wanted = one_line(str(result.metadata.parameters.get("incident_ref", "")), 60)
    return f"No incident {wanted} in the last 90 days: check its number, or list incidents first and summarize one " \
        "by its [n]."


def no_incident_card(result: QueryResult) -> Element:
    return card([*header("No incident found", demo=result.metadata.is_demo), text(plain(no_incident(result), 300))])
