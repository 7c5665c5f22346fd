"""The README and the welcome card on the rendered Agents Playground page, as a new analyst tries them after
``./run`` (Debian's chromium driven by playwright-core through tests/e2e/screenshot.js): every welcome-card button
pressed, then every "Try it" command and every plain-language example the README quotes typed into the 1:1 chat,
with the rule-based stand-in model and without a model. Each must show rows, a clear "none", or (a question without
a model) the line saying questions need one; what the page shows is waited for on the page, and what each message
got back is read from the Playground's own record. Screenshots go to the test's temporary directory
(``readme.png``, one tall window; pytest -s prints where).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from bot.cards.messages import EXAMPLE_COMMANDS, EXAMPLE_QUESTIONS
from tests.commands.test_first_hour import readme_questions, try_it_commands
from tests.end_to_end.test_e2e_page import chromium_missing, see
from tests.support import openai_fake as oa
from tests.support import rule_model
from tests.support.playground import Exchange, Playground, start_sentinel_bot
from tests.support.tooling import unavailable

pytestmark = [pytest.mark.asyncio(loop_scope="function"), pytest.mark.slow]
NO_MODEL = {"OPENAI_BASE_URL": "", "OPENAI_MODEL": "", "OPENAI_API_KEY": ""}
# What each shows on the page once answered: the stand-in's words, or a card's.
ON_THE_PAGE = {
    "High incidents this week": "high incidents; most severe first",
    "Most-hit hosts this week": "Most targeted hosts:",
    "Is alert volume unusual?": "against a median of",
    "Alerts today": "alerts; top:",
    "incidents 7d high": "query_incidents(time_window=last_7d, min_severity=High",
    "incidents open mine": "status=open",
    "alerts 24h": "query_alerts(time_window=last_24h",
    "entities 30d": "get_top_entities(time_window=last_30d",
}


def answers(pg: Playground, conversation_id: str) -> dict[str, list[dict[str, Any]]]:
    """Each message the user sent (its text, or the pressed button's command or question), and the activities the
    bot answered it with (its replies' bodies), from the Playground's record of both directions."""
    sent: dict[str, str] = {}
    for exchange in pg.exchanges(direction="to_bot", conversation_id=conversation_id):
        activity = exchange.activity
        if activity.get("type") == "message":
            value = activity.get("value") or {}
            said = str(value.get("question") or value.get("command") or activity.get("text") or "")
            sent[str(activity.get("id"))] = re.sub(r"<at>[^<]*</at>\s*", "", said).strip()
    replies: dict[str, list[dict[str, Any]]] = {said: [] for said in sent.values()}
    for exchange in pg.exchanges(direction="from_bot", conversation_id=conversation_id):
        if _created(exchange) and str(exchange.activity.get("replyToId")) in sent:
            replies[sent[str(exchange.activity["replyToId"])]].append(dict(exchange.activity))
    return replies


def _created(exchange: Exchange) -> bool:
    activity = exchange.activity
    informative = any(e.get("streamType") == "informative" for e in activity.get("entities") or [])
    return activity.get("type") == "message" and not informative


def shown(replies: list[dict[str, Any]]) -> str:
    """What the replies show: "N rows", "none", "needs a model", or "" (nothing of those)."""
    dumped = json.dumps(replies)
    rows = max(dumped.count('"TableRow"') - dumped.count('"firstRowAsHeader": true'), 0)
    rows += dumped.count('"Open in Sentinel"') + dumped.count('"type": "Image"')
    rows += len(re.findall(r'"text": "E\d+ ', dumped))
    rows += len(re.findall(r'"text": "(?:\[\d+\])+ ', dumped))  # an incident summary's lines, each citing its [n]
    if rows:
        return f"{rows} rows"
    if re.search(r"\bNo (?:incidents|alerts|entities|rows|one is on shift)\b|None: no ", dumped):
        return "none"
    return "needs a model" if "Plain-language questions are not enabled" in dumped else ""


@pytest.mark.parametrize("model", [True, False], ids=["stand-in model", "no model"])
async def test_every_readme_example_and_welcome_button_on_the_page(model: bool, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    reason = chromium_missing()
    if reason:
        unavailable("page-level tests", reason)
    buttons = [title for title, _ in EXAMPLE_QUESTIONS] if model else list(EXAMPLE_COMMANDS)
    typed = [text for text in [*try_it_commands(), *readme_questions()] if text != "help"]
    async with oa.FakeOpenAI(brain=rule_model.brain) as stand_in:
        settings = {"MODEL_TURNS_PER_USER_MINUTE": "100", **({} if model else NO_MODEL)}
        bot = await start_sentinel_bot(stand_in.endpoint, tmp_path / "bot", **settings)
        try:
            async with Playground(f"http://127.0.0.1:{bot.port}/api/messages", tmp_path / "pg") as pg:
                # One page, as a person has it: the README typed in order, then each welcome-card button pressed
                # (the last button of that title on the page: "help" is left out, its card repeats them).
                await see(pg.url + "/", tmp_path / "readme.png", say=typed, press=buttons, timeout_ms=90000,
                          before_press=("Sentinel assistant",), height=12000,
                          expect=["Assessment", "On call", *(ON_THE_PAGE[b] for b in buttons)]
                          + (["most severe first", "the card lists them", "The bot's assessment of account",
                              "Hunt over SigninLogs"] if model else ["not enabled"]))
                replies = answers(pg, pg.personal_chat_id)
        finally:
            await bot.stop()
    pressed = [question for title, question in EXAMPLE_QUESTIONS] if model else list(EXAMPLE_COMMANDS)
    seen = {said: shown(replies.get(said, [])) for said in [*typed, *pressed]}
    with capsys.disabled():
        print(f"\n{'stand-in model' if model else 'no model'} (screenshots in {tmp_path}):\n"
              + "\n".join(f"  {said}: {what}" for said, what in seen.items()))
    assert [said for said, what in seen.items() if not what] == [], seen
    if model:
        assert "needs a model" not in seen.values(), seen
