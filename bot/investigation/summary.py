"""An incident summary in one step: the incident's detail, its main entities' investigations and the incidents like
it, told as a timeline, the assets and indicators with their levels, the tactics and techniques, a suggested
classification and the next actions, every line citing the rows it rests on. Computed by the bot, the same every
time for the same rows, so it works without a model (the ``summary`` command) and the model only narrates it.

``summarize(client, {"incident_ref": ...})`` runs, under these bounds:

- the incident detail (one query; it reads the newest ``MAX_DETAIL_ALERTS`` alerts and ``MAX_DETAIL_ENTITIES``
  entities, and the summary says when the incident has more);
- the investigations (``run.investigate``, over ``WINDOW``) of at most ``MAX_INVESTIGATED`` main entities (one of
  each kind in turn: an account, a host, an IP, a hash, a URL, a domain, then the second of each...), at most
  ``CONCURRENT_INVESTIGATIONS`` at once (each runs its own dozen evidence queries concurrently), so a summary sends
  at most about 2 x 15 queries at a time;
- ``similar_incidents`` (one query) with the incident's alert names and its main entities, beside them.

An entity whose investigation fails is "unknown" (never "none") and the rest still stands; the similar incidents
failing leaves that section saying so. ``build`` is pure: it turns what was read into the ``IncidentSummary``.

The suggested classification, by these rules in order (the first that holds):

1. TruePositive: an investigated entity is HIGH (each such entity and its signals are the reasons).
2. FalsePositive or BenignPositive: no entity above LOW, no investigation failed, and at least
   ``SIMILAR_CLOSED_MIN`` similar incidents sharing an alert name were closed so (the most of them), more than were
   closed as TruePositive.
3. Undetermined: otherwise, with what is known (MEDIUM entities, failed investigations, nothing found).

The next actions (``ACTIONS``), each with the rows that call for it:

- reset_credentials: an account at MEDIUM or above: reset its password and revoke its sessions;
- isolate_device: a host at HIGH;
- block_indicator: an IP, URL, domain or hash at MEDIUM or above, and a counterparty found valid in threat
  intelligence (at most ``MAX_BLOCKS``);
- escalate: the suggestion is TruePositive and the incident (not closed) is High or an entity is HIGH: to the
  analyst on call;
- close: the suggestion is FalsePositive or BenignPositive and the incident is not closed: close it so, as the
  similar incidents were;
- investigate: an entity whose investigation failed, or Undetermined with MEDIUM entities: look at them by hand.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.investigation.models import (
    Cite,
    EntityFinding,
    IncidentSummary,
    Investigation,
    Level,
    NextAction,
    Reason,
    Suggestion,
    Technique,
    TimelineEntry,
)
from bot.investigation.run import investigate
from bot.sentinel.client import SentinelClient, iso_duration
from bot.sentinel.evidence import Indicator
from bot.sentinel.models import (
    AlertSummary,
    Incident,
    IncidentDetail,
    QueryError,
    QueryMetadata,
    QueryResult,
    SimilarIncident,
)
from bot.sentinel.queries.similar_incidents import LOOKBACK as SIMILAR_LOOKBACK
from bot.sentinel.queries.similar_incidents import MAX_ENTITIES as MAX_SIMILAR_ENTITIES
from bot.sentinel.queries.similar_incidents import MAX_NAMES as MAX_SIMILAR_NAMES
from bot.sentinel.queries.similar_incidents import MAX_VALUE_CHARS, SimilarIncidentsQuery
from bot.sentinel.spec import MAX_DETAIL_ALERTS, MAX_DETAIL_ENTITIES

TOOL = "summarize_incident"
PARAMETERS = ("incident_ref",)
DETAIL_TOOL = "get_incident_detail"
SIMILAR_TOOL = SimilarIncidentsQuery.tool
WINDOW = "last_7d"
MAX_INVESTIGATED = 5
CONCURRENT_INVESTIGATIONS = 2
MAX_TIMELINE = 14
MAX_KEY_EVIDENCE = 6  # evidence rows the signals cite, in the timeline beside the alerts
EVIDENCE_MARGIN = timedelta(hours=24)  # evidence that far before the first alert or after the last
MAX_CITES = 4  # rows cited per line
MAX_BLOCKS = 5
SIMILAR_CLOSED_MIN = 2
ACTIONS = ("reset_credentials", "isolate_device", "block_indicator", "escalate", "close", "investigate")
# The detail's entity types, as the investigation names them, in the order they are picked (as triage does).
KINDS = {"account": "account", "host": "host", "ip": "ip", "filehash": "hash", "url": "url", "dns": "domain"}
_ORDER = tuple(KINDS)
_LEVELS = list(Level)
_INDICATOR_KINDS = ("ip", "hash", "url", "domain")


async def summarize(client: SentinelClient, arguments: Mapping[str, object]) -> QueryResult | QueryError:
    """The summary of the incident ``arguments["incident_ref"]`` names; a bad argument is an error saying what to
    send, an incident that is not there an empty result."""
    started = time.perf_counter()
    unknown = sorted(set(arguments) - set(PARAMETERS))
    if unknown:
        return QueryError("invalid_argument", f"{TOOL} has no parameter {unknown[0]!r}; its parameter is "
                          "incident_ref", retry_possible=False, tool=TOOL)
    wanted = arguments.get("incident_ref")
    if wanted is None or str(wanted).strip() == "":
        return QueryError("invalid_argument", "incident_ref is required: an incident number, e.g. 42",
                          retry_possible=False, tool=TOOL)
    read = await client.run(DETAIL_TOOL, {"incident_ref": wanted})
    if isinstance(read, QueryError):
        return replace(read, tool=TOOL)
    if not read.records or not isinstance(read.records[0], IncidentDetail):
        return QueryResult((), replace(read.metadata, tool=TOOL, parameters={"incident_ref": wanted}))
    detail: IncidentDetail = read.records[0]
    picked = main_entities(detail)
    gate = asyncio.Semaphore(CONCURRENT_INVESTIGATIONS)

    async def one(kind: str, value: str) -> QueryResult | QueryError:
        async with gate:
            return await investigate(client, {"entity": value, "entity_type": kind, "time_window": WINDOW})

    similar_args = similar_arguments(detail, picked)
    similar_run = asyncio.ensure_future(client.run(SIMILAR_TOOL, similar_args)) if similar_args else None
    investigations = await asyncio.gather(*(one(kind, value) for kind, value, _ in picked))
    similar = await similar_run if similar_run is not None else None
    findings = tuple(_finding(entity, result) for entity, result in zip(picked, investigations, strict=True))
    summary = build(detail, findings, similar, datetime.now(UTC))
    kql = [read.metadata.kql] + [r.metadata.kql for r in (*investigations, similar)
                                 if isinstance(r, QueryResult) and r.metadata.kql]
    metadata = QueryMetadata(
        tool=TOOL, parameters={"incident_ref": detail.incident.number}, total=1, returned=1, truncated=False,
        elapsed_ms=round((time.perf_counter() - started) * 1000, 1), kql="\n\n".join(kql),
        timespan=iso_duration(max(SIMILAR_LOOKBACK.total_seconds(), 90 * 86400)), source=client.source,
        warnings=tuple(f"{f.kind} {f.value[:80]}: investigation failed ({f.error[:120]})" for f in findings
                       if f.error) + ((f"Similar incidents: {summary.similar_error[:160]}",)
                                      if summary.similar_error else ()))
    return QueryResult(records=(summary,), metadata=metadata)


def main_entities(detail: IncidentDetail) -> list[tuple[str, str, Cite]]:
    """(investigation kind, value, the detail's entity as a cite) of the entities investigated: by type order, then
    as listed, at most ``MAX_INVESTIGATED``."""
    by_kind: dict[str, list[Any]] = {}
    for entity in detail.entities:
        if entity.type in KINDS and entity.value.strip():
            by_kind.setdefault(entity.type, []).append(entity)
    kinds = sorted(by_kind, key=_ORDER.index)
    # One of each kind in turn (an account, a host, an IP, ...), so five accounts do not crowd out the host.
    usable = [by_kind[k][i] for i in range(max(map(len, by_kind.values()), default=0)) for k in kinds
              if i < len(by_kind[k])]
    return [(KINDS[e.type], e.value, Cite("entity", f"{e.type}:{e.value}")) for e in usable[:MAX_INVESTIGATED]]


def similar_arguments(detail: IncidentDetail, picked: list[tuple[str, str, Cite]]) -> dict[str, Any] | None:
    """The similar-incidents query's arguments: the incident's alert names and main entities that the query takes
    (values over its length are left out: they would be refused)."""
    names = [n for n in dict.fromkeys(a.name.strip() for a in detail.alerts) if n and len(n) <= MAX_VALUE_CHARS]
    values = [v for _, v, _ in picked if len(v) <= MAX_VALUE_CHARS]
    if not names and not values:
        return None
    return {"incident": detail.incident.number, "alert_names": names[:MAX_SIMILAR_NAMES],
            "entities": values[:MAX_SIMILAR_ENTITIES]}


def _finding(entity: tuple[str, str, Cite], result: QueryResult | QueryError) -> EntityFinding:
    kind, value, cite = entity
    found = result.records[0] if isinstance(result, QueryResult) and result.records else None
    if isinstance(found, Investigation):
        return EntityFinding(kind, value, cite, found)
    error = result.message if isinstance(result, QueryError) else "no result"
    return EntityFinding(kind, value, cite, None, error or "failed")


# ---- the pure part ------------------------------------------------------------------------------------------------

def build(detail: IncidentDetail, findings: tuple[EntityFinding, ...],
          similar: QueryResult | QueryError | None, as_of: datetime) -> IncidentSummary:
    """The summary of what was read (pure)."""
    similar_rows = tuple(r for r in similar.records if isinstance(r, SimilarIncident)) \
        if isinstance(similar, QueryResult) else ()
    similar_total = similar.metadata.total if isinstance(similar, QueryResult) else 0
    similar_error = similar.message if isinstance(similar, QueryError) else ""
    timeline, timeline_left = _timeline(detail, findings)
    suggestion = suggest(detail, findings, similar_rows)
    return IncidentSummary(detail, findings, similar_rows, similar_total, similar_error, timeline,
                           techniques(detail), suggestion, actions(detail, findings, suggestion, similar_rows),
                           _left_out(detail, findings, timeline_left), as_of, WINDOW)


def _left_out(detail: IncidentDetail, findings: tuple[EntityFinding, ...], timeline_left: int) -> tuple[str, ...]:
    notes = []
    total_alerts = max(detail.incident.alert_count, len(detail.alerts))
    if total_alerts > len(detail.alerts):
        notes.append(f"{len(detail.alerts)} of its {total_alerts} alerts read (the newest {MAX_DETAIL_ALERTS}); "
                     f"{total_alerts - len(detail.alerts)} not summarized")
    if len(detail.entities) >= MAX_DETAIL_ENTITIES:
        notes.append(f"its first {MAX_DETAIL_ENTITIES} entities read; it may have more")
    investigable = sum(1 for e in detail.entities if e.type in KINDS and e.value.strip())
    if investigable > len(findings):
        notes.append(f"{len(findings)} of {investigable} entities investigated (one of each kind in turn); "
                     f"{investigable - len(findings)} not investigated")
    if timeline_left:
        notes.append(f"{timeline_left} timeline lines not shown (the first {MAX_TIMELINE} by time)")
    return tuple(notes)


def _timeline(detail: IncidentDetail, findings: tuple[EntityFinding, ...]) -> tuple[tuple[TimelineEntry, ...], int]:
    """The alerts (one line per name: first time, count, last time) and the evidence rows the signals cite within
    ``EVIDENCE_MARGIN`` of the alerts, by time;
    at most ``MAX_TIMELINE`` lines, the earliest (and how many were left out)."""
    groups: dict[str, list[AlertSummary]] = {}
    for alert in sorted(detail.alerts, key=lambda a: (_sort_time(a.time), a.alert_id)):
        groups.setdefault(alert.name, []).append(alert)
    entries = [TimelineEntry(group[0].time, "alert", name, _worst(a.severity for a in group),
                             tuple(Cite("alert", a.alert_id) for a in group[:MAX_CITES]), len(group),
                             group[-1].time if len(group) > 1 else None) for name, group in groups.items()]
    times = [t for a in detail.alerts for t in (a.time, a.start, a.end) if t is not None]
    if times:  # the evidence of the incident's own activity, a day either side
        entries += _key_evidence(findings, min(times) - EVIDENCE_MARGIN, max(times) + EVIDENCE_MARGIN)
    entries.sort(key=lambda e: (_sort_time(e.time), e.source != "alert", e.what))
    return tuple(entries[:MAX_TIMELINE]), max(len(entries) - MAX_TIMELINE, 0)


def _key_evidence(findings: tuple[EntityFinding, ...], start: datetime, end: datetime) -> list[TimelineEntry]:
    """The evidence rows the entities' signals cite timed from ``start`` to ``end`` (not alerts or incidents: those
    are the incident's), strongest signals first."""
    out: list[TimelineEntry] = []
    seen: set[tuple[str, str]] = set()  # the same row found by two entities' investigations is one line
    for finding in findings:
        investigation = finding.investigation
        if investigation is None:
            continue
        for signal in sorted(investigation.assessment.signals, key=lambda s: -s.weight):
            for ref in signal.evidence:
                row = _row(investigation, ref)
                if row is None:
                    continue
                section, _, record = row
                moment = getattr(record, "time", None)
                if isinstance(record, (AlertSummary, Incident)) or not isinstance(moment, datetime) \
                        or not start <= moment <= end:
                    continue
                headers = getattr(record, "HEADERS", ())
                cells = [c for h, c in zip(headers, record.cells(), strict=False) if h != "time" and c]
                if (section.name, repr((moment, cells))) in seen:
                    continue
                seen.add((section.name, repr((moment, cells))))
                cites = tuple(dict.fromkeys((finding.cite, _cite(investigation, record))))
                out.append(TimelineEntry(moment, section.title, " · ".join(cells), "", cites))
                if len(out) >= MAX_KEY_EVIDENCE:
                    return out
    return out


def techniques(detail: IncidentDetail) -> tuple[Technique, ...]:
    """The tactics (the incident's and its alerts') and techniques (its alerts'), each with the alerts declaring it."""
    found: dict[tuple[bool, str], list[Cite]] = {}
    for tactic in detail.incident.tactics:
        found.setdefault((True, tactic), [])
    for alert in detail.alerts:
        for name, is_tactic in [(t, True) for t in alert.tactics] + [(t, False) for t in alert.techniques]:
            cites = found.setdefault((is_tactic, name.strip()), [])
            if len(cites) < MAX_CITES:
                cites.append(Cite("alert", alert.alert_id))
    return tuple(Technique(name, is_tactic, tuple(dict.fromkeys(cites)))
                 for (is_tactic, name), cites in sorted(found.items(), key=lambda i: (not i[0][0], i[0][1])) if name)


def suggest(detail: IncidentDetail, findings: tuple[EntityFinding, ...],
            similar: tuple[SimilarIncident, ...]) -> Suggestion:
    """The suggested classification by the module's rules, with its reasons."""
    high = [f for f in findings if f.level is Level.HIGH]
    if high:
        reasons = [_entity_reason(f) for f in high]
        true = [s for s in similar if s.alert_names and s.incident.classification == "TruePositive"]
        if true:
            reasons.append(Reason(f"{len(true)} similar incident(s) sharing an alert name were true positives",
                                  tuple(Cite("incident", str(s.incident.number)) for s in true[:MAX_CITES])))
        return Suggestion("TruePositive", tuple(reasons))
    failed = [f for f in findings if f.error]
    above_low = [f for f in findings if f.level is not None and _LEVELS.index(f.level) > _LEVELS.index(Level.LOW)]
    closed = Counter(s.incident.classification for s in similar if s.alert_names and s.incident.classification)
    benign = [c for c in ("BenignPositive", "FalsePositive") if closed[c] >= SIMILAR_CLOSED_MIN
              and closed[c] > closed["TruePositive"]]
    if benign and not failed and not above_low:
        chosen = max(benign, key=lambda c: closed[c])
        shared = [s for s in similar if s.alert_names and s.incident.classification == chosen]
        reasons = [Reason(f"{closed[chosen]} similar incident(s) sharing an alert name were closed as {chosen}"
                          + (f", {closed['TruePositive']} as TruePositive" if closed["TruePositive"] else ""),
                          tuple(Cite("incident", str(s.incident.number)) for s in shared[:MAX_CITES]))]
        if findings:
            reasons.append(Reason("no investigated entity is above low",
                                  tuple(f.cite for f in findings[:MAX_CITES])))
        return Suggestion(chosen, tuple(reasons))
    reasons = [_entity_reason(f) for f in above_low]
    reasons += [Reason(f"the investigation of {f.kind} {f.value} failed: its level is unknown", (f.cite,))
                for f in failed]
    if not reasons:
        reasons.append(Reason("no investigated entity is above low and no similar incident settles it"
                              if findings else "the incident names no entity the bot can investigate",
                              (Cite("incident", str(detail.incident.number)),)))
    return Suggestion("Undetermined", tuple(reasons))


def actions(detail: IncidentDetail, findings: tuple[EntityFinding, ...], suggestion: Suggestion,
            similar: tuple[SimilarIncident, ...]) -> tuple[NextAction, ...]:
    """The next actions by the module's rules, each with the rows that call for it."""
    out: list[NextAction] = []
    for f in findings:
        if f.kind == "account" and _at_least(f, Level.MEDIUM):
            out.append(NextAction("reset_credentials", f"Reset the password and revoke the sessions of {f.value}",
                                  _why(f), _cites(f)))
    for f in findings:
        if f.kind == "host" and _at_least(f, Level.HIGH):
            out.append(NextAction("isolate_device", f"Isolate the device {f.value}", _why(f), _cites(f)))
    out += _blocks(findings)
    number = Cite("incident", str(detail.incident.number))
    closed = detail.incident.status.strip().lower() == "closed"
    if suggestion.classification == "TruePositive" and not closed and (
            detail.incident.severity == "High" or any(f.level is Level.HIGH for f in findings)):
        out.append(NextAction("escalate", "Escalate to the analyst on call",
                              f"suggested TruePositive, incident severity {detail.incident.severity}",
                              (number, *_reason_cites(suggestion))[:MAX_CITES]))
    if suggestion.classification in ("BenignPositive", "FalsePositive") and not closed:
        out.append(NextAction("close", f"Close as {suggestion.classification}", suggestion.reasons[0].text,
                              _reason_cites(suggestion)))
    for f in findings:
        if f.error:
            out.append(NextAction("investigate", f"Investigate {f.kind} {f.value} by hand",
                                  "its investigation failed: its level is unknown", (f.cite,)))
        elif suggestion.classification == "Undetermined" and f.level is Level.MEDIUM:
            out.append(NextAction("investigate", f"Review {f.kind} {f.value}", _why(f), _cites(f)))
    return tuple(out)


def _blocks(findings: tuple[EntityFinding, ...]) -> list[NextAction]:
    blocks: dict[str, NextAction] = {}
    for f in findings:
        if f.kind in _INDICATOR_KINDS and _at_least(f, Level.MEDIUM):
            blocks.setdefault(f.value.lower(), NextAction("block_indicator", f"Block the {f.kind} {f.value}",
                                                          _why(f), _cites(f)))
    for f in findings:
        investigation = f.investigation
        if investigation is None:
            continue
        for signal in investigation.assessment.signals:
            if signal.name != "counterparty_intel":
                continue
            for ref in signal.evidence:
                row = _row(investigation, ref)
                if row is not None and isinstance(row[2], Indicator) and row[2].valid:
                    indicator = row[2]
                    blocks.setdefault(indicator.value.lower(), NextAction(
                        "block_indicator", f"Block {indicator.value}",
                        f"on threat intelligence (confidence {indicator.confidence}), touched by {f.kind} {f.value}",
                        (f.cite, _cite(investigation, indicator))))
    return list(blocks.values())[:MAX_BLOCKS]


def _at_least(finding: EntityFinding, level: Level) -> bool:
    return finding.level is not None and _LEVELS.index(finding.level) >= _LEVELS.index(level)


def _why(finding: EntityFinding) -> str:
    assert finding.investigation is not None
    assessment = finding.investigation.assessment
    named = ", ".join(s.title for s in assessment.signals[:3]) or "no signal"
    return f"{assessment.level.value.upper()} ({assessment.score}): {named}"


def _entity_reason(finding: EntityFinding) -> Reason:
    return Reason(f"{finding.kind} {finding.value} is {_why(finding)}", _cites(finding))


def _cites(finding: EntityFinding) -> tuple[Cite, ...]:
    """The entity, then the rows its strongest signals rest on."""
    cites = [finding.cite]
    investigation = finding.investigation
    if investigation is not None:
        for signal in sorted(investigation.assessment.signals, key=lambda s: -s.weight):
            for ref in signal.evidence:
                row = _row(investigation, ref)
                if row is not None:
                    cites.append(_cite(investigation, row[2]))
    return tuple(dict.fromkeys(cites))[:MAX_CITES]


def _reason_cites(suggestion: Suggestion) -> tuple[Cite, ...]:
    return tuple(dict.fromkeys(c for r in suggestion.reasons for c in r.cites))[:MAX_CITES]


def _row(investigation: Investigation, ref: str) -> tuple[Any, int, Any] | None:
    """(section, index, record) of an evidence ref ("E12")."""
    if not ref.startswith("E") or not ref[1:].isdigit():
        return None
    number = int(ref[1:])
    for section in investigation.sections:
        index = number - section.first_ref
        if 0 <= index < len(section.records):
            return section, index, section.records[index]
    return None


def _cite(investigation: Investigation, record: Any) -> Cite:
    """An evidence row as the conversation's references name it (``References.register`` of an investigation)."""
    if isinstance(record, AlertSummary):
        return Cite("alert", record.alert_id)
    if isinstance(record, Incident):
        return Cite("incident", str(record.number))
    kind, value = investigation.row_entity(record)
    return Cite("entity", f"{kind}:{value}")


_SEVERITY_ORDER = ("High", "Medium", "Low", "Informational")


def _worst(severities: Any) -> str:
    found = list(severities)
    return min(found, key=lambda s: _SEVERITY_ORDER.index(s) if s in _SEVERITY_ORDER else 9, default="")


def _sort_time(moment: datetime | None) -> float:
    return moment.timestamp() if moment is not None else float("inf")
