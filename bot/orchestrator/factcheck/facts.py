"""What the tools returned in one conversation, kept as typed data for the fact check.

Every record a query returns is recorded here as it arrives (never re-read from the model's text): incidents
with the fields analysts act on and the relations an answer may state about them (tactics, products, the
entities and alerts their detail showed), alerts, the on-call roster, the alert trend's days, the first and
last sightings of entities, the identifiers the results contain, the counts the bot can compute from them,
and the changes this conversation confirmed. It is persisted with the conversation and bounded like the
history; the most recently seen facts are kept.

Only structured fields state facts about a record. Titles, descriptions and alert names are attacker-
writable text: identifiers found in them may be cited (they are in the data), but nothing in them can
confirm a severity, a status, an owner or that an incident is benign.

Extension point: each record type is recorded by one function registered with ``@recorder(RecordType)``
(see the ones at the end of this module). A new result type (an investigation, a hunt) adds its facts in one
place, its own module, with the same decorator; it records through ``Facts.identify``, ``Facts.add_count``,
``Facts.put_incident`` and ``Facts.put_alert`` and returns the free texts whose identifiers may be cited.
A record type with no recorder that declares its facts (``bot.sentinel.semantics``: evidence rows, hunt rows, an
investigation's assessment, any later one) is kept as declared rows (``declared_row``: ``rows`` by kind and identity,
``kinds`` their declarations, ``empty`` the subjects a query read and found none of, ``cut`` the subjects some of whose
rows were let go past ``MAX_ROWS``, never decided again); ``factcheck.declared`` checks answers against them. Its
entity values are recorded as identifiers, as are those of a record type that names entities (``NamesEntities``).

Storage is compact (``to_dict``: short positional rows, times as epoch seconds) and built once per change:
a conversation saved after a turn that queried nothing serialises nothing here again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, TypeVar, get_type_hints, overload

from bot.investigation.models import IncidentSummary, Investigation
from bot.orchestrator.factcheck.identifiers import IdKind, extract, host_variants, normalise
from bot.orchestrator.factcheck.verdicts import MAX_VERDICTS, VerdictFact
from bot.sentinel import semantics
from bot.sentinel.changes import ConfirmedChange
from bot.sentinel.models import (
    AlertSummary,
    EntityCount,
    Incident,
    IncidentDetail,
    NamesEntities,
    OnCallEntry,
    QueryResult,
    TrendBin,
)
from bot.sentinel.queries import alert_trend as trend_query
from bot.sentinel.queries import alerts as alerts_query
from bot.sentinel.queries import incidents as incidents_query
from bot.sentinel.queries import spec_of

# Sized for the conversation's state budget (teams/state.py): about 16 KB when all are full.
MAX_INCIDENTS = 100
MAX_ALERTS = 30
MAX_IDENTIFIERS = 600
MAX_COUNTS = 100
MAX_CHANGES = 20
MAX_ROSTER = 40
MAX_NAMES = 200  # alert names, entity sightings
MAX_ROWS = 600  # declared rows (evidence, hunts, alerts, any record type that declares its facts): about 30 KB full
MAX_ROW_VALUE = 96  # characters of a row's value kept (command lines and free text are never evidence)
MAX_EMPTY = 120  # (kind, subject) pairs a query read and found no row of
MAX_CUT = 400  # subjects whose rows were partly let go
SEVERITIES = ("High", "Medium", "Low", "Informational")
STORAGE_VERSION = 2
NAVIGATION_HOSTS = ("portal.azure.com", "security.microsoft.com", "learn.microsoft.com", "microsoft.com",
                    "azure.com", "office.com", "microsoftonline.com")


class _Stored:
    """A frozen fact is stored with the conversation after every turn, unchanged: its stored form is built once.
    Readers only serialise it (never change it)."""

    def to_dict(self) -> dict[str, Any]:
        stored: dict[str, Any] | None = self.__dict__.get("_stored")
        if stored is None:
            stored = self._as_dict()
            object.__setattr__(self, "_stored", stored)  # not a field: equality and hashing ignore it
        return stored

    def _as_dict(self) -> dict[str, Any]:
        raise NotImplementedError


@dataclass(frozen=True)
class Seen(_Stored):
    """Where a fact came from: the tool, and when it returned it."""

    tool: str
    at: datetime

    def describe(self) -> str:
        return f"per {self.tool} at {self.at:%H:%M} UTC"

    def _as_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "at": self.at.isoformat()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Seen:
        return cls(str(data["tool"]), datetime.fromisoformat(str(data["at"])))


@dataclass(frozen=True)
class IncidentFact(_Stored):
    number: int
    severity: str
    status: str
    owner: str | None
    classification: str | None
    alert_count: int
    created: datetime | None
    times: tuple[datetime, ...]  # every time its record states: created, modified, activity, closed
    seen: Seen
    tactics: tuple[str, ...] = ()
    products: tuple[str, ...] = ()
    entities: tuple[str, ...] | None = None  # lower-case values; None until its detail was read
    alert_names: tuple[str, ...] | None = None  # lower-case; None until its detail was read
    techniques: tuple[str, ...] | None = None  # its alerts' MITRE technique ids; None until its detail was read

    @property
    def open(self) -> bool:
        return self.status != "Closed"

    def describe(self) -> str:
        """"#14448 is High, Active, owned by Farah Haddad"."""
        state = self.status + (f" ({self.classification})" if self.classification else "")
        owner = f"owned by {self.owner}" if self.owner else "unassigned"
        return f"#{self.number} is {self.severity}, {state}, {owner}"

    def _as_dict(self) -> dict[str, Any]:
        return {"number": self.number, "severity": self.severity, "status": self.status, "owner": self.owner,
                "classification": self.classification, "alert_count": self.alert_count,
                "created": _iso(self.created), "times": [t.isoformat() for t in self.times],
                "seen": self.seen.to_dict()}

    def row(self, seen: int, text: Callable[[str | None], int | None]) -> list[Any]:
        """The compact stored form: ``seen`` is the index of its Seen in the stored table, ``text`` gives the index
        of a repeated string (an owner, a product, a tactic) in the stored string table."""
        created = _epoch(self.created)
        return [self.number, _SEVERITY_KEYS.get(self.severity, self.severity),
                _STATUS_CODES.get(self.status, self.status), text(self.owner),
                text(self.classification), self.alert_count, created,
                [t - (created or 0) for t in (_epoch(v) or 0 for v in self.times)], seen,
                [text(t) for t in self.tactics], [text(p) for p in self.products],
                None if self.entities is None else list(self.entities),
                None if self.alert_names is None else [text(n) for n in self.alert_names],
                None if self.techniques is None else list(self.techniques)]

    @classmethod
    def from_row(cls, row: list[Any], seen: list[Seen], strings: list[str]) -> IncidentFact:
        def text(index: Any) -> str | None:
            return None if index is None else strings[int(index)]

        created, entities, names = row[6], row[11], row[12]
        techniques = row[13] if len(row) > 13 else None  # stored before techniques were recorded: none
        return cls(int(row[0]), _SEVERITY_CODES.get(row[1], str(row[1])), _STATUS_NAMES.get(row[2], str(row[2])),
                   text(row[3]), text(row[4]), int(row[5] or 0), _from_epoch(created),
                   tuple(t for t in (_from_epoch(int(v) + int(created or 0)) for v in row[7]) if t),
                   seen[int(row[8])], tuple(strings[int(i)] for i in row[9]), tuple(strings[int(i)] for i in row[10]),
                   None if entities is None else tuple(map(str, entities)),
                   None if names is None else tuple(strings[int(i)] for i in names),
                   None if techniques is None else tuple(map(str, techniques)))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IncidentFact:
        return cls(int(data["number"]), str(data["severity"]), str(data["status"]), data.get("owner"),
                   data.get("classification"), int(data.get("alert_count") or 0), _time(data.get("created")),
                   tuple(t for t in (_time(v) for v in data.get("times", [])) if t), Seen.from_dict(data["seen"]))


@dataclass(frozen=True)
class AlertFact(_Stored):
    alert_id: str
    severity: str
    status: str
    time: datetime | None
    seen: Seen
    activity: tuple[datetime, ...] = ()  # when the activity it saw started and ended
    techniques: tuple[str, ...] = ()

    def _as_dict(self) -> dict[str, Any]:
        return {"alert_id": self.alert_id, "severity": self.severity, "status": self.status,
                "time": _iso(self.time), "seen": self.seen.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AlertFact:
        return cls(str(data["alert_id"]), str(data["severity"]), str(data["status"]), _time(data.get("time")),
                   Seen.from_dict(data["seen"]))


@dataclass(frozen=True)
class CountFact(_Stored):
    """A number the bot computed from a result: ``value`` ``qualifiers`` ``noun`` ("12 high alerts")."""

    noun: str  # "incidents" or "alerts"
    qualifiers: frozenset[str]  # lower-case severities and states: "high", "open", "closed", "unassigned"
    value: int
    scope: str  # what was counted, for the correction: "get_alert_trend last_7d", "incident #14440"

    def _as_dict(self) -> dict[str, Any]:
        return {"noun": self.noun, "qualifiers": sorted(self.qualifiers), "value": self.value, "scope": self.scope}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CountFact:
        return cls(str(data["noun"]), frozenset(data.get("qualifiers", [])), int(data["value"]), str(data["scope"]))


@dataclass(frozen=True)
class ChangeFact(_Stored):
    """A change this conversation confirmed and Sentinel accepted."""

    incident: int
    kind: str  # assign, status, severity, comment, escalate (ChangeKind values)
    summary: str  # "Status set to Closed (FalsePositive)"
    at: datetime

    def _as_dict(self) -> dict[str, Any]:
        return {"incident": self.incident, "kind": self.kind, "summary": self.summary, "at": self.at.isoformat()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChangeFact:
        return cls(int(data["incident"]), str(data["kind"]), str(data.get("summary") or ""),
                   datetime.fromisoformat(str(data["at"])))


@dataclass(frozen=True)
class RosterFact:
    """One analyst of the on-call roster as the service resolved it at ``as_of``."""

    name: str
    emails: tuple[str, ...]  # lower-case: UPN and e-mail
    phone: str
    team: str
    shift_start: datetime
    shift_end: datetime
    as_of: datetime

    @property
    def on_shift(self) -> bool:
        return self.shift_start <= self.as_of < self.shift_end

    def row(self) -> list[Any]:
        return [self.name, list(self.emails), self.phone, self.team, _epoch(self.shift_start),
                _epoch(self.shift_end), _epoch(self.as_of)]

    @classmethod
    def from_row(cls, row: list[Any]) -> RosterFact:
        start, end, as_of = (_from_epoch(v) or datetime.min.replace(tzinfo=UTC) for v in row[4:7])
        return cls(str(row[0]), tuple(map(str, row[1])), str(row[2]), str(row[3]), start, end, as_of)


@dataclass(frozen=True)
class RowFact:
    """One row of a record type that declares its facts (``bot.sentinel.semantics``): its kind, each declared
    field's value as text, what it counts for, and whether its query returned every row (counts over it hold)."""

    kind: str
    values: tuple[tuple[str, str], ...]  # (field, value) in the declaration's order; tuples give one pair per item
    weight: int
    complete: bool
    scope: str  # the query that returned it, for the correction: "evidence_signins (alice@contoso.com)"

    def row(self, kinds: dict[str, int], fields: dict[str, list[str]], text: Callable[[str], int | None]) -> list[Any]:
        """Stored compactly: the kind's index, each declared field's value by its index in the string table (None
        where the row has none; a tuple field's items joined by a tab), weight, complete, scope."""
        named: dict[str, list[str]] = {}
        for name, value in self.values:
            named.setdefault(name, []).append(value)
        return [kinds[self.kind], [text("\t".join(named[f])) if f in named else None for f in fields[self.kind]],
                self.weight, int(self.complete), text(self.scope)]

    @classmethod
    def from_row(cls, row: list[Any], kinds: list[str], fields: dict[str, list[str]], strings: list[str]) -> RowFact:
        kind = kinds[int(row[0])]
        values = tuple((name, item) for name, index in zip(fields[kind], row[1], strict=False) if index is not None
                       for item in strings[int(index)].split("\t"))
        return cls(kind, values, int(row[2]), bool(row[3]), strings[int(row[4])])


@dataclass(frozen=True)
class Kind:
    """A declaration as the facts keep it: enough to check rows of it after the conversation was stored."""

    nouns: tuple[str, ...]
    fields: dict[str, tuple[str, str]]  # field -> (semantic type, cue)
    belongs: tuple[str, ...]
    identity: tuple[str, ...] = ()
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)  # an enumerated field's values

    def key(self, values: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        """What tells its rows apart: the identity fields' values (all values when it declares none)."""
        return tuple(p for p in values if p[0] in self.identity) or values

    def row(self, text: Callable[[str], int | None]) -> list[Any]:
        """Stored compactly: every string by its index in the conversation's string table."""
        fields = [[text(f), text(sem), text(cue)] for f, (sem, cue) in self.fields.items()]
        return [[text(n) for n in self.nouns], fields, [text(b) for b in self.belongs],
                [text(i) for i in self.identity], {f: [text(c) for c in cs] for f, cs in self.choices.items()}]

    @classmethod
    def from_row(cls, row: list[Any], strings: list[str]) -> Kind:
        def text(index: Any) -> str:
            return strings[int(index)]

        choices = dict(row[4]) if len(row) > 4 else {}  # stored before enumerated fields: none
        return cls(tuple(map(text, row[0])), {text(f): (text(sem), text(cue)) for f, sem, cue in row[1]},
                   tuple(map(text, row[2])), tuple(map(text, row[3])),
                   {str(f): tuple(map(text, cs)) for f, cs in choices.items()})

    def merged(self, other: Kind) -> Kind:
        """A kind declared per row (two hunts of one table, grouped by different columns): the union of both."""
        return Kind(tuple(dict.fromkeys((*self.nouns, *other.nouns))), {**other.fields, **self.fields},
                    tuple(dict.fromkeys((*self.belongs, *other.belongs))), self.identity,
                    {**other.choices, **self.choices})

    @classmethod
    def of(cls, declared: semantics.Declaration) -> Kind:
        """Its fields a row keeps (free text and times that tell no rows apart are never kept)."""
        return cls(declared.nouns, {f.name: (f.sem.value, f.cue) for f in declared.fields
                                    if f.sem.value not in _UNKEPT or f.name in declared.identity},
                   declared.belongs, declared.identity, {f.name: f.choices for f in declared.fields if f.choices})


@dataclass(frozen=True)
class Sighting:
    """When a top-entities result saw an entity, and how many alerts it counted for it."""

    first: datetime | None
    last: datetime | None
    alerts: int
    high: int


R = TypeVar("R")
Recorder = Callable[["Facts", Any, "Seen"], Iterable[str]]
_RECORDERS: dict[type, Recorder] = {}


def recorder(record_type: type[R]) -> Callable[[Callable[[Facts, R, Seen], Iterable[str]]],
                                               Callable[[Facts, R, Seen], Iterable[str]]]:
    """Register how records of ``record_type`` become facts: ``fn(facts, record, seen)`` records them and returns
    the attacker-writable texts (titles, names) whose identifiers an answer may cite. One per type."""
    def register(fn: Callable[[Facts, R, Seen], Iterable[str]]) -> Callable[[Facts, R, Seen], Iterable[str]]:
        _RECORDERS[record_type] = fn
        return fn
    return register


@dataclass
class Facts:
    incidents: dict[int, IncidentFact] = field(default_factory=dict)  # least recently seen first
    alerts: dict[str, AlertFact] = field(default_factory=dict)
    identifiers: dict[str, None] = field(default_factory=dict)  # normalised values, as an ordered set
    numbers: dict[int, None] = field(default_factory=dict)  # incident numbers named anywhere in the results
    counts: list[CountFact] = field(default_factory=list)
    changes: list[ChangeFact] = field(default_factory=list)
    roster: dict[str, RosterFact] = field(default_factory=dict)  # by lower-case name
    alert_names: dict[str, None] = field(default_factory=dict)  # lower-case
    trend_days: dict[str, int] = field(default_factory=dict)  # "2026-11-18": alerts that day (the latest trend)
    trend_bins: dict[str, list[int]] = field(default_factory=dict)  # "Nov 18 00:00": alerts by severity (H, M, L, I)
    trend_scope: str = ""
    sightings: dict[str, Sighting] = field(default_factory=dict)  # lower-case entity value
    verdicts: dict[str, VerdictFact] = field(default_factory=dict)  # investigated entities (lower case) -> assessment
    rows: dict[tuple[str, tuple[tuple[str, str], ...]], RowFact] = field(default_factory=dict)  # by kind, identity
    kinds: dict[str, Kind] = field(default_factory=dict)  # the declarations of the kinds of ``rows``
    empty: dict[tuple[str, str], None] = field(default_factory=dict)  # (kind, subject): queried, no row
    cut: dict[str, None] = field(default_factory=dict)  # subjects some of whose rows were let go: not decidable
    _stored: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    _index: set[str] | None = field(default=None, repr=False, compare=False)
    _links: dict[str, list[tuple[RowFact, str]]] | None = field(default=None, repr=False, compare=False)
    _named: dict[str, tuple[str, ...]] | None = field(default=None, repr=False, compare=False)

    # recording

    def observe(self, result: QueryResult, at: datetime) -> None:
        """Record what a query returned."""
        self._stored = None
        seen = Seen(result.metadata.tool, _second(at))
        texts: list[str] = []
        complete = not result.metadata.truncated and result.metadata.returned >= result.metadata.total
        for record in result.records:
            if isinstance(record, Investigation):  # holds other queries' results: recorded as theirs
                self._investigation(record, seen, result)
                self.declared_row(record, result.metadata.parameters, seen.tool, complete)
                continue
            if isinstance(record, IncidentSummary):  # the detail, the investigations, the similar incidents
                self._summary(record, seen, result)
                continue
            record_fn = _recorder_for(type(record))
            if record_fn is not None:
                texts += record_fn(self, record, seen)
            else:
                self.declared_row(record, result.metadata.parameters, seen.tool, complete)
                if isinstance(record, NamesEntities):  # any other query's records that name entities
                    for entity_type, value in record.identifiers():
                        self.identify(entity_type, value)
        for text in texts:
            for found in extract(text):
                if found.kind is IdKind.INCIDENT:
                    _add(self.numbers, int(found.value), MAX_IDENTIFIERS)
                elif found.kind is not IdKind.REFERENCE:
                    self.identify(found.kind.value, found.value)
        self._result_counts(result)

    def _investigation(self, investigation: Investigation, seen: Seen, result: QueryResult) -> None:
        """Every section's rows as the facts of their own query, and the assessment as a verdict."""
        for section in investigation.sections:
            if not section.records and not section.error:  # read, and nothing: a true "no click", "no sign-in"
                self._nothing(section.name, (investigation.entity, *investigation.also))
            if section.records:
                meta = replace(result.metadata, tool=section.name, total=section.total,
                               returned=len(section.records), truncated=section.total > len(section.records),
                               parameters={k: v for k, v in result.metadata.parameters.items() if k != "entity_type"})
                self.observe(QueryResult(records=section.records, metadata=meta), seen.at)
        for entity_type, value in investigation.identifiers():
            self.identify(entity_type, value)
        assessment = investigation.assessment
        verdict = VerdictFact(investigation.entity, investigation.entity_kind, assessment.level.value,
                              assessment.score, tuple(s.title for s in assessment.signals), seen.tool, seen.at)
        self.verdicts.pop(investigation.entity.lower(), None)
        self.verdicts[investigation.entity.lower()] = verdict
        while len(self.verdicts) > MAX_VERDICTS:
            self.verdicts.pop(next(iter(self.verdicts)))

    def _summary(self, summary: IncidentSummary, seen: Seen, result: QueryResult) -> None:
        """A summary's parts as the facts of the queries that read them."""
        def part(tool: str, records: tuple[Any, ...]) -> QueryResult:
            return QueryResult(records=records, metadata=replace(result.metadata, tool=tool, total=len(records),
                                                                 returned=len(records), truncated=False))
        self.observe(part("get_incident_detail", (summary.detail,)), seen.at)
        if summary.similar:
            self.observe(part("query_incidents", tuple(s.incident for s in summary.similar)), seen.at)
        for finding in summary.entities:
            if finding.investigation is not None:
                self.observe(part("investigate_entity", (finding.investigation,)), seen.at)

    def declared_row(self, record: Any, parameters: dict[str, Any], tool: str, complete: bool) -> None:
        """Record a row of any record type that declares its facts (``bot.sentinel.semantics``): no code per type."""
        declared = semantics.declaration(record, parameters)
        if declared is None or not declared.belongs:
            return  # a row that belongs to nothing (a trend's bin) links no statement to it
        self._stored = None
        known, fresh = self.kinds.get(declared.kind), Kind.of(declared)
        self.kinds[declared.kind] = fresh if known is None or known == fresh else known.merged(fresh)
        values = tuple((f.name, _row_text(v)) for f, v in semantics.field_values(record, declared)
                       if f.sem.value not in _UNKEPT or f.name in declared.identity)  # a time that tells rows apart
        weight = next((int(v) for f, v in values if f == declared.weight and v.isdigit()), 1)
        subject = next((v for f, v in values if f in declared.belongs), "")
        for f in declared.fields:  # its entities and what it belongs to may be cited (an alert id, a device)
            if f.name in declared.belongs or f.sem in _CITED_AS:
                for name, value in values:
                    if name == f.name and not (f.sem is semantics.Sem.ID and value.isdigit()):  # #N is a number
                        self.identify(_CITED_AS.get(f.sem, ""), value)
        key = (declared.kind, self.kinds[declared.kind].key(values))
        self.rows.pop(key, None)
        self.rows[key] = RowFact(declared.kind, values, weight, complete, f"{tool} ({subject})" if subject else tool)
        self._let_go(len(self.rows) - MAX_ROWS, declared.kind)
        self._links = self._named = None

    def _let_go(self, excess: int, arriving: str = "") -> None:
        """Forget the oldest rows; what they belonged to is no longer decidable (its other rows are not all). A kind
        that already holds a quarter of the bound gives up its own oldest rows for its new ones, so lists of a hundred
        incidents do not push an investigation's evidence out."""
        for _ in range(max(excess, 0)):
            own = [k for k in self.rows if k[0] == arriving] if arriving else []
            key = own[0] if len(own) > MAX_ROWS // 4 else next(iter(self.rows))
            old = self.rows.pop(key)
            kind = self.kinds.get(old.kind)
            for name, value in old.values:
                if kind is not None and name in kind.belongs:
                    for form in link_forms(value):
                        _add(self.cut, form, MAX_CUT)

    def _nothing(self, query: str, subjects: Iterable[str]) -> None:
        """A query of a declared record type read these subjects and returned no row."""
        try:
            record_type = get_type_hints(spec_of(query).decode).get("return")
        except (KeyError, NameError, TypeError):
            return
        declared = getattr(record_type, "FACTS", None)
        if not isinstance(declared, semantics.Declaration):
            return
        self.kinds.setdefault(declared.kind, Kind.of(declared))
        for subject in subjects:
            for form in link_forms(subject):
                _add(self.empty, (declared.kind, form), MAX_EMPTY)

    def named(self, sem: str) -> tuple[str, ...]:
        """Every value the rows hold in fields of one semantic type (the apps a sign-in names), kept until a row
        changes: an answer's check reads them without walking every row."""
        if self._named is None:
            named: dict[str, set[str]] = {}
            for fact in self.rows.values():
                kind = self.kinds.get(fact.kind)
                if kind is not None:
                    for name, value in fact.values:
                        if name in kind.fields:
                            named.setdefault(kind.fields[name][0], set()).add(value)
            self._named = {k: tuple(sorted(v)) for k, v in named.items()}
        return self._named.get(sem, ())

    def linked(self, form: str) -> list[tuple[RowFact, str]]:
        """The declared rows a subject belongs to, by any of the forms an answer may write it in, each with the field
        that names it."""
        if self._links is None:
            links: dict[str, list[tuple[RowFact, str]]] = {}
            for fact in self.rows.values():
                kind = self.kinds.get(fact.kind)
                if kind is None:
                    continue
                for name, value in fact.values:
                    if name in kind.belongs:
                        for each in link_forms(value):
                            links.setdefault(each, []).append((fact, name))
            self._links = links
        return self._links.get(form, [])

    def record_change(self, incident: int, kind: str, summary: str, at: datetime, *, severity: str | None = None,
                      status: str | None = None, owner: str | None = None, classification: str | None = None,
                      tool: str = "the confirmed change", owner_sign_in: str | None = None,
                      escalated_to: tuple[str, ...] = ()) -> None:
        """A confirmed change was made: log it, and the incident's record is now what Sentinel returned. The change is
        also a declared row (``ConfirmedChange``): what an answer says it changed is held to it."""
        self._stored = None
        self.changes.append(ChangeFact(incident, kind, summary, at))
        del self.changes[:-MAX_CHANGES]
        owners = tuple(dict.fromkeys(v for v in (owner_sign_in, owner) if v))
        self.declared_row(ConfirmedChange(incident, kind, _second(at), summary, owners, status, classification,
                                          severity, tuple(v for v in escalated_to if v)), {}, tool, True)
        fact = self.incidents.get(incident)
        if fact is not None and status is not None:
            self.put_incident(replace(fact, severity=severity or fact.severity, status=status,
                                      owner=owner, classification=classification, seen=Seen(tool, _second(at))))

    def migrate(self, known_incidents: Iterable[int], known_values: Iterable[str]) -> None:
        """State written before facts existed: its identifiers still count as seen."""
        for number in known_incidents:
            _add(self.numbers, int(number), MAX_IDENTIFIERS)
        for value in known_values:
            self.identify("", str(value))

    def halve(self) -> None:
        """Keep the newest half of everything (when conversation state must shrink)."""
        self._stored = None
        for ordered in (self.incidents, self.alerts, self.identifiers, self.numbers, self.alert_names,
                        self.sightings, self.verdicts, self.empty):
            _trim(ordered, len(ordered) // 2)
        self._let_go(len(self.rows) // 2)
        self._index = None
        self._links = self._named = None
        del self.counts[:len(self.counts) // 2]

    # the recorders' interface

    def put_incident(self, fact: IncidentFact) -> None:
        self._stored = None
        self.incidents.pop(fact.number, None)
        self.incidents[fact.number] = fact
        _trim(self.incidents, MAX_INCIDENTS)

    def put_alert(self, alert: AlertSummary, seen: Seen) -> None:
        self._stored = None
        self.alerts.pop(alert.alert_id, None)
        activity = tuple(t for t in (_second(alert.start), _second(alert.end)) if t is not None)
        self.alerts[alert.alert_id] = AlertFact(alert.alert_id, alert.severity, alert.status, _second(alert.time),
                                                seen, activity, alert.techniques)
        _trim(self.alerts, MAX_ALERTS)
        _add(self.alert_names, alert.name.strip().lower(), MAX_NAMES)  # its id is known as the alert's key
        self.declared_row(alert, {}, seen.tool, True)  # its severity, status and product, declared
        for label in alert.entities:
            entity_type, _, value = label.partition(": ")
            self.identify(entity_type, value)

    def identify(self, entity_type: str, value: str) -> None:
        """Index an entity value under every form an answer may write it in."""
        text = (value or "").strip()
        if not text:
            return
        self._stored = None
        kind = _ENTITY_KINDS.get(entity_type.lower())
        if kind is IdKind.URL and _navigation(text):
            return  # portal links: always allowed, never worth their bytes
        # Stored: the value as the results wrote it and normalised; the other forms an answer may use (a host's
        # short name, CONTOSO\alice for alice@contoso.com) are derived when the index is built (``known``).
        values = {text.lower(), normalise(kind, text) if kind else text.lower()}
        for found in extract(text):  # "WS-FIN-160.contoso.local" also holds the host name, a URL its domain
            values.add(found.value)
            if found.kind is IdKind.URL:
                values.add(found.value.split("://", 1)[-1].split("/", 1)[0])
        for v in values:
            _add(self.identifiers, v, MAX_IDENTIFIERS)
        self._index = None

    def add_count(self, noun: str, qualifiers: Iterable[str], value: int, scope: str) -> None:
        self._stored = None
        self.counts.append(CountFact(noun, frozenset(qualifiers), value, scope))
        del self.counts[:-MAX_COUNTS]

    # reading

    def knows_incident(self, number: int) -> bool:
        return number in self.incidents or number in self.numbers

    def knows(self, kind: IdKind, value: str) -> bool:
        """Whether a result in this conversation contains this identifier (as a whole, normalised token)."""
        if kind is IdKind.INCIDENT:
            return value.isdigit() and self.knows_incident(int(value))
        # Known hosts are indexed under their short names too, so "ws-fin-160" finds "WS-FIN-160.contoso.local";
        # the answer's own name is matched whole, so "ws-fin-160.evil.com" does not pass as WS-FIN-160.
        if kind is IdKind.ALERT_ID and (value in self.alerts or value.upper() in self.alerts):
            return True
        return self.known(value)

    def known(self, value: str) -> bool:
        """Whether a normalised value is one the results hold, in any of the forms an answer may write it."""
        if self._index is None:
            index = set(self.identifiers)
            for stored in self.identifiers:
                index |= _forms(stored)
            self._index = index
        return value in self._index

    def change_for(self, incident: int | None, kinds: Iterable[str]) -> ChangeFact | None:
        """The latest confirmed change of one of ``kinds`` (to ``incident``, or to any when None)."""
        wanted = set(kinds)
        return next((c for c in reversed(self.changes)
                     if c.kind in wanted and (incident is None or c.incident == incident)), None)

    def counts_for(self, noun: str, qualifiers: frozenset[str]) -> list[CountFact]:
        found = [c for c in self.counts if c.noun == noun and c.qualifiers == qualifiers]
        severity = next(iter(qualifiers)).capitalize() if len(qualifiers) == 1 else ""
        if noun == "alerts" and (not qualifiers or severity in SEVERITIES):  # the trend's bins
            found += [CountFact("alerts", qualifiers, row[SEVERITIES.index(severity)] if severity else sum(row),
                                f"{self.trend_scope} bin {label}") for label, row in self.trend_bins.items()]
        if noun == "alerts" and not qualifiers:  # each incident's own alert count
            found += [CountFact("alerts", frozenset(), f.alert_count, f"incident #{f.number}")
                      for f in self.incidents.values()]
        return found

    def can_count(self, noun: str) -> bool:
        return any(c.noun == noun for c in self.counts)

    # storage

    def to_dict(self) -> dict[str, Any]:
        """The compact stored form, built again only after something changed."""
        if self._stored is None:
            self._stored = self._compact()
        return self._stored

    def _compact(self) -> dict[str, Any]:
        seen: dict[Seen, int] = {}
        strings: dict[str, int] = {}

        def text(value: str | None) -> int | None:
            return None if value is None else strings.setdefault(value, len(strings))

        incidents = [f.row(seen.setdefault(f.seen, len(seen)), text) for f in self.incidents.values()]
        alerts = [[a.alert_id, _SEVERITY_KEYS.get(a.severity, a.severity), _ALERT_CODES.get(a.status, a.status),
                   _epoch(a.time), seen.setdefault(a.seen, len(seen)), [_epoch(t) for t in a.activity],
                   list(a.techniques)]
                  for a in self.alerts.values()]
        scopes: dict[str, int] = {}
        counts = [[c.noun[0], " ".join(sorted(c.qualifiers)), c.value, scopes.setdefault(c.scope, len(scopes))]
                  for c in self.counts]
        declared = self._compact_rows(text)  # before the string table is written: it adds to it
        return {"v": STORAGE_VERSION, "seen": [[s.tool, _epoch(s.at)] for s in seen], "strings": list(strings),
                "incidents": incidents, "alerts": alerts, "identifiers": list(self.identifiers),
                "numbers": list(self.numbers), "scopes": list(scopes), "counts": counts,
                "changes": [c.to_dict() for c in self.changes], "roster": [r.row() for r in self.roster.values()],
                "alert_names": [strings.get(n, n) for n in self.alert_names], "trend_days": self.trend_days,
                "trend_bins": self.trend_bins, "trend_scope": self.trend_scope,
                "sightings": {k: [_epoch(s.first), _epoch(s.last), s.alerts, s.high]
                              for k, s in self.sightings.items()},
                "verdicts": [v.to_dict() for v in self.verdicts.values()],
                **declared}

    def _compact_rows(self, text: Callable[[str], int | None]) -> dict[str, Any]:
        kinds = {k: i for i, k in enumerate(self.kinds)}
        fields = {k: list(v.fields) for k, v in self.kinds.items()}
        empty: dict[str, list[int | None]] = {}
        for kind, form in self.empty:
            empty.setdefault(kind, []).append(text(form))
        return {"kinds": [[text(k), *v.row(text)] for k, v in self.kinds.items()],
                "rows": [r.row(kinds, fields, text) for r in self.rows.values()], "empty": empty,
                "cut": list(self.cut)}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Facts:
        data = data or {}
        if data.get("v") != STORAGE_VERSION:
            return cls._from_first_version(data)
        facts = cls()
        try:
            seen = [Seen(str(tool), _from_epoch(at) or datetime.now(UTC)) for tool, at in data.get("seen", [])]
            strings = [str(s) for s in data.get("strings", [])]
            for row in data.get("incidents", []):
                fact = IncidentFact.from_row(row, seen, strings)
                facts.incidents[fact.number] = fact
            for row in data.get("alerts", []):
                alert_id, severity, status, time, index = row[:5]
                activity, techniques = (row[5], row[6]) if len(row) > 6 else ([], [])  # older rows had neither
                facts.alerts[str(alert_id)] = AlertFact(
                    str(alert_id), _SEVERITY_CODES.get(severity, str(severity)),
                    _ALERT_STATUSES.get(status, str(status)), _from_epoch(time), seen[int(index)],
                    tuple(t for t in map(_from_epoch, activity) if t), tuple(map(str, techniques)))
            scopes = [str(s) for s in data.get("scopes", [])]
            facts.counts = [CountFact(_NOUNS.get(noun, "alerts"), frozenset(str(q).split()), int(value),
                                      scopes[int(scope)]) for noun, q, value, scope in data.get("counts", [])]
            facts.roster = {str(r[0]).lower(): RosterFact.from_row(r) for r in data.get("roster", [])}
            facts.sightings = {str(k): Sighting(_from_epoch(v[0]), _from_epoch(v[1]), int(v[2]), int(v[3]))
                               for k, v in dict(data.get("sightings", {})).items()}
        except (TypeError, ValueError, KeyError, IndexError):
            return cls()  # damaged: start over rather than fail every turn
        facts.identifiers = dict.fromkeys(str(v) for v in data.get("identifiers", []))
        facts.numbers = dict.fromkeys(int(n) for n in data.get("numbers", []))
        facts.changes = [ChangeFact.from_dict(c) for c in _records(data.get("changes"))]
        strings = [str(s) for s in data.get("strings", [])]
        facts.alert_names = dict.fromkeys(strings[v] if isinstance(v, int) and 0 <= v < len(strings) else str(v)
                                          for v in data.get("alert_names", []))
        facts.trend_days = {str(k): int(v) for k, v in dict(data.get("trend_days", {})).items()}
        facts.trend_bins = {str(k): [int(n) for n in v][:len(SEVERITIES)]
                            for k, v in dict(data.get("trend_bins", {})).items() if isinstance(v, list)}
        facts.trend_scope = str(data.get("trend_scope") or "")
        facts.verdicts = _verdicts(data.get("verdicts"))
        try:
            facts.kinds = {strings[int(k[0])]: Kind.from_row(k[1:], strings) for k in data.get("kinds", [])}
            names, fields = list(facts.kinds), {k: list(v.fields) for k, v in facts.kinds.items()}
            for stored in data.get("rows", []):
                kept = RowFact.from_row(stored, names, fields, strings)
                facts.rows[(kept.kind, facts.kinds[kept.kind].key(kept.values))] = kept
            facts.empty = {(str(k), strings[int(f)]): None for k, forms in dict(data.get("empty", {})).items()
                           for f in forms}
            facts.cut = dict.fromkeys(str(f) for f in data.get("cut", []))
        except (TypeError, ValueError, KeyError, IndexError):
            facts.kinds, facts.rows, facts.empty, facts.cut = {}, {}, {}, {}  # damaged: these rows are not known
        return facts

    @classmethod
    def _from_first_version(cls, data: dict[str, Any]) -> Facts:
        """State stored before the compact form: dicts per fact."""
        facts = cls()
        for item in _records(data.get("incidents")):
            fact = IncidentFact.from_dict(item)
            facts.incidents[fact.number] = fact
        for item in _records(data.get("alerts")):
            alert = AlertFact.from_dict(item)
            facts.alerts[alert.alert_id] = alert
        facts.identifiers = dict.fromkeys(str(v) for v in data.get("identifiers", []) if "://portal.azure.com" not in
                                          str(v))
        facts.numbers = dict.fromkeys(int(n) for n in data.get("numbers", []))
        facts.counts = [CountFact.from_dict(c) for c in _records(data.get("counts"))]
        facts.changes = [ChangeFact.from_dict(c) for c in _records(data.get("changes"))]
        return facts

    # internals

    def _result_counts(self, result: QueryResult) -> None:
        """The counts an answer may state about this result, computed here rather than trusted."""
        meta = result.metadata
        scope = f"{meta.tool} {meta.parameters.get('time_window', '')}".strip()
        implied = _implied_qualifiers(meta.parameters)
        records = result.records
        if meta.tool == trend_query.SPEC.name:
            bins = [r for r in records if isinstance(r, TrendBin)]
            tally: Counter[tuple[str, ...]] = Counter()
            for b in bins:
                tally[(b.severity.lower(),)] += b.count
            self._tally("alerts", scope, tally, bins)
            # Each bin's counts by severity, kept as one small table (counts_for reads them as counts).
            self.trend_scope, self.trend_bins = scope, {}
            for b in bins:
                row = self.trend_bins.setdefault(f"{b.start:%b %d %H:%M}", [0] * len(SEVERITIES))
                if b.severity in SEVERITIES:
                    row[SEVERITIES.index(b.severity)] += b.count
            days: Counter[str] = Counter()
            for b in bins:
                days[f"{b.start:%Y-%m-%d}"] += b.count
            self.trend_days = dict(days)
            return
        noun = {incidents_query.SPEC.name: "incidents", alerts_query.SPEC.name: "alerts"}.get(meta.tool)
        if noun is None:
            return
        self.add_count(noun, implied, meta.total, scope)
        if meta.returned != meta.total:
            self.add_count(noun, implied, meta.returned, scope)
        if meta.truncated:
            return  # per-severity counts of a partial list would be wrong
        tally = Counter()
        for record in records:
            severity = getattr(record, "severity", "").lower()
            status = getattr(record, "status", "")
            state = "closed" if status == "Closed" else "open"
            for key in {(severity,), (state,), (status.lower(),), (severity, state), (severity, status.lower())}:
                tally[key] += 1  # a set: "closed" is both the state and the status, counted once
            if isinstance(record, Incident) and not record.owner:
                tally[("unassigned",)] += 1
        self._tally(noun, scope, tally, records)

    def _tally(self, noun: str, scope: str, tally: Counter[tuple[str, ...]], records: Iterable[Any]) -> None:
        total = sum(getattr(r, "count", 1) for r in records)
        self.add_count(noun, (), total, scope)
        for key, value in tally.items():
            self.add_count(noun, key, value, scope)
        # A severity with no rows is a true zero ("no high alerts"), so say so.
        for severity in SEVERITIES:
            if (severity.lower(),) not in tally:
                self.add_count(noun, (severity.lower(),), 0, scope)


# -- the recorders of the record types this package knows (a new type registers its own, in its own module) --


def _incident_fact(facts: Facts, incident: Incident, seen: Seen, extra_times: Iterable[datetime | None] = (),
                   **relations: Any) -> IncidentFact:
    # Times are kept to the second, as they are stored: a check reads the same facts before and after a save.
    times = tuple(_second(t) for t in (incident.created, incident.last_modified, *extra_times) if t is not None)
    known = facts.incidents.get(incident.number)
    if known is not None and not relations:  # a listing does not forget what the detail showed
        relations = {"entities": known.entities, "alert_names": known.alert_names, "techniques": known.techniques}
    fact = IncidentFact(incident.number, incident.severity, incident.status, incident.owner,
                        incident.classification, incident.alert_count, _second(incident.created), times, seen,
                        tuple(incident.tactics), tuple(incident.products), **relations)
    facts.put_incident(fact)
    facts.declared_row(incident, {}, seen.tool, True)  # its tactics and products, declared
    if incident.owner:
        facts.identify("owner", incident.owner)
    facts.identify(IdKind.URL.value, incident.url)
    return fact


@recorder(Incident)
def _record_incident(facts: Facts, incident: Incident, seen: Seen) -> Iterable[str]:
    _incident_fact(facts, incident, seen)
    return (incident.title,)


_NAMED_KINDS = frozenset({IdKind.HOST, IdKind.ACCOUNT, IdKind.IP, IdKind.DOMAIN, IdKind.FILE, IdKind.HASH})
MAX_TEXT_SCANNED = 4000  # of an incident's title and description, for the entities they name


@recorder(IncidentDetail)
def _record_detail(facts: Facts, detail: IncidentDetail, seen: Seen) -> Iterable[str]:
    # An incident's entities: those its detail lists, by their value and every identifier shown beside it (a merged
    # account's SID and other spellings), and those its own title and description name ("Mimikatz on WS-FIN-023").
    listed = (v for e in detail.entities for text in (e.value, *(t for _, t in e.identifiers))
              for v in _entity_forms(e.type, text))
    named = (i.value for i in extract(f"{detail.incident.title}\n{detail.description}"[:MAX_TEXT_SCANNED])
             if i.kind in _NAMED_KINDS)
    entities = tuple(dict.fromkeys((*listed, *named)))
    names = tuple(dict.fromkeys(a.name.strip().lower() for a in detail.alerts))
    techniques = tuple(dict.fromkeys(t for a in detail.alerts for t in a.techniques))
    _incident_fact(facts, detail.incident, seen, (detail.first_activity, detail.last_activity, detail.closed,
                                                  *(t for a in detail.alerts for t in (a.time, a.start, a.end))),
                   entities=entities, alert_names=names, techniques=techniques)
    facts.declared_row(detail, {}, seen.tool, True)  # its entities, declared: what an answer says is in it
    for match in detail.other_matches:
        _add(facts.numbers, match.number, MAX_IDENTIFIERS)
    for alert in detail.alerts:
        facts.put_alert(alert, seen)
    for entity in detail.entities:
        facts.identify(entity.type, entity.value)
    facts.identify(IdKind.ALERT_ID.value, detail.incident_id)
    return (detail.incident.title, detail.description, detail.classification_comment or "",
            *(text for a in detail.alerts for text in (a.name, a.description, *a.remediation)))


@recorder(AlertSummary)
def _record_alert(facts: Facts, alert: AlertSummary, seen: Seen) -> Iterable[str]:
    facts.put_alert(alert, seen)
    return (alert.name, alert.description, *alert.remediation)


@recorder(EntityCount)
def _record_entity_count(facts: Facts, record: EntityCount, seen: Seen) -> Iterable[str]:
    facts.identify(record.type, record.value)
    sighting = Sighting(_second(record.first_seen), _second(record.last_seen), record.alert_count,
                        record.high_severity_count)
    for form in _entity_forms(record.type, record.value):
        facts.sightings.pop(form, None)
        facts.sightings[form] = sighting
    _trim(facts.sightings, MAX_NAMES)
    scope = f"{record.type} {record.value}"
    facts.add_count("alerts", (), record.alert_count, scope)
    facts.add_count("alerts", ("high",), record.high_severity_count, scope)
    return ()


@recorder(OnCallEntry)
def _record_on_call(facts: Facts, entry: OnCallEntry, seen: Seen) -> Iterable[str]:
    for entity_type, value in entry.identifiers():
        facts.identify(entity_type, value)
    emails = tuple(dict.fromkeys(v.lower() for v in (entry.upn, entry.email) if v))
    fact = RosterFact(entry.name, emails, entry.phone, entry.team, *(_second(t) or t for t in (
        entry.shift_start, entry.shift_end, entry.as_of)))
    facts.roster.pop(entry.name.lower(), None)
    facts.roster[entry.name.lower()] = fact
    _trim(facts.roster, MAX_ROSTER)
    facts.declared_row(entry, {}, seen.tool, True)  # its location and team, declared
    return ()


def _verdicts(stored: Any) -> dict[str, VerdictFact]:
    """Stored verdicts read back; a damaged one is dropped (the entity is simply not assessed any more)."""
    verdicts: dict[str, VerdictFact] = {}
    for item in _records(stored):
        try:
            verdict = VerdictFact.from_dict(item)
        except (TypeError, ValueError, KeyError):
            continue
        verdicts[verdict.entity.lower()] = verdict
    return verdicts


# How a declared row's subjects are indexed for citation (``identify``), by semantic type.
_CITED_AS = {semantics.Sem.ACCOUNT: "account", semantics.Sem.SENDER: "account", semantics.Sem.RECIPIENT: "account",
             semantics.Sem.EMAIL: "account", semantics.Sem.HOST: "host", semantics.Sem.IP: "ip",
             semantics.Sem.URL: "url", semantics.Sem.DOMAIN: "dns", semantics.Sem.HASH: "filehash",
             semantics.Sem.PROCESS: "file", semantics.Sem.PARENT: "file", semantics.Sem.FILE: "file"}
# Free text is never evidence: it is not kept.
_UNKEPT = frozenset({semantics.Sem.TEXT.value, semantics.Sem.COMMAND.value})


def _row_text(value: Any) -> str:
    if isinstance(value, datetime):
        return str(_epoch(_second(value)))
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip()[:MAX_ROW_VALUE]


def link_forms(value: str) -> set[str]:
    """The forms a subject is written in (lower case): a UPN and its name part, DOMAIN\\user and user, a host
    and its short name, a URL and its host."""
    text = value.strip().lower()
    if not text or len(text) > MAX_ROW_VALUE:
        return set()
    forms = {text}
    if "://" in text:
        forms.add(text.split("://", 1)[1].split("/", 1)[0])
    elif "@" in text and " " not in text:
        local, _, domain = text.partition("@")
        forms |= {local, f"{domain.split('.')[0]}\\{local}"}
    elif "\\" in text:
        forms.add(text.rsplit("\\", 1)[1])
    elif "." in text and "/" not in text and ":" not in text and not text.replace(".", "").isdigit() \
            and not re_file(text):
        forms |= host_variants(text)
    return {f for f in forms if len(f) >= 2}


def re_file(text: str) -> bool:
    """A file name (powershell.exe): its first label is not a short name of anything."""
    return any(i.kind is IdKind.FILE for i in extract(text))


def _recorder_for(record_type: type) -> Recorder | None:
    return next((_RECORDERS[t] for t in record_type.__mro__ if t in _RECORDERS), None)


def _forms(value: str) -> set[str]:
    """The other forms of a stored identifier: a dotted name's first label (ws-fin-160.contoso.local is also
    ws-fin-160), an e-mail address's DOMAIN\\user."""
    if "@" in value and " " not in value:  # alice@contoso.com is also CONTOSO\alice
        local, _, domain = value.partition("@")
        return {f"{domain.split('.')[0]}\\{local}"}
    if "." in value and "/" not in value and ":" not in value and not value.replace(".", "").isdigit():
        return host_variants(value)
    return set()


def _entity_forms(entity_type: str, value: str) -> tuple[str, ...]:
    """An entity value as an answer may write it: lower-case, a host also by its first label."""
    text = value.strip().lower()
    if not text:
        return ()
    forms = {text}
    if entity_type.lower() in ("host", "dns", "domain"):
        forms |= host_variants(text)
    kind = _ENTITY_KINDS.get(entity_type.lower())
    if kind is not None:
        forms.add(normalise(kind, value))
    return tuple(sorted(forms))


def _implied_qualifiers(parameters: dict[str, Any]) -> tuple[str, ...]:
    """What a query's filters make its total: "min_severity=High" and "status=open" make 12 "high open" incidents,
    owner=unassigned makes them "unassigned". Other narrowing (an owner's name, a keyword, an entity, a date
    range) has no word a count claim would use; those totals stay plain counts."""
    words: list[str] = []
    floor = str(parameters.get("min_severity") or "Informational")
    severities = parameters.get("severity") or []
    if isinstance(severities, list) and len(severities) == 1:
        words.append(str(severities[0]).lower())
    elif floor != "Informational":
        words.append(floor.lower())
    status = str(parameters.get("status") or "").lower()
    if status in ("open", "closed", "new", "active"):
        words.append(status)
    elif status in ("resolved", "dismissed"):
        words.append("closed")
    if str(parameters.get("owner") or "").lower() == "unassigned":
        words.append("unassigned")
    return tuple(words)


_ENTITY_KINDS = {"ip": IdKind.IP, "host": IdKind.HOST, "dns": IdKind.DOMAIN, "domain": IdKind.DOMAIN,
                 "account": IdKind.ACCOUNT, "mailbox": IdKind.ACCOUNT, "filehash": IdKind.HASH, "url": IdKind.URL,
                 "file": IdKind.FILE, "alert id": IdKind.ALERT_ID}
_STATUS_CODES = {"New": "N", "Active": "A", "Closed": "C"}
_STATUS_NAMES = {v: k for k, v in _STATUS_CODES.items()}
_SEVERITY_CODES = {s[:1]: s for s in SEVERITIES}
_SEVERITY_KEYS = {s: s[:1] for s in SEVERITIES}
_ALERT_STATUSES = {"N": "New", "I": "InProgress", "R": "Resolved", "D": "Dismissed", "U": "Unknown"}
_ALERT_CODES = {v: k for k, v in _ALERT_STATUSES.items()}
_NOUNS = {"i": "incidents", "a": "alerts"}


def _navigation(value: str) -> bool:
    host = value.split("://", 1)[-1].split("/", 1)[0].lower()
    return any(host == h or host.endswith("." + h) for h in NAVIGATION_HOSTS)


def _add(ordered: dict, key: Any, limit: int) -> None:
    ordered.pop(key, None)
    ordered[key] = None
    _trim(ordered, limit)


def _trim(ordered: dict, limit: int) -> None:
    while len(ordered) > limit:
        del ordered[next(iter(ordered))]


def _records(value: Any) -> list[dict[str, Any]]:
    return [item for item in value or [] if isinstance(item, dict)]


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


@overload
def _second(value: datetime) -> datetime: ...
@overload
def _second(value: None) -> None: ...
def _second(value: datetime | None) -> datetime | None:
    """A time to the second, in UTC (the stored form holds epoch seconds)."""
    if value is None:
        return None
    value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)  # naive times are UTC
    return value.replace(microsecond=0)


def _epoch(value: datetime | None) -> int | None:
    return int(value.timestamp()) if value else None


def _from_epoch(value: Any) -> datetime | None:
    try:
        return datetime.fromtimestamp(int(value), UTC) if value is not None else None
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def _time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None
