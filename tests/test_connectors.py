"""Outgoing activities: card content is sent as the JSON it is, without msrest's value-by-value walk (issue 13).

The wire body must be exactly what msrest would have produced, for every kind of activity the bot sends.
"""

from __future__ import annotations

from typing import Any

import pytest
from botbuilder.schema import Activity, Attachment, ChannelAccount, ConversationAccount, Entity, HeroCard
from botframework.connector.aio import ConnectorClient
from botframework.connector.auth import MicrosoftAppCredentials

from bot.teams.connectors import CardSerializer, _with_card_serializer

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
    fast = _with_card_serializer(client).conversations._serialize
    assert isinstance(fast, CardSerializer) and not isinstance(plain, CardSerializer)
    activity = _activity(attachments)
    expected: Any = plain.body(activity, "Activity")
    assert fast.body(activity, "Activity") == expected
    assert activity.attachments == attachments, "the activity itself is left as it was"
