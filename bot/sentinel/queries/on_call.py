"""get_on_call: the on-call roster, from the Sentinel watchlist ``OnCall``.

The watchlist's columns: SearchKey (the UPN), Name, UPN, Email, Phone, Location, Team, ShiftStart, ShiftEnd, and
optionally ObjectId (the analyst's Entra object id: what a 1:1 Teams message to someone outside the war room needs;
a roster without the column reads as one with it empty).
Shift times are daily ``HH:MM`` in UTC (an end at or before the start runs past midnight; equal times, round
the clock), or ISO 8601 date-times for a dated shift. A row without a UPN or with an unreadable shift time is
left out and counted, never an error. The service's ``now()`` comes back with the rows (``AsOf``) so both
backends judge "on shift" against their own clock.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any

from bot.sentinel import kql
from bot.sentinel.demo_sql import iso
from bot.sentinel.models import OnCallEntry, daily_shift
from bot.sentinel.params import DETAIL_LOOKBACK
from bot.sentinel.rows import SkippedRow, as_datetime, as_optional_text, as_text
from bot.sentinel.spec import DemoWorkspace, QuerySpec, Row

MAX_ON_CALL = 200  # roster rows
ON_CALL_WATCHLIST = "OnCall"  # the watchlist alias
_OWN_COLUMNS = ("Name", "UPN", "Email", "Phone", "Location", "Team", "ShiftStart", "ShiftEnd")


@dataclass(frozen=True)
class OnCallQuery:
    tool = "get_on_call"

    @property
    def timespan(self) -> timedelta:
        return DETAIL_LOOKBACK  # watchlist rows are re-ingested periodically; their age is not the question

    def parameters(self) -> dict[str, Any]:
        return {}


def _kql(query: OnCallQuery) -> str:
    # _GetWatchlist unpacks the watchlist's own columns (their types depend on the upload): read each as text.
    own = ", ".join(f"{c} = tostring({c})" for c in _OWN_COLUMNS)
    return f"""// get_on_call: the on-call roster from the watchlist {ON_CALL_WATCHLIST}
let roster = materialize(_GetWatchlist({kql.string_literal(ON_CALL_WATCHLIST)})
    | project SearchKey = tostring(SearchKey), {own},
        ObjectId = tostring(column_ifexists("ObjectId", "")));
roster
| sort by Team asc, Name asc, SearchKey asc
| take {MAX_ON_CALL}
| extend AsOf = now(), TotalMatched = toscalar(roster | count)
| project SearchKey, Name, UPN, Email, Phone, Location, Team, ShiftStart, ShiftEnd, ObjectId, AsOf, TotalMatched"""


_DAILY = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
_OBJECT_ID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}", re.ASCII)


def decode(row: Row) -> OnCallEntry:
    """A roster row; one without a UPN (SearchKey or UPN) or with an unreadable shift time is skipped."""
    upn = as_optional_text(row.get("UPN")) or as_optional_text(row.get("SearchKey"))
    if upn is None:
        raise SkippedRow("an on-call row without a UPN")
    as_of = as_datetime(row.get("AsOf")) or datetime.now(UTC)
    start_text, end_text = as_text(row.get("ShiftStart")).strip(), as_text(row.get("ShiftEnd")).strip()
    daily_start, daily_end = _DAILY.match(start_text), _DAILY.match(end_text)
    if daily_start and daily_end:
        start, end = daily_shift(time(int(daily_start[1]), int(daily_start[2])),
                                 time(int(daily_end[1]), int(daily_end[2])), as_of)
        daily = True
    else:
        dated_start, dated_end = _dated(start_text), _dated(end_text)
        if dated_start is None or dated_end is None or dated_end <= dated_start:
            raise SkippedRow("an on-call row with a malformed shift time (HH:MM UTC, or ISO 8601 with a date)")
        start, end, daily = dated_start, dated_end, False
    return OnCallEntry(
        name=as_text(row.get("Name")).strip() or upn, upn=upn, email=as_text(row.get("Email")).strip(),
        phone=as_text(row.get("Phone")).strip(), location=as_text(row.get("Location")).strip(),
        team=as_text(row.get("Team")).strip(), shift_start=start, shift_end=end, daily=daily, as_of=as_of,
        object_id=_object_id(row.get("ObjectId")),
    )


def _object_id(value: object) -> str:
    """An Entra object id (a GUID, lower case); anything else in the column is no id ("")."""
    text = as_text(value).strip()
    return text.lower() if _OBJECT_ID.fullmatch(text) else ""


def _dated(text: str) -> datetime | None:
    """An ISO 8601 date-time with a date (a bare time or date is not a shift boundary)."""
    return as_datetime(text) if "T" in text or " " in text else None


def _demo(query: OnCallQuery, conn: sqlite3.Connection, now: datetime,
          workspace: DemoWorkspace) -> list[dict[str, Any]]:
    # The watchlist is small and fixed: its rows in Python, projected and sorted as the KQL does.
    roster = [{column: row.get(column, "") for column in ("SearchKey", *_OWN_COLUMNS, "ObjectId")}
              for row in workspace.roster]
    roster.sort(key=lambda r: (r["Team"], r["Name"], r["SearchKey"]))
    return [r | {"AsOf": iso(now), "TotalMatched": len(roster)} for r in roster[:MAX_ON_CALL]]


SPEC = QuerySpec(
    name=OnCallQuery.tool,
    params=(),
    make=OnCallQuery,
    kql=_kql,
    result=(("SearchKey", "string"), *((c, "string") for c in _OWN_COLUMNS), ("ObjectId", "string"),
            ("AsOf", "datetime"),
            ("TotalMatched", "long")),
    keys=("SearchKey", "UPN"),
    decode=decode,
    demo=_demo,
    left_out="on-call row(s) without a UPN or with a malformed shift time were left out",
)
