"""Two workers on one queue while one's clock jumps an hour (issue 28: leases that do not trust wall clocks).

The steady worker runs in the test's process; the skewed one in a child process (``python -m
tests.support.skewed_workers``) whose wall clock (``time.time``, what an NTP step moves) jumps by ``jump_s`` a moment
after it starts taking turns, while turns run; the clock its queue and worker are given (the one they time leases and
gaps with) jumps with it. Each test turn records that it ran (an answer sent) and then saves its conversation's state
the way the state stores do: read with an e_tag at the start, written back only if the e_tag is still the one read
(a conflict is a lost save). Then: turns answered twice, turns never answered, lost saves, and tracebacks (the
child's stderr and the steady worker's log records).

On Azure (Azurite) one conversation also has a number taken, once the clock has jumped, by a front that queues its
turn LATE_S later (as a slow front would), so a worker must not skip that number before the gap wait has passed by
its own clock (the original code compared the time one worker wrote in the lock blob with another's clock).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.turns.azure_queue import AzureTurnQueue
from bot.turns.contract import Envelope, TurnQueue
from bot.turns.local_queue import LocalTurnQueue
from bot.turns.worker import TurnWorker

ROOT = Path(__file__).resolve().parents[2]
TURN_S = 0.3  # each test turn's work between its answer and its state save
LONG_S = 6.0  # ... and each conversation's second turn's: longer than RENEW_S, so leases and turns are renewed
JUMP_AFTER_S = 0.7  # the skewed worker's clock jumps this long after it starts taking turns
GAP_S = 8.0  # the workers' gap wait (Azure: the late turn is queued LATE_S after its number was taken)
LATE_S = 4.0
GAP_AFTER_S = 1.5  # ... which is taken this long after the skewed worker is ready: once its clock has jumped
SETTLE_S = 1.5  # after every turn is answered, time for a wrong second answer to show


class Skewed:
    """``clock`` read as is until ``after_s`` (by that clock) from the first read, then ``jump_s`` off."""

    def __init__(self, clock: Callable[[], float], jump_s: float, after_s: float) -> None:
        self._clock, self._jump_s, self._after_s = clock, jump_s, after_s
        self._start = clock()

    def __call__(self) -> float:
        now = self._clock()
        return now + self._jump_s if now - self._start >= self._after_s else now


def open_queue(spec: dict[str, Any], clock: Callable[[], float] = time.monotonic,
               wall: Callable[[], float] = time.time) -> TurnQueue:
    if spec["kind"] == "local":
        return LocalTurnQueue.open(spec["path"], clock=clock, wall=wall)
    return AzureTurnQueue.open(queue_name=spec["name"], container=spec["name"],
                               connection_string=spec["connection_string"])


class Turns:
    """The test turns: an answer recorded, then the conversation's state saved under its e_tag."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30, isolation_level=None)

    def create(self) -> None:
        with contextlib.closing(self._db()) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE IF NOT EXISTS runs (pid INTEGER, conversation TEXT, activity TEXT)")
            db.execute("CREATE TABLE IF NOT EXISTS state (conversation TEXT PRIMARY KEY, etag INTEGER, saved TEXT)")
            db.execute("CREATE TABLE IF NOT EXISTS lost_saves (conversation TEXT, activity TEXT)")

    def _answer_and_read(self, envelope: Envelope) -> int:
        with contextlib.closing(self._db()) as db:
            db.execute("INSERT INTO runs VALUES (?, ?, ?)", (os.getpid(), envelope.conversation_id,
                                                            envelope.activity_id))
            row = db.execute("SELECT etag FROM state WHERE conversation = ?", (envelope.conversation_id,)).fetchone()
            return int(row[0]) if row else 0

    def _save(self, envelope: Envelope, etag: int) -> None:
        with contextlib.closing(self._db()) as db:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT etag FROM state WHERE conversation = ?", (envelope.conversation_id,)).fetchone()
            if (int(row[0]) if row else 0) != etag:
                db.execute("INSERT INTO lost_saves VALUES (?, ?)", (envelope.conversation_id, envelope.activity_id))
            else:
                db.execute("INSERT INTO state VALUES (?, ?, ?) ON CONFLICT (conversation) DO UPDATE SET "
                           "etag = excluded.etag, saved = excluded.saved",
                           (envelope.conversation_id, etag + 1, envelope.activity_id))
            db.execute("COMMIT")

    async def run(self, envelope: Envelope) -> None:
        etag = await asyncio.to_thread(self._answer_and_read, envelope)
        await asyncio.sleep(LONG_S if envelope.activity_id.endswith("-1") else TURN_S)
        await asyncio.to_thread(self._save, envelope, etag)

    async def tell(self, envelope: Envelope, text: str) -> None:
        pass

    def runs(self) -> list[tuple[int, str, str]]:
        with contextlib.closing(self._db()) as db:
            return db.execute("SELECT pid, conversation, activity FROM runs ORDER BY rowid").fetchall()

    def lost_saves(self) -> int:
        with contextlib.closing(self._db()) as db:
            return int(db.execute("SELECT COUNT(*) FROM lost_saves").fetchone()[0])


@dataclass
class Figures:
    jump_s: float
    queue: str
    turns: int
    answered: int = 0
    twice: int = 0
    lost: int = 0
    lost_saves: int = 0
    tracebacks: int = 0
    by_skewed: int = 0
    by_steady: int = 0
    elapsed_s: float = 0.0


class _Tracebacks(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.count += 1


async def run(workdir: Path, *, jump_s: float, queue: str = "local", connection_string: str = "",
              conversations: int = 6, messages: int = 5, timeout_s: float = 60.0) -> Figures:
    """One run: every turn queued, both workers taking them, the child's clock jumping ``jump_s`` meanwhile."""
    spec: dict[str, Any] = ({"kind": "local", "path": str(workdir / "turns.db")} if queue == "local" else
                            {"kind": "azure", "name": f"skew-{os.getpid()}-{int(time.time() * 1000) % 10**8}",
                             "connection_string": connection_string})
    turns = Turns(workdir / "turns-run.db")
    turns.create()
    front = open_queue(spec)
    await front.ensure()
    expected: dict[str, list[str]] = {f"a:skew-{c}": [f"{c}-{m}" for m in range(messages)]
                                      for c in range(conversations)}
    for conversation, ids in expected.items():
        for activity_id in ids:
            await front.enqueue(conversation, activity_id, {"id": activity_id}, {})
    late: asyncio.Future[None] | None = None
    if isinstance(front, AzureTurnQueue):  # a front that took a number and queues its turn late
        azure = front
        expected["a:late"] = ["late-0", "late-1", "late-2"]
        await azure.enqueue("a:late", "late-0", {}, {})

        async def put_late() -> None:
            await asyncio.sleep(GAP_AFTER_S)
            number = await azure.number("a:late")
            await azure.enqueue("a:late", "late-2", {}, {})
            await asyncio.sleep(LATE_S)
            await azure.put(Envelope("a:late", "late-1", number, {}, {}))
    figures = Figures(jump_s, queue, sum(len(ids) for ids in expected.values()))
    stop = workdir / "stop"
    errors = workdir / "skewed.err"
    started = time.monotonic()
    with errors.open("wb") as stderr:
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.support.skewed_workers", json.dumps(spec), str(turns.path), str(jump_s),
            str(stop), cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=asyncio.subprocess.PIPE,
            stderr=stderr)
    tracebacks = _Tracebacks()
    logging.getLogger("bot").addHandler(tracebacks)
    steady_queue = open_queue(spec)
    steady = TurnWorker(steady_queue, turns.run, turns.tell, concurrency=4, gap_s=GAP_S)
    working: asyncio.Task[None] | None = None
    try:
        assert child.stdout is not None
        assert await asyncio.wait_for(child.stdout.readline(), 30) == b"ready\n", errors.read_text()
        if isinstance(front, AzureTurnQueue):
            late = asyncio.ensure_future(put_late())
        working = asyncio.ensure_future(steady.run(grace_s=5))
        want = {(c, a) for c, ids in expected.items() for a in ids}
        deadline = time.monotonic() + timeout_s
        while not want <= {(c, a) for _, c, a in turns.runs()} and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
        await asyncio.sleep(SETTLE_S)
    finally:
        stop.touch()
        steady.stop()
        if working is not None:
            await working
        try:
            await asyncio.wait_for(child.wait(), 30)
        except TimeoutError:
            child.kill()
            await child.wait()
        logging.getLogger("bot").removeHandler(tracebacks)
        if late is not None:
            await late
        for opened in (front, steady_queue):
            await opened.close()
    figures.elapsed_s = time.monotonic() - started
    runs = turns.runs()
    answered = [(c, a) for _, c, a in runs]
    figures.answered = len(set(answered))
    figures.twice = len(answered) - len(set(answered))
    figures.lost = sum(1 for c, ids in expected.items() for a in ids if (c, a) not in set(answered))
    figures.lost_saves = turns.lost_saves()
    figures.by_skewed = sum(1 for pid, _, _ in runs if pid == child.pid)
    figures.by_steady = sum(1 for pid, _, _ in runs if pid == os.getpid())
    figures.tracebacks = tracebacks.count + errors.read_text(errors="replace").count("Traceback")
    return figures


async def _skewed(spec: dict[str, Any], turns_path: str, jump_s: float, stop: Path) -> None:
    """The child: a worker whose wall clock and queue clock jump ``jump_s`` JUMP_AFTER_S after it starts."""
    real_time = time.time
    wall = Skewed(real_time, jump_s, JUMP_AFTER_S)
    time.time = wall  # type: ignore[assignment]  # every wall-clock read in this process, as an NTP step would
    clock = Skewed(time.monotonic, jump_s, JUMP_AFTER_S)
    turns = Turns(Path(turns_path))
    queue = open_queue(spec, clock=clock, wall=wall)
    worker = TurnWorker(queue, turns.run, turns.tell, concurrency=4, gap_s=GAP_S, clock=clock)
    working = asyncio.ensure_future(worker.run(grace_s=5))
    print("ready", flush=True)
    while not stop.exists():  # noqa: ASYNC110, ASYNC240 - the parent's signal to stop
        await asyncio.sleep(0.05)
    worker.stop()
    await working
    await queue.close()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(_skewed(json.loads(sys.argv[1]), sys.argv[2], float(sys.argv[3]), Path(sys.argv[4])))
