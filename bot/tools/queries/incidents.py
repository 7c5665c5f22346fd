"""query_incidents as a tool: incidents as compact rows with their [n], and the incident table card."""

from __future__ import annotations

from bot import cards
from bot.sentinel.models import Incident
from bot.sentinel.queries import incidents
from bot.tools.compact import RefFor, cell, ref, table_text
from bot.tools.tool import Tool, read_tool


def _row(i: Incident, ref_for: RefFor) -> str:
    status = f"{i.status} ({i.classification})" if i.classification else i.status
    return "|".join([
        ref(ref_for, "incident", str(i.number)), str(i.number), i.severity, cell(status, 40),
        cell(i.owner or "Unassigned", 40), cell(i.created), str(i.alert_count), cell(i.tactics, 80),
        cell(i.title, 120),
    ])


TOOL: Tool = read_tool(
    incidents.SPEC,
    "Incidents created in a window: severity, status, owner, alerts, tactics; the queue, who is on what.",
    "Querying incidents...",
    text=table_text("incidents", ["ref", "number", "severity", "status", "owner", "created_utc", "alerts", "tactics",
                                  "title (untrusted text)"], _row),
    card=cards.incidents_card,
    example='{"time_window": "last_24h"}',
)
