"""Teams single sign-on, for on-behalf-of mode (``QUERY_IDENTITY=user``): the analyst's token for a turn.

A turn that reads or changes the workspace needs the analyst's token. It comes from the Bot Framework token
service through the Azure Bot's OAuth connection (botbuilder's UserTokenClient). When there is none yet, the bot
sends a sign-in card (an OAuthCard naming the connection, with a token exchange resource): Teams then gets a
token for the bot's API silently and sends it in a ``signin/tokenExchange`` invoke, which the bot exchanges
through the token service and answers 200; when the exchange fails it answers 412, and Teams falls back to the
card's Sign in button (whose end is a ``signin/verifyState`` invoke). The question that needed the sign-in is kept
(10 minutes, in this process) and answered once the sign-in completes; a question kept elsewhere (another instance,
a restart) cannot be, and the analyst is told to ask again.

Then the token is checked once with Entra (the on-behalf-of exchange, cached per analyst by
``sentinel.identity.UserSessions``): consent missing, a sign-in expired or revoked, or a Conditional Access
challenge each get a clear message (and a new card where signing in again helps), never a stack trace.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

from botbuilder.core import InvokeResponse, TurnContext
from botbuilder.core.cloud_adapter_base import CloudAdapterBase
from botbuilder.schema import (
    Activity,
    ActivityTypes,
    Attachment,
    TokenExchangeInvokeResponse,
    TokenResponse,
)
from botframework.connector.token_api.models import TokenExchangeRequest

from bot.cards import Verb
from bot.commands.parser import CommandError, parse
from bot.sentinel.identity import Analyst, TokenProblem, UserSessions

log = logging.getLogger(__name__)
T = TypeVar("T")

TOKEN_EXCHANGE = "signin/tokenExchange"
VERIFY_STATE = "signin/verifyState"
SIGNIN_INVOKES = (TOKEN_EXCHANGE, VERIFY_STATE)
OAUTH_CARD = "application/vnd.microsoft.card.oauth"
KEEP_SECONDS = 600.0
TOKEN_SERVICE_TIMEOUT_S = 4.0
TOKEN_REUSE_SECONDS = 60.0  # an analyst's token from the token service serves their turns for this long
MAX_KEPT = 1000
# Commands that read nothing: answered without a sign-in.
_NO_DATA_COMMANDS = frozenset({"help", "clear", "prefer"})
SIGN_IN_TEXT = ("This bot reads Microsoft Sentinel with your own permissions. Sign in once, and I'll answer your "
                "question right after.")
CARD_TEXT = "Sign in to read Microsoft Sentinel with your own permissions."
SIGNED_IN_ASK_AGAIN = ("You're signed in. I no longer have the question that asked you to sign in (I keep it for "
                       "10 minutes, on the server that received it), so please ask it again.")
SIGN_IN_SERVICE_DOWN = ("I could not reach the Bot Framework sign-in service to get your token just now, so nothing "
                        "was read. Try again in a minute.")


@dataclass(frozen=True)
class Kept:
    """A question that waits for its analyst to sign in."""

    text: str
    value: dict[str, Any] | None
    until: float


class SignIn:
    def __init__(self, connection_name: str, users: UserSessions, *, oauth_url: str | None = None,
                 local_app_id: str | None = None, keep_s: float = KEEP_SECONDS, clock: Any = time.monotonic) -> None:
        self.connection_name = connection_name
        self._local_app_id = local_app_id
        self.users = users
        self._oauth_url = oauth_url
        self._keep_s = keep_s
        self._clock = clock
        self._kept: OrderedDict[tuple[str, str], Kept] = OrderedDict()
        self._exchanged: OrderedDict[str, None] = OrderedDict()  # Teams sends an exchange from every client
        # Each analyst's token as the token service last gave it (one lookup a minute, not one per turn).
        self._recent: OrderedDict[str, tuple[str, float]] = OrderedDict()

    @staticmethod
    def needs_analyst(text: str, value: dict[str, Any] | None) -> bool:
        """Whether this turn may read or change the workspace (help, clear, prefer and Cancel do not)."""
        verb = Verb.of(value)
        if verb is Verb.CHANGE_CANCEL:
            return False
        if verb in (Verb.ASK, Verb.COMMAND):
            text = str((value or {}).get("question" if verb is Verb.ASK else "command") or "")
        elif verb is not None:
            return True
        try:
            command = parse(text)
        except CommandError:
            return False  # answered with what is wrong, without reading
        return command is None or command.name not in _NO_DATA_COMMANDS

    async def resolve(self, context: TurnContext, text: str, value: dict[str, Any] | None, *, object_id: str | None,
                      tenant_id: str | None) -> Analyst | list[Activity]:
        """The turn's analyst (Entra object id and tenant as the handler read them) with their token, or what to
        send instead (a sign-in card, or why not)."""
        activity = context.activity
        try:
            token = await self._user_token(context)
        except Exception as error:  # noqa: BLE001 - the token service's failure is the analyst's to retry
            log.warning("token service lookup failed (%s)", type(error).__name__)
            return [_message(SIGN_IN_SERVICE_DOWN)]
        if token is None:  # the text first (it may replace a progress message), the card as a message of its own
            self._keep(activity, text, value)
            return [_message(SIGN_IN_TEXT), await self._card(context)]
        analyst = Analyst(object_id=object_id or activity.from_property.id, tenant_id=tenant_id, token=token)
        problem = await self.users.check(analyst)
        if problem is None:
            return analyst
        if problem in (TokenProblem.SIGN_IN_AGAIN, TokenProblem.INTERACTION):
            await self._sign_out(context)
            self._keep(activity, text, value)
            return [_message(problem.message), await self._card(context)]
        return [_message(problem.message)]

    async def invoke(self, context: TurnContext) -> tuple[InvokeResponse, Kept | None]:
        """A ``signin/tokenExchange`` or ``signin/verifyState`` invoke: its answer, and the question to answer now
        (None when nothing was kept; the analyst is then told to ask again)."""
        activity = context.activity
        value = activity.value if isinstance(activity.value, dict) else {}
        if activity.name == TOKEN_EXCHANGE:
            exchange_id = str(value.get("id") or "")[:200]
            if exchange_id and exchange_id in self._exchanged:  # another of the analyst's clients: already done
                return InvokeResponse(status=200, body=self._exchange_body(exchange_id)), None
            if not await self._exchange(context, value):
                return InvokeResponse(status=412, body=self._exchange_body(
                    exchange_id, "The bot could not exchange the token; sign in with the button instead.")), None
            self._remember_exchange(exchange_id)
            response = InvokeResponse(status=200, body=self._exchange_body(exchange_id))
        else:
            code = value.get("state")
            try:
                token = await self._user_token(context, str(code)[:64] if isinstance(code, str) else None)
            except Exception as error:  # noqa: BLE001
                log.warning("token service verifyState failed (%s)", type(error).__name__)
                token = None
            if token is None:
                return InvokeResponse(status=404), None
            response = InvokeResponse(status=200)
        kept = self._take(activity)
        if kept is None:
            await context.send_activity(_message(SIGNED_IN_ASK_AGAIN))
        return response, kept

    # ---- the token service -----------------------------------------------------------------------------------

    def _client(self, context: TurnContext) -> Any:
        client = context.turn_state.get(CloudAdapterBase.USER_TOKEN_CLIENT_KEY)
        if client is None:
            raise RuntimeError("no user token client on this turn")
        if self._oauth_url:
            # botbuilder's token client keeps its endpoint in its TokenApiClient's configuration; BOT_OAUTH_URL
            # points it elsewhere (sovereign clouds, tests), as botbuilder's own OAuthUrl setting would.
            config = getattr(getattr(getattr(client, "_client", None), "config", None), "base_url", None)
            if config is not None:
                client._client.config.base_url = self._oauth_url
        if not getattr(client, "_app_id", None) and self._local_app_id:
            # Local mode (no MICROSOFT_APP_ID: local runs, tests) gives the token client no app id to name in the
            # sign-in state; the single sign-on app registration's stands in.
            client._app_id = self._local_app_id
        return client

    async def _user_token(self, context: TurnContext, magic_code: str | None = None) -> str | None:
        activity = context.activity
        user = activity.from_property.id
        recent = self._recent.get(user)
        if magic_code is None and recent is not None and recent[1] > self._clock():
            return recent[0]
        response: TokenResponse | None = await _bounded(self._client(context).get_user_token(
            user, self.connection_name, activity.channel_id, magic_code))
        token = response.token if response is not None and response.token else None
        self._recent.pop(user, None)
        if token is not None:
            self._recent[user] = (token, self._clock() + TOKEN_REUSE_SECONDS)
            while len(self._recent) > MAX_KEPT:
                self._recent.popitem(last=False)
        return token

    async def _exchange(self, context: TurnContext, value: dict[str, Any]) -> bool:
        activity = context.activity
        token = value.get("token")
        if value.get("connectionName") != self.connection_name or not isinstance(token, str) or not token:
            log.info("token exchange refused: wrong connection or no token")
            return False
        try:
            response = await _bounded(self._client(context).exchange_token(
                activity.from_property.id, self.connection_name, activity.channel_id,
                TokenExchangeRequest(token=token)))
        except Exception as error:  # noqa: BLE001 - Teams falls back to the sign-in button on a 412
            log.info("token exchange failed (%s)", type(error).__name__)
            return False
        return bool(getattr(response, "token", None))

    async def _sign_out(self, context: TurnContext) -> None:
        activity = context.activity
        self._recent.pop(activity.from_property.id, None)
        try:
            await _bounded(self._client(context).sign_out_user(activity.from_property.id, self.connection_name,
                                                               activity.channel_id))
        except Exception as error:  # noqa: BLE001 - the card still lets the analyst sign in again
            log.info("could not sign the analyst out at the token service (%s)", type(error).__name__)

    async def _card(self, context: TurnContext) -> Activity:
        """The OAuthCard: Teams exchanges silently through its token exchange resource, else shows the button."""
        try:
            resource = await _bounded(self._client(context).get_sign_in_resource(self.connection_name,
                                                                                 context.activity, None))
        except Exception as error:  # noqa: BLE001 - the analyst is told, and can ask again
            log.warning("could not get a sign-in resource from the token service (%s)", type(error).__name__)
            return _message(SIGN_IN_SERVICE_DOWN)
        exchange = resource.token_exchange_resource
        content: dict[str, Any] = {"text": CARD_TEXT, "connectionName": self.connection_name,
                                   "buttons": [{"type": "signin", "title": "Sign in", "value": resource.sign_in_link}]}
        if exchange is not None:
            content["tokenExchangeResource"] = {"id": exchange.id, "uri": exchange.uri,
                                                "providerId": exchange.provider_id}
        return Activity(type=ActivityTypes.message, attachments=[Attachment(content_type=OAUTH_CARD, content=content)])

    def _exchange_body(self, exchange_id: str, failure: str | None = None) -> TokenExchangeInvokeResponse:
        return TokenExchangeInvokeResponse(id=exchange_id, connection_name=self.connection_name,
                                           failure_detail=failure)

    # ---- questions that wait for a sign-in --------------------------------------------------------------------

    def _keep(self, activity: Activity, text: str, value: dict[str, Any] | None) -> None:
        key = (activity.conversation.id, activity.from_property.id)
        self._kept.pop(key, None)
        self._kept[key] = Kept(text, value, self._clock() + self._keep_s)
        while len(self._kept) > MAX_KEPT:
            self._kept.popitem(last=False)

    def _take(self, activity: Activity) -> Kept | None:
        kept = self._kept.pop((activity.conversation.id, activity.from_property.id), None)
        return kept if kept is not None and kept.until > self._clock() else None

    def _remember_exchange(self, exchange_id: str) -> None:
        if exchange_id:
            self._exchanged[exchange_id] = None
            while len(self._exchanged) > MAX_KEPT:
                self._exchanged.popitem(last=False)


async def _bounded(call: Awaitable[T]) -> T:
    """A token service call within TOKEN_SERVICE_TIMEOUT_S (botbuilder's own is 100 s; Teams waits about 5 s for an
    invoke's answer, and an analyst should not wait long for a sign-in card)."""
    return await asyncio.wait_for(call, TOKEN_SERVICE_TIMEOUT_S)


def _message(text: str) -> Activity:
    return Activity(type=ActivityTypes.message, text=text)

