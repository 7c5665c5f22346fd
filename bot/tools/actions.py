"""The write tools: how the model (and the commands and card buttons) *propose* a change to an incident.

None of these changes anything. Each call is validated into an ``IncidentChange`` and becomes a
proposal that a named analyst confirms on a card (orchestrator.actions). The schemas are generated from
the same enums the change is validated with, so they cannot drift apart.
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
    Owner,
    make_change,
    owner_from_text,
)
from bot.sentinel.params import InvalidParameter, Severity
from bot.tools.definitions import Parameter, ToolDefinition

_INCIDENT = Parameter(
    "incident_ref",
    "The incident's number, e.g. \"42\", or its reference from this conversation, e.g. \"[2]\".",
    required=True,
)

WRITE_TOOLS: tuple[ToolDefinition, ...] = (
    ToolDefinition(
        "assign_incident",
        "Propose assigning an incident to the analyst asking (assignee \"me\") or to a named user. Only shows a "
        "confirmation card; the analyst must press Confirm. Only when the analyst asks for it in their message.",
        (_INCIDENT, Parameter("assignee", "\"me\" for the analyst asking, or a user principal name "
                                          "(alice@contoso.com), or an Entra object id.", required=True)),
        "Preparing the assignment...",
    ),
    ToolDefinition(
        "set_incident_status",
        "Propose changing an incident's status (New, Active, Closed). Closing needs a classification and a "
        "comment saying why. Only shows a confirmation card; the analyst must press Confirm. Only when the "
        "analyst asks for it in their message.",
        (
            _INCIDENT,
            Parameter("status", "The new status.", enum=tuple(s.value for s in IncidentStatus), required=True),
            Parameter("classification", "Required when closing.", enum=tuple(c.value for c in Classification)),
            Parameter("classification_reason", "When closing: TruePositive takes SuspiciousActivity, "
                      "BenignPositive SuspiciousButExpected, FalsePositive IncorrectAlertLogic (default) or "
                      "InaccurateData.", enum=tuple(r.value for r in ClassificationReason)),
            Parameter("comment", "When closing: why, in the analyst's words (required)."),
        ),
        "Preparing the status change...",
    ),
    ToolDefinition(
        "set_incident_severity",
        "Propose changing an incident's severity. Only shows a confirmation card; the analyst must press "
        "Confirm. Only when the analyst asks for it in their message.",
        (_INCIDENT, Parameter("severity", "The new severity.", enum=tuple(s.value for s in Severity),
                              required=True)),
        "Preparing the severity change...",
    ),
    ToolDefinition(
        "add_incident_comment",
        "Propose adding a comment to an incident, in the analyst's words. Only shows a confirmation card; the "
        "analyst must press Confirm. Only when the analyst asks for it in their message.",
        (_INCIDENT, Parameter("comment", "The comment text.", required=True)),
        "Preparing the comment...",
    ),
)

WRITE_TOOLS_BY_NAME: dict[str, ToolDefinition] = {tool.name: tool for tool in WRITE_TOOLS}
KIND_OF_TOOL: dict[str, ChangeKind] = {
    "assign_incident": ChangeKind.ASSIGN,
    "set_incident_status": ChangeKind.STATUS,
    "set_incident_severity": ChangeKind.SEVERITY,
    "add_incident_comment": ChangeKind.COMMENT,
}
_REFERENCE = re.compile(r"^\s*\[(\d{1,3})\]\s*$")
_NUMBER = re.compile(r"^\s*(?:incident\s*)?#?\s*(\d{1,10})\s*$", re.IGNORECASE)


def incident_ref(arguments: dict[str, Any]) -> tuple[str, int]:
    """("reference", n) for "[n]", ("number", N) for "42" / "#42"; InvalidParameter otherwise.

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
    raise InvalidParameter("incident_ref", "give the incident's number (e.g. \"42\") or its reference (e.g. "
                                           "\"[2]\"); a change needs an exact incident, not title words")


def change_from_arguments(tool: str, arguments: dict[str, Any], incident_number: int,
                          requester: Owner) -> IncidentChange:
    """The validated change a write tool call asks for; InvalidParameter says what to correct."""
    kind = KIND_OF_TOOL.get(tool)
    if kind is None:
        raise InvalidParameter("tool", f"{tool[:60]!r} is not a write tool")
    if kind is ChangeKind.ASSIGN:
        assignee = str(arguments.get("assignee") or "").strip()
        if assignee.lower() in ("me", "myself", "self", "i"):
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


# What an analyst's own words must contain before the model may propose a change of that kind. Instructions
# planted in incident data reach the model, never the analyst's message, so a read-only question cannot turn
# into a write proposal however the model is talked to. (The human Confirm click stays the real guarantee.)
# Verbs of change, not topics: "who owns [2]?", "what is its severity?" or "any closed incidents?" are
# questions and ask for nothing.
_INTENT_WORDS: dict[ChangeKind, re.Pattern[str]] = {
    ChangeKind.ASSIGN: re.compile(r"\b(assign|assigning|reassign|reassigning)\b|\btake\s+(it|this|that|over)\b|"
                                  r"\b(give|hand)\s+(it|this|that)\b|\bmake\s+(me|\S+@\S+)\s+(the\s+)?owner\b"),
    ChangeKind.STATUS: re.compile(r"\b(close|closing|resolve|resolving|reopen|reopening|re-open|activate|dismiss)\b|"
                                  r"\bmark\b[^.?!]*\bas\b|\b(set|change|update|move|put)\b[^.?!]*\b(status|new|active)\b|"
                                  r"\bstatus\b[^.?!]*\bto\b"),
    ChangeKind.SEVERITY: re.compile(r"\b(raise|lower|escalate|downgrade|upgrade|bump|increase|decrease|change|set|"
                                    r"make|update)\b[^.?!]*\b(severity|sev|high|medium|low|informational)\b|"
                                    r"\bseverity\b[^.?!]*\bto\b"),
    ChangeKind.COMMENT: re.compile(r"\b(add|write|post|leave|put|record)\b[^.?!]*\b(comment|note)\b|^\s*comment\b|"
                                   r"\bannotate\b|\bcomment\s+(on|that)\b"),
}


# "Did anyone close it?", "why did someone set the severity to high?": questions about what happened, not
# requests ("can you close [3]?" still is one).
_QUESTION = re.compile(r"^\s*(did|does|do|is|are|was|were|has|have|had|why|who|what|when|where|how|which)\b")


def asked_for(text: str) -> set[ChangeKind]:
    """The kinds of change the analyst's message could be asking for."""
    lowered = text.lower()
    if _QUESTION.match(lowered):
        return set()
    return {kind for kind, words in _INTENT_WORDS.items() if words.search(lowered)}


def assignees_named(text: str) -> set[str]:
    """Who the analyst's message names as a possible owner: "me", sign-in names and object ids."""
    lowered = text.lower()
    named = set(re.findall(r"[^\s@\"'<>()\[\],;:]+@[a-z0-9.-]+\.[a-z]{2,63}", lowered))
    named |= set(re.findall(r"\b[0-9a-f]{8}-[0-9a-f-]{4,55}\b", lowered))
    if re.search(r"\b(me|myself|mine|i'll take|i will take)\b|\btake\s+(it|this|that|over)\b", lowered):
        named.add("me")
    return named


def incidents_named(text: str) -> tuple[set[int], set[int]]:
    """The incident numbers ("#42", "incident 42", bare numbers) and references ("[2]") the message names."""
    numbers = {int(n) for n in re.findall(r"(?<![\w\[])#?(\d{1,10})(?![\w\]])", text)}
    references = {int(n) for n in re.findall(r"\[(\d{1,3})\]", text)}
    return numbers, references
