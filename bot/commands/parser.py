"""Deterministic commands: typed text that maps straight to a read query, no language model involved.

"incidents 24h high", "incident 42", "alerts 1h", "trend 30d medium", "entities". They answer fast,
cost nothing, and keep working when the model is down or not configured. Anything that is not a
command is left for the model (``parse`` returns None).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot.sentinel.params import Severity, TimeWindow
from bot.sentinel.queries import is_query, parameter_names
from bot.tools.queries import (
    alert_trend,
    alerts,
    analyst_kql,
    incident_detail,
    incidents,
    investigate,
    on_call,
    summary,
)
from bot.tools.queries import top_entities as entities
from bot.tools.write_tools import (
    ADD_INCIDENT_COMMENT,
    ASSIGN_INCIDENT,
    ESCALATE_INCIDENT,
    SET_INCIDENT_SEVERITY,
    SET_INCIDENT_STATUS,
)

_WINDOWS = {w.kql_timespan: w for w in TimeWindow} | {w.value: w for w in TimeWindow}
_WINDOWS |= {"today": TimeWindow.LAST_24H, "day": TimeWindow.LAST_24H, "week": TimeWindow.LAST_7D,
             "month": TimeWindow.LAST_30D, "hour": TimeWindow.LAST_1H}
_SEVERITIES = {s.value.lower(): s for s in Severity} | {"info": Severity.INFORMATIONAL, "med": Severity.MEDIUM}
# Each command names its tool by the tool's own declaration (bot.tools), never by a string of its own.
_LIST_COMMANDS = {
    "incidents": incidents.TOOL.name,
    "alerts": alerts.TOOL.name,
    "trend": alert_trend.TOOL.name,
    "entities": entities.TOOL.name,
}
DETAIL = incident_detail.TOOL.name  # "incident 42", and a card's Details button
_ALIASES = {"incident list": "incidents", "top entities": "entities", "alert trend": "trend"}
_ON_CALL_WORDS = frozenset({"who is on call", "who's on call", "whos on call", "oncall", "on call", "on-call",
                            "on call now", "who is on shift"})
_DETAIL = re.compile(r"^(?:incident|details?|show)\s+(?:#|number\s+)?(\d{1,10})$")
_REFERENCE = re.compile(r"^(?:incident|details?|show)\s+\[(\d{1,3})\]$")
# "summary 42", "summary [2]", "summary #42"; bare: the incident last looked at. "Summarize incident 42" is a question
# for the model (which calls the same tool).
SUMMARY = summary.TOOL.name
_SUMMARY = re.compile(r"^summary(?:\s+(?:of\s+)?(?:incident\s+)?(?:#|number\s+)?"
                      r"(?:(\d{1,10})|\[(\d{1,3})\]))?$")

# Incident changes (proposals the analyst confirms on a card). The target is "[n]", "#42", "42" or "incident 42".
_TARGET = r"(?P<target>\[\d{1,3}\]|#?\d{1,10}|incident\s+#?\d{1,10})"
_CHANGE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (tool, re.compile(pattern, re.IGNORECASE)) for tool, pattern in (
    (ASSIGN_INCIDENT.name, rf"^(?:assign|reassign)\s+{_TARGET}\s+to\s+(?P<who>.+)$"),
    (SET_INCIDENT_STATUS.name, rf"^(?:close|resolve)\s+{_TARGET}(?:\s+(?P<rest>.*))?$"),
    (SET_INCIDENT_STATUS.name, rf"^(?P<verb>reopen|activate)\s+{_TARGET}$"),
    (SET_INCIDENT_STATUS.name, rf"^status\s+{_TARGET}\s+(?:to\s+)?(?P<status>\w+)$"),
    (SET_INCIDENT_SEVERITY.name, rf"^(?:severity|sev)\s+{_TARGET}\s+(?:to\s+)?(?P<severity>\w+)$"),
    (SET_INCIDENT_SEVERITY.name, rf"^(?:raise|lower|escalate|downgrade|set)\s+{_TARGET}\s+(?:severity\s+)?to\s+"
                                rf"(?P<severity>\w+)$"),
    (ADD_INCIDENT_COMMENT.name, rf"^(?:comment|note)\s+(?:on\s+)?{_TARGET}\s*[:\-–—]?\s*(?P<comment>.*)$"),
    # "escalate [2]", "escalate #42 and assign: contain WS-FIN-160 now" (after "escalate [2] to high", a severity)
    (ESCALATE_INCIDENT.name, rf"^escalate\s+{_TARGET}(?:\s+(?:and\s+)?(?P<assign>assign(?:\s+(?:it|to\s+them))?))?"
                             rf"(?:\s*(?::|--|\s[-–—])\s*(?P<reason>.*))?$"),
    ))
_CLASSIFICATIONS = (("false positive", "FalsePositive"), ("falsepositive", "FalsePositive"), ("fp", "FalsePositive"),
                    ("true positive", "TruePositive"), ("truepositive", "TruePositive"), ("tp", "TruePositive"),
                    ("benign positive", "BenignPositive"), ("benignpositive", "BenignPositive"),
                    ("benign", "BenignPositive"), ("bp", "BenignPositive"), ("undetermined", "Undetermined"))
_REASONS = (("inaccurate data", "InaccurateData"), ("incorrect alert logic", "IncorrectAlertLogic"),
            ("incorrect logic", "IncorrectAlertLogic"), ("suspicious but expected", "SuspiciousButExpected"),
            ("expected", "SuspiciousButExpected"), ("suspicious activity", "SuspiciousActivity"))
CLOSE_USAGE = ('Usage: close [n] <classification>: <why>. classification: false positive, true positive, benign '
               'positive, undetermined (a false positive says which: "incorrect alert logic" or "inaccurate data"). '
               'Example: "close [3] false positive inaccurate data: pen test".')

_CHANGE_USAGE = {
    "assign": ('Assign which incident to whom? Usage: assign [n] to me (or to alice@contoso.com), '
               'e.g. "assign [2] to me".'),
    "close": CLOSE_USAGE,
    "reopen": 'Reopen which incident? Usage: reopen [n], e.g. "reopen [3]".',
    "severity": 'Usage: severity [n] high|medium|low|informational, e.g. "severity [2] high".',
    "comment": 'Usage: comment [n]: text, e.g. "comment [2]: called the user, password reset".',
    "escalate": ('Escalate which incident? Usage: escalate [n] [assign] [: what you need], e.g. "escalate [2]" or '
                 '"escalate #42 assign: contain WS-FIN-160 now".'),
}

HELP_TEXT = """\
Ask in plain language, or use these commands:
  incidents [window] [severity]   incidents created in a window, most severe first
  incidents open mine 24h high    filters: open|new|active|closed, mine|unassigned, newest, host|ip|account X
  incidents search WORDS          incidents whose title or description contains the words
  incident N                      one incident with its alerts and entities (also: incident [2])
  alerts [window] [severity]      recent alerts (also: alerts host WS-FIN-160, alerts open, alerts search WORDS)
  entity X [window]               one host, account, IP, hash or URL: its alerts, first and last seen (30d)
  investigate X [window] [type]   one account, host, IP, hash, URL or domain across the evidence tables, assessed
  summary N                       one incident in one step: timeline, levels, similar incidents, next actions ([2])
  trend [window] [severity]       alert counts over time, per severity
  entities [window] [severity]    the accounts, hosts and IPs in the most alerts
  assign [n] to me                propose a change; confirm on its card or type "yes" (also: to alice@contoso.com)
  close [n] true positive: why    close with a classification (false positive: say which, e.g. "inaccurate data")
  reopen [n]  |  severity [n] high  |  comment [n]: text
  watch high open                 post new incidents matching the filters here as they arrive (watches, unwatch [N])
  escalate [n] [assign]: ask      @mention the analyst on call here, comment on the incident (assign: also assign)
  prefer [window] [severity]      your defaults for this conversation (prefer reset clears them)
  who is on call                  who is on shift now and next, from the OnCall watchlist (also: oncall)
  kql [window] QUERY              your own read-only KQL, where the bot's access policy lets you (24h, 100 rows)
  more  |  page N                  the next page of the last list (also its card's Next button), or page N of it
  help                            this list
  clear                           forget this conversation (preferences are kept)
window: 1h, 24h, 3d, 7d, 14d, 30d    severity: high, medium, low, informational (and above)
Examples: "incidents open mine", "incidents unassigned 24h high", "incidents search qakbot",
"alerts host WS-FIN-160", "entity 10.1.2.3", "incident 42", "trend 7d medium"."""


@dataclass(frozen=True)
class Command:
    """A parsed command. ``tool`` is a read query name; ``name`` is help/clear for the others."""

    name: str
    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    reference: int | None = None  # "incident [2]": the caller resolves [2] from its reference table


class CommandError(ValueError):
    """Text that is clearly a command but has a part we cannot read; the message shows the usage."""


class CommandQuestion(CommandError):
    """A command that reads, but leaves a choice only the analyst can make (which close reason): the message asks,
    offering the valid answers as whole commands to type."""


_KQL = re.compile(r"^/?kql\b(?P<rest>.*)$", re.IGNORECASE | re.DOTALL)
_KQL_WINDOW = re.compile(r"^\s*(?P<window>\d{1,5}[mhd])\s+(?P<query>.*)$", re.IGNORECASE | re.DOTALL)
KQL_USAGE = ('Usage: kql [window] QUERY, your own read-only KQL (24h unless a window such as 7d comes first), e.g. '
             '"kql 7d SigninLogs | where ResultType == \"500121\" | summarize count() by UserPrincipalName".')


def parse(text: str) -> Command | None:
    """The command in ``text``, or None when it is a free-form question for the model."""
    if kql := _KQL.match(text.strip()):
        return _analyst_kql(kql.group("rest"))
    change = _parse_change(" ".join(text.strip().lstrip("/").split()))
    if change is not None:
        return change
    words = " ".join(text.strip().lower().lstrip("/").split())
    words = _ALIASES.get(words, words)
    if not words:
        return None
    if words in _FIXED:
        return _FIXED[words]()
    return _watch(words, text) or _single(words) or _list_command(words, text)


def _analyst_kql(rest: str) -> Command:
    """kql [window] QUERY: the text kept exactly as typed (its case, quotes and lines are the query's)."""
    if not rest.strip():
        raise CommandError(KQL_USAGE)
    windowed = _KQL_WINDOW.match(rest)
    arguments = {"query": windowed.group("query"), "time_window": windowed.group("window")} if windowed \
        else {"query": rest.strip()}
    return Command("kql", analyst_kql.TOOL.name, arguments)


# Texts (lower case, spaces collapsed) that are a whole command.
_FIXED: dict[str, Callable[[], Command]] = {
    **dict.fromkeys(("help", "?", "commands"), lambda: Command("help")),
    **dict.fromkeys(("clear", "reset", "new"), lambda: Command("clear")),
    **dict.fromkeys(("prefer reset", "prefer none", "preferences reset"),
                    lambda: Command("prefer", arguments={"reset": True})),
    **dict.fromkeys(("prefer", "preferences"), lambda: Command("prefer")),
    **dict.fromkeys(("more", "next", "next page", "show more", "more please", "page"), lambda: Command("page")),
}
_PAGE = re.compile(r"^(?:page|more|next)\s+#?(\d{1,4})$")


def detail_command(incident_ref: object) -> Command:
    """One incident in depth (its number, or a card's Details button's value)."""
    return Command("incident", DETAIL, {"incident_ref": incident_ref})


def _single(words: str) -> Command | None:
    """The on-call analyst, or one incident by number or by a row shown earlier; a bare command name's usage."""
    if words in _CHANGE_USAGE:
        # Bare command names, as the command menu inserts them.
        raise CommandError(_CHANGE_USAGE[words])
    if page := _PAGE.match(words):  # "page 3": the last list's third page
        return Command("page", arguments={"page": int(page.group(1))})
    if words.rstrip("?").strip() in _ON_CALL_WORDS:
        return Command("oncall", on_call.TOOL.name)
    if words in ("incident", "details", "detail"):
        # What Teams inserts from the command menu, before the analyst types a number.
        raise CommandError("Which incident? Usage: incident N (its number), or incident [n] for a row shown "
                           'earlier, e.g. "incident 42" or "incident [2]".')
    if detail := _DETAIL.match(words):
        return detail_command(int(detail.group(1)))
    if summarized := _SUMMARY.match(words):
        number, reference = summarized.groups()
        if reference is not None:
            return Command("summary", SUMMARY, reference=int(reference))
        return Command("summary", SUMMARY, {"incident_ref": int(number) if number else "that incident"})
    if reference := _REFERENCE.match(words):
        return Command("incident", DETAIL, reference=int(reference.group(1)))
    return None


def _list_command(words: str, text: str) -> Command | None:
    """A list with its filters ("incidents open mine 24h"), preferences ("prefer 24h high") or an entity lookup."""
    head, rest = _head_and_rest(words, text)
    if head == "entity":
        return _entity(rest, text)
    if head == "investigate":
        return _investigate(rest, text)
    if head not in _LIST_COMMANDS and head != "prefer":
        return None
    if len(rest) > 3 and not _FILTER_WORDS.intersection(w.lower() for w in rest):
        return None  # a sentence that starts with "alerts ..." is a question, not a command
    arguments = _list_arguments(head, rest, text)
    if arguments is None:
        return None
    if head == "prefer":
        return Command("prefer", arguments=arguments)
    if head == "incidents" and ("search" in arguments or "owner" in arguments):
        # A search looks for one thing, "mine" and "unassigned" are a queue: 30 days unless a window is typed
        # (at the default 24 h, "incidents search qakbot" and "incidents open mine" mostly found nothing).
        arguments.setdefault("time_window", TimeWindow.LAST_30D.value)
    return Command(head, _LIST_COMMANDS[head], arguments)


def _head_and_rest(words: str, text: str) -> tuple[str, list[str]]:
    """The command word and the words after it, as typed: a keyword or an entity keeps its letter case."""
    head, *rest = words.split(" ")
    typed = " ".join(text.strip().lstrip("/").split()).split(" ")
    if typed[0].lower() == head:
        rest = typed[1:]
    return head, rest


# Filters a list command takes (issue 12): "incidents open mine", "incidents unassigned 24h high",
# "incidents search qakbot", "alerts host WS-FIN-160".
_STATUS_WORDS = {
    "incidents": {"open": "open", "new": "New", "active": "Active", "closed": "Closed"},
    "alerts": {"open": "open", "new": "New", "inprogress": "InProgress", "resolved": "Resolved",
               "dismissed": "Dismissed"},
}
_OWNER_WORDS = {"mine": "me", "my": "me", "unassigned": "unassigned"}
_ENTITY_WORDS = frozenset({"host", "ip", "account", "user", "url", "hash", "domain", "file", "mailbox", "entity"})
_SORT_WORDS = {"newest": "newest", "latest": "newest"}
_FILTER_WORDS = frozenset({"search", *_ENTITY_WORDS, *_OWNER_WORDS, *_SORT_WORDS,
                           *(w for words in _STATUS_WORDS.values() for w in words)})
ENTITY_USAGE = 'Usage: entity VALUE [window], e.g. "entity 10.1.2.3" or "entity WS-FIN-160 7d".'


def _list_arguments(head: str, rest: list[str], text: str) -> dict[str, Any] | None:
    """The arguments of a list command's words, or None when they read as a question."""
    arguments: dict[str, Any] = {}
    filters = head in ("incidents", "alerts")
    i = 0
    while i < len(rest):
        original, word = rest[i], rest[i].lower()
        i += 1
        if filters and word == "search":
            words = _search_words(rest[i:], arguments)
            if not words:
                raise CommandError(f'Search for what? Usage: {head} search WORDS, e.g. "{head} search qakbot".')
            arguments["search"] = " ".join(words)
            break
        if filters and word in _ENTITY_WORDS and "entity" not in arguments:
            if i >= len(rest):
                raise CommandError(f'Which {word}? Usage: {head} {word} VALUE, e.g. "{head} host WS-FIN-160".')
            arguments["entity"] = rest[i]
            i += 1
        elif filters and word in _STATUS_WORDS[head] and "status" not in arguments:
            arguments["status"] = _STATUS_WORDS[head][word]
        elif head == "incidents" and word in _OWNER_WORDS and "owner" not in arguments:
            arguments["owner"] = _OWNER_WORDS[word]
        elif filters and word in _SORT_WORDS:
            arguments["sort"] = _SORT_WORDS[word]
        elif word in _WINDOWS and "time_window" not in arguments:
            arguments["time_window"] = _WINDOWS[word].value
        elif word in _SEVERITIES and "min_severity" not in arguments:
            arguments["min_severity"] = _SEVERITIES[word].value
        elif word.isdigit() and head not in ("trend", "prefer") and "limit" not in arguments:
            arguments["limit"] = int(word)
        elif _looks_like_option(word):
            raise CommandError(f'I could not read "{original}" in "{text.strip()}".\n{usage(head)}')
        else:
            return None  # "alerts from yesterday" reads as a question for the model
    return arguments


def _search_words(words: list[str], arguments: dict[str, Any]) -> list[str]:
    """The words searched for, less a window typed after them ("search qakbot 30d": options in any order): a
    window token ("30d", "last_7d") is never a search word; a severity word is, since "high cpu" is a search."""
    kept = list(words)
    while kept and "time_window" not in arguments and re.fullmatch(r"\d{1,2}[hd]|last_\d{1,2}[hd]", kept[-1].lower()) \
            and kept[-1].lower() in _WINDOWS:
        arguments["time_window"] = _WINDOWS[kept.pop().lower()].value
    return kept


# Words a command starts with, for "did you mean" on a typo ("incidnets 24h").
# ("summary" is left out: "summarise incident 42" is a question for the model, not a typo of it.)
COMMAND_WORDS = ("incidents", "incident", "alerts", "trend", "entities", "entity", "watch", "watches", "unwatch",
                 "help", "clear", "prefer", "oncall", "assign", "reopen", "severity", "comment", "escalate", "more",
                 "page")


def nearest(text: str) -> str | None:
    """For text that is no command: the text with its first word replaced by the nearest command word, when that
    reads as a command as it is ("incidnets 24h" -> "incidents 24h"); None otherwise, and for questions."""
    typed = " ".join(text.strip().lstrip("/").split())
    head, _, tail = typed.partition(" ")
    if len(head) < 4 or head.lower() in COMMAND_WORDS or len(tail.split()) > 4:
        return None
    close = difflib.get_close_matches(head.lower(), COMMAND_WORDS, n=1, cutoff=0.75)
    if not close:
        return None
    candidate = f"{close[0]} {tail}".strip()
    try:
        command = parse(candidate)
    except CommandError:
        return None
    return candidate if command is not None else None


WATCH_USAGE = ('Usage: watch [severity] [filters], e.g. "watch high" or "watch medium open unassigned" (the filters of '
               '"incidents"); "watches" lists this conversation\'s watches; "unwatch" stops them all, "unwatch 2" one.')
_UNWATCH = re.compile(r"^(?:unwatch|stop watching)(?:\s+#?(\d{1,3}))?$")


def _watch(words: str, text: str) -> Command | None:
    """"watch high", "watches", "unwatch [N]": subscribe this conversation to new incidents matching the filters of
    the incidents command (checked, and "mine" resolved, where the watch is made), list them, stop them."""
    if words in ("watches", "watch list", "list watches"):
        return Command("watches")
    if unwatch := _UNWATCH.match(words):
        return Command("unwatch", arguments={"number": int(unwatch.group(1))} if unwatch.group(1) else {})
    head, _, tail = " ".join(text.strip().lstrip("/").split()).partition(" ")
    if head.lower() != "watch":
        return None
    rest = tail.split(" ") if tail else []
    if len(rest) > 3 and not _FILTER_WORDS.intersection(w.lower() for w in rest):
        return None  # "watch out for ..." is a question
    arguments = _list_arguments("incidents", rest, text)
    if arguments is None:
        raise CommandError(f'I could not read "{text.strip()}" as a watch. {WATCH_USAGE}')
    return Command("watch", arguments=arguments)


def _entity(rest: list[str], text: str) -> Command:
    """"entity 10.1.2.3 [window] [severity]": one entity's alert counts and first/last seen (30 days unless said)."""
    if not rest:
        raise CommandError(f"Which entity? {ENTITY_USAGE}")
    arguments: dict[str, Any] = {"entity": rest[0], "time_window": "last_30d"}
    for word in (w.lower() for w in rest[1:]):
        if word in _WINDOWS:
            arguments["time_window"] = _WINDOWS[word].value
        elif word in _SEVERITIES:
            arguments["min_severity"] = _SEVERITIES[word].value
        else:
            raise CommandError(f'I could not read "{word}" in "{text.strip()}". {ENTITY_USAGE}')
    return Command("entity", entities.TOOL.name, arguments)


INVESTIGATE_USAGE = ('Usage: investigate VALUE [window] [type], e.g. "investigate alice@contoso.com", '
                     '"investigate WS-FIN-042 24h" or "investigate alice 7d account".')
_ENTITY_TYPES = frozenset({"account", "user", "host", "device", "ip", "hash", "file", "url", "domain"})


INVESTIGATE = investigate.TOOL.name


def _investigate(rest: list[str], text: str) -> Command:
    """"investigate VALUE [window] [type]": the entity investigation (7 days unless said)."""
    if not rest:
        raise CommandError(f"Investigate what? {INVESTIGATE_USAGE}")
    arguments: dict[str, Any] = {"entity": rest[0]}
    for word in (w.lower() for w in rest[1:]):
        if word in _WINDOWS and "time_window" not in arguments:
            arguments["time_window"] = _WINDOWS[word].value
        elif word in _ENTITY_TYPES and "entity_type" not in arguments:
            arguments["entity_type"] = word
        else:
            raise CommandError(f'I could not read "{word[:40]}" in "{text.strip()[:120]}". {INVESTIGATE_USAGE}')
    return Command("investigate", INVESTIGATE, arguments)


def _parse_change(text: str) -> Command | None:
    """A proposed incident change ("assign [2] to me", "close 42 false positive: pen test"), or None."""
    for tool, pattern in _CHANGE_PATTERNS:
        match = pattern.match(text)
        if match is None:
            continue
        groups = match.groupdict()
        target = re.sub(r"(?i)^incident\s+", "", groups["target"]).lstrip("#")
        arguments: dict[str, Any] = {"incident_ref": target}
        if tool == ASSIGN_INCIDENT.name:
            arguments["assignee"] = groups["who"]
        elif tool == SET_INCIDENT_SEVERITY.name:
            arguments["severity"] = groups["severity"]
        elif tool == ESCALATE_INCIDENT.name:
            arguments["assign"] = bool(groups.get("assign"))
            if (groups.get("reason") or "").strip():
                arguments["reason"] = groups["reason"].strip()
        elif tool == ADD_INCIDENT_COMMENT.name:
            if not groups["comment"].strip():
                raise CommandError('What should the comment say? Usage: comment [n]: text, e.g. "comment [2]: '
                                   'called the user, password reset".')
            arguments["comment"] = groups["comment"].strip()
        elif groups.get("verb"):
            arguments["status"] = "Active"
        elif groups.get("status") is not None:
            arguments["status"] = groups["status"]
        else:
            arguments |= _closing(groups.get("rest") or "", groups["target"])
        return Command("change", tool, arguments)
    return None


def _closing(rest: str, target: str) -> dict[str, Any]:
    """"[as] false positive [inaccurate data]: pen test" -> status Closed, classification, reason, comment."""
    split = re.search(r"\s*:\s*|\s+[-–—]\s+|\s+because\s+", rest, re.IGNORECASE)
    head, comment = (rest[:split.start()], rest[split.end():]) if split else (rest, "")
    words = " ".join(head.lower().removeprefix("as ").split())
    arguments: dict[str, Any] = {"status": "Closed"}
    for phrase, value in _CLASSIFICATIONS:
        if words == phrase or words.startswith(phrase + " "):
            arguments["classification"] = value
            words = words[len(phrase):].strip()
            break
    else:
        raise CommandError(f"Which classification? {CLOSE_USAGE}")
    for phrase, value in _REASONS:
        if words == phrase:
            arguments["classification_reason"] = value
            words = ""
            break
    if not comment.strip():
        raise CommandError(f"Closing needs a short reason after a colon. {CLOSE_USAGE}")
    arguments["comment"] = comment.strip()
    allowed, reason = _REASONS_OF[arguments["classification"]], arguments.get("classification_reason")
    if reason is not None and reason not in allowed:
        words = _REASON_WORDS[reason]
    if words or (reason is None and len(allowed) > 1):
        raise CommandQuestion(_which_reason(target, arguments, words))
    return arguments


# The reasons Sentinel offers per classification, in the words a close command takes them (sentinel.changes.REASONS).
_REASONS_OF: dict[str, tuple[str, ...]] = {"FalsePositive": ("IncorrectAlertLogic", "InaccurateData"),
                                           "TruePositive": ("SuspiciousActivity",),
                                           "BenignPositive": ("SuspiciousButExpected",), "Undetermined": ()}
_CLASSIFICATION_WORDS = {"FalsePositive": "false positive", "TruePositive": "true positive",
                         "BenignPositive": "benign positive", "Undetermined": "undetermined"}
_REASON_WORDS = {"IncorrectAlertLogic": "incorrect alert logic", "InaccurateData": "inaccurate data",
                 "SuspiciousActivity": "suspicious activity", "SuspiciousButExpected": "suspicious but expected"}


def _which_reason(target: str, arguments: dict[str, Any], words: str) -> str:
    """The question a close without a reason Sentinel knows gets: the classification's reasons, as commands to type."""
    classification = _CLASSIFICATION_WORDS[arguments["classification"]]
    allowed = _REASONS_OF[arguments["classification"]]
    said = f'"{words}" is not a reason Sentinel knows for {classification}' if words else \
        f"Sentinel closes a {classification} with one of {len(allowed)} reasons"
    if not allowed:
        return f'{said}: it takes none. Type "close {target} {classification}: {arguments["comment"]}".'
    typed = [f'"close {target} {classification} {_REASON_WORDS[r]}: {arguments["comment"]}"' for r in allowed]
    return f"{said}. Which one? Type " + " or ".join(typed) + "."


def with_preferences(command: Command, preferences: dict[str, str]) -> dict[str, Any]:
    """The command's arguments, with the analyst's preferred window and severity where it gave none."""
    arguments = dict(command.arguments)
    if command.tool and is_query(command.tool):  # an investigation keeps its own 7-day default
        for name in ("time_window", "min_severity"):
            if name in preferences and name not in arguments and name in parameter_names(command.tool):
                arguments[name] = preferences[name]
    return arguments


def apply_preferences(command: Command, preferences: dict[str, str]) -> str:
    """Update ``preferences`` from a prefer command; the reply to show."""
    if command.arguments.get("reset"):
        preferences.clear()
        return "Preferences cleared."
    preferences.update({k: str(v) for k, v in command.arguments.items() if k in ("time_window", "min_severity")})
    if not preferences:
        return 'No preferences set. Example: "prefer 7d medium".'
    shown = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(preferences.items()))
    return f"Preferences: {shown}. They are used when a question or command does not say otherwise."


def usage(command: str) -> str:
    return (
        f"Usage: {command} [window] [severity]. window: 1h, 24h, 3d, 7d, 14d, 30d; "
        "severity: high, medium, low, informational."
    )


def _looks_like_option(word: str) -> bool:
    return word in ("critical", "severe") or bool(re.fullmatch(r"\d+[a-z]{0,3}|last_\w+", word))
