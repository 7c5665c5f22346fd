"""The analyst's time zone, so "since Monday 9:00" means their Monday morning, not UTC's.

Teams sends each message with the sender's IANA time zone (``localTimezone``) and local time with its offset
(``localTimestamp``). :func:`zone_of` reads them (the name when this machine's time zone database knows it, else
the offset the timestamp carries) and :func:`time_context` tells the model what "now" is, in UTC and where the
analyst is, and how to pass their times to the tools (ISO 8601 with the offset). Result times stay UTC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_ZONE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+){0,2}")  # e.g. America/Argentina/Salta
_OFFSET = re.compile(r"(?:Z|[+-]\d\d:?\d\d)$")
MAX_OFFSET = timedelta(hours=14)  # the widest UTC offsets in use are -12:00 and +14:00


@dataclass(frozen=True)
class LocalZone:
    name: str  # the IANA name, or "UTC+hh:mm" when only the offset is known
    zone: tzinfo


def zone_of(name: object, timestamp: object = None) -> LocalZone | None:
    """The sender's time zone from a Teams activity's ``localTimezone`` and ``localTimestamp`` (text, or the
    datetime botbuilder made of it); None when neither says (or says something unusable: both come from the
    client)."""
    if isinstance(name, str) and len(name) <= 64 and _ZONE_NAME.fullmatch(name.strip()):
        try:
            return LocalZone(name.strip(), ZoneInfo(name.strip()))
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass  # no time zone database here, or a name it does not know: the timestamp's offset still helps
    offset = _offset_of(timestamp)
    return _fixed(offset) if offset is not None and abs(offset) <= MAX_OFFSET else None


def machine_zone() -> LocalZone:
    """This machine's time zone (the terminal chat's analyst sits at it), by its offset now."""
    return _fixed(datetime.now().astimezone().utcoffset() or timedelta())


def _offset_of(timestamp: object) -> timedelta | None:
    """The UTC offset a ``localTimestamp`` carries, if it carries one."""
    if isinstance(timestamp, str) and len(timestamp) <= 40 and _OFFSET.search(timestamp.strip()):
        try:
            timestamp = datetime.fromisoformat(timestamp.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    return timestamp.utcoffset() if isinstance(timestamp, datetime) else None


def _fixed(offset: timedelta) -> LocalZone:
    return LocalZone(f"UTC{_offset_text(offset)}", timezone(offset))


def _offset_text(offset: timedelta | None) -> str:
    minutes = int((offset or timedelta()).total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def time_context(now: datetime, local: LocalZone | None) -> str:
    """What the model needs to turn the analyst's "since Monday 9:00" into a tool's ``from`` (sent on every model
    call: kept short)."""
    utc = now.astimezone(UTC)
    text = f"Now: {utc:%a %Y-%m-%d %H:%M} UTC."
    if local is None:
        return text
    there = utc.astimezone(local.zone)
    offset = _offset_text(there.utcoffset())
    return (f"{text} The analyst is in {local.name} (UTC{offset}; {there:%a %H:%M} there): times they give are "
            f"theirs, pass them with {offset} (e.g. {there:%Y-%m-%d}T09:00:00{offset}). Results are in UTC.")
