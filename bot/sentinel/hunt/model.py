"""A hunt as typed data: what the model (or ``python -m bot kql hunt``) asks for, checked against the catalog.

``parse_hunt`` turns loose arguments (model output) into a ``Hunt`` or raises ``InvalidParameter`` with a message
that lists what is allowed (the tables, a table's columns, the operators a column's type takes), so the model can
correct itself. Values are typed here (a string, an int, a finite real, a bool, an aware datetime); the KQL and the
demo's SQL are both built from the ``Hunt`` (``hunt.kql``, ``hunt.sql``), never from the arguments' text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from bot.sentinel.hunt.catalog import NUMBER_TYPES, STRING_TYPES, TIME_COLUMN, Column, Table, table_names, tables
from bot.sentinel.kql import as_written
from bot.sentinel.params import InvalidParameter, TimeWindow, parse_moment

MAX_WINDOW = timedelta(days=30)
MAX_TAKE = 100
DEFAULT_TAKE = 50
MAX_FILTERS = 10
MAX_IN_VALUES = 20
MAX_VALUE_CHARS = 512  # longer filter text is refused: no indicator or name is that long
MAX_BY = 3
MAX_AGGREGATES = 4
MAX_COLUMNS = 12
BINS = {"5m": timedelta(minutes=5), "15m": timedelta(minutes=15), "1h": timedelta(hours=1),
        "6h": timedelta(hours=6), "1d": timedelta(days=1)}
AGGREGATES = ("count", "dcount", "min", "max")

# The operators each kind of column takes. Text compares ignoring letter case (== is KQL's =~), as analysts mean
# it for names, UPNs and hosts.
OPERATORS = ("==", "!=", "has", "contains", "startswith", "in", ">", "<", "between")
_TEXT_OPS = ("==", "!=", "has", "contains", "startswith", "in")
_ORDERED_OPS = ("==", "!=", ">", "<", "between", "in")


def operators_for(kind: str) -> tuple[str, ...]:
    if kind in STRING_TYPES:
        return _TEXT_OPS
    if kind in NUMBER_TYPES:
        return _ORDERED_OPS
    if kind == "datetime":
        return (">", "<", "between")
    if kind == "bool":
        return ("==", "!=")
    if kind == "dynamic":
        return ("has", "contains")  # on its JSON text
    return ()


Value = str | int | float | bool | datetime


@dataclass(frozen=True)
class Filter:
    column: Column
    op: str
    values: tuple[Value, ...]  # one value; two for between; one or more for in


@dataclass(frozen=True)
class Aggregate:
    fn: str  # count, dcount, min, max
    column: Column | None  # None for count

    @property
    def name(self) -> str:
        return "Count" if self.column is None else f"{self.fn}_{self.column.name}"

    @property
    def type(self) -> str:
        if self.fn in ("count", "dcount") or self.column is None:
            return "long"
        return self.column.type


@dataclass(frozen=True)
class Hunt:
    """One validated hunt over one allow-listed table."""

    table: str
    window: timedelta
    filters: tuple[Filter, ...] = ()
    aggregates: tuple[Aggregate, ...] = ()
    by: tuple[Column, ...] = ()
    bin: str | None = None  # a key of BINS: TimeGenerated binned, a group key after ``by``
    columns: tuple[Column, ...] = ()  # projected (no summarize)
    sort: tuple[str, bool] = (TIME_COLUMN, True)  # (output column, descending)
    take: int = DEFAULT_TAKE

    tool = "hunt"

    @property
    def timespan(self) -> timedelta:
        return self.window

    @property
    def summarized(self) -> bool:
        return bool(self.aggregates)

    @property
    def output(self) -> tuple[tuple[str, str], ...]:
        """The result columns and their Kusto types, in order."""
        if not self.summarized:
            return tuple((c.name, c.type) for c in self.columns)
        keys = tuple((c.name, c.type) for c in self.by) + (((TIME_COLUMN, "datetime"),) if self.bin else ())
        return keys + tuple((a.name, a.type) for a in self.aggregates)

    @property
    def used(self) -> tuple[Column, ...]:
        """Every column the hunt reads, once each, in first-use order (the virtual ones are computed)."""
        seen: dict[str, Column] = {}
        for column in (*(f.column for f in self.filters), *self.by, *self.columns,
                       *(a.column for a in self.aggregates if a.column is not None)):
            seen.setdefault(column.name, column)
        return tuple(seen.values())

    @property
    def order(self) -> tuple[tuple[str, bool], ...]:
        """The sort keys: the asked one, then every other sortable output column ascending, so both backends
        return the same rows in the same order."""
        first, descending = self.sort
        rest = tuple((name, False) for name, kind in self.output if name != first and kind != "dynamic")
        return ((first, descending), *rest)

    def parameters(self) -> dict[str, Any]:
        """The hunt in the tool's own argument shape (canonical names and values): for logs, cards and replay."""
        out: dict[str, Any] = {"table": self.table, "time_window": span_text(self.window)}
        if self.filters:
            out["where"] = [[f.column.name, f.op, _shown(f)] for f in self.filters]
        if self.aggregates:
            out["summarize"] = [f"{a.fn}({a.column.name if a.column else ''})" for a in self.aggregates]
        if self.by:
            out["by"] = [c.name for c in self.by]
        if self.bin:
            out["bin"] = self.bin
        if self.columns:
            out["columns"] = [c.name for c in self.columns]
        out["sort"] = f"{self.sort[0]} {'desc' if self.sort[1] else 'asc'}"
        out["take"] = self.take
        return out


def _shown(f: Filter) -> Any:
    values = [v.isoformat().replace("+00:00", "Z") if isinstance(v, datetime) else v for v in f.values]
    return values if f.op in ("in", "between") else values[0]


def span_text(window: timedelta) -> str:
    minutes = int(window.total_seconds() // 60)
    if minutes % (24 * 60) == 0:
        return f"{minutes // (24 * 60)}d"
    return f"{minutes // 60}h" if minutes % 60 == 0 else f"{minutes}m"


# --- parsing -------------------------------------------------------------------------------------------------------

_SPAN = re.compile(r"^\s*(?:last_)?(\d{1,5})\s*(m|h|d)\s*$", re.IGNORECASE)
_UNIT = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1)}
_AGGREGATE = re.compile(r"^\s*(count|dcount|min|max)\s*\(\s*([A-Za-z0-9_]*)\s*\)\s*$", re.IGNORECASE)
_SORT = re.compile(r"^\s*([A-Za-z0-9_]+)(?:\s+(asc|desc))?\s*$", re.IGNORECASE)


def parse_table(value: object) -> Table:
    if value is None or value == "":
        raise InvalidParameter("table", f"is required: one of {', '.join(table_names())}")
    text = value if isinstance(value, str) else ""
    found = next((t for name, t in tables().items() if name.lower() == text.strip().lower()), None)
    if found is None:
        raise InvalidParameter("table", f"{_quoted(value)} is not a table a hunt can read; the tables are: "
                                        f"{', '.join(table_names())}")
    return found


def parse_window(value: object) -> timedelta:
    if value is None or value == "":
        raise InvalidParameter("time_window", "is required: how far back to look, e.g. 24h, 7d (at most 30d)")
    match = _SPAN.match(value) if isinstance(value, str) else None
    if match is None:
        raise InvalidParameter("time_window", f"{_quoted(value)} is not a window; write e.g. 30m, 24h, 7d or "
                                              f"{', '.join(w.value for w in TimeWindow)} (at most 30d)")
    window = int(match[1]) * _UNIT[match[2].lower()]
    if not timedelta(minutes=1) <= window <= MAX_WINDOW:
        raise InvalidParameter("time_window", f"{_quoted(value)} is too long: a hunt looks back at most 30d")
    return window


def column_of(table: Table, name: object, what: str) -> Column:
    column = table.find(name) if isinstance(name, str) else None
    if column is None:
        virtual = ", ".join(table.virtual_names)
        raise InvalidParameter(what, f"{table.name} has no column {_quoted(name)}; its columns are: "
                                     f"{', '.join(c for c in table.columns if c not in table.virtual_names)}"
                               + (f"; and fields read for you from inside its JSON: {virtual}" if virtual else ""))
    return column


def parse_filter(table: Table, raw: object) -> Filter:
    if isinstance(raw, Mapping):  # {"column": .., "op": .., "value": ..} is read too
        raw = [raw.get("column"), raw.get("op") or raw.get("operator"), raw.get("value")]
    if not isinstance(raw, Sequence) or isinstance(raw, str) or len(raw) != 3:
        raise InvalidParameter("where", f"each filter is [column, operator, value], e.g. [\"IPAddress\", \"==\", "
                                        f"\"203.0.113.7\"]; got {_quoted(raw)}")
    name, op, value = raw
    column = column_of(table, name, "where")
    allowed = operators_for(column.type)
    if op not in allowed:
        raise InvalidParameter("where", f"{_quoted(op)} does not apply to {column.name} ({column.type}); "
                                        f"its operators are: {' '.join(allowed) or 'none'}")
    if op == "between":
        if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
            raise InvalidParameter("where", f"between takes [low, high] for {column.name}")
        low, high = (_typed(column, v) for v in value)
        if low > high:  # type: ignore[operator]
            raise InvalidParameter("where", f"between on {column.name}: low is above high")
        return Filter(column, op, (low, high))
    if op == "in":
        items = value if isinstance(value, Sequence) and not isinstance(value, str) else [value]
        if not 1 <= len(items) <= MAX_IN_VALUES:
            raise InvalidParameter("where", f"in takes 1 to {MAX_IN_VALUES} values for {column.name}")
        return Filter(column, op, tuple(_typed(column, v) for v in items))
    return Filter(column, op, (_typed(column, value),))


_NEEDS = {"string": f"text of at most {MAX_VALUE_CHARS} characters", "guid": f"text of at most {MAX_VALUE_CHARS} "
          "characters", "int": "a 32-bit whole number", "long": "a whole number", "real": "a finite number",
          "decimal": "a finite number", "bool": "true or false",
          "datetime": "an ISO 8601 date-time, e.g. 2026-11-23T09:00:00Z"}


def _typed(column: Column, value: object) -> Value:
    """A filter value of the column's type; anything else is refused with what it must be."""
    kind = "string" if column.type == "dynamic" else column.type
    try:
        return _convert(kind, value)
    except (ValueError, InvalidParameter):
        raise InvalidParameter("where", f"{column.name} ({column.type}) needs {_NEEDS.get(kind, 'a value')}; "
                                        f"got {_quoted(value)}") from None


def _convert(kind: str, value: object) -> Value:
    if kind in STRING_TYPES:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)) or len(str(value)) > MAX_VALUE_CHARS:
            raise ValueError(kind)
        return as_written(str(value))  # a lone surrogate or a control character: U+FFFD, as the literal holds it
    if kind in ("int", "long"):
        number = int(value.strip()) if isinstance(value, str) else value
        limit = 2**31 if kind == "int" else 2**63
        if not isinstance(number, int) or isinstance(number, bool) or not -limit <= number < limit:
            raise ValueError(kind)
        return number
    if kind in ("real", "decimal"):
        if isinstance(value, bool) or not isinstance(value, (int, float, str)) or not math.isfinite(float(value)):
            raise ValueError(kind)
        return float(value)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise ValueError(kind)
    if kind == "datetime":
        moment = parse_moment(value, "value") if isinstance(value, str) else None
        if moment is None:
            raise ValueError(kind)
        return moment
    raise ValueError(kind)


def parse_aggregates(table: Table, raw: object) -> tuple[Aggregate, ...]:
    items = _list(raw, "summarize")
    if len(items) > MAX_AGGREGATES:
        raise InvalidParameter("summarize", f"at most {MAX_AGGREGATES} aggregates")
    out = []
    for item in items:
        match = _AGGREGATE.match(item) if isinstance(item, str) else None
        if match is None:
            raise InvalidParameter("summarize", f"{_quoted(item)} is not one of count(), dcount(Column), "
                                                f"min(Column), max(Column)")
        fn, name = match[1].lower(), match[2]
        if fn == "count":
            out.append(Aggregate("count", None))
            continue
        column = column_of(table, name, "summarize")
        if column.type == "dynamic" or (fn in ("min", "max") and column.type not in NUMBER_TYPES | {"datetime"}):
            raise InvalidParameter("summarize", f"{fn}() does not apply to {column.name} ({column.type}); min and "
                                                f"max take numbers and times, dcount any column but dynamic")
        out.append(Aggregate(fn, column))
    if len({a.name for a in out}) != len(out):
        raise InvalidParameter("summarize", "an aggregate is named twice")
    return tuple(out)


def parse_hunt(arguments: Mapping[str, object]) -> Hunt:
    """A validated hunt from the tool's arguments."""
    table = parse_table(arguments.get("table"))
    window = parse_window(arguments.get("time_window"))
    filters = tuple(parse_filter(table, f) for f in _list(arguments.get("where"), "where"))
    if len(filters) > MAX_FILTERS:
        raise InvalidParameter("where", f"at most {MAX_FILTERS} filters")
    aggregates = parse_aggregates(table, arguments.get("summarize"))
    by = tuple(column_of(table, c, "by") for c in _list(arguments.get("by"), "by"))
    bin_size = _bin(arguments.get("bin"))
    columns = tuple(column_of(table, c, "columns") for c in _list(arguments.get("columns"), "columns"))
    if (by or bin_size) and not aggregates:
        aggregates = (Aggregate("count", None),)  # "by Country" alone means counting
    if aggregates:
        if columns:
            raise InvalidParameter("columns", "a summarized hunt shows its by columns and aggregates; leave columns "
                                              "out, or leave summarize out")
        if len(by) > MAX_BY or len({c.name for c in by}) != len(by):
            raise InvalidParameter("by", f"at most {MAX_BY} different columns")
        if any(c.type == "dynamic" for c in by) or (bin_size and any(c.name == TIME_COLUMN for c in by)):
            raise InvalidParameter("by", "a dynamic column cannot be a group; a time bin takes TimeGenerated itself")
    else:
        columns = _dedupe(columns) or tuple(table.find(c) for c in table.defaults)  # type: ignore[misc]
        if len(columns) > MAX_COLUMNS:
            raise InvalidParameter("columns", f"at most {MAX_COLUMNS} columns")
    hunt = Hunt(table.name, window, filters, aggregates, by, bin_size, columns, take=_take(arguments.get("take")))
    return _with_sort(hunt, arguments.get("sort"))


def _with_sort(hunt: Hunt, raw: object) -> Hunt:
    names = dict(hunt.output)
    if raw is None or raw == "":
        if hunt.bin:
            sort = (TIME_COLUMN, False)
        elif hunt.summarized:
            sort = (hunt.aggregates[0].name, True)
        else:
            sort = (TIME_COLUMN, True) if TIME_COLUMN in names else (hunt.output[0][0], True)
        return _replace_sort(hunt, sort)
    match = _SORT.match(raw) if isinstance(raw, str) else None
    extra = tables()[hunt.table].find(match[1]) if match and not hunt.summarized else None
    if extra is not None and extra.name not in names and len(hunt.columns) < MAX_COLUMNS:
        hunt = replace(hunt, columns=(*hunt.columns, extra))  # sorted by a column it did not show: show it too
        names = dict(hunt.output)
    name = next((n for n in names if match and n.lower() == match[1].lower()), None)
    if match is None or name is None or names[name] == "dynamic":
        sortable = [n for n, kind in hunt.output if kind != "dynamic"]
        raise InvalidParameter("sort", f"{_quoted(raw)}: sort by one of the hunt's columns, e.g. "
                                       f"\"{sortable[0]} desc\"; its columns are: {', '.join(sortable)}")
    return _replace_sort(hunt, (name, (match[2] or "desc").lower() == "desc"))


def _replace_sort(hunt: Hunt, sort: tuple[str, bool]) -> Hunt:
    return replace(hunt, sort=sort)


def _bin(raw: object) -> str | None:
    if raw is None or raw == "":
        return None
    text = raw.strip().lower() if isinstance(raw, str) else ""
    if text not in BINS:
        raise InvalidParameter("bin", f"{_quoted(raw)} is not a bin; one of {', '.join(BINS)}")
    return text


def _take(raw: object) -> int:
    if raw is None or raw == "":
        return DEFAULT_TAKE
    number = int(raw) if isinstance(raw, str) and raw.strip().isdigit() else raw
    if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= MAX_TAKE:
        raise InvalidParameter("take", f"{_quoted(raw)}: take 1 to {MAX_TAKE} rows")
    return number


def _list(raw: object, what: str) -> list[Any]:
    if raw is None or raw == "":
        return []
    if isinstance(raw, str):
        return [raw] if what != "where" else [[raw]]  # a lone name reads as a list of one; a filter must be a list
    if not isinstance(raw, Sequence):
        raise InvalidParameter(what, f"must be a list; got {_quoted(raw)}")
    return list(raw)


def _dedupe(columns: tuple[Column, ...]) -> tuple[Column, ...]:
    return tuple({c.name: c for c in columns}.values())


def _quoted(value: object) -> str:
    """A value quoted back in an error, cut short (it may be 10k characters of attacker text)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
