"""A rule-based stand-in for the language model, served by the fake Chat Completions server.

It speaks the Chat Completions protocol at the process boundary, as a real model does: it reads the analyst's last
message, the system prompt's numbered references ("[3] incident #14666", "[9] host WS-FIN-023 (12 alerts)") and
the tool results of this turn, and answers with tool calls or with text. It chooses tools by what the question
says (entities by their shape: UPN, host, IP, hash, URL, domain; time windows; severities; [n] references), and
answers only by phrasing the rows its tools returned, so every number it says is grounded. What it cannot read it
says plainly: what it understood, and what to try. It is deterministic: the same request gets the same answer.

Used by end-to-end tests and to try the bot without a model:

    python -m tests.support.rule_model --port 8011
    OPENAI_BASE_URL=http://127.0.0.1:8011/v1 ./run

``misbehaving(...)`` (or ``--misbehave``) makes it send an unknown tool, malformed JSON or invalid values first, as
real models sometimes do, to test that the analyst still gets an answer.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support import openai_fake as oa

Call = tuple[str, dict[str, Any]]

# ---------------------------------------------------------------------------------------------------------
# What the question says: windows, severities, entities by their shape, references


_WINDOWS = [
    (r"\b(?:last|past|this)\s+hour\b|\b1\s*h(?:our)?\b", "last_1h"),
    (r"\b3\s*d(?:ays?)?\b|three days|\b(?:last|past) (?:2|two) days\b", "last_3d"),
    (r"\bweek\b|\b7\s*d(?:ays?)?\b|seven days", "last_7d"),
    (r"\b14\s*d(?:ays?)?\b|two weeks|fortnight", "last_14d"),
    (r"\bmonth\b|\b30\s*d(?:ays?)?\b|thirty days", "last_30d"),
    (r"overnight|today|\b24\s*h(?:ours?|rs?)?\b|yesterday|last day|\bday\b", "last_24h"),
]
_WINDOW_WORDS = {"last_1h": "the last hour", "last_24h": "the last 24 hours", "last_3d": "the last 3 days",
                 "last_7d": "the last 7 days", "last_14d": "the last 14 days", "last_30d": "the last 30 days"}
_HUNT_WINDOWS = {"last_1h": "1h", "last_24h": "24h", "last_3d": "3d", "last_7d": "7d", "last_14d": "14d",
                 "last_30d": "30d"}
_SEVERITY = [(r"\b(?:high|critical)\b", "High"), (r"\bmedium\b", "Medium"), (r"\blow\b", "Low"),
             (r"\binformational\b", "Informational")]

# Entities by their shape, most specific first; each match's text is taken out before the next shape is tried.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("url", re.compile(r"\bhttps?://[^\s<>\"'`]+", re.IGNORECASE)),
    ("account", re.compile(rf"\b[A-Za-z0-9._%+'-]{{1,64}}@(?:{_LABEL}\.)+[A-Za-z]{{2,}}\b")),
    ("ip", re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w.])")),
    ("hash", re.compile(r"(?<![0-9A-Za-z])(?:[0-9a-fA-F]{64}|[0-9a-fA-F]{40}|[0-9a-fA-F]{32})(?![0-9A-Za-z])")),
    ("domain", re.compile(rf"(?<![\w@.-])(?:{_LABEL}\.)+[A-Za-z]{{2,12}}(?![\w.-])")),
    ("host", re.compile(r"(?<![\w@.-])[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+(?![\w@-])")),
)
_FILE_ENDINGS = ("exe", "dll", "ps1", "bat", "cmd", "js", "vbs", "zip", "docx", "xlsx", "pdf", "html", "lnk", "iso")
# "user lena.fischer", "host fin-db-01": a bare name its kind is said for.
_NAMED = re.compile(r"\b(account|user|host|device|machine|computer)\s+([A-Za-z0-9][A-Za-z0-9._\\-]{1,63})\b",
                    re.IGNORECASE)
_NAMED_KINDS = {"account": "account", "user": "account", "host": "host", "device": "host", "machine": "host",
                "computer": "host"}
_NOT_NAMES = frozenset({"is", "was", "has", "have", "that", "this", "with", "in", "on", "the", "a", "an", "and",
                        "or", "compromised", "activity", "accounts", "hosts", "users", "devices", "of", "for"})

# Words the rules look for: a misspelt one ("incidnets", "compromized") is read as the nearest of them.
_VOCABULARY = ("incidents", "incident", "alerts", "alert", "trend", "volume", "unusual", "entities", "hosts",
               "accounts", "users", "targeted", "investigate", "compromised", "suspicious", "malicious", "sign-ins",
               "signins", "logins", "logons", "failed", "failures", "processes", "emails", "phishing", "clicks",
               "summary", "summarise", "summarize", "overview", "escalate", "assign", "reopen", "severity", "watch",
               "notify", "on-call", "shift", "unassigned", "assigned", "hunt", "directory", "changes", "tell", "more",
               "about", "details", "detail", "explain", "overnight", "week", "month", "today", "yesterday", "hours",
               "days", "high", "medium", "informational", "critical", "show", "which", "what", "anyone", "owner")


def corrected(text: str) -> str:
    """The question in lower case, each misspelt word of five letters or more replaced by the nearest word the
    rules know ("incidnets" -> "incidents"); entities (anything with a digit, "@", "." or "/") are left alone."""
    def fix(match: re.Match[str]) -> str:
        word = match.group(0)
        if len(word) < 5 or word in _VOCABULARY or re.search(r"[\d@./\\]", word):
            return word
        close = difflib.get_close_matches(word, _VOCABULARY, n=1, cutoff=0.85)  # "match" stays, not "watch"
        return close[0] if close else word
    return re.sub(r"[\w@./\\-]+", fix, text.lower())


def entities_in(question: str) -> list[tuple[str, str]]:
    """(kind, value) of each entity the question names, as typed, in the order found."""
    rest, found = question, []
    for kind, pattern in _SHAPES:
        for match in pattern.finditer(rest):
            value = match.group(0).rstrip(".,;:!?)")
            if kind == "domain" and (value.rsplit(".", 1)[-1].lower() in _FILE_ENDINGS or "[" in value):
                continue
            if kind == "host" and not re.search(r"\d", value):
                continue  # "high-severity", "sign-ins": words, not machines
            found.append((kind, value))
        rest = pattern.sub(" ", rest)
    for match in _NAMED.finditer(rest):
        if match.group(2).lower() not in _NOT_NAMES:
            found.append((_NAMED_KINDS[match.group(1).lower()], match.group(2)))
    return found


@dataclass(frozen=True)
class Reference:
    """One "[n]" as the system prompt lists it: an incident (its number), an alert (its id's start), or an entity
    (its type and value; ``cut`` when the prompt shows the value shortened)."""

    n: int
    kind: str  # incident | alert | entity
    key: str  # the incident number, the alert id's start, or the entity's value
    entity_type: str = ""
    cut: bool = False


_REFERENCE_LINE = re.compile(r"^\[(\d+)\] (.+)$", re.MULTILINE)
_ENTITY_NOTE = re.compile(r" \((?:\d+ alerts?|assessed [\w ]+)\)$")


def references(system: str) -> dict[int, Reference]:
    """The numbered references the system prompt lists, by number."""
    found: dict[int, Reference] = {}
    for match in _REFERENCE_LINE.finditer(system):
        n, label = int(match.group(1)), match.group(2).strip()
        if label.startswith("incident #"):
            found[n] = Reference(n, "incident", label.removeprefix("incident #").split()[0])
        elif label.startswith("alert "):
            found[n] = Reference(n, "alert", label.removeprefix("alert ").split()[0])
        elif " " in label:
            entity_type, value = _ENTITY_NOTE.sub("", label).split(" ", 1)
            found[n] = Reference(n, "entity", value.rstrip("…"), entity_type, value.endswith("…"))
    return found


def last_incident(system: str) -> str | None:
    match = re.search(r'"that incident" most likely means incident (\d+)', system)
    return match.group(1) if match else None


@dataclass
class Question:
    """What the stand-in read in the analyst's message."""

    typed: str
    text: str  # lower case, misspellings corrected
    window: str | None
    severity: str | None
    entities: list[tuple[str, str]]
    cited: list[int]
    understood: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, typed: str) -> Question:
        text = corrected(typed)
        window = next((w for pattern, w in _WINDOWS if re.search(pattern, text)), None)
        severity = next((s for pattern, s in _SEVERITY if re.search(pattern, text)), None)
        cited = [int(n) for n in re.findall(r"\[(\d{1,6})\]", text)]
        entities = entities_in(re.sub(r"\[\d{1,6}\]", " ", typed))
        question = cls(typed, text, window, severity, entities, cited)
        question.understood += [_WINDOW_WORDS[window]] if window else []
        question.understood += [f"{severity} and above"] if severity else []
        question.understood += [f"{kind} {value}" for kind, value in entities]
        question.understood += [f"[{n}]" for n in cited]
        return question

    def says(self, pattern: str) -> bool:
        return bool(re.search(pattern, self.text))

    def common(self) -> dict[str, Any]:
        return {k: v for k, v in (("time_window", self.window), ("min_severity", self.severity)) if v}


# ---------------------------------------------------------------------------------------------------------
# Choosing tools


_ON_CALL = r"on[ -]?call|on shift|on duty"
# "is anyone on it?", "who owns it?" alone: about the incident the conversation is on, not a new list.
_OWNER_OF_IT = (r"^\W*(?:is\s+)?(?:any(?:one|body)|someone|who(?:'s| is)?)\s+(?:on|working|owns|assigned)\b"
                r".*\b(?:it|that)\b")
_WATCH = r"\bwatch\b|\bnotify me\b|\blet me know when\b|\bsubscribe\b|\bkeep an eye\b|\bping me\b"
_INVESTIGATE = (r"compromised|investigate|suspicious|malicious|\bsafe\b|look into|dig into|what did|activity|"
                r"\bcheck\b|risky|\bbad\b|what about|tell me (?:more )?about|more on|details?|explain|who is|"
                r"what is|evidence")
_SUMMARY = r"summar|overview|brief me|catch me up|what happened|what's going on|what is going on|status report"
_WRITE_WORDS = r"\b(?:assign|take (?:it|that|this)|raise|lower|reopen|close|resolve|comment|escalate)\b"


def plan(question: Question, system: str, offered: set[str]) -> list[Call] | str:
    """The tool calls the question asks for, or the line to say when it asks for none the stand-in can read."""
    refs = references(system)
    for step in (_plan_on_call, _plan_change, _plan_watch, _plan_incident_summary, _plan_reference, _plan_entity,
                 _plan_hunt, _plan_summary, _plan_lists):
        chosen = step(question, system, refs, offered)
        if chosen:
            return chosen
    return not_understood(question)


def _plan_incident_summary(question: Question, system: str, refs: dict[int, Reference], offered: set[str]
                           ) -> list[Call] | None:
    """"Summarize incident 42", "summary of [2]", "summarise that incident": one incident's summary."""
    if not question.says(r"\bsummar(?:y|i[sz]e)\b") or "summarize_incident" not in offered:
        return None
    number = _target(question, system, refs)
    return [("summarize_incident", {"incident_ref": number})] if number else None


def _plan_on_call(question: Question, system: str, refs: dict[int, Reference], offered: set[str]) -> list[Call]:
    if question.says(_ON_CALL) and not question.says(r"\bescalat") and "get_on_call" in offered:
        return [("get_on_call", {})]
    return []


def _target(question: Question, system: str, refs: dict[int, Reference]) -> str | None:
    """The incident a change or a follow-up is about: "#42", "incident 42", an incident's [n], or "that/it"."""
    named = re.search(r"(?:incident\s*#?|#)(\d{2,})", question.text)
    if named:
        return named.group(1)
    for n in question.cited:
        if n in refs and refs[n].kind == "incident":
            return refs[n].key
    if question.cited:
        return f"[{question.cited[0]}]"  # not listed in the prompt: the bot resolves it, or says what it is
    if re.search(r"\b(?:that|this|the same) incident\b|\b(?:it|that one)\b", question.text):
        return last_incident(system)
    return None


def _plan_change(question: Question, system: str, refs: dict[int, Reference], offered: set[str]
                 ) -> list[Call] | str | None:
    """Incident changes asked for in plain words: the write tools only propose; the analyst confirms."""
    asks = question.says(r"\?$") and not question.says(r"^(?:can|could|would|please)")  # "is it closed?"
    if not question.says(_WRITE_WORDS) or asks:
        return None
    number = _target(question, system, refs)
    if not number:
        return None
    if "assign_incident" not in offered:
        return ("I can only read here: incident changes (assign, close, escalate...) are off, or not yours to make "
                "in this conversation. Change it in the Sentinel portal, or see who is on call: \"who is on call\".")
    text = question.text
    if re.search(r"\bescalat", text):
        reason = question.typed.split(":", 1)[1].strip() if ":" in question.typed else ""
        arguments: dict[str, Any] = {"incident_ref": number, "assign": bool(re.search(r"\bassign", text))}
        return [("escalate_incident", arguments | ({"reason": reason} if reason else {}))]
    if re.search(r"\bassign\b.*\b(me|myself)\b|\btake (it|that|this)\b", text):
        return [("assign_incident", {"incident_ref": number, "assignee": "me"})]
    severity = re.search(r"\b(raise|lower|set|change)\b.*\b(high|medium|low|informational)\b", text)
    if severity:
        return [("set_incident_severity", {"incident_ref": number, "severity": severity.group(2).title()})]
    if re.search(r"\breopen\b", text):
        return [("set_incident_status", {"incident_ref": number, "status": "Active"})]
    if re.search(r"\b(?:close|resolve)\b", text):
        return _closing(question, number)
    if re.search(r"\bcomment\b", text) and ":" in question.typed:
        return [("add_incident_comment", {"incident_ref": number,
                                          "comment": question.typed.split(":", 1)[1].strip()})]
    return None


_CLASSIFICATIONS = (("false positive", "FalsePositive"), ("true positive", "TruePositive"),
                    ("benign", "BenignPositive"), ("undetermined", "Undetermined"))


def _closing(question: Question, number: str) -> list[Call] | str:
    """"close [2], false positive: pen test": a classification and the analyst's reason, or the question for them."""
    classification = next((value for words, value in _CLASSIFICATIONS if words in question.text), None)
    reason = question.typed.split(":", 1)[1].strip() if ":" in question.typed else ""
    if classification is None or not reason:
        return ("Closing needs a classification (false positive, true positive, benign positive or undetermined) "
                "and your reason after a colon, for example: close it as a false positive, inaccurate data: pen test.")
    why = next((value for words, value in _FALSE_POSITIVE_REASONS if words in question.text), None)
    if classification == "FalsePositive" and why is None:
        return ("A false positive is closed with Sentinel's reason for it: incorrect alert logic or inaccurate data. "
                "Which is it? For example: close it as a false positive, inaccurate data: pen test.")
    return [("set_incident_status", {"incident_ref": number, "status": "Closed", "classification": classification,
                                     **({"classification_reason": why} if why else {}), "comment": reason})]


_FALSE_POSITIVE_REASONS = (("incorrect alert logic", "IncorrectAlertLogic"), ("alert logic", "IncorrectAlertLogic"),
                           ("inaccurate data", "InaccurateData"))


def _plan_watch(question: Question, system: str, refs: dict[int, Reference], offered: set[str]) -> str | None:
    if not question.says(_WATCH):
        return None
    severity = f" {question.severity.lower()}" if question.severity else " high"
    return (f"Watches are set with a command, not through me: type \"watch{severity}\" (any filter of \"incidents\" "
            "works, such as \"watch medium open\") and new matching incidents are posted in this conversation; "
            "\"watches\" lists them, \"unwatch\" stops them.")


def _plan_reference(question: Question, system: str, refs: dict[int, Reference], offered: set[str]
                    ) -> list[Call] | str | None:
    """A follow-up on an [n] of any kind, on "that incident", or on an incident by number."""
    if question.says(_OWNER_OF_IT) or re.search(r"\bthat incident\b", question.text):
        number = last_incident(system)
        return [("get_incident_detail", {"incident_ref": number})] if number else None
    if question.cited:
        n = question.cited[0]
        reference = refs.get(n)
        if reference is None:  # older than the prompt's list: the bot resolves an incident's [n], or says what it is
            return [("get_incident_detail", {"incident_ref": f"[{n}]"})]
        if reference.kind == "incident":
            return _about_incident(question, reference.key)
        if reference.kind == "alert":
            return [("query_alerts", {"time_window": question.window or "last_24h", "limit": 100,
                                      "sort": "newest"})]
        return _about_entity(question, reference.entity_type, reference.key, reference.cut, n)
    named = re.search(r"(?:incident\s*#?|#)(\d{2,})", question.text)
    return _about_incident(question, named.group(1)) if named else None


def _about_incident(question: Question, number: str) -> list[Call]:
    return [("get_incident_detail", {"incident_ref": number})]


_INVESTIGATED = {"account": "account", "host": "host", "ip": "ip", "hash": "hash", "filehash": "hash", "url": "url",
                 "domain": "domain", "dns": "domain"}


def _about_entity(question: Question, entity_type: str, value: str, cut: bool, n: int | None = None
                  ) -> list[Call] | str:
    if cut:
        return (f"[{n}] is a {entity_type} whose value I only see shortened, so I cannot pass it to a query whole. "
                f"Type investigate [{n}]: the command looks it up by its number.")
    window = question.window or "last_7d"
    if entity_type in _INVESTIGATED:
        return [("investigate_entity", {"entity": value, "entity_type": _INVESTIGATED[entity_type],
                                        "time_window": window})]
    return [("get_top_entities", {"entity": value, "time_window": question.window or "last_30d"})]


def _plan_entity(question: Question, system: str, refs: dict[int, Reference], offered: set[str]
                 ) -> list[Call] | str | None:
    """An entity named by its shape: its alerts or incidents when the question asks for a list, its sign-ins or
    processes as a hunt, else an investigation."""
    if not question.entities:
        if question.says(r"compromised|investigat|suspicious|malicious") and not question.cited:
            read = f"I read {', '.join(question.understood)} and" if question.understood else "I read"
            return (f"{read} that you want an investigation, but not of what: name the account by its UPN "
                    "(name@domain), the host by its name, or the IP, hash or URL, or give its [n] from a list.")
        return None
    kind, value = question.entities[0]
    if _hunt_for(question) and not question.says(r"\binvestigat"):
        return None  # "failed sign-ins for lena@..." is a hunt, filtered to the entity
    if question.says(r"\balerts?\b") and not question.says(_INVESTIGATE):
        return [("query_alerts", {"entity": value, "time_window": question.window or "last_7d"}
                 | ({"min_severity": question.severity} if question.severity else {}))]
    if question.says(r"\bincidents?\b") and not question.says(_INVESTIGATE):
        return [("query_incidents", {"entity": value, "time_window": question.window or "last_30d"}
                 | ({"min_severity": question.severity} if question.severity else {}))]
    return _about_entity(question, kind, value, False)


@dataclass(frozen=True)
class Hunt:
    """A question a hunt answers: the words that ask it, its table and filters, and the entity column per kind."""

    words: str
    table: str
    where: tuple[tuple[str, str, str], ...] = ()
    by: str = ""  # summarised by this column when no entity is named
    columns: dict[str, str] = field(default_factory=dict)  # entity kind -> the column it is in


_HUNTS = (
    Hunt(r"fail\w*\s+(?:sign[- ]?ins?|log[- ]?ins?|logons?|authentications?)|sign[- ]?in failures|"
         r"(?:sign[- ]?in|log[- ]?in|logon) (?:failures|errors)|failures",
         "SigninLogs", (("ResultType", "!=", "0"),), "UserPrincipalName",
         {"account": "UserPrincipalName", "ip": "IPAddress"}),
    Hunt(r"sign[- ]?ins?\b|log[- ]?ins?\b", "SigninLogs", (), "UserPrincipalName",
         {"account": "UserPrincipalName", "ip": "IPAddress"}),
    Hunt(r"logons?\b", "DeviceLogonEvents", (), "DeviceName",
         {"host": "DeviceName", "account": "AccountName", "ip": "RemoteIP"}),
    Hunt(r"process(?:es)?\b|command lines?", "DeviceProcessEvents", (), "DeviceName",
         {"host": "DeviceName", "hash": "SHA256"}),
    Hunt(r"network connections?|connections? (?:to|from)", "DeviceNetworkEvents", (), "RemoteIP",
         {"host": "DeviceName", "ip": "RemoteIP", "url": "RemoteUrl", "domain": "RemoteUrl"}),
    Hunt(r"phish\w*|malicious e-?mails?|e-?mails? with (?:malware|phish)", "EmailEvents",
         (("ThreatTypes", "!=", ""),), "RecipientEmailAddress", {"account": "RecipientEmailAddress"}),
    Hunt(r"e-?mails?\b", "EmailEvents", (), "RecipientEmailAddress", {"account": "RecipientEmailAddress"}),
    Hunt(r"url clicks?|clicks?\b|clicked", "UrlClickEvents", (), "AccountUpn", {"account": "AccountUpn",
                                                                                 "url": "Url"}),
    Hunt(r"directory changes|audit logs?|role changes|password resets?", "AuditLogs", (), "OperationName", {}),
    Hunt(r"risky users|risk(?:y)? sign[- ]?ins|risk detections", "AADUserRiskEvents", (), "UserPrincipalName",
         {"account": "UserPrincipalName", "ip": "IpAddress"}),
)


def _hunt_for(question: Question) -> Hunt | None:
    return next((hunt for hunt in _HUNTS if question.says(hunt.words)), None)


def _plan_hunt(question: Question, system: str, refs: dict[int, Reference], offered: set[str]) -> list[Call] | None:
    hunt = _hunt_for(question)
    if hunt is None or "hunt" not in offered:
        return None
    arguments: dict[str, Any] = {"table": hunt.table, "time_window": _HUNT_WINDOWS[question.window or "last_24h"],
                                 "where": [list(w) for w in hunt.where]}
    named = [(hunt.columns[kind], value) for kind, value in question.entities if kind in hunt.columns]
    if named:
        arguments["where"].append([named[0][0], "==", named[0][1]])
        arguments["take"] = 20
    elif hunt.by:
        arguments |= {"summarize": ["count()"], "by": [hunt.by], "sort": "Count desc", "take": 20}
    if not arguments["where"]:
        del arguments["where"]
    return [("hunt", arguments)]


def _plan_summary(question: Question, system: str, refs: dict[int, Reference], offered: set[str]
                  ) -> list[Call] | None:
    if not question.says(_SUMMARY):
        return None
    window = question.window or "last_24h"
    severity = {"min_severity": question.severity} if question.severity else {}
    return [("query_incidents", {"time_window": window} | severity),
            ("get_alert_trend", {"time_window": window} | severity),
            ("get_top_entities", {"time_window": window} | severity)]


def _plan_lists(question: Question, system: str, refs: dict[int, Reference], offered: set[str]) -> list[Call]:
    common = question.common()
    calls: list[Call] = []
    if question.says(r"trend|volume|unusual|spike|over time|how many alerts"):
        calls.append(("get_alert_trend", dict(common)))
    if question.says(r"\bhosts?\b|\busers?\b|\baccounts?\b|entit|\bips?\b|addresses|targeted|hit most|machines"):
        calls.append(("get_top_entities", dict(common)))
    if question.says(r"\balerts?\b|detections?") and not calls:
        calls.append(("query_alerts", dict(common)))
    if question.says(r"incidents?|queue|came in|overnight|anyone on it|\bmine\b|\bmy\b|unassigned") or (
            not calls and question.severity):
        # "what is high this week?": a severity and nothing else to look at means incidents
        calls.append(("query_incidents", dict(common) | _queue(question)))
    return [(tool, arguments | _search(question, tool)) for tool, arguments in calls]


_SEARCH = re.compile(r"\b(?:search(?:ing)? for|matching|match|mentioning|containing|about|with)\s+[\"']?"
                     r"(?!the\b|a\b|an\b|any\b|high\b|medium\b|low\b)([A-Za-z][\w.-]{2,40})")


def _search(question: Question, tool: str) -> dict[str, Any]:
    """"incidents about qakbot": the words searched for in titles and descriptions (30 days unless said)."""
    found = _SEARCH.search(question.typed)
    if tool not in ("query_incidents", "query_alerts") or found is None:
        return {}
    return {"search": found.group(1)} | ({} if question.window else {"time_window": "last_30d"})


def _queue(question: Question) -> dict[str, Any]:
    """"open", "mine", "unassigned": the incident filters a question names."""
    filters: dict[str, Any] = {}
    if question.says(r"\bunassigned\b|\bnobody\b|\bno owner\b"):
        filters["owner"] = "unassigned"
    elif question.says(r"\bmine\b|\bmy\b|assigned to me"):
        filters["owner"] = "me"
    if question.says(r"\bopen\b|\bunresolved\b"):
        filters["status"] = "open"
    elif question.says(r"\bclosed\b"):
        filters["status"] = "Closed"
    if filters and "time_window" not in filters and not question.window:
        filters["time_window"] = "last_30d"
    return filters


def not_understood(question: Question) -> str:
    """The honest line: what was read, and what to ask instead (no identifier or quoted name the fact check would
    take for a claim)."""
    read = f"I read {', '.join(question.understood)}, but not" if question.understood else "I could not tell"
    return (f"{read} what to look up in your message. I can list incidents or alerts for a window and severity "
            "(for example: which high incidents came in this week?), explain an incident by its number or its [n], "
            "show the alert trend or the most targeted hosts and accounts, investigate an account, host, IP, hash "
            "or URL by its value (is this UPN compromised?), hunt failed sign-ins, or say who is on call. Type help "
            "for the commands, which work without me.")


# ---------------------------------------------------------------------------------------------------------
# Answering from the rows


@dataclass(frozen=True)
class Result:
    """One tool result as the model reads it: its first line, its table rows by header, its other lines."""

    tool: str
    head: str
    lines: tuple[str, ...]

    @classmethod
    def of(cls, message: dict[str, Any]) -> Result:
        lines = str(message.get("content", "")).splitlines()
        head = lines[0] if lines else ""
        return cls(head.split("(", 1)[0], head, tuple(lines))

    @property
    def failed(self) -> bool:
        return "-> ERROR" in self.head

    @property
    def empty(self) -> bool:
        return "-> no rows" in self.head

    def rows(self) -> list[dict[str, str]]:
        """Each table row as {column: cell}, the columns from the header line above it ("ref|severity|...")."""
        header: list[str] = []
        rows = []
        for line in self.lines[1:]:
            if line.startswith("ref|"):
                header = [c.split(" (")[0] for c in line.split("|")]
            elif header and line.count("|") == len(header) - 1 and re.match(r"^(?:E\d+ )?\[\d+\]|^-\|", line):
                rows.append(dict(zip(header, line.split("|"), strict=True)))
        return rows


def answer(question: Question, results: list[Result]) -> str:
    """Every result phrased from its rows: a list's count and first rows, an incident, an investigation's
    assessment, a hunt's top rows, the roster; a failure or an empty result said as such."""
    if not results:
        return "I have no query results to go on for that."
    worked = any(not r.failed for r in results)
    parts = []
    for result in results:
        if result.failed:
            if worked and any(slip in result.head for slip in _SLIPS):
                continue  # a call of its own it corrected with a later one
            parts.append("That query failed: " + result.head.split("ERROR", 1)[1].split(":", 1)[-1].strip())
        elif result.empty:
            parts.append(_none(result))
        else:
            parts.append(_PHRASES.get(result.tool, _generic)(question, result))
    return " ".join(dict.fromkeys(p for p in parts if p)) or "The queries returned nothing I can summarise."


_SLIPS = ("unknown_tool", "not valid JSON", "not an incident", "is not one of")


def _none(result: Result) -> str:
    arguments = result.head.split("(", 1)[1].split(") ->", 1)[0] if "(" in result.head else ""
    when = f" in {_window_of(result.head)}" if "time_window=" in arguments else ""
    severity = re.search(r"min_severity=(\w+)", arguments)
    at = f" at {severity.group(1)} or above" if severity and severity.group(1) != "Informational" else ""
    wider = "a wider time window" + (" or a lower minimum severity" if at else "")
    what = {"query_incidents": "incidents", "query_alerts": "alerts", "get_top_entities": "entities",
            "hunt": "rows", "get_alert_trend": "alerts"}.get(result.tool, "rows")
    return f"None: no {what}{when}{at} ({result.tool}). Try {wider}."


def _count(head: str, noun: str) -> str:
    """ "1 incident", "20 of 93 high open incidents" from the result's first line: the total named by what the query
    counted (its minimum severity and status), as the fact check reads a count."""
    match = re.search(r"-> (\d+)(?: of (\d+))? ", head)
    if not match:
        return f"Some {noun}s"
    total = int(match.group(2) or match.group(1))
    shown = f"{match.group(1)} of {total}" if match.group(2) else str(total)
    severity = re.search(r"min_severity=(High|Medium|Low)\b", head)
    status = re.search(r"status=(open|Closed|New|Active)\b", head)
    unassigned = re.search(r"owner=(unassigned)\b", head)
    words = [m.group(1).lower() for m in (severity, status, unassigned) if m]
    return " ".join([shown, *words, noun + ("" if total == 1 else "s")])


def _incidents(question: Question, result: Result) -> str:
    rows = result.rows()
    shown = ", ".join(f"{r['ref']} #{r['number']} ({r['severity']}, {r['status']}, {r['owner']})" for r in rows[:3])
    text = f"{_count(result.head, 'incident')}; most severe first: {shown}."
    if question.says(r"any(?:one|body) (?:on|working)|working on|assigned|who owns|owner"):
        text += " " + _owners(rows)
    return text


def _owners(rows: list[dict[str, str]]) -> str:
    """Who is on the incidents listed: "Each has an owner: ..." or the unassigned ones."""
    unassigned = [f"{r['ref']} #{r['number']}" for r in rows if r["owner"].strip() in ("", "-", "Unassigned")]
    if not unassigned:
        return f"Each has an owner: {', '.join(sorted({r['owner'] for r in rows})[:4])}."
    return f"Not assigned yet: {', '.join(unassigned[:5])}."


def _alerts(question: Question, result: Result) -> str:
    rows = result.rows()
    cited = next((r for n in question.cited for r in rows if r["ref"] == f"[{n}]"), None)
    if question.cited and cited is None:
        return (f"[{question.cited[0]}] is an alert I could not find among the alerts of "
                f"{_window_of(result.head)}; its incident's detail lists it, or ask for a longer window.")
    if cited is not None:
        entities = re.sub(r",(?=[\w-]+: )", " · ", cited["entities"])  # "url: https://x,dns: x" is not one URL
        return (f"{cited['ref']} is \"{cited['name'][:100]}\" ({cited['severity']}, {cited['status']}) from "
                f"{cited['product']} at {cited['time_utc']} UTC, activity {cited['activity_utc']}; entities: "
                f"{entities} · techniques: {cited['techniques']}.")
    top = ", ".join(f"{r['ref']} {r['name'][:60]} ({r['severity']})" for r in rows[:2])
    return f"{_count(result.head, 'alert')}; top: {top}."


_SPANS = {"1h": "last_1h", "1d": "last_24h", "24h": "last_24h", "3d": "last_3d", "7d": "last_7d", "14d": "last_14d",
          "30d": "last_30d"}


def _window_of(head: str) -> str:
    """ "the last 7 days" from a result's first line (``time_window=last_7d``, or a hunt's ``time_window=7d``)."""
    window = re.search(r"time_window=(\w+)", head)
    if not window:
        return "the window asked"
    value = _SPANS.get(window.group(1), window.group(1))
    return _WINDOW_WORDS.get(value, value)


def _entities(question: Question, result: Result) -> str:
    rows = result.rows()
    if "entity=" in result.head and rows:
        r = rows[0]
        return (f"{r['ref']} {r['type']} {r['value']}: {r['alerts']} alerts ({r['high_severity_alerts']} High) in "
                f"{_window_of(result.head)}, first seen {r.get('first_seen_utc', '-')}, last seen "
                f"{r['last_seen_utc']} UTC.")
    kind = next((k for k, words in (("host", r"\bhosts?\b|machines"), ("account", r"\baccounts?\b|\busers?\b"),
                                   ("ip", r"\bips?\b|addresses")) if question.says(words)), None)
    picked = [r for r in rows if kind is None or r["type"] == kind] or rows
    label = {"host": "hosts", "account": "accounts", "ip": "addresses"}.get(kind or "", "entities")
    return f"Most targeted {label}: " + ", ".join(f"{r['ref']} {r['value']} ({r['alerts']} alerts)"
                                                  for r in picked[:3]) + "."


def _detail(question: Question, result: Result) -> str:
    lines = result.lines
    first = lines[1] if len(lines) > 1 else ""
    fields = dict(part.strip().split(" ", 1) for part in (lines[2] if len(lines) > 2 else "").split("|")
                  if " " in part.strip())
    number, ref = re.search(r"number (\d+)", first), re.search(r"ref (\[\d+\])", first)
    title = re.search(r"title \(untrusted text\): (.*)$", first)
    if not number:
        return ""
    owner = fields.get("owner", "-").strip()
    who = f"owned by {owner}" if owner not in ("", "-", "Unassigned") else "not assigned to anyone yet"
    named = f' "{title.group(1)[:80]}"' if title else ""
    listed = next((line for line in lines if line.startswith("alerts (")), "")
    counted = re.match(r"alerts \((\d+) of (\d+)\)", listed)
    alerts = f"{counted.group(2)} alert{'' if counted.group(2) == '1' else 's'}" if counted else ""
    more = f" It has {alerts}; the card lists them with its entities." if counted else ""
    return (f"Incident {ref.group(1) if ref else ''} #{number.group(1)}{named} ({fields.get('severity', '?')}, "
            f"{fields.get('status', '?')}) is {who}.{more}").replace("  ", " ")


def _on_call(question: Question, result: Result) -> str:
    rows = [line.split("|") for line in result.lines[2:] if line.count("|") >= 6]
    now = [f"{r[1]} ({r[3]})" for r in rows if r[0] == "now"]
    upcoming = [f"{r[1]} ({r[3]}, {r[0]})" for r in rows if r[0].startswith("from")]
    following = f" Next: {', '.join(upcoming[:2])}." if upcoming else ""
    if not now:
        return "No one is on shift now." + following
    return f"On shift now: {', '.join(now)}." + following


def _trend(question: Question, result: Result) -> str:
    """Totals per bin, the peak, and whether it stands out against the median."""
    totals: dict[str, int] = {}
    for line in result.lines[2:]:
        cells = line.split("|")
        if len(cells) > 1 and all(c.isdigit() for c in cells[1:]):
            totals[cells[0]] = sum(int(c) for c in cells[1:])
    if not totals:
        return ""
    ordered = sorted(totals.values())
    median = ordered[len(ordered) // 2]
    peak_at, peak = max(totals.items(), key=lambda item: item[1])
    verdict = "stands out" if peak > 1.5 * max(median, 1) else "is within the usual range"
    return (f"{sum(totals.values())} alerts in {len(totals)} bins, {ordered[0]} to {peak} per bin; the peak "
            f"({peak} at {peak_at} UTC) {verdict} against a median of {median}.")


def _investigation(question: Question, result: Result) -> str:
    entity = result.head.split("-> ", 1)[-1].split(" investigation")[0]
    assessment = next((line.split("): ", 1)[1] for line in result.lines if line.startswith("ASSESSMENT")), "")
    sections = [line[3:] for line in result.lines if line.startswith("## ")]
    found = [s for s in sections if not s.endswith(": none")]
    return (f"The bot's assessment of {entity} over {_window_of(result.head)}: {assessment}. Evidence found in "
            f"{', '.join(found) if found else 'no table'}; the card lists the rows behind each signal.")


def _incident_summary(question: Question, result: Result) -> str:
    """The bot's suggestion and first actions, as the summary states them."""
    first = next((line for line in result.lines if line.startswith("SUMMARY")), "")
    number = re.search(r"#(\d+)", first)
    suggested = next((line[3:] for line in result.lines if line.startswith("## Suggested")), "")
    heading = "## Recommended next actions"
    at = result.lines.index(heading) if heading in result.lines else -1
    steps = [line for line in result.lines[at + 1:at + 3] if not line.startswith("##")] if at >= 0 else []
    return (f"The bot's summary of incident #{number.group(1) if number else '?'}: {suggested.lower()}. "
            + (f"Next: {'; '.join(steps)}." if steps else "") + " The card shows the timeline and the rows behind each "
            "line.")


def _hunt(question: Question, result: Result) -> str:
    """The hunt's count and its first rows, each row's cells but its time, as the hunt returned them."""
    table = re.search(r"table=(\w+)", result.head)
    shown = ["{} {}{}".format(r["ref"], " ".join(v for k, v in r.items() if k not in ("ref", "TimeGenerated", "Count")
                                                 and v != "-")[:100], f" ({r['Count']})" if "Count" in r else "")
             for r in result.rows()[:3]]
    first = f"; first: {'; '.join(shown)}" if shown else ""
    return (f"Hunt over {table.group(1) if table else 'the logs'} in {_window_of(result.head)}: "
            f"{_count(result.head, 'row')}{first}.")


def _generic(question: Question, result: Result) -> str:
    if result.head.startswith(("Proposed", "Not proposed")):
        return result.head.split(" Tell the analyst")[0]
    return result.head.split("->", 1)[-1].strip()


_PHRASES: dict[str, Callable[[Question, Result], str]] = {
    "query_incidents": _incidents, "query_alerts": _alerts, "get_top_entities": _entities,
    "get_incident_detail": _detail, "get_on_call": _on_call, "get_alert_trend": _trend,
    "investigate_entity": _investigation, "hunt": _hunt, "summarize_incident": _incident_summary,
}


# ---------------------------------------------------------------------------------------------------------
# The protocol: a request body in, a step out


def brain(body: dict[str, Any]) -> oa.Step:
    """One Chat Completions request answered: tool calls on the first round, the answer once results are in."""
    messages = body.get("messages", [])
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    if last_user < 0:
        return oa.text("Hello! Ask me about your Sentinel incidents and alerts.")
    question = Question.read(str(messages[last_user].get("content", "")))
    results = [Result.of(m) for m in messages[last_user + 1:] if m.get("role") == "tool"]
    again = _second_look(question, results) if body.get("tools") else None
    if again:
        return oa.tool_calls(*again) if isinstance(again, list) else oa.text(again)
    if not body.get("tools") or results:
        return oa.text(answer(question, results))
    system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    offered = {str(t.get("function", {}).get("name")) for t in body.get("tools") or []}
    chosen = plan(question, system, offered)
    if isinstance(chosen, str):
        return oa.text(chosen)
    return oa.tool_calls(*chosen)


_NOT_AN_INCIDENT = re.compile(r"\[(\d+)\] is (entity|alert) (\S+) (.+?), not an incident")


def _second_look(question: Question, results: list[Result]) -> list[Call] | str | None:
    """After an [n] the prompt did not list was looked up as an incident and the bot said what it is instead (an
    entity, an alert): the call that fits what it is. Only once, and only when nothing else was read."""
    if len(results) != 1 or not results[0].failed:
        return None
    said = _NOT_AN_INCIDENT.search(results[0].head)
    if said is None:
        return None
    n, kind, entity_type, value = int(said.group(1)), said.group(2), said.group(3), said.group(4)
    if kind == "alert":
        return [("query_alerts", {"time_window": question.window or "last_24h", "limit": 100, "sort": "newest"})]
    return _about_entity(question, entity_type, value.rstrip("…"), value.endswith("…"), n)


MISBEHAVIOURS: dict[str, oa.Step] = {
    "unknown-tool": oa.tool_calls(("close_all_incidents", {"confirm": True})),
    "bad-arguments": oa.tool_calls(("query_incidents", '{"time_window": "last_24h", "min_severity": ')),
    "wrong-values": oa.tool_calls(("query_alerts", {"time_window": "last_year", "limit": 5000})),
}


def misbehaving(kind: str, times: int = 1) -> Callable[[dict[str, Any]], oa.Step]:
    """The stand-in, except that the first ``times`` rounds of each turn send a bad call of this kind (an unknown
    tool, arguments that are not JSON, or values out of range); then it plans as usual and answers from what worked.
    """
    bad = MISBEHAVIOURS[kind]

    def misbehave(body: dict[str, Any]) -> oa.Step:
        messages = body.get("messages", [])
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        rounds = sum(1 for m in messages[last_user + 1:] if m.get("role") == "assistant")
        if body.get("tools") and rounds < times:
            return bad
        if body.get("tools") and rounds == times:  # plan as if the slips had not happened
            return brain(body | {"messages": messages[:last_user + 1]})
        return brain(body)

    return misbehave


async def _serve(port: int, misbehave: str | None) -> None:
    server = oa.FakeOpenAI(brain=misbehaving(misbehave) if misbehave else brain)
    await server.start(port=port)
    print(f"rule-based model listening on {server.endpoint}/v1 (Ctrl+C to stop)", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--misbehave", choices=sorted(MISBEHAVIOURS), help="a bad tool call first in every turn")
    arguments = parser.parse_args()
    asyncio.run(_serve(arguments.port, arguments.misbehave))
