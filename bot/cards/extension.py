"""The cards of the message extension: a search result's preview, and the incident card it inserts into a chat.

The inserted card is compact (one incident's row of the incident list, as a card of its own) and carries the
Details button, which asks the bot for the detail card; pasted links unfurl to the detail card itself
(``incidents.incident_detail``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.cards.common import Element, actions, breakable, card, details_action, header, plain, severity_text, text
from bot.cards.incidents import incident_line, open_in_sentinel
from bot.sentinel.models import Incident


def incident_card(i: Incident, now: datetime, *, demo: bool = False) -> Element:
    """Incident #n, its title, severity, status line, the Details button and "Open in Sentinel"."""
    body = header(f"Incident #{i.number}", demo=demo)
    body.append(text(breakable(plain(i.title, 200)), weight="bolder", spacing="small"))
    body.append(severity_text(i.severity, " severity", spacing="small"))
    body.append(text(incident_line(i, now), isSubtle=True, size="small", spacing="small"))
    body.append(actions(details_action(i.number)))
    return card(body, open_in_sentinel(i.url))


def incident_preview(i: Incident, now: datetime) -> dict[str, Any]:
    """A thumbnail card's content: what the result list shows for one incident (plain text only)."""
    return {"title": f"#{i.number} {plain(i.title, 80)}",
            "text": f"{plain(i.severity, 13)} · {incident_line(i, now).split(' · ', 1)[1]}"}


def notice_preview(title: str, detail: str) -> dict[str, Any]:
    """A result list's single line saying why there are no results (the search's own words, never user text)."""
    return {"title": title, "text": detail}
