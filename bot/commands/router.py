"""One router for typed text, the same on every surface (the Teams handler and the terminal chat).

``route`` decides what a line asks for: help, clear, prefer, a proposed incident change, a query
command (run here, without the model: "[n]" resolved through the conversation's references, the
analyst's preferred window and severity filled in, the run logged for the Data sources footnote and
"show query", its rows remembered by the orchestrator), an unreadable command, or a question for the model. Text that
cites an "[n]" this conversation does not have is answered at once with the references it does have
(the model is not asked to guess). The surface
renders the ``Routed`` it gets back and handles what only it can (confirmation cards, the model turn).
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from bot import audit
from bot.commands.paging import Listing, arguments_for, listing_of, next_listing
from bot.commands.parser import (
    INVESTIGATE,
    Command,
    CommandError,
    CommandQuestion,
    apply_preferences,
    nearest,
    parse,
    with_preferences,
)
from bot.commands.wording import in_words
from bot.orchestrator.conversation import Conversation
from bot.orchestrator.loop import Orchestrator
from bot.orchestrator.references import References, RefKind
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import QueryError, QueryResult
from bot.sentinel.params import InvalidParameter
from bot.sentinel.queries import make_query
from bot.sentinel.queries.analyst_kql import DEMO_REFUSAL, MAX_QUERY_CHARS
from bot.tools import asking
from bot.tools.asking import Asking, ReferenceLookup
from bot.tools.registry import TOOLS
from bot.tools.toolbox import ToolRun, read

Status = Callable[[str], Awaitable[None]]
# "[2]" cites a reference; "[x]", "[ ]" and "array[1]" do not.
_CITED = re.compile(r"(?<![\w\]])\[(\d{1,6})\]")
WATCH_COMMANDS = ("watch", "watches", "unwatch")
LISTED_REFERENCES = 10  # how many of the conversation's references a "no such [n]" answer lists
NO_LISTING = ('There is no list here to page through yet: ask for one (for example "incidents 7d"), then type "more" '
              "for its next page.")
STALE_BUTTON = ('That Next button belongs to a list I can no longer read (an older version of the bot made it). Ask '
                'for the list again and page from there.')


class Route(StrEnum):
    HELP = "help"
    CLEARED = "clear"  # text: what was kept
    PREFERENCES = "prefer"  # text: the preferences now
    CHANGE = "change"  # command.tool and command.arguments propose an incident change
    QUERY = "query"  # run: the command's query
    UNRESOLVED = "unresolved"  # text: an "[n]" that names nothing here (or not an incident)
    NO_REFERENCE = "no_reference"  # text: the cited [n] that do not exist here, and the ones that do
    INVALID = "invalid"  # text: the command's usage
    NEEDS = "needs"  # text: a value the command's query refused, in the analyst's words, and what to type instead
    WATCH = "watch"  # command: watch, watches or unwatch (the surface keeps watches: it can post later)
    QUESTION = "question"  # for the model


@dataclass(frozen=True)
class Routed:
    route: Route
    text: str = ""
    command: Command | None = None
    run: ToolRun | None = None


class CommandRouter:
    def __init__(self, sentinel: SentinelClient, orchestrator: Orchestrator | None,
                 kql_analysts: frozenset[str] = frozenset()) -> None:
        self.sentinel = sentinel
        self.orchestrator = orchestrator
        self.kql_analysts = frozenset(a.lower() for a in kql_analysts)  # who may run their own KQL (object ids)

    async def route(self, text: str, conversation: Conversation, status: Status, me: str | None = None) -> Routed:
        """What ``text`` asks for; ``me`` is the asking analyst's Entra object id where someone signed in."""
        # For this turn's tool calls, the model's included: "[2]", "that incident" and "me" (bot.tools.asking).
        asking.use(Asking(me, incident_lookup(conversation.references), conversation.references.last_incident))
        try:
            command = parse(text)
        except CommandQuestion as question:  # a choice only the analyst can make: asked, not guessed
            return Routed(Route.NEEDS, str(question))
        except CommandError as error:
            return Routed(Route.INVALID, str(error))
        if not text.strip() or (command is not None and command.name == "help"):
            return Routed(Route.HELP)
        if command is not None and command.name == "clear":
            return Routed(Route.CLEARED, await self.clear(conversation), command)
        if command is not None and command.name == "prefer":
            return Routed(Route.PREFERENCES, apply_preferences(command, conversation.preferences), command)
        if command is not None and command.name == "kql":  # before [n]: "x[0]" is KQL, not a reference
            return await self.analyst_kql(conversation, command, status, me)
        missing = missing_references(text, conversation.references)
        if missing:
            return Routed(Route.NO_REFERENCE, no_reference_text(missing, conversation.references), command)
        if command is None:
            suggestion = nearest(text)
            if suggestion is not None:  # a typo of a command: say so rather than ask the model (or refuse)
                return Routed(Route.INVALID, f'Did you mean "{suggestion}"? Type "help" for the commands.')
            return Routed(Route.QUESTION)
        if command.name == "change":
            return Routed(Route.CHANGE, command=command)
        if command.name in WATCH_COMMANDS:
            return Routed(Route.WATCH, command=command)
        if command.name == "page":
            return await self.page(conversation, Listing.from_dict(conversation.listing),
                                   command.arguments.get("page"), status)
        run = await self.run_query(conversation, command, status)
        if isinstance(run, str):
            return Routed(Route.UNRESOLVED, run, command)
        if isinstance(run.artifact, QueryError) and run.artifact.code == "invalid_argument":
            return Routed(Route.NEEDS, in_words(run.artifact.message, command), command)
        return Routed(Route.QUERY, command=command, run=run)

    async def page(self, conversation: Conversation, listing: Listing | None, number: int | None,
                   status: Status, *, pressed: bool = False) -> Routed:
        """Page ``number`` of ``listing`` (the next one when None; a pressed Next button's own page when
        ``pressed``), or the line saying why there is none."""
        if listing is None:
            return Routed(Route.NEEDS, NO_LISTING if not pressed else STALE_BUTTON)
        wanted = listing if pressed else next_listing(listing, number)
        if isinstance(wanted, str):
            return Routed(Route.NEEDS, wanted)
        command = Command("page", wanted.tool, arguments_for(wanted))
        run = await self.run_query(conversation, command, status, wanted)
        if isinstance(run, str):
            return Routed(Route.NEEDS, run, command)
        if isinstance(run.artifact, QueryError) and run.artifact.code == "invalid_argument":  # a forged listing
            return Routed(Route.NEEDS, STALE_BUTTON if pressed else in_words(run.artifact.message, command), command)
        if isinstance(run.artifact, QueryResult) and not run.artifact.records:
            return Routed(Route.NEEDS, f"That list has {run.artifact.metadata.total} rows now: page "
                                       f"{wanted.offset // wanted.rows + 1} is past its end. Ask for the list again.")
        return Routed(Route.QUERY, command=command, run=run)

    async def run_query(self, conversation: Conversation, command: Command, status: Status,
                        listing: Listing | None = None) -> ToolRun | str:
        """The command's query as a tool run, or a message saying why it cannot run (an unknown [n]). A list shows
        a page: its first, or ``listing``'s."""
        arguments: dict[str, Any] = with_preferences(command, conversation.preferences)
        if command.reference is not None:
            number = incident_lookup(conversation.references)(command.reference)
            if isinstance(number, str):
                return number
            arguments["incident_ref"] = number
        if command.tool == INVESTIGATE:  # "investigate [3]": the entity [3] names
            entity = entity_lookup(conversation.references)(str(arguments.get("entity", "")))
            if isinstance(entity, str):
                return entity
            arguments.update(entity)
        tool = command.tool or ""
        declared = TOOLS.get(tool)
        try:
            arguments = asking.resolve(tuple(p.name for p in declared.parameters) if declared else (), arguments)
        except InvalidParameter as problem:  # "mine" with nobody signed in
            return ToolRun(tool, arguments, QueryError("invalid_argument", str(problem), retry_possible=False,
                                                       tool=tool), 0.0)
        await status(TOOLS.status_text(tool))
        started = time.perf_counter()
        result = await read(self.sentinel, declared, tool, arguments)
        if isinstance(result, QueryResult):
            result = self.shown(conversation, result, listing)
            self.remember(conversation, result)
        return ToolRun(tool, arguments, result, (time.perf_counter() - started) * 1000)

    def shown(self, conversation: Conversation, result: QueryResult, listing: Listing | None = None) -> QueryResult:
        """The page of a list that is shown (``listing``'s, else the first), kept as the conversation's list for
        "more"; any other result as it is."""
        listing = listing or listing_of(result)
        if listing is None:
            return result
        page = result.page(listing.offset, listing.rows)
        conversation.listing = replace(listing, total=page.metadata.total).to_dict()
        return page

    def listed(self, conversation: Conversation, results: list[QueryResult]) -> None:
        """After a model answer: its last list (as its card shows it) is what "more" continues."""
        listings = [listing for listing in map(listing_of, results) if listing is not None]
        if listings:
            conversation.listing = listings[-1].to_dict()

    async def analyst_kql(self, conversation: Conversation, command: Command, status: Status,
                          me: str | None) -> Routed:
        """The analyst's own KQL: only theirs, only where the access policy lets them hunt, never on the demo;
        refused text is audited with the reason, what runs is audited by the client with its full text."""
        text = str(command.arguments.get("query", ""))
        if me is None or me.lower() not in self.kql_analysts:
            audit.record("kql.refused", reason="not_allowed", query_text=text[:MAX_QUERY_CHARS])
            return Routed(Route.INVALID, "Your own KQL is for analysts the bot's access policy lets hunt "
                                         "(ALLOWED_KQL_ANALYSTS); ask whoever runs the bot. You can still ask in "
                                         "plain language.", command)
        if self.sentinel.is_demo:
            return Routed(Route.INVALID, DEMO_REFUSAL, command)
        try:
            make_query(command.tool or "", command.arguments)
        except InvalidParameter as problem:
            audit.record("kql.refused", reason="refused_text", query_text=text[:MAX_QUERY_CHARS])
            return Routed(Route.INVALID, f"Not run: {str(problem).removeprefix('query: ')}", command)
        run = await self.run_query(conversation, command, status)
        assert not isinstance(run, str)  # no [n] to resolve
        return Routed(Route.QUERY, command=command, run=capped(run))

    def remember(self, conversation: Conversation, result: QueryResult) -> None:
        """What a command read enters the conversation as the orchestrator says (``Orchestrator.remember``); without
        a model there is no orchestrator and no fact check, and the conversation keeps its references itself."""
        if self.orchestrator is not None:
            self.orchestrator.remember(conversation, result)
        else:
            conversation.remember(result)

    async def clear(self, conversation: Conversation) -> str:
        """/clear: with a model, keep a summary of the discussion; preferences are always kept."""
        if self.orchestrator is not None:
            return await self.orchestrator.summarise_and_clear(conversation)
        conversation.clear(None)
        return "Conversation cleared. Your preferences are kept."


def capped(run: ToolRun) -> ToolRun:
    """An analyst query the service rejected: its own error, with the position, instead of the bot's apology."""
    result = run.artifact
    if isinstance(result, QueryError) and result.code == "bad_query" and result.detail:
        message = f"Log Analytics could not run your query: {result.detail}"
        return replace(run, artifact=replace(result, message=message))
    return run


def incident_lookup(references: References) -> ReferenceLookup:
    """[n] -> the incident number it names, or the sentence saying why it names none."""

    def lookup(n: int) -> int | str:
        reference = references.get(n)
        if reference is None:
            return f"There is no [{n}] in this conversation yet."
        if reference.kind is not RefKind.INCIDENT:
            return f"[{reference.n}] is {reference.kind} {reference.label}, not an incident."
        return int(reference.key)

    return lookup


# A reference's entity type -> investigate_entity's entity_type (the types the investigation reads).
_INVESTIGATED = {"account": "account", "host": "host", "ip": "ip", "hash": "hash", "filehash": "hash", "url": "url",
                 "domain": "domain", "dns": "domain"}
_WHOLE_REFERENCE = re.compile(r"\[(\d{1,6})\]")


def entity_lookup(references: References) -> Callable[[str], dict[str, str] | str]:
    """An investigation's entity value -> the arguments it stands for: itself, or what an "[n]" names (its value and
    type), or the sentence saying why that [n] names nothing the investigation reads."""

    def lookup(value: str) -> dict[str, str] | str:
        match = _WHOLE_REFERENCE.fullmatch(value.strip())
        if match is None:
            return {}
        reference = references.get(int(match.group(1)))
        if reference is None:
            return f"There is no [{match.group(1)}] in this conversation yet."
        kind, _, entity = reference.key.partition(":")
        if reference.kind is not RefKind.ENTITY or kind not in _INVESTIGATED:
            return (f"[{reference.n}] is {reference.kind} {reference.label}: I can investigate an account, host, IP, "
                    "file hash, URL or domain.")
        return {"entity": entity, "entity_type": _INVESTIGATED[kind]}

    return lookup


def missing_references(text: str, references: References) -> list[int]:
    """The [n] cited in ``text`` that this conversation has no reference for, in the order cited."""
    cited = dict.fromkeys(int(n) for n in _CITED.findall(text))
    return [n for n in cited if references.get(n) is None]


def no_reference_text(missing: list[int], references: References) -> str:
    """"There is no [2] in this conversation", then what [n] there are (the most recent few)."""
    names = [f"[{n}]" for n in missing]
    cited = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    head = f"There is no {cited} in this conversation."
    if not references.items:
        return (f"{head} Nothing here has a reference number yet: list incidents first (for example "
                '"incidents 24h"), then ask about one by its [n].')
    recent = sorted(references.items[-LISTED_REFERENCES:], key=lambda r: r.n)
    listed = ", ".join(f"[{r.n}] {r.kind} {r.label}" for r in recent)
    more = len(references.items) - len(recent)
    return f"{head} References here: {listed}" + (f" (and {more} older)." if more else ".")
