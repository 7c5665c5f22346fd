"""Where an accepted activity's turn goes: the turn runner in this process, or the durable queue (TURN_QUEUE=azure
or local) for a worker. An invoke is answered in its own request, so the handler reads it here; the turn it starts (a
card press, a sign-in's kept question) goes where a message's would: queued (the invoke answered once that is
committed) and run by a worker in the conversation's order, or at the invoke's place in the runner's line.

The server (server.py) checks and authenticates each request first; ``bot.app`` builds the dispatcher and opens
its queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, TypeVar

from aiohttp import web
from botbuilder.core import InvokeResponse, TurnContext
from botbuilder.schema import Activity

from bot.teams.connectors import auth_record
from bot.teams.surface import ABANDONED_TEXT, Surface, deadline_text, notice
from bot.teams.turn import LATER_STATE_KEY, Later
from bot.turns.contract import TurnQueue
from bot.turns.runner import Place, TurnRunner

log = logging.getLogger(__name__)
FEEDBACK_WAIT_S = 0.1  # the longest a queued turn's typing indicator waits for the acknowledgements in flight
T = TypeVar("T")
OpenQueue = Callable[[], TurnQueue]  # opens a TurnQueue whose clients live on the calling loop


async def _on_loop(loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` on ``loop`` (another thread's, or this one) and await its result here."""
    if asyncio.get_running_loop() is loop:
        return await coroutine
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, loop))


def problem(status: int, detail: str) -> web.Response:
    return web.Response(status=status, text=json.dumps({"error": detail}), content_type="application/json")


class QueuedTurns:
    """TURN_QUEUE=azure or local in the web process: the front's queue client (opened at start-up by bot.app), and
    the early feedback sent once a turn is queued."""

    def __init__(self, open_queue: OpenQueue) -> None:
        self.open = open_queue
        self.front: TurnQueue | None = None
        self._feedback: set[asyncio.Task[None]] = set()
        self._in_flight = 0  # requests on /api/messages being checked and queued
        self.failed_at = float("-inf")  # when an activity last could not be queued (/readyz), monotonic
        self._quiet = asyncio.Event()
        # This process's own queue worker (TURN_WORKER_IN_WEB), told of each turn queued here (thread-safe).
        self.wake: Callable[[], None] = lambda: None

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        """Counts the requests being checked and queued, so early feedback can wait for their answers."""
        self._in_flight += 1
        self._quiet.clear()
        try:
            yield
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._quiet.set()

    def feedback(self, send: Callable[[], Awaitable[None]], settled: Callable[[], None] = lambda: None) -> None:
        """Send early feedback on this (the web) loop once the requests in flight are answered (at most
        :data:`FEEDBACK_WAIT_S` later): in a burst, every acknowledgement goes out before the typing indicators. This
        process's worker is woken after it, so it finds the indicator sent and need not send its own."""
        async def sending() -> None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._quiet.wait(), FEEDBACK_WAIT_S)
            try:
                await send()
            except Exception:  # the worker sends typing again when the turn starts
                log.info("early feedback for a queued turn not delivered", exc_info=True)
            finally:
                settled()
                self.wake()

        task = asyncio.get_running_loop().create_task(sending())
        self._feedback.add(task)
        task.add_done_callback(self._feedback.discard)

    async def enqueue(self, activity: Activity, body: dict[str, Any], auth: Any,
                      turn: dict[str, Any] | None = None) -> web.Response:
        """Number the activity in its conversation and queue it (its checked and cleaned JSON: msrest's serialize()
        would drop what its models do not declare, such as a mention's ``mentioned``; for an invoke, the ``turn`` it
        starts), acknowledged only once it is durable."""
        assert self.front is not None
        conversation = activity.conversation.id
        try:
            await self.front.enqueue(conversation, activity.id or "", body, auth_record(auth), turn)
        except Exception as error:  # noqa: BLE001 - not queued: Teams retries on a 5xx
            log.warning("could not queue a turn (%s)", type(error).__name__)
            self.failed_at = time.monotonic()
            return problem(503, "The bot could not queue the activity; Teams will retry.")
        self.failed_at = float("-inf")
        return web.Response(status=201)


class Dispatcher:
    """Runs an accepted activity's turn: an invoke at once (its answer goes in the response), any other activity in
    the background on the runner, or queued durably for a worker."""

    def __init__(self, surface: Surface, runner: TurnRunner, queued: QueuedTurns | None = None) -> None:
        self.surface = surface
        self.runner = runner
        self.queued = queued
        self.typing = surface.typing  # the early typing indicators it sends (the surface's: a queued turn asks)

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        with self.queued.request() if self.queued is not None else contextlib.nullcontext():
            yield

    def reserve(self, activity: Activity) -> Place | None:
        """The turn's place in its conversation's line, taken on arrival, before any network call (authentication
        may fetch signing keys; the typing indicator is sent before the turn runs). A queued turn's place is its
        number in the conversation instead (QueuedTurns.enqueue), and the runner's thread is not woken for it."""
        if self.queued is not None:
            return None
        return self.runner.reserve(activity.conversation.id)

    async def invoke(self, activity: Activity, body: dict[str, Any], auth: Any, place: Place | None
                     ) -> InvokeResponse | None:
        """Invokes need their answer in this response (card actions are acknowledged at once); the turn an invoke
        starts (handler.on_invoke_activity) is taken through LATER_STATE_KEY (:meth:`_later`)."""
        bot, later = self.surface.bot, self._later(activity, body, auth, place)

        async def logic(context: TurnContext) -> None:
            context.turn_state[LATER_STATE_KEY] = later
            await bot.on_turn(context)

        return await self.runner.call(self.surface.adapter.process_activity(auth, activity, logic))

    def _later(self, activity: Activity, body: dict[str, Any], auth: Any, place: Place | None) -> Later:
        """What takes the turn an invoke starts: queued like a message (on this, the web loop, where the queue's
        client lives; True once committed), else submitted to the runner at the invoke's place. An invoke delivered
        again (the same conversation and activity id) is answered as the first was, and its turn runs once."""
        web_loop = asyncio.get_running_loop()
        conversation, bot, runner = activity.conversation.id, self.surface.bot, self.runner

        async def later(text: str, value: dict[str, Any] | None) -> bool:
            if runner.is_duplicate(conversation, activity.id):
                log.info("dropping a repeated delivery of invoke %s", activity.id)
                return True
            if self.queued is not None:
                taken = await _on_loop(web_loop, self._enqueue_started(self.queued, activity, body, auth,
                                                                       {"text": text, "value": value}))
            else:
                taken = runner.submit(place or conversation, lambda: bot.answer_started(
                    self.surface.adapter, auth.claims_identity, auth.audience, activity, text, value))
            if not taken:
                runner.forget(conversation, activity.id)
            return taken

        return later

    async def _enqueue_started(self, queued: QueuedTurns, activity: Activity, body: dict[str, Any], auth: Any,
                               turn: dict[str, Any]) -> bool:
        self.surface.hand_over(activity)
        if (await queued.enqueue(activity, body, auth, turn)).status >= 500:
            self.surface.parsed.pop((activity.conversation.id, activity.id or ""), None)
            return False
        queued.wake()  # the invoke's answer is its first feedback; the worker sends typing as the turn starts
        return True

    async def dispatch(self, activity: Activity, body: dict[str, Any], auth: Any, place: Place | None
                       ) -> web.Response:
        if self.runner.is_duplicate(activity.conversation.id, activity.id):
            log.info("dropping a repeated delivery of activity %s", activity.id)
            return web.Response(status=200)
        if self.queued is not None:
            return await self._enqueue(self.queued, activity, body, auth)
        return self._submit(activity, auth, place)

    async def _enqueue(self, queued: QueuedTurns, activity: Activity, body: dict[str, Any], auth: Any
                       ) -> web.Response:
        self.surface.hand_over(activity)
        response = await queued.enqueue(activity, body, auth)
        if response.status >= 500:
            self.surface.parsed.pop((activity.conversation.id, activity.id or ""), None)
            self.runner.forget(activity.conversation.id, activity.id)
        elif self.surface.bot.addressed_to_bot(activity):
            # The typing indicator goes out from here, once the turn is safely queued: the user sees it even
            # while every worker is busy (the worker sends its own when the turn starts).
            queued.feedback(self.typing.first(activity, auth), self.typing.sending(activity))
        else:
            queued.wake()
        return response

    def _submit(self, activity: Activity, auth: Any, place: Place | None) -> web.Response:
        bot, adapter, runner = self.surface.bot, self.surface.adapter, self.runner
        addressed = bot.addressed_to_bot(activity)
        first = self.typing.first(activity, auth) if addressed else None
        abandoned = notice(activity, auth, ABANDONED_TEXT) if addressed else None
        deadline_s = self.surface.settings.turns.deadline_seconds
        late = notice(activity, auth, deadline_text(deadline_s)) if addressed else None
        turn = self.typing.told(activity, bot.on_turn)
        if not runner.submit(place or activity.conversation.id,
                             lambda: adapter.process_activity(auth, activity, turn), first=first,
                             on_abandon=abandoned, on_timeout=late):
            runner.forget(activity.conversation.id, activity.id)
            return problem(503, "The bot is restarting or overloaded; Teams will retry.")
        return web.Response(status=201)
