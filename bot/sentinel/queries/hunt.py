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


_NAMES = {"type": "string"}
SPEC = QuerySpec(
    name=Hunt.tool,
    # Every word here is sent on every model call: short, and the errors list what is allowed.
    params=(
        # No enum (21 names on every call): the model knows Sentinel's tables, and a wrong name's error lists them.
        Param("table", _as_is, required=f"the table to hunt in, one of {', '.join(table_names())}"),
        Param("time_window", _as_is, "e.g. 24h; at most 30d", required="how far back, e.g. 24h or 7d"),
        Param("where", _as_is, "all hold: [col,op,val] or {any:[..]} {all:[..]} {not:..}; op == != has contains "
              "startswith endswith (also !has..) in !in has_any matches regex > >= < <= between isempty",
              kind="array"),
        Param("summarize", _as_is, "count() dcount sum avg min max make_set (C) percentile(C,95) "
              "arg_max(TimeGenerated,C..) {countif:cond,as:Name}", kind="array"),
        Param("by", _as_is, "up to 6", kind="array", items=_NAMES),
        Param("bin", _as_is, enum=("5m", "15m", "1h", "6h", "1d")),
        Param("having", _as_is, "conditions on the summarize columns", kind="array"),
        Param("join", _as_is, "{table,on:[col,col],kind:inner|leftsemi|leftanti,where,columns}: keys of one kind "
              "(ip, account, host...)", kind="object"),
        Param("baseline", _as_is, "{days,keys}: keep keys not seen in the days before", kind="object"),
        Param("columns", _as_is, kind="array", items=_NAMES),
        Param("sort", _as_is, "e.g. Col desc"),
        Param("take", _as_is, kind="integer", maximum=100),
    ),
    make=_make,
    kql=hunt_kql,
    result=(("Row", "dynamic"), ("TotalMatched", "long")),
    keys=("Row",),
    decode=decode,
    demo=_demo,
)
