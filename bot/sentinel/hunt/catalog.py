"""What a hunt may read: the allow-listed tables, their columns and Kusto types, and typed virtual columns.

The allow-list, the columns a hunt shows by default, and each table's columns and types come from the table catalog
(``bot/sentinel/catalog.py``, ``tables.json``: the visible columns of each table, copied from the product's
reference schemas). A *virtual column* is a field analysts reach inside a dynamic (or JSON text)
column, declared once here with its type, its KQL expression and its path for the demo's ``json_extract``, so a
hunt filters on ``Country`` and nobody writes ``parse_json``. An alias (``ParentProcess``) names an existing
column the way analysts ask for it.

SecurityIncident is left out on purpose: it holds one row per update, and the incident tools read its latest state;
SecurityAlert is in (raw rows, re-emitted on updates: a hunt over it may show one alert more than once).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from bot.sentinel import catalog

# Kusto types a hunt can compare, by what a filter value must be.
STRING_TYPES = frozenset({"string", "guid"})
NUMBER_TYPES = frozenset({"int", "long", "real", "decimal"})
TIME_COLUMN = "TimeGenerated"  # every allow-listed table has it: the window applies to it


@dataclass(frozen=True)
class Column:
    """A column a hunt can name: a table's own, or a virtual one (``path`` into ``source``, or an alias)."""

    name: str
    type: str  # the Kusto type of the value the hunt sees
    source: str = ""  # virtual: the table's column the value comes from ("" for a table's own column)
    path: tuple[str | int, ...] = ()  # virtual: the keys/indexes inside the source's JSON (empty: an alias)
    source_is_text: bool = False  # the source column is JSON held as a string (needs parse_json in KQL)
    computed: Computed | None = None  # a column the hunt itself computes (its ``extend``)

    @property
    def virtual(self) -> bool:
        """Computed before the conditions read it: a field inside JSON, an alias, or the hunt's own ``extend``."""
        return bool(self.source) or self.computed is not None


@dataclass(frozen=True)
class Computed:
    """How a hunt computes a column (``bot.sentinel.hunt.computed``): one function of a small closed set over
    one column of its table (``of``), with its typed arguments; the result is text."""

    fn: str
    of: Column
    args: tuple[str | int, ...] = ()


@dataclass(frozen=True)
class Table:
    name: str
    columns: dict[str, Column]  # by name, the table's own first, then the virtual ones
    defaults: tuple[str, ...]  # the columns a hunt shows when it names none

    def find(self, name: str) -> Column | None:
        """A column by name, any letter case (the canonical spelling comes back)."""
        column = self.columns.get(name)
        if column is not None:
            return column
        lowered = name.lower()
        return next((c for c in self.columns.values() if c.name.lower() == lowered), None)

    @property
    def virtual_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns.values() if c.virtual)


# (name, type, source column, path): the fields inside dynamic columns that analysts hunt on.
_SIGNIN_VIRTUAL = (
    ("Country", "string", "LocationDetails", ("countryOrRegion",)),
    ("City", "string", "LocationDetails", ("city",)),
    ("State", "string", "LocationDetails", ("state",)),
    ("DeviceOS", "string", "DeviceDetail", ("operatingSystem",)),
    ("Browser", "string", "DeviceDetail", ("browser",)),
    ("DeviceName", "string", "DeviceDetail", ("displayName",)),
    ("DeviceIsCompliant", "bool", "DeviceDetail", ("isCompliant",)),
    ("ErrorCode", "long", "Status", ("errorCode",)),
    ("FailureReason", "string", "Status", ("failureReason",)),
    ("MfaMethod", "string", "MfaDetail", ("authMethod",)),
    ("MfaAuthDetail", "string", "MfaDetail", ("authDetail",)),
    ("DeviceId", "string", "DeviceDetail", ("deviceId",)),
    ("DeviceTrustType", "string", "DeviceDetail", ("trustType",)),
)
_PARENT_ALIASES = (
    ("ParentProcess", "string", "InitiatingProcessFileName", ()),
    ("ParentCommandLine", "string", "InitiatingProcessCommandLine", ()),
    ("GrandparentProcess", "string", "InitiatingProcessParentFileName", ()),
)
VIRTUAL: dict[str, tuple[tuple[str, str, str, tuple[str | int, ...]], ...]] = {
    "SigninLogs": _SIGNIN_VIRTUAL,
    "AADNonInteractiveUserSignInLogs": _SIGNIN_VIRTUAL,
    "AuditLogs": (
        ("InitiatedByUser", "string", "InitiatedBy", ("user", "userPrincipalName")),
        ("InitiatedByIp", "string", "InitiatedBy", ("user", "ipAddress")),
        ("InitiatedByApp", "string", "InitiatedBy", ("app", "displayName")),
        ("TargetName", "string", "TargetResources", (0, "displayName")),
        ("TargetUpn", "string", "TargetResources", (0, "userPrincipalName")),
        ("TargetType", "string", "TargetResources", (0, "type")),
        ("TargetId", "string", "TargetResources", (0, "id")),
        ("TargetProperties", "dynamic", "TargetResources", (0, "modifiedProperties")),  # consent scopes, roles
    ),
    "BehaviorAnalytics": (
        ("FirstTimeUserConnectedFromCountry", "bool", "ActivityInsights", ("FirstTimeUserConnectedFromCountry",)),
        ("CountryUncommonlyConnectedFromAmongPeers", "bool", "ActivityInsights",
         ("CountryUncommonlyConnectedFromAmongPeers",)),
        ("FirstTimeUserConnectedViaISP", "bool", "ActivityInsights", ("FirstTimeUserConnectedViaISP",)),
        ("IsDormantAccount", "bool", "UsersInsights", ("IsDormantAccount",)),
    ),
    "DeviceInfo": (
        ("LoggedOnUser", "string", "LoggedOnUsers", (0, "UserName")),
    ),
    # Windows security events and firewall logs, named as analysts ask for them beside Defender's tables.
    "SecurityEvent": (
        ("DeviceName", "string", "Computer", ()),
        ("RemoteIP", "string", "IpAddress", ()),
        ("ParentProcess", "string", "ParentProcessName", ()),
    ),
    "CommonSecurityLog": (
        ("Action", "string", "DeviceAction", ()),
        ("SourceUser", "string", "SourceUserName", ()),
    ),
    "AADUserRiskEvents": (
        ("Country", "string", "Location", ("countryOrRegion",)),
        ("City", "string", "Location", ("city",)),
    ),
    "DeviceProcessEvents": _PARENT_ALIASES,
    "DeviceNetworkEvents": _PARENT_ALIASES,
    "DeviceFileEvents": _PARENT_ALIASES,
    "DeviceLogonEvents": _PARENT_ALIASES,
}

# Join keys beyond the catalog's entity columns (which are keys of their kind): fields read from JSON, and ids that
# tie one table's rows to another's (an email to its URLs and clicks).
_EXTRA_KEYS: dict[str, dict[str, str]] = {
    "AuditLogs": {"InitiatedByUser": "account", "TargetUpn": "account", "InitiatedByIp": "ip"},
    "EmailEvents": {"NetworkMessageId": "message"},
    "EmailUrlInfo": {"NetworkMessageId": "message"},
    "UrlClickEvents": {"NetworkMessageId": "message"},
    "DeviceProcessEvents": {"DeviceName": "host"},
    "SecurityEvent": {"Computer": "host", "TargetUserName": "username", "SubjectUserName": "username"},
    "DeviceLogonEvents": {"AccountName": "username"},
    "IdentityInfo": {"AccountName": "username"},
}
_INDICATOR = frozenset({"ip", "url", "domain", "hash"})  # what a threat-intelligence observable can be


@cache
def join_keys() -> dict[str, dict[str, str]]:
    """{table: {column a hunt joins on: the kind of key it holds}} for the allow-listed tables."""
    out: dict[str, dict[str, str]] = {}
    for name in _allowed():
        keys = {column: kind for kind, columns in catalog.table(name).entities.items() for column in columns
                if column.isidentifier()}  # a path into JSON is joined through its virtual column
        out[name] = keys | _EXTRA_KEYS.get(name, {})
    return out


def join_kind(table: str, column: str) -> str | None:
    return join_keys().get(table, {}).get(column)


def joinable(left: str | None, right: str | None) -> bool:
    """Two keys of one kind; an indicator joins any observable it can be (an IP, a URL, a domain, a hash)."""
    if left is None or right is None:
        return False
    return left == right or (left == "indicator" and right in _INDICATOR) or (right == "indicator"
                                                                              and left in _INDICATOR)


@cache
def tables() -> dict[str, Table]:
    """The allow-listed tables, by name."""
    out = {}
    for name, defaults in _allowed().items():
        own = {column: Column(column, kind) for column, kind in catalog.schema()[name]}
        virtual = {}
        for vname, kind, source, path in VIRTUAL.get(name, ()):
            assert vname not in own, f"{name}.{vname}: a virtual column may not hide a real one"
            source_type = own[source].type  # a KeyError here is a declaration error, found by the tests
            virtual[vname] = Column(vname, kind, source, path, source_is_text=bool(path) and source_type == "string")
        table = Table(name, own | virtual, defaults)
        assert all(table.find(c) for c in defaults), name
        out[name] = table
    return out


def _allowed() -> dict[str, tuple[str, ...]]:
    """The allow-list (``hunt`` in tables.json), with the columns shown when a hunt names none."""
    return {name: table.hunt for name, table in catalog.tables().items() if table.hunt}


def table_names() -> tuple[str, ...]:
    return tuple(_allowed())
