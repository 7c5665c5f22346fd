"""``python -m bot chat``: the terminal chat.

Commands are answered from the workspace (demo or real) without a language model. Status lines go to
stderr so stdout holds only answers. Free-text questions need a model; until one is configured the
chat says which variables turn them on.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable
from typing import TextIO

from bot.config import LLM_HELP
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import QueryResult
from bot.terminal import render
from bot.tools.commands import HELP_TEXT, CommandError, parse

STATUS_TEXT = {
    "query_incidents": "Querying incidents...",
    "get_incident_detail": "Looking up incident details...",
    "query_alerts": "Querying alerts...",
    "get_alert_trend": "Analyzing alert trends...",
    "get_top_entities": "Finding top targeted entities...",
}
QUIT = ("/quit", "/exit", "quit", "exit")


class TerminalChat:
    def __init__(self, sentinel: SentinelClient, *, out: TextIO = sys.stdout, status: TextIO = sys.stderr) -> None:
        self._sentinel = sentinel
        self._out = out
        self._status = status
        self._last_incidents: list[int] = []  # [n] -> incident number, from the last incident table

    def banner(self) -> str:
        source = "the demo workspace (generated data)" if self._sentinel.is_demo else "your Sentinel workspace"
        return (
            f"Sentinel assistant, connected to {source}.\n"
            'Type "help" for commands, /quit to leave.\n'
            "Natural-language questions are not available: " + LLM_HELP
        )

    async def answer(self, text: str) -> str:
        """The reply to one line of input."""
        try:
            command = parse(text)
        except CommandError as exc:
            return str(exc)
        if command is None:
            return "I can only answer commands right now.\n" + LLM_HELP + '\nType "help" for the commands.'
        if command.name == "help":
            return HELP_TEXT
        if command.name == "clear":
            self._last_incidents = []
            return "Conversation cleared."
        arguments = dict(command.arguments)
        if command.reference is not None:
            if not 1 <= command.reference <= len(self._last_incidents):
                return f"There is no [{command.reference}] in the last incident list. List incidents first."
            arguments["incident_ref"] = self._last_incidents[command.reference - 1]
        self._say_status(STATUS_TEXT[command.tool or ""])
        result = await self._sentinel.run(command.tool or "", **arguments)
        if isinstance(result, QueryResult) and result.metadata.tool == "query_incidents":
            self._last_incidents = [i.number for i in result.records]
        return render.render(result)

    async def run(self, read_line: Callable[[str], str] = input) -> int:
        print(self.banner(), file=self._out)
        lines = _LineReader(read_line)
        while True:
            line = await lines.next("\nyou> ")
            if line is None:  # end of input or Ctrl+C/Ctrl+D
                print(file=self._out)
                return 0
            text = line.strip()
            if not text:
                continue
            if text.lower() in QUIT:
                return 0
            if text.lower() == "/clear":
                text = "clear"
            print(await self.answer(text), file=self._out, flush=True)

    def _say_status(self, text: str) -> None:
        print(text, file=self._status, flush=True)


class _LineReader:
    """Reads input lines on a daemon thread, so a blocked input() never holds up the event loop or exit."""

    def __init__(self, read_line: Callable[[str], str]) -> None:
        self._read_line = read_line

    async def next(self, prompt: str) -> str | None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str | None] = loop.create_future()

        def read() -> None:
            try:
                line: str | None = self._read_line(prompt)
            except (EOFError, KeyboardInterrupt):
                line = None
            loop.call_soon_threadsafe(lambda: future.done() or future.set_result(line))

        threading.Thread(target=read, name="terminal-input", daemon=True).start()
        return await future
