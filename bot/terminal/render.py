"""Query results as the terminal prints them: each tool's own plain text (``Tool.terminal``, built in
``bot.cards.plaintext``, or its compact text), then the line saying where the rows came from.

Incident and alert text is attacker-controlled: every value printed is cleaned of control characters (a crafted
title could otherwise carry terminal escape sequences) and cut to the column width (``plaintext.clean``).
"""

from __future__ import annotations

from datetime import datetime

from bot.cards.common import RefFor, page_note
from bot.cards.plaintext import clean
from bot.sentinel.models import DEMO_NOTICE, QueryError, QueryResult, rows_label
from bot.sentinel.queries import limit_of
from bot.tools.registry import TOOLS


def render(result: QueryResult | QueryError, ref_for: RefFor, now: datetime | None = None, *,
           with_footer: bool = True) -> str:
    if isinstance(result, QueryError):
        return f"Sorry, that query failed: {result.message}"
    body = TOOLS.terminal(result, ref_for, now)
    return "\n".join(part for part in (body, footer(result) if with_footer else page_line(result)) if part)


def page_line(result: QueryResult) -> str:
    """Where a page of a list is and how to see the next ("Showing 21-40 of 397 rows. Type "more" ..."); "" else."""
    meta = result.metadata
    limit = limit_of(meta.tool)
    return page_note(meta, meta.returned, "rows", limit[1] if limit else None, button=False) or ""


def footer(result: QueryResult) -> str:
    meta = result.metadata
    arguments = ", ".join(f"{k}={v}" for k, v in meta.parameters.items())
    source = "demo workspace" if meta.is_demo else "Log Analytics"
    lines = [f"Source: {meta.tool}({clean(arguments, 200)}) on {source}, {rows_label(meta)}, {meta.elapsed_ms:.0f} ms"]
    lines += [page_line(result)] if page_line(result) else []
    lines += [f"Warning: {clean(w, 300)}" for w in meta.warnings]
    if meta.is_demo:
        lines.append(DEMO_NOTICE)
    return "\n".join(lines)
