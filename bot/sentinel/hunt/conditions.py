"""A hunt's conditions as typed data: leaves ``[column, op, value]`` and AND/OR/NOT groups of them.

``where`` is a list of conditions that all hold; a condition is a leaf, ``{"any": [...]}`` (one of them holds),
``{"all": [...]}`` or ``{"not": condition}``. The operators a leaf takes depend on its column's Kusto type
(``operators_for``); values are typed here (text, whole numbers, finite reals, bools, aware datetimes), one value
per literal later. The bounds keep every query small and every demo evaluation fast: at most ``MAX_CONDITIONS``
leaves in a hunt, groups nested ``MAX_DEPTH`` deep, ``MAX_IN_VALUES`` values in a list, and a ``matches regex``
pattern short and free of the shapes that make a backtracking engine (the demo's Python ``re``) take exponential
time; Kusto's own engine (RE2) has no backreferences or lookarounds, so those are refused as well.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeGuard

from bot.sentinel.hunt.catalog import NUMBER_TYPES, STRING_TYPES, Column
from bot.sentinel.kql import as_written
from bot.sentinel.params import InvalidParameter, parse_moment

# The standard library's regular-expression parser (a private module since 3.11, its public alias deprecated).
sre_parse: Any = importlib.import_module("re._parser")
sre_constants: Any = importlib.import_module("re._constants")

MAX_CONDITIONS = 32  # leaves in one hunt, its join, its aggregates' and its having's conditions together
MAX_DEPTH = 4  # groups inside groups
MAX_IN_VALUES = 64
MAX_VALUE_CHARS = 512  # longer filter text is refused: no indicator or name is that long
MAX_REGEX_CHARS = 256

_TEXT_OPS = ("==", "!=", "has", "!has", "contains", "!contains", "startswith", "!startswith", "endswith",
             "!endswith", "in", "!in", "has_any", "matches regex", "isempty", "isnotempty")
_NUMBER_OPS = ("==", "!=", ">", ">=", "<", "<=", "between", "!between", "in", "!in", "isempty", "isnotempty")
_TIME_OPS = (">", ">=", "<", "<=", "between", "!between", "isempty", "isnotempty")
_DYNAMIC_OPS = ("has", "!has", "contains", "!contains", "has_any", "isempty", "isnotempty")
OPERATORS = tuple(dict.fromkeys(_TEXT_OPS + _NUMBER_OPS + _TIME_OPS))
LIST_OPS = frozenset({"in", "!in", "has_any"})
RANGE_OPS = frozenset({"between", "!between"})
NO_VALUE_OPS = frozenset({"isempty", "isnotempty"})


def operators_for(kind: str) -> tuple[str, ...]:
    """The operators a column of this Kusto type takes (text compares ignoring letter case, as analysts mean it)."""
    if kind in STRING_TYPES:
        return _TEXT_OPS
    if kind in NUMBER_TYPES:
        return _NUMBER_OPS
    if kind == "datetime":
        return _TIME_OPS
    if kind == "bool":
        return ("==", "!=")
    if kind == "dynamic":
        return _DYNAMIC_OPS  # on its JSON text
    return ()


Value = str | int | float | bool | datetime


@dataclass(frozen=True)
class Filter:
    """A leaf: one column, one operator, its values (one; two for between; a list for in and has_any; none for
    isempty)."""

    column: Column
    op: str
    values: tuple[Value, ...]
    other: Column | None = None  # compared with this column times values[0] (a having's two aggregates)


@dataclass(frozen=True)
class Group:
    """``all`` (AND), ``any`` (OR) or ``not`` (one item) of conditions."""

    kind: str
    items: tuple[Condition, ...]


Condition = Filter | Group
Resolve = Callable[[object, str], Column]  # (name, argument) -> the column, or InvalidParameter listing them


class Budget:
    """How many more leaves a hunt may hold (one budget across its where, join, countif and having)."""

    def __init__(self, leaves: int = MAX_CONDITIONS) -> None:
        self.leaves = leaves

    def take(self, what: str) -> None:
        self.leaves -= 1
        if self.leaves < 0:
            raise InvalidParameter(what, f"at most {MAX_CONDITIONS} conditions in one hunt; use has_any or in for "
                                         f"a list of values, or split the hunt")


def leaves(conditions: Sequence[Condition]) -> tuple[Filter, ...]:
    """Every leaf, in order."""
    out: list[Filter] = []
    for c in conditions:
        out.extend((c,) if isinstance(c, Filter) else leaves(c.items))
    return tuple(out)


def parse_conditions(raw: object, resolve: Resolve, budget: Budget, what: str = "where", compare: bool = False
                     ) -> tuple[Condition, ...]:
    """A list of conditions that all hold (``where``); a lone leaf or group is read as a list of one. With
    ``compare`` (a having), a number column compares with another times a factor: ``[A, ">", {"column": B,
    "times": 3}]``."""
    if raw is None or raw == "":
        return ()
    if isinstance(raw, Mapping) or (_is_list(raw) and raw and not _is_list(raw[0]) and not isinstance(raw[0], Mapping)):
        raw = [raw]  # one condition, not a list of them
    if not _is_list(raw):
        raise InvalidParameter(what, f"a list of conditions, e.g. [[\"IPAddress\", \"==\", \"203.0.113.7\"]]; got "
                                     f"{quoted(raw)}")
    return tuple(parse_condition(item, resolve, budget, what, 1, compare) for item in raw)


def parse_condition(raw: object, resolve: Resolve, budget: Budget, what: str, depth: int, compare: bool = False
                    ) -> Condition:
    if isinstance(raw, Mapping):
        return _group(raw, resolve, budget, what, depth, compare)
    return _leaf(raw, resolve, budget, what, compare)


def _group(raw: Mapping[Any, Any], resolve: Resolve, budget: Budget, what: str, depth: int, compare: bool
           ) -> Condition:
    kinds = [k for k in ("any", "all", "not") if k in raw]
    if len(kinds) != 1 or len(raw) != 1:
        if {"column", "op"} & set(raw):  # {"column": .., "op": .., "value": ..} is a leaf too
            return _leaf([raw.get("column"), raw.get("op") or raw.get("operator"), raw.get("value")], resolve,
                         budget, what, compare)
        raise InvalidParameter(what, f"a group is {{\"any\": [conditions]}}, {{\"all\": [conditions]}} or "
                                     f"{{\"not\": condition}}; got {quoted(raw)}")
    if depth > MAX_DEPTH:
        raise InvalidParameter(what, f"groups nest at most {MAX_DEPTH} deep; flatten the conditions (an any of "
                                     f"values of one column is one has_any or in)")
    kind = kinds[0]
    items = raw[kind]
    if kind == "not":
        return Group("not", (parse_condition(items, resolve, budget, what, depth + 1, compare),))
    if not _is_list(items) or not items:
        raise InvalidParameter(what, f"\"{kind}\" takes a non-empty list of conditions; got {quoted(items)}")
    if len(items) > MAX_CONDITIONS:
        raise InvalidParameter(what, f"at most {MAX_CONDITIONS} conditions in one hunt")
    return Group(kind, tuple(parse_condition(item, resolve, budget, what, depth + 1, compare) for item in items))


def _leaf(raw: object, resolve: Resolve, budget: Budget, what: str, compare: bool = False) -> Filter:
    if not _is_list(raw) or not 2 <= len(raw) <= 3:
        raise InvalidParameter(what, f"each condition is [column, operator, value], e.g. [\"IPAddress\", \"==\", "
                                     f"\"203.0.113.7\"], or a group {{\"any\": [...]}}; got {quoted(raw)}")
    budget.take(what)
    name, op, value = (*raw, None)[:3]
    column = resolve(name, what)
    op = op.strip().lower() if isinstance(op, str) else op
    op = {"=~": "==", "!~": "!=", "in~": "in", "!in~": "!in", "matches": "matches regex"}.get(str(op), op)
    allowed = operators_for(column.type)
    if op not in allowed:
        raise InvalidParameter(what, f"{quoted(raw[1])} does not apply to {column.name} ({column.type}); its "
                                     f"operators are: {' '.join(allowed) or 'none'}")
    if len(raw) == 2 and op not in NO_VALUE_OPS:
        raise InvalidParameter(what, f"{op} on {column.name} needs a value: [column, operator, value]")
    if op in NO_VALUE_OPS:
        return Filter(column, op, ())
    if isinstance(value, Mapping):
        if not compare:
            raise InvalidParameter(what, f"{column.name}: a value is text, a number, a time or a list; comparing two "
                                         f"columns is for having's results")
        return _compared(column, op, value, resolve, what)
    if op in RANGE_OPS:
        return _range(column, op, value, what)
    if op in LIST_OPS:
        items = value if _is_list(value) else [value]
        if not 1 <= len(items) <= MAX_IN_VALUES:
            raise InvalidParameter(what, f"{op} takes 1 to {MAX_IN_VALUES} values for {column.name}")
        return Filter(column, op, tuple(typed(column, v, what) for v in items))
    typed_value = _typed_or_column_hint(column, op, value, resolve, what, compare)
    if op == "matches regex":
        check_regex(str(typed_value), what)
    return Filter(column, op, (typed_value,))


def _typed_or_column_hint(column: Column, op: str, value: object, resolve: Resolve, what: str,
                          compare: bool) -> Value:
    """The value typed; where it is not of the column's type but names another result column ("max_TimeGenerated",
    ">", "min_TimeGenerated"), the refusal says how two results are compared, or that these two cannot be."""
    try:
        return typed(column, value, what)
    except InvalidParameter:
        other = _named_column(value, resolve, what) if compare else None
        if other is None:
            raise
        if {column.type, other.type} <= NUMBER_TYPES:
            raise InvalidParameter(what, f"to compare {column.name} with {other.name}, write [\"{column.name}\", "
                                         f"\"{op}\", {{\"column\": \"{other.name}\", \"times\": 1}}]") from None
        raise InvalidParameter(what, f"{column.name} ({column.type}) and {other.name} ({other.type}): two results "
                                     f"are compared only as numbers; compare {column.name} with a value") from None


def _named_column(value: object, resolve: Resolve, what: str) -> Column | None:
    if not isinstance(value, str) or len(value) > 200:
        return None
    try:
        return resolve(value, what)
    except InvalidParameter:
        return None


COMPARE_OPS = ("==", "!=", ">", ">=", "<", "<=")
MAX_FACTOR = 1_000_000.0


def _compared(column: Column, op: str, value: Mapping[Any, Any], resolve: Resolve, what: str) -> Filter:
    """``[A, op, {"column": B, "times": f}]``: A op f * B, two number columns, f a finite factor (1 if absent)."""
    if set(value) - {"column", "times"} or "column" not in value:
        raise InvalidParameter(what, f"compare two results as [\"Failures\", \">\", {{\"column\": \"Successes\", "
                                     f"\"times\": 3}}]; got {quoted(value)}")
    other = resolve(value["column"], what)
    times = value.get("times", 1)
    factor = None if isinstance(times, bool) or not isinstance(times, (int, float)) else float(times)
    if factor is None or not math.isfinite(factor) or not 0 < abs(factor) <= MAX_FACTOR:
        raise InvalidParameter(what, f"times is a number, not 0, at most {MAX_FACTOR:,.0f} either way; got "
                                     f"{quoted(times)}")
    if op not in COMPARE_OPS or column.type not in NUMBER_TYPES or other.type not in NUMBER_TYPES:
        raise InvalidParameter(what, f"two results compare with {' '.join(COMPARE_OPS)}, both numbers; "
                                     f"{column.name} is {column.type}, {other.name} {other.type}")
    return Filter(column, op, (factor,), other)


def _range(column: Column, op: str, value: object, what: str) -> Filter:
    if not _is_list(value) or len(value) != 2:
        raise InvalidParameter(what, f"{op} takes [low, high] for {column.name}")
    low, high = (typed(column, v, what) for v in value)
    if low > high:  # type: ignore[operator]
        raise InvalidParameter(what, f"{op} on {column.name}: low is above high")
    return Filter(column, op, (low, high))


def check_regex(pattern: str, what: str = "where") -> None:
    """Refuses a pattern that is long, invalid, uses what RE2 lacks, or repeats a repeat (exponential backtracking)."""
    if len(pattern) > MAX_REGEX_CHARS:
        raise InvalidParameter(what, f"a regular expression is at most {MAX_REGEX_CHARS} characters")
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as error:
        raise InvalidParameter(what, f"not a valid regular expression ({error}); or use contains, has or "
                                     f"startswith") from None
    problem = _regex_problem(list(parsed), inside_repeat=False)
    if problem:
        raise InvalidParameter(what, f"{problem}; write a simpler pattern, or use has_any, contains or startswith")


_REPEATS = {sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, getattr(sre_constants, "POSSESSIVE_REPEAT", None)}
_UNSUPPORTED = {sre_constants.GROUPREF, sre_constants.GROUPREF_EXISTS, sre_constants.ASSERT,
                sre_constants.ASSERT_NOT}


def _regex_problem(items: list[Any], inside_repeat: bool) -> str:
    for op, arg in items:
        if op in _UNSUPPORTED:
            return "backreferences and lookarounds are not in Kusto's regular expressions (RE2)"
        if op in _REPEATS:
            _low, high, sub = arg
            if high != sre_constants.MAXREPEAT and high > 1000:
                return "a repeat count is at most 1000"
            if inside_repeat:
                return "a repeat inside a repeat (like (a+)+) can take exponential time"
            problem = _regex_problem(list(sub), inside_repeat=high > 1)
        elif op == sre_constants.SUBPATTERN:
            problem = _regex_problem(list(arg[-1]), inside_repeat)
        elif op == sre_constants.BRANCH:
            if inside_repeat:
                return "an alternation inside a repeat (like (a|ab)+) can take exponential time"
            problem = next((p for branch in arg[1] if (p := _regex_problem(list(branch), False))), "")
        else:
            problem = ""
        if problem:
            return problem
    return ""


_NEEDS = {"string": f"text of at most {MAX_VALUE_CHARS} characters", "guid": f"text of at most {MAX_VALUE_CHARS} "
          "characters", "int": "a 32-bit whole number", "long": "a whole number", "real": "a finite number",
          "decimal": "a finite number", "bool": "true or false",
          "datetime": "an ISO 8601 date-time, e.g. 2026-11-23T09:00:00Z"}


def typed(column: Column, value: object, what: str = "where") -> Value:
    """A value of the column's type; anything else is refused with what it must be."""
    kind = "string" if column.type == "dynamic" else column.type
    try:
        return _convert(kind, value)
    except (ValueError, InvalidParameter):
        raise InvalidParameter(what, f"{column.name} ({column.type}) needs {_NEEDS.get(kind, 'a value')}; "
                                     f"got {quoted(value)}") from None


def _convert(kind: str, value: object) -> Value:
    if kind in STRING_TYPES:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)) or len(str(value)) > MAX_VALUE_CHARS:
            raise ValueError(kind)
        return as_written(str(value))  # a lone surrogate or a control character: U+FFFD, as the literal holds it
    if kind in ("int", "long"):
        number = int(value.strip()) if isinstance(value, str) else value
        if isinstance(number, float) and number.is_integer():
            number = int(number)
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


def shown(condition: Condition) -> Any:
    """A condition in the tool's own argument shape (canonical names and values)."""
    if isinstance(condition, Group):
        if condition.kind == "not":
            return {"not": shown(condition.items[0])}
        return {condition.kind: [shown(c) for c in condition.items]}
    values = [v.isoformat().replace("+00:00", "Z") if isinstance(v, datetime) else v for v in condition.values]
    if condition.op in NO_VALUE_OPS:
        return [condition.column.name, condition.op]
    if condition.other is not None:
        return [condition.column.name, condition.op, {"column": condition.other.name, "times": values[0]}]
    return [condition.column.name, condition.op,
            values if condition.op in LIST_OPS | RANGE_OPS else values[0]]


def _is_list(value: object) -> TypeGuard[Sequence[Any]]:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def quoted(value: object) -> str:
    """A value quoted back in an error, cut short (it may be 10k characters of attacker text)."""
    try:
        text = repr(value)
    except RecursionError:
        text = "(a value nested too deep)"
    return text if len(text) <= 80 else text[:77] + "..."
