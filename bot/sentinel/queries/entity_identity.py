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
    # The value is an account's sign-in name alone ("first.last"): the accounts whose UPN has it before the "@" or
    # whose DOMAIN\\name has it after the "\\", with all their keys.
    sign_in_name: bool = False

    tool = "get_entity_identity"

    @property
    def timespan(self) -> timedelta:
        return DETAIL_LOOKBACK

    def parameters(self) -> dict[str, Any]:
        return {"entity": self.entity, **({"sign_in_name": True} if self.sign_in_name else {})}


@dataclass(frozen=True)
class IdentityKey:
    """One key (lower case) of an account's or host's identity, and the identity it belongs to."""

    type: str
    identity: str
    key: str


_BACKSLASH = kql.string_literal("\\")
_NAMED = f"""let wanted_identities = toscalar(identity_anchors
    | where EntityType == "account"
        and (Key startswith strcat(entity_wanted, "@") or Key endswith strcat({_BACKSLASH}, entity_wanted))
    | summarize make_set(substring(IdentityAnchor, 1)));
"""


def _kql(query: EntityIdentityQuery) -> str:
    wanted = _NAMED if query.sign_in_name else kql.wanted_identities()
    lets = kql.declarations(entity=query.entity) + kql.identity_tables() + wanted
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
                WHERE substr(Anchor, 2) IN ({_NAMED_SQL if query.sign_in_name else demo_sql.WANTED_IDENTITIES}))
            SELECT *, (SELECT COUNT(*) FROM keys) AS TotalMatched FROM keys
            ORDER BY EntityType, IdentityKey, Key LIMIT {MAX_IDENTITY_KEYS}""",
        {"entity": query.entity.lower()},
    )


# The demo's _NAMED: substr, not LIKE, so a "_" or "%" in the name is itself.
_NAMED_SQL = """SELECT substr(Anchor, 2) FROM IdentityAnchor WHERE EntityType = 'account'
    AND (substr(Key, 1, length(:entity) + 1) = :entity || '@'
         OR (length(Key) > length(:entity) + 1 AND substr(Key, -length(:entity) - 1) = '\\' || :entity))"""


def _sign_in_name(value: object) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidParameter("sign_in_name", "must be true or false")
    return value


def _entity(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 512:
        raise InvalidParameter("entity", "give the account or host to look up (at most 512 characters)")
    return kql.as_written(value.strip())


SPEC = QuerySpec(
    name=EntityIdentityQuery.tool,
    params=(Param("entity", _entity, "An account or host.", required="the account or host to look up"),
            Param("sign_in_name", _sign_in_name, kind="boolean")),
    make=EntityIdentityQuery,
    kql=_kql,
    result=(("EntityType", "string"), ("IdentityKey", "string"), ("Key", "string"), ("TotalMatched", "long")),
    keys=("Key",),
    decode=decode,
    demo=_demo,
    internal=True,
)
