"""The worker processes ``python -m bot serve`` starts beside itself (TURN_WORKER_PROCESSES), so one container's
command uses the machine's cores: the web process checks and queues, the workers run the turns.

Each worker is ``python -m bot worker`` with the same environment, its output going where the web process's goes,
at a lower CPU priority (:data:`NICENESS`): when both have work, the web process's acknowledgements come first.
One that exits on its own is started again, after a pause that grows while it keeps failing soon after starting
(1 s doubling to 30 s) and resets once it has run a while. At shutdown each gets SIGTERM, the grace it has for its
running turns, then SIGKILL; a turn cut short reappears on the queue for the next start.

The workers are this process's children in every sense: each is told the web process's id (``--parent``) and
dies with it (:meth:`Supervised.die_with_parent`: on Linux the kernel's parent-death signal, set by the worker
itself through ``prctl(PR_SET_PDEATHSIG)``, bot/lifetime.py; everywhere a once-a-second look at its parent), so a web
front killed with SIGKILL leaves no orphan behind to run beside the workers its restart starts. Each also says when it
takes turns, through a pipe (``--ready-fd``): :attr:`WorkerProcesses.taking` counts those, not processes merely
started (a worker builds its clients first), and is what /readyz reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

from bot.lifetime import die_with_parent

log = logging.getLogger(__name__)
FIRST_PAUSE_S, LAST_PAUSE_S = 1.0, 30.0
NICENESS = 5  # added to the workers' nice value (Unix): a burst of turns starting cannot delay the web front
STEADY_S = 60.0  # a worker that ran this long before exiting had not been failing: its pause starts over
PARENT_LOOK_S = 1.0  # how often a worker looks whether its web process is still there (where prctl cannot tell it)
READY_LINE = b"taking turns\n"


class WorkerProcesses:
    def __init__(self, count: int, *,
                 command: Sequence[str] = (sys.executable, "-m", "bot", "worker", "--nice", str(NICENESS)),
                 env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        self.count = count
        self.command = list(command)
        self.env = env  # None: this process's (serve passes its own configuration on)
        self.cwd = cwd
        self.processes: list[asyncio.subprocess.Process | None] = [None] * count
        self.ready = [False] * count  # each process has said it takes turns (and has not exited since)
        self.restarts = 0
        self._keepers: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()

    @property
    def alive(self) -> int:
        return sum(1 for p in self.processes if p is not None and p.returncode is None)

    @property
    def taking(self) -> int:
        """Worker processes taking turns: started, set up, and not exited since."""
        return sum(1 for index, p in enumerate(self.processes)
                   if self.ready[index] and p is not None and p.returncode is None)

    def start(self) -> None:
        self._keepers = [asyncio.ensure_future(self._keep(index)) for index in range(self.count)]

    async def _keep(self, index: int) -> None:
        pause = FIRST_PAUSE_S
        while not self._stopping.is_set():
            started = time.monotonic()
            code = await self._run_one(index)
            if self._stopping.is_set():
                return
            pause = FIRST_PAUSE_S if time.monotonic() - started >= STEADY_S else pause
            log.warning("worker process %d exited (code %s); starting it again in %.0f s", index + 1, code, pause)
            self.restarts += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), pause)
            pause = min(pause * 2, LAST_PAUSE_S)

    async def _run_one(self, index: int) -> int | None:
        """One worker process, from its start to its exit code (None: it could not start)."""
        readout, write = os.pipe()
        try:
            process = await asyncio.create_subprocess_exec(
                *self.command, "--parent", str(os.getpid()), "--ready-fd", str(write), env=self.env, cwd=self.cwd,
                stdin=subprocess.DEVNULL, pass_fds=(write,))
        except OSError as error:
            os.close(readout)
            log.error("could not start worker process %d (%s)", index + 1, error)
            return None
        finally:
            os.close(write)  # the child's copy stays open: its end of the pipe is the only one
        self.processes[index] = process
        log.info("worker process %d started (pid %d)", index + 1, process.pid)
        listening = asyncio.ensure_future(self._listen(index, readout))
        try:
            return await process.wait()
        finally:
            self.ready[index] = False
            listening.cancel()
            await asyncio.gather(listening, return_exceptions=True)

    async def _listen(self, index: int, readout: int) -> None:
        """Mark the worker ready when it writes :data:`READY_LINE` on its pipe."""
        reader = asyncio.StreamReader()
        loop = asyncio.get_running_loop()
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                    os.fdopen(readout, "rb", buffering=0))
        try:
            while line := await reader.readline():
                if line == READY_LINE and not self.ready[index]:
                    self.ready[index] = True
                    log.info("worker process %d takes turns", index + 1)
        finally:
            transport.close()

    async def stop(self, grace_s: float) -> None:
        """SIGTERM to each worker; SIGKILL to any still running ``grace_s`` (plus a moment to close) later."""
        self._stopping.set()
        running = [p for p in self.processes if p is not None and p.returncode is None]
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        if running:
            _, late = await asyncio.wait([asyncio.ensure_future(p.wait()) for p in running], timeout=grace_s + 2)
            if late:
                log.warning("%d worker process(es) still running after %.0f s; killing them", len(late), grace_s)
                for process in running:
                    if process.returncode is None:
                        with contextlib.suppress(ProcessLookupError):
                            process.kill()
                await asyncio.gather(*(p.wait() for p in running))
        for keeper in self._keepers:
            keeper.cancel()
        await asyncio.gather(*self._keepers, return_exceptions=True)


class Supervised:
    """What a worker process does for the web process that started it (``python -m bot worker --parent PID
    --ready-fd FD``, given by :class:`WorkerProcesses`): die with it, and say when it takes turns."""

    def __init__(self, parent: int | None, ready_fd: int | None) -> None:
        self.parent = parent
        self.ready_fd = ready_fd

    def die_with_parent(self) -> None:
        """SIGTERM to this process when its parent dies (Linux: the kernel sends it; set before anything slow, then
        the parent is checked once, in case it died before: bot/lifetime.py). Elsewhere :meth:`watch` notices within
        a second. SIGTERM, not SIGKILL: the turns running here finish (or go back on the queue) as at any shutdown."""
        if self.parent is None:
            return
        if not die_with_parent(self.parent, signal.SIGTERM, watch=False):
            raise SystemExit(f"worker: the web process {self.parent} that started this worker is gone; exiting")

    async def watch(self, stop: Callable[[], None]) -> None:
        """Call ``stop`` once the parent is gone (where no parent-death signal exists, or it was missed)."""
        if self.parent is None:
            return
        while True:
            await asyncio.sleep(PARENT_LOOK_S)
            if os.getppid() != self.parent:
                break
        log.warning("the web process %d that started this worker is gone: stopping", self.parent)
        stop()

    def taking_turns(self) -> None:
        """Tell the web process this worker now takes turns."""
        if self.ready_fd is None:
            return
        with contextlib.suppress(OSError):
            os.write(self.ready_fd, READY_LINE)
            os.close(self.ready_fd)
        self.ready_fd = None
