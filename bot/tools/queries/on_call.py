"""get_on_call as a tool: the roster as compact text for the model, the "on shift now / next" card, and the
terminal's table."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from bot.cards import plaintext
from bot.cards.common import Element, RefFor, card, cell, header, plain, subtle, table, text, warnings
from bot.sentinel.models import OnCallEntry, QueryResult, on_call_order
from bot.sentinel.queries import on_call
from bot.tools.compact import cell as text_cell
from bot.tools.compact import table_text
from bot.tools.tool import Tool, read_tool

MAX_NEXT = 8  # upcoming shifts on the card


def _shift(e: OnCallEntry) -> str:
    if e.round_the_clock:
        return "daily round the clock (24h)"
    if e.daily:
        return f"daily {e.shift_start:%H:%M}-{e.shift_end:%H:%M}"
    return f"{e.shift_start:%Y-%m-%d %H:%M}-{e.shift_end:%Y-%m-%d %H:%M}"


def _row(e: OnCallEntry, ref_for: RefFor) -> str:
    state = "now" if e.on_shift else "ended" if e.ended else f"from {e.shift_start:%Y-%m-%d %H:%M}"
    return "|".join([state, text_cell(e.name, 60), text_cell(e.upn, 80), text_cell(e.team, 40), _shift(e),
                     text_cell(e.location, 40), text_cell(e.phone, 30)])


_table = table_text("on the roster", ["on_shift_utc", "name (untrusted text)", "upn", "team", "shift_utc", "location",
                                      "phone"], _row)


def on_call_text(result: QueryResult, ref_for: RefFor) -> str:
    """The roster, who is on shift first, with the time it was judged at."""
    records = on_call_order(result.records)
    shown = _table(QueryResult(tuple(records), result.metadata), ref_for)
    return shown + (f"\nas_of_utc {records[0].as_of:%Y-%m-%d %H:%M}" if records else "")


def on_call_card(result: QueryResult, ref_for: RefFor, now: datetime, changes: bool = False) -> Element:
    entries: Sequence[OnCallEntry] = result.records
    as_of = entries[0].as_of if entries else now
    current = sorted((e for e in entries if e.on_shift), key=lambda e: (e.team, e.name))
    upcoming = [e for e in on_call_order(entries) if not e.on_shift and not e.ended]
    body = header("On call", demo=result.metadata.is_demo, subtitle=f"As of {as_of:%Y-%m-%d %H:%M} UTC")
    body += warnings(result.metadata.warnings)
    body.append(text("On shift now", weight="bolder", spacing="medium"))
    body.append(_people(current, as_of, "Until") if current else subtle("No one is on shift now."))
    body.append(text("Next", weight="bolder", spacing="medium"))
    body.append(_people(upcoming[:MAX_NEXT], as_of, "From") if upcoming else subtle("No later shift on the roster."))
    return card(body)


def empty_card(result: QueryResult) -> Element:
    return card([*header("No on-call roster", demo=result.metadata.is_demo),
                 text("The OnCall watchlist has no usable rows."),
                 subtle("Add the analysts to the Sentinel watchlist OnCall (UPN, ShiftStart and ShiftEnd as HH:MM "
                        "UTC).", spacing="small"), *warnings(result.metadata.warnings)])


def _people(entries: Sequence[OnCallEntry], as_of: datetime, moment: str) -> Element:
    rows = []
    for e in entries:
        at = e.shift_end if moment == "Until" else e.shift_start
        when = cell(text("Round the clock"), subtle("every day")) if e.round_the_clock else \
            cell(text(f"{at:%H:%M} UTC"), subtle(_in(at, as_of)))
        rows.append([
            cell(text(plain(e.name, 60), weight="bolder"), subtle(f"{plain(e.team, 40)} · {plain(e.location, 30)}")),
            cell(text(plain(e.upn, 80)), subtle(plain(e.phone, 30) or "-")),
            when,
        ])
    return table(["Analyst", "Contact", moment], [5, 6, 3], rows)


def _in(moment: datetime, as_of: datetime) -> str:
    """ "in 3h 20m", "in 45m", "in 2d"."""
    minutes = max(int((moment - as_of).total_seconds() // 60), 0)
    if minutes >= 2 * 24 * 60:
        return f"in {minutes // (24 * 60)}d"
    hours, rest = divmod(minutes, 60)
    return f"in {hours}h {rest}m" if hours else f"in {rest}m"


TOOL: Tool = read_tool(
    on_call.SPEC,
    "The on-call roster: who is on shift now and next, with contacts.",
    "Checking who is on call...",
    text=on_call_text,
    card=on_call_card,
    empty=empty_card,
    terminal=plaintext.on_call_text,
)
