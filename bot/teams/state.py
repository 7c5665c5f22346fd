"""Per-conversation state: what one Teams conversation (1:1, group chat or channel thread) remembers.

Stored in any botbuilder ``Storage``, under the key and in the layout botbuilder's ``ConversationState`` uses
(``<channel>/conversations/<id>``, the data under one property), read once at the start of a turn and saved once
at its end. ``ConversationState`` itself is not used: it hashes the whole state with jsonpickle when it loads and
again when it saves, to find out whether it changed, which cost a tenth of a model turn's CPU; a turn always
changes its conversation's state, so it is simply written, with the e_tag it was read with.

It is bounded: if the serialised state grows past ``MAX_STATE_BYTES``, the oldest turns of the history are
dropped until it fits. The JSON measured for that is the JSON stored (:class:`EncodedState`): the state is
serialised once per save.

A save that fails (a full disk, a storage outage) is retried after short pauses; if it still fails, the
save reports it (the handler tells the user) and :class:`SaveHealth` stays degraded, which /readyz shows,
until a save succeeds again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botbuilder.core import Storage, TurnContext

from bot.orchestrator.conversation import Conversation
from bot.orchestrator.memory import Memory
from bot.teams.storage import EncodedItem, EtagConflictError, StateValueError

log = logging.getLogger(__name__)
MAX_STATE_BYTES = 64_000
SAVE_RETRY_DELAYS_S = (0.1, 0.5)  # pauses before the second and third attempts at a save
MAX_RECENT_ACTIVITY_IDS = 50
STATE_PROPERTY = "sentinel_conversation"
_LOADED_KEY = "bot.state.loaded"  # turn_state: the stored item as read (its e_tag guards the save)


@dataclass
class ConversationData:
    conversation: Conversation = field(default_factory=Conversation)
    recent_activity_ids: list[str] = field(default_factory=list)  # processed ids, to drop Teams' retries

    def seen(self, activity_id: str | None) -> bool:
        return bool(activity_id) and activity_id in self.recent_activity_ids

    def mark_seen(self, activity_id: str | None) -> None:
        if activity_id and activity_id not in self.recent_activity_ids:
            self.recent_activity_ids.append(activity_id)
            del self.recent_activity_ids[:-MAX_RECENT_ACTIVITY_IDS]

    def to_dict(self) -> dict[str, Any]:
        return {"conversation": self.conversation.to_dict(), "recent_activity_ids": self.recent_activity_ids}

    @classmethod
    def from_dict(cls, data: Any) -> ConversationData:
        if not isinstance(data, dict):
            return cls()
        try:
            conversation = Conversation.from_dict(data.get("conversation"))
        except (TypeError, ValueError, KeyError, AttributeError):
            conversation = Conversation()  # damaged state: start over rather than fail every turn
        ids = [str(i) for i in data.get("recent_activity_ids", []) if i][-MAX_RECENT_ACTIVITY_IDS:]
        return cls(conversation=conversation, recent_activity_ids=ids)


@dataclass(frozen=True)
class EncodedState:
    """The state as it will be stored: its dict and that dict's compact JSON, built once per save."""

    value: dict[str, Any]
    text: str

    @property
    def size(self) -> int:
        return len(self.text.encode("utf-8"))

    @classmethod
    def of(cls, data: ConversationData) -> EncodedState:
        value = data.to_dict()
        return cls(value, json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False))


def bound(data: ConversationData, memory: Memory, max_bytes: int = MAX_STATE_BYTES) -> EncodedState:
    """The state as it is to be stored: while it is over ``max_bytes``, the orchestrator's memory lets go
    of the conversation's oldest turns, then of its older facts and references (``Memory.shed``)."""
    encoded = EncodedState.of(data)  # serialising the state is most of this function's cost: once when it fits
    steps = memory.shed(data.conversation)
    while encoded.size > max_bytes and next(steps, None) is not None:
        encoded = EncodedState.of(data)
    return encoded


@dataclass
class SaveHealth:
    """Whether state is being saved: degraded from a save that failed every attempt until one succeeds."""

    failing_since: datetime | None = None
    failed_saves: int = 0  # saves given up since the last one that succeeded
    last_error: str | None = None  # the exception's type (never its message: it may quote state)

    @property
    def degraded(self) -> bool:
        return self.failing_since is not None

    def describe(self) -> str:
        if self.failing_since is None:
            return "ok"
        return (f"degraded: {self.failed_saves} conversation save(s) failed since "
                f"{self.failing_since.isoformat(timespec='seconds')} ({self.last_error}); turns are answered "
                "but may not be remembered")

    def failed(self, error: BaseException) -> None:
        self.failing_since = self.failing_since or datetime.now(UTC)
        self.failed_saves += 1
        self.last_error = type(error).__name__

    def succeeded(self) -> None:
        if self.failing_since is not None:
            log.warning("conversation state is saved again after %d failed save(s)", self.failed_saves)
        self.failing_since, self.failed_saves, self.last_error = None, 0, None


class StateStore:
    """Loads and saves ConversationData in a botbuilder Storage, as ConversationState would store it."""

    def __init__(self, storage: Storage, retry_delays_s: tuple[float, ...] = SAVE_RETRY_DELAYS_S) -> None:
        self._storage = storage
        self.retry_delays_s = retry_delays_s
        self.health = SaveHealth()

    @staticmethod
    def key(context: TurnContext) -> str:
        """ConversationState's key: the channel and the conversation (a channel thread is its own conversation)."""
        activity = context.activity
        conversation_id = activity.conversation.id if activity.conversation else None
        if not activity.channel_id or not conversation_id:
            raise TypeError("an activity without a channel or conversation id has no conversation state")
        return f"{activity.channel_id}/conversations/{conversation_id}"

    async def load(self, context: TurnContext) -> ConversationData:
        key = self.key(context)
        item = (await self._storage.read([key])).get(key)
        item = dict(item) if isinstance(item, dict) else {}
        context.turn_state[_LOADED_KEY] = item
        return ConversationData.from_dict(item.get(STATE_PROPERTY))

    async def save(self, context: TurnContext, data: ConversationData, encoded: EncodedState | None = None) -> bool:
        """Save the turn's state (``encoded``: as :func:`bound` left it, unchanged since), retrying a failed write;
        False (logged, health degraded) when it never succeeded.

        A conflict or an item the store refuses is not retried: the same write would fail the same way.
        """
        encoded = encoded or EncodedState.of(data)
        item = dict(context.turn_state.get(_LOADED_KEY) or {})
        item[STATE_PROPERTY] = encoded.value  # other properties a previous version stored are kept
        others = {k: v for k, v in item.items() if k not in (STATE_PROPERTY, "e_tag")}
        # The item's JSON, made from the state's JSON already built instead of serialising the state again.
        head = json.dumps(others, separators=(",", ":"), ensure_ascii=False, allow_nan=False)[:-1]
        head += "," if others else ""
        stored = EncodedItem(item, f'{head}"{STATE_PROPERTY}":{encoded.text}}}')
        for attempt in range(len(self.retry_delays_s) + 1):
            try:
                await self._storage.write({self.key(context): stored})
            except Exception as error:  # every store fails in its own way (sqlite3, Azure, OSError)
                final = attempt == len(self.retry_delays_s) or isinstance(error, EtagConflictError | StateValueError)
                log.warning("saving conversation state failed (%s), attempt %d%s", type(error).__name__,
                            attempt + 1, "; giving up" if final else "; retrying", exc_info=final)
                if final:
                    self.health.failed(error)
                    return False
                await asyncio.sleep(self.retry_delays_s[attempt])
            else:
                self.health.succeeded()
                # The stored e_tag is a new one now: a second save in this turn overwrites the first.
                context.turn_state[_LOADED_KEY] = {**item, "e_tag": "*"}
                return True
        raise AssertionError("unreachable")  # pragma: no cover
