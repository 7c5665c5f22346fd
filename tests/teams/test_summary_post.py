"""The summary through Teams: "summary N" answers with its card, and its "Post to the incident" button proposes the
summary as an incident comment that is written only once the analyst confirms (the fake ARM endpoint)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.sentinel.client import SentinelClient
from tests.conftest import NOW
from tests.support.write_rig import WriteRig, said, write_rig


@pytest.fixture
async def rig(tmp_path: Path, demo_client: SentinelClient) -> AsyncIterator[WriteRig]:
    async with write_rig(tmp_path, demo_client, start=NOW) as running:
        yield running


def _post_button(node: Any) -> dict[str, Any] | None:
    if isinstance(node, dict):
        if node.get("type") == "Action.Submit" and node.get("title") == "Post to the incident":
            return node
        return next((found for value in node.values() if (found := _post_button(value))), None)
    if isinstance(node, list):
        return next((found for value in node if (found := _post_button(value))), None)
    return None


async def test_post_to_the_incident_proposes_the_summary_and_writes_it_once_confirmed(rig: WriteRig) -> None:
    number = rig.incidents[0].incident.number
    await rig.say(f"summary {number}")
    [answer] = await rig.next_messages()
    button = _post_button(answer.cards)
    assert button is not None, "the analyst may change incidents here: the card offers to post the summary"
    comment = button["data"]["arguments"]["comment"]
    assert "Incident summary" in comment and "Suggested classification:" in comment
    await rig.click(button["data"], card_id=answer.activity_id)
    sent = await rig.next_messages()
    action_id, card_id = rig.confirmation(sent)
    assert rig.arm.puts == 0, "a proposal writes nothing"
    await rig.click({"action": "change_confirm", "id": action_id}, card_id=card_id)
    [update] = await rig.next_messages()
    assert "Comment added" in said(update).text
    [put] = rig.arm.requests_for("PUT")
    message = put.body["properties"]["message"]
    assert message.startswith(comment) and "/comments/" in put.path
    assert "[1]" not in message and "<at>" not in message
    assert json.dumps(put.body).count("Suggested classification") == 1
