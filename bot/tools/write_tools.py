"""The write tools: how the model (and the commands and card buttons) *propose* a change to an incident.

None of these changes anything: each ``needs_confirmation``. A call is validated into an ``IncidentChange``
(``change_from_arguments``) and becomes a proposal that the analyst who asked confirms on a card
(``orchestrator.changes.confirmations``). The schemas are generated from the same enums the change is validated
with, so they cannot drift apart.
"""

from __future__ import annotations

import re
from typing import Any

from bot.sentinel.changes import (
    ChangeKind,
    Classification,
    ClassificationReason,
    IncidentChange,
    IncidentStatus,
    OnCallContact,
    Owner,
    make_change,
    owner_from_text,
)
from bot.sentinel.params import InvalidParameter, Severity
from bot.tools import asking
from bot.tools.tool import Parameter, Tool

# Words an analyst uses for themselves as the assignee.
SELF_WORDS = frozenset({"me", "myself", "self", "i"})
# The system prompt's rules say the rest (asked by the analyst, confirmed on the card); this is sent on every call.
_CONFIRM = "Only when the analyst asks; they confirm on a card."
_INCIDENT = Parameter(
    "incident_ref",
    "Its number (42) or reference ([2]).",
    required=True,
)
_EXAMPLE = '{"incident_ref": "42"}'

ASSIGN_INCIDENT = Tool(
    "assign_incident",
    "Propose assigning an incident to the analyst asking (assignee \"me\") or to a named user. " + _CONFIRM,
    (_INCIDENT, Parameter("assignee", "\"me\" for the analyst asking, or a user principal name "
                                      "(alice@contoso.com), or an Entra object id.", required=True)),
    "Preparing the assignment...",
    _EXAMPLE,
    change=ChangeKind.ASSIGN,
)

SET_INCIDENT_STATUS = Tool(
    "set_incident_status",
    "Propose changing an incident's status (New, Active, Closed). Closing needs a classification and a "
    "comment saying why. " + _CONFIRM,
    (
        _INCIDENT,
        Parameter("status", "", enum=tuple(s.value for s in IncidentStatus), required=True),
        Parameter("classification", "Required when closing.", enum=tuple(c.value for c in Classification)),
        Parameter("classification_reason", "When closing: TruePositive takes SuspiciousActivity, "
                  "BenignPositive SuspiciousButExpected, FalsePositive IncorrectAlertLogic or InaccurateData "
                  "(ask the analyst which).", enum=tuple(r.value for r in ClassificationReason)),
        Parameter("comment", "When closing: why, in the analyst's words (required)."),
    ),
    "Preparing the status change...",
    _EXAMPLE,
    change=ChangeKind.STATUS,
)

SET_INCIDENT_SEVERITY = Tool(
    "set_incident_severity",
    "Propose changing an incident's severity. " + _CONFIRM,
    (_INCIDENT, Parameter("severity", "The new severity.", enum=tuple(s.value for s in Severity), required=True)),
    "Preparing the severity change...",
    _EXAMPLE,
    change=ChangeKind.SEVERITY,
)

ADD_INCIDENT_COMMENT = Tool(
    "add_incident_comment",
    "Propose adding a comment to an incident, in the analyst's words. " + _CONFIRM,
    (_INCIDENT, Parameter("comment", "The comment text.", required=True)),
    "Preparing the comment...",
    _EXAMPLE,
    change=ChangeKind.COMMENT,
)

ESCALATE_INCIDENT = Tool(
    "escalate_incident",
    "Propose escalating an incident to whoever is on call now: @mentions them here, comments on the incident. "
    + _CONFIRM,
    (_INCIDENT, Parameter("assign", "Also assign it to them, if asked.", kind="boolean"),
     Parameter("reason", "What they are asked to do.")),
    "Finding who is on call...",
    _EXAMPLE,
    change=ChangeKind.ESCALATE,
)

WRITE_TOOLS: tuple[Tool, ...] = (ASSIGN_INCIDENT, SET_INCIDENT_STATUS, SET_INCIDENT_SEVERITY, ADD_INCIDENT_COMMENT,
                                 ESCALATE_INCIDENT)

_REFERENCE = re.compile(r"^\s*\[(\d{1,3})\]\s*$")
_NUMBER = re.compile(r"^\s*(?:incident\s*)?#?\s*(\d{1,10})\s*$", re.IGNORECASE)


def incident_ref(arguments: dict[str, Any]) -> tuple[str, int]:
    """("reference", n) for "[n]", ("number", N) for "42" / "#42" and "that incident"; InvalidParameter otherwise.

    A change needs an exact incident: title words, which the read tool accepts, are refused here.
    """
    raw = arguments.get("incident_ref")
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    text = str(raw or "")
    if match := _REFERENCE.match(text):
        return "reference", int(match.group(1))
    if match := _NUMBER.match(text):
        return "number", int(match.group(1))
    if asking.points_back(text):  # "that incident": the last one this conversation looked at
        return "number", asking.last_incident_number(text)
    raise InvalidParameter("incident_ref", "give the incident's number (e.g. \"42\") or its reference (e.g. "
                                           "\"[2]\"); a change needs an exact incident, not title words")


def is_self(assignee: object) -> bool:
    return str(assignee or "").strip().lower() in SELF_WORDS


def change_from_arguments(tool: Tool, arguments: dict[str, Any], incident_number: int,
                          requester: Owner, on_call: OnCallContact | None = None) -> IncidentChange:
    """The validated change a write tool call asks for; InvalidParameter says what to correct.

    ``on_call``: for an escalation, the analyst on shift now (the caller reads the roster)."""
    kind = tool.change
    if kind is None:
        raise InvalidParameter("tool", f"{tool.name[:60]!r} is not a write tool")
    if kind is ChangeKind.ESCALATE:
        return make_change(kind, incident_number, on_call=on_call, assign=_flag(arguments.get("assign")),
                           comment=arguments.get("reason"))
    if kind is ChangeKind.ASSIGN:
        assignee = str(arguments.get("assignee") or "").strip()
        if is_self(assignee):
            owner = requester
        elif not assignee:
            raise InvalidParameter("assignee", "say who: \"me\", a sign-in name (alice@contoso.com) or an object id")
        else:
            owner = owner_from_text(assignee)
        return make_change(kind, incident_number, owner=owner)
    if kind is ChangeKind.SEVERITY:
        return make_change(kind, incident_number, severity=arguments.get("severity"))
    if kind is ChangeKind.COMMENT:
        return make_change(kind, incident_number, comment=arguments.get("comment"))
    return make_change(kind, incident_number, status=arguments.get("status"),
                       classification=arguments.get("classification"),
                       classification_reason=arguments.get("classification_reason"),
                       classification_comment=arguments.get("comment"))


def _flag(value: object) -> bool:
    """A boolean argument as the model or a command sends it (true, "true", "yes")."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1")
    return value is True
