"""Running the model's tool calls: defensive, never raising, one silent retry.

The model's arguments arrive as a JSON string that may be malformed, name a tool that does not exist,
or carry wrong values. Each of those becomes a clear tool error the model can correct, never an
exception. A retryable failure (throttling, timeout, server error) is retried once, quietly; if it
fails again the model gets an error it should explain to the analyst.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.sentinel.client import SentinelClient
from bot.sentinel.models import QueryError, QueryResult
from bot.tools.definitions import READ_TOOLS, TOOLS_BY_NAME

log = logging.getLogger(__name__)
MAX_ARGUMENT_CHARS = 4000


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model sent it


@dataclass(frozen=True)
class ToolRun:
    """One executed call: the tool log entry, and the typed artifact the cards are built from."""

    call: ToolCall
    arguments: dict[str, Any]  # as parsed ({} when unreadable)
    artifact: QueryResult | QueryError
    elapsed_ms: float
    retried: bool = False

    @property
    def tool(self) -> str:
        return self.call.name

    @property
    def ok(self) -> bool:
        return isinstance(self.artifact, QueryResult)

    @property
    def rows(self) -> int:
        return self.artifact.metadata.returned if isinstance(self.artifact, QueryResult) else 0

    @property
    def kql(self) -> str:
        return self.artifact.metadata.kql if isinstance(self.artifact, QueryResult) else self.artifact.kql


@dataclass
class ToolBox:
    sentinel: SentinelClient
    definitions: tuple = field(default=READ_TOOLS)

    def schemas(self) -> list[dict[str, Any]]:
        return [tool.schema() for tool in self.definitions]

    def status_text(self, name: str) -> str:
        tool = TOOLS_BY_NAME.get(name)
        return tool.status_text if tool else "Working..."

    async def run(self, call: ToolCall) -> ToolRun:
        started = time.perf_counter()
        arguments, problem = parse_arguments(call)
        if problem is not None:
            return ToolRun(call, arguments, problem, _ms(started))
        result = await self.sentinel.run(call.name, arguments)
        retried = False
        if isinstance(result, QueryError) and result.retry_possible:
            log.info("tool %s failed with %s; retrying once", call.name, result.code)
            retried = True
            result = await self.sentinel.run(call.name, arguments)
        return ToolRun(call, arguments, result, _ms(started), retried)


def parse_arguments(call: ToolCall, tools: Mapping[str, object] = TOOLS_BY_NAME
                    ) -> tuple[dict[str, Any], QueryError | None]:
    """The call's arguments as a dict, or the tool error that tells the model what to correct."""
    if call.name not in tools:
        available = ", ".join(tools)
        return {}, QueryError("unknown_tool", f"There is no tool named {call.name[:80]!r}. Available tools: {available}.",
                              retry_possible=False, tool=call.name[:80])
    if len(call.arguments or "") > MAX_ARGUMENT_CHARS:
        return {}, QueryError("invalid_argument", f"The arguments are too long (over {MAX_ARGUMENT_CHARS} characters).",
                              retry_possible=False, tool=call.name)
    try:
        parsed = json.loads(call.arguments or "{}")
    except ValueError as exc:
        return {}, QueryError(
            "invalid_argument",
            f"The arguments were not valid JSON ({exc.msg} at position {exc.pos}). Send a JSON object, "
            f'for example {_example(call.name)}.',
            retry_possible=False, tool=call.name,
        )
    if not isinstance(parsed, dict):
        return {}, QueryError("invalid_argument", f"The arguments must be a JSON object, for example {_example(call.name)}.",
                              retry_possible=False, tool=call.name)
    # null means "use the default", as models often send it for optional parameters.
    return {k: v for k, v in parsed.items() if v is not None}, None


def _example(name: str) -> str:
    return '{"incident_ref": "42"}' if name == "get_incident_detail" else '{"time_window": "last_24h"}'


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
