"""The read queries: one declaration (``spec.QuerySpec``) per query, one module per query, and their registry.

``QUERIES`` lists them in the order the model is offered their tools. ``make_query`` turns a query's name and
loose arguments into a validated query object; ``spec_of`` gives a query's declaration, which the client,
``kql_of``, both backends and the response reader use. Adding a query is a module here (its query object,
parameters, KQL, decoder and demo evaluation), its line in ``QUERIES``, and its tool in ``bot.tools.queries``.
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.sentinel.entities import ENTITY_VALUE_RULES, MV_EXPAND_LIMIT, entity_value
from bot.sentinel.hunt import Hunt
from bot.sentinel.params import MAX_TREND_BINS, InvalidParameter
from bot.sentinel.queries import (
    alert_trend,
    alerts,
    analyst_kql,
    entity_identity,
    hunt,
    incident_changes,
    incident_detail,
    incidents,
    on_call,
    similar_incidents,
    top_entities,
)
from bot.sentinel.queries.alert_trend import AlertTrendQuery
from bot.sentinel.queries.alerts import AlertsQuery
from bot.sentinel.queries.analyst_kql import AnalystQuery
from bot.sentinel.queries.entity_identity import EntityIdentityQuery
from bot.sentinel.queries.evidence import EVIDENCE_SPECS, alert_incidents, counterparty_intel
from bot.sentinel.queries.evidence.alert_incidents import AlertIncidentsQuery
from bot.sentinel.queries.evidence.common import EvidenceQuery
from bot.sentinel.queries.evidence.counterparty_intel import CounterpartyIntelQuery
from bot.sentinel.queries.incident_changes import MAX_CHANGES, IncidentChangesQuery
from bot.sentinel.queries.incident_detail import IncidentDetailQuery
from bot.sentinel.queries.incidents import IncidentsQuery
from bot.sentinel.queries.on_call import MAX_ON_CALL, ON_CALL_WATCHLIST, OnCallQuery
from bot.sentinel.queries.similar_incidents import SimilarIncidentsQuery
from bot.sentinel.queries.top_entities import TopEntitiesQuery
from bot.sentinel.spec import (
    ALERT_SORT,
    INCIDENT_SORT,
    MAX_ALERT_ENTITY_LABELS,
    MAX_DESCRIPTION_CHARS,
    MAX_DETAIL_ALERTS,
    MAX_DETAIL_ENTITIES,
    MAX_OTHER_MATCHES,
    QuerySpec,
)

# A query object: what a declaration's ``make`` returns (a test may register one of its own).
Query = (IncidentsQuery | IncidentDetailQuery | AlertsQuery | AlertTrendQuery | TopEntitiesQuery | OnCallQuery
         | IncidentChangesQuery | Hunt | AnalystQuery | EvidenceQuery | EntityIdentityQuery | CounterpartyIntelQuery
         | AlertIncidentsQuery | SimilarIncidentsQuery)


QUERIES: tuple[QuerySpec, ...] = (
    incidents.SPEC,
    incident_detail.SPEC,
    alerts.SPEC,
    alert_trend.SPEC,
    top_entities.SPEC,
    on_call.SPEC,
    hunt.SPEC,
    incident_changes.SPEC,
    analyst_kql.SPEC,
    entity_identity.SPEC,  # internal: an investigation asks it first, for every key of an account or host
    *EVIDENCE_SPECS,  # internal: an investigation runs them (bot.investigation)
    counterparty_intel.SPEC,  # internal: an investigation's second round, its rows' counterparties in TI
    alert_incidents.SPEC,  # internal: the second round too, when an alert may be of a false/benign positive
    similar_incidents.SPEC,  # internal: an incident summary's incidents sharing its alert names or entities
)
_BY_NAME: dict[str, QuerySpec] = {spec.name: spec for spec in QUERIES}

QUERY_NAMES: tuple[str, ...] = tuple(_BY_NAME)
INTERNAL_QUERIES: tuple[str, ...] = tuple(spec.name for spec in QUERIES if spec.internal)
MODEL_QUERY_NAMES: tuple[str, ...] = tuple(spec.name for spec in QUERIES if not spec.internal)
COLUMNS: dict[str, tuple[str, ...]] = {spec.name: spec.columns for spec in QUERIES}


def spec_of(name: str) -> QuerySpec:
    """A query's declaration by name; KeyError for an unknown one."""
    return _BY_NAME[name]


def is_query(name: str) -> bool:
    return name in _BY_NAME


def register(spec: QuerySpec) -> None:
    """Add a declaration at run time (a test's own query module); its name must be new. The module-level name
    tuples keep the declared set; lookups by name (``spec_of``, ``make_query``) see the added one."""
    if spec.name in _BY_NAME:
        raise ValueError(f"a query named {spec.name!r} is already declared")
    _BY_NAME[spec.name] = spec
    COLUMNS[spec.name] = spec.columns


def unregister(name: str) -> None:
    _BY_NAME.pop(name, None)
    COLUMNS.pop(name, None)


def parameter_names(tool: str) -> tuple[str, ...]:
    return tuple(p.name for p in _BY_NAME[tool].params)


def limit_of(tool: str) -> tuple[int, int] | None:
    """(default, maximum) of a list query's row limit; None for a query without one (it is no list to page)."""
    spec = _BY_NAME.get(tool)
    limit = next((p for p in spec.params if p.name == "limit"), None) if spec else None
    if limit is None or not isinstance(limit.maximum, int):
        return None
    return int(limit.parse(None)), limit.maximum


def kql_of(query: Query) -> str:
    """The KQL text of a query object, by its declaration."""
    return _BY_NAME[query.tool].kql(query)


def make_query(tool: str, arguments: Mapping[str, object] | None = None) -> Query:
    """A validated query from a tool name and loosely typed arguments (model output, a command, JSON).

    Raises ``InvalidParameter`` for unknown names or bad values; missing values take their defaults.
    """
    spec = _BY_NAME.get(tool)
    if spec is None:
        raise InvalidParameter("tool", f"{tool!r} is not one of: {', '.join(_BY_NAME)}")
    return spec.query(arguments)


__all__ = [
    "ALERT_SORT",
    "COLUMNS",
    "ENTITY_VALUE_RULES",
    "INCIDENT_SORT",
    "INTERNAL_QUERIES",
    "MAX_ALERT_ENTITY_LABELS",
    "MAX_CHANGES",
    "MAX_DESCRIPTION_CHARS",
    "MAX_DETAIL_ALERTS",
    "MAX_DETAIL_ENTITIES",
    "MAX_ON_CALL",
    "MAX_OTHER_MATCHES",
    "MAX_TREND_BINS",
    "MODEL_QUERY_NAMES",
    "MV_EXPAND_LIMIT",
    "ON_CALL_WATCHLIST",
    "QUERIES",
    "QUERY_NAMES",
    "AlertTrendQuery",
    "AlertsQuery",
    "IncidentChangesQuery",
    "IncidentDetailQuery",
    "IncidentsQuery",
    "OnCallQuery",
    "Query",
    "QuerySpec",
    "TopEntitiesQuery",
    "entity_value",
    "is_query",
    "kql_of",
    "make_query",
    "parameter_names",
    "register",
    "spec_of",
    "unregister",
]
