"""Command line: python -m bot chat | kql TOOL [--args JSON] | serve | worker | package --app-id GUID --domain HOST
| demo new-incident --title TEXT [--severity High] [--owner UPN]."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Coroutine
from contextlib import AsyncExitStack
from typing import Any, TypeVar

from bot import package, telemetry
from bot.config import ConfigError, Settings
from bot.investigation.counterparties import TOOL as COUNTERPARTY_TOOL
from bot.investigation.run import TOOL as INVESTIGATE
from bot.sentinel.client import RawTable, SentinelClient, iso_duration
from bot.sentinel.models import QueryError, QueryResult
from bot.sentinel.params import InvalidParameter
from bot.sentinel.queries import QUERY_NAMES

T = TypeVar("T")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bot", description="Sentinel assistant for Microsoft Teams")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve", help="serve the Teams bot endpoint (POST /api/messages, /healthz, /readyz)")
    worker = commands.add_parser("worker", help="take queued turns (TURN_QUEUE=local or azure) without serving HTTP; "
                                                "run several")
    worker.add_argument("--nice", type=int, default=0, choices=range(0, 20), metavar="N",
                        help="lower this process's CPU priority by N (serve starts its workers with 5, so the web "
                             "front's acknowledgements come first)")
    # Given by serve to the workers it starts (bot/turns/supervisor.py): die with it, tell it when turns are taken.
    worker.add_argument("--parent", type=int, default=None, help=argparse.SUPPRESS)
    worker.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    commands.add_parser("chat", help="chat in the terminal (demo workspace unless SENTINEL_WORKSPACE_ID is set)")
    kql_parser = commands.add_parser("kql", help="print the KQL a tool call would run, without running it")
    kql_parser.add_argument("tool", choices=_kql_choices())
    kql_parser.add_argument("--args", default="{}", help='tool arguments as JSON, e.g. \'{"time_window": "last_7d"}\'')
    package.add_arguments(commands.add_parser("package", help="build the Teams app package (zip) to upload to Teams"))
    demo = commands.add_parser("demo", help="change the running demo workspace (its DEMO_INBOX file)")
    demo_commands = demo.add_subparsers(dest="demo_command", required=True)
    new_incident = demo_commands.add_parser("new-incident", help="add a new incident (one alert, status New)")
    new_incident.add_argument("--title", required=True)
    new_incident.add_argument("--severity", default="High", help="High, Medium, Low or Informational (High)")
    new_incident.add_argument("--owner", default=None, help="a demo analyst's UPN or name (unassigned if not given)")
    new_incident.add_argument("--inbox", default=None, help="the inbox file (default: DEMO_INBOX)")
    args = parser.parse_args(argv)

    if args.command == "kql":
        return _print_kql(args.tool, args.args)
    if args.command == "package":
        return package.run(args)
    if args.command == "demo":
        return _new_incident(args)
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    logs = settings.telemetry
    handler = telemetry.file_log_handler(logs.log_file, logs.log_format) if logs.log_file else \
        telemetry.log_handler(logs.log_format)
    logging.basicConfig(level=logs.log_level, handlers=[handler])
    if logs.audit_file:
        telemetry.audit_to_file(logs.audit_file)
    # SDK request logs carry URLs and are noise at INFO; our own log lines say what happened.
    for noisy in ("httpx", "httpx2", "openai", "azure", "msrest", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(settings.telemetry.log_level)))
    if args.command == "chat":
        logging.getLogger().setLevel(max(logging.WARNING, logging.getLevelName(settings.telemetry.log_level)))
        return _run(_chat(settings))
    if args.command in ("serve", "worker"):
        return _serve_or_work(args, settings)
    return 2


def _kql_choices() -> list[str]:
    """Every query, and every read tool (a tool that runs several queries prints them all)."""
    from bot.tools.registry import TOOLS

    return sorted(set(QUERY_NAMES) | {t.name for t in TOOLS.tools if not t.needs_confirmation})


def _serve_or_work(args: argparse.Namespace, settings: Settings) -> int:
    """python -m bot serve | worker; a state or queue file that cannot be used is one message saying what to do."""
    from bot.app import serve, unusable_files, work
    from bot.teams.storage import StateStorageError
    from bot.turns.contract import TurnQueueError
    from bot.turns.supervisor import Supervised

    supervised = None
    if args.command == "worker":
        supervised = Supervised(args.parent, args.ready_fd)
        supervised.die_with_parent()  # first: a web front killed while this worker builds its clients takes it along
        if args.nice and hasattr(os, "nice"):
            os.nice(args.nice)
    problems = unusable_files(settings)
    if problems:
        print("Cannot start:\n" + "\n".join(f"  - {problem}" for problem in problems), file=sys.stderr)
        return 2
    try:
        _run(serve(settings) if args.command == "serve" else work(settings, supervised))
    except (StateStorageError, TurnQueueError) as error:  # the file checked above, or its folder, failed on open
        print(f"Cannot start: {error}", file=sys.stderr)
        return 2
    return 0


def _print_kql(tool: str, raw_arguments: str) -> int:
    """Print every query a call of ``tool`` would run (one for a query; an investigation runs several), run against
    a backend that runs nothing and keeps each query's KQL, so a tool that composes queries needs no code here."""
    try:
        arguments = json.loads(raw_arguments)
        if not isinstance(arguments, dict):
            raise ValueError("the arguments must be a JSON object")
    except ValueError as exc:
        print(f"Invalid arguments for {tool}: {exc}", file=sys.stderr)
        return 2
    recorder = _Recorder()
    result = _run(_call(SentinelClient(recorder), tool, arguments))
    if isinstance(result, QueryError) and not recorder.seen:
        print(f"Invalid arguments for {tool}: {result.message}", file=sys.stderr)
        return 2
    for n, (query, text) in enumerate(recorder.seen):
        if len(recorder.seen) > 1:
            print(f"{chr(10) if n else ''}// query {n + 1} of {len(recorder.seen)}: {query.tool}")
        print(text)
        print(f"// timespan sent with the query{'' if len(recorder.seen) == 1 else f' {n + 1}'}: "
              f"{iso_duration(query.timespan.total_seconds())}", file=sys.stderr)
    if tool == INVESTIGATE:  # its second round depends on the rows the first returns (none here)
        print(f"\n// then, when those rows name counterparties (addresses, domains, URLs, hashes, senders), one more "
              f"query: {COUNTERPARTY_TOOL} with them as its values (kql {COUNTERPARTY_TOOL} --args "
              f"'{{\"values\": [\"203.0.113.5\"]}}' prints it)")
    return 0


async def _call(client: SentinelClient, tool: str, arguments: dict[str, Any]) -> QueryResult | QueryError:
    from bot.tools.registry import TOOLS

    declared = TOOLS.get(tool)
    read = getattr(declared, "read", None)  # a tool that runs its own queries (an investigation)
    return await read(client, arguments) if read is not None else await client.run(tool, arguments)


class _Recorder:
    """A backend that runs nothing: it keeps each query and its KQL, and answers with no rows."""

    source = "log_analytics"

    def __init__(self) -> None:
        self.seen: list[tuple[Any, str]] = []

    async def execute(self, query: Any, kql_text: str) -> RawTable:
        self.seen.append((query, kql_text))
        return RawTable(rows=[])

    async def prepare(self) -> None:
        return None

    async def close(self) -> None:
        return None


def _new_incident(args: argparse.Namespace) -> int:
    """Append an incident to the demo inbox; the bot running with the same DEMO_INBOX adds it at its next query."""
    from pathlib import Path

    from bot.demo import inject

    inbox = args.inbox
    if inbox is None:
        try:
            inbox = Settings.from_env().demo.inbox
        except ConfigError as exc:
            print(exc, file=sys.stderr)
            return 2
    if not inbox:
        print("No demo inbox: set DEMO_INBOX (the same file for the running bot and this command) or pass --inbox.",
              file=sys.stderr)
        return 2
    where = Path(inbox).absolute()
    if not where.is_file():  # a bot on the demo workspace creates its inbox when it starts: none has read this one
        print(f"No demo inbox at {where}: no bot reads it, so the incident would show nowhere. A bot on the demo "
              f"workspace creates its inbox when it starts: start ./run (or ./run chat) first, or give this command "
              f"the DEMO_INBOX the bot runs with (./run and ./run chat use .data/demo-inbox.jsonl).", file=sys.stderr)
        return 1
    try:
        number = inject.append(where, args.title, args.severity, args.owner)
    except InvalidParameter as exc:
        print(f"Invalid incident: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the inbox cannot be written: say which file and why, no traceback
        print(f"Cannot write the demo inbox {where}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(number)  # alone on stdout, for scripts
    print(f"Incident {number} written to the demo inbox {where}: a bot reading it shows the incident at its next "
          f"query, and a watch posts it within WATCH_POLL_SECONDS (10 s under ./run).", file=sys.stderr)
    return 0


async def _chat(settings: Settings) -> int:
    from bot.app import build
    from bot.terminal.chat import TerminalChat

    async with AsyncExitStack() as closes:
        components = await build(settings, closes)
        return await TerminalChat(components.sentinel, components.orchestrator).run()


def _run(coroutine: Coroutine[Any, Any, T]) -> T | int:
    try:
        return asyncio.run(coroutine)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
