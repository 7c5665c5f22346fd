"""The registry: every tool the bot has, read and write, found by name.

The orchestrator offers ``offered(writes=...)`` to the model, shows ``status_text`` while a call runs,
and renders results with the tool's own ``text`` (for the model), ``card`` (for Teams) and ``terminal`` (for the
terminal chat); a Teams answer suggests the tools' ``follow_ups``. A read query is a
module in ``bot.sentinel.queries`` and its tool a module in ``bot.tools.queries`` (listed in ``read_tools``); a
write action, a declaration in ``write_tools`` (plus its change kind in ``bot.sentinel.changes``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from bot import cards
from bot.cards import plaintext
from bot.cards.common import Element
from bot.sentinel.models import QueryError, QueryResult
from bot.tools.compact import RefFor, error_text
from bot.tools.queries import analyst_kql
from bot.tools.read_tools import READ_TOOLS
from bot.tools.tool import Tool
from bot.tools.write_tools import WRITE_TOOLS

DEFAULT_STATUS = "Working..."


class Registry:
    def __init__(self, tools: Iterable[Tool]) -> None:
        self.tools = tuple(tools)
        self._by_name = {tool.name: tool for tool in self.tools}
        if len(self._by_name) != len(self.tools):
            raise ValueError("two tools share a name")

    def add(self, tool: Tool) -> None:
        """Add a tool at run time (a test's own query); its name must be new."""
        if tool.name in self._by_name:
            raise ValueError(f"a tool named {tool.name!r} exists")
        self.tools += (tool,)
        self._by_name[tool.name] = tool

    def remove(self, name: str) -> None:
        self.tools = tuple(t for t in self.tools if t.name != name)
        self._by_name.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._by_name.get(name)

    def offered(self, *, writes: bool, widened: bool = False) -> tuple[Tool, ...]:
        """The tools the model may call: the read tools, and the write tools where changes can be proposed;
        ``widened``: each with its extended parameters (a turn where a hunt is likely)."""
        offered = tuple(t for t in self.tools if (writes or not t.needs_confirmation) and not t.command_only)
        return tuple(t.widened() for t in offered) if widened else offered

    def status_text(self, name: str) -> str:
        tool = self.get(name)
        return tool.status_text if tool else DEFAULT_STATUS

    def text(self, result: QueryResult | QueryError, ref_for: RefFor, arguments: dict[str, object]) -> str:
        """A result as the model reads it: the tool's compact text, or the error and what to do about it."""
        tool = self.get(result.tool if isinstance(result, QueryError) else result.metadata.tool)
        if isinstance(result, QueryError) or tool is None or tool.text is None:
            error = result if isinstance(result, QueryError) else \
                QueryError("no_text", "This result cannot be shown.", retry_possible=False, tool=result.metadata.tool)
            return error_text(error, arguments)
        return tool.text(result, ref_for)

    def card(self, result: QueryResult | QueryError, ref_for: RefFor, now: datetime, *,
             changes: bool = False) -> Element:
        """A result as Teams shows it: the tool's card, the "nothing matched" card, or the error card."""
        name = result.tool if isinstance(result, QueryError) else result.metadata.tool
        tool = self.get(name)
        if tool is None or tool.card is None:
            return cards.error("Unknown result", f"There is no card for results of {name[:60]!r}.", None)
        return cards.result_card(result, tool.card, ref_for, now, changes=changes, empty=tool.empty)


    def terminal(self, result: QueryResult, ref_for: RefFor, now: datetime | None = None) -> str:
        """A result as the terminal prints it: the tool's plain text (its compact text when it has none), or the
        words for no rows."""
        tool = self.get(result.metadata.tool)
        if not result.records:
            return (tool.terminal_empty if tool and tool.terminal_empty else plaintext.nothing_matched)(result)
        if tool is not None and tool.terminal is not None:
            return tool.terminal(result, ref_for, now)
        return self.text(result, ref_for, {})

    def follow_ups(self, results: Sequence[QueryResult], ref_for: RefFor, limit: int = 3) -> list[str]:
        """What an analyst usually asks next about these results (at most ``limit``), each tool's own questions."""
        questions: list[str] = []
        for result in results:
            tool = self.get(result.metadata.tool)
            if result.records and tool is not None and tool.follow_ups is not None:
                questions += tool.follow_ups(result, ref_for)
        return list(dict.fromkeys(questions))[:limit]


TOOLS = Registry(READ_TOOLS + WRITE_TOOLS + (analyst_kql.TOOL,))
