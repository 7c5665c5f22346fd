"""Log Analytics' limits kept by the bot: each identity's queries at most so many at once and so many per window,
the most urgent first.

The service allows each identity (the bot's app, or an analyst with ``QUERY_IDENTITY=user``) 5 queries at once
(more are queued by the service, and refused with HTTP 429 past 3 minutes or 200 queued) and 200 queries per 30 s
(429 past it). One investigation sends 7-11 queries at once and triage on arrival three investigations, so the bot
orders them itself: :class:`QueryScheduler` keeps one lane per identity, and a query waits in its lane for a slot.

- **Concurrency**: at most ``QueryLimits.concurrent`` queries of a lane run at once.
- **Rate**: a query is charged to the window from its start until ``window_s`` after it *ended*: so whenever the
  service saw it arrive, a query started later arrives more than a window after it, and the service never counts
  more than ``per_window`` in any window, however long the queries and the network take.
- **Priority** (:class:`Priority`, from the caller's context: :func:`query_priority`): interactive questions first,
  then the watches' poll, then triage, then bulk work (benchmarks); arrival order within one. A query that has waited
  ``aging_s`` counts as one priority more urgent, so background work is never starved for good.
- **Throttled by the service anyway** (another process, the SDK's own retries): :meth:`QueryScheduler.hold` pauses
  the whole lane for the service's Retry-After (or the caller's backoff), since the service throttles the identity,
  not the query.
- **Bounded waits**: a query that would wait past ``queue_wait_s`` in its lane, or behind a hold longer than the
  caller's patience (the backend's bound on waiting out a Retry-After), is not sent, even when the hold comes while
  it waits: :meth:`QueryScheduler.acquire` returns :class:`Busy`, which the backend turns into an error that says so.

Several processes (worker processes, instances) share one identity's budget by each taking a share of it
(:meth:`QueryLimits.share`); docs/queries.md says why and what that costs.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from enum import IntEnum

from bot import telemetry

MAX_IDLE_LANES = 64  # lanes of identities with nothing under way kept before they are swept


class Priority(IntEnum):
    """Who is waiting for a query: lower runs first."""

    INTERACTIVE = 0  # an analyst's question, command, card press or search
    WATCH = 1  # the watches' poll: new incidents posted
    TRIAGE = 2  # triage on arrival, under a card already posted
    BULK = 3  # benchmarks and other work nobody waits on


_priority: ContextVar[Priority] = ContextVar("bot_sentinel_query_priority", default=Priority.INTERACTIVE)


@contextlib.contextmanager
def query_priority(priority: Priority) -> Iterator[None]:
    """Queries inside (and in tasks started inside: they copy the context) are scheduled at ``priority``."""
    token = _priority.set(priority)
    try:
        yield
    finally:
        _priority.reset(token)


def current_priority() -> Priority:
    """The priority of this context's queries: interactive unless a caller said otherwise."""
    return _priority.get()


@dataclass(frozen=True)
class QueryLimits:
    """One identity's budget in this process, and how long a query may wait for it."""

    concurrent: int = 5
    per_window: int = 200
    window_s: float = 30.0
    queue_wait_s: float = 60.0
    aging_s: float = 30.0  # waited this long, a query counts as one priority more urgent (0: never)

    def share(self, shares: int) -> QueryLimits:
        """This process's part when ``shares`` processes use the same identities: the budget divided, at least 1."""
        if shares <= 1:
            return self
        return replace(self, concurrent=max(1, self.concurrent // shares),
                       per_window=max(1, self.per_window // shares))


@dataclass(frozen=True)
class Busy:
    """A query not sent: it would have waited longer than it may."""

    waited_s: float
    ahead: int  # queries running or waiting before it in its lane
    held_s: float = 0.0  # the service asked the identity to wait this much longer (0: the budget was just full)


@dataclass(eq=False)
class _Waiter:
    priority: Priority
    since: float
    seq: int
    deadline: float  # when its queue wait ends: a hold ending later refuses it
    patience_s: float  # a hold longer than this refuses it (the caller reports such a Retry-After, not waits it)
    # True: its slot; False: refused, the identity was held longer than its patience.
    granted: asyncio.Future[bool] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def refuses(self, held_until: float, held_s: float) -> bool:
        return held_until > self.deadline or held_s > self.patience_s


class Slot:
    """A granted place in a lane; ``release()`` when the query's response is in (at most once)."""

    def __init__(self, lane: _Lane) -> None:
        self._lane: _Lane | None = lane

    def release(self) -> None:
        if self._lane is not None:
            self._lane.release()
            self._lane = None


class QueryScheduler:
    """One lane per identity, each within ``limits``; shared by every query of one process."""

    def __init__(self, limits: QueryLimits | None = None, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.limits = limits or QueryLimits()
        self._clock, self._sleep = clock, sleep
        self._lanes: dict[str, _Lane] = {}
        self._seq = itertools.count()

    async def acquire(self, identity: str, priority: Priority | None = None, since: float | None = None,
                      patience_s: float = math.inf) -> Slot | Busy:
        """A slot for one query of ``identity`` (``since``: when the query first asked, for a retry), or Busy: it
        would wait past ``queue_wait_s``, or behind a hold the service asked for longer than ``patience_s``."""
        lane = self._lane(identity)
        now = self._clock()
        chosen = current_priority() if priority is None else priority
        got = await self._acquire(lane, chosen, now, now if since is None else since, patience_s)
        telemetry.instruments().query_wait.record(self._clock() - now, {
            "sentinel.priority": chosen.name.lower(), "sentinel.sent": isinstance(got, Slot)})
        return got

    async def _acquire(self, lane: _Lane, priority: Priority, now: float, asked: float,
                       patience_s: float) -> Slot | Busy:
        remaining = self.limits.queue_wait_s - (now - asked)
        waiter = _Waiter(priority, asked, next(self._seq), deadline=now + remaining, patience_s=patience_s)
        held = lane.held_until - now
        if waiter.refuses(lane.held_until, held):  # the service asked for a longer pause than this query may wait
            return Busy(now - waiter.since, lane.ahead(), held_s=held)
        lane.waiting.append(waiter)
        lane.dispatch()
        try:
            granted = await asyncio.wait_for(waiter.granted, timeout=max(remaining, 0.0))
        except TimeoutError:
            lane.forget(waiter)
            return Busy(self._clock() - waiter.since, lane.ahead(), held_s=max(0.0, lane.held_until - self._clock()))
        except asyncio.CancelledError:  # the turn gave up (its deadline): its place, or its slot, goes to the next
            if waiter.granted.done() and not waiter.granted.cancelled() and waiter.granted.result():
                lane.release()
            else:
                lane.forget(waiter)
            raise
        if not granted:  # a hold longer than it may wait came while it waited
            return Busy(self._clock() - waiter.since, lane.ahead(), held_s=lane.held_until - self._clock())
        return Slot(lane)

    def hold(self, identity: str, seconds: float) -> None:
        """The service throttled ``identity``: none of its queries starts for ``seconds``."""
        lane, now = self._lane(identity), self._clock()
        lane.held_until = max(lane.held_until, now + max(0.0, seconds))
        for waiter in lane.waiting:  # those who may not wait that long are told now, not when their wait ends
            if not waiter.granted.done() and waiter.refuses(lane.held_until, lane.held_until - now):
                waiter.granted.set_result(False)
        lane.dispatch()

    def close(self) -> None:
        """Stop the lanes' wake-up timers (the queries still waiting time out on their own)."""
        for lane in self._lanes.values():
            lane.stop()

    def state(self, identity: str) -> dict[str, int]:
        """Running and waiting queries of a lane (logs, tests, benchmarks)."""
        lane = self._lanes.get(identity)
        if lane is None:
            return {"running": 0, "waiting": 0, "peak": 0}
        return {"running": lane.running, "waiting": len(lane.waiting), "peak": lane.peak}

    def _lane(self, identity: str) -> _Lane:
        lane = self._lanes.get(identity)
        if lane is None:
            if len(self._lanes) >= MAX_IDLE_LANES:
                self._sweep()
            lane = self._lanes[identity] = _Lane(self.limits, self._clock, self._sleep)
        return lane

    def _sweep(self) -> None:
        now = self._clock()
        for key in [key for key, lane in self._lanes.items() if lane.idle(now)]:
            del self._lanes[key]


class _Lane:
    """One identity's queries: those running, those that ended within the window, those waiting."""

    def __init__(self, limits: QueryLimits, clock: Callable[[], float],
                 sleep: Callable[[float], Awaitable[None]]) -> None:
        self.limits, self._clock, self._sleep = limits, clock, sleep
        self.running = 0
        self.peak = 0
        self.ended: deque[float] = deque()  # when each query still charged to the window ended
        self.waiting: list[_Waiter] = []
        self.held_until = 0.0
        self._timer: asyncio.Task[None] | None = None
        self._timer_at = math.inf

    def ahead(self) -> int:
        return self.running + len(self.waiting)

    def idle(self, now: float) -> bool:
        self._expire(now)
        return not (self.running or self.waiting or self.ended or self._timer) and self.held_until <= now

    def release(self) -> None:
        self.running -= 1
        self.ended.append(self._clock())
        self.dispatch()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = None, math.inf

    def forget(self, waiter: _Waiter) -> None:
        if waiter in self.waiting:
            self.waiting.remove(waiter)

    def dispatch(self) -> None:
        """Start what may start now, most urgent first; if time must pass first, wake up then."""
        now = self._clock()
        self.waiting = [w for w in self.waiting if not w.granted.done()]
        while self.waiting and self.running < self.limits.concurrent:
            free_at = self._free_at(now)
            if free_at > now:
                self._wake_at(free_at)
                return
            waiter = min(self.waiting, key=lambda w: (self._urgency(w, now), w.since, w.seq))
            self.waiting.remove(waiter)
            self.running += 1
            self.peak = max(self.peak, self.running)
            waiter.granted.set_result(True)

    def _urgency(self, waiter: _Waiter, now: float) -> int:
        aged = int((now - waiter.since) // self.limits.aging_s) if self.limits.aging_s > 0 else 0
        return int(waiter.priority) - aged

    def _free_at(self, now: float) -> float:
        """When the window has room for one more (and no hold is on): ``now`` if it has."""
        self._expire(now)
        at = max(now, self.held_until)
        over = self.running + len(self.ended) - self.limits.per_window + 1
        if over > 0:
            if over > len(self.ended):  # the running ones alone fill the window: a release will dispatch
                return math.inf
            at = max(at, self.ended[over - 1] + self.limits.window_s)
        return at

    def _expire(self, now: float) -> None:
        while self.ended and self.ended[0] <= now - self.limits.window_s:
            self.ended.popleft()

    def _wake_at(self, at: float) -> None:
        if at == math.inf or (self._timer is not None and self._timer_at <= at):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = asyncio.get_running_loop().create_task(self._wake(at))

    async def _wake(self, at: float) -> None:
        await self._sleep(max(0.0, at - self._clock()))
        self._timer, self._timer_at = None, math.inf
        self.dispatch()
