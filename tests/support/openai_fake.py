"""A fake Chat Completions server that the real `openai` client talks to over plain HTTP.

It serves both URL shapes the client produces:

- OpenAI and OpenAI-compatible servers: ``POST /v1/chat/completions`` with ``Authorization: Bearer <key>``
  (client: ``AsyncOpenAI(base_url=f"{fake.endpoint}/v1", ...)``).
- Azure OpenAI: ``POST /openai/deployments/{deployment}/chat/completions?api-version=...`` with an ``api-key``
  header for key auth or ``Authorization: Bearer <token>`` for Entra ID
  (client: ``AsyncAzureOpenAI(azure_endpoint=fake.endpoint, azure_deployment=..., api_version=..., ...)``).

Answers come from a script (steps answered in arrival order), then from an optional ``brain`` that maps a
request body to a step. With neither, the fake answers 500 with a body saying so, so a test that forgot to
script an answer fails loudly. Every request is recorded. Error bodies copy the real services' shapes.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from aiohttp import web
from multidict import CIMultiDict

from tests.support.serving import serve

DEFAULT_MODEL = "gpt-4o"

CONTENT_FILTER_MESSAGE = (
    "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. "
    "Please modify your prompt and retry. To learn more about our content filtering policies please read our "
    "documentation: https://go.microsoft.com/fwlink/?linkid=2198766"
)

_SAFE = {"filtered": False, "severity": "safe"}


# ---------------------------------------------------------------------------------------------------------
# Recorded requests


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the fake received it."""

    method: str
    path: str
    query: dict[str, str]
    headers: CIMultiDict[str]  # case-insensitive: headers["api-key"], headers["authorization"]
    json: dict[str, Any]
    received_at: float  # time.monotonic()
    shape: Literal["openai", "azure", "other"]
    deployment: str | None  # the Azure deployment in the path, else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.json.get("messages") or [])

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.json.get("tools") or [])

    @property
    def tool_names(self) -> list[str]:
        return [tool.get("function", {}).get("name", "") for tool in self.tools]


# ---------------------------------------------------------------------------------------------------------
# Steps: what the fake answers


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # sent verbatim: a JSON string, or anything else to test malformed arguments
    id: str | None = None  # None: a fresh "call_..." id on every answer


@dataclass(frozen=True)
class Completion:
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = "stop"
    usage: Mapping[str, int] | None = None  # overrides the estimated counts key by key
    choice_extra: Mapping[str, Any] = field(default_factory=dict)  # e.g. Azure's content_filter_results
    top_extra: Mapping[str, Any] = field(default_factory=dict)  # e.g. Azure's prompt_filter_results
    refusal: str | None = None  # the message's "refusal" (structured-output and safety refusals)


@dataclass(frozen=True)
class Step:
    """One answer: a completion (rendered per request, so ids and usage are fresh), a status + JSON body, or a
    status + raw bytes (``raw``, sent verbatim with ``content_type``: invalid JSON, an HTML page)."""

    status: int = 200
    completion: Completion | None = None
    body: Any = None  # any JSON value (an object, a list, null), sent as application/json
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # on top of FakeOpenAI.latency_s
    raw: bytes | None = None
    content_type: str = "application/json"

    def delayed(self, seconds: float) -> Step:
        return replace(self, delay_s=seconds)


Brain = Callable[[dict[str, Any]], "Step | None"]


def text(content: str, finish_reason: str = "stop", usage: Mapping[str, int] | None = None) -> Step:
    """A plain assistant answer."""
    return Step(completion=Completion(content=content, finish_reason=finish_reason, usage=usage))


def tool_calls(
    *calls: tuple[str, dict[str, Any] | str] | tuple[str, dict[str, Any] | str, str],
    content: str | None = None,
    usage: Mapping[str, int] | None = None,
) -> Step:
    """One assistant message carrying several tool calls: (name, arguments) or (name, arguments, call_id).

    Arguments given as a dict are JSON-encoded; a str is sent verbatim (malformed JSON stays malformed).
    """
    if not calls:
        raise ValueError("tool_calls() needs at least one (name, arguments) pair")
    built: list[ToolCall] = []
    for call in calls:
        name, arguments = call[0], call[1]
        call_id = call[2] if len(call) > 2 else None  # type: ignore[misc]
        encoded = arguments if isinstance(arguments, str) else json.dumps(arguments)
        built.append(ToolCall(name=name, arguments=encoded, id=call_id))
    return Step(
        completion=Completion(content=content, tool_calls=tuple(built), finish_reason="tool_calls", usage=usage)
    )


def refusal(message: str = "I'm sorry, I can't assist with that request.") -> Step:
    """The model declines: content null, ``message.refusal`` set, finish_reason "stop" (as OpenAI sends it)."""
    return Step(completion=Completion(content=None, refusal=message))


def cut(content: str | None) -> Step:
    """An answer stopped at max_tokens: finish_reason "length" (content may be None, e.g. reasoning models)."""
    return Step(completion=Completion(content=content, finish_reason="length"))


def raw(body: bytes | str, status: int = 200, content_type: str = "application/json",
        headers: Mapping[str, str] | None = None) -> Step:
    """Any bytes with any status and content type, verbatim."""
    data = body.encode() if isinstance(body, str) else body
    return Step(status=status, raw=data, content_type=content_type, headers=dict(headers or {}))


def invalid_json() -> Step:
    """A 200 that says application/json but is cut off mid-object (as a proxy or a dropped connection leaves it)."""
    return raw('{"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assis')


def completion_body(*, choices: Any = None, **fields: Any) -> Step:
    """A 200 chat.completion body with the given choices (any shape: [], a dict, malformed entries) and fields."""
    body: dict[str, Any] = {"id": "chatcmpl-shape", "object": "chat.completion", "created": int(time.time()),
                            "model": DEFAULT_MODEL, "choices": [] if choices is None else choices,
                            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}}
    body.update(fields)
    return Step(status=200, body=body)


def error(status: int, body: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> Step:
    """Any status with a verbatim JSON body."""
    return Step(status=status, body=body, headers=dict(headers or {}))


def openai_error(status: int, message: str, type_: str | None, param: str | None, code: str | None) -> Step:
    """An error in OpenAI's shape: {"error": {"message", "type", "param", "code"}}."""
    return error(status, {"error": {"message": message, "type": type_, "param": param, "code": code}})


def rate_limited(retry_after: float | str | None = None, azure: bool = False, *,
                 retry_after_ms: float | None = None) -> Step:
    """429 as OpenAI (default) or Azure OpenAI sends it, with an optional Retry-After header (seconds, or a str
    sent verbatim, e.g. an HTTP date) and an optional retry-after-ms header (Azure sends both)."""
    headers: dict[str, str] = {}
    if retry_after is not None:
        headers["Retry-After"] = retry_after if isinstance(retry_after, str) else f"{retry_after:g}"
    if retry_after_ms is not None:
        headers["retry-after-ms"] = f"{retry_after_ms:g}"
    wait = f"{retry_after:g}" if isinstance(retry_after, (int, float)) else "1"
    if azure:
        body: dict[str, Any] = {
            "error": {
                "code": "429",
                "message": (
                    "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 "
                    "have exceeded token rate limit of your current OpenAI S0 pricing tier. "
                    f"Please retry after {wait} seconds. "
                    "Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase "
                    "the default rate limit."
                ),
            }
        }
    else:
        body = {
            "error": {
                "message": (
                    f"Rate limit reached for {DEFAULT_MODEL} in organization org-fake on tokens per min (TPM): "
                    f"Limit 30000, Used 29500, Requested 1200. Please try again in {wait}s. "
                    "Visit https://platform.openai.com/account/rate-limits to learn more."
                ),
                "type": "tokens",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        }
    return error(429, body, headers)


def azure_content_filter(category: str = "jailbreak") -> Step:
    """Azure's 400 for a prompt its content filter rejected (default: a jailbreak / prompt-injection hit)."""
    result: dict[str, Any] = {
        "hate": dict(_SAFE),
        "jailbreak": {"filtered": False, "detected": False},
        "self_harm": dict(_SAFE),
        "sexual": dict(_SAFE),
        "violence": dict(_SAFE),
    }
    if category == "jailbreak":
        result["jailbreak"] = {"filtered": True, "detected": True}
    else:
        result[category] = {"filtered": True, "severity": "high"}
    return error(
        400,
        {
            "error": {
                "message": CONTENT_FILTER_MESSAGE,
                "type": None,
                "param": "prompt",
                "code": "content_filter",
                "status": 400,
                "innererror": {"code": "ResponsibleAIPolicyViolation", "content_filter_result": result},
            }
        },
    )


def content_filtered_completion(content: str | None = "") -> Step:
    """Azure's 200 whose output was filtered: finish_reason "content_filter", empty content, filter results."""
    choice_results = {
        "hate": dict(_SAFE),
        "self_harm": dict(_SAFE),
        "sexual": dict(_SAFE),
        "violence": {"filtered": True, "severity": "medium"},
    }
    prompt_results = [
        {
            "prompt_index": 0,
            "content_filter_results": {
                "hate": dict(_SAFE),
                "jailbreak": {"filtered": False, "detected": False},
                "self_harm": dict(_SAFE),
                "sexual": dict(_SAFE),
                "violence": dict(_SAFE),
            },
        }
    ]
    return Step(
        completion=Completion(
            content=content,
            finish_reason="content_filter",
            choice_extra={"content_filter_results": choice_results},
            top_extra={"prompt_filter_results": prompt_results},
        )
    )


def context_length_exceeded(limit: int = 128000, requested: int = 131072) -> Step:
    """400 for a prompt over the model's context window, as OpenAI and Azure OpenAI send it."""
    return openai_error(
        400,
        f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
        f"{requested} tokens. Please reduce the length of the messages.",
        "invalid_request_error",
        "messages",
        "context_length_exceeded",
    )


# ---------------------------------------------------------------------------------------------------------
# The server


def _estimate_tokens(value: Any) -> int:
    return len(json.dumps(value)) // 4


def _render_completion(completion: Completion, request: RecordedRequest) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": completion.content, "refusal": completion.refusal}
    if completion.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id or f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in completion.tool_calls
        ]
    prompt_tokens = _estimate_tokens(request.messages) + (_estimate_tokens(request.tools) if request.tools else 0)
    completion_tokens = max(
        1, len(completion.content or "") // 4 + sum(len(c.name) + len(c.arguments) for c in completion.tool_calls) // 4
    )
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, **(completion.usage or {})}
    if "total_tokens" not in (completion.usage or {}):
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:29]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(request.json.get("model") or DEFAULT_MODEL),
        "system_fingerprint": "fp_fake",
        **completion.top_extra,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": completion.finish_reason,
                **completion.choice_extra,
            }
        ],
        "usage": usage,
    }


def stream_chunks(rendered: dict[str, Any], size: int, include_usage: bool) -> list[dict[str, Any]]:
    """A rendered completion as the chunks of its stream (the shape the Chat Completions API streams)."""
    base = ({k: rendered[k] for k in ("id", "created", "model", "system_fingerprint")}
            | {"object": "chat.completion.chunk"})
    choice = rendered["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return base | {"choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    content = message.get("content") or ""
    chunks += [chunk({"content": content[i:i + size]}) for i in range(0, len(content), size)]
    if message.get("refusal"):
        chunks.append(chunk({"refusal": message["refusal"]}))
    for index, call in enumerate(message.get("tool_calls") or []):
        arguments = call["function"]["arguments"]
        chunks.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                             "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        chunks += [chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[i:i + size]}}]})
                   for i in range(0, len(arguments), size)]
    chunks.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        chunks.append(base | {"choices": [], "usage": rendered["usage"]})
    return chunks


class FakeOpenAI:
    """The fake server. Use ``await FakeOpenAI().start()`` / ``await fake.stop()`` or ``async with``."""

    def __init__(self, latency_s: float = 0.0, brain: Brain | None = None) -> None:
        self.requests: list[RecordedRequest] = []
        self.latency_s = latency_s
        self.brain = brain
        self.endpoint = ""
        self._script: deque[Step] = deque()
        self.stream_chunk_chars = 12  # streamed answers (stream=true): content characters per chunk
        self.stream_chunk_delay_s = 0.0
        self._runner: web.AppRunner | None = None

    # lifecycle

    async def start(self, port: int = 0) -> FakeOpenAI:
        """Listen on 127.0.0.1 (a free port unless one is given)."""
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat_completions)
        app.router.add_post("/openai/deployments/{deployment}/chat/completions", self._chat_completions)
        app.router.add_route("*", "/{tail:.*}", self._unknown_path)
        # A short shutdown timeout: a test that fails mid-latency must not hang teardown for a minute.
        self._runner, bound = await serve(app, port=port, shutdown_timeout=0.5, access_log=None)
        self.endpoint = f"http://127.0.0.1:{bound}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeOpenAI:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # scripting

    def script(self, *steps: Step) -> FakeOpenAI:
        """Queue steps; each request takes the next one, in arrival order."""
        self._script.extend(steps)
        return self

    @property
    def pending(self) -> int:
        """Scripted steps not answered yet (assert 0 at the end to catch fewer calls than expected)."""
        return len(self._script)

    # inspection

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.shape != "other"]

    def last_messages(self) -> list[dict[str, Any]]:
        """The messages of the last chat request."""
        chats = self.chat_requests
        if not chats:
            raise AssertionError("the fake OpenAI server received no chat completions request")
        return chats[-1].messages

    @staticmethod
    def tool_messages(request: RecordedRequest) -> list[dict[str, Any]]:
        """The role "tool" messages of one request."""
        return [m for m in request.messages if m.get("role") == "tool"]

    # handlers

    async def _record(self, request: web.Request) -> RecordedRequest:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        deployment = request.match_info.get("deployment")
        if request.path == "/v1/chat/completions":
            shape: Literal["openai", "azure", "other"] = "openai"
        elif deployment is not None:
            shape = "azure"
        else:
            shape = "other"
        recorded = RecordedRequest(
            method=request.method,
            path=request.path,
            query=dict(request.query),
            headers=CIMultiDict(request.headers),
            json=body if isinstance(body, dict) else {"_body": body},
            received_at=time.monotonic(),
            shape=shape,
            deployment=deployment,
        )
        self.requests.append(recorded)
        return recorded

    async def _chat_completions(self, request: web.Request) -> web.Response:
        recorded = await self._record(request)
        step = self._next_step(recorded)
        delay = self.latency_s + step.delay_s
        if delay > 0:
            await asyncio.sleep(delay)
        headers = {"x-request-id": f"req_{uuid.uuid4().hex}", **step.headers}
        if step.raw is not None:
            return web.Response(body=step.raw, status=step.status, headers=headers, content_type=step.content_type)
        if step.completion is not None and recorded.json.get("stream") and step.status == 200:
            return await self._stream(request, _render_completion(step.completion, recorded),
                                      bool((recorded.json.get("stream_options") or {}).get("include_usage")), headers)
        if step.completion is not None:
            payload: Any = _render_completion(step.completion, recorded)
        else:
            payload = dict(step.body) if isinstance(step.body, Mapping) else step.body if step.body is not None else {}
        return web.json_response(payload, status=step.status, headers=headers)

    async def _stream(self, request: web.Request, rendered: dict[str, Any], include_usage: bool,
                      headers: Mapping[str, str]) -> web.StreamResponse:
        """The completion as Chat Completions streams it: server-sent ``chat.completion.chunk`` events (the role,
        then the content and each tool call's arguments in pieces, then the finish reason, then usage when asked
        for), then ``[DONE]``; ``stream_chunk_delay_s`` between events."""
        response = web.StreamResponse(status=200, headers={**headers, "Content-Type": "text/event-stream"})
        await response.prepare(request)
        for chunk in stream_chunks(rendered, self.stream_chunk_chars, include_usage):
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
            if self.stream_chunk_delay_s:
                await asyncio.sleep(self.stream_chunk_delay_s)
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    def _next_step(self, recorded: RecordedRequest) -> Step:
        if recorded.shape == "azure" and "api-version" not in recorded.query:
            return error(
                404, {"error": {"code": "404", "message": "Resource not found (no api-version query parameter)"}}
            )
        if self._script:
            return self._script.popleft()
        if self.brain is not None:
            step = self.brain(recorded.json)
            if step is not None:
                return step
        return openai_error(
            500,
            f"FakeOpenAI has no scripted answer for request #{len(self.requests)} "
            f"({recorded.path}): the script is empty and no brain answered. Script more steps in the test.",
            "fake_no_answer",
            None,
            "fake_no_scripted_answer",
        )

    async def _unknown_path(self, request: web.Request) -> web.Response:
        recorded = await self._record(request)
        return web.json_response(
            {
                "error": {
                    "message": f"FakeOpenAI serves only chat completions; got {recorded.method} {recorded.path}",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "unknown_url",
                }
            },
            status=404,
        )


def tool_call_ids_answered(messages: list[dict[str, Any]]) -> bool:
    """True when every assistant tool_call has its tool message right after it (what the API requires)."""
    pending: set[str] = set()
    for message in messages:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            if pending:
                return False
            pending = {c["id"] for c in message["tool_calls"]}
        elif message.get("role") == "tool":
            pending.discard(message.get("tool_call_id", ""))
        elif pending:
            return False
    return not pending
