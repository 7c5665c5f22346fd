"""hunt as a tool: the guarded hunt's rows as compact text for the model and as a generic result table card.

The columns come back in the hunt's own order (re-read from the result's parameters, which are the hunt's canonical
arguments); each row's [n] is its first identifier's (an account, IP, host, URL, hash...), so "[4]" works in a
follow-up as it does for any entity. The text shows each cell whole up to ``CELL_CHARS`` (a command line, a consent's
scopes) and marks a summarized hunt's group keys in its header ("Country (string, key)"), the other columns being
its aggregates.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import datetime
from typing import Any

from bot.cards.common import Element, RefFor
from bot.cards.tables import ResultTable, result_table
from bot.sentinel.hunt import parse_hunt
from bot.sentinel.models import HuntRow, QueryResult, count_label
from bot.sentinel.params import InvalidParameter
from bot.sentinel.queries import hunt
from bot.sentinel.rows import as_datetime
from bot.tools.compact import bounded, head, long_cell
from bot.tools.compact import ref as text_ref
from bot.tools.tool import Tool, read_tool


def output_of(result: QueryResult) -> tuple[tuple[str, str], ...]:
    """The hunt's columns and types, in order; from the rows themselves if its parameters cannot be re-read."""
    try:
        return parse_hunt(result.metadata.parameters).output
    except InvalidParameter:
        first = result.records[0].cells if result.records else ()
        return tuple((name, "string") for name, _ in first)


def shown(value: Any, kind: str) -> str:
    if value is None:
        return ""
    if kind == "datetime":
        moment = as_datetime(value)
        return f"{moment:%Y-%m-%d %H:%M:%S}" if moment else str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def row_ref(row: HuntRow, ref_for: RefFor) -> str:
    identifiers = row.identifiers()
    if not identifiers:
        return "-"
    kind, value = identifiers[0]
    return text_ref(ref_for, "entity", f"{kind}:{value}")


# A cell is shown whole up to this many characters (a command line, a consent's scopes, a set of addresses), then
# cut with how much was left out; the text's own budget (``compact.MAX_CHARS``) then holds fewer rows, and says so.
CELL_CHARS = 600


def group_keys(result: QueryResult) -> frozenset[str]:
    """The columns a summarized hunt grouped by (its time bin included): each row's keys, the rest its aggregates."""
    try:
        hunt = parse_hunt(result.metadata.parameters)
    except InvalidParameter:
        return frozenset()
    if not hunt.summarized:
        return frozenset()
    return frozenset([c.name for c in hunt.by] + (["TimeGenerated"] if hunt.bin else []))


def hunt_text(result: QueryResult, ref_for: RefFor) -> str:
    first = head(result, "rows")
    if not result.records:
        return first.replace("lower min_severity", "fewer filters")
    output = output_of(result)
    keys = group_keys(result)
    lines = [first, "|".join(["ref", *(f"{name} ({kind}{', key' if name in keys else ''})"
                                       for name, kind in output)])]
    rows = ["|".join([row_ref(r, ref_for), *(long_cell(shown(r.value(n), k), CELL_CHARS) for n, k in output)])
            for r in result.records]
    return bounded(lines, rows, result.metadata.total)


def card_output(result: QueryResult) -> tuple[tuple[str, str], ...]:
    """The card's columns: the first, then those a join brought (the reason for the join: a mail's click, a
    sign-in's indicator), then the rest. A card shows six; the model's text keeps the hunt's own order."""
    try:
        hunt = parse_hunt(result.metadata.parameters)
    except InvalidParameter:
        return output_of(result)
    output, brought = hunt.output, hunt.right_names
    return (*output[:1], *(c for c in output[1:] if c[0] in brought), *(c for c in output[1:] if c[0] not in brought))


def card_cell(value: Any, kind: str) -> str:
    """A cell as the card shows it: a real number to two decimals (or three significant digits under 1), so a
    series point's score reads 1029.46, not 1029.458314499307; everything else as the text shows it."""
    if kind in ("real", "decimal") and isinstance(value, float) and math.isfinite(value) and value != int(value):
        return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}".rstrip("0").rstrip(".")
    return shown(value, kind)


def hunt_card(result: QueryResult, ref_for: RefFor, now: datetime, changes: bool = False) -> Element:
    meta = result.metadata
    output = card_output(result)
    records: list[HuntRow] = list(result.records)
    window = str(meta.parameters.get("time_window", ""))
    filters = meta.parameters.get("where") or []
    # The table in the subtitle: a header's large text cannot hold "DeviceProcessEvents" whole at 320 px.
    subtitle = f"{meta.parameters.get('table', '')}, last {window}" + (
        f", {count_label(len(filters), 'filter')}" if filters else "")
    refs = tuple("" if (r := row_ref(row, ref_for)) == "-" else r for row in records)
    return result_table(ResultTable(
        title="Hunt", subtitle=subtitle,
        columns=tuple(name for name, _ in output),
        rows=tuple(tuple(card_cell(row.value(n), k) for n, k in output) for row in records),
        refs=refs, total=max(meta.total, len(records)), demo=meta.is_demo, notes=meta.warnings))



_DECLARED: Tool = read_tool(
    hunt.SPEC,
    "One log table, typed conditions, no KQL; JSON fields are columns (Country TargetUpn..); errors list names.",
    "Hunting...",
    text=hunt_text,
    card=hunt_card,
    example='{"table": "SigninLogs", "time_window": "24h", "where": [["IPAddress", "==", "203.0.113.7"]]}',
)
# Every call carries the base hunt; a turn where a hunt is likely (bot.orchestrator.offer) is told of computed
# columns, sessions, series, a join's leftouter kind and time proximity (either side, or after/before), and having's
# comparison of two results too. The parser accepts them on any turn.
_BASE = tuple(p for p in _DECLARED.parameters if p.name not in hunt.HUNTING_ONLY)
_JOIN = next(p for p in _DECLARED.parameters if p.name == "join")
_HAVING = next(p for p in _DECLARED.parameters if p.name == "having")
TOOL: Tool = replace(_DECLARED, parameters=_BASE, extended=(
    replace(_JOIN, description=_JOIN.description.replace(
        "kind,", "kind(+leftouter),").replace("columns}", "columns,within:1h|+1h(after)|-1h}")),
    replace(_HAVING, description=_HAVING.description + "; value {column:C,times:3}"),
    *(p for p in _DECLARED.parameters if p.name in hunt.HUNTING_ONLY)))
