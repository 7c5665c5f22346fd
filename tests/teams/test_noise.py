"""Leftover noise of issue 28: each case says what went wrong in one log line, without a traceback.

- a serviceUrl the bot cannot reach (nothing listens there): one warning per turn, naming the host;
- bare URLs in incident text (attacker-writable): no card shows one Teams would make a link, short or long;
- a model response that is not JSON: reported as unreadable, not as "an empty response".
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
from collections.abc import Callable
from dataclasses import replace

import pytest
from botbuilder.core import MemoryStorage

from bot import cards
from bot.cards.inert import unlink
from bot.cards.watches import watched_digest, watched_incident
from bot.orchestrator.conversation import Conversation
from bot.orchestrator.llm import LLMErrorKind
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import QueryResult
from tests.cards.test_action_cards import CHANGES, confirmation, snapshot
from tests.cards.test_cards import NOW, alert, detail, incident, meta, read, registry, texts
from tests.orchestrator.test_model_responses import QUESTION, make
from tests.support import connector_fake as teams
from tests.support import openai_fake as oa
from tests.support.connector_fake import FakeConnector
from tests.support.openai_fake import FakeOpenAI
from tests.teams.test_teams_bot import next_id, start_bot


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
        kind: str, connector: FakeConnector, demo_client: SentinelClient,
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


# ---- bare URLs in incident text ----------------------------------------------------------------------

# What Teams would make a link: a scheme's "://" or "www." followed at once by a host character. The cards break
# URLs with a zero-width space after "//" and each ".", so the reader sees the whole URL and nothing to click.
LIVE_URL = re.compile(r"(?:[a-z][a-z0-9+.-]*://|(?<![\w.-])www\.)[\w\[-]", re.IGNORECASE)
URLS = ("https://evil.example/login", "http://ev.il/a", "www.evil.io", "hxxp://x.y",
        "https://login.contoso-secure.example.com/oauth2/authorize?client_id=abc")
HOSTILE = "Reset your password at " + " or ".join(URLS) + " now"


def _live(card: dict) -> list[str]:
    return [text for text in texts(card) if LIVE_URL.search(text)]


def test_bare_urls_in_incident_text_are_inert_on_every_card_that_shows_it() -> None:
    hostile = incident(7, HOSTILE, owner=HOSTILE, products=(HOSTILE,))
    d = replace(detail(description=HOSTILE, title=HOSTILE), classification_reason=HOSTILE,
                classification_comment=HOSTILE, labels=(HOSTILE,),
                incident=replace(hostile, number=14431, classification="FalsePositive"))
    alerts = QueryResult((replace(alert(1), name=HOSTILE, product=HOSTILE),), meta("query_alerts", 1))
    incidents = QueryResult((hostile,), meta("query_incidents", 1))
    built = {
        "watch: one incident": watched_incident(hostile, watch=HOSTILE, now=NOW, demo=False, changes=True),
        "watch: digest": watched_digest([hostile, incident(8, HOSTILE)], watch="high", now=NOW, demo=False),
        "incident detail": cards.incident_detail(d, lambda kind, key: None, NOW),
        "incident table": cards.incident_table(incidents, registry(incidents).ref_for, NOW),
        "alert list": cards.alert_list(alerts, registry(alerts).ref_for, NOW),
        "confirmation": confirmation(CHANGES["close"], snapshot(title=HOSTILE)),
    }
    for name, card in built.items():
        assert not _live(card), f"{name}: {_live(card)}"
    for name in ("watch: one incident", "incident detail"):
        shown = " ".join(read(text) for text in texts(built[name]))
        assert all(url in shown for url in URLS), f"{name}: the reader still sees every URL whole"


def test_the_live_url_check_sees_what_unlink_alone_leaves() -> None:
    """The check can fail: breaking the link syntax alone leaves bare URLs live (``plain`` unlinks them too)."""
    assert _live({"type": "TextBlock", "text": unlink(HOSTILE)}), "unlink alone leaves bare URLs live"
    assert not _live({"type": "TextBlock", "text": cards.common.plain(HOSTILE, 400)})


# ---- a model response that is not JSON -----------------------------------------------------------------

async def _streamed(text: str) -> None:
    return None


@pytest.mark.parametrize("streaming", [False, True], ids=["unstreamed", "streamed"])
@pytest.mark.parametrize("step", [
    oa.invalid_json(),
    oa.raw("<html><body><h1>502 Bad Gateway</h1></body></html>", content_type="text/html"),
], ids=["invalid-json", "html-page"])
async def test_an_unreadable_model_response_is_said_to_be_unreadable_in_one_line(
        fake_openai: FakeOpenAI, demo_client: SentinelClient, caplog: pytest.LogCaptureFixture,
        step: oa.Step, streaming: bool) -> None:
    """Asked to stream (as Teams' personal chats do), a body that is not a stream of events was read as a
    stream of nothing and reported as "an empty response"."""
    fake_openai.script(step)
    with caplog.at_level(logging.DEBUG, logger="bot"):
        result = await make(fake_openai, demo_client).answer(Conversation(), QUESTION,
                                                             stream=_streamed if streaming else None)
    assert result.failed and result.failure == LLMErrorKind.BAD_RESPONSE
    assert "could not read" in result.text and "empty" not in result.text, result.text
    reason = "invalid_json" if "json" in step.content_type else "not_json"
    assert [(r.levelname, r.getMessage()) for r in _bot_lines(caplog)] == [
        ("WARNING", f"model call failed: bad_response ({reason})")]
    assert not [r for r in caplog.records if r.exc_info and r.name.startswith("bot")]


async def test_an_unstreamed_answer_to_a_streamed_request_is_read(fake_openai: FakeOpenAI,
                                                                  demo_client: SentinelClient) -> None:
    """A gateway that ignores stream=true and sends the whole completion as JSON: the answer, not "empty"."""
    fake_openai.script(oa.completion_body(choices=[{"index": 0, "finish_reason": "stop",
                                                    "message": {"role": "assistant", "content": "Nothing new."}}]))
    result = await make(fake_openai, demo_client).answer(Conversation(), QUESTION, stream=_streamed)
    assert not result.failed and "Nothing new." in result.text
