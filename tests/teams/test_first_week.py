"""The README and the welcome card as a new analyst tries them, through the Teams bot (real adapter and handler, a
fake Bot Connector, the demo workspace): every "Try it" command, every plain-language example the README quotes and
every welcome-card button, with the rule-based stand-in model and without a model. Each reply must show rows, say
plainly that nothing matched, or (a question without a model) say that questions need one; never a card that holds
only the demo banner, never "outside my beat".
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from botbuilder.core import MemoryStorage

from bot.config import Settings
from bot.sentinel.client import SentinelClient
from tests.commands.test_first_hour import PLAYGROUND_USER, readme_questions, try_it_commands
from tests.support import connector_fake as teams
from tests.support import rule_model
from tests.support.connector_fake import FakeConnector, Sent
from tests.support.openai_fake import FakeOpenAI
from tests.teams.test_teams_bot import Bot, answered_after, final_messages, next_id, start_bot

# What the README quotes and what the stand-in cannot know from it alone: the questions a README reader also asks.
MORE_QUESTIONS = ("hunt for phishing emails this week", "give me a summary of today", "who is on call?",
                  "incidents that match qakbot", "tell me more about [1]")


async def _bot(connector: FakeConnector, sentinel: SentinelClient, model: FakeOpenAI | None) -> tuple[Bot, Any]:
    # A dozen questions in a few seconds: past the default 6 model turns a minute per analyst.
    settings = Settings.from_env({"MODEL_TURNS_PER_USER_MINUTE": "100"}, dotenv_path=None)
    return await start_bot(connector, sentinel, model, MemoryStorage(), settings)


@pytest.fixture(params=["stand-in model", "no model"])
async def bot(request: pytest.FixtureRequest, connector: FakeConnector, demo_client: SentinelClient,
              fake_openai: FakeOpenAI) -> AsyncIterator[Bot]:
    running, server = await _bot(connector, demo_client, fake_openai if request.param == "stand-in model" else None)
    yield running
    await server.close()


def as_playground_user(activity: dict[str, Any]) -> dict[str, Any]:
    """The activity from the Playground's own user (Alex Wilber owns demo incidents, so "mine" has rows)."""
    activity["from"]["aadObjectId"] = PLAYGROUND_USER
    return activity


async def ask(bot: Bot, text: str | None = None, value: dict[str, Any] | None = None) -> list[Sent]:
    """Typed text or a button's value in the 1:1 chat; the messages that answered it, once its turn is over."""
    activity_id = next_id()
    activity = as_playground_user(teams.personal(text or "", activity_id=activity_id, service_url=bot.connector.url,
                                                 value=value))
    await bot.post(activity)
    await answered_after(bot, activity)
    return [s for s in final_messages(bot.connector.sent) if s.body.get("replyToId") == activity_id]


def rows(replies: list[Sent]) -> int:
    """Rows the reply's cards show: table rows under their header, an incident's detail, an investigation's evidence
    rows, the on-call card's analysts, a trend chart, a summary's lines."""
    shown = 0
    for card in (card for reply in replies for card in reply.cards):
        dumped = json.dumps(card)
        shown += max(dumped.count('"TableRow"') - dumped.count('"firstRowAsHeader": true'), 0)
        shown += int('"Open in Sentinel"' in dumped) + int('"Image"' in dumped)
        shown += len(re.findall(r'"text": "E\d+ ', dumped))
        shown += len(re.findall(r'"text": "(?:\[\d+\])+ ', dumped))  # an incident summary's lines, citing [n]
    return shown


def says_none(replies: list[Sent]) -> bool:
    """A clear "none": the no-rows card, or the answer's own words."""
    return bool(re.search(r"\bNo (?:incidents|alerts|entities|rows|one is on shift)\b|None: no ", said(replies)))


def said(replies: list[Sent]) -> str:
    """Everything a reply says: its text and its cards (as JSON)."""
    return " ".join([r.text for r in replies] + [json.dumps(c) for r in replies for c in r.cards])


def banner_only(card: dict[str, Any]) -> bool:
    dumped = json.dumps(card)
    return "Demo workspace" in dumped and len(card.get("body", [])) == 1


def check(what: str, replies: list[Sent], model: bool) -> str:
    """What the reply showed ("12 rows", "none", "needs a model"), after asserting it is one of those."""
    assert replies, f"{what!r}: no answer"
    assert not [c for r in replies for c in r.cards if banner_only(c)], f"{what!r}: a card holding only the banner"
    text = " ".join(r.text for r in replies)
    assert "outside my beat" not in text and "Fact check" not in text, (what, text)
    if rows(replies):
        return f"{rows(replies)} rows" + (f" ({text[:150]})" if text else "")
    if says_none(replies):
        return "none"
    needs_model = "Plain-language questions are not enabled" in json.dumps([r.cards for r in replies])
    assert needs_model and not model, f"{what!r} answered with no rows and no clear none: {text[:300]}"
    return "needs a model"


async def test_every_readme_example_and_welcome_button_answers(bot: Bot, fake_openai: FakeOpenAI,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    installed = next_id()
    await bot.post(teams.bot_added(activity_id=installed, service_url=bot.connector.url))
    sent = await bot.connector.wait_for(lambda s: any("Sentinel assistant" in json.dumps(x.cards) for x in s))
    welcome = next(c for s in sent for c in s.cards if "Sentinel assistant" in json.dumps(c))
    buttons = [a for a in _actions(welcome) if a.get("type") == "Action.Submit"]
    model = any(a["data"].get("action") == "ask" for a in buttons)
    assert len(buttons) == 4
    seen = []
    for button in buttons:
        seen.append((f"button {button['title']}", check(button["title"], await ask(bot, value=button["data"]), model)))
    # The README's order: its list ends [1] in a fresh conversation; its questions' "[2]" points at the list above.
    for text in [*try_it_commands(), *readme_questions(), *MORE_QUESTIONS]:
        if text == "help":
            continue
        seen.append((text, check(text, await ask(bot, text), model)))
    with capsys.disabled():
        print(f"\n{'stand-in model' if model else 'no model'}:\n" + "\n".join(f"  {w}: {r}" for w, r in seen))
    if model:
        assert [what for what, shown in seen if shown == "needs a model"] == []


def _actions(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if str(node.get("type", "")).startswith("Action."):
            found.append(node)
        for value in node.values():
            found += _actions(value)
    elif isinstance(node, list):
        for value in node:
            found += _actions(value)
    return found


async def test_typos_mixed_case_and_a_model_that_misbehaves_still_get_an_answer(
        connector: FakeConnector, demo_client: SentinelClient, fake_openai: FakeOpenAI) -> None:
    """A misspelt command is named back, a shouted one runs, a misspelt question is understood; a model that
    answers with an unknown tool or arguments that are not JSON, round after round, ends the turn with a line that
    says what failed, and the next question is answered."""
    running, server = await _bot(connector, demo_client, fake_openai)
    try:
        typo = await ask(running, "incidnets 24h")
        assert 'Did you mean \\"incidents 24h\\"?' in said(typo), said(typo)
        assert rows(await ask(running, "INCIDENTS 7D HIGH")) > 0
        assert rows(await ask(running, "Waht HIGH incidnets came in this week?")) > 0
        for kind, failure in (("unknown-tool", "There is no tool named 'close_all_incidents'"),
                           ("bad-arguments", "The arguments were not valid JSON")):
            fake_openai.brain = rule_model.misbehaving(kind, times=99)
            replies = await ask(running, "which high incidents came in this week?")
            assert f"That query failed: {failure}" in said(replies), said(replies)
            assert not [c for r in replies for c in r.cards if banner_only(c)]
            fake_openai.brain = rule_model.brain
            assert rows(await ask(running, "which high incidents came in this week?")) > 0, "the turn after works"
    finally:
        await server.close()
