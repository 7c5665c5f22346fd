"""Runs KQL through Microsoft's Kusto parser (tests/kql/kusto_check.js): one Node process for the whole test run.

The parser takes about three seconds to load, so the process is started on first use and kept: each ``check``
writes its queries, one JSON line each, and reads one answer line per query (the script answers line by line).
It stops when the test run ends.
"""

from __future__ import annotations

import atexit
import json
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

from tests.support.tooling import require_tool

KQL_DIR = Path(__file__).resolve().parent.parent / "kql"
SCHEMA = Path(__file__).resolve().parents[2] / "bot" / "sentinel" / "tables.json"
FUNCTIONS = KQL_DIR / "functions.json"  # workspace functions (Sentinel's _GetWatchlist) with their result columns
ANSWER_TIMEOUT_S = 300  # for a whole batch, as when each batch had its own process

_process: subprocess.Popen[str] | None = None
_stderr: IO[str] | None = None  # what the parser says when it fails (a file: a full pipe would stall it)
_lock = threading.Lock()


def require_parser() -> None:
    require_tool("Kusto parser", KQL_DIR / "node_modules" / "@kusto" / "language-service-next",
                 "npm ci --prefix tests/kql")


def check(queries: list[str]) -> list[dict[str, Any]]:
    """One result per query: ok, errors, result_columns, string_literals (see kusto_check.js)."""
    require_parser()
    with _lock:
        process = _running()
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("".join(json.dumps({"id": i, "query": q}) + "\n" for i, q in enumerate(queries)))
        process.stdin.flush()
        timer = threading.Timer(ANSWER_TIMEOUT_S, process.kill)  # a stalled parser fails the test, not the run
        timer.start()
        try:
            results = [_answer(process, process.stdout) for _ in queries]
        finally:
            timer.cancel()
    assert [r["id"] for r in results] == list(range(len(queries)))
    return results


def _running() -> subprocess.Popen[str]:
    """The parser process, started on first use (and again if it died)."""
    global _process, _stderr
    if _process is None or _process.poll() is not None:
        _stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115 - open as long as the process runs
        _process = subprocess.Popen(
            ["node", str(KQL_DIR / "kusto_check.js"), "--schema", str(SCHEMA), "--functions", str(FUNCTIONS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=_stderr, text=True, bufsize=1)
    return _process


def _answer(process: subprocess.Popen[str], stdout: IO[str]) -> dict[str, Any]:
    """The next answer line; a parser that exited fails the test with what it said."""
    line = stdout.readline()
    if not line:
        said = _said()
        _stop()
        raise AssertionError(f"kusto_check failed to run (exit {process.poll()}): {said[-2000:]}")
    return json.loads(line)


def _said() -> str:
    if _stderr is None:
        return ""
    _stderr.seek(0)
    return _stderr.read()


@atexit.register
def _stop() -> None:
    global _process, _stderr
    process, _process = _process, None
    said, _stderr = _stderr, None
    if said is not None:
        said.close()
    if process is None:
        return
    if process.stdin is not None:
        process.stdin.close()  # end of input: the script exits
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
