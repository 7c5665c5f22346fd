"""The tool loop driven through the real openai client against a fake Chat Completions server.

Sentinel data comes from the demo workspace (real queries, real rows) or, where the test is about
the service's behaviour (latency, throttling), from the fake Log Analytics endpoint.
"""

from __future__ import annotations

import re
import time
from functools import lru_cache

import pytest

from bot.demo.writer import DemoIncidentWriter
from bot.orchestrator import prompts
from bot.orchestrator.changes.confirmations import Actor, ConfirmationDesk, WritePolicy
from bot.orchestrator.conversation import Conversation
from bot.orchestrator.items import ToolResult
from bot.orchestrator.llm import ChatModel, create_client, to_wire
from bot.orchestrator.loop import Orchestrator
from bot.orchestrator.memory import TRIM_WARNING, Memory, MemoryPolicy, TokenCounter
from bot.sentinel.changes import Owner
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import IncidentDetail, QueryResult
from bot.tools.toolbox import ToolBox
from tests.support import openai_fake as oa
from tests.support.loganalytics_fake import error_body, table_body
from tests.support.openai_fake import tool_call_ids_answered
from tests.support.workspaces import make_la_client, prime


@lru_cache(maxsize=1)
def counter() -> TokenCounter:
    return TokenCounter()


def make(fake: oa.FakeOpenAI, sentinel: SentinelClient, *, shape: str = "openai", max_rounds: int = 5,
         policy: MemoryPolicy = MemoryPolicy(), max_retries: int = 2) -> Orchestrator:
    if shape == "azure":
        client = create_client(azure_endpoint=fake.endpoint, azure_deployment="gpt-4o-soc", api_version="2024-10-21",
                               azure_api_key="azure-test-key", max_retries=max_retries)
        model = ChatModel(client, "gpt-4o-soc")
    else:
        client = create_client(openai_api_key="sk-test", base_url=f"{fake.endpoint}/v1", max_retries=max_retries)
        model = ChatModel(client, "gpt-4o")
    return Orchestrator(model, ToolBox(sentinel), Memory(counter(), policy), max_rounds=max_rounds,
                        demo=sentinel.is_demo)


def data_rows(message: dict) -> list[list[str]]:
    """Rows of a compact tool result that start with a reference, split into cells."""
    return [line.split("|") for line in message["content"].splitlines() if re.match(r"^\[\d+\]\|", line)]


def last_tool_message(body: dict) -> dict:
    return [m for m in body["messages"] if m["role"] == "tool"][-1]


def cite_first_row(body: dict) -> oa.Step:
    """A model that answers by citing the first row of the last tool result (grounded)."""
    first = data_rows(last_tool_message(body))[0]
    return oa.text(f"The most severe one is {first[0]} #{first[1]} ({first[2]}).")


async def test_one_tool_round_trip_in_both_url_shapes(fake_openai: oa.FakeOpenAI, demo_client: SentinelClient) -> None:
    for shape in ("openai", "azure"):
        fake_openai.requests.clear()
        orchestrator = make(fake_openai, demo_client, shape=shape)
        fake_openai.script(oa.tool_calls(("query_incidents", {"time_window": "last_24h", "min_severity": "High"})))
        fake_openai.brain = cite_first_row
        conversation = Conversation()
        result = await orchestrator.answer(conversation, "What high-severity incidents came in overnight?")
        assert not result.failed and result.notices == [], result.notices
        assert result.text.startswith("The most severe one is [1] #")
        [run] = result.runs
        assert run.tool == "query_incidents" and isinstance(run.artifact, QueryResult) and run.artifact.records
        first, second = fake_openai.chat_requests
        if shape == "azure":
            assert first.path == "/openai/deployments/gpt-4o-soc/chat/completions"
            assert first.query["api-version"] == "2024-10-21" and first.headers["api-key"] == "azure-test-key"
        else:
            assert first.path == "/v1/chat/completions" and first.headers["authorization"] == "Bearer sk-test"
        assert first.json["tool_choice"] == "auto" and "parallel_tool_calls" not in first.json
        assert {t["function"]["name"] for t in first.json["tools"]} == {
            "query_incidents", "get_incident_detail", "query_alerts", "get_alert_trend", "get_top_entities",
            "get_on_call", "hunt", "investigate_entity", "summarize_incident"}
        assert all("strict" not in t["function"] for t in first.json["tools"])
        assert second.json["tools"], "tools are sent on every round"
        # The assistant message with tool_calls comes first, then its tool result with the matching id.
        roles = [m["role"] for m in to_wire(conversation.history)]
        assert roles == ["user", "assistant", "tool", "assistant"]
        call_id = to_wire(conversation.history)[1]["tool_calls"][0]["id"]
        assert to_wire(conversation.history)[2]["tool_call_id"] == call_id
        assert "{" not in to_wire(conversation.history)[2]["content"].splitlines()[1], "compact rows, not JSON"


async def test_parallel_tools_run_concurrently(fake_openai: oa.FakeOpenAI, demo_backend, fake_logs) -> None:
    calls = [("query_incidents", {"time_window": "last_24h"}), ("query_alerts", {"time_window": "last_24h"}),
             ("get_top_entities", {"time_window": "last_7d"})]
    for tool, arguments in calls:
        await prime(fake_logs, demo_backend, tool, arguments)
    fake_logs.latency_s = 1.0
    sentinel = make_la_client(fake_logs)
    orchestrator = make(fake_openai, sentinel)
    fake_openai.script(oa.tool_calls(*calls), oa.text("Three views of the last day, see the tables."))
    result = await orchestrator.answer(Conversation(), "Give me the overview of the last day")
    assert [run.tool for run in result.runs] == [c[0] for c in calls] and all(run.ok for run in result.runs)
    arrivals = [r.received_at for r in fake_logs.requests]
    # Events, not a wall bound: the last query reached the service before it answered the first
    assert len(arrivals) == 3 and max(arrivals) < min(fake_logs.answered_at), "not all three in flight together"
    await sentinel.close()


async def test_several_rounds(fake_openai: oa.FakeOpenAI, demo_client: SentinelClient) -> None:
    def brain(body: dict) -> oa.Step:
        tool_messages = [m for m in body["messages"] if m["role"] == "tool"]
        if len(tool_messages) == 1:
            number = data_rows(tool_messages[0])[0][1]
            return oa.tool_calls(("get_incident_detail", {"incident_ref": number}))
        return oa.text("Its alerts are listed above.")

    fake_openai.script(oa.tool_calls(("query_incidents", {"time_window": "last_7d", "min_severity": "High"})))
    fake_openai.brain = brain
    result = await make(fake_openai, demo_client).answer(Conversation(), "Worst incident this week, in detail?")
    assert result.rounds == 3 and [r.tool for r in result.runs] == ["query_incidents", "get_incident_detail"]
    listed = result.runs[0].artifact.records[0]
    assert result.runs[1].artifact.records[0].incident.number == listed.number


async def test_a_model_that_never_stops_calling_tools_gets_a_synthesis(fake_openai: oa.FakeOpenAI,
                                                                        demo_client: SentinelClient) -> None:
    def brain(body: dict) -> oa.Step:
        if not body.get("tools"):
            return oa.text("Alerts kept coming in; here is the summary.")
        return oa.tool_calls(("query_alerts", {"time_window": "last_1h"}))

    fake_openai.brain = brain
    conversation = Conversation()
    result = await make(fake_openai, demo_client, max_rounds=5).answer(conversation, "Keep digging")
    assert len(result.runs) == 5 and result.rounds == 6 and result.hit_round_limit
    requests = fake_openai.chat_requests
    assert [bool(r.json.get("tools")) for r in requests] == [True] * 5 + [False]
    assert requests[-1].messages[-1]["content"] == prompts.SYNTHESIS_INSTRUCTION
    assert result.text.startswith(prompts.ROUNDS_EXHAUSTED_PREFIX)
    assert tool_call_ids_answered(to_wire(conversation.history))


async def test_malformed_arguments_become_a_correctable_tool_error(fake_openai: oa.FakeOpenAI,
                                                                   demo_client: SentinelClient) -> None:
    def brain(body: dict) -> oa.Step:
        tool_messages = [m for m in body["messages"] if m["role"] == "tool"]
        if len(tool_messages) == 1:
            assert "ERROR invalid_argument" in tool_messages[0]["content"]
            return oa.tool_calls(("query_incidents", {"time_window": "last_24h"}))
        return cite_first_row(body)

    fake_openai.script(oa.tool_calls(("query_incidents", '{"time_window": "last_24h"')))  # truncated JSON
    fake_openai.brain = brain
    result = await make(fake_openai, demo_client).answer(Conversation(), "incidents today?")
    bad, good = result.runs
    assert not bad.ok and bad.artifact.code == "invalid_argument" and "not valid JSON" in bad.artifact.message
    assert good.ok and not result.failed


async def test_unknown_tool_and_bad_values(fake_openai: oa.FakeOpenAI, demo_client: SentinelClient) -> None:
    fake_openai.script(
        oa.tool_calls(("close_all_incidents", {}), ("query_alerts", {"time_window": "last_year", "limit": 5000})),
        oa.text("I can only read data, and that window is not available."),
    )
    conversation = Conversation()
    result = await make(fake_openai, demo_client).answer(conversation, "close everything")
    unknown, bad = result.runs
    assert unknown.artifact.code == "unknown_tool" and "query_incidents" in unknown.artifact.message
    assert bad.artifact.code == "invalid_argument" and "last_24h" in bad.artifact.message
    tool_texts = [m["content"] for m in to_wire(conversation.history) if m["role"] == "tool"]
    assert "Correct the argument" in tool_texts[1]


async def test_retryable_tool_error_is_retried_once_silently(fake_openai: oa.FakeOpenAI, demo_backend,
                                                             fake_logs) -> None:
    await prime(fake_logs, demo_backend, "query_incidents", {"time_window": "last_24h"})
    unavailable = error_body("ServiceUnavailable", "The service is temporarily unavailable")
    fake_logs.respond(503, unavailable)
    sentinel = make_la_client(fake_logs, sdk_retries=0)
    fake_openai.script(oa.tool_calls(("query_incidents", {"time_window": "last_24h"})))
    fake_openai.brain = cite_first_row
    result = await make(fake_openai, sentinel).answer(Conversation(), "incidents today")
    [run] = result.runs
    assert run.ok and run.retried and len(fake_logs.requests) == 2
    # If it fails again, the model gets an explainable error instead of data.
    fake_logs.respond(503, unavailable)
    fake_logs.respond(503, unavailable)
    fake_openai.script(oa.tool_calls(("query_incidents", {"time_window": "last_24h"})),
                       oa.text("Log Analytics is unavailable right now; try again in a few seconds."))
    conversation = Conversation()
    again = await make(fake_openai, sentinel).answer(conversation, "incidents today")
    assert not again.runs[0].ok and again.runs[0].retried
    tool_text = next(m for m in to_wire(conversation.history) if m["role"] == "tool")["content"]
    assert "ERROR server_error (retryable)" in tool_text and "do not make up data" in tool_text
    await sentinel.close()


async def test_throttling_is_not_retried_again_by_the_tool_layer(fake_openai: oa.FakeOpenAI, fake_logs) -> None:
    """The data layer waited and tried again within the service's limits; the tool layer adds no tries."""
    for _ in range(2):
        fake_logs.respond(429, error_body("ThrottledError", "Too many requests"))
    sentinel = make_la_client(fake_logs, sdk_retries=0, throttle_retries=1, backoff_s=0.01)
    fake_openai.script(oa.tool_calls(("query_incidents", {"time_window": "last_24h"})),
                       oa.text("Log Analytics is throttling the bot's queries; ask again in a minute."))
    conversation = Conversation()
    result = await make(fake_openai, sentinel).answer(conversation, "incidents today")
    assert not result.runs[0].ok and not result.runs[0].retried and len(fake_logs.requests) == 2
    tool_text = next(m for m in to_wire(conversation.history) if m["role"] == "tool")["content"]
    assert "ERROR throttled (retryable)" in tool_text and "refused this query 2 times" in tool_text
    await sentinel.close()


async def test_made_up_incident_numbers_are_flagged(fake_openai: oa.FakeOpenAI, demo_client: SentinelClient) -> None:
    def brain(body: dict) -> oa.Step:
        real = data_rows(last_tool_message(body))[0][1]
        return oa.text(f"Incident #{real} is real, but incident 999999 and IP 203.0.113.254 are invented, as is [77].")

    fake_openai.script(oa.tool_calls(("query_incidents", {"time_window": "last_7d"})))
    fake_openai.brain = brain
    result = await make(fake_openai, demo_client).answer(Conversation(), "anything?")
    [flag] = result.notices
    assert "Fact check: 3 statements" in flag
    summary, _, marked = result.text.partition("\n\n")
    assert "incident #999999 is not in any" in summary and "IP 203.0.113.254 is not in any" in summary
    assert "[77] is not a reference" in summary
    assert "999999 ⚠(not in any result)" in marked and "[77] ⚠(" in marked
    real = result.runs[0].artifact.records[0].number
    assert f"#{real} is real" in marked and f"#{real} ⚠" not in marked


async def test_empty_results_are_stated_with_alternatives(fake_openai: oa.FakeOpenAI, fake_logs) -> None:
    fake_logs.respond(200, table_body("query_incidents", []))
    sentinel = make_la_client(fake_logs)
    fake_openai.script(oa.tool_calls(("query_incidents", {"time_window": "last_1h", "min_severity": "High"})),
                       oa.text("No high-severity incidents in the last hour. Try the last 24 hours?"))
    conversation = Conversation()
    result = await make(fake_openai, sentinel).answer(conversation, "anything high in the last hour?")
    tool_text = next(m for m in to_wire(conversation.history) if m["role"] == "tool")["content"]
    assert "no rows" in tool_text and "wider time_window" in tool_text
    assert result.runs[0].ok and result.runs[0].rows == 0
    await sentinel.close()


async def test_rate_limit_with_retry_after_is_waited_out(fake_openai: oa.FakeOpenAI,
                                                         demo_client: SentinelClient) -> None:
    fake_openai.script(oa.rate_limited(retry_after=0.3), oa.text("Nothing needed a query."))
    started = time.monotonic()
    result = await make(fake_openai, demo_client).answer(Conversation(), "hello")
    assert not result.failed and len(fake_openai.chat_requests) == 2 and time.monotonic() - started >= 0.3


async def test_persistent_rate_limit_is_a_friendly_reply_and_loses_nothing(fake_openai: oa.FakeOpenAI,
                                                                          demo_client: SentinelClient) -> None:
    fake_openai.script(oa.rate_limited(retry_after=0), oa.rate_limited(retry_after=0))
    conversation = Conversation()
    result = await make(fake_openai, demo_client, max_retries=1).answer(conversation, "what came in overnight?")
    assert result.failed and "busy" in result.text and "Traceback" not in result.text
    assert to_wire(conversation.history)[0] == {"role": "user", "content": "what came in overnight?"}
    assert tool_call_ids_answered(to_wire(conversation.history))


@pytest.mark.parametrize("step", [oa.azure_content_filter(), oa.content_filtered_completion()])
async def test_azure_content_filter_gets_a_clear_message(fake_openai: oa.FakeOpenAI, demo_client: SentinelClient,
                                                         step: oa.Step) -> None:
    fake_openai.script(step)
    result = await make(fake_openai, demo_client, shape="azure").answer(Conversation(), "summarise incident 1")
    assert result.failed and "content filter" in result.text and "help" in result.text
    assert len(fake_openai.chat_requests) == 1, "a content filter refusal is not retried"


async def test_context_length_exceeded_trims_and_retries_once(fake_openai: oa.FakeOpenAI,
                                                              demo_client: SentinelClient) -> None:
    conversation = Conversation()
    orchestrator = make(fake_openai, demo_client)
    for i in range(6):
        fake_openai.script(oa.text(f"answer {i}"))
        await orchestrator.answer(conversation, f"question {i}")
    fake_openai.script(oa.context_length_exceeded(), oa.text("Fine now."))
    result = await orchestrator.answer(conversation, "one more")
    assert result.text == "Fine now." and any("too long" in n for n in result.notices)
    before, after = fake_openai.chat_requests[-2:]
    assert len(after.messages) < len(before.messages)
    fake_openai.script(oa.context_length_exceeded(), oa.context_length_exceeded())
    failed = await orchestrator.answer(conversation, "and again")
    assert failed.failed and "too long" in failed.text


async def test_clear_keeps_preferences_and_a_summary(fake_openai: oa.FakeOpenAI, demo_client: SentinelClient) -> None:
    orchestrator = make(fake_openai, demo_client)
    conversation = Conversation(preferences={"time_window": "last_7d"})
    fake_openai.script(oa.tool_calls(("query_incidents", {"time_window": "last_7d"})))
    fake_openai.brain = cite_first_row
    await orchestrator.answer(conversation, "worst incident this week?")
    number = next(iter(conversation.facts.incidents))
    fake_openai.brain = None
    fake_openai.script(oa.text(f"- Looked at the week's incidents; #{number} was the most severe."))
    reply = await orchestrator.summarise_and_clear(conversation)
    assert "summary" in reply
    summary_request = fake_openai.chat_requests[-1]
    assert "tools" not in summary_request.json
    assert summary_request.messages[-1]["content"] == prompts.SUMMARY_INSTRUCTION
    assert conversation.history == [] and conversation.references.items == []
    assert conversation.preferences == {"time_window": "last_7d"} and f"#{number}" in conversation.summary
    fake_openai.script(oa.text(f"We discussed #{number} before."))
    after = await orchestrator.answer(conversation, "what did we talk about?")
    messages = fake_openai.chat_requests[-1].messages
    assert f"#{number}" not in messages[0]["content"], "the first system message is the stable, cacheable prefix"
    context = [m for m in messages if m["role"] == "system"][1]["content"]
    assert f"#{number}" in context and "time window last_7d" in context
    assert after.notices == [], "numbers from the summary count as verified"


async def test_trimming_at_max_turns_warns_first_and_never_orphans_tool_messages(
        fake_openai: oa.FakeOpenAI, demo_client: SentinelClient) -> None:
    def brain(body: dict) -> oa.Step:
        assert tool_call_ids_answered(body["messages"]), "a request with an orphaned tool message"
        if body["messages"][-1]["role"] == "user":
            return oa.tool_calls(("query_alerts", {"time_window": "last_1h", "limit": 3}))
        return oa.text("Noted.")

    fake_openai.brain = brain
    orchestrator = make(fake_openai, demo_client, policy=MemoryPolicy(max_turns=30, history_tokens=10**6))
    conversation = Conversation()
    warned_at = None
    for turn in range(1, 34):
        result = await orchestrator.answer(conversation, f"question {turn}")
        if TRIM_WARNING in result.notices:
            warned_at = warned_at or turn
        user_turns = [m for m in to_wire(conversation.history) if m["role"] == "user"]
        assert len(user_turns) <= 30
        wire = to_wire(conversation.history)
        assert wire[0]["role"] == "user" and tool_call_ids_answered(wire)
        assert len(conversation.token_counts) == len(conversation.history)
    assert warned_at is not None and warned_at < 30, "the analyst is warned before the first trim"
    assert to_wire(conversation.history)[0]["content"] == "question 4"


async def test_token_budget_trims_whole_turns(fake_openai: oa.FakeOpenAI, demo_client: SentinelClient) -> None:
    fake_openai.brain = lambda body: (oa.tool_calls(("query_incidents", {"time_window": "last_30d", "limit": 50}))
                                      if body["messages"][-1]["role"] == "user" else oa.text("ok"))
    orchestrator = make(fake_openai, demo_client, policy=MemoryPolicy(history_tokens=3000))
    conversation = Conversation()
    for turn in range(8):
        result = await orchestrator.answer(conversation, f"q{turn}")
        newest_turn = sum(conversation.token_counts[-3:])  # user, tool call, tool result (+ answer below)
        assert sum(conversation.token_counts[:-4]) <= 3000 or len(conversation.history) == 4
        assert tool_call_ids_answered(to_wire(conversation.history))
        assert newest_turn > 0 and result.runs[0].rows == 50
    assert to_wire(conversation.history)[0]["content"] != "q0", "old turns were trimmed to fit the budget"
    # Older tool results were shortened to a digest before being trimmed.
    older = [m for m in conversation.history[:-4] if isinstance(m, ToolResult)]
    assert older and all(m.compacted for m in older)


async def test_tell_me_more_about_2_reaches_the_right_incident(fake_openai: oa.FakeOpenAI,
                                                               demo_client: SentinelClient) -> None:
    def brain(body: dict) -> oa.Step:
        last = body["messages"][-1]
        if last["role"] == "user" and "[2]" in last["content"]:
            listing = "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")
            number = re.search(r"^\[2\] incident #(\d+)", listing, re.MULTILINE).group(1)
            return oa.tool_calls(("get_incident_detail", {"incident_ref": number}))
        if last["role"] == "tool":
            return oa.text("Here it is.")
        return oa.tool_calls(("query_incidents", {"time_window": "last_7d"}))

    fake_openai.brain = brain
    orchestrator = make(fake_openai, demo_client)
    conversation = Conversation()
    first = await orchestrator.answer(conversation, "incidents this week")
    second_row = first.runs[0].artifact.records[1]
    assert conversation.references.ref_for("incident", str(second_row.number)) == 2
    follow_up = await orchestrator.answer(conversation, "tell me more about [2]")
    detail = follow_up.runs[0].artifact.records[0]
    assert isinstance(detail, IncidentDetail) and detail.incident.number == second_row.number
    assert conversation.references.ref_for("incident", str(second_row.number)) == 2, "[2] stays [2]"
    assert conversation.references.last_incident == str(second_row.number)


async def test_example_data_is_refused_and_real_data_queried(fake_openai: oa.FakeOpenAI,
                                                             demo_client: SentinelClient) -> None:
    def brain(body: dict) -> oa.Step:
        assert body["messages"][-1]["content"] == prompts.EXAMPLE_DATA_INSTRUCTION  # on every round
        if any(m["role"] == "tool" for m in body["messages"]):
            return oa.text("Here are real incidents from the last day instead.")  # forgets the refusal
        return oa.tool_calls(("query_incidents", {"time_window": "last_24h"}))

    fake_openai.brain = brain
    result = await make(fake_openai, demo_client).answer(Conversation(), "Can you show me some example incidents?")
    assert result.text.startswith(prompts.EXAMPLE_DATA_REFUSAL)
    assert result.runs and result.runs[0].ok
    assert prompts.EXAMPLE_DATA_REFUSAL in prompts.SYSTEM_PROMPT


async def test_entra_id_token_reaches_azure_openai(fake_openai: oa.FakeOpenAI, demo_client: SentinelClient) -> None:
    from tests.support.loganalytics_fake import TOKEN, FakeCredential

    credential = FakeCredential()
    client = create_client(azure_endpoint=fake_openai.endpoint, azure_deployment="gpt-4o-soc",
                           api_version="2024-10-21", credential=credential)
    orchestrator = Orchestrator(ChatModel(client, "gpt-4o-soc"), ToolBox(demo_client), Memory(counter()))
    fake_openai.script(oa.text("hi"))
    await orchestrator.answer(Conversation(), "hello")
    request = fake_openai.chat_requests[0]
    assert request.headers["authorization"] == f"Bearer {TOKEN}" and "api-key" not in request.headers
    assert credential.scopes == [("https://cognitiveservices.azure.com/.default",)]


async def test_every_tool_shows_its_own_status_text_write_tools_too(fake_openai: oa.FakeOpenAI,
                                                                    demo_client: SentinelClient) -> None:
    """Status texts come from the tool registry: a write tool's is shown, not a generic "Working..."."""
    listed = await demo_client.query_incidents(time_window="last_30d")
    assert isinstance(listed, QueryResult) and listed.records
    number = listed.records[0].number
    fake_openai.script(
        oa.tool_calls(("query_alerts", {"time_window": "last_1h"}), ("assign_incident",
                                                                      {"incident_ref": str(number), "assignee": "me"})),
        oa.text("Check the confirmation card."),
    )
    analyst = "00000000-0000-0000-0000-00000000a11c"
    desk = ConfirmationDesk(demo_client, DemoIncidentWriter.for_client(demo_client),
                            WritePolicy(True, frozenset({analyst})))
    orchestrator = make(fake_openai, demo_client)
    orchestrator = Orchestrator(orchestrator.model, orchestrator.tools, orchestrator.memory, desk=desk,
                                demo=True)
    shown: list[str] = []

    async def progress(status: str) -> None:
        shown.append(status)

    result = await orchestrator.answer(Conversation(), f"assign incident {number} to me", progress,
                                       actor=Actor(Owner(object_id=analyst, name="Alice")))
    assert shown == ["Querying alerts...", "Preparing the assignment..."]
    assert len(result.proposals) == 1 and result.proposals[0].proposed


async def test_the_minute_budget_is_charged_the_first_call_less_the_results_the_history_carries(
        fake_openai: oa.FakeOpenAI, demo_client: SentinelClient) -> None:
    # Issue 28: what queries returned (attackers write titles) must not spend the analyst's minute budget: not in
    # the rounds a title forces, and not carried along in the history of every later question either.
    fake_openai.brain = lambda body: (oa.tool_calls(("query_incidents", {"time_window": "last_30d", "limit": 50}))
                                      if body.get("tools") and body["messages"][-1]["role"] == "user"
                                      else oa.text("ok"))
    orchestrator = make(fake_openai, demo_client, policy=MemoryPolicy(history_tokens=10**6))
    conversation = Conversation()
    first = await orchestrator.answer(conversation, "list the incidents of the month")
    assert first.rounds == 2 and 0 < first.charged_tokens < first.tokens // 2, "the first call only"
    carried = orchestrator.memory.result_tokens(conversation)
    assert carried > 2_000, "the month's incidents stay in the history"
    second = await orchestrator.answer(conversation, "and the ones of the month again?")
    assert second.rounds == 2
    assert second.charged_tokens < first.charged_tokens + 500, "the carried results are not charged again"


@pytest.mark.parametrize(("bound", "rounds"), [(0, 3), (6_000, 2)])
async def test_a_turns_own_token_bound_ends_its_tool_rounds(fake_openai: oa.FakeOpenAI, demo_client: SentinelClient,
                                                            bound: int, rounds: int) -> None:
    # A model that keeps querying (as a hostile title would have it): max_rounds (3) ends it, or before that the
    # turn's own bound: no round that would take its calls past it (each call costs at least the last one).
    fake_openai.brain = lambda body: (oa.tool_calls(("query_incidents", {"time_window": "last_30d", "limit": 50}))
                                      if body.get("tools") else oa.text("What I found."))
    orchestrator = make(fake_openai, demo_client, max_rounds=3)
    orchestrator.max_turn_tokens = bound
    result = await orchestrator.answer(Conversation(), "list the incidents of the month")
    assert result.hit_round_limit and result.rounds == rounds + 1, "the tool rounds, then one answer without tools"
    assert [bool(r.tools) for r in fake_openai.chat_requests] == [True] * rounds + [False]
