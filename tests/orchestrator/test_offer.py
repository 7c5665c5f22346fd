"""The hunt's extended parameters (sessions, series, a join's time proximity) are offered on the turns where a hunt
is likely, and only there: the analyst's words, or a conversation whose last tool call was a hunt. Through the real
openai client and the fake model, the request of a hunting turn carries them and an ordinary one does not; the
tool runs them on any turn."""

from __future__ import annotations

import pytest

from bot.orchestrator.conversation import Conversation
from bot.orchestrator.items import ModelMessage, ToolCall, UserMessage
from bot.orchestrator.offer import hunt_likely
from bot.sentinel.client import SentinelClient
from tests.orchestrator.test_orchestrator import make
from tests.support import openai_fake as oa


@pytest.mark.parametrize("text", [
    "hunt for sign-ins from 203.0.113.7", "Any spike in failed logons overnight?", "show anomalies in mail volume",
    "what is the baseline of RDP logons", "group alice's sign-ins into sessions", "clicks within 10 minutes of a mail",
    "failures per hour this week", "is this host beaconing?", "anything unusual for bob?", "look over time at uploads",
    "extract the subcategory from auditpol command lines", "split the domain off the UPN", "parse the EventData",
    "a deletion after the creation of the account",
])
def test_hunting_words_widen_the_turn(text: str) -> None:
    assert hunt_likely(text, [])


@pytest.mark.parametrize("text", [
    "show me the high severity incidents", "who is alice@contoso.com", "close incident 42 as a false positive",
    "summarize the top entities", "what happened within the SOC team", "sessionless", "after all, is it closed?",
])
def test_ordinary_words_do_not(text: str) -> None:
    assert not hunt_likely(text, [])


def _called(*names: str) -> ModelMessage:
    return ModelMessage(None, tuple(ToolCall(f"c{n}", name, "{}") for n, name in enumerate(names)))


def test_a_follow_up_after_a_hunt_is_a_hunting_turn_and_after_anything_else_is_not() -> None:
    after_hunt = [UserMessage("x"), _called("hunt"), ModelMessage("found 3")]
    assert hunt_likely("and for bob?", after_hunt)
    assert not hunt_likely("and for bob?", [*after_hunt, UserMessage("y"), _called("list_incidents")])
    assert not hunt_likely("and for bob?", [])


async def test_the_model_is_told_of_series_only_on_a_hunting_turn(demo_backend, fake_openai) -> None:
    fake_openai.script(oa.text("Three high incidents."), oa.text("No spikes."))
    orchestrator = make(fake_openai, SentinelClient(demo_backend))
    await orchestrator.answer(Conversation(), "list the high incidents")
    await orchestrator.answer(Conversation(), "any spike in failed sign-ins this week?")
    ordinary, hunting = (
        next(t["function"]["parameters"]["properties"] for t in r.json["tools"] if t["function"]["name"] == "hunt")
        for r in fake_openai.chat_requests)
    assert "series" not in ordinary and "session" not in ordinary and "within" not in str(ordinary["join"])
    assert "series" in hunting and "session" in hunting and "within" in hunting["join"]["description"]


async def test_a_series_the_model_was_not_told_of_still_runs(demo_backend, fake_openai) -> None:
    arguments = {"table": "SigninLogs", "time_window": "7d", "series": {"step": "1h"}}
    fake_openai.script(oa.tool_calls(("hunt", arguments)), oa.text("Done."))
    result = await make(fake_openai, SentinelClient(demo_backend)).answer(Conversation(), "list what you can")
    [run] = result.runs
    assert run.tool == "hunt" and run.ok, run.artifact
