"""The message extension: incident search from the compose box and the command box, and portal links unfurled.

Teams sends ``composeExtension/query`` (the search text, and ``queryOptions`` skip and count for the page) and
``composeExtension/queryLink`` (a pasted link whose domain the manifest lists) as invokes and waits about 5 s for
the answer in the same request, so each answer here runs one query within :data:`ANSWER_BUDGET_S` and says so
when the workspace is slower. The handler checks the access policy first (a refused invoke gets a message result,
audited) and runs these as the asking analyst, so their reads are audited as questions' are.

Search text is user text: its words become typed filters (a number, severities, statuses, "mine") and the rest
one keyword, validated as any filter is and escaped into the query as one literal.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from botbuilder.schema import Attachment
from botbuilder.schema.teams import MessagingExtensionAttachment, MessagingExtensionResponse, MessagingExtensionResult

from bot.cards import incident_detail
from bot.cards.extension import incident_card, incident_preview
from bot.sentinel.client import SentinelClient
from bot.sentinel.models import Incident, IncidentDetail, QueryResult
from bot.sentinel.params import MAX_LIMIT, InvalidParameter, Me, parse_search
from bot.sentinel.queries import incident_detail as detail_query
from bot.sentinel.queries import incidents as incidents_query
from bot.teams.links import Workspace, incident_link

log = logging.getLogger(__name__)
SEARCH = "composeExtension/query"
QUERY_LINK = "composeExtension/queryLink"
EXTENSION_INVOKES = (SEARCH, QUERY_LINK)
CARD_BUTTON = "composeExtension/onCardButtonClicked"  # an Action.Submit on a card the extension inserted
COMMAND_ID = "searchIncidents"  # the manifest's composeExtensions command
ANSWER_BUDGET_S = 4.0  # Teams gives up on an invoke after about 5 s
PAGE_SIZE = 25  # Teams asks for 25 at a time (queryOptions.count); never more per page here
SEARCH_WINDOW = "last_30d"
MAX_SEARCH_TEXT = 200  # the compose box's search text, before its words are read
ADAPTIVE = "application/vnd.microsoft.card.adaptive"
THUMBNAIL = "application/vnd.microsoft.card.thumbnail"
Clock = Callable[[], datetime]

_SEVERITY_WORDS = {"high": "High", "medium": "Medium", "med": "Medium", "low": "Low", "informational": "Informational",
                   "info": "Informational"}
_STATUS_WORDS = {"open": "open", "new": "New", "active": "Active", "closed": "Closed"}
_MINE_WORDS = frozenset({"mine", "my", "me"})
_NUMBER = re.compile(r"#?([0-9]{1,10})", re.ASCII)

HELP_TEXT = ('Search incidents by number ("#14431"), words from the title, severity ("high"), status ("open") '
             'or "mine"; combine them: "mine high phishing".')
TOO_SLOW = "The workspace took too long to answer; try a narrower search (a number, a severity or fewer words)."
NOT_SIGNED_IN = ("Sign in first: send me any question in a chat with me, sign in when I ask, then search again.")
NO_ME = '"mine" needs to know who you are, and Teams did not say: search by number or words instead.'


@dataclass(frozen=True)
class Search:
    """What a search text asks for: one incident by number, or the incident list with these arguments."""

    number: int | None = None
    arguments: dict[str, Any] = field(default_factory=dict)


def read_search(text: str, me: str | None) -> Search:
    """The search ``text`` as typed filters; InvalidParameter says what is wrong with it."""
    words = " ".join(text[:MAX_SEARCH_TEXT * 4].split())[:MAX_SEARCH_TEXT].split(" ")
    if len(words) == 1 and (number := _NUMBER.fullmatch(words[0])):
        return Search(number=int(number.group(1)))
    severities, statuses, rest, owner = [], [], [], None
    for word in filter(None, words):
        key = word.casefold()
        if key in _SEVERITY_WORDS:
            severities.append(_SEVERITY_WORDS[key])
        elif key in _STATUS_WORDS:
            statuses.append(_STATUS_WORDS[key])
        elif key in _MINE_WORDS:
            if me is None:
                raise InvalidParameter("owner", "nobody is asking")
            owner = Me(me)  # shown as "mine"
        else:
            rest.append(word)
    arguments: dict[str, Any] = {"time_window": SEARCH_WINDOW, "sort": "newest"}
    if severities:
        arguments["severity"] = ",".join(dict.fromkeys(severities))
    if len(set(statuses)) == 1:
        arguments["status"] = statuses[0]
    elif statuses:  # "new active": both are open; other mixes read as words would confuse: open or closed only
        arguments["status"] = "open" if "Closed" not in statuses else None
    if owner:
        arguments["owner"] = owner
    if rest:
        arguments["search"] = parse_search(" ".join(rest))  # validated here, so the message is the search's own
    return Search(arguments={k: v for k, v in arguments.items() if v is not None})


def page_of(value: dict[str, Any]) -> tuple[int, int]:
    """(skip, count) from ``queryOptions``, bounded: count 1..PAGE_SIZE, skip 0..MAX_LIMIT."""
    options = value.get("queryOptions")
    options = options if isinstance(options, dict) else {}

    def number(name: str, default: int, low: int, high: int) -> int:
        raw = options.get(name)
        return max(low, min(high, raw)) if isinstance(raw, int) and not isinstance(raw, bool) else default

    return number("skip", 0, 0, MAX_LIMIT), number("count", PAGE_SIZE, 1, PAGE_SIZE)


def search_text(value: dict[str, Any]) -> tuple[str, bool]:
    """The search box's text, and whether this is the first run (the extension opened, nothing typed yet)."""
    text, initial = "", False
    parameters = value.get("parameters")
    for parameter in parameters if isinstance(parameters, list) else []:
        if not isinstance(parameter, dict):
            continue
        if parameter.get("name") == "initialRun":
            initial = True
        elif isinstance(parameter.get("value"), str):
            text = parameter["value"]
    return text, initial


class MessageExtension:
    """Answers the extension's invokes from the workspace; the handler checks access and sets who is asking."""

    def __init__(self, sentinel: SentinelClient, clock: Clock, workspace: Workspace | None) -> None:
        self.sentinel = sentinel
        self.clock = clock
        self.workspace = workspace

    async def search(self, value: dict[str, Any], me: str | None) -> MessagingExtensionResponse:
        text, initial = search_text(value)
        skip, count = page_of(value)
        try:
            search = read_search("" if initial else text, me)
        except InvalidParameter as problem:
            return message(NO_ME if problem.name == "owner" else f"That search cannot run ({problem}). {HELP_TEXT}")
        if search.number is not None:
            found = await self._run(detail_query.SPEC.name, {"incident_ref": search.number})
            if isinstance(found, str):
                return message(found)
            incidents = [d.incident for d in found.records if isinstance(d, IncidentDetail)][: 1 if skip == 0 else 0]
            return self._results(incidents, total=len(incidents))
        if skip >= MAX_LIMIT:
            return self._results([], total=0)
        found = await self._run(incidents_query.SPEC.name, search.arguments | {"limit": min(MAX_LIMIT, skip + count)})
        if isinstance(found, str):
            return message(found)
        incidents = [i for i in found.records if isinstance(i, Incident)][skip: skip + count]
        if not incidents and skip == 0:
            return message(f"No incidents in the last 30 days match. {HELP_TEXT}")
        return self._results(incidents, total=found.metadata.total)

    async def unfurl(self, value: dict[str, Any]) -> MessagingExtensionResponse:
        """The incident card for a portal link to this workspace's incident; an empty result for anything else."""
        link = incident_link(value.get("url"), self.workspace)
        if link is None:
            return _result([])
        found = await self._run(detail_query.SPEC.name, {"incident_ref": link.incident_ref})
        if isinstance(found, str) or not found.records or not isinstance(found.records[0], IncidentDetail):
            return _result([])  # nothing to show: the link stays a link
        detail, now = found.records[0], self.clock()
        card = incident_detail(detail, lambda kind, key: None, now, demo=self.sentinel.is_demo)
        return _result([_attachment(card, incident_preview(detail.incident, now))])

    async def _run(self, tool: str, arguments: dict[str, Any]) -> QueryResult | str:
        """The query's result, or what to tell the analyst (its error, or that it was too slow for Teams)."""
        try:
            result = await asyncio.wait_for(self.sentinel.run(tool, arguments), ANSWER_BUDGET_S)
        except TimeoutError:
            log.info("%s did not answer within %.0f s for the message extension", tool, ANSWER_BUDGET_S)
            return TOO_SLOW
        if isinstance(result, QueryResult):
            return result
        return result.message

    def _results(self, incidents: list[Incident], total: int) -> MessagingExtensionResponse:
        now, demo = self.clock(), self.sentinel.is_demo
        del total  # Teams pages by asking again with a larger skip; an empty page ends the list
        return _result([_attachment(incident_card(i, now, demo=demo), incident_preview(i, now)) for i in incidents])


def message(text: str) -> MessagingExtensionResponse:
    """A result that is a line of text instead of a list (a refusal, an error, nothing found)."""
    return MessagingExtensionResponse(compose_extension=MessagingExtensionResult(type="message", text=text))


def _result(attachments: list[MessagingExtensionAttachment]) -> MessagingExtensionResponse:
    return MessagingExtensionResponse(compose_extension=MessagingExtensionResult(
        type="result", attachment_layout="list", attachments=attachments))


def _attachment(card: dict[str, Any], preview: dict[str, Any]) -> MessagingExtensionAttachment:
    return MessagingExtensionAttachment(content_type=ADAPTIVE, content=card,
                                        preview=Attachment(content_type=THUMBNAIL, content=preview))
