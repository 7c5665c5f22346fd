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
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any


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
PAGE_ROWS = 25  # a list's rows at a time, on a card and in the terminal; "more" shows the next page
MAX_TREND_BINS = 400
MAX_TITLE_SEARCH_LENGTH = 1000
MAX_INCIDENT_NUMBER = 2**31 - 1
# How far back an incident lookup by number or title reaches (Sentinel's default retention is 90 days).
DETAIL_LOOKBACK = timedelta(days=90)

# An incident's Sentinel name (a GUID, as in its Azure portal link), or "defender:<id>" (its Defender portal id).
_INCIDENT_ID = re.compile(r"([0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12})|defender:([0-9]{1,12})", re.ASCII)
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
    """An incident asked for by number, by a piece of its title, or by the id a portal link names it with: its
    Sentinel name (the GUID in an Azure portal link) or its Defender XDR id (``ProviderIncidentId``)."""

    number: int | None = None
    title_search: str | None = None
    name: str | None = None  # IncidentName, lower-case GUID
    provider_id: str | None = None  # ProviderIncidentId: the incident's id in the Defender portal (digits)

    def describe(self) -> str:
        if self.name is not None:
            return f"incident {self.name}"
        if self.provider_id is not None:
            return f"Defender incident {self.provider_id}"
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
    if by_id := _INCIDENT_ID.fullmatch(value.strip()):
        return IncidentRef(name=by_id.group(1).lower()) if by_id.group(1) else IncidentRef(provider_id=by_id.group(2))
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


# --- Filters (issue 12): what analysts narrow a list by. ---

MAX_SEARCH_LENGTH = 200  # a keyword or phrase, not a document
MAX_OWNER_LENGTH = 256  # a UPN is at most 113 characters; a display name rarely over 100
# Words for "nobody owns it" and for the asking analyst ("me" is resolved by the tools before a query is built).
UNASSIGNED_WORDS = frozenset({"unassigned", "none", "nobody", "no one", "noone"})
SELF_WORDS = frozenset({"me", "myself", "self", "i", "mine"})
INCIDENT_STATUSES = ("New", "Active", "Closed")
ALERT_STATUSES = ("New", "InProgress", "Resolved", "Dismissed", "Unknown")
# "open": not closed. Incidents New/Active; alerts New/InProgress (Resolved and Dismissed are done).
_OPEN = {"incident": ("New", "Active"), "alert": ("New", "InProgress")}


@dataclass(frozen=True)
class StatusFilter:
    """The statuses wanted, as the table spells them ("open" is New and Active for incidents)."""

    label: str
    statuses: tuple[str, ...]


def parse_status(value: object, table: str = "incident") -> StatusFilter | None:
    """None (any status) for no value or "any"/"all"; "open" = not closed; else one of the table's statuses."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "any", "all")):
        return None
    allowed = INCIDENT_STATUSES if table == "incident" else ALERT_STATUSES
    if isinstance(value, str):
        wanted = value.strip().lower().replace(" ", "").replace("_", "")
        if wanted in ("open", "notclosed", "unresolved"):
            return StatusFilter("open", _OPEN[table])
        for status in allowed:
            if status.lower() == wanted:
                return StatusFilter(status, (status,))
    raise InvalidParameter("status", f"{_shown(value)} is not one of: open, any, {', '.join(allowed)}")


class SortOrder(enum.Enum):
    SEVERITY = "severity"  # most severe first, then newest
    NEWEST = "newest"
    MOST_ALERTS = "most_alerts"  # incidents only


_SORT_ALIASES = {"latest": "newest", "recent": "newest", "time": "newest", "alerts": "most_alerts",
                 "most alerts": "most_alerts", "alert count": "most_alerts"}


def parse_sort(value: object, table: str = "incident") -> SortOrder:
    if isinstance(value, str):
        value = _SORT_ALIASES.get(value.strip().lower(), value)
    order: SortOrder = parse_enum(SortOrder, "sort", value, SortOrder.SEVERITY)  # type: ignore[assignment]
    if order is SortOrder.MOST_ALERTS and table != "incident":
        raise InvalidParameter("sort", "most_alerts sorts incidents; alerts sort by severity or newest")
    return order


def parse_severities(value: object) -> tuple[Severity, ...]:
    """A set of severities ("High,Low", ["High", "Low"]), most severe first; () when none given (any)."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or len(items) > len(Severity):
        raise InvalidParameter("severity", f"{_shown(value)} is not a list of: {', '.join(s.value for s in Severity)}")
    wanted = {parse_enum(Severity, "severity", item, Severity.INFORMATIONAL) for item in items
              if not (isinstance(item, str) and not item.strip())}
    return tuple(s for s in Severity if s in wanted)


@dataclass(frozen=True)
class OwnerFilter:
    """Incidents nobody owns, or those of one person: their name, sign-in name (or its part before "@") or
    object id, compared case-insensitively with each of the owner's fields."""

    person: str | None = None  # None: unassigned
    mine: bool = False  # the person is the asking analyst ("mine"): shown so, not as their object id

    @property
    def label(self) -> str:
        if self.person is None:
            return "unassigned"
        return "mine" if self.mine else self.person


class Me(str):
    """The asking analyst's object id (or sign-in name) where they said "me" or "mine": the query compares the id, and
    shows the filter as "mine" (a card titled with a raw object id reads like nobody's)."""

    __slots__ = ()


def parse_owner(value: object) -> OwnerFilter | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise InvalidParameter("owner", f"{_shown(value)} is not a name, sign-in name, \"me\" or \"unassigned\"")
    if isinstance(value, Me) and value.strip():
        return OwnerFilter(str(value), mine=True)
    text = " ".join(value.split())
    if text.lower() in UNASSIGNED_WORDS:
        return OwnerFilter(None)
    if text.lower() in SELF_WORDS:
        # The tools replace "me" by the asking analyst before the query is built; here nobody is asking.
        raise InvalidParameter("owner", "\"me\" needs a signed-in Teams user; give the person's name or sign-in name")
    if len(text) > MAX_OWNER_LENGTH:
        raise InvalidParameter("owner", f"is {len(text):,} characters long (at most {MAX_OWNER_LENGTH}): give a name "
                                        "or sign-in name")
    return OwnerFilter(text)


MAX_ENTITY_LENGTH = 2048  # URLs and command lines run long; anything longer is not a value someone looks up


def parse_entity(value: object) -> str | None:
    """An entity's identifying value (account, host, IP, hash, URL ...), matched case-insensitively; None when empty."""
    return _text("entity", value, MAX_ENTITY_LENGTH, "give a host, account, IP, hash or URL")


def parse_search(value: object) -> str | None:
    """A keyword or phrase to find in titles and descriptions (case-insensitive); None when empty."""
    return _text("search", value, MAX_SEARCH_LENGTH, "use a keyword or a short phrase")


def _text(name: str, value: object, maximum: int, hint: str) -> str | None:
    """Free text, stripped and length-checked (it reaches KQL only as an escaped literal); None when empty."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidParameter(name, f"{_shown(value)} is not text: {hint}")
    text = value.strip()
    if len(text) > maximum:
        raise InvalidParameter(name, f"is {len(text):,} characters long (at most {maximum:,}): {hint}")
    return text or None


_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def parse_moment(value: object, name: str) -> datetime | None:
    """An ISO 8601 date or date-time (UTC unless it says otherwise); a date alone means its midnight,
    or, for ``to``, the midnight after it (so "to 2026-11-23" includes that day)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    text = value.strip() if isinstance(value, str) else ""
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in "zZ" and text else text)
    except ValueError:
        raise InvalidParameter(name, f"{_shown(value)} is not an ISO 8601 date or time, e.g. 2026-11-23 or "
                                     "2026-11-23T09:00:00Z") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if name == "to" and _DATE_ONLY.match(text):
        moment += timedelta(days=1)
    if not datetime(2000, 1, 1, tzinfo=UTC) <= moment <= datetime(2100, 1, 1, tzinfo=UTC):
        raise InvalidParameter(name, f"{_shown(value)} is out of range")
    return moment.astimezone(UTC)


def parse_since(value: object) -> datetime:
    """A poller's cursor: an aware datetime, or an ISO 8601 date-time with its offset (UTC when it has none)."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidParameter("since", "must be timezone-aware (a naive time is ambiguous for a cursor)")
        return value.astimezone(UTC)
    moment = parse_moment(value, "since")
    if moment is None:
        raise InvalidParameter("since", "is required: the time after which changes are wanted (ISO 8601)")
    return moment


MAX_PRODUCT_LENGTH = 100  # "Microsoft Defender for Cloud Apps" is 33
# MITRE ATT&CK tactics as Sentinel writes them (Enterprise, then the two ICS ones Sentinel also uses).
TACTICS = ("Reconnaissance", "ResourceDevelopment", "InitialAccess", "Execution", "Persistence", "PrivilegeEscalation",
           "DefenseEvasion", "CredentialAccess", "Discovery", "LateralMovement", "Collection", "CommandAndControl",
           "Exfiltration", "Impact", "ImpairProcessControl", "InhibitResponseFunction")
CLASSIFICATIONS = ("TruePositive", "FalsePositive", "BenignPositive", "Undetermined")


def parse_product(value: object) -> str | None:
    """A product name or part of it ("Defender for Endpoint"); None when not given."""
    if value is None:
        return None
    text = _text("product", value, MAX_PRODUCT_LENGTH, "use a product name or part of it")
    if text is None:
        raise InvalidParameter("product", "is empty: give a product name (e.g. Defender for Endpoint) or leave it out")
    if any(unicodedata.category(ch) == "Cc" for ch in text):
        raise InvalidParameter("product", "contains control characters: give a product name on one line")
    return text


def _named(name: str, value: object, allowed: tuple[str, ...], what: str) -> str | None:
    """One of ``allowed`` in any letter case, spaces, "_" and "-" ignored ("credential access"); None when empty."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        wanted = re.sub(r"[\s_-]+", "", value).lower()
        for item in allowed:
            if item.lower() == wanted:
                return item
    raise InvalidParameter(name, f"{_shown(value)} is not {what}; use one of: {', '.join(allowed)}")


def parse_tactic(value: object) -> str | None:
    return _named("tactic", value, TACTICS, "a MITRE ATT&CK tactic")


def parse_classification(value: object) -> str | None:
    return _named("classification", value, CLASSIFICATIONS, "an incident classification")


@dataclass(frozen=True)
class Filters:
    """What a list is narrowed by, besides its window, minimum severity and limit. All optional."""

    severities: tuple[Severity, ...] = ()  # any of these (and at or above the minimum)
    status: StatusFilter | None = None
    owner: OwnerFilter | None = None  # incidents only
    search: str | None = None
    start: datetime | None = None  # "from": replaces the window's start
    end: datetime | None = None  # "to": exclusive
    sort: SortOrder = SortOrder.SEVERITY
    entity: str | None = None  # involving this entity (its value, any letter case)
    product: str | None = None  # a product name containing this (any letter case)
    tactic: str | None = None  # one of TACTICS
    classification: str | None = None  # incidents only: one of CLASSIFICATIONS

    def __post_init__(self) -> None:
        if self.start is not None and self.end is not None and self.start >= self.end:
            raise InvalidParameter("to", f"{self.end.isoformat()} is not after from ({self.start.isoformat()})")

    @property
    def ranged(self) -> bool:
        return self.start is not None or self.end is not None

    @property
    def narrowing(self) -> bool:
        """Anything beyond the window and severities: the backend cannot use its precounted totals."""
        return bool(self.status or self.owner or self.search or self.ranged or self.entity or self.product
                    or self.tactic or self.classification)

    def parameters(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.severities:
            out["severity"] = [s.value for s in self.severities]
        if self.status:
            out["status"] = self.status.label
        if self.owner:
            out["owner"] = self.owner.label
        if self.search:
            out["search"] = self.search
        if self.start:
            out["from"] = self.start.isoformat().replace("+00:00", "Z")
        if self.end:
            out["to"] = self.end.isoformat().replace("+00:00", "Z")
        if self.sort is not SortOrder.SEVERITY:
            out["sort"] = self.sort.value
        if self.entity:
            out["entity"] = self.entity
        for name in ("product", "tactic", "classification"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        return out
