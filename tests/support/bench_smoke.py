"""The benchmarks' smoke runs (``bench/bench_*.py --smoke``) in the background of the test run.

tests/conftest.py starts the runs the session selected when its first test starts, at most ``PARALLEL`` at once,
longest first, and puts their tests (tests/test_benchmarks.py) last: by the time those check the output, the runs
have finished beside the rest of the suite instead of one after another at its start.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
SHARED = ROOT.parent / "shared"
TIMEOUT_S = 180  # generous: a smoke run takes seconds, but the Teams one starts three Python processes
PARALLEL = 2  # smoke runs at once, beside the rest of the suite: more only slows everything on a small machine
# The longest smoke runs start first, so the last to finish is not a long one started late.
SLOWEST_FIRST = ["bench_teams.py", "bench_durable.py", "bench_orchestrator.py", "bench_streaming.py",
                 "bench_fact_check.py", "bench_watches.py", "bench_demo_queries.py", "bench_escalation.py"]

Outcome = subprocess.CompletedProcess[str] | str  # the completed run, or why it did not complete


def benchmarks() -> list[str]:
    return sorted(path.name for path in BENCH.glob("bench_*.py"))


class SmokeRuns:
    """The smoke runs of ``names``, started at once in the background."""

    def __init__(self, names: list[str]) -> None:
        self._live: set[subprocess.Popen[str]] = set()
        self._lock = threading.Lock()
        self._stopping = False
        self._pool = ThreadPoolExecutor(max_workers=PARALLEL, thread_name_prefix="smoke")
        order = sorted(set(names), key=lambda name: (SLOWEST_FIRST + [name]).index(name))
        self.runs: dict[str, Future[Outcome]] = {name: self._pool.submit(self._run, name) for name in order}

    def outcome(self, name: str) -> Outcome:
        return self.runs[name].result()

    def _run(self, name: str) -> Outcome:
        env = dict(os.environ)
        if "TIKTOKEN_CACHE_DIR" not in env and (SHARED / "tiktoken").is_dir():
            env["TIKTOKEN_CACHE_DIR"] = str(SHARED / "tiktoken")  # offline, as in conftest.py and ./run
        argv = [sys.executable, str(BENCH / name), "--smoke"]
        with self._lock:
            if self._stopping:
                return f"{name} --smoke not run: the test session stopped first"
            process = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)
            self._live.add(process)
        try:
            stdout, stderr = process.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
            return f"{name} --smoke took over {TIMEOUT_S} s; output so far:\n{stdout}\n{stderr}"
        finally:
            with self._lock:
                self._live.discard(process)
        return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)

    def stop(self) -> None:
        """At the session's end: runs not started are dropped, runs still going are killed (the session stopped)."""
        with self._lock:
            self._stopping = True
            for process in self._live:
                process.kill()
        self._pool.shutdown(wait=True, cancel_futures=True)
