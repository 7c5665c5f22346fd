"""A hunt on the demo workspace: SQLite built from the same typed ``Hunt`` as its KQL, values as parameters.

Each column reads its stored form (``bot/demo/store.py``): a virtual column is ``json_extract`` on its source's JSON
text (``tostring`` of a missing field is "", as in KQL); text compares ignoring letter case through ``kql_lower``
(the expression the demo's indexes are built on); ``has`` is a whole-term match as Kusto's is. The rows come back
as the KQL's do: ``Row`` (the hunt's columns, typed as the service returns them in a property bag) and
``TotalMatched``.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import datetime
from typing import Any

from bot.sentinel.catalog import ENTITY_COLUMNS, HUNT_INDEXED
from bot.sentinel.demo_sql import iso
from bot.sentinel.hunt.catalog import STRING_TYPES, TIME_COLUMN, Column, tables
from bot.sentinel.hunt.model import BINS, Filter, Hunt, Value


def has_term(text: object, term: object) -> int:
    """Kusto's ``has``: ``term`` found in ``text`` (any letter case) starting and ending at term boundaries
    (a boundary is any character that is not a letter or digit, or the text's ends)."""
    haystack, needle = str(text or "").lower(), str(term or "").lower()
    if not needle:
        return 0
    start = haystack.find(needle)
    while start >= 0:
        end = start + len(needle)
        before = start == 0 or not haystack[start - 1].isalnum() or not needle[0].isalnum()
        after = end == len(haystack) or not haystack[end].isalnum() or not needle[-1].isalnum()
        if before and after:
            return 1
        start = haystack.find(needle, start + 1)
    return 0


def starts_with(text: object, prefix: object) -> int:
    return int(str(text or "").lower().startswith(str(prefix or "").lower()))


def _functions(conn: sqlite3.Connection) -> None:
    # Registered per query (cheap): the hunt needs them, the rest of the demo does not.
    conn.create_function("kql_has", 2, has_term, deterministic=True)
    conn.create_function("kql_startswith", 2, starts_with, deterministic=True)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# The JSON fields the demo indexes (AuditLogs' initiator and target), as it writes them.
_INDEXED = frozenset(c for by_kind in ENTITY_COLUMNS.values() for cs in by_kind.values() for c in cs if "(" in c)


_CAST = {"int": "INTEGER", "long": "INTEGER", "bool": "INTEGER", "real": "REAL", "decimal": "REAL"}


def raw(column: Column) -> str:
    """A column's stored value in SQL: its column, or the JSON field its virtual declaration names (NULL when absent).
    The source is checked to be JSON first (``json_extract`` fails on anything else, and the demo holds "" for some
    absent dynamic values), except where the demo indexes the field: an index on it proves every row's is JSON."""
    if not column.virtual:
        return _quote(column.name)
    if not column.path:
        return _quote(column.source)
    path = "$" + "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in column.path)
    extracted = f"json_extract({column.source}, '{path}')"
    return extracted if extracted in _INDEXED else f"CASE WHEN json_valid({column.source}) THEN {extracted} END"


def expression(column: Column) -> str:
    """A column's value as the KQL gives it: ``tostring`` of a missing field is "", other casts typed."""
    value = raw(column)
    if not column.virtual or not column.path:
        return value
    if column.type in STRING_TYPES:
        return f"coalesce(CAST(({value}) AS TEXT), '')"
    cast = _CAST.get(column.type)
    return f"CAST(({value}) AS {cast})" if cast else f"({value})"


def _lowered(column: Column) -> str:
    """Text compared in any letter case. A table's own text column, or a JSON field the demo indexes
    (``ENTITY_COLUMNS``), is written exactly as its index is (``kql_lower(expr)``), so the index serves the match."""
    value = raw(column)
    if not column.virtual or not column.path or value in _INDEXED:
        return f"kql_lower({value})"
    return f"kql_lower({expression(column)})"


def compared(column: Column) -> str:
    """What an equality, ``in`` or range filter on ``column`` compares: text in lower case, other values as typed.
    The demo indexes this very expression for its tables' hot hunt columns (``catalog.HUNT_INDEXED``)."""
    return _lowered(column) if column.type in STRING_TYPES else expression(column)


def index_expressions(table: str) -> tuple[str, ...]:
    """The expressions the demo indexes on ``table`` for hunts (``catalog.HUNT_INDEXED``), as ``compared``
    writes them."""
    found = tables()[table]
    return tuple(compared(column) for name in HUNT_INDEXED.get(table, ()) if (column := found.find(name)))


def _stored(value: Value) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, bool):
        return int(value)
    return value


def condition(f: Filter, params: list[Any]) -> str:
    column = expression(f.column)
    text = f.column.type in STRING_TYPES
    if f.column.type == "dynamic" or (text and f.op in ("has", "contains", "startswith")):
        params.append(str(f.values[0]))
        function = {"has": "kql_has", "contains": "contains_ci", "startswith": "kql_startswith"}[f.op]
        return f"{function}({column}, ?)"
    column = compared(f.column)
    if text:
        params.extend(str(v) for v in f.values)
        marks = ["kql_lower(?)"] * len(f.values)
    else:
        params.extend(_stored(v) for v in f.values)
        marks = ["?"] * len(f.values)
    if f.op == "between":
        return f"{column} BETWEEN {marks[0]} AND {marks[1]}"
    if f.op == "in":
        return f"{column} IN ({', '.join(marks)})"
    return f"{column} {'<>' if f.op == '!=' else '=' if f.op == '==' else f.op} {marks[0]}"


def _bin(size: str) -> str:
    seconds = int(BINS[size].total_seconds())
    epoch = f"CAST(strftime('%s', substr({_quote(TIME_COLUMN)}, 1, 19)) AS INTEGER)"
    return f"strftime('%Y-%m-%dT%H:%M:%S.000000Z', ({epoch} / {seconds}) * {seconds}, 'unixepoch')"


def hunt_sql(hunt: Hunt, now: datetime) -> tuple[str, list[Any]]:
    """The SELECT and its parameters; its columns are the hunt's output, then TotalMatched."""
    # The upper bound: the demo holds rows generated ahead of its clock; the service has none.
    params: list[Any] = [iso(now - hunt.window), iso(now)]
    where = [f"{_quote(TIME_COLUMN)} > ?", f"{_quote(TIME_COLUMN)} <= ?"]
    where += [condition(f, params) for f in hunt.filters]
    if hunt.summarized:
        keys = [f"{expression(c)} AS {_quote(c.name)}" for c in hunt.by]
        if hunt.bin:
            keys.append(f"{_bin(hunt.bin)} AS {_quote(TIME_COLUMN)}")
        aggregates = [f"{_aggregate(a.fn, a.column)} AS {_quote(a.name)}" for a in hunt.aggregates]
        select = keys + aggregates
        group = f" GROUP BY {', '.join(str(n + 1) for n in range(len(keys)))}" if keys else ""
    else:
        select = [f"{expression(c)} AS {_quote(c.name)}" for c in hunt.columns]
        group = ""
    order = ", ".join(f"{_quote(name)} {'DESC' if descending else 'ASC'}" for name, descending in hunt.order)
    sql = (f"SELECT {', '.join(select)}, COUNT(*) OVER () AS TotalMatched FROM {_quote(hunt.table)} "
           f"WHERE {' AND '.join(where)}{group} ORDER BY {order} LIMIT {int(hunt.take)}")
    return sql, params


def _aggregate(fn: str, column: Column | None) -> str:
    if column is None:
        return "COUNT(*)"
    value = expression(column)
    return f"COUNT(DISTINCT {value})" if fn == "dcount" else f"{fn.upper()}({value})"


def run(hunt: Hunt, conn: sqlite3.Connection, now: datetime) -> list[dict[str, Any]]:
    """The hunt's rows as the service returns them: ``{"Row": {...}, "TotalMatched": n}``."""
    _functions(conn)
    sql, params = hunt_sql(hunt, now)
    types = dict(hunt.output)
    out = []
    for row in conn.execute(sql, params).fetchall():
        values = {name: _served(row[name], types[name]) for name, _ in hunt.output}
        out.append({"Row": values, "TotalMatched": row["TotalMatched"]})
    return out


_JSON_START = re.compile(r"^\s*[\[{]")


def _served(value: Any, kind: str) -> Any:
    """A stored value as it comes back inside a property bag: bools as JSON booleans, dynamic as JSON."""
    if value is None:
        return None
    if kind == "bool":
        return bool(value)
    if kind == "dynamic" and isinstance(value, str) and _JSON_START.match(value):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
