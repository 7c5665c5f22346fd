"""The read queries as typed data, independent of the backend that runs them.

A query object holds validated parameters only (see ``params``). ``kql.build`` turns one into KQL for
Log Analytics; the demo backend runs the same query in SQLite with the same semantics. ``COLUMNS``
is the result contract both backends honour: the KQL projects exactly these columns (a test checks
it with Microsoft's Kusto parser) and the demo SQL returns exactly these keys.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot.sentinel.params import (
    DEFAULT_ENTITY_LIMIT,
    DEFAULT_LIMIT,
    DETAIL_LOOKBACK,
    MAX_ENTITY_LIMIT,
    MAX_LIMIT,
    MAX_TREND_BINS,
    BinSize,
    Filters,
    IncidentRef,
    InvalidParameter,
    Severity,
    SortOrder,
    TimeWindow,
    parse_bin_size,
    parse_entity,
    parse_incident_ref,
    parse_limit,
    parse_moment,
    parse_owner,
    parse_search,
    parse_severities,
    parse_severity,
    parse_since,
    parse_sort,
    parse_status,
    parse_time_window,
)

# Caps on nested lists inside one result row.
MAX_DETAIL_ALERTS = 50
MAX_DETAIL_ENTITIES = 50
MAX_ALERT_ENTITY_LABELS = 50
MAX_OTHER_MATCHES = 5
MAX_DESCRIPTION_CHARS = 4000
MAX_CHANGES = 500  # incidents per poll: a poller advances its cursor to the last one and asks again
MAX_ON_CALL = 200  # roster rows
ON_CALL_WATCHLIST = "OnCall"  # the Sentinel watchlist alias the roster is read from
# Log Analytics' mv-expand default; the demo applies the same cap so both backends agree.
MV_EXPAND_LIMIT = 128


@dataclass(frozen=True)
class _WindowQuery:
    """A query over a time window ending now, at or above a minimum severity."""

    window: TimeWindow
    min_severity: Severity

    @property
    def timespan(self) -> timedelta:
        return self.window.duration

    def parameters(self) -> dict[str, Any]:
        return {"time_window": self.window.value, "min_severity": self.min_severity.value}


@dataclass(frozen=True)
class _ListQuery(_WindowQuery):
    limit: int

    def parameters(self) -> dict[str, Any]:
        return super().parameters() | {"limit": self.limit}


@dataclass(frozen=True)
class _FilteredQuery(_ListQuery):
    filters: Filters = field(default_factory=Filters)

    def __post_init__(self) -> None:
        if not self.severities:
            raise InvalidParameter("severity", f"none of {', '.join(s.value for s in self.filters.severities)} is "
                                               f"at or above min_severity {self.min_severity.value}")

    @property
    def timespan(self) -> timedelta:
        # From an absolute start the span is not known here ("now" is the backend's): the longest lookback.
        return DETAIL_LOOKBACK if self.filters.ranged else self.window.duration

    @property
    def severities(self) -> tuple[Severity, ...]:
        """The severities wanted: at or above the minimum, and in the set when one is given."""
        floor = self.min_severity.at_least()
        return tuple(s for s in floor if s in self.filters.severities) if self.filters.severities else floor

    def parameters(self) -> dict[str, Any]:
        return super().parameters() | self.filters.parameters()


class IncidentsQuery(_FilteredQuery):
    tool = "query_incidents"


class AlertsQuery(_FilteredQuery):
    tool = "query_alerts"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.filters.owner is not None:
            raise InvalidParameter("owner", "alerts have no owner; ask for incidents by owner")


@dataclass(frozen=True)
class TopEntitiesQuery(_ListQuery):
    entity: str | None = None  # only this entity (its value, any letter case): its counts and first/last seen

    tool = "get_top_entities"

    def parameters(self) -> dict[str, Any]:
        return super().parameters() | ({"entity": self.entity} if self.entity else {})


@dataclass(frozen=True)
class IncidentDetailQuery:
    ref: IncidentRef
    tool = "get_incident_detail"

    @property
    def timespan(self) -> timedelta:
        return DETAIL_LOOKBACK

    def parameters(self) -> dict[str, Any]:
        value: Any = self.ref.number if self.ref.number is not None else self.ref.title_search
        return {"incident_ref": value}


@dataclass(frozen=True)
class AlertTrendQuery(_WindowQuery):
    bin_size: BinSize  # resolved on construction: never AUTO

    tool = "get_alert_trend"

    def __post_init__(self) -> None:
        if self.bin_size is BinSize.AUTO:
            object.__setattr__(self, "bin_size", self.bin_size.resolve(self.window))
        bins = self.window.duration / self.bin_size.duration
        if bins > MAX_TREND_BINS:
            raise InvalidParameter(
                "bin_size",
                f"{self.bin_size.value} bins over {self.window.value} would be {int(bins)} bins "
                f"(at most {MAX_TREND_BINS}): use bin_size 1d or auto",
            )

    def parameters(self) -> dict[str, Any]:
        return super().parameters() | {"bin_size": self.bin_size.value}


@dataclass(frozen=True)
class IncidentChangesQuery:
    """Incidents with a SecurityIncident row ingested after ``since`` (the poller's cursor), latest state of each.

    Run by the bot itself (one query per poll for every watch), never offered to the model."""

    since: datetime  # aware, UTC
    limit: int = MAX_CHANGES

    tool = "incident_changes"

    @property
    def timespan(self) -> timedelta:
        return DETAIL_LOOKBACK  # "now" is the backend's: the longest lookback covers any cursor the bot keeps

    def parameters(self) -> dict[str, Any]:
        return {"since": self.since.isoformat().replace("+00:00", "Z")}


@dataclass(frozen=True)
class OnCallQuery:
    """The on-call roster: the rows of the Sentinel watchlist ``OnCall``, with the service's "now"."""

    tool = "get_on_call"

    @property
    def timespan(self) -> timedelta:
        return DETAIL_LOOKBACK  # watchlist rows are re-ingested periodically; their age is not the question

    def parameters(self) -> dict[str, Any]:
        return {}


Query = (IncidentsQuery | IncidentDetailQuery | AlertsQuery | AlertTrendQuery | TopEntitiesQuery | IncidentChangesQuery
         | OnCallQuery)

# Sort orders of the lists as (column, descending) keys, ties broken to the last key, so both backends agree.
# SeverityRank is 0 for High up to 3 for Informational; AlertCount is the incident's.
INCIDENT_SORT: dict[SortOrder, tuple[tuple[str, bool], ...]] = {
    SortOrder.SEVERITY: (("SeverityRank", False), ("CreatedTime", True), ("IncidentNumber", True)),
    SortOrder.NEWEST: (("CreatedTime", True), ("IncidentNumber", True)),
    SortOrder.MOST_ALERTS: (("AlertCount", True), ("SeverityRank", False), ("CreatedTime", True),
                            ("IncidentNumber", True)),
}
ALERT_SORT: dict[SortOrder, tuple[tuple[str, bool], ...]] = {
    SortOrder.SEVERITY: (("SeverityRank", False), ("TimeGenerated", True), ("SystemAlertId", False)),
    SortOrder.NEWEST: (("TimeGenerated", True), ("SystemAlertId", False)),
}

# The result columns of each query, in order. Both backends return rows with exactly these keys.
COLUMNS: dict[str, tuple[str, ...]] = {
    IncidentsQuery.tool: (
        "IncidentNumber", "Title", "Severity", "Status", "Owner", "CreatedTime", "LastModifiedTime",
        "AlertCount", "Tactics", "Products", "IncidentUrl", "Classification", "TotalMatched",
    ),
    IncidentDetailQuery.tool: (
        "IncidentNumber", "IncidentName", "Title", "Description", "Severity", "Status", "Owner",
        "CreatedTime", "LastModifiedTime", "ClosedTime", "FirstActivityTime", "LastActivityTime",
        "Classification", "ClassificationReason", "ClassificationComment", "AlertCount", "Tactics",
        "Products", "CommentCount", "Labels", "IncidentUrl", "Alerts", "Entities", "OtherMatches",
    ),
    AlertsQuery.tool: (
        "SystemAlertId", "AlertName", "AlertSeverity", "Status", "ProductName", "TimeGenerated",
        "Tactics", "EntityLabels", "TotalMatched",
    ),
    AlertTrendQuery.tool: ("BinStart", "AlertSeverity", "AlertCount"),
    TopEntitiesQuery.tool: (
        "EntityType", "EntityValue", "AlertCount", "HighSeverityCount", "FirstSeen", "LastSeen", "TotalMatched",
    ),
    # The list's columns, the row's time (the cursor), and what watches filter on: description, owner's fields.
    IncidentChangesQuery.tool: (
        "IncidentNumber", "Title", "Severity", "Status", "Owner", "CreatedTime", "LastModifiedTime",
        "AlertCount", "Tactics", "Products", "IncidentUrl", "Classification", "TimeGenerated", "Description",
        "OwnerObjectId", "OwnerUPN", "OwnerEmail", "OwnerAssignedTo", "TotalMatched",
    ),
    # The watchlist's own columns (SearchKey is the UPN), then the service's "now" to judge shifts by.
    OnCallQuery.tool: (
        "SearchKey", "Name", "UPN", "Email", "Phone", "Location", "Team", "ShiftStart", "ShiftEnd", "AsOf",
        "TotalMatched",
    ),
}
# Queries the bot runs itself: no tool declares them, so the model is never offered them.
INTERNAL_QUERIES: tuple[str, ...] = (IncidentChangesQuery.tool,)


# How an entity of each type is identified, for "top entities" and entity lists. Each rule is a list
# of alternatives tried in order: (fields that must all be non-empty, separator to join them with).
# Types without a rule (process, registry-value, ...) are not counted as entities on their own.
# Sources: Microsoft Learn "Microsoft Sentinel entity types reference"
# (learn.microsoft.com/azure/sentinel/entities-reference: identifying fields per type), and how Microsoft's
# own SecurityAlert detections in the Azure/Azure-Sentinel repository read Entities (ip -> Address,
# account -> Name + UPNSuffix or AadUserId).
ENTITY_VALUE_RULES: dict[str, tuple[tuple[tuple[str, ...], str], ...]] = {
    "account": ((("Name", "UPNSuffix"), "@"), (("Name",), ""), (("AadUserId",), "")),
    "host": ((("HostName",), ""), (("NetBiosName",), ""), (("AzureID",), "")),
    "ip": ((("Address",), ""),),
    "url": ((("Url",), ""),),
    "file": ((("Name",), ""),),
    "filehash": ((("Value",), ""),),
    "mailbox": ((("MailboxPrimaryAddress",), ""), (("Upn",), "")),
    "dns": ((("DomainName",), ""),),
    "cloud-application": ((("Name",), ""), (("AppId",), "")),
    "azure-resource": ((("ResourceId",), ""),),
    "registry-key": ((("Hive", "Key"), "\\"),),
    "malware": ((("Name",), ""),),
}


def entity_value(entity: object) -> str | None:
    """The identifying value of one Entities item, by ENTITY_VALUE_RULES; None when it has none.

    Mirrors the KQL built by ``kql.entity_value_expression`` so both backends agree.
    """
    if not isinstance(entity, dict):
        return None
    rules = ENTITY_VALUE_RULES.get(_kql_tostring(entity.get("Type")))
    if not rules:
        return None
    for fields, separator in rules:
        values = [_kql_tostring(entity.get(f)) for f in fields]
        if all(values):
            return separator.join(values)
    return None


def _kql_tostring(value: object) -> str:
    """KQL's tostring() for JSON values: null -> "", booleans lower case, containers as JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


# Parameters of each query and how each is parsed (defaults live in the parsers).
_PARAMETERS: dict[str, dict[str, Callable[[object], Any]]] = {
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
    IncidentDetailQuery.tool: {"incident_ref": parse_incident_ref},
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
    AlertTrendQuery.tool: {
        "time_window": lambda v: parse_time_window(v, TimeWindow.LAST_7D),
        "min_severity": parse_severity,
        "bin_size": parse_bin_size,
    },
    TopEntitiesQuery.tool: {
        "time_window": lambda v: parse_time_window(v, TimeWindow.LAST_7D),
        "min_severity": parse_severity,
        "limit": lambda v: parse_limit(v, DEFAULT_ENTITY_LIMIT, MAX_ENTITY_LIMIT),
        "entity": parse_entity,
    },
    IncidentChangesQuery.tool: {
        "since": parse_since,
        "limit": lambda v: parse_limit(v, MAX_CHANGES, MAX_CHANGES),
    },
    OnCallQuery.tool: {},
}

_CONSTRUCTORS: dict[str, Callable[..., Query]] = {
    IncidentsQuery.tool: lambda time_window, min_severity, limit, **filters: IncidentsQuery(
        time_window, min_severity, limit, _filters(filters)),
    IncidentDetailQuery.tool: lambda incident_ref: IncidentDetailQuery(incident_ref),
    AlertsQuery.tool: lambda time_window, min_severity, limit, **filters: AlertsQuery(
        time_window, min_severity, limit, _filters(filters)),
    AlertTrendQuery.tool: lambda time_window, min_severity, bin_size: AlertTrendQuery(
        time_window, min_severity, bin_size
    ),
    TopEntitiesQuery.tool: lambda time_window, min_severity, limit, entity: TopEntitiesQuery(
        time_window, min_severity, limit, entity),
    IncidentChangesQuery.tool: lambda since, limit: IncidentChangesQuery(since, limit),
    OnCallQuery.tool: lambda: OnCallQuery(),
}

QUERY_NAMES: tuple[str, ...] = tuple(_PARAMETERS)
MODEL_QUERY_NAMES: tuple[str, ...] = tuple(name for name in QUERY_NAMES if name not in INTERNAL_QUERIES)


def _filters(values: dict[str, Any]) -> Filters:
    """Filters from parsed parameter values ("from"/"to" are Python keywords, hence the mapping)."""
    renamed = {"severity": "severities", "from": "start", "to": "end"}
    return Filters(**{renamed.get(name, name): value for name, value in values.items()})


def parameter_names(tool: str) -> tuple[str, ...]:
    return tuple(_PARAMETERS[tool])


def make_query(tool: str, arguments: Mapping[str, object] | None = None) -> Query:
    """A validated query from a tool name and loosely typed arguments (model output, a command, JSON).

    Raises ``InvalidParameter`` for unknown names or bad values; missing values take their defaults.
    """
    if tool not in _PARAMETERS:
        raise InvalidParameter("tool", f"{tool!r} is not one of: {', '.join(QUERY_NAMES)}")
    arguments = dict(arguments or {})
    parsers = _PARAMETERS[tool]
    unknown = sorted(set(arguments) - set(parsers))
    if unknown:
        raise InvalidParameter(
            unknown[0], f"{tool} has no parameter {unknown[0]!r}; its parameters are: {', '.join(parsers)}"
        )
    if tool == IncidentDetailQuery.tool and "incident_ref" not in arguments:
        raise InvalidParameter("incident_ref", "is required: an incident number (e.g. 42) or words from its title")
    if tool == IncidentChangesQuery.tool and "since" not in arguments:
        raise InvalidParameter("since", "is required: the time after which changes are wanted (ISO 8601)")
    values = {name: parse(arguments.get(name)) for name, parse in parsers.items()}
    return _CONSTRUCTORS[tool](**values)
