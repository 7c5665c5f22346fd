"""query_alerts as a tool: alerts as compact rows with their [n], a few entities, techniques and activity times,
the alert list card, the
terminal's table, and the questions asked next about alert volume (the trend's too)."""

from __future__ import annotations

from bot import cards
from bot.cards import plaintext
from bot.sentinel.models import AlertSummary, QueryResult
from bot.sentinel.queries import alerts
from bot.tools.compact import RefFor, cell, ref, span, table_text
from bot.tools.tool import Tool, read_tool


def _row(a: AlertSummary, ref_for: RefFor) -> str:
    entities = cell(a.entities, 160) + (f" (+{a.entity_count - len(a.entities)} more)"
                                        if a.entity_count > len(a.entities) else "")
    return "|".join([
        ref(ref_for, "alert", a.alert_id), a.severity, cell(a.time), cell(a.status, 20), cell(a.product, 50),
        cell(a.name, 120), entities, cell(a.techniques, 80), span(a.start, a.end),
    ])


def volume_follow_ups(result: QueryResult, ref_for: RefFor) -> list[str]:
    """After alerts or their trend: where they went (incidents) and what they hit."""
    return ["Which incidents are open and high severity?", "Which hosts were hit most this week?"]


TOOL: Tool = read_tool(
    alerts.SPEC,
    "Alerts in a window with product and entities, also those in no incident.",
    "Querying alerts...",
    text=table_text("alerts", ["ref", "severity", "time_utc", "status", "product", "name (untrusted text)",
                               "entities", "techniques", "activity_utc"], _row),
    card=cards.alerts_card,
    terminal=plaintext.alerts_text,
    follow_ups=volume_follow_ups,
    example='{"time_window": "last_24h"}',
)
