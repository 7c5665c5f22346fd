"""Results -> Teams activities: the model's text, cards built from the tool artifacts, the footnote.

Cards come from typed data (``bot.cards``), never from card JSON written by the model. The model's text
is rendered by Teams as markdown, and it may echo attacker-written incident text, so links to anything
but the Microsoft security portals are made inert (``bot.cards.inert``) and mention/HTML tags are removed.
A message is kept under Teams' size limit; extra cards follow as further messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar
from urllib.parse import urlparse

from botbuilder.core import CardFactory
from botbuilder.schema import ActionTypes, Activity, ActivityTypes, Attachment, CardAction, Entity, SuggestedActions

from bot import cards
from bot.cards.inert import inert
from bot.orchestrator import sources
from bot.orchestrator.loop import TurnResult
from bot.orchestrator.references import Reference, References, RefKind
from bot.sentinel.models import QueryError, QueryResult
from bot.tools.registry import TOOLS
from bot.tools.toolbox import ToolRun

MAX_MESSAGE_BYTES = 80_000  # Teams allows ~100 KB; stay well below
MAX_TEXT_CHARS = 8_000
TRUSTED_LINK_HOSTS = ("portal.azure.com", "security.microsoft.com", "learn.microsoft.com")
_LINK = re.compile(r"!?\[([^\]\n]{0,300})\]\(([^)\s]{1,2000})\)")
_BARE_URL = re.compile(r"(?<![(\w])(?:https?|ftp)://[^\s<>()\[\]]{1,2000}", re.IGNORECASE)
_TAGS = re.compile(r"</?(?:at|script|iframe|img|style)\b[^>]*>", re.IGNORECASE)  # <a href> is shown, inert
_KEPT = "\ue000"  # a private-use character around the number of a link kept live while the rest is made inert
_KEPT_AT = re.compile(f"{_KEPT}(\\d+){_KEPT}")


def _trusted(url: str) -> bool:
    parts = urlparse(url)
    host = (parts.hostname or "").lower()
    return parts.scheme == "https" and any(host == h or host.endswith("." + h) for h in TRUSTED_LINK_HOSTS)


def safe_markdown(text: str) -> str:
    """Model text for Teams: links to the Microsoft security portals (whole ``[label](https://...)`` links and bare
    URLs) stay live; every other link of any form is made inert (``bot.cards.inert``: shown, readable, not a link),
    and mention and HTML tags are removed."""
    kept: list[str] = []

    def keep(shown: str) -> str:
        kept.append(shown)
        return f"{_KEPT}{len(kept) - 1}{_KEPT}"

    def link(match: re.Match[str]) -> str:
        label, url = match.group(1), match.group(2)
        return keep(f"[{inert(label)}]({url})") if _trusted(url) and not match.group(0).startswith("!") \
            else match.group(0)

    def bare(match: re.Match[str]) -> str:
        return keep(match.group(0)) if _trusted(match.group(0)) else match.group(0)

    protected = _BARE_URL.sub(bare, _LINK.sub(link, text.replace(_KEPT, "")))
    cleaned = _KEPT_AT.sub(lambda m: kept[int(m.group(1))], inert(_TAGS.sub("", protected)))
    return cleaned if len(cleaned) <= MAX_TEXT_CHARS else cleaned[: MAX_TEXT_CHARS - 1] + "…"


# Teams shows at most 20 citations per message; a citation's name and abstract are cut at these lengths.
MAX_CITATIONS = 20
CITATION_NAME_CHARS = 80
CITATION_ABSTRACT_CHARS = 160
_CITED = re.compile(r"\[(\d{1,4})\](?!\()")


class AIMessage(Entity):
    """The schema.org Message entity Teams reads for the "AI generated" label and in-text citations."""

    _attribute_map: ClassVar[dict[str, dict[str, str]]] = {
        **Entity._attribute_map,
        "at_context": {"key": "@context", "type": "str"},
        "at_type": {"key": "@type", "type": "str"},
        "at_id": {"key": "@id", "type": "str"},
        "additional_type": {"key": "additionalType", "type": "[str]"},
        "citation": {"key": "citation", "type": "[object]"},
    }

    def __init__(self, citation: list[dict[str, Any]] | None = None, **kwargs: Any) -> None:
        super().__init__(type="https://schema.org/Message", **kwargs)
        self.at_context = "https://schema.org"
        self.at_type = "Message"
        self.at_id = ""
        self.additional_type = ["AIGeneratedContent"]
        self.citation = citation or None


def citations(text: str, references: References) -> list[dict[str, Any]]:
    """Teams citations for the [n] the text cites: the record each number stands for (the bot's own [n], so the
    number in the text and the citation's position are the same)."""
    cited: list[dict[str, Any]] = []
    for n in dict.fromkeys(int(m.group(1)) for m in _CITED.finditer(text)):
        reference = references.get(n)
        if reference is None:
            continue  # the fact check has marked it
        cited.append({"@type": "Claim", "position": n, "appearance": _appearance(reference)})
        if len(cited) == MAX_CITATIONS:
            break
    return cited


def _appearance(reference: Reference) -> dict[str, Any]:
    kind = {RefKind.INCIDENT: "Incident", RefKind.ALERT: "Alert"}.get(reference.kind, "Entity")
    name = f"#{reference.key}" if reference.kind is RefKind.INCIDENT else kind
    appearance: dict[str, Any] = {"@type": "DigitalDocument", "name": cards.plain(f"[{reference.n}] {name}",
                                                                                   CITATION_NAME_CHARS),
                                  "abstract": cards.plain(reference.label, CITATION_ABSTRACT_CHARS),
                                  "keywords": [kind]}
    return appearance


def adaptive(card: dict) -> Attachment:
    return CardFactory.adaptive_card(card)


def message(text: str | None = None, card_list: Sequence[dict] = ()) -> Activity:
    return Activity(type=ActivityTypes.message, text=text or None,
                    attachments=[adaptive(c) for c in card_list] or None,
                    attachment_layout="list" if len(card_list) > 1 else None)


def source_lines(runs: Sequence[ToolRun]) -> list[cards.SourceLine]:
    return [cards.SourceLine(text=s.line(), kql=s.kql) for s in sources.sources(runs)]


def answer(turn: TurnResult, references: References, now: datetime, *, demo: bool,
           changes: bool = False, follow_ups: bool = False) -> list[Activity]:
    """The activities for a model answer; the first replaces the progress indicator.

    ``changes``: incident detail cards carry the buttons that propose changes (other cards ignore it).
    ``follow_ups``: suggested next questions under the answer (Teams shows them in 1:1 chats).
    """
    results = [run.artifact for run in turn.runs if isinstance(run.artifact, QueryResult)]
    body = [TOOLS.card(r, references.ref_for, now, changes=changes) for r in _worth_a_card(results)]
    footer = cards.footer(source_lines(turn.runs), demo=demo or any(r.metadata.is_demo for r in results),
                          disclaimer=turn.disclaimer, notices=list(turn.notices))
    text = safe_markdown(turn.text)
    activities = _pack(text, _with_footer(body, footer))
    if not turn.failed:
        # Model-written: Teams' AI label, its [n] as Teams citations, and the feedback buttons.
        activities[0].entities = [AIMessage(citations(text, references))]
        activities[0].channel_data = {"feedbackLoopEnabled": True}
    suggestions = next_questions(results, references) if follow_ups and not turn.failed else []
    if suggestions:
        activities[-1].suggested_actions = SuggestedActions(actions=[
            CardAction(type=ActionTypes.im_back, title=question, value=question) for question in suggestions])
    return activities


def next_questions(results: Sequence[QueryResult], references: References) -> list[str]:
    """What an analyst usually asks next about these results (at most three, each tool's own ``follow_ups``),
    naming rows by their [n]."""
    return TOOLS.follow_ups(results, references.ref_for)


def command_result(result: QueryResult | QueryError, run: ToolRun, references: References,
                   now: datetime, *, changes: bool = False) -> list[Activity]:
    """The activities for a command (no model): the result card and its data sources.

    ``changes``: an incident detail card carries the buttons that propose changes (other cards ignore it).
    """
    if isinstance(result, QueryError):
        hint = "Try again in a moment." if result.retry_possible else None
        return [message(card_list=[cards.error("That query failed", result.message, hint)])]
    footer = cards.footer(source_lines([run]), demo=result.metadata.is_demo, disclaimer=False, notices=[])
    return _pack(None, _with_footer([TOOLS.card(result, references.ref_for, now, changes=changes)], footer))


def error(title: str, text: str, hint: str | None = None) -> Activity:
    return message(card_list=[cards.error(title, text, hint)])


def _with_footer(body: list[dict], footer: dict | None) -> list[dict]:
    """The cards of an answer with the Data sources footnote inside the last one where it fits: one message."""
    if footer is None:
        return body
    merged = cards.attach(body[-1], footer) if body else None
    return [*body[:-1], merged] if merged is not None else [*body, footer]


def _worth_a_card(results: list[QueryResult]) -> list[QueryResult]:
    """One card per distinct query; a repeated identical query shows once (the last one)."""
    seen: dict[str, QueryResult] = {}
    for result in results:
        seen[json.dumps([result.metadata.tool, result.metadata.parameters], sort_keys=True, default=str)] = result
    return list(seen.values())


def _pack(text: str | None, card_list: list[dict]) -> list[Activity]:
    """Split cards over as few messages as fit the size limit; the text goes with the first."""
    activities: list[Activity] = []
    batch: list[dict] = []
    size = len((text or "").encode("utf-8"))
    for card in card_list:
        card_bytes = cards.card_size(card)
        if batch and size + card_bytes > MAX_MESSAGE_BYTES:
            activities.append(message(text if not activities else None, batch))
            batch, size = [], 0
        batch.append(card)
        size += card_bytes
    if batch or text or not activities:
        activities.append(message(text if not activities else None, batch))
    return activities
