"""Watches: what a conversation subscribed to, and what the poller should post where. Pure: no I/O, no SDKs.

A watch is the filter of an "incidents" command ("watch high open") kept with a conversation. The poller
reads the incidents that changed since its cursor with one query whatever the number of watches, and this
module decides, in Python with the query filters' own semantics (``matches``), which new incidents go to
which conversation (one card each, a digest when many arrive at once) and which posted cards show an
incident whose state has changed since (closed, reassigned) and must be updated in place. The Teams
surface stores watches and sends; the decisions are here so they can be tested without either.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

from bot.sentinel.models import ChangedIncident, Incident
from bot.sentinel.params import SELF_WORDS, InvalidParameter, Severity
from bot.sentinel.queries import IncidentsQuery, make_query

MAX_WATCHES_PER_CONVERSATION = 10
DIGEST_OVER = 5  # more new incidents than this for one conversation in one poll: one digest card
OVERLAP = timedelta(minutes=5)  # each poll re-reads this much before its cursor: late rows are not missed
NEW_GRACE = timedelta(minutes=10)  # an incident created this long before its watch still counts as new
MAX_SEEN = 5000  # (incident, version) pairs remembered within the overlap
# What a watch cannot follow: new incidents have no window, order or page; from/to and entities are not tracked.
_NOT_FOR_WATCHES = {"time_window": "a time window", "limit": "a number of rows", "sort": "an order",
                    "from": "a start time", "to": "an end time", "entity": "an entity"}
# Nor what the poller's incident rows do not carry.
_NOT_READ_BY_POLLER = {"product": "products", "tactic": "tactics"}


@dataclass(frozen=True)
class Snapshot:
    """An incident as the poller saw it: what its cards show and what watch filters compare."""

    number: int
    title: str
    severity: str
    status: str
    created: datetime | None = None
    last_modified: datetime | None = None
    time_generated: datetime | None = None  # the row's time: the poller's cursor
    owner_id: str = ""
    owner_upn: str = ""
    owner_email: str = ""
    owner_name: str = ""  # Owner.assignedTo
    description: str = ""  # compared by "search", never stored with a card
    url: str = ""
    classification: str = ""
    alert_count: int = 0

    @property
    def owner(self) -> str | None:
        """The owner as the incident list shows it (assignedTo, else email, else sign-in name)."""
        return self.owner_name or self.owner_email or self.owner_upn or None

    @property
    def version(self) -> str:
        """This state of the incident, for dedupe: its last change (or, without one, its row's time)."""
        moment = self.last_modified or self.time_generated
        return moment.isoformat() if moment else ""

    def shown(self) -> tuple[str, str, str | None, str, str]:
        """What a posted card shows that can change: when it differs, the card is updated."""
        return self.severity, self.status, self.owner, self.title, self.classification

    def incident(self) -> Incident:
        return Incident(number=self.number, title=self.title, severity=self.severity, status=self.status,
                        owner=self.owner, created=self.created, last_modified=self.last_modified,
                        alert_count=self.alert_count, tactics=(), products=(), url=self.url,
                        classification=self.classification or None)

    def to_dict(self) -> dict[str, Any]:
        """Stored with a card: everything but the description (long, attacker-written, and not shown)."""
        out = {k: v for k, v in asdict(self).items() if v not in ("", None, 0) and k != "description"}
        for name in ("created", "last_modified", "time_generated"):
            if isinstance(out.get(name), datetime):
                out[name] = out[name].isoformat()
        return out

    @classmethod
    def of(cls, changed: ChangedIncident) -> Snapshot:
        """From the workspace's changed-incident record: the incident, its row's time, the owner's fields and the
        description (what the filters compare)."""
        i = changed.incident
        return cls(number=i.number, title=i.title, severity=i.severity, status=i.status, created=i.created,
                   last_modified=i.last_modified, time_generated=changed.time_generated,
                   owner_id=changed.owner_object_id or "", owner_upn=changed.owner_upn or "",
                   owner_email=changed.owner_email or "",
                   owner_name=changed.owner_assigned_to or (i.owner if not (changed.owner_email or changed.owner_upn)
                                                            else "") or "",
                   description=changed.description, url=i.url, classification=i.classification or "",
                   alert_count=i.alert_count)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Snapshot:
        values = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        for name in ("created", "last_modified", "time_generated"):
            if isinstance(values.get(name), str):
                values[name] = _moment(values[name])
        return cls(**values)


_OURS = ("owner_is_creator", "owner_name")  # kept with a watch's arguments, not the query's


@dataclass(frozen=True)
class WatchFilter:
    """A watch's filter: the incidents command's arguments (validated, "mine" as the creator's object id)."""

    arguments: dict[str, Any]

    @cached_property  # checked once per watch loaded, not once per incident compared
    def query(self) -> IncidentsQuery:
        """The incidents query these arguments make (make_query takes its own parameters; the creator flag is ours)."""
        query = make_query(IncidentsQuery.tool, {k: v for k, v in self.arguments.items() if k not in _OURS})
        assert isinstance(query, IncidentsQuery)
        return query

    @property
    def label(self) -> str:
        """How the watch reads back: "high open", "medium unassigned", "all new incidents"."""
        a = self.arguments
        words = [str(a["min_severity"]).lower() + ("+" if a["min_severity"] != "High" else "")
                 if "min_severity" in a else "",
                 str(a.get("status") or "").lower(),
                 "mine" if a.get("owner_is_creator") else ("unassigned" if a.get("owner") == "unassigned"
                                                          else (f"owner {a['owner']}" if a.get("owner") else "")),
                 f'search "{a["search"]}"' if a.get("search") else "",
                 str(a.get("classification") or "")]
        return " ".join(w for w in words if w) or "all new incidents"

    def matches(self, incident: Snapshot) -> bool:
        """Whether the incident's latest state passes the filter, as query_incidents' KQL would decide."""
        query = self.query
        filters = query.filters
        if incident.severity not in {s.value for s in query.severities}:
            return False
        if filters.status is not None and incident.status not in filters.status.statuses:
            return False
        if filters.owner is not None:
            if filters.owner.person is None:
                if incident.owner_id or incident.owner:
                    return False
            else:
                # "mine": the creator's object id, or their name where the incident names its owner only.
                wanted = {filters.owner.person.casefold(), str(self.arguments.get("owner_name") or "").casefold()}
                fields = (incident.owner_id, incident.owner_upn, incident.owner_email, incident.owner_name,
                          incident.owner_upn.split("@")[0] if incident.owner_upn else "")
                if not any(f and f.casefold() in wanted for f in fields):
                    return False
        if filters.search is not None:
            needle = filters.search.casefold()
            if needle not in incident.title.casefold() and needle not in incident.description.casefold():
                return False
        return filters.classification is None or incident.classification == filters.classification


def watch_filter(arguments: Mapping[str, Any], me: str | None, my_name: str | None = None) -> WatchFilter:
    """The filter of a "watch ..." command, or InvalidParameter saying what a watch cannot take."""
    for name, what in _NOT_FOR_WATCHES.items():
        if name in arguments:
            raise InvalidParameter(name, f"a watch posts incidents as they arrive, so it takes no {what}; use the "
                                         'severity, status, owner and search filters (e.g. "watch high open")')
    for name, what in _NOT_READ_BY_POLLER.items():
        if name in arguments:
            raise InvalidParameter(name, f"a watch cannot follow {what} (the poller does not read them); use the "
                                         "severity, status, owner, search and classification filters")
    wanted = dict(arguments)
    owner = wanted.get("owner")
    if isinstance(owner, str) and owner.strip().lower() in SELF_WORDS:
        if not me:
            raise InvalidParameter("owner", '"mine" needs a signed-in Teams user')
        wanted["owner"], wanted["owner_is_creator"] = me, True
        if my_name:
            wanted["owner_name"] = my_name
    checked = WatchFilter(wanted)
    checked.query  # noqa: B018 - validates every value now, so a bad watch is refused when made, not at each poll
    return checked


@dataclass(frozen=True)
class Watch:
    """One watch of one conversation."""

    filter: WatchFilter
    created_by: str  # a display name
    created_at: datetime
    created_by_id: str | None = None
    # Where it was made, as the access policy reads an activity (tenant, object id, conversation type, team,
    # channel): each poll checks it again, so a watch stops posting where the bot may no longer answer.
    where: dict[str, str | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"filter": self.filter.arguments, "created_by": self.created_by,
                "created_at": self.created_at.isoformat(), "created_by_id": self.created_by_id, "where": self.where}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Watch:
        where = data.get("where")
        return cls(WatchFilter(dict(data["filter"])), str(data.get("created_by") or "someone"),
                   _moment(str(data["created_at"])), data.get("created_by_id"),
                   dict(where) if isinstance(where, dict) else {})

    def describe(self, n: int) -> str:
        return f"{n}. {self.filter.label} (by {self.created_by}, {self.created_at:%d %b %H:%M} UTC)"

    def wants(self, incident: Snapshot) -> bool:
        """A new incident for this watch: it matches, and it was created after the watch (give or take)."""
        created = incident.created or incident.time_generated
        if created is not None and created < self.created_at - NEW_GRACE:
            return False
        try:
            return self.filter.matches(incident)
        except InvalidParameter:  # a stored filter this version no longer accepts: it matches nothing, never fails
            return False


@dataclass(frozen=True)
class Subscriber:
    """A conversation with watches: its key (the conversation id) and its stored conversation reference."""

    key: str
    reference: dict[str, Any]
    watches: tuple[Watch, ...]


@dataclass(frozen=True)
class Posted:
    """A card the poller posted: where, and the incidents it shows as they were then."""

    key: str  # the card's own record
    conversation: str
    incidents: tuple[Snapshot, ...]


@dataclass(frozen=True)
class Post:
    """Post a card (one incident, or a digest) in a conversation."""

    conversation: str
    reference: dict[str, Any]
    incidents: tuple[Snapshot, ...]
    label: str  # the watches it answers

    @property
    def digest(self) -> bool:
        return len(self.incidents) > 1


@dataclass(frozen=True)
class Update:
    """Update a posted card in place: the incidents it shows, with the changed ones' new state."""

    card: Posted
    incidents: tuple[Snapshot, ...]


@dataclass
class Plan:
    posts: list[Post] = field(default_factory=list)
    updates: list[Update] = field(default_factory=list)


def plan(changed: Sequence[Snapshot], subscribers: Iterable[Subscriber],
         posted: Mapping[int, Sequence[Posted]]) -> Plan:
    """What to post and update for the incidents that changed (latest state each): new matches go to each
    conversation watching for them that has not had them yet; cards showing an incident whose shown state
    changed are updated."""
    out = Plan()
    latest = {i.number: i for i in changed}
    updated: dict[str, Update] = {}
    for number, incident in latest.items():
        for card in posted.get(number, ()):
            base = updated[card.key].incidents if card.key in updated else card.incidents
            if any(i.number == number and i.shown() != incident.shown() for i in base):
                updated[card.key] = Update(card, tuple(incident if i.number == number else i for i in base))
    out.updates = list(updated.values())
    for subscriber in subscribers:
        had = {n for n, cards in posted.items() for c in cards if c.conversation == subscriber.key}
        new = [i for i in latest.values()
               if i.number not in had and any(w.wants(i) for w in subscriber.watches)]
        if not new:
            continue
        new.sort(key=lambda i: (Severity(i.severity).rank if i.severity in _SEVERITIES else len(_SEVERITIES), i.number))
        labels = ", ".join(dict.fromkeys(w.filter.label for w in subscriber.watches))
        if len(new) > DIGEST_OVER:
            out.posts.append(Post(subscriber.key, subscriber.reference, tuple(new), labels))
        else:
            out.posts += [Post(subscriber.key, subscriber.reference, (i,), labels) for i in new]
    return out


_SEVERITIES = {s.value for s in Severity}


@dataclass
class Cursor:
    """Where the poller is: the latest row time it has handled, and the (incident, version) pairs handled within
    the overlap before it, so the overlap re-reads nothing twice."""

    at: datetime | None = None
    seen: dict[str, str] = field(default_factory=dict)  # "number@version" -> the row's time (ISO)

    def since(self, now: datetime) -> datetime:
        """Where the next query starts: the overlap before the cursor (first run: the overlap before now)."""
        return (self.at or now) - OVERLAP

    def fresh(self, rows: Iterable[Snapshot]) -> list[Snapshot]:
        """The rows not handled yet, latest state per incident."""
        latest: dict[int, Snapshot] = {}
        for row in rows:
            if f"{row.number}@{row.version}" in self.seen:
                continue
            kept = latest.get(row.number)
            if kept is None or (row.time_generated or _EPOCH) >= (kept.time_generated or _EPOCH):
                latest[row.number] = row
        return list(latest.values())

    def advance(self, rows: Iterable[Snapshot], now: datetime) -> None:
        """Mark ``rows`` handled and move to the latest row time (never past now, never back)."""
        for row in rows:
            moment = min(row.time_generated or now, now)
            self.seen[f"{row.number}@{row.version}"] = moment.isoformat()
            if self.at is None or moment > self.at:
                self.at = moment
        if self.at is not None:
            floor = (self.at - OVERLAP).isoformat()
            self.seen = {k: v for k, v in self.seen.items() if v >= floor}
            if len(self.seen) > MAX_SEEN:
                self.seen = dict(sorted(self.seen.items(), key=lambda kv: kv[1])[-MAX_SEEN:])

    def to_dict(self) -> dict[str, Any]:
        return {"at": self.at.isoformat() if self.at else None, "seen": self.seen}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Cursor:
        if not data:
            return cls()
        at = data.get("at")
        seen = data.get("seen")
        return cls(_moment(at) if isinstance(at, str) else None,
                   {str(k): str(v) for k, v in seen.items()} if isinstance(seen, dict) else {})


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _moment(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)

