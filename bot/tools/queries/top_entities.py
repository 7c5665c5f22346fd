"""get_top_entities as a tool: the entities as compact rows (one asked for by value also with its first sighting),
the top entities card, the terminal's table, and the questions asked next (the alerts, their trend)."""

from __future__ import annotations

from bot import cards
from bot.cards import plaintext
from bot.sentinel.models import EntityCount, QueryResult
from bot.sentinel.queries import top_entities
from bot.tools.compact import RefFor, cell, ref, table_text
from bot.tools.tool import Tool, read_tool

_COLUMNS = ["ref", "type", "value", "alerts", "high_severity_alerts", "last_seen_utc"]


def _row(e: EntityCount, ref_for: RefFor) -> str:
    return "|".join([
        ref(ref_for, "entity", f"{e.type}:{e.value}"), e.type, cell(e.value, 120), str(e.alert_count),
        str(e.high_severity_count), cell(e.last_seen),
    ])


def _pivot_row(e: EntityCount, ref_for: RefFor) -> str:
    return f"{_row(e, ref_for)}|{cell(e.first_seen)}"


_top = table_text("entities", _COLUMNS, _row)
_pivot = table_text("entities", [*_COLUMNS, "first_seen_utc"], _pivot_row)


def entities_text(result: QueryResult, ref_for: RefFor) -> str:
    """Top entities; one entity asked for by value also gets its first sighting in the window."""
    return (_pivot if result.metadata.parameters.get("entity") else _top)(result, ref_for)


def follow_ups(result: QueryResult, ref_for: RefFor) -> list[str]:
    return ["Show the alerts from the last 24 hours", "Show the alert trend for the last 7 days"]


TOOL: Tool = read_tool(
    top_entities.SPEC,
    "Accounts, hosts, IPs, files... in the most alerts of a window: who was hit most.",
    "Finding top targeted entities...",
    text=entities_text,
    card=cards.entities_card,
    terminal=plaintext.entities_text,
    follow_ups=follow_ups,
    example='{"time_window": "last_24h"}',
)
