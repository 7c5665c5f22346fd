"""Answers as Teams' AI features expect them: the AI-generated label, the bot's [n] as Teams citations, and
feedback buttons whose reactions are audited and counted (never their text). Through the real adapter and
the fake Bot Connector, as tests/teams/test_teams_bot.py does."""

from __future__ import annotations

import json
import logging
import re

import pytest

from tests.support import connector_fake as teams
from tests.support.openai_fake import FakeOpenAI
from tests.teams.test_teams_bot import Bot, bot, next_id  # noqa: F401 - a fixture used by name


def ai_entity(body: dict) -> dict | None:
    return next((e for e in body.get("entities") or [] if e.get("type") == "https://schema.org/Message"), None)


async def test_a_model_answer_carries_the_ai_label_citations_and_feedback(bot: Bot,  # noqa: F811
                                                                          fake_openai: FakeOpenAI) -> None:
    fake_openai.latency_s = 0.3  # long enough for progress, so the answer is a stream's final message
    await bot.post(teams.personal("what high-severity incidents came in this week?", activity_id=next_id(),
                                  service_url=bot.connector.url))
    sent = await bot.connector.wait_for(lambda s: any(x.type == "message" for x in s))
    [answer] = [s for s in sent if s.type == "message"]
    entity = ai_entity(answer.body)
    assert entity is not None, answer.body.get("entities")
    assert entity["@type"] == "Message" and entity["@context"] == "https://schema.org" and entity["@id"] == ""
    assert entity["additionalType"] == ["AIGeneratedContent"]
    cited = [int(n) for n in re.findall(r"\[(\d+)\]", answer.text)]
    assert cited, answer.text
    positions = [c["position"] for c in entity["citation"]]
    assert positions == list(dict.fromkeys(cited))[:20], "one citation per [n] in the text, numbered as in the text"
    first = entity["citation"][0]
    assert first["@type"] == "Claim" and first["appearance"]["@type"] == "DigitalDocument"
    assert first["appearance"]["name"].startswith(f"[{positions[0]}] #")
    assert 0 < len(first["appearance"]["abstract"]) <= 160 and len(first["appearance"]["name"]) <= 80
    assert answer.body["channelData"]["feedbackLoopEnabled"] is True
    assert teams_streaming_final(answer.body), "the label rides on the streamed answer's final message"


def teams_streaming_final(body: dict) -> bool:
    return any(e.get("type") == "streaminfo" and e.get("streamType") == "final" for e in body.get("entities") or [])


async def test_a_command_answer_is_not_labelled_as_ai(bot: Bot) -> None:  # noqa: F811
    await bot.post(teams.personal("incidents 24h", activity_id=next_id(), service_url=bot.connector.url))
    sent = await bot.connector.wait_for(lambda s: any(x.type == "message" for x in s))
    [answer] = [s for s in sent if s.type == "message"]
    assert ai_entity(answer.body) is None and "feedbackLoopEnabled" not in json.dumps(answer.body)


def feedback(value: dict) -> dict:
    body = teams.personal("", activity_id=next_id(), service_url="http://127.0.0.1:1")
    body.pop("text", None)
    body.update(type="invoke", name="message/submitAction", value=value, replyToId="1700000000001")
    return body


async def test_feedback_is_audited_and_counted_without_its_text(bot: Bot,  # noqa: F811
                                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bot.audit")
    secret = "the answer named the wrong host WS-FIN-160"
    status, _, _ = await bot.post(feedback({"actionName": "feedback", "actionValue": {
        "reaction": "dislike", "feedback": json.dumps({"feedbackText": secret})}}))
    assert status == 200
    [record] = [r.audit for r in caplog.records if r.name == "bot.audit" and r.audit["event"] == "answer.feedback"]
    assert record["reaction"] == "dislike" and record["comment_chars"] == len(secret)
    assert record["message_id"] == "1700000000001" and record["actor_object_id"]
    assert secret not in json.dumps(record) and "WS-FIN-160" not in caplog.text


@pytest.mark.parametrize("value", [
    {"actionName": "feedback", "actionValue": {"reaction": "love"}},
    {"actionName": "other", "actionValue": {"reaction": "like"}},
    {"actionName": "feedback", "actionValue": "like"},
    {"actionName": "feedback"},
])
async def test_malformed_feedback_is_a_400_not_a_fault(bot: Bot, value: dict) -> None:  # noqa: F811
    status, _, _ = await bot.post(feedback(value))
    assert status == 400


@pytest.mark.parametrize("answer, beyond", [
    ("3 incidents in the last 24 hours: [1] #14440, [2] #14430, [3] #14414.", False),
    ("#14440 is High and Active, owned by Farah Haddad.", False),
    ("This looks like an MFA fatigue attack; I'd recommend resetting the password.", True),
    ("The sign-ins from one IP suggest password spraying.", True),
    ("## Analysis\nThe host was touched twice.", True),
    ("You should isolate WS-FIN-160 first.", True),
])
def test_the_disclaimer_follows_what_the_answer_does_not_a_heading(answer: str, beyond: bool) -> None:
    from bot.orchestrator import prompts

    assert prompts.goes_beyond_records(answer) is beyond


async def test_a_one_to_one_answer_suggests_what_to_ask_next(bot: Bot) -> None:  # noqa: F811
    await bot.post(teams.personal("what high-severity incidents came in this week?", activity_id=next_id(),
                                  service_url=bot.connector.url))
    sent = await bot.connector.wait_for(lambda s: any(x.type == "message" for x in s))
    [answer] = [s for s in sent if s.type == "message"]
    actions = answer.body["suggestedActions"]["actions"]
    assert 1 <= len(actions) <= 3 and all(a["type"] == "imBack" and a["title"] == a["value"] for a in actions)
    assert actions[0]["value"] == "Tell me more about [1]", "the first row, by the [n] the table shows"


async def test_no_suggestions_in_a_channel(bot: Bot) -> None:  # noqa: F811
    activity = teams.channel_mention("what high-severity incidents came in this week?", activity_id=next_id(),
                                     service_url=bot.connector.url)
    await bot.post(activity)
    sent = await bot.connector.wait_for(lambda s: any(x.type == "message" and x.cards for x in s))
    assert all("suggestedActions" not in s.body for s in sent)


@pytest.mark.parametrize("value, expected", [
    ({"action": "command", "command": "incidents 24h"}, "incidents (last 24 hours"),
    ({"action": "ask", "question": "Which hosts were hit most this week?"}, "Most targeted"),
])
async def test_help_card_buttons_are_answered_as_if_typed(bot: Bot, value: dict, expected: str) -> None:  # noqa: F811
    """The help card's buttons are plain submits (the Agents Playground's page sends nothing for messageBack):
    the question or command in their data is answered as typed text."""
    await bot.post(teams.submit(value, activity_id=next_id(), service_url=bot.connector.url))
    sent = await bot.connector.wait_for(lambda s: any(expected in json.dumps(x.body) for x in s))
    assert any(expected in json.dumps(x.body) for x in sent if x.type == "message")
