"""Leftover noise of issue 28: each case says what went wrong in one log line, without a traceback.

- a serviceUrl the bot cannot reach (nothing listens there): one warning per turn, naming the host;
- a model response that is not JSON: reported as unreadable, not as "an empty response".
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable

import pytest
from botbuilder.core import MemoryStorage

from bot.sentinel.client import SentinelClient
from tests.support import connector_fake as teams
from tests.support.connector_fake import FakeConnector
from tests.support.openai_fake import FakeOpenAI
from tests.test_teams_bot import connector, next_id, start_bot  # noqa: F401 - connector is a fixture


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again when the probe is: nothing listens there


def _bot_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("bot.") and r.levelno >= logging.INFO]


async def _until(check: Callable[[], bool]) -> None:
    for _ in range(200):  # 10 s at most
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("timed out")


@pytest.mark.parametrize("kind", ["personal command", pytest.param("personal question", marks=pytest.mark.slow),
                                  "group chat command"])
async def test_an_unreachable_service_url_is_one_line_per_turn_without_a_traceback(
        kind: str, connector: FakeConnector, demo_client: SentinelClient,  # noqa: F811
        fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture) -> None:
    fake_openai.latency_s = 0.3  # a question outlasts the progress grace period: progress updates are tried too
    running, server = await start_bot(connector, demo_client, fake_openai, MemoryStorage())
    service_url = f"http://127.0.0.1:{_closed_port()}"
    texts = {"personal command": ("incidents 24h", teams.personal),
             "personal question": ("what high-severity incidents came in this week?", teams.personal),
             "group chat command": ("incidents 24h", teams.group_chat)}
    text, activity = texts[kind]
    try:
        with caplog.at_level(logging.DEBUG):
            caplog.clear()
            for _ in range(2):
                status, _, _ = await running.post(activity(text, activity_id=next_id(), service_url=service_url))
                assert status in (200, 201, 202)
            await _until(lambda: len([r for r in _bot_lines(caplog) if "deliver" in r.getMessage()]) >= 2)
            await asyncio.sleep(0.3)  # anything a turn logs after giving up would show here
    finally:
        await server.close()
    lines = _bot_lines(caplog)  # a question also logs its usual "answered in ..." and audit lines
    assert [(r.levelname, r.getMessage()) for r in lines if r.levelno >= logging.WARNING] == [
        ("WARNING", "could not deliver the answer: 127.0.0.1 unreachable (ClientConnectorError)")] * 2
    assert not [r for r in lines if r.levelno < logging.WARNING and any(
        word in r.getMessage() for word in ("deliver", "unreachable", "refused", "Error"))]
    assert not [r for r in caplog.records if r.exc_info], "no traceback, at any level"
