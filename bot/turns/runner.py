"""The turn runner: the HTTP request is answered at once, the turn runs on a worker event loop.

Teams re-sends an activity whose request takes more than ~15 s, and a tool loop can take longer. So a
request only registers the turn here and returns. Turns run on their own event loop in a worker
thread: however busy they keep it, the web server's loop stays free to acknowledge new requests (the
GIL hands over every few milliseconds). The runner also:
- drops an activity it has already accepted (Teams' retries), keyed by conversation and activity id:
  Teams message ids are unique only within a conversation (state keeps ids too, across instances);
- gives each turn its place in its conversation's line synchronously when it arrives (:meth:`reserve`,
  or :meth:`submit` with a key), before any network call, so the turns of one conversation run one at
  a time in arrival order however long their early steps take;
- runs an optional ``first`` step at once (the typing indicator), before the turn waits for its turn;
- bounds the turns running at once, and the number waiting;
- gives each turn one overall deadline (:func:`run_with_deadline`): a turn still running then is cancelled,
  its user told, and the conversation's next turn goes ahead;
- on shutdown, lets running turns finish for a grace period, then cancels the rest cleanly.

Every client a turn uses (model, Log Analytics, Bot Connector, Blob state) lives on the worker loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

log = logging.getLogger(__name__)

MAX_SEEN_IDS = 10_000
SEEN_TTL_S = 15 * 60
SWITCH_INTERVAL_S = 0.001
T = TypeVar("T")
Work = Callable[[], Awaitable[None]]


@dataclass
class Place:
    """A turn's place in its conversation's line, numbered in arrival order."""

    key: str
    number: int
    used: bool = False  # submitted or released: a place is given back exactly once


@dataclass
class _Lane:
    """One conversation's line. ``issued`` is changed under the runner's guard (any thread); the rest only on
    the worker loop."""

    issued: int = 0  # places handed out
    serving: int = 0  # the place whose turn may run now
    done: set[int] = field(default_factory=set)  # places finished or given back before their turn came
    waiting: dict[int, asyncio.Future[None]] = field(default_factory=dict)


async def run_with_deadline(work: Work, deadline_s: float | None, on_timeout: Work | None = None) -> bool:
    """Run ``work`` for at most ``deadline_s``; past it, cancel it and run ``on_timeout`` (best effort, 10 s).

    False when the deadline cut the turn short. A ``TimeoutError`` the work raises itself is its own failure,
    not the deadline's, and propagates.
    """
    if deadline_s is None:
        await work()
        return True
    try:
        async with asyncio.timeout(deadline_s) as scope:
            await work()
        return True
    except TimeoutError:
        if not scope.expired():
            raise
    log.warning("turn stopped at its %.0f s deadline", deadline_s)
    if on_timeout is not None:
        try:
            await asyncio.wait_for(on_timeout(), timeout=10)
        except Exception:  # noqa: BLE001 - the turn is over either way
            log.warning("could not tell the user the turn ran out of time")
    return False


class TurnRunner:
    def __init__(self, *, max_concurrent: int = 32, max_pending: int = 500, deadline_s: float | None = None) -> None:
        self._max_concurrent = max_concurrent
        self._deadline_s = deadline_s
        self._max_pending = max_pending
        self._guard = threading.Lock()  # for what the web server's thread touches
        self._seen: OrderedDict[tuple[str, str], float] = OrderedDict()  # (conversation, activity id)
        self._pending = 0
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lanes: dict[str, _Lane] = {}  # conversation key -> its line (see _Lane for who touches what)
        # Worker-loop state, created on the worker loop.
        self._slots: asyncio.Semaphore | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Every client turns use lives on the worker loop and is closed there at stop: whoever builds one (bot.app)
        # pushes its close here. A runner never started closes them on the caller's loop.
        self.closes = contextlib.AsyncExitStack()

    # ---- lifecycle ----------------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        # With turns busy on another thread, the web server's thread waits for the GIL at every wake-up;
        # a 1 ms switch interval (Python's default is 5 ms) keeps acknowledgements prompt.
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            self._slots = asyncio.Semaphore(self._max_concurrent)
            loop.call_soon(ready.set)
            loop.run_forever()
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="turns", daemon=True)
        self._thread.start()
        ready.wait(timeout=10)

    async def stop(self, grace_s: float) -> int:
        """Stop accepting turns, wait up to ``grace_s`` for running ones, cancel the rest, then close :attr:`closes`
        on the worker loop; returns cancelled."""
        with self._guard:
            self._closing = True
        if self._loop is None:
            await self._close()
            return 0
        if self._thread is None:  # already stopped
            return 0
        cancelled = await self.call(self._drain(grace_s))
        await self._close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.to_thread(self._thread.join, 10)
        self._thread = None
        return cancelled

    async def _close(self) -> None:
        try:
            await self.call(self.closes.aclose())
        except Exception:  # shutting down: log and go on
            log.warning("a cleanup step failed at shutdown", exc_info=True)

    # ---- from the web server's loop -----------------------------------------------------------------------

    @property
    def pending(self) -> int:
        return self._pending

    def is_duplicate(self, conversation_key: str, activity_id: str | None) -> bool:
        """True when this conversation's activity id was already accepted recently (remembered otherwise).

        Keyed by both: Teams message ids are unique only within a conversation, so two chats can send the
        same id in the same millisecond.
        """
        if not activity_id:
            return False
        seen = (conversation_key, activity_id)
        now = time.monotonic()
        with self._guard:
            while self._seen and (len(self._seen) > MAX_SEEN_IDS
                                  or next(iter(self._seen.values())) < now - SEEN_TTL_S):
                self._seen.popitem(last=False)
            if seen in self._seen:
                return True
            self._seen[seen] = now
            return False

    def forget(self, conversation_key: str, activity_id: str | None) -> None:
        """Forget an accepted activity that was not taken after all (a 503): Teams' retry must not be dropped."""
        with self._guard:
            self._seen.pop((conversation_key, activity_id or ""), None)

    def reserve(self, conversation_key: str) -> Place:
        """Take the next place in the conversation's line, now. Pass it to :meth:`submit`, or give it back with
        :meth:`release`; until then the conversation's later turns wait for it. Safe from any thread."""
        with self._guard:
            lane = self._lanes.setdefault(conversation_key, _Lane())
            lane.issued += 1
            return Place(conversation_key, lane.issued - 1)

    def release(self, place: Place) -> None:
        """Give back a place that will not be submitted (a request refused after it arrived). Idempotent."""
        with self._guard:
            if place.used:
                return
            place.used = True
        if self._loop is not None and self._thread is not None:
            with contextlib.suppress(RuntimeError):  # a closed worker loop: nothing waits any more
                self._loop.call_soon_threadsafe(self._finish, place)

    def can_accept(self) -> bool:
        return not self._closing and self._pending < self._max_pending and self._loop is not None

    def submit(self, place: Place | str, work: Work, *, first: Work | None = None,
               on_abandon: Work | None = None, on_timeout: Work | None = None) -> bool:
        """Queue ``work`` at its place (or, given a conversation key, at the end of that conversation's line);
        ``first`` runs at once; ``on_abandon`` if shutdown cuts the turn short, ``on_timeout`` if its deadline
        does. False when shutting down or overloaded (a given place is then released).

        Safe to call from any thread, including the worker loop itself.
        """
        if isinstance(place, str):
            place = self.reserve(place)
        with self._guard:
            accepted = self.can_accept() and not place.used
            if accepted:
                self._pending += 1
                place.used = True
        if not accepted:
            self.release(place)
            return False
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(self._start(place, work, first, on_abandon, on_timeout), self._loop)
        return True

    def background(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run a long-lived coroutine (a queue worker) on the worker loop; the future completes when it ends."""
        assert self._loop is not None, "start the runner first"
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def call_soon(self, callback: Callable[[], Any]) -> None:
        """Call ``callback`` on the worker loop (for objects that live there, e.g. to stop a queue worker)."""
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(callback)

    async def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the worker loop and await its result from another loop."""
        if self._loop is None:
            return await coroutine
        if asyncio.get_running_loop() is self._loop:
            return await coroutine
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return await asyncio.wrap_future(future)

    # ---- on the worker loop -------------------------------------------------------------------------------

    async def _start(self, place: Place, work: Work, first: Work | None, on_abandon: Work | None,
                     on_timeout: Work | None) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            if first is not None:
                try:
                    await first()
                except Exception:  # feedback is best effort; the turn still runs
                    log.info("early feedback not delivered", exc_info=True)
            await self._wait_for_turn(place)
            assert self._slots is not None
            async with self._slots:
                await run_with_deadline(work, self._deadline_s, on_timeout)
        except asyncio.CancelledError:
            log.warning("turn abandoned at shutdown")
            if on_abandon is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(on_abandon()), timeout=5)
                except Exception:  # noqa: BLE001 - best effort while shutting down
                    log.warning("could not tell the user the turn was abandoned")
            raise
        except Exception:  # the work reports its own failures; this is the last line
            log.exception("turn failed outside its own error handling")
        finally:
            self._finish(place)
            self._tasks.discard(task)
            with self._guard:
                self._pending -= 1

    def _lane(self, key: str) -> _Lane | None:
        with self._guard:
            return self._lanes.get(key)

    async def _wait_for_turn(self, place: Place) -> None:
        lane = self._lane(place.key)
        if lane is None or lane.serving == place.number:
            return
        waiter = asyncio.get_running_loop().create_future()
        lane.waiting[place.number] = waiter
        try:
            await waiter
        finally:
            lane.waiting.pop(place.number, None)

    def _finish(self, place: Place) -> None:
        """The turn at ``place`` is over (run, failed, cancelled or never submitted): the next one may go."""
        lane = self._lane(place.key)
        if lane is None:
            return
        lane.done.add(place.number)
        while lane.serving in lane.done:
            lane.done.discard(lane.serving)
            lane.serving += 1
        waiter = lane.waiting.get(lane.serving)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        with self._guard:
            if lane.serving == lane.issued and self._lanes.get(place.key) is lane:
                del self._lanes[place.key]

    async def _drain(self, grace_s: float) -> int:
        tasks = set(self._tasks)
        if not tasks:
            return 0
        _, unfinished = await asyncio.wait(tasks, timeout=grace_s)
        for task in unfinished:
            task.cancel()
        if unfinished:
            await asyncio.gather(*unfinished, return_exceptions=True)
        return len(unfinished)
