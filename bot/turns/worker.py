"""Workers of durable turns: take turns from the queue and run them, one conversation at a time, in order.

A worker runs in the web process (on the turn runner's loop) or alone (``python -m bot worker``); any number
of them share one queue (bot/turns/contract.py: on Azure Storage, from any number of machines; in a SQLite file,
from the processes of one machine). For each message taken:
- an envelope that cannot be read is set aside at once (the poison queue): it can never block anything;
- the conversation's lease is taken (another worker holding it: the message is shown again in a second);
- a turn numbered below the conversation's ``next`` was already answered: its message is deleted; one above it
  waits for the turns before it, unless the conversation has waited :data:`GAP_S` for them (a number the front
  took but never queued: it failed before its enqueue), when the missing numbers are skipped;
- a turn started :attr:`max_attempts` times without finishing (it crashed its worker each time) is moved
  aside and its user told; the conversation goes on with its next turn;
- a repeated delivery of an answered activity (another instance queued it too) is recognised by its marker;
- otherwise the turn runs (with its deadline), ``next`` moves on, and the message is deleted. A worker that
  dies before the delete leaves the message to reappear: the turn is run again elsewhere or after restart.

Turns of one conversation taken by one worker wait in a local line under one lease instead of bouncing back
to the queue. Leases and visibility are decided by the store (Storage's server-timed leases and visibility; the
local queue's fencing tokens, see local_queue.py), and every write under a lease is refused once it is lost
(:class:`~bot.turns.contract.LeaseLost`): the worker then stops, logs one line, and leaves the conversation's turns
to the worker that holds it now. No clock is compared across processes: the gap wait is timed by each worker's own
monotonic clock, from its own first sight of the gap (:class:`~bot.turns.contract.Sightings`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from bot.turns.contract import RENEW_S, Clock, ConversationLease, Envelope, LeaseLost, Sightings, Taken, TurnQueue

log = logging.getLogger(__name__)

# How long a conversation waits for a missing turn number before skipping it: longer than a dead worker's
# turn stays invisible (VISIBILITY_S), so a number is skipped only when its turn was never queued.
GAP_S = 25.0
DEFER_S = 1  # a turn that must wait is shown again this soon (the queue's visibility counts whole seconds)
POLL_MIN_S = 0.05  # pause after an empty queue, doubling up to the queue's poll_max_s
ERROR_PAUSE_S = 1.0  # pause after the queue failed
MAX_HELD_PER_SLOT = 4  # messages a worker holds (running or waiting in line) per turn it may run at once
RunTurn = Callable[[Envelope], Awaitable[None]]
Tell = Callable[[Envelope, str], Awaitable[None]]
GIVEN_UP_TEXT = ("I could not answer this message: trying it {tries} times failed, so I have set it aside. "
                 "Please send it again, perhaps worded differently.")


class TurnWorker:
    def __init__(self, turns: TurnQueue, run: RunTurn, tell: Tell, *, concurrency: int = 8,
                 max_attempts: int = 3, gap_s: float = GAP_S, clock: Clock = time.monotonic) -> None:
        self.turns = turns
        self._run = run
        self._tell = tell
        self.concurrency = concurrency
        self.max_attempts = max_attempts
        self.gap_s = gap_s
        self._gaps = Sightings(clock)  # conversation -> how long this worker has seen its ``next`` missing
        self._lines: dict[str, list[Taken]] = {}  # conversation -> turns taken here, waiting or running
        self._tasks: set[asyncio.Task[None]] = set()
        self._stop = asyncio.Event()
        self._arrived = asyncio.Event()  # set by wake() (and stop()): look at the queue now
        self._loop: asyncio.AbstractEventLoop | None = None

    def stop(self) -> None:
        self._stop.set()
        self._arrived.set()

    def wake(self) -> None:
        """A turn was queued by this process (its web front): look at the queue at once instead of at the next poll.
        Safe from any thread; turns queued elsewhere are found by polling, as before."""
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the worker's loop has closed
                loop.call_soon_threadsafe(self._arrived.set)

    @property
    def held(self) -> int:
        return sum(len(line) for line in self._lines.values())

    async def run(self, grace_s: float = 20.0) -> None:
        """Take and run turns until :meth:`stop`; then let running turns finish for ``grace_s`` and cancel the
        rest (their messages reappear: another worker, or this one after a restart, runs them)."""
        self._loop = asyncio.get_running_loop()
        keeper = self._loop.create_task(self._keep_hidden())
        pause = POLL_MIN_S
        try:
            while not self._stop.is_set():
                # Turns waiting in a conversation's line here count too, so one busy conversation cannot make this
                # worker hoard messages other workers could run.
                room = min(self.concurrency - len(self._tasks), MAX_HELD_PER_SLOT * self.concurrency - self.held)
                if room <= 0:
                    if self._tasks:
                        await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
                    continue
                self._arrived.clear()  # before the look: a turn queued while it runs wakes the next wait at once
                asked = min(room, 32)
                try:
                    batch = await self.turns.take(asked)
                except Exception as error:  # noqa: BLE001 - an outage: wait and try again
                    log.warning("could not take turns from the queue (%s)", type(error).__name__)
                    batch = []
                    pause = ERROR_PAUSE_S
                for taken in batch:
                    self._accept(taken)
                if len(batch) == asked:  # perhaps more waiting: look again at once
                    pause = POLL_MIN_S
                    continue
                if batch:  # the queue had no more: the next look at a wake(), or after the shortest pause
                    pause = POLL_MIN_S
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._arrived.wait(), pause)
                if not batch:
                    pause = min(pause * 2, self.turns.poll_max_s)
        finally:
            if self._tasks:
                _, unfinished = await asyncio.wait(set(self._tasks), timeout=grace_s)
                for task in unfinished:
                    task.cancel()
                await asyncio.gather(*unfinished, return_exceptions=True)
            keeper.cancel()

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _accept(self, taken: Taken) -> None:
        if taken.envelope is None:
            self._spawn(self._set_aside(taken, taken.problem))
            return
        key = taken.envelope.conversation_id
        line = self._lines.get(key)
        if line is not None:
            line.append(taken)  # its conversation's turns already run here: wait in line, under that lease
            return
        self._lines[key] = [taken]
        self._spawn(self._serve(key))

    async def _serve(self, key: str) -> None:
        """Run the conversation's turns taken here, lowest number first, under one lease."""
        line = self._lines[key]
        lease: ConversationLease | None = None
        try:
            lease = await self.turns.lease(key)
            if lease is None:  # another worker runs this conversation now
                await self._show_again(line)
                return
            while line:
                line.sort(key=lambda t: t.envelope.number if t.envelope else -1)
                if not await self._one(line[0], lease):
                    await self._show_again(line)  # an earlier turn is elsewhere: let it run first
                    return
                line.pop(0)
        except asyncio.CancelledError:
            await self._show_again(line, at_once=True)
            raise
        except LeaseLost:  # its turns reappear for the worker that holds the lease now
            log.warning("lost a conversation's lease to another worker; leaving its turns to that worker")
        except Exception:
            log.exception("a conversation's turns could not be run; they will be delivered again")
        finally:
            left = self._lines.pop(key, [])
            if lease is not None:
                await lease.release()
            if left:  # taken while the line was closing: back to the queue for the next worker
                await self._show_again(left, at_once=True)

    async def _one(self, taken: Taken, lease: ConversationLease) -> bool:
        """Settle one turn under the lease; False when it must wait for an earlier one first."""
        envelope = taken.envelope
        assert envelope is not None
        if lease.lost:
            raise LeaseLost("the conversation's lease could not be renewed")
        state = await lease.read()
        if envelope.number < state.next:
            log.info("turn %d of a conversation was already answered; dropping its message", envelope.number)
            await self.turns.done(taken)
            return True
        if envelope.number > state.next:
            if self._gaps.unchanged_for(envelope.conversation_id, state.next) < self.gap_s:
                return False
            log.warning("skipping turn numbers %d-%d of a conversation: they were never queued", state.next,
                        envelope.number - 1)
            state.advance(envelope.number)
        if state.tries >= self.max_attempts:
            log.error("a turn failed %d times; moving it aside and telling its user", state.tries)
            with contextlib.suppress(Exception):
                await self._tell(envelope, GIVEN_UP_TEXT.format(tries=state.tries))
            await self.turns.move_aside(taken, f"started {state.tries} times without finishing")
            state.advance(envelope.number + 1)
            await lease.write(state)
            return True
        state.tries += 1
        # A start is counted before the turn runs, so a crash counts too: written with the claim of its marker (the
        # local queue: one transaction).
        if await self.turns.claim(envelope, str(taken.message.id), lease, state):
            try:
                await self._run(envelope)
            except Exception:
                log.exception("a queued turn failed outside its own error handling")
        else:
            log.info("dropping a repeated delivery of activity %s", envelope.activity_id)
        state.advance(envelope.number + 1)
        await self.turns.done(taken, lease, state)  # the next number written, then the message deleted
        return True

    async def _set_aside(self, taken: Taken, reason: str) -> None:
        log.warning("moving an unreadable queue message aside: %s", reason)
        try:
            await self.turns.move_aside(taken, reason)
        except Exception as error:  # noqa: BLE001 - it reappears and is tried again
            log.warning("could not move a message aside (%s)", type(error).__name__)

    async def _show_again(self, line: list[Taken], *, at_once: bool = False) -> None:
        waiting = list(line)
        line.clear()
        for taken in waiting:
            with contextlib.suppress(Exception):  # else it reappears when its visibility lapses
                await self.turns.keep(taken, 0 if at_once else DEFER_S)

    async def _keep_hidden(self) -> None:
        """Keep every message held here hidden while its turn waits or runs."""
        while True:
            await asyncio.sleep(RENEW_S)
            for line in list(self._lines.values()):
                for taken in list(line):
                    try:
                        await self.turns.keep(taken)
                    except Exception as error:  # noqa: BLE001 - it may reappear and wait for the lease
                        log.info("could not keep a turn hidden (%s)", type(error).__name__)
