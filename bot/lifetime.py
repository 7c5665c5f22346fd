"""A child process dies with the process that started it, however that one ends (SIGKILL included).

Linux: the kernel's parent-death signal, which the child asks for itself (``prctl(PR_SET_PDEATHSIG)``), then checks
once that its parent is still the one that started it (it may have died before the call). The kernel sends the
signal when the *thread* that started the child ends, not only the process: a child (or a process pool) must be
started by a thread that outlives it, as the demo's regeneration does (its thread starts the pool, waits for the
day's build and closes the pool). Elsewhere: a daemon thread looks at the parent once a second and sends the signal.

Used by the turn workers ``python -m bot serve`` starts (bot/turns/supervisor.py) and by the demo's regeneration
process; the tests start their own children the same way (tests/support/processes.py). Depends on no other bot
module.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # linux/prctl.h
PARENT_LOOK_S = 1.0  # how often the watching thread looks, where the kernel cannot tell

try:  # resolved once, here: a child between fork and exec only makes the call
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
except (OSError, AttributeError):
    _PRCTL = None


def parent_death_signal(signum: int) -> bool:
    """Ask the kernel for ``signum`` when this process's parent (thread) ends; False where that cannot be asked.
    Safe between fork and exec (``preexec_fn``): nothing is imported or looked up."""
    if _PRCTL is None:
        return False
    with contextlib.suppress(Exception):
        return bool(_PRCTL(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0)
    return False


def die_with_parent(parent: int, signum: int = signal.SIGKILL, *, watch: bool = True) -> bool:
    """Have ``signum`` end this process once ``parent`` (the pid that started it) is gone: the kernel's signal, or
    (``watch``, where there is none) a thread that looks once a second. False when the parent is already gone."""
    if not parent_death_signal(signum) and watch:
        threading.Thread(target=_watch, args=(parent, signum), name="parent-watch", daemon=True).start()
    return os.getppid() == parent


def _watch(parent: int, signum: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_LOOK_S)
    os.kill(os.getpid(), signum)
