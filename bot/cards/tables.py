"""A generic result table: any typed rows a tool shows as a table (a hunt's rows, whatever it projects).

The tool gives the title, the column names and each row's cells already as text (it knows the column types), and
each row's [n] when the conversation can refer to it. Cells are inert plain text, cut short; at most
``MAX_CARD_COLUMNS`` columns fit a Teams card (the rest are named in a note; the model's text has them all), and
as many rows as the card's size limit allows. The query itself is behind the footer's "Show query".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.cards.common import (
    Element,
    card,
    cell,
    fit,
    header,
    plain,
    shown_note,
    subtle,
    table,
    text,
    warnings,
)

MAX_CARD_COLUMNS = 6
MAX_ROWS = 100  # a hunt's take at most; fewer when the card's size limit says so
CELL_CHARS = 60


@dataclass(frozen=True)
class ResultTable:
    title: str
    subtitle: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    refs: tuple[str, ...]  # "[3]" or "" per row
    total: int  # rows before the limit
    demo: bool
    notes: tuple[str, ...] = ()


def result_table(data: ResultTable) -> Element:
    shown_columns = data.columns[:MAX_CARD_COLUMNS]
    left_out = data.columns[MAX_CARD_COLUMNS:]
    with_refs = any(data.refs)

    def build(limit: int) -> Element:
        rows = []
        for values, ref in list(zip(data.rows, data.refs, strict=True))[:limit]:
            cells = [cell(subtle(ref))] if with_refs else []
            cells += [cell(text(plain(v, CELL_CHARS) or "-", size="small")) for v in values[:MAX_CARD_COLUMNS]]
            rows.append(cells)
        shown = min(limit, len(data.rows))
        body = header(data.title, demo=data.demo, subtitle=data.subtitle)
        note = shown_note(shown, data.total, "rows", "Narrow the hunt or raise take.")
        body += [subtle(note)] if note else []
        body += [subtle(f"Also in the result: {plain(', '.join(left_out), 200)}")] if left_out else []
        body += warnings(list(data.notes))
        headers: Sequence[str] = (["#"] if with_refs else []) + list(shown_columns)
        widths = ([1] if with_refs else []) + [3] * len(shown_columns)
        body.append(table(headers, widths, rows))
        return card(body)

    return fit(build, MAX_ROWS)
