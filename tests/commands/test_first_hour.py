"""The first hour, as a new user has it: every command in the README's "Try it", every welcome-card button
(with and without a model) and the README's plain-language examples with the rule-based stand-in model, all
against the demo workspace as the Agents Playground's own user. Each must answer with rows, not "No incidents",
"outside my beat" or a usage message.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.cards.messages import EXAMPLE_COMMANDS, EXAMPLE_QUESTIONS
from bot.commands.router import CommandRouter, Route
from bot.orchestrator.conversation import Conversation
from bot.orchestrator.llm import ChatModel, create_client
from bot.orchestrator.loop import Orchestrator
from bot.orchestrator.memory import Memory, TokenCounter
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import QueryResult
from bot.tools.toolbox import ToolBox
from tests.support import openai_fake as oa
from tests.support import rule_model

README = Path(__file__).resolve().parents[2] / "README.md"
PLAYGROUND_USER = "00000000-0000-0000-0000-0000000000020"  # Alex Wilber, the Playground's current user


async def _status(_: str) -> None:
    return None


def try_it_commands() -> list[str]:
    """The commands in the README's "Try it" block, without their comments."""
    section = README.read_text(encoding="utf-8").split("## Try it", 1)[1]
    block = section.split("```", 2)[1]
    return [re.split(r"\s{2,}", line.strip())[0] for line in block.splitlines() if line.strip()]


def readme_questions() -> list[str]:
    """The plain-language examples the README quotes, each question of a pair on its own."""
    text = README.read_text(encoding="utf-8")
    quoted = re.search(r'For questions in plain language \(([^)]*)\)', text, re.DOTALL)
    assert quoted, "the README quotes its example questions"
    return [" ".join(q.split()) for q in re.findall(r'"([^"]+)"', quoted.group(1))]


def test_the_readme_still_has_what_this_file_checks() -> None:
    assert "incidents 7d high" in try_it_commands() and "help" in try_it_commands()
    assert any("anyone on it" in q for q in readme_questions())


async def test_every_try_it_command_and_welcome_command_answers_with_rows(demo_client: SentinelClient) -> None:
    router, conversation = CommandRouter(demo_client, None), Conversation()
    for text in [*try_it_commands(), *EXAMPLE_COMMANDS]:
        routed = await router.route(text, conversation, _status, me=PLAYGROUND_USER)
        if routed.route is Route.HELP:
            continue
        assert routed.route is Route.QUERY, (text, routed)
        assert routed.run is not None and isinstance(routed.run.artifact, QueryResult), (text, routed.run)
        assert routed.run.artifact.records, f"{text!r} answered with no rows"


@pytest.fixture
async def stand_in(demo_client: SentinelClient) -> AsyncIterator[Orchestrator]:
    async with oa.FakeOpenAI(brain=rule_model.brain) as server:
        client = create_client(openai_api_key="sk-test", base_url=f"{server.endpoint}/v1")
        yield Orchestrator(ChatModel(client, "rule-model"), ToolBox(demo_client), Memory(TokenCounter()), demo=True)


async def test_the_welcome_questions_answer_with_rows(stand_in: Orchestrator) -> None:
    for _, question in EXAMPLE_QUESTIONS:
        result = await stand_in.answer(Conversation(), question)
        assert result.runs and all(run.ok for run in result.runs), question
        assert any(isinstance(run.artifact, QueryResult) and run.artifact.records for run in result.runs), question
        assert not result.findings, (question, result.text)
    hosts = await stand_in.answer(Conversation(), "Which hosts were hit most this week?")
    assert hosts.text.startswith("Most targeted hosts:")


async def test_the_readme_questions_get_sensible_answers(stand_in: Orchestrator) -> None:
    conversation = Conversation()
    overnight, more = readme_questions()[:2]
    listed = await stand_in.answer(conversation, overnight)
    [run] = listed.runs
    assert run.tool == "query_incidents" and run.arguments == {"time_window": "last_24h", "min_severity": "High"}
    assert ("Each has an owner" in listed.text or "Not assigned yet" in listed.text) and " 1 incidents" not in \
        listed.text
    detail = await stand_in.answer(conversation, more)
    assert [r.tool for r in detail.runs] == ["get_incident_detail"]
    assert "is owned by" in detail.text or "not assigned" in detail.text
    follow_up = await stand_in.answer(conversation, "is anyone on it?")
    assert [r.tool for r in follow_up.runs] == ["get_incident_detail"], "about that incident, not every incident"
    on_call = await stand_in.answer(conversation, "who is on call right now?")
    assert [r.tool for r in on_call.runs] == ["get_on_call"] and on_call.text.startswith("On shift now:")
    for result in (listed, detail, follow_up, on_call):
        assert not result.findings, result.text


def test_one_of_a_kind_is_singular() -> None:
    assert rule_model._count("query_incidents(...) -> 1 incidents [DEMO DATA]", "incident") == "1 incident"
    assert rule_model._count("query_incidents(...) -> 20 of 93 incidents", "incident") == "20 of 93 incidents"


# ---- the same, through the Agents Playground, as someone opening ./run for the first time ---------------------


def _rows(message: Any) -> int:
    """Rows a reply's cards show: table rows under their header rows, a detail card's one incident, or an
    investigation's evidence rows ("E3 [7] · ..."), or a summary's rows ("[4][5] ...")."""
    rows = 0
    for card in message.cards:
        dumped = json.dumps(card)
        rows += max(dumped.count('"TableRow"') - dumped.count('"firstRowAsHeader": true'), 0)
        rows += int('"Open in Sentinel"' in dumped)
        rows += len(re.findall(r'"text": "E\d+ ', dumped)) if '"text": "Assessment: ' in dumped else 0
        rows += len(re.findall(r'"text": "\[\d+\]', dumped)) if '"text": "Summary of incident' in dumped else 0
    return rows


async def _first_hour(model_endpoint: str, workdir: Path, **settings: str) -> list[tuple[str, int]]:
    """Opens the 1:1 chat, presses every welcome-card button and types the README's "Try it": (what, rows)."""
    from tests.support.playground import Playground, start_sentinel_bot

    bot = await start_sentinel_bot(model_endpoint, workdir / "bot", **settings)
    seen: list[tuple[str, int]] = []
    try:
        async with Playground(f"http://127.0.0.1:{bot.port}/api/messages", workdir / "pg") as pg:
            await pg.install(pg.personal_chat_id)
            welcome = await pg.wait_for(lambda m: "Sentinel assistant" in json.dumps(m.cards), timeout=WAIT)
            buttons = [a["title"] for a in welcome.card_actions() if a.get("type") == "Action.Submit"]
            assert len(buttons) == 4, buttons
            for title in buttons:
                pressed = await pg.submit(welcome, title)
                reply = await pg.wait_for(lambda m: _rows(m) > 0 or "No " in json.dumps(m.cards)[:400],
                                          timeout=WAIT, since=pressed)
                seen.append((f"welcome button {title!r}", _rows(reply)))
            for command in try_it_commands():
                sent = await pg.send_personal(command)
                # The answer with rows (or saying none): an earlier answer's last card (its sources footnote) may
                # arrive after this command was sent on a busy machine, and is not this command's answer.
                helping = command == "help"
                reply = await pg.wait_for(
                    lambda m, helping=helping: bool(m.cards) if helping else
                    _rows(m) > 0 or "No " in json.dumps(m.cards)[:400], timeout=WAIT, since=sent)
                seen.append((command, _rows(reply) if command != "help" else -1))
    finally:
        await bot.stop()
    return seen


WAIT = 30.0


@pytest.mark.slow
@pytest.mark.parametrize("model", [False, True], ids=["no model (./run)", "rule-based stand-in model"])
async def test_the_first_hour_in_the_playground(model: bool, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Every welcome-card button and every "Try it" command on a fresh bot, as the Playground's own user: each
    answers with rows (pytest -s prints them)."""
    from tests.support.playground import CLI
    from tests.support.tooling import missing

    reason = missing(CLI, "npm ci --prefix tests/e2e")
    if reason:
        pytest.fail(reason) if os.environ.get("CI") else pytest.skip(reason)
    async with oa.FakeOpenAI(brain=rule_model.brain) as server:
        settings = {} if model else {"OPENAI_BASE_URL": "", "OPENAI_MODEL": "", "OPENAI_API_KEY": ""}
        seen = await _first_hour(server.endpoint, tmp_path, **settings)
    with capsys.disabled():
        print("\n" + "\n".join(f"  {what}: {rows} rows" for what, rows in seen))
    assert [what for what, rows in seen if rows == 0] == [], seen
