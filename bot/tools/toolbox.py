"""Running tool calls: defensive, never raising, one silent retry.

The model's arguments arrive as a JSON string that may be malformed, name a tool that does not exist,
or carry wrong values. Each of those becomes a clear tool error the model can correct, never an
exception. A retryable failure (timeout, server error) is retried once, quietly; if it fails again the
model gets an error it should explain to the analyst. Throttling is not retried here: the data layer has
already waited and tried again within Log Analytics' limits (``sentinel/scheduler.py``); more would add load.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from bot.sentinel.client import SentinelClient
from bot.sentinel.models import QueryError, QueryResult
from bot.sentinel.params import InvalidParameter
from bot.tools import asking
from bot.tools.registry import TOOLS, Registry
from bot.tools.tool import Tool

log = logging.getLogger(__name__)
MAX_ARGUMENT_CHARS = 4000


@dataclass(frozen=True)
class ToolRun:
    """One executed read: the tool log entry (Data sources, "show query"), and the typed artifact."""

    tool: str
    arguments: dict[str, Any]  # as parsed ({} when unreadable)
    artifact: QueryResult | QueryError
    elapsed_ms: float
    retried: bool = False
    call_id: str = ""  # the model's tool call id; empty for a command or a card button

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
    """The registry's read tools over one workspace."""

    sentinel: SentinelClient
    registry: Registry = field(default=TOOLS)

    async def run(self, name: str, raw_arguments: str, call_id: str = "") -> ToolRun:
        """A read tool call as the model sent it (arguments as JSON text)."""
        started = time.perf_counter()
        tool = self.registry.get(name)
        if tool is not None and tool.command_only:  # an analyst's own KQL runs from their command, never the model's
            tool = None
        arguments, problem = parse_arguments(name, raw_arguments, tool)
        if problem is None and tool is not None and tool.needs_confirmation:
            problem = QueryError("invalid_argument", f"{name} proposes a change; it is not a query.",
                                 retry_possible=False, tool=name)
        if problem is not None:
            return ToolRun(name[:80], arguments, problem, _ms(started), call_id=call_id)
        return await self.query(name, arguments, call_id=call_id, started=started)

    async def query(self, name: str, arguments: dict[str, Any], *, call_id: str = "",
                    started: float | None = None) -> ToolRun:
        """A read tool with parsed arguments (a command's, a card button's, or the model's)."""
        started = time.perf_counter() if started is None else started
        tool = self.registry.get(name)
        try:  # "[2]", "that incident" and "me" mean something only in this conversation: resolved here, first
            arguments = asking.resolve(tuple(p.name for p in tool.parameters) if tool else (), arguments)
        except InvalidParameter as problem:
            error = QueryError("invalid_argument", str(problem), retry_possible=False, tool=name)
            return ToolRun(name, arguments, error, _ms(started), call_id=call_id)
        result = await read(self.sentinel, tool, name, arguments)
        retried = False
        if isinstance(result, QueryError) and result.retry_possible and result.code != "throttled":
            log.info("tool %s failed with %s; retrying once", name, result.code)
            retried = True
            result = await read(self.sentinel, tool, name, arguments)
        return ToolRun(name, arguments, result, _ms(started), retried, call_id)


async def read(sentinel: SentinelClient, tool: Tool | None, name: str,
               arguments: dict[str, Any]) -> QueryResult | QueryError:
    """A read by tool name: the tool's own runner (an investigation), else its query through the client."""
    return await tool.read(sentinel, arguments) if tool is not None else await sentinel.run(name, arguments)


def parse_arguments(name: str, raw: str | None, tool: Tool | None) -> tuple[dict[str, Any], QueryError | None]:
    """The call's arguments as a dict, or the tool error that tells the model what to correct."""
    if tool is None:
        return {}, QueryError("unknown_tool", f"There is no tool named {name[:80]!r}. Available tools: "
                              f"{', '.join(t.name for t in TOOLS.offered(writes=False))}.",
                              retry_possible=False, tool=name[:80])
    if len(raw or "") > MAX_ARGUMENT_CHARS:
        return {}, QueryError("invalid_argument", f"The arguments are too long (over {MAX_ARGUMENT_CHARS} characters).",
                              retry_possible=False, tool=name)
    try:
        parsed = json.loads(raw or "{}")
    except json.JSONDecodeError as exc:  # raw is a str of at most MAX_ARGUMENT_CHARS: no other ValueError
        return {}, QueryError(
            "invalid_argument",
            f"The arguments were not valid JSON ({exc.msg} at position {exc.pos}). Send a JSON object, "
            f"for example {tool.example}.",
            retry_possible=False, tool=name,
        )
    if not isinstance(parsed, dict):
        return {}, QueryError("invalid_argument", f"The arguments must be a JSON object, for example {tool.example}.",
                              retry_possible=False, tool=name)
    # null means "use the default", as models often send it for optional parameters.
    return {k: v for k, v in parsed.items() if v is not None}, None


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
