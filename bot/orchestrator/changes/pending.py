"""A proposed incident change waiting for its analyst's Confirm, as plain data kept in conversation state.

At most one per requester in a conversation (responders in a shared chat each keep theirs). It remembers who
asked (their Entra object id is the only thing that may confirm it), the incident as it was when proposed (the
"before" of the card, and the etag the write must match), when it expires, and which message holds its card (so
the card can be updated in place). Its id carries a key of the conversation it was proposed in. Recently finished
actions are remembered briefly so a second click on a card is answered, not re-run.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from bot.sentinel.changes import IncidentChange, IncidentSnapshot, Owner

CONFIRM_WINDOW = timedelta(minutes=5)
MAX_FINISHED_ACTIONS = 20
_KEY = re.compile(r"[0-9a-f]{16}")
MAX_PENDING_ACTIONS = 8  # one per requester; a conversation with more drops its oldest (state stays small)


def new_action_id(conversation_id: str) -> str:
    """A fresh action id that carries, after a "-", a key of the conversation it is proposed in (a hash: it does not
    name the conversation), so a card pressed in another conversation can be told so."""
    return f"{uuid.uuid4().hex[:16]}-{_conversation_key(conversation_id)}"


def proposed_elsewhere(action_id: str, conversation_id: str) -> bool:
    """``action_id`` was proposed in another conversation than ``conversation_id`` (ids from before they carried
    the key: not known, False)."""
    _, dash, key = action_id.rpartition("-")
    return bool(dash) and bool(_KEY.fullmatch(key)) and key != _conversation_key(conversation_id)


def _conversation_key(conversation_id: str) -> str:
    return hashlib.sha256(conversation_id.encode()).hexdigest()[:16]


def same_user(a: Owner, b: Owner) -> bool:
    """The same person, by Entra object id (never by name); someone without one is nobody's match."""
    return bool(a.object_id and b.object_id and a.object_id.lower() == b.object_id.lower())


class OutcomeStatus(StrEnum):
    EXECUTED = "executed"
    NOOP = "noop"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"  # the incident changed: ``renewed`` is the new proposal
    FAILED = "failed"
    RETRY = "retry"  # a transient failure: still pending
    REFUSED = "refused"  # not the requester's click
    NOT_PENDING = "not_pending"
    ELSEWHERE = "elsewhere"  # pressed in another conversation than the one it was proposed in: nothing done
    ALREADY = "already"  # finished before: nothing written


@dataclass
class PendingAction:
    id: str
    change: IncidentChange
    requester: Owner
    incident: IncidentSnapshot  # as read when proposed: the "before", with its etag
    created_at: datetime
    expires_at: datetime
    card_id: str | None = None  # the Teams message showing the confirmation card

    def expired(self, now: datetime) -> bool:
        return now >= self.expires_at

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "change": self.change.to_dict(), "requester": self.requester.to_dict(),
                "incident": self.incident.to_dict(), "created_at": self.created_at.isoformat(),
                "expires_at": self.expires_at.isoformat(), "card_id": self.card_id}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PendingAction:
        return cls(id=str(data["id"]), change=IncidentChange.from_dict(data["change"]),
                   requester=Owner.from_dict(data["requester"]), incident=IncidentSnapshot.from_dict(data["incident"]),
                   created_at=datetime.fromisoformat(data["created_at"]),
                   expires_at=datetime.fromisoformat(data["expires_at"]),
                   card_id=str(data["card_id"]) if data.get("card_id") else None)


@dataclass(frozen=True)
class FinishedAction:
    """What became of an action, so a late or second click gets an answer instead of a second write."""

    id: str
    outcome: OutcomeStatus  # one that closes the card: executed, noop, cancelled, expired, superseded, failed
    headline: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "outcome": self.outcome.value, "headline": self.headline}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FinishedAction:
        return cls(id=str(data["id"]), outcome=OutcomeStatus(str(data["outcome"])),
                   headline=str(data.get("headline") or ""))
