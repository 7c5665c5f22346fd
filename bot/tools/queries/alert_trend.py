"""get_alert_trend as a tool: one compact row per time bin with a column per severity, the trend chart card, the
terminal's bars, and the questions asked next (as after alerts).

The query returns a count per (bin, severity), zero-filled; the model reads them pivoted, each bin's start once
(a week of daily bins: 8 lines instead of 32), every count kept.
"""

from __future__ import annotations

from datetime import datetime

from bot import cards
from bot.cards import plaintext
from bot.sentinel.models import QueryResult, TrendBin
from bot.sentinel.queries import alert_trend
from bot.tools.compact import RefFor, bounded, cell, head
from bot.tools.queries.alerts import volume_follow_ups
from bot.tools.tool import Tool, read_tool


def trend_text(result: QueryResult, ref_for: RefFor) -> str:
    first = head(result, "alert counts (bin x severity)")
    bins: list[TrendBin] = list(result.records)
    if not bins:
        return first
    severities = list(dict.fromkeys(b.severity for b in bins))  # in the query's order
    counts: dict[datetime, dict[str, int]] = {}
    for b in bins:
        counts.setdefault(b.start, {})[b.severity] = b.count
    rows = ["|".join([cell(start), *(str(by.get(s, 0)) for s in severities)]) for start, by in counts.items()]
    return bounded([first, "|".join(["bin_start_utc", *severities])], rows, len(counts))


TOOL: Tool = read_tool(
    alert_trend.SPEC,
    "Alert counts per bin and severity: volume, spikes, \"is this unusual?\".",
    "Analyzing alert trends...",
    text=trend_text,
    card=cards.trend_card,
    terminal=plaintext.trend_text,
    follow_ups=volume_follow_ups,
    example='{"time_window": "last_24h"}',
)
