"""The language model: client construction and one typed call.

Clients: AsyncAzureOpenAI with an API key or Entra ID (a bearer token provider from azure-identity,
scope cognitiveservices), or AsyncOpenAI for OpenAI and OpenAI-compatible servers (vLLM, Ollama,
LM Studio). Timeouts and SDK retries are set deliberately: the SDK retries 408/409/429/5xx and honours
Retry-After, twice at most, and no single call waits longer than the timeout.

``ChatModel.complete`` takes the conversation as typed items (``items.py``) and the tools on offer, and
returns a ``Completion`` or raises ``LLMError`` whose message is written for the analyst (rate limits,
content filtering, context length, sign-in problems), never an SDK traceback. This is the only module
that knows the Chat Completions wire format: ``to_wire`` and ``tool_entry`` build it, ``_complete``
reads the answer back into typed tool calls.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

import openai
from openai import AsyncAzureOpenAI, AsyncOpenAI
from openai.types.chat import ChatCompletion
from opentelemetry.trace import SpanKind, Status, StatusCode

from bot import telemetry
from bot.orchestrator.items import Instruction, Message, ModelMessage, Notice, ToolCall, ToolResult, UserMessage

log = logging.getLogger(__name__)

COGNITIVE_SERVICES_SCOPE = "https://cognitiveservices.azure.com/.default"
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_RETRIES = 2
MAX_COMPLETION_TOKENS = 1500


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


@dataclass(frozen=True)
class Completion:
    text: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def message(self) -> ModelMessage:
        return ModelMessage(self.text, tuple(self.tool_calls))


class LLMErrorKind(StrEnum):
    RATE_LIMITED = "rate_limited"
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

    def __init__(self, kind: LLMErrorKind, message: str, *, detail: str = "", reason: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.detail = detail
        self.reason = reason or kind


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
    def __init__(self, client: AsyncOpenAI, model: str, *, max_completion_tokens: int = MAX_COMPLETION_TOKENS) -> None:
        self._client = client
        self.model = model
        self._max_tokens = max_completion_tokens

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None, *,
                       round_number: int | None = None) -> Completion:
        """One model call, traced as an ``llm.call`` span (GenAI semantic-convention names; no message content)."""
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
                completion = await self._complete(to_wire(messages), [tool_entry(t) for t in tools or ()])
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

    async def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        request: dict[str, Any] = {"model": self.model, "messages": messages, "max_tokens": self._max_tokens}
        if tools:
            request["tools"] = tools
            request["tool_choice"] = "auto"
        try:
            # The request is already plain JSON; the SDK's documented low-level post skips its per-field
            # TypedDict transform, which was most of the bot's CPU per model call. Azure OpenAI's
            # deployment routing applies to this path as it does to chat.completions.create.
            response = await self._client.post("/chat/completions", body=request, cast_to=ChatCompletion)
        except openai.APIError as exc:
            raise _llm_error(exc) from exc
        if not getattr(response, "choices", None):
            raise LLMError(LLMErrorKind.BAD_RESPONSE,
                           "The language model returned an empty response. Please ask again.")
        choice = response.choices[0]
        message = choice.message
        if choice.finish_reason == "content_filter":
            raise LLMError(LLMErrorKind.CONTENT_FILTER, _CONTENT_FILTER_MESSAGE)
        calls = [
            ToolCall(id=c.id or f"call_{i}", name=function.name or "", arguments=function.arguments or "")
            for i, c in enumerate(message.tool_calls or [])
            if (function := getattr(c, "function", None)) is not None  # custom (non-function) tool calls are not ours
        ]
        usage = getattr(response, "usage", None)
        return Completion(
            text=message.content,
            tool_calls=calls,
            finish_reason=choice.finish_reason,
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        )

    async def close(self) -> None:
        await self._client.close()


_CONTENT_FILTER_MESSAGE = (
    "Azure OpenAI's content filter blocked this request. That can happen when incident data contains "
    "attack payloads or offensive text. Try asking about a narrower set of incidents, or use the commands "
    '(type "help"), which do not go through the language model.'
)


def _llm_error(exc: openai.APIError) -> LLMError:
    error = _classified(exc)
    error.reason = " ".join(str(part) for part in (type(exc).__name__, getattr(exc, "status_code", None),
                                                     _error_code(exc)) if part)
    return error


def _classified(exc: openai.APIError) -> LLMError:
    code = _error_code(exc)
    detail = f"{type(exc).__name__}: {code or ''} {getattr(exc, 'message', '')}"[:300]
    if isinstance(exc, openai.RateLimitError):
        return LLMError(LLMErrorKind.RATE_LIMITED, "The language model is busy right now (rate limited). Please try "
                        "again in a minute; the commands (type \"help\") keep working meanwhile.", detail=detail)
    if code == "content_filter":
        return LLMError(LLMErrorKind.CONTENT_FILTER, _CONTENT_FILTER_MESSAGE, detail=detail)
    if code == "context_length_exceeded":
        return LLMError(LLMErrorKind.CONTEXT_LENGTH, "This conversation is too long for the language model.",
                        detail=detail)
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
