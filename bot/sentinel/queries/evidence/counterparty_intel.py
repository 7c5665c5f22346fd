"""evidence_counterparty_intel: threat-intelligence indicators of the counterparties an investigated entity touched
(the addresses, domains and URLs it connected to, signed in from, clicked, or got mail from, the hashes of the files
it ran or wrote), looked up at once in
ThreatIntelIndicators (the latest row of each indicator over the last 30 days, deleted ones left out), most confident
first, with whether each is valid now.

Internal, and a second round of an investigation: its values come from the first round's rows
(``bot.investigation.counterparties``). Those rows are log data, attacker-writable: every value must be a valid IP,
domain, URL, hash or e-mail address (``entity.detect``; anything else is refused here and dropped by the caller), at
most ``MAX_COUNTERPARTIES``, and each reaches KQL only as one escaped literal (``kql.string_literal``) and the
demo's SQL only as a bound parameter."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.sentinel import kql
from bot.sentinel.demo_sql import iso
from bot.sentinel.params import InvalidParameter
from bot.sentinel.queries.evidence.entity import EntityKind, detect
from bot.sentinel.queries.evidence.threat_intel import RESULT, decode, indicators_demo, indicators_kql
from bot.sentinel.spec import DemoWorkspace, Param, QuerySpec

MAX_COUNTERPARTIES = 50  # values looked up per investigation; the first ones the evidence shows
LOOKBACK = timedelta(days=30)  # as evidence_threat_intel: indicators refreshed within it
COUNTERPARTY_KINDS = frozenset({EntityKind.IP, EntityKind.DOMAIN, EntityKind.URL, EntityKind.HASH})


@dataclass(frozen=True)
class CounterpartyIntelQuery:
    values: tuple[str, ...]  # valid counterparties, lower case, each once

    tool = "evidence_counterparty_intel"
    title = "Counterparties in threat intelligence"

    @property
    def timespan(self) -> timedelta:
        return LOOKBACK

    def parameters(self) -> dict[str, Any]:
        return {"values": list(self.values)}


def counterparty(value: object) -> str | None:
    """``value`` as a counterparty to look up (an IP, domain, URL, hash or e-mail address), lower case; None when it is
    not plainly one of them (log data may hold anything)."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        entity = detect(value.strip())
    except InvalidParameter:
        return None
    if entity.kind in COUNTERPARTY_KINDS or (entity.kind is EntityKind.ACCOUNT and "@" in entity.value):
        return entity.value.lower()
    return None


def _values(value: object) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not value:
        raise InvalidParameter("values", "give the counterparties to look up: a list of IPs, domains, URLs, hashes "
                                         "or e-mail addresses")
    if len(value) > MAX_COUNTERPARTIES:
        raise InvalidParameter("values", f"at most {MAX_COUNTERPARTIES} counterparties")
    found = []
    for item in value:
        valid = counterparty(item)
        if valid is None:
            raise InvalidParameter("values", f"{str(item)[:60]!r} is not an IP, domain, URL, hash or e-mail address")
        found.append(valid)
    return tuple(dict.fromkeys(found))


def _kql(query: CounterpartyIntelQuery) -> str:
    values = ", ".join(kql.string_literal(v) for v in query.values)
    return indicators_kql(f"// {query.tool}: threat-intelligence indicators of the entity's counterparties\n"
                          f"let counterparties = pack_array({values});\n", "counterparties",
                          f"ago({LOOKBACK.days}d)")


def _demo(query: CounterpartyIntelQuery, conn: sqlite3.Connection, now: datetime,
          workspace: DemoWorkspace) -> list[dict[str, Any]]:
    return indicators_demo(conn, {"start": iso(now - LOOKBACK), "now": iso(now), "spellings": json.dumps(query.values)})


SPEC = QuerySpec(
    name=CounterpartyIntelQuery.tool,
    params=(Param("values", _values, "IPs, domains, URLs, hashes or e-mail addresses.", kind="array",
                  items={"type": "string"}, required="the counterparties to look up"),),
    make=CounterpartyIntelQuery, kql=_kql, result=RESULT, keys=("ObservableValue",), decode=decode, demo=_demo,
    internal=True,
)
