"""The one catalog of the tables the bot reads, ``tables.json``, read once: per table its columns and Kusto types
(the visible columns of the Azure Monitor table reference, sources in ``tables.sources.json``), and what the bot
knows about them:

- ``entities``: kind -> the columns an entity of that kind (account, host, ip, hash, url, domain, ``indicator`` for
  any threat-intelligence observable) is found in, in the form an investigation names it (an account as a UPN or
  DOMAIN\\user, so a bare ``AccountName`` is not one). A name is a column, or a path into a dynamic column
  (``InitiatedBy.user.userPrincipalName``, ``TargetResources[0].userPrincipalName``). The evidence queries match
  these; the demo store indexes exactly these (``kql_lower(expr)``, see ``entity_sql``), so a query matching an entity
  with ``kql_lower(expr) = kql_lower(?)`` reads an index, not the table. A table with entities is an activity table.
- ``hunt``: the table is on the hunts' allow-list, with the columns a hunt shows when it names none.
- ``hot``: the columns hunts filter most by equality or range beyond the entity columns (names as a hunt names them:
  a table's own or a virtual column of ``hunt/catalog.py``); the demo indexes them as the hunt's SQL compares them.

Adding a table: its columns (copied from the reference) and the keys above that apply; nothing else lists them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType

TABLES_FILE = Path(__file__).resolve().parent / "tables.json"
ENTITY_KINDS = frozenset({"account", "host", "ip", "hash", "url", "domain", "indicator"})
_COLUMN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(.*)")
_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")


@dataclass(frozen=True)
class Table:
    """One table of the catalog."""

    name: str
    columns: tuple[tuple[str, str], ...]  # (column, Kusto type), in the reference's order
    entities: Mapping[str, tuple[str, ...]]  # kind -> columns or paths naming an entity of that kind
    hunt: tuple[str, ...]  # the columns a hunt shows by default; empty: not on the hunts' allow-list
    hot: tuple[str, ...]  # the hunts' hot columns

    def entity_columns(self, kind: str) -> tuple[str, ...]:
        return self.entities.get(kind, ())


def entity_sql(name: str) -> str:
    """An entity column as SQL on the demo's stored row: the column, or ``json_extract`` of a path into one."""
    column, rest = _COLUMN.fullmatch(name).groups()  # type: ignore[union-attr]
    steps = _STEP.findall(rest)
    if "".join(f".{key}" if key else f"[{index}]" for key, index in steps) != rest:
        raise ValueError(f"tables.json: {name!r} is not a column or a path into one")
    if not steps:
        return column
    return f"json_extract({column}, '${rest}')"


def _table(name: str, raw: Mapping[str, object]) -> Table:
    columns = tuple((c["name"], c["type"]) for c in raw["columns"])  # type: ignore[attr-defined]
    entities = {kind: tuple(names) for kind, names in raw.get("entities", {}).items()}  # type: ignore[attr-defined]
    unknown = set(entities) - ENTITY_KINDS
    if unknown:
        raise ValueError(f"tables.json: {name} names unknown entity kinds {sorted(unknown)}")
    return Table(name, columns, MappingProxyType(entities), tuple(raw.get("hunt", ())),  # type: ignore[arg-type]
                 tuple(raw.get("hot", ())))  # type: ignore[arg-type]


@cache
def tables() -> Mapping[str, Table]:
    """Every table of the catalog, by name (read once)."""
    raw = json.loads(TABLES_FILE.read_text(encoding="utf-8"))
    return MappingProxyType({name: _table(name, entry) for name, entry in raw.items()})


def table(name: str) -> Table:
    return tables()[name]


@cache
def schema() -> dict[str, tuple[tuple[str, str], ...]]:
    """{table: ((column, kusto type), ...)}."""
    return {name: t.columns for name, t in tables().items()}


@cache
def activity_tables() -> tuple[str, ...]:
    """The tables an entity is found in (the demo generates their rows)."""
    return tuple(name for name, t in tables().items() if t.entities)


@cache
def entity_expressions() -> dict[str, dict[str, tuple[str, ...]]]:
    """{activity table: {kind: SQL expressions}}: the entity columns as the demo's SQL reads (and indexes) them."""
    return {name: {kind: tuple(entity_sql(c) for c in names) for kind, names in t.entities.items()}
            for name, t in tables().items() if t.entities}


def hot_columns() -> dict[str, tuple[str, ...]]:
    """{table: its hunts' hot columns}, for the tables that have some."""
    return {name: t.hot for name, t in tables().items() if t.hot}


# The names the catalog's users read, as module constants (the catalog is read once, at first import).
ACTIVITY_TABLES = activity_tables()
ENTITY_COLUMNS = entity_expressions()
HUNT_INDEXED = hot_columns()
