"""The language model: client construction and one typed call.

Clients: AsyncAzureOpenAI with an API key or Entra ID (a bearer token provider from azure-identity,
scope cognitiveservices), or AsyncOpenAI for OpenAI and OpenAI-compatible servers (vLLM, Ollama,
LM Studio). Timeouts and SDK retries are set deliberately: the SDK retries 408/409/429/5xx and honours
Retry-After, twice at most, and no single call waits longer than the timeout.

``ChatModel.complete`` returns a ``Completion`` or raises ``LLMError`` whose message is written for the
analyst (rate limits, content filtering, context length, sign-in problems), never an SDK traceback.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

import openai
from openai import AsyncAzureOpenAI, AsyncOpenAI
from openai.types.chat import ChatCompletion

from bot.tools.toolbox import ToolCall

log = logging.getLogger(__name__)

COGNITIVE_SERVICES_SCOPE = "https://cognitiveservices.azure.com/.default"
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_RETRIES = 2
MAX_COMPLETION_TOKENS = 1500


@dataclass(frozen=True)
class Completion:
    text: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


class LLMError(Exception):
    """A model call that failed. ``kind`` drives handling; ``message`` is for the analyst."""

    def __init__(self, kind: str, message: str, *, detail: str = "") -> None:
        super().__init__(message)
        self.kind = kind  # rate_limited, content_filter, context_length, auth, unavailable, bad_request, bad_response
        self.message = message
        self.detail = detail


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

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Completion:
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
            raise LLMError("bad_response", "The language model returned an empty response. Please ask again.")
        choice = response.choices[0]
        message = choice.message
        if choice.finish_reason == "content_filter":
            raise LLMError("content_filter", _CONTENT_FILTER_MESSAGE)
        calls = [
            ToolCall(id=c.id or f"call_{i}", name=c.function.name or "", arguments=c.function.arguments or "")
            for i, c in enumerate(message.tool_calls or [])
            if getattr(c, "function", None) is not None
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
    code = _error_code(exc)
    detail = f"{type(exc).__name__}: {code or ''} {getattr(exc, 'message', '')}"[:300]
    if isinstance(exc, openai.RateLimitError):
        return LLMError("rate_limited", "The language model is busy right now (rate limited). Please try again in "
                                        "a minute; the commands (type \"help\") keep working meanwhile.", detail=detail)
    if code == "content_filter":
        return LLMError("content_filter", _CONTENT_FILTER_MESSAGE, detail=detail)
    if code == "context_length_exceeded":
        return LLMError("context_length", "This conversation is too long for the language model.", detail=detail)
    if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
        return LLMError("auth", "The bot could not sign in to the language model (401/403). An administrator should "
                                "check the API key, or grant the bot's identity the Cognitive Services OpenAI User "
                                "role on the Azure OpenAI resource.", detail=detail)
    if isinstance(exc, openai.NotFoundError):
        return LLMError("bad_request", "The configured model or deployment was not found. An administrator should "
                                       "check AZURE_OPENAI_DEPLOYMENT or OPENAI_MODEL.", detail=detail)
    if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError, openai.InternalServerError)):
        return LLMError("unavailable", "The language model did not answer in time or is unavailable. Please try again "
                                       "shortly; the commands (type \"help\") keep working meanwhile.", detail=detail)
    return LLMError("bad_request", "The language model rejected the request. Please rephrase, or use the commands "
                                   "(type \"help\").", detail=detail)


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
