"""The README's first command, ./run: it refuses a busy port, the Playground it starts listens on loopback, and the bot
commands install only the packages the bot runs with."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK_JS = ROOT / "tests" / "e2e" / "loopback.js"


def test_a_busy_port_is_reported_not_reused() -> None:
    if shutil.which("npm") is None or not (ROOT / "tests" / "e2e" / "node_modules").is_dir():
        pytest.fail("./run needs npm and the Playground (npm ci --prefix tests/e2e; ./run tests installs it)")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "PORT": str(port), "PLAYGROUND_PORT": str(port + 1 if port < 65535 else port - 1)}
        done = subprocess.run(["bash", str(ROOT / "run")], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr
    assert f"Port {port} on 127.0.0.1 is already in use" in done.stderr
    assert "unbound variable" not in done.stderr


@pytest.mark.parametrize("call", ["server.listen(0, done)", "server.listen({port: 0}, done)",
                                  "server.listen(0, 511, done)"])
def test_the_playground_preload_keeps_servers_on_loopback(call: str) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is needed for the Agents Playground")
    script = ("const net = require('net'); const server = net.createServer();"
              "const done = () => { console.log(server.address().address); server.close(); };" + call)
    plain = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=30)
    preloaded = subprocess.run([node, "-r", str(LOOPBACK_JS), "-e", script], capture_output=True, text=True,
                               timeout=30)
    assert plain.returncode == 0 and preloaded.returncode == 0, (plain.stderr, preloaded.stderr)
    assert plain.stdout.strip() in ("::", "0.0.0.0"), "without the preload node listens on every interface"
    assert preloaded.stdout.strip() == "127.0.0.1"


def test_an_explicit_host_is_left_alone() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is needed for the Agents Playground")
    script = ("const s = require('net').createServer();"
              "s.listen(0, '::1', () => { console.log(s.address().address); s.close(); });")
    done = subprocess.run([node, "-r", str(LOOPBACK_JS), "-e", script], capture_output=True, text=True, timeout=30)
    if done.returncode != 0 and "EADDRNOTAVAIL" in done.stderr:
        pytest.skip("no IPv6 loopback on this machine")
    assert done.stdout.strip() == "::1"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGTERM to ./run", "Ctrl+C"])
def test_run_stops_the_bot_and_the_playground_on_sigterm_as_on_ctrl_c(how: str) -> None:
    """kill <pid of ./run> stops everything at once, as Ctrl+C (SIGINT to the terminal's process group) does:
    both ports are free and nothing is left running when ./run has returned, with no traceback."""
    import signal
    import time

    if shutil.which("npm") is None or not (ROOT / "tests" / "e2e" / "node_modules").is_dir():
        pytest.fail("./run needs npm and the Playground (npm ci --prefix tests/e2e; ./run tests installs it)")
    port, page_port = _free_port(), _free_port()
    env = {**os.environ, "PORT": str(port), "PLAYGROUND_PORT": str(page_port)}
    run = subprocess.Popen(["bash", str(ROOT / "run")], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while not (_listening(port) and _listening(page_port)):
            assert run.poll() is None and time.monotonic() < deadline, "./run did not start both"
            time.sleep(0.5)
        if how == "Ctrl+C":
            os.killpg(run.pid, signal.SIGINT)
        else:
            run.send_signal(signal.SIGTERM)
        output, _ = run.communicate(timeout=20)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    assert run.returncode == (143 if how == "SIGTERM to ./run" else 130), output[-2000:]
    assert not _listening(port) and not _listening(page_port), "both ports are free"
    assert "Traceback" not in output, output[-2000:]


def test_help_lists_the_commands() -> None:
    for flag in ("--help", "-h", "help"):
        done = subprocess.run(["bash", str(ROOT / "run"), flag], cwd=ROOT, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0 and "Usage: ./run" in done.stdout, done.stderr
        for command in ("chat", "serve", "new-incident", "tests", "bench", "kql", "package"):
            assert f"\n  {command}" in done.stdout, command
    wrong = subprocess.run(["bash", str(ROOT / "run"), "bogus"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert wrong.returncode == 2 and 'unknown command "bogus"' in wrong.stderr and "Usage: ./run" in wrong.stderr


def _fake_python(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of ./run and requirements.txt beside a python3 that makes a fake venv whose python logs each call
    (and the requirements file pip is given), so the setup steps show without installing anything."""
    work = tmp_path / "clone"
    work.mkdir()
    shutil.copy(ROOT / "run", work / "run")
    shutil.copy(ROOT / "requirements.txt", work / "requirements.txt")
    tools = tmp_path / "bin"
    tools.mkdir()
    log = tmp_path / "calls.log"
    venv_python = f"""#!/usr/bin/env bash
echo "$*" >> {log}
for a in "$@"; do [ "$prev" = -r ] && cp "$a" {tmp_path}/installed-$(date +%s%N).txt; prev="$a"; done
"""
    fake = f"""#!/usr/bin/env bash
[ "$1 $2" = "-m venv" ] || exit 3
mkdir -p "$3/bin" && cat > "$3/bin/python" <<'PY'
{venv_python}PY
chmod +x "$3/bin/python"
"""
    (tools / "python3").write_text(fake)
    (tools / "python3").chmod(0o755)
    env = {"PATH": f"{tools}:/usr/bin:/bin", "HOME": str(tmp_path)}
    return work, env


def test_the_bot_commands_install_only_the_runtime_packages_and_tests_the_rest(tmp_path: Path) -> None:
    """./run serve (like ./run, chat, kql, package, new-incident) installs requirements.txt's Runtime section alone,
    without compiling every module; ./run python installs the whole file, after which nothing is installed again."""
    work, env = _fake_python(tmp_path)
    log = tmp_path / "calls.log"
    served = subprocess.run(["bash", "run", "serve"], cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert served.returncode == 0, served.stderr
    calls = log.read_text().splitlines()
    assert calls[0].startswith("-m pip install") and "--no-compile" in calls[0] and calls[1] == "-m bot serve", calls
    (installed,) = sorted(tmp_path.glob("installed-*.txt"))
    pins = {line.split("==")[0] for line in installed.read_text().splitlines() if "==" in line}
    assert {"aiohttp", "botbuilder-core", "openai"} <= pins and not pins & {"pytest", "mypy", "ruff", "jsonschema"}
    subprocess.run(["bash", "run", "serve"], cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert log.read_text().splitlines()[2:] == ["-m bot serve"], "the runtime part is installed once"
    subprocess.run(["bash", "run", "python", "-V"], cwd=work, env=env, capture_output=True, text=True, timeout=60)
    everything = log.read_text().splitlines()[3:]
    assert everything[0] == "-m pip install --disable-pip-version-check --no-compile -q -r requirements.txt"
    assert everything[1:] == ["-V"]
    subprocess.run(["bash", "run", "serve"], cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert log.read_text().splitlines()[5:] == ["-m bot serve"], "after the whole file, the runtime part is in too"
