"""The demo workspace's on-call roster: the rows of a Sentinel watchlist ``OnCall``, as ``_GetWatchlist`` gives them.

Shifts are daily, in UTC, as HH:MM (the format ``rows.on_call_entry`` documents; ISO 8601 date-times also
work there): three eight-hour shifts cover the day, two or three analysts each, and an incident-response
lead is on call round the clock. Two rows are broken on purpose, as real uploads are: one without a UPN
and one with a shift time that is not a time; the bot leaves both out and says so. A pure function of
the seed, like the rest of the demo data.
"""

from __future__ import annotations

import random

from bot.sentinel.demo.values import stable_int, static_guid
from bot.sentinel.demo.world import build_world

# (team, shift start, shift end) per analyst of the demo directory, in its order, then two more people.
_SHIFTS = (("SOC Tier 1", "00:00", "08:00"), ("SOC Tier 1", "08:00", "16:00"), ("SOC Tier 1", "16:00", "00:00"),
           ("SOC Tier 2", "00:00", "08:00"), ("SOC Tier 2", "08:00", "16:00"), ("SOC Tier 2", "16:00", "00:00"))
_LOCATIONS = ("Dublin", "Singapore", "Seattle", "Lisbon", "Lagos", "Toronto")
_EXTRA = (
    # Round the clock: equal start and end.
    ("Grace Okonkwo", "grace.okonkwo@contoso.com", "Incident Response", "00:00", "00:00", "Dublin"),
    # No UPN: the row is left out.
    ("Hugo Lambert", "", "SOC Tier 1", "08:00", "16:00", "Lyon"),
    # A shift end that is not a time: the row is left out.
    ("Ines Carvalho", "ines.carvalho@contoso.com", "SOC Tier 2", "16:00", "25:70", "Lisbon"),
)


def roster(seed: int) -> list[dict[str, str]]:
    """The watchlist's rows: SearchKey (the UPN), its own columns, and _GetWatchlist's _DTItemId."""
    rng = random.Random(stable_int("sentinel-demo", seed, "on-call"))
    people = [(a["assignedTo"], a["userPrincipalName"], team, start, end, _LOCATIONS[i % len(_LOCATIONS)])
              for i, (a, (team, start, end)) in enumerate(zip(build_world(seed).analysts, _SHIFTS, strict=True))]
    rows = []
    for name, upn, team, start, end, location in [*people, *_EXTRA]:
        rows.append({
            "_DTItemId": static_guid(seed, "on-call", name), "SearchKey": upn, "Name": name, "UPN": upn,
            "Email": upn, "Phone": f"+1 425 555 {rng.randrange(100, 1000):04d}", "Location": location,
            "Team": team, "ShiftStart": start, "ShiftEnd": end,
        })
    return rows
