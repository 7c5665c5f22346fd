"""Child processes the tests and benchmarks start: none outlives its test, and no wait is without a bound.

- :func:`popen` starts a child in its own session and process group (a Ctrl+C at the terminal reaches only the
  test run, which stops it; killing the group takes its own children along) that dies with the process that
  started it: bot/lifetime.py's parent-death signal (SIGKILL), asked for between fork and exec, so it holds for
  node as for Python. The kernel sends it when the starting *thread* ends: start long-lived children from a thread
  that outlives them (the test's own, a smoke run's pool thread).
- :func:`start`, :func:`finish` and :func:`stop_async` do the same for asyncio's children.
- :func:`kill_group` kills the whole group (after a grace for the child to stop when asked) and waits a
  bounded time.
- :func:`communicate` reads a child's output until it exits or a deadline passes, then kills its group and reads
  what is left for a few seconds more. It never waits on a pipe without a bound: a grandchild that left the group
  (its own session) and still holds the pipe cannot hang the run, as one did after a timed-out smoke run.
- :func:`leftovers` and :func:`kill` serve the session's last look (tests/conftest.py): every process still
  carrying this run's mark (:data:`RUN_MARK`, an environment variable each child inherits) is listed and killed.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.lifetime import parent_death_signal

RUN_MARK = "SENTINEL_TEST_RUN"  # set by tests/conftest.py to an id of the run; children inherit it
KILL_WAIT_S = 10.0  # after SIGKILL: the process is reaped and its pipes read to their end within this
_LIVE: set[subprocess.Popen[Any]] = set()
_LIVE_LOCK = threading.Lock()


def popen(argv: Sequence[str], **options: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(argv, **options)`` in its own session, dying with this process (see the docstring)."""
    options.setdefault("stdin", subprocess.DEVNULL)
    process = subprocess.Popen(list(argv), start_new_session=True, preexec_fn=die_with_parent, **options)
    with _LIVE_LOCK:
        _LIVE.add(process)
    return process


# Between fork and exec (``preexec_fn``): SIGKILL to the child when the thread that started it ends (Linux).
die_with_parent = functools.partial(parent_death_signal, signal.SIGKILL)


def kill_group(process: subprocess.Popen[Any], *, grace_s: float = 0.0) -> None:
    """SIGKILL the child's whole process group, after waiting at most ``grace_s`` for the child to exit on its own
    (the caller asked it to: SIGTERM, its input closed); then wait a bounded time for it to be reaped."""
    with _LIVE_LOCK:
        _LIVE.discard(process)
    if grace_s:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace_s)
    _kill_group(process)  # also when the leader has exited: members of its group may live on
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=KILL_WAIT_S)


def _kill_group(process: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # the group keeps the leader's pid as its id while any member lives


@dataclass(frozen=True)
class Output:
    returncode: int | None  # None: it had to be killed at the deadline
    stdout: str
    stderr: str

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def communicate(process: subprocess.Popen[Any], timeout: float) -> Output:
    """Everything the child writes on its stdout and stderr pipes (either may be absent), until it exits or
    ``timeout`` passes; then its group is killed and the pipes are read at most :data:`KILL_WAIT_S` more."""
    pipes = [pipe for pipe in (process.stdout, process.stderr) if pipe is not None]
    chunks: dict[int, list[bytes]] = {pipe.fileno(): [] for pipe in pipes}
    deadline = time.monotonic() + timeout
    timed_out = not _read_until(chunks, deadline, process)
    if timed_out:
        kill_group(process)
        _read_until(chunks, time.monotonic() + KILL_WAIT_S, None)
    else:
        with _LIVE_LOCK:
            _LIVE.discard(process)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=KILL_WAIT_S)
    out, err = (_text(chunks, pipe) for pipe in (process.stdout, process.stderr))
    for pipe in pipes:
        pipe.close()
    return Output(None if timed_out else process.returncode, out, err)


def _text(chunks: dict[int, list[bytes]], pipe: Any) -> str:
    return b"".join(chunks[pipe.fileno()]).decode(errors="replace") if pipe is not None else ""


def _read_until(chunks: dict[int, list[bytes]], deadline: float, process: subprocess.Popen[Any] | None) -> bool:
    """Read the pipes in ``chunks`` until they are at their end and ``process`` (if given) has exited: True; or
    until ``deadline``: False. Once the process has exited, pipes that stay quiet (a grandchild holds them) count
    as ended: its group's kill takes the grandchild, and nothing waits for it."""
    open_fds = set(chunks)
    while True:
        exited = process is None or process.poll() is not None
        if exited and not open_fds:
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if not open_fds:
            time.sleep(min(left, 0.05))
            continue
        ready, _, _ = select.select(list(open_fds), [], [], min(left, 0.2))
        for fd in ready:
            data = os.read(fd, 65536)
            if data:
                chunks[fd].append(data)
            else:
                open_fds.discard(fd)
        if not ready and exited:
            return True


def run(argv: Sequence[str], *, timeout: float, **options: Any) -> Output:
    """Start ``argv`` (:func:`popen`, output on pipes) and :func:`communicate` with it."""
    options.setdefault("stdout", subprocess.PIPE)
    options.setdefault("stderr", subprocess.PIPE)
    return communicate(popen(argv, **options), timeout)


async def start(argv: Sequence[str], **options: Any) -> asyncio.subprocess.Process:
    """``asyncio.create_subprocess_exec`` as :func:`popen` starts a child: own session, dying with this process."""
    options.setdefault("stdin", subprocess.DEVNULL)
    return await asyncio.create_subprocess_exec(*argv, start_new_session=True, preexec_fn=die_with_parent,
                                                **options)


async def finish(process: asyncio.subprocess.Process, name: str, deadline_s: float) -> tuple[bytes, bytes]:
    """``process.communicate()`` with a deadline: past it, the child's group is killed and TimeoutError says so."""
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), deadline_s)
    except TimeoutError:
        await stop_async(process)
        raise TimeoutError(f"{name} still running after {deadline_s:.0f} s (its process group was killed)") from None
    return stdout or b"", stderr or b""


async def stop_async(process: asyncio.subprocess.Process, *, grace_s: float = 0.0) -> None:
    """:func:`kill_group` for an asyncio child: a grace for it to exit when asked, then its group SIGKILLed."""
    if grace_s:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), grace_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), KILL_WAIT_S)


@atexit.register
def _kill_live() -> None:
    """At interpreter exit: whatever this process started and did not stop."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for process in live:
        if process.poll() is None:
            _kill_group(process)


# --- the session's last look -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Leftover:
    pid: int
    command: str


def leftovers(mark: str, *, exclude: set[int]) -> list[Leftover]:
    """Processes of this user whose environment carries ``RUN_MARK=mark`` (Linux /proc), but ``exclude``."""
    wanted = f"{RUN_MARK}={mark}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in exclude:
            continue
        try:
            if wanted not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        found.append(Leftover(int(entry.name), command[:200] or "?"))
    return sorted(found, key=lambda leftover: leftover.pid)


def kill(found: list[Leftover]) -> None:
    for leftover in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(leftover.pid, signal.SIGKILL)


# --- what a process left behind (Linux /proc) --------------------------------------------------------------


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (children, theirs, ...) as /proc shows them now."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children.get(child, []))
    return sorted(found)


def alive(pid: int) -> bool:
    """Running (a zombie, dead and waiting for its parent to reap it, is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def listening_ports(pids: list[int]) -> set[int]:
    """The TCP ports the processes ``pids`` listen on."""
    inodes = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
    return {port for port, inode in _listening() if inode in inodes}


def listened(port: int) -> bool:
    """Anyone on this machine listens on TCP ``port``."""
    return any(found == port for found, _ in _listening())


def _listening() -> list[tuple[int, str]]:
    """(port, socket inode) of every listening TCP socket, IPv4 and IPv6."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) > 9 and fields[3] == "0A":  # TCP_LISTEN
                    found.append((int(fields[1].rsplit(":", 1)[1], 16), fields[9]))
    return found
