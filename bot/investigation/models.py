"""An investigation's typed result: the entity, one section per evidence query (its rows, total and KQL), and the
assessment (level, score, the signals with the evidence rows each rests on). Cards, the model's text and the fact
check read these; nothing here does I/O."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from bot.sentinel.models import IncidentDetail, SimilarIncident
from bot.sentinel.semantics import Declaration, Sem, declare


class Level(enum.Enum):
    NONE = "none"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


@dataclass(frozen=True)
class Section:
    """One evidence query's answer: its rows (typed records), how many matched, and the query that read them."""

    name: str  # the evidence query's tool name ("evidence_signins"), or "query_alerts" / "query_incidents"
    title: str
    records: tuple[Any, ...]
    total: int
    kql: str
    elapsed_ms: float
    error: str = ""  # the query failed: what the analyst is told (its rows are then unknown, not none)
    first_ref: int = 1  # the evidence number ("E<n>") of its first row; rows are numbered across the investigation

    def ref(self, index: int) -> str:
        return f"E{self.first_ref + index}"

    def status(self, shown: int) -> str:
        """What its heading says beside its title: why it failed, or how many rows are shown of how many."""
        if self.error:
            return f"failed: {self.error}"
        return f"{shown} of {self.total}" if self.total > shown else str(shown)

    def shown(self, cited: set[str], limit: int) -> tuple[tuple[int, Any], ...]:
        """(index, record) of the rows to show: the first ``limit``, and every row a signal cites."""
        return tuple((i, r) for i, r in enumerate(self.records) if i < limit or self.ref(i) in cited)


@dataclass(frozen=True)
class Signal:
    """A named finding with its weight, what it is in words, and the evidence rows ("E3") it rests on."""

    FACTS: ClassVar[Declaration] = declare("signal", ("signals",), identity=("name",), name=Sem.ID,
                                           title=Sem.TEXT, weight=Sem.SCORE, detail=Sem.TEXT, evidence=Sem.ID,
                                           cues={"weight": r"weight|\+"})

    name: str
    title: str
    weight: int
    detail: str
    evidence: tuple[str, ...]

    def evidence_text(self, most: int = 8) -> str:
        """The rows it rests on, as a reader sees them: "E3, E7, E9", "…" past ``most``."""
        return ", ".join(self.evidence[:most]) + (" …" if len(self.evidence) > most else "")


@dataclass(frozen=True)
class Assessment:
    level: Level
    score: int
    signals: tuple[Signal, ...]

    @property
    def cited(self) -> set[str]:
        """The evidence rows ("E3") the signals rest on."""
        return {ref for signal in self.signals for ref in signal.evidence}

    @property
    def summary(self) -> str:
        if not self.signals:
            return f"level {self.level.value}: no signal in the evidence read"
        named = ", ".join(f"{s.title} (+{s.weight})" for s in self.signals)
        return f"level {self.level.value} (score {self.score}): {named}"


@dataclass(frozen=True)
class Investigation:
    """One entity's evidence over a window, and the bot's assessment of it. Its sections' rows declare their own
    facts; it declares the assessment (``level``, ``score``) as the investigated entity's."""

    FACTS: ClassVar[Declaration] = declare(
        "assessment", ("assessments",), identity=("entity",), belongs=("entity", "also"), entity=Sem.ID, also=Sem.ID,
        level=Sem.LEVEL, score=Sem.SCORE, cues={"level": r"(?:assessed|assessment|rated|verdict)\s*(?:as|is|of|:)?",
                                                "score": r"score(?:d| of)?"})

    entity_kind: str
    entity: str
    window: str
    as_of: datetime
    sections: tuple[Section, ...]
    assessment: Assessment
    also: tuple[str, ...] = ()  # the entity's other keys the evidence was searched by (its SID, FQDN, ...)
    read_as: str = ""  # how the value as given was read ("victor.alvarez is the sign-in name of ...")

    def identifiers(self) -> tuple[tuple[str, str], ...]:
        """Every entity value the evidence holds (the fact check lets an answer cite them)."""
        kind = {"hash": "filehash", "domain": "dns"}.get(self.entity_kind, self.entity_kind)
        found: dict[tuple[str, str], None] = {(kind, self.entity): None}
        found.update({(kind, value): None for value in self.also})
        for section in self.sections:
            for record in section.records:
                for pair in getattr(record, "identifiers", lambda: ())():
                    found[pair] = None
        return tuple(found)

    @property
    def level(self) -> str:
        return self.assessment.level.value

    @property
    def score(self) -> int:
        return self.assessment.score

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def row_entity(self, record: Any) -> tuple[str, str]:
        """The entity an evidence row names, as a reference's (type, value): the first other than the investigated
        one, by CITED_KINDS (a sign-in's IP, a process's hash, a click's URL, a mail's other party), else the
        investigated entity itself, so every row can be cited ("tell me more about [3]")."""
        found = getattr(record, "identifiers", lambda: ())()
        for kind in CITED_KINDS:
            for pair in found:
                if pair[0] == kind and pair[1].lower() != self.entity.lower():
                    return pair
        return self.entity_kind, self.entity


# The kinds of entity an evidence row is cited by, most telling first (names a file only by its hash).
CITED_KINDS = ("filehash", "ip", "url", "host", "account")


@dataclass(frozen=True)
class EntityVerdict:
    """One of an incident's main entities as its investigation judged it: the level and the signals' titles."""

    FACTS: ClassVar[Declaration] = declare(
        "entity verdict", ("verdicts",), identity=("value",), belongs=("value",), kind=Sem.TEXT, value=Sem.ID,
        level=Sem.LEVEL, score=Sem.SCORE, signals=Sem.TEXT, failed=Sem.FLAG,
        cues={"level": r"(?:assessed|rated|verdict)\s*(?:as|is|of|:)?", "score": r"score(?:d| of)?"})

    kind: str
    value: str
    level: Level
    score: int
    signals: tuple[str, ...]
    failed: bool = False  # its investigation could not run: level unknown


@dataclass(frozen=True)
class RelatedIncident:
    number: int
    title: str
    severity: str


@dataclass(frozen=True)
class Triage:
    """A new incident's triage on arrival: its main entities' verdicts and the other open incidents naming them."""

    incident: int
    entities: tuple[EntityVerdict, ...]
    related: tuple[RelatedIncident, ...]
    headline: tuple[str, ...] = ()  # the summary's first lines from these investigations (``summary.build``)

    @property
    def level(self) -> Level:
        order = list(Level)
        return max((e.level for e in self.entities if not e.failed), key=order.index, default=Level.NONE)

    def to_dict(self) -> dict[str, Any]:
        return {"incident": self.incident, "related": [vars(r) for r in self.related], "headline": list(self.headline),
                "entities": [{"kind": e.kind, "value": e.value, "level": e.level.value, "score": e.score,
                              "signals": list(e.signals), "failed": e.failed} for e in self.entities]}

    @classmethod
    def from_dict(cls, data: Any) -> Triage | None:
        """A stored triage; None when ``data`` is not one (an older or damaged record: shown without it)."""
        try:
            return cls(int(data["incident"]), tuple(
                EntityVerdict(str(e["kind"]), str(e["value"]), Level(e["level"]), int(e["score"]),
                              tuple(str(s) for s in e["signals"]), bool(e.get("failed"))) for e in data["entities"]),
                tuple(RelatedIncident(int(r["number"]), str(r["title"]), str(r["severity"])) for r in data["related"]),
                tuple(str(line) for line in data.get("headline", ())))
        except (KeyError, TypeError, ValueError):
            return None


# ---- an incident summary (``bot.investigation.summary``) ---------------------------------------------------------

@dataclass(frozen=True)
class Cite:
    """A row a summary line rests on, as the conversation's references name it: ("alert", its SystemAlertId),
    ("incident", its number), ("entity", "type:value")."""

    kind: str
    key: str


@dataclass(frozen=True)
class TimelineEntry:
    """One line of the timeline: an alert (or several of one name) or a key evidence row, at its UTC time."""

    time: datetime | None
    source: str  # "alert", or the evidence section's title
    what: str  # log data: an alert's name, an evidence row's cells (attacker-writable text)
    severity: str
    cites: tuple[Cite, ...]
    count: int = 1  # alerts of this name
    last: datetime | None = None  # the last of them, when several


@dataclass(frozen=True)
class EntityFinding:
    """One of the incident's main entities and its investigation; ``error`` when that could not run (its level is
    then unknown, never none)."""

    kind: str  # the investigation's kind: account, host, ip, hash, url, domain
    value: str
    cite: Cite  # the incident detail's entity
    investigation: Investigation | None
    error: str = ""

    @property
    def level(self) -> Level | None:
        return self.investigation.assessment.level if self.investigation is not None else None


@dataclass(frozen=True)
class Reason:
    text: str  # the bot's words with values from the records (shown inert)
    cites: tuple[Cite, ...]


@dataclass(frozen=True)
class Suggestion:
    """The classification the bot suggests (Sentinel's: TruePositive, BenignPositive, FalsePositive, Undetermined)
    and why."""

    classification: str
    reasons: tuple[Reason, ...]


@dataclass(frozen=True)
class NextAction:
    """A recommended step: its kind (``summary.ACTIONS``), what to do in words, and the rows that call for it."""

    kind: str
    title: str
    why: str
    cites: tuple[Cite, ...]


@dataclass(frozen=True)
class Technique:
    name: str  # a tactic ("CredentialAccess") or a technique id ("T1003.001")
    tactic: bool
    cites: tuple[Cite, ...]  # the alerts that declare it


@dataclass(frozen=True)
class IncidentSummary:
    """One incident told in one step: its detail, its main entities' investigations, similar incidents, the timeline,
    tactics and techniques, a suggested classification and next actions, each line citing its rows. Computed by the
    bot (``bot.investigation.summary``), never by the model."""

    detail: IncidentDetail
    entities: tuple[EntityFinding, ...]
    similar: tuple[SimilarIncident, ...]
    similar_total: int
    similar_error: str
    timeline: tuple[TimelineEntry, ...]
    techniques: tuple[Technique, ...]
    suggestion: Suggestion
    actions: tuple[NextAction, ...]
    left_out: tuple[str, ...]  # what the bounds left out, in words
    as_of: datetime
    window: str  # the investigations' window

    @property
    def number(self) -> int:
        return self.detail.incident.number

    def headline(self) -> tuple[str, ...]:
        """The summary's first lines in words (no [n]): the suggestion and the first actions."""
        lines = [f"Suggested: {self.suggestion.classification}"
                 + (f" ({self.suggestion.reasons[0].text})" if self.suggestion.reasons else "")]
        lines += [f"Next: {a.title}" for a in self.actions[:2]]
        return tuple(lines)
