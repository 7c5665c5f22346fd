"""Outgoing activities: card content is sent as the JSON it is, without msrest's value-by-value walk, and reply,
send and update go out on aiohttp instead of msrest's requests-on-a-thread pipeline (issue 13).

The wire request must be exactly what msrest would have produced, for every kind of activity the bot sends.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp import web
from botbuilder.schema import Activity, Attachment, ChannelAccount, ConversationAccount, Entity, HeroCard
from botframework.connector.aio import ConnectorClient
from botframework.connector.auth import MicrosoftAppCredentials
from msrest.authentication import BasicTokenAuthentication

from bot.teams import connectors
from bot.teams.connectors import ActivitySerializer, ConnectorError, DirectConversations, HttpSessions, _direct
from bot.teams.progress import send_with_retry
from tests.support.serving import serve

CARD = {"type": "AdaptiveCard", "version": "1.5", "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "body": [{"type": "TextBlock", "text": "Incidents — 3 open ✓", "wrap": True, "size": None},
                 {"type": "Table", "columns": [{"width": 1}, {"width": 2.5}],
                  "rows": [{"type": "TableRow", "cells": [{"items": [], "selected": False}]}]}],
        "actions": [{"type": "Action.Submit", "data": {"verb": "incident", "number": 42, "ids": ["a", "b"]}}]}


def _activity(attachments: list[Attachment] | None) -> Activity:
    return Activity(type="message", text="Here is what I found [1].", attachments=attachments,
                    from_property=ChannelAccount(id="28:bot", name="Sentinel"),
                    recipient=ChannelAccount(id="29:alice"), conversation=ConversationAccount(id="a:chat"),
                    reply_to_id="1700000000001", entities=[Entity(type="https://schema.org/Message")],
                    channel_data={"feedbackLoopEnabled": True})


def _others() -> list[Activity]:
    """The other activities the bot sends: typing, streaming updates, mentions, citations, suggested actions."""
    from datetime import UTC, datetime

    from botbuilder.schema import ActivityTypes, CardAction, Mention, SuggestedActions

    from bot.teams.progress import StreamInfo
    from bot.teams.replies import AIMessage

    people = {"from_property": ChannelAccount(id="28:bot", name="Sentinel", role="bot"),
              "recipient": ChannelAccount(id="29:alice", aad_object_id="aad-alice", name="Alice Ng"),
              "conversation": ConversationAccount(id="19:abc@thread.tacv2;messageid=17", is_group=True,
                                                  conversation_type="channel", tenant_id="tenant-1"),
              "channel_id": "msteams", "service_url": "https://smba.trafficmanager.net/amer/"}
    return [
        Activity(type=ActivityTypes.typing, reply_to_id="1700000000001", **people),
        Activity(type="typing", text="Querying incidents...", entities=[StreamInfo(stream_type="informative",
                 stream_sequence=2, stream_id="s-1")], channel_data={"streamType": "informative"}, **people),
        Activity(type="message", text="<at>Megan Bowen</at>, please take #14448 [1].", timestamp=datetime(
                 2026, 11, 24, 12, 3, 4, 500, tzinfo=UTC), entities=[
                     Mention(mentioned=ChannelAccount(id="29:megan", name="Megan Bowen"), text="<at>Megan Bowen</at>",
                             type="mention"),
                     AIMessage([{"@type": "Claim", "position": 1, "appearance": {"name": "#14448", "abstract": None}}]),
                     StreamInfo(stream_type="final", stream_id="s-1")],
                 suggested_actions=SuggestedActions(actions=[CardAction(type="imBack", title="incidents 24h",
                                                                        value="incidents 24h")]),
                 value={"verb": "x", "ids": [1, None, {"ok": True}]}, **people),
    ]


@pytest.mark.parametrize("index", range(3), ids=["typing", "streamed update", "mention, citations, suggestions"])
def test_the_other_activities_the_bot_sends_are_what_msrest_would_send(index: int) -> None:
    client = ConnectorClient(MicrosoftAppCredentials("", ""), base_url="http://127.0.0.1:1/")
    plain = client.conversations._serialize
    fast = _direct(client, HttpSessions()).conversations._serialize
    activity = _others()[index]
    expected = plain.body(activity, "Activity")
    assert fast.body(activity, "Activity") == expected
    assert connectors._model(activity) == expected, "serialised directly, not handed back to msrest"


@pytest.mark.parametrize("attachments", [
    [Attachment(content_type="application/vnd.microsoft.card.adaptive", content=CARD)],
    [Attachment(content_type="application/vnd.microsoft.card.adaptive", content=CARD, name="card"),
     Attachment(content_type="image/png", content_url="https://contoso.example/a.png")],
    [Attachment(content_type="application/vnd.microsoft.card.hero", content=HeroCard(title="a model, not JSON"))],
    None,
], ids=["one card", "card and link", "model content", "no attachments"])
def test_the_body_is_what_msrest_would_send(attachments: list[Attachment] | None) -> None:
    client = ConnectorClient(MicrosoftAppCredentials("", ""), base_url="http://127.0.0.1:1/")
    plain = client.conversations._serialize
    fast = _direct(client, HttpSessions()).conversations._serialize
    assert isinstance(fast, ActivitySerializer) and not isinstance(plain, ActivitySerializer)
    activity = _activity(attachments)
    expected: Any = plain.body(activity, "Activity")
    assert fast.body(activity, "Activity") == expected
    assert activity.attachments == attachments, "the activity itself is left as it was"


class _Recorder:
    """A Bot Connector that records each request and answers with the next of ``statuses`` (then 200)."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self.statuses = list(statuses or [])

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.requests.append({"method": request.method, "path": request.raw_path,
                              "headers": {k.lower(): v for k, v in request.headers.items()},
                              "body": json.loads(body) if body else None})
        status = self.statuses.pop(0) if self.statuses else 200
        if status != 200:
            return web.json_response({"error": {"code": "Throttled"}}, status=status, headers={"Retry-After": "0"})
        return web.json_response({"id": f"sent-{len(self.requests)}"})


async def _serve(recorder: _Recorder) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", recorder.handle)
    runner, port = await serve(app)
    return runner, f"http://127.0.0.1:{port}/amer/"


KEPT_HEADERS = ("authorization", "content-type", "accept", "x-ms-conversation-id")


@pytest.mark.parametrize("operation", ["reply_to_activity", "send_to_conversation", "update_activity"])
async def test_direct_requests_are_the_ones_msrest_makes(operation: str) -> None:
    recorder = _Recorder()
    runner, base = await _serve(recorder)
    sessions = HttpSessions()
    try:
        plain = ConnectorClient(BasicTokenAuthentication({"access_token": "bot-token"}), base_url=base)
        direct = _direct(ConnectorClient(BasicTokenAuthentication({"access_token": "bot-token"}), base_url=base),
                         sessions)
        assert isinstance(direct.conversations, DirectConversations)
        conversation = "19:war-room@thread.tacv2;messageid=17/x y"  # a channel thread: ; / and a space in the id
        arguments: tuple[Any, ...] = {
            "reply_to_activity": (conversation, "1700000000001", _activity(None)),
            "send_to_conversation": (conversation, _activity(None)),
            "update_activity": (conversation, "activity/1", _activity(None)),
        }[operation]
        expected = await getattr(plain.conversations, operation)(*arguments)
        answer = await getattr(direct.conversations, operation)(*arguments)
    finally:
        await sessions.close()
        await runner.cleanup()
    by_msrest, by_aiohttp = recorder.requests
    assert (by_aiohttp["method"], by_aiohttp["path"], by_aiohttp["body"]) == \
        (by_msrest["method"], by_msrest["path"], by_msrest["body"])
    assert {h: by_aiohttp["headers"].get(h) for h in KEPT_HEADERS} == \
        {h: by_msrest["headers"].get(h) for h in KEPT_HEADERS}
    assert by_aiohttp["headers"]["authorization"] == "Bearer bot-token"
    assert (expected.id, answer.id) == ("sent-1", "sent-2")


async def test_a_throttled_send_is_retried_and_an_error_says_its_status() -> None:
    recorder = _Recorder([429])
    runner, base = await _serve(recorder)
    sessions = HttpSessions()
    try:
        conversations = _direct(ConnectorClient(MicrosoftAppCredentials("", ""), base_url=base), sessions).conversations
        answer = await send_with_retry(lambda: conversations.send_to_conversation("a:chat", _activity(None)))
        recorder.statuses = [503]
        with pytest.raises(ConnectorError) as failed:
            await conversations.send_to_conversation("a:chat", _activity(None))
    finally:
        await sessions.close()
        await runner.cleanup()
    assert answer.id == "sent-2", "the 429 was waited out (Retry-After: 0) and the send tried again"
    assert failed.value.response.status_code == 503 and failed.value.response.headers["Retry-After"] == "0"
    assert "authorization" not in recorder.requests[0]["headers"], "no token in local mode (no app id)"


@pytest.mark.parametrize("attachments", [
    [Attachment(content_type="application/vnd.microsoft.card.adaptive", content=CARD)],
    [Attachment(content_type="application/vnd.microsoft.card.hero", content=HeroCard(title="a model, not JSON"))],
    [Attachment(content_type="application/vnd.microsoft.card.adaptive", content={"body": [HeroCard(title="inside")]})],
    None,
], ids=["one card", "model content", "a model inside card JSON", "no attachments"])
def test_the_json_sent_is_what_msrest_would_send(attachments: list[Attachment] | None) -> None:
    """Card content is encoded once, as it is; content JSON cannot hold as it is goes msrest's way."""
    client = ConnectorClient(MicrosoftAppCredentials("", ""), base_url="http://127.0.0.1:1/")
    plain = client.conversations._serialize
    fast = _direct(client, HttpSessions()).conversations._serialize
    activity = _activity(attachments)
    assert json.loads(connectors._json(fast, activity)) == json.loads(json.dumps(plain.body(activity, "Activity")))


async def test_a_sent_activity_is_copied_shallowly_and_left_as_it_was() -> None:
    """botbuilder deep-copies each activity it sends (its cards too); the bot's turn context copies only the top level,
    which is all botbuilder changes, so the caller's activity keeps its fields and its card is not copied."""
    from botbuilder.core import BotAdapter

    class Recording(BotAdapter):
        def __init__(self) -> None:
            super().__init__()
            self.sent: list[Activity] = []

        async def send_activities(self, context: Any, activities: list[Activity]) -> list[Any]:
            self.sent.extend(activities)
            return [None] * len(activities)

        async def update_activity(self, context: Any, activity: Activity) -> Any:
            raise NotImplementedError

        async def delete_activity(self, context: Any, reference: Any) -> None:
            raise NotImplementedError

    incoming = Activity(type="message", id="1700000000009", text="incidents", channel_id="msteams",
                        service_url="https://smba.trafficmanager.net/amer/", conversation=ConversationAccount(id="a:c"),
                        from_property=ChannelAccount(id="29:alice"), recipient=ChannelAccount(id="28:bot"))
    adapter = Recording()
    reply = _activity([Attachment(content_type="application/vnd.microsoft.card.adaptive", content=CARD)])
    reply.reply_to_id = None
    before = dict(reply.__dict__)
    await connectors.ShallowSendContext(adapter, incoming).send_activity(reply)
    [sent] = adapter.sent
    assert sent is not reply and sent.reply_to_id == "1700000000009" and sent.recipient.id == "29:alice"
    assert sent.attachments[0].content is CARD, "the card is shared, not copied"
    assert reply.__dict__ == before, "the caller's activity is as it was"


async def test_a_send_on_a_connection_the_server_just_closed_is_sent_again_on_a_new_one() -> None:
    """A kept-alive connection the server lets go right after answering (the Agents Playground's, after 5 idle
    seconds): the next send on it fails before any answer and goes again, once, on a new connection. A server that
    hangs up on every connection is Unreachable after the second. Without it the analyst's answer was lost ("could
    not deliver the answer: localhost unreachable (ServerDisconnectedError)")."""
    import asyncio

    connections: list[int] = []
    hang_ups: list[bool] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answers the first request of a connection and keeps it open; a second request on it finds it let go
        (closed unanswered, as when the keep-alive timer fires as the request arrives)."""
        connections.append(0)
        for served in range(2):
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(
                b"content-length")))
            await reader.readexactly(length)
            if served or (hang_ups.pop(0) if hang_ups else False):
                break
            body = f'{{"id": "sent-{len(connections)}"}}'.encode()
            writer.write(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/amer/"
    sessions, fresh = HttpSessions(), HttpSessions()
    try:
        conversations = _direct(ConnectorClient(MicrosoftAppCredentials("", ""), base_url=base), sessions).conversations
        first = await conversations.send_to_conversation("a:chat", _activity(None))
        second = await conversations.send_to_conversation("a:chat", _activity(None))  # on the kept connection
        answered = list(connections)
        hang_ups[:] = [True, True]
        again = _direct(ConnectorClient(MicrosoftAppCredentials("", ""), base_url=base), fresh).conversations
        with pytest.raises(connectors.Unreachable, match=r"unreachable \((?:ServerDisconnectedError|ClientOSError)\)"):
            await again.send_to_conversation("a:chat", _activity(None))
    finally:
        await sessions.close()
        await fresh.close()
        server.close()
        await server.wait_closed()
    assert (first.id, second.id) == ("sent-1", "sent-2") and len(answered) == 2
    assert len(connections) == 4, "the hung-up send was tried twice, not more"


async def test_a_refused_connection_is_not_tried_again() -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sessions = HttpSessions()
    try:
        conversations = _direct(ConnectorClient(MicrosoftAppCredentials("", ""),
                                                base_url=f"http://127.0.0.1:{port}/amer/"), sessions).conversations
        with pytest.raises(connectors.Unreachable, match="ClientConnectorError"):
            await conversations.send_to_conversation("a:chat", _activity(None))
    finally:
        await sessions.close()
