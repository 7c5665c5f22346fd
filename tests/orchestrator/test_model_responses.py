"""Real model response shapes, end to end: the real openai client talks to the fake Chat Completions server,
and each test asserts what the analyst sees (text, notices, failure) and that the conversation stays valid
(every tool call answered, the question kept, nothing half-written).

Shapes: a refusal; an answer cut at the length limit; 429s with long, medium and short Retry-After (header,
milliseconds header, HTTP date, or only in the message), a quota 429 and the per-turn wait budget; a context
overflow on a first turn; invalid JSON, a non-JSON page, empty choices and unexpected shapes.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from bot.orchestrator import prompts
from bot.orchestrator.conversation import Conversation
from bot.orchestrator.items import ModelMessage, Notice, ToolResult, UserMessage
from bot.orchestrator.llm import (
    DEFAULT_MAX_WAIT_PER_TURN_S,
    MAX_BACKOFF_S,
    ChatModel,
    LLMErrorKind,
    create_client,
    retry_after,
    to_wire,
    wait_phrase,
)
from bot.orchestrator.loop import Orchestrator, TurnResult
from bot.orchestrator.memory import Memory, TokenCounter
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import QueryResult
from bot.tools.toolbox import ToolBox
from tests.support import openai_fake as oa
from tests.support.openai_fake import tool_call_ids_answered

QUESTION = "what high-severity incidents came in overnight?"
LIST_INCIDENTS = ("query_incidents", {"time_window": "last_7d"})
_COUNTER: list[TokenCounter] = []


def counter() -> TokenCounter:
    if not _COUNTER:
        _COUNTER.append(TokenCounter())
    return _COUNTER[0]


def make(fake: oa.FakeOpenAI, sentinel: SentinelClient, *, azure: bool = False, max_retries: int = 2,
         max_wait_per_turn_s: float = 20.0) -> Orchestrator:
    if azure:
        client = create_client(azure_endpoint=fake.endpoint, azure_deployment="gpt-4o-soc", api_version="2024-10-21",
                               azure_api_key="azure-test-key", max_retries=max_retries)
    else:
        client = create_client(openai_api_key="sk-test", base_url=f"{fake.endpoint}/v1", max_retries=max_retries)
    model = ChatModel(client, "gpt-4o", max_wait_per_turn_s=max_wait_per_turn_s)
    return Orchestrator(model, ToolBox(sentinel), Memory(counter()), demo=sentinel.is_demo)


def assert_valid(conversation: Conversation, question: str = QUESTION) -> None:
    """The stored turn starts with the question and every tool call has its result right after it."""
    wire = to_wire(conversation.history)
    assert wire[0] == {"role": "user", "content": question}
    assert tool_call_ids_answered(wire)
    assert isinstance(conversation.history[-1], (ModelMessage, Notice))


def assert_failed_cleanly(result: TurnResult, kind: LLMErrorKind) -> None:
    assert result.failed and result.failure is kind, (result.failure, result.text)
    assert "Traceback" not in result.text and "Something went wrong" not in result.text
    assert "Error" not in result.text  # no exception class names


# --- refusal --------------------------------------------------------------------------------------------


async def test_refusal_is_shown_as_the_models_refusal(fake_openai: oa.FakeOpenAI, demo_client: SentinelClient) -> None:
    words = "I'm sorry, but I can't help write malware for that host."
    fake_openai.script(oa.refusal(words))
    conversation = Conversation()
    result = await make(fake_openai, demo_client).answer(conversation, QUESTION)
    assert result.text == words and result.refused and not result.failed
    assert prompts.REFUSED_NOTICE in result.notices
    assert "rephrase" not in result.text
    assert_valid(conversation)
    assert conversation.history[-1] == ModelMessage(words)
    # The next turn sends the refusal back as the model's own reply, and the conversation goes on.
    fake_openai.script(oa.text("No incidents need attention."))
    follow_up = await make(fake_openai, demo_client).answer(conversation, "ok, anything else?")
    assert not follow_up.refused and follow_up.text == "No incidents need attention."
    assert {"role": "assistant", "content": words} in fake_openai.last_messages()


async def test_refusal_after_a_tool_round_keeps_tool_calls_answered(fake_openai: oa.FakeOpenAI,
                                                                    demo_client: SentinelClient) -> None:
    fake_openai.script(oa.tool_calls(LIST_INCIDENTS), oa.refusal("I can't help with that."))
    conversation = Conversation()
    result = await make(fake_openai, demo_client).answer(conversation, QUESTION)
    assert result.refused and result.text == "I can't help with that." and len(result.runs) == 1
    assert_valid(conversation)


async def test_content_wins_over_an_empty_refusal_field(fake_openai: oa.FakeOpenAI,
                                                        demo_client: SentinelClient) -> None:
    fake_openai.script(oa.text("Nothing came in overnight."))  # refusal: null, as every normal answer has
    result = await make(fake_openai, demo_client).answer(Conversation(), QUESTION)
    assert not result.refused and prompts.REFUSED_NOTICE not in result.notices


# --- finish_reason "length" -----------------------------------------------------------------------------


async def test_an_answer_cut_at_the_length_limit_says_so(fake_openai: oa.FakeOpenAI,
                                                         demo_client: SentinelClient) -> None:
    fake_openai.script(oa.tool_calls(LIST_INCIDENTS), oa.cut("The most urgent incidents are [1] and"))
    conversation = Conversation()
    result = await make(fake_openai, demo_client).answer(conversation, QUESTION)
    assert result.cut and not result.failed
    assert result.text == "The most urgent incidents are [1] and"
    assert prompts.CUT_NOTICE in result.notices
    assert_valid(conversation)


async def test_a_complete_answer_gets_no_cut_notice(fake_openai: oa.FakeOpenAI, demo_client: SentinelClient) -> None:
    fake_openai.script(oa.text("Nothing came in overnight."))
    result = await make(fake_openai, demo_client).answer(Conversation(), QUESTION)
    assert not result.cut and prompts.CUT_NOTICE not in result.notices


async def test_cut_before_any_text_says_the_model_ran_out_of_room(fake_openai: oa.FakeOpenAI,
                                                                  demo_client: SentinelClient) -> None:
    fake_openai.script(oa.cut(None))
    conversation = Conversation()
    result = await make(fake_openai, demo_client).answer(conversation, QUESTION)
    assert result.cut and result.text == prompts.CUT_BEFORE_ANSWER and "rephrase" not in result.text
    assert_valid(conversation)
    assert conversation.history[-1] == Notice(prompts.CUT_BEFORE_ANSWER), "the bot's words, not the model's"


# --- 429 and the per-turn wait budget --------------------------------------------------------------------


@pytest.mark.parametrize(("step", "expected"), [
    (oa.rate_limited(retry_after=86400), "in about 24 hours"),
    (oa.rate_limited(retry_after=86400, azure=True), "in about 24 hours"),
    (oa.rate_limited(retry_after=90), "in about 2 minutes"),  # the SDK would have slept 90 s, twice
    (oa.rate_limited(retry_after_ms=3 * 3600 * 1000), "in about 3 hours"),
    (oa.rate_limited(retry_after=format_datetime(datetime.now(UTC) + timedelta(hours=5), usegmt=True)),
     "in about 5 hours"),
    (oa.openai_error(429, "Rate limit reached for gpt-4o on requests per day (RPD): Limit 200, Used 200. "
                     "Please try again in 7h12m0s.", "requests", None, "rate_limit_exceeded"), "in about 7 hours"),
    (oa.error(429, {"error": {"code": "429", "message": "Requests to the ChatCompletions_Create Operation have "
                              "exceeded call rate limit. Please retry after 2400 seconds."}}), "in about 40 minutes"),
], ids=["day", "day-azure", "90s", "retry-after-ms", "http-date", "openai-message", "azure-message"])
async def test_a_long_retry_after_fails_fast_with_the_real_wait(fake_openai: oa.FakeOpenAI,
                                                                demo_client: SentinelClient, step: oa.Step,
                                                                expected: str) -> None:
    fake_openai.script(step)
    conversation = Conversation()
    started = time.monotonic()
    result = await make(fake_openai, demo_client, azure="azure" in str(step.body)).answer(conversation, QUESTION)
    elapsed = time.monotonic() - started
    assert_failed_cleanly(result, LLMErrorKind.RATE_LIMITED)
    assert expected in result.text and "busy" in result.text and "help" in result.text, result.text
    assert len(fake_openai.chat_requests) == 1, "a wait longer than the turn's budget is not slept"
    # The SDK alone would sleep 90 s or more; the bot sleeps nothing, not even its turn's budget for waits.
    assert elapsed < DEFAULT_MAX_WAIT_PER_TURN_S, f"the turn blocked for {elapsed:.1f} s"
    assert_valid(conversation)


async def test_a_short_retry_after_is_waited_out_once_and_only_by_the_bot(fake_openai: oa.FakeOpenAI,
                                                                          demo_client: SentinelClient) -> None:
    fake_openai.script(oa.rate_limited(retry_after=0.2), oa.text("Nothing came in overnight."))
    result = await make(fake_openai, demo_client).answer(Conversation(), QUESTION)
    assert not result.failed and result.text == "Nothing came in overnight."
    first, second = fake_openai.chat_requests
    assert second.received_at - first.received_at >= 0.2  # two requests: the SDK retried nothing on top


async def test_persistent_short_rate_limit_is_retried_max_retries_times(fake_openai: oa.FakeOpenAI,
                                                                        demo_client: SentinelClient) -> None:
    fake_openai.script(*[oa.rate_limited(retry_after=0)] * 3, oa.text("never reached"))
    conversation = Conversation()
    result = await make(fake_openai, demo_client, max_retries=2).answer(conversation, QUESTION)
    assert_failed_cleanly(result, LLMErrorKind.RATE_LIMITED)
    assert "in a minute" in result.text
    assert len(fake_openai.chat_requests) == 3, "the bot's 2 retries, not the SDK's on top"
    assert fake_openai.pending == 1
    assert_valid(conversation)


async def test_retry_waits_share_one_budget_per_turn(fake_openai: oa.FakeOpenAI, demo_client: SentinelClient) -> None:
    # Round 1 waits 0.3 s of a 0.5 s budget; round 2's 0.3 s wait no longer fits, so the turn ends at once.
    fake_openai.script(oa.rate_limited(retry_after=0.3), oa.tool_calls(LIST_INCIDENTS),
                       oa.rate_limited(retry_after=0.3))
    conversation = Conversation()
    result = await make(fake_openai, demo_client, max_wait_per_turn_s=0.5).answer(conversation, QUESTION)
    assert_failed_cleanly(result, LLMErrorKind.RATE_LIMITED)
    first, second, _third = fake_openai.chat_requests  # a 4th would mean the second wait was slept and retried
    assert second.received_at - first.received_at >= 0.3
    assert_valid(conversation)
    assert any(isinstance(item, ToolResult) for item in conversation.history), "the tool work done is kept"
    # The next turn has a fresh budget.
    fake_openai.script(oa.rate_limited(retry_after=0.3), oa.text("Back."))
    again = await make(fake_openai, demo_client, max_wait_per_turn_s=0.5).answer(conversation, "and now?")
    assert not again.failed and again.text == "Back."


async def test_quota_exhausted_is_not_retried_and_says_so(fake_openai: oa.FakeOpenAI,
                                                          demo_client: SentinelClient) -> None:
    fake_openai.script(oa.openai_error(429, "You exceeded your current quota, please check your plan and billing "
                                       "details.", "insufficient_quota", None, "insufficient_quota"))
    result = await make(fake_openai, demo_client).answer(Conversation(), QUESTION)
    assert_failed_cleanly(result, LLMErrorKind.QUOTA)
    assert "quota" in result.text and "billing" in result.text and len(fake_openai.chat_requests) == 1


async def test_a_server_error_is_retried_with_a_short_backoff(fake_openai: oa.FakeOpenAI,
                                                              demo_client: SentinelClient) -> None:
    fake_openai.script(oa.openai_error(500, "The server had an error", "server_error", None, None),
                       oa.text("Nothing came in overnight."))
    result = await make(fake_openai, demo_client).answer(Conversation(), QUESTION)
    assert not result.failed and len(fake_openai.chat_requests) == 2
    first, second = fake_openai.chat_requests
    assert second.received_at - first.received_at < MAX_BACKOFF_S, "the bot's backoff, within its own cap"


@pytest.mark.parametrize(("seconds", "phrase"), [
    (None, "in a minute"), (0, "in a minute"), (45, "in a minute"), (61, "in about 2 minutes"),
    (3600, "in about 60 minutes"), (5400, "in about 2 hours"), (86400, "in about 24 hours"),
    (3 * 86400, "in about 3 days"),
])
def test_wait_phrases(seconds: float | None, phrase: str) -> None:
    assert wait_phrase(seconds) == phrase


@pytest.mark.parametrize(("headers", "message", "seconds"), [
    ({"retry-after": "120"}, "", 120.0),
    ({"retry-after-ms": "1500", "retry-after": "2"}, "", 1.5),
    ({"retry-after": "soon"}, "Please try again in 20ms.", 0.02),
    ({}, "Please try again in 6m0s.", 360.0),
    ({}, "Please retry after 86400 seconds.", 86400.0),
    ({}, "Rate limit reached.", None),
    ({"retry-after": "-5"}, "", None),
])
def test_retry_after_is_read_from_headers_then_the_message(headers: dict[str, str], message: str,
                                                           seconds: float | None) -> None:
    assert retry_after(headers, message) == pytest.approx(seconds) if seconds is not None else \
        retry_after(headers, message) is None


# --- context overflow on a first turn --------------------------------------------------------------------


async def test_first_turn_overflow_shortens_this_turns_results_and_retries_once(
        fake_openai: oa.FakeOpenAI, demo_client: SentinelClient) -> None:
    fake_openai.script(oa.tool_calls(LIST_INCIDENTS), oa.context_length_exceeded(), oa.text("The worst is [1]."))
    conversation = Conversation()
    result = await make(fake_openai, demo_client).answer(conversation, QUESTION)
    assert not result.failed and result.text == "The worst is [1]."
    assert prompts.RESULTS_SHORTENED_NOTICE in result.notices
    _, overflowing, retried = fake_openai.chat_requests
    [full] = oa.FakeOpenAI.tool_messages(overflowing)
    [short] = oa.FakeOpenAI.tool_messages(retried)
    assert len(short["content"]) < len(full["content"]) and "shortened" in short["content"]
    assert short["tool_call_id"] == full["tool_call_id"]
    assert len(retried.messages) == len(overflowing.messages), "nothing dropped: only the results shortened"
    # The analyst's table is the full result; the stored turn is what the model read.
    [run] = result.runs
    assert isinstance(run.artifact, QueryResult) and len(run.artifact.records) > 6
    [stored] = [item for item in conversation.history if isinstance(item, ToolResult)]
    assert stored.compacted and stored.content == short["content"]
    assert_valid(conversation)


async def test_first_turn_overflow_twice_advises_a_narrower_question(fake_openai: oa.FakeOpenAI,
                                                                     demo_client: SentinelClient) -> None:
    fake_openai.script(oa.tool_calls(LIST_INCIDENTS), oa.context_length_exceeded(), oa.context_length_exceeded(),
                       oa.text("never reached"))
    conversation = Conversation()
    result = await make(fake_openai, demo_client).answer(conversation, QUESTION)
    assert_failed_cleanly(result, LLMErrorKind.CONTEXT_LENGTH)
    assert result.text == prompts.NARROWER_QUESTION and "narrower question" in result.text
    assert len(fake_openai.chat_requests) == 3 and fake_openai.pending == 1, "one retry, not more"
    assert_valid(conversation)


async def test_overflow_with_nothing_to_shorten_advises_at_once(fake_openai: oa.FakeOpenAI,
                                                                demo_client: SentinelClient) -> None:
    fake_openai.script(oa.context_length_exceeded(), oa.text("never reached"))
    conversation = Conversation()
    result = await make(fake_openai, demo_client).answer(conversation, QUESTION)
    assert_failed_cleanly(result, LLMErrorKind.CONTEXT_LENGTH)
    assert result.text == prompts.NARROWER_QUESTION and len(fake_openai.chat_requests) == 1
    assert conversation.history[0] == UserMessage(QUESTION)


# --- unreadable and unexpected responses -----------------------------------------------------------------

UNREADABLE = "could not read"


@pytest.mark.parametrize("step", [
    oa.invalid_json(),
    oa.raw("<html><body><h1>502 Bad Gateway</h1></body></html>", content_type="text/html"),
    oa.raw("null"),
    oa.raw("[]"),
    oa.raw('"just a string"'),
    oa.completion_body(choices={"0": {"message": {"role": "assistant", "content": "hi"}}}),
    oa.completion_body(choices=["hi"]),
    oa.completion_body(choices=[{"index": 0, "finish_reason": "stop"}]),
    oa.completion_body(choices=[{"index": 0, "message": {"role": "assistant", "content": 42}}]),
    oa.completion_body(choices=[{"index": 0, "message": {"role": "assistant", "content": None,
                                                         "tool_calls": "query_incidents"}}]),
    oa.completion_body(choices=[{"index": 0, "message": {"role": "assistant", "content": None,
                                                         "tool_calls": ["query_incidents"]}}]),
    oa.completion_body(choices=None, error={"code": "server_error", "message": "upstream failed"}),
], ids=["invalid-json", "html-page", "null", "list", "string", "choices-object", "choice-string", "no-message",
        "content-number", "tool-calls-string", "tool-call-string", "error-in-200"])
async def test_unreadable_responses_give_a_clear_message(fake_openai: oa.FakeOpenAI, demo_client: SentinelClient,
                                                         step: oa.Step) -> None:
    fake_openai.script(step, oa.text("never reached"))
    conversation = Conversation()
    result = await make(fake_openai, demo_client).answer(conversation, QUESTION)
    assert_failed_cleanly(result, LLMErrorKind.BAD_RESPONSE)
    assert UNREADABLE in result.text and "administrator" in result.text, result.text
    assert len(fake_openai.chat_requests) == 1
    assert_valid(conversation)


async def test_empty_choices_say_the_response_was_empty(fake_openai: oa.FakeOpenAI,
                                                        demo_client: SentinelClient) -> None:
    fake_openai.script(oa.completion_body(choices=[]))
    conversation = Conversation()
    result = await make(fake_openai, demo_client).answer(conversation, QUESTION)
    assert_failed_cleanly(result, LLMErrorKind.BAD_RESPONSE)
    assert "empty response" in result.text
    assert_valid(conversation)


async def test_invalid_json_after_a_tool_round_keeps_the_turn_valid(fake_openai: oa.FakeOpenAI,
                                                                    demo_client: SentinelClient) -> None:
    fake_openai.script(oa.tool_calls(LIST_INCIDENTS), oa.invalid_json())
    conversation = Conversation()
    result = await make(fake_openai, demo_client).answer(conversation, QUESTION)
    assert_failed_cleanly(result, LLMErrorKind.BAD_RESPONSE)
    assert len(result.runs) == 1
    assert_valid(conversation)
    fake_openai.script(oa.text("Here it is."))
    again = await make(fake_openai, demo_client).answer(conversation, "try again")
    assert not again.failed and tool_call_ids_answered(fake_openai.last_messages())


async def test_tolerable_variations_are_read(fake_openai: oa.FakeOpenAI, demo_client: SentinelClient) -> None:
    """Shapes compatible servers send: content as text parts, arguments as an object, no id, no usage."""
    fake_openai.script(
        oa.completion_body(choices=[{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "query_incidents",
                                                             "arguments": {"time_window": "last_7d"}}}]}}],
                           usage=None),
        oa.completion_body(choices=[{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "content": [{"type": "text", "text": "Seen "}, {"type": "text", "text": "them."}]}}]),
    )
    conversation = Conversation()
    result = await make(fake_openai, demo_client).answer(conversation, QUESTION)
    assert not result.failed and result.text == "Seen them."
    [run] = result.runs
    assert run.ok and run.arguments.get("time_window") == "last_7d"
    assert_valid(conversation)
