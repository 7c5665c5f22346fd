"""A hunt on the demo workspace: SQLite built from the same typed ``Hunt`` as its KQL, values as parameters.

Each column reads its stored form (``bot/demo/store.py``): a virtual column is ``json_extract`` on its source's JSON
text (``tostring`` of a missing field is "", as in KQL); text compares ignoring letter case through ``kql_lower``
(the expression the demo's indexes are built on); ``has`` is a whole-term match as Kusto's is. The steps are
``WITH`` clauses: the hunt's rows (``l``: window, conditions and baseline on the stored table, so its indexes
serve them; every column under the hunt's name), the join (``src``, its time proximity compared in whole
microseconds), the sessions (``s1``, ``s2``: each key's gaps by ``LAG``, numbered by a running sum), the groups
(``g``, ``out``); what SQLite lacks (``make_set``, ``percentile``, ``arg_max``, regular expressions) is a Python
function. A series hunt's SQL stops at each key's aggregate per point; ``run`` fills the points, ranks and
decomposes the series in Python (``series.decompose_anomalies``), as SQLite cannot. The rows come back
as the KQL's do: ``Row`` (the hunt's columns, typed as the service returns them in a property bag) and
``TotalMatched``.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from datetime import UTC, datetime, timedelta
from functools import lru_cache, partial
from typing import Any

from bot.sentinel.catalog import ENTITY_COLUMNS, HUNT_INDEXED
from bot.sentinel.demo_sql import iso
from bot.sentinel.hunt.catalog import STRING_TYPES, TIME_COLUMN, Column, tables
from bot.sentinel.hunt.computed import evaluate
from bot.sentinel.hunt.conditions import NO_VALUE_OPS, Condition, Filter, Group, Value
from bot.sentinel.hunt.model import ANOMALY_THRESHOLD, BINS, BRING_KINDS, MAX_SERIES, MAX_SET, Aggregate, Hunt
from bot.sentinel.hunt.series import decompose_anomalies


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


def ends_with(text: object, suffix: object) -> int:
    return int(str(text or "").lower().endswith(str(suffix or "").lower()))


@lru_cache(maxsize=64)
def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)  # checked when the hunt was parsed (conditions.check_regex): no nested repeats


def regex_match(text: object, pattern: object) -> int:
    """Kusto's ``matches regex``: found anywhere in the text, letter case as written (``(?i)`` to ignore it)."""
    return int(_pattern(str(pattern)).search(str(text or "")) is not None)


class _MakeSet:
    """``make_set(x, MAX_SET)``: the distinct non-null values as JSON, in order (Kusto's order is unspecified; the
    demo's is stable), the first ``MAX_SET`` of them."""

    def __init__(self) -> None:
        self.values: set[Any] = set()

    def step(self, value: Any) -> None:
        if value is not None:
            self.values.add(value)

    def finalize(self) -> str:
        return json.dumps(sorted(self.values, key=_sortable)[:MAX_SET], ensure_ascii=False)


def _sortable(value: Any) -> tuple[str, Any]:
    return type(value).__name__, value


class _Percentile:
    """``percentile(x, p)``: the nearest-rank value (one of the values, as Kusto's is)."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.level = 50

    def step(self, value: Any, level: int) -> None:
        self.level = level
        if value is not None:
            self.values.append(value)

    def finalize(self) -> Any:
        if not self.values:
            return None
        ordered = sorted(self.values)
        return ordered[max(0, math.ceil(self.level / 100 * len(ordered)) - 1)]


class _ArgMax:
    """``arg_max(x, c1, ...)``: x's highest value and the other columns of its row, as JSON; among rows tied on x,
    the one whose other values are highest as JSON text (Kusto picks any; the demo is stable)."""

    higher = True

    def __init__(self) -> None:
        self.best: tuple[Any, str] | None = None
        self.row: list[Any] = []

    def step(self, *values: Any) -> None:
        if values[0] is None:
            return
        key = (values[0], json.dumps(values[1:], default=str))
        if self.best is None or (key > self.best if self.higher else key < self.best):
            self.best, self.row = key, list(values)

    def finalize(self) -> str | None:
        return None if self.best is None else json.dumps(self.row, ensure_ascii=False)


class _ArgMin(_ArgMax):
    higher = False


def computed_function(column: Column) -> str:
    """The SQL function name a computed column's Python is registered under (its name is letters, digits, _)."""
    return f"hunt_x_{column.name}"


def _functions(conn: sqlite3.Connection, hunt: Hunt) -> None:
    # Registered per query (cheap): the hunt needs them, the rest of the demo does not. A computed column's
    # arguments are bound in Python (never in the SQL's text): one function per column, its name the column's.
    for column in hunt.computed:
        assert column.computed is not None
        conn.create_function(computed_function(column), 1, partial(evaluate, column.computed), deterministic=True)
    conn.create_function("kql_has", 2, has_term, deterministic=True)
    conn.create_function("kql_startswith", 2, starts_with, deterministic=True)
    conn.create_function("kql_endswith", 2, ends_with, deterministic=True)
    conn.create_function("kql_regex", 2, regex_match, deterministic=True)
    conn.create_aggregate("kql_make_set", 1, _MakeSet)  # type: ignore[arg-type]
    conn.create_aggregate("kql_percentile", 2, _Percentile)  # type: ignore[arg-type]
    conn.create_aggregate("kql_arg_max", -1, _ArgMax)  # type: ignore[arg-type]
    conn.create_aggregate("kql_arg_min", -1, _ArgMin)  # type: ignore[arg-type]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# The JSON fields the demo indexes (AuditLogs' initiator and target), as it writes them.
_INDEXED = frozenset(c for by_kind in ENTITY_COLUMNS.values() for cs in by_kind.values() for c in cs if "(" in c)


_CAST = {"int": "INTEGER", "long": "INTEGER", "bool": "INTEGER", "real": "REAL", "decimal": "REAL"}


def raw(column: Column) -> str:
    """A column's stored value in SQL: its column, or the JSON field its virtual declaration names (NULL when absent).
    The source is checked to be JSON first (``json_extract`` fails on anything else, and the demo holds "" for some
    absent dynamic values), except where the demo indexes the field: an index on it proves every row's is JSON. A
    computed column is its registered function of its source's value."""
    if column.computed is not None:
        return f"{computed_function(column)}({expression(column.computed.of)})"
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
    if not column.virtual or not column.path:  # a table's column, an alias, a computed one (text, never null)
        return value
    if column.type in STRING_TYPES:
        return f"coalesce(CAST(({value}) AS TEXT), '')"
    cast = _CAST.get(column.type)
    return f"CAST(({value}) AS {cast})" if cast else f"({value})"


def _text(column: Column) -> str:
    """The text a letter-case-free comparison reads: the stored column, or the JSON field (the bare field where the
    demo indexes it, as its index is written)."""
    value = raw(column)
    return value if not column.virtual or not column.path or value in _INDEXED else expression(column)


def _lowered(column: Column) -> str:
    """Text compared in any letter case. A table's own text column, or a JSON field the demo indexes
    (``ENTITY_COLUMNS``), is written exactly as its index is (``kql_lower(expr)``), so the index serves the match."""
    return f"kql_lower({_text(column)})"


# The entity columns, as the demo's entity indexes are written (``kql_lower(expr)``, the form other queries match).
_ENTITY_SQL = frozenset(c for by_kind in ENTITY_COLUMNS.values() for cs in by_kind.values() for c in cs)


def folded(value: str) -> str:
    """Python's ``str.lower`` (``kql_lower``) of a text in SQL without a Python call where the text is ASCII (its
    length in bytes is its length in characters): SQLite's ``lower`` (in C) folds exactly the ASCII letters, as
    Python does; other text goes to ``kql_lower``. A 30-day hunt at 100x called ``kql_lower`` 264,869 times."""
    return (f"(CASE WHEN length(CAST({value} AS BLOB)) = length({value}) THEN lower({value}) "
            f"ELSE kql_lower({value}) END)")


def compared(column: Column) -> str:
    """What an equality, ``in`` or range filter on ``column`` compares: text in lower case, other values as typed.
    The demo indexes this very expression for its tables' hot hunt columns (``catalog.HUNT_INDEXED``); an entity
    column keeps the form of its entity index (``kql_lower``), which the demo's other queries share."""
    if column.type not in STRING_TYPES:
        return expression(column)
    text = _text(column)
    return _lowered(column) if text.strip('"') in _ENTITY_SQL else folded(text)


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


class Ref:
    """How a condition reads a column: on the stored table (its expression, in the indexed form), or on a step
    whose columns already carry the hunt's names (``plain``)."""

    def __init__(self, plain: bool = False) -> None:
        self.plain = plain

    def value(self, column: Column) -> str:
        return _quote(column.name) if self.plain else expression(column)

    def compared(self, column: Column) -> str:
        if not self.plain:
            return compared(column)
        name = _quote(column.name)
        return folded(name) if column.type in STRING_TYPES else name


_TEXT_FUNCTIONS = {"has": "kql_has", "contains": "contains_ci", "startswith": "kql_startswith",
                   "endswith": "kql_endswith", "matches regex": "kql_regex"}


def condition(c: Condition, params: list[Any], ref: Ref | None = None) -> str:
    """One condition as SQL, its values appended to ``params``."""
    ref = ref or Ref()
    if isinstance(c, Group):
        if c.kind == "not":
            return f"NOT ({condition(c.items[0], params, ref)})"
        joined = f" {'AND' if c.kind == 'all' else 'OR'} ".join(condition(item, params, ref) for item in c.items)
        return f"({joined})"
    return _leaf(c, params, ref)


def _leaf(f: Filter, params: list[Any], ref: Ref) -> str:
    text = f.column.type in STRING_TYPES or f.column.type == "dynamic"
    value = ref.value(f.column)
    if f.op in NO_VALUE_OPS:
        empty = f"coalesce({value}, '') = ''" if text else f"{value} IS NULL"
        return empty if f.op == "isempty" else f"NOT ({empty})"
    negated, op = (True, f.op[1:]) if f.op.startswith("!") and f.op != "!=" else (False, f.op)
    if text and (op in _TEXT_FUNCTIONS or op == "has_any"):
        function = "kql_has" if op == "has_any" else _TEXT_FUNCTIONS[op]
        found = " OR ".join(_term(function, op, value, str(v), params) for v in f.values)
        found = f"({found})" if len(f.values) > 1 else found
        return f"NOT {found}" if negated else found
    column = ref.compared(f.column)
    if f.other is not None:  # a having's two results: A op factor * B
        params.append(f.values[0])
        return f"{column} {'<>' if op == '!=' else '=' if op == '==' else op} ? * {ref.compared(f.other)}"
    if text:
        params.extend(str(v) for v in f.values)
        marks = ["kql_lower(?)"] * len(f.values)
    else:
        params.extend(_stored(v) for v in f.values)
        marks = ["?"] * len(f.values)
    no = "NOT " if negated else ""
    if op == "between":
        return f"{column} {no}BETWEEN {marks[0]} AND {marks[1]}"
    if op == "in":
        return f"{column} {no}IN ({', '.join(marks)})"
    return f"{column} {'<>' if op == '!=' else '=' if op == '==' else op} {marks[0]}"


_LIKE = {"has": "%{}%", "has_any": "%{}%", "contains": "%{}%", "startswith": "{}%", "endswith": "%{}"}
# An ASCII character that is not a letter or digit, as a GLOB class: a term boundary in Kusto's ``has`` and in
# ``has_term`` alike (a non-ASCII neighbour may be a letter: left to ``has_term``).
_ASCII_BOUNDARY = "[\x01-/:-@[-`{-\x7f]"


def _term(function: str, op: str, value: str, term: str, params: list[Any]) -> str:
    """One term's match. SQLite's LIKE (in C, any ASCII letter case) first rules out the rows without the term, so
    the Python function runs on the few that have it (a 30-day term hunt at 100x called it on every row: ~0.4 s CPU).
    Only for an ASCII term: LIKE folds ASCII letters only. For ``has``, a GLOB (in C) then proves most matches
    before the Python function is asked (``_has_surely``)."""
    pattern = _LIKE.get(op)
    if pattern is None or not term or not term.isascii():
        params.append(term)
        return f"{function}({value}, ?)"
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    params.append(pattern.format(escaped))
    surely = _has_surely(value, term, params) + " OR " if function == "kql_has" else ""
    params.append(term)
    return f"({value} LIKE ? ESCAPE '\\' AND ({surely}{function}({value}, ?)))"


def _has_surely(value: str, term: str, params: list[Any]) -> str:
    """SQL true where the text surely ``has`` the ASCII ``term``: the term in the text lowered by SQLite (ASCII
    letters only, so each character stays where it was) with an ASCII non-alphanumeric character or an end of the
    text on each side where the term's own end is a letter or digit. Such a match is one for ``has_term`` too (its
    neighbours are the same characters in Python's lower case); where this is false, ``has_term`` decides.
    At 100x, a 30-day ``has_any`` in sign-ins' UserAgent: 137,146 rows had a term, each a call to ``has_term``."""
    needle = "".join(f"[{c}]" if c in "*?[" else c for c in term.lower())
    before = _ASCII_BOUNDARY if term[0].isalnum() else ""
    after = _ASCII_BOUNDARY if term[-1].isalnum() else ""
    params.append(f"*{before}{needle}{after}*")
    return f"(' ' || lower({value}) || ' ') GLOB ?"


def _bin(size: str) -> str:
    seconds = int(BINS[size].total_seconds())
    epoch = f"CAST(strftime('%s', substr({_quote(TIME_COLUMN)}, 1, 19)) AS INTEGER)"
    return f"strftime('%Y-%m-%dT%H:%M:%S.000000Z', ({epoch} / {seconds}) * {seconds}, 'unixepoch')"


def _micros(moment: str) -> str:
    """A stored time (``demo_sql.iso``: fixed width, microseconds) as whole microseconds since 1970, in SQL."""
    # unixepoch (SQLite 3.38) over strftime('%s'): 18% less CPU on 300,000 rows (0.55 s against 0.67).
    return f"(unixepoch(substr({moment}, 1, 19)) * 1000000 + CAST(substr({moment}, 21, 6) AS INTEGER))"


def _us(span: timedelta) -> int:
    return span // timedelta(microseconds=1)


def _key(column: Column) -> str:
    """A join or baseline key as both sides compare it (KQL's ``tolower(tostring(x))``): text in the very form its
    index holds when the demo indexes it (an entity or hot column), so matching a set of keys reads the index."""
    return f"kql_lower({_key_text(column)})"


def _key_text(column: Column) -> str:
    return _text(column) if column.type in STRING_TYPES else f"CAST(({expression(column)}) AS TEXT)"


def _rows(table: str, columns: list[str], where: list[str]) -> str:
    return f"SELECT {', '.join(columns)} FROM {_quote(table)} WHERE {' AND '.join(where)}"


def _window(start: datetime, end: datetime, params: list[Any]) -> list[str]:
    params += [iso(start), iso(end)]
    return [f"{_quote(TIME_COLUMN)} > ?", f"{_quote(TIME_COLUMN)} <= ?"]


def _right(hunt: Hunt, now: datetime, params: list[Any]) -> str:
    """The join's right rows, computed once (``r``): their key and the columns they bring."""
    join = hunt.join
    assert join is not None
    key = _key(join.right)
    where = _window(now - join.window, now, params)
    where += [condition(c, params) for c in join.filters] + [f"{key} <> ''"]
    columns = [f"{key} AS JoinKey", *(f"{expression(c)} AS {_quote(n)}" for n, c in join.columns)]
    if join.within:
        columns.append(f"{_micros(_quote(TIME_COLUMN))} AS JoinTime")
    step = f"r AS MATERIALIZED ({_rows(join.table, columns, where)})"
    if join.kind not in BRING_KINDS:
        return step
    # Each key's right rows as one JSON array, made once (an inner join expands it beside each left row of the key).
    values = ", ".join([*(_quote(n) for n, _ in join.columns), *(["JoinTime"] if join.within else [])])
    return f"{step}, rg AS MATERIALIZED (SELECT JoinKey, json_group_array(json_array({values})) AS m FROM r " \
           f"GROUP BY JoinKey)"


def _left(hunt: Hunt, now: datetime, params: list[Any]) -> str:
    """The hunt's own rows: its window (the demo holds rows generated ahead of its clock; the service has none),
    its conditions, its baseline, the keys its join keeps or drops; each column it reads under its own name."""
    used = {c.name: c for c in hunt.used} | {TIME_COLUMN: tables()[hunt.table].columns[TIME_COLUMN]}
    where = _window(now - hunt.window, now, params)
    where += [condition(c, params) for c in hunt.filters]
    if hunt.baseline:
        keys = hunt.baseline.keys
        before = now - hunt.window - timedelta(days=hunt.baseline.days)
        prior_where = _window(before, now - hunt.window, params)
        prior_where += [condition(c, params) for c in hunt.filters]
        prior = _rows(hunt.table, [_key(c) for c in keys], prior_where)
        where.append(f"({', '.join(_key(c) for c in keys)}) NOT IN ({prior})")
    columns = [f"{expression(c)} AS {_quote(c.name)}" for c in used.values()]
    if hunt.join:
        # The right keys as a set SQLite indexes: an inner or semi join reads only the left rows with a match
        # (through the key's own index when the demo has one: an entity or hot column), an anti join drops them.
        key = _key(hunt.join.left)
        if hunt.join.kind != "leftouter":  # a leftouter join keeps every left row
            where.append(f"{key} {'NOT IN' if hunt.join.kind == 'leftanti' else 'IN'} (SELECT JoinKey FROM r)")
        columns.append(f"{folded(_key_text(hunt.join.left))} AS JoinKey")  # the key's value, without a call a row
    return _rows(hunt.table, columns, where)


def _joined(hunt: Hunt) -> str:
    """The rows after the join: those ``l`` kept (semi, anti), or each with the right columns of every right row of
    its key (inner: its key's JSON array of right rows, ``rg``, looked up through an index SQLite builds, expanded
    into a row per match. Measured at 10x, sign-ins x 30 days of TI: a plain join of the two steps scanned every
    pair, 330 ms at 1x; each right row looking its left rows up by their index read each left row once per match,
    64 ms; the array aggregated per left row, 49 ms; made once per key, 39 ms)."""
    join = hunt.join
    assert join is not None
    if join.kind not in BRING_KINDS:
        return "SELECT * FROM l"
    matches = "(SELECT m FROM rg WHERE rg.JoinKey = l.JoinKey)"
    outer = join.kind == "leftouter"
    brought = "".join(f", {_brought(c, i, outer)} AS {_quote(n)}" for i, (n, c) in enumerate(join.columns))
    if outer:  # a left row without a match once, its right columns empty (text) or null
        return f"SELECT l.*{brought} FROM l LEFT JOIN json_each({matches}) AS j"
    near = ""
    if join.within:  # the right row's time (after its columns in the array) within the span of the left row's
        apart = f"json_extract(j.value, '$[{len(join.columns)}]') - {_micros('l.' + _quote(TIME_COLUMN))}"
        low, high = {"either": (-_us(join.within), _us(join.within)), "after": (0, _us(join.within)),
                     "before": (-_us(join.within), 0)}[join.direction]
        near = f" WHERE {apart} BETWEEN {low} AND {high}"
    return f"SELECT l.*{brought} FROM l, json_each({matches}) AS j{near}"


def _brought(column: Column, index: int, outer: bool) -> str:
    """A right column from its row's JSON array; under a leftouter join, text is "" where no row matched (Kusto's
    strings are never null)."""
    value = f"json_extract(j.value, '$[{index}]')"
    return f"coalesce({value}, '')" if outer and column.type in STRING_TYPES else value


def _aggregate(a: Aggregate, params: list[Any]) -> str:
    if a.fn == "count":
        return "COUNT(*)"
    if a.fn == "countif":
        assert a.condition is not None
        return f"COALESCE(SUM(CASE WHEN {condition(a.condition, params, Ref(plain=True))} THEN 1 ELSE 0 END), 0)"
    assert a.column is not None
    name = _quote(a.column.name)
    if a.fn == "dcount":
        return f"COUNT(DISTINCT {name})"
    if a.fn == "percentile":
        return f"kql_percentile({name}, {int(a.level)})"
    if a.fn == "make_set":
        return f"kql_make_set({name})"
    if a.fn in ("arg_max", "arg_min"):
        return f"kql_{a.fn}({', '.join(_quote(c.name) for c in (a.column, *a.extra))})"
    return f"{a.fn.upper()}({name})"


def _sessions(hunt: Hunt) -> list[str]:
    """``s1``: each row's gap to the row before it of its key (by time); ``s2``: its session's number within its key
    (a running count of the gaps longer than the hunt's, the first row's included), as ``row_window_session``."""
    assert hunt.session is not None
    keys = ", ".join(_quote(c.name) for c in hunt.by)
    window = f"{'PARTITION BY ' + keys + ' ' if keys else ''}ORDER BY {_quote(TIME_COLUMN)}"
    moment = _micros(_quote(TIME_COLUMN))
    first = f"s1 AS (SELECT *, {moment} - LAG({moment}) OVER ({window}) AS SessionGap FROM src)"
    started = f"CASE WHEN SessionGap IS NULL OR SessionGap > {_us(hunt.session)} THEN 1 ELSE 0 END"
    return [first, f"s2 AS (SELECT *, SUM({started}) OVER ({window} ROWS UNBOUNDED PRECEDING) AS SessionNo FROM s1)"]


def _summarized(hunt: Hunt, params: list[Any]) -> tuple[str, str]:
    """(the grouped step, the step that names its results), over ``src`` (over ``s2`` by sessions)."""
    keys = [f"{_quote(c.name)} AS {_quote(c.name)}" for c in hunt.by]
    if hunt.bin:
        keys.append(f"{_bin(hunt.bin)} AS {_quote(TIME_COLUMN)}")
    aggregates = [f"{_aggregate(a, params)} AS {_quote(f'agg{n}')}" for n, a in enumerate(hunt.aggregates)]
    grouping = [str(n + 1) for n in range(len(keys))]
    source, named = "src", [_quote(c.name) for c in hunt.by] + ([_quote(TIME_COLUMN)] if hunt.bin else [])
    if hunt.session:
        time = _quote(TIME_COLUMN)
        source, grouping = "s2", [*grouping, "SessionNo"]
        aggregates = [f"MIN({time}) AS SessionStart", f"MAX({time}) AS SessionEnd", *aggregates]
        named += ["SessionStart", "SessionEnd"]
    group = f" GROUP BY {', '.join(grouping)}" if grouping else ""
    grouped = f"SELECT {', '.join(keys + aggregates)} FROM {source}{group}"
    for n, a in enumerate(hunt.aggregates):
        if a.fn in ("arg_max", "arg_min"):
            named += [f"json_extract({_quote(f'agg{n}')}, '$[{i}]') AS {_quote(name)}"
                      for i, (name, _) in enumerate(a.outputs)]
        else:
            named.append(f"{_quote(f'agg{n}')} AS {_quote(a.name)}")
    return grouped, f"SELECT {', '.join(named)} FROM g"


def _series_points(hunt: Hunt, now: datetime, params: list[Any]) -> str:
    """Each key's aggregate at each point of the series that has rows (``SeriesPoint``: from the window's start,
    ``step`` apart; a row at the window's very end falls past the last point, as ``to now()`` excludes it)."""
    assert hunt.series is not None
    start = _us(now - hunt.window - datetime(1970, 1, 1, tzinfo=UTC))
    point = f"(({_micros(_quote(TIME_COLUMN))} - {start}) / {_us(hunt.series.span)})"
    keys = [_quote(c.name) for c in hunt.by]
    aggregate = _aggregate(hunt.aggregates[0], params)
    grouping = ", ".join([*(str(n + 1) for n in range(len(keys))), "SeriesPoint"])
    # The point past the last (a row at the window's very end) is left out by ``_anomalies``: a WHERE here would
    # compute every row's point twice.
    return f"SELECT {', '.join([*keys, f'{point} AS SeriesPoint', f'{aggregate} AS SeriesValue'])} FROM src " \
           f"GROUP BY {grouping}"


def hunt_sql(hunt: Hunt, now: datetime) -> tuple[str, list[Any]]:
    """The SELECT and its parameters; its columns are the hunt's output, then TotalMatched (a series hunt's: each
    key's value at each point with rows, which ``run`` makes into series)."""
    params: list[Any] = []
    steps = [_right(hunt, now, params)] if hunt.join else []  # before l, which reads its keys
    steps.append(f"l AS ({_left(hunt, now, params)})")
    steps.append(f"src AS ({_joined(hunt)})" if hunt.join else "src AS (SELECT * FROM l)")
    if hunt.series:
        return f"WITH {', '.join(steps)} {_series_points(hunt, now, params)}", params
    if hunt.session:
        steps += _sessions(hunt)
    where = ""
    if hunt.summarized:
        grouped, named = _summarized(hunt, params)
        steps += [f"g AS ({grouped})", f"out AS ({named})"]
        if hunt.having:
            where = " WHERE " + " AND ".join(condition(c, params, Ref(plain=True)) for c in hunt.having)
    else:
        steps.append(f"out AS (SELECT {', '.join(_quote(c.name) for c in hunt.columns)} FROM src)")
    order = ", ".join(f"{_quote(name)} {'DESC' if descending else 'ASC'}" for name, descending in hunt.order)
    sql = (f"WITH {', '.join(steps)} SELECT *, COUNT(*) OVER () AS TotalMatched FROM out{where} "
           f"ORDER BY {order} LIMIT {int(hunt.take)}")
    return sql, params


def run(hunt: Hunt, conn: sqlite3.Connection, now: datetime) -> list[dict[str, Any]]:
    """The hunt's rows as the service returns them: ``{"Row": {...}, "TotalMatched": n}``."""
    _functions(conn, hunt)
    sql, params = hunt_sql(hunt, now)
    if hunt.series:
        return _anomalies(hunt, conn.execute(sql, params).fetchall(), now)
    types = dict(hunt.output)
    out = []
    for row in conn.execute(sql, params).fetchall():
        values = {name: _served(row[name], types[name]) for name, _ in hunt.output}
        out.append({"Row": values, "TotalMatched": row["TotalMatched"]})
    return out


def _anomalies(hunt: Hunt, points: list[sqlite3.Row], now: datetime) -> list[dict[str, Any]]:
    """The series (zeros where no row fell), the ``MAX_SERIES`` with the highest totals (then by key), decomposed;
    their anomalous points as rows, sorted and taken as the KQL's are."""
    series = hunt.series
    assert series is not None
    names = [c.name for c in hunt.by]
    found: dict[tuple[Any, ...], list[Any]] = {}
    for row in points:
        if row["SeriesPoint"] < series.points:
            found.setdefault(tuple(row[n] for n in names), [0] * series.points)[row["SeriesPoint"]] = \
                row["SeriesValue"] or 0
    ranked = sorted(found.items(), key=lambda item: (-sum(item[1]), [_ascending(v) for v in item[0]]))
    start, value_name = now - hunt.window, hunt.aggregates[0].outputs[0][0]
    rows = []
    for key, values in ranked[:MAX_SERIES]:
        found_anomalies = decompose_anomalies(values, ANOMALY_THRESHOLD, series.period)
        for i, flag in enumerate(found_anomalies.flags):
            if flag:
                rows.append(dict(zip(names, key, strict=True)) | {
                    TIME_COLUMN: iso(start + i * series.span), value_name: values[i],
                    "Baseline": found_anomalies.baseline[i], "Score": found_anomalies.scores[i], "Anomaly": flag})
    for name, descending in reversed(hunt.order):  # stable sorts, the last key first; null is the smallest
        rows.sort(key=partial(_ascending_in, name), reverse=descending)
    return [{"Row": r, "TotalMatched": len(rows)} for r in rows[:hunt.take]]


def _ascending(value: Any) -> tuple[bool, Any]:
    return value is not None, value if value is not None else 0


def _ascending_in(name: str, row: dict[str, Any]) -> tuple[bool, Any]:
    return _ascending(row[name])


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
