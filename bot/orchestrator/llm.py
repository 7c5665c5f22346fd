"""The language model: client construction and one typed call.

Clients: AsyncAzureOpenAI with an API key or Entra ID (a bearer token provider from azure-identity,
scope cognitiveservices), or AsyncOpenAI for OpenAI and OpenAI-compatible servers (vLLM, Ollama,
LM Studio). No single call waits longer than the client's timeout.

Retries are the model's, not the SDK's: ``ChatModel`` retries 408/409/429/5xx and lost connections up to
the client's ``max_retries``, honouring Retry-After (else a short back-off), but a turn spends at most
``WaitBudget`` seconds waiting. A wait longer than what is left (a Retry-After of an hour, a day) is not
slept: the call fails at once and the analyst is told the real wait.

``ChatModel.complete`` takes the conversation as typed items (``items.py``) and the tools on offer, and
returns a ``Completion`` (text, or the model's refusal, tool calls, finish reason) or raises ``LLMError``
whose message is written for the analyst (rate limits, quota, content filtering, context length, sign-in
problems, an unreadable response), never an SDK traceback. This is the only module that knows the Chat
Completions wire format: ``to_wire`` and ``tool_entry`` build it, ``read_completion`` reads the answer
back, defensively, from the plain JSON the endpoint sent.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

import openai
from openai import AsyncAzureOpenAI, AsyncOpenAI
from opentelemetry.trace import SpanKind, Status, StatusCode

from bot import telemetry
from bot.orchestrator.items import Instruction, Message, Notice, ToolCall, ToolResult, UserMessage

log = logging.getLogger(__name__)

COGNITIVE_SERVICES_SCOPE = "https://cognitiveservices.azure.com/.default"
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_RETRIES = 2
MAX_COMPLETION_TOKENS = 1500
# What one turn may spend sleeping before retries of its model calls (all rounds together).
DEFAULT_MAX_WAIT_PER_TURN_S = 20.0
# Back-off without a Retry-After (as the SDK's): 0.5 s, 1 s, 2 s ... at most 8 s, less up to 25 % jitter.
INITIAL_BACKOFF_S = 0.5
MAX_BACKOFF_S = 8.0
_RETRIED_STATUS = frozenset({408, 409, 429})


class ToolSpec(Protocol):
    """What the model is told about a tool (the registry's ``Tool`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    def parameters_schema(self) -> dict[str, Any]: ...


def tool_entry(tool: ToolSpec) -> dict[str, Any]:
    """The Chat Completions tool entry (no strict mode: arguments are validated by the tool layer)."""
    return {"type": "function",
            "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters_schema()}}


def wire_message(message: Message) -> dict[str, Any]:
    """One typed item as a Chat Completions message."""
    if isinstance(message, Instruction):
        return {"role": "system", "content": message.text}
    if isinstance(message, UserMessage):
        return {"role": "user", "content": message.text}
    if isinstance(message, ToolResult):
        return {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
    if isinstance(message, Notice):
        return {"role": "assistant", "content": message.text}
    if not message.tool_calls:
        return {"role": "assistant", "content": message.text}
    return {"role": "assistant", "content": message.text or None,
            "tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                           for c in message.tool_calls]}


def to_wire(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [wire_message(m) for m in messages]


TextSink = Callable[[str], Awaitable[None]]  # a streamed answer's text so far, each time it grows


@dataclass(frozen=True)
class Completion:
    """One model answer. ``refusal``: the model declined, in its own words (``text`` is then usually None)."""

    text: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    refusal: str | None = None

    @property
    def cut(self) -> bool:
        """The answer stopped at the length limit (max tokens), not because the model was done."""
        return self.finish_reason == "length"


class LLMErrorKind(StrEnum):
    RATE_LIMITED = "rate_limited"
    QUOTA = "quota"
    CONTENT_FILTER = "content_filter"
    CONTEXT_LENGTH = "context_length"
    AUTH = "auth"
    UNAVAILABLE = "unavailable"
    BAD_REQUEST = "bad_request"
    BAD_RESPONSE = "bad_response"


class LLMError(Exception):
    """A model call that failed. ``kind`` drives handling; ``message`` is for the analyst.

    ``reason`` (exception class, HTTP status, error code) is safe to log; ``detail`` is the provider's own
    message, which may quote the request, so it is logged only at DEBUG.
    """

    def __init__(self, kind: LLMErrorKind, message: str, *, detail: str = "", reason: str = "",
                 retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.detail = detail
        self.reason = reason or kind
        self.retry_after_s = retry_after_s  # rate limits: the wait the service asked for, when it said


@dataclass
class WaitBudget:
    """The seconds a turn may still spend waiting to retry model calls (shared by all its rounds)."""

    seconds: float = DEFAULT_MAX_WAIT_PER_TURN_S

    def allows(self, wait: float) -> bool:
        return wait <= self.seconds

    def spend(self, wait: float) -> None:
        self.seconds = max(0.0, self.seconds - wait)


def create_client(
    *,
    azure_endpoint: str | None = None,
    azure_deployment: str | None = None,
    api_version: str | None = None,
    azure_api_key: str | None = None,
    credential: Any = None,
    openai_api_key: str | None = None,
    base_url: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_retries: int = DEFAULT_MAX_RETRIES,
) -> AsyncOpenAI:
    """The SDK client for the configured provider (Azure OpenAI when an Azure endpoint is given)."""
    if azure_endpoint:
        if azure_api_key:
            return AsyncAzureOpenAI(azure_endpoint=azure_endpoint, azure_deployment=azure_deployment,
                                    api_version=api_version, api_key=azure_api_key,
                                    timeout=timeout_s, max_retries=max_retries)
        if credential is None:
            raise ValueError("Entra ID sign-in for Azure OpenAI needs a credential")
        from azure.identity.aio import get_bearer_token_provider

        return AsyncAzureOpenAI(azure_endpoint=azure_endpoint, azure_deployment=azure_deployment,
                                api_version=api_version,
                                azure_ad_token_provider=get_bearer_token_provider(credential, COGNITIVE_SERVICES_SCOPE),
                                timeout=timeout_s, max_retries=max_retries)
    # OpenAI-compatible local servers usually accept any key; the SDK insists on one.
    return AsyncOpenAI(api_key=openai_api_key or "not-needed", base_url=base_url, timeout=timeout_s,
                       max_retries=max_retries)


class ChatModel:
    def __init__(self, client: AsyncOpenAI, model: str, *, max_completion_tokens: int = MAX_COMPLETION_TOKENS,
                 max_wait_per_turn_s: float = DEFAULT_MAX_WAIT_PER_TURN_S) -> None:
        self._client = client
        self.model = model
        self._max_tokens = max_completion_tokens
        # The client's max_retries is honoured here; the SDK itself is asked not to retry (see _post).
        self.max_retries = max(0, int(getattr(client, "max_retries", DEFAULT_MAX_RETRIES)))
        self.max_wait_per_turn_s = max_wait_per_turn_s

    def wait_budget(self) -> WaitBudget:
        """A fresh budget for one turn's retry waits."""
        return WaitBudget(self.max_wait_per_turn_s)

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None, *,
                       round_number: int | None = None, budget: WaitBudget | None = None,
                       on_text: TextSink | None = None) -> Completion:
        """One model call (with its retries), traced as an ``llm.call`` span (GenAI semantic-convention names;
        no message content). ``budget``: the turn's retry waits left (a fresh one when not given). ``on_text``:
        the answer is streamed, and ``on_text`` gets its text so far as it grows, as long as no tool call has
        started (text before a tool call is not an answer); the Completion is the same either way."""
        started = time.perf_counter()
        completion: Completion | None = None
        error_type: str | None = None
        with telemetry.tracer().start_as_current_span(
                "llm.call", kind=SpanKind.CLIENT, record_exception=False, set_status_on_exception=False,
                attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": self.model,
                            "gen_ai.request.max_tokens": self._max_tokens,
                            "bot.llm.tools_offered": len(tools or ())}) as span:
            if round_number is not None:
                span.set_attribute("bot.llm.round", round_number)
            try:
                completion = await self._complete(to_wire(messages), [tool_entry(t) for t in tools or ()],
                                                  budget if budget is not None else self.wait_budget(), on_text)
                span.set_attributes({
                    "gen_ai.usage.input_tokens": completion.prompt_tokens,
                    "gen_ai.usage.output_tokens": completion.completion_tokens,
                    "gen_ai.response.finish_reasons": [completion.finish_reason or "unknown"],
                    "bot.llm.tool_calls": len(completion.tool_calls),
                })
                return completion
            except Exception as error:
                error_type = error.kind if isinstance(error, LLMError) else type(error).__name__
                span.set_attribute("error.type", error_type)
                span.set_status(Status(StatusCode.ERROR, error_type))
                raise
            finally:
                seconds = time.perf_counter() - started
                span.set_attribute("bot.llm.latency_ms", round(seconds * 1000, 1))
                self._measure(seconds, completion, error_type)

    def _measure(self, seconds: float, completion: Completion | None, error_type: str | None) -> None:
        """Metrics are kept whether or not the span was sampled."""
        instruments = telemetry.instruments()
        labels = {"gen_ai.operation.name": "chat", "gen_ai.request.model": self.model}
        instruments.llm_duration.record(seconds, labels | ({"error.type": error_type} if error_type else {}))
        if completion is not None:
            instruments.llm_tokens.add(completion.prompt_tokens, labels | {"gen_ai.token.type": "input"})
            instruments.llm_tokens.add(completion.completion_tokens, labels | {"gen_ai.token.type": "output"})

    async def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                        budget: WaitBudget, on_text: TextSink | None) -> Completion:
        request: dict[str, Any] = {"model": self.model, "messages": messages, "max_tokens": self._max_tokens}
        if tools:
            request["tools"] = tools
            request["tool_choice"] = "auto"
        if on_text is None:
            return read_completion(await self._post(request, budget))
        request |= {"stream": True, "stream_options": {"include_usage": True}}
        stream = await self._post(request, budget, stream=True)
        if "text/event-stream" not in stream.response.headers.get("content-type", ""):
            # Not a stream of events (a gateway's error page, a cut-off or unstreamed JSON body): read it as the
            # unstreamed answer it is, so garbage is reported as unreadable, never as an empty answer.
            return read_completion(await _whole_body(stream))
        assembled = _Assembled()
        try:
            async for chunk in stream:
                if assembled.add(chunk) and not assembled.calls:
                    await on_text(assembled.text)
        except LLMError:
            raise
        except openai.APIError as exc:  # an error event inside the stream
            raise _llm_error(exc) from exc
        except Exception as exc:  # the connection broke off mid-stream (httpx's errors), or a garbled event
            raise LLMError(LLMErrorKind.BAD_RESPONSE, _UNREADABLE_MESSAGE,
                           detail=f"stream broke: {type(exc).__name__}: {exc}"[:300], reason="stream_broken") from exc
        return read_completion(assembled.body())

    async def _post(self, request: dict[str, Any], budget: WaitBudget, *, stream: bool = False) -> Any:
        """The response body as plain JSON (or, streaming, the stream of chunks once the response has begun),
        after at most ``max_retries`` retries within the budget."""
        attempt = 0
        while True:
            try:
                # The request is already plain JSON; the SDK's documented low-level post skips its per-field
                # TypedDict transform, which was most of the bot's CPU per model call. Azure OpenAI's
                # deployment routing applies to this path as it does to chat.completions.create. The answer
                # comes back as plain JSON (cast_to=object), read by read_completion whatever its shape.
                if stream:
                    return await self._client.post("/chat/completions", body=request, cast_to=object,
                                                   options={"max_retries": 0}, stream=True,
                                                   stream_cls=openai.AsyncStream[object])
                return await self._client.post("/chat/completions", body=request, cast_to=object,
                                               options={"max_retries": 0})
            except openai.APIError as exc:
                error = _llm_error(exc)
                wait = _retry_wait(exc, error, attempt)
                if wait is None or attempt >= self.max_retries:
                    raise error from exc
                if not budget.allows(wait):
                    log.info("not retrying %s: a wait of %.1f s is over the %.1f s left this turn",
                             error.reason, wait, budget.seconds)
                    raise error from exc
                log.info("retrying the model call in %.2f s after %s", wait, error.reason)
                budget.spend(wait)
                attempt += 1
                await asyncio.sleep(wait)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # said JSON, was not (a cut-off body)
                raise LLMError(LLMErrorKind.BAD_RESPONSE, _UNREADABLE_MESSAGE,
                               detail=f"invalid JSON: {exc}"[:300], reason="invalid_json") from exc

    async def close(self) -> None:
        await self._client.close()


_CONTEXT_LENGTH_MESSAGE = "This conversation is too long for the language model."

_CONTENT_FILTER_MESSAGE = (
    "Azure OpenAI's content filter blocked this request. That can happen when incident data contains "
    "attack payloads or offensive text. Try asking about a narrower set of incidents, or use the commands "
    '(type "help"), which do not go through the language model.'
)


_UNREADABLE_MESSAGE = (
    "The language model's service sent an answer the bot could not read. Please ask again; if it keeps "
    "happening, an administrator should check the model endpoint. The commands (type \"help\") keep working "
    "meanwhile."
)
_EMPTY_MESSAGE = "The language model returned an empty response (no answer in it). Please ask again."


async def _whole_body(stream: Any) -> Any:
    """The body of a response that should have been a stream but is not, as ``read_completion`` reads an
    unstreamed one: JSON when it says JSON (``LLMError`` when that JSON is invalid), else its text."""
    try:
        raw = await stream.response.aread()
    finally:
        await stream.close()
    text = raw.decode("utf-8", errors="replace")
    if "json" not in stream.response.headers.get("content-type", ""):
        return text
    try:
        return json.loads(text)
    except ValueError as exc:
        raise LLMError(LLMErrorKind.BAD_RESPONSE, _UNREADABLE_MESSAGE, detail=f"invalid JSON: {exc}"[:300],
                       reason="invalid_json") from exc


class _Assembled:
    """A streamed completion put back together in the shape of an unstreamed one, so ``read_completion`` reads
    both (and finds the same faults in both)."""

    def __init__(self) -> None:
        self.refusal: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: Any = None
        self.usage: Any = None
        self.error: Any = None
        self.text = ""  # the answer's content so far
        self.answered = False  # a chunk with a choice arrived (a stream of nothing is an empty response)

    def add(self, chunk: Any) -> bool:
        """Take one chunk; True when the answer's text grew."""
        if not isinstance(chunk, Mapping):
            raise _bad_shape(f"a stream chunk is {type(chunk).__name__}")
        self.usage = chunk.get("usage") or self.usage
        self.error = chunk.get("error") or self.error
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            return False
        choice = choices[0]
        self.answered = True
        self.finish_reason = choice.get("finish_reason") or self.finish_reason
        delta = _mapping(choice.get("delta"))
        for raw in delta.get("tool_calls") or []:
            if isinstance(raw, Mapping):
                self._call(raw)
        if isinstance(delta.get("refusal"), str):
            self.refusal.append(delta["refusal"])
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.text += content
            return True
        return False

    def _call(self, raw: Mapping[str, Any]) -> None:
        index = raw["index"] if isinstance(raw.get("index"), int) else len(self.calls)
        call = self.calls.setdefault(index, {"id": None, "type": "function", "name": "", "arguments": ""})
        call["id"] = raw.get("id") or call["id"]
        function = _mapping(raw.get("function"))
        for key in ("name", "arguments"):
            if isinstance(function.get(key), str):
                call[key] += function[key]

    def body(self) -> dict[str, Any]:
        if self.error is not None and not self.text and not self.calls:
            return {"error": self.error}
        if not self.answered:
            return {}
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None,
                                   "refusal": "".join(self.refusal) or None}
        if self.calls:
            message["tool_calls"] = [{"id": c["id"], "type": "function",
                                      "function": {"name": c["name"], "arguments": c["arguments"]}}
                                     for _, c in sorted(self.calls.items())]
        return {"choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
                "usage": self.usage if isinstance(self.usage, Mapping) else {}}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def read_completion(data: Any) -> Completion:
    """A Chat Completions response body (plain JSON of any shape) as a ``Completion``, or ``LLMError``."""
    if isinstance(data, str):  # the SDK hands back non-JSON bodies (an HTML error page) as text
        raise LLMError(LLMErrorKind.BAD_RESPONSE, _UNREADABLE_MESSAGE, detail=f"not JSON: {data[:200]!r}",
                       reason="not_json")
    if not isinstance(data, Mapping):
        raise _bad_shape(f"body is {type(data).__name__}")
    choices = data.get("choices")
    if choices is None or choices == []:
        provider = data.get("error")
        if isinstance(provider, Mapping):  # an error sent with status 200 (some gateways do)
            raise _provider_error(provider)
        # Azure sends no choices when the prompt itself was filtered (prompt_filter_results say so).
        raise LLMError(LLMErrorKind.BAD_RESPONSE, _EMPTY_MESSAGE, reason="empty_choices")
    if not isinstance(choices, list) or not isinstance(choices[0], Mapping):
        raise _bad_shape("choices is not a list of objects")
    choice = choices[0]
    finish_reason = choice.get("finish_reason")
    finish_reason = finish_reason if isinstance(finish_reason, str) else None
    if finish_reason == "content_filter":
        raise LLMError(LLMErrorKind.CONTENT_FILTER, _CONTENT_FILTER_MESSAGE)
    message = choice.get("message")
    if not isinstance(message, Mapping):
        raise _bad_shape("choice has no message object")
    text = _text(message.get("content"))
    refusal = _text(message.get("refusal"))
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise _bad_shape("tool_calls is not a list")
    calls = [call for i, raw in enumerate(raw_calls) if (call := _tool_call(raw, i)) is not None]
    usage = data.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    return Completion(text=text, tool_calls=calls, finish_reason=finish_reason,
                      prompt_tokens=_count(usage.get("prompt_tokens")),
                      completion_tokens=_count(usage.get("completion_tokens")),
                      refusal=(refusal.strip() or None) if refusal else None)


def _text(content: Any) -> str | None:
    """Message content: a string, or a list of text parts (some compatible servers send that)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part.get("text") if isinstance(part, Mapping) else part for part in content]
        return "".join(part for part in parts if isinstance(part, str))
    raise _bad_shape(f"content is {type(content).__name__}")


def _tool_call(raw: Any, index: int) -> ToolCall | None:
    """One function tool call; custom (non-function) or nameless calls are not ours to run."""
    if not isinstance(raw, Mapping):
        raise _bad_shape("a tool call is not an object")
    function = raw.get("function")
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        return None
    arguments = function.get("arguments")
    if not isinstance(arguments, str):  # a server that sends the arguments as an object, not JSON text
        arguments = "" if arguments is None else json.dumps(arguments)
    call_id = raw.get("id")
    return ToolCall(id=call_id if isinstance(call_id, str) and call_id else f"call_{index}",
                    name=function["name"], arguments=arguments)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _bad_shape(what: str) -> LLMError:
    return LLMError(LLMErrorKind.BAD_RESPONSE, _UNREADABLE_MESSAGE, detail=f"unexpected response shape: {what}",
                    reason="bad_shape")


def _provider_error(error: Mapping[str, Any]) -> LLMError:
    """An error object in a 200 response (some gateways send them so)."""
    code = error.get("code")
    detail = f"error in a 200 response: {code or ''} {error.get('message', '')}"[:300]
    if code == "content_filter":
        return LLMError(LLMErrorKind.CONTENT_FILTER, _CONTENT_FILTER_MESSAGE, detail=detail)
    if code == "context_length_exceeded":
        return LLMError(LLMErrorKind.CONTEXT_LENGTH, _CONTEXT_LENGTH_MESSAGE, detail=detail)
    return LLMError(LLMErrorKind.BAD_RESPONSE, _UNREADABLE_MESSAGE, detail=detail, reason="error_body")


def _retry_wait(exc: openai.APIError, error: LLMError, attempt: int) -> float | None:
    """Seconds to wait before retrying this failure, or None when retrying cannot help."""
    if isinstance(exc, openai.APIConnectionError):  # includes timeouts
        return _backoff(attempt)
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or not (status in _RETRIED_STATUS or status >= 500):
        return None
    if error.kind is LLMErrorKind.QUOTA:
        return None
    if error.retry_after_s is not None:
        return max(0.0, error.retry_after_s)
    return _backoff(attempt)


def _backoff(attempt: int) -> float:
    return min(INITIAL_BACKOFF_S * 2.0 ** attempt, MAX_BACKOFF_S) * (1 - 0.25 * random.random())


# OpenAI: "Please try again in 6m0s." / "in 1.5s" / "in 20ms"; Azure: "Please retry after 86400 seconds."
_TRY_AGAIN_IN = re.compile(r"try again in (?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?", re.I)
_RETRY_AFTER_SECONDS = re.compile(r"retry after (\d+(?:\.\d+)?) seconds?", re.I)


def retry_after(headers: Mapping[str, str] | None, message: str = "") -> float | None:
    """The wait a rate-limited response asks for, in seconds: Retry-After-ms, Retry-After (seconds or an
    HTTP date), else the wait written in the error message. None when it does not say."""
    if headers is not None:
        milliseconds = _number(headers.get("retry-after-ms"))
        if milliseconds is not None:
            return milliseconds / 1000
        value = headers.get("retry-after")
        seconds = _number(value)
        if seconds is not None:
            return seconds
        if value:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError, IndexError):
                when = None
            if when is not None:
                if when.tzinfo is None:
                    when = when.replace(tzinfo=UTC)
                return max(0.0, (when - datetime.now(UTC)).total_seconds())
    match = _RETRY_AFTER_SECONDS.search(message)
    if match:
        return float(match.group(1))
    match = _TRY_AGAIN_IN.search(message)
    if match and any(match.groups()):
        hours, minutes, seconds_text, milliseconds_text = match.groups()
        return (int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds_text or 0)
                + int(milliseconds_text or 0) / 1000)
    return None


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def wait_phrase(seconds: float | None) -> str:
    """"in a minute", "in about 40 minutes", "in about 24 hours", "in about 3 days"."""
    if seconds is None or seconds <= 60:
        return "in a minute"
    minutes = math.ceil(seconds / 60)
    if minutes < 90:
        return f"in about {minutes} minutes"
    hours = round(seconds / 3600)
    if hours < 48:
        return f"in about {hours} hours"
    return f"in about {round(seconds / 86400)} days"


def _llm_error(exc: openai.APIError) -> LLMError:
    error = _classified(exc)
    error.reason = " ".join(str(part) for part in (type(exc).__name__, getattr(exc, "status_code", None),
                                                     _error_code(exc)) if part)
    return error


def _classified(exc: openai.APIError) -> LLMError:
    code = _error_code(exc)
    detail = f"{type(exc).__name__}: {code or ''} {getattr(exc, 'message', '')}"[:300]
    if code == "insufficient_quota":  # a 429 that waiting does not cure
        return LLMError(LLMErrorKind.QUOTA, "The language model's quota is used up, so it cannot answer until an "
                        "administrator checks the plan and billing of the model account. The commands (type "
                        "\"help\") keep working meanwhile.", detail=detail)
    if isinstance(exc, openai.RateLimitError):
        response = getattr(exc, "response", None)
        wait = retry_after(getattr(response, "headers", None), str(getattr(exc, "message", "")))
        return LLMError(LLMErrorKind.RATE_LIMITED, f"The language model is busy right now (rate limited). Please try "
                        f"again {wait_phrase(wait)}; the commands (type \"help\") keep working meanwhile.",
                        detail=detail, retry_after_s=wait)
    if code == "content_filter":
        return LLMError(LLMErrorKind.CONTENT_FILTER, _CONTENT_FILTER_MESSAGE, detail=detail)
    if code == "context_length_exceeded":
        return LLMError(LLMErrorKind.CONTEXT_LENGTH, _CONTEXT_LENGTH_MESSAGE, detail=detail)
    if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
        return LLMError(LLMErrorKind.AUTH, "The bot could not sign in to the language model (401/403). An "
                        "administrator should check the API key, or grant the bot's identity the Cognitive Services "
                        "OpenAI User role on the Azure OpenAI resource.", detail=detail)
    if isinstance(exc, openai.NotFoundError):
        return LLMError(LLMErrorKind.BAD_REQUEST, "The configured model or deployment was not found. An "
                        "administrator should check AZURE_OPENAI_DEPLOYMENT or OPENAI_MODEL.", detail=detail)
    if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError, openai.InternalServerError)):
        return LLMError(LLMErrorKind.UNAVAILABLE, "The language model did not answer in time or is unavailable. "
                        "Please try again shortly; the commands (type \"help\") keep working meanwhile.",
                        detail=detail)
    return LLMError(LLMErrorKind.BAD_REQUEST, "The language model rejected the request. Please rephrase, or use the "
                    "commands (type \"help\").", detail=detail)


def _error_code(exc: openai.APIError) -> str | None:
    code = getattr(exc, "code", None)
    if code:
        return str(code)
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("code"):
            return str(inner["code"])
    if isinstance(body, str):
        try:
            return _error_code_from_json(json.loads(body))
        except ValueError:
            return None
    return None


def _error_code_from_json(data: Any) -> str | None:
    if isinstance(data, dict):
        inner = data.get("error", data)
        if isinstance(inner, dict) and inner.get("code"):
            return str(inner["code"])
    return None
