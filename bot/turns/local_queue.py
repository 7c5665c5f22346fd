"""Durable turns on one machine: the queue of turns in a SQLite file, shared by the web process and the
``python -m bot worker`` processes beside it (TURN_QUEUE=local).

It keeps the contract of the Azure queue (bot/turns/contract.py), so the same :class:`~bot.turns.worker.TurnWorker`
runs its turns: a taken turn is hidden for a visibility timeout and deleted once answered, so the turn of a worker that
dies reappears; a conversation's lease (a row with a holder and an expiry) lets one worker at a time run its turns,
in the order of their numbers; a marker per (conversation, activity id), created only if none exists, recognises a
repeated delivery. Everything runs on one machine, so one clock times visibility, leases and markers, and a holder
is known by its process id too: a turn or a lease whose process is gone (SIGKILL, a crash) is free at once, without
waiting for its expiry.

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
    Envelope,
    LockState,
    RenewedLease,
    Taken,
    TurnQueueError,
)
from bot.turns.sqlite import connect_wal, immediate

log = logging.getLogger(__name__)
POLL_MAX_S = 0.25  # an idle worker looks again this often: a look is one indexed read of a local file
PRUNE_EVERY = 500  # markers claimed between two deletions of expired ones

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS turns (id INTEGER PRIMARY KEY AUTOINCREMENT, conversation TEXT NOT NULL, "
    "body TEXT NOT NULL, visible_at REAL NOT NULL DEFAULT 0, deliveries INTEGER NOT NULL DEFAULT 0, "
    "receipt INTEGER NOT NULL DEFAULT 0, holder INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS counters (conversation TEXT PRIMARY KEY, next INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS leases (conversation TEXT PRIMARY KEY, state TEXT NOT NULL DEFAULT '', "
    "holder TEXT NOT NULL DEFAULT '', expires REAL NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS markers (conversation TEXT NOT NULL, activity TEXT NOT NULL, message TEXT NOT NULL, "
    "at REAL NOT NULL, PRIMARY KEY (conversation, activity))",
    "CREATE TABLE IF NOT EXISTS set_aside (id INTEGER PRIMARY KEY AUTOINCREMENT, reason TEXT NOT NULL, "
    "deliveries INTEGER NOT NULL, content TEXT, at REAL NOT NULL)",
)


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
    future: asyncio.Future[int]


class LocalLease(RenewedLease):
    """A conversation's lease row while this worker holds it."""

    def __init__(self, turns: LocalTurnQueue, conversation_id: str, holder: str) -> None:
        self._turns = turns
        self._conversation = conversation_id
        self._holder = holder
        super().__init__()

    async def _renew(self) -> bool:
        return bool(await self._turns.call(self._turns.renew_lease, self._conversation, self._holder))

    async def _release(self) -> None:
        await self._turns.call(self._turns.release_lease, self._conversation, self._holder)

    async def read(self) -> LockState:
        return LockState.loads(await self._turns.call(self._turns.lease_state, self._conversation, self._holder))

    async def write(self, state: LockState) -> None:
        if not await self._turns.call(self._turns.write_lease_state, self._conversation, self._holder, state.dumps()):
            self.lost = True
            raise TurnQueueError("the conversation's lease expired and was taken by another worker")


class LocalTurnQueue:
    """The turn queue, its set-aside table, counters, leases and markers, in one SQLite file."""

    poll_max_s = POLL_MAX_S

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._connection: sqlite3.Connection | None = None
        # One thread owns the connection: every call runs there, one at a time, off the event loop.
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="turn-queue")
        self._waiting: list[_Enqueue] = []
        self._flushing = False
        self._claims = 0

    @classmethod
    def open(cls, path: str | Path) -> LocalTurnQueue:
        return cls(path)

    async def call(self, function: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._thread, function, *args)

    def _db(self) -> sqlite3.Connection:
        if self._connection is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = connect_wal(self.path, synchronous="FULL")  # an acknowledged turn is on disk
            connection.create_function("gone", 1, _gone)
            self._connection = connection
        return self._connection

    def _transaction(self, work: Any) -> Any:
        with immediate(self._db()) as db:
            return work(db)

    async def ensure(self) -> None:
        try:
            await self.call(self._transaction, lambda db: [db.execute(statement) for statement in _SCHEMA])
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
                      auth: dict[str, Any]) -> int:
        """Number the activity in its conversation and queue it; returns once both are committed to disk."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Enqueue(conversation_id, activity_id, activity, auth, future))
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
        body = Envelope(item.conversation_id, item.activity_id, number, item.activity, item.auth).encode()
        db.execute("INSERT INTO turns (conversation, body) VALUES (?, ?)", (item.conversation_id, body))
        return int(number)

    # ---- workers ------------------------------------------------------------------------------------------

    async def take(self, count: int) -> list[Taken]:
        now = time.time()
        rows = await self.call(self._transaction, lambda db: db.execute(
            "UPDATE turns SET visible_at = ?, deliveries = deliveries + 1, receipt = receipt + 1, holder = ? "
            "WHERE id IN (SELECT id FROM turns WHERE visible_at <= ? OR (holder != 0 AND gone(holder)) "
            "ORDER BY id LIMIT ?) "
            "RETURNING id, body, deliveries, receipt", (now + VISIBILITY_S, os.getpid(), now, count)).fetchall())
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
            changed = await self.call(self._transaction, lambda db: db.execute(
                "UPDATE turns SET visible_at = ?, receipt = receipt + 1 WHERE id = ? AND receipt = ?",
                (time.time() + seconds, message.id, message.receipt)).rowcount)
            if not changed:
                raise TurnQueueError("the turn is no longer held here")
            message.receipt += 1

    async def done(self, taken: Taken) -> None:
        message: LocalMessage = taken.message
        async with taken.guard:  # a stale receipt deletes nothing: another worker holds it now, and finishes it
            await self.call(self._transaction, lambda db: db.execute(
                "DELETE FROM turns WHERE id = ? AND receipt = ?", (message.id, message.receipt)))

    async def move_aside(self, taken: Taken, reason: str) -> None:
        message: LocalMessage = taken.message
        async with taken.guard:
            await self.call(self._transaction, lambda db: (
                db.execute("INSERT INTO set_aside (reason, deliveries, content, at) VALUES (?, ?, ?, ?)",
                           (reason, message.dequeue_count, message.content, time.time())),
                db.execute("DELETE FROM turns WHERE id = ?", (message.id,))))

    async def set_aside(self) -> list[dict[str, Any]]:
        """What was moved aside, oldest first (for the operator: reason, deliveries, the row as it was queued)."""
        rows = await self.call(lambda: self._db().execute(
            "SELECT reason, deliveries, content, at FROM set_aside ORDER BY id").fetchall())
        return [{"reason": r, "deliveries": d, "content": c, "at": a} for r, d, c, a in rows]

    async def lease(self, conversation_id: str) -> LocalLease | None:
        """The conversation's lease, or None while another worker's has not expired and its process runs."""
        holder = f"{os.getpid()}:{uuid.uuid4().hex}"
        acquired = await self.call(self._transaction, lambda db: db.execute(
            "INSERT INTO leases (conversation, holder, expires) VALUES (?, ?, ?) ON CONFLICT (conversation) "
            "DO UPDATE SET holder = excluded.holder, expires = excluded.expires "
            "WHERE leases.expires <= ? OR gone(leases.holder)",
            (conversation_id, holder, time.time() + LEASE_S, time.time())).rowcount)
        return LocalLease(self, conversation_id, holder) if acquired else None

    def renew_lease(self, conversation_id: str, holder: str) -> bool:
        return bool(self._transaction(lambda db: db.execute(
            "UPDATE leases SET expires = ? WHERE conversation = ? AND holder = ? AND expires > ?",
            (time.time() + LEASE_S, conversation_id, holder, time.time())).rowcount))

    def lease_state(self, conversation_id: str, holder: str) -> bytes:
        row = self._db().execute("SELECT state FROM leases WHERE conversation = ? AND holder = ?",
                                 (conversation_id, holder)).fetchone()
        if row is None:
            raise TurnQueueError("the conversation's lease is no longer held here")
        return str(row[0]).encode()

    def write_lease_state(self, conversation_id: str, holder: str, state: bytes) -> bool:
        return bool(self._transaction(lambda db: db.execute(
            "UPDATE leases SET state = ? WHERE conversation = ? AND holder = ?",
            (state.decode(), conversation_id, holder)).rowcount))

    def release_lease(self, conversation_id: str, holder: str) -> None:
        self._transaction(lambda db: db.execute(
            "UPDATE leases SET expires = 0 WHERE conversation = ? AND holder = ?", (conversation_id, holder)))

    async def claim(self, envelope: Envelope, message_id: str) -> bool:
        """True when this delivery may answer the activity: its marker is new, already this message's, or older
        than MARKER_TTL_S. False for a repeat of an answered activity."""
        if not envelope.activity_id:
            return True
        self._claims += 1
        prune = self._claims % PRUNE_EVERY == 1

        def claim(db: sqlite3.Connection) -> bool:
            now = time.time()
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

        return bool(await self.call(self._transaction, claim))
