"""What the front logs for requests anyone can send: one line each, never a traceback (the real app in local mode,
the fake Bot Connector); and the bot's own 401 messages read as written once cards make them inert."""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
import pytest
from azure.core.exceptions import HttpResponseError
from botbuilder.core import MemoryStorage

from bot.cards.common import plain
from bot.sentinel.client import SentinelClient
from bot.sentinel.incident_writer import ArmIncidentWriter
from bot.sentinel.loganalytics import _http_error
from tests.support import connector_fake as teams
from tests.support.connector_fake import FakeConnector
from tests.teams.test_teams_bot import next_id, start_bot


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name != "aiohttp.access" and r.levelno >= logging.INFO]


def _invoke(name: str | None, value: Any, service_url: str) -> dict[str, Any]:
    body = teams.personal("", activity_id=next_id(), service_url=service_url)
    body.update(type="invoke", name=name, value=value)
    body.pop("text")
    return body


async def test_unhandled_invokes_get_501_unknown_kinds_are_ignored_and_each_gets_one_log_line(
        demo_client: SentinelClient, caplog: pytest.LogCaptureFixture) -> None:
    connector = await FakeConnector().start()
    running, server = await start_bot(connector, demo_client, None, MemoryStorage())
    caplog.set_level(logging.INFO)
    try:
        async with aiohttp.ClientSession() as session:
            # (composeExtension/query and /queryLink are the message extension's: tests/teams/test_message_extension.py)
            for name, value in (("composeExtension/submitAction", "x"), ("task/fetch", 5), ("fileConsent/invoke", [1]),
                                ("composeExtension/fetchTask", {"queryOptions": "x"}), (None, "x")):
                caplog.clear()
                async with session.post(running.url, json=_invoke(name, value, connector.url)) as response:
                    assert response.status == 501 and "does not handle" in await response.text(), name
                lines = _lines(caplog)
                assert len(lines) == 1 and not lines[0].exc_info, (name, [r.getMessage() for r in lines])
            for kind in ("futureKind", "x" * 300):
                caplog.clear()
                body = teams.personal("help", activity_id=next_id(), service_url=connector.url) | {"type": kind}
                async with session.post(running.url, json=body) as response:
                    assert response.status == 200, kind
                lines = _lines(caplog)
                assert len(lines) == 1 and "does not know" in lines[0].getMessage() and not lines[0].exc_info, \
                    [r.getMessage() for r in lines]
            assert not [s for s in connector.sent if s.type == "message"], "nothing is answered for them"
            caplog.clear()
            headers = {"Content-Type": "application/json", "X-Padding": "a" * 9_000}
            async with session.post(running.url, data=b"{}", headers=headers) as response:
                assert response.status == 400
            lines = _lines(caplog)
            assert len(lines) == 1 and not lines[0].exc_info and "could not read" in lines[0].getMessage(), \
                [r.getMessage() for r in lines]
    finally:
        await server.close()
        await connector.stop()


def test_unauthorized_messages_are_plain_text_in_cards() -> None:
    """Cards write text through ``plain``, which makes markdown inert: "AZURE_*" came out in fullwidth characters."""
    refused = HttpResponseError(message="Unauthorized")
    refused.status_code = 401
    writer = ArmIncidentWriter.__new__(ArmIncidentWriter)  # only its error wording is used
    writer._workspace_name = "soc"
    for message in (_http_error(refused, "workspace", 30, 1.0).message,
                    writer._http_error(401, "AuthenticationFailed", "no", "id").message):
        assert plain(message, 500) == message and "AZURE_CLIENT_ID" in message
