"""The message extension on the Agents Playground (the real Playground, driven as tests/support/playground.py
describes): a compose-box search sent as the page's "Mock an Activity" sends it, its card inserted into the group
chat and its Details button pressed there; a pasted portal link unfurled; a forged one left alone. Skipped without
node or the Playground (a failure in CI).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tests.support import openai_fake as oa
from tests.support import rule_model
from tests.support.connector_fake import search
from tests.support.playground import Playground, start_sentinel_bot

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def playground(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Playground]:
    async with oa.FakeOpenAI(brain=rule_model.brain) as model:
        bot = await start_sentinel_bot(model.endpoint, tmp_path_factory.mktemp("bot"))
        try:
            async with Playground(f"http://127.0.0.1:{bot.port}/api/messages",
                                  tmp_path_factory.mktemp("playground")) as running:
                yield running
        finally:
            await bot.stop()


def extension_result(response: Any) -> dict[str, Any]:
    assert isinstance(response, dict) and "composeExtension" in response, response
    return response["composeExtension"]


async def test_a_search_result_inserted_into_the_group_chat_shows_details_when_pressed(playground: Playground
                                                                                       ) -> None:
    pg = playground
    answer = await pg.mock_activity(pg.group_chat_id, {"type": "invoke", "name": "composeExtension/query",
                                                       "value": search("high", count=5)})
    result = extension_result(answer.response)
    assert answer.status == 200 and result["type"] == "result" and len(result["attachments"]) == 5
    card = result["attachments"][0]["content"]
    number = int(result["attachments"][0]["preview"]["content"]["title"].split()[0][1:])
    assert f"Incident #{number}" in json.dumps(card)
    inserted = await pg.post_card(pg.group_chat_id, card)
    details = next(a for node in card["body"] if node["type"] == "ActionSet" for a in node["actions"])
    pressed = await pg.press(pg.group_chat_id, inserted, details["data"])
    reply = await pg.wait_for_reply(pressed, lambda m: any("Open in Sentinel" in json.dumps(c) for c in m.cards))
    assert f"Incident #{number}" in json.dumps(reply.cards), "the inserted card's Details button works there"


async def test_a_pasted_portal_link_unfurls_and_a_forged_one_does_not(playground: Playground) -> None:
    pg = playground
    listed = extension_result((await pg.mock_activity(pg.personal_chat_id, {
        "type": "invoke", "name": "composeExtension/query", "value": search("", initial=True, count=1)})).response)
    card = listed["attachments"][0]["content"]
    url = next(a["url"] for a in card["actions"] if a["type"] == "Action.OpenUrl")
    unfurled = extension_result((await pg.mock_activity(pg.group_chat_id, {
        "type": "invoke", "name": "composeExtension/queryLink", "value": {"url": url}})).response)
    [attachment] = unfurled["attachments"]
    assert "Alerts" in json.dumps(attachment["content"]) and attachment["preview"]["content"]["title"].startswith("#")
    forged = extension_result((await pg.mock_activity(pg.group_chat_id, {
        "type": "invoke", "name": "composeExtension/queryLink",
        "value": {"url": url.replace("portal.azure.com", "portal.azure.com.evil.example")}})).response)
    assert forged["attachments"] == []
