"""Runs KQL through Microsoft's Kusto parser (tests/kql/kusto_check.js): Node processes kept for the whole test run.

The parser takes about three seconds to load, so its processes are started on first use and kept: each ``check``
writes its queries, one JSON line each (from a thread, so a big batch never stalls on a full pipe), and reads one
answer line per query (the script answers line by line). A batch can be split between ``PROCESSES`` of them; they
stop when the test run ends.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from tests.support import processes
from tests.support.tooling import require_tool

KQL_DIR = Path(__file__).resolve().parent.parent / "kql"
SCHEMA = Path(__file__).resolve().parents[2] / "bot" / "sentinel" / "tables.json"
FUNCTIONS = KQL_DIR / "functions.json"  # workspace functions (Sentinel's _GetWatchlist) with their result columns
ANSWER_TIMEOUT_S = 300  # for a whole batch, as when each batch had its own process
# One: two (a batch split between them) measured slower on a busy 2-core machine (test_kql_parser 27 s -> 33 s).
PROCESSES = 1


def require_parser() -> None:
    require_tool("Kusto parser", KQL_DIR / "node_modules" / "@kusto" / "language-service-next",
                 "npm ci --prefix tests/kql")


def check(queries: list[str]) -> list[dict[str, Any]]:
    """One result per query: ok, errors, result_columns, string_literals (see kusto_check.js)."""
    require_parser()
    with _lock:
        results = _check([{"id": i, "query": q} for i, q in enumerate(queries)])
    assert [r["id"] for r in results] == list(range(len(queries)))
    return results


class _Parser:
    """One kusto_check.js process; what it says on stderr goes to a file (a full pipe would stall it)."""

    def __init__(self) -> None:
        self.stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115 - open as long as the process runs
        self.process = processes.popen(  # its own group, dying with this process
            ["node", str(KQL_DIR / "kusto_check.js"), "--schema", str(SCHEMA), "--functions", str(FUNCTIONS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True, bufsize=1)

    def send(self, requests: list[dict[str, Any]]) -> threading.Thread:
        """Writes the requests from a thread, so that reading the answers meanwhile never deadlocks on a full pipe."""
        lines = "".join(json.dumps(request) + "\n" for request in requests)

        def write() -> None:
            assert self.process.stdin is not None
            try:
                self.process.stdin.write(lines)
                self.process.stdin.flush()
            except (BrokenPipeError, ValueError):
                pass  # it died: reading its answers says so

        writer = threading.Thread(target=write, name="kusto-write", daemon=True)
        writer.start()
        return writer

    def answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.stderr.seek(0)
            said = self.stderr.read()
            raise AssertionError(f"kusto_check failed to run (exit {self.process.poll()}): {said[-2000:]}")
        return json.loads(line)

    def stop(self) -> None:
        if self.process.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self.process.stdin.close()  # end of input: the script exits
        processes.kill_group(self.process, grace_s=10)
        self.stderr.close()


_parsers: list[_Parser] = []
_lock = threading.Lock()


def _check(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    parsers = _running()
    size = -(-len(requests) // len(parsers))  # contiguous shares, answers read back in order
    shares = [(parser, requests[n * size:(n + 1) * size]) for n, parser in enumerate(parsers)]
    writers = [parser.send(share) for parser, share in shares if share]
    timer = threading.Timer(ANSWER_TIMEOUT_S, _kill)  # a stalled parser fails the test, not the run
    timer.start()
    try:
        return [parser.answer() for parser, share in shares for _ in share]
    except BaseException:
        stop()  # a failed or interrupted batch leaves answers unread: start afresh next time
        raise
    finally:
        timer.cancel()
        for writer in writers:
            writer.join(timeout=10)


def _running() -> list[_Parser]:
    """The parser processes, started on first use (all again if one died)."""
    if len(_parsers) != PROCESSES or any(parser.process.poll() is not None for parser in _parsers):
        stop()
        _parsers.extend(_Parser() for _ in range(PROCESSES))
    return _parsers


def _kill() -> None:
    for parser in list(_parsers):
        processes.kill_group(parser.process)


@atexit.register
def stop() -> None:
    """The parser processes end (tests/conftest.py calls this as the test process's session ends)."""
    while _parsers:
        _parsers.pop().stop()
