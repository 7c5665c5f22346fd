"""What a read query declaration is, and what the queries share.

Each read query is declared once, as data, in its own module of ``bot.sentinel.queries`` (the way msticpy
declares its queries): a ``QuerySpec`` with the query's name, its typed parameters (parser, default, limits,
the words the model reads), the query object they make, its KQL, its result columns, the decoder of its rows
and its evaluation on the demo workspace. Everything that runs queries (the client, the KQL text, both
backends, the response reader) looks the declaration up by name; nothing keeps lists of its own. The tool the
model calls (description, status text, compact text, card) is declared in ``bot.tools.queries`` and refers to
this declaration, so the dependency direction (sentinel below cards below tools) holds.

This module also holds what several queries share: the base query shapes (a window and a minimum severity,
a limit, the list filters), caps on nested lists, sort orders, and how an entity is identified.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar, Protocol

from bot.sentinel.params import (
    ALERT_STATUSES,
    DETAIL_LOOKBACK,
    INCIDENT_STATUSES,
    Filters,
    InvalidParameter,
    Severity,
    SortOrder,
    TimeWindow,
    parse_classification,
    parse_entity,
    parse_limit,
    parse_moment,
    parse_owner,
    parse_product,
    parse_search,
    parse_severities,
    parse_severity,
    parse_sort,
    parse_status,
    parse_tactic,
    parse_time_window,
)

Row = Mapping[str, Any]


class DemoWorkspace(Protocol):
    """What a query's demo evaluation may read besides the database: the backend's seed and watchlists."""

    roster: list[dict[str, Any]]  # the OnCall watchlist's rows

    @property
    def seed(self) -> int: ...


@dataclass(frozen=True)
class Param:
    """One parameter: how a loose value (model output, a command, JSON) is parsed and checked, and its schema."""

    name: str
    parse: Callable[[object], Any]  # None -> the default; a bad value raises InvalidParameter
    description: str = ""  # for the model; sent on every call, so short (empty: left out)
    kind: str = "string"  # JSON schema type
    enum: tuple[str, ...] = ()
    default: Any = None  # shown in the schema (the parser applies it)
    minimum: int | None = None
    maximum: int | None = None
    required: str = ""  # required when set: what to say when it is missing
    field: str | None = None  # the keyword the query's ``make`` takes, when not ``name`` ("from" -> start)
    items: Any = None  # an array's item schema (JSON schema)


@dataclass(frozen=True)
class QuerySpec:
    """One read query, declared once."""

    name: str
    params: tuple[Param, ...]
    make: Callable[..., Any]  # the parsed values, by field -> the query object (may raise InvalidParameter)
    kql: Callable[[Any], str]  # the query object -> KQL (values only as escaped literals)
    # The result columns and their Kusto types, in order: the KQL projects them (the Kusto parser test holds the two
    # together), the demo returns them, the Log Analytics fake serves them.
    result: tuple[tuple[str, str], ...]
    keys: tuple[str, ...]  # a row with none of these is unusable (skipped and counted)
    decode: Callable[[Row], Any]  # a row -> a typed record; ValueError (rows.SkippedRow) leaves it out
    demo: Callable[[Any, sqlite3.Connection, datetime, DemoWorkspace], list[dict[str, Any]]]
    internal: bool = False  # run by the bot itself (a poller), never offered to the model
    left_out: str = ""  # rows the decoder leaves out on purpose: the warning's words (then never an error)
    # Rows past it are cut and the result says so (the KQL asks for one more, so a cut is known): free text's cap.
    row_cap: int | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        """The result columns' names, in order."""
        return tuple(name for name, _ in self.result)

    def query(self, arguments: Mapping[str, object] | None = None) -> Any:
        """The validated query object from loosely typed arguments; missing values take their defaults."""
        arguments = dict(arguments or {})
        names = tuple(p.name for p in self.params)
        unknown = sorted(set(arguments) - set(names))
        if unknown:
            raise InvalidParameter(unknown[0], f"{self.name} has no parameter {unknown[0]!r}; its parameters are: "
                                               f"{', '.join(names) or 'none'}")
        for param in self.params:
            if param.required and arguments.get(param.name) is None:
                raise InvalidParameter(param.name, f"is required: {param.required}")
        return self.make(**{p.field or p.name: p.parse(arguments.get(p.name)) for p in self.params})


# Parameters several queries take. Every description is sent on every model call: the window's hint once (on
# the first tool) is enough for the model.
def window_param(default: TimeWindow, hint: bool = False) -> Param:
    return Param("time_window", lambda v: parse_time_window(v, default),
                 "Ending now; overnight/today = last_24h, this week = last_7d." if hint else "",
                 enum=tuple(w.value for w in TimeWindow), default=default.value)


SEVERITY_PARAM = Param("min_severity", parse_severity, enum=tuple(s.value for s in Severity))
ENTITY_PARAM = Param("entity", parse_entity, "A host, account, IP, hash, URL...")


def limit_param(default: int, maximum: int) -> Param:
    # No description: a "limit" with its minimum and maximum on a list tool says it all.
    return Param("limit", lambda v: parse_limit(v, default, maximum), kind="integer", minimum=1, maximum=maximum)


def filter_params(table: str, sorts: tuple[SortOrder, ...]) -> tuple[Param, ...]:
    """The optional filters of a list (incidents or alerts); ``make`` gets them as ``Filters`` fields."""
    statuses = INCIDENT_STATUSES if table == "incident" else ALERT_STATUSES[:-1]
    return (
        Param("severity", parse_severities, "e.g. High,Low", field="severities"),
        # "open" is every status but the closed ones.
        Param("status", lambda v: parse_status(v, table), enum=("open", *statuses)),
        *((Param("owner", parse_owner, "Name, UPN, me or unassigned."),) if table == "incident" else ()),
        Param("search", parse_search, "In title or description."),
        Param("from", lambda v: parse_moment(v, "from"), "ISO 8601.", field="start"),
        Param("to", lambda v: parse_moment(v, "to"), field="end"),
        Param("sort", lambda v: parse_sort(v, table), enum=tuple(o.value for o in sorts)),  # severity unless asked
        ENTITY_PARAM,
        # No descriptions, no enums (16 tactics would cost tokens on every call): the names say what they take,
        # the parsers accept "credential access" or "true positive", and a wrong value's error lists the valid ones.
        Param("product", parse_product),
        Param("tactic", parse_tactic),
        *((Param("classification", parse_classification),) if table == "incident" else ()),
    )


# Caps on nested lists inside one result row.
MAX_DETAIL_ALERTS = 50
MAX_DETAIL_ENTITIES = 50
MAX_ALERT_ENTITY_LABELS = 50
MAX_OTHER_MATCHES = 5
MAX_DESCRIPTION_CHARS = 4000
# SecurityAlert's own fields as a query result carries them (rows.alert_fields reads them).
ALERT_FIELD_COLUMNS = (("Description", "string"), ("StartTime", "datetime"), ("EndTime", "datetime"),
                       ("Techniques", "string"), ("SubTechniques", "string"), ("AlertLink", "string"),
                       ("RemediationSteps", "string"))


@dataclass(frozen=True)
class WindowQuery:
    """A query over a time window ending now, at or above a minimum severity."""

    window: TimeWindow
    min_severity: Severity

    @property
    def timespan(self) -> timedelta:
        return self.window.duration

    def parameters(self) -> dict[str, Any]:
        return {"time_window": self.window.value, "min_severity": self.min_severity.value}


@dataclass(frozen=True)
class ListQuery(WindowQuery):
    limit: int

    def parameters(self) -> dict[str, Any]:
        return super().parameters() | {"limit": self.limit}


@dataclass(frozen=True)
class FilteredQuery(ListQuery):
    filters: Filters = field(default_factory=Filters)

    of_alerts: ClassVar[bool] = False  # alerts (no owner; their own statuses), not incidents

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



