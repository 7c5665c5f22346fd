"""Incident changes in Teams: the confirmation card a proposal gets, the Confirm and Cancel presses (and a typed
"yes" or "cancel" while the speaker's change waits), the outcome card, and who is asking (their sign-in name from
Teams).

The confirmation desk (bot.orchestrator.changes) decides; this module only renders its answers and asks it.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from botbuilder.core import TurnContext
from botbuilder.core.teams import TeamsInfo

from bot import cards
from bot.cards import Verb
from bot.orchestrator.changes import (
    Actor,
    ConfirmationDesk,
    Outcome,
    OutcomeStatus,
    PendingAction,
    Proposal,
    ProposalStatus,
)
from bot.sentinel.changes import ChangeKind, Owner
from bot.teams import replies
from bot.teams.mentions import TeamsNotifier, war_room
from bot.teams.state import ConversationData
from bot.teams.turn import Reply, TurnRequest
from bot.teams.watches import WatchStore

log = logging.getLogger(__name__)
MEMBER_LOOKUP_TIMEOUT_S = 3.0
# Whole messages that answer a pending change's card as its buttons do (any case; "." "," "!" ignored).
_TYPED_DECISIONS = dict.fromkeys(("yes", "confirm", "confirm it", "yes do it", "go ahead"), Verb.CHANGE_CONFIRM)
_TYPED_DECISIONS |= dict.fromkeys(("no", "cancel", "cancel it"), Verb.CHANGE_CANCEL)
_TYPED_PUNCTUATION = re.compile(r"[.,!]")
_PROPOSAL_TITLES = {ProposalStatus.REFUSED: "I can't make that change",
                    ProposalStatus.INVALID: "I could not prepare that change",
                    ProposalStatus.FAILED: "I could not prepare that change",
                    ProposalStatus.NOBODY_ON_CALL: "Nobody is on call"}


class TeamsChanges:
    """The Teams side of the confirmation desk (None: the bot was started without write actions)."""

    def __init__(self, desk: ConfirmationDesk | None, watches: WatchStore | None, clock: Callable[[], datetime],
                 demo: bool) -> None:
        self.desk = desk
        self.watches = watches
        self.clock = clock
        self.demo = demo

    async def propose(self, context: TurnContext, data: ConversationData, request: TurnRequest,
                       proposed: tuple[str, dict[str, Any]]) -> Reply:
        """A change asked for by a command or a card button: a confirmation card, or why not."""
        if self.desk is None:
            return Reply([replies.error("Incident changes are not available", "Make the change in the Sentinel "
                                        "portal. This bot was started without write actions.")])
        tool, arguments = proposed
        proposal = await self.desk.propose(data.conversation, await self.actor(context, request), tool, arguments,
                                           source="button" if request.value else "command")
        reply = Reply([])
        self.add_proposal(reply, proposal)
        return reply

    def add_proposal(self, reply: Reply, proposal: Proposal) -> None:
        if proposal.replaced is not None:
            replaced = Outcome(OutcomeStatus.CANCELLED, "Replaced by a newer request.", action=proposal.replaced)
            reply.card_updates.append((proposal.replaced.card_id, self.outcome_card(replaced)))
        if proposal.action is None:
            title = _PROPOSAL_TITLES.get(proposal.status)
            if title is not None:
                reply.activities.append(replies.error(title, proposal.message))
            else:
                reply.activities.append(replies.message(proposal.message))
            return
        reply.activities.append(replies.message(card_list=[self.confirmation_card(proposal.action)]))
        reply.confirmation = proposal.action

    async def decide(self, context: TurnContext, data: ConversationData, request: TurnRequest, *,
                      confirm: bool) -> Reply:
        """Confirm or Cancel on a confirmation card."""
        action_id = str((request.value or {}).get("id") or "")[:64]
        if self.desk is None:
            return Reply([replies.message("Incident changes are not available in this bot any more.")])
        actor = await self.actor(context, request)
        pending = data.conversation.pending(action_id)
        card_id = (pending.card_id if pending is not None else None) or request.reply_to_id
        if confirm:
            room = None  # an escalation goes to the incident's war room when a watch posted it elsewhere
            if pending is not None and pending.change.kind is ChangeKind.ESCALATE:
                room = await war_room(self.watches, pending.change.incident_number, request.conversation_id)
            outcome = await self.desk.confirm(data.conversation, action_id, actor,
                                              notifier=TeamsNotifier(context, room=room, demo=self.demo))
        else:
            outcome = self.desk.cancel(data.conversation, action_id, actor)
        reply = _decided(outcome, typed=bool(request.text.strip()))
        if outcome.closes_card:
            reply.card_updates.append((card_id, self.outcome_card(outcome)))
        if outcome.renewed is not None:
            reply.activities.append(replies.message(card_list=[self.confirmation_card(
                outcome.renewed, notice="This incident changed since you asked. Check its current state and "
                                        "confirm again.")]))
            reply.confirmation = outcome.renewed
        return reply

    def typed_decision(self, data: ConversationData, request: TurnRequest) -> TurnRequest | None:
        """Typed text that answers a pending change's card ("yes", "confirm", "cancel", ...): the request as the
        press of that card's Confirm or Cancel button (the same checks: requester, expiry, etag). The card is the
        speaker's own pending change; a speaker with none presses the newest one's (and is told whose it is).
        None when nothing is pending or the text is anything else."""
        waiting = data.conversation.pending_actions
        pending = data.conversation.pending_for(self.actor_now(request).user) or (waiting[-1] if waiting else None)
        if pending is None or self.desk is None:
            return None
        verb = _TYPED_DECISIONS.get(" ".join(_TYPED_PUNCTUATION.sub(" ", request.text.lower()).split()))
        if verb is None:
            return None
        return replace(request, value={"action": verb.value, "id": pending.id}, reply_to_id=pending.card_id)

    def on_new_request(self, data: ConversationData, request: TurnRequest) -> list[Outcome]:
        if self.desk is None:
            return []
        return self.desk.on_new_request(data.conversation, self.actor_now(request))

    def confirmation_card(self, action: PendingAction, notice: str | None = None) -> dict[str, Any]:
        return cards.change_confirmation(action.change, action.incident, action_id=action.id,
                                         requester=action.requester.label, expires_at=action.expires_at,
                                         now=self.clock(), demo=self.demo, notice=notice,
                                         requester_sign_in=action.requester.user_principal_name)

    def outcome_card(self, outcome: Outcome) -> dict[str, Any]:
        action = outcome.action
        assert action is not None
        return cards.change_outcome(action.change, action.incident, outcome=outcome.status,
                                    headline=outcome.headline, detail=outcome.detail, after=outcome.after,
                                    requester=action.requester.label, confirmed_by=outcome.confirmed_by,
                                    sent=outcome.sent, audit_comment=outcome.audit_comment,
                                    demo=self.demo, action_id=action.id,
                                    posted=outcome.posted.to_dict() if outcome.posted else None,
                                    audit_record=outcome.audit_record)

    def may_change(self, request: TurnRequest) -> bool:
        """Whether this analyst gets the change buttons on incident cards (writes on, and a responder)."""
        return self.desk is not None and self.desk.enabled and \
            self.desk.policy.refusal(self.actor_now(request).user) is None

    def actor_now(self, request: TurnRequest) -> Actor:
        return Actor(Owner(object_id=request.user_aad_id, name=request.user_name), request.conversation_id,
                     request.conversation_type)

    async def actor(self, context: TurnContext, request: TurnRequest) -> Actor:
        """Who asks, with their sign-in name from Teams (for "assign to me" and the audit comment)."""
        actor = self.actor_now(request)
        if not request.user_aad_id or self.desk is None or self.desk.policy.refusal(actor.user):
            return actor
        try:
            member = await asyncio.wait_for(TeamsInfo.get_member(context, request.user_id), MEMBER_LOOKUP_TIMEOUT_S)
        except Exception as error:  # noqa: BLE001 - the object id is what authorises; the name is a nicety
            log.info("could not look up the member's sign-in name (%s)", type(error).__name__)
            return actor
        user = Owner(object_id=request.user_aad_id,
                     user_principal_name=getattr(member, "user_principal_name", None) or None,
                     name=getattr(member, "name", None) or request.user_name,
                     email=getattr(member, "email", None) or None)
        return Actor(user, request.conversation_id, request.conversation_type)


def proposed_from_card(value: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A change button on a card: its tool and arguments, with the card's inputs (classification, comment,
    severity) filled in by the analyst."""
    raw_arguments = value.get("arguments")
    arguments: dict[str, Any] = dict(raw_arguments) if isinstance(raw_arguments, dict) else {}
    for name in ("status", "classification", "classification_reason", "comment", "severity", "assignee"):
        if isinstance(value.get(name), str) and value[name].strip():
            arguments[name] = value[name]
    if isinstance(value.get("classification_comment"), str) and value["classification_comment"].strip():
        arguments["comment"] = value["classification_comment"]  # the close form's own comment box
    if isinstance(value.get("escalation_reason"), str) and value["escalation_reason"].strip():
        arguments["reason"] = value["escalation_reason"]  # the escalate form's inputs
    if value.get("escalation_assign") == "true":
        arguments["assign"] = True
    if ":" in str(arguments.get("classification") or ""):
        # The close form offers the portal's classification-and-reason pairs, e.g. "FalsePositive:InaccurateData".
        arguments["classification"], arguments["classification_reason"] = arguments["classification"].split(":", 1)
    return str(value.get("tool") or "")[:40], arguments


def _decided(outcome: Outcome, *, typed: bool) -> Reply:
    """One message per change: a pressed Confirm or Cancel is answered by its card, updated in place to the outcome
    (the text goes out only to close progress Teams is showing, or when the card cannot be updated); a typed "yes"
    or "cancel" also gets the outcome's line under it, where the analyst is looking; an outcome that keeps the card
    (a transient failure) is said in a message."""
    said = replies.message(_outcome_text(outcome))
    if typed or not outcome.closes_card:
        return Reply([said])
    return Reply([], quiet=said)


def _outcome_text(outcome: Outcome) -> str:
    """The short message that goes with an updated card (the card carries the details)."""
    return outcome.headline + (f" {outcome.detail}" if outcome.detail and (outcome.status != OutcomeStatus.EXECUTED
                                                                            or outcome.posted is not None) else "")
