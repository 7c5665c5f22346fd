"""The read tools: one declaration each, from the model's description to the card.

Enums, defaults and ranges come from ``sentinel.params`` so the schema the model sees can never drift
from what the data layer accepts (checked at import below). Descriptions steer the model: incidents vs
alerts vs trends vs entities, and follow-ups about one incident go to get_incident_detail.
"""

from __future__ import annotations

from bot import cards
from bot.sentinel.params import (
    ALERT_STATUSES,
    INCIDENT_STATUSES,
    MAX_LIMIT,
    Severity,
    SortOrder,
    TimeWindow,
)
from bot.sentinel.queries import MODEL_QUERY_NAMES, parameter_names
from bot.tools import compact
from bot.tools.queries import alert_trend, incident_detail, on_call, top_entities
from bot.tools.tool import Parameter, Tool

_WINDOW_EXAMPLE = '{"time_window": "last_24h"}'


def _window(default: TimeWindow, hint: bool = False) -> Parameter:
    # The hint once (on the first tool) is enough for the model; each copy costs tokens on every call.
    return Parameter(
        "time_window",
        "Ending now (\"overnight\"/\"today\" = last_24h, \"this week\" = last_7d)." if hint else "",
        enum=tuple(w.value for w in TimeWindow),
        default=default.value,
    )


_SEVERITY = Parameter("min_severity", "", enum=tuple(s.value for s in Severity))


def _limit(maximum: int, what: str) -> Parameter:
    return Parameter("limit", f"Max {what}.", kind="integer", minimum=1, maximum=maximum)


_ENTITY = Parameter("entity", "A host, account, IP, hash, URL...")


def _filters(statuses: tuple[str, ...], sorts: tuple[SortOrder, ...], owner: bool) -> tuple[Parameter, ...]:
    """The optional filters of a list (issue 12); the data layer validates each (``sentinel.params``)."""
    return (
        Parameter("severity", "e.g. \"High,Low\""),
        Parameter("status", "", enum=("open", *statuses)),  # "open" is every status but the closed ones
        *((Parameter("owner", "Name, UPN, me or unassigned."),) if owner else ()),
        Parameter("search", "In title or description."),
        Parameter("from", "ISO 8601."),
        Parameter("to", ""),
        Parameter("sort", "", enum=tuple(o.value for o in sorts)),  # severity first unless asked
        _ENTITY,
    )


QUERY_INCIDENTS = Tool(
    "query_incidents",
    "Incidents created in a window: severity, status, owner, alerts, tactics. For the queue and who is on what.",
    (_window(TimeWindow.LAST_24H, hint=True), _SEVERITY, _limit(MAX_LIMIT, "incidents"),
     *_filters(INCIDENT_STATUSES, tuple(SortOrder), owner=True)),
    "Querying incidents...",
    _WINDOW_EXAMPLE,
    text=compact.incidents_text,
    card=cards.incidents_card,
)

QUERY_ALERTS = Tool(
    "query_alerts",
    "Alerts in a window with product and entities, including alerts not in an incident.",
    (_window(TimeWindow.LAST_24H), _SEVERITY, _limit(MAX_LIMIT, "alerts"),
     *_filters(ALERT_STATUSES[:-1], (SortOrder.SEVERITY, SortOrder.NEWEST), owner=False)),
    "Querying alerts...",
    _WINDOW_EXAMPLE,
    text=compact.alerts_text,
    card=cards.alerts_card,
)

# In the order the model is offered them.
READ_TOOLS: tuple[Tool, ...] = (QUERY_INCIDENTS, incident_detail.TOOL, QUERY_ALERTS, alert_trend.TOOL,
                                top_entities.TOOL, on_call.TOOL)

# The declarations must describe exactly the data layer's queries and parameters (its internal ones, such as
# incident_changes for the poller, have no tool: the model is never offered them).
assert tuple(t.name for t in READ_TOOLS) == MODEL_QUERY_NAMES
assert all(tuple(p.name for p in t.parameters) == parameter_names(t.name) for t in READ_TOOLS)
