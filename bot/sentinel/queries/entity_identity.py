"""get_entity_identity: every key an account or host is known by in the alerts of the lookback (internal: an
investigation asks it first, then searches the evidence tables by all of them).

An analyst may name a person by UPN, DOMAIN\\name, SID or Entra object id, and a device by name, FQDN or device id;
the activity tables each hold some of these (SigninLogs the UPN and object id, DeviceProcessEvents the UPN, SID and
object id, DeviceLogonEvents the DOMAIN\\name). The alerts' entity objects carry several at once, so the identity
map learned from them (``kql.identity_tables``, ``entities.IdentityMap``) says which keys are one identity: those
whose anchor is an identity the value names (``kql.wanted_identities``). Keys are lower case (the evidence tables
are matched case-insensitively).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.sentinel import demo_sql, kql
from bot.sentinel.entities import IDENTITY_FIELDS
from bot.sentinel.params import DETAIL_LOOKBACK, InvalidParameter
from bot.sentinel.rows import as_text
from bot.sentinel.spec import DemoWorkspace, Param, QuerySpec, Row

MAX_IDENTITY_KEYS = 50  # of one identity; a person or device has a handful
_TYPES = "(" + ", ".join(kql.string_literal(kind) for kind in IDENTITY_FIELDS) + ")"


@dataclass(frozen=True)
class EntityIdentityQuery:
    entity: str

    tool = "get_entity_identity"

    @property
    def timespan(self) -> timedelta:
        return DETAIL_LOOKBACK

    def parameters(self) -> dict[str, Any]:
        return {"entity": self.entity}


@dataclass(frozen=True)
class IdentityKey:
    """One key (lower case) of an account's or host's identity, and the identity it belongs to."""

    type: str
    identity: str
    key: str


def _kql(query: EntityIdentityQuery) -> str:
    lets = kql.declarations(entity=query.entity) + kql.identity_tables() + kql.wanted_identities()
    return f"""// get_entity_identity: every key the account or host is known by in the alerts
{lets}let keys = materialize(identity_anchors
    | extend IdentityKey = substring(IdentityAnchor, 1)
    | where EntityType in {_TYPES} and set_has_element(wanted_identities, IdentityKey)
    | project EntityType, IdentityKey, Key);
keys
| sort by EntityType asc, IdentityKey asc, Key asc
| take {MAX_IDENTITY_KEYS}
| extend TotalMatched = toscalar(keys | count)"""


def decode(row: Row) -> IdentityKey:
    return IdentityKey(as_text(row.get("EntityType")), as_text(row.get("IdentityKey")), as_text(row.get("Key")))


def _demo(query: EntityIdentityQuery, conn: sqlite3.Connection, now: datetime,
          workspace: DemoWorkspace) -> list[dict[str, Any]]:
    return demo_sql.fetch(
        conn,
        f"""WITH keys AS MATERIALIZED (
                SELECT EntityType, substr(Anchor, 2) AS IdentityKey, Key FROM IdentityAnchor
                WHERE substr(Anchor, 2) IN ({demo_sql.WANTED_IDENTITIES}))
            SELECT *, (SELECT COUNT(*) FROM keys) AS TotalMatched FROM keys
            ORDER BY EntityType, IdentityKey, Key LIMIT {MAX_IDENTITY_KEYS}""",
        {"entity": query.entity.lower()},
    )


def _entity(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 512:
        raise InvalidParameter("entity", "give the account or host to look up (at most 512 characters)")
    return kql.as_written(value.strip())


SPEC = QuerySpec(
    name=EntityIdentityQuery.tool,
    params=(Param("entity", _entity, "An account or host.", required="the account or host to look up"),),
    make=EntityIdentityQuery,
    kql=_kql,
    result=(("EntityType", "string"), ("IdentityKey", "string"), ("Key", "string"), ("TotalMatched", "long")),
    keys=("Key",),
    decode=decode,
    demo=_demo,
    internal=True,
)
