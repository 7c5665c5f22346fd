"""Durable turns: what the front, the queues and the workers share.

A turn is queued as an :class:`Envelope` (the checked activity, its number in its conversation, who sent it). Two
queues keep the same contract, :class:`TurnQueue`: Azure Storage for several instances (bot/turns/azure_queue.py,
TURN_QUEUE=azure) and a SQLite file for the processes of one machine (bot/turns/local_queue.py, TURN_QUEUE=local).
The workers (bot/turns/worker.py) know only this contract.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger(__name__)

ENVELOPE_VERSION = 1
LEASE_S = 15  # Azure's shortest blob lease: a dead worker's conversation is free again this soon
VISIBILITY_S = 15  # a taken turn reappears this long after its worker stops renewing it
RENEW_S = 5  # how often a running turn renews its lease and its message's visibility
MARKER_TTL_S = 24 * 3600  # Teams re-sends within minutes; a marker older than this no longer counts
# The most one look may add to how long a thing was seen unchanged (:class:`Sightings`): a clock that jumps between two
# looks counts this much at most, so a lease renewed every RENEW_S is never taken over because of a jump.
MAX_STEP_S = 2.0
Clock = Callable[[], float]


class TurnQueueError(Exception):
    """The queue or its blobs failed in a way the caller should report (the message says what to check)."""


class LeaseLost(TurnQueueError):
    """A write under a conversation's lease was refused by the store: another worker holds the lease now."""


class Sightings:
    """How long this process has seen each thing unchanged (a lease's renewal count, a turn's receipt, a
    conversation's missing number), measured only by this process's own clock between its own looks.

    Nothing is compared with a time another process wrote, so clocks that disagree do not matter; each step
    between two looks counts at most ``max_step_s`` (a clock that jumps forward adds that much, one that jumps back
    nothing), and a first look counts zero: a thing is old only once this process has watched it long enough.
    """

    def __init__(self, clock: Clock = time.monotonic, max_step_s: float = MAX_STEP_S, forget_s: float = 120.0) -> None:
        self._clock = clock
        self._max_step_s = max_step_s
        self._forget_s = forget_s
        self._seen: dict[Hashable, tuple[Hashable, float, float]] = {}  # key -> (version, unchanged for, last look)
        self._looks = 0

    def unchanged_for(self, key: Hashable, version: Hashable) -> float:
        """Seconds ``key`` has been seen at ``version`` by this process's looks (0.0 at the first look)."""
        now = self._clock()
        self._looks += 1
        if self._looks % 1000 == 0:
            self._seen = {k: v for k, v in self._seen.items() if 0.0 <= now - v[2] <= self._forget_s}
        seen = self._seen.get(key)
        if seen is None or seen[0] != version:
            self._seen[key] = (version, 0.0, now)
            return 0.0
        unchanged = seen[1] + min(max(now - seen[2], 0.0), self._max_step_s)
        self._seen[key] = (version, unchanged, now)
        return unchanged

    def forget(self, key: Hashable) -> None:
        self._seen.pop(key, None)


@dataclass(frozen=True)
class Envelope:
    """One turn as queued: the checked activity (as its JSON), its place in its conversation, who sent it, and for an
    invoke that starts a turn (a card press), the turn the front read from it (``turn``: its text and value), which
    the worker runs instead of the invoke (answered already, in its own HTTP response)."""

    conversation_id: str
    activity_id: str
    number: int
    activity: dict[str, Any]
    auth: dict[str, Any]  # what the front's check of the channel token established (connectors.trusted)
    turn: dict[str, Any] | None = None

    def encode(self) -> str:
        data = {"v": ENVELOPE_VERSION, "conversation": self.conversation_id, "id": self.activity_id, "n": self.number,
                "activity": self.activity, "auth": self.auth}
        if self.turn is not None:
            data["turn"] = self.turn
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def decode(cls, text: Any) -> Envelope:
        """ValueError for anything this version did not write."""
        try:
            data = json.loads(text)
            if data.get("v") != ENVELOPE_VERSION:
                raise ValueError(f"unknown envelope version {data.get('v')!r}")
            turn = data.get("turn")
            envelope = cls(str(data["conversation"]), str(data["id"]), int(data["n"]), dict(data["activity"]),
                           dict(data["auth"]), dict(turn) if turn is not None else None)
        except (TypeError, KeyError, AttributeError, json.JSONDecodeError) as error:
            raise ValueError(f"not a turn envelope: {type(error).__name__}") from None
        if not envelope.conversation_id or envelope.number < 0:
            raise ValueError("not a turn envelope: no conversation or a negative number")
        return envelope


@dataclass
class Taken:
    """A queue message a worker holds: its envelope (None when it could not be read) and receipt."""

    message: Any
    envelope: Envelope | None
    problem: str = ""
    guard: asyncio.Lock = field(default_factory=asyncio.Lock)  # a receipt changes with each update: one at a time

    @property
    def deliveries(self) -> int:
        return int(self.message.dequeue_count or 0)


@dataclass
class LockState:
    """What a conversation's lock blob holds: the number of the next turn to run, and the current one's tries. (No
    time: how long a number has been missing each worker measures itself, see worker.py.)"""

    next: int = 0
    tries: int = 0  # runs started of turn ``next``

    def advance(self, number: int) -> None:
        self.next, self.tries = number, 0

    def dumps(self) -> bytes:
        return json.dumps({"next": self.next, "tries": self.tries}).encode()

    @classmethod
    def loads(cls, raw: bytes) -> LockState:
        try:
            data = json.loads(raw or b"{}")
            return cls(int(data.get("next", 0)), int(data.get("tries", 0)))
        except (ValueError, TypeError, AttributeError):
            log.warning("a conversation's lock state could not be read; starting its count again")
            return cls()


class RenewedLease:
    """A held conversation lease, renewed every RENEW_S in the background until released; the queues' leases
    say how to renew (False: it was lost, someone else holds it now) and release one."""

    def __init__(self) -> None:
        self.lost = False
        self._renewer = asyncio.get_running_loop().create_task(self._keep())

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(RENEW_S)
            try:
                held = await self._renew()
            except Exception as error:  # noqa: BLE001 - tried again; the turn's writes under the lease tell
                log.info("could not renew a conversation lease (%s)", type(error).__name__)
                continue
            if not held:
                self.lost = True
                log.warning("lost a conversation lease")
                return

    async def release(self) -> None:
        self._renewer.cancel()
        try:
            await self._release()
        except Exception as error:  # noqa: BLE001 - it expires by itself within LEASE_S
            log.info("could not release a conversation lease (%s); it expires by itself", type(error).__name__)

    async def _renew(self) -> bool:
        raise NotImplementedError

    async def _release(self) -> None:
        raise NotImplementedError


class ConversationLease(Protocol):
    """A worker's hold on one conversation: while it lasts, no other worker runs the conversation's turns."""

    lost: bool

    async def read(self) -> LockState: ...

    async def write(self, state: LockState) -> None: ...

    async def release(self) -> None: ...


class TurnQueue(Protocol):
    """What the front and the workers need of a queue of turns."""

    poll_max_s: float  # the longest pause of an idle worker between two looks at the queue

    async def ensure(self) -> None: ...

    async def close(self) -> None: ...

    async def waiting(self) -> int:
        """Turns on the queue (taken or not; Azure's count is approximate): for /readyz."""
        ...

    async def enqueue(self, conversation_id: str, activity_id: str, activity: dict[str, Any],
                      auth: dict[str, Any], turn: dict[str, Any] | None = None) -> int:
        """Number the activity in its conversation and queue it (with ``turn``: an invoke's, see :class:`Envelope`);
        returns its number once it is durable."""
        ...

    async def take(self, count: int) -> list[Taken]: ...

    async def keep(self, taken: Taken, seconds: int = VISIBILITY_S) -> None: ...

    async def done(self, taken: Taken, lease: ConversationLease | None = None, state: LockState | None = None) -> None:
        """Delete a taken turn (answered); with ``lease`` and ``state``, the lease's lock state is written first (under
        the lease: :class:`LeaseLost`, and nothing deleted, when it is no longer this worker's)."""
        ...

    async def move_aside(self, taken: Taken, reason: str) -> None: ...

    async def lease(self, conversation_id: str) -> ConversationLease | None: ...

    async def claim(self, envelope: Envelope, message_id: str, lease: ConversationLease | None = None,
                    state: LockState | None = None) -> bool:
        """Whether this delivery may answer the activity (its marker); with ``lease``, :class:`LeaseLost` when the
        lease is no longer this worker's; with ``state`` too, the lease's lock state is written first (the local
        queue: in the same transaction)."""
        ...
