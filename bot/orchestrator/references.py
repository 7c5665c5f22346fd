"""The [n] references of one conversation: what "[2]" and "that incident" point at.

Numbers are stable for the whole conversation: an incident shown as [2] stays [2] when it appears in a
later table, and a new item gets the next free number. In a war-room thread three analysts can say
"[2]" and mean the same thing. The registry is bounded; the oldest entries are forgotten first and
their numbers are never reused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bot.investigation.models import IncidentSummary, Investigation
from bot.sentinel.models import (
    AlertSummary,
    EntityCount,
    HuntRow,
    Incident,
    IncidentDetail,
    QueryResult,
    count_label,
    one_line,
)

MAX_REFERENCES = 300
CONTEXT_REFERENCES = 30  # how many of the most recent references the model sees each turn


class RefKind(StrEnum):
    INCIDENT = "incident"
    ALERT = "alert"
    ENTITY = "entity"


@dataclass
class Reference:
    n: int
    kind: RefKind
    key: str  # incident number, SystemAlertId, "type:value"
    label: str  # short description for the model and for "[n] is ..."

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "kind": self.kind.value, "key": self.key, "label": self.label}


@dataclass
class References:
    items: list[Reference] = field(default_factory=list)  # least recently used first
    next_n: int = 1
    last_incident: str | None = None  # the incident most recently looked at ("that incident")

    def __post_init__(self) -> None:
        # Keyed by (kind, key); RefKind is a StrEnum, so a plain "incident" finds RefKind.INCIDENT's entry.
        self._by_key: dict[tuple[str, str], Reference] = {(r.kind, r.key): r for r in self.items}

    def ref_for(self, kind: str, key: str) -> int | None:
        item = self._by_key.get((kind, key))
        return item.n if item else None

    def get(self, n: int) -> Reference | None:
        return next((item for item in self.items if item.n == n), None)

    def assign(self, kind: RefKind | str, key: str, label: str) -> int:
        kind = RefKind(kind)
        item = self._by_key.get((kind, key))
        if item is not None:
            item.label = label
            # Recently used items move to the end, so trimming forgets the stalest first.
            self.items.remove(item)
            self.items.append(item)
            return item.n
        reference = Reference(self.next_n, kind, key, label)
        self.next_n += 1
        self.items.append(reference)
        self._by_key[(kind, key)] = reference
        for forgotten in self.items[:-MAX_REFERENCES]:
            del self._by_key[(forgotten.kind, forgotten.key)]
        del self.items[:-MAX_REFERENCES]
        return reference.n

    def register(self, result: QueryResult) -> None:
        """Give every row of a result its [n]."""
        for record in result.records:
            if isinstance(record, Incident):
                self._incident(record)
            elif isinstance(record, IncidentDetail):
                self._incident(record.incident)
                self.last_incident = str(record.incident.number)
                for alert in record.alerts:
                    self._alert(alert)
                for entity in record.entities:
                    self._entity(entity.type, entity.value)
            elif isinstance(record, AlertSummary):
                self._alert(record)
            elif isinstance(record, EntityCount):
                self._entity(record.type, record.value, count_label(record.alert_count, "alert"))
            elif isinstance(record, HuntRow) and record.identifiers():  # a hunt row: by its first identifier
                self._entity(*record.identifiers()[0])
            elif isinstance(record, Investigation):
                self._investigation(record)
            elif isinstance(record, IncidentSummary):  # the incident's rows, its entities' evidence, similar ones
                self._incident(record.detail.incident)
                for alert in record.detail.alerts:
                    self._alert(alert)
                for entity in record.detail.entities:
                    self._entity(entity.type, entity.value)
                for finding in record.entities:
                    if finding.investigation is not None:
                        self._investigation(finding.investigation)
                for similar in record.similar:
                    self._incident(similar.incident)
                self.last_incident = str(record.detail.incident.number)

    def _investigation(self, record: Investigation) -> None:
        """The entity, its alerts and incidents, what each row names."""
        self._entity(record.entity_kind, record.entity, f"assessed {record.assessment.level.value}")
        for section in record.sections:
            for found in section.records:
                if isinstance(found, Incident):
                    self._incident(found)
                elif isinstance(found, AlertSummary):
                    self._alert(found)
                elif record.row_entity(found) != (record.entity_kind, record.entity):
                    self._entity(*record.row_entity(found))

    def context(self) -> str:
        """The compact reference list the model sees each turn."""
        if not self.items:
            return ""
        recent = self.items[-CONTEXT_REFERENCES:]
        lines = [f"[{r.n}] {_context_label(r)}" for r in sorted(recent, key=lambda r: r.n)]
        if self.last_incident:
            lines.append(f'"that incident" most likely means incident {self.last_incident} (the last one looked at).')
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """Stored compactly (the state bound keeps more turns of history): a row per reference, [n, kind's first
        letter, key, label], the label left out (null) when it is the one an entity's key gives."""
        rows = [[r.n, r.kind.value[0], r.key, None if r.label == _entity_label(r) else r.label] for r in self.items]
        return {"rows": rows, "next_n": self.next_n, "last_incident": self.last_incident}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> References:
        data = data or {}
        items = [Reference(int(r["n"]), RefKind(str(r["kind"])), str(r["key"]), str(r["label"]))
                 for r in data.get("items", [])]  # stored before the compact rows
        for n, kind, key, label in data.get("rows", []):
            reference = Reference(int(n), _KINDS[str(kind)], str(key), "")
            reference.label = str(label) if label is not None else (_entity_label(reference) or "")
            items.append(reference)
        return cls(items=items, next_n=int(data.get("next_n", len(items) + 1)), last_incident=data.get("last_incident"))

    def _incident(self, incident: Incident) -> int:
        label = f"#{incident.number} {_short(incident.title)} ({incident.severity}, {incident.status})"
        return self.assign(RefKind.INCIDENT, str(incident.number), label)

    def _alert(self, alert: AlertSummary) -> int:
        return self.assign(RefKind.ALERT, alert.alert_id, f"{_short(alert.name)} ({alert.severity})")

    def _entity(self, entity_type: str, value: str, note: str = "") -> int:
        label = f"{entity_type} {_short(value)}" + (f" ({note})" if note else "")
        return self.assign(RefKind.ENTITY, f"{entity_type}:{value}", label)


_KINDS = {kind.value[0]: kind for kind in RefKind}


def _entity_label(reference: Reference) -> str | None:
    """The label ``_entity`` gives an entity reference without a note, from its key ("host:ws-1" -> "host ws-1")."""
    if reference.kind is not RefKind.ENTITY:
        return None
    entity_type, _, value = reference.key.partition(":")
    return f"{entity_type} {_short(value)}"


def _context_label(reference: Reference) -> str:
    """What the model is told a reference is. This list goes in a system message, so it names incidents and
    alerts by their ids only: titles and alert names are attacker-writable and stay in the tool results,
    which the model treats as data. Entities are named by their (short) identifying value. An alert's id is cut to
    its first 8 characters: no tool takes an alert id, and a whole GUID costs about 20 tokens a line on every call."""
    if reference.kind is RefKind.INCIDENT:
        return f"incident #{reference.key}"
    if reference.kind is RefKind.ALERT:
        return f"alert {reference.key[:8]}"
    entity_type, _, value = reference.key.partition(":")
    if _HEX.fullmatch(value) and reference.label.startswith(f"{entity_type} {_short(value)}"):
        # A file hash whole (a SHA-256 is 64 characters, past the label's 50): only hex digits, so no words, and the
        # model can pass it to a query ("investigate [7]"); cut, it names nothing.
        return f"{entity_type} {value}" + reference.label[len(f"{entity_type} {_short(value)}"):]
    return reference.label  # "account alice@contoso.com (12 alerts)": the entity's type leads its label


_HEX = re.compile(r"[0-9a-fA-F]{32,128}")


def _short(text: str, width: int = 50) -> str:
    return one_line(text, width)
