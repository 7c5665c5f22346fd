"""Escalation to the on-call analyst: what is posted, to whom, and how the surface that posts it answers.

An escalation is an incident change (``ChangeKind.ESCALATE``) confirmed like the others; on Confirm the
confirmation desk assigns the incident (when asked), has the surface post the ``EscalationNotice`` in the
conversation (Teams: an @mention of the on-call analyst and of the owner, through ``Notifier``), then adds the
incident comment. This module is the part the orchestrator and the surfaces share: plain data, no SDK.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
