"""Answers streamed as the model writes them (stream=true through the real openai client against the fake
server's server-sent events), fact-checked sentence by sentence, and shown through Teams streaming in 1:1."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from bot.orchestrator.conversation import Conversation
from bot.orchestrator.llm import ChatModel, LLMError, LLMErrorKind, create_client
from bot.orchestrator.loop import Orchestrator
from bot.orchestrator.memory import Memory, TokenCounter
from bot.sentinel.client import SentinelClient
from bot.tools.toolbox import ToolBox
from tests.conftest import NOW
from tests.support import connector_fake as teams
from tests.support import openai_fake as oa
from tests.teams.test_teams_bot import Bot, bot, next_id  # noqa: F401 - a fixture used by name


def model(fake: oa.FakeOpenAI) -> ChatModel:
    return ChatModel(create_client(openai_api_key="sk-test", base_url=f"{fake.endpoint}/v1", max_retries=0), "gpt-4o")


async def test_a_streamed_completion_is_the_same_completion(fake_openai: oa.FakeOpenAI) -> None:
    words = "No high-severity incidents overnight. The last one was #14440, two days ago."
    fake_openai.script(oa.text(words), oa.text(words))
    plain = await model(fake_openai).complete([], None)
    seen: list[str] = []

    async def sink(text: str) -> None:
        seen.append(text)

    streamed = await model(fake_openai).complete([], None, on_text=sink)
    assert fake_openai.chat_requests[-1].json["stream"] is True
    assert streamed.text == plain.text == words and streamed.finish_reason == "stop"
    assert streamed.completion_tokens == plain.completion_tokens > 0, "usage comes with the stream"
    assert len(seen) > 3 and seen[-1] == words and all(b.startswith(a) for a, b in itertools.pairwise(seen))


async def test_tool_calls_stream_but_never_reach_the_analyst(fake_openai: oa.FakeOpenAI) -> None:
    fake_openai.script(oa.tool_calls(("query_incidents", {"time_window": "last_24h"}),
                                     ("get_top_entities", {"time_window": "last_7d"})))
    seen: list[str] = []

    async def sink(text: str) -> None:
        seen.append(text)

    completion = await model(fake_openai).complete([], None, on_text=sink)
    assert [c.name for c in completion.tool_calls] == ["query_incidents", "get_top_entities"]
    assert completion.tool_calls[0].arguments == '{"time_window": "last_24h"}' and seen == []


@pytest.mark.parametrize("step, kind", [
    (oa.content_filtered_completion("partial"), LLMErrorKind.CONTENT_FILTER),
    (oa.raw(b"data: {not json}\n\n", content_type="text/event-stream"), LLMErrorKind.BAD_RESPONSE),
    (oa.raw(b"data: [DONE]\n\n", content_type="text/event-stream"), LLMErrorKind.BAD_RESPONSE),
])
async def test_a_bad_stream_is_a_clear_model_error(fake_openai: oa.FakeOpenAI, step: oa.Step,
                                                   kind: LLMErrorKind) -> None:
    fake_openai.script(step)

    async def sink(text: str) -> None:
        return None

    with pytest.raises(LLMError) as raised:
        await model(fake_openai).complete([], None, on_text=sink)
    assert raised.value.kind is kind


async def test_the_live_answer_is_whole_sentences_already_fact_checked(fake_openai: oa.FakeOpenAI,
                                                                        demo_client: SentinelClient) -> None:
    listed = await demo_client.query_incidents(time_window="last_7d", limit=1)
    top = listed.records[0]
    lie = "Low" if top.severity != "Low" else "High"
    fake_openai.script(oa.tool_calls(("query_incidents", {"time_window": "last_7d", "limit": 1})),
                       oa.text(f"#{top.number} is {lie} severity. It came in recently and is worth a look."))
    orchestrator = Orchestrator(model(fake_openai), ToolBox(demo_client), Memory(TokenCounter()), clock=lambda: NOW)
    shown: list[str] = []

    async def sink(text: str) -> None:
        shown.append(text)

    result = await orchestrator.answer(Conversation(), "what is top?", stream=sink)
    assert shown, "the answer streamed"
    assert all(s.endswith((".", ")")) for s in shown), "only finished sentences are shown"
    assert shown[0].startswith(f"#{top.number} is {lie} ⚠(record: {top.severity})"), "marked before it is shown"
    assert shown[-1] in result.text and result.text.startswith("⚠ Fact check")  # the final word has it all


@pytest.mark.slow
async def test_one_to_one_answer_streams_then_ends_with_the_final_message(bot: Bot,  # noqa: F811
                                                                          fake_openai: oa.FakeOpenAI) -> None:
    fake_openai.latency_s = 0.3
    fake_openai.stream_chunk_chars = 10
    fake_openai.stream_chunk_delay_s = 0.1  # an answer written over a few seconds, as a real model writes it
    fake_openai.script(oa.tool_calls(("query_incidents", {"time_window": "last_7d", "min_severity": "High"})),
                       oa.text("Here is the week's high-severity picture. The newest incident is first in the "
                               "table below. Several are still open. Closed ones show their classification. Ask "
                               "for any of them by its number for the detail. The table has the rest."))
    await bot.post(teams.personal("what high-severity incidents came in this week?", activity_id=next_id(),
                                  service_url=bot.connector.url))
    sent = await bot.connector.wait_for(lambda s: any(x.type == "message" for x in s), timeout=30)
    updates = [s for s in sent if s.type == "typing" and s.stream_info]
    streaming = [s for s in updates if s.stream_info["streamType"] == "streaming"]
    assert len(streaming) >= 2, [u.stream_info for u in updates]
    stream_id = updates[0].activity_id
    assert all(s.stream_info["streamId"] == stream_id for s in updates[1:])
    sequence = [s.stream_info["streamSequence"] for s in updates]
    assert sequence == list(range(1, len(updates) + 1)), "strictly increasing from 1"
    texts = [s.text for s in streaming]
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(texts)), "each contains the last"
    informative_after = [s for s in updates[updates.index(streaming[0]):]
                         if s.stream_info["streamType"] == "informative"]
    assert informative_after == [], "no status chatter once the answer streams"
    [final] = [s for s in sent if s.type == "message"]
    assert final.stream_info == {"type": "streaminfo", "streamId": stream_id, "streamType": "final"}
    assert final.text.startswith(texts[-1]) and final.cards, "the final message has the whole answer and cards"
    await asyncio.sleep(0)
