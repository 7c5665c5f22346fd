"""Validated query parameters: the only values that may reach a query.

Everything a user or the model supplies passes through these parsers first. Enums are checked
against their lists, numbers are parsed as numbers and range-checked, and the one free-text value
(an incident title search) is length-limited here and escaped later by ``kql.string_literal``.
A bad value raises ``InvalidParameter`` with a message that says what is allowed, so the caller
(the model, or an analyst typing a command) can correct it.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import timedelta


class InvalidParameter(ValueError):
    """A parameter value that is not allowed; the message says which values are."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name


class TimeWindow(enum.Enum):
    LAST_1H = "last_1h"
    LAST_24H = "last_24h"
    LAST_3D = "last_3d"
    LAST_7D = "last_7d"
    LAST_14D = "last_14d"
    LAST_30D = "last_30d"

    @property
    def duration(self) -> timedelta:
        return _WINDOW_DURATIONS[self]

    @property
    def kql_timespan(self) -> str:
        """The window as a KQL timespan literal, e.g. ``24h`` or ``7d``."""
        return self.value.removeprefix("last_")

    @property
    def label(self) -> str:
        return self.value.replace("last_", "last ").replace("h", " hours").replace("d", " days").replace(
            "last 1 hours", "last hour"
        )


_WINDOW_DURATIONS = {
    TimeWindow.LAST_1H: timedelta(hours=1),
    TimeWindow.LAST_24H: timedelta(hours=24),
    TimeWindow.LAST_3D: timedelta(days=3),
    TimeWindow.LAST_7D: timedelta(days=7),
    TimeWindow.LAST_14D: timedelta(days=14),
    TimeWindow.LAST_30D: timedelta(days=30),
}


class Severity(enum.Enum):
    """Sentinel severities, most severe first."""

    HIGH = "High"
    MEDIUM = "Medium"
    LOW = "Low"
    INFORMATIONAL = "Informational"

    @property
    def rank(self) -> int:
        """0 for High up to 3 for Informational (the sort order analysts expect)."""
        return list(Severity).index(self)

    def at_least(self) -> tuple[Severity, ...]:
        """This severity and every more severe one: Medium -> (High, Medium)."""
        return tuple(s for s in Severity if s.rank <= self.rank)


class BinSize(enum.Enum):
    AUTO = "auto"
    HOUR = "1h"
    DAY = "1d"

    def resolve(self, window: TimeWindow) -> BinSize:
        """auto means hourly bins up to three days, daily bins beyond."""
        if self is not BinSize.AUTO:
            return self
        return BinSize.HOUR if window.duration <= timedelta(days=3) else BinSize.DAY

    @property
    def duration(self) -> timedelta:
        if self is BinSize.AUTO:
            raise ValueError("resolve() an auto bin size first")
        return timedelta(hours=1) if self is BinSize.HOUR else timedelta(days=1)


# Limits. Every list has one; hitting it is reported in the result metadata.
DEFAULT_LIMIT = 20
MAX_LIMIT = 100
DEFAULT_ENTITY_LIMIT = 10
MAX_ENTITY_LIMIT = 50
MAX_TREND_BINS = 400
MAX_TITLE_SEARCH_LENGTH = 1000
MAX_INCIDENT_NUMBER = 2**31 - 1
# How far back an incident lookup by number or title reaches (Sentinel's default retention is 90 days).
DETAIL_LOOKBACK = timedelta(days=90)

_INCIDENT_NUMBER = re.compile(r"^\s*(?:incident\s*)?(?:number\s*)?#?\s*(\d{1,10})\s*$", re.IGNORECASE)


def parse_enum(enum_type: type[enum.Enum], name: str, value: object, default: enum.Enum) -> enum.Enum:
    if value is None or (isinstance(value, str) and not value.strip()):
        return default
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str):
        wanted = value.strip().lower()
        for member in enum_type:
            if member.value.lower() == wanted:
                return member
    allowed = ", ".join(m.value for m in enum_type)
    raise InvalidParameter(name, f"{_shown(value)} is not one of: {allowed}")


def parse_time_window(value: object, default: TimeWindow = TimeWindow.LAST_24H) -> TimeWindow:
    return parse_enum(TimeWindow, "time_window", value, default)  # type: ignore[return-value]


def parse_severity(value: object, default: Severity = Severity.INFORMATIONAL) -> Severity:
    return parse_enum(Severity, "min_severity", value, default)  # type: ignore[return-value]


def parse_bin_size(value: object) -> BinSize:
    return parse_enum(BinSize, "bin_size", value, BinSize.AUTO)  # type: ignore[return-value]


def parse_limit(value: object, default: int = DEFAULT_LIMIT, maximum: int = MAX_LIMIT, name: str = "limit") -> int:
    if value is None:
        return default
    if isinstance(value, bool):
        raise InvalidParameter(name, f"must be a whole number from 1 to {maximum}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int):
        raise InvalidParameter(name, f"{_shown(value)} is not a whole number from 1 to {maximum}")
    if not 1 <= value <= maximum:
        raise InvalidParameter(name, f"{value} is out of range: use 1 to {maximum}")
    return value


@dataclass(frozen=True)
class IncidentRef:
    """An incident asked for by number, or by a piece of its title."""

    number: int | None = None
    title_search: str | None = None

    def describe(self) -> str:
        return f"incident {self.number}" if self.number is not None else f'title containing "{self.title_search}"'


def parse_incident_ref(value: object) -> IncidentRef:
    """"42", 42, "#42" and "incident 42" mean number 42; any other text searches titles."""
    if isinstance(value, bool) or value is None:
        raise InvalidParameter("incident_ref", "give an incident number (e.g. 42) or words from its title")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return IncidentRef(number=_incident_number(value))
    if not isinstance(value, str):
        raise InvalidParameter("incident_ref", f"{_shown(value)} is neither an incident number nor title text")
    match = _INCIDENT_NUMBER.match(value)
    if match:
        return IncidentRef(number=_incident_number(int(match.group(1))))
    text = value.strip()
    if not text:
        raise InvalidParameter("incident_ref", "is empty: give an incident number (e.g. 42) or words from its title")
    if len(text) > MAX_TITLE_SEARCH_LENGTH:
        raise InvalidParameter(
            "incident_ref",
            f"title search is {len(text):,} characters long (at most {MAX_TITLE_SEARCH_LENGTH:,}): "
            "give an incident number or a few words of the title",
        )
    return IncidentRef(title_search=text)


def _incident_number(number: int) -> int:
    if not 1 <= number <= MAX_INCIDENT_NUMBER:
        raise InvalidParameter("incident_ref", f"{number} is not a valid incident number")
    return number


def _shown(value: object) -> str:
    """A short, safe rendering of a rejected value for an error message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
