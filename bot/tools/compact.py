"""Tool results as compact text for the model: pipe-separated rows with their [n], not verbose JSON.

Each read tool's own module (``bot.tools.queries``) builds its rows with these helpers. Every value is flattened
to one line and stripped of control characters; free text written by attackers (titles, descriptions, entity
names) is cut short and stays inside its cell. Output is held to a budget of about 4,000 tokens, and says
"showing first N of M" when rows were left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from bot.sentinel.models import (
    QueryError,
    QueryResult,
    bounded_text,
    one_line,
)

MAX_CHARS = 16_000  # about 4,000 tokens of this kind of text
RefFor = Callable[[str, str], int | None]  # (kind, key) -> [n]
TextBuilder = Callable[[QueryResult, RefFor], str]  # a read tool's result as text for the model


def cell(value: object, width: int = 80) -> str:
    if value is None or value == "" or value == ():
        return "-"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    if isinstance(value, (tuple, list)):
        value = ",".join(str(v) for v in value)
    return one_line(str(value).replace("|", "/"), width)  # a "|" in attacker text must not open a cell


def long_cell(value: str, width: int) -> str:
    """Free text that may be long (a description, remediation steps) as one cell: whole up to ``width``
    characters, else cut with "…(n more characters)", so the model knows it did not see all of it."""
    text = one_line(value.replace("|", "/"))
    return bounded_text(text, width) if text else "-"


def span(start: datetime | None, end: datetime | None) -> str:
    """An alert's activity, UTC: "2026-11-20 13:02..13:23", one time when it was one moment, "-" when unknown."""
    if start is None and end is None:
        return "-"
    first, last = cell(start or end), cell(end or start)
    if first == last:
        return first
    return f"{first}..{last[11:] if last[:10] == first[:10] else last}"


def header(tool: str, arguments: dict[str, object]) -> str:
    shown = " ".join(f"{k}={cell(v, 60)}" for k, v in arguments.items())
    return f"{tool}({shown})"


def error_text(error: QueryError, arguments: dict[str, object]) -> str:
    retry = "retryable" if error.retry_possible else "not retryable"
    hint = (
        "Correct the argument and call the tool again."
        if error.code == "invalid_argument"
        else "Tell the analyst what failed and what they can do (for example a shorter window or a higher "
        "minimum severity); do not make up data."
    )
    return f"{header(error.tool, arguments)} -> ERROR {error.code} ({retry}): {error.message}\n{hint}"


def head(result: QueryResult, kind: str, shown: str | None = None) -> str:
    """The result's first line ("tool(args) -> 3 of 40 incidents [notes]"), or the whole text when it is empty."""
    meta = result.metadata
    head = header(meta.tool, meta.parameters)
    if shown is None:
        shown = f"{meta.returned} of {meta.total}" if meta.truncated else f"{meta.returned}"
    notes = []
    if meta.is_demo:
        notes.append("DEMO DATA")
    notes += [f"warning: {cell(w, 200)}" for w in meta.warnings]
    suffix = f" [{'; '.join(notes)}]" if notes else ""
    if not result.records:
        return f"{head} -> no rows{suffix}. Say so plainly and suggest a wider time_window or lower min_severity."
    return f"{head} -> {shown} {kind}{suffix}"


def table_text(kind: str, columns: list[str], row: Callable[[Any, RefFor], str]) -> TextBuilder:
    """A builder of pipe-separated rows with a header line, for one kind of list result."""

    def text(result: QueryResult, ref_for: RefFor) -> str:
        first = head(result, kind)
        if not result.records:
            return first
        return bounded([first, "|".join(columns)], [row(r, ref_for) for r in result.records], result.metadata.total)

    return text


def bounded(lines: list[str], rows: Sequence[str], total: int) -> str:
    used = sum(len(line) + 1 for line in lines)
    kept = 0
    for row in rows:
        if used + len(row) + 1 > MAX_CHARS:
            break
        lines.append(row)
        used += len(row) + 1
        kept += 1
    if kept < len(rows):
        lines.append(f"(showing first {kept} of {total} rows; ask for fewer or narrower results for the rest)")
    return "\n".join(lines)


def ref(ref_for: RefFor, kind: str, key: str) -> str:
    """"[n]" for a row the conversation can refer to, "-" otherwise."""
    n = ref_for(kind, key)
    return f"[{n}]" if n is not None else "-"
