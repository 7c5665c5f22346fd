"""Per-conversation state: what one Teams conversation (1:1, group chat or channel thread) remembers.

Stored through botbuilder ``ConversationState`` (so any botbuilder ``Storage`` works), read once at the
start of a turn and saved once at its end. It is bounded: if the serialised state grows past
``MAX_STATE_BYTES``, the oldest turns of the history are dropped until it fits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from botbuilder.core import ConversationState, TurnContext

from bot.orchestrator.conversation import Conversation
from bot.orchestrator.memory import Memory

MAX_STATE_BYTES = 64_000
MAX_RECENT_ACTIVITY_IDS = 50
STATE_PROPERTY = "sentinel_conversation"


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


def state_bytes(data: ConversationData) -> int:
    return len(json.dumps(data.to_dict(), separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def bound(data: ConversationData, memory: Memory, max_bytes: int = MAX_STATE_BYTES) -> int:
    """Drop the oldest whole turns until the state fits; returns how many turns were dropped."""
    dropped = 0
    while state_bytes(data) > max_bytes and data.conversation.history:
        turns = len(memory.turn_starts(data.conversation))
        if turns <= 1:
            data.conversation.history.clear()
            data.conversation.token_counts.clear()
            break
        dropped += memory.trim(data.conversation, max_turns=turns - 1, max_tokens=10**9)
    if state_bytes(data) > max_bytes:
        # Only the bounded lists are left; keep their newest halves.
        c = data.conversation
        c.known_values = c.known_values[len(c.known_values) // 2:]
        c.references.items = c.references.items[len(c.references.items) // 2:]
        c.references = type(c.references).from_dict(c.references.to_dict())
    return dropped


class StateStore:
    """Loads and saves ConversationData through botbuilder ConversationState."""

    def __init__(self, conversation_state: ConversationState) -> None:
        self._state = conversation_state
        self._accessor = conversation_state.create_property(STATE_PROPERTY)

    async def load(self, context: TurnContext) -> ConversationData:
        raw = await self._accessor.get(context, dict)
        return ConversationData.from_dict(raw)

    async def save(self, context: TurnContext, data: ConversationData) -> None:
        await self._accessor.set(context, data.to_dict())
        await self._state.save_changes(context)
