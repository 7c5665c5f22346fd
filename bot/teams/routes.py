"""What a turn asks for, answered by one small handler each: a table from card verbs (``bot.cards.verbs``) and from
the command router's routes (``bot.commands.router.Route``) to the functions that answer them.

``answer`` is a turn's whole decision: a button that stands for text (ask, command) is answered as typed; "yes" or
"cancel" typed while a change waits is that card's button, pressed; a verb goes to its handler in ``VERBS``, typed
text to the router and its route's handler in ``ROUTES`` (a question goes to the model). A new request ends the
requester's pending change first (a decision on it, or a look at details, does not). The handler class
(``handler.SentinelBot``) loads state, delivers the reply and saves state once around this; every handler returns a
``Reply`` and records what the turn was in its ``TurnFacts``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from botbuilder.core import TurnContext

from bot import cards
from bot.cards import Verb
from bot.commands.paging import Listing
from bot.commands.parser import detail_command
from bot.commands.router import Route, Routed
from bot.config import LLM_HELP
from bot.sentinel.models import QueryResult
from bot.sentinel.queries.analyst_kql import MAX_QUERY_CHARS
from bot.teams import replies
from bot.teams.access import Where
from bot.teams.changes import proposed_from_card
from bot.teams.progress import Progress, StreamingProgress
from bot.teams.state import ConversationData
from bot.teams.turn import Reply, TurnFacts, TurnKind, TurnRequest

if TYPE_CHECKING:  # the handler holds the services a turn uses; it imports this table
    from bot.teams.handler import SentinelBot

log = logging.getLogger("bot.teams.handler")  # a turn's lines keep the handler's logger, as queries on the logs expect
MAX_TEXT_CHARS = 4000
# A kql command is read whole up to a Teams message's size, past the guard's own cap, so a long query is refused
# whole ("at most ...") and never run without its last filters.
MAX_KQL_MESSAGE_CHARS = MAX_QUERY_CHARS + 1_000
_KQL_COMMAND = re.compile(r"\s*/?kql\b", re.IGNORECASE)


def bounded(text: str) -> str:
    """A message's text as a turn reads it: a question to MAX_TEXT_CHARS, a kql command to MAX_KQL_MESSAGE_CHARS."""
    return text[:MAX_KQL_MESSAGE_CHARS if _KQL_COMMAND.match(text) else MAX_TEXT_CHARS]
MAX_CAPTURED_CHARS = 1000  # the question text on the turn span, only with TELEMETRY_CAPTURE_CONTENT
WATCHES_OFF = ("Watches are off on this bot. They need WATCH_POLL_SECONDS above 0 and the bot's own read access "
               "(QUERY_IDENTITY=bot): nobody is signed in when the bot looks for new incidents.")


@dataclass
class Turn:
    """One turn as its handler sees it: the bot's services, the activity's context, the conversation's state (loaded
    once), what was asked, where progress shows, and the facts recorded for telemetry."""

    bot: SentinelBot
    context: TurnContext
    data: ConversationData
    request: TurnRequest
    progress: Progress
    facts: TurnFacts
    where: Callable[[], Where]  # what the access policy decides on (a watch records it)
    text: str = ""  # typed text (or a button that posts text), once the verbs are settled


Answer = Callable[[Turn], Awaitable[Reply]]
RouteAnswer = Callable[[Turn, Routed], Awaitable[Reply]]


@dataclass(frozen=True)
class VerbRoute:
    answer: Answer
    command: str  # the turn's command, for telemetry
    decides: bool = False  # a decision on the pending change: answered before a new request could end it
    keeps_pending: bool = False  # looking at details does not end the requester's pending change


async def answer(turn: Turn) -> Reply:
    """The reply to one turn: its verb's handler, or typed text's route's."""
    request, facts = turn.request, turn.facts
    verb = Verb.of(request.value)
    if verb in (Verb.ASK, Verb.COMMAND):  # a button that stands for text: answered as if it was typed
        said = (request.value or {}).get("question" if verb is Verb.ASK else "command")
        request, verb = replace(request, text=bounded(str(said or "").strip()), value=None), None
    typed = turn.bot.changes.typed_decision(turn.data, request) if verb is None and not request.value else None
    if typed is not None:  # "yes" / "cancel" typed while a change waits: that card's button, pressed
        request, verb = typed, Verb.of(typed.value)
    turn.request = request
    route = VERBS.get(verb) if verb is not None else None
    if route is not None:
        facts.kind, facts.command = TurnKind.CARD_ACTION, route.command
    if typed is not None:
        facts.kind = TurnKind.COMMAND
    if route is not None and route.decides:
        return await route.answer(turn)
    # A new request ends the requester's pending change, and expired ones (looking at details does not).
    ended = turn.bot.changes.on_new_request(turn.data, request) if route is None or not route.keeps_pending else []
    reply = await (route.answer if route is not None else answer_text)(turn)
    for outcome in reversed(ended):
        if outcome.action is None:
            continue
        reply.card_updates.insert(0, (outcome.action.card_id, turn.bot.changes.outcome_card(outcome)))
        if outcome.action.card_id is None:
            reply.activities.insert(
                0, replies.message(f"{outcome.headline} (#{outcome.action.change.incident_number})"))
    return reply


# ---- card verbs ------------------------------------------------------------------------------------------------

async def details(turn: Turn) -> Reply:
    """An incident row's Details button: that incident in depth, as the command would show it."""
    conversation = turn.data.conversation
    run = await turn.bot.commands.run_query(conversation, detail_command((turn.request.value or {}).get("incident")),
                                            turn.progress.update)
    if isinstance(run, str):
        return Reply([replies.message(f"{run} Ask about an incident by its number instead.")])
    turn.facts.tool_calls = 1
    return Reply(replies.command_result(run.artifact, run, conversation.references, turn.bot.clock(),
                                        changes=turn.bot.changes.may_change(turn.request)))


async def next_page(turn: Turn) -> Reply:
    """A list's Next button: the page its data names (that card's list, however old), as "more" would show it."""
    listing = Listing.from_dict((turn.request.value or {}).get("listing"))
    routed = await turn.bot.commands.page(turn.data.conversation, listing, None, turn.progress.update, pressed=True)
    return await ROUTES[routed.route](turn, routed)


async def propose(turn: Turn) -> Reply:
    return await turn.bot.changes.propose(turn.context, turn.data, turn.request,
                                          proposed_from_card(turn.request.value or {}))


async def confirm(turn: Turn) -> Reply:
    return await turn.bot.changes.decide(turn.context, turn.data, turn.request, confirm=True)


async def cancel(turn: Turn) -> Reply:
    return await turn.bot.changes.decide(turn.context, turn.data, turn.request, confirm=False)


# The card verbs, each to its handler; buttons that post text (ask, command) are answered as text.
VERBS: dict[Verb, VerbRoute] = {
    Verb.INCIDENT_DETAIL: VerbRoute(details, "incident", keeps_pending=True),
    Verb.PAGE: VerbRoute(next_page, "page", keeps_pending=True),
    Verb.CHANGE_PROPOSE: VerbRoute(propose, "change"),
    Verb.CHANGE_CONFIRM: VerbRoute(confirm, str(Verb.CHANGE_CONFIRM), decides=True),
    Verb.CHANGE_CANCEL: VerbRoute(cancel, str(Verb.CHANGE_CANCEL), decides=True),
}


# ---- typed text: the command router's routes --------------------------------------------------------------------

async def answer_text(turn: Turn) -> Reply:
    """Typed text (or a button that posts text): a command, or a question for the model."""
    turn.text = turn.request.text or str((turn.request.value or {}).get("text") or "")
    routed = await turn.bot.commands.route(turn.text, turn.data.conversation, turn.progress.update,
                                           me=turn.request.user_aad_id)
    if routed.command is not None:
        turn.facts.kind, turn.facts.command = TurnKind.COMMAND, routed.command.name
    return await ROUTES.get(routed.route, question)(turn, routed)


async def invalid(turn: Turn, routed: Routed) -> Reply:
    turn.facts.kind = TurnKind.INVALID_COMMAND
    return Reply([replies.error("I could not read that command", routed.text)])


async def needs(turn: Turn, routed: Routed) -> Reply:
    """A value the command's query refused: what it needs, in the analyst's words (nothing failed)."""
    turn.facts.kind = TurnKind.INVALID_COMMAND
    return Reply([replies.error("I need a little more", routed.text)])


async def help_card(turn: Turn, routed: Routed) -> Reply:
    turn.facts.kind = TurnKind.HELP
    return Reply([replies.message(card_list=[cards.help_card()])])


async def said(turn: Turn, routed: Routed) -> Reply:
    """What the router answered in words (cleared, preferences)."""
    return Reply([replies.message(routed.text)])


async def change(turn: Turn, routed: Routed) -> Reply:
    assert routed.command is not None
    return await turn.bot.changes.propose(turn.context, turn.data, turn.request,
                                          (routed.command.tool or "", routed.command.arguments))


async def unresolved(turn: Turn, routed: Routed) -> Reply:
    return Reply([replies.message(f"{routed.text} Ask about an incident by its number instead.")])


async def watch(turn: Turn, routed: Routed) -> Reply:
    assert routed.command is not None
    watches, request = turn.bot.watches, turn.request
    if watches is None:
        return Reply([replies.message(WATCHES_OFF)])
    return Reply([replies.message(await watches.command(
        routed.command, conversation_id=request.conversation_id, reference=request.reference,
        user_name=request.user_name, user_aad_id=request.user_aad_id, where=turn.where()))])


async def no_reference(turn: Turn, routed: Routed) -> Reply:
    """An [n] this conversation does not have: answered without the model, which could only guess."""
    turn.facts.kind, turn.facts.command = TurnKind.COMMAND, turn.facts.command or "reference"
    return Reply([replies.message(routed.text)])


async def query(turn: Turn, routed: Routed) -> Reply:
    assert routed.run is not None
    turn.facts.tool_calls = 1
    return Reply(replies.command_result(routed.run.artifact, routed.run, turn.data.conversation.references,
                                        turn.bot.clock(), changes=turn.bot.changes.may_change(turn.request)))


async def question(turn: Turn, routed: Routed) -> Reply:
    """Free text for the model's tool loop; its answer, cards and any proposal it made."""
    bot, request, facts, text = turn.bot, turn.request, turn.facts, turn.text
    conversation = turn.data.conversation
    facts.kind, facts.question_length = TurnKind.QUESTION, len(text)
    if bot.capture_content:
        facts.question = text[:MAX_CAPTURED_CHARS]
    if bot.orchestrator is None:
        return Reply([replies.error("Plain-language questions are not enabled", LLM_HELP,
                                    'Commands work now: type "help".')])
    limits = bot.limits
    wait = limits.take(request.user_aad_id or request.user_id, request.conversation_id) if limits else None
    if wait is not None:
        assert limits is not None
        facts.error = "rate_limited"
        log.info("model turn refused: rate limit (%.0f s to wait)", wait)
        return Reply([replies.message(limits.message(wait))])
    actor = await bot.changes.actor(turn.context, request) if bot.desk is not None and bot.desk.enabled else None
    answered = await bot.orchestrator.answer(conversation, text, turn.progress.update, actor=actor,
                                             stream=_streamed_to(turn.progress), local=request.local)
    if limits is not None:
        # Only the first model call: the rounds hostile tool results can force are bounded by the turn.
        limits.spend(request.user_aad_id or request.user_id, request.conversation_id, answered.charged_tokens)
    facts.rounds, facts.tool_calls, facts.answer_length = answered.rounds, len(answered.runs), len(answered.text)
    if answered.failed:
        facts.error = f"llm.{answered.failure}"
    log.info("answered in %d round(s), %d tool call(s)%s", answered.rounds, len(answered.runs),
             f" (failed: {answered.failure})" if answered.failed else "")
    bot.commands.listed(conversation, [r.artifact for r in answered.runs if isinstance(r.artifact, QueryResult)])
    reply = Reply(replies.answer(answered, conversation.references, bot.clock(), demo=bot.sentinel.is_demo,
                                 changes=bot.changes.may_change(request),
                                 follow_ups=request.conversation_type == "personal"))
    for proposal in answered.proposals:
        bot.changes.add_proposal(reply, proposal)
    return reply


# Each route of typed text to its handler; a question (and anything not listed) goes to the model.
ROUTES: dict[Route, RouteAnswer] = {
    Route.INVALID: invalid,
    Route.NEEDS: needs,
    Route.HELP: help_card,
    Route.CLEARED: said,
    Route.PREFERENCES: said,
    Route.CHANGE: change,
    Route.UNRESOLVED: unresolved,
    Route.WATCH: watch,
    Route.NO_REFERENCE: no_reference,
    Route.QUERY: query,
    Route.QUESTION: question,
}


def _streamed_to(progress: Progress) -> Callable[[str], Awaitable[None]] | None:
    """Where a model answer streams as it is written: Teams streaming, in 1:1 chats only (channels and group chats
    keep one status message, replaced by the answer)."""
    if not isinstance(progress, StreamingProgress):
        return None
    streaming = progress

    async def show(text: str) -> None:
        await streaming.text(replies.safe_markdown(text))

    return show
