"""The turn types: what one activity asks for (:class:`TurnRequest`), what a turn sends (:class:`Reply`), what it
tells telemetry (:class:`TurnFacts`, :func:`turn_span`), and how a turn an invoke starts is run later."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from botbuilder.schema import Activity, ConversationReference
from opentelemetry.trace import SpanKind, Status, StatusCode

from bot import telemetry
from bot.orchestrator.changes import PendingAction
from bot.orchestrator.local_time import LocalZone

# A TurnContext.turn_state key: what takes the turn an invoke starts (its text and value: a card press, a sign-in's
# kept question) to run after the invoke is answered, in its conversation's order (the dispatcher sets it: queued
# durably like a message, or at the invoke's place in the runner's line); False when it was not taken.
LATER_STATE_KEY = "bot.turn_later"
Later = Callable[[str, dict[str, Any] | None], Awaitable[bool]]


@dataclass(frozen=True)
class TurnRequest:
    """What one activity asks for, captured inside the HTTP request."""

    text: str
    value: dict[str, Any] | None
    activity_id: str | None
    conversation_id: str
    conversation_type: str  # personal, groupChat, channel
    user_id: str
    user_aad_id: str | None
    user_name: str | None
    reference: ConversationReference
    correlation_id: str
    reply_to_id: str | None = None  # for a card button: the message holding the card
    tenant_id: str | None = None
    local: LocalZone | None = None  # the sender's time zone (Teams sends it with each message)


@dataclass
class Reply:
    """What a turn sends: new activities, cards to update in place, and the proposal whose card goes last."""

    activities: list[Activity]
    card_updates: list[tuple[str | None, dict[str, Any]]] = field(default_factory=list)
    confirmation: PendingAction | None = None  # its card is the last activity; that message's id is kept
    # Sent only when nothing else is and progress is showing (a stream, a status message) that must be closed:
    # a change's outcome, whose card updated in place says it already.
    quiet: Activity | None = None


class TurnKind(StrEnum):
    UNKNOWN = "unknown"
    QUESTION = "question"
    COMMAND = "command"
    CARD_ACTION = "card_action"
    HELP = "help"
    INVALID_COMMAND = "invalid_command"
    DUPLICATE = "duplicate"


@dataclass
class TurnFacts:
    """What a turn tells telemetry: its kind, names, counts and sizes; never its text (unless opted in)."""

    kind: TurnKind = TurnKind.UNKNOWN
    command: str | None = None  # the command's name: incidents, incident, clear, prefer, ...
    rounds: int = 0  # model calls
    tool_calls: int = 0  # queries run (the model's, or the command's one)
    question_length: int | None = None
    answer_length: int | None = None
    error: str | None = None  # error.type of a failed turn (an exception's class, an LLM failure kind)
    question: str | None = None  # set only when TELEMETRY_CAPTURE_CONTENT is on

    @property
    def outcome(self) -> str:
        if self.kind is TurnKind.DUPLICATE:
            return "duplicate"
        return "failed" if self.error else "answered"

    def attributes(self) -> dict[str, str | int]:
        optional = {"bot.turn.command": self.command, "bot.question.length": self.question_length,
                    "bot.answer.length": self.answer_length, "error.type": self.error,
                    "bot.question.text": self.question}
        return {"bot.turn.kind": self.kind.value, "bot.turn.outcome": self.outcome, "bot.turn.rounds": self.rounds,
                "bot.turn.tool_calls": self.tool_calls} | {k: v for k, v in optional.items() if v is not None}


@contextmanager
def turn_span(request: TurnRequest, facts: TurnFacts) -> Iterator[None]:
    """The ``turn`` span and the turn metrics; log lines inside carry the request's correlation id."""
    started = time.perf_counter()
    with telemetry.correlated(request.correlation_id), telemetry.tracer().start_as_current_span(
            "turn", kind=SpanKind.CONSUMER, record_exception=False, set_status_on_exception=False,
            attributes={"bot.correlation_id": request.correlation_id,
                        "teams.conversation.type": request.conversation_type}) as span:
        try:
            yield
        except BaseException as error:  # cancelled at shutdown, or a failure outside the turn's own handling
            facts.error = facts.error or type(error).__name__
            raise
        finally:
            span.set_attributes(facts.attributes())
            if facts.error:
                span.set_status(Status(StatusCode.ERROR, facts.error))
            labels = {"bot.turn.outcome": facts.outcome, "bot.turn.kind": facts.kind.value,
                      "teams.conversation.type": request.conversation_type}
            instruments = telemetry.instruments()
            instruments.turns.add(1, labels)
            instruments.turn_duration.record(time.perf_counter() - started, labels)
