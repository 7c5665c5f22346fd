"""What the data layer returns: typed records inside a QueryResult, or a QueryError.

Records are frozen dataclasses; ``QueryResult.columns``/``rows`` are derived from them so there is one
source of truth. ``to_dict()`` gives plain JSON-ready data for logs, state and the model.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from bot.sentinel.semantics import Declaration, Sem, declare, declare_fields


def one_line(value: object, width: int | None = None) -> str:
    """A field as one printable line, at most ``width`` characters (ending in "…" when cut).

    Incident and alert text is attacker-written: newlines, control characters, bidi overrides and
    zero-width characters become spaces, runs of whitespace one space. Every surface that shows a
    record's text (terminal, model rows, references, cards) starts from this.
    """
    text = "" if value is None else str(value)
    if width is not None:
        text = text[: width * 8 + 256]  # bounds the work on a huge field; collapsing whitespace needs the slack
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else " " for ch in text)
    text = " ".join(text.split())
    if width is not None and len(text) > width:
        text = text[: max(width - 1, 0)] + "…"
    return text


def bounded_text(value: str, width: int) -> str:
    """``value`` whole when it has at most ``width`` characters, else its first ``width`` and "…(n more
    characters)": a cut that says what it left out (a description for the model, a huge field on a card)."""
    if len(value) <= width:
        return value
    return f"{value[:width]}…({len(value) - width} more characters)"


def count_label(n: int, singular: str, plural: str | None = None) -> str:
    """"1 alert", "3 alerts": every surface that counts records in words says it this way."""
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


DEMO_NOTICE = "Demo workspace: generated sample data, not from a real Sentinel workspace."


@dataclass(frozen=True)
class Incident:
    FACTS: ClassVar[Declaration] = declare(
        "incident", ("incidents",), identity=("number",), belongs=("number", "owner"), number=Sem.ID,
        title=Sem.TEXT, severity=Sem.SEVERITY, status=Sem.STATUS, owner=Sem.ACCOUNT, created=Sem.TIMESTAMP,
        last_modified=Sem.TIMESTAMP, alert_count=Sem.COUNT, tactics=Sem.TEXT, products=Sem.TEXT, url=Sem.URL,
        classification=Sem.STATUS)
    number: int
    title: str
    severity: str
    status: str
    owner: str | None
    created: datetime | None
    last_modified: datetime | None
    alert_count: int
    tactics: tuple[str, ...]
    products: tuple[str, ...]
    url: str
    classification: str | None


@dataclass(frozen=True)
class AlertSummary:
    """An alert as listed on its own or inside an incident."""

    FACTS: ClassVar[Declaration] = declare(
        "alert", ("alerts",), identity=("alert_id",), belongs=("alert_id",), alert_id=Sem.ID, name=Sem.TEXT,
        severity=Sem.SEVERITY, status=Sem.STATUS, product=Sem.TEXT, time=Sem.TIMESTAMP, tactics=Sem.TEXT,
        description=Sem.TEXT, start=Sem.TIMESTAMP, end=Sem.TIMESTAMP, techniques=Sem.TEXT, link=Sem.URL)
    alert_id: str
    name: str
    severity: str
    status: str
    product: str
    time: datetime | None
    tactics: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()  # "account: alice@contoso.com", at most a few per alert
    entity_count: int = 0
    # What the alert itself says (SecurityAlert's Description, StartTime/EndTime, Techniques with SubTechniques,
    # AlertLink, RemediationSteps). The description is attacker-influenced free text; a query that cut it ends it
    # with "…(n more characters)" (``bounded_text``). The link is as written: surfaces decide whether to open it.
    description: str = ""
    start: datetime | None = None  # the activity the alert saw, first and last
    end: datetime | None = None
    techniques: tuple[str, ...] = ()  # MITRE ATT&CK ids, sub-techniques included: "T1110.003", "T1078"
    link: str = ""
    remediation: tuple[str, ...] = ()  # the steps, in order


@dataclass(frozen=True)
class EntityRef:
    type: str
    value: str
    # Its other identifiers (field, text): an account's Sid and object id, a host's device ids (entities.py).
    identifiers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class IncidentMatch:
    number: int
    title: str


@dataclass(frozen=True)
class IncidentDetail:
    incident: Incident
    incident_id: str  # the GUID name Sentinel's REST API uses
    description: str
    classification_reason: str | None
    classification_comment: str | None
    closed: datetime | None
    first_activity: datetime | None
    last_activity: datetime | None
    comment_count: int
    labels: tuple[str, ...]
    alerts: tuple[AlertSummary, ...]
    entities: tuple[EntityRef, ...]
    other_matches: tuple[IncidentMatch, ...] = ()  # other incidents a title search also matched


@dataclass(frozen=True)
class SimilarIncident:
    """An incident sharing an alert name or an entity with another one (``similar_incidents``): what matched."""

    incident: Incident
    alert_names: tuple[str, ...]  # the shared alert names
    entities: tuple[str, ...]  # the shared entities, "type:value"


@dataclass(frozen=True)
class EntityCount:
    FACTS: ClassVar[Declaration] = declare(
        "top entity", ("entities",), identity=("type", "value"), belongs=("value",), counted_by="alert_count",
        type=Sem.TEXT, value=Sem.ID, alert_count=Sem.COUNT, high_severity_count=Sem.COUNT, last_seen=Sem.TIMESTAMP,
        first_seen=Sem.TIMESTAMP, cues={"high_severity_count": r"high(?:[- ]severity)?"})
    type: str
    value: str
    alert_count: int
    high_severity_count: int
    last_seen: datetime | None
    first_seen: datetime | None = None


@dataclass(frozen=True)
class TrendBin:
    FACTS: ClassVar[Declaration] = declare("trend bin", ("alerts",), identity=("start", "severity"), counted_by="count",
                                           start=Sem.TIMESTAMP, severity=Sem.SEVERITY, count=Sem.COUNT)
    start: datetime
    severity: str
    count: int


@runtime_checkable
class NamesEntities(Protocol):
    """A record type of a query that says which entity values (type, value) it holds, so the fact check lets an
    answer cite them without knowing the record type (a new query needs no change there)."""

    def identifiers(self) -> tuple[tuple[str, str], ...]: ...


@dataclass(frozen=True)
class ChangedIncident:
    """An incident as its latest SecurityIncident row shows it, with that row's time (a poller's cursor) and what
    a watch's filters compare beyond ``Incident``: the description and each of the owner's fields."""

    incident: Incident
    time_generated: datetime
    description: str = ""
    owner_object_id: str | None = None
    owner_upn: str | None = None
    owner_email: str | None = None
    owner_assigned_to: str | None = None  # the owner's display name


@dataclass(frozen=True)
class OnCallEntry:
    """One analyst of the on-call roster, their shift resolved against the service's "now" (``as_of``).

    A daily shift ("08:00" to "16:00", UTC; one ending at or before its start runs past midnight, equal times
    round the clock) becomes its occurrence under way at ``as_of``, or its next one; a dated shift (ISO 8601
    date-times) is itself. ``at(moment)`` resolves the same row against another moment.
    """

    FACTS: ClassVar[Declaration] = declare(
        "on-call entry", ("analysts on call", "on-call analysts"), identity=("name",), belongs=("name", "upn", "email"),
        name=Sem.ACCOUNT, upn=Sem.ACCOUNT, email=Sem.EMAIL, phone=Sem.ID, location=Sem.CITY, team=Sem.TEXT,
        shift_start=Sem.TIMESTAMP, shift_end=Sem.TIMESTAMP, object_id=Sem.ID)

    name: str
    upn: str
    email: str
    phone: str
    location: str
    team: str
    shift_start: datetime  # aware, UTC
    shift_end: datetime
    daily: bool  # a daily shift (HH:MM UTC), not a dated one
    as_of: datetime
    object_id: str = ""  # their Entra object id, when the roster has it (a 1:1 Teams message needs it)

    @property
    def on_shift(self) -> bool:
        return self.shift_start <= self.as_of < self.shift_end

    @property
    def ended(self) -> bool:
        """A dated shift that is over."""
        return self.shift_end <= self.as_of

    @property
    def round_the_clock(self) -> bool:
        """A daily shift with equal start and end: on call all day, every day."""
        return self.daily and self.shift_end - self.shift_start == timedelta(days=1)

    @property
    def hours(self) -> str:
        """The daily shift's hours in words ("08:00-16:00 UTC", "round the clock"), not "00:00-00:00"."""
        return "round the clock" if self.round_the_clock else f"{self.shift_start:%H:%M}-{self.shift_end:%H:%M} UTC"

    def identifiers(self) -> tuple[tuple[str, str], ...]:
        """The entity values an answer may cite from this record (``NamesEntities``)."""
        return tuple(("account", value) for value in dict.fromkeys((self.upn, self.email)) if value)

    def at(self, moment: datetime) -> OnCallEntry:
        """This entry judged at ``moment`` (aware): a daily shift moves to its occurrence then."""
        if not self.daily:
            return dataclasses.replace(self, as_of=moment)
        start, end = daily_shift(self.shift_start.time(), self.shift_end.time(), moment)
        return dataclasses.replace(self, shift_start=start, shift_end=end, as_of=moment)


def on_call_order(entries: Iterable[OnCallEntry]) -> list[OnCallEntry]:
    """On shift first, then by the start of their next shift; dated shifts that are over last."""
    return sorted(entries, key=lambda e: (not e.on_shift, e.ended, e.shift_start, e.team, e.name))


def daily_shift(start: time, end: time, moment: datetime) -> tuple[datetime, datetime]:
    """The occurrence of a daily shift (UTC times) under way at ``moment``, else its next one."""
    moment = moment.astimezone(UTC)
    length = (datetime.combine(moment.date(), end) - datetime.combine(moment.date(), start)) % timedelta(days=1)
    length = length or timedelta(days=1)  # equal times: round the clock
    for days_back in (1, 0):  # yesterday's occurrence may still run (a night shift)
        first = datetime.combine(moment.date() - timedelta(days=days_back), start, UTC)
        if first <= moment < first + length:
            return first, first + length
    upcoming = datetime.combine(moment.date(), start, UTC)
    if upcoming <= moment:
        upcoming += timedelta(days=1)
    return upcoming, upcoming + length


Record = TypeVar("Record", Incident, IncidentDetail, AlertSummary, EntityCount, TrendBin, ChangedIncident,
                 OnCallEntry)


@dataclass(frozen=True)
class QueryMetadata:
    tool: str
    parameters: dict[str, Any]
    total: int  # rows that matched before the limit
    returned: int
    truncated: bool
    elapsed_ms: float
    kql: str
    timespan: str  # ISO-8601 duration given to the API
    source: str  # "demo" or "log_analytics"
    warnings: tuple[str, ...] = ()
    service_truncated: bool = False  # cut by a Log Analytics limit, not by the query's own limit (a warning says so)
    offset: int = 0  # rows of the list before the first record: a page of a longer list starts at row offset + 1

    @property
    def is_demo(self) -> bool:
        return self.source == "demo"


@dataclass(frozen=True)
class QueryResult(Generic[Record]):
    records: tuple[Record, ...]
    metadata: QueryMetadata

    @property
    def columns(self) -> list[str]:
        if not self.records:
            return []
        return [f.name for f in dataclasses.fields(self.records[0])]

    @property
    def rows(self) -> list[list[Any]]:
        return [[_plain(getattr(r, name)) for name in self.columns] for r in self.records]

    @property
    def partial(self) -> bool:
        return bool(self.metadata.warnings)

    def page(self, offset: int, rows: int) -> QueryResult[Record]:
        """Rows ``offset + 1`` to ``offset + rows`` of this list, as a result of their own (the page a card or the
        terminal shows: its [n], its facts, its "rows 26-50 of 97")."""
        records = self.records[offset:offset + rows]
        return QueryResult(records, dataclasses.replace(self.metadata, returned=len(records), offset=offset,
                                                        truncated=offset + len(records) < self.metadata.total))

    def to_dict(self) -> dict[str, Any]:
        meta = dataclasses.asdict(self.metadata)
        meta["warnings"] = list(self.metadata.warnings)
        out: dict[str, Any] = {"columns": self.columns, "rows": self.rows, "metadata": meta}
        if self.metadata.is_demo:
            out["demo_data"] = True
            out["notice"] = DEMO_NOTICE
        return out


def rows_label(meta: QueryMetadata) -> str:
    """The rows a result holds, as its source line says it (``rows_words``)."""
    return rows_words(meta.returned, meta.total, meta.offset)


def rows_words(rows: int, total: int, offset: int = 0) -> str:
    """ "12 rows", "20 of 97 rows", or for a later page of a list "rows 21-40 of 97": the terminal's source line and
    the Data sources footnote alike."""
    if offset:
        return f"rows {offset + 1}–{offset + rows} of {max(total, offset + rows)}"
    if total > rows:
        return f"{rows} of {total} rows"
    return count_label(rows, "row")


@dataclass(frozen=True)
class QueryError:
    """A query that could not run. ``message`` is safe to show to an analyst and says what to do."""

    code: str  # invalid_argument, throttled, timeout, gateway_timeout, server_error, unauthorized, forbidden,
    # bad_query, partial_failure, unreadable_response, ...
    message: str
    retry_possible: bool
    tool: str = ""
    kql: str = ""
    status: int | None = None
    detail: str = field(default="", repr=False)  # service text for logs; not for users
    query_id: str = ""  # the request id sent to the service (x-ms-client-request-id), for support

    def to_dict(self) -> dict[str, Any]:
        return {
            "error": self.code,
            "message": self.message,
            "retry_possible": self.retry_possible,
            "tool": self.tool,
        }


def _plain(value: Any) -> Any:
    """JSON-ready form of a record field."""
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):  # an investigation's level
        return value.value
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    return value


# Column-name endings that say which kind of entity a hunt row's value is (the fact check and [n] use them).
_HUNT_KINDS = (
    (re.compile(r"(upn|principalname|emailaddress|fromaddress|initiatedbyuser|^accountname|^userid|^account|"
                r"targetaccount|subjectaccount)$"), "account"),
    (re.compile(r"(ip|ipaddress|ipv4|ipv6)$"), "ip"),
    (re.compile(r"(devicename|computer|hostname)$"), "host"),
    (re.compile(r"url$"), "url"),
    (re.compile(r"(?<!account)(domain|domainname)$"), "dns"),
    (re.compile(r"(sha256|sha1|md5|filehashvalue)$"), "filehash"),
    (re.compile(r"(filename|process)$"), "file"),
)


@dataclass(frozen=True)
class HuntRow:
    """One row of a hunt: its cells (column, value) in the hunt's order, values as the service returned them
    (text, numbers, booleans, ISO 8601 times, JSON)."""

    cells: tuple[tuple[str, Any], ...]

    def value(self, column: str) -> Any:
        return next((v for name, v in self.cells if name == column), None)

    def facts(self, parameters: dict[str, Any] | None = None) -> Declaration:
        """Its declaration, from its columns (``bot.sentinel.semantics``): entity columns are what it belongs to
        (a summarised hunt's group keys), ``Count`` its weight, the table (from the hunt's ``parameters``) its noun."""
        table = str((parameters or {}).get("table") or "")
        fields = {name: hunt_sem(name) for name, _ in self.cells}
        belongs = tuple(n for n, sem in fields.items() if sem in _HUNT_SUBJECTS)
        cues = {n: r"distinct|different|unique" for n in fields if n.startswith("dcount_")}
        return declare_fields(f"hunt {table}".strip(),
                              (*HUNT_NOUNS.get(table, ()), "rows", "results", "matches", "hits"), fields,
                              belongs=belongs, counted_by="Count" if "Count" in fields else "", cues=cues)

    def identifiers(self) -> tuple[tuple[str, str], ...]:
        """The entity values an answer may cite from this row (``NamesEntities``): its text cells whose column
        names an account, IP, host, URL, domain, hash or file, and each text of such a column's set
        (``make_set_SourceIP``: its column name ends as the column's does)."""
        out = []
        for name, value in self.cells:
            kind = hunt_entity_kind(name)
            values = value if isinstance(value, list) else [value]
            out += [(kind, v.strip()) for v in values if kind and isinstance(v, str) and v.strip()]
        return tuple(out)


_ENTITY_SEMS = {"account": Sem.ACCOUNT, "ip": Sem.IP, "host": Sem.HOST, "url": Sem.URL, "dns": Sem.DOMAIN,
                "filehash": Sem.HASH, "file": Sem.PROCESS}
_HUNT_SEMS = (
    (re.compile(r"^(?:initiatingprocess(?:parent)?filename|parentprocess\w*)$"), Sem.PARENT),
    (re.compile(r"commandline$"), Sem.COMMAND),
    (re.compile(r"^(?:count|dcount_\w+)$"), Sem.COUNT),
    (re.compile(r"^(?:country\w*|location|countryorregion)$"), Sem.COUNTRY),
    (re.compile(r"^city$"), Sem.CITY),
    (re.compile(r"appdisplayname$|^app$|^application$"), Sem.APP),
    (re.compile(r"^resulttype$|^result$"), Sem.RESULT),
    (re.compile(r"actiontype$|^action$|^operationname$"), Sem.ACTION),
    (re.compile(r"port$"), Sem.PORT),
    (re.compile(r"^(?:timegenerated|timestamp|(?:min|max)_\w+|session(?:start|end))$"), Sem.TIMESTAMP),
    (re.compile(r"^(?:score|baseline)$"), Sem.SCORE),  # a series point's anomaly score and expected value
)
_HUNT_SUBJECTS = frozenset({Sem.ACCOUNT, Sem.IP, Sem.HOST, Sem.URL, Sem.DOMAIN, Sem.HASH, Sem.PROCESS, Sem.PARENT})
# What an answer counts a hunt's rows by, per table.
HUNT_NOUNS: dict[str, tuple[str, ...]] = {
    "SigninLogs": ("sign-ins", "sign-in", "signins", "logins", "sign-in attempts"),
    "AADNonInteractiveUserSignInLogs": ("sign-ins", "non-interactive sign-ins"),
    "DeviceProcessEvents": ("process events", "processes", "process launches"),
    "DeviceLogonEvents": ("logons", "logon events"),
    "DeviceNetworkEvents": ("connections", "network connections", "network events"),
    "DeviceFileEvents": ("file events",),
    "EmailEvents": ("emails", "e-mails", "messages"),
    "UrlClickEvents": ("clicks", "URL clicks"),
    "AuditLogs": ("directory changes", "audit events"),
    "SecurityEvent": ("security events", "events"),
}


def hunt_sem(column: str) -> Sem:
    """The semantic type of a hunt column, by its name."""
    lowered = column.lower()
    found = next((sem for pattern, sem in _HUNT_SEMS if pattern.search(lowered)), None)
    if found is not None:
        return found
    kind = hunt_entity_kind(column)
    return _ENTITY_SEMS[kind] if kind else Sem.TEXT


def hunt_entity_kind(column: str) -> str | None:
    lowered = column.lower()
    return next((kind for pattern, kind in _HUNT_KINDS if pattern.search(lowered)), None)
