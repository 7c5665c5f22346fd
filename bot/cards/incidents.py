"""The incident table and the incident detail card."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from bot.cards.alerts import MAX_ALERT_DETAILS, alert_details, alert_table
from bot.cards.common import (
    BUTTON_COLUMN,
    REF_COLUMN,
    SEVERITIES,
    Element,
    RefFor,
    actions,
    age,
    breakable,
    card,
    cell,
    details_action,
    exact,
    fit,
    header,
    list_card,
    plain,
    ref,
    severity_and_details,
    severity_label,
    severity_text,
    subtle,
    table,
    text,
    warnings,
    when,
)
from bot.cards.filters import titled
from bot.cards.verbs import Verb
from bot.sentinel.changes import MAX_CLASSIFICATION_COMMENT_CHARS, MAX_COMMENT_CHARS
from bot.sentinel.models import EntityRef, Incident, IncidentDetail, QueryResult, count_label
from bot.sentinel.params import MAX_LIMIT

MAX_DETAIL_ALERTS = 15
MAX_DETAIL_ENTITIES = 20
MAX_OTHER_MATCHES = 5
MAX_ENTITY_CHARS = 1000  # a hash, a URL, a command line whole (the entity model keeps values to 1,000): they wrap
_TYPE_LABELS = {"ip": "IP", "url": "URL", "dns": "DNS", "filehash": "File hash", "cloud-application": "Cloud app",
                "azure-resource": "Azure resource", "registry-key": "Registry key"}
_SAFE_URL = re.compile(r"https://[^\s\"'<>\\^`{|}]{1,2040}")
# The close form's choices: the classification-and-reason pairs the Sentinel portal offers.
CLOSE_CLASSIFICATIONS = (
    ("True positive – suspicious activity", "TruePositive:SuspiciousActivity"),
    ("Benign positive – suspicious but expected", "BenignPositive:SuspiciousButExpected"),
    ("False positive – incorrect alert logic", "FalsePositive:IncorrectAlertLogic"),
    ("False positive – inaccurate data", "FalsePositive:InaccurateData"),
    ("Undetermined", "Undetermined"),
)
# Input ids of the change forms; Teams sends the values of the submitted form beside the button's data. Ids
# are unique in the card even across ShowCards: the reference renderer's validator reports "Duplicate Id"
# there, and Teams on iOS has been reported not to render cards whose ShowCards repeat an input id. So the
# closing comment (set_incident_status's "comment" argument) has its own id, apart from the comment form's.
CLASSIFICATION_INPUT = "classification"
CLOSE_COMMENT_INPUT = "classification_comment"
SEVERITY_INPUT = "severity"
COMMENT_INPUT = "comment"
ESCALATION_REASON_INPUT = "escalation_reason"
ESCALATION_ASSIGN_INPUT = "escalation_assign"


def incident_table(result: QueryResult, ref_for: RefFor, now: datetime) -> Element:
    """[n] | Incident (title; number, status, owner, age) | severity over the Details button."""
    parameters = result.metadata.parameters
    return list_card(result, lambda total: titled(count_label(total, "incident"), parameters), "incidents",
                     lambda shown: _incident_table(shown, ref_for, now), MAX_LIMIT)


def _incident_table(incidents: Sequence[Incident], ref_for: RefFor, now: datetime) -> Element:
    rows = [
        [
            cell(text(ref(ref_for, "incident", str(i.number)), weight="bolder")),
            cell(text(breakable(plain(i.title, 90))), subtle(incident_line(i, now))),
            severity_and_details(i.severity, i.number),
        ]
        for i in incidents
    ]
    return table(["", "Incident", ""], [REF_COLUMN, 1, BUTTON_COLUMN], rows)


def incident_detail(detail: IncidentDetail, ref_for: RefFor, now: datetime, *, demo: bool = False,
                    notes: Sequence[str] = (), changes: bool = False) -> Element:
    """Facts, description, alerts (each alert's own fields under them: ``alerts.alert_details``), entities, "Open
    in Sentinel" and the other incidents a title search matched.

    With ``changes``, a "Change" row under the description proposes changes to the incident (assign to me,
    close or reopen, severity, comment); each button only proposes, and the analyst confirms on the card that
    follows.
    """
    return fit(lambda limit: _detail(detail, ref_for, now, demo, notes, changes, limit), MAX_DETAIL_ALERTS)


def _detail(d: IncidentDetail, ref_for: RefFor, now: datetime, demo: bool, notes: Sequence[str], changes: bool,
            limit: int) -> Element:
    i = d.incident
    number = f"{ref(ref_for, 'incident', str(i.number))} Incident #{i.number}".strip()
    body = header(number, demo=demo)
    body.append(text(breakable(plain(i.title, 200)), weight="bolder", spacing="small"))
    body.append(severity_text(i.severity, " severity", spacing="small"))
    body += warnings(notes)
    body.append({"type": "FactSet", "facts": [{"title": t, "value": v} for t, v in _facts(d, now)]})
    if d.description:
        body.append(text(breakable(plain(d.description, 600)), spacing="medium"))
    if changes:
        body += _change_row(i)
    if d.alerts:
        shown = d.alerts[:limit]
        body.append(text(f"Alerts ({len(shown)} of {max(i.alert_count, len(d.alerts))})", weight="bolder",
                         separator=True, spacing="medium"))
        body.append(alert_table(shown, ref_for, now, with_entities=False))
        body += alert_details(shown, ref_for, now, min(limit, MAX_ALERT_DETAILS), d.description)
    if d.entities:
        body += _entities(d.entities, ref_for, limit * MAX_DETAIL_ENTITIES // MAX_DETAIL_ALERTS)
    if d.other_matches:
        body += _other_matches(d)
    return card(body, open_in_sentinel(i.url))


def open_in_sentinel(url: str) -> list[Element]:
    """The "Open in Sentinel" button, when the incident's URL is a plain https URL (else none)."""
    url = url.strip()
    return [{"type": "Action.OpenUrl", "title": "Open in Sentinel", "url": url}] if _SAFE_URL.fullmatch(url) else []


def _change_row(i: Incident) -> list[Element]:
    """ "Change": Assign to me, Close… (Reopen when closed), Severity…, Comment…, Escalate…; each a proposal."""
    number = str(i.number)
    row = [*assign_and_close(i),
           _form("Severity…", _severity_inputs(i.severity), "Propose severity", "set_incident_severity",
                 {"incident_ref": number}),
           _form("Comment…", _comment_inputs(), "Propose comment", "add_incident_comment", {"incident_ref": number}),
           escalate_form(i)]
    return [text("Change", weight="bolder", separator=True, spacing="medium"),
            subtle("Nothing changes until you confirm on the card that follows."),
            actions(*row, spacing="small")]


def assign_and_close(i: Incident) -> list[Element]:
    """Assign to me, and Close… (Reopen when closed): proposals confirmed on the card that follows."""
    number = str(i.number)
    closed = i.status.strip().lower() == "closed"
    return [_propose("Assign to me", "assign_incident", {"incident_ref": number, "assignee": "me"}),
            _propose("Reopen", "set_incident_status", {"incident_ref": number, "status": "Active"}) if closed
            else _form("Close…", _close_inputs(), "Propose closing", "set_incident_status",
                       {"incident_ref": number, "status": "Closed"})]


def escalate_form(i: Incident) -> Element:
    """Escalate…: to whoever is on call now (the roster decides), with what they are asked to do and, if ticked,
    the incident assigned to them; proposed like any change and confirmed on the card that follows."""
    inputs: list[Element] = [
        {"type": "Input.Text", "id": ESCALATION_REASON_INPUT, "label": "What should they do? (optional)",
         "isMultiline": True, "maxLength": MAX_COMMENT_CHARS, "placeholder": "e.g. contain the host now"},
        {"type": "Input.Toggle", "id": ESCALATION_ASSIGN_INPUT, "title": "Also assign it to them",
         "value": "false", "valueOn": "true", "valueOff": "false"}]
    return _form("Escalate…", inputs, "Propose escalation", "escalate_incident", {"incident_ref": str(i.number)})


def _propose(title: str, tool: str, arguments: dict[str, str]) -> Element:
    """A plain Submit (no messageBack text in the chat); a form's inputs merge into ``data`` at the top level."""
    return {"type": "Action.Submit", "title": title,
            "data": {"action": Verb.CHANGE_PROPOSE, "tool": tool, "arguments": arguments}}


def _form(title: str, inputs: list[Element], submit: str, tool: str, arguments: dict[str, str]) -> Element:
    """A ShowCard holding ``inputs`` and the button that proposes the change with them."""
    return {"type": "Action.ShowCard", "title": title,
            "card": {"type": "AdaptiveCard", "body": inputs, "actions": [_propose(submit, tool, arguments)]}}


def _close_inputs() -> list[Element]:
    return [
        {"type": "Input.ChoiceSet", "id": CLASSIFICATION_INPUT, "label": "Classification", "style": "compact",
         "isRequired": True, "errorMessage": "Choose a classification.", "placeholder": "Choose a classification",
         "choices": [{"title": title, "value": value} for title, value in CLOSE_CLASSIFICATIONS]},
        {"type": "Input.Text", "id": CLOSE_COMMENT_INPUT, "label": "Closing comment", "isMultiline": True,
         "isRequired": True, "maxLength": MAX_CLASSIFICATION_COMMENT_CHARS,
         "placeholder": "Why? e.g. pen test by the red team", "errorMessage": "Say why you are closing it."},
    ]


def _severity_inputs(current: str) -> list[Element]:
    """The other severities (all four when the current one is not a known severity); no default."""
    others = [s for s in SEVERITIES if s != current]
    label = f"New severity (now {severity_label(current)})" if current in SEVERITIES else "New severity"
    return [{"type": "Input.ChoiceSet", "id": SEVERITY_INPUT, "label": label, "style": "compact",
             "isRequired": True, "errorMessage": "Choose a severity.", "placeholder": "Choose a severity",
             "choices": [{"title": s, "value": s} for s in others]}]


def _comment_inputs() -> list[Element]:
    return [{"type": "Input.Text", "id": COMMENT_INPUT, "label": "Comment", "isMultiline": True, "isRequired": True,
             "maxLength": MAX_COMMENT_CHARS, "placeholder": "What to add to the incident's comments",
             "errorMessage": "Write the comment."}]


def _facts(d: IncidentDetail, now: datetime) -> list[tuple[str, str]]:
    i = d.incident
    facts = [("Status", plain(i.status, 30)), ("Owner", breakable(plain(i.owner or "Unassigned", 60))),
             ("Created", when(i.created, now)), ("Last update", when(i.last_modified, now))]
    if d.closed:
        facts.append(("Closed", when(d.closed, now)))
    if i.classification:
        reason = f" · {breakable(plain(d.classification_reason, 40))}" if d.classification_reason else ""
        facts.append(("Classification", plain(i.classification, 40) + reason))
    if d.classification_comment:
        facts.append(("Closing comment", breakable(plain(d.classification_comment, 200))))
    if i.tactics:
        facts.append(("Tactics", plain(", ".join(i.tactics), 160)))
    if i.products:
        facts.append(("Products", breakable(plain(", ".join(i.products), 160))))
    facts.append(("Comments", str(d.comment_count)))
    if d.labels:
        facts.append(("Labels", breakable(plain(", ".join(d.labels), 120))))
    return facts


def _entities(entities: Sequence[EntityRef], ref_for: RefFor, limit: int) -> list[Element]:
    """Entities grouped by type: the type once, then "[n]" and the value per entity, the value exact (``exact``:
    what is copied is the record's value) and wrapped by the table cell, never cut short of MAX_ENTITY_CHARS."""
    groups: dict[str, list[EntityRef]] = {}
    for entity in entities[:limit]:
        groups.setdefault(entity.type, []).append(entity)
    rows = []
    for kind, members in groups.items():
        for index, entity in enumerate(members):
            title = _TYPE_LABELS.get(kind) or plain(kind, 24).capitalize()
            entity_ref = ref(ref_for, "entity", f"{entity.type}:{entity.value}")
            value = [exact(entity.value, MAX_ENTITY_CHARS, size="small")]
            if entity.identifiers:
                value.append(subtle(_identifier_line(entity), size="small", spacing="none"))
            rows.append([cell(text(title if index == 0 else "", weight="bolder", size="small")),
                         cell(text(entity_ref, size="small")), cell(*value)])
    shown = min(len(entities), limit)
    heading = f"Entities ({shown} of {len(entities)})" if shown < len(entities) else f"Entities ({shown})"
    return [text(heading, weight="bolder", separator=True, spacing="medium"),
            table(["Type", "", "Value"], ["96px", REF_COLUMN, 1], rows)]


def _identifier_line(entity: EntityRef) -> str:
    """The entity's other identifiers, inert: "Sid S-1-5-21-1004336348-… · AadUserId 0f6c2b1e-…" (the first few, each
    whole up to MAX_ENTITY_CHARS: an identifier is copied, never cut)."""
    return " · ".join(f"{plain(name, 24)} {breakable(plain(value, MAX_ENTITY_CHARS))}" for name, value in
                      entity.identifiers[:MAX_IDENTIFIERS_SHOWN])


MAX_IDENTIFIERS_SHOWN = 4


def _other_matches(d: IncidentDetail) -> list[Element]:
    matches = d.other_matches[:MAX_OTHER_MATCHES]
    listed = "; ".join(f"#{m.number} {breakable(plain(m.title, 60))}" for m in matches)
    if len(d.other_matches) > len(matches):
        listed += f"; and {len(d.other_matches) - len(matches)} more"
    return [
        text(f"The title search also matched: {listed}", size="small", separator=True, spacing="medium"),
        actions(*(details_action(m.number, f"#{m.number}") for m in matches)),
    ]


def incident_line(i: Incident, now: datetime) -> str:
    """ "#14431 · Active · Dana Whitfield · 14h ago" """
    status = plain(f"{i.status} ({i.classification})" if i.classification else i.status, 40)
    return f"#{i.number} · {status} · {breakable(plain(i.owner or 'Unassigned', 60))} · {age(i.created, now)}"
