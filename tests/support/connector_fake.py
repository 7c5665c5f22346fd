"""A fake Bot Connector service: the serviceUrl the bot sends its replies to, recording everything.

Speaks the Bot Framework REST API the botbuilder ConnectorClient uses:
POST /v3/conversations/{id}/activities (send), POST /v3/conversations/{id}/activities/{replyTo} (reply),
PUT /v3/conversations/{id}/activities/{activityId} (update), DELETE the same (delete).
It can refuse Teams streaming (403 ContentStreamNotAllowed), throttle (429 with Retry-After) and hold
typing activities for a while (``typing_delay``: a slow network for the typing indicator).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.support.serving import serve


@dataclass
class Sent:
    method: str  # POST (send/reply), PUT (update), DELETE
    conversation_id: str
    activity_id: str  # the id the connector gave (POST) or the id updated (PUT/DELETE)
    body: dict[str, Any]
    at: float  # time.monotonic()

    @property
    def type(self) -> str:
        return str(self.body.get("type", ""))

    @property
    def text(self) -> str:
        return str(self.body.get("text") or "")

    @property
    def cards(self) -> list[dict[str, Any]]:
        return [a.get("content", {}) for a in self.body.get("attachments") or []
                if a.get("contentType") == "application/vnd.microsoft.card.adaptive"]

    @property
    def stream_info(self) -> dict[str, Any] | None:
        return next((e for e in self.body.get("entities") or [] if e.get("type") == "streaminfo"), None)


@dataclass
class FakeConnector:
    refuse_streaming: bool = False
    throttle: list[float] = field(default_factory=list)  # Retry-After values of the next 429 answers
    latency_s: float = 0.0
    typing_delay: Callable[[dict[str, Any]], float] | None = None  # seconds to hold a typing activity (its body)
    sent: list[Sent] = field(default_factory=list)
    url: str = ""
    member_lookups: int = 0
    # Member lookups by sign-in name (GET .../members/{upn}, .../pagedmembers): anyone is a member unless listed
    # in ``not_members``; ``member_status`` answers every member request with that HTTP error instead.
    not_members: set[str] = field(default_factory=set)
    member_status: int | None = None
    names: dict[str, str] = field(default_factory=dict)  # display names by sign-in name (else from the name itself)
    refuse_containing: str | None = None  # a message whose text contains this is refused (403), as a policy would
    # conversations.create (a 1:1 chat the bot starts): each request's body, the Retry-After values of the next 429
    # answers, and an HTTP error to answer every one with instead. Teams gives one member the same chat every time.
    created: list[dict[str, Any]] = field(default_factory=list)
    create_throttle: list[float] = field(default_factory=list)
    create_status: int | None = None
    # As the Agents Playground does: a chat created for a member it knows by no Teams user id (an Entra object id) is
    # created, but a message into it is answered 500 UserNotFound.
    created_chats_refuse: bool = False
    fail_next: list[int] = field(default_factory=list)  # HTTP errors to answer the next activity requests with

    def __post_init__(self) -> None:
        self._ids = itertools.count(1)
        self._refusing: set[str] = set()  # chats created while ``created_chats_refuse`` was set
        self._runner: web.AppRunner | None = None
        self._changed = asyncio.Event()

    async def start(self) -> FakeConnector:
        app = web.Application()
        app.router.add_post("/v3/conversations", self._create)
        app.router.add_post("/v3/conversations/{cid}/activities", self._post)
        app.router.add_post("/v3/conversations/{cid}/activities/{aid}", self._post)
        app.router.add_put("/v3/conversations/{cid}/activities/{aid}", self._put)
        app.router.add_delete("/v3/conversations/{cid}/activities/{aid}", self._delete)
        app.router.add_get("/v3/conversations/{cid}/members/{uid}", self._member)
        app.router.add_get("/v3/conversations/{cid}/pagedmembers", self._paged_members)
        self._runner, port = await serve(app, shutdown_timeout=0.5, access_log=None)
        self.url = f"http://127.0.0.1:{port}/"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def messages(self, conversation_id: str | None = None) -> list[Sent]:
        return [s for s in self.sent if (conversation_id is None or s.conversation_id == conversation_id)]

    def final_view(self, conversation_id: str) -> list[dict[str, Any]]:
        """What a user sees: message activities in order, each in its latest (updated) form."""
        view: dict[str, dict[str, Any]] = {}
        for s in self.messages(conversation_id):
            if s.method == "DELETE":
                view.pop(s.activity_id, None)
            elif s.type == "message":
                view[s.activity_id] = s.body
        return list(view.values())

    async def wait_for(self, predicate, timeout: float = 10.0) -> list[Sent]:
        deadline = time.monotonic() + timeout
        while not predicate(self.sent):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                got = [(s.method, s.type, s.text[:60]) for s in self.sent]
                raise AssertionError(f"timed out; the connector got: {got}")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=min(remaining, 0.2))
        return self.sent

    async def _answer(self, request: web.Request, method: str, activity_id: str) -> web.Response:
        body = await request.json() if method != "DELETE" else {}
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if self.typing_delay is not None and body.get("type") == "typing":
            await asyncio.sleep(self.typing_delay(body))
        if self.throttle:
            retry_after = self.throttle.pop(0)
            return web.json_response({"error": {"code": "TooManyRequests", "message": "API calls quota exceeded"}},
                                     status=429, headers={"Retry-After": str(retry_after)})
        if self.fail_next:
            status = self.fail_next.pop(0)
            return web.json_response({"error": {"code": "ServiceError", "message": "Unknown"}}, status=status)
        if request.match_info["cid"] in self._refusing:
            return web.json_response({"error": {"code": "UserNotFound", "message": "User not found"}}, status=500)
        if self.refuse_containing and self.refuse_containing in str(body.get("text") or ""):
            return web.json_response({"error": {"code": "Forbidden", "message": "The bot may not post here"}},
                                     status=403)
        streaming = any(e.get("type") == "streaminfo" for e in body.get("entities") or [])
        if self.refuse_streaming and streaming and body.get("type") == "typing":
            return web.json_response({"error": {"code": "ContentStreamNotAllowed",
                                                "message": "Content stream is not allowed"}}, status=403)
        self.sent.append(Sent(method, request.match_info["cid"], activity_id, body, time.monotonic()))
        self._changed.set()
        return web.json_response({"id": activity_id}, status=200 if method == "PUT" else 201)

    async def _member(self, request: web.Request) -> web.Response:
        """TeamsInfo.get_member: the user's profile, as Teams returns it (sign-in name and email included), by
        Teams id or sign-in name; 404 MemberNotFoundInConversation for someone listed in ``not_members``."""
        self.member_lookups += 1
        uid = request.match_info["uid"]
        if self.member_status is not None:
            return web.json_response({"error": {"code": "ServiceError", "message": "Unknown"}},
                                     status=self.member_status)
        if uid.lower() in self.not_members:
            return web.json_response({"error": {"code": "MemberNotFoundInConversation",
                                                "message": "The member is not found in the conversation."}},
                                     status=404)
        return web.json_response(member_profile(uid, self.names.get(uid.lower())))

    async def _paged_members(self, request: web.Request) -> web.Response:
        """TeamsInfo.get_paged_members: the conversation's members, Alice and Bob (one page)."""
        self.member_lookups += 1
        if self.member_status is not None:
            return web.json_response({"error": {"code": "ServiceError", "message": "Unknown"}},
                                     status=self.member_status)
        return web.json_response({"members": [member_profile(u) for u in ("29:alice", "29:bob")]})

    async def _post(self, request: web.Request) -> web.Response:
        return await self._answer(request, "POST", f"activity-{next(self._ids)}")

    async def _create(self, request: web.Request) -> web.Response:
        """conversations.create: a 1:1 chat with the one member named (by Teams id or Entra object id)."""
        body = await request.json()
        self.created.append(body)
        self._changed.set()
        if self.create_throttle:
            return web.json_response({"error": {"code": "TooManyRequests", "message": "API calls quota exceeded"}},
                                     status=429, headers={"Retry-After": str(self.create_throttle.pop(0))})
        if self.create_status is not None:
            return web.json_response({"error": {"code": "Forbidden", "message": "The bot cannot message this user"}},
                                     status=self.create_status)
        members = body.get("members") or [{}]
        chat = f"a:1direct-{members[0].get('id')}"
        if self.created_chats_refuse:
            self._refusing.add(chat)
        return web.json_response({"id": chat}, status=201)

    async def _put(self, request: web.Request) -> web.Response:
        return await self._answer(request, "PUT", request.match_info["aid"])

    async def _delete(self, request: web.Request) -> web.Response:
        return await self._answer(request, "DELETE", request.match_info["aid"])


BOT_ID = "28:sentinel-bot"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"  # an Entra tenant id, as Teams sends it


def member_profile(uid: str, name: str | None = None) -> dict[str, Any]:
    """A member as Teams describes one, from a Teams id ("29:alice") or a sign-in name (alice@contoso.com)."""
    user = uid.removeprefix("29:").split("@")[0].lower()
    upn = uid.lower() if "@" in uid else f"{user}@contoso.com"
    return {"id": f"29:{user}", "name": name or user.replace(".", " ").title(), "aadObjectId": f"aad-{user}",
            "userPrincipalName": upn, "email": upn, "tenantId": TENANT, "userRole": "user"}


def personal(text: str, *, activity_id: str, service_url: str, user: str = "alice",
             conversation_id: str = "a:1personal-chat-alice", value: dict | None = None) -> dict[str, Any]:
    return _activity(text, activity_id, service_url, user, {"id": conversation_id, "conversationType": "personal",
                                                             "tenantId": TENANT}, value=value)


def channel_mention(text: str, *, activity_id: str, service_url: str, user: str = "alice",
                    thread: str = "1700000000000") -> dict[str, Any]:
    """An @mention in a channel thread, as Teams sends it (mention entity, ;messageid=, channelData)."""
    conversation = {"id": f"19:war-room@thread.tacv2;messageid={thread}", "conversationType": "channel",
                    "isGroup": True, "tenantId": TENANT}
    body = _activity(f"<at>Sentinel</at> {text}", activity_id, service_url, user, conversation)
    body["entities"] = [{"type": "mention", "text": "<at>Sentinel</at>",
                         "mentioned": {"id": BOT_ID, "name": "Sentinel"}}]
    body["channelData"] = {"teamsChannelId": "19:war-room@thread.tacv2", "teamsTeamId": "19:soc@thread.tacv2",
                           "channel": {"id": "19:war-room@thread.tacv2"}, "team": {"id": "19:soc@thread.tacv2"},
                           "tenant": {"id": TENANT}}
    return body


def group_chat(text: str, *, activity_id: str, service_url: str, mention: bool = True,
               user: str = "alice") -> dict[str, Any]:
    conversation = {"id": "19:group-chat-soc@thread.v2", "conversationType": "groupChat", "isGroup": True,
                    "tenantId": TENANT}
    body = _activity(f"<at>Sentinel</at> {text}" if mention else text, activity_id, service_url, user, conversation)
    if mention:
        body["entities"] = [{"type": "mention", "text": "<at>Sentinel</at>",
                             "mentioned": {"id": BOT_ID, "name": "Sentinel"}}]
    return body


def invoke(data: dict[str, Any], *, activity_id: str, service_url: str, verb: str = "incident_detail",
           conversation_id: str = "a:1personal-chat-alice", user: str = "alice") -> dict[str, Any]:
    body = _activity("", activity_id, service_url, user, {"id": conversation_id, "conversationType": "personal",
                                                         "tenantId": TENANT})
    body.update(type="invoke", name="adaptiveCard/action",
                value={"action": {"type": "Action.Execute", "verb": verb, "data": data}, "trigger": "manual"})
    body.pop("text", None)
    return body


def extension(name: str, value: dict[str, Any], *, activity_id: str, service_url: str, user: str = "alice",
              conversation: dict[str, Any] | None = None) -> dict[str, Any]:
    """A message extension's invoke as Teams sends it: ``composeExtension/query`` (value: commandId, parameters,
    queryOptions) or ``composeExtension/queryLink`` (value: url), from any chat, the bot a member or not."""
    body = _activity("", activity_id, service_url, user, conversation or {
        "id": f"a:1personal-chat-{user}", "conversationType": "personal", "tenantId": TENANT})
    body.update(type="invoke", name=name, value=value)
    body.pop("text", None)
    return body


def search(text: str, *, skip: int = 0, count: int = 25, initial: bool = False) -> dict[str, Any]:
    """The value of a compose-box search (``initial``: the extension just opened, nothing typed)."""
    parameters = [{"name": "initialRun", "value": "true"}] if initial else [{"name": "search", "value": text}]
    return {"commandId": "searchIncidents", "parameters": parameters, "queryOptions": {"skip": skip, "count": count}}


def submit(value: dict[str, Any], *, activity_id: str, service_url: str, reply_to_id: str | None = None,
           user: str = "alice", conversation: str = "personal") -> dict[str, Any]:
    """A card's Action.Submit as Teams sends it: a message with the action's data as its value and the card's
    message as replyToId. ``conversation``: personal, channel (the war-room thread) or group."""
    if conversation == "channel":
        body = channel_mention("", activity_id=activity_id, service_url=service_url, user=user)
        body.pop("entities", None)
    elif conversation == "group":
        body = group_chat("", activity_id=activity_id, service_url=service_url, mention=False, user=user)
    else:
        body = personal("", activity_id=activity_id, service_url=service_url, user=user)
    body["text"] = ""
    body["value"] = value
    if reply_to_id:
        body["replyToId"] = reply_to_id
    return body


def bot_added(*, activity_id: str, service_url: str, conversation_id: str = "a:1personal-chat-alice") -> dict[str, Any]:
    body = _activity("", activity_id, service_url, "alice", {"id": conversation_id, "conversationType": "personal",
                                                            "tenantId": TENANT})
    body.update(type="conversationUpdate", membersAdded=[{"id": BOT_ID}])
    body.pop("text", None)
    return body


def _activity(text: str, activity_id: str, service_url: str, user: str, conversation: dict[str, Any], *,
              value: dict | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": "message", "id": activity_id, "timestamp": "2026-11-20T15:30:00.000Z", "serviceUrl": service_url,
        "channelId": "msteams", "from": {"id": f"29:{user}", "name": user.title(), "aadObjectId": f"aad-{user}"},
        "conversation": conversation, "recipient": {"id": BOT_ID, "name": "Sentinel"}, "text": text,
        "textFormat": "plain", "locale": "en-US", "channelData": {"tenant": {"id": TENANT}},
    }
    if value is not None:
        body["value"] = value
    return body
