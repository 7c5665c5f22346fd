"""Running an investigation: the entity detected (or checked against the type given); for an account or host, every
other key the alerts know it by (``get_entity_identity``: a SID, object id, DOMAIN\\name, FQDN or device id), so the
evidence tables are searched by all of them; then the evidence queries that read its kind plus the alerts and
incidents naming it, all at once (``asyncio.gather`` through the client, each its
own validated, timed, decoded query); then a second round (``second_round``) of what those rows call for: the
counterparties they touched (IPs, domains, URLs, hashes, senders; ``counterparties``) looked up in threat intelligence
(when they name any), and the incidents of the alerts (only when an incident naming the entity was closed as false or
benign positive); then the assessment. One ``QueryResult`` holding one ``Investigation`` comes
back, its metadata's KQL every query's text, so the Data sources footnote and "Show query" work as for any read.
A query that fails leaves its section marked (its rows unknown), never the whole investigation, unless all of the
first round fail."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime

from bot.investigation.assessment import assess, closed_benign
from bot.investigation.counterparties import TOOL as COUNTERPARTY_TOOL
from bot.investigation.counterparties import lookup_values
from bot.investigation.models import Investigation, Section
from bot.sentinel.client import SentinelClient, iso_duration
from bot.sentinel.models import AlertSummary, Incident, QueryError, QueryMetadata, QueryResult
from bot.sentinel.params import InvalidParameter, TimeWindow, parse_time_window
from bot.sentinel.queries import Query, make_query
from bot.sentinel.queries.entity_identity import EntityIdentityQuery, IdentityKey
from bot.sentinel.queries.evidence import EVIDENCE
from bot.sentinel.queries.evidence.alert_incidents import MAX_ALERT_IDS, AlertIncidentsQuery, alert_id
from bot.sentinel.queries.evidence.common import DEFAULT_WINDOW, MAX_ALSO
from bot.sentinel.queries.evidence.counterparty_intel import CounterpartyIntelQuery
from bot.sentinel.queries.evidence.entity import Entity, EntityKind, detect, is_sign_in_name, parse_kind

TOOL = "investigate_entity"
PARAMETERS = ("entity", "entity_type", "time_window")
MAX_RELATED = 50  # alerts and incidents naming the entity
IDENTITY_TOOL = EntityIdentityQuery.tool
_IDENTITY_KINDS = (EntityKind.ACCOUNT, EntityKind.HOST)  # the kinds known by several keys
_RELATED = ("query_alerts", "query_incidents")
_TITLES = {cls.tool: cls.title for _, cls in EVIDENCE} | {"query_alerts": "Alerts", "query_incidents": "Incidents",
                                                          COUNTERPARTY_TOOL: CounterpartyIntelQuery.title,
                                                          AlertIncidentsQuery.tool: AlertIncidentsQuery.title}


def plan(entity: Entity, window: TimeWindow, also: tuple[str, ...] = ()) -> list[tuple[str, dict[str, object]]]:
    """The queries an investigation of ``entity`` (also known as ``also``) runs: (tool, arguments), in the order its
    card shows them."""
    evidence: dict[str, object] = {"entity": entity.value, "entity_type": entity.kind.value,
                                   "time_window": window.value, **({"also": list(also)} if also else {})}
    related: dict[str, object] = {"entity": entity.value, "time_window": window.value, "limit": MAX_RELATED}
    return [(spec.name, evidence) for spec, cls in EVIDENCE if entity.kind in cls.kinds] + \
        [("query_alerts", related), ("query_incidents", related)]


def planned_queries(arguments: Mapping[str, object]) -> list[Query]:
    """The validated query objects an investigation with these arguments runs (``python -m bot kql``)."""
    entity, window = _parsed(arguments)
    identity = [make_query(IDENTITY_TOOL, {"entity": entity.value})] if entity.kind in _IDENTITY_KINDS else []
    return identity + [make_query(tool, args) for tool, args in plan(entity, window)]


async def investigate(client: SentinelClient, arguments: Mapping[str, object]) -> QueryResult | QueryError:
    """The investigation the (loosely typed) arguments ask for; a bad argument is an error saying what to send."""
    started = time.perf_counter()
    try:
        entity, window = _parsed(arguments)
    except InvalidParameter as problem:
        return QueryError("invalid_argument", str(problem), retry_possible=False, tool=TOOL)
    named = await sign_in_name(client, entity, typed=arguments.get("entity_type") is not None)
    if isinstance(named, QueryError):
        return named
    entity, read_as, known = named
    # The alerts and incidents naming the entity resolve its identity themselves: they start with the look-up.
    early = {tool: asyncio.ensure_future(client.run(tool, args)) for tool, args in plan(entity, window)
             if tool in _RELATED}
    also = _valid_keys(known, entity) if known is not None else await other_keys(client, entity)
    queries = plan(entity, window, also)
    results = await asyncio.gather(*(early.get(tool) or client.run(tool, args) for tool, args in queries))
    sections, failed = _sections(queries, results)
    if len(failed) == len(sections):
        first = next(r for r in results if isinstance(r, QueryError))
        return replace(first, tool=TOOL, kql=_kql(sections))
    second = second_round(sections, (entity.value, *also))
    if second:
        answers = await asyncio.gather(*(client.run(tool, args) for tool, args in second))
        more, more_failed = _sections(second, list(answers), first_ref=sum(len(s.records) for s in sections) + 1)
        sections, failed = sections + more, failed + more_failed
    assessment = assess(sections, entity.kind.value)
    investigation = Investigation(entity.kind.value, entity.value, window.value, datetime.now(UTC), tuple(sections),
                                  assessment, also, read_as)
    metadata = QueryMetadata(
        tool=TOOL, parameters={"entity": entity.value, "entity_type": entity.kind.value, "time_window": window.value},
        total=1, returned=1, truncated=False, elapsed_ms=round((time.perf_counter() - started) * 1000, 1),
        kql=_kql(sections), timespan=iso_duration(max(window.duration.total_seconds(), 30 * 86400)),
        source=client.source, warnings=tuple(f"{s.title}: {s.error}" for s in failed))
    return QueryResult(records=(investigation,), metadata=metadata)


def second_round(sections: list[Section], own: tuple[str, ...]) -> list[tuple[str, dict[str, object]]]:
    """The queries the first round's rows call for: the counterparties they touched, in threat intelligence (when
    they name any); the incidents of the alerts (when an incident naming the entity was closed as false or benign
    positive, so an alert may be discounted)."""
    queries: list[tuple[str, dict[str, object]]] = []
    values = lookup_values(sections, own)
    if values:
        queries.append((COUNTERPARTY_TOOL, {"values": list(values)}))
    by_name = {s.name: s for s in sections}
    incidents, alerts = by_name.get("query_incidents"), by_name.get("query_alerts")
    if incidents and alerts and any(isinstance(i, Incident) and closed_benign(i) for i in incidents.records):
        ids = [a.alert_id for a in alerts.records if isinstance(a, AlertSummary) and alert_id(a.alert_id)]
        if ids:
            queries.append((AlertIncidentsQuery.tool, {"alert_ids": list(dict.fromkeys(ids))[:MAX_ALERT_IDS]}))
    return queries


async def sign_in_name(client: SentinelClient, entity: Entity, *, typed: bool
                       ) -> tuple[Entity, str, list[IdentityKey] | None] | QueryError:
    """An account or host named as analysts write it: by its sign-in name alone ("victor.alvarez", typed as an
    account, or a dotted word given no type, which also reads as a domain), or a dotted word given no type that the
    alerts know as a host (its FQDN, "ws-fin-160.corp.contoso.com"). Returns the entity read, what was read (the card
    says it), and its keys when the look-up returned them (none to ask again). Several accounts by that name: an
    error listing them. Nothing known by it: the value as it was (a dotted word as a domain, and the card says so)."""
    dotted = not typed and entity.kind is EntityKind.DOMAIN
    bare = entity.kind is EntityKind.ACCOUNT and is_sign_in_name(entity.value)
    if bare or (dotted and is_sign_in_name(entity.value)):
        account = await _account_by_sign_in_name(client, entity, dotted)
        if account is not None:
            return account
    if dotted:
        host = await _host_by_name(client, entity)
        if host is not None:
            return host
        return entity, f"No account or host in the alerts is known as {entity.value}: read as a domain.", None
    return entity, "", None


async def _account_by_sign_in_name(client: SentinelClient, entity: Entity, dotted: bool
                                   ) -> tuple[Entity, str, list[IdentityKey]] | QueryError | None:
    """The one account the alerts know by this sign-in name, an error naming several, or None."""
    records, found = await _known_as(client, {"entity": entity.value, "sign_in_name": True}, EntityKind.ACCOUNT)
    # A UPN names the person a same-named DOMAIN\\name does (the directory syncs one from the other): one UPN
    # settles it; two UPNs (two domains) or several DOMAIN\\names without one are two people.
    found = [k for k in found if "@" in k] or found
    if len(found) > 1:
        return QueryError("invalid_argument", f"{entity.value} is the sign-in name of {len(found)} accounts in the "
                          f"alerts ({', '.join(found[:5])}): investigate one of them by its UPN",
                          retry_possible=False, tool=TOOL)
    if not found:
        return None
    account = detect(found[0], EntityKind.ACCOUNT)
    return account, (f"{entity.value} is the sign-in name of {account.value} in the alerts: investigated as that "
                     "account" + (", not as a domain" if dotted else "") + "."), \
        [r for r in records if r.identity == found[0]]


async def _host_by_name(client: SentinelClient, entity: Entity) -> tuple[Entity, str, list[IdentityKey]] | None:
    """The host the alerts know by this dotted name (its FQDN, or a dotted host name), or None (also when the
    look-up fails: the value is then read as the domain it looks like)."""
    records, found = await _known_as(client, {"entity": entity.value}, EntityKind.HOST)
    if len(found) != 1:  # none, or (a name two devices share) no one reading to choose
        return None
    try:
        host = detect(found[0], EntityKind.HOST)
    except InvalidParameter:  # alert data is attacker-reachable: only a valid host name is taken
        return None
    return host, (f"{entity.value} is a name of host {host.value} in the alerts: investigated as that host, not as "
                  "a domain."), [r for r in records if r.identity == found[0]]


async def _known_as(client: SentinelClient, arguments: dict[str, object], kind: EntityKind
                    ) -> tuple[list[IdentityKey], list[str]]:
    """The identity look-up's keys of ``kind``, and the identities they belong to (sorted); none when it fails."""
    result = await client.run(IDENTITY_TOOL, arguments)
    records = [r for r in result.records if r.type == kind.value] if isinstance(result, QueryResult) else []
    return records, sorted({r.identity for r in records})


async def other_keys(client: SentinelClient, entity: Entity) -> tuple[str, ...]:
    """The other keys the alerts know an account or host by, each a valid value of its kind (alert data is
    attacker-reachable: anything else is dropped), at most ``MAX_ALSO``. None for other kinds, or when the look-up
    fails (the evidence is then searched by the value alone, as before the look-up existed)."""
    if entity.kind not in _IDENTITY_KINDS:
        return ()
    result = await client.run(IDENTITY_TOOL, {"entity": entity.value})
    return _valid_keys(list(result.records), entity) if isinstance(result, QueryResult) else ()


def _valid_keys(records: list[IdentityKey], entity: Entity) -> tuple[str, ...]:
    """The look-up's keys of the entity's kind other than its value, each a valid value of that kind (alert data is
    attacker-reachable: anything else is dropped), at most ``MAX_ALSO``."""
    found: list[str] = []
    for record in records:
        if record.type != entity.kind.value or record.key == entity.value.lower():
            continue
        try:
            found.append(detect(record.key, entity.kind).value)
        except InvalidParameter:
            continue
    return tuple(dict.fromkeys(found))[:MAX_ALSO]


def _parsed(arguments: Mapping[str, object]) -> tuple[Entity, TimeWindow]:
    unknown = sorted(set(arguments) - set(PARAMETERS))
    if unknown:
        raise InvalidParameter(unknown[0], f"{TOOL} has no parameter {unknown[0]!r}; its parameters are: "
                                           f"{', '.join(PARAMETERS)}")
    kind: EntityKind | None = parse_kind(arguments.get("entity_type"))
    return detect(arguments.get("entity"), kind), parse_time_window(arguments.get("time_window"), DEFAULT_WINDOW)


def _sections(queries: list[tuple[str, dict[str, object]]], results: list[QueryResult | QueryError],
              first_ref: int = 1) -> tuple[list[Section], list[Section]]:
    sections: list[Section] = []
    failed: list[Section] = []
    for (tool, _), result in zip(queries, results, strict=True):
        if isinstance(result, QueryError):
            section = Section(tool, _TITLES[tool], (), 0, result.kql, 0.0, error=result.message, first_ref=first_ref)
            failed.append(section)
        else:
            meta = result.metadata
            section = Section(tool, _TITLES[tool], tuple(result.records), meta.total, meta.kql, meta.elapsed_ms,
                              first_ref=first_ref)
        first_ref += len(section.records)
        sections.append(section)
    return sections, failed


def _kql(sections: list[Section]) -> str:
    return "\n\n".join(s.kql for s in sections if s.kql)
