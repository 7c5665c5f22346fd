"""A minimal real botbuilder bot for proving the Agents Playground harness (tests/support/playground.py).

Run: ``python -m tests.support.echo_bot --port N`` (``--port 0`` picks a free port). Once it listens it
prints one line, ``echo bot listening on <port>``, on stdout, so a test can read the port it got
(``tests.support.playground.start_bot(echo_bot_argv(), workdir)`` does that).

It is the same stack as the real bot (CloudAdapter + ConfigurationBotFrameworkAuthentication with an empty
app id, aiohttp, ``POST /api/messages``) and answers:

- ``card``: one Adaptive Card with an ``Action.Submit`` button (data ``{"choice": "submit-pressed"}``)
  and an ``Action.Execute`` button (verb ``execute-pressed``);
- ``update``: sends ``update: before``, then replaces it in place (``update_activity``) with
  ``update: after``;
- ``stream``: (1:1 only) a Teams streamed message: two ``typing`` chunks with a ``streaminfo`` entity,
  then the final ``message``, as Microsoft Learn's "Stream bot messages" page describes;
- a message carrying ``value`` (a card ``Action.Submit``): ``submit: <value as JSON>``;
- an ``adaptiveCard/action`` invoke (``Action.Execute``): ``execute: <verb> <data as JSON>`` as a new
  message, and an invoke response whose card (saying the same) replaces the pressed one;
- a conversationUpdate adding the bot (the Playground's installation): ``welcome: echo bot installed``;
- anything else: ``echo: <text>``, with the bot's own @mention removed.

Every reply carries the incoming conversation's id (botbuilder does that), so a reply inside a channel
thread stays in that thread.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from types import SimpleNamespace
from typing import Any

from aiohttp import web
from botbuilder.core import ActivityHandler, CardFactory, InvokeResponse, MessageFactory, TurnContext
from botbuilder.integration.aiohttp import CloudAdapter, ConfigurationBotFrameworkAuthentication
from botbuilder.schema import (
    Activity,
    ActivityTypes,
    AdaptiveCardInvokeResponse,
    ChannelAccount,
    Entity,
)

CARD = {
    "type": "AdaptiveCard",
    "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
    "version": "1.5",
    "body": [{"type": "TextBlock", "text": "Echo bot card", "weight": "Bolder", "size": "Medium"},
             {"type": "TextBlock", "text": "Press a button; the bot says what it received.", "wrap": True}],
    "actions": [
        {"type": "Action.Submit", "title": "Submit", "data": {"choice": "submit-pressed"}},
        {"type": "Action.Execute", "title": "Execute", "verb": "execute-pressed", "data": {"choice": "execute"}},
    ],
}


class StreamInfo(Entity):
    """The Teams ``streaminfo`` entity; botbuilder's Entity drops attributes it does not declare."""

    _attribute_map: dict[str, dict[str, Any]] = {  # noqa: RUF012 - msrest's class-level map, as bot/teams/handler.py
        **Entity._attribute_map,
        "stream_id": {"key": "streamId", "type": "str"},
        "stream_type": {"key": "streamType", "type": "str"},
        "stream_sequence": {"key": "streamSequence", "type": "int"},
    }

    def __init__(self, *, stream_type: str, stream_sequence: int | None = None, stream_id: str | None = None):
        super().__init__(type="streaminfo")
        self.stream_type = stream_type
        self.stream_sequence = stream_sequence
        self.stream_id = stream_id


class EchoBot(ActivityHandler):
    async def on_message_activity(self, turn_context: TurnContext) -> None:
        activity = turn_context.activity
        if activity.value is not None:
            await turn_context.send_activity(f"submit: {json.dumps(activity.value, sort_keys=True)}")
            return
        text = (TurnContext.remove_recipient_mention(activity) or "").strip()
        if text == "card":
            await turn_context.send_activity(MessageFactory.attachment(CardFactory.adaptive_card(CARD)))
        elif text == "update":
            sent = await turn_context.send_activity("update: before")
            replacement = MessageFactory.text("update: after")
            replacement.id = sent.id
            await turn_context.update_activity(replacement)
        elif text == "stream":
            await self._stream(turn_context)
        else:
            await turn_context.send_activity(f"echo: {text}")

    async def _stream(self, turn_context: TurnContext) -> None:
        def chunk(text: str, sequence: int, stream_id: str | None) -> Activity:
            info = StreamInfo(stream_type="streaming", stream_sequence=sequence, stream_id=stream_id)
            return Activity(type=ActivityTypes.typing, text=text, entities=[info])

        first = await turn_context.send_activity(chunk("stream: one", 1, None))
        stream_id = first.id
        await turn_context.send_activity(chunk("stream: one two", 2, stream_id))
        final = Activity(type=ActivityTypes.message, text="stream: one two three",
                         entities=[StreamInfo(stream_type="final", stream_id=stream_id)])
        await turn_context.send_activity(final)

    async def on_members_added_activity(self, members_added: list[ChannelAccount],
                                        turn_context: TurnContext) -> None:
        bot_id = turn_context.activity.recipient.id
        if any(member.id == bot_id for member in members_added):
            await turn_context.send_activity("welcome: echo bot installed")

    async def on_invoke_activity(self, turn_context: TurnContext) -> InvokeResponse | None:
        # Not ActivityHandler.on_adaptive_card_invoke: in botbuilder 4.17 ActivityHandler serializes that
        # method's AdaptiveCardInvokeResponse to a dict and CloudAdapter.process then serializes the dict
        # again, which raises (AttributeError: 'dict' object has no attribute 'is_xml_model') and answers 500.
        # CloudAdapter wants InvokeResponse.body to be an msrest Model.
        activity = turn_context.activity
        if activity.name != "adaptiveCard/action":
            return await super().on_invoke_activity(turn_context)
        action = (activity.value or {}).get("action") or {}
        said = f"execute: {action.get('verb')} {json.dumps(action.get('data'), sort_keys=True)}"
        await turn_context.send_activity(said)
        # Universal Actions: the card in the invoke response replaces the pressed card.
        done = {**CARD, "body": [{"type": "TextBlock", "text": said, "wrap": True}], "actions": []}
        return InvokeResponse(status=200, body=AdaptiveCardInvokeResponse(
            status_code=200, type="application/vnd.microsoft.card.adaptive", value=done))


def create_app() -> web.Application:
    adapter = CloudAdapter(ConfigurationBotFrameworkAuthentication(
        SimpleNamespace(APP_ID="", APP_PASSWORD="", APP_TYPE="MultiTenant", APP_TENANTID="")))
    bot = EchoBot()

    async def on_error(turn_context: TurnContext, error: Exception) -> None:
        print(f"echo bot error: {error!r}", file=sys.stderr, flush=True)
        await turn_context.send_activity(f"error: {error}")

    adapter.on_turn_error = on_error

    async def messages(request: web.Request) -> web.Response:
        return await adapter.process(request, bot)

    app = web.Application()
    app.router.add_post("/api/messages", messages)
    return app


async def serve(host: str, port: int) -> None:
    runner = web.AppRunner(create_app())
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1]
    print(f"echo bot listening on {bound}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.echo_bot", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3978, help="0 picks a free port (printed on stdout)")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.host, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
