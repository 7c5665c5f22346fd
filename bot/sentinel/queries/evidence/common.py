"""What the evidence queries share: the query object (an entity, a window), its parameters, and the one structure a
list of rows is declared as (table, the columns naming each kind of entity, the projected columns with their KQL and
SQL expressions, the order), from which both the KQL and the demo's SQL are built, so the two cannot drift.

Every evidence query is internal (never a tool of its own): ``investigate_entity`` runs the ones that fit the entity.
The entity's value reaches KQL once, as ``let entity_wanted = "<escaped literal>";``, and the demo's SQL as a bound
parameter, compared case-insensitively (KQL ``=~``; SQL ``kql_lower(col) = kql_lower(:entity)``, which the demo's
expression indexes serve).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar

from bot.sentinel import catalog, demo_sql, kql
from bot.sentinel.demo_sql import iso
from bot.sentinel.params import InvalidParameter, TimeWindow, parse_time_window
from bot.sentinel.queries.evidence.entity import Entity, EntityKind, detect, parse_kind
from bot.sentinel.spec import DemoWorkspace, Param, QuerySpec, Row

MAX_EVIDENCE_ROWS = 50  # per evidence query: the newest (or most telling) rows, with the total matched
DEFAULT_WINDOW = TimeWindow.LAST_7D


@dataclass(frozen=True)
class EvidenceQuery:
    """One evidence query about one entity over a window ending now (a subclass per query names its tool)."""

    entity: Entity
    window: TimeWindow
    # The entity's other keys (an account's SID, object id and DOMAIN\\name; a host's FQDN and device ids): the rows
    # naming any of them are the entity's too (``get_entity_identity``, asked by the investigation).
    also: tuple[str, ...] = ()

    tool: ClassVar[str] = ""
    title: ClassVar[str] = ""  # the heading of its section of an investigation
    kinds: ClassVar[frozenset[EntityKind]] = frozenset()
    lookback: ClassVar[timedelta | None] = None  # a fixed lookback instead of the window (a risk state, indicators)

    def __post_init__(self) -> None:
        if self.entity.kind not in self.kinds:
            raise InvalidParameter("entity_type", f"{self.tool} reads {', '.join(sorted(k.value for k in self.kinds))}"
                                                  f", not {self.entity.kind.value}")

    @property
    def span(self) -> timedelta:
        return max(self.window.duration, self.lookback or timedelta(0))

    @property
    def timespan(self) -> timedelta:
        return self.span

    @property
    def ago(self) -> str:
        """The KQL start of the rows read: the window, or the fixed lookback when longer."""
        seconds = int(self.span.total_seconds())
        return f"ago({seconds // 86400}d)" if seconds % 86400 == 0 else f"ago({seconds // 3600}h)"

    def parameters(self) -> dict[str, Any]:
        return {"entity": self.entity.value, "entity_type": self.entity.kind.value, "time_window": self.window.value,
                **({"also": list(self.also)} if self.also else {})}

    @property
    def spellings(self) -> tuple[str, ...]:
        """The value and its other keys, lower case, each once."""
        return tuple(dict.fromkeys(v.lower() for v in (self.entity.value, *self.also)))


def params() -> tuple[Param, ...]:
    return (Param("entity", lambda v: v, "Account UPN, host, IP, file hash, URL or domain.",
                  required="the account, host, IP, hash, URL or domain to investigate"),
            Param("entity_type", parse_kind, "Detected when omitted.", enum=tuple(k.value for k in EntityKind)),
            Param("time_window", lambda v: parse_time_window(v, DEFAULT_WINDOW),
                  enum=tuple(w.value for w in TimeWindow), default=DEFAULT_WINDOW.value),
            Param("also", _parse_also, kind="array", items={"type": "string"}))


MAX_ALSO = 10  # other keys of one entity searched beside its value


def _parse_also(value: object) -> list[str]:
    """The other keys as given (each checked against the entity's kind by ``make``)."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InvalidParameter("also", "must be a list of the entity's other identifiers")
    if len(value) > MAX_ALSO:
        raise InvalidParameter("also", f"at most {MAX_ALSO} other identifiers")
    return list(value)


def make(cls: type[EvidenceQuery]) -> Callable[..., EvidenceQuery]:
    def made(entity: object, entity_type: EntityKind | None, time_window: TimeWindow, also: list[str]) -> EvidenceQuery:
        found = detect(entity, entity_type)
        others = tuple(detect(v, found.kind).value for v in also)  # each must be one of the same kind
        return cls(found, time_window, others)
    return made


def declaration(query: EvidenceQuery) -> str:
    """The entity's value, and all its keys (``entity_spellings``: compared with ``in~``), each declared once as an
    escaped literal."""
    also = "".join(f", {kql.string_literal(v)}" for v in query.also)
    return (f"let entity_wanted = {kql.string_literal(query.entity.value)};\n"
            f"let entity_spellings = pack_array(entity_wanted{also});\n")


def demo_params(query: EvidenceQuery, now: datetime) -> dict[str, Any]:
    return {"start": iso(now - query.span), "now": iso(now), "entity": query.entity.value,
            "spellings": json.dumps(query.spellings)}


# The demo's match of a column against every key of the entity (KQL: ``column in~ (entity_spellings)``).
_SPELLINGS_SQL = "(SELECT value FROM json_each(:spellings))"


def matches_kql(column: str) -> str:
    return f"{column} in~ (entity_spellings)"


def matches_sql(column: str) -> str:
    return f"kql_lower({column}) IN {_SPELLINGS_SQL}"


@dataclass(frozen=True)
class Column:
    """A projected column: its name and Kusto type, and how KQL and the demo's SQL compute it (default: itself)."""

    name: str
    type: str
    kql: str = ""
    sql: str = ""

    def kql_part(self) -> str:
        return f"{self.name} = {self.kql}" if self.kql else self.name

    def sql_part(self) -> str:
        return f"{self.sql} AS {self.name}" if self.sql else self.name


@dataclass(frozen=True)
class RowList:
    """A list of one table's rows naming the entity, newest first (or by ``order``), at most MAX_EVIDENCE_ROWS.

    The columns that name an entity of each kind are the table catalog's (``catalog.Table.entities``: any of them
    equal, in any letter case); a hash's columns are its algorithm's (``MD5``, ``SHA1``, ``SHA256``) among them."""

    table: str
    columns: tuple[Column, ...]
    order: tuple[tuple[str, bool], ...]  # (column, descending)
    what: str  # for the KQL's comment line
    # A kind matched otherwise than by equal columns: (KQL condition, SQL condition); "{ago}" is the query's start.
    custom: Mapping[EntityKind, tuple[str, str]] = field(default_factory=dict)

    @property
    def result(self) -> tuple[tuple[str, str], ...]:
        return (*((c.name, c.type) for c in self.columns), ("TotalMatched", "long"))

    def matching(self, entity: Entity) -> tuple[str, ...]:
        columns = catalog.table(self.table).entity_columns(entity.kind.value)
        if entity.kind is EntityKind.HASH:
            columns = tuple(c for c in columns if c.upper().endswith(entity.hash_algorithm)) or columns
        return columns

    def kql(self, query: EvidenceQuery) -> str:
        if query.entity.kind in self.custom:
            condition = self.custom[query.entity.kind][0].replace("{ago}", query.ago)
        else:
            condition = " or ".join(matches_kql(c) for c in self.matching(query.entity))
        return f"""// {query.tool}: {self.what} naming the {query.entity.kind.value}
{declaration(query)}let rows = materialize({self.table}
    | where TimeGenerated > {query.ago}
    | where {condition}
    | project {', '.join(c.kql_part() for c in self.columns)});
rows
| sort by {kql.order_by(self.order)}
| take {MAX_EVIDENCE_ROWS}
| extend TotalMatched = toscalar(rows | count)"""

    def demo(self, query: EvidenceQuery, conn: sqlite3.Connection, now: datetime,
             workspace: DemoWorkspace) -> list[dict[str, Any]]:
        if query.entity.kind in self.custom:
            condition = self.custom[query.entity.kind][1]
        else:
            condition = " OR ".join(matches_sql(catalog.entity_sql(c)) for c in self.matching(query.entity))
        order = ", ".join(f"{name} {'DESC' if descending else 'ASC'}" for name, descending in self.order)
        return demo_sql.fetch(conn, f"""SELECT {', '.join(c.sql_part() for c in self.columns)},
                COUNT(*) OVER () AS TotalMatched
            FROM {self.table}
            WHERE TimeGenerated > :start AND TimeGenerated <= :now AND ({condition})
            ORDER BY {order} LIMIT {MAX_EVIDENCE_ROWS}""", demo_params(query, now))


def spec(cls: type[EvidenceQuery], rows: RowList, decode: Callable[[Row], Any], keys: tuple[str, ...]) -> QuerySpec:
    """The declaration of a list evidence query: KQL and demo SQL both from ``rows``; each kind the query reads is
    matched in the catalog's columns of its table, or by ``rows.custom``."""
    matched = {k.value: catalog.table(rows.table).entity_columns(k.value) for k in cls.kinds if k not in rows.custom}
    unmatched = sorted(kind for kind, names in matched.items() if not names)
    if unmatched:
        raise ValueError(f"{cls.tool}: tables.json names no {', '.join(unmatched)} column in {rows.table}")
    paths = [c for names in matched.values() for c in names if catalog.entity_sql(c) != c]
    if paths:  # the KQL compares columns with =~: a path into a dynamic column needs its own condition (custom)
        raise ValueError(f"{cls.tool}: {rows.table}'s entity paths {paths} need a custom condition")
    return QuerySpec(name=cls.tool, params=params(), make=make(cls), kql=rows.kql, result=rows.result, keys=keys,
                     decode=decode, demo=rows.demo, internal=True)
