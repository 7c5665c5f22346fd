"""Bot Framework authentication that reuses its outbound clients.

botbuilder's CloudAdapter builds a new ConnectorClient and UserTokenClient for every activity; with
msrest each costs several milliseconds of CPU (its retry policy setup alone), which dominated the
bot's per-turn CPU. Both are stateless apart from credentials, and the adapter never closes them, so
this wrapper keeps one per (service URL, audience, app id) and per app id, in bounded caches. Their
conversation operations serialise activities from their models' attribute maps instead of msrest's generic walk
(:class:`ActivitySerializer`), and the three a turn sends through (reply, send, update) go out on aiohttp
(:class:`DirectConversations`): msrest would run each through ``requests`` on a thread pool, which with its pipeline
cost a seventh of a model turn's CPU. :class:`SentinelAdapter` is botbuilder's CloudAdapter with a turn context that
sends activities without deep-copying them first (:class:`ShallowSendContext`): the copies of the cards in every
answer were a fifth of a model turn's CPU. Each body is encoded once, card content as it is (:func:`_json`).

With ``tokens`` (an app id is set), requests are authenticated by the front door's own token check
(front_door.ChannelTokens) instead of botbuilder's, which blocks the event loop while it fetches keys.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from enum import Enum
from typing import Any
from urllib.parse import quote

import aiohttp
from botbuilder.core import TurnContext
from botbuilder.integration.aiohttp import CloudAdapter
from botbuilder.schema import Activity, CallerIdConstants, ResourceResponse
from botframework.connector.auth import (
    AuthenticateRequestResult,
    BotFrameworkAuthentication,
    ClaimsIdentity,
    ConnectorFactory,
)
from msrest.serialization import Model, Serializer
from yarl import URL

from bot.teams.front_door import ChannelTokens

MAX_CACHED_CLIENTS = 64
SEND_TIMEOUT_S = 60  # one request to the Bot Connector; Teams answers in well under a second


class _Cache:
    def __init__(self, limit: int = MAX_CACHED_CLIENTS) -> None:
        self._items: OrderedDict[tuple, Any] = OrderedDict()
        self._limit = limit

    def get(self, key: tuple) -> Any:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: tuple, value: Any) -> Any:
        self._items[key] = value
        while len(self._items) > self._limit:
            self._items.popitem(last=False)
        return value


def _app_id(claims: ClaimsIdentity | None) -> str:
    claims_map = getattr(claims, "claims", None) or {}
    return str(claims_map.get("appid") or claims_map.get("azp") or claims_map.get("aud") or "")



class _NotPlain(Exception):
    """A value the direct serialisation below does not handle: msrest serialises the activity instead."""


def _wire(value: Any, kind: str) -> Any:
    """``value`` as msrest would put it on the wire for its declared ``kind``."""
    if value is None:
        return None
    if kind == "str":
        if isinstance(value, Enum):
            return value.value
        if isinstance(value, str):
            return value
    elif kind in _BASIC:
        if type(value) is _BASIC[kind]:
            return value
    elif kind == "iso-8601":
        return Serializer.serialize_iso(value)
    elif kind == "object":
        return _plain(value)
    elif kind.startswith("[") and kind.endswith("]") and isinstance(value, list):
        return [_wire(item, kind[1:-1]) for item in value]
    elif kind.startswith("{") and kind.endswith("}") and isinstance(value, dict):
        return {key: _wire(item, kind[1:-1]) for key, item in value.items()}
    elif isinstance(value, Model):
        return _model(value)
    raise _NotPlain(kind)


def _model(value: Model) -> dict[str, Any]:
    wire: dict[str, Any] = {}
    readonly = getattr(value, "_validation", {}) or {}
    for name, described in type(value)._attribute_map.items():  # the object's own class: subclasses add fields
        key = described["key"]
        if name == "additional_properties" and key == "":
            wire.update(getattr(value, "additional_properties", None) or {})
            continue
        if readonly.get(name, {}).get("readonly") or "." in key:  # read-only, or a flattened key: msrest's way
            raise _NotPlain(name)
        field = getattr(value, name, None)
        if field is not None:
            wire[key] = _wire(field, described["type"])
    return wire


def _plain(value: Any) -> Any:
    """An ``object``-typed value: JSON as it is (card content built as dicts, not walked here: :func:`_json` finds
    what JSON cannot hold), a model as its fields."""
    if isinstance(value, str | bool | int | float | dict | list) or value is None:
        return value
    if isinstance(value, Model):
        return _model(value)
    raise _NotPlain(type(value).__name__)


def _refuse(value: Any) -> Any:
    raise _NotPlain(type(value).__name__)


def _json(serializer: Serializer, activity: Any) -> str:
    """The activity's JSON body, encoded once: card content goes as it is, unless it holds something JSON cannot (a
    model, a key that is not a string), when msrest serialises the whole activity instead."""
    try:
        return json.dumps(serializer.body(activity, "Activity"), separators=(",", ":"), default=_refuse)
    except (_NotPlain, TypeError, ValueError):
        return json.dumps(Serializer.body(serializer, activity, "Activity"), separators=(",", ":"))


_BASIC = {"bool": bool, "int": int, "float": float}


class ActivitySerializer(Serializer):
    """msrest's serializer, except for the activities the bot sends.

    msrest walks an activity value by value through its generic machinery (validation, key transformers, a model
    rebuilt from itself), which for one incident-list card cost more CPU than the rest of the turn's reply, and for
    a typing indicator sent by the web front was half of that front's CPU per queued activity. Activities are
    serialised here from their models' own attribute maps, card content (plain JSON built by bot/cards) as it is;
    anything this does not know (another data type, a read-only or flattened field) goes msrest's way.
    tests/teams/test_connectors.py checks the result equals msrest's for every kind of activity the bot sends.
    """

    def body(self, data: Any, data_type: str, **kwargs: Any) -> Any:
        if data_type == "Activity" and isinstance(data, Model) and not kwargs:
            try:
                return _model(data)
            except _NotPlain:
                pass
        return super().body(data, data_type, **kwargs)


class ConnectorError(Exception):
    """The Bot Connector answered a request with an error status. ``response`` carries the status and headers the
    way msrest's errors do, so callers read both shapes alike (progress.send_with_retry: 429 and Retry-After)."""

    def __init__(self, status: int, headers: Mapping[str, str], detail: str) -> None:
        super().__init__(f"the Bot Connector answered {status}: {detail[:200]}")
        self.response = _Answer(status, dict(headers))
        self.code = _error_code(detail)  # the answer's error code ("UserNotFound"), when it names one


def _error_code(detail: str) -> str | None:
    """The Bot Connector's error code in an error answer's body ({"error": {"code": ...}}), or None."""
    try:
        body = json.loads(detail)
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code[:60] if isinstance(code, str) else None


class OwnTurn:
    """``logic`` as the callback of a turn the adapter runs itself (``create_conversation``,
    ``continue_conversation``): the adapter hands what such a callback raises to its ``on_turn_error`` (a traceback in
    the log) and returns as if all went well, so the caller never learns it failed. What ``logic`` raised is kept
    here instead; ``raise_kept`` raises it where the caller can say what happened."""

    def __init__(self, logic: Callable[[TurnContext], Awaitable[Any]]) -> None:
        self._logic = logic
        self.error: Exception | None = None

    async def __call__(self, context: TurnContext) -> None:
        try:
            await self._logic(context)
        except Exception as error:  # noqa: BLE001 - kept for the caller (raise_kept), not the adapter's handler
            self.error = error

    def raise_kept(self) -> None:
        if self.error is not None:
            raise self.error


class Unreachable(Exception):
    """The serviceUrl could not be reached (refused, reset, unresolvable, timed out): nothing was delivered. Its
    message names the host and the failure in one line; whoever gives up on the answer logs it, without a
    traceback (the stack says nothing the message does not)."""

    def __init__(self, url: str, cause: BaseException) -> None:
        self.host = URL(url).host or "?"
        self.cause = type(cause).__name__
        super().__init__(f"{self.host} unreachable ({self.cause})")


class _Answer:
    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status_code = status
        self.headers = headers


class _Headers:
    """What msrest credentials sign: an object with ``headers`` (they set or drop Authorization)."""

    def __init__(self) -> None:
        self.headers: dict[str, str] = {}


class HttpSessions:
    """One aiohttp session per event loop (a session is bound to the loop that made it): the web loop sends early
    typing indicators, the turn loop everything else."""

    def __init__(self) -> None:
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = \
            weakref.WeakKeyDictionary()

    def current(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._by_loop.get(loop)
        if session is None or session.closed:
            session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=SEND_TIMEOUT_S))
            self._by_loop[loop] = session
        return session

    async def close(self) -> None:
        """Close this loop's session (each loop's owner calls this at its stop)."""
        session = self._by_loop.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.close()


class DirectConversations:
    """A connector client's conversation operations, with reply, send and update sent on aiohttp.

    The request is the one msrest would make: the same URL (msrest's own formatting), headers, credentials and
    body (its serializer, :class:`ActivitySerializer`); the answer is read as msrest would (a ResourceResponse). Calls
    with options this class does not know, and every other operation, go to msrest's operations unchanged.
    """

    def __init__(self, operations: Any, sessions: HttpSessions) -> None:
        self._operations = operations
        self._sessions = sessions

    def __getattr__(self, name: str) -> Any:
        return getattr(self._operations, name)

    async def reply_to_activity(self, conversation_id: str, activity_id: str, activity: Any, **options: Any) -> Any:
        if options:
            return await self._operations.reply_to_activity(conversation_id, activity_id, activity, **options)
        return await self._send("POST", self._operations.reply_to_activity, activity,
                                {"x-ms-conversation-id": conversation_id},  # as msrest sends a reply
                                conversationId=conversation_id, activityId=activity_id)

    async def send_to_conversation(self, conversation_id: str, activity: Any, **options: Any) -> Any:
        if options:
            return await self._operations.send_to_conversation(conversation_id, activity, **options)
        return await self._send("POST", self._operations.send_to_conversation, activity, {},
                                conversationId=conversation_id)

    async def update_activity(self, conversation_id: str, activity_id: str, activity: Any, **options: Any) -> Any:
        if options:
            return await self._operations.update_activity(conversation_id, activity_id, activity, **options)
        return await self._send("PUT", self._operations.update_activity, activity, {},
                                conversationId=conversation_id, activityId=activity_id)

    async def _send(self, method: str, operation: Any, activity: Any, extra_headers: dict[str, str],
                    **path: str) -> ResourceResponse:
        operations = self._operations
        url = operations._client.format_url(operation.metadata["url"],
                                            **{name: quote(str(value), safe="") for name, value in path.items()})
        signed = _Headers()
        credentials = getattr(operations.config, "credentials", None)
        if credentials is not None:
            credentials.signed_session(signed)  # the bot's token (cached by MSAL), or none in local mode
        headers = {**signed.headers, "Accept": "application/json", "Content-Type": "application/json; charset=utf-8",
                   **extra_headers}
        body = _json(operations._serialize, activity)
        # encoded=True: the path goes out quoted exactly as msrest quoted it (Teams ids hold ':', '@', ';', '=').
        for attempt in (1, 2):
            try:
                async with self._sessions.current().request(method, URL(url, encoded=True), data=body.encode(),
                                                            headers=headers) as response:
                    text = await response.text()
                break
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as error:
                # Closed or reset before any answer on a connection that was open (not a refused one): most often a
                # kept-alive connection the server had just let go (the Agents Playground's, after 5 idle seconds).
                # Once more, on a new connection, or the answer is lost.
                if attempt == 2 or isinstance(error, aiohttp.ClientConnectorError):
                    raise Unreachable(url, error) from error
            except (aiohttp.ClientConnectionError, TimeoutError) as error:
                raise Unreachable(url, error) from error
        if response.status not in (200, 201, 202):
            raise ConnectorError(response.status, response.headers, text)
        try:
            answer = json.loads(text) if text.strip() else {}
        except ValueError:
            answer = {}
        return ResourceResponse(id=answer.get("id") if isinstance(answer, dict) else None)


def _direct(client: Any, sessions: HttpSessions) -> Any:
    """The connector client, its conversation operations using :class:`ActivitySerializer`, and reply, send and
    update going out on aiohttp (:class:`DirectConversations`)."""
    operations = getattr(client, "conversations", None)
    serializer = getattr(operations, "_serialize", None)
    if isinstance(serializer, Serializer) and not isinstance(serializer, ActivitySerializer):
        operations._serialize = ActivitySerializer(serializer.dependencies)  # type: ignore[union-attr]
    if operations is not None and not isinstance(operations, DirectConversations):
        client.conversations = DirectConversations(operations, sessions)
    return client


class _CachingConnectorFactory(ConnectorFactory):
    def __init__(self, inner: ConnectorFactory, cache: _Cache, app_id: str, sessions: HttpSessions) -> None:
        self._inner = inner
        self._cache = cache
        self._app_id = app_id
        self._sessions = sessions

    async def create(self, service_url: str, audience: str | None = None) -> Any:
        key = (service_url, audience, self._app_id)
        client = self._cache.get(key)
        if client is None:
            client = self._cache.put(key, _direct(await self._inner.create(service_url, audience), self._sessions))
        return client


class _Sent(Activity):
    """An activity on its way out: botbuilder's copy of it is the shallow one :func:`_outgoing` made already."""

    def __deepcopy__(self, memo: dict[int, Any]) -> _Sent:
        return self


def _outgoing(activity: Activity) -> Activity:
    """A shallow copy of ``activity`` for botbuilder to address: it sets only top-level fields (who, where, which
    activity it replies to, its id and input hint), so the caller's activity stays as it was and its card content,
    which nothing on the way out changes, is shared rather than copied."""
    if type(activity) is not Activity:
        return activity
    sent = _Sent.__new__(_Sent)
    sent.__dict__.update(activity.__dict__)
    return sent


class ShallowSendContext(TurnContext):
    """botbuilder's turn context, but :meth:`send_activities` copies each activity shallowly (:func:`_outgoing`)
    instead of deep-copying it with its cards."""

    async def send_activities(self, activities: list[Activity]) -> list[ResourceResponse]:
        return await super().send_activities([_outgoing(activity) for activity in activities])


class SentinelAdapter(CloudAdapter):
    """CloudAdapter whose turn contexts are :class:`ShallowSendContext` (given a :class:`CachingAuthentication`)."""

    def _create_turn_context(self, *args: Any, **kwargs: Any) -> TurnContext:
        made = super()._create_turn_context(*args, **kwargs)
        context = ShallowSendContext(self, made.activity)
        context.turn_state.update(made.turn_state)
        return context


def auth_record(result: AuthenticateRequestResult) -> dict[str, Any]:
    """What a turn's worker needs of the front's authentication result, as JSON (see CachingAuthentication.trusted)."""
    claims = result.claims_identity
    return {"claims": dict(getattr(claims, "claims", None) or {}),
            "authenticated": bool(getattr(claims, "is_authenticated", False)),
            "audience": result.audience, "caller_id": result.caller_id}


class CachingAuthentication(BotFrameworkAuthentication):
    """Delegates everything to ``inner``, reusing the clients it creates."""

    def __init__(self, inner: BotFrameworkAuthentication, tokens: ChannelTokens | None = None) -> None:
        self._inner = inner
        self.tokens = tokens
        self._connectors = _Cache()
        self._user_token_clients = _Cache()
        self.sessions = HttpSessions()  # close() it on each loop that sent, at that loop's stop

    async def authenticate_request(self, activity: Activity, auth_header: str) -> AuthenticateRequestResult:
        """Raises front_door.Refused for a request that is not from the channel (with ``tokens``)."""
        if self.tokens is None:
            result = await self._inner.authenticate_request(activity, auth_header)
        else:
            claims = await self.tokens.claims(auth_header, activity.channel_id, activity.service_url or "")
            result = AuthenticateRequestResult()
            result.claims_identity = ClaimsIdentity(claims, True)
            # What botbuilder's own check returns for a channel (not skill) token.
            result.audience = self._inner.get_originating_audience()
            result.caller_id = CallerIdConstants.public_azure_channel
            result.connector_factory = self._inner.create_connector_factory(result.claims_identity)
        if result.connector_factory is not None:
            result.connector_factory = _CachingConnectorFactory(
                result.connector_factory, self._connectors, _app_id(result.claims_identity), self.sessions)
        return result

    async def authenticate_streaming_request(
        self, auth_header: str, channel_id_header: str
    ) -> AuthenticateRequestResult:
        return await self._inner.authenticate_streaming_request(auth_header, channel_id_header)

    def trusted(self, record: dict[str, Any]) -> AuthenticateRequestResult:
        """The result of a check the web front already made (:func:`auth_record`), for a turn it queued: the queue
        is written only by the bot's own identity, and the channel token may have expired by the time it runs."""
        result = AuthenticateRequestResult()
        result.claims_identity = ClaimsIdentity(dict(record.get("claims") or {}), bool(record.get("authenticated")))
        result.audience = record.get("audience") or self._inner.get_originating_audience()
        result.caller_id = record.get("caller_id")
        result.connector_factory = self.create_connector_factory(result.claims_identity)
        return result

    def create_connector_factory(self, claims_identity: ClaimsIdentity) -> ConnectorFactory:
        return _CachingConnectorFactory(self._inner.create_connector_factory(claims_identity), self._connectors,
                                        _app_id(claims_identity), self.sessions)

    async def create_user_token_client(self, claims_identity: ClaimsIdentity) -> Any:
        key = (_app_id(claims_identity),)
        client = self._user_token_clients.get(key)
        if client is None:
            client = self._user_token_clients.put(key, await self._inner.create_user_token_client(claims_identity))
        return client

    def create_bot_framework_client(self) -> Any:
        return self._inner.create_bot_framework_client()

    def get_originating_audience(self) -> str:
        return self._inner.get_originating_audience()

    async def authenticate_channel_request(self, auth_header: str) -> ClaimsIdentity:
        return await self._inner.authenticate_channel_request(auth_header)
