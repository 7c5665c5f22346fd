"""The Teams activity handler: decides what an activity asks for, and runs it in the background.

The server acknowledges each activity at once and runs its turn on the runner's worker loop (see server.py,
dispatch.py and bot/turns/runner.py). A turn: checks the activity is for the bot (in channels and group chats the
bot answers only when @mentioned, or when one of its cards is pressed), strips the mention, loads state
once, shows progress, answers (routes.py: each card verb and each command route to its small handler; a question
goes to the model's tool loop), delivers the reply and saves state once (a failed save is retried; if it never
succeeds, the user is told their turn may not be remembered).
Failures become a message that says what happened and gives a reference id for the logs.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from botbuilder.core import BotAdapter, InvokeResponse, TurnContext
from botbuilder.core.teams import TeamsActivityHandler
from botbuilder.schema import (
    Activity,
    ActivityTypes,
    ChannelAccount,
)
from botbuilder.schema.teams import TeamInfo
from msrest.serialization import Model

from bot import audit, cards, telemetry
from bot.cards import Verb
from bot.commands.router import CommandRouter
from bot.orchestrator.changes import ConfirmationDesk
from bot.orchestrator.local_time import zone_of
from bot.orchestrator.loop import Orchestrator
from bot.orchestrator.memory import Memory
from bot.sentinel.client import SentinelClient
from bot.sentinel.identity import acting_as
from bot.teams import replies, routes
from bot.teams.access import REFUSAL_TEXT, AccessPolicy, TurnLimits, Where
from bot.teams.changes import TeamsChanges
from bot.teams.connectors import Unreachable
from bot.teams.early_typing import TYPING_SENT_KEY
from bot.teams.extension import CARD_BUTTON, EXTENSION_INVOKES, NOT_SIGNED_IN, SEARCH, MessageExtension
from bot.teams.extension import message as extension_message
from bot.teams.front_door import thread_channel
from bot.teams.links import Workspace
from bot.teams.progress import Progress, progress_for, send_with_retry
from bot.teams.routes import Turn, bounded
from bot.teams.signin import SIGNIN_INVOKES, SignIn
from bot.teams.state import ConversationData, StateStore, bound
from bot.teams.turn import LATER_STATE_KEY, Later, Reply, TurnFacts, TurnKind, TurnRequest, turn_span
from bot.teams.watches import WatchStore

log = logging.getLogger(__name__)
STATE_NOT_SAVED = ("I could not save this conversation just now, so I may not remember your last message or its "
                   "results ([n] references). If you refer back to it, please repeat what you need.")
Clock = Callable[[], datetime]


class _MessageInvokeResponse(Model):
    """adaptiveCard/action response of type message (its value is a string, which the SDK's model forbids)."""

    # Declared as msrest's Model declares it (an instance variable, so ClassVar would not type-check); it is
    # the class-level serialization map msrest reads, never mutated.
    _attribute_map: dict[str, dict[str, Any]] = {  # noqa: RUF012
        "status_code": {"key": "statusCode", "type": "int"},
        "type": {"key": "type", "type": "str"},
        "value": {"key": "value", "type": "str"},
    }

    def __init__(self, text: str) -> None:
        super().__init__()
        self.status_code = 200
        self.type = "application/vnd.microsoft.activity.message"
        self.value = text


FEEDBACK_INVOKE = "message/submitAction"  # the feedback buttons Teams shows on answers with feedbackLoopEnabled


class SentinelBot(TeamsActivityHandler):
    def __init__(self, *, sentinel: SentinelClient, orchestrator: Orchestrator | None, state: StateStore,
                 memory: Memory, clock: Clock = lambda: datetime.now(UTC),
                 capture_content: bool = False, desk: ConfirmationDesk | None = None,
                 access: AccessPolicy | None = None, limits: TurnLimits | None = None,
                 watches: WatchStore | None = None, signin: SignIn | None = None,
                 links: Workspace | None = None) -> None:
        self.sentinel = sentinel
        # Compose-box search and pasted portal links (``links``: the workspace and tenants a link must name).
        self.extension = MessageExtension(sentinel, clock, links)
        self.signin = signin  # QUERY_IDENTITY=user: turns that read run with the analyst's own token
        self.watches = watches
        self.access = access
        self.limits = limits
        self.desk = desk
        self.changes = TeamsChanges(desk, watches, clock, sentinel.is_demo)
        self.orchestrator = orchestrator
        self.commands = CommandRouter(sentinel, orchestrator, access.hunters if access else frozenset())
        self.state = state
        self.memory = memory
        self.clock = clock
        self.capture_content = capture_content

    # ---- routing ------------------------------------------------------------------------------------------

    @staticmethod
    def addressed_to_bot(activity: Activity) -> bool:
        """In channels and group chats only @mentions and presses of the bot's own cards are for the bot."""
        if activity.type != "message":
            return False
        conversation_type = (activity.conversation.conversation_type if activity.conversation else None) or "personal"
        if conversation_type not in ("channel", "groupChat"):
            return True
        if isinstance(activity.value, dict):
            return True
        bot_id = activity.recipient.id if activity.recipient else None
        for entity in activity.entities or []:
            if getattr(entity, "type", None) == "mention":
                mentioned = (entity.additional_properties or {}).get("mentioned") or {}
                if getattr(entity, "mentioned", None) is not None:
                    mentioned = {"id": entity.mentioned.id}
                if mentioned.get("id") == bot_id:
                    return True
        return False

    # ---- who may ask: every activity, before anything runs -------------------------------------------------

    async def on_turn(self, turn_context: TurnContext) -> None:
        if self.access is None or await self._admitted(turn_context):
            await super().on_turn(turn_context)

    async def _admitted(self, context: TurnContext) -> bool:
        """The access policy's answer; a refused user is told politely, and the refusal is audited."""
        assert self.access is not None
        activity = context.activity
        if activity.type == ActivityTypes.message and not self.addressed_to_bot(activity):
            return True  # not for the bot: nothing will run
        where = _where(activity)
        refusal = await self.access.refusal(where)
        if refusal is None:
            return True
        account = activity.from_property
        audit.record("access.refused", audit.Asker(
            where.object_id, getattr(account, "name", None), activity.conversation.id, where.conversation_type,
            where.tenant_id), reason=refusal.value, activity_type=activity.type, team_id=where.team_id,
            channel_id=where.channel_id)
        text = REFUSAL_TEXT[refusal]
        if activity.type == ActivityTypes.message:
            await send_with_retry(lambda: context.send_activity(replies.message(text)))
        elif activity.type == ActivityTypes.invoke:
            # The message extension shows a message result where its results would be; a card press, a message.
            body = extension_message(text) if activity.name in EXTENSION_INVOKES else _MessageInvokeResponse(text)
            await context.send_activity(Activity(type=ActivityTypes.invoke_response,
                                                 value=InvokeResponse(status=200, body=body)))
        return False

    # ---- a turn (on the runner's worker loop, after the HTTP request was answered) --------------------------

    async def on_message_activity(self, turn_context: TurnContext) -> None:
        activity = turn_context.activity
        if not self.addressed_to_bot(activity):
            return
        value = activity.value if isinstance(activity.value, dict) else None
        text = TurnContext.remove_recipient_mention(activity) if activity.entities else activity.text
        typing_sent = bool(turn_context.turn_state.get(TYPING_SENT_KEY))  # sent early (early_typing.py)
        await self._run_turn(turn_context, self._request(turn_context, bounded((text or "").strip()), value),
                             typing_sent)

    async def on_invoke_activity(self, turn_context: TurnContext) -> InvokeResponse:
        """Universal Actions (Action.Execute, adaptiveCard/action): acknowledge now, answer in a new turn."""
        activity = turn_context.activity
        if activity.name == FEEDBACK_INVOKE:
            return self._feedback(activity)
        if activity.name in SIGNIN_INVOKES and self.signin is not None:
            return await self._signed_in(turn_context)
        if activity.name in SIGNIN_INVOKES:  # without single sign-on: botbuilder's answer (501)
            return await super().on_invoke_activity(turn_context)
        if activity.name in EXTENSION_INVOKES:
            return await self._extension(turn_context)
        if activity.name == CARD_BUTTON:
            return await self._inserted_card_press(turn_context)
        if activity.name != "adaptiveCard/action":
            # Not one this bot handles: botbuilder's base classes would answer 501 too, but only after reading the
            # value into their models, and a value not of that shape fails there with a traceback per request.
            return InvokeResponse(status=501)
        value = activity.value if isinstance(activity.value, dict) else {}
        raw_action = value.get("action")
        action: dict[str, Any] = raw_action if isinstance(raw_action, dict) else {}
        data = dict(action.get("data") or {})
        if action.get("verb"):
            data.setdefault("action", action["verb"])
        if not await self._answer_later(turn_context, "", data):
            return InvokeResponse(status=200, body=_MessageInvokeResponse("I'm busy or restarting; try again soon."))
        # A message response leaves the card as it is and tells the user the action was received.
        return InvokeResponse(status=200, body=_MessageInvokeResponse("Working on it..."))

    @staticmethod
    async def _answer_later(turn_context: TurnContext, text: str, value: dict[str, Any] | None) -> bool:
        """The turn this invoke starts (``text`` and ``value``), taken to run after the invoke is answered, in its
        conversation's order (:meth:`answer_started`); False when it was not taken (overloaded, restarting)."""
        later: Later | None = turn_context.turn_state.get(LATER_STATE_KEY)
        return later is not None and await later(text, value)

    async def answer_started(self, adapter: BotAdapter, claims: Any, audience: str | None, activity: Activity,
                             text: str, value: dict[str, Any] | None) -> None:
        """Run the turn an invoke started (:meth:`_answer_later`), after the invoke was answered: in a new turn
        context where it was sent (continue_conversation: the invoke's own ended with its response)."""
        request = self._request_of(activity, bounded(text), value)

        async def turn(context: TurnContext) -> None:
            context.activity.id = activity.id  # its replies name the invoke they answer, as a message's name it
            await self._run_turn(context, request, False)

        await adapter.continue_conversation_with_claims(claims, request.reference, audience, turn)

    async def _inserted_card_press(self, turn_context: TurnContext) -> InvokeResponse:
        """A button on a card the message extension put into a message (Teams sends its data as this invoke): its
        Details, answered in a new turn where it was pressed (the conversation must have the bot to show it)."""
        value = turn_context.activity.value
        data = dict(value) if isinstance(value, dict) else {}
        if Verb.of(data) is Verb.INCIDENT_DETAIL:  # the only button those cards carry
            await self._answer_later(turn_context, "", data)
        return InvokeResponse(status=200)

    async def _extension(self, turn_context: TurnContext) -> InvokeResponse:
        """A compose-box search or a pasted link, answered in this invoke's response (Teams waits about 5 s), its
        reads audited as the analyst's; in on-behalf-of mode with their own token, when the token service has one."""
        request = self._request(turn_context, "", None)
        value = turn_context.activity.value
        if not isinstance(value, dict):  # Teams sends an object; anything else is answered, not guessed at
            return InvokeResponse(status=200, body=extension_message("The bot could not read that request."))
        asker = audit.Asker(request.user_aad_id, request.user_name, request.conversation_id,
                            request.conversation_type, request.tenant_id, request.correlation_id)
        with audit.asking(asker):
            analyst = None
            if self.signin is not None:
                resolved = await self.signin.resolve(turn_context, "", None, object_id=request.user_aad_id,
                                                     tenant_id=request.tenant_id)
                if isinstance(resolved, list):
                    return InvokeResponse(status=200, body=extension_message(NOT_SIGNED_IN))
                analyst = resolved
            with acting_as(analyst) if analyst is not None else contextlib.nullcontext():
                if turn_context.activity.name == SEARCH:
                    body = await self.extension.search(value, request.user_aad_id)
                else:
                    body = await self.extension.unfurl(value)
        return InvokeResponse(status=200, body=body)

    async def _signed_in(self, turn_context: TurnContext) -> InvokeResponse:
        """Teams single sign-on's invokes: the token exchanged (200, or 412 so Teams falls back to the sign-in
        button), then the question that asked for the sign-in answered in a new turn."""
        assert self.signin is not None
        response, kept = await self.signin.invoke(turn_context)
        if kept is not None and not await self._answer_later(turn_context, bounded(kept.text), kept.value):
            await send_with_retry(lambda: turn_context.send_activity(replies.message(
                "You're signed in, but I'm busy or restarting: please ask your question again.")))
        return response

    def _feedback(self, activity: Activity) -> InvokeResponse:
        """A thumbs up or down on an answer (its feedback buttons): audited and counted, never its text."""
        value = activity.value if isinstance(activity.value, dict) else {}
        raw = value.get("actionValue")
        action: dict[str, Any] = raw if isinstance(raw, dict) else {}
        reaction = action.get("reaction")
        if value.get("actionName") != "feedback" or reaction not in ("like", "dislike"):
            return InvokeResponse(status=400)
        comment = _feedback_text(action.get("feedback"))
        account = activity.from_property
        audit.record("answer.feedback", audit.Asker(
            getattr(account, "aad_object_id", None), getattr(account, "name", None), activity.conversation.id,
            activity.conversation.conversation_type or "personal"), reaction=reaction,
            message_id=activity.reply_to_id, comment_chars=len(comment))
        telemetry.instruments().feedback.add(1, {"reaction": reaction, "commented": bool(comment)})
        return InvokeResponse(status=200)

    async def on_teams_members_added(self, teams_members_added: list[ChannelAccount], team_info: TeamInfo,
                                     turn_context: TurnContext) -> None:
        bot_id = turn_context.activity.recipient.id if turn_context.activity.recipient else None
        if any(member.id == bot_id for member in teams_members_added):
            card = cards.welcome(demo=self.sentinel.is_demo, model_enabled=self.orchestrator is not None)
            await send_with_retry(lambda: turn_context.send_activity(replies.message(card_list=[card])))

    def _request(self, turn_context: TurnContext, text: str, value: dict[str, Any] | None) -> TurnRequest:
        return self._request_of(turn_context.activity, text, value)

    @staticmethod
    def _request_of(activity: Activity, text: str, value: dict[str, Any] | None) -> TurnRequest:
        return TurnRequest(
            text=text, value=value, activity_id=activity.id,
            conversation_id=activity.conversation.id,
            conversation_type=activity.conversation.conversation_type or "personal",
            user_id=activity.from_property.id if activity.from_property else "",
            user_aad_id=getattr(activity.from_property, "aad_object_id", None),
            user_name=getattr(activity.from_property, "name", None),
            reference=TurnContext.get_conversation_reference(activity),
            correlation_id=telemetry.new_correlation_id(),
            reply_to_id=activity.reply_to_id,
            tenant_id=_where(activity).tenant_id,
            local=zone_of(activity.local_timezone, activity.local_timestamp),
        )

    async def _run_turn(self, context: TurnContext, request: TurnRequest, typing_sent: bool) -> None:
        facts = TurnFacts()
        asker = audit.Asker(request.user_aad_id, request.user_name, request.conversation_id,
                            request.conversation_type, request.tenant_id, request.correlation_id)
        with turn_span(request, facts), audit.asking(asker):  # every read of this turn is audited as theirs
            await self._turn(context, request, typing_sent, facts)

    async def _turn(self, context: TurnContext, request: TurnRequest, typing_sent: bool, facts: TurnFacts) -> None:
        data = await self.state.load(context)
        if data.seen(request.activity_id):
            facts.kind = TurnKind.DUPLICATE
            log.info("activity %s already answered", request.activity_id)
            return
        progress = progress_for(context, request.conversation_type, typing_sent=typing_sent)
        await progress.start()
        try:
            reply = await self._as_analyst(context, data, request, progress, facts)
        except Exception as error:
            facts.error = type(error).__name__
            if isinstance(error, Unreachable):  # the reply below fails the same way, and says so in one line
                log.debug("turn stopped: %s", error)
            else:
                log.exception("turn failed")
            reply = Reply([replies.error(
                "Something went wrong",
                "I could not finish that request. Your conversation is kept; please try again.",
                f"If it keeps happening, give your administrator this reference: {request.correlation_id}.")])
        finally:
            data.mark_seen(request.activity_id)
        try:
            await self._deliver(context, data, reply, progress)
        except Unreachable as error:  # one line, no traceback: the stack would only show the connector
            facts.error = facts.error or "unreachable"
            log.warning("could not deliver the answer: %s", error)
        except Exception:
            facts.error = facts.error or "delivery"
            log.exception("could not deliver the answer")
        if not await self.state.save(context, data, bound(data, self.memory)):
            facts.error = facts.error or "state_save"
            try:
                await send_with_retry(lambda: context.send_activity(replies.message(STATE_NOT_SAVED)))
            except Exception:  # the answer went out; this notice is best effort
                log.warning("could not tell the user their turn was not saved", exc_info=True)

    async def _deliver(self, context: TurnContext, data: ConversationData, reply: Reply, progress: Progress) -> None:
        """Update cards in place (falling back to new messages), then send the reply; keep the proposal's
        card id so that card can be updated when it is confirmed, cancelled or expires."""
        # Cards that could not be updated in place go out first: the proposal's card must stay the last message.
        activities = [replies.message(card_list=[card]) for card_id, card in reply.card_updates
                      if not await self._update_card(context, card_id, card)] + reply.activities
        if not activities:
            if reply.quiet is not None:
                await progress.close(reply.quiet)
                return
            activities = [replies.message("Done.")]
        sent_id = await progress.finish(activities[0])
        for extra in activities[1:]:
            response = await send_with_retry(functools.partial(context.send_activity, extra))
            sent_id = getattr(response, "id", None)
        pending = data.conversation.pending(reply.confirmation.id) if reply.confirmation is not None else None
        if pending is not None:
            pending.card_id = sent_id

    async def _update_card(self, context: TurnContext, card_id: str | None, card: dict[str, Any]) -> bool:
        if not card_id:
            return False
        activity = replies.message(card_list=[card])
        activity.id = card_id
        try:
            await send_with_retry(lambda: context.update_activity(activity))
            return True
        except Exception as error:  # noqa: BLE001 - e.g. a client that cannot update; the card goes out anew
            log.info("could not update card %s in place (%s)", card_id, type(error).__name__)
            return False

    async def _as_analyst(self, context: TurnContext, data: ConversationData, request: TurnRequest,
                          progress: Progress, facts: TurnFacts) -> Reply:
        """On-behalf-of mode: a turn that reads runs with the analyst's own token, or gets a sign-in card."""
        if self.signin is None or not self.signin.needs_analyst(request.text, request.value):
            return await self._respond(context, data, request, progress, facts)
        analyst = await self.signin.resolve(context, request.text, request.value, object_id=request.user_aad_id,
                                            tenant_id=request.tenant_id)
        if isinstance(analyst, list):
            return Reply(analyst)
        with acting_as(analyst):
            return await self._respond(context, data, request, progress, facts)

    async def _respond(self, context: TurnContext, data: ConversationData, request: TurnRequest,
                       progress: Progress, facts: TurnFacts) -> Reply:
        """The turn's answer, from the verb and route table (routes.py)."""
        turn = Turn(self, context, data, request, progress, facts, lambda: _where(context.activity))
        return await routes.answer(turn)


def _feedback_text(raw: Any) -> str:
    """The comment typed with a feedback reaction (Teams sends it as a JSON string holding feedbackText)."""
    if not isinstance(raw, str) or not raw:
        return ""
    try:
        parsed = json.loads(raw[:20_000])
    except ValueError:
        return raw[:2000]
    text = parsed.get("feedbackText") if isinstance(parsed, dict) else None
    return text[:2000] if isinstance(text, str) else ""


def _where(activity: Activity) -> Where:
    """What the access policy decides on; the front door checked these fields' types."""
    channel_data = activity.channel_data if isinstance(activity.channel_data, dict) else {}

    def inner_id(name: str) -> str | None:
        value = channel_data.get(name)
        return value.get("id") if isinstance(value, dict) else None

    conversation = activity.conversation
    # Teams names the tenant in channelData and as conversation.tenantId (botbuilder's model reads "tenantID").
    extra = conversation.additional_properties if isinstance(conversation.additional_properties, dict) else {}
    tenant = inner_id("tenant") or conversation.tenant_id or extra.get("tenantId")
    # The front door refused bodies whose parts disagree, and stated the type a Teams id implies; a channel is the
    # one the conversation's thread is in (where replies go), when its id says.
    return Where(tenant_id=tenant if isinstance(tenant, str) else None,
                 object_id=getattr(activity.from_property, "aad_object_id", None),
                 conversation_type=conversation.conversation_type or "personal",
                 team_id=inner_id("team"), channel_id=thread_channel(conversation.id or "") or inner_id("channel"))
