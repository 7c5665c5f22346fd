"""A hunt's KQL, built from the typed ``Hunt`` (never from argument text).

Table and column names come from the catalog (the allow-list), operators from a fixed table, and every value
through ``bot.sentinel.kql``'s literal helpers, so no value can end its literal or add an operator. The result is
one row per hunt row: ``Row``, a property bag of the hunt's columns (their number and names vary by hunt, the
response contract does not), and ``TotalMatched``, the rows before ``take``.
"""

from __future__ import annotations

from datetime import datetime

from bot.sentinel import kql
from bot.sentinel.hunt.catalog import NUMBER_TYPES, TIME_COLUMN, Column
from bot.sentinel.hunt.model import BINS, Filter, Hunt, Value, span_text

_CAST = {"string": "tostring", "guid": "tostring", "int": "toint", "long": "tolong", "real": "toreal",
         "decimal": "todecimal", "bool": "tobool", "datetime": "todatetime", "dynamic": ""}


def virtual_expression(column: Column) -> str:
    """The KQL that computes a virtual column from its source (an alias is the source itself)."""
    if not column.path:
        return column.source
    source = f"parse_json({column.source})" if column.source_is_text else column.source
    access = "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in column.path)
    return f"{_CAST[column.type]}({source}{access})"


def literal(column: Column, value: Value) -> str:
    if isinstance(value, bool):
        return kql.bool_literal(value)
    if isinstance(value, datetime):
        return kql.moment(value)
    if column.type in NUMBER_TYPES and isinstance(value, int) and column.type in ("int", "long"):
        return kql.long_literal(value)
    if column.type in NUMBER_TYPES:
        return kql.real_literal(float(value))
    return kql.string_literal(str(value))


def condition(f: Filter) -> str:
    name = f"tostring({f.column.name})" if f.column.type == "dynamic" else f.column.name
    values = [literal(f.column, v) for v in f.values]
    text = f.column.type not in NUMBER_TYPES and f.column.type not in ("bool", "datetime")
    if f.op == "between":
        return f"{name} between ({values[0]} .. {values[1]})"
    if f.op == "in":
        return f"{name} {'in~' if text else 'in'} ({', '.join(values)})"
    op = {"==": "=~", "!=": "!~"}.get(f.op, f.op) if text else f.op
    return f"{name} {op} {values[0]}"


def hunt_kql(hunt: Hunt) -> str:
    lines = [f"{hunt.table}", f"| where {TIME_COLUMN} > ago({kql.timespan_literal(hunt.window)})"]
    virtual = [c for c in hunt.used if c.virtual]
    if virtual:
        lines.append("| extend " + ", ".join(f"{c.name} = {virtual_expression(c)}" for c in virtual))
    lines += [f"| where {condition(f)}" for f in hunt.filters]
    if hunt.summarized:
        aggregates = ", ".join(f"{a.name} = {_aggregate(a.fn, a.column)}" for a in hunt.aggregates)
        keys = [c.name for c in hunt.by]
        if hunt.bin:
            keys.append(f"{TIME_COLUMN} = bin({TIME_COLUMN}, {kql.timespan_literal(BINS[hunt.bin])})")
        lines.append(f"| summarize {aggregates}" + (f" by {', '.join(keys)}" if keys else ""))
    else:
        lines.append("| project " + ", ".join(c.name for c in hunt.columns))
    body = "\n    ".join(lines)
    names = ", ".join(name for name, _ in hunt.output)
    return (f"// hunt: {hunt.table}, the last {span_text(hunt.window)}\n"
            f"let hunt = {body};\n"
            f"hunt\n"
            f"| sort by {kql.order_by(hunt.order)}\n"
            f"| take {int(hunt.take)}\n"
            f"| project Row = bag_pack_columns({names}), TotalMatched = toscalar(hunt | count)")


def _aggregate(fn: str, column: Column | None) -> str:
    return "count()" if column is None else f"{fn}({column.name})"
