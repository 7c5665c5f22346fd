"""Cards the watch poller posts: one new incident, or a digest of several; updated in place when they change.

Titles and owners are attacker-writable, so they go through ``plain`` and ``breakable`` (no markup, no live URL)
like every other card's; the watch's own label is the analyst's words, shown the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from bot.cards.common import (
    BUTTON_COLUMN,
    Element,
    actions,
    breakable,
    card,
    cell,
    details_action,
    exact,
    fit,
    header,
    plain,
    severity_and_details,
    severity_text,
    subtle,
    table,
    text,
    when,
)
from bot.cards.incidents import assign_and_close, incident_line, open_in_sentinel
from bot.investigation.models import Triage
from bot.sentinel.models import Incident

MAX_DIGEST_ROWS = 25
TRIAGE_PENDING = "Triage: assessing its main entities…"
_LEVEL_WORDS = {"none": "no signal", "low": "low", "medium": "medium", "high": "HIGH"}
_KIND_LABELS = {"account": "Account", "host": "Host", "ip": "IP", "hash": "File hash", "url": "URL", "domain": "Domain"}


def watched_incident(i: Incident, *, watch: str, now: datetime, demo: bool, changes: bool,
                     triage: Triage | None = None, triage_pending: bool = False) -> Element:
    """One incident a watch matched: what it is, its state now, its triage (or that it is coming), and Details (with
    ``changes``: Assign to me and Close, proposals confirmed on the card that follows). Closed: the state and
    Details only."""
    closed = i.status.strip().lower() == "closed"
    heading = f"Incident #{i.number} closed" if closed else f"New incident #{i.number}"
    body = header(heading, demo=demo, subtitle=f"Watch: {breakable(plain(watch, 120))}")
    body.append(text(breakable(plain(i.title, 200)), weight="bolder", spacing="small"))
    body.append(severity_text(i.severity, " severity", spacing="small"))
    facts = [("Status", plain(f"{i.status} ({i.classification})" if i.classification else i.status, 60)),
             ("Owner", breakable(plain(i.owner or "Unassigned", 60))), ("Created", when(i.created, now))]
    body.append({"type": "FactSet", "facts": [{"title": t, "value": v} for t, v in facts]})
    if triage is not None:
        body += triage_section(triage)
    elif triage_pending and not closed:
        body.append(subtle(TRIAGE_PENDING, spacing="small"))
    buttons = [details_action(i.number)] + (assign_and_close(i) if changes and not closed else [])
    body.append(actions(*buttons, spacing="small"))
    return card(body, open_in_sentinel(i.url))


def watched_digest(incidents: Sequence[Incident], *, watch: str, now: datetime, demo: bool) -> Element:
    """Several new incidents at once: one row each with Details (the row's state kept current in place)."""

    def build(limit: int) -> Element:
        shown = incidents[:limit]
        more = len(incidents) - len(shown)
        subtitle = f"Watch: {breakable(plain(watch, 120))}" + (
            f". {more} more not shown: ask for them with \"incidents\"." if more else "")
        body = header(f"{len(incidents)} new incidents", demo=demo, subtitle=subtitle)
        rows = [[cell(text(breakable(plain(i.title, 90))), subtle(incident_line(i, now))),
                 severity_and_details(i.severity, i.number)] for i in shown]
        return card([*body, table(["Incident", ""], [1, BUTTON_COLUMN], rows)])

    return fit(build, MAX_DIGEST_ROWS)



def triage_section(t: Triage) -> list[Element]:
    """ "Triage: HIGH", one line per main entity (its level and signals), and the related open incidents."""
    out: list[Element] = [text(f"Triage: {_LEVEL_WORDS[t.level.value]}", weight="bolder", separator=True,
                               spacing="medium")]
    for e in t.entities:  # the value on its own line, exactly as the record holds it (copied into a hunt)
        verdict = "not assessed (its evidence could not be read)" if e.failed else (
            _LEVEL_WORDS[e.level.value] + (f": {', '.join(e.signals[:3])}" if e.signals else ""))
        label = _KIND_LABELS.get(e.kind) or plain(e.kind, 12)
        out.append({"type": "Container", "spacing": "small", "items": [
            text(f"{label} · {plain(verdict, 200)}", size="small", weight="bolder"),
            exact(e.value, size="small", spacing="none")]})  # whole: an identifier is never cut
    if t.headline:  # the summary's first lines (its suggestion and first actions), and how to get the rest
        out += [text(plain(line, 300), size="small", spacing="small") for line in t.headline]
        out.append(subtle(f'Type "summary {t.incident}" for its timeline, similar incidents and the rows behind '
                          "each line.", spacing="none"))
    if t.related:
        listed = "; ".join(f"#{r.number} {plain(r.title, 60)} ({plain(r.severity, 13)})" for r in t.related)
        out.append(subtle(f"Related open incidents: {breakable(listed)}", spacing="small"))
    else:
        out.append(subtle("No other open incident names these entities (last 7 days).", spacing="small"))
    return out
