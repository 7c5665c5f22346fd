"""The rule-based stand-in model (tests/support/rule_model.py) through the real orchestrator, over the fake Chat
Completions server and the demo workspace: it picks tools by what the question says (entities by their shape,
windows, severities, [n] of every kind as the prompt lists them), answers only from the rows, says what it could not
read, and when told to misbehave the analyst still gets an answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.commands.router import CommandRouter, Route
from bot.orchestrator import prompts
from bot.orchestrator.conversation import Conversation
from bot.orchestrator.llm import ChatModel, create_client
from bot.orchestrator.loop import Orchestrator, TurnResult
from bot.orchestrator.memory import Memory, TokenCounter
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import QueryResult
from bot.tools.toolbox import ToolBox
from tests.support import openai_fake as oa
from tests.support import rule_model


@pytest.fixture
async def model() -> AsyncIterator[oa.FakeOpenAI]:
    async with oa.FakeOpenAI(brain=rule_model.brain) as server:
        yield server


@pytest.fixture
def stand_in(model: oa.FakeOpenAI, demo_client: SentinelClient) -> Orchestrator:
    client = create_client(openai_api_key="sk-test", base_url=f"{model.endpoint}/v1", max_retries=0)
    return Orchestrator(ChatModel(client, "rule-model"), ToolBox(demo_client), Memory(TokenCounter()), demo=True)


async def _quiet(_: str) -> None:
    return None


def calls(result: TurnResult) -> list[tuple[str, dict[str, Any]]]:
    return [(run.tool, run.arguments) for run in result.runs]


def with_rows(result: TurnResult) -> bool:
    return any(isinstance(run.artifact, QueryResult) and run.artifact.records for run in result.runs)


@pytest.mark.parametrize(("question", "tool", "arguments"), [
    ("is lena.fischer@contoso.com compromised?", "investigate_entity",
     {"entity": "lena.fischer@contoso.com", "entity_type": "account", "time_window": "last_7d"}),
    ("Anything suspicious on WS-FIN-023 in the last 30 days?", "investigate_entity",
     {"entity": "WS-FIN-023", "entity_type": "host", "time_window": "last_30d"}),
    ("what about 203.0.113.162?", "investigate_entity",
     {"entity": "203.0.113.162", "entity_type": "ip", "time_window": "last_7d"}),
    ("is 44d88612fea8a8f36de82e1278abb02f malicious", "investigate_entity",
     {"entity": "44d88612fea8a8f36de82e1278abb02f", "entity_type": "hash", "time_window": "last_7d"}),
    ("who clicked https://onedrive-files-share.test/s/Invoice_8823.html? investigate it", "investigate_entity",
     {"entity": "https://onedrive-files-share.test/s/Invoice_8823.html", "entity_type": "url",
      "time_window": "last_7d"}),
    ("is onedrive-files-share.test a bad domain?", "investigate_entity",
     {"entity": "onedrive-files-share.test", "entity_type": "domain", "time_window": "last_7d"}),
    ("alerts for host ws-legal-143 today", "query_alerts", {"entity": "ws-legal-143", "time_window": "last_24h"}),
    ("show failed sign-ins for the last 24 hours", "hunt",
     {"table": "SigninLogs", "time_window": "24h", "where": [["ResultType", "!=", "0"]], "summarize": ["count()"],
      "by": ["UserPrincipalName"], "sort": "Count desc", "take": 20}),
    ("failed sign-ins of lena.fischer@contoso.com this week", "hunt",
     {"table": "SigninLogs", "time_window": "7d",
      "where": [["ResultType", "!=", "0"], ["UserPrincipalName", "==", "lena.fischer@contoso.com"]], "take": 20}),
    ("processes on ws-legal-143 in the last 3 days", "hunt",
     {"table": "DeviceProcessEvents", "time_window": "3d", "where": [["DeviceName", "==", "ws-legal-143"]],
      "take": 20}),
    ("WHAT HIGH INCIDENTS CAME IN THIS WEEK?", "query_incidents", {"time_window": "last_7d", "min_severity": "High"}),
    ("waht medium incidnets came in this week", "query_incidents",
     {"time_window": "last_7d", "min_severity": "Medium"}),
    ("my open incidents", "query_incidents", {"owner": "me", "status": "open", "time_window": "last_30d"}),
    ("is the alert volume unusual this month?", "get_alert_trend", {"time_window": "last_30d"}),
    ("incidents that match qakbot", "query_incidents", {"search": "qakbot", "time_window": "last_30d"}),
    ("alerts about mimikatz this week", "query_alerts", {"search": "mimikatz", "time_window": "last_7d"}),
    ("who's on call right now", "get_on_call", {}),
])
async def test_it_picks_the_tool_the_question_asks_for(stand_in: Orchestrator, question: str, tool: str,
                                                       arguments: dict[str, Any]) -> None:
    result = await stand_in.answer(Conversation(), question)
    assert calls(result)[0] == (tool, arguments), calls(result)
    assert not result.failed and result.text and not result.findings, (result.text, result.findings)


async def test_a_summary_reads_incidents_trend_and_entities(stand_in: Orchestrator) -> None:
    result = await stand_in.answer(Conversation(), "give me an overview of today")
    assert [tool for tool, _ in calls(result)] == ["query_incidents", "get_alert_trend", "get_top_entities"]
    assert "incidents; most severe first" in result.text and "Most targeted" in result.text
    assert not result.findings


async def test_follow_ups_on_every_kind_of_reference(stand_in: Orchestrator, demo_client: SentinelClient) -> None:
    """An incident's [n], an alert's (found again by its stable number), an entity's and an investigation's evidence
    row's [n] (the entity the row names), each resolved from the references the prompt lists, or through the bot
    when the prompt no longer lists it (its 30 most recent)."""
    conversation = Conversation()
    router = CommandRouter(demo_client, stand_in)

    async def ask(text: str) -> TurnResult:
        routed = await router.route(text, conversation, _quiet)  # what [n] means this turn, as in Teams
        assert routed.route is Route.QUESTION, routed
        return await stand_in.answer(conversation, text)

    listed = await ask("high incidents this week")
    incident = conversation.references.items[0]
    detail = await ask(f"tell me more about [{incident.n}]")
    assert calls(detail) == [("get_incident_detail", {"incident_ref": incident.key})] and with_rows(listed)
    assert detail.text.startswith(f"Incident [{incident.n}] #{incident.key}")
    alert = next(r for r in conversation.references.items if r.kind == "alert")
    about_alert = await ask(f"tell me more about [{alert.n}]")
    assert [tool for tool, _ in calls(about_alert)] == ["query_alerts"]
    assert about_alert.text.startswith(f"[{alert.n}] is \""), about_alert.text
    host = next(r for r in conversation.references.items if r.kind == "entity"
                and r.key.startswith(("host:", "account:", "ip:")))
    about_host = await ask(f"is [{host.n}] compromised?")
    assert calls(about_host)[-1] == ("investigate_entity", {"entity": host.key.split(":", 1)[1],
                                                            "entity_type": host.key.split(":")[0],
                                                            "time_window": "last_7d"}), calls(about_host)
    evidence = next(r for r in reversed(conversation.references.items) if r.kind == "entity" and r.key != host.key)
    about_row = await ask(f"what about [{evidence.n}]")
    assert calls(about_row)[-1][0] in ("investigate_entity", "get_top_entities")
    assert calls(about_row)[-1][1]["entity"] == evidence.key.split(":", 1)[1]
    for result in (detail, about_alert, about_host, about_row):
        assert not result.findings and not result.failed, result.text


async def test_what_it_cannot_read_it_says_with_what_to_try(stand_in: Orchestrator) -> None:
    for question in ("what's the weather like?", "sing me something for the last 7 days"):
        result = await stand_in.answer(Conversation(), question)
        assert result.runs == [] and "what to look up in your message" in result.text and not result.findings
        assert "hunt failed sign-ins" in result.text and "help" in result.text
    windowed = await stand_in.answer(Conversation(), "sing me something for the last 7 days")
    assert windowed.text.startswith("I read the last 7 days, but not what to look up")
    unnamed = await stand_in.answer(Conversation(), "is this account compromised? lena")
    assert unnamed.runs == [] and "you want an investigation, but not of what" in unnamed.text, \
        "not the top entities list"


async def test_a_watch_asked_in_words_gets_the_command_that_makes_it(stand_in: Orchestrator) -> None:
    result = await stand_in.answer(Conversation(), "notify me when new medium incidents come in")
    assert result.runs == [] and 'type "watch medium"' in result.text


@pytest.mark.parametrize("kind", sorted(rule_model.MISBEHAVIOURS))
async def test_a_bad_call_first_still_answers_with_rows(model: oa.FakeOpenAI, stand_in: Orchestrator,
                                                         kind: str) -> None:
    model.brain = rule_model.misbehaving(kind)
    result = await stand_in.answer(Conversation(), "high incidents this week")
    bad, good = result.runs
    assert not bad.ok and bad.artifact.code in ("unknown_tool", "invalid_argument")
    assert good.ok and with_rows(result) and result.text.startswith(f"{good.rows} high incidents")
    assert "failed" not in result.text, "its own slip, corrected, is not the analyst's business"


@pytest.mark.parametrize("kind", sorted(rule_model.MISBEHAVIOURS))
async def test_a_model_that_only_sends_bad_calls_still_ends_the_turn_with_a_clear_line(
        model: oa.FakeOpenAI, stand_in: Orchestrator, kind: str) -> None:
    model.brain = rule_model.misbehaving(kind, times=99)
    conversation = Conversation()
    result = await stand_in.answer(conversation, "high incidents this week")
    assert not any(run.ok for run in result.runs) and result.hit_round_limit
    assert result.text.startswith(prompts.ROUNDS_EXHAUSTED_PREFIX) and "That query failed: " in result.text
    assert result.text.count("That query failed") == 1, "one line per failure, not one per round"
    model.brain = rule_model.brain  # the conversation goes on
    after = await stand_in.answer(conversation, "high incidents this week")
    assert with_rows(after) and not after.failed


async def test_a_hash_from_a_list_is_investigated_whole(stand_in: Orchestrator) -> None:
    """A SHA-256's [n]: the prompt lists it whole (a URL's stays short), so the model can pass it to a query."""
    conversation = Conversation()
    listed = await stand_in.answer(conversation, "which entities were targeted most this month?")
    assert with_rows(listed)
    sha256 = next(r for r in conversation.references.items
                  if r.key.startswith("filehash:") and len(r.key.split(":", 1)[1]) == 64)
    result = await stand_in.answer(conversation, f"is [{sha256.n}] malicious?")
    assert calls(result) == [("investigate_entity", {"entity": sha256.key.split(":", 1)[1], "entity_type": "hash",
                                                     "time_window": "last_7d"})]
    assert not result.failed and not result.findings


async def test_a_change_asked_for_where_changes_are_off_gets_a_read_only_line(stand_in: Orchestrator) -> None:
    conversation = Conversation()
    await stand_in.answer(conversation, "high incidents this week")
    result = await stand_in.answer(conversation, "please escalate [1] to whoever is on call")
    assert result.runs == [] and result.text.startswith("I can only read here") and "who is on call" in result.text


def test_the_same_request_gets_the_same_answer() -> None:
    body = {"messages": [{"role": "system", "content": "References shown to the analyst so far:\n[3] incident #42"},
                         {"role": "user", "content": "tell me more about [3]"}],
            "tools": [{"type": "function", "function": {"name": "get_incident_detail"}}]}
    first, again = rule_model.brain(body), rule_model.brain(body)
    assert first == again and first.completion is not None
    assert first.completion.tool_calls[0].arguments == '{"incident_ref": "42"}'
