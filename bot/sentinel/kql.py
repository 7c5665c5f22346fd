"""KQL the read queries share, in Microsoft's own idioms (a query's whole text: ``queries.kql_of``).

The idioms are those of Microsoft's Sentinel workbooks and detections (Azure/Azure-Sentinel repository:
Workbooks/IncidentOverview.json, Workbooks/SecurityOperationsEfficiency.json, Detections/SecurityAlert/)
and the table references on Microsoft Learn ("SecurityIncident", "Microsoft Sentinel security alert
schema reference").

- SecurityIncident has one row per update: take the latest row per IncidentNumber (arg_max).
- SecurityAlert rows are re-emitted on updates: dedupe by SystemAlertId (arg_max).
- Incidents reach their alerts through the AlertIds array (mv-expand, join on SystemAlertId).
- Entities is a JSON *string*: parse_json, expand the items and the entities defined inline under them
  (``nested_entities``), drop `$ref`-only items (no Type); identify each by ``entities.ENTITY_VALUE_RULES``.
- Only the needed columns leave the service, and every list is capped server-side.

Values reach the text only as validated enums and ints, or through ``string_literal``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from functools import cache

from bot.sentinel.entities import (
    ENTITY_VALUE_RULES,
    ID_ONLY_FIELDS,
    IDENTITY_FIELDS,
    NESTED_PATHS,
    NULL_GUID,
    STRONG_SID_PREFIXES,
    UNIDENTIFYING,
)
from bot.sentinel.params import DETAIL_LOOKBACK, Severity, TimeWindow
from bot.sentinel.spec import FilteredQuery

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def string_literal(value: str) -> str:
    """``value`` as one double-quoted KQL string literal.

    Backslash, quote and the common whitespace controls are escaped; other control characters and
    unpaired surrogates cannot be written in a literal and become U+FFFD, so nothing a user types can
    end the literal or change the query around it.
    """
    out = ['"']
    for ch in value:
        escaped = _ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif _unwritable(ch):
            out.append("\ufffd")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def as_written(value: str) -> str:
    """``value`` as a literal of it holds it: characters a literal cannot hold become U+FFFD (so the demo, which
    takes values as parameters, compares with the same text the service gets)."""
    return "".join("\ufffd" if ch not in _ESCAPES and _unwritable(ch) else ch for ch in value)


def _unwritable(ch: str) -> bool:
    code = ord(ch)
    return code < 0x20 or code == 0x7F or 0xD800 <= code <= 0xDFFF


def severity_list(min_severity: Severity) -> str:
    """``("High", "Medium")`` for Medium: the severities at or above the minimum."""
    return in_list(min_severity.at_least())


def in_list(severities: tuple[Severity, ...]) -> str:
    return "(" + ", ".join(string_literal(s.value) for s in severities) + ")"


def ago(window: TimeWindow) -> str:
    return f"ago({window.kql_timespan})"


SEVERITY_RANK = 'case(Severity == "High", 0, Severity == "Medium", 1, Severity == "Low", 2, 3)'
OWNER = "coalesce(tostring(Owner.assignedTo), tostring(Owner.email), tostring(Owner.userPrincipalName))"
ALERT_COUNT = "coalesce(toint(AdditionalData.alertsCount), toint(array_length(AlertIds)))"


@cache
def entity_value_expression(var: str = "Entity", type_column: str = "EntityType") -> str:
    """A KQL expression giving an Entities item's identifying value (ENTITY_VALUE_RULES), or ""."""

    def field(name: str) -> str:
        return f"tostring({var}[{string_literal(name)}])"

    branches = []
    for entity_type, alternatives in ENTITY_VALUE_RULES.items():
        expression = '""'
        for fields, separator, spaceless in reversed(alternatives):
            present = " and ".join([f"isnotempty({field(f)})" for f in fields]
                                   + [f'{field(f)} !contains " "' for f in spaceless]
                                   + [f"{field(f)} !contains {string_literal(separator)}" for f in fields[:-1]])
            parts = f", {string_literal(separator)}, ".join(field(f) for f in fields) if separator else None
            value = f"strcat({parts})" if parts else field(fields[0])
            present += "".join(f" and {value} != {string_literal(v)}"
                               for v in sorted(UNIDENTIFYING.get(entity_type, ())))
            expression = f"iff({present}, {value}, {expression})"
        branches.append(f"{type_column} == {string_literal(entity_type)}, {expression}")
    return "case(" + ",\n        ".join(branches) + ',\n        "")'


@cache
def nested_entities(var: str = "Top") -> str:
    """A dynamic array of ``var`` and the objects inline under it at ``entities.NESTED_PATHS`` (a process's image
    file and its hashes, its parent, account and host, ...): where an entity may be defined inside another."""

    def path(steps: tuple[str | int, ...]) -> str:
        return var + "".join(f"[{step}]" if isinstance(step, int) else f"[{string_literal(step)}]" for step in steps)

    return "pack_array(" + ", ".join([var, *(path(p) for p in NESTED_PATHS)]) + ")"


def expand_entities(alerts: str, indent: str = "    ") -> str:
    """Rows of ``alerts`` expanded to one row per identifiable entity (EntityType, EntityValue): the top-level items
    and the entities defined inline under them (``entities.defined_entities``)."""
    return (
        f"{alerts}\n"
        f"{indent}| mv-expand Top = parse_json(Entities)\n"
        f"{indent}| mv-expand Entity = {nested_entities()}\n"
        f"{indent}| extend EntityType = tostring(Entity.Type)\n"
        f"{indent}| where isnotempty(EntityType)\n"
        f"{indent}| extend EntityValue = {entity_value_expression()}\n"
        f"{indent}| where isnotempty(EntityValue)"
    )


def order_by(keys: tuple[tuple[str, bool], ...]) -> str:
    return ", ".join(f"{column} {'desc' if descending else 'asc'}" for column, descending in keys)


# The owner's fields a person filter compares with (case-insensitively), the sign-in name's part before "@" too.
_OWNER_FIELDS = ("tostring(Owner.objectId)", "tostring(Owner.userPrincipalName)", "tostring(Owner.email)",
                 "tostring(Owner.assignedTo)", 'tostring(split(tostring(Owner.userPrincipalName), "@")[0])')


def declarations(*, owner: str | None = None, search: str | None = None, entity: str | None = None,
                 product: str | None = None, involved_alerts: bool = False) -> str:
    """The analyst's free text, each value declared once as one escaped literal and used by name below;
    ``involved_alerts``: also the ids of the alerts that name the entity, by any spelling of its identity (an
    entity filter on incidents or alerts)."""
    lines = [f"let owner_wanted = {string_literal(owner)};\n" if owner is not None else "",
             f"let search_text = {string_literal(search)};\n" if search is not None else "",
             f"let entity_wanted = tolower({string_literal(entity)});\n" if entity is not None else "",
             f"let product_wanted = {string_literal(product)};\n" if product is not None else ""]
    if entity is not None and involved_alerts:
        resolved = resolve_identities("sightings")
        lines.append(f"""{identity_tables()}{wanted_identities()}let involved_alerts = toscalar({resolved}
    | where set_has_element(wanted_identities, IdentityKey)
    | summarize make_set(SystemAlertId));\n""")
    return "".join(lines)


def filter_declarations(query: FilteredQuery) -> str:
    f = query.filters
    return declarations(owner=f.owner.person if f.owner else None, search=f.search, entity=f.entity,
                        product=f.product, involved_alerts=True)


JSON_VERBATIM = re.compile(r"[A-Za-z0-9.@:_-]+")


# One identity per account and host across spellings (``entities.IdentityMap``, which the demo applies; the same
# rules here). An entity object's keys: its value and its strong identifiers, lower case; its anchor: how well its
# value names the owner, then the value. Learned over the alerts of the last DETAIL_LOOKBACK days.
def _field(name: str, var: str = "Entity") -> str:
    return f"tostring({var}[{string_literal(name)}])"


def _strong_key(name: str) -> str:
    """A strong identifier of an entity object as a lower-case key, or "" (``entities.strong_identifier``)."""
    text = _field(name)
    if name == "Sid":
        test = " or ".join(f"{text} startswith {string_literal(prefix)}" for prefix in STRONG_SID_PREFIXES)
        return f"iff({test}, tolower({text}), \"\")"
    return f"iff(tolower({text}) != {string_literal(NULL_GUID)}, tolower({text}), \"\")"


@cache
def identity_keys_expression() -> str:
    """KQL: the dynamic array of an expanded entity's keys (``entities.identity_keys``; "" for a missing one)."""
    branches = [f"EntityType == {string_literal(kind)}, pack_array(EntityKey, "
                + ", ".join(_strong_key(f) for f in fields) + ")" for kind, fields in IDENTITY_FIELDS.items()]
    return "case(" + ",\n        ".join(branches) + ",\n        pack_array(EntityKey))"


@cache
def identity_anchor_expression() -> str:
    """KQL: an expanded entity's anchor (``entities.identity_anchor``)."""
    id_only = [f"EntityType == {string_literal(kind)} and ("
               + " or ".join(f"tolower({_field(f)}) == EntityKey" for f in fields) + "), \"2\""
               for kind, fields in ID_ONLY_FIELDS.items()]
    return ('strcat(case(EntityType == "account" and EntityKey contains "@", "0",\n        '
            + ",\n        ".join(id_only) + ',\n        "1"), EntityKey)')


def sightings(alerts: str, indent: str = "    ") -> str:
    """``expand_entities`` of ``alerts``, each entity with its lower-case key, its keys and its anchor."""
    return (f"{expand_entities(alerts, indent)}\n"
            f"{indent}| extend EntityKey = tolower(EntityValue)\n"
            f"{indent}| extend Keys = {identity_keys_expression()},\n"
            f"{indent}    Anchor = {identity_anchor_expression()}")


_IDENTITY_TYPES = "(" + ", ".join(string_literal(kind) for kind in IDENTITY_FIELDS) + ")"


def identity_tables() -> str:
    """``sightings``: the entities of the lookback's alerts (latest row each); ``identity_anchors``: each key of an
    account or host to the least anchor carrying it; ``identity_spellings``: each such value's least spelling."""
    alerts = f"""SecurityAlert
    | where TimeGenerated > ago({DETAIL_LOOKBACK.days}d)
    | summarize arg_max(TimeGenerated, AlertSeverity, Entities) by SystemAlertId"""
    return f"""let sightings = materialize({sightings(alerts)}
    | project SystemAlertId, TimeGenerated, AlertSeverity, EntityType, EntityValue, EntityKey, Keys, Anchor);
let identity_anchors = materialize(sightings
    | where EntityType in {_IDENTITY_TYPES}
    | mv-expand Key = Keys to typeof(string)
    | where isnotempty(Key)
    | summarize IdentityAnchor = min(Anchor) by EntityType, Key);
let identity_spellings = sightings
    | where EntityType in {_IDENTITY_TYPES}
    | summarize IdentityValue = min(EntityValue) by EntityType, IdentityKey = EntityKey;
"""


def resolve_identities(rows: str, indent: str = "    ") -> str:
    """``rows`` (sightings) with their identity: ``IdentityKey`` (the least anchor of their keys, else their own
    key) and ``IdentityValue`` (that identity's least spelling, else their own value)."""
    return (f"{rows}\n"
            f"{indent}| mv-expand Key = Keys to typeof(string)\n"
            f"{indent}| lookup kind=leftouter identity_anchors on EntityType, Key\n"
            f"{indent}| summarize IdentityAnchor = min(IdentityAnchor)\n"
            f"{indent}    by SystemAlertId, TimeGenerated, AlertSeverity, EntityType, EntityValue, EntityKey\n"
            f"{indent}| extend IdentityKey = iff(isempty(IdentityAnchor), EntityKey, substring(IdentityAnchor, 1))\n"
            f"{indent}| lookup kind=leftouter identity_spellings on EntityType, IdentityKey\n"
            f"{indent}| extend IdentityValue = iff(isempty(IdentityValue), EntityValue, IdentityValue)")


def wanted_identities() -> str:
    """``wanted_identities``: the identities the analyst's entity names: the value itself, and the identity of
    every entity object that carries it as a key (a SID's account, known by its UPN)."""
    carrying = resolve_identities("sightings | where set_has_element(Keys, entity_wanted)")
    return f"""let wanted_identities = toscalar({carrying}
    | summarize Wanted = set_union(make_set(IdentityKey), pack_array(entity_wanted)));
"""


# An incident with an alert from the wanted product: any of its product names contains it.
_INCIDENT_PRODUCT = """
    | mv-apply Product = AdditionalData.alertProductNames to typeof(string) on (
        summarize ProductMatches = countif(Product contains product_wanted))
    | where ProductMatches > 0"""


def filters(query: FilteredQuery, title: str) -> str:
    """The status, owner, keyword, entity, product, tactic and classification filters on the latest state (after
    arg_max), one ``| where`` each. A tactic is one word, so ``has`` matches it as a whole item of the list."""
    f = query.filters
    parts = []
    if f.status:
        parts.append(f"Status in ({', '.join(string_literal(s) for s in f.status.statuses)})")
    if f.owner and f.owner.person is None:
        parts.append(f"isempty(tostring(Owner.objectId)) and isempty({OWNER})")
    elif f.owner:
        parts.append("(" + "\n        or ".join(f"{field} =~ owner_wanted" for field in _OWNER_FIELDS) + ")")
    if f.search:
        parts.append(f"({title} contains search_text or Description contains search_text)")
    if f.entity and not query.of_alerts:
        parts.append("array_length(set_intersect(AlertIds, involved_alerts)) > 0")
    if f.product and query.of_alerts:
        parts.append("coalesce(ProductName, ProviderName) contains product_wanted")
    if f.tactic:
        tactics = "Tactics" if query.of_alerts else "tostring(AdditionalData.tactics)"
        parts.append(f"{tactics} has {string_literal(f.tactic)}")
    if f.classification:
        parts.append(f"Classification == {string_literal(f.classification)}")
    if f.entity and query.of_alerts:
        parts.append("set_has_element(involved_alerts, SystemAlertId)")
    tail = _INCIDENT_PRODUCT if f.product and not query.of_alerts else ""
    return "".join(f"\n    | where {part}" for part in parts) + tail


def moment(value: datetime) -> str:
    """A validated datetime as a KQL datetime literal (never user text)."""
    return f"datetime({value.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')})"


def bounds(query: FilteredQuery, column: str, *, upper: bool = True) -> str:
    """``column`` inside the query's range: the window ending now, or from/to (a missing "from" is the window's
    length before "to")."""
    f = query.filters
    if not f.ranged:
        return f"{column} > {ago(query.window)}"
    end = moment(f.end) if f.end else None
    start = moment(f.start) if f.start else f"{end} - {query.window.kql_timespan}"
    return f"{column} >= {start}" + (f" and {column} < {end}" if upper and end else "")


def scope(query: FilteredQuery) -> str:
    f = query.filters
    if not f.ranged:
        return f"in the {query.window.label}"
    return " ".join(p for p in (f"from {f.start:%Y-%m-%d %H:%M}" if f.start else "",
                                f"until {f.end:%Y-%m-%d %H:%M}" if f.end else "") if p) + " UTC"




def long_literal(value: int) -> str:
    """A validated whole number as a KQL long literal (never text)."""
    if isinstance(value, bool) or not isinstance(value, int) or not -2**63 <= value < 2**63:
        raise ValueError("not a 64-bit whole number")
    return f"long({value})"


def real_literal(value: float) -> str:
    """A finite number as a KQL real literal (repr: shortest exact, e.g. 1e+20, 0.1)."""
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError("not a finite number")
    return f"real({number!r})"


def bool_literal(value: bool) -> str:
    return "true" if value is True else "false"


def timespan_literal(span: timedelta) -> str:
    """A whole number of minutes as a KQL timespan literal, e.g. ``1440m``."""
    return f"{int(span.total_seconds() // 60)}m"


def bounded_text(column: str, width: int) -> str:
    """KQL: ``column`` whole up to ``width`` characters, else its first ``width`` and "…(n more characters)" (as
    ``models.bounded_text`` writes it), so a huge description never crosses the wire whole."""
    return (f'iff(strlen({column}) > {width}, strcat(substring({column}, 0, {width}), "…(", '
            f'tostring(strlen({column}) - {width}), " more characters)"), {column})')


# SecurityAlert's own fields an alert record carries (rows.alert_fields), as arg_max takes them.
ALERT_FIELDS = "Description, StartTime, EndTime, Techniques, SubTechniques, AlertLink, RemediationSteps"
