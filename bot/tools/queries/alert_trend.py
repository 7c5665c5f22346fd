"""get_alert_trend as a tool: the bins as compact rows, and the trend chart card."""

from __future__ import annotations

from bot import cards
from bot.sentinel.models import TrendBin
from bot.sentinel.queries import alert_trend
from bot.tools.compact import RefFor, cell, table_text
from bot.tools.tool import Tool, read_tool


def _row(b: TrendBin, ref_for: RefFor) -> str:
    return "|".join([cell(b.start), b.severity, str(b.count)])


TOOL: Tool = read_tool(
    alert_trend.SPEC,
    "Alert counts per time bin and severity, zero-filled: volume, spikes, \"is this unusual?\".",
    "Analyzing alert trends...",
    text=table_text("bins", ["bin_start_utc", "severity", "alerts"], _row),
    card=cards.trend_card,
    example='{"time_window": "last_24h"}',
)
