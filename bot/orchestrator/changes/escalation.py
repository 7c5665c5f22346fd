"""Escalation to the on-call analyst: what is posted, to whom, and how the surface that posts it answers.

An escalation is an incident change (``ChangeKind.ESCALATE``) confirmed like the others; on Confirm the
confirmation desk assigns the incident (when asked), has the surface post the ``EscalationNotice`` in the
conversation (Teams: an @mention of the on-call analyst and of the owner, through ``Notifier``), then adds the
incident comment. This module is the part the orchestrator and the surfaces share: plain data, no SDK.

The brake (``EscalationLedger``): an incident is escalated to one on-call analyst at most once per
``Brake.repeat`` (one open escalation per incident and person), and one analyst is paged at most once per
``Brake.cooldown`` whatever the incident. Each page is recorded in the state store, one item per analyst written
with its e_tag, so every worker process and instance sharing the store claims from the same record; a request the
brake stops is told, in words, who was paged, by whom and when, and when it may ask again.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from bot.sentinel.changes import IncidentSnapshot, OnCallContact, Owner
from bot.sentinel.models import one_line


@dataclass(frozen=True)
class EscalationNotice:
    """What the surface posts: the incident as it is now, who it goes to, who asks, and what they ask."""

    incident: IncidentSnapshot
    on_call: OnCallContact
    requester: Owner
    reason: str | None
    assigned: bool  # the incident was assigned to the on-call analyst before the notice went out


@dataclass(frozen=True)
class Named:
    """A person the posted message names: @mentioned (with their Teams id), reached in a 1:1 chat because they are
    not in the conversation, or in plain text and why."""

    name: str
    role: str  # "on call" or "owner"
    teams_id: str | None = None  # set when mentioned
    not_notified: str | None = None  # why Teams could not notify them in the conversation
    direct_chat: str | None = None  # the 1:1 conversation they were sent the incident in

    @property
    def mentioned(self) -> bool:
        return self.teams_id is not None

    @property
    def reached(self) -> str:
        """How Teams reached them: "mention", "direct" (a 1:1 message) or "none"."""
        return "mention" if self.mentioned else "direct" if self.direct_chat else "none"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "role": self.role, "mentioned": self.mentioned,
                               "reached": self.reached}
        if self.teams_id:
            out["teams_id"] = self.teams_id
        if self.not_notified:
            out["not_notified"] = self.not_notified
        if self.direct_chat:
            out["direct_chat"] = self.direct_chat
        return out


@dataclass(frozen=True)
class Posted:
    """What was posted, exactly: the text (with its mention markup), where, and each person named."""

    text: str
    conversation_id: str
    activity_id: str | None
    named: tuple[Named, ...] = field(default_factory=tuple)
    place: str | None = None  # where, when not the conversation the escalation was confirmed in

    def person(self, role: str) -> Named | None:
        return next((n for n in self.named if n.role == role), None)

    def to_dict(self) -> dict[str, Any]:
        """As the message went out (its text and mention entities) and who it named how."""
        entities = [{"type": "mention", "text": f"<at>{n.name}</at>", "mentioned": {"id": n.teams_id, "name": n.name}}
                    for n in self.named if n.teams_id]
        return {"conversation_id": self.conversation_id, "activity_id": self.activity_id, "place": self.place,
                "named": [n.to_dict() for n in self.named],
                "message": {"type": "message", "textFormat": "markdown", "text": self.text, "entities": entities}}


class NotifyError(Exception):
    """The notice could not be posted; ``message`` is safe to show."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Notifier(Protocol):
    """Posts an escalation notice where the escalation was confirmed (the surface knows how)."""

    async def post(self, notice: EscalationNotice) -> Posted:
        """Post ``notice``; raise NotifyError when it could not be posted."""


def unnotified_advice(posted: Posted, on_call: OnCallContact) -> str | None:
    """What the analyst should know when the on-call analyst was named but not notified in Teams."""
    named = posted.person("on call")
    if named is None or named.mentioned:
        return None
    if named.direct_chat:
        return (f"{one_line(named.name, 80)} is not in this conversation ({named.not_notified or 'not found'}): "
                "I sent them the incident in a 1:1 chat, with a link back here.")
    ways = [f"phone {on_call.phone}" if on_call.phone else "", f"email {on_call.person.email}"
            if on_call.person.email else ""]
    how = " or ".join(w for w in ways if w)
    return (f"{one_line(named.name, 80)} could not be notified in Teams ({named.not_notified or 'not found'}); "
            f"the message names them in plain text. Reach them another way" + (f": {how}." if how else "."))


# ---- the brake ---------------------------------------------------------------------------------------------------

LEDGER_PREFIX = "sentinel/escalations/"
_CLAIM_RETRIES = 8
MAX_PAGES_KEPT = 50  # per analyst, within the longer of the two windows


@dataclass(frozen=True)
class Brake:
    """How often one analyst may be paged: per incident (``repeat``) and at all (``cooldown``)."""

    repeat: timedelta = timedelta(minutes=60)
    cooldown: timedelta = timedelta(seconds=120)

    @property
    def kept(self) -> timedelta:
        return max(self.repeat, self.cooldown)


@dataclass(frozen=True)
class Page:
    """One escalation that paged an on-call analyst: the incident, who asked, when, and its action's id."""

    incident: int
    requester: str
    at: datetime
    action_id: str

    def to_dict(self) -> dict[str, Any]:
        return {"incident": self.incident, "requester": self.requester, "at": self.at.isoformat(),
                "action_id": self.action_id}

    @classmethod
    def from_dict(cls, raw: Any) -> Page | None:
        try:
            at = datetime.fromisoformat(str(raw["at"]))
            return cls(int(raw["incident"]), str(raw["requester"]), at if at.tzinfo else at.replace(tzinfo=UTC),
                       str(raw.get("action_id") or ""))
        except (KeyError, TypeError, ValueError):
            return None


class Records(Protocol):
    """Where the ledger keeps its items: the bot's state store (botbuilder's ``Storage`` has this shape: a write
    with an item's ``e_tag`` fails with a ``KeyError`` when someone wrote the item since it was read)."""

    async def read(self, keys: list[str]) -> dict[str, Any]: ...

    async def write(self, changes: dict[str, Any]) -> None: ...


def blocking(pages: list[Page], incident: int, now: datetime, brake: Brake) -> Page | None:
    """The page that stops paging the analyst again for ``incident`` now, or None."""
    for page in sorted(pages, key=lambda p: p.at, reverse=True):
        if page.incident == incident and now - page.at < brake.repeat:
            return page
        if now - page.at < brake.cooldown:
            return page
    return None


def braked_text(page: Page, incident: int, person: str, now: datetime, brake: Brake) -> str:
    """What the requester is told when ``page`` stops their escalation of ``incident`` to ``person``."""
    when = f"{_ago(now - page.at)} (at {page.at.astimezone(UTC):%H:%M:%S} UTC, by {one_line(page.requester, 80)})"
    if page.incident == incident:
        until = page.at + brake.repeat
        return (f"Not paged again: #{incident} was already escalated to {person} {when}. One escalation per "
                f"incident and person stays open for {_span(brake.repeat)}, until {until.astimezone(UTC):%H:%M} "
                "UTC: follow up in that escalation's thread, or reach them another way.")
    until = page.at + brake.cooldown
    return (f"Not paged yet: {person} was paged {when} for #{page.incident}, and an on-call analyst is paged at most "
            f"once every {_span(brake.cooldown)}. Ask again after {until.astimezone(UTC):%H:%M:%S} UTC, or reach "
            "them another way.")


class EscalationLedger:
    """The pages of each on-call analyst, kept in ``records`` under one key per analyst."""

    def __init__(self, records: Records, brake: Brake, create_only: str = "*") -> None:
        self.records = records
        self.brake = brake
        self.create_only = create_only  # the e_tag that makes the records' first write of an item create-only

    async def check(self, person: str, incident: int, now: datetime) -> Page | None:
        """The page that would stop an escalation of ``incident`` to ``person`` now (nothing is recorded)."""
        _, pages = await self._read(person)
        return blocking(pages, incident, now, self.brake)

    async def claim(self, person: str, page: Page) -> Page | None:
        """Record ``page`` unless the brake stops it: None when recorded, else the page that stops it. Atomic
        across processes: written with the e_tag read, read again on a conflict."""
        for _ in range(_CLAIM_RETRIES):
            item, pages = await self._read(person)
            stop = blocking(pages, page.incident, page.at, self.brake)
            if stop is not None:
                return stop
            kept = [p for p in pages if page.at - p.at < self.brake.kept][-(MAX_PAGES_KEPT - 1):]
            if await self._write(person, item, [*kept, page]):
                return None
        raise RuntimeError("the escalation record kept changing; try again")

    async def release(self, person: str, page: Page) -> None:
        """Forget ``page`` (its message could not be posted: asking again must not be braked by it)."""
        for _ in range(_CLAIM_RETRIES):
            item, pages = await self._read(person)
            if page not in pages or await self._write(person, item, [p for p in pages if p != page]):
                return

    async def _read(self, person: str) -> tuple[dict[str, Any], list[Page]]:
        key = _key(person)
        item = dict((await self.records.read([key])).get(key) or {})
        pages = [p for p in (Page.from_dict(raw) for raw in item.get("pages") or []) if p is not None]
        return item, pages

    async def _write(self, person: str, item: dict[str, Any], pages: list[Page]) -> bool:
        item = {**item, "pages": [p.to_dict() for p in pages]}
        item.setdefault("e_tag", self.create_only)  # a new item: written only if nobody wrote it first
        try:
            await self.records.write({_key(person): item})
        except KeyError:  # written by someone else since it was read
            return False
        return True


def _key(person: str) -> str:
    """One item per analyst (their sign-in name, any case), under a key every store accepts."""
    return LEDGER_PREFIX + hashlib.sha256(person.strip().lower().encode()).hexdigest()[:32]


def _ago(delta: timedelta) -> str:
    seconds = max(int(delta.total_seconds()), 0)
    if seconds < 90:
        return f"{seconds} s ago"
    return f"{seconds // 60} min ago" if seconds < 5400 else f"{seconds // 3600} h ago"


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds % 3600 == 0 and seconds >= 3600:
        return f"{seconds // 3600} h"
    return f"{seconds // 60} min" if seconds % 60 == 0 and seconds >= 60 else f"{seconds} s"
