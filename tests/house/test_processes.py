"""Nothing a test, a benchmark or the bot starts outlives its parent, and no harness wait is without a bound
(tests/support/processes.py, bot/lifetime.py).

A child whose grandchild left its group and holds its output pipe is still read to its end; a hung child is killed
with its whole group at the deadline; the demo's regeneration process dies with the bot that started it; a
benchmark killed with SIGKILL mid-run (bench_durable, which starts Azurite, two ``bot serve`` and their ``bot worker``
processes) leaves no process running and no port listening; the run's last look finds what carries its mark.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.support import processes

ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 120.0  # how long a test waits for what it expects before it fails: a hang guard, never a measure

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)")


def _until(condition: object, what: str) -> None:
    """Wait for ``condition()`` (an event: a process gone, a line written), failing after the hang guard."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"still waiting after {HANG_GUARD_S:.0f} s: {what}"
        time.sleep(0.05)


def _command(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:  # gone meanwhile
        return []


def _python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code), *args]


def test_output_is_read_to_the_end_though_a_grandchild_that_left_the_group_holds_the_pipe() -> None:
    parent = _python("""
        import subprocess, sys
        holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
        print(holder.pid, flush=True)
        print("done", file=sys.stderr)
    """)
    done = processes.run(parent, timeout=HANG_GUARD_S)
    holder = int(done.stdout.split()[0])
    try:
        assert done.returncode == 0 and done.stderr == "done\n"
        assert processes.alive(holder)  # still holding the pipe: it was not waited for
    finally:
        os.kill(holder, signal.SIGKILL)


def test_a_hung_child_is_killed_with_its_group_at_the_deadline() -> None:
    hung = processes.popen(_python("""
        import subprocess, sys, time
        member = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        print(member.pid, flush=True)
        time.sleep(600)
    """), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    done = processes.communicate(hung, 3.0)  # the deadline a harness gives; the child never ends on its own
    member = int(done.stdout.split()[0])
    assert done.timed_out and hung.returncode == -signal.SIGKILL
    _until(lambda: not processes.alive(member), f"the group's other member {member} gone")


@pytest.mark.slow
def test_the_demo_regeneration_process_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    """The demo backend's pool, as it starts it (spawn, regeneration_worker with the parent's pid), in a parent
    then killed with SIGKILL while the worker is busy: the worker goes too, and holds no pipe open."""
    parent = processes.popen(_python("""
        import multiprocessing, os, sys, time
        from concurrent.futures import ProcessPoolExecutor
        from bot.demo.backend import regeneration_worker
        if __name__ == "__main__":
            with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                     initializer=regeneration_worker, initargs=(os.getpid(),)) as pool:
                print(pool.submit(os.getpid).result(), flush=True)
                pool.submit(time.sleep, 600)
                time.sleep(600)
    """), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    assert worker in processes.descendants(parent.pid)
    os.kill(parent.pid, signal.SIGKILL)  # the parent alone, not its group
    parent.wait()
    _until(lambda: not processes.alive(worker), f"the regeneration worker {worker} gone")
    for pipe in (parent.stdout, parent.stderr):  # at their end: no process of the pool holds them any more
        reader = threading.Thread(target=pipe.read, daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(HANG_GUARD_S)
        assert not reader.is_alive(), "a process of the pool still holds the parent's output open"


@pytest.mark.slow
def test_a_benchmark_killed_mid_run_leaves_no_process_and_no_port(tmp_path: Path) -> None:
    """bench_durable --smoke, killed with SIGKILL once both of its bots listen: its Azurite, ``bot serve`` and
    ``bot worker`` processes all end, and no port they listened on is still listened on."""
    # A mark of its own: everything the benchmark starts carries it, so what is left is found by the mark, not by a
    # port another test of this run may have been given since.
    mark = "bench-" + os.urandom(4).hex()
    bench = processes.popen([sys.executable, str(ROOT / "bench" / "bench_durable.py"), "--smoke"], cwd=ROOT,
                            stdout=(tmp_path / "bench.log").open("wb"), stderr=subprocess.STDOUT,
                            env={**os.environ, processes.RUN_MARK: mark})
    seen: list[int] = []

    def both_bots_listen() -> bool:
        assert bench.poll() is None, (tmp_path / "bench.log").read_text()[-3000:]
        seen[:] = processes.descendants(bench.pid)
        serving = [pid for pid in seen if b"serve" in _command(pid)]
        return len(serving) == 2 and len(processes.listening_ports(serving)) == 2

    try:
        _until(both_bots_listen, "bench_durable's two bots listening")
        ports = processes.listening_ports(seen)
        os.kill(bench.pid, signal.SIGKILL)  # the benchmark alone: what it started must follow by itself
        bench.wait()
        _until(lambda: not [pid for pid in seen if processes.alive(pid)],
               f"the benchmark's processes gone: {[pid for pid in seen if processes.alive(pid)]}")
        assert len(seen) >= 4 and len(ports) >= 4, (seen, ports)  # Azurite (3 ports), 2 serve, their workers
        left = processes.leftovers(mark, exclude=set())
        assert left == [], left  # also what it started after the last look at its descendants
        assert processes.listening_ports([found.pid for found in left]) == set()  # so none of its ports is held
    finally:
        processes.kill_group(bench)
        processes.kill([processes.Leftover(pid, "") for pid in seen if processes.alive(pid)])


def test_the_runs_last_look_finds_what_carries_its_mark() -> None:
    mark = "test-" + os.urandom(4).hex()
    marked = processes.popen(_python("import time; time.sleep(600)"),
                             env={**os.environ, processes.RUN_MARK: mark})
    unmarked = processes.popen(_python("import time; time.sleep(600)"))
    try:
        _until(lambda: [found.pid for found in processes.leftovers(mark, exclude=set())] == [marked.pid],
               "the marked process found, and it alone")
        processes.kill(processes.leftovers(mark, exclude=set()))
        marked.wait(timeout=HANG_GUARD_S)
        assert marked.returncode == -signal.SIGKILL and unmarked.poll() is None
    finally:
        processes.kill_group(marked)
        processes.kill_group(unmarked)
