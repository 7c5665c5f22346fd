"""Incident changes with a human in the loop: propose, confirm (by the same person), execute, audit.

The model, a command or a card button can only *propose* a change. A proposal reads the incident from
Sentinel (its resource name and etag), becomes its requester's one pending action in the conversation
(replacing only their own earlier one: responders sharing a chat each keep theirs), and is shown on a card.
Only the analyst who asked (matched by Entra object id, never by display name) can confirm it, within five
minutes, in the conversation it was proposed in. Confirming re-reads the incident: if it changed in the
meantime the analyst is asked again with the new state; otherwise the change is written with the etag, and a
comment naming the analyst is added to the incident. Every step writes one structured audit record (who, what,
when, where, result) without message content. A second click finds the action finished and writes nothing.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from bot.orchestrator.changes.escalation import (
    EscalationLedger,
    EscalationNotice,
    Notifier,
    NotifyError,
    Page,
    Posted,
    braked_text,
    unnotified_advice,
)
from bot.orchestrator.changes.pending import (
    CONFIRM_WINDOW,
    OutcomeStatus,
    PendingAction,
    new_action_id,
    proposed_elsewhere,
    same_user,
)
from bot.orchestrator.changes.write_guard import REFUSAL_TEXT, Refusal
from bot.orchestrator.references import RefKind
from bot.sentinel.changes import (
    ChangeKind,
    IncidentChange,
    IncidentSnapshot,
    IncidentWriter,
    OnCallContact,
    Owner,
    WriteError,
    comment_request,
    escalation_comment,
    make_change,
    update_request,
)
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import IncidentDetail, OnCallEntry, QueryResult, one_line
from bot.sentinel.params import InvalidParameter
from bot.sentinel.queries import incident_detail, on_call
from bot.tools.registry import TOOLS
from bot.tools.write_tools import change_from_arguments, incident_ref

if TYPE_CHECKING:  # the desk works on a conversation; the conversation stores its pending action
    from bot.orchestrator.conversation import Conversation

log = logging.getLogger(__name__)
audit_log = logging.getLogger("bot.audit")
ON_CALL_TOOL = on_call.SPEC.name  # the roster query
_COMMENT_IDS = uuid.UUID("6f1c1a52-6b8e-4a47-9d0c-2b8f3c1d5e70")  # namespace: audit comment id from action id

WRITES_OFF = ("Changing incidents from Teams is turned off for this bot. Make the change in the Sentinel portal, "
              "or ask your administrator to enable write actions (WRITE_ACTIONS_ENABLED and WRITE_RESPONDERS).")
NOT_A_RESPONDER = ("You are not on this bot's list of responders, so I cannot change incidents for you. Make the "
                   "change in the Sentinel portal, or ask your administrator to add your Entra object id to "
                   "WRITE_RESPONDERS.")
UNKNOWN_USER = ("I could not tell who you are (your message carries no Entra object id), so I cannot change "
                "incidents for you.")

Clock = Callable[[], datetime]


@dataclass(frozen=True)
class Actor:
    """Who is acting, and where: the Teams user (their Entra object id is what counts) and conversation."""

    user: Owner
    conversation_id: str = ""
    conversation_type: str = "personal"


@dataclass(frozen=True)
class WritePolicy:
    """Write actions are off unless enabled, and then only for the listed responders' object ids."""

    enabled: bool = False
    responders: frozenset[str] = frozenset()

    def refusal(self, user: Owner) -> str | None:
        if not self.enabled:
            return WRITES_OFF
        if not user.object_id:
            return UNKNOWN_USER
        if user.object_id.lower() not in self.responders:
            return NOT_A_RESPONDER
        return None


class ProposalStatus(StrEnum):
    PROPOSED = "proposed"
    REFUSED = "refused"  # not allowed (writes off, not a responder, the guard)
    INVALID = "invalid"  # a value to correct
    NOOP = "noop"  # already so
    FAILED = "failed"  # Sentinel could not be read
    NOBODY_ON_CALL = "nobody_on_call"  # an escalation with nobody on shift (or no roster to read)


# The outcomes after which the action's card shows the outcome instead of Confirm and Cancel.
_CLOSING = frozenset({OutcomeStatus.EXECUTED, OutcomeStatus.NOOP, OutcomeStatus.CANCELLED, OutcomeStatus.EXPIRED,
                      OutcomeStatus.SUPERSEDED, OutcomeStatus.FAILED})


@dataclass
class Proposal:
    """What became of a request to change an incident."""

    status: ProposalStatus
    message: str  # for the analyst, and (in the tool result) for the model
    action: PendingAction | None = None
    replaced: PendingAction | None = None  # the pending action this one replaced; its card needs updating

    @property
    def proposed(self) -> bool:
        return self.action is not None


@dataclass
class Outcome:
    """What a Confirm or Cancel click (or a new request) did to a pending action."""

    status: OutcomeStatus
    headline: str
    detail: str | None = None
    action: PendingAction | None = None
    after: IncidentSnapshot | None = None
    sent: dict[str, Any] | None = None
    audit_comment: str | None = None
    confirmed_by: str | None = None
    renewed: PendingAction | None = None
    posted: Posted | None = None  # an escalation's message, as posted
    audit_record: dict[str, Any] | None = None  # the record written for this outcome

    @property
    def closes_card(self) -> bool:
        """The action's card should now show this outcome instead of Confirm and Cancel."""
        return self.action is not None and self.status in _CLOSING


class ConfirmationDesk:
    def __init__(self, sentinel: SentinelClient, writer: IncidentWriter | None, policy: WritePolicy,
                 clock: Clock = lambda: datetime.now(UTC)) -> None:
        self.sentinel = sentinel
        self.writer = writer
        self.policy = policy
        self.clock = clock
        # The escalation brake's record, in the state store: set by the app once the store exists (None: no brake).
        self.ledger: EscalationLedger | None = None

    @property
    def enabled(self) -> bool:
        return self.policy.enabled and self.writer is not None

    # ---- proposing ------------------------------------------------------------------------------------------

    async def propose(self, conversation: Conversation, actor: Actor, tool: str, arguments: dict[str, Any],
                      *, source: str = "command") -> Proposal:
        """Validate the request, read the incident, and make it the conversation's pending action."""
        refusal = self.policy.refusal(actor.user) or (None if self.writer else WRITES_OFF)
        if refusal:
            self._audit("refused", actor, tool=tool, source=source, result="not_allowed")
            return Proposal(ProposalStatus.REFUSED, refusal)
        declared = TOOLS.get(tool)
        try:
            if declared is None or not declared.needs_confirmation:
                raise InvalidParameter("tool", f"{tool[:60]!r} is not a write tool")
            number = self._incident_number(conversation, arguments)
            on_call = None
            if declared.change is ChangeKind.ESCALATE:
                found = await self._on_call()
                if isinstance(found, str):
                    self._audit("refused", actor, tool=tool, source=source, result="nobody_on_call")
                    return Proposal(ProposalStatus.NOBODY_ON_CALL, found)
                on_call = found
            change = change_from_arguments(declared, arguments, number, actor.user, on_call)
        except InvalidParameter as error:
            return Proposal(ProposalStatus.INVALID, f"I could not prepare that change: {error}")
        braked = await self._braked(change.on_call, number)
        if braked is not None:  # said now, before a card: the on-call analyst was paged too recently
            self._audit("refused", actor, tool=tool, source=source, result="braked")
            return Proposal(ProposalStatus.NOOP, braked)
        incident = await self._read(number)
        if isinstance(incident, str):
            return Proposal(ProposalStatus.FAILED, incident)
        if change.is_noop_for(incident):
            return Proposal(ProposalStatus.NOOP,
                            f"Nothing to change: #{number} already has {_current(change, incident)}.")
        replaced = conversation.pending_for(actor.user)  # their own: another responder's stays
        if replaced is not None:
            conversation.finish_action(replaced.id, OutcomeStatus.CANCELLED, "Replaced by a newer request")
            self._audit("cancelled", actor, replaced, result="replaced")
        now = self.clock()
        action = PendingAction(new_action_id(actor.conversation_id), change, actor.user, incident, now,
                               now + CONFIRM_WINDOW)
        conversation.add_pending(action)
        self._audit("proposed", actor, action, source=source, result="pending")
        what = (f"escalate to {change.on_call.person.label}, on call now" if change.on_call is not None
                else change.summary())
        return Proposal(ProposalStatus.PROPOSED,
                        f"Proposed, not done yet: {what} on #{number} ({one_line(incident.title, 80)}). "
                        f"{action.requester.label} must press Confirm on the card within 5 minutes; nothing changes "
                        "until then.", action=action, replaced=replaced)

    def refuse(self, actor: Actor, tool: str, refusal: Refusal) -> Proposal:
        """The write guard stopped a model's call: audited, and the model is told why."""
        self._audit("refused", actor, tool=tool, source="model", result=refusal.value)
        return Proposal(ProposalStatus.REFUSED, REFUSAL_TEXT[refusal])

    # ---- confirming and cancelling --------------------------------------------------------------------------

    async def confirm(self, conversation: Conversation, action_id: str, actor: Actor,
                      notifier: Notifier | None = None) -> Outcome:
        """The requester's Confirm: re-read, write with the etag, comment, audit. ``notifier`` posts an
        escalation's message (the surface's part of it)."""
        pending = self._requesters(conversation, action_id, actor, "confirm",
                                   " To make a change yourself, ask me.")
        if isinstance(pending, Outcome):
            return pending
        if pending.expired(self.clock()):
            return self._close(conversation, actor, pending, OutcomeStatus.EXPIRED,
                               "Expired: not confirmed within 5 minutes. Ask again to redo it.")
        refusal = self.policy.refusal(actor.user) or (None if self.writer else WRITES_OFF)
        if refusal or self.writer is None:
            return self._close(conversation, actor, pending, OutcomeStatus.FAILED, "Not done.", detail=refusal)
        writer = self.writer
        try:
            current = await writer.read(pending.incident.name)
            if current.etag != pending.incident.etag:
                return self._renew(conversation, actor, pending, current)
            change = pending.change
            if change.kind is ChangeKind.ESCALATE:
                return await self._escalate(conversation, actor, pending, current, notifier)
            if change.is_noop_for(current):
                return self._close(conversation, actor, pending, OutcomeStatus.NOOP,
                                   f"Nothing to change: #{current.number} already has {_current(change, current)}.")
            audit_comment = _audit_comment(change, actor.user)
            comment_id = str(uuid.uuid5(_COMMENT_IDS, action_id))
            sent = (comment_request(current.name, comment_id, audit_comment) if change.kind is ChangeKind.COMMENT
                    else update_request(current, change)).to_dict()
            after = current if change.kind is ChangeKind.COMMENT else await writer.update(current, change)
        except WriteError as error:
            return await self._not_written(conversation, actor, pending, error)
        outcome = Outcome(OutcomeStatus.EXECUTED, f"Done: {pending.change.summary()} on #{current.number}.",
                          action=pending, after=after, sent=sent, audit_comment=audit_comment,
                          confirmed_by=actor.user.label)
        try:
            await writer.add_comment(current.name, comment_id, audit_comment)
        except WriteError as error:
            if pending.change.kind is ChangeKind.COMMENT:
                return self._failed(conversation, actor, pending, error)
            log.warning("audit comment not added to incident %s: %s", current.number, error.kind)
            outcome.detail = (f"The change was made, but the audit comment could not be added to the incident: "
                              f"{error.message}")
        conversation.finish_action(pending.id, OutcomeStatus.EXECUTED, outcome.headline)
        self._record_change(conversation, change, after)
        outcome.audit_record = self._audit("executed", actor, pending,
                                           result="executed" if not outcome.detail else "executed_no_comment")
        return outcome

    async def _escalate(self, conversation: Conversation, actor: Actor, pending: PendingAction,
                        current: IncidentSnapshot, notifier: Notifier | None) -> Outcome:
        """Assign (when asked; the one step a stale incident can refuse, so it goes first and a conflict leaves
        nothing half done), post the notice where it was confirmed, then add the incident comment."""
        assert self.writer is not None
        change, writer = pending.change, self.writer
        on_call = change.on_call
        if on_call is None or notifier is None:
            return self._close(conversation, actor, pending, OutcomeStatus.FAILED, "Not done.",
                               detail="Escalations can only be posted from Microsoft Teams.")
        page = await self._claim_page(actor, pending, on_call)  # before anything: a braked one changes nothing
        if isinstance(page, str):
            return self._close(conversation, actor, pending, OutcomeStatus.NOOP, page, result="braked")
        try:
            sent, after = await _assign_on_call(writer, current, change, on_call)
        except WriteError as error:
            if page is not None and self.ledger is not None:
                await self.ledger.release(_paged(on_call), page)
            return await self._not_written(conversation, actor, pending, error)
        notice = EscalationNotice(after, on_call, actor.user, change.comment, assigned=change.assign)
        try:
            posted = await notifier.post(notice)
        except NotifyError as error:
            if page is not None and self.ledger is not None:
                await self.ledger.release(_paged(on_call), page)
            return self._not_posted(conversation, actor, pending, error, on_call, after, sent)
        return await self._comment_escalation(conversation, actor, pending, on_call, after, posted, sent)

    async def _braked(self, on_call: OnCallContact | None, number: int) -> str | None:
        """Why the brake stops escalating ``number`` to ``on_call`` now (who was paged when), or None."""
        if on_call is None or self.ledger is None:
            return None
        now = self.clock()
        page = await self.ledger.check(_paged(on_call), number, now)
        return None if page is None else braked_text(page, number, on_call.person.label, now, self.ledger.brake)

    async def _claim_page(self, actor: Actor, pending: PendingAction, on_call: OnCallContact) -> Page | str | None:
        """The escalation's page, recorded (None without a brake), or why the brake stops it."""
        if self.ledger is None:
            return None
        page = Page(pending.change.incident_number, actor.user.label, self.clock(), pending.id)
        stop = await self.ledger.claim(_paged(on_call), page)
        if stop is None:
            return page
        return braked_text(stop, page.incident, on_call.person.label, page.at, self.ledger.brake)

    def _not_posted(self, conversation: Conversation, actor: Actor, pending: PendingAction, error: NotifyError,
                    on_call: OnCallContact, after: IncidentSnapshot, sent: dict[str, Any] | None) -> Outcome:
        """The escalation's message could not be posted: nothing is added to the incident (it may be assigned)."""
        assigned = f" #{after.number} was assigned to {on_call.person.label}." if sent else ""
        conversation.finish_action(pending.id, OutcomeStatus.FAILED, "Not done: the message was not posted")
        record = self._audit("failed", actor, pending, result="not_posted", assigned=bool(sent))
        return Outcome(OutcomeStatus.FAILED, "Not done: the escalation could not be posted in Teams.",
                       detail=error.message + assigned + " Nothing was added to the incident.", action=pending,
                       after=after if sent else None, sent=sent, confirmed_by=actor.user.label,
                       audit_record=record)

    async def _comment_escalation(self, conversation: Conversation, actor: Actor, pending: PendingAction,
                                  on_call: OnCallContact, after: IncidentSnapshot, posted: Posted,
                                  sent: dict[str, Any] | None) -> Outcome:
        """The message is posted: add the incident comment (its failure is told, not fatal) and record the change."""
        assert self.writer is not None
        change = pending.change
        comment = escalation_comment(on_call, actor.user, change.comment, change.assign)
        comment_id = str(uuid.uuid5(_COMMENT_IDS, pending.id))
        sent = sent or comment_request(after.name, comment_id, comment).to_dict()
        problems = [f"Posted in {posted.place}."] if posted.place else []
        problems += [advice] if (advice := unnotified_advice(posted, on_call)) else []
        not_commented = await _add_escalation_comment(self.writer, after, comment_id, comment)
        problems += [not_commented] if not_commented else []
        headline = (f"Done: #{after.number} escalated to {on_call.person.label} (on call)"
                    + (" and assigned to them." if change.assign else "."))
        conversation.finish_action(pending.id, OutcomeStatus.EXECUTED, headline)
        self._record_change(conversation, change, after)
        record = self._escalation_audit(actor, pending, on_call, posted, commented=not_commented is None)
        return Outcome(OutcomeStatus.EXECUTED, headline, detail="\n".join(problems) or None, action=pending,
                       after=after, sent=sent, audit_comment=comment, confirmed_by=actor.user.label, posted=posted,
                       audit_record=record)

    def _escalation_audit(self, actor: Actor, pending: PendingAction, on_call: OnCallContact, posted: Posted,
                          commented: bool) -> dict[str, Any]:
        named = {n.role: n.mentioned for n in posted.named}
        on_call_named = posted.person("on call")
        return self._audit("executed", actor, pending, result="executed" if commented else "executed_no_comment",
            escalated_to=on_call.person.user_principal_name, assigned=pending.change.assign,
            mentioned_on_call=named.get("on call"), mentioned_owner=named.get("owner"),
            reached_on_call=on_call_named.reached if on_call_named else None,
            direct_chat=on_call_named.direct_chat if on_call_named else None, message_id=posted.activity_id)

    def _record_change(self, conversation: Conversation, change: IncidentChange, after: IncidentSnapshot) -> None:
        """The fact check's change log: "I closed #N" is true from now on, and #N's record is what Sentinel
        returned."""
        on_call = change.on_call.person if change.on_call is not None else None
        conversation.facts.record_change(after.number or change.incident_number, change.kind.value, change.summary(),
                                         self.clock(), severity=after.severity, status=after.status,
                                         owner=after.owner.label if after.owner.assigned else None,
                                         classification=after.classification, tool="the confirmed change",
                                         owner_sign_in=after.owner.user_principal_name or after.owner.email,
                                         escalated_to=(on_call.user_principal_name or "", on_call.label)
                                         if on_call is not None else ())

    def cancel(self, conversation: Conversation, action_id: str, actor: Actor) -> Outcome:
        pending = self._requesters(conversation, action_id, actor, "cancel")
        if isinstance(pending, Outcome):
            return pending
        return self._close(conversation, actor, pending, OutcomeStatus.CANCELLED, f"Cancelled by {actor.user.label}.")

    def on_new_request(self, conversation: Conversation, actor: Actor) -> list[Outcome]:
        """A new message in the conversation: expired actions end; the requester moving on cancels theirs.

        Other people's messages in a shared thread leave theirs alone (they cannot confirm it anyway).
        """
        now, ended = self.clock(), []
        for pending in list(conversation.pending_actions):
            if pending.expired(now):
                ended.append(self._close(conversation, actor, pending, OutcomeStatus.EXPIRED,
                                         "Expired: not confirmed within 5 minutes. Ask again to redo it."))
            elif same_user(actor.user, pending.requester):
                ended.append(self._close(conversation, actor, pending, OutcomeStatus.CANCELLED,
                                         f"Cancelled: {pending.requester.label} asked something else before "
                                         "confirming."))
        return ended

    # ---- steps ---------------------------------------------------------------------------------------------

    def _requesters(self, conversation: Conversation, action_id: str, actor: Actor, verb: str,
                    advice: str = "") -> PendingAction | Outcome:
        """The pending action ``action_id`` if ``actor`` asked for it; otherwise what to answer instead."""
        pending = self._pending(conversation, action_id, actor, verb)
        if isinstance(pending, Outcome):
            return pending
        if not same_user(actor.user, pending.requester):
            self._audit(f"{verb}_refused", actor, pending, result="not_requester")
            return Outcome(OutcomeStatus.REFUSED,
                           f"Only {pending.requester.label} can {verb} this change: they asked for it.{advice}")
        return pending

    def _pending(self, conversation: Conversation, action_id: str, actor: Actor, verb: str
                 ) -> PendingAction | Outcome:
        pending = conversation.pending(action_id)
        if pending is not None:
            return pending
        done = conversation.finished(action_id)
        if done is not None:
            return Outcome(OutcomeStatus.ALREADY, f"Already handled, nothing more to do. {done.headline}")
        if proposed_elsewhere(action_id, actor.conversation_id):
            # A card forwarded or copied elsewhere: its change waits (or waited) where it was proposed.
            self._audit(f"{verb}_refused", actor, action_id=action_id[:64], result="other_conversation")
            return Outcome(OutcomeStatus.ELSEWHERE,
                           f"That change was proposed in another conversation: press {verb.title()} on its card "
                           "there. Nothing was changed.")
        return Outcome(OutcomeStatus.NOT_PENDING,
                       "That change is no longer waiting for confirmation (a newer request replaced "
                       "it, or it was cleared). Ask again to redo it.")

    def _close(self, conversation: Conversation, actor: Actor, pending: PendingAction, status: OutcomeStatus,
               headline: str, detail: str | None = None, result: str | None = None) -> Outcome:
        conversation.finish_action(pending.id, status, headline)
        self._audit(status.value, actor, pending, result=result or status.value)
        return Outcome(status, headline, detail=detail, action=pending)

    def _renew(self, conversation: Conversation, actor: Actor, pending: PendingAction,
               current: IncidentSnapshot) -> Outcome:
        """The incident changed since the card was shown: ask again with its new state (or stop, if the
        change is no longer needed)."""
        if pending.change.is_noop_for(current):
            return self._close(conversation, actor, pending, OutcomeStatus.NOOP,
                               f"Nothing to change: #{current.number} "
                               f"already has {_current(pending.change, current)} (someone else changed it).")
        conversation.finish_action(pending.id, OutcomeStatus.SUPERSEDED,
                                   "The incident changed; a new confirmation was shown")
        self._audit("superseded", actor, pending, result="conflict")
        now = self.clock()
        renewed = PendingAction(new_action_id(actor.conversation_id), pending.change, pending.requester, current, now,
                                now + CONFIRM_WINDOW)
        conversation.add_pending(renewed)
        self._audit("proposed", actor, renewed, source="conflict", result="pending")
        changed = [f"{name} {was or '(none)'} -> {now_ or '(none)'}"
                   for (name, was), now_ in zip(pending.incident.fields().items(), current.fields().values(),
                                                strict=True)
                   if was != now_]
        detail = ("Changed meanwhile: " + "; ".join(changed) + ".") if changed else None
        return Outcome(OutcomeStatus.SUPERSEDED,
                       f"#{current.number} changed since you asked, so nothing was written. Check its "
                       "new state on the new card and confirm again.", detail=detail, action=pending,
                       renewed=renewed)

    async def _not_written(self, conversation: Conversation, actor: Actor, pending: PendingAction,
                           error: WriteError) -> Outcome:
        """A write refused: a conflict asks again with the incident's new state; anything else is a failure."""
        assert self.writer is not None
        if error.kind == "conflict":
            try:
                return self._renew(conversation, actor, pending, await self.writer.read(pending.incident.name))
            except WriteError as again:
                error = again
        return self._failed(conversation, actor, pending, error)

    def _failed(self, conversation: Conversation, actor: Actor, pending: PendingAction, error: WriteError) -> Outcome:
        log.warning("incident change failed: %s (status %s)", error.kind, error.status)
        log.debug("incident change failure detail: %s", error.detail)
        if error.retry_possible:
            self._audit("failed", actor, pending, result="retry", error=error.kind)
            return Outcome(OutcomeStatus.RETRY, f"Not done yet: {error.message} Press Confirm again to retry.",
                           action=pending)
        return self._close(conversation, actor, pending, OutcomeStatus.FAILED, "Not done: Sentinel refused the change.",
                           detail=error.message)

    async def _read(self, number: int) -> IncidentSnapshot | str:
        """The incident by number, as the write API sees it (resource name from the workspace, then its etag)."""
        result = await self.sentinel.run(incident_detail.SPEC.name, {"incident_ref": number})
        if not isinstance(result, QueryResult):
            return f"I could not look up incident #{number}: {result.message}"
        detail = next((r for r in result.records if isinstance(r, IncidentDetail) and r.incident.number == number),
                      None)
        if detail is None or not detail.incident_id:
            return f"There is no incident #{number} in this workspace (looked back 90 days)."
        assert self.writer is not None
        try:
            return await self.writer.read(detail.incident_id)
        except WriteError as error:
            log.warning("reading incident for a change failed: %s", error.kind)
            return f"I could not read incident #{number} from Sentinel: {error.message}"

    async def _on_call(self) -> OnCallContact | str:
        """The analyst on shift now, from the on-call roster; or why nobody can be escalated to."""
        result = await self.sentinel.run(ON_CALL_TOOL, {})
        if not isinstance(result, QueryResult):
            return f"Not proposed: I could not read the on-call roster: {result.message}"
        now = self.clock()  # the desk's own now: the roster's rows are judged at the moment of the request
        entries = [e.at(now) for e in result.records if isinstance(e, OnCallEntry) and e.upn]
        # The analyst whose shift started last (the freshest), then the one ending first (a round-the-clock lead is
        # the backstop, not the first call), then by team and name as the roster lists them.
        on_shift = sorted((e for e in entries if e.on_shift),
                          key=lambda e: (-e.shift_start.timestamp(), e.shift_end, e.team, e.name))
        if not on_shift:
            upcoming = min((e for e in entries if e.shift_start > now), key=lambda e: e.shift_start, default=None)
            later = (f" Next on call: {one_line(upcoming.name, 80)} from {upcoming.shift_start:%d %b %H:%M} UTC."
                     if upcoming else "")
            return (f"Not proposed: nobody is on call right now ({now:%H:%M} UTC): no shift in the on-call roster "
                    f"covers it.{later} Escalate in the Sentinel portal or reach the team directly.")
        chosen = on_shift[0]
        return OnCallContact(Owner(object_id=chosen.object_id or None, user_principal_name=chosen.upn,
                                   name=chosen.name or None,
                                   email=chosen.email or None), phone=chosen.phone or None, team=chosen.team or None,
                             location=chosen.location or None, shift_end=chosen.shift_end.isoformat())

    @staticmethod
    def _incident_number(conversation: Conversation, arguments: dict[str, Any]) -> int:
        how, value = incident_ref(arguments)
        if how == "number":
            return value
        reference = conversation.references.get(value)
        if reference is None:
            raise InvalidParameter("incident_ref", f"there is no [{value}] in this conversation")
        if reference.kind is not RefKind.INCIDENT:
            raise InvalidParameter("incident_ref", f"[{value}] is {reference.kind} {reference.label}, not an incident")
        return int(reference.key)

    def _audit(self, event: str, actor: Actor, action: PendingAction | None = None,
               **fields: Any) -> dict[str, Any]:
        """One structured record per step: who, what, when, where, result. Never comment or message text."""
        record: dict[str, Any] = {
            "event": f"incident_change.{event}", "at": self.clock().isoformat(),
            "actor_object_id": actor.user.object_id, "actor": actor.user.audit_label,
            "conversation_id": actor.conversation_id, "conversation_type": actor.conversation_type,
        }
        if action is not None:
            record |= {"action_id": action.id, "incident_number": action.change.incident_number,
                       "incident_name": action.incident.name, "requester_object_id": action.requester.object_id,
                       "change": _audit_fields(action.change)}
        record |= {k: v for k, v in fields.items() if v is not None}
        audit_log.info("audit %s", json.dumps(record, sort_keys=True), extra={"audit": record})
        return record


async def _assign_on_call(writer: IncidentWriter, current: IncidentSnapshot, change: IncidentChange,
                          on_call: OnCallContact) -> tuple[dict[str, Any] | None, IncidentSnapshot]:
    """Assign the incident to the on-call analyst when the escalation asks and it is not theirs already: the request
    sent (None when nothing was) and the incident after it."""
    if change.assign and not make_change(ChangeKind.ASSIGN, current.number or change.incident_number,
                                         owner=on_call.person).is_noop_for(current):
        sent = update_request(current, change).to_dict()
        return sent, await writer.update(current, change)
    return None, current


def _paged(on_call: OnCallContact) -> str:
    """Who the brake counts pages for: the on-call analyst's sign-in name (else object id, else name)."""
    person = on_call.person
    return person.user_principal_name or person.object_id or person.label


async def _add_escalation_comment(writer: IncidentWriter, after: IncidentSnapshot, comment_id: str,
                                  comment: str) -> str | None:
    """Add the escalation's comment to the incident: None when added, else what to tell the analyst."""
    try:
        await writer.add_comment(after.name, comment_id, comment)
    except WriteError as error:
        log.warning("escalation comment not added to incident %s: %s", after.number, error.kind)
        return f"The message was posted, but the comment could not be added to the incident: {error.message}"
    return None


def _audit_fields(change: IncidentChange) -> dict[str, Any]:
    """What changed, for the audit log: kinds and values, but comment texts only as their length, and the on-call
    analyst by sign-in name only (the roster's phone and location are not the audit's business)."""
    fields = {k: v for k, v in change.parameters().items()
              if k not in ("comment", "classification_comment", "reason", "on_call")}
    if change.on_call is not None:
        fields["on_call"] = change.on_call.person.user_principal_name
    if change.comment:
        fields["comment_length"] = len(change.comment)
    if change.classification_comment:
        fields["classification_comment_length"] = len(change.classification_comment)
    return fields


def _audit_comment(change: IncidentChange, user: Owner) -> str:
    """The comment added to the incident: what changed, from where, by whom."""
    if change.kind is ChangeKind.COMMENT:
        return f"{change.comment}\n\n(Added from Microsoft Teams by {user.audit_label})"
    return f"{change.summary()} from Microsoft Teams by {user.audit_label}"


def _current(change: IncidentChange, incident: IncidentSnapshot) -> str:
    fields = incident.fields()
    return ", ".join(f"{name.lower()} {fields.get(name) or '(none)'}" for name in change.target_fields()
                     if name in ("Owner", "Severity", "Status"))
