"""Durable turns on one machine: the queue of turns in a SQLite file, shared by the web process and the
``python -m bot worker`` processes beside it (TURN_QUEUE=local).

It keeps the contract of the Azure queue (bot/turns/contract.py), so the same :class:`~bot.turns.worker.TurnWorker`
runs its turns: a taken turn is hidden for a visibility timeout and deleted once answered, so the turn of a worker that
dies reappears; a conversation's lease (a row with a holder and an expiry) lets one worker at a time run its turns,
in the order of their numbers; a marker per (conversation, activity id), created only if none exists, recognises a
repeated delivery. A holder is known by its process id too: a turn or a lease whose process is gone (SIGKILL, a
crash) is free at once, without waiting for its expiry.

No clock decides who owns what (issue 28: a worker whose clock jumped an hour took over live workers' turns and
leases). The file holds no times to compare, only counters the holders move: a lease has an ``epoch`` (its fencing
token, one more at each acquisition) and a ``beat`` (one more at each renewal), a turn its ``receipt`` (one more at
each take and renewal) and how long it asked to stay hidden. Every write that matters names the token it holds (the
lease's epoch: its state, its release, the marker claimed under it; the turn's receipt: keeping it hidden,
deleting it), so a holder that lost either writes nothing. Another process takes a lease or a turn over only when
it is free, its process is gone, or that process has itself watched its counter stand still for the lease's or the
turn's time, by its own monotonic clock and its own looks (:class:`~bot.turns.contract.Sightings`): a clock that
jumps, forwards or back, steals nothing, and a live holder's renewals every RENEW_S keep it. The one wall-clock time
left is a marker's age against its day-long time to live.

Why not just the in-process runner: the web process then only checks and enqueues, and answers Teams at once,
while the turns' CPU (the model's answers parsed, cards built, replies sent) is spent in other processes on the
machine's other cores. The queue's commits are synchronous (``synchronous=FULL``): an activity is acknowledged only
once it is on disk. Enqueues that arrive together share one commit (a single writer thread takes every enqueue
waiting when it starts), so a burst costs a few fsyncs, not one per activity.

The file is for one machine: SQLite's locking does not hold over network file systems, and config.py refuses
TURN_QUEUE=local with more than one instance.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.turns.contract import (
    LEASE_S,
    MARKER_TTL_S,
    VISIBILITY_S,
    Clock,
    ConversationLease,
    Envelope,
    LeaseLost,
    LockState,
    RenewedLease,
    Sightings,
    Taken,
    TurnQueueError,
)
from bot.turns.sqlite import connect_wal, immediate

log = logging.getLogger(__name__)
POLL_MAX_S = 0.25  # an idle worker looks again this often: a look is one indexed read of a local file
PRUNE_EVERY = 500  # markers claimed between two deletions of expired ones

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS turns (id INTEGER PRIMARY KEY AUTOINCREMENT, conversation TEXT NOT NULL, "
    "body TEXT NOT NULL, hidden_s REAL NOT NULL DEFAULT 0, deliveries INTEGER NOT NULL DEFAULT 0, "
    "receipt INTEGER NOT NULL DEFAULT 0, holder INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS counters (conversation TEXT PRIMARY KEY, next INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS leases (conversation TEXT PRIMARY KEY, state TEXT NOT NULL DEFAULT '', "
    "holder TEXT NOT NULL DEFAULT '', epoch INTEGER NOT NULL DEFAULT 0, beat INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS markers (conversation TEXT NOT NULL, activity TEXT NOT NULL, message TEXT NOT NULL, "
    "at REAL NOT NULL, PRIMARY KEY (conversation, activity))",
    "CREATE TABLE IF NOT EXISTS set_aside (id INTEGER PRIMARY KEY AUTOINCREMENT, reason TEXT NOT NULL, "
    "deliveries INTEGER NOT NULL, content TEXT, at REAL NOT NULL)",
)
# Columns a file made before leases were fenced lacks (its timed columns, visible_at and expires, are left unused).
_ADDED = (("turns", "hidden_s", "REAL NOT NULL DEFAULT 0"), ("leases", "epoch", "INTEGER NOT NULL DEFAULT 0"),
          ("leases", "beat", "INTEGER NOT NULL DEFAULT 0"))


def _gone(pid: int | str) -> bool:
    """Whether the process that holds a turn or a lease (its id, or a lease holder "pid:token") has ended. A pid
    reused since only delays the turn or lease to its expiry."""
    try:
        number = int(str(pid).partition(":")[0])
    except ValueError:
        return False
    if number <= 0 or number == os.getpid():
        return False
    try:
        os.kill(number, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


@dataclass
class LocalMessage:
    """A taken row, with what a worker reads of an Azure queue message: id, content, dequeue count; and its
    receipt, which changes whenever it is taken or its visibility changes (a stale holder's update then fails)."""

    id: int
    content: str
    dequeue_count: int
    receipt: int


@dataclass
class _Enqueue:
    conversation_id: str
    activity_id: str
    activity: dict[str, Any]
    auth: dict[str, Any]
    turn: dict[str, Any] | None
    future: asyncio.Future[int]


class LocalLease(RenewedLease):
    """A conversation's lease row while this worker holds it: ``epoch`` is its fencing token."""

    def __init__(self, turns: LocalTurnQueue, conversation_id: str, holder: str, epoch: int,
                 state: bytes = b"") -> None:
        self._turns = turns
        self.conversation = conversation_id
        self.holder = holder
        self.epoch = epoch
        # The lock state the acquiring transaction read: the first read() returns it instead of reading it again
        # (under the lease just taken; every write after it names the epoch).
        self._acquired: bytes | None = state
        super().__init__()

    async def _renew(self) -> bool:
        return bool(await self._turns.call(self._turns.renew_lease, self))

    async def _release(self) -> None:
        await self._turns.call(self._turns.release_lease, self)

    async def read(self) -> LockState:
        acquired, self._acquired = self._acquired, None
        if acquired is not None:
            return LockState.loads(acquired)
        return LockState.loads(await self._fenced(self._turns.lease_state, self))

    async def write(self, state: LockState) -> None:
        self._acquired = None
        await self._fenced(self._turns.write_lease_state, self, state.dumps())

    async def _fenced(self, function: Any, *args: Any) -> Any:
        try:
            return await self._turns.call(function, *args)
        except LeaseLost:
            self.lost = True
            raise


class LocalTurnQueue:
    """The turn queue, its set-aside table, counters, leases and markers, in one SQLite file."""

    poll_max_s = POLL_MAX_S
    # Bound to no event loop (one connection on its own thread): one instance may serve the web front's enqueues and
    # the worker on another loop of the same process (bot.app shares it).
    loop_free = True

    def __init__(self, path: str | Path, *, clock: Clock = time.monotonic, wall: Clock = time.time) -> None:
        """``clock`` measures how long this process watched a lease or a turn stand still (only its own differences
        count); ``wall`` dates markers and set-aside turns. Tests give one process skewed ones."""
        self.path = Path(path)
        self._sightings = Sightings(clock)  # used on the queue's thread only
        self._wall = wall
        self._connection: sqlite3.Connection | None = None
        self._synchronous = "FULL"  # the connection's current setting (see _lightly)
        # One thread owns the connection: every call runs there, one at a time, off the event loop.
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="turn-queue")
        self._waiting: list[_Enqueue] = []
        self._flushing = False
        self._claims = 0

    @classmethod
    def open(cls, path: str | Path, *, clock: Clock = time.monotonic, wall: Clock = time.time) -> LocalTurnQueue:
        return cls(path, clock=clock, wall=wall)

    async def call(self, function: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._thread, function, *args)

    def _db(self) -> sqlite3.Connection:
        if self._connection is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = connect_wal(self.path, synchronous="FULL")  # an acknowledged turn is on disk
            self._synchronous = "FULL"
            connection.create_function("gone", 1, _gone)
            connection.create_function("due", 3, self._due)
            self._connection = connection
        return self._connection

    def _transaction(self, work: Any) -> Any:
        """A write transaction committed to disk (``synchronous=FULL``): a turn queued, answered or set aside."""
        return self._commit(work, "FULL")

    def _lightly(self, work: Any) -> Any:
        """A write transaction that need only outlive this process, not the machine (``synchronous=NORMAL``: in the
        WAL once committed, so a kill -9 keeps it, but not fsynced until the next FULL commit or checkpoint, which
        sync every commit before them too): the take of a turn, a lease's acquisition, renewal and release, a taken
        turn kept hidden, a marker claimed with its start counted. An operating system crash can undo only those
        since the last FULL commit, and every one of them is then a turn run again, as a worker killed mid-turn
        would (no process holding anything survives it, so no fencing counter goes back under a live holder)."""
        return self._commit(work, "NORMAL")

    def _commit(self, work: Any, synchronous: str) -> Any:
        db = self._db()
        if synchronous != self._synchronous:
            db.execute(f"PRAGMA synchronous={synchronous}")
            self._synchronous = synchronous
        with immediate(db) as db:
            return work(db)

    def _create(self, db: sqlite3.Connection) -> None:
        for statement in _SCHEMA:
            db.execute(statement)
        for table, column, declaration in _ADDED:
            if column not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")

    async def ensure(self) -> None:
        try:
            await self.call(self._transaction, self._create)
        except (sqlite3.Error, OSError) as error:
            raise TurnQueueError(f"cannot open the turn queue {self.path}: {error}; check TURN_QUEUE_PATH and that "
                                 "its folder is writable") from error

    async def waiting(self) -> int:
        return int(await self.call(lambda: self._db().execute("SELECT COUNT(*) FROM turns").fetchone()[0]))

    async def close(self) -> None:
        def close() -> None:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

        await self.call(close)
        self._thread.shutdown(wait=True)

    # ---- the front ----------------------------------------------------------------------------------------

    async def enqueue(self, conversation_id: str, activity_id: str, activity: dict[str, Any],
                      auth: dict[str, Any], turn: dict[str, Any] | None = None) -> int:
        """Number the activity in its conversation and queue it; returns once both are committed to disk."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Enqueue(conversation_id, activity_id, activity, auth, turn, future))
        if not self._flushing:
            self._flushing = True
            # call_soon: the other requests read in this pass of the loop join the same commit.
            asyncio.get_running_loop().call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        batch, self._waiting = self._waiting, []
        done = asyncio.ensure_future(self.call(self._transaction, lambda db: [self._put(db, e) for e in batch]))
        done.add_done_callback(lambda finished: self._settle(batch, finished))

    def _settle(self, batch: list[_Enqueue], finished: asyncio.Future[list[int]]) -> None:
        error = finished.exception()
        for index, item in enumerate(batch):
            if item.future.done():
                continue
            if error is not None:
                item.future.set_exception(TurnQueueError(f"could not queue a turn: {error}"))
            else:
                item.future.set_result(finished.result()[index])
        if self._waiting:
            self._flush()
        else:
            self._flushing = False

    @staticmethod
    def _put(db: sqlite3.Connection, item: _Enqueue) -> int:
        (number,) = db.execute("INSERT INTO counters (conversation, next) VALUES (?, 1) ON CONFLICT (conversation) "
                               "DO UPDATE SET next = next + 1 RETURNING next - 1", (item.conversation_id,)).fetchone()
        body = Envelope(item.conversation_id, item.activity_id, number, item.activity, item.auth, item.turn).encode()
        db.execute("INSERT INTO turns (conversation, body) VALUES (?, ?)", (item.conversation_id, body))
        return int(number)

    # ---- workers ------------------------------------------------------------------------------------------

    def _due(self, row_id: int, receipt: int, hidden_s: float) -> bool:
        """Whether a turn may be taken: it asked for no wait, or this process has seen its receipt stand still for
        the ``hidden_s`` it asked for (its holder renews it every RENEW_S while it runs)."""
        return hidden_s <= 0 or self._sightings.unchanged_for(("turn", row_id), receipt) >= hidden_s

    async def take(self, count: int) -> list[Taken]:
        rows = await self.call(self._lightly, lambda db: db.execute(
            "UPDATE turns SET hidden_s = ?, deliveries = deliveries + 1, receipt = receipt + 1, holder = ? "
            "WHERE id IN (SELECT id FROM turns WHERE due(id, receipt, hidden_s) OR (holder != 0 AND gone(holder)) "
            "ORDER BY id LIMIT ?) "
            "RETURNING id, body, deliveries, receipt", (VISIBILITY_S, os.getpid(), count)).fetchall())
        taken: list[Taken] = []
        for row_id, body, deliveries, receipt in sorted(rows):
            message = LocalMessage(row_id, body, deliveries, receipt)
            try:
                taken.append(Taken(message, Envelope.decode(body)))
            except ValueError as error:
                taken.append(Taken(message, None, str(error)))
        return taken

    async def keep(self, taken: Taken, seconds: int = VISIBILITY_S) -> None:
        """Keep a taken turn hidden ``seconds`` more, or show it again that soon; fails when it is no longer this
        holder's (taken again after its visibility lapsed, or deleted)."""
        message: LocalMessage = taken.message
        async with taken.guard:
            changed = await self.call(self._lightly, lambda db: db.execute(
                "UPDATE turns SET hidden_s = ?, receipt = receipt + 1 WHERE id = ? AND receipt = ?",
                (seconds, message.id, message.receipt)).rowcount)
            if not changed:
                raise TurnQueueError("the turn is no longer held here")
            message.receipt += 1

    async def done(self, taken: Taken, lease: ConversationLease | None = None, state: LockState | None = None) -> None:
        """Delete the turn; with ``lease`` and ``state``, write the lease's state first, in the same transaction (both
        or neither: LeaseLost when the lease is no longer this worker's)."""
        message: LocalMessage = taken.message
        write = self._state_writer(lease, state)

        def delete(db: sqlite3.Connection) -> None:
            if write is not None:
                write(db)
            # a stale receipt deletes nothing: another worker holds it now, and finishes it
            db.execute("DELETE FROM turns WHERE id = ? AND receipt = ?", (message.id, message.receipt))

        async with taken.guard:
            await self._under(lease, self._transaction, delete)

    async def move_aside(self, taken: Taken, reason: str) -> None:
        message: LocalMessage = taken.message

        def move(db: sqlite3.Connection) -> None:  # only while this holder's receipt is current, as done
            if db.execute("DELETE FROM turns WHERE id = ? AND receipt = ?", (message.id, message.receipt)).rowcount:
                db.execute("INSERT INTO set_aside (reason, deliveries, content, at) VALUES (?, ?, ?, ?)",
                           (reason, message.dequeue_count, message.content, self._wall()))

        async with taken.guard:
            await self.call(self._transaction, move)

    async def set_aside(self) -> list[dict[str, Any]]:
        """What was moved aside, oldest first (for the operator: reason, deliveries, the row as it was queued)."""
        rows = await self.call(lambda: self._db().execute(
            "SELECT reason, deliveries, content, at FROM set_aside ORDER BY id").fetchall())
        return [{"reason": r, "deliveries": d, "content": c, "at": a} for r, d, c, a in rows]

    async def lease(self, conversation_id: str) -> LocalLease | None:
        """The conversation's lease, or None while another worker holds it: its process runs and this process has
        not yet seen its renewals stop for LEASE_S."""
        holder = f"{os.getpid()}:{uuid.uuid4().hex}"

        def acquire(db: sqlite3.Connection) -> tuple[int, str]:
            row = db.execute("SELECT holder, epoch, beat, state FROM leases WHERE conversation = ?",
                             (conversation_id,)).fetchone()
            if row is None:
                db.execute("INSERT INTO leases (conversation, holder, epoch) VALUES (?, ?, 1)",
                           (conversation_id, holder))
                return 1, ""
            held_by, epoch, beat, state = row
            if held_by:
                stood_still = self._sightings.unchanged_for(("lease", conversation_id), (held_by, epoch, beat))
                if stood_still < LEASE_S and not _gone(held_by):
                    return 0, ""
            self._sightings.forget(("lease", conversation_id))
            db.execute("UPDATE leases SET holder = ?, epoch = ?, beat = 0 WHERE conversation = ?",
                       (holder, epoch + 1, conversation_id))
            return int(epoch) + 1, str(state)

        epoch, state = await self.call(self._lightly, acquire)
        return LocalLease(self, conversation_id, holder, epoch, state.encode()) if epoch else None

    @staticmethod
    def _held(db: sqlite3.Connection, lease: LocalLease) -> None:
        """LeaseLost unless ``lease`` is still the conversation's (its epoch and holder)."""
        if db.execute("SELECT 1 FROM leases WHERE conversation = ? AND epoch = ? AND holder = ?",
                      (lease.conversation, lease.epoch, lease.holder)).fetchone() is None:
            raise LeaseLost("the conversation's lease expired and was taken by another worker")

    def renew_lease(self, lease: LocalLease) -> bool:
        return bool(self._lightly(lambda db: db.execute(
            "UPDATE leases SET beat = beat + 1 WHERE conversation = ? AND epoch = ? AND holder = ?",
            (lease.conversation, lease.epoch, lease.holder)).rowcount))

    def lease_state(self, lease: LocalLease) -> bytes:
        row = self._db().execute("SELECT state FROM leases WHERE conversation = ? AND epoch = ? AND holder = ?",
                                 (lease.conversation, lease.epoch, lease.holder)).fetchone()
        if row is None:
            raise LeaseLost("the conversation's lease expired and was taken by another worker")
        return str(row[0]).encode()

    def write_lease_state(self, lease: LocalLease, state: bytes) -> None:
        self._transaction(lambda db: self._write_state(db, lease, state))

    @staticmethod
    def _write_state(db: sqlite3.Connection, lease: LocalLease, state: bytes) -> None:
        if not db.execute("UPDATE leases SET state = ? WHERE conversation = ? AND epoch = ? AND holder = ?",
                          (state.decode(), lease.conversation, lease.epoch, lease.holder)).rowcount:
            raise LeaseLost("the conversation's lease expired and was taken by another worker")

    def _state_writer(self, lease: ConversationLease | None, state: LockState | None) -> Any:
        """What writes ``state`` under ``lease`` inside a transaction (None without both); the lease's first read
        no longer returns what its acquisition read."""
        if not isinstance(lease, LocalLease) or state is None:
            return None
        lease._acquired = None
        raw = state.dumps()
        return lambda db: self._write_state(db, lease, raw)

    async def _under(self, lease: ConversationLease | None, function: Any, *args: Any) -> Any:
        """``function`` on the queue's thread; a LeaseLost marks ``lease`` lost, as its own writes do."""
        try:
            return await self.call(function, *args)
        except LeaseLost:
            if lease is not None:
                lease.lost = True
            raise

    def release_lease(self, lease: LocalLease) -> None:
        self._lightly(lambda db: db.execute(
            "UPDATE leases SET holder = '' WHERE conversation = ? AND epoch = ? AND holder = ?",
            (lease.conversation, lease.epoch, lease.holder)))

    async def claim(self, envelope: Envelope, message_id: str, lease: ConversationLease | None = None,
                    state: LockState | None = None) -> bool:
        """True when this delivery may answer the activity: its marker is new, already this message's, or older
        than MARKER_TTL_S. False for a repeat of an answered activity. Under ``lease``, in the same transaction as
        the check that the lease is still this worker's (LeaseLost otherwise), and with ``state``, as the write of
        the lease's state (which is that check)."""
        write = self._state_writer(lease, state)
        if not envelope.activity_id:
            if write is not None:
                await self._under(lease, self._lightly, write)
            return True
        self._claims += 1
        prune = self._claims % PRUNE_EVERY == 1

        def claim(db: sqlite3.Connection) -> bool:
            if write is not None:
                write(db)  # fenced by the lease's epoch and holder
            elif isinstance(lease, LocalLease):
                self._held(db, lease)
            now = self._wall()
            if prune:
                db.execute("DELETE FROM markers WHERE at < ?", (now - MARKER_TTL_S,))
            row = db.execute("SELECT message, at FROM markers WHERE conversation = ? AND activity = ?",
                             (envelope.conversation_id, envelope.activity_id)).fetchone()
            if row is not None:
                if row[0] == message_id:  # this message's own redelivery (its worker died)
                    return True
                if now - row[1] <= MARKER_TTL_S:
                    return False
            db.execute("INSERT OR REPLACE INTO markers (conversation, activity, message, at) VALUES (?, ?, ?, ?)",
                       (envelope.conversation_id, envelope.activity_id, message_id, now))
            return True

        return bool(await self._under(lease, self._lightly, claim))
