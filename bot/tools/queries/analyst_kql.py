"""The kql command's result (an analyst's own query): not a tool the model may call (``command_only``), but its rows
render as every result does: compact text and the generic result table card, columns as the service returned them."""

from __future__ import annotations

from datetime import datetime

from bot.cards.common import Element, RefFor
from bot.cards.tables import ResultTable, result_table
from bot.sentinel.models import HuntRow, QueryResult
from bot.sentinel.queries import analyst_kql
from bot.tools.compact import bounded, head
from bot.tools.compact import cell as text_cell
from bot.tools.queries.hunt import shown
from bot.tools.tool import Tool, read_tool


def _columns(result: QueryResult) -> tuple[str, ...]:
    names: dict[str, None] = {}
    for row in result.records:
        names.update(dict.fromkeys(name for name, _ in row.cells))
    return tuple(names)


def analyst_text(result: QueryResult, ref_for: RefFor) -> str:
    first = head(result, "rows")
    if not result.records:
        return first
    columns = _columns(result)
    rows = ["|".join(text_cell(shown(r.value(c), ""), 80) for c in columns) for r in result.records]
    return bounded([first, "|".join(columns)], rows, result.metadata.total)


def analyst_card(result: QueryResult, ref_for: RefFor, now: datetime, changes: bool = False) -> Element:
    meta = result.metadata
    records: list[HuntRow] = list(result.records)
    columns = _columns(result)
    return result_table(ResultTable(
        title="Your query", subtitle=f"last {meta.parameters.get('time_window', '')}, as you wrote it",
        columns=columns, rows=tuple(tuple(shown(r.value(c), "") for c in columns) for r in records),
        refs=("",) * len(records), total=max(meta.total, len(records)), demo=meta.is_demo, notes=meta.warnings))


TOOL: Tool = read_tool(analyst_kql.SPEC, "An analyst's own KQL (the kql command).", "Running your query...",
                       text=analyst_text, card=analyst_card)
