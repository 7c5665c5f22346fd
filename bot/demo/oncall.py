"""The demo workspace's on-call roster: the rows of a Sentinel watchlist ``OnCall``, as ``_GetWatchlist`` gives them.

Shifts are daily, in UTC, as HH:MM (the format ``rows.on_call_entry`` documents; ISO 8601 date-times also
work there): three eight-hour shifts cover the day, two analysts each, and an incident-response lead is on
call round the clock. Two rows are broken on purpose, as real uploads are: one without a UPN
and one with a shift time that is not a time; the bot leaves both out and says so. A pure function of
the seed, like the rest of the demo data.
"""

from __future__ import annotations

import random

from bot.demo.values import stable_int, static_guid

# (name, UPN, email, team, shift start, shift end, location). The first five are the users the Teams Agents
# Playground mocks, so an escalation in the Playground @mentions someone who is there; then two of the demo
# directory's analysts (the incidents' owners) and two rows broken on purpose.
_PEOPLE = (
    ("Megan Bowen", "meganb@example.com", "meganb@example.com", "SOC Tier 1", "00:00", "08:00", "Singapore"),
    ("Adele Vance", "adelev@example.com", "adelev@example.com", "SOC Tier 1", "08:00", "16:00", "Dublin"),
    ("Isaiah Langer", "isaiah@example.com", "isaiahl@example.com", "SOC Tier 1", "16:00", "00:00", "Seattle"),
    ("Patti Fernandez", "pattif@example.com", "pattif@example.com", "SOC Tier 2", "00:00", "08:00", "Sydney"),
    ("Lynne Robbins", "lynner@example.com", "lynner@example.com", "SOC Tier 2", "08:00", "16:00", "Lisbon"),
    ("Chen Wei", "chen.wei@contoso.com", "chen.wei@contoso.com", "SOC Tier 2", "16:00", "00:00", "Toronto"),
    # Round the clock: equal start and end.
    ("Grace Okonkwo", "grace.okonkwo@contoso.com", "grace.okonkwo@contoso.com", "Incident Response", "00:00",
     "00:00", "Lagos"),
    # No UPN: the row is left out.
    ("Hugo Lambert", "", "hugo.lambert@contoso.com", "SOC Tier 1", "08:00", "16:00", "Lyon"),
    # A shift end that is not a time: the row is left out.
    ("Ines Carvalho", "ines.carvalho@contoso.com", "ines.carvalho@contoso.com", "SOC Tier 2", "16:00", "25:70",
     "Lisbon"),
)


def roster(seed: int) -> list[dict[str, str]]:
    """The watchlist's rows: SearchKey (the UPN), its own columns (with each analyst's Entra object id), and
    _GetWatchlist's _DTItemId."""
    rng = random.Random(stable_int("sentinel-demo", seed, "on-call"))
    return [{"_DTItemId": static_guid(seed, "on-call", name), "SearchKey": upn, "Name": name, "UPN": upn,
             "Email": email, "Phone": f"+1 425 555 {rng.randrange(100, 1000):04d}", "Location": location,
             "Team": team, "ShiftStart": start, "ShiftEnd": end, "ObjectId": static_guid(seed, "on-call-id", name)}
            for name, upn, email, team, start, end, location in _PEOPLE]
