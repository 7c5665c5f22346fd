"""A list's Next button and "more" in Teams (issue 37), through the real app over the fake Bot Connector: the press
pages the list on its card, one card per page, and an old or forged press gets a clear line."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from botbuilder.core import MemoryStorage

from bot.sentinel.client import SentinelClient
from tests.support import connector_fake as teams
from tests.support.connector_fake import FakeConnector
from tests.teams.test_teams_bot import Bot, final_messages, next_id, start_bot


@pytest.fixture
async def bot(connector: FakeConnector, demo_client: SentinelClient) -> AsyncIterator[Bot]:
    running, server = await start_bot(connector, demo_client, None, MemoryStorage())
    yield running
    await server.close()


async def answer_to(bot: Bot, activity: dict[str, Any]) -> teams.Sent:
    await bot.post(activity)
    sent = await bot.connector.wait_for(lambda s: any(x.body.get("replyToId") == activity["id"]
                                                      for x in final_messages(s)))
    return next(x for x in final_messages(sent) if x.body.get("replyToId") == activity["id"])


def next_button(message: teams.Sent) -> dict[str, Any] | None:
    found = [a for card in message.cards for a in card.get("actions", []) if a.get("title") == "Next"]
    return found[0]["data"] if found else None


@pytest.mark.parametrize("conversation", ["personal", "group", "channel"])
async def test_next_on_a_list_card_shows_its_next_page(bot: Bot, conversation: str) -> None:
    url = bot.connector.url
    said = {"personal": teams.personal, "group": teams.group_chat, "channel": teams.channel_mention}[conversation]
    first = await answer_to(bot, said("incidents 7d", activity_id=next_id(), service_url=url))
    assert "Showing 1–20 of 93 incidents." in json.dumps(first.cards, ensure_ascii=False)
    data = next_button(first)
    assert data is not None and data["listing"]["offset"] == 20
    press = teams.submit(data, activity_id=next_id(), service_url=url, reply_to_id=first.activity_id,
                         conversation=conversation)
    second = await answer_to(bot, press)
    shown = json.dumps(second.cards, ensure_ascii=False)
    assert "Showing 21–40 of 93 incidents." in shown and "[21]" in shown and "[1]" not in shown
    assert "rows 21–40 of 93" in shown, "the Data sources line counts the page shown"
    typed = await answer_to(bot, said("more", activity_id=next_id(), service_url=url))
    assert "Showing 41–60 of 93 incidents." in json.dumps(typed.cards, ensure_ascii=False)


async def test_a_press_of_an_old_or_forged_next_button_gets_a_clear_line(bot: Bot) -> None:
    url = bot.connector.url
    forged = {"action": "page", "listing": {"tool": "get_alert_trend", "arguments": {}, "offset": 5, "rows": 5,
                                            "total": 9}}
    answer = await answer_to(bot, teams.submit(forged, activity_id=next_id(), service_url=url))
    assert "That Next button belongs to a list I can no longer read" in json.dumps(answer.cards)
    past = {"action": "page", "listing": {"tool": "query_incidents", "arguments": {"time_window": "last_24h"},
                                          "offset": 60, "rows": 20, "total": 80}}
    answer = await answer_to(bot, teams.submit(past, activity_id=next_id(), service_url=url))
    assert "That list has 13 rows now: page 4 is past its end. Ask for the list again." in json.dumps(answer.cards)


async def test_a_model_answers_list_pages_on_its_card_and_with_more(connector: FakeConnector,
                                                                    demo_client: SentinelClient,
                                                                    fake_openai: Any) -> None:
    """The model asked for 50 incidents: its card shows the first 25 with Next, and "more" goes on from there."""
    from tests.support import openai_fake as oa

    def brain(body: dict[str, Any]) -> Any:
        if any(m.get("role") == "tool" for m in body["messages"][-3:]):
            return oa.text("Here are this week's incidents, most severe first.")
        return oa.tool_calls(("query_incidents", {"time_window": "last_7d", "limit": 50}))

    running, server = await start_bot(connector, demo_client, fake_openai, MemoryStorage())
    try:
        fake_openai.brain = brain
        url = connector.url
        answer = await answer_to(running, teams.personal("what came in this week?", activity_id=next_id(),
                                                         service_url=url))
        shown = json.dumps(answer.cards, ensure_ascii=False)
        assert "Showing 1–25 of 93 incidents." in shown
        data = next_button(answer)
        assert data is not None and data["listing"]["offset"] == 25 and data["listing"]["rows"] == 25
        more = await answer_to(running, teams.personal("more", activity_id=next_id(), service_url=url))
        assert "Showing 26–50 of 93 incidents." in json.dumps(more.cards, ensure_ascii=False)
        assert len(fake_openai.requests) == 2, "paging asks no model"
    finally:
        await server.close()
