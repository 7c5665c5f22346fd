"""Triage on arrival: a new incident's main entities investigated (each with the deterministic assessment of
``assessment.py``) and the other open incidents that name them, compact enough for the watch card.

``triage(client, number)`` reads the incident's detail, picks at most :data:`MAX_ENTITIES` of its entities
(accounts, hosts and IPs first: what an analyst asks about first), runs their investigations concurrently over
:data:`WINDOW`, and keeps the open incidents their "Incidents" sections found, other than this one. Its queries
run at triage priority (after analysts' and the watches' poll: ``sentinel/scheduler.py``). It never raises for a
query that fails: an entity whose investigation failed is marked, and no entity at all is None.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from bot.investigation import summary
from bot.investigation.models import Cite, EntityFinding, EntityVerdict, Investigation, Level, RelatedIncident, Triage
from bot.investigation.run import investigate
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import Incident, IncidentDetail, QueryResult
from bot.sentinel.scheduler import Priority, query_priority

MAX_ENTITIES = 3
MAX_RELATED = 5
WINDOW = "last_7d"
# The detail card's entity types, as the investigation names them, in the order they are picked.
_KINDS = {"account": "account", "host": "host", "ip": "ip", "filehash": "hash", "url": "url", "dns": "domain"}
_ORDER = tuple(_KINDS)
_DETAIL_TYPES = {kind: detail for detail, kind in _KINDS.items()}


async def triage(client: SentinelClient, number: int) -> Triage | None:
    """Incident ``number``'s triage; None when the incident cannot be read or names no entity. Its queries wait
    behind analysts' and the watches' poll in the identity's budget (``Priority.TRIAGE``)."""
    with query_priority(Priority.TRIAGE):
        return await _triage(client, number)


async def _triage(client: SentinelClient, number: int) -> Triage | None:
    detail = await client.run("get_incident_detail", {"incident_ref": number})
    if not isinstance(detail, QueryResult) or not detail.records or not isinstance(detail.records[0], IncidentDetail):
        return None
    picked = main_entities(detail.records[0])
    if not picked:
        return None
    results = await asyncio.gather(*(investigate(client, {"entity": value, "entity_type": kind,
                                                          "time_window": WINDOW}) for kind, value in picked))
    verdicts: list[EntityVerdict] = []
    related: dict[int, RelatedIncident] = {}
    findings: list[EntityFinding] = []
    for (kind, value), result in zip(picked, results, strict=True):
        found = result.records[0] if isinstance(result, QueryResult) and result.records else None
        cite = Cite("entity", f"{_DETAIL_TYPES[kind]}:{value}")
        findings.append(EntityFinding(kind, value, cite, found if isinstance(found, Investigation) else None,
                                      "" if isinstance(found, Investigation) else "failed"))
        if not isinstance(found, Investigation):
            verdicts.append(EntityVerdict(kind, value, Level.NONE, 0, (), failed=True))
            continue
        a = found.assessment
        verdicts.append(EntityVerdict(kind, value, a.level, a.score, tuple(s.title for s in a.signals)))
        for incident in _open_incidents(found, number):
            related.setdefault(incident.number, RelatedIncident(incident.number, incident.title, incident.severity))
    ranked = sorted(related.values(), key=lambda r: -r.number)[:MAX_RELATED]
    # The summary's first lines from what was read (pure, no query more: no similar incidents).
    headline = summary.build(detail.records[0], tuple(findings), None, datetime.now(UTC)).headline()
    return Triage(number, tuple(verdicts), tuple(ranked), headline)


def main_entities(detail: IncidentDetail) -> list[tuple[str, str]]:
    """(investigation kind, value) of the incident's main entities: by type order, then as listed."""
    usable = [e for e in detail.entities if e.type in _KINDS and e.value]
    usable.sort(key=lambda e: _ORDER.index(e.type))
    return [(_KINDS[e.type], e.value) for e in usable[:MAX_ENTITIES]]


def _open_incidents(investigation: Investigation, number: int) -> list[Incident]:
    section = investigation.section("query_incidents")
    records = section.records if section is not None else ()
    return [i for i in records if isinstance(i, Incident) and i.number != number
            and i.status.strip().lower() != "closed"]
