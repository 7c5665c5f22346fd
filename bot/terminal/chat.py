"""``python -m bot chat``: the terminal chat over the same orchestrator the Teams bot uses.

Commands are answered from the workspace (demo or real) without the language model; free text goes to
the model when one is configured, otherwise the chat says which variables turn it on. Commands and
answers share one conversation, so [n] references work across both. Status lines go to stderr, so
stdout holds only answers.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable
from typing import TextIO

from bot.commands.paging import first_page
from bot.commands.parser import HELP_TEXT
from bot.commands.router import CommandRouter, Route
from bot.config import LLM_HELP
from bot.orchestrator import sources
from bot.orchestrator.conversation import Conversation
from bot.orchestrator.local_time import machine_zone
from bot.orchestrator.loop import Orchestrator, TurnResult
from bot.orchestrator.prompts import DISCLAIMER
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import DEMO_NOTICE, QueryResult
from bot.terminal import render
from bot.tools.toolbox import ToolRun

# The terminal has no signed-in analyst to confirm a change, so it stays read-only.
TERMINAL_READ_ONLY = ("Incidents are changed from Teams, where the analyst who asks confirms the change on a card. "
                      "The terminal chat only reads.")
TERMINAL_NO_WATCHES = ("Watches post new incidents into a Teams conversation (a channel, group chat or 1:1 with the "
                       "bot); the terminal chat has nowhere to post them. Type \"watch high\" in Teams.")

QUIT = ("/quit", "/exit", "quit", "exit")


class TerminalChat:
    def __init__(self, sentinel: SentinelClient, orchestrator: Orchestrator | None = None, *,
                 out: TextIO = sys.stdout, status: TextIO = sys.stderr) -> None:
        self._sentinel = sentinel
        self._orchestrator = orchestrator
        self._commands = CommandRouter(sentinel, orchestrator)
        self._out = out
        self._status = status
        self.conversation = Conversation()
        self._last_runs: list[ToolRun] = []

    def banner(self) -> str:
        source = "the demo workspace (generated data)" if self._sentinel.is_demo else "your Sentinel workspace"
        lines = [f"Sentinel assistant, connected to {source}.",
                 'Ask a question, or type "help" for commands. /sources shows the queries behind the last answer; '
                 "/clear starts over; /quit leaves."]
        if self._orchestrator is None:
            lines.append("Natural-language questions are off: " + LLM_HELP)
        return "\n".join(lines)

    async def answer(self, text: str) -> str:
        """The reply to one line of input."""
        if text.strip().lower() in ("/sources", "sources", "/kql", "show query"):
            return sources.queries_text(self._last_runs)

        async def status(text: str) -> None:
            self._say_status(text)

        routed = await self._commands.route(text, self.conversation, status)
        match routed.route:
            case Route.INVALID | Route.NEEDS | Route.PREFERENCES | Route.UNRESOLVED | Route.NO_REFERENCE:
                return routed.text
            case Route.HELP:
                return HELP_TEXT
            case Route.CLEARED:
                self._last_runs = []
                return routed.text
            case Route.CHANGE:
                return TERMINAL_READ_ONLY
            case Route.WATCH:
                return TERMINAL_NO_WATCHES
            case Route.QUERY:
                assert routed.run is not None
                self._last_runs = [routed.run]
                return render.render(routed.run.artifact, self.conversation.references.ref_for)
        return await self._free_text(text)

    async def _free_text(self, text: str) -> str:
        if self._orchestrator is None:
            return "I can only answer commands right now.\n" + LLM_HELP + '\nType "help" for the commands.'
        self._say_status("Thinking...")

        async def progress(status: str) -> None:
            self._say_status(status)

        turn = await self._orchestrator.answer(self.conversation, text, progress, local=machine_zone())
        self._last_runs = turn.runs
        self._commands.listed(self.conversation, [r.artifact for r in turn.runs if isinstance(r.artifact, QueryResult)])
        return self._format_turn(turn)

    def _format_turn(self, turn: TurnResult) -> str:
        parts = [turn.text]
        shown = [run.artifact for run in turn.runs if isinstance(run.artifact, QueryResult) and run.artifact.records]
        # One Data sources footnote below replaces the per-table source lines.
        # A list shows its first page, as its card does in Teams; "more" goes on from there.
        tables = [render.render(first_page(result), self.conversation.references.ref_for, with_footer=False)
                  for result in shown]
        if tables:
            parts.append("\n\n".join(tables))
        if turn.disclaimer:
            parts.append(DISCLAIMER)
        parts += [f"Note: {notice}" for notice in turn.notices]
        footnote = sources.footnote(turn.runs)
        if footnote:
            parts.append(footnote + "\n  (/sources shows the exact queries)")
        if any(result.metadata.is_demo for result in shown):
            parts.append(DEMO_NOTICE)
        return "\n\n".join(part for part in parts if part)

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

            def deliver() -> None:
                if not future.done():
                    future.set_result(line)

            loop.call_soon_threadsafe(deliver)

        threading.Thread(target=read, name="terminal-input", daemon=True).start()
        return await future
