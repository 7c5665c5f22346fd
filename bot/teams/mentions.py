"""Teams @mentions done properly, and the escalation message that uses them.

A mention is ``<at>Name</at>`` in the text *and* an entity ``{type: "mention", text: "<at>Name</at>",
mentioned: {id, name}}`` whose id is the person's Teams id; Teams notifies only then. The id comes from the
Bot Connector's member lookup by sign-in name (``GET /v3/conversations/{id}/members/{upn}``, Microsoft's
documented way; an Entra object id works too), and when that finds nobody, from the conversation's member
list matched by sign-in name, email or object id (some clients, like the Agents Playground, look members
up by Teams id only). Someone who is not a member, or a lookup that fails, gets their name in plain text
that cannot pass for a mention, and the analyst is told they were not notified.

Everything else in the message (incident title, owner, reason) is attacker-writable text: it goes through
``cards.plain`` (tags, links, markdown broken), so it stays inert in the posted message.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from botbuilder.core import BotAdapter, TurnContext
from botbuilder.core.teams import TeamsInfo
from botbuilder.schema import Activity, ActivityTypes, ChannelAccount, ConversationReference, Mention

from bot import cards
from bot.orchestrator.changes import EscalationNotice, Named, NotifyError, Posted
from bot.sentinel.changes import Owner
from bot.teams.connectors import OwnTurn
from bot.teams.progress import send_with_retry
from bot.teams.reach import can_reach, message_on_call, refusal
from bot.teams.watches import WatchStore

log = logging.getLogger(__name__)
LOOKUP_TIMEOUT_S = 3.0
MEMBER_PAGE_SIZE = 200
MAX_MEMBER_PAGES = 5  # a thousand members; beyond that the person is named in plain text
PORTAL_HOSTS = ("portal.azure.com", "security.microsoft.com")
NOT_A_MEMBER = "not a member of this conversation"
DIRECT_NOTE = "; not in this conversation: sent the incident in a 1:1 chat)"


@dataclass(frozen=True)
class Member:
    """A person found in this conversation: their Teams id and display name."""

    teams_id: str
    name: str


@dataclass(frozen=True)
class Lookup:
    """The member lookup's answer: who, or why nobody (a sentence for the analyst)."""

    member: Member | None
    problem: str | None = None
    direct: bool = False  # not a member, so messaged 1:1 instead (the text says so)


def mention(member: Member, shown: str) -> tuple[str, Mention]:
    """``<at>shown</at>`` and its entity; ``shown`` is already inert (no tags can close the mention early)."""
    markup = f"<at>{shown}</at>"
    return markup, Mention(mentioned=ChannelAccount(id=member.teams_id, name=shown), text=markup, type="mention")


class MemberDirectory:
    """Finds people in the turn's conversation (its team, in a channel) through the Bot Connector."""

    def __init__(self, context: TurnContext, timeout_s: float = LOOKUP_TIMEOUT_S) -> None:
        self.context = context
        self.timeout_s = timeout_s
        self._members: list[Any] | None = None

    async def find(self, person: Owner) -> Lookup:
        keys = [k for k in (person.user_principal_name, person.object_id, person.email) if k]
        if not keys:
            return Lookup(None, "Sentinel has no sign-in name for them")
        try:
            found = await asyncio.wait_for(TeamsInfo.get_member(self.context, keys[0]), self.timeout_s)
            if getattr(found, "id", None):
                return Lookup(Member(str(found.id), str(getattr(found, "name", "") or person.label)))
        except Exception as error:  # noqa: BLE001 - the message still goes out, naming them in plain text
            status = getattr(getattr(error, "response", None), "status_code", None)
            log.info("member lookup by sign-in name failed (%s, HTTP %s)", type(error).__name__, status)
            if status != 404:  # not "no such member": Teams is failing, and asking again would only wait longer
                return Lookup(None, "the Teams member lookup failed")
        try:
            members = await asyncio.wait_for(self._list(), self.timeout_s)
        except Exception as error:  # noqa: BLE001 - as above
            log.warning("listing the conversation's members failed (%s)", type(error).__name__)
            return Lookup(None, "the Teams member lookup failed")
        wanted = {k.lower() for k in keys}
        for account in members:
            ids = {str(getattr(account, a, "") or "").lower()
                   for a in ("user_principal_name", "email", "aad_object_id")} - {""}
            if ids & wanted and getattr(account, "id", None):
                return Lookup(Member(str(account.id), str(getattr(account, "name", "") or person.label)))
        return Lookup(None, NOT_A_MEMBER)

    async def _list(self) -> list[Any]:
        if self._members is None:
            members: list[Any] = []
            token = None
            for _ in range(MAX_MEMBER_PAGES):
                page = await TeamsInfo.get_paged_members(self.context, token, MEMBER_PAGE_SIZE)
                members += list(getattr(page, "members", None) or [])
                token = getattr(page, "continuation_token", None)
                if not token:
                    break
            self._members = members
        return self._members


@dataclass(frozen=True)
class WarRoom:
    """A conversation where the incident is already being worked: the one a watch posted its card in."""

    reference: dict[str, Any]  # the conversation reference the card was posted with
    conversation_id: str


async def war_room(watches: WatchStore | None, number: int, here: str) -> WarRoom | None:
    """The latest conversation other than ``here`` where a watch posted incident ``number``'s card, if any."""
    if watches is None:
        return None
    try:
        cards_posted = (await watches.posted([number])).get(number, [])
        for posted in reversed(cards_posted):
            item = await watches.card(posted.key)
            reference = item.get("reference")
            if isinstance(reference, dict) and posted.conversation and posted.conversation != here:
                return WarRoom(reference, posted.conversation)
    except Exception as error:  # noqa: BLE001 - the escalation is then posted where it was confirmed
        log.warning("could not look up where incident %s was posted (%s)", number, type(error).__name__)
    return None


class TeamsNotifier:
    """Posts an escalation notice in the incident's war room when a watch posted it in another conversation (a
    channel thread, a group chat), else where it was confirmed (in a channel: the thread it was confirmed in)."""

    def __init__(self, context: TurnContext, directory: MemberDirectory | None = None,
                 room: WarRoom | None = None, demo: bool = False) -> None:
        self.context = context
        self.directory = directory or MemberDirectory(context)
        self.room = room
        self.demo = demo

    async def post(self, notice: EscalationNotice) -> Posted:
        if self.room is None:
            return await _post(self.context, self.directory, notice, self.demo)
        room = self.room
        done: list[Posted] = []
        adapter = self.context.adapter
        claims = self.context.turn_state.get(BotAdapter.BOT_IDENTITY_KEY)
        audience = self.context.turn_state.get(BotAdapter.BOT_OAUTH_SCOPE_KEY)

        async def there(context: TurnContext) -> None:
            if context.activity.channel_data is None:
                context.activity.channel_data = {}  # TeamsInfo reads it for a team id; a reference carries none
            done.append(replace(await _post(context, MemberDirectory(context), notice, self.demo),
                                place="the conversation where a watch posted the incident"))

        try:
            turn = OwnTurn(there)  # what posting there raises comes back here, not to the adapter's error handler
            await adapter.continue_conversation_with_claims(
                claims, ConversationReference().deserialize(room.reference), audience, turn)
            turn.raise_kept()
        except NotifyError:
            raise
        except Exception as error:  # noqa: BLE001 - e.g. the bot was removed there: post where it was confirmed
            log.warning("posting in the war room failed (%s); posting where it was confirmed", type(error).__name__)
        if done:
            return done[0]
        posted = await _post(self.context, self.directory, notice, self.demo)
        return replace(posted, place="here, because the conversation where a watch posted the incident could not "
                                     "be reached")


async def _post(context: TurnContext, directory: MemberDirectory, notice: EscalationNotice, demo: bool) -> Posted:
    """Look the people up in ``context``'s conversation, compose the message, send it there; an on-call analyst who
    is not a member gets the incident in a 1:1 chat too (the message says so, and is corrected if that fails)."""
    on_call = await directory.find(notice.on_call.person)
    if on_call.problem == NOT_A_MEMBER and can_reach(notice, context):
        on_call = replace(on_call, direct=True)
    owner_person = notice.incident.owner
    owner = await directory.find(owner_person) if owner_person.assigned and not notice.assigned else None
    text, entities, named = escalation_message(notice, on_call, owner)
    activity = Activity(type=ActivityTypes.message, text=text, text_format="markdown", entities=entities or None)
    try:
        response = await send_with_retry(lambda: context.send_activity(activity))
    except Exception as error:  # noqa: BLE001 - said to the analyst; nothing is written to Sentinel after
        log.warning("posting the escalation failed (%s)", type(error).__name__)
        raise NotifyError(f"Teams did not accept the message ({type(error).__name__}).") from None
    conversation = context.activity.conversation
    posted = Posted(text, conversation.id if conversation else "", getattr(response, "id", None), tuple(named))
    return await _reach_directly(context, notice, posted, demo) if on_call.direct else posted


async def _reach_directly(context: TurnContext, notice: EscalationNotice, posted: Posted, demo: bool) -> Posted:
    """The 1:1 message; when it fails, the posted message is corrected to say they were not notified."""
    lead = posted.person("on call")
    assert lead is not None
    try:
        chat = await message_on_call(context, notice, posted.conversation_id, posted.activity_id, demo=demo)
    except Exception as error:  # noqa: BLE001 - the escalation stands; the analyst is told to reach them otherwise
        log.warning("the 1:1 message to the on-call analyst failed (%s)", refusal(error))
        problem = f"{NOT_A_MEMBER}, and a 1:1 message failed ({refusal(error)})"
        named = tuple(replace(n, not_notified=problem) if n is lead else n for n in posted.named)
        # The lead comes first in the text: the first note is theirs (the title, later, cannot come before it).
        corrected = replace(posted, named=named,
                            text=posted.text.replace(DIRECT_NOTE, f"; not notified in Teams: {problem})", 1))
        await _correct(context, corrected)
        return corrected
    return replace(posted, named=tuple(replace(n, direct_chat=chat) if n is lead else n for n in posted.named))


async def _correct(context: TurnContext, posted: Posted) -> None:
    """The posted escalation message, its text replaced in place (best effort: the outcome card says it all)."""
    if not posted.activity_id:
        return
    entities = [Mention(mentioned=ChannelAccount(id=n.teams_id, name=n.name), text=f"<at>{n.name}</at>",
                        type="mention") for n in posted.named if n.teams_id]
    activity = Activity(type=ActivityTypes.message, id=posted.activity_id, text=posted.text, text_format="markdown",
                        entities=entities or None)
    try:
        await send_with_retry(lambda: context.update_activity(activity))
    except Exception as error:  # noqa: BLE001
        log.info("could not correct the escalation message (%s)", type(error).__name__)


def escalation_message(notice: EscalationNotice, on_call: Lookup,
                       owner: Lookup | None) -> tuple[str, list[Mention], list[Named]]:
    """The message text (markdown), its mention entities, and who it names how."""
    entities: list[Mention] = []
    named: list[Named] = []

    def person(who: Owner, lookup: Lookup, role: str) -> str:
        shown = cards.plain(lookup.member.name if lookup.member else who.label, 80)
        if lookup.member is not None:
            markup, entity = mention(lookup.member, shown)
            entities.append(entity)
            named.append(Named(shown, role, teams_id=lookup.member.teams_id))
            return markup
        named.append(Named(shown, role, not_notified=lookup.problem))
        sign_in = f", {cards.plain(who.user_principal_name, 120)}" if who.user_principal_name else ""
        if lookup.direct:
            return f"{shown} ({role}{sign_in}{DIRECT_NOTE}"
        return f"{shown} ({role}{sign_in}; not notified in Teams: {lookup.problem})"

    incident = notice.incident
    contact = notice.on_call
    lead = person(contact.person, on_call, "on call")
    if not incident.owner.assigned:
        owner_text = "unassigned"
    elif notice.assigned:
        owner_text = cards.plain(contact.person.label, 80)  # the on-call analyst, mentioned above
    else:
        owner_text = person(incident.owner, owner or Lookup(None, "not looked up"), "owner")
    ask = cards.plain(notice.reason, 500) if notice.reason else "please take a look and reply here when you have it."
    lines = [f"**Escalation** for {lead}: {ask}",
             f"**#{incident.number}** {cards.plain(incident.title, 200) or '(no title)'}",
             f"Severity: {cards.plain(incident.severity, 20) or '—'} · "
             f"Status: {cards.plain(incident.status, 20) or '—'} · Owner: {owner_text}"]
    if notice.assigned:
        lines.append(f"It is now assigned to {cards.plain(contact.person.label, 80)}.")
    lines.append(f"Escalated by {cards.plain(notice.requester.label, 80)} from Microsoft Teams.")
    link = _portal_link(incident.url)
    if link:
        lines.append(f"[Open #{incident.number} in Sentinel]({link})")
    return "\n\n".join(lines), entities, named


def _portal_link(url: str | None) -> str | None:
    """The incident's portal link when it is an https link to a Microsoft security portal, else nothing."""
    value = (url or "").strip()
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme != "https" or (parts.hostname or "") not in PORTAL_HOSTS or port not in (None, 443) \
            or parts.username or parts.password or any(c in value for c in " <>()[]\"'`"):
        return None
    return value
