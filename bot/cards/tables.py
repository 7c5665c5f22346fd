"""A generic result table: any typed rows a tool shows as a table (a hunt's rows, whatever it projects).

The tool gives the title, the column names and each row's cells already as text (it knows the column types), and
each row's [n] when the conversation can refer to it. Cells are inert plain text, cut short; at most
``MAX_CARD_COLUMNS`` columns fit a Teams card (the rest are named in a note; the model's text has them all), and
as many rows as the card's size limit allows. Up to ``TABLE_COLUMNS`` columns are a table; more are stacked, one
row a block of "Column: value" lines, because a phone's 320 px cannot hold three columns of names such as
"AppDisplayName" or "ProcessCommandLine" without breaking them mid-word (tests/cards/test_card_layout.py). The query
itself is behind the footer's "Show query". A URL cell is the exception to "inert text": it is shown exactly as the
record holds it, in a TextRun (no link, and no zero-width spaces to copy along into a block list or a query).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.cards.common import (
    REF_COLUMN,
    Element,
    card,
    cell,
    exact,
    fit,
    header,
    plain,
    shown_note,
    subtle,
    table,
    text,
    warnings,
)
from bot.cards.inert import is_url_token
from bot.sentinel.models import one_line

MAX_CARD_COLUMNS = 6
TABLE_COLUMNS = 2  # more than this are stacked per row
MAX_ROWS = 100  # a hunt's take at most; fewer when the card's size limit says so
CELL_CHARS = 60
URL_CHARS = 500  # a URL cell is shown whole up to this, exactly as the record holds it, so it can be copied


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
            cells += [cell(_value(v)) for v in values[:MAX_CARD_COLUMNS]]
            rows.append(cells)
        shown = min(limit, len(data.rows))
        body = header(data.title, demo=data.demo, subtitle=data.subtitle)
        note = shown_note(shown, data.total, "rows", "Ask for a narrower hunt (a shorter window, another condition) "
                                                     "to see the others.")
        body += [subtle(note)] if note else []
        body += [subtle(f"Also in the result: {plain(', '.join(left_out), 200)}")] if left_out else []
        body += warnings(list(data.notes))
        if len(shown_columns) > TABLE_COLUMNS:
            body += [_stacked(shown_columns, values, ref) for values, ref in
                     list(zip(data.rows, data.refs, strict=True))[:limit]]
            return card(body)
        headers: Sequence[str] = (["#"] if with_refs else []) + list(shown_columns)
        widths: list[int | str] = ([REF_COLUMN] if with_refs else []) + [1] * len(shown_columns)
        body.append(table(headers, widths, rows))
        return card(body)

    return fit(build, MAX_ROWS)


def _value(value: str) -> Element:
    """A table cell's value: a URL exactly as the record holds it (a TextRun: not made a link, no zero-width spaces
    to copy along), anything else as inert text cut at ``CELL_CHARS``."""
    if is_url_token(value):
        return exact(value, URL_CHARS, size="small")
    return text(plain(value, CELL_CHARS) or "-", size="small")


def _line(column: str, value: str) -> Element:
    """One "Column: value" line of a stacked row; a URL value in a TextRun of its own, as the record holds it."""
    if is_url_token(value) and len(value) <= URL_CHARS:
        return {"type": "RichTextBlock", "spacing": "none", "inlines": [
            {"type": "TextRun", "text": f"{plain(column, 40)}: ", "size": "small"},
            {"type": "TextRun", "text": one_line(value, URL_CHARS), "size": "small"}]}
    return text(f"{plain(column, 40)}: {plain(value, CELL_CHARS) or '-'}", size="small", spacing="none")


def _stacked(columns: Sequence[str], values: Sequence[str], ref: str) -> Element:
    """One row as a block: its [n] and each column's value on its own line."""
    lines = [text(f"{ref} {plain(columns[0], 40)}: {plain(values[0], CELL_CHARS) or '-'}".strip(),
                  size="small", weight="bolder", spacing="none")]
    lines += [_line(c, v) for c, v in zip(columns[1:], values[1:MAX_CARD_COLUMNS], strict=False)]
    return {"type": "Container", "separator": True, "spacing": "small", "items": lines}
