"""The card an on-call analyst gets in a 1:1 chat when an escalation names them but they are not in the war room:
the incident (with its Details button, which works there: the bot is in that chat), what they are asked, who asks,
and links back to the war-room thread and to the portal."""

from __future__ import annotations

from bot.cards.common import Element, actions, breakable, card, details_action, header, plain, severity_text, text
from bot.cards.incidents import open_in_sentinel
from bot.sentinel.changes import IncidentSnapshot


def escalated_to_you(incident: IncidentSnapshot, *, requester: str, reason: str | None, thread_url: str | None,
                     owner: str, demo: bool = False) -> Element:
    """Escalated to you: incident #n, its title, severity, status and owner, the ask, and where to reply."""
    body = header(f"Escalated to you: incident #{incident.number}", demo=demo)
    body.append(text(breakable(plain(incident.title, 200)) or "(no title)", weight="bolder", spacing="small"))
    body.append(severity_text(incident.severity, " severity", spacing="small"))
    body.append({"type": "FactSet", "facts": [
        {"title": "Status", "value": plain(incident.status, 30)},
        {"title": "Owner", "value": breakable(plain(owner, 80))},
        {"title": "Escalated by", "value": breakable(plain(requester, 80))}]})
    body.append(text(f"Asked: {breakable(plain(reason, 500))}" if reason else
                     "Asked: please take a look and reply in the thread when you have it.", spacing="medium"))
    if thread_url is None:
        body.append(text("It was escalated in a chat you are not part of: reply to the person who escalated it.",
                         isSubtle=True, size="small"))
    body.append(actions(details_action(incident.number)))
    buttons = [{"type": "Action.OpenUrl", "title": "Open the thread", "url": thread_url}] if thread_url else []
    return card(body, buttons + open_in_sentinel(incident.url or ""))
