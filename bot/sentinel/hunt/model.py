"""A hunt as typed data: what the model (or ``python -m bot kql hunt``) asks for, checked against the catalog.

``parse_hunt`` turns loose arguments (model output) into a ``Hunt`` or raises ``InvalidParameter`` with a message
that lists what is allowed (the tables, a table's columns, the operators a column's type takes), so the model can
correct itself. A hunt reads one allow-listed table in a window; computes up to eight text columns from its
columns (``extend``: ``computed.py``); keeps the rows its conditions allow
(``conditions``: AND/OR/NOT groups, typed operators); optionally drops the rows whose keys were already seen in a
*baseline* of up to 30 days before the window; optionally joins a second allow-listed table on a declared key
(``catalog.join_keys``: an IP with an IP, an account with an account, a message with its message...; inner,
leftouter, leftsemi or leftanti), optionally only the right rows within a time proximity of the left's (``within``:
either side, or after or before it); then either shows columns or summarizes (aggregates by up to six keys and a
time bin or a session gap, filtered by ``having``, which may compare two results), or makes a time series per
key and keeps its anomalous points (``series``: ``make-series`` then ``series_decompose_anomalies``). The KQL and the
demo's SQL are both built from the ``Hunt`` (``hunt.kql``, ``hunt.sql``), never from the arguments' text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from bot.sentinel.hunt.catalog import (
    NUMBER_TYPES,
    TIME_COLUMN,
    Column,
    Table,
    join_keys,
    join_kind,
    joinable,
    table_names,
    tables,
)
from bot.sentinel.hunt.computed import parse_computed
from bot.sentinel.hunt.computed import shown as computed_shown
from bot.sentinel.hunt.conditions import (
    MAX_VALUE_CHARS,
    OPERATORS,
    Budget,
    Condition,
    Filter,
    Group,
    Value,
    leaves,
    operators_for,
    parse_conditions,
    quoted,
    shown,
)
from bot.sentinel.params import InvalidParameter, TimeWindow

__all__ = ["BINS", "MAX_VALUE_CHARS", "OPERATORS", "Aggregate", "Baseline", "Condition", "Filter", "Group", "Hunt",
           "Join", "Series", "Value", "operators_for", "parse_hunt", "parse_window", "span_text"]

MAX_WINDOW = timedelta(days=30)
MAX_BASELINE_DAYS = 30
MAX_TAKE = 100
DEFAULT_TAKE = 50
MAX_BY = 6
MAX_AGGREGATES = 8
MAX_COLUMNS = 12
MAX_JOIN_COLUMNS = 8
MAX_SET = 100  # make_set keeps at most this many values
BINS = {"5m": timedelta(minutes=5), "15m": timedelta(minutes=15), "1h": timedelta(hours=1),
        "6h": timedelta(hours=6), "1d": timedelta(days=1)}
AGGREGATES = ("count", "dcount", "countif", "sum", "avg", "min", "max", "make_set", "percentile", "arg_max",
              "arg_min")
JOIN_KINDS = ("inner", "leftouter", "leftsemi", "leftanti")
BRING_KINDS = frozenset({"inner", "leftouter"})  # the joins that bring the right rows' columns
DIRECTIONS = {"": "either", "+": "after", "-": "before"}  # a proximity's sign: where the right row may lie
MAX_WITHIN = timedelta(days=1)  # a join's time proximity: the right row at most this far from the left's time
MAX_GAP = timedelta(days=1)  # a session ends after a gap longer than this, at most
MAX_POINTS = 720  # a series' points (30 days of hours)
MAX_SERIES = 100  # the series (keys) decomposed: those with the highest totals
ANOMALY_THRESHOLD = 1.5  # series_decompose_anomalies' default k: Tukey's fence for mild or stronger anomalies
SERIES_AGGREGATES = ("count", "countif", "dcount", "sum", "max")
SERIES_COLUMNS = (("Baseline", "real"), ("Score", "real"), ("Anomaly", "long"))
SESSION_COLUMNS = (("SessionStart", "datetime"), ("SessionEnd", "datetime"))
KEY_TYPES = frozenset({"string", "guid", "int", "long"})  # compared as lower-case text on both sides


@dataclass(frozen=True)
class Aggregate:
    fn: str  # one of AGGREGATES
    column: Column | None  # None for count() and countif
    extra: tuple[Column, ...] = ()  # arg_max/arg_min: the columns taken from the row with the max/min
    level: int = 0  # percentile: 1..99
    condition: Condition | None = None  # countif
    alias: str = ""  # countif's name

    @property
    def name(self) -> str:
        if self.alias:
            return self.alias
        if self.column is None:
            return "Count"
        if self.fn == "percentile":
            return f"percentile_{self.column.name}_{self.level}"
        return f"{self.fn}_{self.column.name}"

    @property
    def type(self) -> str:
        if self.fn in ("count", "dcount", "countif") or self.column is None:
            return "long"
        if self.fn == "avg":
            return "real"
        if self.fn == "make_set":
            return "dynamic"
        if self.fn == "sum" and self.column.type in ("int", "long"):
            return "long"
        return self.column.type

    @property
    def outputs(self) -> tuple[tuple[str, str], ...]:
        """The result columns it makes: one, or arg_max's value and the columns taken with it."""
        return ((self.name, self.type), *((c.name, c.type) for c in self.extra))

    def text(self) -> str:
        if self.fn == "count":
            return "count()"
        if self.fn == "percentile":
            return f"percentile({self.column.name if self.column else ''}, {self.level})"
        names = [c.name for c in (self.column, *self.extra) if c is not None]
        return f"{self.fn}({', '.join(names)})"


@dataclass(frozen=True)
class Join:
    """One join with a second allow-listed table on a declared key: ``left`` (of the hunt's table) equal, in any
    letter case, to ``right``; the right rows in their own window and conditions; ``columns``: (output name, right
    column) brought over by an inner join."""

    table: str
    kind: str
    left: Column
    right: Column
    window: timedelta
    filters: tuple[Condition, ...] = ()
    columns: tuple[tuple[str, Column], ...] = ()
    within: timedelta | None = None  # inner only: the right row's TimeGenerated at most this far from the left's
    direction: str = "either"  # or "after" (the right row at or after the left's time), "before"

    def parameters(self) -> dict[str, Any]:
        out: dict[str, Any] = {"table": self.table, "kind": self.kind, "on": [self.left.name, self.right.name],
                               "time_window": span_text(self.window)}
        if self.within:
            sign = next(s for s, d in DIRECTIONS.items() if d == self.direction)
            out["within"] = sign + span_text(self.within)
        if self.filters:
            out["where"] = [shown(c) for c in self.filters]
        if self.columns:
            out["columns"] = [c.name for _, c in self.columns]
        return out


@dataclass(frozen=True)
class Baseline:
    """Keep only the rows whose ``keys`` were not seen (under the same conditions) in the ``days`` before."""

    days: int
    keys: tuple[Column, ...]


@dataclass(frozen=True)
class Series:
    """``make-series`` of the hunt's one aggregate per key, ``step`` apart over the window, then
    ``series_decompose_anomalies`` (threshold ``ANOMALY_THRESHOLD``, a linear trend, ``period`` points of
    seasonality: a day's when the step is shorter than a day and the series holds two days, a week's of daily
    points over two weeks, else none); the hunt's rows are the anomalous points."""

    step: str  # a key of BINS
    points: int
    period: int

    @property
    def span(self) -> timedelta:
        return BINS[self.step]


@dataclass(frozen=True)
class Hunt:
    """One validated hunt over one allow-listed table."""

    table: str
    window: timedelta
    filters: tuple[Condition, ...] = ()  # all hold
    aggregates: tuple[Aggregate, ...] = ()
    by: tuple[Column, ...] = ()
    bin: str | None = None  # a key of BINS: TimeGenerated binned, a group key after ``by``
    columns: tuple[Column, ...] = ()  # projected (no summarize)
    sort: tuple[str, bool] = (TIME_COLUMN, True)  # (output column, descending)
    take: int = DEFAULT_TAKE
    having: tuple[Condition, ...] = ()  # on the summarized rows
    join: Join | None = None
    baseline: Baseline | None = None
    session: timedelta | None = None  # group each key's rows into sessions split by a gap longer than this
    series: Series | None = None
    computed: tuple[Column, ...] = ()  # its ``extend``: columns computed from its table's (``computed.py``)

    tool = "hunt"

    @property
    def timespan(self) -> timedelta:
        """How far back the query reads: its window, its baseline before it, its join's window."""
        spans = [self.window]
        if self.baseline:
            spans.append(self.window + timedelta(days=self.baseline.days))
        if self.join:
            spans.append(self.join.window)
        return max(spans)

    @property
    def summarized(self) -> bool:
        return bool(self.aggregates)

    @property
    def output(self) -> tuple[tuple[str, str], ...]:
        """The result columns and their Kusto types, in order."""
        if not self.summarized:
            return tuple((c.name, c.type) for c in self.columns)
        keys = tuple((c.name, c.type) for c in self.by)
        if self.series:
            return (*keys, (TIME_COLUMN, "datetime"), *self.aggregates[0].outputs, *SERIES_COLUMNS)
        if self.session:
            keys += SESSION_COLUMNS
        keys += ((TIME_COLUMN, "datetime"),) if self.bin else ()
        return keys + tuple(o for a in self.aggregates for o in a.outputs)

    @property
    def right_names(self) -> frozenset[str]:
        """The names of the columns the join brings (they are computed by then: no virtual expression)."""
        return frozenset(name for name, _ in self.join.columns) if self.join else frozenset()

    @property
    def used(self) -> tuple[Column, ...]:
        """Every column of the hunt's own table it reads, once each: its computed columns as declared, then the rest
        in first-use order (the virtual ones are computed)."""
        seen: dict[str, Column] = {c.name: c for c in self.computed}
        countif = tuple(a.condition for a in self.aggregates if a.condition is not None)
        for column in (*(f.column for f in leaves(self.filters)), *(f.column for f in leaves(countif)), *self.by,
                       *self.columns, *(c for a in self.aggregates for c in (a.column, *a.extra) if c is not None),
                       *(self.baseline.keys if self.baseline else ()), *((self.join.left,) if self.join else ())):
            if column.name not in self.right_names:
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
        if self.computed:
            out["extend"] = [computed_shown(c) for c in self.computed]
        if self.filters:
            out["where"] = [shown(c) for c in self.filters]
        if self.baseline:
            out["baseline"] = {"days": self.baseline.days, "keys": [c.name for c in self.baseline.keys]}
        if self.join:
            out["join"] = self.join.parameters()
        if self.aggregates:
            out["summarize"] = [{"countif": shown(a.condition), "as": a.alias} if a.condition else a.text()
                                for a in self.aggregates]
        if self.by:
            out["by"] = [c.name for c in self.by]
        if self.bin:
            out["bin"] = self.bin
        if self.session:
            out["session"] = {"gap": span_text(self.session)}
        if self.series:
            out["series"] = {"step": self.series.step}
        if self.having:
            out["having"] = [shown(c) for c in self.having]
        if self.columns:
            out["columns"] = [c.name for c in self.columns]
        out["sort"] = f"{self.sort[0]} {'desc' if self.sort[1] else 'asc'}"
        out["take"] = self.take
        return out


def span_text(window: timedelta) -> str:
    minutes = int(window.total_seconds() // 60)
    if minutes % (24 * 60) == 0:
        return f"{minutes // (24 * 60)}d"
    return f"{minutes // 60}h" if minutes % 60 == 0 else f"{minutes}m"


# --- parsing -------------------------------------------------------------------------------------------------------

_SPAN = re.compile(r"^\s*(?:last_)?(\d{1,5})\s*(m|h|d)\s*$", re.IGNORECASE)
_UNIT = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1)}
_AGGREGATE = re.compile(r"^\s*([a-z_]+)\s*\(\s*([A-Za-z0-9_ ,.]*)\)\s*$", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,39}$")
_SORT = re.compile(r"^\s*([A-Za-z0-9_]+)(?:\s+(asc|desc))?\s*$", re.IGNORECASE)


def parse_table(value: object, what: str = "table") -> Table:
    if value is None or value == "":
        raise InvalidParameter(what, f"is required: one of {', '.join(table_names())}")
    text = value if isinstance(value, str) else ""
    found = next((t for name, t in tables().items() if name.lower() == text.strip().lower()), None)
    if found is None:
        raise InvalidParameter(what, f"{quoted(value)} is not a table a hunt can read; the tables are: "
                                     f"{', '.join(table_names())}")
    return found


def parse_window(value: object, what: str = "time_window") -> timedelta:
    if value is None or value == "":
        raise InvalidParameter(what, "is required: how far back to look, e.g. 24h, 7d (at most 30d)")
    match = _SPAN.match(value) if isinstance(value, str) else None
    if match is None:
        raise InvalidParameter(what, f"{quoted(value)} is not a window; write e.g. 30m, 24h, 7d or "
                                     f"{', '.join(w.value for w in TimeWindow)} (at most 30d)")
    window = int(match[1]) * _UNIT[match[2].lower()]
    if not timedelta(minutes=1) <= window <= MAX_WINDOW:
        raise InvalidParameter(what, f"{quoted(value)} is too long: a hunt looks back at most 30d")
    return window


def column_of(table: Table, name: object, what: str) -> Column:
    column = table.find(name) if isinstance(name, str) else None
    if column is None:
        virtual = ", ".join(table.virtual_names)
        raise InvalidParameter(what, f"{table.name} has no column {quoted(name)}; its columns are: "
                                     f"{', '.join(c for c in table.columns if c not in table.virtual_names)}"
                               + (f"; and fields read for you from inside its JSON: {virtual}" if virtual else ""))
    return column


class _Scope:
    """The columns a hunt's later steps can name: its table's, and those its join brings (by output name)."""

    def __init__(self, table: Table, join: Join | None, computed: tuple[Column, ...] = ()) -> None:
        self.table = table
        self.computed = {c.name.lower(): c for c in computed}
        self.extra = {name.lower(): Column(name, c.type) for name, c in join.columns} if join else {}
        clash = set(self.computed) & set(self.extra)
        if clash:
            raise InvalidParameter("extend", f"{', '.join(sorted(clash))} is both a computed column and one the "
                                             f"join brings; name the computed column otherwise")

    def resolve(self, name: object, what: str) -> Column:
        key = name.strip().lower() if isinstance(name, str) else ""
        if key in self.extra or key in self.computed:
            return self.extra.get(key) or self.computed[key]
        try:
            return column_of(self.table, name, what)
        except InvalidParameter as error:
            more = [f"computed: {', '.join(c.name for c in self.computed.values())}"] if self.computed else []
            more += [f"from the join: {', '.join(c.name for c in self.extra.values())}"] if self.extra else []
            if not more:
                raise
            raise InvalidParameter(what, f"{str(error).split(': ', 1)[1]}; {'; '.join(more)}") from None


def parse_hunt(arguments: Mapping[str, object]) -> Hunt:
    """A validated hunt from the tool's arguments."""
    table = parse_table(arguments.get("table"))
    window = parse_window(arguments.get("time_window"))
    budget = Budget()
    computed = parse_computed(arguments.get("extend"), lambda n, w: column_of(table, n, w),
                              lambda n: table.find(n) is not None)
    own = _Scope(table, None, computed)  # the hunt's table and its computed columns
    filters = parse_conditions(arguments.get("where"), own.resolve, budget)
    baseline = _baseline(own, arguments.get("baseline"))
    join = _join(table, window, arguments.get("join"), budget)
    scope = _Scope(table, join, computed)
    aggregates = _aggregates(scope, arguments.get("summarize"), budget)
    by = tuple(scope.resolve(c, "by") for c in _list(arguments.get("by"), "by"))
    bin_size = _bin(arguments.get("bin"))
    session = _session(arguments.get("session"))
    series = _series(arguments.get("series"), window)
    columns = tuple(scope.resolve(c, "columns") for c in _list(arguments.get("columns"), "columns"))
    if (by or bin_size or session or series) and not aggregates:
        aggregates = (Aggregate("count", None),)  # "by Country" alone means counting
    hunt = Hunt(table.name, window, filters, aggregates, by, bin_size, columns, take=_take(arguments.get("take")),
                join=join, baseline=baseline, session=session, series=series, computed=computed)
    if aggregates:
        hunt = _summarized(hunt, arguments.get("having"), budget)
    else:
        if arguments.get("having") not in (None, "", []):
            raise InvalidParameter("having", "filters a summarized hunt's aggregates; add summarize, or use where")
        raw_join = arguments.get("join")
        join_asked = isinstance(raw_join, Mapping) and raw_join.get("columns") not in (None, "", [])
        hunt = replace(hunt, columns=_shown_columns(table, join, columns, join_asked))
    return _with_sort(hunt, arguments.get("sort"))


def _summarized(hunt: Hunt, raw_having: object, budget: Budget) -> Hunt:
    if hunt.columns:
        raise InvalidParameter("columns", "a summarized hunt shows its by columns and aggregates; leave columns "
                                          "out, or leave summarize out")
    by = hunt.by
    if len(by) > MAX_BY or len({c.name for c in by}) != len(by):
        raise InvalidParameter("by", f"at most {MAX_BY} different columns")
    if any(c.type == "dynamic" for c in by) or (hunt.bin and any(c.name == TIME_COLUMN for c in by)):
        raise InvalidParameter("by", "a dynamic column cannot be a group; a time bin takes TimeGenerated itself")
    _check_shape(hunt, raw_having)
    names = [name for name, _ in hunt.output]
    if len({n.lower() for n in names}) != len(names):
        raise InvalidParameter("summarize", f"two result columns would have one name ({', '.join(names)}); an "
                                            f"arg_max takes columns that are not group keys, and countif needs "
                                            f"its own \"as\"")
    outputs = Table("result", {n: Column(n, t) for n, t in hunt.output}, ())
    having = parse_conditions(raw_having, lambda n, w: _output_column(outputs, n, w), budget, "having",
                              compare=True)
    return replace(hunt, having=having)


def _check_shape(hunt: Hunt, raw_having: object) -> None:
    """A bin, a session gap and a series each group by time: one of them at most; a series has one aggregate."""
    if sum(bool(x) for x in (hunt.bin, hunt.session, hunt.series)) > 1:
        raise InvalidParameter("series" if hunt.series else "session", "bin, session and series each group by "
                                                                       "time: use one of them")
    if hunt.series is None:
        return
    last = hunt.aggregates[-1]
    if len(hunt.aggregates) != 1 or last.fn not in SERIES_AGGREGATES:
        raise InvalidParameter("summarize", f"a series follows one aggregate: one of "
                                            f"{', '.join(SERIES_AGGREGATES)} (count() when none is given)")
    if last.column is not None and last.column.type not in NUMBER_TYPES and last.fn != "dcount":
        raise InvalidParameter("summarize", f"a series of {last.fn} needs a number column; {last.column.name} is "
                                            f"{last.column.type}")
    if raw_having not in (None, "", []) or any(c.name == TIME_COLUMN for c in hunt.by):
        raise InvalidParameter("series", "a series' rows are its anomalous points: no having, and TimeGenerated "
                                         "is its own axis, not a by column")


def _output_column(outputs: Table, name: object, what: str) -> Column:
    column = outputs.find(name) if isinstance(name, str) else None
    if column is None or column.type == "dynamic":
        usable = [c.name for c in outputs.columns.values() if c.type != "dynamic"]
        if not usable:
            raise InvalidParameter(what, f"{quoted(name)}: this hunt's results are lists (make_set), which having "
                                         f"cannot filter; filter the rows with where, or add count()")
        raise InvalidParameter(what, f"{quoted(name)} is not a result column; having filters these: "
                                     f"{', '.join(usable)}")
    return column


def _shown_columns(table: Table, join: Join | None, columns: tuple[Column, ...],
                   join_asked: bool = False) -> tuple[Column, ...]:
    """The projected columns: those asked for (or the table's defaults), then the join's: all of them when the
    hunt names none, those the join itself names when it does (asked for twice, they were dropped)."""
    brought = tuple(Column(name, c.type) for name, c in join.columns) if join else ()
    if not columns:
        columns = tuple(c for name in table.defaults if (c := table.find(name)) is not None) + brought
    elif join_asked:
        columns += brought
    columns = tuple({c.name: c for c in columns}.values())
    if len(columns) > MAX_COLUMNS:
        raise InvalidParameter("columns", f"at most {MAX_COLUMNS} columns")
    return columns


def _aggregates(scope: _Scope, raw: object, budget: Budget) -> tuple[Aggregate, ...]:
    items = _list(raw, "summarize")
    if len(items) > MAX_AGGREGATES:
        raise InvalidParameter("summarize", f"at most {MAX_AGGREGATES} aggregates")
    out = tuple(_aggregate(scope, item, budget, n) for n, item in enumerate(items, 1))
    if len({a.name.lower() for a in out}) != len(out):
        raise InvalidParameter("summarize", "an aggregate is named twice")
    return out


_AGGREGATE_HELP = ("count(), dcount(C), sum(C), avg(C), min(C), max(C), make_set(C), percentile(C, 95), "
                   "arg_max(TimeGenerated, C1, C2), {\"countif\": condition, \"as\": \"Name\"}")


def _aggregate(scope: _Scope, item: object, budget: Budget, n: int) -> Aggregate:
    if isinstance(item, Mapping) and "countif" in item:
        alias = item.get("as") or f"countif_{n}"
        if not isinstance(alias, str) or not _NAME.match(alias):
            raise InvalidParameter("summarize", f"countif's \"as\" is a name of letters, digits and _; got "
                                                f"{quoted(alias)}")
        [condition] = parse_conditions([item["countif"]], scope.resolve, budget, "summarize")
        return Aggregate("countif", None, condition=condition, alias=alias)
    match = _AGGREGATE.match(item) if isinstance(item, str) else None
    fn = match[1].lower() if match else ""
    if match is None or fn not in AGGREGATES or fn == "countif":
        raise InvalidParameter("summarize", f"{quoted(item)} is not one of {_AGGREGATE_HELP}")
    args = [a.strip() for a in match[2].split(",")] if match[2].strip() else []
    if fn == "count":
        if args:
            raise InvalidParameter("summarize", "count() takes nothing; dcount(C) counts distinct values")
        return Aggregate("count", None)
    if not args:
        raise InvalidParameter("summarize", f"{fn}() needs a column: {_AGGREGATE_HELP}")
    column = scope.resolve(args[0], "summarize")
    if fn == "percentile":
        return _percentile(column, args)
    if fn in ("arg_max", "arg_min"):
        return _arg(fn, column, tuple(scope.resolve(a, "summarize") for a in args[1:]))
    if len(args) > 1:
        raise InvalidParameter("summarize", f"{fn}() takes one column: {_AGGREGATE_HELP}")
    _check_applies(fn, column)
    return Aggregate(fn, column)


def _check_applies(fn: str, column: Column) -> None:
    numbers = fn in ("sum", "avg") and column.type not in NUMBER_TYPES
    ordered = fn in ("min", "max") and column.type not in NUMBER_TYPES | {"datetime"}
    if column.type == "dynamic" or numbers or ordered:
        raise InvalidParameter("summarize", f"{fn}() does not apply to {column.name} ({column.type}); sum and avg "
                                            f"take numbers, min and max numbers and times, dcount and make_set any "
                                            f"column but dynamic")


def _percentile(column: Column, args: list[str]) -> Aggregate:
    level = int(args[1]) if len(args) == 2 and args[1].isdigit() else 0
    if column.type not in NUMBER_TYPES or not 1 <= level <= 99:
        raise InvalidParameter("summarize", f"percentile takes a number column and a level 1 to 99, e.g. "
                                            f"percentile(DurationMs, 95); got {column.name} ({column.type})")
    return Aggregate("percentile", column, level=level)


def _arg(fn: str, column: Column, extra: tuple[Column, ...]) -> Aggregate:
    if column.type not in NUMBER_TYPES | {"datetime"}:
        raise InvalidParameter("summarize", f"{fn} picks the row with the highest or lowest number or time, e.g. "
                                            f"arg_max(TimeGenerated, ResultType); {column.name} is {column.type}")
    if not 1 <= len(extra) <= 6 or len({c.name for c in (column, *extra)}) != len(extra) + 1:
        raise InvalidParameter("summarize", f"{fn} takes 1 to 6 other columns, each once, e.g. "
                                            f"{fn}(TimeGenerated, IPAddress, ResultType)")
    return Aggregate(fn, column, extra=extra)


def _join(table: Table, window: timedelta, raw: object, budget: Budget) -> Join | None:
    if raw is None or raw == "" or raw == {}:
        return None
    if not isinstance(raw, Mapping):
        raise InvalidParameter("join", f"an object {{\"table\", \"on\": [left column, right column], \"kind\": "
                                       f"inner|leftsemi|leftanti, \"where\", \"columns\"}}; got {quoted(raw)}")
    _known_keys(raw, JOIN_KEYS, "join")
    right = parse_table(raw.get("table"), "join.table")
    kind = str(raw.get("kind") or "inner").strip().lower()
    if kind not in JOIN_KINDS:
        raise InvalidParameter("join.kind", f"{quoted(raw.get('kind'))}: one of {', '.join(JOIN_KINDS)}")
    on = raw.get("on")
    if not isinstance(on, Sequence) or isinstance(on, str) or len(on) != 2:
        raise InvalidParameter("join.on", f"[a column of {table.name}, a column of {right.name}], keys of one "
                                          f"kind; got {quoted(on)}")
    left_key, right_key = column_of(table, on[0], "join.on"), column_of(right, on[1], "join.on")
    _check_keys(table, left_key, right, right_key)
    right_window = parse_window(raw.get("time_window") or span_text(window), "join.time_window")
    within, direction = _within(raw.get("within"), kind)
    filters = parse_conditions(raw.get("where"), lambda n, w: column_of(right, n, w), budget, "join.where")
    columns = tuple(column_of(right, c, "join.columns") for c in _list(raw.get("columns"), "join.columns"))
    if kind not in BRING_KINDS and columns:
        raise InvalidParameter("join.columns", f"a {kind} join keeps the hunt's rows only; columns come with an "
                                               f"inner or leftouter join")
    if kind in BRING_KINDS and not columns:
        columns = tuple(c for name in right.defaults[:4] if (c := right.find(name)) is not None)
    if len(columns) > MAX_JOIN_COLUMNS:
        raise InvalidParameter("join.columns", f"at most {MAX_JOIN_COLUMNS} columns")
    named = tuple((_right_name(table, c.name), c) for c in dict.fromkeys(columns))
    return Join(right.name, kind, left_key, right_key, right_window, filters, named, within, direction)


def _span(raw: object, what: str, low: timedelta, high: timedelta, example: str) -> timedelta:
    """A bounded span written as 30m, 1h, 2d (never zero, negative or past ``high``)."""
    match = _SPAN.match(raw) if isinstance(raw, str) else None
    span = int(match[1]) * _UNIT[match[2].lower()] if match else None
    if span is None or not low <= span <= high:
        raise InvalidParameter(what, f"{quoted(raw)}: a span from {span_text(low)} to {span_text(high)}, "
                                     f"e.g. {example}")
    return span


def _within(raw: object, kind: str) -> tuple[timedelta | None, str]:
    """A join's time proximity and its direction: "1h" either side, "+10m" the right row after the left's (at
    most 10 minutes), "-10m" before it."""
    if raw is None or raw == "":
        return None, "either"
    if kind != "inner":
        raise InvalidParameter("join.within", f"a time proximity pairs rows: it takes an inner join, not {kind}")
    text = raw.strip() if isinstance(raw, str) else ""
    sign = text[0] if text[:1] in ("+", "-") else ""
    span = _span(text[1:] if sign else raw, "join.within", timedelta(minutes=1), MAX_WITHIN,
                 "1h (either side), +10m (the right row after the left's), -10m (before)")
    return span, DIRECTIONS[sign]


def _one_field(raw: object, field: str, what: str, example: str) -> object:
    """An object's one field (``{"gap": "30m"}``), or the bare value (``"30m"``)."""
    if isinstance(raw, Mapping):
        if set(raw) - {field}:
            raise InvalidParameter(what, f"an object {{\"{field}\": ...}}, e.g. {example}; got {quoted(raw)}")
        return raw.get(field)
    return raw


def _session(raw: object) -> timedelta | None:
    if raw is None or raw == "" or raw == {}:
        return None
    gap = _one_field(raw, "gap", "session", '{"gap": "30m"}')
    return _span(gap, "session", timedelta(minutes=1), MAX_GAP, '{"gap": "30m"}: a gap longer than it starts a '
                                                               'new session')


def _series(raw: object, window: timedelta) -> Series | None:
    if raw is None or raw == "" or raw == {}:
        return None
    step = _one_field(raw, "step", "series", '{"step": "1h"}')
    text = step.strip().lower() if isinstance(step, str) else ""
    if text not in BINS:
        raise InvalidParameter("series", f"step {quoted(step)}: one of {', '.join(BINS)}")
    points, rest = divmod(window, BINS[text])
    if rest or not 4 <= points <= MAX_POINTS:
        raise InvalidParameter("series", f"a {span_text(window)} window in {text} steps makes "
                                         f"{window / BINS[text]:.1f} points; a series takes a whole number of steps, "
                                         f"4 to {MAX_POINTS} (e.g. 7d in 1h, 30d in 1d)")
    return Series(text, points, _period(BINS[text], points))


def _period(step: timedelta, points: int) -> int:
    """The seasonality the series is decomposed with, in points: a day's (a week's for daily points), when the
    series holds two of them; else none (Kusto's auto-detection is left out: both backends use this one)."""
    cycle = timedelta(days=7) if step >= timedelta(days=1) else timedelta(days=1)
    period = cycle // step
    return period if points >= 2 * period else 0


def _right_name(left: Table, name: str) -> str:
    """A right column's name after the join: its own, or ``Right<name>`` when the hunt's table has one so named."""
    return f"Right{name}" if left.find(name) is not None else name


def _check_keys(table: Table, left: Column, right: Table, right_key: Column) -> None:
    kinds = join_kind(table.name, left.name), join_kind(right.name, right_key.name)
    if not joinable(*kinds):
        raise InvalidParameter("join.on", f"{table.name}.{left.name} and {right.name}.{right_key.name} are not "
                                          f"keys of one kind; {table.name} joins on {_keys_text(table)}; "
                                          f"{right.name} on {_keys_text(right)}")


def _keys_text(table: Table) -> str:
    keys = join_keys().get(table.name, {})
    return ", ".join(f"{name} ({kind})" for name, kind in keys.items()) or "nothing"


def _baseline(scope: _Scope, raw: object) -> Baseline | None:
    if raw is None or raw == "" or raw == {}:
        return None
    if not isinstance(raw, Mapping):
        raise InvalidParameter("baseline", f"an object {{\"days\": 14, \"keys\": [\"IPAddress\"]}}; got "
                               f"{quoted(raw)}")
    _known_keys(raw, BASELINE_KEYS, "baseline")
    days = raw.get("days")
    days = int(days) if isinstance(days, str) and days.strip().isdigit() else days
    if not isinstance(days, int) or isinstance(days, bool) or not 1 <= days <= MAX_BASELINE_DAYS:
        raise InvalidParameter("baseline", f"days: 1 to {MAX_BASELINE_DAYS} days before the window; got "
                                           f"{quoted(raw.get('days'))}")
    keys = tuple(scope.resolve(c, "baseline") for c in _list(raw.get("keys"), "baseline"))
    if not 1 <= len(keys) <= 3 or any(c.type not in KEY_TYPES for c in keys):
        raise InvalidParameter("baseline", "keys: 1 to 3 text or whole-number columns (the user, the IP, the "
                                           "country...) whose values are new if not seen in the days before")
    return Baseline(days, tuple(dict.fromkeys(keys)))


JOIN_KEYS = ("table", "on", "kind", "time_window", "within", "where", "columns")
BASELINE_KEYS = ("days", "keys")


def _known_keys(raw: Mapping[Any, object], known: Sequence[str], what: str) -> None:
    """An object's keys are all its own: an unknown one ("after": true, a baseline's "where") would otherwise be
    dropped without a word, and the hunt would run without what it asked for."""
    unknown = [str(k) for k in raw if k not in known]
    if unknown:
        raise InvalidParameter(what, f"{quoted(unknown[0][:40])} is not one of its fields; they are "
                                     f"{', '.join(known)}")


def _with_sort(hunt: Hunt, raw: object) -> Hunt:
    names = dict(hunt.output)
    if raw is None or raw == "":
        if hunt.series:
            sort = ("Score", True)  # the strongest rises first
        elif hunt.bin:
            sort = (TIME_COLUMN, False)
        elif hunt.summarized:
            sort = (hunt.aggregates[0].name, True)
        else:
            sort = (TIME_COLUMN, True) if TIME_COLUMN in names else (hunt.output[0][0], True)
        return replace(hunt, sort=sort)
    match = _SORT.match(raw) if isinstance(raw, str) else None
    extra = _Scope(tables()[hunt.table], None, hunt.computed).computed.get(match[1].lower()) if match else None
    extra = extra or (tables()[hunt.table].find(match[1]) if match else None)
    extra = extra if not hunt.summarized else None
    if extra is not None and extra.name not in names and len(hunt.columns) < MAX_COLUMNS:
        hunt = replace(hunt, columns=(*hunt.columns, extra))  # sorted by a column it did not show: show it too
        names = dict(hunt.output)
    name = next((n for n in names if match and n.lower() == match[1].lower()), None)
    if match is None or name is None or names[name] == "dynamic":
        sortable = [n for n, kind in hunt.output if kind != "dynamic"]
        raise InvalidParameter("sort", f"{quoted(raw)}: sort by one of the hunt's columns, e.g. "
                                       f"\"{sortable[0]} desc\"; its columns are: {', '.join(sortable)}")
    return replace(hunt, sort=(name, (match[2] or "desc").lower() == "desc"))


def _bin(raw: object) -> str | None:
    if raw is None or raw == "":
        return None
    text = raw.strip().lower() if isinstance(raw, str) else ""
    if text not in BINS:
        raise InvalidParameter("bin", f"{quoted(raw)} is not a bin; one of {', '.join(BINS)}")
    return text


def _take(raw: object) -> int:
    if raw is None or raw == "":
        return DEFAULT_TAKE
    number = int(raw) if isinstance(raw, str) and raw.strip().isdigit() else raw
    if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= MAX_TAKE:
        raise InvalidParameter("take", f"{quoted(raw)}: take 1 to {MAX_TAKE} rows")
    return number


def _list(raw: object, what: str) -> list[Any]:
    if raw is None or raw == "":
        return []
    if isinstance(raw, str):
        return [raw]  # a lone name reads as a list of one
    if not isinstance(raw, Sequence):
        raise InvalidParameter(what, f"must be a list; got {quoted(raw)}")
    if len(raw) > MAX_COLUMNS * 2:
        raise InvalidParameter(what, f"at most {MAX_COLUMNS} names")
    return list(raw)

