"""The read tools: one declaration each, from the model's description to the card.

Enums, defaults and ranges come from ``sentinel.params`` so the schema the model sees can never drift
from what the data layer accepts (checked at import below). Descriptions steer the model: incidents vs
alerts vs trends vs entities, and follow-ups about one incident go to get_incident_detail.
"""

from __future__ import annotations

from bot import cards
from bot.sentinel.params import (
    DEFAULT_ENTITY_LIMIT,
    DEFAULT_LIMIT,
    MAX_ENTITY_LIMIT,
    MAX_LIMIT,
    BinSize,
    Severity,
    TimeWindow,
)
from bot.sentinel.queries import QUERY_NAMES, parameter_names
from bot.tools import compact
from bot.tools.tool import Parameter, Tool

_WINDOW_EXAMPLE = '{"time_window": "last_24h"}'


def _window(default: TimeWindow) -> Parameter:
    return Parameter(
        "time_window",
        "How far back, ending now (\"overnight\"/\"today\" = last_24h, \"this week\" = last_7d).",
        enum=tuple(w.value for w in TimeWindow),
        default=default.value,
    )


_SEVERITY = Parameter(
    "min_severity",
    "Lowest severity to include (Medium = Medium and High).",
    enum=tuple(s.value for s in Severity),
    default=Severity.INFORMATIONAL.value,
)


def _limit(default: int, maximum: int, what: str) -> Parameter:
    return Parameter("limit", f"Max {what}.", kind="integer", default=default,
                     minimum=1, maximum=maximum)


QUERY_INCIDENTS = Tool(
    "query_incidents",
    "Incidents created in a window, most severe first (severity, status, owner, alerts, tactics). For "
    "the queue, what came in, who is on what.",
    (_window(TimeWindow.LAST_24H), _SEVERITY, _limit(DEFAULT_LIMIT, MAX_LIMIT, "incidents")),
    "Querying incidents...",
    _WINDOW_EXAMPLE,
    text=compact.incidents_text,
    card=cards.incidents_card,
)

GET_INCIDENT_DETAIL = Tool(
    "get_incident_detail",
    "One incident in depth: description, alerts, entities, owner, classification, portal link. For "
    "follow-ups like \"tell me more about [2]\" or \"that incident\" (take its number from the references).",
    (
        Parameter(
            "incident_ref",
            "Incident number (e.g. \"42\"), or words from its title.",
            required=True,
        ),
    ),
    "Looking up incident details...",
    '{"incident_ref": "42"}',
    text=compact.incident_detail_text,
    card=cards.incident_detail_card,
)

QUERY_ALERTS = Tool(
    "query_alerts",
    "Individual alerts in a window, most severe first, with product and main entities. For alerts and "
    "detections, including ones not in an incident.",
    (_window(TimeWindow.LAST_24H), _SEVERITY, _limit(DEFAULT_LIMIT, MAX_LIMIT, "alerts")),
    "Querying alerts...",
    _WINDOW_EXAMPLE,
    text=compact.alerts_text,
    card=cards.alerts_card,
)

GET_ALERT_TREND = Tool(
    "get_alert_trend",
    "Alert counts per time bin and severity, zero-filled. For volume, spikes and \"is this unusual?\".",
    (
        _window(TimeWindow.LAST_7D),
        _SEVERITY,
        Parameter(
            "bin_size",
            "auto = hourly up to 3 days, else daily.",
            enum=tuple(b.value for b in BinSize),
            default=BinSize.AUTO.value,
        ),
    ),
    "Analyzing alert trends...",
    _WINDOW_EXAMPLE,
    text=compact.trend_text,
    card=cards.trend_card,
)

GET_TOP_ENTITIES = Tool(
    "get_top_entities",
    "Accounts, hosts, IPs, URLs, files... in the most alerts of a window, with High-severity counts. For "
    "\"which hosts/users were hit most\".",
    (_window(TimeWindow.LAST_7D), _SEVERITY, _limit(DEFAULT_ENTITY_LIMIT, MAX_ENTITY_LIMIT, "entities")),
    "Finding top targeted entities...",
    _WINDOW_EXAMPLE,
    text=compact.entities_text,
    card=cards.entities_card,
)

READ_TOOLS: tuple[Tool, ...] = (QUERY_INCIDENTS, GET_INCIDENT_DETAIL, QUERY_ALERTS, GET_ALERT_TREND, GET_TOP_ENTITIES)

# The declarations must describe exactly the data layer's queries and parameters.
assert tuple(t.name for t in READ_TOOLS) == QUERY_NAMES
assert all(tuple(p.name for p in t.parameters) == parameter_names(t.name) for t in READ_TOOLS)
