"""hunt: the guarded hunt as a read query (its structure, KQL and demo SQL live in ``bot.sentinel.hunt``).

The result contract is fixed whatever the hunt projects: ``Row`` (a property bag of the hunt's columns) and
``TotalMatched``; the decoder turns each into a ``HuntRow`` whose cells keep the hunt's column order.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from bot.sentinel.hunt import Hunt, hunt_kql, parse_hunt, table_names
from bot.sentinel.hunt import sql as hunt_sql
from bot.sentinel.models import HuntRow
from bot.sentinel.rows import SkippedRow, as_json
from bot.sentinel.spec import DemoWorkspace, Param, QuerySpec, Row


def _as_is(value: object) -> object:
    return value


def _make(**arguments: object) -> Hunt:
    return parse_hunt(arguments)


def decode(row: Row) -> HuntRow:
    cells = as_json(row.get("Row"))
    if not isinstance(cells, dict):
        raise SkippedRow("a hunt row without its columns")
    return HuntRow(tuple(cells.items()))


def _demo(query: Hunt, conn: sqlite3.Connection, now: datetime, workspace: DemoWorkspace) -> list[dict[str, Any]]:
    return hunt_sql.run(query, conn, now)


# The parameters the model is told of only where a hunt is likely (their tokens would exceed the every-call budget).
HUNTING_ONLY = ("extend", "session", "series")
_ANY: dict[str, object] = {}  # an array's items: any (the service needs the key; the parser checks each item)
SPEC = QuerySpec(
    name=Hunt.tool,
    # Every word here is sent on every model call: short, and the errors list what is allowed.
    params=(
        # No enum (21 names on every call): the model knows Sentinel's tables, and a wrong name's error lists them.
        Param("table", _as_is, required=f"the table to hunt in, one of {', '.join(table_names())}"),
        Param("time_window", _as_is, required="how far back, e.g. 24h or 7d"),
        Param("extend", _as_is, "computed columns [name,fn,col,args..]: extract(re,group) split(sep,i) "
              "substring(i,n) tolower json(keys) url(Host..) eventdata(name)", kind="array", items=_ANY),
        Param("where", _as_is, "[col,op,val] AND; {any:[..]} {not:..}; op == != has contains startswith "
              "endswith in has_any matches regex > < between isempty; ! negates", kind="array",
              items=_ANY),
        Param("summarize", _as_is, "count() dcount sum avg min max make_set percentile(C,95) arg_max(T,C..) "
              "{countif:cond,as:N}", kind="array", items=_ANY),
        Param("by", _as_is, kind="array", items=_ANY),
        Param("bin", _as_is),
        Param("having", _as_is, "on results", kind="array", items=_ANY),
        Param("join", _as_is, "{table,on:[col,col],kind,where,columns}", kind="object"),
        Param("baseline", _as_is, "{days,keys}: unseen before", kind="object"),
        # Offered to the model only on hunting turns (``HUNTING_ONLY``; bot.tools.queries.hunt): always parsed.
        Param("session", _as_is, "{gap:30m}: per by key; SessionStart/End", kind="object"),
        Param("series", _as_is, "{step:1h}: 1 aggregate per by key over time; rows = anomalous points "
              "(value, Baseline, Score)", kind="object"),
        Param("columns", _as_is, kind="array", items=_ANY),
        Param("sort", _as_is),
        Param("take", _as_is, kind="integer", maximum=100),
    ),
    make=_make,
    kql=hunt_kql,
    result=(("Row", "dynamic"), ("TotalMatched", "long")),
    keys=("Row",),
    decode=decode,
    demo=_demo,
)
