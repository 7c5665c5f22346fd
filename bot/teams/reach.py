"""A 1:1 Teams message to the on-call analyst when the escalation's war room is a conversation they are not in.

The bot creates (or, Teams being idempotent for 1:1 chats, finds) the chat through the Bot Connector's
``conversations.create`` with the tenant and the analyst's Entra object id (from the on-call roster's ObjectId
column), then sends the incident card with a link back to the escalation message. Throttling (429) is retried, which
Teams answers before storing anything; the card is sent at most once however often the creation is retried.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote, urlencode

from botbuilder.core import BotAdapter, TurnContext
from botbuilder.schema import ChannelAccount, ConversationParameters
from botframework.connector.auth import AuthenticationConstants

from bot.cards.reach import escalated_to_you
from bot.orchestrator.changes import EscalationNotice
from bot.teams import replies
from bot.teams.connectors import OwnTurn
from bot.teams.progress import send_with_retry

log = logging.getLogger(__name__)
TEAMS_LINKS = "https://teams.microsoft.com/l/message"


def tenant_of(context: TurnContext) -> str | None:
    """The turn's tenant (channelData's, else the conversation's; the front door checked they agree)."""
    activity = context.activity
    channel_data = activity.channel_data if isinstance(activity.channel_data, dict) else {}
    raw = channel_data.get("tenant")
    tenant: dict[str, Any] = raw if isinstance(raw, dict) else {}
    found = tenant.get("id") or (activity.conversation.tenant_id if activity.conversation else None)
    return found if isinstance(found, str) and found else None


def thread_link(conversation_id: str, message_id: str | None, tenant_id: str | None) -> str | None:
    """A Teams link to the posted escalation message: in a channel thread, or in a group chat; None for a 1:1 chat
    (private to the person who escalated) or without a message id."""
    if not message_id or not conversation_id.startswith("19:"):
        return None
    chat, _, parent = conversation_id.partition(";messageid=")
    query = {k: v for k, v in (("tenantId", tenant_id), ("parentMessageId", parent or None)) if v}
    return f"{TEAMS_LINKS}/{quote(chat, safe=':@.')}/{quote(message_id, safe='')}" + (
        f"?{urlencode(query)}" if query else "")


def can_reach(notice: EscalationNotice, context: TurnContext) -> bool:
    """A 1:1 message needs the analyst's Entra object id and the tenant."""
    return bool(notice.on_call.person.object_id) and tenant_of(context) is not None


async def message_on_call(context: TurnContext, notice: EscalationNotice, posted_in: str, posted_id: str | None,
                          *, demo: bool) -> str:
    """Send ``notice`` to the on-call analyst in a 1:1 chat; returns that chat's id. Raises what the connector
    raised when the chat could not be created or the card not sent."""
    tenant = tenant_of(context)
    person = notice.on_call.person
    assert person.object_id and tenant, "can_reach first"
    incident = notice.incident
    owner = notice.on_call.person.label if notice.assigned else (
        incident.owner.label if incident.owner.assigned else "Unassigned")
    card = escalated_to_you(incident, requester=notice.requester.label, reason=notice.reason, owner=owner,
                            thread_url=thread_link(posted_in, posted_id, tenant), demo=demo)
    activity = replies.message(f"Escalated to you: incident #{incident.number}", card_list=[card])
    parameters = ConversationParameters(
        is_group=False, bot=context.activity.recipient, tenant_id=tenant, channel_data={"tenant": {"id": tenant}},
        members=[ChannelAccount(id=person.object_id, aad_object_id=person.object_id)])
    chats: list[str] = []  # the chat, once the card is in it

    async def send(chat: TurnContext) -> None:
        if not chats:  # a retried creation finds the same chat: the card goes once
            await send_with_retry(lambda: chat.send_activity(activity))
            chats.append(chat.activity.conversation.id)

    claims = context.turn_state.get(BotAdapter.BOT_IDENTITY_KEY)
    app_id = _claim(claims, AuthenticationConstants.AUDIENCE_CLAIM) or _claim(claims,
                                                                             AuthenticationConstants.APP_ID_CLAIM)
    audience = context.turn_state.get(BotAdapter.BOT_OAUTH_SCOPE_KEY)
    # The send runs as the adapter's own turn: what it raises (Teams refusing the message in the new chat) is kept
    # and raised here, where the escalation says it, instead of a traceback from the adapter's error handler.
    turn = OwnTurn(send)
    await send_with_retry(lambda: context.adapter.create_conversation(
        app_id or "", turn, parameters, context.activity.channel_id, context.activity.service_url, audience))
    turn.raise_kept()
    if not chats:
        raise RuntimeError("the Bot Connector created no conversation")  # the callback never ran
    return chats[0]


def refusal(error: BaseException) -> str:
    """Why a 1:1 message failed, in a few words: "Teams answered 500 UserNotFound" for a connector's error status
    (its error code when the answer names one), else the error's kind."""
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None) or getattr(response, "status", None)
    if not isinstance(status, int):
        return type(error).__name__
    code = getattr(error, "code", None) or getattr(getattr(getattr(error, "error", None), "error", None), "code",
                                                   None)
    return f"Teams answered {status}" + (f" {code}" if isinstance(code, str) and code else "")


def _claim(identity: Any, name: str) -> str | None:
    claims = getattr(identity, "claims", None)
    value = claims.get(name) if isinstance(claims, dict) else None
    return value if isinstance(value, str) and value else None
