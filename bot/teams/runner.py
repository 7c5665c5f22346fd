"""The turn runner: answer the HTTP request at once, do the work in the background.

Teams re-sends an activity whose request takes more than ~15 s, and a tool loop can take longer. So a
request only registers the turn here and returns. The runner then:
- drops an activity id it has already seen (Teams' retries; state keeps ids too, across instances);
- runs the turns of one conversation one at a time, in arrival order (one FIFO lock per conversation);
- bounds the number of turns running at once, and the number waiting;
- on shutdown, lets running turns finish for a grace period, then cancels the rest cleanly.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

MAX_SEEN_IDS = 10_000
SEEN_TTL_S = 15 * 60


@dataclass
class _Lane:
    """One conversation's queue: its lock and how many turns hold or wait for it."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class TurnRunner:
    def __init__(self, *, max_concurrent: int = 32, max_pending: int = 500) -> None:
        self._slots = asyncio.Semaphore(max_concurrent)
        self._max_pending = max_pending
        self._lanes: dict[str, _Lane] = {}
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False

    @property
    def pending(self) -> int:
        return len(self._tasks)

    def is_duplicate(self, activity_id: str | None) -> bool:
        """True when this activity id was already accepted recently (and remembers it otherwise)."""
        if not activity_id:
            return False
        now = time.monotonic()
        while self._seen and (len(self._seen) > MAX_SEEN_IDS or next(iter(self._seen.values())) < now - SEEN_TTL_S):
            self._seen.popitem(last=False)
        if activity_id in self._seen:
            return True
        self._seen[activity_id] = now
        return False

    def can_accept(self) -> bool:
        return not self._closing and len(self._tasks) < self._max_pending

    def submit(self, conversation_key: str, work: Callable[[], Awaitable[None]], *,
               on_abandon: Callable[[], Awaitable[None]] | None = None) -> bool:
        """Queue ``work`` for the conversation; False when the bot is shutting down or overloaded."""
        if not self.can_accept():
            return False
        lane = self._lanes.setdefault(conversation_key, _Lane())
        lane.users += 1
        task = asyncio.create_task(self._run(conversation_key, lane, work, on_abandon))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _run(self, key: str, lane: _Lane, work: Callable[[], Awaitable[None]],
                   on_abandon: Callable[[], Awaitable[None]] | None) -> None:
        try:
            async with lane.lock:
                async with self._slots:
                    await work()
        except asyncio.CancelledError:
            log.warning("turn abandoned at shutdown")
            if on_abandon is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(on_abandon()), timeout=5)
                except Exception:  # noqa: BLE001 - best effort while shutting down
                    log.warning("could not tell the user the turn was abandoned")
            raise
        except Exception:  # noqa: BLE001 - the work reports its own failures; this is the last line
            log.exception("turn failed outside its own error handling")
        finally:
            lane.users -= 1
            if lane.users == 0 and self._lanes.get(key) is lane:
                del self._lanes[key]

    async def drain(self, grace_s: float) -> int:
        """Stop accepting turns, wait up to ``grace_s`` for running ones, cancel the rest; returns cancelled."""
        self._closing = True
        if not self._tasks:
            return 0
        _, unfinished = await asyncio.wait(set(self._tasks), timeout=grace_s)
        for task in unfinished:
            task.cancel()
        if unfinished:
            await asyncio.gather(*unfinished, return_exceptions=True)
        return len(unfinished)
