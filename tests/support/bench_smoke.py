"""The benchmarks' smoke runs (``bench/bench_*.py --smoke``) in the background of the test run.

tests/conftest.py starts the runs the session selected when its first test starts, at most ``PARALLEL`` at once,
longest first, and puts their tests (tests/house/test_benchmarks.py) last: by the time those check the output, the runs
have finished beside the rest of the suite instead of one after another at its start.

With several test processes (pytest-xdist), the first process to start takes a lock in the run's shared temporary
folder and starts the runs for all of them; each finished run is written there as JSON (``SharedSmokeRuns``), and
any process's test reads its benchmark's file when it appears. The starting process waits for its runs at the end
of its session instead of killing them, since other processes' tests may still need them; a reader whose owner
died first is told so instead of waiting.

Each run is its own process group that dies with the test process (tests/support/processes.py); its output is
read with a deadline, :data:`TIMEOUT_S`, a hang guard only (smoke runs are bounded by their work, not by time), and
the whole group is killed when the run ends, so nothing a benchmark started (a turn worker, the demo's regeneration
process, Azurite) outlives it or holds its output open.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from tests.support import processes

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
SHARED = ROOT.parent / "shared"
# A hang guard only, never a measure: a smoke run is bounded by its work (a few iterations of each part), takes
# seconds on a quiet machine, and took over 180 s on a 2-core machine at load 7-15.
TIMEOUT_S = 900
PARALLEL = 2  # smoke runs at once, beside the rest of the suite: more only slows everything on a small machine
# The longest smoke runs start first, so the last to finish is not a long one started late.
SLOWEST_FIRST = ["bench_teams.py", "bench_durable.py", "bench_orchestrator.py", "bench_streaming.py",
                 "bench_fact_check.py", "bench_watches.py", "bench_demo_queries.py", "bench_escalation.py"]

Outcome = subprocess.CompletedProcess[str] | str  # the completed run, or why it did not complete


def benchmarks() -> list[str]:
    return sorted(path.name for path in BENCH.glob("bench_*.py"))


class SmokeRuns:
    """The smoke runs of ``names``, started at once in the background."""

    def __init__(self, names: list[str], publish: Path | None = None) -> None:
        self._publish = publish  # a folder each finished run is written to, for other test processes
        self._live: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()
        self._stopping = False
        self._pool = ThreadPoolExecutor(max_workers=PARALLEL, thread_name_prefix="smoke")
        order = sorted(set(names), key=lambda name: (SLOWEST_FIRST + [name]).index(name))
        self.runs: dict[str, Future[Outcome]] = {name: self._pool.submit(self._run, name) for name in order}

    def outcome(self, name: str) -> Outcome:
        return self.runs[name].result()

    def _run(self, name: str) -> Outcome:
        outcome = self._run_once(name)
        if self._publish is not None:
            _write(self._publish / f"{name}.json", outcome)
        return outcome

    def _run_once(self, name: str) -> Outcome:
        env = dict(os.environ)
        if "TIKTOKEN_CACHE_DIR" not in env and (SHARED / "tiktoken").is_dir():
            env["TIKTOKEN_CACHE_DIR"] = str(SHARED / "tiktoken")  # offline, as in conftest.py and ./run
        argv = [sys.executable, str(BENCH / name), "--smoke"]
        with self._lock:
            if self._stopping:
                return f"{name} --smoke not run: the test session stopped first"
            process = processes.popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            self._live.add(process)
        try:
            done = processes.communicate(process, TIMEOUT_S)
        finally:
            processes.kill_group(process)  # what the run started and left behind goes with it
            with self._lock:
                self._live.discard(process)
        if done.timed_out:
            return (f"{name} --smoke still running after {TIMEOUT_S} s (a hang?); its process group was killed; "
                    f"output so far:\n{done.stdout}\n{done.stderr}")
        return subprocess.CompletedProcess(argv, done.returncode, done.stdout, done.stderr)

    def stop(self, *, finish: bool = False) -> None:
        """At the session's end: runs not started are dropped, runs still going are killed (the session stopped);
        with ``finish`` (other test processes may still read them) every run is waited for instead."""
        if finish:
            self._pool.shutdown(wait=True)
            return
        with self._lock:
            self._stopping = True
            live = list(self._live)
        for process in live:
            processes.kill_group(process)
        self._pool.shutdown(wait=True, cancel_futures=True)


class SharedSmokeRuns:
    """The outcomes another test process publishes in ``folder`` (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def outcome(self, name: str) -> Outcome:
        path = self.folder / f"{name}.json"
        owner = int((self.folder / "started").read_text() or 0)
        deadline = time.monotonic() + TIMEOUT_S * len(benchmarks())  # every run, one after another, at worst
        while not path.exists():
            if time.monotonic() > deadline:
                return f"{name} --smoke: no outcome published in {path.parent} in time"
            if owner and not _alive(owner) and not path.exists():
                return f"{name} --smoke: the test process that ran the smoke runs (pid {owner}) is gone"
            time.sleep(0.2)
        return _read(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_shared(names: list[str], folder: Path) -> tuple[SmokeRuns | None, SharedSmokeRuns]:
    """Starts the runs in ``folder`` unless another test process already has; everyone reads them from there."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        started = folder / "started"
        owner = not started.exists()
        if owner:
            started.write_text(str(os.getpid()))  # readers notice when this process dies before publishing
    return (SmokeRuns(names, publish=folder) if owner else None), SharedSmokeRuns(folder)


def _write(path: Path, outcome: Outcome) -> None:
    data = (outcome if isinstance(outcome, str) else
            {"args": outcome.args, "returncode": outcome.returncode, "stdout": outcome.stdout,
             "stderr": outcome.stderr})
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(data))
    partial.replace(path)  # readers never see half a file


def _read(path: Path) -> Outcome:
    data = json.loads(path.read_text())
    if isinstance(data, str):
        return data
    return subprocess.CompletedProcess(data["args"], data["returncode"], data["stdout"], data["stderr"])
