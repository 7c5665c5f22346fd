"""The typing indicator a turn's user sees early, before the turn waits for anything: one object per process.

The dispatcher (dispatch.py) sends it as an activity is accepted: before the turn runs on this process's runner, or
once the turn is safely queued for a worker (TURN_QUEUE), marking it as being sent so this process's own worker does
not send a second one. A queue worker (``Surface.run_queued``) sends one itself unless its front sent one just now.
When the turn starts, ``told`` puts in its context whether the indicator went out (``TYPING_SENT_KEY``), so the
turn's progress does not send another. Nothing is sent in a channel thread, where Teams shows none.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from botbuilder.core import TurnContext
from botbuilder.schema import Activity

from bot.teams.connectors import Unreachable
from bot.teams.progress import send_with_retry, shows_typing

log = logging.getLogger(__name__)
# A queued turn's worker sends no typing indicator of its own when its web front sent one this recently (Teams shows
# one for about 3 s, or until the next message).
TYPING_FRESH_S = 2.0
FRONT_TYPING_WAIT_S = 0.5  # the longest a queued turn waits for the typing indicator its front is sending
EARLY_TYPING_KEPT = 1000  # typing indicators remembered for turns not started yet: turns that never start must not leak
# A TurnContext.turn_state key: True when this turn's typing indicator was already sent (``EarlyTyping.told``).
TYPING_SENT_KEY = "bot.typing_sent"
# (conversation id, activity id): activity ids are unique only within a conversation.
Key = tuple[str, str]


def key_of(activity: Activity) -> Key:
    return activity.conversation.id, activity.id or ""


class EarlyTyping:
    """The typing indicators sent early in this process: when each went out (time.monotonic(); taken when its turn
    starts), and those being sent by the web front right now (set on the web loop, awaited on the turns' loop)."""

    def __init__(self) -> None:
        self._sent: dict[Key, float] = {}
        self._sending: dict[Key, concurrent.futures.Future[None]] = {}

    def first(self, activity: Activity, auth: Any) -> Callable[[], Awaitable[None]]:
        """The typing indicator, sent as soon as the turn is accepted or queued, before it waits for anything."""

        async def send() -> None:
            if not shows_typing(activity):
                return
            connector = await auth.connector_factory.create(activity.service_url, auth.audience)
            typing = Activity(type="typing", from_property=activity.recipient, recipient=activity.from_property,
                              conversation=activity.conversation, channel_id=activity.channel_id,
                              service_url=activity.service_url, reply_to_id=activity.id)
            try:
                await send_with_retry(
                    lambda: connector.conversations.send_to_conversation(activity.conversation.id, typing))
            except Unreachable as error:  # the turn's answer fails the same way and reports it once
                log.debug("early typing not delivered: %s", error)
                return
            self._remember(key_of(activity))

        return send

    def sending(self, activity: Activity) -> Callable[[], None]:
        """Marks the turn's early typing as being sent by the front, for this process's worker (``just_sent`` waits
        for it rather than send a second one); returns what says it is over."""
        key = key_of(activity)
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._sending[key] = future

        def settled() -> None:
            self._sending.pop(key, None)
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                future.set_result(None)

        return settled

    async def just_sent(self, activity: Activity) -> bool:
        """Whether this process's web front sent the turn's typing indicator within :data:`TYPING_FRESH_S` (its
        worker, taking the turn at once, need not send another; one that waited longer sends its own). While the
        front is still sending it, wait for that (at most :data:`FRONT_TYPING_WAIT_S`)."""
        key = key_of(activity)
        sending = self._sending.get(key)
        if sending is not None:
            with contextlib.suppress(TimeoutError, concurrent.futures.CancelledError):
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(sending)), FRONT_TYPING_WAIT_S)
        sent_at = self._sent.get(key)
        return sent_at is not None and time.monotonic() - sent_at < TYPING_FRESH_S

    def told(self, activity: Activity, logic: Callable[[TurnContext], Awaitable[None]]
             ) -> Callable[[TurnContext], Awaitable[None]]:
        """``logic`` (the bot's turn) with ``TYPING_SENT_KEY`` in its context: whether the indicator went out."""

        async def run(context: TurnContext) -> None:
            context.turn_state[TYPING_SENT_KEY] = self._sent.pop(key_of(activity), None) is not None
            await logic(context)

        return run

    def _remember(self, key: Key) -> None:
        self._sent[key] = time.monotonic()
        for old in list(self._sent)[:max(len(self._sent) - EARLY_TYPING_KEPT, 0)]:
            self._sent.pop(old, None)
