"""Running a deterministic command against a conversation, the same way on every surface.

The terminal chat and the Teams bot both resolve "[n]" through the conversation's references, fill in
the analyst's preferred window and severity, run the query without the model, log it as a tool run
(for the Data sources footnote and "show query"), and remember what it returned.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable

from bot.orchestrator.conversation import Conversation
from bot.orchestrator.loop import Orchestrator
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import QueryResult
from bot.tools.commands import Command, with_preferences
from bot.tools.definitions import TOOLS_BY_NAME
from bot.tools.toolbox import ToolCall, ToolRun

Status = Callable[[str], Awaitable[None]]


async def run_command(sentinel: SentinelClient, conversation: Conversation, command: Command,
                      status: Status) -> ToolRun | str:
    """The command's query as a tool run, or a message saying why it cannot run (an unknown [n])."""
    arguments = with_preferences(command, conversation.preferences)
    if command.reference is not None:
        reference = conversation.references.get(command.reference)
        if reference is None:
            return f"There is no [{command.reference}] in this conversation yet."
        if reference.kind != "incident":
            return f"[{reference.n}] is {reference.kind} {reference.label}, not an incident."
        arguments["incident_ref"] = int(reference.key)
    tool = command.tool or ""
    await status(TOOLS_BY_NAME[tool].status_text)
    started = time.perf_counter()
    result = await sentinel.run(tool, arguments)
    run = ToolRun(ToolCall("command", tool, json.dumps(arguments, default=str)), arguments, result,
                  (time.perf_counter() - started) * 1000)
    if isinstance(result, QueryResult):
        conversation.remember(result)
    return run


async def clear(conversation: Conversation, orchestrator: Orchestrator | None) -> str:
    """/clear: with a model, keep a summary of the discussion; preferences are always kept."""
    if orchestrator is not None:
        return await orchestrator.summarise_and_clear(conversation)
    conversation.clear(None)
    return "Conversation cleared. Your preferences are kept."
