"""A hunt's KQL, built from the typed ``Hunt`` (never from argument text).

Table and column names come from the catalog (the allow-list), operators from a fixed table, and every value
through ``bot.sentinel.kql``'s literal helpers, so no value can end its literal or add an operator. The steps, in
order: the window, the virtual and computed columns, the conditions, the baseline (a ``leftanti`` join with the same
rows of the days before), the join (the second table's rows on a lower-cased key, then its time proximity), then
``summarize`` (by a bin, or by sessions: ``row_window_session`` over the rows sorted by key and time) and
``having``, or ``make-series`` and ``series_decompose_anomalies`` (the anomalous points, ``mv-expand``-ed), or
``project``. The result is one row per hunt row: ``Row``, a property bag of the hunt's columns (their number and
names vary by hunt, the response contract does not), and ``TotalMatched``, the rows before ``take``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from bot.sentinel import kql
from bot.sentinel.hunt.catalog import NUMBER_TYPES, STRING_TYPES, TIME_COLUMN, Column, Computed
from bot.sentinel.hunt.computed import URL_PARTS, eventdata_pattern
from bot.sentinel.hunt.conditions import LIST_OPS, Condition, Filter, Group, leaves
from bot.sentinel.hunt.model import ANOMALY_THRESHOLD, BINS, MAX_SERIES, MAX_SET, Aggregate, Hunt, Value, span_text

_CAST = {"string": "tostring", "guid": "tostring", "int": "toint", "long": "tolong", "real": "toreal",
         "decimal": "todecimal", "bool": "tobool", "datetime": "todatetime", "dynamic": ""}
_TEXT_OPS = {"==": "=~", "!=": "!~", "in": "in~", "!in": "!in~"}


def virtual_expression(column: Column) -> str:
    """The KQL that computes a virtual column from its source (an alias is the source itself), or a computed one."""
    if column.computed is not None:
        return computed_expression(column.computed)
    if not column.path:
        return column.source
    source = f"parse_json({column.source})" if column.source_is_text else column.source
    access = "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in column.path)
    return f"{_CAST[column.type]}({source}{access})"


def computed_expression(computed: Computed) -> str:
    """A computed column's KQL (``computed.py``): its source read as text, every argument one literal."""
    of = computed.of
    source = virtual_expression(of) if of.virtual else of.name
    fn, args = computed.fn, computed.args
    if fn == "json":
        base = source if of.type == "dynamic" else f"parse_json({source})"
        steps = "".join(f"[{kql.long_literal(a)}]" if isinstance(a, int) else f"[{kql.string_literal(a)}]"
                        for a in args)
        return f"tostring({base}{steps})"
    if fn in ("extract", "eventdata"):
        pattern, group = (str(args[0]), int(args[1])) if fn == "extract" else (eventdata_pattern(str(args[0])), 1)
        return f"extract({kql.string_literal(pattern)}, {kql.long_literal(group)}, {source})"
    if fn == "split":
        return f"tostring(split({source}, {kql.string_literal(str(args[0]))})[{kql.long_literal(int(args[1]))}])"
    if fn == "substring":
        return f"substring({source}, {kql.long_literal(int(args[0]))}, {kql.long_literal(int(args[1]))})"
    if fn == "tolower":
        return f"tolower({source})"
    return f"tostring(parse_url({source}).{_URL_PART[str(args[0])]})"


_URL_PART = {part: part for part in URL_PARTS}  # the part names are parse_url's own keys (a fixed set)


def literal(column: Column, value: Value) -> str:
    if isinstance(value, bool):
        return kql.bool_literal(value)
    if isinstance(value, datetime):
        return kql.moment(value)
    if column.type in ("int", "long") and isinstance(value, int):
        return kql.long_literal(value)
    if column.type in NUMBER_TYPES:
        return kql.real_literal(float(value))
    return kql.string_literal(str(value))


def condition(c: Condition) -> str:
    """One condition as a KQL predicate (a group in parentheses)."""
    if isinstance(c, Group):
        if c.kind == "not":
            return f"not({condition(c.items[0])})"
        joined = f" {'and' if c.kind == 'all' else 'or'} ".join(condition(item) for item in c.items)
        return f"({joined})"
    return _leaf(c)


def _leaf(f: Filter) -> str:
    text = f.column.type in STRING_TYPES or f.column.type == "dynamic"
    name = f"tostring({f.column.name})" if f.column.type == "dynamic" else f.column.name
    if f.op in ("isempty", "isnotempty"):
        return f"{f.op}({name})" if text else f"{f.op.replace('empty', 'null')}({name})"
    if f.other is not None:  # a having's two results: A op factor * B
        return f"{name} {f.op} {kql.real_literal(float(str(f.values[0])))} * {f.other.name}"
    values = [literal(f.column, v) for v in f.values]
    if f.op in ("between", "!between"):
        return f"{name} {f.op} ({values[0]} .. {values[1]})"
    op = _TEXT_OPS.get(f.op, f.op) if text else f.op
    if f.op in LIST_OPS:
        return f"{name} {op} ({', '.join(values)})"
    return f"{name} {op} {values[0]}"


def key_expression(column: Column, name: str | None = None) -> str:
    """A join or baseline key as both sides compare it: text in lower case."""
    return f"tolower(tostring({name or column.name}))"


def _source(table: str, window: str, conditions: tuple[Condition, ...], extra: tuple[Column, ...] = ()) -> list[str]:
    """A table's rows in a window, its virtual columns computed, its conditions applied."""
    used = {f.column.name: f.column for f in leaves(conditions)} | {c.name: c for c in extra}
    virtual = [c for c in used.values() if c.virtual]
    lines = [table, f"| where {window}"]
    if virtual:
        lines.append("| extend " + ", ".join(f"{c.name} = {virtual_expression(c)}" for c in virtual))
    lines += [f"| where {condition(c)}" for c in conditions]
    return lines


def _ago(span: timedelta) -> str:
    return f"ago({kql.timespan_literal(span)})"


def _baseline(hunt: Hunt) -> list[str]:
    assert hunt.baseline is not None
    keys = hunt.baseline.keys
    names = [f"BaselineKey{n}" for n in range(len(keys))]
    before = hunt.window + timedelta(days=hunt.baseline.days)
    window = f"{TIME_COLUMN} > {_ago(before)} and {TIME_COLUMN} <= {_ago(hunt.window)}"
    prior = _source(hunt.table, window, hunt.filters, keys)
    prior.append("| project " + ", ".join(f"{n} = {key_expression(c)}" for n, c in zip(names, keys, strict=True)))
    return ["| extend " + ", ".join(f"{n} = {key_expression(c)}" for n, c in zip(names, keys, strict=True)),
            f"| join kind=leftanti ({' '.join(prior)}) on {', '.join(names)}",
            "| project-away BaselineKey*"]


def _join(hunt: Hunt) -> list[str]:
    join = hunt.join
    assert join is not None
    columns = tuple(c for _, c in join.columns)
    side = _source(join.table, f"{TIME_COLUMN} > {_ago(join.window)}", join.filters, (join.right, *columns))
    shown = [f"{name} = {c.name}" if name != c.name else c.name for name, c in join.columns]
    when = [f"JoinKeyTime = {TIME_COLUMN}"] if join.within else []
    side.append("| project " + ", ".join([f"JoinKey = {key_expression(join.right)}", *when, *shown]))
    side.append("| where isnotempty(JoinKey)")
    lines = [f"| extend JoinKey = {key_expression(join.left)}",
             f"| join kind={join.kind} ({' '.join(side)}) on JoinKey"]
    if join.within:
        span = kql.timespan_literal(join.within)
        low = TIME_COLUMN if join.direction == "after" else f"({TIME_COLUMN} - {span})"
        high = TIME_COLUMN if join.direction == "before" else f"({TIME_COLUMN} + {span})"
        lines.append(f"| where JoinKeyTime between ({low} .. {high})")
    return [*lines, "| project-away JoinKey*"]


def _sessions(hunt: Hunt, aggregates: str) -> list[str]:
    """Each key's rows in time order, a session starting after a gap longer than the hunt's (or at a new key)."""
    assert hunt.session is not None
    keys = [c.name for c in hunt.by]
    restart = " or ".join(f"{k} != prev({k})" for k in keys)
    spans = f"{kql.timespan_literal(hunt.window)}, {kql.timespan_literal(hunt.session)}"
    return [f"| sort by {', '.join(f'{k} asc' for k in (*keys, TIME_COLUMN))}",
            f"| extend SessionStart = row_window_session({TIME_COLUMN}, {spans}{', ' + restart if restart else ''})",
            f"| summarize SessionEnd = max({TIME_COLUMN}), {aggregates} by {', '.join([*keys, 'SessionStart'])}"]


def _series(hunt: Hunt) -> list[str]:
    """One series per key (the ``MAX_SERIES`` with the highest totals), decomposed; its anomalous points."""
    series = hunt.series
    assert series is not None
    [aggregate] = hunt.aggregates
    keys = [c.name for c in hunt.by]
    name, kind = aggregate.outputs[0]
    lines = [f"| make-series {_aggregate(aggregate)} default=0 on {TIME_COLUMN} from {_ago(hunt.window)} to now() "
             f"step {kql.timespan_literal(series.span)}" + (f" by {', '.join(keys)}" if keys else "")]
    if keys:
        lines += [f"| extend SeriesTotal = array_sum({name})",
                  f"| sort by SeriesTotal desc, {', '.join(f'{k} asc' for k in keys)}",
                  f"| take {MAX_SERIES}"]
    decompose = f"series_decompose_anomalies({name}, {kql.real_literal(ANOMALY_THRESHOLD)}, " \
                f"{kql.long_literal(series.period)}, {kql.string_literal('linefit')})"
    lines += [f"| extend (Anomaly, Score, Baseline) = {decompose}",
              f"| mv-expand {TIME_COLUMN} to typeof(datetime), {name} to typeof({kind}), Anomaly to typeof(long), "
              "Score to typeof(real), Baseline to typeof(real)",
              "| where Anomaly != 0",
              "| project " + ", ".join(n for n, _ in hunt.output)]
    return lines


def _aggregate(a: Aggregate) -> str:
    if a.fn == "count":
        return f"{a.name} = count()"
    if a.fn == "countif":
        assert a.condition is not None
        return f"{a.name} = countif({condition(a.condition)})"
    assert a.column is not None
    if a.fn == "percentile":
        return f"{a.name} = percentile({a.column.name}, {int(a.level)})"
    if a.fn == "make_set":
        return f"{a.name} = make_set({a.column.name}, {MAX_SET})"
    if a.fn in ("arg_max", "arg_min"):
        names = ", ".join(name for name, _ in a.outputs)
        return f"({names}) = {a.fn}({a.column.name}, {', '.join(c.name for c in a.extra)})"
    return f"{a.name} = {a.fn}({a.column.name})"


def hunt_kql(hunt: Hunt) -> str:
    lines = _source(hunt.table, f"{TIME_COLUMN} > {_ago(hunt.window)}", hunt.filters, hunt.used)
    if hunt.baseline:
        lines += _baseline(hunt)
    if hunt.join:
        lines += _join(hunt)
    if hunt.series:
        lines += _series(hunt)
    elif hunt.session:
        lines += _sessions(hunt, ", ".join(_aggregate(a) for a in hunt.aggregates))
        lines += [f"| where {condition(c)}" for c in hunt.having]
    elif hunt.summarized:
        keys = [c.name for c in hunt.by]
        if hunt.bin:
            keys.append(f"{TIME_COLUMN} = bin({TIME_COLUMN}, {kql.timespan_literal(BINS[hunt.bin])})")
        aggregates = ", ".join(_aggregate(a) for a in hunt.aggregates)
        lines.append(f"| summarize {aggregates}" + (f" by {', '.join(keys)}" if keys else ""))
        lines += [f"| where {condition(c)}" for c in hunt.having]
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
