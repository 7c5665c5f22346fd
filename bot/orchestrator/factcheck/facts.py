"""What the tools returned in one conversation, kept as typed data for the fact check.

Every record a query returns is recorded here as it arrives (never re-read from the model's text):
incidents with the fields analysts act on, alerts, the identifiers the results contain, the counts the
bot can compute from them, and the changes this conversation confirmed. It is persisted with the
conversation and bounded like the history; the most recently seen facts are kept.

Only structured fields state facts about a record. Titles, descriptions and alert names are attacker-
writable text: identifiers found in them may be cited (they are in the data), but nothing in them can
confirm a severity, a status, an owner or that an incident is benign.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from bot.investigation.models import Investigation
from bot.orchestrator.factcheck.identifiers import IdKind, extract, host_variants, normalise
from bot.orchestrator.factcheck.verdicts import MAX_VERDICTS, VerdictFact
from bot.sentinel.models import (
    AlertSummary,
    EntityCount,
    Incident,
    IncidentDetail,
    NamesEntities,
    QueryResult,
    TrendBin,
)

# Sized for the conversation's state budget (teams/state.py): about 20 KB when all are full.
MAX_INCIDENTS = 100
MAX_ALERTS = 100
MAX_IDENTIFIERS = 600
MAX_COUNTS = 150
MAX_CHANGES = 20
SEVERITIES = ("High", "Medium", "Low", "Informational")


class _Stored:
    """A frozen fact is stored with the conversation after every turn, unchanged: its dict form is built once.
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
    kind: str  # assign, status, severity, comment (ChangeKind values)
    summary: str  # "Status set to Closed (FalsePositive)"
    at: datetime

    def _as_dict(self) -> dict[str, Any]:
        return {"incident": self.incident, "kind": self.kind, "summary": self.summary, "at": self.at.isoformat()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChangeFact:
        return cls(int(data["incident"]), str(data["kind"]), str(data.get("summary") or ""),
                   datetime.fromisoformat(str(data["at"])))


@dataclass
class Facts:
    incidents: dict[int, IncidentFact] = field(default_factory=dict)  # least recently seen first
    alerts: dict[str, AlertFact] = field(default_factory=dict)
    identifiers: dict[str, None] = field(default_factory=dict)  # normalised values, as an ordered set
    numbers: dict[int, None] = field(default_factory=dict)  # incident numbers named anywhere in the results
    counts: list[CountFact] = field(default_factory=list)
    changes: list[ChangeFact] = field(default_factory=list)
    verdicts: dict[str, VerdictFact] = field(default_factory=dict)  # investigated entities (lower case) -> assessment

    # recording

    def observe(self, result: QueryResult, at: datetime) -> None:
        """Record what a query returned."""
        seen = Seen(result.metadata.tool, at)
        texts: list[str] = []
        for record in result.records:
            if isinstance(record, Incident):
                self._incident(record, seen, ())
                texts.append(record.title)
            elif isinstance(record, IncidentDetail):
                self._detail(record, seen)
                texts += [record.incident.title, record.description, record.classification_comment or "",
                          *(a.name for a in record.alerts)]
            elif isinstance(record, AlertSummary):
                self._alert(record, seen)
                texts.append(record.name)
            elif isinstance(record, EntityCount):
                self._identify(record.type, record.value)
                scope = f"{record.type} {record.value}"
                self._count("alerts", (), record.alert_count, scope)
                self._count("alerts", ("high",), record.high_severity_count, scope)
            elif isinstance(record, Investigation):
                self._investigation(record, seen, result)
            elif isinstance(record, NamesEntities):  # any other query's records that name entities
                for entity_type, value in record.identifiers():
                    self._identify(entity_type, value)
        for text in texts:
            for found in extract(text):
                if found.kind is IdKind.INCIDENT:
                    _add(self.numbers, int(found.value), MAX_IDENTIFIERS)
                elif found.kind is not IdKind.REFERENCE:
                    self._identify(found.kind.value, found.value)
        self._result_counts(result)

    def _investigation(self, investigation: Investigation, seen: Seen, result: QueryResult) -> None:
        """Every section's rows as the facts of their own query, and the assessment as a verdict."""
        for section in investigation.sections:
            if section.records:
                meta = replace(result.metadata, tool=section.name, total=section.total,
                               returned=len(section.records), truncated=section.total > len(section.records),
                               parameters={k: v for k, v in result.metadata.parameters.items() if k != "entity_type"})
                self.observe(QueryResult(records=section.records, metadata=meta), seen.at)
        for entity_type, value in investigation.identifiers():
            self._identify(entity_type, value)
        assessment = investigation.assessment
        verdict = VerdictFact(investigation.entity, investigation.entity_kind, assessment.level.value,
                              assessment.score, tuple(s.title for s in assessment.signals), seen.tool, seen.at)
        self.verdicts.pop(investigation.entity.lower(), None)
        self.verdicts[investigation.entity.lower()] = verdict
        while len(self.verdicts) > MAX_VERDICTS:
            self.verdicts.pop(next(iter(self.verdicts)))

    def record_change(self, incident: int, kind: str, summary: str, at: datetime, *, severity: str | None = None,
                      status: str | None = None, owner: str | None = None, classification: str | None = None,
                      tool: str = "the confirmed change") -> None:
        """A confirmed change was made: log it, and the incident's record is now what Sentinel returned."""
        self.changes.append(ChangeFact(incident, kind, summary, at))
        del self.changes[:-MAX_CHANGES]
        fact = self.incidents.get(incident)
        if fact is not None and status is not None:
            self._put_incident(replace(fact, severity=severity or fact.severity, status=status,
                                       owner=owner, classification=classification, seen=Seen(tool, at)))

    def migrate(self, known_incidents: Iterable[int], known_values: Iterable[str]) -> None:
        """State written before facts existed: its identifiers still count as seen."""
        for number in known_incidents:
            _add(self.numbers, int(number), MAX_IDENTIFIERS)
        for value in known_values:
            self._identify("", str(value))

    def halve(self) -> None:
        """Keep the newest half of everything (when conversation state must shrink)."""
        for ordered in (self.incidents, self.alerts, self.identifiers, self.numbers, self.verdicts):
            _trim(ordered, len(ordered) // 2)
        del self.counts[:len(self.counts) // 2]

    # reading

    def knows_incident(self, number: int) -> bool:
        return number in self.incidents or number in self.numbers

    def knows(self, kind: IdKind, value: str) -> bool:
        """Whether a result in this conversation contains this identifier (as a whole, normalised token)."""
        if kind is IdKind.INCIDENT:
            return value.isdigit() and self.knows_incident(int(value))
        # Known hosts are indexed under their short names too, so "ws-fin-160" finds "WS-FIN-160.contoso.local";
        # the answer's own name is matched whole, so "ws-fin-160.evil.com" does not pass as WS-FIN-160.
        return value in self.identifiers

    def change_for(self, incident: int | None, kinds: Iterable[str]) -> ChangeFact | None:
        """The latest confirmed change of one of ``kinds`` (to ``incident``, or to any when None)."""
        wanted = set(kinds)
        return next((c for c in reversed(self.changes)
                     if c.kind in wanted and (incident is None or c.incident == incident)), None)

    def counts_for(self, noun: str, qualifiers: frozenset[str]) -> list[CountFact]:
        return [c for c in self.counts if c.noun == noun and c.qualifiers == qualifiers]

    def can_count(self, noun: str) -> bool:
        return any(c.noun == noun for c in self.counts)

    # storage

    def to_dict(self) -> dict[str, Any]:
        return {"incidents": [f.to_dict() for f in self.incidents.values()],
                "alerts": [f.to_dict() for f in self.alerts.values()],
                "identifiers": list(self.identifiers), "numbers": list(self.numbers),
                "counts": [c.to_dict() for c in self.counts], "changes": [c.to_dict() for c in self.changes],
                "verdicts": [v.to_dict() for v in self.verdicts.values()]}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Facts:
        data = data or {}
        facts = cls()
        for item in _records(data.get("incidents")):
            fact = IncidentFact.from_dict(item)
            facts.incidents[fact.number] = fact
        for item in _records(data.get("alerts")):
            alert = AlertFact.from_dict(item)
            facts.alerts[alert.alert_id] = alert
        facts.identifiers = dict.fromkeys(str(v) for v in data.get("identifiers", []))
        facts.numbers = dict.fromkeys(int(n) for n in data.get("numbers", []))
        facts.counts = [CountFact.from_dict(c) for c in _records(data.get("counts"))]
        facts.changes = [ChangeFact.from_dict(c) for c in _records(data.get("changes"))]
        for item in _records(data.get("verdicts")):
            verdict = VerdictFact.from_dict(item)
            facts.verdicts[verdict.entity.lower()] = verdict
        return facts

    # internals

    def _incident(self, incident: Incident, seen: Seen, extra_times: Iterable[datetime | None]) -> None:
        times = tuple(t for t in (incident.created, incident.last_modified, *extra_times) if t is not None)
        self._put_incident(IncidentFact(incident.number, incident.severity, incident.status, incident.owner,
                                        incident.classification, incident.alert_count, incident.created, times, seen))
        self._count("alerts", (), incident.alert_count, f"incident #{incident.number}")
        if incident.owner:
            self._identify("owner", incident.owner)
        self._identify(IdKind.URL.value, incident.url)

    def _detail(self, detail: IncidentDetail, seen: Seen) -> None:
        self._incident(detail.incident, seen, (detail.first_activity, detail.last_activity, detail.closed,
                                               *(a.time for a in detail.alerts)))
        for match in detail.other_matches:
            _add(self.numbers, match.number, MAX_IDENTIFIERS)
        for alert in detail.alerts:
            self._alert(alert, seen)
        for entity in detail.entities:
            self._identify(entity.type, entity.value)
        self._identify(IdKind.ALERT_ID.value, detail.incident_id)

    def _alert(self, alert: AlertSummary, seen: Seen) -> None:
        self.alerts.pop(alert.alert_id, None)
        self.alerts[alert.alert_id] = AlertFact(alert.alert_id, alert.severity, alert.status, alert.time, seen)
        _trim(self.alerts, MAX_ALERTS)
        self._identify(IdKind.ALERT_ID.value, alert.alert_id)
        for label in alert.entities:
            entity_type, _, value = label.partition(": ")
            self._identify(entity_type, value)

    def _put_incident(self, fact: IncidentFact) -> None:
        self.incidents.pop(fact.number, None)
        self.incidents[fact.number] = fact
        _trim(self.incidents, MAX_INCIDENTS)

    def _identify(self, entity_type: str, value: str) -> None:
        """Index an entity value under every form an answer may write it in."""
        text = (value or "").strip()
        if not text:
            return
        kind = _ENTITY_KINDS.get(entity_type.lower())
        values = {text.lower(), normalise(kind, text) if kind else text.lower()}
        if kind in (IdKind.HOST, IdKind.DOMAIN) or entity_type.lower() in ("dns", "host", "domain"):
            values |= host_variants(text)
        if "@" in text and " " not in text:  # alice@contoso.com is also CONTOSO\alice
            local, _, domain = text.lower().partition("@")
            values.add(f"{domain.split('.')[0]}\\{local}")
        for found in extract(text):  # "WS-FIN-160.contoso.local" also holds the host name, a URL its domain
            values.add(found.value)
            if found.kind is IdKind.URL:
                values.add(found.value.split("://", 1)[-1].split("/", 1)[0])
        for v in values:
            _add(self.identifiers, v, MAX_IDENTIFIERS)

    def _count(self, noun: str, qualifiers: Iterable[str], value: int, scope: str) -> None:
        self.counts.append(CountFact(noun, frozenset(qualifiers), value, scope))
        del self.counts[:-MAX_COUNTS]

    def _result_counts(self, result: QueryResult) -> None:
        """The counts an answer may state about this result, computed here rather than trusted."""
        meta = result.metadata
        scope = f"{meta.tool} {meta.parameters.get('time_window', '')}".strip()
        implied = _implied_qualifiers(meta.parameters)
        records = result.records
        if meta.tool == "get_alert_trend":
            bins = [r for r in records if isinstance(r, TrendBin)]
            tally: Counter[tuple[str, ...]] = Counter()
            for b in bins:
                tally[(b.severity.lower(),)] += b.count
            self._tally("alerts", scope, tally, bins)
            by_day: Counter[str] = Counter()
            for b in bins:
                by_day[b.start.isoformat()] += b.count
                self._count("alerts", (b.severity.lower(),), b.count, f"{scope} bin {b.start:%Y-%m-%d %H:%M}")
            for day, total in by_day.items():
                self._count("alerts", (), total, f"{scope} bin {day}")
            return
        noun = {"query_incidents": "incidents", "query_alerts": "alerts"}.get(meta.tool)
        if noun is None:
            return
        self._count(noun, implied, meta.total, scope)
        self._count(noun, implied, meta.returned, scope)
        if meta.truncated:
            return  # per-severity counts of a partial list would be wrong
        tally = Counter()
        for record in records:
            severity = getattr(record, "severity", "").lower()
            status = getattr(record, "status", "")
            state = "closed" if status == "Closed" else "open"
            for key in ((severity,), (state,), (status.lower(),), (severity, state), (severity, status.lower())):
                tally[key] += 1
            if isinstance(record, Incident) and not record.owner:
                tally[("unassigned",)] += 1
        self._tally(noun, scope, tally, records)

    def _tally(self, noun: str, scope: str, tally: Counter[tuple[str, ...]], records: Iterable[Any]) -> None:
        total = sum(getattr(r, "count", 1) for r in records)
        self._count(noun, (), total, scope)
        for key, value in tally.items():
            self._count(noun, key, value, scope)
        # A severity with no rows is a true zero ("no high alerts"), so say so.
        for severity in SEVERITIES:
            if (severity.lower(),) not in tally:
                self._count(noun, (severity.lower(),), 0, scope)


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


def _time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None
