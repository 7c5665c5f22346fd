"""The on-call card: who is on shift now, and who comes next, from the OnCall watchlist."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from bot.cards.common import Element, card, cell, header, plain, subtle, table, text, warnings
from bot.sentinel.models import OnCallEntry, QueryResult, on_call_order

MAX_NEXT = 8


def on_call(result: QueryResult, now: datetime) -> Element:
    entries: Sequence[OnCallEntry] = result.records
    as_of = entries[0].as_of if entries else now
    current = sorted((e for e in entries if e.on_shift), key=lambda e: (e.team, e.name))
    upcoming = [e for e in on_call_order(entries) if not e.on_shift and not e.ended]
    body = header("On call", demo=result.metadata.is_demo, subtitle=f"As of {as_of:%Y-%m-%d %H:%M} UTC")
    body += warnings(result.metadata.warnings)
    body.append(text("On shift now", weight="bolder", spacing="medium"))
    body.append(_table(current, as_of, "Until") if current else subtle("No one is on shift now."))
    body.append(text("Next", weight="bolder", spacing="medium"))
    body.append(_table(upcoming[:MAX_NEXT], as_of, "From") if upcoming else subtle("No later shift on the roster."))
    return card(body)


def _table(entries: Sequence[OnCallEntry], as_of: datetime, moment: str) -> Element:
    rows = [
        [
            cell(text(plain(e.name, 60), weight="bolder"), subtle(f"{plain(e.team, 40)} · {plain(e.location, 30)}")),
            cell(text(plain(e.upn, 80)), subtle(plain(e.phone, 30) or "-")),
            cell(text(f"{(e.shift_end if moment == 'Until' else e.shift_start):%H:%M} UTC"),
                 subtle(_in(e.shift_end if moment == "Until" else e.shift_start, as_of))),
        ]
        for e in entries
    ]
    return table(["Analyst", "Contact", moment], [5, 6, 3], rows)


def _in(moment: datetime, as_of: datetime) -> str:
    """ "in 3h 20m", "in 45m", "in 2d"."""
    minutes = max(int((moment - as_of).total_seconds() // 60), 0)
    if minutes >= 2 * 24 * 60:
        return f"in {minutes // (24 * 60)}d"
    hours, rest = divmod(minutes, 60)
    return f"in {hours}h {rest}m" if hours else f"in {rest}m"
