"""Real Teams activities (tests/data/teams-payloads/, public captures; sources in its README) through the real app:
the aiohttp front, the CloudAdapter and handler, the fake Bot Connector as their serviceUrl, the demo workspace
and the rule-based model. Each is answered as a person expects: a message in a personal chat; in a group chat or
channel when the bot is @mentioned; an invoke in its HTTP response; an install welcomed; an uninstall quietly.
The variants give each conversation type its other id forms (from Microsoft's docs and SDK tests)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from botbuilder.core import MemoryStorage

from bot.sentinel.client import SentinelClient
from bot.teams.access import REFUSAL_TEXT
from bot.teams.server import RUNNER_KEY
from tests.support.connector_fake import FakeConnector, Sent
from tests.support.openai_fake import FakeOpenAI
from tests.teams.test_teams_bot import Bot, next_id, start_bot

PAYLOADS = Path(__file__).parents[1] / "data" / "teams-payloads"


def payload(name: str, service_url: str) -> dict[str, Any]:
    """A captured activity, sent to the fake Bot Connector, with a fresh id (the bot answers an id once)."""
    body: dict[str, Any] = json.loads((PAYLOADS / f"{name}.json").read_text())
    body["serviceUrl"] = service_url
    if body["type"] != "invoke":  # invoke ids (f:...) are kept: the bot answers them in the response
        body["id"] = next_id()
    return body


@dataclass
class Outcome:
    status: int
    response: str
    sent: list[Sent]

    @property
    def messages(self) -> list[Sent]:
        return [s for s in self.sent if s.type == "message"]

    @property
    def text(self) -> str:
        return " ".join(s.text + json.dumps(s.cards) for s in self.messages)

    @property
    def refused(self) -> bool:
        return any(s.text in REFUSAL_TEXT.values() for s in self.messages)


@pytest.fixture
async def bot(demo_client: SentinelClient, fake_openai: FakeOpenAI) -> AsyncIterator[Bot]:
    connector = await FakeConnector().start()
    running, server = await start_bot(connector, demo_client, fake_openai, MemoryStorage())
    yield running
    await server.close()
    await connector.stop()


async def outcome(bot: Bot, body: dict[str, Any], *, answer: bool = True) -> Outcome:
    """What became of ``body``: its HTTP status and response, and what the bot sent for it (waited for when an
    answer is expected, else the turn is let finish)."""
    before = len(bot.connector.sent)
    status, response, _ = await bot.post(body)
    if answer and status < 400:
        await bot.connector.wait_for(lambda sent: any(s.type == "message" for s in sent[before:]), timeout=20)
    while bot.app[RUNNER_KEY].pending:
        await asyncio.sleep(0.02)
    return Outcome(status, response, bot.connector.sent[before:])


def help_card(outcome: Outcome) -> bool:
    return any(card.get("body", [{}])[0].get("text") == "Help" for s in outcome.messages for card in s.cards)


def welcome(outcome: Outcome) -> bool:
    return "Sentinel assistant" in outcome.text


def model_answer(outcome: Outcome) -> bool:
    return "what to look up in your message" in outcome.text and "who is on call" in outcome.text


# Each capture, and what a person expects of it. "ad list", "reply to thread" and "tell a joke" go to the model
# (the rule model says it could not tell what to look up, and what it can do); "help" is the help card; a press of
# a card whose data the bot does not know gets the help card too (in the invoke's case after the invoke's own answer).
EXPECTED = {
    "personal-message.zowe-2021": help_card,
    "personal-message.botbuilder-js-4582-2024": model_answer,
    "channel-mention-thread-reply.teamsnet-2025": model_answer,
    "channel-mention.zowe-2021": help_card,
    "channel-mention-2.zowe-2021": model_answer,
    "groupchat-mention.zowe-2021": help_card,  # a group chat with the id of a chat begun between two people
    "message-action-submit-value.zowe-2021": help_card,
    "invoke-adaptiveCard-action.teamsnet-2026": help_card,
    "conversationUpdate-bot-added-personal.sentry-2020": welcome,
    "conversationUpdate-bot-added-to-team.sentry-2020": welcome,
}


def test_every_capture_is_listed_with_its_source() -> None:
    readme = (PAYLOADS / "README.md").read_text()
    names = {path.stem for path in PAYLOADS.glob("*.json")}
    assert names == set(EXPECTED) | {"conversationUpdate-bot-removed-from-team.sentry-2020"}
    assert all(f"`{name}.json`" in readme for name in names)


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_a_real_activity_is_answered_as_a_person_expects(bot: Bot, name: str) -> None:
    body = payload(name, bot.connector.url)
    result = await outcome(bot, body)
    assert result.status in (200, 201) and not result.refused, (result.status, result.response)
    assert EXPECTED[name](result), result.text[:300]
    answered_in = {s.conversation_id for s in result.sent}
    assert answered_in == {body["conversation"]["id"]}, "answered where it was asked"
    if body["type"] == "invoke":
        assert json.loads(result.response)["statusCode"] == 200, "an invoke is answered in its HTTP response"


async def test_the_bot_removed_from_a_team_says_nothing(bot: Bot) -> None:
    result = await outcome(bot, payload("conversationUpdate-bot-removed-from-team.sentry-2020", bot.connector.url),
                           answer=False)
    assert result.status in (200, 201) and result.sent == []


def variant(name: str, service_url: str, conversation_id: str, conversation_type: str,
            **changes: Any) -> dict[str, Any]:
    """A capture with another id form of a conversation type (its thread id, its type), as Microsoft's docs and SDK
    tests show them (sources in the payloads' README)."""
    body = payload(name, service_url)
    body["conversation"].update(id=conversation_id, conversationType=conversation_type, **changes)
    if conversation_type != "channel":
        body["channelData"] = {"tenant": body["channelData"]["tenant"]}
    return body


GROUP = "groupchat-mention.zowe-2021"
PERSONAL = "personal-message.zowe-2021"
CHANNEL = "channel-mention.zowe-2021"
BOT_APP = "c52ee95f-973d-41fd-bb78-27c75a2b1be4"  # the zowe bot's app id (recipient 28:<app id>)

VARIANTS = {
    "group chat 19:...@thread.v2": (GROUP, "19:7a4f5e2b9c1d4e0f8a6b3c2d1e0f9a8b@thread.v2", "groupChat"),
    "meeting chat 19:meeting_...@thread.v2": (GROUP, "19:meeting_NDQxMzg1YjUtMGIzNC00Yjc1LWFmYWYtYzk1MGY2MTMwNjE0"
                                                     "@thread.v2", "groupChat"),
    "older group chat 19:...@thread.skype": (GROUP, "19:2b1f0c9d8e7a4b6c5d4e3f2a1b0c9d8e@thread.skype", "groupChat"),
    "personal 19:<user>_<bot>@unq.gbl.spaces": (PERSONAL, f"19:975bf953-08aa-4a92-82f9-3e7ee31bdf32_{BOT_APP}"
                                                          "@unq.gbl.spaces", "personal"),
    "channel thread @thread.skype": (CHANNEL, "19:c6cac3b2e9584446bf5c8e8db068bdf0@thread.skype;"
                                              "messageid=1619162510089", "channel"),
}


@pytest.mark.parametrize("case", sorted(VARIANTS))
async def test_every_id_form_of_each_conversation_type_is_answered(bot: Bot, case: str) -> None:
    name, conversation_id, kind = VARIANTS[case]
    body = variant(name, bot.connector.url, conversation_id, kind)
    if kind == "channel":
        thread = conversation_id.split(";")[0]
        body["channelData"]["channel"]["id"] = body["channelData"]["teamsChannelId"] = thread
    result = await outcome(bot, body)
    assert result.status in (200, 201) and help_card(result), (case, result.status, result.response)


FORGED = {
    "a two-party chat labelled channel": (GROUP, "channel", {}),
    "a two-party group chat with a team": (GROUP, "groupChat", {"team": {"id": "19:x@thread.tacv2"}}),
    "a two-party chat labelled personal that says it is a group": (GROUP, "personal", {}),
    "a channel thread labelled groupChat": (CHANNEL, "groupChat", {}),
    "a personal chat labelled groupChat": (PERSONAL, "groupChat", {}),
}


@pytest.mark.parametrize("case", sorted(FORGED))
async def test_forged_kinds_of_real_activities_are_refused(bot: Bot, case: str) -> None:
    name, kind, channel_data = FORGED[case]
    body = payload(name, bot.connector.url)
    body["conversation"]["conversationType"] = kind
    body["channelData"].update(channel_data)
    result = await outcome(bot, body, answer=False)
    assert result.status == 403 and result.sent == [], (case, result.status)
