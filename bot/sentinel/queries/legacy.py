"""The five first read queries, not yet declared in modules of their own (being converted one by one).

Their KQL is still in ``kql.build``'s legacy builders and their demo evaluation in the demo backend's
``_run``; ``bot.sentinel.queries`` wraps them in ``QuerySpec``s so everything else sees one registry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.sentinel.params import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    Filters,
    InvalidParameter,
    parse_entity,
    parse_limit,
    parse_moment,
    parse_owner,
    parse_search,
    parse_severities,
    parse_severity,
    parse_sort,
    parse_status,
    parse_time_window,
)
from bot.sentinel.spec import FilteredQuery


class IncidentsQuery(FilteredQuery):
    tool = "query_incidents"


class AlertsQuery(FilteredQuery):
    tool = "query_alerts"
    of_alerts = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.filters.owner is not None:
            raise InvalidParameter("owner", "alerts have no owner; ask for incidents by owner")


LegacyQuery = IncidentsQuery | AlertsQuery

# The result columns of each query, in order. Both backends return rows with exactly these keys.
LEGACY_COLUMNS: dict[str, tuple[str, ...]] = {
    IncidentsQuery.tool: (
        "IncidentNumber", "Title", "Severity", "Status", "Owner", "CreatedTime", "LastModifiedTime",
        "AlertCount", "Tactics", "Products", "IncidentUrl", "Classification", "TotalMatched",
    ),
    AlertsQuery.tool: (
        "SystemAlertId", "AlertName", "AlertSeverity", "Status", "ProductName", "TimeGenerated",
        "Tactics", "EntityLabels", "TotalMatched",
    ),
    # The list's columns, the row's time (the cursor), and what watches filter on: description, owner's fields.
}


# Parameters of each query and how each is parsed (defaults live in the parsers).
PARAMETERS: dict[str, dict[str, Callable[[object], Any]]] = {
    IncidentsQuery.tool: {
        "time_window": parse_time_window,
        "min_severity": parse_severity,
        "limit": lambda v: parse_limit(v, DEFAULT_LIMIT, MAX_LIMIT),
        "severity": parse_severities,
        "status": parse_status,
        "owner": parse_owner,
        "search": parse_search,
        "from": lambda v: parse_moment(v, "from"),
        "to": lambda v: parse_moment(v, "to"),
        "sort": parse_sort,
        "entity": parse_entity,
    },
    AlertsQuery.tool: {
        "time_window": parse_time_window,
        "min_severity": parse_severity,
        "limit": lambda v: parse_limit(v, DEFAULT_LIMIT, MAX_LIMIT),
        "severity": parse_severities,
        "status": lambda v: parse_status(v, "alert"),
        "search": parse_search,
        "from": lambda v: parse_moment(v, "from"),
        "to": lambda v: parse_moment(v, "to"),
        "sort": lambda v: parse_sort(v, "alert"),
        "entity": parse_entity,
    },
}

CONSTRUCTORS: dict[str, Callable[..., LegacyQuery]] = {
    IncidentsQuery.tool: lambda time_window, min_severity, limit, **filters: IncidentsQuery(
        time_window, min_severity, limit, _filters(filters)),
    AlertsQuery.tool: lambda time_window, min_severity, limit, **filters: AlertsQuery(
        time_window, min_severity, limit, _filters(filters)),
}


def _filters(values: dict[str, Any]) -> Filters:
    """Filters from parsed parameter values ("from"/"to" are Python keywords, hence the mapping)."""
    renamed = {"severity": "severities", "from": "start", "to": "end"}
    return Filters(**{renamed.get(name, name): value for name, value in values.items()})


