"""The worker processes ``python -m bot serve`` starts beside itself (TURN_WORKER_PROCESSES), so one container's
command uses the machine's cores: the web process checks and queues, the workers run the turns.

Each worker is ``python -m bot worker`` with the same environment, its output going where the web process's goes,
at a lower CPU priority (:data:`NICENESS`): when both have work, the web process's acknowledgements come first.
One that exits on its own is started again, after a pause that grows while it keeps failing soon after starting
(1 s doubling to 30 s) and resets once it has run a while. At shutdown each gets SIGTERM, the grace it has for its
running turns, then SIGKILL; a turn cut short reappears on the queue for the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import sys
import time
from collections.abc import Sequence

log = logging.getLogger(__name__)
FIRST_PAUSE_S, LAST_PAUSE_S = 1.0, 30.0
NICENESS = 5  # added to the workers' nice value (Unix): a burst of turns starting cannot delay the web front
STEADY_S = 60.0  # a worker that ran this long before exiting had not been failing: its pause starts over


class WorkerProcesses:
    def __init__(self, count: int, *,
                 command: Sequence[str] = (sys.executable, "-m", "bot", "worker", "--nice", str(NICENESS)),
                 env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        self.count = count
        self.command = list(command)
        self.env = env  # None: this process's (serve passes its own configuration on)
        self.cwd = cwd
        self.processes: list[asyncio.subprocess.Process | None] = [None] * count
        self.restarts = 0
        self._keepers: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()

    @property
    def alive(self) -> int:
        return sum(1 for p in self.processes if p is not None and p.returncode is None)

    def start(self) -> None:
        self._keepers = [asyncio.ensure_future(self._keep(index)) for index in range(self.count)]

    async def _keep(self, index: int) -> None:
        pause = FIRST_PAUSE_S
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                process = await asyncio.create_subprocess_exec(*self.command, env=self.env, cwd=self.cwd,
                                                               stdin=subprocess.DEVNULL)
            except OSError as error:
                log.error("could not start worker process %d (%s)", index + 1, error)
                code: int | None = None
            else:
                self.processes[index] = process
                log.info("worker process %d started (pid %d)", index + 1, process.pid)
                code = await process.wait()
            if self._stopping.is_set():
                return
            pause = FIRST_PAUSE_S if time.monotonic() - started >= STEADY_S else pause
            log.warning("worker process %d exited (code %s); starting it again in %.0f s", index + 1, code, pause)
            self.restarts += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), pause)
            pause = min(pause * 2, LAST_PAUSE_S)

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
