"""query_incidents as a tool: incidents as compact rows with their [n], the incident table card, the terminal's
table, and the questions asked next (the first incident, the entities hit most)."""

from __future__ import annotations

from bot import cards
from bot.cards import plaintext
from bot.sentinel.models import Incident, QueryResult
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


def follow_ups(result: QueryResult, ref_for: RefFor) -> list[str]:
    first = result.records[0]
    if not isinstance(first, Incident):
        return []
    n = ref_for("incident", str(first.number))
    return [f"Tell me more about [{n}]" if n else f"Tell me more about incident {first.number}",
            "Which accounts and hosts were hit most this week?"]


TOOL: Tool = read_tool(
    incidents.SPEC,
    "Incidents created in a window: severity, status, owner, alerts, tactics; the queue, who is on what.",
    "Querying incidents...",
    text=table_text("incidents", ["ref", "number", "severity", "status", "owner", "created_utc", "alerts", "tactics",
                                  "title (untrusted text)"], _row),
    card=cards.incidents_card,
    terminal=plaintext.incidents_text,
    follow_ups=follow_ups,
    example='{"time_window": "last_24h"}',
)
