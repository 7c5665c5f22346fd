"""The fake OpenAI server, driven by the real `openai` client in both URL shapes (OpenAI and Azure OpenAI)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from tests.support.openai_fake import (
    FakeOpenAI,
    Step,
    azure_content_filter,
    content_filtered_completion,
    context_length_exceeded,
    error,
    rate_limited,
    text,
    tool_calls,
)

API_VERSION = "2024-10-21"
DEPLOYMENT = "gpt-4o-soc"
USER = [{"role": "user", "content": "what high-severity incidents came in overnight?"}]
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "query_incidents",
            "description": "List incidents",
            "parameters": {"type": "object", "properties": {"time_window": {"type": "string"}}},
        },
    }
]


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def openai_client(fake: FakeOpenAI, max_retries: int = 0) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{fake.endpoint}/v1", api_key="sk-test", max_retries=max_retries)


def azure_client(fake: FakeOpenAI, max_retries: int = 0, **auth: Any) -> openai.AsyncAzureOpenAI:
    return openai.AsyncAzureOpenAI(
        azure_endpoint=fake.endpoint,
        azure_deployment=DEPLOYMENT,
        api_version=API_VERSION,
        max_retries=max_retries,
        **(auth or {"api_key": "azure-key"}),
    )


async def ask(client: openai.AsyncOpenAI, **kwargs: Any) -> Any:
    try:
        return await client.chat.completions.create(model="gpt-4o", messages=USER, tools=TOOLS, **kwargs)
    finally:
        await client.close()


async def test_text_answer_over_openai_shape(fake: FakeOpenAI) -> None:
    fake.script(text("No high-severity incidents overnight."))

    completion = await ask(openai_client(fake))

    choice = completion.choices[0]
    assert choice.message.content == "No high-severity incidents overnight."
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    assert completion.object == "chat.completion" and completion.model == "gpt-4o"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens > 0
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens

    [request] = fake.requests
    assert (request.method, request.path, request.query) == ("POST", "/v1/chat/completions", {})
    assert request.shape == "openai" and request.deployment is None
    assert request.headers["Authorization"] == "Bearer sk-test"
    assert "api-key" not in request.headers
    assert request.messages == USER and request.tool_names == ["query_incidents"]
    assert fake.last_messages() == USER
    assert fake.pending == 0


async def test_parallel_tool_calls_then_tool_results(fake: FakeOpenAI) -> None:
    fake.script(
        tool_calls(("query_incidents", {"time_window": "last_24h"}), ("get_top_entities", {"limit": 5})),
        text("Two incidents [1] [2]."),
    )
    client = openai_client(fake)

    first = await client.chat.completions.create(model="gpt-4o", messages=USER, tools=TOOLS)
    message = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls"
    assert message.content is None
    calls = message.tool_calls
    assert calls is not None and len(calls) == 2
    assert [c.function.name for c in calls] == ["query_incidents", "get_top_entities"]
    assert [c.function.arguments for c in calls] == ['{"time_window": "last_24h"}', '{"limit": 5}']
    assert all(c.type == "function" and c.id.startswith("call_") for c in calls)
    assert len({c.id for c in calls}) == 2

    history: list[Any] = [*USER, message.model_dump(exclude_none=True)]
    history += [{"role": "tool", "tool_call_id": c.id, "content": json.dumps({"rows": 2})} for c in calls]
    second = await client.chat.completions.create(model="gpt-4o", messages=history, tools=TOOLS)
    await client.close()

    assert second.choices[0].message.content == "Two incidents [1] [2]."
    assert [m["tool_call_id"] for m in fake.tool_messages(fake.requests[1])] == [c.id for c in calls]
    assert fake.last_messages()[1]["tool_calls"][0]["function"]["name"] == "query_incidents"


async def test_fresh_tool_call_ids_each_answer_and_explicit_ids_kept(fake: FakeOpenAI) -> None:
    step = tool_calls(("query_incidents", {}))
    fake.script(step, step, tool_calls(("query_alerts", {}, "call_fixed")))
    client = openai_client(fake)
    ids = []
    for _ in range(3):
        completion = await client.chat.completions.create(model="gpt-4o", messages=USER)
        ids.append(completion.choices[0].message.tool_calls[0].id)  # type: ignore[index]
    await client.close()
    assert ids[0] != ids[1] and ids[2] == "call_fixed"


async def test_malformed_arguments_arrive_verbatim(fake: FakeOpenAI) -> None:
    broken = '{"time_window": "last_24h", "limit": '
    fake.script(tool_calls(("query_incidents", broken), ("query_alerts", "not json at all")))

    completion = await ask(openai_client(fake))

    calls = completion.choices[0].message.tool_calls
    assert [c.function.arguments for c in calls] == [broken, "not json at all"]


async def test_azure_shape_with_api_key(fake: FakeOpenAI) -> None:
    fake.script(text("hello from azure"))

    completion = await ask(azure_client(fake))

    assert completion.choices[0].message.content == "hello from azure"
    [request] = fake.requests
    assert request.path == f"/openai/deployments/{DEPLOYMENT}/chat/completions"
    assert request.query == {"api-version": API_VERSION}
    assert (request.shape, request.deployment) == ("azure", DEPLOYMENT)
    assert request.headers["api-key"] == "azure-key"
    assert "Authorization" not in request.headers
    assert request.json["model"] == "gpt-4o"  # the body keeps the model; the deployment is in the path


async def test_azure_shape_with_entra_token_provider(fake: FakeOpenAI) -> None:
    fake.script(text("hello"))

    async def token() -> str:
        return "entra-token"

    await ask(azure_client(fake, azure_ad_token_provider=token))

    [request] = fake.requests
    assert request.path == f"/openai/deployments/{DEPLOYMENT}/chat/completions"
    assert request.headers["Authorization"] == "Bearer entra-token"
    assert "api-key" not in request.headers


async def test_rate_limit_with_retry_after_is_retried(fake: FakeOpenAI) -> None:
    fake.script(rate_limited(retry_after=0.2), text("after the wait"))

    completion = await ask(openai_client(fake, max_retries=1))

    assert completion.choices[0].message.content == "after the wait"
    first, second = fake.requests
    assert second.received_at - first.received_at >= 0.19
    assert (first.headers["x-stainless-retry-count"], second.headers["x-stainless-retry-count"]) == ("0", "1")


async def test_rate_limit_without_retries_left_raises(fake: FakeOpenAI) -> None:
    fake.script(rate_limited(retry_after=0.2))

    with pytest.raises(openai.RateLimitError) as raised:
        await ask(openai_client(fake, max_retries=0))

    err = raised.value
    assert err.status_code == 429 and err.code == "rate_limit_exceeded"
    assert err.response.headers["retry-after"] == "0.2"
    assert len(fake.requests) == 1


async def test_azure_rate_limit_body(fake: FakeOpenAI) -> None:
    fake.script(rate_limited(retry_after=6, azure=True))

    with pytest.raises(openai.RateLimitError) as raised:
        await ask(azure_client(fake))

    assert raised.value.code == "429"
    assert "retry after 6 seconds" in raised.value.message
    assert raised.value.response.headers["retry-after"] == "6"


async def test_azure_content_filter_raises_bad_request(fake: FakeOpenAI) -> None:
    fake.script(azure_content_filter())

    with pytest.raises(openai.BadRequestError) as raised:
        await ask(azure_client(fake, max_retries=2))

    err = raised.value
    assert err.status_code == 400
    assert err.code == "content_filter" and err.param == "prompt" and err.type is None
    assert isinstance(err.body, dict)  # the client unwraps {"error": {...}} into .body
    assert err.body["innererror"]["code"] == "ResponsibleAIPolicyViolation"
    assert err.body["innererror"]["content_filter_result"]["jailbreak"] == {"filtered": True, "detected": True}
    assert "content management policy" in err.message
    assert len(fake.requests) == 1  # 400 is not retried


async def test_content_filtered_completion(fake: FakeOpenAI) -> None:
    fake.script(content_filtered_completion())

    completion = await ask(azure_client(fake))

    choice = completion.choices[0]
    assert choice.finish_reason == "content_filter"
    assert choice.message.content == ""
    assert choice.model_extra is not None and choice.model_extra["content_filter_results"]["violence"]["filtered"]


async def test_context_length_exceeded(fake: FakeOpenAI) -> None:
    fake.script(context_length_exceeded())

    with pytest.raises(openai.BadRequestError) as raised:
        await ask(openai_client(fake, max_retries=2))

    err = raised.value
    assert (err.code, err.param, err.type) == ("context_length_exceeded", "messages", "invalid_request_error")
    assert "maximum context length is 128000 tokens" in err.message


async def test_custom_error_and_usage_override(fake: FakeOpenAI) -> None:
    fake.script(
        error(401, {"error": {"code": "401", "message": "Access denied due to invalid subscription key."}}),
        text("ok", usage={"prompt_tokens": 120000}),
    )

    with pytest.raises(openai.AuthenticationError) as raised:
        await ask(azure_client(fake))
    assert raised.value.code == "401"

    completion = await ask(azure_client(fake))
    assert completion.usage.prompt_tokens == 120000
    assert completion.usage.total_tokens == 120000 + completion.usage.completion_tokens


async def test_latency_is_added_before_every_answer(fake: FakeOpenAI) -> None:
    fake.latency_s = 0.15
    fake.script(text("slow"), text("slower").delayed(0.05))
    client = openai_client(fake)

    started = time.monotonic()
    await client.chat.completions.create(model="gpt-4o", messages=USER)
    middle = time.monotonic()
    await client.chat.completions.create(model="gpt-4o", messages=USER)
    ended = time.monotonic()
    await client.close()

    assert middle - started >= 0.15
    assert ended - middle >= 0.2


async def test_brain_answers_when_script_is_empty(fake: FakeOpenAI) -> None:
    seen: list[dict[str, Any]] = []

    def brain(body: dict[str, Any]) -> Step:
        seen.append(body)
        if any(m["role"] == "tool" for m in body["messages"]):
            return text("summarised")
        return tool_calls(("query_incidents", {"time_window": "last_24h"}))

    fake.brain = brain
    fake.script(text("scripted first"))
    client = openai_client(fake)
    first = await client.chat.completions.create(model="gpt-4o", messages=USER)
    second = await client.chat.completions.create(model="gpt-4o", messages=USER)
    await client.close()

    assert first.choices[0].message.content == "scripted first"
    assert second.choices[0].message.tool_calls[0].function.name == "query_incidents"  # type: ignore[index]
    assert len(seen) == 1 and seen[0]["messages"] == USER


async def test_no_answer_fails_loudly_with_500(fake: FakeOpenAI) -> None:
    with pytest.raises(openai.InternalServerError) as raised:
        await ask(openai_client(fake, max_retries=0))

    err = raised.value
    assert err.status_code == 500
    assert err.code == "fake_no_scripted_answer"
    assert "no scripted answer" in err.message
    assert len(fake.requests) == 1


async def test_streamed_answers_read_by_the_real_sdk(fake: FakeOpenAI) -> None:
    """stream=true: the SDK's own stream reader gets the text and the tool calls back, whole, then usage."""
    fake.script(text("No high-severity incidents overnight; the last one was #14440."),
                tool_calls(("query_incidents", {"time_window": "last_24h", "min_severity": "High"})))
    client = openai_client(fake)
    try:
        stream = await client.chat.completions.create(model="gpt-4o", messages=USER, tools=TOOLS, stream=True,
                                                      stream_options={"include_usage": True})
        chunks = [chunk async for chunk in stream]
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == \
            "No high-severity incidents overnight; the last one was #14440."
        assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 3, "in pieces"
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
        stream = await client.chat.completions.create(model="gpt-4o", messages=USER, tools=TOOLS, stream=True)
        calls = [d for c in [chunk async for chunk in stream] if c.choices for d in c.choices[0].delta.tool_calls or []]
        assert calls[0].function.name == "query_incidents" and calls[0].id
        assert json.loads("".join(d.function.arguments or "" for d in calls)) == {"time_window": "last_24h",
                                                                                    "min_severity": "High"}
    finally:
        await client.close()
    assert fake.pending == 0
